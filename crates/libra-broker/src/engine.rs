//! The persistent task-farming engine: dispatches an experiment's jobs to its resources as the
//! DBC planner says, records every start, end and payment in the broker's database, re-plans
//! at every event, obeys steering written to the database by any process, and resumes after
//! a crash without running a finished job again.

use crate::adapter::{self, Launch, Outcome, ResourceAdapter};
use crate::farm::{Farm, FarmResource, Running};
use crate::plan::{self, PlanError, Vars};
use crate::store::{AttemptRow, Counts, Store, StoreError};
use libra_core::dbc::Algorithm;
use libra_core::Money;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("stored plan: {0}")]
    Plan(#[from] PlanError),
    #[error("experiment {exp} is being run by process {pid} (heartbeat {age:.0} s ago); steer it, or stop that process first")]
    AlreadyRunning { exp: i64, pid: i64, age: f64 },
    #[error("stored algorithm: {0}")]
    Algorithm(#[from] libra_core::dbc::UnknownAlgorithm),
    #[error("no resource of experiment {0} can run jobs")]
    NoResource(i64),
}

pub fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// How long a resource that refused a job or did not answer is left out of the plan.
pub const SIT_OUT_SECS: f64 = 15.0;

/// A heartbeat older than this means the engine that wrote it is gone.
pub const STALE_SECS: f64 = 10.0;

fn process_alive(pid: i64) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0 && pid <= i32::MAX as i64 && unsafe { libc::kill(pid as i32, 0) } == 0
}

/// Is some live engine running this experiment?
pub fn live_engine(e: &crate::store::Experiment, now: f64) -> Option<(i64, f64)> {
    let pid = e.engine_pid?;
    let age = now - e.heartbeat.unwrap_or(0.0);
    (pid != std::process::id() as i64 && process_alive(pid) && age < STALE_SECS).then_some((pid, age))
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Progress {
    pub counts: Counts,
    pub total: u64,
    #[serde(rename = "spent_cents")]
    pub spent: Money,
    #[serde(rename = "held_cents")]
    pub held: Money,
    pub state: String,
}

/// Called with the experiment's progress as it runs (at most ten times a second).
pub type ProgressFn = Box<dyn FnMut(&Progress)>;

pub struct EngineOptions {
    /// How often steering is read while nothing happens.
    pub poll: Duration,
    pub on_progress: Option<ProgressFn>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { poll: Duration::from_millis(100), on_progress: None }
    }
}

struct Pending {
    queue: VecDeque<(i64, Option<usize>)>,
}

impl Pending {
    /// The next job for resource `r`, preferring one that did not just fail there.
    fn pop_for(&mut self, r: usize, only_resource: bool) -> Option<(i64, Option<usize>)> {
        let k = self.queue.iter().take(64).position(|&(_, avoid)| avoid != Some(r));
        match k {
            Some(k) => self.queue.remove(k),
            None if only_resource => self.queue.pop_front(),
            None => None,
        }
    }
}

