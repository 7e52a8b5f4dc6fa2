//! Admission and settlement: submit (validate, decide, then store the job and its hold in one
//! transaction), quote (the same decision, not recorded), cancel, suspend, resume, and settling
//! a job when it ends.
//!
//! What a job is charged when it ends, cancellations included, is `libra_core::billing`'s
//! rule, applied by `crate::settle`.

use crate::app::Inner;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::{ledger, store};
use libra_api::{JobInfo, JobState, NodePrice, QuoteResponse, SubmitRequest};
use libra_core::billing::Ending;
use libra_core::policy::suggest;
use libra_core::{Decision, JobSpec, Money};

pub const MAX_COMMAND_ARGS: usize = 4096;
/// Limits on what a submission may store (a rejected submission is stored too).
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;
pub const MAX_NAME_BYTES: usize = 256;
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_ENV_VARS: usize = 4096;
pub const MAX_ENV_BYTES: usize = 512 * 1024;
/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;

/// The command as stored: whole for a job that may run, cut to its first
/// `store::jobs::CUT_COMMAND_BYTES` for a refusal (it never runs, and a stream of refusals must
/// not fill the disk).
fn stored_command(command: &[String], state: JobState) -> Result<String, serde_json::Error> {
    if state != JobState::Rejected {
        return serde_json::to_string(command);
    }
    serde_json::to_string(&store::jobs::cut_command(command))
}

fn check_request(req: &SubmitRequest) -> Result<(), ApiError> {
    req.spec.validate().map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if req.command.is_empty() || req.command[0].is_empty() {
        return Err(ApiError::BadRequest(
            "command: give the program to run and its arguments (after `--`, or in a job script)".into(),
        ));
    }
    if req.command.len() > MAX_COMMAND_ARGS {
        return Err(ApiError::BadRequest(format!(
            "command: at most {MAX_COMMAND_ARGS} arguments are accepted"
        )));
    }
    if req.command.iter().any(|a| a.contains('\0')) {
        return Err(ApiError::BadRequest("command: arguments may not contain NUL bytes".into()));
    }
    if let Some((i, a)) = req.command.iter().enumerate().find(|(_, a)| a.len() > libra_api::MAX_ARG_BYTES) {
        return Err(ApiError::BadRequest(format!(
            "command: argument {i} ('{}...') is {} bytes; a program is given at most {} bytes in one argument \
             (Linux's MAX_ARG_STRLEN), so it could not start: split it, or put the long part in a file it reads",
            a.chars().take(24).collect::<String>().escape_debug(),
            a.len(),
            libra_api::MAX_ARG_BYTES
        )));
    }
    let total: usize = req.command.iter().map(String::len).sum();
    if total > MAX_COMMAND_BYTES {
        return Err(ApiError::BadRequest(format!(
            "command: {total} bytes of program and arguments; at most {MAX_COMMAND_BYTES} are accepted"
        )));
    }
    if let Some(name) = &req.name {
        if name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
            return Err(ApiError::BadRequest(format!(
                "name: give at most {MAX_NAME_BYTES} bytes without control characters"
            )));
        }
    }
    if let Some(dir) = &req.workdir {
        if !dir.starts_with('/') || dir.contains('\0') || dir.len() > MAX_PATH_BYTES {
            return Err(ApiError::BadRequest(format!(
                "workdir: '{}' is not accepted: give an absolute directory of at most {MAX_PATH_BYTES} bytes",
                dir.chars().take(80).collect::<String>()
            )));
        }
    }
    for (field, pattern) in [("stdout", &req.stdout), ("stderr", &req.stderr)] {
        if let Some(p) = pattern {
            if p.is_empty() || p.contains('\0') || p.len() > MAX_PATH_BYTES {
                return Err(ApiError::BadRequest(format!(
                    "{field}: give a file name pattern of 1 to {MAX_PATH_BYTES} bytes (%j job id, %x name, %N node, %t rank)"
                )));
            }
        }
    }
    if let Some(env) = &req.env {
        let bytes: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        if env.len() > MAX_ENV_VARS || bytes > MAX_ENV_BYTES {
            return Err(ApiError::BadRequest(format!(
                "env: {} variables, {bytes} bytes; at most {MAX_ENV_VARS} variables and {MAX_ENV_BYTES} bytes are accepted (--export=NONE or a list of names sends fewer)",
                env.len()
            )));
        }
        if let Some(k) = env.keys().find(|k| k.is_empty() || k.contains('=') || k.contains('\0')) {
            return Err(ApiError::BadRequest(format!("env: '{k}' is not a variable name")));
        }
        if env.values().any(|v| v.contains('\0')) {
            return Err(ApiError::BadRequest("env: values may not contain NUL bytes".into()));
        }
        if let Some(k) =
            env.iter().find(|(k, v)| k.len() + 1 + v.len() > libra_api::MAX_ARG_BYTES).map(|(k, _)| k)
        {
            return Err(ApiError::BadRequest(format!(
                "env: {k} is {} bytes with its name; a program is given at most {} bytes in one variable \
                 (Linux's MAX_ARG_STRLEN), so it could not start: leave it out (--export names the ones to send)",
                k.len() + 1 + env[k].len(),
                libra_api::MAX_ARG_BYTES
            )));
        }
    }
    if let Some(t) = req.time_limit {
        if !(t > 0.0 && t <= libra_core::job::MAX_SECONDS) {
            return Err(ApiError::BadRequest(format!(
                "time_limit: {} is not accepted: give a wall-clock limit in seconds, greater than 0 and at most one year",
                libra_core::Shown(t)
            )));
        }
    }
    Ok(())
}

