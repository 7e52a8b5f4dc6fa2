//! libra-portal
