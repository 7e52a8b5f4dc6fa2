//! Job arrays: every task admitted through the same decision and rows as a submission
//! (`Inner::store_submission`), in one transaction, with one answer for the whole array: all
//! kept, or none (holds and places released) with the tasks refused and a suggestion that would
//! take them all.

use super::check_request;
use crate::app::Inner;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store;
use libra_api::{parse_array, ArrayRequest, ArrayResponse, JobInfo, JobState, RefusedTask};
use libra_core::{Decision, JobSpec, RejectReason, Suggestion};

/// Ids the trial admissions of a suggestion take in the cluster view while they are decided:
/// far above any job id the store hands out, and released before the trial returns.
const TRIAL_IDS: u64 = u64::MAX / 2;

/// How many times a suggestion for the whole array is raised and tried again before giving up.
const SUGGESTION_ROUNDS: usize = 6;

impl Inner {
    /// Admits the tasks of `req.array` in task order, each decided against the view that holds
    /// the tasks before it. Accepted only if every task is: otherwise nothing is stored and
    /// nothing stays held. `key`: the first attempt's answer for a retry with the same key (kept
    /// on the first task; a refused array kept nothing, so its retry is decided anew).
    pub fn submit_array(
        &mut self,
        caller: &Caller,
        req: &ArrayRequest,
        key: Option<&str>,
        now: f64,
    ) -> Result<ArrayResponse, ApiError> {
        let array = parse_array(&req.array).map_err(ApiError::BadRequest)?;
        if let Some(n) = array.limit.filter(|&n| (n as usize) < array.tasks.len()) {
            // Every task Libra admits is promised its deadline from now on, with its own share:
            // holding tasks back would break the promise unless their deadlines were planned
            // for the wait, which admission does not do yet.
            return Err(ApiError::BadRequest(format!(
                "--array: the limit %{n} (at most {n} of {} tasks running at once) is not supported: every task is admitted to run at once with its own deadline promise; drop %{n}, or give a limit of at least the number of tasks",
                array.tasks.len()
            )));
        }
        check_request(&req.job)?;
        if !req.job.dependencies.is_empty() {
            return Err(ApiError::BadRequest(
                "--dependency: an array cannot wait on other jobs yet (each task would need a window of its own); submit the array, then let a later job wait on it with afterok:ARRAY_ID (all tasks) or afterok:ARRAY_ID_TASK".into(),
            ));
        }
        if let Some(key) = key {
            let earlier = store::jobs::array_by_idempotency_key(&self.db, caller.id, key)?;
            match earlier {
                Some((_, Some(array_id))) => {
                    let tasks = store::array_tasks(&self.db, array_id as u64)?;
                    return Ok(ArrayResponse {
                        accepted: true,
                        array_id: Some(array_id as u64),
                        tasks,
                        refused: Vec::new(),
                        suggestion: None,
                    });
                }
                Some((id, None)) => {
                    return Err(ApiError::Conflict(format!(
                        "Idempotency-Key: already used for job {id}, which is no array; send a key of this array's own"
                    )))
                }
                None => {}
            }
        }
        let tx = self.db.unchecked_transaction()?;
        let mut in_view: Vec<u64> = Vec::new();
        let mut refused: Vec<RefusedTask> = Vec::new();
        let mut first: Option<u64> = None;
        // A labelled block, not a closure: the transaction borrows the store while the view
        // is changed, which only field-by-field borrows allow.
        let decided: Result<(), ApiError> = 'decide: {
            macro_rules! attempt {
                ($e:expr) => {
                    match $e {
                        Ok(v) => v,
                        Err(e) => break 'decide Err(ApiError::from(e)),
                    }
                };
            }
            for &task in &array.tasks {
                let (id, state, admitted) = attempt!(self.store_submission(
                    &tx,
                    caller,
                    &req.job,
                    key.filter(|_| first.is_none()),
                    now
                ));
                let array_id = *first.get_or_insert(id);
                attempt!(store::jobs::set_array_task(&tx, id, array_id, task));
                if let Some((nodes, reserved)) = admitted {
                    // The next task's decision must see this one.
                    attempt!(self
                        .cluster
                        .commit_spec_reserving(id, &req.job.spec, reserved, now, &nodes, now)
                        .map_err(|e| ApiError::Internal(format!("cluster view refused task {task}: {e}"))));
                    in_view.push(id);
                }
                if state == JobState::Rejected {
                    let job = attempt!(store::job(&tx, id));
                    let job = attempt!(job.ok_or_else(|| ApiError::Internal(format!("job {id} vanished"))));
                    refused.push(RefusedTask {
                        task,
                        reason: job.reason.unwrap_or_else(|| "refused".into()),
                        suggestion: job.suggestion,
                    });
                }
            }
            Ok(())
        };
        if decided.is_err() || !refused.is_empty() {
            for id in in_view.drain(..) {
                self.cluster.release(id);
            }
        }
        decided?;
        if !refused.is_empty() {
            drop(tx); // rolls back every task, its hold and its nodes
            let user = Some(caller.id as u64);
            let suggestion = self.array_suggestion(&req.job.spec, array.tasks.len(), &refused, user, now);
            tracing::info!(user = %caller.name, tasks = array.tasks.len(), refused = refused.len(), "array refused");
            return Ok(ArrayResponse {
                accepted: false,
                array_id: None,
                tasks: Vec::new(),
                refused,
                suggestion,
            });
        }
        if let Err(e) = tx.commit() {
            for id in in_view {
                self.cluster.release(id);
            }
            return Err(ApiError::from(e));
        }
        let array_id = first.ok_or_else(|| ApiError::Internal("an array without tasks".into()))?;
        let mut tasks = store::array_tasks(&self.db, array_id)?;
        // Queued tasks (space-shared policies) may start at once.
        if tasks.iter().any(|j| j.state == JobState::Pending && j.nodes.is_empty()) {
            if let Err(e) = self.dispatch_queue(now) {
                tracing::warn!("dispatch after an array: {e}");
            }
            tasks = store::array_tasks(&self.db, array_id)?;
        }
        tracing::info!(user = %caller.name, array = array_id, tasks = tasks.len(), "array submitted");
        Ok(ArrayResponse {
            accepted: true,
            array_id: Some(array_id),
            tasks,
            refused: Vec::new(),
            suggestion: None,
        })
    }

    /// What would take every task of a refused array: the latest of the refused tasks'
    /// suggested deadlines and the highest of their suggested (per-task) budgets, never less
    /// than asked; tried on the whole array (decided, not stored) and raised again with what
    /// that trial's refusals suggest, until all of it would be accepted now. None when a refused
    /// task has no suggestion (not enough nodes have room, or the balance is short) or no
    /// suggestion was found in `SUGGESTION_ROUNDS` tries.
    fn array_suggestion(
        &mut self,
        spec: &JobSpec,
        n: usize,
        refused: &[RefusedTask],
        user: Option<u64>,
        now: f64,
    ) -> Option<Suggestion> {
        let raise = |c: Suggestion, s: &Option<Suggestion>| {
            s.as_ref()
                .map(|s| Suggestion { deadline: c.deadline.max(s.deadline), budget: c.budget.max(s.budget) })
        };
        let mut cand = Suggestion { deadline: spec.deadline(), budget: spec.budget() };
        for r in refused {
            cand = raise(cand, &r.suggestion)?;
        }
        for _ in 0..SUGGESTION_ROUNDS {
            let mut trial = spec.clone();
            trial.qos.deadline = cand.deadline;
            trial.qos.budget = cand.budget;
            let refusals = self.trial_refusals(&trial, n, user, now);
            if refusals.is_empty() {
                return Some(cand);
            }
            for s in &refusals {
                cand = raise(cand, s)?;
            }
        }
        None
    }

    /// The suggestions of the tasks of an `n`-task array of `spec` that would be refused now,
    /// each decided against the view that holds the ones before it; nothing stays in the view.
    fn trial_refusals(
        &mut self,
        spec: &JobSpec,
        n: usize,
        user: Option<u64>,
        now: f64,
    ) -> Vec<Option<Suggestion>> {
        let mut held = Vec::new();
        let mut refusals = Vec::new();
        let reserved = self.policy.reserved_estimate(spec, user);
        for i in 0..n {
            match self.policy.decide_as(spec, user, &self.cluster, now) {
                Decision::Accept { nodes, .. } => {
                    let id = TRIAL_IDS + i as u64;
                    if self.cluster.commit_spec_reserving(id, spec, reserved, now, &nodes, now).is_ok() {
                        held.push(id);
                    }
                }
                Decision::Reject { reason, suggestion } => refusals.push(match reason {
                    RejectReason::Resources => suggestion,
                    _ => self.robust_suggestion(spec, user, suggestion, now),
                }),
                Decision::Queue => {}
            }
        }
        for id in held {
            self.cluster.release(id);
        }
        refusals
    }

    /// Every task of array `id`, if the caller may see the array (it is theirs, or they are an
    /// administrator).
    pub fn array(&self, caller: &Caller, id: u64) -> Result<Vec<JobInfo>, ApiError> {
        array(&self.db, caller, id)
    }

    /// Cancels every active task of array `id`, each settled as `cancel` settles one job.
    pub fn cancel_array(&mut self, caller: &Caller, id: u64, now: f64) -> Result<Vec<JobInfo>, ApiError> {
        let tasks = self.array(caller, id)?;
        if !tasks.iter().any(|t| t.state.is_active()) {
            return Err(ApiError::Conflict(format!("array {id}: every task has ended; nothing to cancel")));
        }
        for t in tasks.iter().filter(|t| t.state.is_active()) {
            self.cancel(caller, t.id, now)?;
        }
        Ok(store::array_tasks(&self.db, id)?)
    }
}

/// The tasks of array `id`, if the caller may see it.
pub fn array(db: &rusqlite::Connection, caller: &Caller, id: u64) -> Result<Vec<JobInfo>, ApiError> {
    let head = crate::sched::owned_job(db, caller, id)?;
    if head.array_id != Some(id) {
        return Err(ApiError::NotFound(format!(
            "array {id} does not exist: job {id} is no array's first task"
        )));
    }
    Ok(store::array_tasks(db, id)?)
}
