//! `libra login`: exchange a password for an API token, saved for the other commands.

use super::common::{print_json, read_password, save_login, Login};
use anyhow::Result;
use clap::Args;
use libra_api::Client;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Server URL.
    #[arg(long, env = "LIBRA_SERVER", default_value = "http://127.0.0.1:7878")]
    pub server: String,
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

pub fn run(a: LoginArgs) -> Result<()> {
    // An absolute path: the saved login is used from any directory.
    let ca = a.ca.as_ref().map(std::path::absolute).transpose()?;
    let client = Client::connect(&a.server, None, ca.as_deref(), a.insecure_http)?;
    let password = read_password(a.password, a.password_file.as_deref(), "password: ")?;
    let resp = client.login(&a.user, &password)?;
    if a.json {
        return print_json(&resp);
    }
    save_login(&Login {
        server: a.server.clone(),
        user: resp.user.clone(),
        token: resp.token,
        ca,
        insecure_http: a.insecure_http,
    })?;
    println!(
        "logged in to {} as {}{}",
        a.server,
        resp.user,
        if resp.admin { " (administrator)" } else { "" }
    );
    Ok(())
}
