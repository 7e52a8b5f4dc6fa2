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

impl Drop for Account {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}
