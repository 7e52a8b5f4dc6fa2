//! The `libra` resource: a Libra cluster through its HTTP API. Each job is submitted with its
//! estimate, the time left to the sweep's deadline and the budget held for it, once the
//! cluster's quote says it would be admitted (else the resource is dropped from the plan for a
//! while, and nothing is recorded on the cluster); the cluster runs it and bills what it charged,
//! which is what the broker pays.

use super::cluster_poll::{Poll, Watch};
use super::{write_marker, AdapterError, Launch, Outcome, ResourceAdapter};
use crate::plan::{substitute, Command, ExecKind, Plan, Vars};
use crate::resources::{LibraSpec, LIBRA_MIN_ESTIMATE_SECS};
use libra_api::Client;
use libra_api::{JobState, QuoteRequest, SubmitRequest};
use libra_core::{JobSpec, Suggestion};
use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub struct LibraCluster {
    name: String,
    client: Client,
    /// The main task as one shell script, `$names` still to substitute per job.
    script: String,
    on_cluster: Arc<Shared>,
    /// The jobs asked after, all at once (`cluster_poll`).
    poll: Arc<Poll>,
}

/// `OnCluster` under its lock, and the signal that a resumed attempt has found its job.
#[derive(Default)]
struct Shared {
    on: Mutex<OnCluster>,
    found: Condvar,
}

/// How long a cancel waits for resumed attempts to find their jobs on the cluster (by their
/// keys), so that it cancels them too.
const RESUMED_GRACE: Duration = Duration::from_secs(10);

/// The jobs this resource has running on the cluster, and whether the sweep was cancelled,
/// under one lock: a job is submitted either before a cancel, which then cancels it, or not at
/// all. The cancel is made before `cancel_all` returns: once the engine records the sweep's end,
/// a hosted sweep's credential is revoked (and a standalone sweep's process may exit), so a
/// cancel left to the job's own thread found no way to the cluster and the job ran on, paid
/// for, after its sweep was cancelled.
#[derive(Default)]
struct OnCluster {
    cancelled: bool,
    /// Attempts taken up from an engine that stopped which have not yet asked the cluster for
    /// their job by its key: that job may be running there, and a cancel waits for them (an
    /// engine opened only to cancel a sweep whose engine was killed finds them this way).
    resuming: usize,
    /// A cancel is waiting for the resuming attempts: they may still ask for their jobs.
    collecting: bool,
    /// Each job's attempt id, by the job's id on the cluster.
    jobs: HashMap<u64, i64>,
}

fn lock(m: &Shared) -> MutexGuard<'_, OnCluster> {
    m.on.lock().unwrap_or_else(|p| p.into_inner())
}

/// A resumed attempt that has not yet found its job: counted in `resuming` until dropped.
struct Resuming<'a>(&'a Shared);

impl<'a> Resuming<'a> {
    fn new(shared: &'a Shared) -> Self {
        lock(shared).resuming += 1;
        Resuming(shared)
    }
}

impl Drop for Resuming<'_> {
    fn drop(&mut self) {
        lock(self.0).resuming -= 1;
        self.0.found.notify_all();
    }
}

/// What a `libra` resource without a token is told: the three ways to give one.
pub fn no_token(url: &str) -> String {
    format!(
        "no API token for {url}: give `token = \"...\"` in the resource, set LIBRA_TOKEN, or log in to that \
         server (`libra login --server {url} --user NAME`; a saved login is used for its own server only)"
    )
}

fn quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

