//! What the cluster commands share: how to reach the server and who the caller is, durations
//! and times, and printing (a table for people, JSON for programs).

use anyhow::{bail, Context, Result};
use clap::Args;
use comfy_table::Table;
use libra_api::Client;
use libra_core::Money;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use crate::cmd::time::{fmt_dur, fmt_opt_time, fmt_time, now, parse_deadline, parse_duration};

/// How to reach the server; by default the last `libra login`.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// Server URL, e.g. http://127.0.0.1:7878 (default: the one from `libra login`).
    #[arg(long, env = "LIBRA_SERVER", global = true)]
    pub server: Option<String>,
    /// API token (default: the one saved by `libra login`).
    #[arg(long, env = "LIBRA_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
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
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(l)?)
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
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
        let token = match &self.token {
            Some(t) => t.clone(),
            None => match saved_login() {
                Some(l) if self.server.is_none() || self.server.as_deref() == Some(l.server.as_str()) => {
                    l.token
                }
                _ => bail!("not logged in to {server}: run `libra login --server {server} --user NAME`"),
            },
        };
        Ok(Client::new(&server, Some(token)))
    }
}

pub fn money(m: Money) -> String {
    m.to_string()
}

pub fn table(header: &[&str]) -> Table {
    let mut t = crate::cmd::new_table();
    t.set_header(header.iter().copied());
    t
}

pub fn print_json<T: Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Reads a password from `--password`, `LIBRA_PASSWORD`, or a line of standard input.
pub fn read_password(given: Option<String>, prompt: &str) -> Result<String> {
    if let Some(p) = given.or_else(|| std::env::var("LIBRA_PASSWORD").ok()) {
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
