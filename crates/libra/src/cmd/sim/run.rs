//! `libra sim run`: one workload, one policy or all, a metrics table (or JSON).

use super::load::{read_trace, trace_path, ModelArgs, PricingArgs};
use crate::output::{emit, Render, Text};
use anyhow::Context;
use clap::Args;
use comfy_table::Table;
use indicatif::{ProgressBar, ProgressStyle};
use libra_core::policy::{build_policy, Placement, POLICY_NAMES};
use libra_sim::engine::{ClusterConfig, SimResult, Verdict};
use libra_sim::experiment::runner::{run_all_with_progress, RunSpec};
use libra_sim::workload::{as_recorded, jobs_csv, libra_batches::LibraBatch, libraplus, SimJob};
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// SWF trace (plain or .gz) to replay with the Libra+$ QoS model. Default: the SDSC SP2
    /// trace in ../shared/traces, from here or a directory above, else beside the checkout this
    /// binary was built in.
    #[arg(long, conflicts_with_all = ["jobs", "batch"])]
    pub trace: Option<PathBuf>,
    /// CSV job list with every job's QoS: id,submit,runtime,estimate,procs,deadline,budget,user
    /// (deadline in seconds after submit, budget in credits).
    #[arg(long, conflicts_with = "batch")]
    pub jobs: Option<PathBuf>,
    /// One of the Libra paper's batches: 1 (100 jobs) or 2 (200 jobs).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub batch: Option<u8>,
    /// Policy: libra, libra+$ (or libraplus), fifo, fcfs-bf, sjf-bf, edf-bf, or "all".
    #[arg(long, default_value = "all")]
    pub policy: String,
    /// How the time-shared policies choose among the nodes that accept a job: best-fit (the
    /// Libra+$ paper's rule, the default of libra+$), least-loaded (the Libra paper's, the
    /// default of libra) or cheapest (the lowest price for the job). With `--policy all` it
    /// applies to libra and libra+$; the space-shared baselines have no node choice.
    #[arg(long)]
    pub placement: Option<Placement>,
    /// Nodes in the cluster. Default: the trace header's MaxNodes, else 128 (10 for --batch).
    #[arg(long)]
    pub nodes: Option<usize>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pricing: PricingArgs,
    /// Add every job's decision (accepted or why not, nodes, cost, finish) to the output.
    #[arg(long)]
    pub decisions: bool,
    /// Write every job's start and end under each policy to this CSV file
    /// (policy,job,submit,start,end,procs,decision).
    #[arg(long, value_name = "FILE")]
    pub decisions_csv: Option<PathBuf>,
    /// Replay the SWF trace as it was recorded, as other simulators do: every job, the trace's
    /// own submit times and requested times as estimates, no deadlines or budgets. Only the
    /// space-shared policies (fifo, fcfs-bf, sjf-bf, edf-bf; "all" means these) apply; the
    /// table shows mean wait, bounded slowdown, utilisation and makespan.
    #[arg(long, conflicts_with_all = ["jobs", "batch"])]
    pub as_recorded: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    // The flags are checked before the workload is read (the nodes again if the trace names them).
    let cluster = |nodes| ClusterConfig { nodes, price_base: a.pricing.price_base };
    cluster(a.nodes.unwrap_or(1)).validate()?;
    if let Some(path) = &a.decisions_csv {
        crate::output::check_out_file(path, "--decisions-csv")?;
    }
    let (workload, header_nodes, source) = load_workload(&a)?;
    let nodes = a.nodes.or(header_nodes).unwrap_or(if a.batch.is_some() { 10 } else { 128 });
    cluster(nodes).validate()?;
    let policies: Vec<String> = if a.policy == "all" {
        POLICY_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        vec![a.policy.clone()]
    };
    let policies = if a.as_recorded { space_shared_only(policies, &a)? } else { policies };
    let workload = Arc::new(workload);
    let mut specs: Vec<RunSpec> = Vec::new();
    for p in &policies {
        // A single space-shared policy given a placement is refused (by `run_all`); among all of
        // them, only those with a node choice take it.
        let chooses = build_policy(p, a.pricing.params())?.placement().is_some();
        specs.push(RunSpec {
            workload: workload.clone(),
            policy: p.clone(),
            pricing: a.pricing.params(),
            cluster: cluster(nodes),
            placement: a.placement.filter(|_| chooses || a.policy != "all"),
        });
    }
    let results = run_with_progress(&specs)?;
    if let Some(path) = &a.decisions_csv {
        write_decisions_csv(path, &results, &workload)
            .with_context(|| format!("writing decisions to {}", path.display()))?;
    }
    emit(&Run { a: &a, source: &source, nodes, workload: &workload, results: &results }, a.json)
}

