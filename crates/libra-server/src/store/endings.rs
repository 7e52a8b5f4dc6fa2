//! How jobs end: what their parts report, what the settlement records.

use crate::store::Cached;
use libra_api::JobState;
use libra_core::billing::Usage;
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension};

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

/// A settled job: its final state, the charge and the note saying how it was reached; every
/// part taken as ended.
#[allow(clippy::too_many_arguments)]
pub fn settled(
    db: &Connection,
    job: u64,
    state: JobState,
    charged: Money,
    reason: Option<&str>,
    note: &str,
    cpu: f64,
    now: f64,
) -> rusqlite::Result<()> {
    db.prepare_cached(
        "UPDATE jobs SET state = ?2, charged = ?3, reason = COALESCE(?4, reason), settlement = ?5, \
         end_time = COALESCE(end_time, ?6), settled_cpu = ?7 WHERE id = ?1",
    )?
    .execute(params![job as i64, state.as_str(), charged.0, reason, note, now, cpu])?;
    db.prepare_cached("UPDATE job_nodes SET done = 1 WHERE job = ?1")?.execute(params![job as i64])?;
    Ok(())
}

/// The job's parts together: (open, lost, failed, timed out, the last end, the job's
/// deadline), None for no such job.
#[allow(clippy::type_complexity)]
pub fn parts(db: &Connection, job: u64) -> rusqlite::Result<Option<(i64, i64, i64, i64, Option<f64>, f64)>> {
    db.prepare_cached(
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
    .optional()
}

/// Whether an executor that launched the job itself (Slurm) has not reported its end yet.
pub fn executor_open(db: &Connection, job: u64) -> rusqlite::Result<bool> {
    Ok(db
        .prepare_cached("SELECT slurm_id IS NOT NULL AND slurm_end IS NULL FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

/// The node a lost part of the job was on.
pub fn lost_node(db: &Connection, job: u64) -> rusqlite::Result<Option<String>> {
    db.row("SELECT node FROM job_nodes WHERE job = ?1 AND lost = 1", params![job as i64], |r| r.get(0))
        .optional()
}

/// The first failing part, by rank: its exit code and error.
#[allow(clippy::type_complexity)]
pub fn first_failure(db: &Connection, job: u64) -> rusqlite::Result<Option<(Option<i32>, Option<String>)>> {
    db.row(
        "SELECT exit_code, error FROM job_nodes WHERE job = ?1 AND failed = 1 ORDER BY rank LIMIT 1",
        params![job as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

pub fn max_exit_code(db: &Connection, job: u64) -> rusqlite::Result<Option<i32>> {
    db.row("SELECT MAX(exit_code) FROM job_nodes WHERE job = ?1", params![job as i64], |r| r.get(0))
}

/// The job's end time and exit code.
pub fn ended(db: &Connection, job: u64, end: f64, exit_code: Option<i32>) -> rusqlite::Result<()> {
    db.prepare_cached("UPDATE jobs SET end_time = ?2, exit_code = ?3 WHERE id = ?1")?
        .execute(params![job as i64, end, exit_code])?;
    Ok(())
}

/// Active jobs every part of which has ended (unsettled: a store from before exits and
/// settlements shared a transaction), in the order of state, then id (the order the full scan
/// this replaced read them in, by the state index: settlements are written in the same order).
///
/// `open_parts` is `SUM(done = 0)` over the job's parts, NULL when it has none (kept by the
/// triggers of migration 12), so `open_parts = 0` is "some part, and no open one"; the partial
/// index `jobs_parts_ended` holds exactly these jobs, so the query reads only them.
pub fn ended_unsettled(db: &Connection) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(ENDED_UNSETTLED)?.query_map([], |r| r.get::<_, i64>(0).map(|v| v as u64))?.collect()
}

pub(crate) const ENDED_UNSETTLED: &str =
    "SELECT id FROM jobs WHERE open_parts = 0 AND state IN ('PENDING','RUNNING','SUSPENDED') ORDER BY state, id";

/// Jobs never started whose deadline passed before `t`, in the order of state, then id (as
/// `ended_unsettled`). The partial index `jobs_unstarted` (unstarted jobs by state and
/// deadline) gives exactly the unstarted jobs due before `t`, not every unstarted one.
pub fn unstarted_by(db: &Connection, t: f64) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(UNSTARTED_BY)?
        .query_map(params![t], |r| r.get::<_, i64>(0).map(|v| v as u64))?
        .collect()
}

pub(crate) const UNSTARTED_BY: &str = "SELECT id FROM jobs WHERE state IN ('PENDING','SUSPENDED','HELD') \
     AND start_time IS NULL AND deadline_at < ?1 ORDER BY state, id";

/// Raises the CPU recorded for `node`'s part of `job` to `cpu` (and the job's sum with it).
/// False, nothing written, when the part is not this node's or already counts as much.
pub fn more_cpu(db: &Connection, job: u64, node: &str, cpu: f64) -> rusqlite::Result<bool> {
    let n = db
        .prepare_cached(
            "UPDATE job_nodes SET cpu_seconds = ?3 WHERE job = ?1 AND node = ?2 AND cpu_seconds < ?3",
        )?
        .execute(params![job as i64, node, cpu])?;
    if n > 0 {
        db.prepare_cached(
            "UPDATE jobs SET cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
        )?
        .execute(params![job as i64])?;
    }
    Ok(n > 0)
}

/// A settled job's charge, the note saying how it was reached, and the CPU it was reckoned on
/// (None for a job settled by a version that did not record it).
pub fn settlement(db: &Connection, job: u64) -> rusqlite::Result<Option<(Money, String, Option<f64>)>> {
    db.row(
        "SELECT charged, COALESCE(settlement, ''), settled_cpu FROM jobs WHERE id = ?1",
        params![job as i64],
        |r| Ok((Money(r.get(0)?), r.get(1)?, r.get(2)?)),
    )
    .optional()
}

/// A settled job's charge raised (CPU reported after the settlement) and its note with it.
pub fn charged_more(db: &Connection, job: u64, charged: Money, note: &str) -> rusqlite::Result<()> {
    db.prepare_cached("UPDATE jobs SET charged = ?2, settlement = ?3 WHERE id = ?1")?
        .execute(params![job as i64, charged.0, note])?;
    Ok(())
}
