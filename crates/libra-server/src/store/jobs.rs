//! Jobs: listings, the view's rebuild, and the changes a job's owner makes (update, hold,
//! release).

use super::{job_from_row, JOB_COLUMNS};
use crate::app::spec_of;
use crate::store::Cached;
use libra_api::{JobInfo, JobState};
use libra_core::{JobSpec, Money};
use rusqlite::{params, Connection, OptionalExtension};

/// Every active job's commitment, to rebuild the view at start: (id, spec, submit time, its
/// nodes comma-separated (none: queued), the least CPU any part has used, the work reserved).
#[allow(clippy::type_complexity)]
pub fn commitments(db: &Connection) -> rusqlite::Result<Vec<(u64, JobSpec, f64, String, f64, f64)>> {
    db.prepare(
        "SELECT id, estimate, deadline, budget, procs, mem_mb, submit_time, \
         (SELECT group_concat(node, ',') FROM job_nodes n WHERE n.job = jobs.id), \
         (SELECT MIN(cpu_seconds) FROM job_nodes n WHERE n.job = jobs.id), \
         COALESCE(reserved, estimate), cpus_per_task \
         FROM jobs WHERE state IN ('PENDING','RUNNING','SUSPENDED')",
    )?
    .query_map([], |r| {
        let spec = spec_of(
            r.get(1)?,
            r.get(2)?,
            Money(r.get(3)?),
            r.get(4)?,
            r.get::<_, i64>(5)?.max(0) as u64,
            r.get::<_, i64>(10)?.clamp(1, i64::from(u32::MAX)) as u32,
        );
        Ok((
            r.get::<_, i64>(0)? as u64,
            spec,
            r.get(6)?,
            r.get::<_, Option<String>>(7)?.unwrap_or_default(),
            r.get::<_, Option<f64>>(8)?.unwrap_or(0.0),
            r.get(9)?,
        ))
    })?
    .collect()
}

/// Unfinished jobs (held ones too), soonest deadline first; `user`, `state`, `node`: only
/// those.
pub fn unfinished(
    db: &Connection,
    user: Option<i64>,
    state: Option<JobState>,
    node: Option<&str>,
) -> rusqlite::Result<Vec<JobInfo>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE j.state IN ('PENDING','RUNNING','SUSPENDED','HELD') AND (?1 IS NULL OR j.user_id = ?1) \
         AND (?2 IS NULL OR j.state = ?2) \
         AND (?3 IS NULL OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id AND n.node = ?3)) \
         ORDER BY j.deadline_at, j.id"
    );
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map(params![user, state.map(JobState::as_str), node], job_from_row)?;
    rows.collect()
}

/// The newest `limit` jobs, newest first, as sacct filters them: `start`: still unfinished, or
/// ended at or after it; `end`: submitted at or before it.
pub fn history(
    db: &Connection,
    user: Option<i64>,
    state: Option<JobState>,
    start: Option<f64>,
    end: Option<f64>,
    limit: u32,
) -> rusqlite::Result<Vec<JobInfo>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE (?1 IS NULL OR j.user_id = ?1) AND (?2 IS NULL OR j.state = ?2) \
         AND (?3 IS NULL OR COALESCE(j.end_time, CASE WHEN j.state IN ('PENDING','RUNNING','SUSPENDED','HELD') \
              THEN 1e300 ELSE j.submit_time END) >= ?3) \
         AND (?4 IS NULL OR j.submit_time <= ?4) ORDER BY j.id DESC LIMIT ?5"
    );
    let mut st = db.prepare_cached(&sql)?;
    let rows = st.query_map(params![user, state.map(JobState::as_str), start, end, limit], job_from_row)?;
    rows.collect()
}

/// What the job asked for: (estimate, processors, memory MB, CPUs per task, work reserved).
pub fn stored_request(db: &Connection, id: u64) -> rusqlite::Result<(f64, u32, i64, i64, Option<f64>)> {
    db.row(
        "SELECT estimate, procs, mem_mb, cpus_per_task, reserved FROM jobs WHERE id = ?1",
        params![id as i64],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
}

/// New terms for a held job (decided when it is released).
pub fn set_terms(db: &Connection, id: u64, deadline_at: f64, budget: Money) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET deadline = ?2 - submit_time, deadline_at = ?2, budget = ?3 WHERE id = ?1",
        params![id as i64, deadline_at, budget.0],
    )?;
    Ok(())
}

/// An accepted change: the new terms and the promise made for them (`reserved`: the work the
/// nodes are committed to, when it is not the estimate; None keeps what was reserved).
pub fn set_promise(
    db: &Connection,
    id: u64,
    deadline_at: f64,
    budget: Money,
    cost: Money,
    share: f64,
    reserved: Option<f64>,
) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET deadline = ?2 - submit_time, deadline_at = ?2, budget = ?3, cost = ?4, share = ?5, \
         reserved = COALESCE(?6, reserved), reason = NULL, suggestion = NULL WHERE id = ?1",
        params![id as i64, deadline_at, budget.0, cost.0, share, reserved],
    )?;
    Ok(())
}

