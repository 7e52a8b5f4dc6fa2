//! `libra sweep bench`: trivial jobs through the engine and the local resource, every start,
//! end and payment committed to the database, beside `xargs -P` on the same jobs.

use crate::create::{create, CreateError, SweepSpec};
use crate::engine::{self, now_unix, EngineError, EngineOptions};
use crate::resources::{Kind, ResourceConfig};
use crate::store::Store;
use libra_core::dbc::Algorithm;
use libra_core::Money;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Create(#[from] CreateError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("bench: {0}")]
    Io(#[from] std::io::Error),
    #[error("bench: {0}")]
    Failed(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Runner {
    pub name: String,
    pub jobs: u64,
    pub seconds: f64,
    pub jobs_per_sec: f64,
    /// Wall time per job times the slots: what each job costs a slot, start to end.
    pub per_job_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub jobs: u64,
    pub slots: u32,
    pub engine: Runner,
    pub xargs: Option<Runner>,
    /// Engine rate over xargs' rate.
    pub ratio: Option<f64>,
    pub done: u64,
    pub db_bytes: u64,
}

fn runner(name: &str, jobs: u64, secs: f64, slots: u32) -> Runner {
    Runner {
        name: name.into(),
        jobs,
        seconds: secs,
        jobs_per_sec: jobs as f64 / secs.max(1e-9),
        per_job_ms: secs * 1e3 * slots as f64 / jobs.max(1) as f64,
    }
}

/// Runs `jobs` `true` jobs on `slots` local slots in `dir` (a scratch directory).
pub fn run(dir: &Path, jobs: u64, slots: u32, with_xargs: bool) -> Result<BenchReport, BenchError> {
    let plan = dir.join("bench.pln");
    std::fs::write(
        &plan,
        format!("parameter i integer range from 1 to {jobs} step 1\ntask main\n    exec true\nendtask\n"),
    )?;
    let db = dir.join("bench.db");
    let res = ResourceConfig {
        name: "local".into(),
        kind: Kind::Local,
        slots,
        price: 0.0,
        job_secs: Some(0.001),
        utc_offset: None,
        peak: None,
        wall: None,
        cpu: None,
        time_scale: None,
        url: None,
        token: None,
    };
    let now = now_unix();
    let exp = create(
        &db,
        &SweepSpec {
            plan_path: &plan,
            resources: vec![res],
            algorithm: Algorithm::Time,
            deadline: now + 86_400.0,
            budget: Money::ZERO,
            max_retries: 0,
            estimate_secs: Some(0.001),
            seed: 0,
            now,
        },
    )?;
    let t0 = Instant::now();
    let state = engine::run(&db, exp, EngineOptions::default())?;
    let secs = t0.elapsed().as_secs_f64();
    let store = Store::open(&db)?;
    let done = store.counts(exp)?.done;
    if state != "done" {
        return Err(BenchError::Failed(format!("the sweep ended {state} with {done} of {jobs} jobs done")));
    }
    let db_bytes = ["bench.db", "bench.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let engine = runner("libra sweep (engine + local, durable)", jobs, secs, slots);
    let xargs = if with_xargs { Some(xargs(jobs, slots)?) } else { None };
    let ratio = xargs.as_ref().map(|x| engine.jobs_per_sec / x.jobs_per_sec);
    Ok(BenchReport { jobs, slots, engine, xargs, ratio, done, db_bytes })
}

fn xargs(jobs: u64, slots: u32) -> Result<Runner, BenchError> {
    let mut child = Command::new("xargs")
        .args(["-P", &slots.to_string(), "-n", "1", "true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    let input: String = (1..=jobs).map(|i| format!("{i}\n")).collect();
    let t0 = Instant::now();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().ok_or_else(|| BenchError::Failed("xargs: no stdin".into()))?;
        stdin.write_all(input.as_bytes())?;
    }
    let st = child.wait()?;
    let secs = t0.elapsed().as_secs_f64();
    if !st.success() {
        return Err(BenchError::Failed(format!("xargs exited with {st}")));
    }
    Ok(runner(&format!("xargs -P {slots}"), jobs, secs, slots))
}
