//! The server's configuration: a TOML file, every setting overridable by a command-line flag
//! (the `libra server` command merges the two: flag beats file beats default).

use crate::error::ServerError;
use libra_core::policy::Placement;
use libra_core::{PricingParams, Shown};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on (loopback by default). Another address without TLS is warned
    /// about: passwords and tokens would cross the network readable.
    pub listen: String,
    /// TLS: the certificate chain (PEM) and its private key (PEM). With them the server speaks
    /// only https.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// TLS with a self-signed certificate made on first start and kept in `tls/` beside `db`
    /// (`cert.pem`, the file clients trust with `--ca`; `key.pem`, mode 0600).
    pub tls_self_signed: bool,
    /// The SQLite file (WAL mode).
    pub db: PathBuf,
    /// The broker database of the sweeps this server hosts (default: sweeps/broker.db beside
    /// `db`); each sweep's files go in `experiments/<id>` beside it.
    pub broker_db: Option<PathBuf>,
    /// The token node agents present to join the cluster.
    pub join_token: String,
    /// Password for the `admin` account created when the store has no users.
    pub admin_password: Option<String>,
    /// Admission policy: libra, libra+$, or a space-shared baseline (fifo, fcfs-bf, sjf-bf, edf-bf).
    pub policy: String,
    /// How a time-shared policy chooses among the nodes that accept a job: best-fit,
    /// least-loaded or cheapest. Absent: the policy's own (best fit for libra+$ and the EDF
    /// policies, least loaded for libra).
    pub placement: Option<Placement>,
    #[serde(deserialize_with = "strict_pricing")]
    pub pricing: PricingParams,
    /// PBase per CPU-second given to nodes when they first join.
    pub default_price_base: f64,
    /// Seconds without a word from a node agent before it is marked down and its jobs lost.
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub node_timeout: f64,
    /// Job-control period the node agents are asked to use, seconds.
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub period: f64,
    /// fsync every commit (`FULL`) or only at WAL checkpoints (`NORMAL`: survives a crash of the
    /// server process, may lose the last commits on a power cut).
    pub sync_full: bool,
    /// The Libra clusters (API addresses such as `http://10.0.0.5:7878`) that a user's hosted
    /// sweep may send jobs to, besides this server itself. The server makes those requests, so
    /// an open list would let any user aim it at any address it can reach.
    pub sweep_clusters: Vec<String>,
    /// What the server logs: a level (error, warn, info, debug, trace) or a filter such as
    /// `info,libra_server=debug`. `RUST_LOG`, when set, wins. Reloaded on SIGHUP.
    pub log_level: String,
    /// How log lines are written: text (for people) or json (one object per line).
    pub log_format: LogFormat,
    /// The program that keeps the local jobs of hosted sweeps (`libra sweep keep-attempt`), so
    /// that they outlive a restart of the server: the `libra` binary sets it to itself.
    #[serde(skip)]
    pub sweep_keeper: Option<PathBuf>,
    /// How long an API token from `libra login` works, seconds (default 30 days).
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub token_ttl: f64,
    /// The most tokens from `libra login` one user keeps: a login past it revokes their
    /// oldest. Tokens expired for a week are removed.
    pub max_tokens_per_user: u32,
    /// The most active jobs (pending, running, suspended) one user may have; further
    /// submissions are answered 429 until some end.
    pub max_active_jobs: u32,
    /// The most hosted sweeps one user may have that are not over (running, paused or
    /// stalled); beyond, creating one is answered 429.
    pub max_active_sweeps: u32,
    /// The most ended hosted sweeps (done or cancelled) one user keeps: past it, their sweeps
    /// that ended first are removed, records and files, as they create new ones. 0: every one.
    pub max_kept_sweeps: u32,
    /// Submissions per second one user may make on average ...
    pub submit_rate: f64,
    /// ... and at once (the token bucket's size); beyond, 429 with Retry-After.
    pub submit_burst: u32,
    /// Reads (GET requests) per second one user may make on average ...
    pub read_rate: f64,
    /// ... and at once; beyond, 429 with Retry-After. Administrators are not held to it.
    pub read_burst: u32,
    /// Jobs of hosted sweeps one user may create or run again (a rerun) per second on average,
    /// and at once the jobs of the largest plan a sweep may have (100,000): each job is a record
    /// the creation or rerun writes, so creating (or rerunning) and cancelling sweeps in a loop
    /// would otherwise keep the disk busy. Beyond, 429 with Retry-After.
    pub sweep_job_rate: f64,
    /// Seconds over which the audit log counts a refused request (401, 403, 429) like one it
    /// has just written (same address, status, method and route) instead of writing each: the
    /// first is written at once, the rest as one entry with their count when the window ends.
    /// 0 writes every refusal.
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub audit_repeat_window: f64,
    /// Days the audit log keeps an entry: older entries are removed at start and once an hour,
    /// the removal recorded as an entry of its own. Unset: every entry is kept for good.
    pub audit_keep_days: Option<f64>,
    /// Days after a job ends that the server keeps its output (what `libra output` shows):
    /// older output is removed once an hour, the job's record and the ledger staying. Unset:
    /// kept for good.
    pub output_keep_days: Option<f64>,
    /// MiB of output the server keeps per user (what `libra output` shows): past it, the output
    /// of the user's jobs that ended first goes first; running jobs' output stays. 0: no quota.
    pub output_quota_mb: u64,
    /// MiB of commands (a job script is its text) the server keeps whole per user: past it,
    /// the commands of the user's jobs that ended first are cut to their first KiB; an active
    /// job's stays whole. Only commands longer than a KiB count. 0: no quota.
    pub command_quota_mb: u64,
    /// The most refused submissions the server keeps per user: past it, that user's oldest
    /// refusals are removed as new ones are stored. 0: every refusal is kept.
    pub max_kept_refusals: u64,
    /// The most connections the API keeps open in all; a connection past it is closed as it
    /// is taken. Unset: what the server's open-file limit leaves after 256 for the store and
    /// the sweeps (the server raises its soft limit to the hard one as it starts).
    pub max_connections: Option<u32>,
    /// The most connections one peer (an address, an IPv6 /64, or a local user's Unix account:
    /// `crate::peer`) may keep open; past it, its new connections are closed as they are taken,
    /// so that no one peer can use up the server's file descriptors. Node agents, `libra`
    /// commands and hosted sweeps each hold a few.
    pub max_connections_per_address: u32,
    /// Seconds a connection has to send a request's header, from its opening or its last
    /// answer (an idle keep-alive connection is closed then).
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub header_timeout: f64,
    /// What runs the admitted jobs: Libra's own node agents, or an existing Slurm cluster.
    pub executor: ExecutorConfig,
}

