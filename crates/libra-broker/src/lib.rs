//! libra-broker