/// Runs the specs with a bar of the jobs arrived so far in every run on standard error (drawn
/// only on a terminal, and cleared at the end): a trace of a million jobs takes minutes under
/// the time-shared policies.
fn run_with_progress(specs: &[RunSpec]) -> anyhow::Result<Vec<SimResult>> {
    let total: usize = specs.iter().map(|s| s.workload.len()).sum();
    let progress = RunProgress::new(ProgressBar::new(total as u64), specs.len());
    progress.bar.enable_steady_tick(std::time::Duration::from_millis(500));
    let results = run_all_with_progress(specs, &|| progress.run_done(), &|n| progress.arrived(n));
    progress.bar.finish_and_clear();
    Ok(results?)
}

/// The bar of `run_with_progress`. It counts arrivals, since how many events a run makes is not
/// known ahead; once every job has arrived, the runs still finish the jobs they hold (a run's
/// tail, which can take a while on a saturated cluster), so the bar then says so and counts the
/// runs that have finished, without an estimate it could not make.
struct RunProgress {
    bar: ProgressBar,
    runs: usize,
    finished: std::sync::atomic::AtomicUsize,
    in_tail: std::sync::atomic::AtomicBool,
}

impl RunProgress {
    const ARRIVING: &'static str =
        "simulating [{bar:30}] {human_pos}/{human_len} jobs arrived, {msg} ({elapsed}, about {eta} left)";
    const TAIL: &'static str =
        "simulating: every job has arrived, {msg}; finishing the jobs still running ({elapsed})";

    fn new(bar: ProgressBar, runs: usize) -> Self {
        if let Ok(style) = ProgressStyle::with_template(Self::ARRIVING) {
            bar.set_style(style.progress_chars("=> "));
        }
        let p = RunProgress { bar, runs, finished: Default::default(), in_tail: Default::default() };
        p.say_runs(0);
        p
    }

    fn say_runs(&self, finished: usize) {
        self.bar.set_message(format!("{finished}/{} runs finished", self.runs));
    }

    /// `n` more jobs of some run have arrived.
    fn arrived(&self, n: usize) {
        self.bar.inc(n as u64);
        let all = self.bar.length().is_some_and(|len| self.bar.position() >= len);
        if all && !self.in_tail.swap(true, std::sync::atomic::Ordering::Relaxed) {
            if let Ok(style) = ProgressStyle::with_template(Self::TAIL) {
                self.bar.set_style(style);
            }
        }
    }

    /// One more run has finished.
    fn run_done(&self) {
        let finished = self.finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.say_runs(finished);
    }
}

/// What `libra sim run` prints: every policy's metrics (and decisions, with --decisions).
struct Run<'a> {
    a: &'a RunArgs,
    source: &'a str,
    nodes: usize,
    workload: &'a [SimJob],
    results: &'a [SimResult],
}

impl Serialize for Run<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let runs: Vec<_> =
            self.results.iter().map(|r| result_json(r, self.workload, self.a.decisions)).collect();
        let mut v =
            json!({"workload": self.source, "jobs": self.workload.len(), "nodes": self.nodes, "runs": runs});
        if let Some(p) = self.a.placement {
            v["placement"] = json!(p);
        }
        v.serialize(s)
    }
}