/// What carries out the scheduler's decisions on the nodes (`[executor]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Libra's node agents (`libra node`) launch and control the jobs.
    #[default]
    Libra,
    /// Each admitted job is handed to Slurm (`sbatch` as its owner, on the node Libra chose);
    /// the agents beside slurmd (`libra node --slurm`) enforce the shares.
    Slurm,
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExecutorKind::Libra => "libra",
            ExecutorKind::Slurm => "slurm",
        })
    }
}

/// `[pricing]` as the file writes it: a misspelt or misplaced key (`betta`, or `period` written
/// under `[server.pricing]`) is refused by name like any other, not silently ignored.
/// (`PricingParams` itself stays lenient: it is also read from the store and the API.)
fn strict_pricing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PricingParams, D::Error> {
    #[derive(Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Strict {
        alpha: f64,
        beta: f64,
        libra_gamma: f64,
        libra_delta: f64,
    }
    impl Default for Strict {
        fn default() -> Self {
            let p = PricingParams::default();
            Strict { alpha: p.alpha, beta: p.beta, libra_gamma: p.libra_gamma, libra_delta: p.libra_delta }
        }
    }
    let s = Strict::deserialize(d)?;
    Ok(PricingParams { alpha: s.alpha, beta: s.beta, libra_gamma: s.libra_gamma, libra_delta: s.libra_delta })
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorConfig {
    /// `libra` (the default) or `slurm`.
    pub kind: ExecutorKind,
    /// Slurm: the partition Libra owns (OverSubscribe=FORCE:N in slurm.conf).
    pub partition: String,
    /// Slurm: the most Libra jobs one node runs at once, Slurm's OverSubscribe=FORCE:N. Admission
    /// counts them, or an admitted job would wait in Slurm's queue and miss its deadline.
    pub jobs_per_node: u32,
    /// Slurm: memory given to a job that asked for none, MB (Slurm would otherwise give it the
    /// whole node and no other job could share it). Admission counts it too.
    pub default_mem_mb: u64,
    /// Slurm: where sbatch, squeue, scancel and scontrol are (absent: found on PATH).
    pub bin_dir: Option<PathBuf>,
    /// Slurm: the file holding the secret the jobcomp script presents when it reports a job's
    /// end (`libra slurm jobcomp-lua`); readable only by root and SlurmUser.
    pub jobcomp_token_file: Option<PathBuf>,
    /// Slurm: seconds to wait, after Slurm reported a job's end, for the node agent's final CPU
    /// figure before the job is settled with the CPU last reported.
    #[serde(deserialize_with = "libra_api::duration::seconds")]
    pub jobcomp_grace: f64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            kind: ExecutorKind::Libra,
            partition: "libra".into(),
            jobs_per_node: 4,
            default_mem_mb: 512,
            bin_dir: None,
            jobcomp_token_file: None,
            jobcomp_grace: 30.0,
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("log_format: '{other}' is not a log format; accepted: text, json")),
        }
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// The output a user's jobs may keep on the server by default: about a thousand jobs' worth of
/// a page of output each, or one job's whole kept MiB a thousand times over.
pub const DEFAULT_OUTPUT_QUOTA_MB: u64 = 1024;
/// 10 TiB: past it a quota would be no bound at all.
pub const MAX_OUTPUT_QUOTA_MB: u64 = 10 * 1024 * 1024;

