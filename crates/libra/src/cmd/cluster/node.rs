//! `libra node`: the node agent.

use super::common::{data_dir, SecretSource};
use super::settings::{load_section, print, settings_of, PrintConfig, Sources};
use anyhow::{Context, Result};
use clap::Args;
use libra_node::{Agent, AgentConfig};
use libra_server::config::LogFormat;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "The join token admits a new node once: the server then gives the node a credential of its own, \
saved in node.credential (mode 0600) in the work directory, which the agent uses from then on (the join token \
file may then be removed). Secrets are never taken on the command line, where every user can read them.\n\n\
Example:\n  libra node --server https://manager:7878 --ca /etc/libra/cert.pem --join-token-file /etc/libra/join-token"
)]
pub struct NodeArgs {
    /// Configuration file (TOML): the `[node]` table of the site's file (see CONFIGURATION.md).
    /// Every setting in it can be overridden by the flags below.
    #[arg(long, env = "LIBRA_NODE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The server's URL: https://HOST:PORT, or http:// on this machine (another machine over
    /// plain http needs --insecure-http). Required here or as `server` in the file.
    #[arg(long, env = "LIBRA_SERVER")]
    pub server: Option<String>,
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
    /// Memory offered to jobs, MB (default: 0, not limited): admission counts jobs' --mem
    /// against it, and the node's memory group (every job's parent) is held to it, so the jobs
    /// together never take more.
    #[arg(long, value_parser = crate::cmd::parse_count)]
    pub mem_mb: Option<u64>,
    /// The size in MiB of the file system of its own each job given no working directory runs
    /// in (a sparse ext4 image on a loop device, so no job can fill the work directory's disk):
    /// from 4 to 16777216, or 0 for plain directories, not limited. Default: 1024 where the
    /// agent can mount (it runs as root), plain directories elsewhere. When given, the agent
    /// does not start where it cannot make them.
    #[arg(long, value_parser = crate::cmd::parse_count, value_name = "MIB")]
    pub scratch_mb: Option<u64>,
    /// How many jobs' scratch file systems the agent keeps made ahead, so that a job's start
    /// binds one instead of making it (which reads through a loop device, slow on a busy
    /// machine): from 0 (each made at its job's start) to 64. Default: 2.
    #[arg(long, value_parser = crate::cmd::parse_count, value_name = "N")]
    pub scratch_ahead: Option<u64>,
    /// Give each job a /tmp and /var/tmp of its own of this many MiB, in memory (a tmpfs in a
    /// mount namespace of the job's, charged to its memory), a /dev/shm of the same size and
    /// System V IPC of its own: no job sees another's files or shared memory there or fills the
    /// node's /tmp, and they go when the job ends. 0 or unset: the node's /tmp,
    /// shared. Root only; jobs whose directory or output files are under /tmp cannot start.
    #[arg(long, value_parser = crate::cmd::parse_count, value_name = "MIB")]
    pub tmp_mb: Option<u64>,
    /// The most processes and threads one account's jobs may have on this node at once, all its
    /// jobs together (the kernel's per-account limit, set on each job as it starts, which the
    /// job cannot raise): a job that forks without end meets "Resource temporarily unavailable"
    /// and every other user's jobs go on. From 16 to 4194304, or 0 for no limit. Default: a
    /// third of the node's process ids (kernel.pid_max), at most 32768. Jobs that run as root
    /// are not limited.
    #[arg(long, value_parser = crate::cmd::parse_count, value_name = "N")]
    pub max_tasks: Option<u64>,
    /// The node's name (default: the host name). It must stay the same across restarts.
    #[arg(long)]
    pub name: Option<String>,
    /// Where jobs get their working directories (default: the user's data directory).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Share enforcement: auto (cgroup v2, else cgroup v1, else stride; the default),
    /// cgroup-v2, cgroup-v1, stride (SIGSTOP/SIGCONT in user space) or none.
    #[arg(long)]
    pub mechanism: Option<String>,
    /// Job-control period: 2, 500ms, 2s (default: what the server asks for).
    #[arg(long, value_parser = crate::cmd::time::parse_positive_duration)]
    pub period: Option<f64>,
    /// What the agent logs: error, warn, info (the default), debug, trace, or a filter.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Run beside slurmd on a node of Libra's Slurm partition (the server's `[executor] kind =
    /// "slurm"`): Slurm launches the jobs, this agent adopts each one the server names (its
    /// processes, found with `scontrol listpids` every period, kept in a CPU group of the
    /// agent's with a quota of share x period) and reports its CPU and its end. --name is the
    /// Slurm node name (default: the host name); --cpus and --mem-mb default to what Slurm
    /// says of the node.
    #[arg(long)]
    pub slurm: bool,
    /// Where scontrol and squeue are (default: PATH).
    #[arg(long, value_name = "DIR")]
    pub slurm_bin_dir: Option<PathBuf>,
    #[command(flatten)]
    pub show: PrintConfig,
}

