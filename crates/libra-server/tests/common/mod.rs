//! The server's integration tests share the workspace's `libra-testkit` (one throwaway server
//! configuration, an in-process server with users and an idle node).

pub use libra_testkit::server::*;
