//! libra-api
