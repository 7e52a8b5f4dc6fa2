//! libra-node