/// The jobs still waiting on job `id`, by id.
pub fn waiting_on(db: &Connection, id: u64) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(
        "SELECT j.id FROM job_deps d JOIN jobs j ON j.id = d.job WHERE d.dep = ?1 AND j.waiting = 1 ORDER BY j.id",
    )?
    .query_map(params![id as i64], |r| r.get::<_, i64>(0).map(|v| v as u64))?
    .collect()
}

/// Whether a node has reported any part of the job.
pub fn seen(db: &Connection, id: u64) -> rusqlite::Result<bool> {
    db.row("SELECT EXISTS (SELECT 1 FROM job_nodes WHERE job = ?1 AND seen = 1)", params![id as i64], |r| {
        r.get(0)
    })
}

/// Holds the job: its nodes and price given up, `reason` saying by whom.
pub fn hold(db: &Connection, id: u64, reason: &str) -> rusqlite::Result<()> {
    db.exec("DELETE FROM job_nodes WHERE job = ?1", params![id as i64])?;
    db.exec(
        "UPDATE jobs SET state = 'HELD', share = 0, cost = 0, reason = ?2 WHERE id = ?1",
        params![id as i64, reason],
    )?;
    Ok(())
}

/// The job's parts: one per node, ranked in order.
pub fn place(db: &Connection, id: u64, nodes: &[String]) -> rusqlite::Result<()> {
    let mut st = db.prepare_cached("INSERT INTO job_nodes(job, node, rank) VALUES (?1, ?2, ?3)")?;
    for (rank, n) in nodes.iter().enumerate() {
        st.execute(params![id as i64, n, rank as i64])?;
    }
    Ok(())
}

/// A released job admitted again (`reserved`: the work reserved, when not the estimate).
pub fn released(
    db: &Connection,
    id: u64,
    share: f64,
    cost: Money,
    reason: Option<&str>,
    reserved: Option<f64>,
) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET state = 'PENDING', share = ?2, cost = ?3, reason = ?4, suggestion = NULL, reserved = ?5 WHERE id = ?1",
        params![id as i64, share, cost.0, reason, reserved],
    )?;
    Ok(())
}

/// The job a retried submission made before (same user, same `Idempotency-Key`).
pub fn by_idempotency_key(
    db: &Connection,
    user: i64,
    key: &str,
) -> rusqlite::Result<Option<(u64, JobState)>> {
    db.prepare_cached("SELECT id, state FROM jobs WHERE user_id = ?1 AND idem_key = ?2")?
        .query_row(params![user, key], |r| {
            let state: String = r.get(1)?;
            Ok((r.get::<_, i64>(0)? as u64, JobState::parse(&state).unwrap_or(JobState::Failed)))
        })
        .optional()
}

/// How many of the user's jobs have not ended: the count the store's triggers keep (one row).
pub fn active_count(db: &Connection, user: i64) -> rusqlite::Result<i64> {
    db.prepare_cached("SELECT active_jobs FROM users WHERE id = ?1")?.query_row(params![user], |r| r.get(0))
}

