//! `libra sim bench`: wall time, jobs per second and peak memory of the simulator. Each case
//! runs in a fresh child process (`libra sim bench-one`) so its peak memory is its own.

use super::load::{read_trace, trace_path};
use crate::cpu::process_cpu;
use crate::output::{emit, table, Said, Text};
use anyhow::Context;
use clap::Args;
use libra_core::policy::{build_policy, POLICY_NAMES};
use libra_core::PricingParams;
use libra_sim::engine::{simulate, ClusterConfig, Replay};
use libra_sim::workload::libraplus::{generate, LibraPlusModel};
use libra_sim::workload::synthetic::SyntheticConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// SWF trace for the real-trace cases. Default: the SDSC SP2 trace in ../shared/traces.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Jobs in the synthetic trace.
    #[arg(long, default_value_t = 1_000_000)]
    pub synthetic_jobs: usize,
    /// Nodes for the synthetic trace.
    #[arg(long, default_value_t = 10_000)]
    pub synthetic_nodes: usize,
    /// Policies for the synthetic trace (comma-separated).
    #[arg(long, default_value = "libra+$,libra,edf-bf")]
    pub synthetic_policies: String,
    /// Also measure how the cost grows with jobs (10^4, 10^5) and nodes (100, 1000, 10000) under Libra+$.
    #[arg(long)]
    pub scaling: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchOneArgs {
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long)]
    policy: String,
    /// Synthetic trace of this many jobs (else the real trace, all of it).
    #[arg(long)]
    synthetic_jobs: Option<usize>,
    #[arg(long, default_value_t = 10_000)]
    nodes: usize,
    /// Also print the sha256 of every job's decision and outcome (`decisions_sha256`), taken
    /// after the timed run: two builds decide a synthetic trace alike when these match.
    #[arg(long)]
    digest: bool,
    /// Also run the engine once more with the run's own decisions made again instead of
    /// admitted (`replay_s`): the engine's own work for that schedule (events, commitments,
    /// job control), which no change to admission can save. Time-shared policies only.
    #[arg(long)]
    replay: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRow {
    pub case: String,
    pub policy: String,
    pub jobs: usize,
    pub nodes: usize,
    pub events: u64,
    /// Seconds to build the workload (read + model), not counted in jobs/s.
    pub load_s: f64,
    /// Seconds of simulation (wall time).
    pub sim_s: f64,
    /// CPU seconds of the simulation, every thread: above `sim_s` when a policy reads a large
    /// cluster's nodes on several threads.
    #[serde(default)]
    pub cpu_s: f64,
    pub jobs_per_s: f64,
    pub peak_rss_mib: f64,
    /// With `bench-one --digest`: the sha256 of the run's records as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions_sha256: Option<String>,
    /// With `bench-one --replay`: seconds (wall) of the run again with its decisions replayed,
    /// admission left out (`engine::Replay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_s: Option<f64>,
    /// With `bench-one --replay`: whether the replayed run's records are the run's own, every
    /// one (they are unless the engine is not deterministic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_same: Option<bool>,
}