/// The node agent's settings: the `[node]` table of the site's configuration file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// The server's URL.
    pub server: Option<String>,
    /// A file holding the cluster's join token (secrets stay out of this file and off command
    /// lines).
    pub join_token_file: Option<PathBuf>,
    /// A PEM file the server's TLS certificate is checked against.
    pub ca: Option<PathBuf>,
    /// Allow plain http to a server on another machine.
    pub insecure_http: bool,
    /// The node's name (default: the host name).
    pub name: Option<String>,
    /// Capacity in CPUs (default: all cores).
    pub cpus: Option<f64>,
    /// Memory offered to jobs, MB (0: not limited).
    pub mem_mb: u64,
    /// Where jobs get their working directories.
    pub workdir: Option<PathBuf>,
    /// The size in MiB of each job's scratch file system (0: plain directories; default: 1024
    /// where the agent can mount, plain directories elsewhere).
    pub scratch_mb: Option<u64>,
    /// Scratch file systems kept made ahead (default 2; 0: none).
    pub scratch_ahead: Option<usize>,
    /// Each job's own /tmp, MiB (0 or unset: the node's).
    pub tmp_mb: Option<u64>,
    /// The most processes and threads one account's jobs may have on the node (0: no limit;
    /// default: a third of kernel.pid_max, at most 32768).
    pub max_tasks: Option<u64>,
    /// Share enforcement: auto, cgroup-v2, cgroup-v1, stride or none.
    pub mechanism: String,
    /// Job-control period, seconds (default: what the server asks for).
    #[serde(deserialize_with = "libra_api::duration::seconds_opt")]
    pub period: Option<f64>,
    pub log_level: String,
    pub log_format: LogFormat,
    /// Beside slurmd: adopt the jobs Slurm launches instead of launching them.
    pub slurm: bool,
    /// Where scontrol and squeue are (default: PATH).
    pub slurm_bin_dir: Option<PathBuf>,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            server: None,
            join_token_file: None,
            ca: None,
            insecure_http: false,
            name: None,
            cpus: None,
            mem_mb: 0,
            workdir: None,
            scratch_mb: None,
            scratch_ahead: None,
            tmp_mb: None,
            max_tasks: None,
            mechanism: "auto".into(),
            period: None,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            slurm: false,
            slurm_bin_dir: None,
        }
    }
}