impl Render for Run<'_> {
    fn text(&self) -> Text {
        let (source, nodes, jobs) = (self.source, self.nodes, self.workload.len());
        let text = Text::new().line(match self.a.placement {
            Some(p) => format!("{source}: {jobs} jobs on {nodes} nodes, placement {p}"),
            None => format!("{source}: {jobs} jobs on {nodes} nodes"),
        });
        let mut text = text.line(if self.a.as_recorded {
            recorded_table(self.results)
        } else {
            metrics_table(self.results)
        });
        if self.a.decisions {
            for r in self.results {
                text =
                    text.line(format!("\n{} decisions:", r.policy)).line(decisions_table(r, self.workload));
            }
        }
        text
    }
}

fn load_workload(a: &RunArgs) -> anyhow::Result<(Vec<SimJob>, Option<usize>, String)> {
    if let Some(b) = a.batch {
        let batch = if b == 1 { LibraBatch::batch1() } else { LibraBatch::batch2() };
        return Ok((batch.generate(a.model.seed), None, format!("Libra batch {b} (seed {})", a.model.seed)));
    }
    if let Some(path) = &a.jobs {
        let jobs =
            jobs_csv::read_jobs_csv(path).with_context(|| format!("in job list {}", path.display()))?;
        return Ok((jobs, None, path.display().to_string()));
    }
    // The model is checked before the trace is read: a typo fails at once, not after the read.
    let model = (!a.as_recorded).then(|| a.model.checked_model()).transpose()?;
    let path = trace_path(a.trace.clone())?;
    let (records, max_nodes) = read_trace(&path, a.model.mode())?;
    let jobs = match &model {
        None => as_recorded::generate(&records),
        Some(model) => libraplus::generate(&records, model)?,
    };
    let nodes = max_nodes.and_then(|n| usize::try_from(n).ok()).filter(|n| *n > 0);
    Ok((jobs, nodes, path.display().to_string()))
}

pub fn metrics_table(results: &[SimResult]) -> Table {
    let mut t = crate::output::table(&[
        "policy",
        "accepted",
        "in time",
        "QoS satisfaction",
        "profitability",
        "revenue",
        "mean wait (s)",
        "bounded slowdown",
        "utilisation",
    ]);
    for r in results {
        let m = &r.metrics;
        t.add_row(vec![
            r.policy.clone(),
            format!("{}/{}", m.accepted, m.jobs),
            m.completed_in_time.to_string(),
            format!("{:.1}%", 100.0 * m.qos_satisfaction),
            format!("{:.1}%", 100.0 * m.profitability),
            m.revenue.to_string(),
            format!("{:.0}", m.mean_wait),
            format!("{:.2}", m.mean_bounded_slowdown),
            format!("{:.1}%", 100.0 * m.utilisation),
        ]);
    }
    t
}

/// As-recorded replays have no deadlines or budgets, so only the space-shared policies mean
/// anything there; "all" narrows to them, a time-shared policy named is refused.
fn space_shared_only(policies: Vec<String>, a: &RunArgs) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for p in policies {
        if build_policy(&p, a.pricing.params())?.space_shared() {
            out.push(p);
        } else if a.policy != "all" {
            anyhow::bail!(
                "policy: {p} is not accepted with --as-recorded (a replay without deadlines or budgets): \
                 give fifo, fcfs-bf, sjf-bf, edf-bf or all"
            );
        }
    }
    Ok(out)
}

