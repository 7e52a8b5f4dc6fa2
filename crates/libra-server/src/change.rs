//! The daily tools of a Slurm user on the running cluster: the queue (anonymised for users
//! who are not administrators), changing a job's deadline or budget, holding and releasing a
//! job that has not started, and filtered history.
//!
//! A change is decided by the same policy code as a submission (`Policy::decide_as`), on the
//! view without the job's own promise: accepted, the job holds the new promise and its hold
//! follows the new price; refused, nothing changes. A job that holds nodes is decided on its own
//! nodes only, for the work it has left (it cannot move while it runs or is being started).

use crate::app::{spec_of, Inner};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::{ledger, store};
use libra_api::{
    ChangeAnswer, ChangeSuggestion, HistoryQuery, JobInfo, JobState, QueueEntry, QueueQuery, UpdateRequest,
    ANONYMOUS,
};
use libra_core::policy::suggest;
use libra_core::{Decision, JobSpec, Money, NodeIdx, RejectReason};
use rusqlite::Connection;

const ACTIVE_STATES: [JobState; 4] =
    [JobState::Pending, JobState::Running, JobState::Suspended, JobState::Held];

fn why(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Resources => {
            "resources: not enough nodes are up with the processors and memory asked for"
        }
        RejectReason::Deadline => {
            "deadline: the nodes cannot finish the job by this deadline without breaking earlier promises"
        }
        RejectReason::Budget => "budget: the job costs more than this budget at the current prices",
    }
}

/// A job waiting on its dependencies was admitted for the window after their promises; a
/// change would have to plan that window again, which `update` and `hold` do not do yet.
fn waits_refused(job: &JobInfo, what: &str) -> Result<(), ApiError> {
    if job.waiting {
        return Err(ApiError::Conflict(format!(
            "job {} waits on its dependencies ({}): it cannot be {what} while it waits; cancel it and submit it again",
            job.id,
            libra_core::dependency::format_list(&job.dependencies)
        )));
    }
    Ok(())
}

