//! `libra login`: exchange a password for an API token, saved for the other commands;
//! `libra logout` and `libra passwd`.

use super::common::{login_path, read_password, save_login, saved_login, Conn, Login, SecretSource};
use crate::output::{emit, Said};
use anyhow::{Context, Result};
use clap::Args;
use libra_api::Client;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Server URL (default: the saved login's server, with the certificate it trusts, else
    /// http://127.0.0.1:7878).
    #[arg(long, env = "LIBRA_SERVER")]
    pub server: Option<String>,
    /// User name.
    #[arg(long)]
    pub user: String,
    /// Refused: a password on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub password: Option<String>,
    /// A file holding the password (default: LIBRA_PASSWORD, else a line of standard input).
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// A PEM file with the certificate (or CA) the server's TLS certificate is checked against,
    /// for a server with a private or self-signed certificate; remembered with the login.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Allow plain http to a server that is not on this machine (passwords and tokens then
    /// cross the network readable); remembered with the login.
    #[arg(long)]
    pub insecure_http: bool,
    /// Print the token as JSON instead of saving it.
    #[arg(long)]
    pub json: bool,
}

/// Where `libra login` goes when no server is given: where the last login went (logging in
/// again, as another user, after `libra up --port`), else a server on this machine.
const LOCAL_SERVER: &str = "http://127.0.0.1:7878";

pub fn run(a: LoginArgs) -> Result<()> {
    // An absolute path: the saved login is used from any directory.
    let mut ca = a.ca.as_ref().map(std::path::absolute).transpose()?;
    let mut insecure_http = a.insecure_http;
    let server = match a.server {
        Some(s) => s,
        None => match saved_login() {
            Some(l) => {
                // The same server: the same trust, unless given anew.
                ca = ca.or(l.ca);
                insecure_http |= l.insecure_http;
                l.server
            }
            None => LOCAL_SERVER.to_string(),
        },
    };
    // The same server as the saved login's: run by the same account, or nothing is sent.
    if let Some(l) = saved_login().filter(|l| l.server == server) {
        super::common::check_server_owner(&server, l.server_uid)?;
    }
    let client = Client::connect(&server, None, ca.as_deref(), insecure_http)?;
    let password = read_password(a.password, a.password_file.as_deref(), "password: ")?;
    let resp = client.login(&a.user, &password)?;
    // With --json the token is the program's to keep: nothing is saved.
    if !a.json {
        save_login(&Login {
            server: server.clone(),
            user: resp.user.clone(),
            token: resp.token.clone(),
            ca,
            insecure_http,
            server_uid: super::common::loopback_server_owner(&server),
        })?;
    }
    let said = format!(
        "logged in to {} as {}{}{}",
        server,
        resp.user,
        if resp.admin { " (administrator)" } else { "" },
        resp.expires
            .map_or(String::new(), |t| format!("; the token works until {}", super::common::fmt_time(t)))
    );
    emit(&Said::new(&resp, said), a.json)
}

/// Revokes the saved token on the server and forgets it here. A token that no longer works
/// (expired, revoked) is forgotten all the same.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    #[command(flatten)]
    pub conn: Conn,
}

pub fn logout(a: LogoutArgs) -> Result<()> {
    let no_token = a.conn.token.is_none()
        && a.conn.token_file.is_none()
        && std::env::var_os("LIBRA_TOKEN").is_none_or(|t| t.is_empty());
    if no_token && saved_login().is_none() {
        // Nothing to revoke and nothing to forget: done already, as `cargo logout` says.
        let said =
            format!("not logged in (no saved login in {}): nothing to log out", login_path()?.display());
        return emit(
            &Said::new(&serde_json::json!({ "revoked": false, "forgotten": false }), said),
            a.conn.json,
        );
    }
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
    let said = format!(
        "{}{}",
        if revoked {
            "logged out: the token is revoked on the server"
        } else {
            "the token was already invalid on the server"
        },
        if forgot { "; the saved login is removed" } else { "" }
    );
    emit(&Said::new(&serde_json::json!({ "revoked": revoked, "forgotten": forgot }), said), a.conn.json)
}

/// Changes your password. The current one is required; every other token of yours (other
/// logins, hosted sweeps' credentials) is revoked, the one in use stays.
#[derive(Debug, Args)]
#[command(
    after_help = "Passwords come from files, the environment or standard input, never the command line.\n\n\
Example:\n  LIBRA_PASSWORD=... LIBRA_NEW_PASSWORD=... libra passwd"
)]
pub struct PasswdArgs {
    /// A file holding the current password (default: LIBRA_PASSWORD, else read from standard
    /// input).
    #[arg(long, value_name = "FILE")]
    pub old_password_file: Option<std::path::PathBuf>,
    /// Refused: a password on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub old_password: Option<String>,
    /// A file holding the new password, at least 4 characters (default: LIBRA_NEW_PASSWORD,
    /// else read from standard input).
    #[arg(long, value_name = "FILE")]
    pub new_password_file: Option<std::path::PathBuf>,
    /// Refused: a password on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub new_password: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

pub fn passwd(a: PasswdArgs) -> Result<()> {
    let c = a.conn.client()?;
    let old = match (SecretSource {
        what: "the current password",
        file_flag: "--old-password-file",
        env: "LIBRA_PASSWORD",
        value_flag: "--old-password",
    })
    .read(a.old_password.as_deref(), a.old_password_file.as_deref())?
    {
        Some(p) => p,
        None => read_password(None, None, "current password: ")?,
    };
    let new = match (SecretSource {
        what: "the new password",
        file_flag: "--new-password-file",
        env: "LIBRA_NEW_PASSWORD",
        value_flag: "--new-password",
    })
    .read(a.new_password.as_deref(), a.new_password_file.as_deref())?
    {
        Some(p) => p,
        None => {
            // Not read_password: LIBRA_PASSWORD holds the current one.
            eprint!("new password: ");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    let r = c.passwd(&old, &new)?;
    let said = format!(
        "password changed for {}; {} revoked",
        r.user,
        super::admin::tokens(r.revoked_tokens, "other ")
    );
    emit(&Said::new(&r, said), a.conn.json)
}
