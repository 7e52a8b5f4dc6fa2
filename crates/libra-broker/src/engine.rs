//! The persistent task-farming engine: dispatches an experiment's jobs to its resources as the
//! DBC planner says, records every start, end and payment in the broker's database, re-plans
//! at every event, obeys steering written to the database by any process, and resumes after
//! a crash without running a job twice: an attempt is recorded before its resource hears of it,
//! and on resume every attempt left in flight is asked after (a Libra cluster by the attempt's
//! idempotency key, a local job through its keeper) instead of being started again.
//!
//! One round of the loop, in one transaction: `absorb` the outcomes that arrived, `steer` by
//! what the database now says (deadline, budget, state), `plan` the starts; after the commit,
//! `launch` them (a start that is not on disk never runs).

use crate::adapter::{self, Launch, Outcome, ResourceAdapter};
use crate::farm::{Farm, FarmResource, Running};
use crate::plan::{self, PlanError, Vars};
use crate::resources::{Kind, KindSpec, ResourceConfig, SavedLogin};
use crate::state::ExperimentState;
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
    #[error("sweep {exp} is being run by process {pid} (heartbeat {age:.0} s ago); steer it, or stop that process first")]
    AlreadyRunning { exp: i64, pid: i64, age: f64 },
    #[error("stored algorithm: {0}")]
    Algorithm(#[from] libra_core::dbc::UnknownAlgorithm),
    #[error("no resource of sweep {0} can run jobs: {1}")]
    NoResource(i64, String),
    #[error(
        "{why}: {} running on it when the last engine stopped, and may run there still (nothing is run \
         again elsewhere or given up): give the resource what it lacks (a token: `libra login`, LIBRA_TOKEN) \
         and run this again, which takes up what runs there",
        jobs_of_the_sweep(*.jobs)
    )]
    Stranded { jobs: usize, why: String },
}

fn jobs_of_the_sweep(n: usize) -> String {
    if n == 1 {
        "1 of the sweep's jobs was".into()
    } else {
        format!("{n} of the sweep's jobs were")
    }
}

pub use libra_api::unix_now as now_unix;

/// How long a resource that refused a job or did not answer is left out of the plan.
pub const SIT_OUT_SECS: f64 = 15.0;

/// A heartbeat older than this means the engine that wrote it is gone.
pub const STALE_SECS: f64 = 10.0;

/// How long a cancel waits for the jobs it stopped to report how they ended (and the CPU they
/// used, which the sweep pays for) before it kills what still runs; then how long it waits for
/// those.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);
pub const KILL_GRACE: Duration = Duration::from_secs(2);
// A keeper kills a job that ignores the SIGTERM itself, and reports what it used, before the
// engine's wait ends (else the engine kills the keeper with its job, and nothing is recorded).
const _: () = assert!(crate::adapter::local::KEEPER_KILL_AFTER.as_millis() + 1000 < CANCEL_GRACE.as_millis());

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
    pub state: ExperimentState,
}

/// Called with the experiment's progress as it runs (at most ten times a second).
pub type ProgressFn = Box<dyn FnMut(&Progress)>;

pub struct EngineOptions {
    /// How often steering is read while nothing happens.
    pub poll: Duration,
    pub on_progress: Option<ProgressFn>,
    /// The `libra` binary, to run each local job under a keeper (`libra sweep keep-attempt`)
    /// that outlives this process, so that a resumed engine adopts the job instead of running it
    /// again. None: local jobs run on this process's threads and die with it.
    pub keeper: Option<PathBuf>,
    /// Called once, after the run's first committed round: the run got past opening and
    /// recovery (a host uses it to forget why the run before it stopped).
    pub on_started: Option<Box<dyn FnOnce()>>,
    /// The login saved on this machine (`libra login`), which a `libra` resource on its server
    /// that names no token acts through (`LibraSpec::with_login`). None for a sweep hosted by a
    /// server: a server never lends its own user's login.
    pub login: Option<SavedLogin>,
    /// Opens a sweep that is cancelled but whose cancel no engine finished (its engine was
    /// killed meanwhile), to stop what it left running: `libra sweep cancel` with no engine.
    pub take_up_cancelled: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            poll: Duration::from_millis(100),
            on_progress: None,
            keeper: None,
            on_started: None,
            login: None,
            take_up_cancelled: false,
        }
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
pub fn run(db: &Path, exp: i64, opts: EngineOptions) -> Result<ExperimentState, EngineError> {
    match Engine::open(db, exp, opts)? {
        Some(engine) => engine.run(),
        None => Ok(Store::open(db)?.experiment(exp)?.state),
    }
}

