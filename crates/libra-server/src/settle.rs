//! Settling a job: its final state, what it is charged (`libra_core::billing`'s rules) and the
//! release of the rest of its hold, written inside the caller's transaction, so that the
//! transaction that records how a job ended also settles it. No state in which a job has ended
//! on its node and is unsettled in the store survives a crash; `Inner::settle_stranded` settles
//! any a store from an earlier version holds.

use crate::app::Inner;
use crate::error::ApiError;
use crate::ledger;
use libra_api::JobState;
use libra_core::billing::{self, Ending, Outcome, Usage};
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension};

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

/// What a job was quoted and has used so far, from the store.
pub fn usage(conn: &Connection, job: u64) -> rusqlite::Result<Option<(JobState, Usage)>> {
    conn.prepare_cached("SELECT state, cost, budget, estimate, procs, cpu_seconds FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| {
            let state: String = r.get(0)?;
            Ok((
                JobState::parse(&state).unwrap_or(JobState::Failed),
                Usage {
                    quoted: Money(r.get(1)?),
                    budget: Money(r.get(2)?),
                    estimate: r.get(3)?,
                    procs: r.get::<_, i64>(4)?.clamp(1, i64::from(u32::MAX)) as u32,
                    cpu_seconds: r.get(5)?,
                },
            ))
        })
        .optional()
}

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
    let internal = |e: ledger::LedgerError| ApiError::Internal(e.to_string());
    // An overrun owes more than is held when the job ran on between two reports: raise the hold
    // as far as the owner's credit goes (the charge is already capped at the budget).
    if let Some((_, held)) = ledger::open_hold(conn, job)? {
        if s.charge > held && held.0 > 0 {
            let available = ledger::available_for_job(conn, job, now)?.max(Money::ZERO);
            let to = held + (s.charge - held).min(available);
            ledger::extend_hold(conn, job, to, usage.budget, now).map_err(internal)?;
        }
    }
    let charged = ledger::settle(conn, job, s.charge, now).map_err(internal)?;
    let mut note = s.note;
    if charged < s.charge {
        // The owner's credit could not cover what the job ran up between two reports: the
        // cluster bears the difference.
        note.push_str(&format!(" (capped at the {charged} the owner's credit could cover)"));
    }
    let final_state = state_of(s.outcome);
    conn.prepare_cached(
        "UPDATE jobs SET state = ?2, charged = ?3, reason = COALESCE(?4, reason), settlement = ?5, \
         end_time = COALESCE(end_time, ?6) WHERE id = ?1",
    )?
    .execute(params![job as i64, final_state.as_str(), charged.0, reason, note, now])?;
    conn.prepare_cached("UPDATE job_nodes SET done = 1 WHERE job = ?1")?.execute(params![job as i64])?;
    Ok(Some(Settled { job, state: final_state, charged }))
}

/// How a job ended once every part has: None while a part is open. Records the job's end time
/// and exit code. `lost_reason` names the node when a part was lost.
pub fn parts_ending(
    conn: &Connection,
    job: u64,
    now: f64,
) -> Result<Option<(Ending, Option<String>)>, ApiError> {
    let row: Option<(i64, i64, i64, i64, Option<f64>, f64)> = conn
        .prepare_cached(
            "SELECT SUM(done = 0), SUM(lost), SUM(failed), SUM(timed_out), MAX(end_time), \
             (SELECT deadline_at FROM jobs WHERE id = ?1) FROM job_nodes WHERE job = ?1",
        )?
        .query_row(params![job as i64], |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?.unwrap_or(1),
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                r.get(4)?,
                r.get::<_, Option<f64>>(5)?.unwrap_or(f64::INFINITY),
            ))
        })
        .optional()?;
    let Some((open, lost, failed, timed_out, end, deadline_at)) = row else { return Ok(None) };
    if open > 0 {
        return Ok(None);
    }
    // A job an executor launched itself (Slurm) has ended only once that executor says so too
    // (`executor::slurm`: its completion record, or the grace period after it left the queue).
    let external_open: bool = conn
        .prepare_cached("SELECT slurm_id IS NOT NULL AND slurm_end IS NULL FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get(0))
        .optional()?
        .unwrap_or(false);
    if external_open {
        return Ok(None);
    }
    if lost > 0 {
        let node: Option<String> = conn
            .query_row("SELECT node FROM job_nodes WHERE job = ?1 AND lost = 1", params![job as i64], |r| {
                r.get(0)
            })
            .optional()?;
        let why = format!("lost: node {} no longer runs it", node.unwrap_or_default());
        return Ok(Some((Ending::Lost, Some(why))));
    }
    // The first failing part says why (a start error, a signal, an exit code).
    let why: Option<(Option<i32>, Option<String>)> = conn
        .query_row(
            "SELECT exit_code, error FROM job_nodes WHERE job = ?1 AND failed = 1 ORDER BY rank LIMIT 1",
            params![job as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let exit_code: Option<i32> = match &why {
        Some((code, _)) => *code,
        None => {
            conn.query_row("SELECT MAX(exit_code) FROM job_nodes WHERE job = ?1", params![job as i64], |r| {
                r.get(0)
            })?
        }
    };
    let end = end.unwrap_or(now).min(now);
    conn.prepare_cached("UPDATE jobs SET end_time = ?2, exit_code = ?3 WHERE id = ?1")?
        .execute(params![job as i64, end, exit_code])?;
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
        let ended: Vec<u64> = self
            .db
            .prepare_cached(
                "SELECT j.id FROM jobs j WHERE j.state IN ('PENDING','RUNNING','SUSPENDED') \
                 AND EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id) \
                 AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id AND n.done = 0)",
            )?
            .query_map([], |r| r.get::<_, i64>(0).map(|v| v as u64))?
            .collect::<Result<_, _>>()?;
        let unstarted: Vec<u64> = self
            .db
            .prepare_cached(
                "SELECT id FROM jobs WHERE state IN ('PENDING','SUSPENDED','HELD') AND start_time IS NULL AND deadline_at < ?1",
            )?
            .query_map(params![unstarted_before.unwrap_or(f64::NEG_INFINITY)], |r| r.get::<_, i64>(0).map(|v| v as u64))?
            .collect::<Result<_, _>>()?;
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