fn parse_state(s: &str, accepted: &[JobState]) -> Result<JobState, ApiError> {
    JobState::parse(s).filter(|st| accepted.contains(st)).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "state: '{s}' is not accepted here; accepted: {}",
            accepted.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// A user the caller may look at: themselves, anyone for an administrator.
fn user_filter(db: &Connection, caller: &Caller, user: Option<&str>) -> Result<Option<i64>, ApiError> {
    match user {
        None => Ok(Some(caller.id)),
        Some(u) if u == caller.name => Ok(Some(caller.id)),
        Some("all") if caller.admin => Ok(None),
        Some(u) => {
            caller.require_admin("look at another user's jobs (give your own name, or none)")?;
            let id = store::users::id_of(db, u).ok().flatten().map(|(id, _)| id);
            id.map(Some).ok_or_else(|| ApiError::BadRequest(format!("user: there is no user named '{u}'")))
        }
    }
}

/// Every unfinished job, soonest deadline first. Other users' jobs keep their state, nodes,
/// share and deadline, and lose their owner, name, command and money, unless the caller is an
/// administrator: the queue shows how busy the cluster is, not who is doing what.
pub fn queue(db: &Connection, caller: &Caller, q: &QueueQuery) -> Result<Vec<QueueEntry>, ApiError> {
    let user = match q.user.as_deref() {
        None => None,
        Some(u) => user_filter(db, caller, Some(u))?,
    };
    let state = q.state.as_deref().map(|s| parse_state(s, &ACTIVE_STATES)).transpose()?;
    if let Some(n) = &q.node {
        // The nodes table holds every node the view holds (registered nodes are never deleted).
        let known = store::nodes::names(db)?;
        if !known.contains(n) {
            return Err(ApiError::BadRequest(format!(
                "node: '{n}' is not a node of this cluster; nodes: {}",
                known.join(", ")
            )));
        }
    }
    let jobs = store::jobs::unfinished(db, user, state, q.node.as_deref())?;
    Ok(jobs
        .into_iter()
        .map(|j| {
            let mine = j.user == caller.name;
            let shown = mine || caller.admin;
            QueueEntry {
                id: j.id,
                user: if shown { j.user } else { ANONYMOUS.into() },
                mine,
                name: if shown { j.name } else { None },
                command: if shown { j.command } else { Vec::new() },
                state: j.state,
                nodes: j.nodes,
                procs: j.procs,
                share: j.share,
                submit_time: j.submit_time,
                start_time: j.start_time,
                deadline_at: j.deadline_at,
                cost: shown.then_some(j.cost),
                budget: shown.then_some(j.budget),
                array_id: j.array_id,
                array_task: j.array_task,
                waiting: j.waiting,
            }
        })
        .collect())
}

/// Jobs filtered as sacct filters them, oldest first: `start`: still unfinished, or ended
/// at or after it; `end`: submitted at or before it.
pub fn history(db: &Connection, caller: &Caller, q: &HistoryQuery) -> Result<Vec<JobInfo>, ApiError> {
    let user = user_filter(db, caller, q.user.as_deref())?;
    let state = q.state.as_deref().map(|s| parse_state(s, &JobState::ALL)).transpose()?;
    for (field, t) in [("start", q.start), ("end", q.end)] {
        if t.is_some_and(|t| !t.is_finite()) {
            return Err(ApiError::BadRequest(format!("{field}: give a time in Unix seconds")));
        }
    }
    let limit = q.limit.unwrap_or(10_000).min(100_000);
    let mut jobs = store::jobs::history(db, user, state, q.start, q.end, limit)?;
    jobs.reverse();
    Ok(jobs)
}

impl Inner {
    /// What a refused change suggests, in absolute terms: for a lack of resources the policy's
    /// own answer, otherwise the least resubmission the policy would accept now.
    fn change_suggestion(
        &self,
        spec: &JobSpec,
        user: Option<u64>,
        now: f64,
        reason: RejectReason,
        suggestion: Option<libra_core::Suggestion>,
    ) -> Option<ChangeSuggestion> {
        let sg = match reason {
            RejectReason::Resources => suggestion,
            _ => suggest::resubmission(self.policy.as_ref(), spec, user, &self.cluster, now, suggestion),
        };
        sg.map(|s| ChangeSuggestion { deadline_at: now + s.deadline, budget: s.budget })
    }

    /// The job's specification as stored, its deadline relative to `from`.
    fn stored_spec(
        &self,
        id: u64,
        deadline_at: f64,
        budget: Money,
        from: f64,
    ) -> Result<(JobSpec, f64), ApiError> {
        let (estimate, procs, mem, cpt, reserved) = store::jobs::stored_request(&self.db, id)?;
        let spec = spec_of(
            estimate,
            deadline_at - from,
            budget,
            procs,
            mem.max(0) as u64,
            cpt.clamp(1, i64::from(u32::MAX)) as u32,
        );
        Ok((spec, reserved.unwrap_or(estimate)))
    }

    fn owner_of(&self, id: u64) -> Result<i64, ApiError> {
        store::job_owner(&self.db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
    }

    fn reload(&self, id: u64) -> Result<JobInfo, ApiError> {
        store::job(&self.db, id)?.ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
    }

    /// `libra update`: a new deadline and/or budget for an unfinished job, decided now.
    pub fn update(
        &mut self,
        caller: &Caller,
        id: u64,
        req: &UpdateRequest,
        now: f64,
    ) -> Result<ChangeAnswer, ApiError> {
        let job = self.owned_job(caller, id)?;
        waits_refused(&job, "updated")?;
        if req.deadline_at.is_none() && req.budget.is_none() {
            return Err(ApiError::BadRequest(
                "deadline_at, budget_cents: give a new deadline, a new budget, or both".into(),
            ));
        }
        if let Some(d) = req.deadline_at {
            if !d.is_finite() || d > now + libra_core::job::MAX_SECONDS {
                return Err(ApiError::BadRequest(
                    "deadline_at: give a time in Unix seconds, at most a year from now".into(),
                ));
            }
            if d <= now {
                return Err(ApiError::BadRequest(format!(
                    "deadline_at: {d:.0} is in the past: give a deadline later than now ({now:.0})"
                )));
            }
        }
        // The range a submission's budget is held to: an update must not widen it.
        if let Some(b) = req.budget {
            libra_core::job::check_budget(b)
                .map_err(|e| ApiError::BadRequest(e.to_string().replacen("budget", "budget_cents", 1)))?;
        }
        if !job.state.is_active() {
            return Err(ApiError::Conflict(format!(
                "job {id} is {}: a finished job cannot be updated (only PENDING, RUNNING, SUSPENDED or HELD jobs)",
                job.state
            )));
        }
        if req.deadline_at.is_some_and(|d| d > job.deadline_at) {
            self.promised_to_dependents(id)?;
        }
        let deadline_at = req.deadline_at.unwrap_or(job.deadline_at);
        let budget = req.budget.unwrap_or(job.budget);
        let owner = self.owner_of(id)?;
        let user = Some(owner as u64);
        let previous_cost = job.cost;
        let refuse = |reason: String, suggestion: Option<ChangeSuggestion>, job: JobInfo| ChangeAnswer {
            accepted: false,
            reason: Some(reason),
            suggestion,
            previous_cost,
            job,
        };
        if job.state == JobState::Held {
            // No promise to re-decide: the new terms are decided when the job is released.
            store::jobs::set_terms(&self.db, id, deadline_at, budget)?;
            return Ok(ChangeAnswer {
                accepted: true,
                reason: Some("held: the new deadline and budget are decided when the job is released".into()),
                suggestion: None,
                previous_cost,
                job: self.reload(id)?,
            });
        }
        let node_idx: Vec<NodeIdx> =
            job.nodes.iter().filter_map(|n| self.nodes.get(n).map(|rt| rt.idx)).collect();
        let (full, _) = self.stored_spec(id, deadline_at, budget, now)?;
        // What it has done so far (the slowest part's CPU), and what of its price that earned.
        let cpu_done = store::nodes::min_cpu(&self.db, id)?.unwrap_or(0.0);
        let done = (cpu_done / full.estimate().max(1e-9)).clamp(0.0, 1.0);
        let earned = Money((previous_cost.0 as f64 * done).floor() as i64);

        let (new_cost, share, reserved_total) = if node_idx.is_empty() {
            // Queued by a space-shared policy: no promise yet, a lien on the whole budget.
            match self.policy.decide_as(&full, user, &self.cluster, now) {
                Decision::Queue => (budget, 0.0, None),
                Decision::Accept { .. } => {
                    return Ok(refuse("queue: the job waits for its place in the queue".into(), None, job))
                }
                Decision::Reject { reason, suggestion } => {
                    let sg = self.change_suggestion(&full, user, now, reason, suggestion);
                    return Ok(refuse(why(reason).into(), sg, job));
                }
            }
        } else if self.policy.space_shared() {
            // Dispatched by a space-shared policy: it has its nodes to itself at the price fixed
            // at dispatch; only whether it can still end in time is left to decide.
            let left = (full.estimate() - cpu_done).max(0.0);
            if now + left > deadline_at {
                return Ok(refuse(
                    format!("deadline: it has about {left:.0} s of its estimate left; the deadline must be at least that far away"),
                    Some(ChangeSuggestion { deadline_at: (now + left + 60.0).ceil(), budget: budget.max(previous_cost) }),
                    job,
                ));
            }
            if budget < previous_cost {
                return Ok(refuse(
                    format!("budget: its price was fixed at dispatch at {previous_cost}; the budget cannot go below it"),
                    Some(ChangeSuggestion { deadline_at, budget: previous_cost }),
                    job,
                ));
            }
            (previous_cost, job.share, None)
        } else {
            // Decided on its own nodes only, without its own promise, for the work it has left.
            let mut view = self.cluster.clone();
            view.release(id);
            for (i, _) in self.cluster.nodes() {
                if !node_idx.contains(&i) {
                    view.set_up(i, false);
                }
            }
            let left = (full.estimate() - cpu_done).max(full.estimate() * 1e-3);
            let rest_budget = budget - earned;
            // A budget below what the job has earned already is refused, but the rest is still
            // decided (with nothing to spend on it), so that the answer suggests a budget that
            // would do: the earned part plus the price of the rest.
            let overspent = rest_budget.is_negative();
            let overspent_why = || {
                format!("budget: the part of its price its CPU time so far has earned, {earned}, is above the new budget")
            };
            let rest = spec_of(
                left,
                deadline_at - now,
                if overspent { Money::ZERO } else { rest_budget },
                full.procs(),
                full.resources.mem_mb,
                full.resources.cpus_per_task,
            );
            match self.policy.decide_as(&rest, user, &view, now) {
                Decision::Accept { nodes, cost, .. }
                    if overspent && nodes.iter().all(|n| node_idx.contains(n)) =>
                {
                    let sg = ChangeSuggestion { deadline_at, budget: earned + cost };
                    return Ok(refuse(overspent_why(), Some(sg), job));
                }
                Decision::Accept { nodes, share, cost } if nodes.iter().all(|n| node_idx.contains(n)) => {
                    let reserved = cpu_done + self.policy.reserved_estimate(&rest, user);
                    (earned + cost, share, Some(reserved))
                }
                Decision::Accept { .. } | Decision::Queue => {
                    return Ok(refuse(why(RejectReason::Deadline).into(), None, job))
                }
                Decision::Reject { reason, suggestion } => {
                    let sg = match reason {
                        RejectReason::Resources => suggestion,
                        _ => suggest::resubmission(self.policy.as_ref(), &rest, user, &view, now, suggestion),
                    };
                    let sg = sg.map(|s| ChangeSuggestion {
                        deadline_at: now + s.deadline,
                        budget: earned + s.budget,
                    });
                    let reason = match reason {
                        RejectReason::Budget if overspent => overspent_why(),
                        r => why(r).into(),
                    };
                    return Ok(refuse(reason, sg, job));
                }
            }
        };
        if new_cost > budget {
            return Ok(refuse(why(RejectReason::Budget).into(), None, job));
        }
        let tx = self.db.transaction()?;
        if let Err(e) = ledger::set_hold(&tx, id, new_cost, budget, now) {
            drop(tx);
            return Ok(refuse(e.to_string(), None, job));
        }
        let reserved = reserved_total.filter(|r| *r != full.estimate());
        store::jobs::set_promise(&tx, id, deadline_at, budget, new_cost, share, reserved)?;
        tx.commit()?;
        if !node_idx.is_empty() {
            // The view holds the new promise: the whole job, from its submission, as a restart
            // rebuilds it, and its progress so far.
            let old = self.cluster.release(id);
            let from = job.submit_time;
            let (spec, reserved) = self.stored_spec(id, deadline_at, budget, from)?;
            if let Err(e) = self.cluster.commit_spec_reserving(id, &spec, reserved, from, &node_idx, from) {
                tracing::error!("job {id}: cluster view refused the new promise: {e} (was {old:?})");
            }
            let _ = self.cluster.report_progress(id, cpu_done, now);
        }
        tracing::info!(job = id, by = %caller.name, deadline_at, budget = %budget, cost = %new_cost, "updated");
        Ok(ChangeAnswer {
            accepted: true,
            reason: None,
            suggestion: None,
            previous_cost,
            job: self.reload(id)?,
        })
    }

    /// Jobs waiting on `id` were admitted for the time after its promised finish (its
    /// deadline): a later deadline would break their promises, so it is refused while any waits.
    fn promised_to_dependents(&self, id: u64) -> Result<(), ApiError> {
        let waiting: Vec<String> =
            store::jobs::waiting_on(&self.db, id)?.into_iter().map(|j| j.to_string()).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        Err(ApiError::Conflict(format!(
            "deadline_at: job(s) {} wait on job {id} (--dependency) and were promised their deadlines on its current one; a later deadline would break that promise. Cancel them first, or give a deadline no later than the current one",
            waiting.join(", ")
        )))
    }

    /// `libra hold`: a job that has not started gives up its promise (its hold is released, its
    /// nodes freed) and is not started until it is released.
    pub fn hold(&mut self, caller: &Caller, id: u64, now: f64) -> Result<JobInfo, ApiError> {
        let job = self.owned_job(caller, id)?;
        waits_refused(&job, "held")?;
        let seen = store::jobs::seen(&self.db, id)?;
        if job.state != JobState::Pending || job.start_time.is_some() || seen {
            return Err(ApiError::Conflict(format!(
                "job {id} is {}{}: only a PENDING job that has not started can be held",
                job.state,
                if job.state == JobState::Pending { " and has started" } else { "" }
            )));
        }
        let tx = self.db.transaction()?;
        ledger::settle(&tx, id, Money::ZERO, now)?;
        store::jobs::hold(
            &tx,
            id,
            &format!("held by {}: `libra release {id}` admits it again", caller.name),
        )?;
        tx.commit()?;
        self.cluster.release(id);
        tracing::info!(job = id, by = %caller.name, "held");
        self.reload(id)
    }

    /// `libra release`: a held job is admitted again as a new submission would be, for its
    /// deadline and budget; refused, it stays held (update its deadline or budget and release
    /// it again, or cancel it).
    pub fn release(&mut self, caller: &Caller, id: u64, now: f64) -> Result<ChangeAnswer, ApiError> {
        let job = self.owned_job(caller, id)?;
        if job.state != JobState::Held {
            return Err(ApiError::Conflict(format!(
                "job {id} is {}: only a HELD job can be released",
                job.state
            )));
        }
        let owner = self.owner_of(id)?;
        let user = Some(owner as u64);
        let refuse = |reason: String, suggestion: Option<ChangeSuggestion>, job: JobInfo| ChangeAnswer {
            accepted: false,
            reason: Some(reason),
            suggestion,
            previous_cost: Money::ZERO,
            job,
        };
        if job.deadline_at <= now {
            return Ok(refuse(
                "deadline: it has passed; give a later one with `libra update --deadline` and release it again".into(),
                None,
                job,
            ));
        }
        let (spec, _) = self.stored_spec(id, job.deadline_at, job.budget, now)?;
        let (state_nodes, share, cost, reason) = match self.policy.decide_as(&spec, user, &self.cluster, now)
        {
            Decision::Accept { nodes, share, cost } => (nodes, share, cost, None),
            Decision::Queue => (Vec::new(), 0.0, spec.budget(), Some("queued")),
            Decision::Reject { reason, suggestion } => {
                let sg = self.change_suggestion(&spec, user, now, reason, suggestion);
                return Ok(refuse(why(reason).into(), sg, job));
            }
        };
        let reserved = self.policy.reserved_estimate(&spec, user);
        let names: Vec<String> = state_nodes.iter().map(|&n| self.node_name(n)).collect();
        let tx = self.db.transaction()?;
        if let Err(e) = ledger::hold(&tx, owner, id, cost, spec.budget(), now) {
            drop(tx);
            return Ok(refuse(e.to_string(), None, job));
        }
        store::jobs::place(&tx, id, &names)?;
        let reserved_beyond = (reserved != spec.estimate()).then_some(reserved);
        store::jobs::released(&tx, id, share, cost, reason, reserved_beyond)?;
        tx.commit()?;
        if !state_nodes.is_empty() {
            // As a submission now would be committed (and a restart rebuilds it: the same
            // deadline, from its submission).
            if let Err(e) = self.cluster.commit_spec_reserving(id, &spec, reserved, now, &state_nodes, now) {
                tracing::error!("job {id}: cluster view refused the released job: {e}");
            }
        }
        tracing::info!(job = id, by = %caller.name, cost = %cost, "released");
        Ok(ChangeAnswer {
            accepted: true,
            reason: None,
            suggestion: None,
            previous_cost: Money::ZERO,
            job: self.reload(id)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::ledger;
    use crate::sched::tests::{app, req, user};
    use libra_api::{JobState, RegisterRequest, UpdateRequest};
    use libra_core::Money;

    fn node(name: &str) -> RegisterRequest {
        RegisterRequest {
            name: name.into(),
            cpus: 1.0,
            mem_mb: 0,
            mechanism: "none".into(),
            account: String::new(),
            switches_users: false,
        }
    }

    /// An accepted update is the promise a restart rebuilds; a refused one changes nothing.
    #[test]
    fn an_updated_promise_survives_a_restart_and_a_refusal_leaves_the_view_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let (id, later) = {
            let app = app(dir.path());
            app.lock().register(&node("n1"), 1.0, now).unwrap();
            let u = user(&app, "u", 1000);
            let mut g = app.lock();
            let a = g.submit(&u, &req(50.0, 100.0, 100), now).unwrap();
            let b = g.submit(&u, &req(40.0, 100.0, 100), now).unwrap();
            assert!(a.state == JobState::Pending && b.state == JobState::Pending, "{a:?} {b:?}");
            let view = g.cluster.commitment(a.id).cloned().unwrap();
            // Earlier than the node can keep beside b's promise.
            let no = g
                .update(&u, a.id, &UpdateRequest { deadline_at: Some(now + 60.0), budget: None }, now)
                .unwrap();
            assert!(!no.accepted && no.reason.as_deref().unwrap().starts_with("deadline"), "{no:?}");
            assert_eq!(g.cluster.commitment(a.id), Some(&view));
            let later = now + 400.0;
            let yes =
                g.update(&u, a.id, &UpdateRequest { deadline_at: Some(later), budget: None }, now).unwrap();
            assert!(yes.accepted, "{yes:?}");
            assert_eq!(g.cluster.commitment(a.id).unwrap().deadline_abs, later);
            assert_eq!(ledger::balance(&g.db, u.id).unwrap().held, yes.job.cost + b.cost);
            (a.id, later)
        };
        let app = app(dir.path());
        let g = app.lock();
        assert_eq!(g.cluster.commitment(id).unwrap().deadline_abs, later);
    }

    /// A held job has no promise in the view and nothing on hold; past its deadline it ends,
    /// charged nothing.
    #[test]
    fn a_held_job_frees_its_promise_and_ends_uncharged_when_its_deadline_passes() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = app(dir.path());
        app.lock().register(&node("n1"), 1.0, now).unwrap();
        let u = user(&app, "u", 1000);
        let mut g = app.lock();
        let a = g.submit(&u, &req(50.0, 100.0, 100), now).unwrap();
        let h = g.hold(&u, a.id, now).unwrap();
        assert_eq!((h.state, h.cost), (JobState::Held, Money::ZERO));
        assert!(g.cluster.commitment(a.id).is_none());
        assert_eq!(ledger::balance(&g.db, u.id).unwrap().held, Money::ZERO);
        assert_eq!(g.settle_stranded(now + 200.0, Some(now + 150.0)).unwrap(), 1);
        let end = crate::store::job(&g.db, a.id).unwrap().unwrap();
        assert!(!end.state.is_active() && end.charged == Money::ZERO, "{end:?}");
        let b = ledger::balance(&g.db, u.id).unwrap();
        assert_eq!((b.available, b.held, b.charged), (Money::from_credits(1000), Money::ZERO, Money::ZERO));
    }

    /// Under a space-shared policy a queued job's lien follows its budget, and a dispatched
    /// job's deadline may move only where its remaining estimate still fits.
    #[test]
    fn space_shared_jobs_update_their_lien_and_their_deadline_within_their_estimate() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = app(dir.path());
        app.lock().register(&node("n1"), 1.0, now).unwrap();
        let u = user(&app, "u", 1000);
        let mut g = app.lock();
        let pricing = g.pricing;
        g.set_policy("fcfs-bf", pricing, None).unwrap();
        let run = g.submit(&u, &req(50.0, 100.0, 100), now).unwrap();
        g.dispatch_queue(now).unwrap();
        let run = crate::store::job(&g.db, run.id).unwrap().unwrap();
        assert_eq!(run.nodes.len(), 1, "{run:?}");
        let queued = g.submit(&u, &req(10.0, 500.0, 100), now).unwrap();
        assert!(queued.nodes.is_empty() && queued.cost == Money::from_credits(100), "{queued:?}");
        let up = g
            .update(
                &u,
                queued.id,
                &UpdateRequest { deadline_at: None, budget: Some(Money::from_credits(60)) },
                now,
            )
            .unwrap();
        assert!(up.accepted && up.job.cost == Money::from_credits(60), "{up:?}");
        assert_eq!(ledger::balance(&g.db, u.id).unwrap().held, run.cost + Money::from_credits(60));
        let short = g
            .update(&u, run.id, &UpdateRequest { deadline_at: Some(now + 20.0), budget: None }, now)
            .unwrap();
        assert!(!short.accepted && short.reason.as_deref().unwrap().starts_with("deadline"), "{short:?}");
        assert!(short.suggestion.unwrap().deadline_at >= now + 50.0);
        let long = g
            .update(&u, run.id, &UpdateRequest { deadline_at: Some(now + 900.0), budget: None }, now)
            .unwrap();
        assert!(long.accepted && long.job.cost == run.cost, "{long:?}");
    }
}