/// The users whose kept count of active jobs differs from their jobs counted one by one:
/// (user, kept, counted). Empty in a consistent store (the crash tests check it).
pub fn active_counts_disagreeing(db: &Connection) -> rusqlite::Result<Vec<(i64, i64, i64)>> {
    let mut st = db.prepare(
        "SELECT id, active_jobs, (SELECT COUNT(*) FROM jobs WHERE jobs.user_id = users.id \
         AND jobs.state IN ('PENDING','RUNNING','SUSPENDED')) AS counted FROM users WHERE active_jobs <> counted",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// The jobs whose kept count of open parts (`open_parts`, migration 12) differs from their
/// parts counted one by one: (job, kept, counted), NULL as None (no parts). Empty in a
/// consistent store (the crash tests check it).
#[allow(clippy::type_complexity)]
pub fn open_parts_disagreeing(db: &Connection) -> rusqlite::Result<Vec<(u64, Option<i64>, Option<i64>)>> {
    let mut st = db.prepare(
        "SELECT id, open_parts, (SELECT SUM(done = 0) FROM job_nodes WHERE job = jobs.id) AS counted \
         FROM jobs WHERE open_parts IS NOT counted",
    )?;
    let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// A submission as it is stored.
pub struct NewJob<'a> {
    pub user: i64,
    pub name: Option<&'a str>,
    pub state: JobState,
    /// The command as JSON.
    pub command: String,
    pub estimate: f64,
    pub procs: u32,
    pub mem_mb: i64,
    pub deadline: f64,
    pub budget: Money,
    pub submit_time: f64,
    pub deadline_at: f64,
    pub share: f64,
    pub cost: Money,
    pub reason: Option<&'a str>,
    /// The suggestion as JSON.
    pub suggestion: Option<String>,
    /// The work the nodes are committed to, when it is not the estimate.
    pub reserved: Option<f64>,
    pub workdir: Option<&'a str>,
    /// The environment as JSON.
    pub env: Option<String>,
    pub stdout: Option<&'a str>,
    pub stderr: Option<&'a str>,
    pub time_limit: Option<f64>,
    pub idem_key: Option<&'a str>,
    pub cpus_per_task: u32,
    pub project: Option<i64>,
    /// See `SubmitRequest::slurm_env`.
    pub slurm_env: bool,
}

/// Stores a submission; returns its job id.
pub fn insert(db: &Connection, j: &NewJob) -> rusqlite::Result<u64> {
    db.prepare_cached(
        "INSERT INTO jobs(user_id, name, state, command, estimate, procs, mem_mb, deadline, budget, submit_time, deadline_at, share, cost, reason, suggestion, reserved, \
         workdir, env, stdout_pattern, stderr_pattern, time_limit, idem_key, cpus_per_task, project_id, slurm_env) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
    )?
    .execute(params![
        j.user,
        j.name,
        j.state.as_str(),
        j.command,
        j.estimate,
        j.procs,
        j.mem_mb,
        j.deadline,
        j.budget.0,
        j.submit_time,
        j.deadline_at,
        j.share,
        j.cost.0,
        j.reason,
        j.suggestion,
        j.reserved,
        j.workdir,
        j.env,
        j.stdout,
        j.stderr,
        j.time_limit,
        j.idem_key,
        j.cpus_per_task,
        j.project,
        j.slurm_env,
    ])?;
    Ok(db.last_insert_rowid() as u64)
}

/// A submission refused after it was stored (its hold could not be taken): nothing kept to run.
pub fn reject(db: &Connection, id: u64, reason: Option<&str>, command: &str) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET state = 'REJECTED', reason = ?2, share = 0, cost = 0, env = NULL, command = ?3 WHERE id = ?1",
        params![id as i64, reason, command],
    )?;
    Ok(())
}

/// Queued jobs (space-shared policies: no nodes yet, not waiting on dependencies), oldest
/// first, with their budgets and memory.
pub fn queued(db: &Connection) -> rusqlite::Result<Vec<(libra_core::policy::Queued, Money, u64)>> {
    db.prepare_cached(
        "SELECT id, submit_time, estimate, procs, deadline_at, budget, mem_mb FROM jobs \
         WHERE state = 'PENDING' AND waiting = 0 AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = jobs.id) ORDER BY id",
    )?
    .query_map([], |r| {
        Ok((
            libra_core::policy::Queued {
                job: r.get::<_, i64>(0)? as u64,
                submit: r.get(1)?,
                estimate: r.get(2)?,
                procs: r.get(3)?,
                deadline_abs: r.get(4)?,
            },
            Money(r.get(5)?),
            r.get::<_, i64>(6)?.max(0) as u64,
        ))
    })?
    .collect()
}

/// A queued job dispatched: its price and share fixed.
pub fn dispatched(db: &Connection, id: u64, cost: Money, share: f64) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET cost = ?2, share = ?3, reason = NULL WHERE id = ?1",
        params![id as i64, cost.0, share],
    )?;
    Ok(())
}

/// An array's earlier submission with the same `Idempotency-Key`: (first job, its array).
pub fn array_by_idempotency_key(
    db: &Connection,
    user: i64,
    key: &str,
) -> rusqlite::Result<Option<(i64, Option<i64>)>> {
    db.row("SELECT id, array_id FROM jobs WHERE user_id = ?1 AND idem_key = ?2", params![user, key], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()
}

/// The job is task `task` of array `array`.
pub fn set_array_task(db: &Connection, id: u64, array: u64, task: u32) -> rusqlite::Result<()> {
    db.prepare_cached("UPDATE jobs SET array_id = ?2, array_task = ?3 WHERE id = ?1")?.execute(params![
        id as i64,
        array as i64,
        i64::from(task)
    ])?;
    Ok(())
}

/// How many jobs are in each state.
pub fn count_by_state(db: &Connection) -> rusqlite::Result<std::collections::HashMap<String, i64>> {
    db.prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

/// A job its executor refused (Slurm's sbatch): every open part ended, failed, with `error`.
/// Returns how many parts it closed.
pub fn refused_by_executor(db: &Connection, id: u64, error: &str, now: f64) -> rusqlite::Result<usize> {
    db.exec(
        "UPDATE job_nodes SET seen = 1, done = 1, failed = 1, error = ?2, end_time = ?3 WHERE job = ?1 AND done = 0",
        params![id as i64, error, now],
    )
}
