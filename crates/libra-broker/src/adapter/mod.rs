//! Resource adapters: how the engine hands a job to a kind of resource and hears back.
//!
//! Every adapter appends the outcome of an attempt to the experiment's outcome log before it
//! reports it, so that a broker killed in between finds the result on resume instead of running
//! the job again; and an attempt still running when the broker died is taken up again by
//! `resume` where the resource can tell what became of it.
//!
//! The `libra` kind (a Libra cluster through its HTTP API) plugs in here: `start` submits with
//! the job's estimate, the deadline and its budget share, and a rejection comes back as an
//! `Outcome` with `rejected = true`, which the engine treats as the resource being unavailable.
//! The `slurm` kind hands each attempt to Slurm as a batch job that runs the local keeper.

mod cluster_poll;
mod descendants;
pub mod libra;
pub mod local;
pub mod slurm;
pub mod testqueue;

use crate::plan::{Plan, Vars};
use crate::resources::{KindSpec, ResourceConfig};
use libra_core::Money;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// One attempt to hand to a resource.
#[derive(Debug, Clone)]
pub struct Launch {
    pub attempt: i64,
    /// The attempt's idempotency key: a resource that is handed the same key again (a resumed
    /// engine asking after it) answers with the same job, never a second one.
    pub key: String,
    pub resource: usize,
    /// The attempt's own directory: the job's working directory, its stdout and stderr.
    pub dir: PathBuf,
    pub vars: Vars,
    /// Expected wall seconds of the job, seconds left to the sweep's deadline, and the budget
    /// held for it: what a resource that admits jobs by estimate, deadline and budget needs.
    pub estimate: f64,
    pub deadline_in: f64,
    pub budget: Money,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub attempt: i64,
    pub resource: usize,
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub wall: f64,
    pub cpu: f64,
    pub message: String,
    /// The resource refused the job (it stops getting jobs until it answers again).
    pub rejected: bool,
    /// What the resource billed, when it bills by itself (a Libra cluster).
    pub billed: Option<Money>,
}

#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("resource '{resource}': {msg}")]
    Start { resource: String, msg: String },
    #[error("resource '{resource}': kind {kind} is not available in this build: {why}")]
    Unsupported { resource: String, kind: &'static str, why: &'static str },
}

pub trait ResourceAdapter: Send {
    /// Starts the attempt without blocking; its outcome arrives on `done`.
    fn start(&mut self, launch: Launch, done: Sender<Outcome>) -> Result<(), AdapterError>;
    /// Takes up an attempt an engine that stopped had started and heard nothing back from:
    /// true when the resource knows it (it will report the outcome on `done`, and has not run
    /// the job a second time), false when it cannot tell (the attempt is lost and its job runs
    /// again).
    fn resume(&mut self, _launch: Launch, _done: Sender<Outcome>) -> Result<bool, AdapterError> {
        Ok(false)
    }
    /// Stops every attempt still running (cancel). Returns what a resource that bills its own
    /// amount (a Libra cluster) charged for each attempt it stopped, by attempt id.
    fn cancel_all(&mut self) -> Vec<(i64, Money)>;
    /// Whether the attempts `cancel_all` did not bill still report their outcomes (a local job
    /// with the CPU it used, which the sweep pays for; a job on a Libra cluster that had ended
    /// before the cancel, with its charge): the engine waits a moment for them.
    fn reports_after_cancel(&self) -> bool {
        false
    }
    /// Kills what a cancel did not stop in its grace (a job that ignores SIGTERM).
    fn kill_all(&mut self) {}
}

/// The experiment's outcome log, beside its `jobs` directory: one line per finished attempt,
/// `attempt ok exit_code wall cpu billed`, appended before the outcome is reported. One file
/// for all jobs rather than a marker per job: creating files is what a job costs most.
pub const OUTCOMES: &str = "outcomes.log";

/// The log for an attempt directory `<work>/jobs/<n>-<attempt>`.
pub fn outcome_log(attempt_dir: &Path) -> PathBuf {
    attempt_dir.parent().and_then(Path::parent).unwrap_or(attempt_dir).join(OUTCOMES)
}