/// Records the cancel of a sweep no engine runs (it was killed, or never started): attempts left
/// running are lost and pending jobs cancelled. Returns the attempts (directory and key) whose
/// keepers may still run their local jobs, for `adapter::local::stop_keepers`: a keeper outlives
/// the engine that started it, and its job would run on after the cancel.
pub fn cancel_without_engine(
    store: &Store,
    exp: i64,
    now: f64,
) -> Result<Vec<(PathBuf, String)>, StoreError> {
    let work = PathBuf::from(store.experiment(exp)?.work_dir);
    store.begin()?;
    let running = store.running_attempts(exp)?;
    for a in &running {
        store.lose_attempt(a, now, "cancelled")?;
    }
    store.cancel_pending(exp)?;
    store.set_state(exp, ExperimentState::Cancelled, Some(now))?;
    store.commit()?;
    let own = sweep_key(store, exp, &work)?;
    Ok(running.iter().map(|a| (PathBuf::from(&a.dir), attempt_key(&work, &own, a.id))).collect())
}

/// The sweep's own random key, which its attempts' keys are made from: kept in its database
/// (which a backup carries) and in its work directory (`SWEEP_KEY`, where it was kept alone
/// before). Each is made whole from the other: a sweep restored from a backup without its work
/// directory keeps its attempts' keys, and so finds its jobs on a Libra cluster again rather
/// than submit them a second time. Empty for a sweep made before keys were written.
pub fn sweep_key(store: &Store, exp: i64, work_dir: &Path) -> Result<Vec<u8>, StoreError> {
    let file = work_dir.join(SWEEP_KEY);
    let on_disk = std::fs::read(&file).unwrap_or_default();
    match store.sweep_key(exp)? {
        Some(kept) if !kept.is_empty() => {
            if on_disk != kept.as_bytes() && std::fs::create_dir_all(work_dir).is_ok() {
                // Best effort, for an older binary that reads the file alone; the database has
                // the last word.
                let _ = std::fs::write(&file, &kept);
            }
            Ok(kept.into_bytes())
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(&on_disk) {
                if !text.is_empty() {
                    store.set_sweep_key(exp, text)?;
                }
            }
            Ok(on_disk)
        }
    }
}

/// The idempotency key of an attempt: the same whenever the attempt is asked after, and no
/// other attempt's (the experiment's work directory names the experiment and its database;
/// `own` is the sweep's random key, `sweep_key`).
pub fn attempt_key(work_dir: &Path, own: &[u8], attempt: i64) -> String {
    use std::os::unix::ffi::OsStrExt;
    // The sweep's own key, where it has one (every sweep made since it was written): the path
    // alone is the same for a sweep made anew in a directory reused.
    let h = work_dir
        .as_os_str()
        .as_bytes()
        .iter()
        .chain(own)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("libra-sweep-{h:016x}-{attempt}")
}

/// In a sweep's work directory: its random key, which its attempts' keys are made from
/// (`attempt_key`), written when the sweep is made (and kept in its database: `sweep_key`).
pub const SWEEP_KEY: &str = ".sweep-key";

/// One experiment being run by this process.
pub struct Engine {
    store: Store,
    exp: i64,
    farm: Farm,
    adapters: Vec<Option<Box<dyn ResourceAdapter>>>,
    pending: Pending,
    in_flight: HashMap<i64, AttemptRow>,
    unavailable_until: Vec<f64>,
    tx: mpsc::Sender<Outcome>,
    rx: mpsc::Receiver<Outcome>,
    state: ExperimentState,
    max_retries: u32,
    total: u64,
    work: PathBuf,
    /// The sweep's random key (`sweep_key`).
    key: Vec<u8>,
    jobs_dir: PathBuf,
    os: String,
    opts: EngineOptions,
}

