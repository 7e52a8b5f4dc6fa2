//! What the store keeps of the nodes and of each job's parts on them (`job_nodes`): the agents'
//! registrations and reports, exits and output.

use crate::store::Cached;
use libra_api::{ExitReport, JobState, OutputChunk, RegisterRequest, StartJob, Stream, OUTPUT_LIMIT};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;

/// A node as the store keeps it.
pub struct StoredNode {
    pub name: String,
    pub cpus: f64,
    pub mem_mb: i64,
    pub mechanism: String,
    pub price_base: f64,
    pub account: String,
    pub switches_users: bool,
    pub cred_hash: Option<String>,
    /// Its credential was minted and not yet presented by the node (`cred_unused`).
    pub cred_unused: bool,
    pub drained: bool,
    pub drain_reason: Option<String>,
}

/// Every node, in the order they first registered.
pub fn all(db: &Connection) -> rusqlite::Result<Vec<StoredNode>> {
    db.prepare(
        "SELECT name, cpus, mem_mb, mechanism, price_base, account, switches_users, cred_hash, drained, drain_reason, cred_unused FROM nodes ORDER BY rowid",
    )?
    .query_map([], |r| {
        Ok(StoredNode {
            name: r.get(0)?,
            cpus: r.get(1)?,
            mem_mb: r.get(2)?,
            mechanism: r.get(3)?,
            price_base: r.get(4)?,
            account: r.get(5)?,
            switches_users: r.get(6)?,
            cred_hash: r.get(7)?,
            drained: r.get(8)?,
            drain_reason: r.get(9)?,
            cred_unused: r.get(10)?,
        })
    })?
    .collect()
}

/// A registration: a new node, or a known one's new description (its price and, unless a new
/// one is minted, its credential stay). A credential minted here is unused until `credential_used`.
pub fn register(
    db: &Connection,
    r: &RegisterRequest,
    price_base: f64,
    now: f64,
    minted_hash: Option<&str>,
) -> rusqlite::Result<()> {
    db.exec(
        "INSERT INTO nodes(name, cpus, mem_mb, mechanism, price_base, up, last_seen, account, switches_users, cred_hash, cred_unused) \
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, ?9 IS NOT NULL) \
         ON CONFLICT(name) DO UPDATE SET cpus = excluded.cpus, mem_mb = excluded.mem_mb, mechanism = excluded.mechanism, up = 1, last_seen = excluded.last_seen, \
         account = excluded.account, switches_users = excluded.switches_users, cred_hash = COALESCE(excluded.cred_hash, nodes.cred_hash), \
         cred_unused = CASE WHEN excluded.cred_hash IS NULL THEN nodes.cred_unused ELSE 1 END",
        params![r.name, r.cpus, r.mem_mb as i64, r.mechanism, price_base, now, r.account, r.switches_users, minted_hash],
    )?;
    Ok(())
}

pub fn set_drained(db: &Connection, node: &str, drained: bool, reason: Option<&str>) -> rusqlite::Result<()> {
    let reason = reason.filter(|_| drained);
    db.exec(
        "UPDATE nodes SET drained = ?2, drain_reason = ?3 WHERE name = ?1",
        params![node, drained, reason],
    )?;
    Ok(())
}

pub fn set_price_base(db: &Connection, node: &str, price: f64) -> rusqlite::Result<()> {
    db.exec("UPDATE nodes SET price_base = ?2 WHERE name = ?1", params![node, price])?;
    Ok(())
}

/// Every node's name, sorted.
pub fn names(db: &Connection) -> rusqlite::Result<Vec<String>> {
    db.prepare_cached("SELECT name FROM nodes ORDER BY name")?.query_map([], |r| r.get(0))?.collect()
}

/// Whether job `job` exists, and whether node `node` was given a part of it.
pub fn given(db: &Connection, job: u64, node: &str) -> rusqlite::Result<(bool, bool)> {
    db.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM jobs WHERE id = ?1), EXISTS(SELECT 1 FROM job_nodes WHERE job = ?1 AND node = ?2)",
    )?
    .query_row(params![job as i64, node], |r| Ok((r.get(0)?, r.get(1)?)))
}

