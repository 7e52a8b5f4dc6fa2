//! `libra login`: exchange a password for an API token, saved for the other commands.

use super::common::{print_json, read_password, save_login, Login};
use anyhow::Result;
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
        "logged in to {} as {}{}",
        a.server,
        resp.user,
        if resp.admin { " (administrator)" } else { "" }
    );
    Ok(())
}