impl LibraCluster {
    pub fn new(name: &str, cfg: &LibraSpec, plan: &Plan) -> Result<Self, AdapterError> {
        let unsupported =
            |why: &'static str| AdapterError::Unsupported { resource: name.to_string(), kind: "libra", why };
        // Without a token every request is refused (401): say so now, and how to give one.
        let token = cfg
            .token
            .clone()
            .or_else(|| std::env::var("LIBRA_TOKEN").ok())
            .ok_or_else(|| AdapterError::Start { resource: name.to_string(), msg: no_token(&cfg.url) })?;
        let ca = cfg.ca.clone().or_else(|| std::env::var_os("LIBRA_CA").map(Into::into));
        let client = Client::connect(&cfg.url, Some(token), ca.as_deref(), cfg.insecure_http)
            .map_err(|e| AdapterError::Start { resource: name.to_string(), msg: e.to_string() })?;
        let mut parts = Vec::new();
        let mut ignore = false;
        for s in &plan.main {
            match &s.command {
                Command::OnError { ignore: i } => ignore = *i,
                Command::Redirect { .. } => {}
                Command::Exec { kind: ExecKind::Shexec, args } => parts.push((args.join(" "), ignore)),
                Command::Exec { args, .. } => parts.push((args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "), ignore)),
                Command::Copy { .. } | Command::Substitute { .. } => {
                    return Err(unsupported("copy and substitute need file staging, which the Libra API does not offer yet; use exec/shexec only"))
                }
            }
        }
        // onerror ignore: a failing command does not stop the ones after it.
        let script = parts
            .iter()
            .map(|(c, ign)| if *ign { format!("{{ {c}; true; }}") } else { c.clone() })
            .collect::<Vec<_>>()
            .join(" && ");
        let poll = Poll::new(client.clone());
        Ok(LibraCluster { name: name.to_string(), client, script, on_cluster: Arc::default(), poll })
    }
}

fn subst(text: &str, vars: &Vars) -> String {
    substitute(text, &|n| vars.get(n).cloned()).unwrap_or_else(|_| text.to_string())
}

impl LibraCluster {
    fn spawn(&mut self, l: Launch, done: Sender<Outcome>, resumed: bool) -> Result<(), AdapterError> {
        std::fs::create_dir_all(&l.dir).map_err(|e| AdapterError::Start {
            resource: self.name.clone(),
            msg: format!("{}: {e}", l.dir.display()),
        })?;
        let (client, on_cluster, poll) = (self.client.clone(), self.on_cluster.clone(), self.poll.clone());
        let script = subst(&self.script, &l.vars);
        let name = format!("sweep-job-{}", l.vars.get("jobname").cloned().unwrap_or_default());
        std::thread::spawn(move || {
            let o = run_remote(&client, &on_cluster, &poll, &l, script, name, resumed);
            if let Some(o) = o {
                if !o.rejected {
                    write_marker(&l.dir, &o);
                }
                let _ = done.send(o);
            }
        });
        Ok(())
    }
}

impl ResourceAdapter for LibraCluster {
    fn start(&mut self, l: Launch, done: Sender<Outcome>) -> Result<(), AdapterError> {
        self.spawn(l, done, false)
    }

    /// The attempt's key asks the cluster for the job the first engine submitted (or submits
    /// it, if that engine died before it could): never a second job.
    fn resume(&mut self, l: Launch, done: Sender<Outcome>) -> Result<bool, AdapterError> {
        self.spawn(l, done, true)?;
        Ok(true)
    }

    /// A job that had ended before the cancel (or a taken-up attempt's, ended under an engine
    /// killed during its cancel) is not cancelled again: its attempt reports how it ended and
    /// what it was charged, which the sweep pays. Every other attempt is billed by `cancel_all`.
    fn reports_after_cancel(&self) -> bool {
        true
    }

    /// What each cancelled job was charged is what the sweep paid for it: the CPU it used to
    /// the kill, which its nodes report at their next exchanges after the cancel (the cluster
    /// charges it then); the cancel waits for those reports up to `SETTLING_GRACE`, and a job
    /// whose nodes do not report in time is paid what it was charged by then. Attempts taken
    /// up from a stopped engine are waited for (up to `RESUMED_GRACE`) until they have found
    /// their jobs, which are cancelled too.
    fn cancel_all(&mut self) -> Vec<(i64, libra_core::Money)> {
        let shared = &*self.on_cluster;
        let mut on = lock(shared);
        on.cancelled = true;
        on.collecting = true;
        let until = Instant::now() + RESUMED_GRACE;
        let mut billed: Vec<(u64, i64, libra_api::JobInfo)> = Vec::new();
        loop {
            let jobs: Vec<(u64, i64)> = on.jobs.drain().collect();
            for (id, attempt) in jobs {
                match self.client.cancel(id) {
                    Ok(info) => billed.push((id, attempt, info)),
                    // 409: it ended meanwhile; what it was charged is its own answer.
                    Err(e) if e.status() == Some(409) => {
                        if let Ok(info) = self.client.job(id) {
                            billed.push((id, attempt, info));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(job = id, "cancelling the sweep's job on the Libra cluster: {e}")
                    }
                }
            }
            let Some(left) = until.checked_duration_since(Instant::now()).filter(|_| on.resuming > 0) else {
                break;
            };
            on = shared.found.wait_timeout(on, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if on.resuming > 0 {
            tracing::warn!(
                attempts = on.resuming,
                "cancelling: taken-up attempts did not find their jobs on the Libra cluster in time; cancel them there by hand (`libra status`)"
            );
        }
        on.collecting = false;
        drop(on);
        settled_charges(&self.poll, billed)
    }
}

/// How long a running job waits for the resource's round of questions (`cluster_poll`, one
/// every `PERIOD`) before it asks the cluster by itself.
const NO_ROUND: Duration = Duration::from_secs(5);

/// How long a cancel waits for the nodes of its cancelled jobs to report them stopped (a kill
/// comes with a node's next exchange, its end with the one after: two report periods, 2 s
/// each by default).
const SETTLING_GRACE: Duration = Duration::from_secs(6);

/// `info` asked again (by `watch`) until no part of the job runs on a node (its charge is
/// final), up to `SETTLING_GRACE`.
fn stopped_on_its_nodes(watch: &mut Watch, mut info: libra_api::JobInfo) -> libra_api::JobInfo {
    let until = Instant::now() + SETTLING_GRACE;
    while info.parts_running > 0 {
        let Some(left) = until.checked_duration_since(Instant::now()) else { break };
        if let Some(i) = watch.next(left) {
            info = i;
        }
    }
    info
}

/// What each cancelled job was charged in the end, by attempt: asked again until no part of it
/// runs on a node (`JobInfo::parts_running`), up to `SETTLING_GRACE`. A server before that
/// field says 0 at once: its charge at the cancel is taken, as it was.
fn settled_charges(
    poll: &Arc<Poll>,
    mut jobs: Vec<(u64, i64, libra_api::JobInfo)>,
) -> Vec<(i64, libra_core::Money)> {
    let until = Instant::now() + SETTLING_GRACE;
    let mut watches: Vec<Watch> = jobs.iter().map(|(id, _, _)| poll.watch(*id)).collect();
    while jobs.iter().any(|(_, _, info)| info.parts_running > 0) {
        let Some(left) = until.checked_duration_since(Instant::now()) else { break };
        // The first waits for the next round; the others have it by then.
        for (w, (_, _, info)) in
            watches.iter_mut().zip(jobs.iter_mut()).filter(|(_, (_, _, i))| i.parts_running > 0)
        {
            if let Some(now) = w.next(left) {
                *info = now;
            }
        }
    }
    drop(watches);
    for (id, _, info) in jobs.iter().filter(|(_, _, info)| info.parts_running > 0) {
        tracing::warn!(
            job = *id,
            parts = info.parts_running,
            "cancelled on the Libra cluster, but its nodes have not reported it stopped: the sweep pays what it was charged so far; the cluster bills the rest (`libra status {id}`)"
        );
    }
    jobs.into_iter().map(|(_, attempt, info)| (attempt, info.charged)).collect()
}

/// Why the cluster will not take a job, with what it would take: the price that its suggested
/// budget means tells the user how far the resource's `price` (what the sweep offers per
/// CPU-second) falls short.
fn refusal(reason: String, suggestion: Option<Suggestion>, spec: &JobSpec) -> String {
    let mut message = reason;
    if let Some(s) = suggestion {
        message.push_str(&format!(
            " (the cluster would take it with a budget of {} and a deadline of {:.0} s: {:.4} per CPU-second of its {:.0} s estimate; the resource's price caps what the sweep offers)",
            s.budget,
            s.deadline,
            s.budget.as_credits_f64() / spec.estimate().max(1e-9),
            spec.estimate()
        ));
    }
    message
}

/// Whether the cluster would take the job now (its quote, and the credit for the hold), without
/// leaving a record: a submission it refuses stays in the user's history as REJECTED.
fn admissible(client: &Client, spec: &JobSpec, base: &Outcome) -> Result<(), Box<Outcome>> {
    // Asked first, the cluster says whether it would take the job without keeping a record: a
    // submission it refuses stays in the user's job history as REJECTED, and a sweep that keeps
    // retrying an underpriced resource would fill that history with them.
    let quote = match client.quote(&QuoteRequest::new(spec.clone())) {
        Ok(q) => q,
        // Unreachable, or it refused the request: the resource sits out for a while.
        Err(e) => return Err(Box::new(Outcome { message: e.to_string(), rejected: true, ..base.clone() })),
    };
    // A space-shared policy queues what it cannot start now: that is an admission, with the
    // whole budget held until the job is dispatched.
    let queued = !quote.accepted && quote.reason.as_deref() == Some("queue");
    if !quote.accepted && !queued {
        let reason = quote.reason.unwrap_or_else(|| "it would not be accepted".into());
        return Err(Box::new(Outcome {
            message: refusal(reason, quote.suggestion, spec),
            rejected: true,
            ..base.clone()
        }));
    }
    // The quote does not look at the user's credit; a hold the balance cannot cover would be a
    // REJECTED job too.
    let hold = if queued { spec.budget() } else { quote.cost.unwrap_or(spec.budget()) };
    match client.balance() {
        Ok(b) if b.available < hold => {
            let message = format!(
                "credit: {} available, the job needs {hold} on hold (ask the cluster's administrator for credit)",
                b.available
            );
            return Err(Box::new(Outcome { message, rejected: true, ..base.clone() }));
        }
        Ok(_) => {}
        Err(e) => return Err(Box::new(Outcome { message: e.to_string(), rejected: true, ..base.clone() })),
    }
    Ok(())
}

fn run_remote(
    client: &Client,
    on_cluster: &Shared,
    poll: &Arc<Poll>,
    l: &Launch,
    script: String,
    name: String,
    resumed: bool,
) -> Option<Outcome> {
    let base = Outcome {
        attempt: l.attempt,
        resource: l.resource,
        ok: false,
        exit_code: None,
        wall: 0.0,
        cpu: 0.0,
        message: String::new(),
        rejected: false,
        billed: None,
    };
    // Counted until it has found its job (or made it): a cancel waits for that.
    let resuming = resumed.then(|| Resuming::new(on_cluster));
    let spec = JobSpec::simple(l.estimate.max(LIBRA_MIN_ESTIMATE_SECS), l.deadline_in.max(1.0), l.budget);
    // A resumed attempt may already be on the cluster: its key finds it, whatever a quote would
    // say now; only a fresh one is quoted first.
    if !resumed {
        if let Err(o) = admissible(client, &spec, &base) {
            return Some(*o);
        }
    }
    let req = SubmitRequest {
        name: Some(name),
        ..SubmitRequest::new(spec, vec!["/bin/sh".into(), "-c".into(), script])
    };
    // Sent with the attempt's key until the cluster answers: a submission whose answer was lost
    // may have made the job, and only the same key finds it again instead of making a second.
    let mut wait = Duration::from_millis(200);
    let info = loop {
        let submitted = {
            let mut on = lock(on_cluster);
            // After a cancel only a taken-up attempt asks, for its job that may be running,
            // and only while the cancel waits for it (which then cancels the job). Said, for
            // the engine waits to hear from every attempt the cancel did not bill.
            if on.cancelled && !(resumed && on.collecting) {
                return Some(Outcome {
                    message: "cancelled before it reached the cluster".into(),
                    rejected: true,
                    ..base
                });
            }
            let r = client.submit_with_key(&req, &l.key);
            if let Some(i) = r.as_ref().ok().filter(|i| i.state.is_active()) {
                on.jobs.insert(i.id, l.attempt);
            }
            r
        };
        match submitted {
            Ok(i) => {
                drop(resuming);
                break i;
            }
            Err(e @ libra_api::ClientError::Status { .. }) => {
                return Some(Outcome { message: e.to_string(), rejected: true, ..base })
            }
            Err(e) => {
                tracing::warn!(attempt = l.attempt, "submitting to the Libra cluster: {e}; trying again");
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        }
    };
    // Possible still, when other work took the room between the quote and the submission.
    if info.state == JobState::Rejected {
        let reason = info.reason.unwrap_or_else(|| "rejected".into());
        return Some(Outcome {
            message: refusal(reason, info.suggestion, &req.spec),
            rejected: true,
            ..base
        });
    }
    let mut info = info;
    // Asked after with every other job of the resource, in one request (`cluster_poll`).
    let mut watch = poll.watch(info.id);
    while info.state.is_active() {
        if lock(on_cluster).cancelled {
            // `cancel_all` cancelled it.
            return None;
        }
        match watch.next(NO_ROUND) {
            Some(i) => info = i,
            // No answer to the resource's questions in that time: asked by itself.
            None => match client.job(info.id) {
                Ok(i) => info = i,
                Err(e) => tracing::warn!(job = info.id, "polling the Libra cluster: {e}"),
            },
        }
    }
    lock(on_cluster).jobs.remove(&info.id);
    // Ended by the cluster's word (cancelled there by its owner, out of credit): its node bills
    // what it ran on until the kill a moment later, which is what the sweep pays.
    let info = stopped_on_its_nodes(&mut watch, info);
    drop(watch);
    if let Ok(out) = client.output(info.id) {
        let _ = std::fs::write(l.dir.join("stdout"), out.stdout);
        let _ = std::fs::write(l.dir.join("stderr"), out.stderr);
    }
    Some(Outcome {
        ok: info.state == JobState::Completed,
        exit_code: info.exit_code,
        wall: match (info.start_time, info.end_time) {
            (Some(a), Some(b)) => (b - a).max(0.0),
            _ => 0.0,
        },
        cpu: info.cpu_seconds,
        message: info.reason.unwrap_or_default(),
        billed: Some(info.charged),
        ..base
    })
}