fn settings(a: &NodeArgs) -> Result<(NodeSettings, Sources)> {
    let mut src = Sources::default();
    let mut s = match &a.config {
        Some(p) => {
            let sec = load_section::<NodeSettings>(p, "node")?;
            src.file(p, &sec.keys);
            sec.value
        }
        None => NodeSettings::default(),
    };
    if let Some(v) = &a.server {
        s.server = Some(v.clone());
        src.flag("server", "server", Some(("LIBRA_SERVER", v)));
    }
    if let Some(v) = &a.join_token_file {
        s.join_token_file = Some(v.clone());
        src.flag("join_token_file", "join-token-file", None);
    }
    if let Some(v) = &a.ca {
        s.ca = Some(v.clone());
        src.flag("ca", "ca", Some(("LIBRA_CA", &v.display().to_string())));
    }
    if a.insecure_http {
        s.insecure_http = true;
        src.flag("insecure_http", "insecure-http", None);
    }
    if let Some(v) = a.cpus {
        s.cpus = Some(v);
        src.flag("cpus", "cpus", None);
    }
    if let Some(v) = a.mem_mb {
        s.mem_mb = v;
        src.flag("mem_mb", "mem-mb", None);
    }
    if let Some(v) = &a.name {
        s.name = Some(v.clone());
        src.flag("name", "name", None);
    }
    if let Some(v) = &a.workdir {
        s.workdir = Some(v.clone());
        src.flag("workdir", "workdir", None);
    }
    if let Some(v) = a.scratch_mb {
        s.scratch_mb = Some(v);
        src.flag("scratch_mb", "scratch-mb", None);
    }
    if let Some(v) = a.scratch_ahead {
        s.scratch_ahead = Some(usize::try_from(v).unwrap_or(usize::MAX));
        src.flag("scratch_ahead", "scratch-ahead", None);
    }
    if let Some(v) = a.tmp_mb {
        s.tmp_mb = Some(v);
        src.flag("tmp_mb", "tmp-mb", None);
    }
    if let Some(v) = a.max_tasks {
        s.max_tasks = Some(v);
        src.flag("max_tasks", "max-tasks", None);
    }
    if let Some(v) = &a.mechanism {
        s.mechanism = v.clone();
        src.flag("mechanism", "mechanism", None);
    }
    if let Some(v) = a.period {
        s.period = Some(v);
        src.flag("period", "period", None);
    }
    if let Some(v) = &a.log_level {
        s.log_level = v.clone();
        src.flag("log_level", "log-level", None);
    }
    if a.slurm {
        s.slurm = true;
        src.flag("slurm", "slurm", None);
    }
    if let Some(v) = &a.slurm_bin_dir {
        s.slurm_bin_dir = Some(v.clone());
        src.flag("slurm_bin_dir", "slurm-bin-dir", None);
    }
    if let Some(v) = crate::logging::flag_format() {
        s.log_format = v;
        src.flag("log_format", "log-format", Some(("LIBRA_LOG_FORMAT", &v.to_string())));
    }
    Ok((s, src))
}

fn problems(s: &NodeSettings) -> Option<String> {
    if s.server.as_deref().unwrap_or("").is_empty() {
        return Some("server: give the server's URL (--server, LIBRA_SERVER or server in [node])".into());
    }
    if let Some(c) = s.cpus.filter(|c| !(*c > 0.0 && *c <= 4096.0)) {
        return Some(format!(
            "cpus: {} is not accepted: give a capacity above 0 and at most 4096 CPUs (fractions allowed, e.g. 0.5)",
            libra_core::Shown(c)
        ));
    }
    use libra_node::scratch::{MAX_MB, MIN_MB};
    if let Some(mb) = s.scratch_mb.filter(|mb| *mb != 0 && !(MIN_MB..=MAX_MB).contains(mb)) {
        return Some(format!(
            "scratch_mb: {mb} is not accepted: give 0 (plain directories, not limited) or from {MIN_MB} to {MAX_MB} MiB"
        ));
    }
    use libra_node::scratch_pool::MAX_READY;
    if let Some(n) = s.scratch_ahead.filter(|n| *n > MAX_READY) {
        return Some(format!(
            "scratch_ahead: {n} is not accepted: give from 0 (each job's scratch made at its start) to {MAX_READY}"
        ));
    }
    if let Some(mb) = s.tmp_mb.filter(|mb| *mb > MAX_MB) {
        return Some(format!(
            "tmp_mb: {mb} is not accepted: give 0 (the node's /tmp) or at most {MAX_MB} MiB"
        ));
    }
    use libra_node::agent::{MAX_MAX_TASKS, MIN_MAX_TASKS};
    if let Some(n) = s.max_tasks.filter(|n| *n != 0 && !(MIN_MAX_TASKS..=MAX_MAX_TASKS).contains(n)) {
        return Some(format!(
            "max_tasks: {n} is not accepted: give 0 (no limit) or from {MIN_MAX_TASKS} to {MAX_MAX_TASKS} processes and threads"
        ));
    }
    if let Some(p) = s.period.filter(|p| p.is_nan() || *p <= 0.0) {
        return Some(format!(
            "period: {} is not accepted: give a positive number of seconds",
            libra_core::Shown(p)
        ));
    }
    crate::logging::check_level(&s.log_level).err()
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
    let (s, sources) = settings(&a)?;
    if a.show.print_config {
        return print("node", settings_of(&s), &sources, problems(&s), a.show.json);
    }
    if let Some(p) = problems(&s) {
        anyhow::bail!(p);
    }
    crate::logging::init(&s.log_level, s.log_format).map_err(|e| anyhow::anyhow!("log_level: {e}"))?;
    let name = s.name.unwrap_or_else(hostname);
    // The server's rule for a node's name, checked before the name makes a working directory
    // and control groups here (a name the server refuses left them behind, empty).
    if libra_server::auth::valid_user_name(&name).is_err() {
        anyhow::bail!(
            "name: '{name}' is not a valid node name: give 1 to 64 letters, digits, '-', '_' or '.' (--name, or name in [node]; the default is the host name)"
        );
    }
    let cores = std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0);
    let slurm = s.slurm.then(|| libra_node::slurm::SlurmNode { bin_dir: s.slurm_bin_dir.clone() });
    let (mut cpus, mut mem_mb) = (s.cpus, s.mem_mb);
    if let Some(sl) = &slurm {
        // The node as Slurm knows it, so that Libra admits what Slurm will run at once.
        let (c, m) = sl.node_info(&name).map_err(anyhow::Error::msg)?;
        if cpus.is_none() {
            if c > cores {
                eprintln!("warning: Slurm says node {name} has {c} CPUs; this machine has {cores}: offering {cores}");
            }
            cpus = Some(c.min(cores));
        }
        if mem_mb == 0 {
            mem_mb = m;
        }
    }
    let cpus = cpus.unwrap_or(cores);
    let workdir = match s.workdir {
        Some(w) => w,
        None => data_dir()?.join(format!("node-{name}")),
    };
    let join_token = SecretSource {
        what: "the join token",
        file_flag: "--join-token-file",
        env: "LIBRA_JOIN_TOKEN",
        value_flag: "--join-token",
    }
    .read(a.join_token.as_deref(), s.join_token_file.as_deref())?;
    let server = s.server.unwrap_or_default();
    let client = libra_api::Client::connect(&server, None, s.ca.as_deref(), s.insecure_http)?;
    let mut agent = Agent::new(AgentConfig {
        client,
        join_token,
        name: name.clone(),
        cpus,
        mem_mb,
        workdir,
        scratch_mb: s.scratch_mb,
        scratch_ahead: s.scratch_ahead,
        tmp_mb: s.tmp_mb,
        max_tasks: s.max_tasks,
        mechanism: s.mechanism,
        period: s.period,
        // This very binary keeps the jobs (`libra job-keeper`).
        keeper: Some(std::env::current_exe().context("finding the libra binary to keep jobs with")?),
        slurm,
    })?;
    eprintln!("libra node {name}: {cpus} CPUs, enforcing shares with {}", agent.mechanism());
    let stop = stop_on_signals();
    agent.run(|| stop.load(std::sync::atomic::Ordering::Relaxed))?;
    // Dropped here: what the agent keeps for itself goes (the scratch file systems made ahead);
    // the jobs run on under their keepers, for the next agent to adopt.
    drop(agent);
    tracing::info!("stopped on a signal; running jobs go on under their keepers");
    Ok(())
}