/// Runs (or resumes) experiment `exp` in this process until it is done, stalls, or is
/// cancelled. Returns the final state.
pub fn run(db: &Path, exp: i64, mut opts: EngineOptions) -> Result<String, EngineError> {
    let store = Store::open(db)?;
    let e = store.experiment(exp)?;
    if let Some((pid, age)) = live_engine(&e, now_unix()) {
        return Err(EngineError::AlreadyRunning { exp, pid, age });
    }
    if e.state == "done" || e.state == "cancelled" {
        return Ok(e.state);
    }
    store.claim(exp, std::process::id(), now_unix())?;
    if e.state == "stalled" {
        // Run again (after a new deadline or budget, say): it is running until it stalls anew.
        store.set_state(exp, "running", None)?;
    }
    let plan = Arc::new(plan::parse(&e.plan_text)?);
    let algorithm: Algorithm = e.algorithm.parse()?;
    let configs = store.resources(exp)?;
    let root = PathBuf::from(&e.root_dir);
    let work = PathBuf::from(&e.work_dir);
    let mut adapters: Vec<Option<Box<dyn ResourceAdapter>>> = Vec::new();
    let measured = store.per_resource(exp)?;
    let mut resources = Vec::new();
    for (k, cfg) in configs.iter().enumerate() {
        let mut fr = FarmResource::new(cfg.clone(), cfg.prior_secs(e.estimate_secs));
        if let Some(m) = measured.get(k) {
            fr.done = m.done;
            fr.wall_sum = m.wall_sum;
            fr.cpu_sum = m.cpu_sum;
            fr.failed = m.failed;
            fr.spent = m.spent;
        }
        match adapter::build(cfg, plan.clone(), root.clone()) {
            Ok(a) => adapters.push(Some(a)),
            Err(err) => {
                tracing::warn!("{err}; the resource is left out");
                fr.available = false;
                adapters.push(None);
            }
        }
        resources.push(fr);
    }
    if adapters.iter().all(Option::is_none) {
        return Err(EngineError::NoResource(exp));
    }
    let mut farm = Farm {
        resources,
        algorithm,
        deadline: e.deadline,
        budget: e.budget,
        spent: store.spent(exp)?,
        fallback_secs: e.estimate_secs.unwrap_or(60.0),
    };
    let max_retries = e.max_retries;
    let now = now_unix();

    // Recovery: an attempt left running either finished (the outcome log says how) or is lost.
    let mut recorded = adapter::read_outcomes(&work);
    store.begin()?;
    for a in store.running_attempts(exp)? {
        let run = Running { attempt: a.id, job: a.job_id, started: a.started, hold: a.hold, price: a.price };
        if let Some(r) = farm.resources.get_mut(a.pos) {
            r.running.push(run);
        }
        match recorded.remove(&a.id).map(|o| Outcome { resource: a.pos, ..o }) {
            Some(o) => {
                let charge = farm
                    .finish_billed(a.pos, a.id, o.wall, o.cpu, o.ok, o.billed)
                    .map_or(Money::ZERO, |x| x.1);
                store.finish_attempt(
                    exp,
                    &a,
                    o.ok,
                    o.exit_code,
                    o.wall,
                    o.cpu,
                    charge,
                    &o.message,
                    now,
                    max_retries,
                )?;
            }
            None => {
                if let Some(r) = farm.resources.get_mut(a.pos) {
                    r.running.retain(|x| x.attempt != a.id);
                }
                store.lose_attempt(&a, now, "the broker stopped while it ran and it left no outcome")?;
            }
        }
    }
    store.commit()?;

    let mut pending = Pending { queue: store.pending(exp)?.into() };
    let (tx, rx) = mpsc::channel::<Outcome>();
    let mut in_flight: HashMap<i64, AttemptRow> = HashMap::new();
    let mut unavailable_until = vec![0.0f64; farm.resources.len()];
    let mut last_beat = Instant::now();
    let mut last_progress = Instant::now() - Duration::from_secs(1);
    let mut state = String::from("running");
    let total: u64 = {
        let c = store.counts(exp)?;
        c.pending + c.running + c.done + c.failed + c.cancelled
    };
    let ctx = Ctx { exp, jobs_dir: work.join("jobs"), os: std::env::consts::OS.to_string() };

    loop {
        let mut events = Vec::new();
        if !in_flight.is_empty() {
            if let Ok(o) = rx.recv_timeout(opts.poll) {
                events.push(o);
            }
        } else if state == "paused" {
            std::thread::sleep(opts.poll);
        }
        while let Ok(o) = rx.try_recv() {
            events.push(o);
        }
        let now = now_unix();
        store.begin()?;
        for o in events {
            let Some(a) = in_flight.remove(&o.attempt) else { continue };
            if o.rejected {
                tracing::warn!(resource = %farm.resources[o.resource].cfg.name, "job refused: {}; the resource sits out {SIT_OUT_SECS} s", o.message);
                unavailable_until[o.resource] = now + SIT_OUT_SECS;
                if let Some(r) = farm.resources.get_mut(o.resource) {
                    r.running.retain(|x| x.attempt != o.attempt);
                }
                store.lose_attempt(&a, now, &format!("refused by the resource: {}", o.message))?;
                pending.queue.push_back((a.job_id, Some(o.resource)));
                continue;
            }
            let charge = farm
                .finish_billed(o.resource, o.attempt, o.wall, o.cpu, o.ok, o.billed)
                .map_or(Money::ZERO, |x| x.1);
            let st = store.finish_attempt(
                exp,
                &a,
                o.ok,
                o.exit_code,
                o.wall,
                o.cpu,
                charge,
                &o.message,
                now,
                max_retries,
            )?;
            if st == "pending" {
                pending.queue.push_back((a.job_id, Some(o.resource)));
            }
        }
        // Steering: whatever another process wrote takes effect at this event.
        let ex = store.experiment(exp)?;
        farm.deadline = ex.deadline;
        farm.budget = ex.budget;
        state = ex.state.clone();
        for (k, r) in farm.resources.iter_mut().enumerate() {
            r.available = adapters[k].is_some() && now >= unavailable_until[k];
        }
        let mut launches = Vec::new();
        if state == "cancelled" {
            for a in adapters.iter_mut().flatten() {
                a.cancel_all();
            }
            for a in in_flight.values() {
                store.lose_attempt(a, now, "cancelled")?;
            }
            store.cancel_pending(exp)?;
            store.set_state(exp, "cancelled", Some(now))?;
            store.release(exp)?;
            store.commit()?;
            return Ok(state);
        }
        if state != "paused" {
            let d = farm.decide(now, pending.queue.len() as u64);
            let usable = farm.resources.iter().filter(|r| r.available).count();
            for (r, &n) in d.start.iter().enumerate() {
                for _ in 0..n {
                    let Some((job_id, _)) = pending.pop_for(r, usable <= 1) else { break };
                    let (row, l) = dispatch(&store, &mut farm, &ctx, job_id, r, now)?;
                    in_flight.insert(row.id, row);
                    launches.push(l);
                }
            }
            // A job that failed on one resource is offered to another with a free slot.
            let mut k = 0;
            while k < pending.queue.len().min(64) {
                let (job_id, avoid) = pending.queue[k];
                let target = avoid.and_then(|a| {
                    (0..farm.resources.len())
                        .filter(|&r| {
                            r != a && farm.resources[r].available && farm.resources[r].free_slots() > 0
                        })
                        .filter(|&r| farm.job_cost(r, now) <= farm.budget_left())
                        .min_by_key(|&r| farm.job_cost(r, now))
                });
                match target {
                    Some(r) => {
                        pending.queue.remove(k);
                        let (row, l) = dispatch(&store, &mut farm, &ctx, job_id, r, now)?;
                        in_flight.insert(row.id, row);
                        launches.push(l);
                    }
                    None => k += 1,
                }
            }
        }
        if last_beat.elapsed() > Duration::from_secs(1) {
            store.heartbeat(exp, now)?;
            last_beat = Instant::now();
        }
        let finished = pending.queue.is_empty() && in_flight.is_empty();
        // A resource sitting out will be back: wait for it rather than give up.
        let waiting = unavailable_until.iter().any(|&t| t > now);
        let stalled =
            !finished && in_flight.is_empty() && launches.is_empty() && state != "paused" && !waiting;
        // Nothing to do until a resource is back: wait, but only once the transaction is
        // committed, or the write lock held through the wait would starve every steering
        // command (`cancel`, `set-budget`, ...) for as long as the resource sits out.
        let idle = !finished && in_flight.is_empty() && launches.is_empty() && waiting;
        if finished || stalled {
            state = if finished { "done".into() } else { "stalled".into() };
            store.set_state(exp, &state, Some(now))?;
            store.release(exp)?;
        }
        // Records first, then the processes: a start that is not on disk never runs.
        store.commit()?;
        for l in launches {
            let (r, attempt) = (l.resource, l.attempt);
            let started = match adapters[r].as_mut() {
                Some(a) => a.start(l, tx.clone()),
                None => continue,
            };
            if let Err(err) = started {
                tracing::warn!("{err}; dropping the resource for {SIT_OUT_SECS} s");
                unavailable_until[r] = now + SIT_OUT_SECS;
                let _ = tx.send(Outcome {
                    attempt,
                    resource: r,
                    ok: false,
                    exit_code: None,
                    wall: 0.0,
                    cpu: 0.0,
                    message: err.to_string(),
                    rejected: true,
                    billed: None,
                });
            }
        }
        if let Some(cb) = opts.on_progress.as_mut() {
            if finished || stalled || last_progress.elapsed() > Duration::from_millis(100) {
                last_progress = Instant::now();
                let counts = store.counts(exp)?;
                cb(&Progress { counts, total, spent: farm.spent, held: farm.held(), state: state.clone() });
            }
        }
        if finished || stalled {
            return Ok(state);
        }
        if idle {
            std::thread::sleep(opts.poll);
        }
    }
}