fn outcome_line(o: &Outcome) -> String {
    let code = o.exit_code.map_or("-".to_string(), |c| c.to_string());
    let billed = o.billed.map_or("-".to_string(), |m| m.cents().to_string());
    format!("{} {} {} {} {} {}\n", o.attempt, u8::from(o.ok), code, o.wall, o.cpu, billed)
}

fn parse_outcome(line: &str) -> Option<Outcome> {
    let mut it = line.split_whitespace();
    let attempt = it.next()?.parse::<i64>().ok()?;
    let ok = it.next()? == "1";
    let exit_code = it.next()?.parse::<i32>().ok();
    let wall = it.next()?.parse::<f64>().ok()?;
    let cpu = it.next()?.parse::<f64>().ok()?;
    let billed = it.next().and_then(|b| b.parse::<i64>().ok()).map(Money::from_cents);
    Some(Outcome {
        attempt,
        resource: 0,
        ok,
        exit_code,
        wall,
        cpu,
        message: "recovered from the outcome log".into(),
        rejected: false,
        billed,
    })
}

/// Appends the outcome of an attempt to the experiment's log.
pub fn write_marker(dir: &Path, o: &Outcome) {
    use std::io::Write;
    let line = outcome_line(o);
    let path = outcome_log(dir);
    // O_APPEND with one small write per line: concurrent jobs never interleave their lines.
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        tracing::warn!(path = %path.display(), "cannot record the outcome: {e}");
    }
}

/// Reads every outcome an experiment's attempts recorded, by attempt id.
pub fn read_outcomes(work: &Path) -> HashMap<i64, Outcome> {
    let mut out = HashMap::new();
    let Ok(text) = std::fs::read_to_string(work.join(OUTCOMES)) else { return out };
    for line in text.lines() {
        // A line cut short by a crash is simply not an outcome: that attempt runs again.
        if let Some(o) = parse_outcome(line) {
            out.insert(o.attempt, o);
        }
    }
    out
}

/// In an attempt's directory: its outcome alone (what a local keeper reports to the engine that
/// waits for it; the message, if any, on the second line).
pub const OUTCOME_FILE: &str = "libra.outcome";

pub fn write_outcome_file(dir: &Path, o: &Outcome) -> std::io::Result<()> {
    let tmp = dir.join(format!("{OUTCOME_FILE}.tmp"));
    std::fs::write(&tmp, format!("{}{}\n", outcome_line(o), o.message.replace('\n', " ")))?;
    std::fs::rename(tmp, dir.join(OUTCOME_FILE))
}

pub fn read_outcome_file(dir: &Path) -> Option<Outcome> {
    let text = std::fs::read_to_string(dir.join(OUTCOME_FILE)).ok()?;
    let mut lines = text.lines();
    let mut o = parse_outcome(lines.next()?)?;
    o.message = lines.next().unwrap_or("").to_string();
    Some(o)
}

/// Builds the adapter for one resource of an experiment. `keeper`: see `EngineOptions`.
pub fn build(
    cfg: &ResourceConfig,
    plan: Arc<Plan>,
    plan_text: &str,
    root: PathBuf,
    keeper: Option<PathBuf>,
) -> Result<Box<dyn ResourceAdapter>, AdapterError> {
    match &cfg.spec {
        KindSpec::Local(_) => {
            Ok(Box::new(local::Local::new(cfg.name.clone(), plan, plan_text.into(), root, keeper)))
        }
        KindSpec::Testqueue(t) => Ok(Box::new(testqueue::TestQueue::new(t))),
        KindSpec::Libra(l) => Ok(Box::new(libra::LibraCluster::new(&cfg.name, l, &plan)?)),
        KindSpec::Slurm(s) => {
            Ok(Box::new(slurm::Slurm::new(&cfg.name, s, &plan, plan_text.into(), root, keeper)?))
        }
    }
}