/// The commands a user's jobs may keep whole on the server by default: about a hundred
/// thousand job scripts of a few KiB, or a thousand of the longest a submission may send.
pub const DEFAULT_COMMAND_QUOTA_MB: u64 = 256;

/// Refused submissions kept per user by default: at most about 20 MB of the store (a refusal
/// keeps at most a KiB of its command, with its reason and suggestion), and the last few
/// minutes of refusals even of a user refused at `submit_rate`.
pub const DEFAULT_MAX_KEPT_REFUSALS: u64 = 10_000;
/// Past it a bound would be no bound at all.
pub const MAX_MAX_KEPT_REFUSALS: u64 = 100_000_000;

/// Settings that a reload (SIGHUP) applies to a running server; any other change needs a
/// restart. Pricing, policy and placement are what `libra admin pricing|policy` change live
/// anyway; the node timeout, the log level and the retentions only change what happens next.
pub const RELOADABLE: &[&str] = &[
    "policy",
    "placement",
    "pricing.alpha",
    "pricing.beta",
    "pricing.libra_gamma",
    "pricing.libra_delta",
    "node_timeout",
    "log_level",
    "audit_keep_days",
    "output_keep_days",
    "output_quota_mb",
    "command_quota_mb",
    "max_kept_refusals",
];

