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

/// The most bytes of a command kept, as stored (JSON), when it is cut: a refusal's at once, an
/// ended job's when its owner passes `command_quota_mb`. (Migration 25 counts the commands
/// stored longer than this in the same number.)
pub const CUT_COMMAND_BYTES: usize = 1024;

/// The bytes `c` takes in a JSON string as serde_json writes it.
fn json_char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The bytes `s` takes as a JSON string, its quotes included.
fn json_len(s: &str) -> usize {
    2 + s.chars().map(json_char_len).sum::<usize>()
}

/// `command` as kept when it is cut: whole when it takes at most `CUT_COMMAND_BYTES` as
/// stored; otherwise its first arguments and the first characters of the one the cut falls in,
/// "..." ending that one and an argument "..." standing for those dropped after it, in at most
/// `CUT_COMMAND_BYTES` as stored. So a command is shortened by the cut exactly when it is
/// stored longer than that (what migration 25 counts).
pub fn cut_command(command: &[String]) -> Vec<String> {
    const MARK: &str = "...";
    let stored = 2 + command.iter().map(|a| json_len(a)).sum::<usize>() + command.len().saturating_sub(1);
    if stored <= CUT_COMMAND_BYTES {
        return command.to_vec();
    }
    // "[]", then each argument kept with its comma; room is always left for the marker
    // argument `,"..."` after the last one kept.
    let mut used = 2;
    let mut kept = Vec::new();
    for (i, a) in command.iter().enumerate() {
        let comma = usize::from(!kept.is_empty());
        let tail = if i + 1 < command.len() { 1 + json_len(MARK) } else { 0 };
        if used + comma + json_len(a) + tail <= CUT_COMMAND_BYTES {
            used += comma + json_len(a);
            kept.push(a.clone());
            continue;
        }
        // The cut falls in this argument: as many of its first characters as leave room for
        // its quotes, its "..." and the marker after it.
        let mut room = CUT_COMMAND_BYTES.saturating_sub(used + comma + json_len(MARK) + tail);
        let mut end = 0;
        for (at, c) in a.char_indices() {
            let n = json_char_len(c);
            if n > room {
                break;
            }
            room -= n;
            end = at + c.len_utf8();
        }
        if end > 0 {
            kept.push(format!("{}{MARK}", &a[..end]));
            if tail > 0 {
                kept.push(MARK.to_string());
            }
        } else {
            // Not one character of it fits: one marker for it and every argument after it.
            kept.push(MARK.to_string());
        }
        break;
    }
    kept
}

/// The bytes of commands kept whole for `user`'s jobs that a cut would shorten (kept up to
/// date by the store: migration 25).
pub fn command_bytes(conn: &Connection, user: i64) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT command_bytes FROM users WHERE id = ?1")?
        .query_row(params![user], |r| r.get(0))
        .optional()
        .map(|b| b.unwrap_or(0))
}

