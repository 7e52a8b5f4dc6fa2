//! `libra server`: the configuration file merged with flags (a flag beats the file, the file
//! beats the default), then the server runs until interrupted.

use super::common::{data_dir, SecretSource};
use super::settings::{load_section, print, PrintConfig, Sources};
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
    /// Configuration file (TOML): the `[server]` table of the site's file (see CONFIGURATION.md;
    /// a file without tables is read as the server's settings). Every setting in it can be
    /// overridden by the flags below. SIGHUP reads it again: pricing, policy, placement,
    /// node_timeout, log_level, audit_keep_days, output_keep_days, output_quota_mb,
    /// command_quota_mb and max_kept_refusals apply at once; other changes are logged as
    /// needing a restart.
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
    /// What the server logs: error, warn, info (the default), debug, trace, or a filter such as
    /// info,libra_server=debug. Reloaded on SIGHUP when set in the file.
    #[arg(long)]
    pub log_level: Option<String>,
    #[command(flatten)]
    pub show: PrintConfig,
    /// Restore the store from a backup (`libra admin backup FILE`) and exit, instead of
    /// serving, with the hosted sweeps' broker database the backup carries (into broker_db).
    /// The server must be stopped; a store that holds users or jobs, or a broker database that
    /// holds sweeps, is replaced only with --overwrite.
    #[arg(long, value_name = "FILE")]
    pub restore: Option<PathBuf>,
    /// With --restore: replace a store (and a broker database) that is not empty.
    #[arg(long, requires = "restore")]
    pub overwrite: bool,
    /// How long a token from `libra login` works: 30d (the default), 12h, 3600.
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub token_ttl: Option<f64>,
    /// The most active (pending, running, suspended) jobs one user may have (default 1000).
    #[arg(long)]
    pub max_active_jobs: Option<u32>,
    /// The most tokens from `libra login` one user keeps (default 1000): a login past it
    /// revokes their oldest.
    #[arg(long, value_name = "N")]
    pub max_tokens_per_user: Option<u32>,
    /// The most hosted sweeps one user may have that are not over: running, paused or stalled
    /// (default 10; each has an engine thread in the server).
    #[arg(long)]
    pub max_active_sweeps: Option<u32>,
    /// The most ended hosted sweeps (done or cancelled) one user keeps (default 100; 0: every
    /// one): past it, their sweeps that ended first are removed as they create new ones.
    #[arg(long, value_name = "N")]
    pub max_kept_sweeps: Option<u32>,
    /// Submissions per second one user may make on average (default 50) ...
    #[arg(long)]
    pub submit_rate: Option<f64>,
    /// ... and at once (default 500); beyond, 429 with Retry-After.
    #[arg(long)]
    pub submit_burst: Option<u32>,
    /// Reads (GET requests: status, listings, a hosted sweep's progress) per second one user
    /// may make on average (default 100) ...
    #[arg(long)]
    pub read_rate: Option<f64>,
    /// ... and at once (default 1000); beyond, 429 with Retry-After. Administrators are not
    /// held to it.
    #[arg(long)]
    pub read_burst: Option<u32>,
    /// Jobs of hosted sweeps one user may create or run again per second on average (default
    /// 1000), and at once the largest plan's 100,000; beyond, a creation or rerun is answered 429.
    #[arg(long, value_name = "JOBS")]
    pub sweep_job_rate: Option<f64>,
    /// Seconds over which the audit log counts refusals (401, 403, 429) alike to one it wrote
    /// (same address, status, method and route) and writes them as one entry with their count
    /// (default 10; 0 writes every refusal): 10, 30s, 1m.
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::time::parse_duration)]
    pub audit_repeat_window: Option<f64>,
    /// Days the audit log keeps an entry (1 to 36500): older ones are removed at start and once
    /// an hour, and the removal is itself an entry (default: every entry is kept for good).
    #[arg(long, value_name = "DAYS")]
    pub audit_keep_days: Option<f64>,
    /// Days after a job ends that its output (`libra output`) is kept (1 to 36500): older output
    /// is removed once an hour; the job's record and the ledger stay (default: kept for good).
    #[arg(long, value_name = "DAYS")]
    pub output_keep_days: Option<f64>,
    /// MiB of output the server keeps per user (default 1024; 0: no quota): past it, the output
    /// of the user's jobs that ended first is removed first; running jobs' output stays.
    #[arg(long, value_name = "MIB")]
    pub output_quota_mb: Option<u64>,
    /// MiB of commands (a job script is its text) the server keeps whole per user (default
    /// 256; 0: no quota): past it, the commands of the user's jobs that ended first are cut to
    /// their first KiB; an active job's stays whole.
    #[arg(long, value_name = "MIB")]
    pub command_quota_mb: Option<u64>,
    /// The most refused submissions the server keeps per user (default 10000; 0: every one):
    /// past it, that user's oldest refusals are removed as new ones are stored.
    #[arg(long, value_name = "N")]
    pub max_kept_refusals: Option<u64>,
    /// The most connections the server keeps open in all (default: its open-file limit less
    /// 256); past it, new connections are closed as they are taken.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u32>,
    /// The most connections one peer may keep open (default 256): an address (an IPv6 /64),
    /// or a local user's Unix account, whatever loopback address they bind; past it, that
    /// peer's new connections are closed as they are taken.
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<u32>,
    /// How long a connection has to send a request's header, from its opening or its last
    /// answer (default 30s); then it is closed: 30, 30s, 1m.
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::time::parse_positive_duration)]
    pub header_timeout: Option<f64>,
}