/// Set by the first SIGINT or SIGTERM (systemctl stop, `libra up` stopping): the agent stops
/// at its next turn and cleans up after itself. Another one, `SAME_STOP_MS` or more later, ends
/// it at once.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// When the first stop signal came (milliseconds of CLOCK_MONOTONIC, at least 1), 0 before.
static FIRST_STOP_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A stop sent to a whole process group (`timeout`, `kill -TERM -PGID`, a service manager)
/// reaches an agent that `libra up` started twice at once, from the sender and from `up`
/// stopping its children: signals this close to the first are that same request. Taken as
/// "now", the second one ended the agent in the middle of its clean-up, its scratch file systems
/// made ahead left mounted.
const SAME_STOP_MS: u64 = 1000;

extern "C" fn on_stop(sig: libc::c_int) {
    use std::sync::atomic::Ordering::Relaxed;
    // Only atomics, clock_gettime, signal(2) and raise(3): async-signal-safe.
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let now = (ts.tv_sec as u64).saturating_mul(1000).saturating_add(ts.tv_nsec as u64 / 1_000_000).max(1);
    STOP.store(true, Relaxed);
    match FIRST_STOP_MS.compare_exchange(0, now, Relaxed, Relaxed) {
        Ok(_) => {}
        Err(first) if now.saturating_sub(first) < SAME_STOP_MS => {}
        // SAFETY: restores the default action and raises the signal again: the process ends as
        // that signal ends it.
        Err(_) => unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        },
    }
}

fn stop_on_signals() -> &'static std::sync::atomic::AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only uses async-signal-safe calls (`on_stop`).
        unsafe {
            libc::signal(sig, on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    &STOP
}
