//! `libra sim bench`: wall time, jobs per second and peak memory of the simulator. Each case
//! runs in a fresh child process (`libra sim bench-one`) so its peak memory is its own.

use super::cores::{probe, SHARED_ABOVE};
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
    /// SWF trace for the real-trace cases. Default: the SDSC SP2 trace in ../shared/traces, from here or
    /// a directory above, else beside the checkout this binary was built in.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Jobs in the synthetic trace [default: 1000000; with --aims, 100000].
    #[arg(long)]
    pub synthetic_jobs: Option<usize>,
    /// Nodes for the synthetic trace.
    #[arg(long, default_value_t = 10_000)]
    pub synthetic_nodes: usize,
    /// Policies for the synthetic trace (comma-separated).
    #[arg(long, default_value = "libra+$,libra,edf-bf", conflicts_with = "aims")]
    pub synthetic_policies: String,
    /// Also measure how the cost grows with jobs (10^4, 10^5) and nodes (100, 1000, 10000) under Libra+$.
    #[arg(long, conflicts_with = "aims")]
    pub scaling: bool,
    /// Measure the simulator's aims (issue 14) instead, side by side, and say which are met: the
    /// whole trace under libra+$ in under 0.3 s; libra+$ and libra within 3x of edf-bf on the
    /// synthetic trace (100,000 jobs on 10,000 nodes by default), the ratio taken within each
    /// round; the verdicts on medians over --rounds rounds, each round running the policies in
    /// turn. Each time-shared run is timed again with its own decisions replayed (the engine's
    /// work alone, which no admission can save). Before each round and after the last, a probe
    /// times a fixed piece of arithmetic alone and beside a spinning thread: about 1x when the
    /// processors run side by side, about 2x when they share one core, as a virtual machine's
    /// can for minutes at a time (`core_probes` in --json). About 3 minutes on 2 cores.
    #[arg(long)]
    pub aims: bool,
    /// With --aims: the rounds of each case.
    #[arg(long, default_value_t = 3, requires = "aims", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// With --aims: also the million-job aim (libra+$ and libra in under 60 s and 2 GiB), one run
    /// of each policy with its decisions' digest: about 3 minutes on 2 cores.
    #[arg(long, requires = "aims")]
    pub million: bool,
    /// With --million: its rounds, each running the policies in turn; the verdict is on the
    /// median, memory on every run, and every run must make the same decisions. On a shared or
    /// virtual machine one run can be a fifth slower than the next: 3 rounds give a verdict a
    /// single slow run does not decide.
    #[arg(long, default_value_t = 1, requires = "million", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub million_rounds: u32,
    /// With --million: the jobs of that case (the aim is at 1000000), on --synthetic-nodes nodes.
    #[arg(long, default_value_t = 1_000_000, requires = "million")]
    pub million_jobs: usize,
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
            // Checked before the `u32` the model keeps (a count past it would wrap to a few nodes).
            ClusterConfig { nodes: a.nodes, price_base: 1.0 }.validate()?;
            let nodes = u32::try_from(a.nodes)?;
            let cfg = SyntheticConfig { jobs: n, nodes, ..Default::default() };
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
    if a.aims {
        return run_aims(a);
    }
    let trace = trace_path(a.trace.clone())?;
    let synthetic_jobs = a.synthetic_jobs.unwrap_or(1_000_000);
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
            synthetic_jobs.to_string(),
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