/// The configuration in force: the file's `[server]` settings (or the defaults), each flag
/// over them; and where each value came from.
pub fn config(a: &ServerArgs) -> Result<(Config, Sources)> {
    let mut src = Sources::default();
    let mut c = match &a.config {
        Some(p) => {
            let s = load_section::<Config>(p, "server")?;
            src.file(p, &s.keys);
            s.value
        }
        None => Config { db: data_dir()?.join("server.db"), ..Config::default() },
    };
    if let Some(v) = &a.listen {
        c.listen = v.clone();
        src.flag("listen", "listen", None);
    }
    if let Some(v) = &a.db {
        c.db = v.clone();
        src.flag("db", "db", None);
    }
    if let Some(v) = &a.broker_db {
        c.broker_db = Some(v.clone());
        src.flag("broker_db", "broker-db", None);
    }
    if let Some(v) = (SecretSource {
        what: "the join token",
        file_flag: "--join-token-file",
        env: "LIBRA_JOIN_TOKEN",
        value_flag: "--join-token",
    })
    .read(a.join_token.as_deref(), a.join_token_file.as_deref())?
    {
        src.flag("join_token", "join-token-file", Some(("LIBRA_JOIN_TOKEN", &v)));
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
        src.flag("admin_password", "admin-password-file", Some(("LIBRA_ADMIN_PASSWORD", &v)));
        c.admin_password = Some(v);
    }
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        c.tls_cert = Some(cert.clone());
        c.tls_key = Some(key.clone());
        c.tls_self_signed = false;
        src.flag("tls_cert", "tls-cert", None);
        src.flag("tls_key", "tls-key", None);
    }
    if a.tls_self_signed {
        c.tls_self_signed = true;
        c.tls_cert = None;
        c.tls_key = None;
        src.flag("tls_self_signed", "tls-self-signed", None);
    }
    if let Some(v) = &a.policy {
        c.policy = v.clone();
        src.flag("policy", "policy", None);
    }
    if let Some(v) = a.placement {
        c.placement = Some(v);
        src.flag("placement", "placement", None);
    }
    if let Some(v) = a.alpha {
        c.pricing.alpha = v;
        src.flag("pricing.alpha", "alpha", None);
    }
    if let Some(v) = a.beta {
        c.pricing.beta = v;
        src.flag("pricing.beta", "beta", None);
    }
    if let Some(v) = a.price_base {
        c.default_price_base = v;
        src.flag("default_price_base", "price-base", None);
    }
    if let Some(v) = a.node_timeout {
        c.node_timeout = v;
        src.flag("node_timeout", "node-timeout", None);
    }
    if let Some(v) = a.period {
        c.period = v;
        src.flag("period", "period", None);
    }
    if a.no_fsync {
        c.sync_full = false;
        src.flag("sync_full", "no-fsync", None);
    }
    if !a.sweep_clusters.is_empty() {
        c.sweep_clusters.extend(a.sweep_clusters.iter().cloned());
        src.flag("sweep_clusters", "sweep-cluster", None);
    }
    if let Some(v) = &a.log_level {
        c.log_level = v.clone();
        src.flag("log_level", "log-level", None);
    }
    if let Some(v) = crate::logging::flag_format() {
        c.log_format = v;
        src.flag("log_format", "log-format", Some(("LIBRA_LOG_FORMAT", &v.to_string())));
    }
    if let Some(v) = a.token_ttl {
        c.token_ttl = v;
        src.flag("token_ttl", "token-ttl", None);
    }
    if let Some(v) = a.max_active_jobs {
        c.max_active_jobs = v;
        src.flag("max_active_jobs", "max-active-jobs", None);
    }
    if let Some(v) = a.max_tokens_per_user {
        c.max_tokens_per_user = v;
        src.flag("max_tokens_per_user", "max-tokens-per-user", None);
    }
    if let Some(v) = a.max_active_sweeps {
        c.max_active_sweeps = v;
        src.flag("max_active_sweeps", "max-active-sweeps", None);
    }
    if let Some(v) = a.max_kept_sweeps {
        c.max_kept_sweeps = v;
        src.flag("max_kept_sweeps", "max-kept-sweeps", None);
    }
    if let Some(v) = a.submit_rate {
        c.submit_rate = v;
        src.flag("submit_rate", "submit-rate", None);
    }
    if let Some(v) = a.submit_burst {
        c.submit_burst = v;
        src.flag("submit_burst", "submit-burst", None);
    }
    if let Some(v) = a.read_rate {
        c.read_rate = v;
        src.flag("read_rate", "read-rate", None);
    }
    if let Some(v) = a.read_burst {
        c.read_burst = v;
        src.flag("read_burst", "read-burst", None);
    }
    if let Some(v) = a.sweep_job_rate {
        c.sweep_job_rate = v;
        src.flag("sweep_job_rate", "sweep-job-rate", None);
    }
    if let Some(v) = a.audit_repeat_window {
        c.audit_repeat_window = v;
        src.flag("audit_repeat_window", "audit-repeat-window", None);
    }
    if let Some(v) = a.audit_keep_days {
        c.audit_keep_days = Some(v);
        src.flag("audit_keep_days", "audit-keep-days", None);
    }
    if let Some(v) = a.output_keep_days {
        c.output_keep_days = Some(v);
        src.flag("output_keep_days", "output-keep-days", None);
    }
    if let Some(v) = a.output_quota_mb {
        c.output_quota_mb = v;
        src.flag("output_quota_mb", "output-quota-mb", None);
    }
    if let Some(v) = a.command_quota_mb {
        c.command_quota_mb = v;
        src.flag("command_quota_mb", "command-quota-mb", None);
    }
    if let Some(v) = a.max_kept_refusals {
        c.max_kept_refusals = v;
        src.flag("max_kept_refusals", "max-kept-refusals", None);
    }
    if let Some(v) = a.max_connections {
        c.max_connections = Some(v);
        src.flag("max_connections", "max-connections", None);
    }
    if let Some(v) = a.max_connections_per_address {
        c.max_connections_per_address = v;
        src.flag("max_connections_per_address", "max-connections-per-address", None);
    }
    if let Some(v) = a.header_timeout {
        c.header_timeout = v;
        src.flag("header_timeout", "header-timeout", None);
    }
    // This binary keeps the local jobs of hosted sweeps (`libra sweep keep-attempt`).
    c.sweep_keeper = std::env::current_exe().ok();
    Ok((c, src))
}

