//! What the Slurm executor records of the jobs it hands to Slurm (`crate::executor::slurm`):
//! their Slurm ids, what it has carried out there, and Slurm's completion records.

use crate::executor::slurm::Launch;
use crate::store::Cached;
use rusqlite::{params, Connection, OptionalExtension};

/// Admitted jobs Slurm does not have yet, as sbatch needs them (those waiting on dependencies
/// and those whose every part has ended are left out).
pub fn launches(db: &Connection) -> rusqlite::Result<Vec<Launch>> {
    let mut st = db.prepare_cached(
        "SELECT j.id, COALESCE(u.unix_user, u.name), u.allow_root, j.command, j.env, j.workdir, j.stdout_pattern, \
         j.stderr_pattern, j.name, j.mem_mb, j.deadline_at, j.time_limit, j.cpus_per_task, j.array_id, j.array_task, \
         (SELECT group_concat(node, ',') FROM (SELECT node FROM job_nodes m WHERE m.job = j.id ORDER BY rank)), \
         (SELECT MIN(x.cpus) FROM nodes x JOIN job_nodes m ON m.node = x.name WHERE m.job = j.id) \
         FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE j.state IN ('PENDING','RUNNING') AND j.slurm_id IS NULL AND j.waiting = 0 \
         AND EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id AND n.done = 0) ORDER BY j.id",
    )?;
    let rows = st.query_map([], |r| {
        let command: String = r.get(3)?;
        let env: Option<String> = r.get(4)?;
        let nodes: Option<String> = r.get(15)?;
        Ok(Launch {
            job: r.get::<_, i64>(0)? as u64,
            user: r.get(1)?,
            allow_root: r.get(2)?,
            command: serde_json::from_str(&command).unwrap_or_default(),
            env: env.and_then(|e| serde_json::from_str(&e).ok()),
            workdir: r.get(5)?,
            stdout: r.get(6)?,
            stderr: r.get(7)?,
            name: r.get(8)?,
            mem_mb: r.get::<_, i64>(9)?.max(0) as u64,
            deadline_at: r.get(10)?,
            time_limit: r.get(11)?,
            cpus_per_task: r.get::<_, i64>(12)?.clamp(1, i64::from(u32::MAX)) as u32,
            array_id: r.get::<_, Option<i64>>(13)?.map(|a| a as u64),
            array_task: r.get::<_, Option<i64>>(14)?.map(|a| a.clamp(0, i64::from(u32::MAX)) as u32),
            nodes: nodes.map(|n| n.split(',').map(str::to_string).collect()).unwrap_or_default(),
            node_cpus: r.get::<_, Option<f64>>(16)?.unwrap_or(1.0),
        })
    })?;
    rows.collect()
}

/// Jobs Slurm has (and has not ended) that need something done there.
#[derive(Debug, Clone, Copy)]
pub enum Pending {
    /// Settled or held by Libra while Slurm still has it: scancel.
    Cancel,
    /// Suspended by Libra, not yet in Slurm.
    Suspend,
    /// Resumed by Libra, still suspended in Slurm.
    Resume,
    /// Every active job with a Slurm id.
    Active,
}

/// (Libra job, Slurm job) of each job in `which`.
pub fn pending(db: &Connection, which: Pending) -> rusqlite::Result<Vec<(u64, u64)>> {
    let sql = match which {
        Pending::Cancel => {
            "SELECT id, slurm_id FROM jobs WHERE slurm_id IS NOT NULL AND slurm_end IS NULL AND slurm_cancelled = 0 \
             AND state NOT IN ('PENDING','RUNNING','SUSPENDED')"
        }
        Pending::Suspend => {
            "SELECT id, slurm_id FROM jobs WHERE slurm_id IS NOT NULL AND slurm_end IS NULL AND state = 'SUSPENDED' AND slurm_suspended = 0"
        }
        Pending::Resume => {
            "SELECT id, slurm_id FROM jobs WHERE slurm_id IS NOT NULL AND slurm_end IS NULL AND state IN ('PENDING','RUNNING') AND slurm_suspended = 1"
        }
        Pending::Active => {
            "SELECT id, slurm_id FROM jobs WHERE slurm_id IS NOT NULL AND slurm_end IS NULL AND state IN ('PENDING','RUNNING','SUSPENDED')"
        }
    };
    db.prepare_cached(sql)?
        .query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)))?
        .collect()
}

