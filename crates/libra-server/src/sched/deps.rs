//! Job dependencies in the running cluster (`--dependency`): checking them at submission, the
//! window a waiting job is admitted for (`libra_core::dependency`'s rule), what it holds on its
//! nodes while it waits, and, on every scheduler tick, starting the jobs whose dependencies have
//! ended or cancelling those whose `afterok` dependency failed.
//!
//! Everything lives in the store (`jobs.waiting`, `jobs.wait_window`, `job_deps`): a restart
//! rebuilds the view from it and the next tick carries on.

use crate::app::Inner;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::deps::{self, dep_row, stored, DepJob};
use libra_api::JobState;
use libra_core::billing::Ending;
use libra_core::cluster::{Cluster, ClusterError};
use libra_core::dependency::{self, DepKind, DepStatus, Dependency, TooLate, Verdict};
use libra_core::{JobSpec, NodeIdx};
use rusqlite::Connection;
use std::collections::BTreeMap;

/// A submission's dependencies, checked: the jobs it waits on (arrays expanded) and how long
/// until the latest promised finish among them.
#[derive(Debug, Clone)]
pub(crate) struct Deps {
    /// As submitted (shown back in `libra status` and `--json`).
    pub given: Vec<Dependency>,
    /// Job id -> kind; a job named both ways waits for success (afterok).
    pub rows: BTreeMap<u64, DepKind>,
    /// Seconds from now until the latest promised finish (0: all have ended).
    pub wait: f64,
    /// The dependency whose promise is the latest, and that promise (absolute).
    pub latest: Option<(u64, f64)>,
}

/// What admission decides a submission with dependencies on.
pub(crate) enum DepPlan {
    None,
    /// Every dependency has already ended as asked: an ordinary submission.
    Met(Deps),
    /// It waits: decided for `window`.
    Wait(Deps, JobSpec),
    /// Its deadline leaves too little time after the latest promise; the spec is the window at
    /// the shortest deadline the job could have (what a suggestion is sought for).
    TooLate(Deps, TooLate, JobSpec),
}

impl DepPlan {
    pub fn deps(&self) -> Option<&Deps> {
        match self {
            DepPlan::None => None,
            DepPlan::Met(d) | DepPlan::Wait(d, _) | DepPlan::TooLate(d, _, _) => Some(d),
        }
    }

    /// The specification admission decides (the window for a waiting job).
    pub fn admit_spec<'a>(&'a self, spec: &'a JobSpec) -> &'a JobSpec {
        match self {
            DepPlan::Wait(_, w) | DepPlan::TooLate(_, _, w) => w,
            _ => spec,
        }
    }

    pub fn waits(&self) -> bool {
        matches!(self, DepPlan::Wait(..))
    }

    /// Seconds from now to the latest promised finish, for shifting a suggestion.
    pub fn wait(&self) -> f64 {
        match self {
            DepPlan::Wait(d, _) | DepPlan::TooLate(d, _, _) => d.wait,
            _ => 0.0,
        }
    }

    /// What a refusal says about the dependencies.
    pub fn explain(&self, now: f64) -> Option<String> {
        let (d, e) = match self {
            DepPlan::Wait(d, _) => (d, None),
            DepPlan::TooLate(d, e, _) => (d, Some(e)),
            _ => return None,
        };
        let (job, at) = d.latest?;
        Some(match e {
            Some(e) => format!(
                "dependency: job {job} promises to finish {:.0} s from now; that leaves {:.0} s before the deadline, less than the {:.0} s the job needs; a deadline of at least {:.0} s could be accepted",
                at - now,
                e.left.max(0.0),
                e.least,
                e.earliest
            ),
            None => format!(
                "dependency: job {job} promises to finish {:.0} s from now, so the job was decided for the {:.0} s left after it before its deadline",
                at - now,
                self.admit_spec_deadline()
            ),
        })
    }

    fn admit_spec_deadline(&self) -> f64 {
        match self {
            DepPlan::Wait(_, w) => w.deadline(),
            _ => 0.0,
        }
    }
}

