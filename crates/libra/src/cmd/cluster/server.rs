//! `libra server`: the configuration file merged with flags (a flag beats the file, the file
//! beats the default), then the server runs until interrupted.

use super::common::{data_dir, SecretSource};
use anyhow::Result;
use clap::Args;
use libra_server::Config;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "Secrets (the join token, the administrator's password) come from files or the environment, never \
the command line, where every user of the machine can read them. Beyond this machine, serve https.\n\n\
Examples:\n  libra server --join-token-file /etc/libra/join-token --db /var/lib/libra/server.db\n  \
libra server --listen 0.0.0.0:7878 --tls-self-signed --join-token-file /etc/libra/join-token\n  \
libra server --listen 0.0.0.0:7878 --tls-cert /etc/libra/cert.pem --tls-key /etc/libra/key.pem --join-token-file /etc/libra/join-token"
)]
pub struct ServerArgs {
    /// Configuration file (TOML); every setting in it can be overridden by the flags below.
    #[arg(long, env = "LIBRA_SERVER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:7878). Another address without TLS is warned
    /// about.
    #[arg(long)]
    pub listen: Option<String>,
    /// TLS certificate chain (PEM): the server then speaks only https (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve https with a self-signed certificate, made on the first start and kept in tls/
    /// beside the store (clients trust it with --ca DIR/tls/cert.pem).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub tls_self_signed: bool,
    /// The SQLite store (default: server.db in the user's data directory).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// The broker database of the sweeps the server hosts (default: sweeps/broker.db beside the
    /// store); their files go in experiments/ beside it.
    #[arg(long)]
    pub broker_db: Option<PathBuf>,
    /// A file holding the token new node agents present to join (at least 8 characters;
    /// default: the LIBRA_JOIN_TOKEN environment variable, else join_token in the
    /// configuration file).
    #[arg(long, value_name = "FILE")]
    pub join_token_file: Option<PathBuf>,
    /// Refused: a secret on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub join_token: Option<String>,
    /// A file holding the password of the `admin` account created on an empty store (default:
    /// the LIBRA_ADMIN_PASSWORD environment variable, else generated and printed).
    #[arg(long, value_name = "FILE")]
    pub admin_password_file: Option<PathBuf>,
    /// Refused: a secret on the command line is readable by every user of the machine.
    #[arg(long, hide = true)]
    pub admin_password: Option<String>,
    /// Admission policy: libra or libra+$ (time-shared, every accepted job a promise), or a
    /// space-shared baseline: fifo, fcfs-bf, sjf-bf, edf-bf (a queue, whole nodes, no promise).
    #[arg(long)]
    pub policy: Option<String>,
    /// How a time-shared policy chooses among the nodes that accept a job: best-fit,
    /// least-loaded or cheapest (default: the policy's own; best fit for libra+$, least loaded
    /// for libra).
    #[arg(long)]
    pub placement: Option<libra_core::policy::Placement>,
    /// Libra+$ static pricing factor alpha.
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Libra+$ dynamic pricing factor beta.
    #[arg(long)]
    pub beta: Option<f64>,
    /// Base price (PBase, credits per CPU-second) given to nodes when they first join.
    #[arg(long)]
    pub price_base: Option<f64>,
    /// How long a node may say nothing before it is marked down and its jobs lost: 15, 15s, 1m.
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub node_timeout: Option<f64>,
    /// Job-control period asked of node agents: 2, 2s, 500ms.
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub period: Option<f64>,
    /// Do not fsync every commit (a crash of the server process still loses nothing; a power
    /// cut may lose the last commits).
    #[arg(long)]
    pub no_fsync: bool,
    /// A Libra cluster (https://host:port) that users' hosted sweeps may send jobs to, besides
    /// this server (repeat for several; added to sweep_clusters from the file).
    #[arg(long = "sweep-cluster", value_name = "URL")]
    pub sweep_clusters: Vec<String>,
}

pub fn config(a: &ServerArgs) -> Result<Config> {
    let mut c = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config { db: data_dir()?.join("server.db"), ..Config::default() },
    };
    if let Some(v) = &a.listen {
        c.listen = v.clone();
    }
    if let Some(v) = &a.db {
        c.db = v.clone();
    }
    if let Some(v) = &a.broker_db {
        c.broker_db = Some(v.clone());
    }
    if let Some(v) = (SecretSource {
        what: "the join token",
        file_flag: "--join-token-file",
        env: "LIBRA_JOIN_TOKEN",
        value_flag: "--join-token",
    })
    .read(a.join_token.as_deref(), a.join_token_file.as_deref())?
    {
        c.join_token = v;
    }
    if let Some(v) = (SecretSource {
        what: "the administrator's password",
        file_flag: "--admin-password-file",
        env: "LIBRA_ADMIN_PASSWORD",
        value_flag: "--admin-password",
    })
    .read(a.admin_password.as_deref(), a.admin_password_file.as_deref())?
    {
        c.admin_password = Some(v);
    }
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        c.tls_cert = Some(cert.clone());
        c.tls_key = Some(key.clone());
        c.tls_self_signed = false;
    }
    if a.tls_self_signed {
        c.tls_self_signed = true;
        c.tls_cert = None;
        c.tls_key = None;
    }
    if let Some(v) = &a.policy {
        c.policy = v.clone();
    }
    if let Some(v) = a.placement {
        c.placement = Some(v);
    }
    if let Some(v) = a.alpha {
        c.pricing.alpha = v;
    }
    if let Some(v) = a.beta {
        c.pricing.beta = v;
    }
    if let Some(v) = a.price_base {
        c.default_price_base = v;
    }
    if let Some(v) = a.node_timeout {
        c.node_timeout = v;
    }
    if let Some(v) = a.period {
        c.period = v;
    }
    if a.no_fsync {
        c.sync_full = false;
    }
    c.sweep_clusters.extend(a.sweep_clusters.iter().cloned());
    // This binary keeps the local jobs of hosted sweeps (`libra sweep keep-attempt`).
    c.sweep_keeper = std::env::current_exe().ok();
    Ok(c)
}

pub fn run(a: ServerArgs) -> Result<()> {
    let c = config(&a)?;
    libra_server::run(c)?;
    Ok(())
}