/// Every setting as (dotted key, value), unset options as null: what `--print-config` shows
/// and what a reload compares.
pub fn flatten(v: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&key, v, out);
                }
            }
            other => out.push((prefix.to_string(), other.clone())),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out
}
/// The defaults of the accounts' limits (README: "Accounts, tokens and limits").
pub const DEFAULT_TOKEN_TTL: f64 = 30.0 * 86_400.0;
pub const DEFAULT_MAX_ACTIVE_JOBS: u32 = 1000;
/// Login tokens kept per user: a token a login on every machine, every day of a month, with
/// room to spare.
pub const DEFAULT_MAX_TOKENS_PER_USER: u32 = 1000;
/// Each hosted sweep not over has an engine thread in the server.
pub const DEFAULT_MAX_ACTIVE_SWEEPS: u32 = 10;
/// Ended hosted sweeps kept per user: each keeps its plan (up to 256 KiB) and its jobs' records
/// (up to 100,000); creating and cancelling sweeps costs no credit.
pub const DEFAULT_MAX_KEPT_SWEEPS: u32 = 100;
pub const DEFAULT_SUBMIT_RATE: f64 = 50.0;
pub const DEFAULT_SUBMIT_BURST: u32 = 500;
/// Reads per second one user may make on average (`read_rate`), and at once (`read_burst`): a
/// status of a hosted sweep takes the server about 0.4 ms whatever its size, and a read that
/// grows with its rows counts one per 1,000, so one user's reads at the default rate take
/// about a twentieth of a core. A broker's `libra` resource asks after all its
/// jobs on a cluster by their ids in one request twice a second (`libra_broker`'s `cluster_poll`).
pub const DEFAULT_READ_RATE: f64 = 100.0;
pub const DEFAULT_READ_BURST: u32 = 1000;
/// Plan jobs per second per user: a sweep of the largest plan (100,000 jobs) every 100 s, one
/// of 1,000 jobs every second; a loop of creations writes about 65 KB/s rather than the 6.5 MB/s
/// it could unbounded.
pub const DEFAULT_SWEEP_JOB_RATE: f64 = 1000.0;
/// The audit log's window for repeated refusals, seconds: a flood of refused requests (bad
/// tokens, a rate-limited client) costs one write per window, not one per request.
pub const DEFAULT_AUDIT_REPEAT_WINDOW: f64 = 10.0;
/// Connections one peer (an address, or a local user) may keep open: far more than a login
/// node's users' commands and its agent hold at once, far fewer than the server's file
/// descriptors.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: u32 = 256;
/// Seconds a connection has to send a request's header (hyper's own default).
pub const DEFAULT_HEADER_TIMEOUT: f64 = 30.0;

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:7878".into(),
            tls_cert: None,
            tls_key: None,
            tls_self_signed: false,
            db: PathBuf::from("libra.db"),
            broker_db: None,
            join_token: String::new(),
            admin_password: None,
            policy: "libra+$".into(),
            placement: None,
            pricing: PricingParams::default(),
            default_price_base: 1.0,
            node_timeout: 15.0,
            period: 2.0,
            sync_full: true,
            sweep_clusters: Vec::new(),
            log_level: "info".into(),
            log_format: LogFormat::Text,
            sweep_keeper: None,
            token_ttl: DEFAULT_TOKEN_TTL,
            max_tokens_per_user: DEFAULT_MAX_TOKENS_PER_USER,
            max_active_jobs: DEFAULT_MAX_ACTIVE_JOBS,
            max_active_sweeps: DEFAULT_MAX_ACTIVE_SWEEPS,
            max_kept_sweeps: DEFAULT_MAX_KEPT_SWEEPS,
            submit_rate: DEFAULT_SUBMIT_RATE,
            submit_burst: DEFAULT_SUBMIT_BURST,
            read_rate: DEFAULT_READ_RATE,
            read_burst: DEFAULT_READ_BURST,
            sweep_job_rate: DEFAULT_SWEEP_JOB_RATE,
            audit_repeat_window: DEFAULT_AUDIT_REPEAT_WINDOW,
            audit_keep_days: None,
            output_keep_days: None,
            output_quota_mb: DEFAULT_OUTPUT_QUOTA_MB,
            command_quota_mb: DEFAULT_COMMAND_QUOTA_MB,
            max_kept_refusals: DEFAULT_MAX_KEPT_REFUSALS,
            max_connections: None,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            executor: ExecutorConfig::default(),
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::Config { path: path.display().to_string(), msg: e.to_string() })?;
        toml::from_str(&text)
            .map_err(|e| ServerError::Config { path: path.display().to_string(), msg: e.to_string() })
    }

    /// Where the hosted sweeps' broker database is. In a directory of its own by default: the
    /// standalone `libra sweep` keeps its `broker.db` and `experiments/<id>` in the user's data
    /// directory, often the server's too, and two databases numbering experiments in one
    /// `experiments` directory would share their files.
    pub fn broker_db(&self) -> PathBuf {
        self.broker_db.clone().unwrap_or_else(|| self.db.with_file_name("sweeps").join("broker.db"))
    }

    /// Every setting as (dotted key, value).
    pub fn settings(&self) -> Vec<(String, serde_json::Value)> {
        flatten(&serde_json::to_value(self).unwrap_or_default())
    }

    pub fn validate(&self) -> Result<(), ServerError> {
        if self.join_token.len() < 8 {
            return Err(ServerError::Invalid(
                "join_token: give a cluster join token of at least 8 characters (--join-token-file FILE, LIBRA_JOIN_TOKEN, or join_token in the configuration file)".into(),
            ));
        }
        match (&self.tls_cert, &self.tls_key, self.tls_self_signed) {
            (Some(_), None, _) | (None, Some(_), _) => {
                return Err(ServerError::Invalid(
                    "tls_cert, tls_key: give both (the certificate chain and its private key, PEM files), or neither".into(),
                ))
            }
            (Some(_), Some(_), true) => {
                return Err(ServerError::Invalid(
                    "tls_self_signed: give either a certificate (tls_cert and tls_key) or tls_self_signed, not both".into(),
                ))
            }
            _ => {}
        }
        if !(self.node_timeout > 0.0 && self.node_timeout <= 86_400.0) {
            return Err(ServerError::Invalid(format!(
                "node_timeout: {} is not accepted: give seconds above 0 and at most 86400",
                Shown(self.node_timeout)
            )));
        }
        if !(self.period >= 0.05 && self.period <= 3600.0) {
            return Err(ServerError::Invalid(format!(
                "period: {} is not accepted: give seconds between 0.05 and 3600",
                Shown(self.period)
            )));
        }
        if !(self.default_price_base >= 0.0 && self.default_price_base < 1e9) {
            return Err(ServerError::Invalid(format!(
                "default_price_base: {} is not accepted: give a price from 0 to below 1e9",
                Shown(self.default_price_base)
            )));
        }
        if !(self.token_ttl >= 1.0 && self.token_ttl <= 10.0 * 365.0 * 86_400.0) {
            return Err(ServerError::Invalid(format!(
                "token_ttl: {} is not accepted: give seconds from 1 to 315360000 (ten years)",
                Shown(self.token_ttl)
            )));
        }
        if !(self.audit_repeat_window >= 0.0 && self.audit_repeat_window <= 3600.0) {
            return Err(ServerError::Invalid(format!(
                "audit_repeat_window: {} is not accepted: give seconds from 0 (write every refusal) to 3600",
                Shown(self.audit_repeat_window)
            )));
        }
        if let Some(d) = self.audit_keep_days {
            if !(1.0..=36_500.0).contains(&d) {
                return Err(ServerError::Invalid(format!(
                    "audit_keep_days: {} is not accepted: give days from 1 to 36500, or leave it unset to keep every entry",
                    Shown(d)
                )));
            }
        }
        if let Some(d) = self.output_keep_days {
            if !(1.0..=36_500.0).contains(&d) {
                return Err(ServerError::Invalid(format!(
                    "output_keep_days: {} is not accepted: give days from 1 to 36500, or leave it unset to keep every job's output",
                    Shown(d)
                )));
            }
        }
        if self.output_quota_mb > MAX_OUTPUT_QUOTA_MB {
            return Err(ServerError::Invalid(format!(
                "output_quota_mb: {} is not accepted: give MiB from 1 to {MAX_OUTPUT_QUOTA_MB}, or 0 for no quota",
                self.output_quota_mb
            )));
        }
        if self.command_quota_mb > MAX_OUTPUT_QUOTA_MB {
            return Err(ServerError::Invalid(format!(
                "command_quota_mb: {} is not accepted: give MiB from 1 to {MAX_OUTPUT_QUOTA_MB}, or 0 for no quota",
                self.command_quota_mb
            )));
        }
        if self.max_kept_refusals > MAX_MAX_KEPT_REFUSALS {
            return Err(ServerError::Invalid(format!(
                "max_kept_refusals: {} is not accepted: give the most refused submissions kept per user, 1 to {MAX_MAX_KEPT_REFUSALS}, or 0 to keep every one",
                self.max_kept_refusals
            )));
        }
        if !(1..=1_000_000).contains(&self.max_tokens_per_user) {
            return Err(ServerError::Invalid(format!(
                "max_tokens_per_user: {} is not accepted: give the most login tokens one user keeps, 1 to 1000000",
                self.max_tokens_per_user
            )));
        }
        if !(1..=10_000).contains(&self.max_active_sweeps) {
            return Err(ServerError::Invalid(format!(
                "max_active_sweeps: {} is not accepted: give the most hosted sweeps not over a user may have, 1 to 10000",
                self.max_active_sweeps
            )));
        }
        if self.max_kept_sweeps > 1_000_000 {
            return Err(ServerError::Invalid(format!(
                "max_kept_sweeps: {} is not accepted: give the most ended hosted sweeps kept per user, 1 to 1000000, or 0 to keep every one",
                self.max_kept_sweeps
            )));
        }
        if self.max_connections == Some(0) {
            return Err(ServerError::Invalid(
                "max_connections: 0 is not accepted: give the most connections the server keeps open, at least 1 (or leave it unset: what the open-file limit leaves)"
                    .into(),
            ));
        }
        if self.max_connections_per_address == 0 {
            return Err(ServerError::Invalid(
                "max_connections_per_address: 0 is not accepted: give the most connections one peer (an address, or a local user) may keep open, at least 1"
                    .into(),
            ));
        }
        if !(self.header_timeout >= 1.0 && self.header_timeout <= 3600.0) {
            return Err(ServerError::Invalid(format!(
                "header_timeout: {} is not accepted: give seconds from 1 to 3600",
                Shown(self.header_timeout)
            )));
        }
        if self.max_active_jobs == 0 {
            return Err(ServerError::Invalid(
                "max_active_jobs: 0 is not accepted: give the most active jobs a user may have, at least 1"
                    .into(),
            ));
        }
        if !(self.submit_rate > 0.0 && self.submit_rate <= 1e6) || self.submit_burst == 0 {
            return Err(ServerError::Invalid(format!(
                "submit_rate, submit_burst: {} per second, {} at once is not accepted: give a rate above 0 (at most 1e6) and a burst of at least 1",
                Shown(self.submit_rate),
                self.submit_burst
            )));
        }
        if !(self.read_rate > 0.0 && self.read_rate <= 1e6) || self.read_burst == 0 {
            return Err(ServerError::Invalid(format!(
                "read_rate, read_burst: {} per second, {} at once is not accepted: give a rate above 0 (at most 1e6) and a burst of at least 1",
                Shown(self.read_rate),
                self.read_burst
            )));
        }
        if !(self.sweep_job_rate > 0.0 && self.sweep_job_rate <= 1e7) {
            return Err(ServerError::Invalid(format!(
                "sweep_job_rate: {} is not accepted: give the jobs of hosted sweeps one user may create or run again per second, above 0 and at most 1e7",
                Shown(self.sweep_job_rate)
            )));
        }
        libra_core::policy::build_policy_with(&self.policy, self.pricing, self.placement)
            .map_err(|e| ServerError::Invalid(e.to_string()))?;
        self.executor.validate()?;
        for c in &self.sweep_clusters {
            crate::sweeps::origin(c).map_err(|e| ServerError::Invalid(format!("sweep_clusters: {e}")))?;
        }
        Ok(())
    }
}

