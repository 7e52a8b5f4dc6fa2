//! `libra sweep bench`: trivial jobs through the engine and the local resource, every start,
//! end and payment committed to the database, beside `xargs -P` on the same jobs.
//!
//! The machine may be shared, and its load drifts: the jobs are run in interleaved rounds
//! (xargs, engine, xargs, engine, ...) so that both see the same conditions, and the CPU time
//! each side used (its own and its children's) is reported beside the wall-clock rates, since
//! CPU per job hardly depends on what else runs.

use crate::create::{create, CreateError, SweepSpec};
use crate::engine::{self, now_unix, EngineError, EngineOptions};
use crate::resources::{KindSpec, LocalSpec, ResourceConfig};
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
    /// CPU (user + system, this process and its children) per job.
    pub cpu_ms_per_job: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub jobs: u64,
    pub slots: u32,
    pub rounds: u32,
    pub engine: Runner,
    pub xargs: Option<Runner>,
    /// Engine rate over xargs' rate.
    pub ratio: Option<f64>,
    pub done: u64,
    pub db_bytes: u64,
}

/// CPU seconds used so far by this process and by its reaped children.
fn cpu_seconds() -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: an all-zero rusage is valid for the kernel to overwrite.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a local.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            total += tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    total
}

fn runner(name: &str, jobs: u64, secs: f64, cpu: f64, slots: u32) -> Runner {
    Runner {
        name: name.into(),
        jobs,
        seconds: secs,
        jobs_per_sec: jobs as f64 / secs.max(1e-9),
        per_job_ms: secs * 1e3 * slots as f64 / jobs.max(1) as f64,
        cpu_ms_per_job: cpu * 1e3 / jobs.max(1) as f64,
    }
}

/// Runs `jobs` `true` jobs on `slots` local slots in `dir` (a scratch directory), in `rounds`
/// interleaved rounds.
pub fn run(
    dir: &Path,
    jobs: u64,
    slots: u32,
    rounds: u32,
    with_xargs: bool,
) -> Result<BenchReport, BenchError> {
    let rounds = rounds.clamp(1, 100).min(jobs.max(1) as u32);
    let db = dir.join("bench.db");
    let (mut e_secs, mut e_cpu, mut x_secs, mut x_cpu, mut done) = (0.0, 0.0, 0.0, 0.0, 0u64);
    for k in 0..rounds as u64 {
        let n = jobs / rounds as u64 + u64::from(k < jobs % rounds as u64);
        if with_xargs {
            let c0 = cpu_seconds();
            x_secs += xargs(n, slots)?;
            x_cpu += cpu_seconds() - c0;
        }
        let exp = experiment(dir, &db, n, slots)?;
        let c0 = cpu_seconds();
        let t0 = Instant::now();
        let state = engine::run(&db, exp, EngineOptions::default())?;
        e_secs += t0.elapsed().as_secs_f64();
        e_cpu += cpu_seconds() - c0;
        let d = Store::open(&db)?.counts(exp)?.done;
        if state != crate::state::ExperimentState::Done {
            return Err(BenchError::Failed(format!("the sweep ended {state} with {d} of {n} jobs done")));
        }
        done += d;
    }
    let db_bytes = ["bench.db", "bench.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let engine = runner("libra sweep (engine + local, durable)", jobs, e_secs, e_cpu, slots);
    let xargs = with_xargs.then(|| runner(&format!("xargs -P {slots}"), jobs, x_secs, x_cpu, slots));
    let ratio = xargs.as_ref().map(|x| engine.jobs_per_sec / x.jobs_per_sec);
    Ok(BenchReport { jobs, slots, rounds, engine, xargs, ratio, done, db_bytes })
}

fn experiment(dir: &Path, db: &Path, n: u64, slots: u32) -> Result<i64, BenchError> {
    let plan = dir.join("bench.pln");
    std::fs::write(
        &plan,
        format!("parameter i integer range from 1 to {n} step 1\ntask main\n    exec true\nendtask\n"),
    )?;
    let res = ResourceConfig {
        slots,
        job_secs: Some(0.001),
        ..ResourceConfig::new("local", KindSpec::Local(LocalSpec {}))
    };
    let now = now_unix();
    Ok(create(
        db,
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
    )?)
}

/// Seconds xargs -P takes to run `true` `n` times.
fn xargs(n: u64, slots: u32) -> Result<f64, BenchError> {
    let mut child = Command::new("xargs")
        .args(["-P", &slots.to_string(), "-n", "1", "true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    let input: String = (1..=n).map(|i| format!("{i}\n")).collect();
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
    Ok(secs)
}
