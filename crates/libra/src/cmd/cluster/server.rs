//! `libra server`: the configuration file merged with flags (a flag beats the file, the file
//! beats the default), then the server runs until interrupted.

use super::common::data_dir;
use anyhow::Result;
use clap::Args;
use libra_server::Config;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Configuration file (TOML); every setting in it can be overridden by the flags below.
    #[arg(long, env = "LIBRA_SERVER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:7878; loopback only: there is no TLS).
    #[arg(long)]
    pub listen: Option<String>,
    /// The SQLite store (default: server.db in the user's data directory).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// The broker database of the sweeps the server hosts (default: sweeps/broker.db beside the
    /// store); their files go in experiments/ beside it.
    #[arg(long)]
    pub broker_db: Option<PathBuf>,
    /// The token node agents must present to join (at least 8 characters).
    #[arg(long, env = "LIBRA_JOIN_TOKEN", hide_env_values = true)]
    pub join_token: Option<String>,
    /// Password for the `admin` account created on an empty store (default: generated and printed).
    #[arg(long, env = "LIBRA_ADMIN_PASSWORD", hide_env_values = true)]
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
    /// A Libra cluster (http://host:port) that users' hosted sweeps may send jobs to, besides
    /// this server (repeat for several; added to sweep_clusters from the file).
    #[arg(long = "sweep-cluster", value_name = "URL")]
    pub sweep_clusters: Vec<String>,
    /// How long a token from `libra login` works: 30d (the default), 12h, 3600.
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub token_ttl: Option<f64>,
    /// The most active (pending, running, suspended) jobs one user may have (default 1000).
    #[arg(long)]
    pub max_active_jobs: Option<u32>,
    /// Submissions per second one user may make on average (default 50) ...
    #[arg(long)]
    pub submit_rate: Option<f64>,
    /// ... and at once (default 500); beyond, 429 with Retry-After.
    #[arg(long)]
    pub submit_burst: Option<u32>,
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
    if let Some(v) = &a.join_token {
        c.join_token = v.clone();
    }
    if let Some(v) = &a.admin_password {
        c.admin_password = Some(v.clone());
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
    if let Some(v) = a.token_ttl {
        c.token_ttl = v;
    }
    if let Some(v) = a.max_active_jobs {
        c.max_active_jobs = v;
    }
    if let Some(v) = a.submit_rate {
        c.submit_rate = v;
    }
    if let Some(v) = a.submit_burst {
        c.submit_burst = v;
    }
    // This binary keeps the local jobs of hosted sweeps (`libra sweep keep-attempt`).
    c.sweep_keeper = std::env::current_exe().ok();
    Ok(c)
}

pub fn run(a: ServerArgs) -> Result<()> {
    let c = config(&a)?;
    libra_server::run(c)?;
    Ok(())
}
