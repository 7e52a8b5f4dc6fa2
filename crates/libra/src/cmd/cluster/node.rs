//! `libra node`: the node agent.

use super::common::data_dir;
use super::settings::{load_section, print, settings_of, Sources};
use anyhow::{Context, Result};
use clap::Args;
use libra_node::{Agent, AgentConfig};
use libra_server::config::LogFormat;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// Configuration file (TOML): the [node] table of the site's file (see CONFIGURATION.md).
    /// Every setting in it can be overridden by the flags below.
    #[arg(long, env = "LIBRA_NODE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The server's URL (required here or as `server` in the file).
    #[arg(long, env = "LIBRA_SERVER")]
    pub server: Option<String>,
    /// The cluster's join token (required here or as `join_token` in the file).
    #[arg(long, env = "LIBRA_JOIN_TOKEN", hide_env_values = true)]
    pub join_token: Option<String>,
    /// Capacity in CPUs (default: all cores). Several agents on one machine each get their own
    /// capped control group, so `--cpus 0.5` four times on a 2-core machine makes a four-node
    /// cluster whose nodes do not steal from each other.
    #[arg(long)]
    pub cpus: Option<f64>,
    /// Memory offered to jobs, MB (default: 0, not limited).
    #[arg(long)]
    pub mem_mb: Option<u64>,
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
    /// Print the configuration in force (file, flags, environment, defaults) with the source of
    /// each value, and exit. Secrets are not shown.
    #[arg(long)]
    pub print_config: bool,
    /// With --print-config: as JSON.
    #[arg(long, requires = "print_config")]
    pub json: bool,
}

/// The node agent's settings: the `[node]` table of the site's configuration file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// The server's URL.
    pub server: Option<String>,
    /// The cluster's join token.
    pub join_token: Option<String>,
    /// The node's name (default: the host name).
    pub name: Option<String>,
    /// Capacity in CPUs (default: all cores).
    pub cpus: Option<f64>,
    /// Memory offered to jobs, MB (0: not limited).
    pub mem_mb: u64,
    /// Where jobs get their working directories.
    pub workdir: Option<PathBuf>,
    /// Share enforcement: auto, cgroup-v2, cgroup-v1, stride or none.
    pub mechanism: String,
    /// Job-control period, seconds (default: what the server asks for).
    pub period: Option<f64>,
    pub log_level: String,
    pub log_format: LogFormat,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            server: None,
            join_token: None,
            name: None,
            cpus: None,
            mem_mb: 0,
            workdir: None,
            mechanism: "auto".into(),
            period: None,
            log_level: "info".into(),
            log_format: LogFormat::Text,
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
    if let Some(v) = &a.join_token {
        s.join_token = Some(v.clone());
        src.flag("join_token", "join-token", Some(("LIBRA_JOIN_TOKEN", v)));
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
    if s.join_token.as_deref().unwrap_or("").is_empty() {
        return Some(
            "join_token: give the cluster's join token (--join-token, LIBRA_JOIN_TOKEN or join_token in [node])"
                .into(),
        );
    }
    if let Some(c) = s.cpus.filter(|c| !(*c > 0.0 && *c <= 4096.0)) {
        return Some(format!("cpus: {c} is not accepted: give a capacity between 0 and 4096 CPUs"));
    }
    if let Some(p) = s.period.filter(|p| p.is_nan() || *p <= 0.0) {
        return Some(format!("period: {p} is not accepted: give a positive number of seconds"));
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
    if a.print_config {
        return print("node", settings_of(&s), &sources, problems(&s), a.json);
    }
    if let Some(p) = problems(&s) {
        anyhow::bail!(p);
    }
    crate::logging::init(&s.log_level, s.log_format).map_err(|e| anyhow::anyhow!("log_level: {e}"))?;
    let name = s.name.unwrap_or_else(hostname);
    let cpus =
        s.cpus.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0));
    let workdir = match s.workdir {
        Some(w) => w,
        None => data_dir()?.join(format!("node-{name}")),
    };
    let mut agent = Agent::new(AgentConfig {
        server: s.server.unwrap_or_default(),
        join_token: s.join_token.unwrap_or_default(),
        name: name.clone(),
        cpus,
        mem_mb: s.mem_mb,
        workdir,
        mechanism: s.mechanism,
        period: s.period,
        // This very binary keeps the jobs (`libra job-keeper`).
        keeper: Some(std::env::current_exe().context("finding the libra binary to keep jobs with")?),
    })?;
    eprintln!("libra node {name}: {cpus} CPUs, enforcing shares with {}", agent.mechanism());
    agent.run(|| false)?;
    Ok(())
}