struct Ctx {
    exp: i64,
    jobs_dir: PathBuf,
    os: String,
}

/// Records the start of job `job_id` on resource `r` and prepares its launch.
fn dispatch(
    store: &Store,
    farm: &mut Farm,
    ctx: &Ctx,
    job_id: i64,
    r: usize,
    now: f64,
) -> Result<(AttemptRow, Launch), EngineError> {
    let (idx, params) = store.job(job_id)?;
    let hold = farm.start(r, 0, job_id, now);
    let price = farm.resources[r].cfg.price_at(now);
    let (id, dir) = store.start_attempt(ctx.exp, job_id, r, now, price, hold, &|id| {
        ctx.jobs_dir.join(format!("{}-{id}", idx + 1)).to_string_lossy().into_owned()
    })?;
    if let Some(run) = farm.resources[r].running.last_mut() {
        run.attempt = id;
    }
    let mut vars: Vars = serde_json::from_str::<std::collections::BTreeMap<String, String>>(&params)
        .map_err(|err| StoreError::Corrupt { what: "job parameters", detail: err.to_string() })?;
    vars.insert("jobname".into(), (idx + 1).to_string());
    vars.insert("nimrod_jobindex".into(), (idx + 1).to_string());
    vars.insert("OS".into(), ctx.os.clone());
    let row = AttemptRow { id, job_id, pos: r, started: now, price, hold, dir: dir.clone() };
    let res = &farm.resources[r];
    let estimate = res.secs_per_job(true).unwrap_or(farm.fallback_secs);
    let launch = Launch {
        attempt: id,
        resource: r,
        dir: PathBuf::from(dir),
        vars,
        estimate,
        deadline_in: farm.deadline - now,
        budget: hold,
    };
    Ok((row, launch))
}