pub fn forget_credential(db: &Connection, node: &str) -> rusqlite::Result<()> {
    db.exec("UPDATE nodes SET cred_hash = NULL, cred_unused = 0 WHERE name = ?1", params![node])?;
    Ok(())
}

/// The node presented its credential: from now on only an administrator's `forget` frees its name.
pub fn credential_used(db: &Connection, node: &str) -> rusqlite::Result<()> {
    db.exec("UPDATE nodes SET cred_unused = 0 WHERE name = ?1", params![node])?;
    Ok(())
}

pub fn set_down(db: &Connection, node: &str) -> rusqlite::Result<()> {
    db.exec("UPDATE nodes SET up = 0 WHERE name = ?1", params![node])?;
    // Settled jobs it had still to stop will not be heard of from it: no longer counted as
    // running there (if it comes back running one, the kill and the bill for its CPU still come).
    db.exec(
        "UPDATE job_nodes SET lost = 1 WHERE node = ?1 AND seen = 1 AND lost = 0 AND end_time IS NULL \
         AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_nodes.job AND j.state NOT IN ('PENDING','RUNNING','SUSPENDED','HELD'))",
        params![node],
    )?;
    Ok(())
}

/// Jobs settled already whose parts on `node` it was last known to run (seen, not lost, not
/// ended: the `job_nodes_unended` index), from the report that mentions none of `reported`: the
/// node no longer has them (its agent restarted without them), so they are ended now. Without
/// this, such a job counted a part running for ever.
pub fn forgotten_after_settling(
    db: &Connection,
    node: &str,
    reported: &std::collections::HashSet<u64>,
    now: f64,
) -> rusqlite::Result<()> {
    let jobs: Vec<i64> = db
        .prepare_cached(
            "SELECT n.job FROM job_nodes n JOIN jobs j ON j.id = n.job \
             WHERE n.node = ?1 AND n.seen = 1 AND n.lost = 0 AND n.end_time IS NULL \
             AND j.state NOT IN ('PENDING','RUNNING','SUSPENDED','HELD')",
        )?
        .query_map(params![node], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for job in jobs.into_iter().filter(|j| !reported.contains(&(*j as u64))) {
        ended_after_settling(db, job as u64, node, now)?;
    }
    Ok(())
}

pub fn set_up(db: &Connection, node: &str, now: f64) -> rusqlite::Result<()> {
    db.exec("UPDATE nodes SET up = 1, last_seen = ?2 WHERE name = ?1", params![node, now])?;
    Ok(())
}

/// The active jobs with a part on `node` that has not ended, by id.
pub fn active_jobs(db: &Connection, node: &str) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(
        "SELECT j.id FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 \
         AND j.state IN ('PENDING','RUNNING','SUSPENDED')",
    )?
    .query_map(params![node], |r| r.get::<_, i64>(0).map(|v| v as u64))?
    .collect()
}

/// Each job with a part on `node` that has not ended: its state and whether the node has
/// reported the part.
pub fn assigned(db: &Connection, node: &str) -> rusqlite::Result<HashMap<u64, (JobState, bool)>> {
    let mut st = db.prepare_cached(
        "SELECT j.id, j.state, n.seen FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0",
    )?;
    let rows = st.query_map(params![node], |row| {
        let s: String = row.get(1)?;
        Ok((
            row.get::<_, i64>(0)? as u64,
            (JobState::parse(&s).unwrap_or(JobState::Failed), row.get::<_, bool>(2)?),
        ))
    })?;
    rows.collect()
}

/// A node's report of a running part: seen, its CPU so far; the job running from its start.
pub fn running(
    db: &Connection,
    job: u64,
    node: &str,
    cpu_seconds: f64,
    start_time: f64,
) -> rusqlite::Result<()> {
    db.prepare_cached(
        "UPDATE job_nodes SET seen = 1, cpu_seconds = MAX(cpu_seconds, ?3) WHERE job = ?1 AND node = ?2",
    )?
    .execute(params![job as i64, node, cpu_seconds])?;
    db.prepare_cached(
        "UPDATE jobs SET start_time = COALESCE(start_time, ?2), state = CASE state WHEN 'PENDING' THEN 'RUNNING' ELSE state END, \
         cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
    )?
    .execute(params![job as i64, start_time])?;
    Ok(())
}

