//! libra-core