impl DepJob {
    /// How it stands: open until its promised finish, or ended, successfully or not.
    fn status(&self) -> DepStatus {
        let end = self.end.unwrap_or(self.submit);
        match self.state {
            JobState::Pending | JobState::Running | JobState::Suspended | JobState::Held => {
                DepStatus::Open { promised_finish: self.deadline_at }
            }
            JobState::Completed => DepStatus::Ended { end, success: true },
            // DEADLINE is a job that exited 0 after its deadline (a success: it did its work),
            // or one no node started by its deadline (no exit code: it never ran).
            JobState::Deadline => DepStatus::Ended { end, success: self.exit_code == Some(0) },
            JobState::Failed | JobState::Cancelled | JobState::Timeout | JobState::Rejected => {
                DepStatus::Ended { end, success: false }
            }
        }
    }

    /// Why an `afterok` dependency `job` broke, in the words `libra status` shows.
    fn broken_reason(&self, job: u64) -> String {
        let how = match self.state {
            JobState::Failed => "failed",
            JobState::Cancelled => "was cancelled",
            JobState::Timeout => "timed out",
            JobState::Rejected => "was refused",
            JobState::Deadline => "never started by its deadline",
            _ => "did not complete",
        };
        format!("dependency {job} {how}")
    }
}

impl Inner {
    /// Checks a submission's dependencies and plans its admission. Refuses (400, naming
    /// `--dependency`) a job that is not the caller's (an administrator may name anyone's),
    /// unknown or held, and an `afterok` dependency that has already failed. Another user's
    /// job is refused with the same words as a job that does not exist.
    pub(crate) fn plan_dependencies(
        &self,
        conn: &Connection,
        caller: &Caller,
        given: &[Dependency],
        spec: &JobSpec,
        now: f64,
    ) -> Result<DepPlan, ApiError> {
        if given.is_empty() {
            return Ok(DepPlan::None);
        }
        if given.len() > dependency::MAX_DEPENDENCIES {
            return Err(ApiError::BadRequest(format!(
                "--dependency: {} jobs named; at most {} are accepted",
                given.len(),
                dependency::MAX_DEPENDENCIES
            )));
        }
        let unknown = |d: &Dependency| {
            ApiError::BadRequest(format!(
                "--dependency: {} has no job {} (a job may depend only on its owner's jobs); {}",
                caller.name,
                d.target(),
                dependency::DEPENDENCY_HELP
            ))
        };
        let mine = |owner: i64| owner == caller.id || caller.admin;
        let mut rows: BTreeMap<u64, DepKind> = BTreeMap::new();
        let mut statuses: Vec<(u64, DepStatus)> = Vec::new();
        for d in given {
            // The jobs this entry stands for: one job, one task of an array, or every task of
            // an array named by its id.
            let ids: Vec<u64> = match d.task {
                Some(t) => deps::array_task(conn, d.job, t)?.map(|i| vec![i]).ok_or_else(|| unknown(d))?,
                None => match dep_row(conn, d.job)? {
                    Some((_, Some(a), _)) if a as u64 == d.job => deps::array_tasks(conn, d.job)?,
                    Some(_) => vec![d.job],
                    None => return Err(unknown(d)),
                },
            };
            for id in ids {
                let Some((owner, _, dj)) = dep_row(conn, id)? else {
                    return Err(unknown(d));
                };
                if !mine(owner) {
                    return Err(unknown(d));
                }
                let state = dj.state;
                if state == JobState::Held {
                    return Err(ApiError::BadRequest(format!(
                        "--dependency: job {id} is HELD: it has no promised finish to plan by; `libra release {id}` it first, then submit"
                    )));
                }
                let st = dj.status();
                if dependency::verdict(d.kind, st) == Verdict::Broken {
                    return Err(ApiError::BadRequest(format!(
                        "--dependency: afterok:{id} can never hold: job {id} is already {state} ({}); use afterany:{id} to run after it anyway, or drop it",
                        dj.broken_reason(id)
                    )));
                }
                let kind = rows.entry(id).or_insert(d.kind);
                if d.kind == DepKind::AfterOk {
                    *kind = DepKind::AfterOk;
                }
                statuses.push((id, st));
            }
        }
        let met = rows.iter().all(|(id, kind)| {
            statuses
                .iter()
                .filter(|(j, _)| j == id)
                .all(|(_, s)| dependency::verdict(*kind, *s) == Verdict::Met)
        });
        let all: Vec<DepStatus> = statuses.iter().map(|(_, s)| *s).collect();
        let wait = dependency::latest_finish(&all, now);
        let latest = statuses
            .iter()
            .map(|(id, s)| {
                (
                    *id,
                    match *s {
                        DepStatus::Open { promised_finish } => promised_finish,
                        DepStatus::Ended { end, .. } => end,
                    },
                )
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let deps = Deps { given: given.to_vec(), rows, wait, latest };
        if met {
            return Ok(DepPlan::Met(deps));
        }
        Ok(match dependency::plan(spec, wait) {
            Ok(p) => DepPlan::Wait(deps, p.window),
            Err(e) => {
                let mut least = spec.clone();
                least.qos.deadline = e.least.max(f64::MIN_POSITIVE);
                DepPlan::TooLate(deps, e, least)
            }
        })
    }

    /// Records a stored submission's dependencies (inside the submission's transaction): what
    /// was asked for, and for an accepted job that waits, that it waits and on what.
    pub(crate) fn store_dependencies(
        conn: &Connection,
        id: u64,
        plan: &DepPlan,
        state: JobState,
    ) -> Result<(), ApiError> {
        let Some(d) = plan.deps() else { return Ok(()) };
        let waits = plan.waits() && state == JobState::Pending;
        let window = match plan {
            DepPlan::Wait(_, w) => Some(w.deadline()),
            _ => None,
        };
        let reason = format!("waiting on dependencies: {}", dependency::format_list(&d.given));
        deps::record(conn, id, &serde_json::to_string(&d.given)?, waits, window.filter(|_| waits), &reason)?;
        if state != JobState::Rejected {
            deps::record_rows(conn, id, &d.rows)?;
        }
        Ok(())
    }

    /// Starts (lets the nodes start) every waiting job whose dependencies have all ended as
    /// asked, and cancels, free and with its hold released, every one whose `afterok`
    /// dependency failed, was cancelled or refused. Run on every scheduler tick. Returns
    /// whether a job was let go (the node agents have work).
    pub fn release_dependents(&mut self, now: f64) -> Result<bool, ApiError> {
        let rows = deps::waiting(&self.db)?;
        // Per waiting job: every dependency met, or the first one broken.
        let mut jobs: BTreeMap<u64, (JobState, bool, Option<String>)> = BTreeMap::new();
        for (job, state, dep, kind, dj) in rows {
            let entry =
                jobs.entry(job).or_insert((JobState::parse(&state).unwrap_or(JobState::Failed), true, None));
            match dependency::verdict(kind, dj.status()) {
                Verdict::Met => {}
                Verdict::Wait => entry.1 = false,
                Verdict::Broken => {
                    entry.1 = false;
                    entry.2.get_or_insert_with(|| dj.broken_reason(dep));
                }
            }
        }
        let mut released = false;
        for (job, (state, all_met, broken)) in jobs {
            if !state.is_active() {
                // Ended while it waited (cancelled, or its deadline passed): it waits no more.
                deps::stop_waiting(&self.db, job, false)?;
                continue;
            }
            if let Some(why) = broken {
                tracing::info!(job, "{why}: cancelled, its hold released");
                deps::stop_waiting(&self.db, job, false)?;
                self.finish(job, Ending::Withdrawn, Some(why), now)?;
                continue;
            }
            // A suspended job waits for its resume first; it is let go on a later tick.
            if all_met && state == JobState::Pending {
                self.let_go(job, now)?;
                released = true;
            }
        }
        Ok(released)
    }

    /// A waiting job whose dependencies have ended: the nodes may start it now, and the view
    /// holds its real work from now to its deadline (at most the share it held while waiting,
    /// when the dependencies kept their promise).
    fn let_go(&mut self, job: u64, now: f64) -> Result<(), ApiError> {
        deps::stop_waiting(&self.db, job, true)?;
        if let Some(c) = self.cluster.release(job) {
            let (spec, reserved, deadline_at) = stored(&self.db, job)?;
            let mut spec = spec;
            spec.qos.deadline = (deadline_at - now).max(f64::MIN_POSITIVE);
            if let Err(e) = self.cluster.commit_spec_reserving(job, &spec, reserved, now, &c.nodes, now) {
                tracing::error!(job, "cluster view refused the released job: {e}");
            }
        }
        tracing::info!(job, "dependencies met: it may start");
        Ok(())
    }

    /// After a restart: the view holds each waiting job at its window's share, as it did
    /// before (`commit_admitted`), not at what its work over the whole deadline would need.
    pub(crate) fn recommit_waiting(&mut self) -> Result<(), ApiError> {
        let waiting = deps::waiting_jobs(&self.db)?;
        for (job, submit) in waiting {
            let Some(c) = self.cluster.release(job) else { continue };
            let (spec, reserved, _) = stored(&self.db, job)?;
            if let Err(e) =
                commit_admitted(&self.db, &mut self.cluster, job, &spec, reserved, submit, &c.nodes)
            {
                tracing::error!(job, "cluster view refused a waiting job: {e}");
            }
        }
        Ok(())
    }
}

/// Puts an accepted job in the view: as usual, or, for a job that waits on dependencies, its
/// window's share held from `since` (its submission) to its deadline
/// (`libra_core::dependency::waiting_commitment`).
pub(crate) fn commit_admitted(
    conn: &Connection,
    cluster: &mut Cluster,
    id: u64,
    spec: &JobSpec,
    reserved: f64,
    since: f64,
    nodes: &[NodeIdx],
) -> Result<(), ClusterError> {
    let window = deps::wait_window(conn, id).ok().flatten();
    let Some(window) = window else {
        return cluster.commit_spec_reserving(id, spec, reserved, since, nodes, since);
    };
    let deadline_abs = since + spec.deadline();
    // `reserved` is the policy's work for the window; the commitment keeps its share.
    let (work, rate) = dependency::waiting_commitment(reserved, window, since, deadline_abs);
    cluster.commit_spec_reserving(id, spec, work, since, nodes, since)?;
    cluster.set_progress(id, 0.0, rate, since)
}

#[cfg(test)]
mod tests {
    use crate::ledger;
    use crate::sched::tests::{app, req, user};
    use libra_api::{JobState, RegisterRequest, SubmitRequest};
    use libra_core::billing::Ending;
    use libra_core::dependency::{DepKind, Dependency};

    fn node() -> RegisterRequest {
        RegisterRequest {
            name: "n1".into(),
            cpus: 1.0,
            mem_mb: 0,
            mechanism: "none".into(),
            account: String::new(),
            switches_users: false,
        }
    }

    fn after(kind: DepKind, job: u64, r: SubmitRequest) -> SubmitRequest {
        SubmitRequest { dependencies: vec![Dependency { kind, job, task: None }], ..r }
    }

    /// A quote with dependencies is what the submission would answer: decided for the window
    /// after their latest promise (a larger share than the same job alone), refused when too
    /// little time is left with the same suggestion, and the same dependencies refused.
    #[test]
    fn a_quote_waits_for_the_dependencies_as_the_submission_would() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = app(dir.path());
        app.lock().register(&node(), 1.0, now).unwrap();
        let u = user(&app, "u", 1000);
        let mut g = app.lock();
        let a = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
        let on_a = vec![Dependency { kind: DepKind::AfterOk, job: a.id, task: None }];
        // 10 s of work due at 150 s, after A's promise at 100 s: 0.2 CPU, not 10 / 150.
        let spec = req(10.0, 150.0, 100).spec;
        let alone = g.quote(&spec, &[], &u, now).unwrap();
        assert!(alone.accepted && (alone.share.unwrap() - 10.0 / 150.0).abs() < 1e-9, "{alone:?}");
        assert!(alone.dependency.is_none());
        let q = g.quote(&spec, &on_a, &u, now).unwrap();
        assert!(q.accepted && (q.share.unwrap() - 0.2).abs() < 1e-9, "{q:?}");
        assert!(q.dependency.as_deref().unwrap().contains(&format!("job {} promises", a.id)), "{q:?}");
        assert!(q.cost > alone.cost, "a shorter window costs more: {q:?} {alone:?}");
        let b = g.submit(&u, &after(DepKind::AfterOk, a.id, req(10.0, 150.0, 100)), now).unwrap();
        assert!(b.waiting, "{b:?}");
        assert_eq!((Some(b.cost), Some(b.share), &b.nodes), (q.cost, q.share, &q.nodes));
        // Due 105 s from now, 5 s after A's promise: refused, where alone it would be taken.
        let spec = req(10.0, 105.0, 100).spec;
        assert!(g.quote(&spec, &[], &u, now).unwrap().accepted);
        let q = g.quote(&spec, &on_a, &u, now).unwrap();
        assert!(!q.accepted && q.reason.as_deref() == Some("deadline"), "{q:?}");
        assert!(q.dependency.as_deref().unwrap().contains("a deadline of at least"), "{q:?}");
        let late = g.submit(&u, &after(DepKind::AfterOk, a.id, req(10.0, 105.0, 100)), now).unwrap();
        assert_eq!(late.state, JobState::Rejected, "{late:?}");
        let (qs, ls) = (q.suggestion.unwrap(), late.suggestion.unwrap());
        assert!(
            qs.deadline >= 110.0 && qs.deadline == ls.deadline && qs.budget == ls.budget,
            "{qs:?} {ls:?}"
        );
        // What a submission may not wait on, a quote may not either, in the same words.
        let stranger = vec![Dependency { kind: DepKind::AfterOk, job: 999, task: None }];
        let e = g.quote(&spec, &stranger, &u, now).unwrap_err().to_string();
        let s =
            g.submit(&u, &after(DepKind::AfterOk, 999, req(10.0, 105.0, 100)), now).unwrap_err().to_string();
        assert!(e.contains("--dependency") && e == s, "{e} / {s}");
    }

    /// A waiting job holds its window's share, constant while it waits and after a restart;
    /// let go, it holds its real work from then on; a failed afterok dependency cancels it
    /// with its hold released.
    #[test]
    fn a_waiting_job_holds_its_window_share_until_let_go_and_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let (a, b) = {
            let app = app(dir.path());
            app.lock().register(&node(), 1.0, now).unwrap();
            let u = user(&app, "u", 1000);
            let mut g = app.lock();
            let a = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
            // Waits for A's promise (100 s): 10 s of work in the 50 s left, 0.2 CPU from now.
            let b = g.submit(&u, &after(DepKind::AfterOk, a.id, req(10.0, 150.0, 100)), now).unwrap();
            assert!(b.state == JobState::Pending && b.waiting, "{b:?}");
            assert!((b.share - 0.2).abs() < 1e-9, "{b:?}");
            let c = g.cluster.commitment(b.id).unwrap().clone();
            for t in [now, now + 40.0, now + 99.0] {
                assert!(
                    (c.required_share(t, 1.0) - 0.2).abs() < 1e-9,
                    "at {t}: {}",
                    c.required_share(t, 1.0)
                );
            }
            // Too close: a job after B (due at 150 s) with a deadline of 155 s is refused, naming
            // B, with the earliest deadline that fits (B's promise plus its 10 s).
            let late = g.submit(&u, &after(DepKind::AfterOk, b.id, req(10.0, 155.0, 100)), now).unwrap();
            assert_eq!(late.state, JobState::Rejected, "{late:?}");
            assert!(
                late.reason.as_deref().unwrap().contains(&format!("dependency: job {} promises", b.id)),
                "{late:?}"
            );
            let s = late.suggestion.unwrap();
            assert!(s.deadline >= 160.0, "{s:?}");
            let ok = g.submit(&u, &after(DepKind::AfterOk, b.id, req(10.0, s.deadline, 100)), now).unwrap();
            assert!(ok.waiting, "the suggestion is accepted: {ok:?}");
            g.cancel(&u, ok.id, now).unwrap();
            // B's promise stands on A's deadline: A may not move it later while B waits, and
            // B itself cannot be changed while it waits.
            let later = libra_api::UpdateRequest { deadline_at: Some(now + 500.0), budget: None };
            let e = g.update(&u, a.id, &later, now).unwrap_err().to_string();
            assert!(e.contains(&format!("wait on job {}", a.id)), "{e}");
            let e = g.update(&u, b.id, &later, now).unwrap_err().to_string();
            assert!(e.contains("waits on its dependencies"), "{e}");
            assert!(g.hold(&u, b.id, now).is_err());
            (a, b)
        };
        // Reopened, as after a SIGKILL: B still waits, at its window's share.
        let app = app(dir.path());
        let mut g = app.lock();
        let c = g.cluster.commitment(b.id).unwrap().clone();
        assert!((c.required_share(now + 30.0, 1.0) - 0.2).abs() < 1e-9);
        assert!(!g.release_dependents(now + 10.0).unwrap(), "A has not ended");
        // A completes: B is let go and holds its 10 s by its deadline.
        g.finish(a.id, Ending::Exited { success: true, late: false, timed_out: false }, None, now + 20.0)
            .unwrap();
        assert!(g.release_dependents(now + 20.0).unwrap());
        let b = crate::store::job(&g.db, b.id).unwrap().unwrap();
        assert!(!b.waiting && b.state == JobState::Pending && b.reason.is_none(), "{b:?}");
        let c = g.cluster.commitment(b.id).unwrap();
        assert!((c.required_share(now + 20.0, 1.0) - 10.0 / 130.0).abs() < 1e-9);

        // afterok on a job that is then cancelled: cancelled free, hold released.
        let u = crate::auth::Caller {
            id: 1,
            name: "u".into(),
            admin: false,
            sweep: None,
            expires: f64::INFINITY,
        };
        let e = g.submit(&u, &req(1.0, 100.0, 10), now + 20.0).unwrap();
        let d = g.submit(&u, &after(DepKind::AfterOk, e.id, req(1.0, 200.0, 10)), now + 20.0).unwrap();
        assert!(d.waiting);
        g.cancel(&u, e.id, now + 21.0).unwrap();
        g.release_dependents(now + 22.0).unwrap();
        let d = crate::store::job(&g.db, d.id).unwrap().unwrap();
        assert_eq!(d.state, JobState::Cancelled, "{d:?}");
        assert_eq!(d.reason.as_deref(), Some(format!("dependency {} was cancelled", e.id).as_str()));
        assert_eq!(ledger::open_hold(&g.db, d.id).unwrap().map(|h| h.1), Some(libra_core::Money::ZERO));
        assert_eq!(d.charged, libra_core::Money::ZERO);
        assert!(g.cluster.commitment(d.id).is_none());
    }