impl ExecutorConfig {
    pub fn validate(&self) -> Result<(), ServerError> {
        if !(1..=64).contains(&self.jobs_per_node) {
            return Err(ServerError::Invalid(format!(
                "executor.jobs_per_node: {} is not accepted: give Slurm's OverSubscribe=FORCE:N count, 1 to 64",
                self.jobs_per_node
            )));
        }
        if self.partition.is_empty()
            || !self.partition.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ServerError::Invalid(format!(
                "executor.partition: '{}' is not accepted: give a Slurm partition name (letters, digits, '-', '_', '.')",
                self.partition
            )));
        }
        if !(self.jobcomp_grace >= 0.0 && self.jobcomp_grace <= 86_400.0) {
            return Err(ServerError::Invalid(format!(
                "executor.jobcomp_grace: {} is not accepted: give seconds from 0 to 86400",
                self.jobcomp_grace
            )));
        }
        if self.kind == ExecutorKind::Slurm && self.jobcomp_token_file.is_none() {
            return Err(ServerError::Invalid(
                "executor.jobcomp_token_file: kind = \"slurm\" needs the file holding the secret Slurm's jobcomp script presents \
                 (make one with `libra slurm jobcomp-lua --token-file FILE`)"
                    .into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_fields_override_defaults_and_unknown_fields_are_refused() {
        let c: Config = toml::from_str("policy = \"libra\"\nnode_timeout = 3.5\n[pricing]\nalpha = 2.0\nbeta = 0.5\nlibra_gamma = 1.0\nlibra_delta = 1.0\n").unwrap();
        assert_eq!(c.policy, "libra");
        assert_eq!(c.node_timeout, 3.5);
        assert_eq!(c.pricing.alpha, 2.0);
        assert_eq!(c.listen, Config::default().listen);
        assert!(toml::from_str::<Config>("nonsense = 1").is_err());
        // Inside a table too: a key written under [pricing] that belongs elsewhere is named.
        let e = toml::from_str::<Config>("[pricing]\nbeta = 0.3\nperiod = 3.0\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `period`"), "{e}");
        let c: Config = toml::from_str("[pricing]\nbeta = 0.3\n").unwrap();
        assert_eq!(
            (c.pricing.alpha, c.pricing.beta),
            (1.0, 0.3),
            "the rest of a partial table is the default"
        );
        let mut c = Config { join_token: "short".into(), ..Config::default() };
        assert!(c.validate().unwrap_err().to_string().starts_with("join_token"));
        c.join_token = "long enough".into();
        c.validate().unwrap();
        c.policy = "nope".into();
        assert!(c.validate().is_err());
    }

    #[test]
    fn placement_is_read_and_checked_against_the_policy() {
        let c: Config = toml::from_str("policy = \"libra+$\"\nplacement = \"cheapest\"\n").unwrap();
        assert_eq!(c.placement, Some(Placement::Cheapest));
        assert_eq!(toml::from_str::<Config>("").unwrap().placement, None);
        let e = toml::from_str::<Config>("placement = \"worst-fit\"").unwrap_err().to_string();
        assert!(e.contains("placement") && e.contains("best-fit") && e.contains("cheapest"), "{e}");
        // A space-shared policy has no node choice to make.
        let c = Config { join_token: "long enough".into(), policy: "fcfs-bf".into(), ..c };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with("placement:"), "{e}");
    }

    #[test]
    fn hosted_sweeps_have_a_directory_of_their_own() {
        let c = Config { db: PathBuf::from("/var/lib/libra/server.db"), ..Config::default() };
        assert_eq!(c.broker_db(), PathBuf::from("/var/lib/libra/sweeps/broker.db"));
        let c = Config { broker_db: Some("/b.db".into()), ..c };
        assert_eq!(c.broker_db(), PathBuf::from("/b.db"));
    }

    #[test]
    fn the_output_command_and_refusal_bounds_are_on_by_default_and_checked() {
        let c = Config { join_token: "long enough".into(), ..toml::from_str::<Config>("").unwrap() };
        let c0 = c.clone();
        assert_eq!(c.output_quota_mb, DEFAULT_OUTPUT_QUOTA_MB);
        c.validate().unwrap();
        Config { output_quota_mb: 0, ..c.clone() }.validate().unwrap();
        let e = Config { output_quota_mb: MAX_OUTPUT_QUOTA_MB + 1, ..c }.validate().unwrap_err().to_string();
        assert!(e.starts_with("output_quota_mb: 10485761 is not accepted: give MiB from 1 to"), "{e}");
        let e = toml::from_str::<Config>("output_quota_mb = -5").unwrap_err().to_string();
        assert!(e.contains("output_quota_mb"), "{e}");
        assert_eq!(c0.command_quota_mb, DEFAULT_COMMAND_QUOTA_MB);
        Config { command_quota_mb: 0, ..c0.clone() }.validate().unwrap();
        assert_eq!(c0.max_kept_refusals, DEFAULT_MAX_KEPT_REFUSALS);
        Config { max_kept_refusals: 0, ..c0.clone() }.validate().unwrap();
        let e = Config { max_kept_refusals: MAX_MAX_KEPT_REFUSALS + 1, ..c0.clone() }
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("max_kept_refusals: 100000001 is not accepted: give the most refused"), "{e}");
        let e = toml::from_str::<Config>("max_kept_refusals = -1").unwrap_err().to_string();
        assert!(e.contains("max_kept_refusals"), "{e}");
        assert_eq!(c0.max_tokens_per_user, DEFAULT_MAX_TOKENS_PER_USER);
        let e = Config { max_tokens_per_user: 0, ..c0.clone() }.validate().unwrap_err().to_string();
        assert!(e.starts_with("max_tokens_per_user: 0 is not accepted"), "{e}");
        assert_eq!(c0.max_kept_sweeps, DEFAULT_MAX_KEPT_SWEEPS);
        Config { max_kept_sweeps: 0, ..c0.clone() }.validate().unwrap();
        let e = Config { max_kept_sweeps: 1_000_001, ..c0.clone() }.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("max_kept_sweeps: 1000001 is not accepted: give the most ended hosted sweeps"),
            "{e}"
        );
        assert_eq!(c0.sweep_job_rate, DEFAULT_SWEEP_JOB_RATE);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e8] {
            let e = Config { sweep_job_rate: bad, ..c0.clone() }.validate().unwrap_err().to_string();
            assert!(e.starts_with("sweep_job_rate: ") && e.contains("is not accepted: give the jobs"), "{e}");
        }
        let c: Config = toml::from_str("sweep_job_rate = 0.5").unwrap();
        Config { sweep_job_rate: c.sweep_job_rate, ..c0.clone() }.validate().unwrap();
        let e = toml::from_str::<Config>("sweep_job_rate = \"fast\"").unwrap_err().to_string();
        assert!(e.contains("sweep_job_rate"), "{e}");
        assert_eq!((c0.read_rate, c0.read_burst), (DEFAULT_READ_RATE, DEFAULT_READ_BURST));
        for (rate, burst) in [(0.0, 1), (-1.0, 1), (f64::NAN, 1), (f64::INFINITY, 1), (2e6, 1), (1.0, 0)] {
            let e = Config { read_rate: rate, read_burst: burst, ..c0.clone() }
                .validate()
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("read_rate, read_burst: ") && e.contains("is not accepted: give a rate"),
                "{e}"
            );
        }
        let c: Config = toml::from_str("read_rate = 0.5\nread_burst = 3").unwrap();
        Config { read_rate: c.read_rate, read_burst: c.read_burst, ..c0.clone() }.validate().unwrap();
        let e = toml::from_str::<Config>("read_burst = -1").unwrap_err().to_string();
        assert!(e.contains("read_burst"), "{e}");
        let e =
            Config { command_quota_mb: MAX_OUTPUT_QUOTA_MB + 1, ..c0 }.validate().unwrap_err().to_string();
        assert!(e.starts_with("command_quota_mb: 10485761 is not accepted: give MiB from 1 to"), "{e}");
        let e = toml::from_str::<Config>("command_quota_mb = 1.5").unwrap_err().to_string();
        assert!(e.contains("command_quota_mb"), "{e}");
    }
}