impl Engine {
    /// Claims the experiment for this process and recovers what an engine before it left in
    /// flight. None when there is nothing to run (it has ended).
    pub fn open(db: &Path, exp: i64, opts: EngineOptions) -> Result<Option<Engine>, EngineError> {
        let store = Store::open(db)?;
        let e = store.experiment(exp)?;
        if let Some((pid, age)) = live_engine(&e, now_unix()) {
            return Err(EngineError::AlreadyRunning { exp, pid, age });
        }
        let unfinished_cancel = e.state == ExperimentState::Cancelled && e.finished.is_none();
        if e.state.is_final() && !(opts.take_up_cancelled && unfinished_cancel) {
            return Ok(None);
        }
        store.claim(exp, std::process::id(), now_unix())?;
        if e.state == ExperimentState::Stalled {
            // Run again (after a new deadline or budget, say): it is running until it stalls anew.
            store.set_state(exp, ExperimentState::Running, None)?;
        }
        let plan = Arc::new(plan::parse(&e.plan_text)?);
        let algorithm: Algorithm = e.algorithm.parse()?;
        let configs = store.resources(exp)?;
        let root = PathBuf::from(&e.root_dir);
        let work = PathBuf::from(&e.work_dir);
        let measured = store.per_resource(exp)?;
        let mut adapters: Vec<Option<Box<dyn ResourceAdapter>>> = Vec::new();
        let mut left_out: Vec<(usize, String)> = Vec::new();
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
            // A login lent to a resource is used for this run only: it is never stored.
            let lent;
            let cfg = match &cfg.spec {
                KindSpec::Libra(l) if opts.login.is_some() => {
                    lent = ResourceConfig {
                        spec: KindSpec::Libra(l.with_login(opts.login.as_ref())),
                        ..cfg.clone()
                    };
                    &lent
                }
                _ => cfg,
            };
            let built = adapter::build(cfg, plan.clone(), &e.plan_text, root.clone(), opts.keeper.clone());
            match built {
                Ok(a) => adapters.push(Some(a)),
                Err(err) => {
                    left_out.push((k, err.to_string()));
                    fr.available = false;
                    adapters.push(None);
                }
            }
            resources.push(fr);
        }
        // A job an earlier engine left running on a resource this one cannot use may still run
        // there (on a Libra cluster, under Slurm, under a local keeper): taken for lost, it would
        // run a second time elsewhere while the first ran on, paid for. Refused until the
        // resource can be used again.
        if !left_out.is_empty() {
            let recorded = adapter::read_outcomes(&work);
            let running = store.running_attempts(exp)?;
            for (k, why) in &left_out {
                let jobs = running.iter().filter(|a| a.pos == *k && !recorded.contains_key(&a.id)).count();
                if jobs > 0 {
                    return Err(EngineError::Stranded { jobs, why: why.clone() });
                }
            }
        }
        for (_, why) in &left_out {
            tracing::warn!("{why}; the resource is left out");
        }
        if adapters.iter().all(Option::is_none) {
            let why: Vec<&str> = left_out.iter().map(|(_, w)| w.as_str()).collect();
            return Err(EngineError::NoResource(exp, why.join("; ")));
        }
        let key = sweep_key(&store, exp, &work)?;
        let farm = Farm {
            resources,
            algorithm,
            deadline: e.deadline,
            budget: e.budget,
            spent: store.spent(exp)?,
            fallback_secs: e.estimate_secs.unwrap_or(60.0),
            calibration: crate::farm::Calibration::default(),
            assumed_secs: None,
        };
        let total = {
            let c = store.counts(exp)?;
            c.pending + c.running + c.done + c.failed + c.cancelled
        };
        let (tx, rx) = mpsc::channel::<Outcome>();
        let n = farm.resources.len();
        let mut engine = Engine {
            store,
            exp,
            farm,
            adapters,
            pending: Pending { queue: VecDeque::new() },
            in_flight: HashMap::new(),
            unavailable_until: vec![0.0; n],
            tx,
            rx,
            state: ExperimentState::Running,
            max_retries: e.max_retries,
            total,
            jobs_dir: work.join("jobs"),
            key,
            work,
            os: std::env::consts::OS.to_string(),
            opts,
        };
        engine.recover(now_unix(), unfinished_cancel)?;
        engine.pending.queue = engine.store.pending(exp)?.into();
        Ok(Some(engine))
    }

    /// Attempts an earlier engine left running: finished (its resource's outcome log says how),
    /// still known to its resource (taken up again: a Libra cluster answers by the attempt's key,
    /// a local keeper is still running), or lost (its job runs again).
    fn recover(&mut self, now: f64, cancelling: bool) -> Result<(), EngineError> {
        let mut recorded = adapter::read_outcomes(&self.work);
        self.store.begin()?;
        for a in self.store.running_attempts(self.exp)? {
            let run =
                Running { attempt: a.id, job: a.job_id, started: a.started, hold: a.hold, price: a.price };
            if let Some(r) = self.farm.resources.get_mut(a.pos) {
                r.running.push(run);
            }
            if let Some(o) = recorded.remove(&a.id) {
                let mut o = Outcome { resource: a.pos, ..o };
                // The log holds no message; the attempt's own file says why it ended. In a sweep
                // being cancelled, a job its keeper stopped for the cancel (made with no engine
                // running) is stopped, paid for the CPU it used, not failed. (Otherwise a keeper
                // stopped by someone else, a Slurm time limit say, is a failure, as it was.)
                if let Some(f) = adapter::read_outcome_file(Path::new(&a.dir)).filter(|f| f.attempt == a.id) {
                    o.message = f.message;
                }
                if cancelling && !o.ok && o.message == adapter::local::STOPPED {
                    self.stopped(&a, o, None, now)?;
                } else {
                    self.finish(&a, o, now)?;
                }
                continue;
            }
            let launch = self.launch_for(&a, now)?;
            let resumed = match self.adapters.get_mut(a.pos).and_then(Option::as_mut) {
                Some(ad) => ad.resume(launch, self.tx.clone()).unwrap_or_else(|e| {
                    tracing::warn!("{e}");
                    false
                }),
                None => false,
            };
            if resumed {
                tracing::info!(attempt = a.id, "taken up again from where the last engine left it");
                self.in_flight.insert(a.id, a);
            } else {
                if let Some(r) = self.farm.resources.get_mut(a.pos) {
                    r.running.retain(|x| x.attempt != a.id);
                }
                self.store.lose_attempt(
                    &a,
                    now,
                    "the broker stopped while it ran, and its resource cannot tell how it went",
                )?;
            }
        }
        self.store.commit()?;
        Ok(())
    }

    /// Records an attempt's end and what it cost.
    fn finish(&mut self, a: &AttemptRow, o: Outcome, now: f64) -> Result<(), EngineError> {
        let charge = self
            .farm
            .finish_billed(o.resource, o.attempt, o.wall, o.cpu, o.ok, o.billed)
            .map_or(Money::ZERO, |x| x.1);
        let st = self.store.finish_attempt(
            self.exp,
            a,
            o.ok,
            o.exit_code,
            o.wall,
            o.cpu,
            charge,
            &o.message,
            now,
            self.max_retries,
        )?;
        if st == "pending" {
            self.pending.queue.push_back((a.job_id, Some(o.resource)));
        }
        Ok(())
    }

    /// Records an attempt stopped by a cancel: lost, "cancelled", paying what its resource
    /// billed (`asked`, else the outcome's own bill) or price times the CPU it used.
    fn stopped(
        &mut self,
        a: &AttemptRow,
        o: Outcome,
        asked: Option<Money>,
        now: f64,
    ) -> Result<(), EngineError> {
        let asked = asked.or(o.billed);
        let charged = self.farm.stop(o.resource, o.attempt, o.cpu, asked).map_or(Money::ZERO, |x| x.1);
        self.store.lose_attempt_charged(a, now, "cancelled", charged, Some((o.wall, o.cpu)))?;
        Ok(())
    }

    /// The outcomes that arrived since the last round.
    fn absorb(&mut self, events: Vec<Outcome>, now: f64) -> Result<(), EngineError> {
        for o in events {
            let Some(a) = self.in_flight.remove(&o.attempt) else { continue };
            if o.rejected {
                let name = &self.farm.resources[o.resource].cfg.name;
                tracing::warn!(resource = %name, "job refused: {}; the resource sits out {SIT_OUT_SECS} s", o.message);
                self.unavailable_until[o.resource] = now + SIT_OUT_SECS;
                if let Some(r) = self.farm.resources.get_mut(o.resource) {
                    r.running.retain(|x| x.attempt != o.attempt);
                }
                self.store.lose_attempt(&a, now, &format!("{}{}", crate::store::REFUSED, o.message))?;
                self.pending.queue.push_back((a.job_id, Some(o.resource)));
                continue;
            }
            self.finish(&a, o, now)?;
        }
        Ok(())
    }

    /// What any process wrote takes effect: the deadline, the budget, the state.
    fn steer(&mut self, now: f64) -> Result<(), EngineError> {
        let ex = self.store.experiment(self.exp)?;
        self.farm.deadline = ex.deadline;
        self.farm.budget = ex.budget;
        self.state = ex.state;
        for (k, r) in self.farm.resources.iter_mut().enumerate() {
            r.available = self.adapters[k].is_some() && now >= self.unavailable_until[k];
        }
        Ok(())
    }

    /// Stops every attempt still running (a cancel), outside any transaction: what each
    /// self-billing resource charged, by attempt, and the outcomes of the attempts whose
    /// resources report them (a local job killed by the cancel: the CPU it used), heard within
    /// `CANCEL_GRACE`. What is still running then is killed.
    fn stop_all(&mut self) -> (HashMap<i64, Money>, Vec<Outcome>) {
        let mut billed: HashMap<i64, Money> = HashMap::new();
        for a in self.adapters.iter_mut().flatten() {
            billed.extend(a.cancel_all());
        }
        let reports = |pos: usize| {
            self.adapters.get(pos).and_then(Option::as_ref).is_some_and(|a| a.reports_after_cancel())
        };
        let mut waiting: std::collections::HashSet<i64> = self
            .in_flight
            .values()
            .filter(|a| !billed.contains_key(&a.id) && reports(a.pos))
            .map(|a| a.id)
            .collect();
        let mut heard = Vec::new();
        let mut listen = |until: Instant, waiting: &mut std::collections::HashSet<i64>| {
            while !waiting.is_empty() {
                let Some(left) = until.checked_duration_since(Instant::now()) else { break };
                match self.rx.recv_timeout(left) {
                    Ok(o) => {
                        waiting.remove(&o.attempt);
                        heard.push(o);
                    }
                    Err(_) => break,
                }
            }
        };
        listen(Instant::now() + CANCEL_GRACE, &mut waiting);
        if !waiting.is_empty() {
            tracing::warn!(
                attempts = waiting.len(),
                "jobs still running {CANCEL_GRACE:?} after the cancel: killed"
            );
            for a in self.adapters.iter_mut().flatten() {
                a.kill_all();
            }
            listen(Instant::now() + KILL_GRACE, &mut waiting);
        }
        (billed, heard)
    }

    /// A cancel: every attempt stopped (`stop_all`), nothing more starts. A job that ended as the
    /// cancel came is recorded as it ended; one stopped by it is lost, and pays what its
    /// resource billed, or price times the CPU it used.
    fn cancel(
        &mut self,
        now: f64,
        billed: HashMap<i64, Money>,
        heard: Vec<Outcome>,
    ) -> Result<(), EngineError> {
        for o in heard {
            let Some(a) = self.in_flight.remove(&o.attempt) else { continue };
            if o.rejected {
                self.store.lose_attempt(&a, now, "cancelled")?;
                continue;
            }
            if o.ok {
                self.finish(&a, o, now)?;
                continue;
            }
            let asked = billed.get(&a.id).copied();
            self.stopped(&a, o, asked, now)?;
        }
        for a in self.in_flight.values() {
            // A Libra cluster's cancelled job is paid for (the CPU it used): the sweep says so.
            let charged = billed.get(&a.id).copied().unwrap_or(Money::ZERO);
            self.store.lose_attempt_charged(a, now, "cancelled", charged, None)?;
        }
        self.store.cancel_pending(self.exp)?;
        self.store.set_state(self.exp, ExperimentState::Cancelled, Some(now))?;
        self.store.release(self.exp)?;
        Ok(())
    }

    /// The starts the planner asks for now, recorded (not yet launched).
    fn plan_starts(&mut self, now: f64) -> Result<Vec<Launch>, EngineError> {
        let mut launches = Vec::new();
        // Past the deadline nothing more starts (what runs finishes): the sweep stalls, and
        // `set-deadline` then `resume` go on. A planner may still probe a resource not yet
        // measured, and a Libra cluster refuses a job due in no time, again and again.
        if now >= self.farm.deadline {
            return Ok(launches);
        }
        let d = self.farm.decide(now, self.pending.queue.len() as u64);
        let usable = self.farm.resources.iter().filter(|r| r.available).count();
        for (r, &n) in d.start.iter().enumerate() {
            for _ in 0..n {
                let Some((job_id, _)) = self.pending.pop_for(r, usable <= 1) else { break };
                launches.push(self.dispatch(job_id, r, now)?);
            }
        }
        // A job that failed on one resource is offered to another with a free slot.
        let mut k = 0;
        while k < self.pending.queue.len().min(64) {
            let (job_id, avoid) = self.pending.queue[k];
            let farm = &self.farm;
            let target = avoid.and_then(|a| {
                (0..farm.resources.len())
                    .filter(|&r| r != a && farm.resources[r].available && farm.resources[r].free_slots() > 0)
                    .filter(|&r| farm.job_cost(r, now) <= farm.budget_left())
                    .min_by_key(|&r| farm.job_cost(r, now))
            });
            match target {
                Some(r) => {
                    self.pending.queue.remove(k);
                    launches.push(self.dispatch(job_id, r, now)?);
                }
                None => k += 1,
            }
        }
        Ok(launches)
    }

    /// Records the start of job `job_id` on resource `r` (its attempt, hold and directory).
    fn dispatch(&mut self, job_id: i64, r: usize, now: f64) -> Result<Launch, EngineError> {
        let hold = self.farm.start(r, 0, job_id, now);
        let price = self.farm.resources[r].cfg.price_at(now);
        let (idx, _) = self.store.job(job_id)?;
        let jobs_dir = self.jobs_dir.clone();
        let (id, dir) = self.store.start_attempt(self.exp, job_id, r, now, price, hold, &|id| {
            jobs_dir.join(format!("{}-{id}", idx + 1)).to_string_lossy().into_owned()
        })?;
        if let Some(run) = self.farm.resources[r].running.last_mut() {
            run.attempt = id;
        }
        let row = AttemptRow { id, job_id, pos: r, started: now, price, hold, dir };
        let launch = self.launch_for(&row, now)?;
        self.in_flight.insert(id, row);
        Ok(launch)
    }

    /// What a resource is handed for an attempt (at its start, or when it is taken up again).
    fn launch_for(&self, a: &AttemptRow, now: f64) -> Result<Launch, EngineError> {
        let (idx, params) = self.store.job(a.job_id)?;
        let mut vars: Vars = serde_json::from_str::<std::collections::BTreeMap<String, String>>(&params)
            .map_err(|err| StoreError::Corrupt { what: "job parameters", detail: err.to_string() })?;
        vars.insert("jobname".into(), (idx + 1).to_string());
        vars.insert("nimrod_jobindex".into(), (idx + 1).to_string());
        vars.insert("OS".into(), self.os.clone());
        let res = &self.farm.resources[a.pos];
        let estimate = match res.cfg.kind() {
            // A Libra cluster admits and prices a job by its estimate, and the sweep offers the
            // resource's price per CPU-second of it (`budget` is the hold): the estimate is what
            // the hold pays for at the attempt's price. That is the measured length once the
            // resource is calibrated and, before, the length the planner assumed when it sized
            // the hold (`Farm::start`). The fallback here instead offered the cluster the hold
            // spread over a longer estimate: below the resource's price, and refused by a
            // cluster that would have taken the job (a budget of 200 for 6 jobs at price 2:
            // 33.33 held for an assumed 16.7 s, offered for a 60 s estimate, 0.56 a second).
            // The hold is rounded up to a cent, so at a small price it pays for far longer than
            // the job: never more than that length (at 0.0001 a CPU-second a 5 s job is held
            // 0.01, which would have been offered as a 100 s job and refused for its deadline
            // or priced for 100 s).
            Kind::Libra if a.price > 0.0 => (a.hold.as_credits_f64() / a.price)
                .min(self.farm.job_secs(a.pos))
                .max(crate::resources::LIBRA_MIN_ESTIMATE_SECS),
            _ => res.secs_per_job(true).unwrap_or(self.farm.fallback_secs),
        };
        Ok(Launch {
            attempt: a.id,
            key: attempt_key(&self.work, &self.key, a.id),
            resource: a.pos,
            dir: PathBuf::from(&a.dir),
            vars,
            estimate,
            deadline_in: self.farm.deadline - now,
            budget: a.hold,
        })
    }

    /// Hands the recorded starts to their resources (after the commit that recorded them).
    fn launch(&mut self, launches: Vec<Launch>, now: f64) {
        for l in launches {
            let (r, attempt) = (l.resource, l.attempt);
            let started = match self.adapters[r].as_mut() {
                Some(a) => a.start(l, self.tx.clone()),
                None => continue,
            };
            if let Err(err) = started {
                tracing::warn!("{err}; dropping the resource for {SIT_OUT_SECS} s");
                self.unavailable_until[r] = now + SIT_OUT_SECS;
                let _ = self.tx.send(Outcome {
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
    }

    fn progress(&mut self, force: bool, last: &mut Instant) -> Result<(), EngineError> {
        if let Some(cb) = self.opts.on_progress.as_mut() {
            if force || last.elapsed() > Duration::from_millis(100) {
                *last = Instant::now();
                let counts = self.store.counts(self.exp)?;
                cb(&Progress {
                    counts,
                    total: self.total,
                    spent: self.farm.spent,
                    held: self.farm.held(),
                    state: self.state,
                });
            }
        }
        Ok(())
    }

    /// The loop, until the experiment is done, stalls, or is cancelled.
    pub fn run(mut self) -> Result<ExperimentState, EngineError> {
        let mut last_beat = Instant::now();
        let mut last_progress = Instant::now() - Duration::from_secs(1);
        loop {
            let mut events = Vec::new();
            if !self.in_flight.is_empty() {
                if let Ok(o) = self.rx.recv_timeout(self.opts.poll) {
                    events.push(o);
                }
            } else if self.state == ExperimentState::Paused {
                std::thread::sleep(self.opts.poll);
            }
            while let Ok(o) = self.rx.try_recv() {
                events.push(o);
            }
            let now = now_unix();
            self.store.begin()?;
            self.absorb(events, now)?;
            self.steer(now)?;
            if self.state == ExperimentState::Cancelled {
                // What was heard is kept; the jobs are stopped and waited for without the write
                // lock, which every steering command needs.
                self.store.commit()?;
                let (billed, heard) = self.stop_all();
                let now = now_unix();
                self.store.begin()?;
                self.cancel(now, billed, heard)?;
                self.store.commit()?;
                return Ok(self.state);
            }
            let launches =
                if self.state == ExperimentState::Paused { Vec::new() } else { self.plan_starts(now)? };
            if last_beat.elapsed() > Duration::from_secs(1) {
                self.store.heartbeat(self.exp, now)?;
                last_beat = Instant::now();
            }
            let finished = self.pending.queue.is_empty() && self.in_flight.is_empty();
            // A resource sitting out will be back: wait for it rather than give up.
            let waiting = self.unavailable_until.iter().any(|&t| t > now);
            let quiet = !finished && self.in_flight.is_empty() && launches.is_empty();
            let stalled = quiet && self.state != ExperimentState::Paused && !waiting;
            // Nothing to do until a resource is back: wait, but only once the transaction is
            // committed, or the write lock held through the wait would starve every steering
            // command (`cancel`, `set-budget`, ...) for as long as the resource sits out.
            let idle = quiet && waiting;
            if finished || stalled {
                self.state = if finished { ExperimentState::Done } else { ExperimentState::Stalled };
                self.store.set_state(self.exp, self.state, Some(now))?;
                self.store.release(self.exp)?;
            }
            // Records first, then the processes: a start that is not on disk never runs.
            self.store.commit()?;
            if let Some(started) = self.opts.on_started.take() {
                started();
            }
            self.launch(launches, now);
            self.progress(finished || stalled, &mut last_progress)?;
            if finished || stalled {
                return Ok(self.state);
            }
            if idle {
                std::thread::sleep(self.opts.poll);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_keys_are_stable_and_distinct() {
        let a = Path::new("/data/experiments/1");
        let k = b"0123".as_slice();
        assert_eq!(attempt_key(a, k, 7), attempt_key(a, k, 7));
        assert_ne!(attempt_key(a, k, 7), attempt_key(a, k, 8));
        assert_ne!(attempt_key(a, k, 7), attempt_key(Path::new("/data/experiments/2"), k, 7));
        assert!(attempt_key(a, k, 7).len() <= 128);
        // The same path with another sweep's key (or none): another key.
        assert_ne!(attempt_key(a, k, 1), attempt_key(a, b"4567", 1));
        assert_ne!(attempt_key(a, k, 1), attempt_key(a, b"", 1));
    }

    /// A database from before the key was kept in it gains the column when opened, keeping
    /// what it holds.
    #[test]
    fn a_database_without_the_key_column_is_brought_up_to_date() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("old.db");
        let old = rusqlite::Connection::open(&db).unwrap();
        old.execute_batch(
            "CREATE TABLE experiments (id INTEGER PRIMARY KEY, name TEXT NOT NULL, plan_text TEXT NOT NULL, \
             root_dir TEXT NOT NULL, work_dir TEXT NOT NULL, algorithm TEXT NOT NULL, deadline REAL NOT NULL, \
             budget_cents INTEGER NOT NULL, state TEXT NOT NULL, max_retries INTEGER NOT NULL, estimate_secs REAL, \
             created REAL NOT NULL, finished REAL, engine_pid INTEGER, heartbeat REAL); \
             INSERT INTO experiments VALUES (1, 'old', '', '', '/w', 'cost', 0, 0, 'running', 0, NULL, 0, NULL, NULL, NULL);",
        )
        .unwrap();
        drop(old);
        let store = Store::open(&db).unwrap();
        assert_eq!(store.experiment(1).unwrap().name, "old");
        assert_eq!(store.sweep_key(1).unwrap(), None);
        store.set_sweep_key(1, "0123").unwrap();
        drop(store);
        assert_eq!(Store::open(&db).unwrap().sweep_key(1).unwrap().as_deref(), Some("0123"));
    }

    /// The key is kept in the database and in the work directory, and each is made whole from
    /// the other: a sweep whose work directory was lost (restored from a backup) or made by a
    /// binary that kept it in the directory alone keeps its attempts' keys.
    #[test]
    fn a_sweeps_key_survives_the_loss_of_its_work_directory() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("b.db")).unwrap();
        store.conn.execute_batch(
            "INSERT INTO experiments (id, name, plan_text, root_dir, work_dir, algorithm, deadline, budget_cents, state, max_retries, created) \
             VALUES (1, 's', '', '', '', 'cost', 0, 0, 'running', 0, 0)",
        ).unwrap();
        let work = d.path().join("experiments").join("1");
        std::fs::create_dir_all(&work).unwrap();
        // Made by an older binary: in the directory only. Read, and kept in the database.
        std::fs::write(work.join(SWEEP_KEY), "0123").unwrap();
        assert_eq!(sweep_key(&store, 1, &work).unwrap(), b"0123");
        assert_eq!(store.sweep_key(1).unwrap().as_deref(), Some("0123"));
        let before = attempt_key(&work, &sweep_key(&store, 1, &work).unwrap(), 5);
        // The directory lost: the same key, and the file written again.
        std::fs::remove_dir_all(&work).unwrap();
        assert_eq!(attempt_key(&work, &sweep_key(&store, 1, &work).unwrap(), 5), before);
        assert_eq!(std::fs::read_to_string(work.join(SWEEP_KEY)).unwrap(), "0123");
        // No key anywhere (a sweep from before keys): the path alone, as it was.
        store.conn.execute_batch("UPDATE experiments SET sweep_key = NULL").unwrap();
        std::fs::remove_file(work.join(SWEEP_KEY)).unwrap();
        assert!(sweep_key(&store, 1, &work).unwrap().is_empty());
        assert_eq!(store.sweep_key(1).unwrap(), None);
    }
}
