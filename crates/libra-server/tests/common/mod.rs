//! What the server's integration tests share: one way to configure a throwaway server.

use libra_server::Config;
use std::path::Path;

/// A server for a test: loopback on a free port, its store in `dir`, an administrator with a
/// known password, no fsync (the tests' stores are thrown away).
pub fn test_config(dir: &Path) -> Config {
    Config {
        listen: "127.0.0.1:0".into(),
        db: dir.join("server.db"),
        join_token: "join-token-for-tests".into(),
        admin_password: Some("admin-pw".into()),
        sync_full: false,
        ..Config::default()
    }
}
