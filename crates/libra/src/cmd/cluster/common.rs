//! What the cluster commands share: how to reach the server and who the caller is, durations
//! and times (printing is `crate::output`'s).

use anyhow::{bail, Context, Result};
use clap::Args;
use libra_api::Client;
use libra_core::Money;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use crate::cmd::time::{fmt_dur, fmt_opt_time, fmt_time, now, parse_deadline, parse_duration};

/// How to reach the server; by default the last `libra login`.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// Server URL, e.g. https://manager:7878 or http://127.0.0.1:7878 (default: the one from
    /// `libra login`).
    #[arg(long, env = "LIBRA_SERVER", global = true)]
    pub server: Option<String>,
    /// A PEM file with the certificate (or CA) to check the server's TLS certificate against
    /// (default: the one given to `libra login`, else the public roots).
    #[arg(long, env = "LIBRA_CA", value_name = "FILE", global = true)]
    pub ca: Option<PathBuf>,
    /// Allow plain http to a server that is not on this machine.
    #[arg(long, global = true)]
    pub insecure_http: bool,
    /// Refused: a token on the command line is readable by every user of the machine.
    #[arg(long, hide = true, global = true)]
    pub token: Option<String>,
    /// A file holding the API token (default: LIBRA_TOKEN, else the one saved by `libra login`).
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// What `libra login` saves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    pub server: String,
    pub user: String,
    pub token: String,
    /// The certificate the server's is checked against (`libra login --ca`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_http: bool,
    /// The Unix account (user id) that ran the server when this login was made, for a server on
    /// this machine's loopback (`check_server_owner`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_uid: Option<u32>,
}

pub use libra_api::local::loopback_server_owner;

/// Any local account may listen on a loopback port while the server that uses it is down, and
/// would then be sent whatever the next command sends: a password, a token. So a command refuses
/// a loopback server run by another account than the one that ran it at `libra login`
/// (`recorded`), before it sends anything.
pub fn check_server_owner(server: &str, recorded: Option<u32>) -> Result<()> {
    let (Some(want), Some(now)) = (recorded, loopback_server_owner(server)) else { return Ok(()) };
    if want != now {
        bail!(
            "server: {server} is run by the Unix account with uid {now}, not by uid {want} as when you logged in: \
             another account may have taken its port while the server was down, so nothing was sent to it. \
             If the server's account changed on purpose, remove {} and log in again",
            login_path().map(|p| p.display().to_string()).unwrap_or_else(|_| "your saved login".into())
        );
    }
    Ok(())
}

pub fn config_dir() -> Result<PathBuf> {
    if let Ok(d) = std::env::var("LIBRA_CONFIG_DIR") {
        return Ok(PathBuf::from(d));
    }
    Ok(dirs::config_dir()
        .context("no configuration directory for this user (set LIBRA_CONFIG_DIR)")?
        .join("libra"))
}

pub fn data_dir() -> Result<PathBuf> {
    if let Ok(d) = std::env::var("LIBRA_DATA_DIR") {
        return Ok(PathBuf::from(d));
    }
    Ok(dirs::data_dir().context("no data directory for this user (set LIBRA_DATA_DIR)")?.join("libra"))
}

pub fn login_path() -> Result<PathBuf> {
    Ok(config_dir()?.join("login.json"))
}