/// A part its node ran and no longer knows: ended, failed, lost.
pub fn part_lost(db: &Connection, job: u64, node: &str) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE job_nodes SET done = 1, failed = 1, lost = 1 WHERE job = ?1 AND node = ?2",
        params![job as i64, node],
    )?;
    Ok(())
}

/// The least CPU any part of the job has used (the job's progress).
pub fn min_cpu(db: &Connection, job: u64) -> rusqlite::Result<Option<f64>> {
    db.prepare_cached("SELECT MIN(cpu_seconds) FROM job_nodes WHERE job = ?1")?
        .query_row(params![job as i64], |r| r.get(0))
}

/// Where the stored copy of the part's output ends (stdout, stderr).
pub fn output_end(db: &Connection, job: u64, node: &str) -> rusqlite::Result<Option<(i64, i64)>> {
    db.prepare_cached("SELECT out_end, err_end FROM job_nodes WHERE job = ?1 AND node = ?2")?
        .query_row(params![job as i64, node], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// The parts `node` should be running (not waiting on dependencies; with `launches_itself`,
/// only those the executor has handed on), each with whether the node has reported it.
/// `switches`: whether the node's agent runs jobs as their owners' accounts.
pub fn to_run(
    db: &Connection,
    node: &str,
    launches_itself: bool,
    switches: bool,
) -> rusqlite::Result<Vec<(StartJob, bool)>> {
    let mut st = db.prepare_cached(
        "SELECT j.id, j.state, j.command, COALESCE(j.reserved, j.estimate), j.submit_time, j.deadline_at, j.share, n.seen, j.mem_mb, j.procs, \
         j.cpus_per_task, j.name, n.rank, j.workdir, j.env, j.stdout_pattern, j.stderr_pattern, j.time_limit, \
         (SELECT group_concat(node, ',') FROM (SELECT node FROM job_nodes m WHERE m.job = j.id ORDER BY rank)), \
         (SELECT COALESCE(u.unix_user, u.name) FROM users u WHERE u.id = j.user_id), \
         (SELECT u.allow_root FROM users u WHERE u.id = j.user_id), j.array_id, j.array_task, j.slurm_id, j.slurm_env \
         FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 \
         AND j.state IN ('PENDING','RUNNING','SUSPENDED') AND j.waiting = 0 AND (?2 = 0 OR j.slurm_id IS NOT NULL)",
    )?;
    let rows = st.query_map(params![node, launches_itself], |row| {
        let state: String = row.get(1)?;
        let command: String = row.get(2)?;
        let env: Option<String> = row.get(14)?;
        let nodes: Option<String> = row.get(18)?;
        Ok((
            StartJob {
                job: row.get::<_, i64>(0)? as u64,
                command: serde_json::from_str(&command).unwrap_or_default(),
                estimate: row.get(3)?,
                submit_time: row.get(4)?,
                deadline_at: row.get(5)?,
                share: row.get(6)?,
                suspended: state == "SUSPENDED",
                mem_mb: row.get::<_, i64>(8)?.max(0) as u64,
                procs: row.get::<_, i64>(9)?.clamp(1, i64::from(u32::MAX)) as u32,
                cpus_per_task: row.get::<_, i64>(10)?.clamp(1, i64::from(u32::MAX)) as u32,
                name: row.get(11)?,
                rank: row.get::<_, i64>(12)?.clamp(0, i64::from(u32::MAX)) as u32,
                workdir: row.get(13)?,
                env: env.and_then(|e| serde_json::from_str(&e).ok()),
                stdout: row.get(15)?,
                stderr: row.get(16)?,
                time_limit: row.get(17)?,
                nodes: nodes.map(|n| n.split(',').map(str::to_string).collect()).unwrap_or_default(),
                // An agent that cannot switch accounts runs every job as its own.
                unix_user: if switches { row.get(19)? } else { None },
                allow_root: row.get::<_, Option<bool>>(20)?.unwrap_or(false),
                array_id: row.get::<_, Option<i64>>(21)?.map(|a| a as u64),
                array_task: row.get::<_, Option<i64>>(22)?.map(|t| t.clamp(0, i64::from(u32::MAX)) as u32),
                slurm_job_id: row.get::<_, Option<i64>>(23)?.map(|t| t as u64),
                slurm_env: row.get(24)?,
            },
            row.get::<_, bool>(7)?,
        ))
    })?;
    rows.collect()
}

/// A node's report of a part of a job that has ended by the cluster's word (its owner
/// cancelled it, say) and runs until the node's kill: seen, as `running` does.
pub fn running_after_settling(db: &Connection, job: u64, node: &str) -> rusqlite::Result<()> {
    db.exec("UPDATE job_nodes SET seen = 1 WHERE job = ?1 AND node = ?2", params![job as i64, node])?;
    Ok(())
}

/// A node's report that it stopped its part of a job already settled: the part's end, so that
/// the job shows no part running (`JobInfo::parts_running`) and its charge is final.
pub fn ended_after_settling(db: &Connection, job: u64, node: &str, end: f64) -> rusqlite::Result<()> {
    db.exec(
        "UPDATE job_nodes SET seen = 1, end_time = COALESCE(end_time, ?3) WHERE job = ?1 AND node = ?2",
        params![job as i64, node, end],
    )?;
    Ok(())
}

pub fn record_exit(tx: &Connection, node: &str, e: &ExitReport, now: f64) -> rusqlite::Result<()> {
    let failed = e.error.is_some() || e.signal.is_some() || e.exit_code != Some(0);
    let error = e.error.as_ref().map(|err| format!("node {node}: {err}"));
    tx.exec(
        "UPDATE job_nodes SET seen = 1, done = 1, exit_code = ?3, failed = ?4, cpu_seconds = MAX(cpu_seconds, ?5), end_time = ?6, \
         timed_out = ?7, error = ?8 WHERE job = ?1 AND node = ?2",
        params![
            e.job as i64,
            node,
            e.exit_code.or(e.signal.map(|s| 128 + s)),
            failed,
            e.cpu_seconds,
            e.end_time.min(now),
            e.timed_out,
            error
        ],
    )?;
    for c in &e.output {
        append_output(tx, e.job, node, c)?;
    }
    tx.exec(
        "UPDATE jobs SET start_time = COALESCE(start_time, ?2), cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
        params![e.job as i64, e.start_time],
    )?;
    Ok(())
}

/// Appends a chunk of a job's output where the stored copy ends (a chunk sent again is
/// ignored; one that starts past the end marks the copy truncated), keeping the last
/// `OUTPUT_LIMIT` bytes.
pub fn append_output(tx: &Connection, job: u64, node: &str, c: &OutputChunk) -> rusqlite::Result<()> {
    let Ok(bytes) = c.bytes() else {
        tracing::warn!(job, node, "an output chunk that is not base64 was ignored");
        return Ok(());
    };
    let (data, start, end) = match c.stream {
        Stream::Stdout => ("out", "out_start", "out_end"),
        Stream::Stderr => ("err", "err_start", "err_end"),
    };
    // A job whose output the server has removed (its retention or its owner's quota) keeps
    // none that comes after: what went stays gone, and nothing is kept outside the quota.
    let row: Option<(Option<Vec<u8>>, i64)> = tx
        .prepare_cached(&format!(
            "SELECT p.{data}, p.{end} FROM job_nodes p JOIN jobs j ON j.id = p.job \
             WHERE p.job = ?1 AND p.node = ?2 AND j.output_removed IS NULL"
        ))?
        .query_row(params![job as i64, node], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((kept, kept_end)) = row else { return Ok(()) };
    let kept_end = kept_end.max(0) as u64;
    if c.offset < kept_end || bytes.is_empty() {
        return Ok(());
    }
    let skipped = c.offset > kept_end;
    let mut buf = if skipped { Vec::new() } else { kept.unwrap_or_default() };
    buf.extend_from_slice(&bytes);
    let new_end = c.offset + bytes.len() as u64;
    let cut = buf.len().saturating_sub(OUTPUT_LIMIT);
    if cut > 0 {
        buf.drain(..cut);
    }
    let new_start = new_end - buf.len() as u64;
    tx.prepare_cached(&format!(
        "UPDATE job_nodes SET {data} = ?3, {start} = ?4, {end} = ?5, out_truncated = out_truncated OR ?6 WHERE job = ?1 AND node = ?2"
    ))?
    .execute(params![job as i64, node, buf, new_start as i64, new_end as i64, skipped || cut > 0 || new_start > 0])?;
    Ok(())
}