/// The figures other simulators report for a replay.
fn recorded_table(results: &[SimResult]) -> Table {
    let mut t = crate::output::table(&[
        "policy",
        "jobs run",
        "mean wait (s)",
        "bounded slowdown",
        "utilisation",
        "makespan (s)",
    ]);
    for r in results {
        let m = &r.metrics;
        t.add_row(vec![
            r.policy.clone(),
            format!("{}/{}", m.accepted, m.jobs),
            format!("{:.0}", m.mean_wait),
            format!("{:.2}", m.mean_bounded_slowdown),
            format!("{:.1}%", 100.0 * m.utilisation),
            format!("{:.0}", m.makespan),
        ]);
    }
    t
}

fn write_decisions_csv(path: &std::path::Path, results: &[SimResult], jobs: &[SimJob]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "policy,job,submit,start,end,procs,decision")?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    for r in results {
        for (rec, job) in r.records.iter().zip(jobs) {
            let o = &rec.outcome;
            let decision = verdict_text(&rec.verdict).replace(',', ";");
            writeln!(
                w,
                "{},{},{:.3},{},{},{},{}",
                r.policy,
                job.id,
                job.submit,
                opt(o.start),
                opt(o.finish),
                job.procs,
                decision
            )?;
        }
    }
    w.flush()?;
    Ok(())
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Accepted => "accepted".into(),
        Verdict::Rejected(r) => format!("rejected: {r}"),
        Verdict::Dropped => "dropped: deadline".into(),
    }
}

fn decisions_table(r: &SimResult, jobs: &[SimJob]) -> Table {
    let mut t =
        crate::output::table(&["job", "decision", "nodes", "cost", "budget", "finish", "deadline", "met"]);
    for (rec, job) in r.records.iter().zip(jobs) {
        let o = &rec.outcome;
        t.add_row(vec![
            job.id.to_string(),
            verdict_text(&rec.verdict),
            rec.nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(","),
            if o.accepted { o.cost.to_string() } else { "-".into() },
            o.budget.to_string(),
            o.finish.map_or("-".into(), |f| format!("{f:.1}")),
            format!("{:.1}", o.deadline_abs),
            if o.qos_satisfied() { "yes".into() } else { "no".into() },
        ]);
    }
    t
}

fn result_json(r: &SimResult, jobs: &[SimJob], decisions: bool) -> serde_json::Value {
    let mut v = json!({"policy": r.policy, "metrics": r.metrics, "events": r.events});
    if decisions {
        let d: Vec<_> = r
            .records
            .iter()
            .zip(jobs)
            .map(|(rec, job)| {
                json!({
                    "id": job.id,
                    "decision": verdict_text(&rec.verdict),
                    "nodes": rec.nodes,
                    // Integer cents under `*_cents`, as every amount in Libra's JSON.
                    "cost_cents": rec.outcome.accepted.then_some(rec.outcome.cost),
                    "budget_cents": rec.outcome.budget,
                    "start": rec.outcome.start,
                    "finish": rec.outcome.finish,
                    "deadline": rec.outcome.deadline_abs,
                    "qos_satisfied": rec.outcome.qos_satisfied(),
                })
            })
            .collect();
        v["decisions"] = json!(d);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::RunProgress;
    use indicatif::ProgressBar;

    /// The bar counts arrivals, says how many runs have finished, and once every job has
    /// arrived says that the runs are finishing their jobs (a run's tail) instead of showing a
    /// full bar with nothing left.
    #[test]
    fn the_bar_tells_the_tail_apart_from_the_arrivals() {
        let p = RunProgress::new(ProgressBar::hidden(), 2);
        p.bar.set_length(10);
        assert_eq!(p.bar.message(), "0/2 runs finished");
        p.arrived(4);
        p.arrived(5);
        assert_eq!(p.bar.position(), 9);
        assert!(!p.in_tail.load(std::sync::atomic::Ordering::Relaxed));
        p.run_done();
        assert_eq!(p.bar.message(), "1/2 runs finished");
        p.arrived(1);
        assert!(p.in_tail.load(std::sync::atomic::Ordering::Relaxed));
        p.run_done();
        assert_eq!(p.bar.message(), "2/2 runs finished");
    }
}