/// Records the job's Slurm id unless it has one already. Returns whether it was recorded.
pub fn set_id(db: &Connection, job: u64, slurm_id: u64) -> rusqlite::Result<usize> {
    db.exec(
        "UPDATE jobs SET slurm_id = ?2 WHERE id = ?1 AND slurm_id IS NULL",
        params![job as i64, slurm_id as i64],
    )
}

/// scancel was sent. A held job gives its Slurm job up: its release is submitted anew.
pub fn cancelled(db: &Connection, job: u64) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET slurm_cancelled = (state <> 'HELD'), \
         slurm_suspended = CASE state WHEN 'HELD' THEN 0 ELSE slurm_suspended END, \
         slurm_id = CASE state WHEN 'HELD' THEN NULL ELSE slurm_id END WHERE id = ?1",
        params![job as i64],
    )?;
    Ok(())
}

pub fn set_suspended(db: &Connection, job: u64, suspended: bool) -> rusqlite::Result<()> {
    db.exec("UPDATE jobs SET slurm_suspended = ?2 WHERE id = ?1", params![job as i64, suspended])?;
    Ok(())
}

/// Gone from Slurm's queue with no completion record: its end taken as `t`.
pub fn gone(db: &Connection, job: u64, t: f64) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET slurm_end = ?2, slurm_reported = ?2 WHERE id = ?1 AND slurm_end IS NULL",
        params![job as i64, t],
    )?;
    Ok(())
}

/// Slurm's end of the job (state, wait status, end time), if Slurm has reported it.
#[allow(clippy::type_complexity)]
pub fn end(
    db: &Connection,
    job: u64,
) -> rusqlite::Result<Option<(Option<String>, Option<i64>, Option<f64>)>> {
    db.prepare_cached(
        "SELECT slurm_state, slurm_exit, slurm_end FROM jobs WHERE id = ?1 AND slurm_end IS NOT NULL",
    )?
    .query_row(params![job as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    .optional()
}

/// How Slurm's end goes into each of the job's parts.
pub struct PartsEnd {
    pub code: Option<i64>,
    pub failed: bool,
    pub timed_out: bool,
    pub error: Option<String>,
    pub end: Option<f64>,
    pub lost: bool,
}

pub fn end_parts(db: &Connection, job: u64, e: &PartsEnd) -> rusqlite::Result<()> {
    db.prepare_cached(
        "UPDATE job_nodes SET exit_code = COALESCE(?2, exit_code), failed = ?3, timed_out = ?4, \
         error = COALESCE(?5, error), end_time = COALESCE(?6, end_time), lost = (lost OR ?7) WHERE job = ?1",
    )?
    .execute(params![job as i64, e.code, e.failed, e.timed_out, e.error, e.end, e.lost])?;
    Ok(())
}

/// The Libra job Slurm job `slurm_id` is.
pub fn job_of(db: &Connection, slurm_id: u64) -> rusqlite::Result<Option<u64>> {
    db.row("SELECT id FROM jobs WHERE slurm_id = ?1", params![slurm_id as i64], |r| {
        r.get::<_, i64>(0).map(|v| v as u64)
    })
    .optional()
}

/// Slurm's completion record (jobcomp), kept once: the first record of a job stands.
pub fn record_end(
    db: &Connection,
    job: u64,
    state: &str,
    exit: i64,
    start: Option<f64>,
    end: f64,
    now: f64,
) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE jobs SET slurm_state = ?2, slurm_exit = ?3, slurm_start = ?4, slurm_end = ?5, slurm_reported = ?6 \
         WHERE id = ?1 AND slurm_end IS NULL",
        params![job as i64, state, exit, start, end, now],
    )?;
    Ok(())
}

/// Active jobs whose Slurm end was recorded at or before `t`.
pub fn reported_by(db: &Connection, t: f64) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(
        "SELECT id FROM jobs WHERE state IN ('PENDING','RUNNING','SUSPENDED') AND slurm_reported IS NOT NULL \
         AND slurm_reported <= ?1",
    )?
    .query_map(params![t], |r| r.get::<_, i64>(0).map(|v| v as u64))?
    .collect()
}

/// Every part of the job taken as ended.
pub fn parts_done(db: &Connection, job: u64) -> rusqlite::Result<()> {
    db.exec("UPDATE job_nodes SET done = 1 WHERE job = ?1 AND done = 0", params![job as i64])?;
    Ok(())
}
