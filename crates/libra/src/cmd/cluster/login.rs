//! `libra login`: exchange a password for an API token, saved for the other commands;
//! `libra logout` and `libra passwd`.

use super::common::{login_path, print_json, read_password, save_login, saved_login, Conn, Login};
use anyhow::{Context, Result};
use clap::Args;
use libra_api::Client;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Server URL.
    #[arg(long, env = "LIBRA_SERVER", default_value = "http://127.0.0.1:7878")]
    pub server: String,
    /// User name.
    #[arg(long)]
    pub user: String,
    /// Password (default: LIBRA_PASSWORD, else read from standard input).
    #[arg(long)]
    pub password: Option<String>,
    /// Print the token as JSON instead of saving it.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: LoginArgs) -> Result<()> {
    let password = read_password(a.password, "password: ")?;
    let resp = Client::new(&a.server, None).login(&a.user, &password)?;
    if a.json {
        return print_json(&resp);
    }
    save_login(&Login { server: a.server.clone(), user: resp.user.clone(), token: resp.token })?;
    println!(
        "logged in to {} as {}{}{}",
        a.server,
        resp.user,
        if resp.admin { " (administrator)" } else { "" },
        resp.expires
            .map_or(String::new(), |t| format!("; the token works until {}", super::common::fmt_time(t)))
    );
    Ok(())
}

/// Revokes the saved token on the server and forgets it here. A token that no longer works
/// (expired, revoked) is forgotten all the same.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    #[command(flatten)]
    pub conn: Conn,
}

pub fn logout(a: LogoutArgs) -> Result<()> {
    let c = a.conn.client()?;
    let revoked = match c.logout() {
        Ok(_) => true,
        Err(e) if e.status() == Some(401) => false,
        Err(e) => return Err(e.into()),
    };
    // Forget the saved login if it is the one just revoked.
    let saved = saved_login();
    let forgot = match saved {
        Some(l) if a.conn.token.is_none() || a.conn.token.as_deref() == Some(l.token.as_str()) => {
            let p = login_path()?;
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            true
        }
        _ => false,
    };
    if a.conn.json {
        return print_json(&serde_json::json!({ "revoked": revoked, "forgotten": forgot }));
    }
    println!(
        "{}{}",
        if revoked {
            "logged out: the token is revoked on the server"
        } else {
            "the token was already invalid on the server"
        },
        if forgot { "; the saved login is removed" } else { "" }
    );
    Ok(())
}

/// Changes your password. The current one is required; every other token of yours (other
/// logins, hosted sweeps' credentials) is revoked, the one in use stays.
#[derive(Debug, Args)]
pub struct PasswdArgs {
    /// The current password (default: LIBRA_PASSWORD, else read from standard input).
    #[arg(long)]
    pub old_password: Option<String>,
    /// The new password, at least 4 characters (default: LIBRA_NEW_PASSWORD, else read from
    /// standard input).
    #[arg(long)]
    pub new_password: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

pub fn passwd(a: PasswdArgs) -> Result<()> {
    let c = a.conn.client()?;
    let old = read_password(a.old_password, "current password: ")?;
    let new = match a.new_password.or_else(|| std::env::var("LIBRA_NEW_PASSWORD").ok()) {
        Some(p) => p,
        None => read_password(None, "new password: ")?,
    };
    let r = c.passwd(&old, &new)?;
    if a.conn.json {
        return print_json(&r);
    }
    println!("password changed for {}; {} other tokens revoked", r.user, r.revoked_tokens);
    Ok(())
}