    /// Space-shared policies queue a job instead of promising it a share: a waiting job stays
    /// out of the queue a dispatch pass sees until its dependencies have ended.
    #[test]
    fn a_space_shared_queue_dispatches_a_waiting_job_only_once_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = crate::App::open(crate::Config {
            db: dir.path().join("t.db"),
            join_token: "join-token".into(),
            sync_full: false,
            policy: "fifo".into(),
            ..crate::Config::default()
        })
        .unwrap();
        for n in ["n1", "n2"] {
            app.lock().register(&RegisterRequest { name: n.into(), ..node() }, 1.0, now).unwrap();
        }
        let u = user(&app, "u", 1000);
        let mut g = app.lock();
        let a = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
        let b = g.submit(&u, &after(DepKind::AfterAny, a.id, req(10.0, 300.0, 100)), now).unwrap();
        assert!(b.waiting && b.state == JobState::Pending, "{b:?}");
        g.dispatch_queue(now).unwrap();
        let nodes = |g: &crate::app::Inner, id| crate::store::job(&g.db, id).unwrap().unwrap().nodes;
        assert_eq!(nodes(&g, a.id).len(), 1, "A is dispatched");
        assert!(nodes(&g, b.id).is_empty(), "B waits although a node is idle");
        g.finish(a.id, Ending::Exited { success: false, late: false, timed_out: false }, None, now + 5.0)
            .unwrap();
        assert!(g.release_dependents(now + 5.0).unwrap());
        g.dispatch_queue(now + 5.0).unwrap();
        assert_eq!(nodes(&g, b.id).len(), 1, "afterany: B runs after A failed");
    }

    /// DEADLINE is a success for afterok only when the job ran and exited 0 (late); one that no
    /// node started by its deadline never did its work.
    #[test]
    fn a_late_success_satisfies_afterok_and_a_job_never_started_does_not() {
        let job = |state, exit_code| super::DepJob {
            state,
            deadline_at: 10.0,
            end: Some(12.0),
            submit: 0.0,
            exit_code,
        };
        let v = |j: super::DepJob| libra_core::dependency::verdict(DepKind::AfterOk, j.status());
        use libra_core::dependency::Verdict::*;
        assert_eq!(v(job(JobState::Deadline, Some(0))), Met);
        assert_eq!(v(job(JobState::Deadline, None)), Broken);
        assert_eq!(
            job(JobState::Deadline, None).broken_reason(7),
            "dependency 7 never started by its deadline"
        );
        assert_eq!(v(job(JobState::Completed, Some(0))), Met);
        assert_eq!(v(job(JobState::Timeout, None)), Broken);
        assert_eq!(v(job(JobState::Held, None)), Wait);
    }
}
