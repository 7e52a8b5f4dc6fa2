//! libra-sim
