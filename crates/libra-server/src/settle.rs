//! Settling a job: its final state, what it is charged (`libra_core::billing`'s rules) and the
//! release of the rest of its hold, written inside the caller's transaction, so that the
//! transaction that records how a job ended also settles it. No state in which a job has ended
//! on its node and is unsettled in the store survives a crash; `Inner::settle_stranded` settles
//! any a store from an earlier version holds.

use crate::app::Inner;
use crate::error::ApiError;
use crate::ledger;
use crate::store;
use libra_api::JobState;
use libra_core::billing::{self, Ending, Outcome};
use libra_core::Money;
use rusqlite::Connection;

/// A job settled in a transaction, for the in-memory view once it commits.
#[derive(Debug, Clone)]
pub struct Settled {
    pub job: u64,
    pub state: JobState,
    pub charged: Money,
}

pub fn state_of(o: Outcome) -> JobState {
    match o {
        Outcome::Completed => JobState::Completed,
        Outcome::Deadline => JobState::Deadline,
        Outcome::Failed => JobState::Failed,
        Outcome::Cancelled => JobState::Cancelled,
        Outcome::Timeout => JobState::Timeout,
    }
}

pub use crate::store::endings::usage;

/// Settles an active job inside `conn`'s open transaction. None when the job is not active
/// (settled already: settling twice does nothing).
pub fn settle_job(
    conn: &Connection,
    job: u64,
    ending: Ending,
    reason: Option<String>,
    now: f64,
) -> Result<Option<Settled>, ApiError> {
    let Some((state, usage)) = usage(conn, job)? else { return Ok(None) };
    if !state.is_active() {
        return Ok(None);
    }
    let s = billing::settle(&usage, ending);
    // An overrun owes more than is held when the job ran on between two reports: raise the hold
    // as far as the owner's credit goes (the charge is already capped at the budget).
    if let Some((_, held)) = ledger::open_hold(conn, job)? {
        if s.charge > held && held.0 > 0 {
            let available = ledger::available_for_job(conn, job, now)?.max(Money::ZERO);
            let to = held + (s.charge - held).min(available);
            ledger::extend_hold(conn, job, to, usage.budget, now)?;
        }
    }
    let charged = ledger::settle(conn, job, s.charge, now)?;
    let mut note = s.note;
    if charged < s.charge {
        // The owner's credit could not cover what the job ran up between two reports: the
        // cluster bears the difference.
        note.push_str(&format!(" (capped at the {charged} the owner's credit could cover)"));
    }
    let final_state = state_of(s.outcome);
    store::endings::settled(
        conn,
        job,
        final_state,
        charged,
        reason.as_deref(),
        &note,
        usage.cpu_seconds,
        now,
    )?;
    Ok(Some(Settled { job, state: final_state, charged }))
}

/// What a settled job's note says of CPU reported after the settlement (replaced, not added
/// to, when more comes).
const LATER_CPU: &str = "; its node reported ";

/// The most CPU-seconds a part of a job is billed for after its settlement: what it can use
/// between its node's last report and the kill the next exchange brings (a report period, 2 s
/// by default, of up to a few CPUs). More means the node was out of reach while the job ran on
/// against its owner's cancel: the cluster's fault, not billed.
pub const CPU_AFTER_SETTLING_PER_PART: f64 = 10.0;

/// CPU a node reports for a job already settled (its owner cancelled it, or it ran out of
/// budget or credit, and it ran on until the node's next exchange stopped it): recorded, and
/// what it adds to the bill charged, never past the budget and as far as the owner's credit
/// goes. Nothing for a job the cluster let off (a waived settlement), a part that is not this
/// node's, or CPU counted already (a report sent again). Returns what was charged.
///
/// Without it a cancel was billed for the CPU of the last report, up to one `period` before
/// it, and a job could run that long unpaid each time.
pub fn cpu_after_settling(
    conn: &Connection,
    job: u64,
    node: &str,
    cpu: f64,
    now: f64,
) -> Result<Money, ApiError> {
    if !(cpu.is_finite() && cpu > 0.0 && store::endings::more_cpu(conn, job, node, cpu)?) {
        return Ok(Money::ZERO);
    }
    let (Some((state, mut usage)), Some((charged, note, Some(settled_cpu)))) =
        (usage(conn, job)?, store::endings::settlement(conn, job)?)
    else {
        return Ok(Money::ZERO);
    };
    if state.is_active() || note.starts_with(billing::FREE_NOTE) {
        return Ok(Money::ZERO);
    }
    let reported = usage.cpu_seconds;
    usage.cpu_seconds =
        reported.min(settled_cpu + CPU_AFTER_SETTLING_PER_PART * f64::from(usage.procs.max(1)));
    let more = usage.owed() - charged;
    if more.0 <= 0 {
        return Ok(Money::ZERO);
    }
    // A refusal by the books (an account's limit, say) charges nothing more; it must not fail
    // the node's whole report, which would then never be taken.
    let got = match ledger::charge_settled(conn, job, more, now) {
        Ok(got) => got,
        Err(e @ (ledger::LedgerError::Store(_) | ledger::LedgerError::StoreFull(_))) => return Err(e.into()),
        Err(e) => {
            tracing::warn!(job, "CPU reported after the job was settled not charged: {e}");
            Money::ZERO
        }
    };
    let base = note.split(LATER_CPU).next().unwrap_or_default();
    let total = charged + got;
    let mut note = format!("{base}{LATER_CPU}{reported:.1} CPU-s in all at its end: {total} charged");
    if usage.cpu_seconds < reported {
        note.push_str(&format!(
            " for {:.1} (what it used after it was settled is billed up to {CPU_AFTER_SETTLING_PER_PART} CPU-s a node)",
            usage.cpu_seconds
        ));
    }
    if got < more {
        note.push_str(&format!(
            " (capped at what the owner's credit or account allowed; {} owed)",
            charged + more
        ));
    }
    store::endings::charged_more(conn, job, total, &note)?;
    tracing::info!(job, node, cpu, more = %got, "charged CPU reported after the job was settled");
    Ok(got)
}

