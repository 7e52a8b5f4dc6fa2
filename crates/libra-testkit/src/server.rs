//! A real `libra-server` in the test's own process (on a runtime of its own, loopback, a
//! throwaway store), for the server crate's tests that speak HTTP to it.

use libra_api::{Client, RegisterRequest, RegisterResponse, UserAdd};
use libra_core::Money;
use libra_server::{start_background, Background, Config};
use std::path::Path;

/// The join token of every [`test_config`] server.
pub const TEST_JOIN: &str = "join-token-for-tests";
/// The administrator's password of every [`test_config`] server.
pub const TEST_ADMIN_PW: &str = "admin-pw";

/// A server for a test: loopback on a free port, its store in `dir`, an administrator with a
/// known password, no fsync (the tests' stores are thrown away).
pub fn test_config(dir: &Path) -> Config {
    Config {
        listen: "127.0.0.1:0".into(),
        db: dir.join("server.db"),
        join_token: TEST_JOIN.into(),
        admin_password: Some(TEST_ADMIN_PW.into()),
        sync_full: false,
        ..Config::default()
    }
}

/// A running in-process server with its store in a temporary directory (both go when dropped).
pub struct TestServer {
    pub bg: Background,
    pub dir: tempfile::TempDir,
    pub url: String,
}

impl TestServer {
    /// A server with [`test_config`].
    pub fn start() -> TestServer {
        TestServer::start_with(|_| {})
    }

    /// A server with [`test_config`] changed by `tweak` first.
    pub fn start_with(tweak: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        tweak(&mut config);
        let bg = start_background(config).unwrap();
        let url = format!("http://{}", bg.addr);
        TestServer { bg, dir, url }
    }

    /// `user` logged in with `pw`.
    pub fn login(&self, user: &str, pw: &str) -> Client {
        Client::new(&self.url, Some(Client::new(&self.url, None).login(user, pw).unwrap().token))
    }

    pub fn admin(&self) -> Client {
        self.login("admin", TEST_ADMIN_PW)
    }

    /// A new user `name` (password `pw-NAME`) with `credits` credits, logged in.
    pub fn user(&self, name: &str, credits: i64) -> Client {
        let admin = self.admin();
        admin.user_add(&UserAdd::new(name, &format!("pw-{name}"), false)).unwrap();
        if credits != 0 {
            admin.credit(name, Money::from_credits(credits)).unwrap();
        }
        self.login(name, &format!("pw-{name}"))
    }

    /// Registers a node `name` of `cpus` CPUs that never runs anything: accepted jobs stay
    /// active. Returns the server's answer (the node's credential).
    pub fn idle_node(&self, name: &str, cpus: f64) -> RegisterResponse {
        Client::new(&self.url, Some(TEST_JOIN.into()))
            .register(&RegisterRequest {
                name: name.into(),
                cpus,
                mem_mb: 0,
                mechanism: "none".into(),
                account: String::new(),
                switches_users: false,
            })
            .unwrap()
    }

    /// A second connection to the server's store, to check what it recorded.
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("server.db")).unwrap()
    }
}
