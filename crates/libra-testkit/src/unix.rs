//! Unix accounts for tests: the account running the tests, and accounts made for one test.

use libra_api::UserAdd;
use std::process::Command;

/// A user whose jobs run as the account running the tests (root in CI: allowed explicitly, as
/// an administrator would).
pub fn as_me(name: &str, password: &str) -> UserAdd {
    let me = libra_node::proc::Identity::current();
    UserAdd {
        unix_user: me.as_ref().map(|i| i.user.clone()),
        allow_root: me.is_some_and(|i| i.uid == 0),
        ..UserAdd::new(name, password, false)
    }
}

/// A Unix account made for a test, removed when dropped.
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl Account {
    pub fn create(name: &str) -> Option<Account> {
        let made = Command::new("useradd").args(["--no-create-home", "--shell", "/bin/sh", name]).status();
        if !made.is_ok_and(|s| s.success()) {
            return None;
        }
        let id = libra_node::proc::Identity::lookup(name).ok().flatten()?;
        Some(Account { name: name.into(), uid: id.uid, gid: id.gid })
    }
}

/// The live processes (and zombies) whose real user id is `uid`: what the kernel counts against
/// that account's `RLIMIT_NPROC`.
pub fn processes_of_uid(uid: u32) -> usize {
    let real_uid = |pid: &str| -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("Uid:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.parse::<u32>().is_ok() && real_uid(n) == Some(uid))
        .count()
}

impl Drop for Account {
    fn drop(&mut self) {
        // Not while a process of the account lives (killed a moment ago, not yet gone): userdel
        // would refuse and leave the account, and a removed account's id goes to the next one
        // made, which would count the old processes as its own.
        let t0 = std::time::Instant::now();
        while processes_of_uid(self.uid) > 0 && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}