/// Holds the commands `user`'s jobs keep whole to `quota` bytes: while the user is above it,
/// the command of their job that ended first (of those whose command a cut would shorten) is
/// cut to its first KiB (`cut_command`), recorded as cut at `now`. An active job's command
/// stays whole (a node may still have to start it; a user has at most `max_active_jobs`), so
/// a user may be above the quota by what their active jobs keep, never by ended ones. Only
/// this user's jobs are touched. Returns how many commands were cut.
pub fn hold_commands_to_quota(tx: &Connection, user: i64, quota: i64, now: f64) -> rusqlite::Result<u64> {
    // At most this many in one call, so that one submission never holds the store for long;
    // the next goes on.
    const AT_MOST: u64 = 1_000;
    let mut cut = 0;
    while cut < AT_MOST && command_bytes(tx, user)? > quota {
        // The oldest few at a time (the terms of the partial index `jobs_command_kept_by_user`
        // as it states them, so that it is used), each cut only while the user is still above.
        let oldest: Vec<(i64, String)> = tx
            .prepare_cached(
                "SELECT id, command FROM jobs WHERE user_id = ?1 AND command_cut IS NULL \
                 AND end_time IS NOT NULL AND length(CAST(command AS BLOB)) > 1024 \
                 AND state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','TIMEOUT') \
                 ORDER BY end_time, id LIMIT 16",
            )?
            .query_map(params![user], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        if oldest.is_empty() {
            break;
        }
        for (job, command) in oldest {
            if command_bytes(tx, user)? <= quota {
                break;
            }
            let whole: Vec<String> = serde_json::from_str(&command).unwrap_or_default();
            let kept = serde_json::to_string(&cut_command(&whole)).unwrap_or_else(|_| "[]".into());
            tx.prepare_cached("UPDATE jobs SET command = ?2, command_cut = ?3 WHERE id = ?1")?
                .execute(params![job, kept, now])?;
            cut += 1;
        }
    }
    Ok(cut)
}

/// The users whose kept count of commands (`command_bytes`, migration 25) differs from their
/// jobs' commands counted one by one: (user, kept, counted). Empty in a consistent store (the
/// crash tests check it).
pub fn command_bytes_disagreeing(db: &Connection) -> rusqlite::Result<Vec<(i64, i64, i64)>> {
    let mut st = db.prepare(
        "SELECT id, command_bytes, COALESCE((SELECT SUM(length(CAST(j.command AS BLOB))) FROM jobs j \
           WHERE j.user_id = users.id AND j.command_cut IS NULL AND j.state != 'REJECTED' \
           AND length(CAST(j.command AS BLOB)) > 1024), 0) AS counted \
         FROM users WHERE command_bytes IS NOT counted",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

/// The ids of user ?1's oldest ?2 refusals that nothing refers to, in the terms of the partial
/// index `jobs_refused_by_user` as it states them, so that it is used.
const OLDEST_REMOVABLE_REFUSALS: &str =
    "SELECT j.id FROM jobs j WHERE j.user_id = ?1 AND j.state = 'REJECTED' \
     AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job = j.id) \
     AND NOT EXISTS (SELECT 1 FROM project_ledger p WHERE p.job = j.id) \
     AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id) \
     AND NOT EXISTS (SELECT 1 FROM job_deps d WHERE d.job = j.id) \
     AND NOT EXISTS (SELECT 1 FROM job_deps d WHERE d.dep = j.id) \
     ORDER BY j.id LIMIT ?2";

/// How many refused submissions `user` has kept (`users.refusals`, migration 26).
pub fn refusals(db: &Connection, user: i64) -> rusqlite::Result<i64> {
    db.prepare_cached("SELECT refusals FROM users WHERE id = ?1")?.query_row(params![user], |r| r.get(0))
}

/// Removes `user`'s oldest refused submissions while they keep more than `cap`
/// (`max_kept_refusals`), at most 1,000 a call (the next refusal goes on). A refusal holds no
/// credit and never ran: no ledger entry, node part or dependency refers to it, and one that
/// somehow does is kept. Returns how many went. No other user's are touched.
pub fn hold_refusals_to_cap(tx: &Connection, user: i64, cap: i64) -> rusqlite::Result<u64> {
    const AT_MOST: i64 = 1_000;
    let over = (refusals(tx, user)? - cap).min(AT_MOST);
    if over <= 0 {
        return Ok(0);
    }
    let gone = tx
        .prepare_cached(&format!("DELETE FROM jobs WHERE id IN ({OLDEST_REMOVABLE_REFUSALS})"))?
        .execute(params![user, over])?;
    Ok(gone as u64)
}

/// The users whose kept count of refusals (`refusals`, migration 26) differs from their
/// refused jobs counted one by one: (user, kept, counted). Empty in a consistent store.
pub fn refusals_disagreeing(db: &Connection) -> rusqlite::Result<Vec<(i64, i64, i64)>> {
    let mut st = db.prepare(
        "SELECT id, refusals, (SELECT COUNT(*) FROM jobs j WHERE j.user_id = users.id AND j.state = 'REJECTED') AS counted \
         FROM users WHERE refusals IS NOT counted",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_command_keeps_its_first_kib_on_character_boundaries() {
        let short = vec!["sh".to_string(), "-c".into(), "echo hi".into()];
        assert_eq!(cut_command(&short), short);
        // 'é' is two bytes: the cut never falls inside one.
        let long = vec!["sh".to_string(), "-c".into(), "x".into(), "é".repeat(600), "more".into()];
        let cut = cut_command(&long);
        assert_eq!(cut.len(), 5, "{cut:?}");
        assert!(cut[3].ends_with("é...") && cut[3].starts_with("éé"), "{cut:?}");
        assert_eq!(cut[4], "...");
        assert!(serde_json::to_string(&cut).unwrap().len() <= CUT_COMMAND_BYTES);
        // Escapes count as stored: 2000 newlines take 4000 bytes.
        let cut = cut_command(&["\n".repeat(2000)]);
        assert_eq!(serde_json::to_string(&cut).unwrap().len(), CUT_COMMAND_BYTES - 1, "{cut:?}");
    }

    proptest::proptest! {
        /// A cut command is the command whole when it is stored in at most a KiB, and otherwise
        /// its first arguments and characters with the markers, stored in at most a KiB; so the
        /// cut shortens exactly the commands stored longer (what the store counts).
        #[test]
        fn a_cut_command_is_stored_in_at_most_a_kib(
            command in proptest::collection::vec("(\\PC|[\\x00-\\x1f\"\\\\]){0,400}", 0..12)
        ) {
            let stored = serde_json::to_string(&command).unwrap();
            let cut = cut_command(&command);
            let kept = serde_json::to_string(&cut).unwrap();
            proptest::prop_assert!(kept.len() <= CUT_COMMAND_BYTES.max(stored.len()));
            if stored.len() <= CUT_COMMAND_BYTES {
                proptest::prop_assert_eq!(&cut, &command);
            } else {
                proptest::prop_assert!(kept.len() < stored.len());
                // What is kept is the command's beginning.
                for (k, a) in cut.iter().zip(&command) {
                    if k != a {
                        let k = k.strip_suffix("...").unwrap_or("");
                        proptest::prop_assert!(a.starts_with(k));
                    }
                }
            }
        }
    }

    #[test]
    fn the_quota_finds_the_oldest_ended_jobs_by_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::open(&dir.path().join("s.db"), false).unwrap();
        let plan: Vec<String> = db
            .prepare(
                "EXPLAIN QUERY PLAN SELECT id, command FROM jobs WHERE user_id = ?1 AND command_cut IS NULL \
                 AND end_time IS NOT NULL AND length(CAST(command AS BLOB)) > 1024 \
                 AND state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','TIMEOUT') \
                 ORDER BY end_time, id LIMIT 16",
            )
            .unwrap()
            .query_map([1], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(plan.iter().any(|p| p.contains("jobs_command_kept_by_user")), "{plan:?}");
        assert!(!plan.iter().any(|p| p.contains("TEMP B-TREE")), "{plan:?}");
    }

    #[test]
    fn the_oldest_refusals_are_found_by_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::open(&dir.path().join("s.db"), false).unwrap();
        let plan: Vec<String> = db
            .prepare(&format!("EXPLAIN QUERY PLAN {OLDEST_REMOVABLE_REFUSALS}"))
            .unwrap()
            .query_map([1, 1], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(plan.iter().any(|p| p.contains("jobs_refused_by_user")), "{plan:?}");
        assert!(!plan.iter().any(|p| p.contains("TEMP B-TREE")), "{plan:?}");
    }

    #[derive(Debug, Clone)]
    enum Refusing {
        Submit {
            user: usize,
            refused: bool,
        },
        Reject {
            job: usize,
        },
        End {
            job: usize,
        },
        /// A ledger entry or a dependency names the job (none names a refusal the server
        /// makes; the cap must leave one that is named all the same).
        Name {
            job: usize,
            how: usize,
        },
        Cap {
            user: usize,
            cap: u8,
        },
    }

    fn refusing() -> impl proptest::strategy::Strategy<Value = Refusing> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0..2usize, proptest::bool::weighted(0.6)).prop_map(|(user, refused)| Refusing::Submit { user, refused }),
            1 => (0..60usize).prop_map(|job| Refusing::Reject { job }),
            2 => (0..60usize).prop_map(|job| Refusing::End { job }),
            1 => (0..60usize, 0..3usize).prop_map(|(job, how)| Refusing::Name { job, how }),
            2 => (0..2usize, 0..8u8).prop_map(|(user, cap)| Refusing::Cap { user, cap }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// What the store counts as each user's refusals is, after any sequence of submissions
        /// (refused or not), refusals after the fact, ends and caps, their refused jobs; held to
        /// a cap, a user keeps no more refusals than the cap except those something names, the
        /// ones removed are their oldest unnamed ones, and no accepted job, no named refusal and
        /// no other user's job is removed.
        #[test]
        fn refusals_is_what_is_kept_and_the_cap_removes_the_oldest(changes in proptest::collection::vec(refusing(), 1..90)) {
            let dir = tempfile::tempdir().unwrap();
            let db = super::super::open(&dir.path().join("s.db"), false).unwrap();
            db.execute_batch("INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x')").unwrap();
            let rows = |db: &Connection| -> Vec<(i64, i64, bool)> {
                db.prepare("SELECT id, user_id, state = 'REJECTED' FROM jobs ORDER BY id")
                    .unwrap()
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap()
            };
            let mut named: Vec<i64> = Vec::new();
            for c in changes {
                let last: i64 = db.query_row("SELECT COALESCE(MAX(id), 0) FROM jobs", [], |r| r.get(0)).unwrap();
                let exists = |id: i64| db.query_row("SELECT COUNT(*) FROM jobs WHERE id = ?1", [id], |r| r.get::<_, i64>(0)).unwrap() == 1;
                match c {
                    Refusing::Submit { user, refused } => {
                        let state = if refused { JobState::Rejected } else { JobState::Pending };
                        db.execute(
                            "INSERT INTO jobs (user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                             submit_time, deadline_at) VALUES (?1, ?2, '[]', 1, 1, 0, 1, 0, 0, 1)",
                            params![user as i64 + 1, state.as_str()],
                        )
                        .unwrap();
                    }
                    Refusing::Reject { job } => {
                        let id = job as i64 + 1;
                        if exists(id) {
                            db.execute("UPDATE jobs SET state = 'REJECTED' WHERE id = ?1 AND state = 'PENDING'", [id]).unwrap();
                        }
                    }
                    Refusing::End { job } => {
                        db.execute("UPDATE jobs SET state = 'COMPLETED', end_time = 1 WHERE id = ?1 AND state = 'PENDING'", [job as i64 + 1]).unwrap();
                    }
                    Refusing::Name { job, how } => {
                        let id = job as i64 + 1;
                        if exists(id) && last > 0 {
                            let user: i64 = db.query_row("SELECT user_id FROM jobs WHERE id = ?1", [id], |r| r.get(0)).unwrap();
                            match how {
                                0 => {
                                    db.execute(
                                        "INSERT INTO ledger (user_id, job, kind, amount, time, dep_total, hold_total, charge_total, release_total) \
                                         VALUES (?1, ?2, 'hold', 0, 0, 0, 0, 0, 0)",
                                        params![user, id],
                                    )
                                    .unwrap();
                                }
                                1 => {
                                    db.execute("INSERT OR IGNORE INTO job_nodes (job, node) VALUES (?1, 'n')", [id]).unwrap();
                                }
                                _ if id != last => {
                                    db.execute("INSERT OR IGNORE INTO job_deps (job, dep, kind) VALUES (?1, ?2, 'afterok')", params![last, id]).unwrap();
                                    named.push(last);
                                }
                                _ => continue,
                            }
                            named.push(id);
                        }
                    }
                    Refusing::Cap { user, cap } => {
                        let user = user as i64 + 1;
                        let before = rows(&db);
                        let n = hold_refusals_to_cap(&db, user, i64::from(cap)).unwrap();
                        let after = rows(&db);
                        let gone: Vec<&(i64, i64, bool)> = before.iter().filter(|b| !after.contains(b)).collect();
                        proptest::prop_assert_eq!(gone.len() as u64, n);
                        for g in &gone {
                            // Only this user's refusals, none that is named.
                            proptest::prop_assert!(g.1 == user && g.2 && !named.contains(&g.0), "{:?}", g);
                        }
                        let kept: Vec<i64> = after.iter().filter(|a| a.1 == user && a.2 && !named.contains(&a.0)).map(|a| a.0).collect();
                        let left = refusals(&db, user).unwrap();
                        proptest::prop_assert!(left <= i64::from(cap) || kept.is_empty(), "{} kept of a cap of {}: {:?}", left, cap, kept);
                        // The oldest went: every unnamed refusal kept is newer than every one removed.
                        if let Some(newest_gone) = gone.iter().map(|g| g.0).max() {
                            proptest::prop_assert!(kept.iter().all(|&k| k > newest_gone), "{:?} kept, {} removed", kept, newest_gone);
                        }
                    }
                }
                proptest::prop_assert_eq!(refusals_disagreeing(&db).unwrap(), vec![]);
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Change {
        Submit { user: usize, len: usize, wide: bool, refused: bool },
        Reject { job: usize },
        End { job: usize, at: u16, state: usize },
        Quota { user: usize, quota: u32 },
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (0..2usize, 0..6000usize, any::<bool>(), proptest::bool::weighted(0.15))
                .prop_map(|(user, len, wide, refused)| Change::Submit { user, len, wide, refused }),
            1 => (0..60usize).prop_map(|job| Change::Reject { job }),
            3 => (0..60usize, 0..100u16, 0..5usize).prop_map(|(job, at, state)| Change::End { job, at, state }),
            2 => (0..2usize, 0..12_000u32).prop_map(|(user, quota)| Change::Quota { user, quota }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// What the store counts as each user's kept commands is, after any sequence of
        /// submissions (refused or not), refusals after the fact, ends and holds, the bytes of
        /// their commands a cut would shorten; held to a quota, a user keeps no more than the
        /// quota unless only active jobs' commands are left to cut, the commands cut are those
        /// that ended first and each keeps at most its first KiB, and no active job's command
        /// and no other user's is touched.
        #[test]
        fn command_bytes_is_what_is_kept_and_the_quota_cuts_the_oldest(changes in proptest::collection::vec(change(), 1..80)) {
            let dir = tempfile::tempdir().unwrap();
            let db = super::super::open(&dir.path().join("s.db"), false).unwrap();
            db.execute_batch("INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x')").unwrap();
            let commands = |db: &Connection| -> Vec<(i64, i64, String, bool, Option<f64>)> {
                db.prepare("SELECT id, user_id, command, state IN ('PENDING','RUNNING'), end_time FROM jobs ORDER BY id")
                    .unwrap()
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap()
            };
            let mut jobs = 0usize;
            let mut calls = 0u32;
            for c in changes {
                match c {
                    Change::Submit { user, len, wide, refused } => {
                        let arg = if wide { "é".repeat(len / 2) } else { "x".repeat(len) };
                        let whole = vec!["sh".to_string(), "-c".into(), arg];
                        let (state, command) = if refused {
                            (JobState::Rejected, cut_command(&whole))
                        } else {
                            (JobState::Pending, whole)
                        };
                        db.execute(
                            "INSERT INTO jobs (user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                             submit_time, deadline_at) VALUES (?1, ?2, ?3, 1, 1, 0, 1, 0, 0, 1)",
                            params![user as i64 + 1, state.as_str(), serde_json::to_string(&command).unwrap()],
                        )
                        .unwrap();
                        jobs += 1;
                    }
                    Change::Reject { job } => {
                        if job < jobs {
                            let id = job as i64 + 1;
                            let whole: String = db.query_row("SELECT command FROM jobs WHERE id = ?1", [id], |r| r.get(0)).unwrap();
                            let whole: Vec<String> = serde_json::from_str(&whole).unwrap();
                            let pending: bool = db.query_row("SELECT state = 'PENDING' FROM jobs WHERE id = ?1", [id], |r| r.get(0)).unwrap();
                            if pending {
                                reject(&db, id as u64, Some("test"), &serde_json::to_string(&cut_command(&whole)).unwrap()).unwrap();
                            }
                        }
                    }
                    Change::End { job, at, state } => {
                        let state = ["COMPLETED", "FAILED", "CANCELLED", "DEADLINE", "TIMEOUT"][state];
                        db.execute(
                            "UPDATE jobs SET state = ?3, end_time = ?2 WHERE id = ?1 AND state = 'PENDING'",
                            params![job as i64 + 1, f64::from(at), state],
                        )
                        .unwrap();
                    }
                    Change::Quota { user, quota } => {
                        let user = user as i64 + 1;
                        let before = commands(&db);
                        calls += 1;
                        let now = 5000.0 + f64::from(calls);
                        let n = hold_commands_to_quota(&db, user, i64::from(quota), now).unwrap();
                        let after = commands(&db);
                        let mut cut = 0;
                        for (b, a) in before.iter().zip(&after) {
                            if b.2 != a.2 {
                                cut += 1;
                                // Only this user's ended jobs, each to its first KiB.
                                proptest::prop_assert_eq!(a.1, user);
                                proptest::prop_assert!(!a.3 && a.4.is_some());
                                let whole: Vec<String> = serde_json::from_str(&b.2).unwrap();
                                proptest::prop_assert_eq!(&a.2, &serde_json::to_string(&cut_command(&whole)).unwrap());
                            }
                        }
                        proptest::prop_assert_eq!(cut, n);
                        // Left whole and cuttable: none, or the user is within the quota; and
                        // none of those ended before one that this call cut.
                        let left: Vec<(f64, i64)> = db
                            .prepare(
                                "SELECT end_time, id FROM jobs WHERE user_id = ?1 AND command_cut IS NULL AND end_time IS NOT NULL \
                                 AND length(CAST(command AS BLOB)) > 1024 AND state != 'REJECTED'",
                            )
                            .unwrap()
                            .query_map([user], |r| Ok((r.get(0)?, r.get(1)?)))
                            .unwrap()
                            .collect::<Result<_, _>>()
                            .unwrap();
                        proptest::prop_assert!(command_bytes(&db, user).unwrap() <= i64::from(quota) || left.is_empty());
                        let newest_cut: Option<(f64, i64)> = db
                            .query_row(
                                "SELECT end_time, id FROM jobs WHERE user_id = ?1 AND command_cut = ?2 ORDER BY end_time DESC, id DESC LIMIT 1",
                                params![user, now],
                                |r| Ok((r.get(0)?, r.get(1)?)),
                            )
                            .optional()
                            .unwrap();
                        if let Some(newest) = newest_cut {
                            proptest::prop_assert!(left.iter().all(|l| l.0 > newest.0 || (l.0 == newest.0 && l.1 > newest.1)));
                        }
                    }
                }
                proptest::prop_assert_eq!(command_bytes_disagreeing(&db).unwrap(), vec![]);
            }
        }
    }
}