/// How a job ended once every part has: None while a part is open. Records the job's end time
/// and exit code. `lost_reason` names the node when a part was lost.
pub fn parts_ending(
    conn: &Connection,
    job: u64,
    now: f64,
) -> Result<Option<(Ending, Option<String>)>, ApiError> {
    let row = store::endings::parts(conn, job)?;
    let Some((open, lost, failed, timed_out, end, deadline_at)) = row else { return Ok(None) };
    if open > 0 {
        return Ok(None);
    }
    // A job an executor launched itself (Slurm) has ended only once that executor says so too
    // (`executor::slurm`: its completion record, or the grace period after it left the queue).
    let external_open = store::endings::executor_open(conn, job)?;
    if external_open {
        return Ok(None);
    }
    if lost > 0 {
        let node = store::endings::lost_node(conn, job)?;
        let why = format!("lost: node {} no longer runs it", node.unwrap_or_default());
        return Ok(Some((Ending::Lost, Some(why))));
    }
    // The first failing part says why (a start error, a signal, an exit code).
    let why = store::endings::first_failure(conn, job)?;
    let exit_code: Option<i32> = match &why {
        Some((code, _)) => *code,
        None => store::endings::max_exit_code(conn, job)?,
    };
    let end = end.unwrap_or(now).min(now);
    store::endings::ended(conn, job, end, exit_code)?;
    let late = end > deadline_at + libra_core::metrics::DEADLINE_EPS;
    let reason = match why {
        Some((_, Some(error))) => Some(error),
        Some((Some(c), None)) if c > 128 => Some(format!("killed by signal {}", c - 128)),
        Some((Some(c), None)) => Some(format!("exit code {c}")),
        Some((None, None)) => Some("failed".into()),
        None if late => Some(format!("finished {:.1} s after its deadline", end - deadline_at)),
        None => None,
    };
    let reason = if timed_out > 0 { Some("stopped at its time limit".to_string()) } else { reason };
    Ok(Some((Ending::Exited { success: failed == 0, late, timed_out: timed_out > 0 }, reason)))
}

impl Inner {
    /// Settles `job` in a transaction of its own and updates the view.
    pub fn finish(
        &mut self,
        job: u64,
        ending: Ending,
        reason: Option<String>,
        now: f64,
    ) -> Result<(), ApiError> {
        let tx = self.db.transaction()?;
        let settled = settle_job(&tx, job, ending, reason, now)?;
        tx.commit()?;
        if let Some(s) = settled {
            self.settled(&s)?;
        }
        Ok(())
    }

    /// The view after a settlement has committed: the job's promise is released, and a
    /// learning policy sees how long it really ran.
    pub fn settled(&mut self, s: &Settled) -> Result<(), ApiError> {
        self.cluster.release(s.job);
        if matches!(s.state, JobState::Completed | JobState::Deadline) {
            if let Some((user, estimate, runtime)) = crate::store::observation(&self.db, s.job)? {
                self.policy.observe(Some(user), estimate, runtime);
            }
        }
        tracing::info!(job = s.job, state = %s.state, charged = %s.charged, "settled");
        Ok(())
    }

    /// Settles every active job whose every part has ended (a store written by an earlier
    /// version could hold such jobs after a crash), and, with `unstarted_before`, every job no
    /// node had started when its deadline passed before that instant. Run at start-up (ended
    /// jobs only: the nodes have not reported yet) and on every scheduler tick.
    pub fn settle_stranded(&mut self, now: f64, unstarted_before: Option<f64>) -> Result<usize, ApiError> {
        let ended = store::endings::ended_unsettled(&self.db)?;
        let unstarted =
            store::endings::unstarted_by(&self.db, unstarted_before.unwrap_or(f64::NEG_INFINITY))?;
        if ended.is_empty() && unstarted.is_empty() {
            return Ok(0);
        }
        let tx = self.db.transaction()?;
        let mut settled = Vec::new();
        for job in ended {
            if let Some((ending, reason)) = parts_ending(&tx, job, now)? {
                settled.extend(settle_job(&tx, job, ending, reason, now)?);
            }
        }
        for job in unstarted {
            let why = Some("no node started it by its deadline".to_string());
            settled.extend(settle_job(&tx, job, Ending::NeverStarted, why, now)?);
        }
        tx.commit()?;
        for s in &settled {
            self.settled(s)?;
        }
        Ok(settled.len())
    }
}

#[cfg(test)]
mod tests;
