//! What Libra's integration tests share, in one place instead of a copy per test file: a real
//! cluster of `libra server` and `libra node` processes on loopback ([`Cluster`]), an in-process
//! server for the server crate's tests ([`TestServer`]), a real two-node Slurm ([`slurm`]), Unix
//! accounts made for a test ([`Account`]), finding and stopping the processes a test started,
//! reading a child's output as it comes ([`Lines`]), a proxy that loses an answer or acts just
//! before a request arrives ([`FaultyProxy`]), and waiting on a condition with a deadline
//! instead of a fixed sleep ([`wait_until`]).
//!
//! Every item is re-exported at the top, so a test file can `use libra_testkit::*` (the `libra`
//! crate's tests reach it as `common::...` through a one-line module).

pub mod cluster;
pub mod disk;
pub mod lines;
pub mod peers;
pub mod procs;
pub mod proxy;
pub mod scratch;
pub mod server;
pub mod slurm;
pub mod unix;
pub mod wait;

pub use cluster::*;
pub use disk::*;
pub use lines::*;
pub use peers::*;
pub use procs::*;
pub use proxy::*;
pub use scratch::*;
pub use server::*;
pub use unix::*;
pub use wait::*;

/// A TCP port free on loopback at the time of asking (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Takes out of `cmd`'s environment what `cargo test` sets for a test (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, `CARGO_BIN_EXE_*`, ...), so that a command run as a user would type it (the
/// README's, a build script of the repository's) sees the environment of a user's shell. It
/// matters beyond manners: a build script that asks cargo to rebuild when such a variable
/// changes (ring's, for `CARGO_MANIFEST_DIR`) made every `cargo build` run from a test rebuild
/// what the same command in a shell had built, and the other way round: minutes each time on a
/// small machine. Cargo's own settings (`CARGO_HOME`, `CARGO_TARGET_DIR`, ...) stay.
pub fn as_from_a_shell(cmd: &mut std::process::Command) -> &mut std::process::Command {
    const SET_BY_CARGO_TEST: [&str; 7] = [
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    const PREFIXES: [&str; 3] = ["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_BIN_NAME"];
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        if SET_BY_CARGO_TEST.contains(&k) || PREFIXES.iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::as_from_a_shell;

    /// What `cargo test` set for this test is gone from the child; what a user sets stays.
    #[test]
    fn a_command_from_a_shell_sees_no_variable_cargo_test_set() {
        for set in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME"] {
            assert!(std::env::var_os(set).is_some(), "cargo test sets {set} for a test");
        }
        let out = as_from_a_shell(std::process::Command::new("env").env("CARGO_HOME_TEST_MARK", "kept"))
            .output()
            .unwrap();
        assert!(out.status.success());
        let env = String::from_utf8(out.stdout).unwrap();
        let names: Vec<&str> = env.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
        for gone in ["CARGO", "CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO_PKG_VERSION", "CARGO_CRATE_NAME"]
        {
            assert!(!names.contains(&gone), "{gone} reached the child:\n{env}");
        }
        assert!(names.contains(&"CARGO_HOME_TEST_MARK") && names.contains(&"PATH"), "{env}");
    }
}
