//! Job dependencies (`--dependency`): what a job was submitted with, whether it still waits,
//! and one row per job it waits on.

use crate::app::spec_of;
use crate::store::Cached;
use libra_api::JobState;
use libra_core::dependency::DepKind;
use libra_core::{JobSpec, Money};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::BTreeMap;

/// A job named as a dependency, as the store has it.
#[derive(Debug, Clone, Copy)]
pub struct DepJob {
    pub state: JobState,
    pub deadline_at: f64,
    pub end: Option<f64>,
    pub submit: f64,
    pub exit_code: Option<i32>,
}

/// The columns `DepJob::from_row` reads, of a `jobs` row aliased `alias`.
fn dep_columns(alias: &str) -> String {
    ["state", "deadline_at", "end_time", "submit_time", "exit_code"]
        .iter()
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl DepJob {
    fn from_row(r: &rusqlite::Row, offset: usize) -> rusqlite::Result<DepJob> {
        let s: String = r.get(offset)?;
        Ok(DepJob {
            state: JobState::parse(&s).unwrap_or(JobState::Failed),
            deadline_at: r.get(offset + 1)?,
            end: r.get(offset + 2)?,
            submit: r.get(offset + 3)?,
            exit_code: r.get(offset + 4)?,
        })
    }
}

/// A job's owner, its array, and how it stands as a dependency.
pub fn dep_row(conn: &Connection, id: u64) -> rusqlite::Result<Option<(i64, Option<i64>, DepJob)>> {
    conn.prepare_cached(&format!(
        "SELECT j.user_id, j.array_id, {} FROM jobs j WHERE j.id = ?1",
        dep_columns("j")
    ))?
    .query_row(params![id as i64], |r| Ok((r.get(0)?, r.get(1)?, DepJob::from_row(r, 2)?)))
    .optional()
}

/// Task `task` of array `array`.
pub fn array_task(conn: &Connection, array: u64, task: u32) -> rusqlite::Result<Option<u64>> {
    conn.prepare_cached("SELECT id FROM jobs WHERE array_id = ?1 AND array_task = ?2")?
        .query_row(params![array as i64, i64::from(task)], |r| r.get::<_, i64>(0).map(|v| v as u64))
        .optional()
}

/// Every task of array `array`, in task order.
pub fn array_tasks(conn: &Connection, array: u64) -> rusqlite::Result<Vec<u64>> {
    conn.prepare_cached("SELECT id FROM jobs WHERE array_id = ?1 ORDER BY array_task")?
        .query_map(params![array as i64], |r| r.get::<_, i64>(0).map(|v| v as u64))?
        .collect()
}

/// What the job was submitted with (`given`, JSON), whether it waits, the window it was
/// admitted for, and (when it waits) `reason`.
pub fn record(
    conn: &Connection,
    id: u64,
    given: &str,
    waits: bool,
    window: Option<f64>,
    reason: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE jobs SET dependency = ?2, waiting = ?3, wait_window = ?4, reason = CASE WHEN ?3 THEN ?5 ELSE reason END WHERE id = ?1",
    )?
    .execute(params![id as i64, given, waits, window, reason])?;
    Ok(())
}

/// One row per job `id` waits on.
pub fn record_rows(conn: &Connection, id: u64, rows: &BTreeMap<u64, DepKind>) -> rusqlite::Result<()> {
    let mut ins = conn.prepare_cached("INSERT INTO job_deps(job, dep, kind) VALUES (?1, ?2, ?3)")?;
    for (dep, kind) in rows {
        ins.execute(params![id as i64, *dep as i64, kind.as_str()])?;
    }
    Ok(())
}

/// Every waiting job's dependencies: (job, its state, the dependency, the kind, how the
/// dependency stands), by job.
#[allow(clippy::type_complexity)]
pub fn waiting(conn: &Connection) -> rusqlite::Result<Vec<(u64, String, u64, DepKind, DepJob)>> {
    conn.prepare_cached(&format!(
        "SELECT j.id, j.state, d.dep, d.kind, {} \
         FROM jobs j JOIN job_deps d ON d.job = j.id JOIN jobs dj ON dj.id = d.dep \
         WHERE j.waiting = 1 ORDER BY j.id, d.dep",
        dep_columns("dj")
    ))?
    .query_map([], |r| {
        let kind: String = r.get(3)?;
        Ok((
            r.get::<_, i64>(0)? as u64,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)? as u64,
            DepKind::parse(&kind).unwrap_or(DepKind::AfterOk),
            DepJob::from_row(r, 4)?,
        ))
    })?
    .collect()
}

/// The job waits no more (`clear_reason`: and the "waiting on" reason goes).
pub fn stop_waiting(conn: &Connection, job: u64, clear_reason: bool) -> rusqlite::Result<()> {
    let sql = if clear_reason {
        "UPDATE jobs SET waiting = 0, reason = NULL WHERE id = ?1"
    } else {
        "UPDATE jobs SET waiting = 0 WHERE id = ?1"
    };
    conn.exec(sql, params![job as i64])?;
    Ok(())
}

/// Active jobs that wait on dependencies, with their submission times.
pub fn waiting_jobs(conn: &Connection) -> rusqlite::Result<Vec<(u64, f64)>> {
    conn.prepare(
        "SELECT id, submit_time FROM jobs WHERE waiting = 1 AND state IN ('PENDING','RUNNING','SUSPENDED')",
    )?
    .query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?
    .collect()
}

/// The stored job's specification (deadline relative to its submission), the work reserved
/// for it, and its absolute deadline.
pub fn stored(conn: &Connection, job: u64) -> rusqlite::Result<(JobSpec, f64, f64)> {
    conn.row(
        "SELECT estimate, deadline, budget, procs, mem_mb, cpus_per_task, COALESCE(reserved, estimate), deadline_at FROM jobs WHERE id = ?1",
        params![job as i64],
        |r| {
            Ok((
                spec_of(
                    r.get(0)?,
                    r.get(1)?,
                    Money(r.get(2)?),
                    r.get(3)?,
                    r.get::<_, i64>(4)?.max(0) as u64,
                    r.get::<_, i64>(5)?.clamp(1, i64::from(u32::MAX)) as u32,
                ),
                r.get(6)?,
                r.get(7)?,
            ))
        },
    )
}

/// The window (seconds) a waiting job was admitted for; None once it waits no more.
pub fn wait_window(conn: &Connection, id: u64) -> rusqlite::Result<Option<f64>> {
    Ok(conn
        .prepare_cached("SELECT wait_window FROM jobs WHERE id = ?1 AND waiting = 1")?
        .query_row(params![id as i64], |r| r.get::<_, Option<f64>>(0))
        .optional()?
        .flatten())
}