pub fn saved_login() -> Option<Login> {
    let text = std::fs::read_to_string(login_path().ok()?).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn save_login(l: &Login) -> Result<()> {
    let path = login_path()?;
    if let Some(dir) = path.parent() {
        // A directory made here for the login is its owner's only (one that exists is left as
        // it is: it may be shared configuration).
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    write_secret(&path, serde_json::to_string_pretty(l)?.as_bytes())
}

/// Writes a file holding a secret: created 0600 (never readable by others, not even for a
/// moment) and replaced whole.
pub fn write_secret(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let tmp = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes).with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

impl Conn {
    pub fn server_url(&self) -> Result<String> {
        match (&self.server, saved_login()) {
            (Some(s), _) => Ok(s.clone()),
            (None, Some(l)) => Ok(l.server),
            (None, None) => {
                bail!("no server: run `libra login --server URL --user NAME` first, or give --server")
            }
        }
    }

    /// A client with the caller's token.
    pub fn client(&self) -> Result<Client> {
        let server = self.server_url()?;
        // The saved login's TLS settings go with its server.
        let saved = saved_login()
            .filter(|l| self.server.is_none() || self.server.as_deref() == Some(l.server.as_str()));
        let given = SecretSource {
            what: "the API token",
            file_flag: "--token-file",
            env: "LIBRA_TOKEN",
            value_flag: "--token",
        }
        .read(self.token.as_deref(), self.token_file.as_deref())?;
        let token = match (&given, &saved) {
            (Some(t), _) => t.clone(),
            (None, Some(l)) => l.token.clone(),
            (None, None) => {
                bail!("not logged in to {server}: run `libra login --server {server} --user NAME`")
            }
        };
        if let Some(l) = saved.as_ref().filter(|l| l.server == server) {
            check_server_owner(&server, l.server_uid)?;
        }
        let ca = self.ca.clone().or_else(|| saved.as_ref().and_then(|l| l.ca.clone()));
        let insecure = self.insecure_http || saved.as_ref().is_some_and(|l| l.insecure_http);
        Ok(Client::connect(&server, Some(token), ca.as_deref(), insecure)?)
    }
}

pub fn money(m: Money) -> String {
    m.to_string()
}

/// Where a secret may come from: a file or the environment, never the command line (any user
/// of the machine reads every process's arguments in /proc/PID/cmdline, and `ps` shows them).
pub struct SecretSource<'a> {
    /// What it is, for messages ("the join token").
    pub what: &'a str,
    /// The flag that names a file holding it (`--join-token-file`).
    pub file_flag: &'a str,
    /// The environment variable that may hold it.
    pub env: &'a str,
    /// The flag that used to take the value itself: given, it is refused.
    pub value_flag: &'a str,
}

impl SecretSource<'_> {
    /// The secret from `file` (its content, surrounding white space removed) or the environment
    /// variable; `given` (the old flag's value) is refused with the safe ways named.
    pub fn read(&self, given: Option<&str>, file: Option<&std::path::Path>) -> Result<Option<String>> {
        if given.is_some() {
            bail!(
                "{}: {} on the command line is not accepted (every user of the machine can read a process's arguments): \
                 give {} FILE (a file readable only by you, mode 0600) or set {}",
                self.value_flag,
                self.what,
                self.file_flag,
                self.env
            );
        }
        if let Some(f) = file {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("{}: reading {} from {}", self.file_flag, self.what, f.display()))?;
            let t = text.trim();
            if t.is_empty() {
                bail!("{}: {} is empty: it should hold {}", self.file_flag, f.display(), self.what);
            }
            return Ok(Some(t.to_string()));
        }
        Ok(std::env::var(self.env).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()))
    }
}

/// Reads a password from `--password-file`, `LIBRA_PASSWORD`, or a line of standard input
/// (`--password VALUE`, on the command line, is refused).
pub fn read_password(given: Option<String>, file: Option<&std::path::Path>, prompt: &str) -> Result<String> {
    let src = SecretSource {
        what: "the password",
        file_flag: "--password-file",
        env: "LIBRA_PASSWORD",
        value_flag: "--password",
    };
    if let Some(p) = src.read(given.as_deref(), file)? {
        return Ok(p);
    }
    eprint!("{prompt}");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// A user whose jobs run as the Unix account running this command (`libra up`'s demo user, the
/// benchmarks' users): where that is root, allowed explicitly, as an administrator would.
pub fn user_as_me(name: &str, password: &str) -> libra_api::UserAdd {
    let me = libra_node::proc::Identity::current();
    libra_api::UserAdd {
        unix_user: me.as_ref().map(|i| i.user.clone()),
        allow_root: me.is_some_and(|i| i.uid == 0),
        ..libra_api::UserAdd::new(name, password, false)
    }
}