/// `libra sim bench --aims`: each case's rounds, the policies in turn within a round, then the
/// aims judged (`aims::judge`).
fn run_aims(a: BenchArgs) -> anyhow::Result<()> {
    use super::aims::{judge, Case, ISSUE_JOBS};
    let trace = trace_path(a.trace.clone())?;
    anyhow::ensure!(
        trace.is_file(),
        "--trace: {} is not a file: give an SWF trace (plain or .gz)",
        trace.display()
    );
    let name = trace.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let nodes = a.synthetic_nodes;
    let mut cases = vec![
        Case::Trace { path: trace.display().to_string(), name },
        Case::Within { jobs: a.synthetic_jobs.unwrap_or(ISSUE_JOBS), nodes },
    ];
    if a.million {
        cases.push(Case::Million { jobs: a.million_jobs, nodes, rounds: a.million_rounds as usize });
    }
    let rounds = a.rounds as usize;
    let total: usize = cases.iter().map(|c| c.rounds(rounds) * c.policies().len()).sum();
    let pb = indicatif::ProgressBar::new(total as u64);
    let (mut aims, mut cases_run, mut probes) = (Vec::new(), Vec::new(), Vec::new());
    for (c, case) in cases.iter().enumerate() {
        let n = case.rounds(rounds);
        let mut runs = Vec::new();
        for r in 0..n {
            // Whether the processors run side by side before this round (`cores`).
            pb.set_message(format!("round {}/{n}: probing the processors", r + 1));
            probes.push(probe(format!("before round {} of case {}", r + 1, c + 1)));
            let mut round = Vec::new();
            for p in case.policies() {
                let args = case.args(p);
                pb.set_message(format!("round {}/{n}: {}", r + 1, args.join(" ")));
                let row = child(&args)?;
                anyhow::ensure!(
                    row.replay_same != Some(false),
                    "benchmark case {args:?}: the run replayed with its own decisions gave other records (the engine is not deterministic): a bug, please report it"
                );
                round.push(row);
                pb.inc(1);
            }
            cases_run.extend(round.iter().cloned());
            runs.push(round);
        }
        aims.extend(judge(case, &runs));
    }
    probes.push(probe("after the last round"));
    pb.finish_and_clear();
    let secs =
        |v: &[f64], digits: usize| v.iter().map(|x| format!("{x:.digits$}")).collect::<Vec<_>>().join(" / ");
    let mut t = table(&[
        "aim",
        "policy",
        "runs (s)",
        "median (s)",
        "x edf-bf (rounds; median)",
        "engine alone (s, median)",
        "peak RSS (MiB)",
        "bar",
        "verdict",
    ]);
    for r in &aims {
        t.add_row(vec![
            r.aim.clone(),
            r.policy.clone(),
            secs(&r.runs_s, 3),
            format!("{:.3}", r.median_s),
            r.median_against_edf_bf.map_or("-".into(), |m| format!("{}; {m:.2}", secs(&r.against_edf_bf, 2))),
            r.replay_median_s.map_or("-".into(), |m| format!("{m:.3}")),
            format!("{:.0}", r.peak_rss_mib),
            r.target.clone(),
            match (r.met, r.issue_sizes) {
                (None, _) => "-".into(),
                (Some(m), issue) => format!(
                    "{}{}{}",
                    if m { "met" } else { "NOT met" },
                    if r.decisions_same == Some(false) {
                        " (the rounds made other decisions: a bug, please report it)"
                    } else {
                        ""
                    },
                    if issue { "" } else { " (not the issue's sizes)" }
                ),
            },
        ]);
    }
    let note = "Each ratio compares runs of one round; the engine alone is the run again with its own decisions replayed (bench-one --replay).";
    let slowdowns = probes.iter().map(|p| format!("{:.2}", p.slowdown)).collect::<Vec<_>>().join(" / ");
    let shared = probes.iter().filter(|p| p.shared).count();
    let cores = format!(
        "Processors: a fixed piece of arithmetic beside a spinning thread took {slowdowns} times as long as alone, before each round and after the last (about 1: they run side by side; about 2: they share one core). {}",
        if shared == 0 {
            "They ran side by side at every probe.".to_string()
        } else {
            format!(
                "At {shared} of {} probes they shared a core (above {SHARED_ABOVE}x): the runs near those are slower than this machine is, and a build that uses the second processor more loses most there.",
                probes.len()
            )
        }
    );
    emit(
        &Said::new(
            &serde_json::json!({ "aims": aims, "cases": cases_run, "core_probes": probes }),
            Text::new().line(t).line(note).line(cores),
        ),
        a.json,
    )
}