pub fn run(a: ServerArgs) -> Result<()> {
    let (c, sources) = config(&a)?;
    if a.show.print_config {
        let problems = c
            .validate()
            .err()
            .map(|e| e.to_string())
            .or_else(|| crate::logging::check_level(&c.log_level).err());
        return print("server", c.settings(), &sources, problems, a.show.json);
    }
    crate::logging::init(&c.log_level, c.log_format).map_err(|e| anyhow::anyhow!("log_level: {e}"))?;
    if let Some(file) = &a.restore {
        let broker = c.broker_db();
        let r = libra_server::backup::restore(file, &c.db, Some(&broker), a.overwrite)?;
        println!(
            "restored {} into {}: {} jobs (last {}), {} ledger entries (last {}), {} users, schema version {}",
            file.display(),
            c.db.display(),
            r.jobs,
            r.last_job,
            r.ledger_entries,
            r.last_ledger_entry,
            r.users,
            r.schema_version
        );
        match r.sweeps {
            Some(n) => println!("restored the hosted sweeps' database into {}: {n} sweeps", broker.display()),
            None => println!(
                "the backup carries no hosted sweeps' database: {} is left as it is",
                broker.display()
            ),
        }
        return Ok(());
    }
    let reloader = libra_server::Reloader {
        load: Box::new(move || {
            let (c, _) = config(&a).map_err(|e| crate::output::error_line(&e))?;
            crate::logging::check_level(&c.log_level)?;
            Ok(c)
        }),
        set_log_level: Box::new(crate::logging::set_level),
    };
    libra_server::run_with(c, Some(reloader))?;
    Ok(())
}