/// The sha256 of `value` as JSON, hex, streamed (a million jobs' records are ~100 MB of it).
fn json_sha256<T: Serialize>(value: &T) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    serde_json::to_writer(&mut h, value)?;
    Ok(h.0.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

pub fn run_one(a: BenchOneArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let (jobs, nodes, case) = match a.synthetic_jobs {
        Some(n) => {
            let cfg = SyntheticConfig { jobs: n, nodes: a.nodes as u32, ..Default::default() };
            (cfg.generate()?, a.nodes, format!("synthetic {n} jobs / {} nodes", a.nodes))
        }
        None => {
            let path = trace_path(a.trace.clone())?;
            let (records, max_nodes) = read_trace(&path, Default::default())?;
            let model = LibraPlusModel { last_n: None, ..Default::default() };
            let nodes = max_nodes.and_then(|n| usize::try_from(n).ok()).unwrap_or(128);
            let name = path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
            (generate(&records, &model)?, nodes, format!("{name} (all jobs)"))
        }
    };
    let load_s = t0.elapsed().as_secs_f64();
    let policy = build_policy(&a.policy, PricingParams::default())?;
    if a.replay && policy.space_shared() {
        anyhow::bail!(
            "--replay: {} decides at dispatch, not at arrival, so its decisions cannot be replayed; give a time-shared policy (libra, libra+$ or one beyond them, such as libra-edf)",
            policy.name()
        );
    }
    let cluster = ClusterConfig { nodes, price_base: 1.0 };
    let (t1, cpu0) = (Instant::now(), process_cpu());
    let r = simulate(&jobs, policy.as_ref(), cluster);
    let sim_s = t1.elapsed().as_secs_f64();
    let cpu_s = process_cpu() - cpu0;
    let (replay_s, replay_same) = if a.replay {
        // A fresh instance: a policy that learns keeps state from the first run.
        let own = build_policy(&a.policy, PricingParams::default())?;
        let replay = Replay::new(own.as_ref(), &r.records);
        let t2 = Instant::now();
        let again = simulate(&jobs, &replay, cluster);
        (Some(t2.elapsed().as_secs_f64()), Some(again.records == r.records))
    } else {
        (None, None)
    };
    let row = BenchRow {
        case,
        policy: a.policy,
        jobs: jobs.len(),
        nodes,
        events: r.events,
        load_s,
        sim_s,
        cpu_s,
        jobs_per_s: jobs.len() as f64 / sim_s.max(1e-9),
        peak_rss_mib: peak_rss_mib(),
        decisions_sha256: if a.digest { Some(json_sha256(&r.records)?) } else { None },
        replay_s,
        replay_same,
    };
    println!("{}", serde_json::to_string(&row)?);
    Ok(())
}

fn child(args: &[String]) -> anyhow::Result<BenchRow> {
    let exe = std::env::current_exe().context("cannot find the libra executable")?;
    let out = std::process::Command::new(exe)
        .args(["sim", "bench-one"])
        .args(args)
        .output()
        .context("cannot start a benchmark case")?;
    anyhow::ensure!(
        out.status.success(),
        "benchmark case {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let trace = trace_path(a.trace.clone())?;
    let mut cases: Vec<Vec<String>> = POLICY_NAMES
        .iter()
        .chain(["libra-edf", "libra-risk"].iter())
        .map(|p| vec!["--trace".into(), trace.display().to_string(), "--policy".into(), p.to_string()])
        .collect();
    for p in a.synthetic_policies.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        build_policy(p, PricingParams::default())?;
        cases.push(vec![
            "--policy".into(),
            p.into(),
            "--synthetic-jobs".into(),
            a.synthetic_jobs.to_string(),
            "--nodes".into(),
            a.synthetic_nodes.to_string(),
        ]);
    }
    if a.scaling {
        for jobs in [10_000usize, 100_000] {
            for nodes in [100usize, 1_000, 10_000] {
                cases.push(vec![
                    "--policy".into(),
                    "libra+$".into(),
                    "--synthetic-jobs".into(),
                    jobs.to_string(),
                    "--nodes".into(),
                    nodes.to_string(),
                ]);
            }
        }
    }
    let pb = indicatif::ProgressBar::new(cases.len() as u64);
    let mut rows = Vec::new();
    for c in &cases {
        pb.set_message(c.join(" "));
        rows.push(child(c)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let mut t = table(&[
        "case",
        "policy",
        "jobs",
        "nodes",
        "events",
        "load (s)",
        "simulate (s)",
        "CPU (s)",
        "jobs/s",
        "peak RSS (MiB)",
    ]);
    for r in &rows {
        t.add_row(vec![
            r.case.clone(),
            r.policy.clone(),
            r.jobs.to_string(),
            r.nodes.to_string(),
            r.events.to_string(),
            format!("{:.3}", r.load_s),
            format!("{:.3}", r.sim_s),
            format!("{:.3}", r.cpu_s),
            format!("{:.0}", r.jobs_per_s),
            format!("{:.0}", r.peak_rss_mib),
        ]);
    }
    emit(&Said::new(&serde_json::json!({ "cases": rows }), Text::new().line(t)), a.json)
}