impl Inner {
    pub fn submit(&mut self, caller: &Caller, req: &SubmitRequest, now: f64) -> Result<JobInfo, ApiError> {
        self.submit_batch(&[(caller, req, None)], now)
            .pop()
            .unwrap_or_else(|| Err(ApiError::Internal("no answer".into())))
    }

    /// Admits submissions in order, each decided against the view that holds the ones before
    /// it, and stores them all in one transaction: one durable commit (one fsync) for the
    /// batch, which is what lets many clients submit at once (group commit). A submission that
    /// fails on its own (bad input, a store error in its statements) is rolled back alone; if
    /// the commit itself fails, the whole batch is undone, in the view too.
    pub fn submit_batch(
        &mut self,
        items: &[(&Caller, &SubmitRequest, Option<&str>)],
        now: f64,
    ) -> Vec<Result<JobInfo, ApiError>> {
        let tx = match self.db.unchecked_transaction() {
            Ok(tx) => tx,
            Err(e) => {
                let e = ApiError::from(e);
                return items.iter().map(|_| Err(e.clone())).collect();
            }
        };
        let mut stored: Vec<Result<(u64, JobState), ApiError>> = Vec::with_capacity(items.len());
        let mut in_view: Vec<u64> = Vec::new();
        for (caller, req, key) in items {
            let req = &*self.executor_defaults(req);
            let one = check_request(req).and_then(|()| {
                store::in_savepoint(&tx, || self.store_submission(&tx, caller, req, *key, now))
            });
            stored.push(one.map(|(id, state, admitted)| {
                if let Some((nodes, reserved)) = admitted {
                    // The next decision in the batch must see this one.
                    match deps::commit_admitted(&tx, &mut self.cluster, id, &req.spec, reserved, now, &nodes)
                    {
                        Ok(()) => in_view.push(id),
                        Err(e) => tracing::error!(job = id, "cluster view refused the commitment: {e}"),
                    }
                }
                (id, state)
            }));
        }
        if let Err(e) = tx.commit() {
            for id in in_view {
                self.cluster.release(id);
            }
            let e = ApiError::from(e);
            return items.iter().map(|_| Err(e.clone())).collect();
        }
        // Logged once stored: a batch whose commit failed submitted nothing, and its ids are
        // given again.
        for ((caller, ..), one) in items.iter().zip(&stored) {
            if let Ok((id, state)) = one {
                tracing::info!(job = id, user = %caller.name, state = %state, "submitted");
            }
        }
        stored
            .into_iter()
            .map(|r| {
                let (id, _) = r?;
                store::job(&self.db, id)?.ok_or_else(|| ApiError::Internal(format!("job {id} vanished")))
            })
            .collect()
    }

