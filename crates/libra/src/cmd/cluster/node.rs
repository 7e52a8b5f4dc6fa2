//! `libra node`: the node agent.

use super::common::{data_dir, SecretSource};
use anyhow::{Context, Result};
use clap::Args;
use libra_node::{Agent, AgentConfig};
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "The join token admits a new node once: the server then gives the node a credential of its own, \
saved in node.credential (mode 0600) in the work directory, which the agent uses from then on (the join token \
file may then be removed). Secrets are never taken on the command line, where every user can read them.\n\n\
Example:\n  libra node --server https://manager:7878 --ca /etc/libra/cert.pem --join-token-file /etc/libra/join-token"
)]
pub struct NodeArgs {
    /// The server's URL: https://HOST:PORT, or http:// on this machine (another machine over
    /// plain http needs --insecure-http).
    #[arg(long, env = "LIBRA_SERVER")]
    pub server: String,
    /// A file holding the cluster's join token (default: the LIBRA_JOIN_TOKEN environment
    /// variable). Needed only to join: once the node has its credential it is not read.
    #[arg(long, value_name = "FILE")]
    pub join_token_file: Option<PathBuf>,
    /// Refused: a secret on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub join_token: Option<String>,
    /// A PEM file with the certificate (or CA) the server's TLS certificate is checked against
    /// (`libra server --tls-self-signed` prints where its certificate is).
    #[arg(long, env = "LIBRA_CA", value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Allow plain http to a server on another machine (the credential then crosses the
    /// network readable).
    #[arg(long)]
    pub insecure_http: bool,
    /// Capacity in CPUs (default: all cores). Several agents on one machine each get their own
    /// capped control group, so `--cpus 0.5` four times on a 2-core machine makes a four-node
    /// cluster whose nodes do not steal from each other.
    #[arg(long)]
    pub cpus: Option<f64>,
    /// Memory offered to jobs, MB (default: not limited).
    #[arg(long, default_value_t = 0)]
    pub mem_mb: u64,
    /// The node's name (default: the host name). It must stay the same across restarts.
    #[arg(long)]
    pub name: Option<String>,
    /// Where jobs get their working directories (default: the user's data directory).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Share enforcement: auto (cgroup v2, else cgroup v1, else stride), cgroup-v2, cgroup-v1,
    /// stride (SIGSTOP/SIGCONT in user space) or none.
    #[arg(long, default_value = "auto")]
    pub mechanism: String,
    /// Job-control period: 2, 500ms, 2s (default: what the server asks for).
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub period: Option<f64>,
}

#[derive(Debug, Args)]
pub struct KeeperArgs {
    /// The node agent's directory for the job, where the keeper records how the job ended
    /// (default: the working directory).
    #[arg(long, default_value = ".")]
    pub record: PathBuf,
    /// The job's command and its arguments, where the record directory holds no launch file
    /// (what older agents gave).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into())
}

pub fn run(a: NodeArgs) -> Result<()> {
    let name = a.name.unwrap_or_else(hostname);
    let cpus =
        a.cpus.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0));
    let workdir = match a.workdir {
        Some(w) => w,
        None => data_dir()?.join(format!("node-{name}")),
    };
    let join_token = SecretSource {
        what: "the join token",
        file_flag: "--join-token-file",
        env: "LIBRA_JOIN_TOKEN",
        value_flag: "--join-token",
    }
    .read(a.join_token.as_deref(), a.join_token_file.as_deref())?;
    let client = libra_api::Client::connect(&a.server, None, a.ca.as_deref(), a.insecure_http)?;
    let mut agent = Agent::new(AgentConfig {
        client,
        join_token,
        name: name.clone(),
        cpus,
        mem_mb: a.mem_mb,
        workdir,
        mechanism: a.mechanism,
        period: a.period,
        // This very binary keeps the jobs (`libra job-keeper`).
        keeper: Some(std::env::current_exe().context("finding the libra binary to keep jobs with")?),
    })?;
    eprintln!("libra node {name}: {cpus} CPUs, enforcing shares with {}", agent.mechanism());
    agent.run(|| false)?;
    Ok(())
}
