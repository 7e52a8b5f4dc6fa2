//! libra-server