    /// The request as the executor in force runs it: under Slurm a job that asked for no
    /// memory gets `default_mem_mb` (Slurm would give it the whole node), and admission counts
    /// that, so that the job never waits in Slurm's queue for memory.
    fn executor_defaults<'a>(&self, req: &'a SubmitRequest) -> std::borrow::Cow<'a, SubmitRequest> {
        if req.spec.resources.mem_mb == 0 && self.exec.default_mem_mb > 0 {
            let mut r = req.clone();
            r.spec.resources.mem_mb = self.exec.default_mem_mb;
            std::borrow::Cow::Owned(r)
        } else {
            std::borrow::Cow::Borrowed(req)
        }
    }

    /// One submission's decision and its rows (job, hold, nodes) inside the batch's
    /// transaction. Returns the job id, its state, and, if it holds nodes now, the nodes and the
    /// work reserved on them.
    #[allow(clippy::type_complexity)]
    fn store_submission(
        &self,
        tx: &rusqlite::Transaction,
        caller: &Caller,
        req: &SubmitRequest,
        key: Option<&str>,
        now: f64,
    ) -> Result<(u64, JobState, Option<(Vec<libra_core::NodeIdx>, f64)>), ApiError> {
        // A retried submission (the client lost the first answer) gets the job the first one
        // made: decided once, held once.
        if let Some(key) = key {
            if let Some((id, state)) = store::jobs::by_idempotency_key(tx, caller.id, key)? {
                return Ok((id, state, None));
            }
        }
        let active = store::jobs::active_count(tx, caller.id)?;
        if active >= i64::from(self.max_active_jobs) {
            return Err(ApiError::TooMany(
                format!(
                    "active jobs: {} has {active} active jobs, the most one user may have (max_active_jobs = {}); submit more when some end",
                    caller.name, self.max_active_jobs
                ),
                10,
            ));
        }
        // The account first: a user who may not charge it is refused before anything is decided.
        let project = crate::projects::for_submission(tx, caller.id, &caller.name, req.account.as_deref())?;
        let spec = &req.spec;
        let user = Some(caller.id as u64);
        // A job with dependencies is decided for the window after their latest promised
        // finish (`deps`); without, `admit` is the job itself.
        let plan = self.plan_dependencies(tx, caller, &req.dependencies, spec, now)?;
        let admit = plan.admit_spec(spec);
        let decision = self.decide_planned(&plan, spec, user, now);
        let reserved = self.policy.reserved_estimate(admit, user);
        let (state, nodes, share, cost, mut reason, suggestion) = match decision {
            Decision::Accept { nodes, share, cost } => (JobState::Pending, nodes, share, cost, None, None),
            Decision::Reject { reason, suggestion } => {
                let why = match reason {
                    libra_core::RejectReason::Resources => "resources: not enough nodes are up with the processors and memory asked for",
                    libra_core::RejectReason::Deadline => "deadline: the nodes cannot finish the job by its deadline without breaking earlier promises",
                    libra_core::RejectReason::Budget => "budget: the job costs more than its budget at the current prices",
                };
                let why = match &plan {
                    deps::DepPlan::TooLate(..) => {
                        "deadline: too little time is left between the dependencies' promised finish and the job's deadline"
                    }
                    _ => why,
                };
                let why = match plan.explain(now) {
                    Some(d) => format!("{why}; {d}"),
                    None => why.to_string(),
                };
                (JobState::Rejected, Vec::new(), 0.0, Money::ZERO, Some(why), suggestion)
            }
            // Space-shared baselines: no promise, a place in the queue, and a lien on the whole
            // budget until dispatch fixes the price.
            Decision::Queue => {
                (JobState::Pending, Vec::new(), 0.0, spec.budget(), Some("queued".to_string()), None)
            }
        };
        let node_names: Vec<String> = nodes.iter().map(|&i| self.node_name(i)).collect();
        let deadline_at = now + spec.deadline();
        let mut state = state;
        let command = stored_command(&req.command, state)?;
        let command_len = command.len();
        let id = store::jobs::insert(
            tx,
            &store::jobs::NewJob {
                user: caller.id,
                name: req.name.as_deref(),
                state,
                command,
                estimate: spec.estimate(),
                procs: spec.procs(),
                mem_mb: spec.resources.mem_mb as i64,
                deadline: spec.deadline(),
                budget: spec.budget(),
                submit_time: now,
                deadline_at,
                share,
                cost,
                reason: reason.as_deref(),
                suggestion: suggestion.map(|s| serde_json::to_string(&s)).transpose()?,
                reserved: (reserved != spec.estimate()).then_some(reserved),
                workdir: req.workdir.as_deref(),
                // A refusal keeps no environment: it will never run, and it would only fill
                // the store.
                env: req
                    .env
                    .as_ref()
                    .filter(|_| state == JobState::Pending)
                    .map(serde_json::to_string)
                    .transpose()?,
                stdout: req.stdout.as_deref(),
                stderr: req.stderr.as_deref(),
                time_limit: req.time_limit,
                idem_key: key,
                cpus_per_task: spec.resources.cpus_per_task,
                project,
                slurm_env: req.slurm_env,
            },
        )?;
        if state == JobState::Pending {
            match ledger::hold(tx, caller.id, id, cost, spec.budget(), now) {
                Ok(()) => store::jobs::place(tx, id, &node_names)?,
                Err(e) => {
                    state = JobState::Rejected;
                    reason = Some(e.to_string());
                    let command = stored_command(&req.command, JobState::Rejected)?;
                    store::jobs::reject(tx, id, reason.as_deref(), &command)?;
                }
            }
        }
        if let Some(quota) = self.command_quota.filter(|_| state == JobState::Pending) {
            // Only a command a cut would shorten adds to what the user keeps (migration 25).
            if command_len > store::jobs::CUT_COMMAND_BYTES {
                let n = store::jobs::hold_commands_to_quota(tx, caller.id, quota, now)?;
                if n > 0 {
                    tracing::info!(user = caller.id, jobs = n, "a user's kept commands passed command_quota_mb: the commands of their jobs that ended first were cut to their first KiB");
                }
            }
        }
        if let Some(cap) = self.refusals_cap.filter(|_| state == JobState::Rejected) {
            let n = store::jobs::hold_refusals_to_cap(tx, caller.id, cap)?;
            if n > 0 {
                tracing::debug!(
                    user = caller.id,
                    jobs = n,
                    "a user's refusals passed max_kept_refusals: their oldest were removed"
                );
            }
        }
        Self::store_dependencies(tx, id, &plan, state)?;
        let admitted = (state == JobState::Pending && !nodes.is_empty()).then_some((nodes, reserved));
        Ok((id, state, admitted))
    }

    /// The decision on `spec` for `user` now, waiting as `plan` says (`plan_dependencies`): what
    /// a submission records and a quote answers. A job that would wait is decided for its
    /// window; a refusal carries what a resubmission should ask for, on the job's own clock.
    fn decide_planned(&self, plan: &deps::DepPlan, spec: &JobSpec, user: Option<u64>, now: f64) -> Decision {
        let admit = plan.admit_spec(spec);
        let decision = match plan {
            deps::DepPlan::TooLate(..) => {
                Decision::Reject { reason: libra_core::RejectReason::Deadline, suggestion: None }
            }
            _ => self.policy.decide_as(admit, user, &self.cluster, now),
        };
        match decision {
            Decision::Reject { reason, suggestion } => {
                let mut suggestion = match reason {
                    libra_core::RejectReason::Resources => suggestion,
                    _ => self.robust_suggestion(admit, user, suggestion, now),
                };
                if let Some(s) = suggestion.as_mut() {
                    // The window's deadline, back on the job's own clock.
                    s.deadline = (s.deadline + plan.wait()).ceil();
                }
                Decision::Reject { reason, suggestion }
            }
            other => other,
        }
    }

    /// What a rejected user is told to ask for instead: the policy's exact suggestion (`sg`)
    /// with the margins a resubmission a few seconds later needs, the deadline kept when only
    /// the budget was short (`libra_core::policy::suggest::resubmission`).
    fn robust_suggestion(
        &self,
        spec: &JobSpec,
        user: Option<u64>,
        sg: Option<libra_core::Suggestion>,
        now: f64,
    ) -> Option<libra_core::Suggestion> {
        suggest::resubmission(self.policy.as_ref(), spec, user, &self.cluster, now, sg)
    }

    /// What `submit` would answer `caller` now for `spec` waiting on `dependencies`, without
    /// recording anything: decided as a submission is, for the window after the dependencies'
    /// latest promised finish when the job would wait (`plan_dependencies`, which refuses the
    /// same dependencies a submission refuses, in the same words).
    pub fn quote(
        &self,
        spec: &JobSpec,
        dependencies: &[libra_core::dependency::Dependency],
        caller: &Caller,
        now: f64,
    ) -> Result<QuoteResponse, ApiError> {
        spec.validate().map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let user = Some(caller.id as u64);
        let plan = self.plan_dependencies(&self.db, caller, dependencies, spec, now)?;
        let admit = plan.admit_spec(spec);
        let decision = self.decide_planned(&plan, spec, user, now);
        let mut q = QuoteResponse {
            policy: self.policy.name().into(),
            accepted: false,
            cost: None,
            nodes: Vec::new(),
            share: None,
            reason: None,
            suggestion: None,
            prices: self.node_prices(Some(admit), user, now),
            dependency: plan.explain(now),
        };
        match decision {
            Decision::Accept { nodes, share, cost } => {
                q.accepted = true;
                q.cost = Some(cost);
                q.nodes = nodes.iter().map(|&i| self.node_name(i)).collect();
                q.share = Some(share);
            }
            Decision::Reject { reason, suggestion } => {
                q.reason = Some(reason.to_string());
                q.suggestion = suggestion;
            }
            Decision::Queue => q.reason = Some("queue".into()),
        }
        Ok(q)
    }

    /// Node `idx`'s load (the sum of its jobs' shares) at `now`, as people and programs are
    /// shown it: an idle node's is +0, where the float sum of no shares is -0.0 (which a table
    /// printed as "-0.000" and JSON as -0.0).
    pub fn shown_load(&self, idx: libra_core::NodeIdx, now: f64) -> f64 {
        self.cluster.node_load(idx, now) + 0.0
    }

    /// Price per CPU-second on every node, as the policy in force would charge `user` for
    /// `spec` (or a one-CPU-second job due in a minute when none is given) now: the policy's own
    /// `price`, the one its admission charges.
    pub fn node_prices(&self, spec: Option<&JobSpec>, user: Option<u64>, now: f64) -> Vec<NodePrice> {
        let probe = JobSpec::simple(1.0, 60.0, Money::ZERO);
        let spec = spec.unwrap_or(&probe);
        let mut v: Vec<NodePrice> = self
            .nodes
            .iter()
            .map(|(name, rt)| {
                let n = self.cluster.node(rt.idx);
                NodePrice {
                    node: name.clone(),
                    up: n.up,
                    price_base: n.spec.price_base,
                    price_now: self.policy.price(spec, user, &self.cluster, rt.idx, now),
                    load: self.shown_load(rt.idx, now),
                    cpus: n.spec.cpus,
                }
            })
            .collect();
        v.sort_by(|a, b| a.node.cmp(&b.node));
        v
    }

    /// A job the caller may touch: their own, or any for an administrator. Another user's job is
    /// refused with 403 (it is not hidden behind a 404: the id is not a secret, the job is).
    pub fn owned_job(&self, caller: &Caller, id: u64) -> Result<JobInfo, ApiError> {
        owned_job(&self.db, caller, id)
    }

    /// Cancels an active job: its owner pays for the CPU it used (nothing before it starts); a
    /// job an administrator cancels is free (`libra_core::billing`).
    pub fn cancel(&mut self, caller: &Caller, id: u64, now: f64) -> Result<JobInfo, ApiError> {
        let job = self.owned_job(caller, id)?;
        if !job.state.is_active() {
            // Named as the user named it: an array's task by its label (`7_2`, job 8).
            let label = match (job.array_id, job.array_task) {
                (Some(_), Some(_)) => format!("{} (job {id})", libra_api::job_label(&job)),
                _ => id.to_string(),
            };
            return Err(ApiError::Conflict(format!(
                "job {label} is already {}: nothing to cancel",
                job.state
            )));
        }
        let by_owner = job.user == caller.name;
        let reason = if by_owner {
            format!("cancelled by {}", caller.name)
        } else {
            format!("cancelled by administrator {}", caller.name)
        };
        self.finish(id, Ending::Cancelled { by_owner }, Some(reason), now)?;
        store::job(&self.db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
    }

    pub fn suspend_resume(&mut self, id: u64, suspend: bool) -> Result<JobInfo, ApiError> {
        let job = store::job(&self.db, id)?
            .ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))?;
        let next = match (suspend, job.state) {
            (true, JobState::Pending | JobState::Running) => JobState::Suspended,
            (false, JobState::Suspended) => {
                if job.start_time.is_some() {
                    JobState::Running
                } else {
                    JobState::Pending
                }
            }
            (true, s) => {
                return Err(ApiError::Conflict(format!(
                    "job {id} is {s}: only a PENDING or RUNNING job can be suspended"
                )))
            }
            (false, s) => {
                return Err(ApiError::Conflict(format!(
                    "job {id} is {s}: only a SUSPENDED job can be resumed"
                )))
            }
        };
        store::set_state(&self.db, id, next)?;
        store::job(&self.db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
    }
}

mod array;
pub(crate) use array::array as owned_array;
pub(crate) mod deps;

#[cfg(test)]
pub(crate) mod tests;

/// Job `id`, if the caller may see it: their own, any for an administrator.
pub fn owned_job(db: &rusqlite::Connection, caller: &Caller, id: u64) -> Result<JobInfo, ApiError> {
    let owner =
        store::job_owner(db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))?;
    if owner != caller.id && !caller.admin {
        return Err(ApiError::Forbidden(format!(
            "forbidden: job {id} belongs to another user; {} may see and change only their own jobs",
            caller.name
        )));
    }
    store::job(db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
}
