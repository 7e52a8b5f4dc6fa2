//! The SQLite store: one file in WAL mode. Every change that matters (an accepted job and its
//! hold, a settlement, a node's state) is one transaction, so a SIGKILL at any moment leaves
//! either all of it or none of it.

use libra_api::{JobInfo, JobState};
use libra_core::policy::Suggestion;
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::Path;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    pw_hash TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    cpus REAL NOT NULL,
    mem_mb INTEGER NOT NULL,
    mechanism TEXT NOT NULL,
    price_base REAL NOT NULL,
    up INTEGER NOT NULL,
    last_seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users(id),
    name TEXT,
    state TEXT NOT NULL,
    command TEXT NOT NULL,
    estimate REAL NOT NULL,
    procs INTEGER NOT NULL,
    mem_mb INTEGER NOT NULL,
    deadline REAL NOT NULL,
    budget INTEGER NOT NULL,
    submit_time REAL NOT NULL,
    deadline_at REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    share REAL NOT NULL DEFAULT 0,
    cost INTEGER NOT NULL DEFAULT 0,
    charged INTEGER NOT NULL DEFAULT 0,
    cpu_seconds REAL NOT NULL DEFAULT 0,
    exit_code INTEGER,
    reason TEXT,
    suggestion TEXT,
    stdout TEXT,
    stderr TEXT,
    truncated INTEGER NOT NULL DEFAULT 0,
    -- The work the nodes are committed to (NULL: the estimate); `libra-risk` pads estimates.
    reserved REAL
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user_id);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS job_nodes (
    job INTEGER NOT NULL REFERENCES jobs(id),
    node TEXT NOT NULL,
    seen INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    failed INTEGER NOT NULL DEFAULT 0,
    cpu_seconds REAL NOT NULL DEFAULT 0,
    end_time REAL,
    PRIMARY KEY (job, node)
);
CREATE INDEX IF NOT EXISTS job_nodes_node ON job_nodes(node, done);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users(id),
    job INTEGER,
    kind TEXT NOT NULL CHECK (kind IN ('deposit','hold','charge','release')),
    amount INTEGER NOT NULL,
    time REAL NOT NULL,
    -- The user's running totals after this entry, so a balance is one indexed row, not a sum
    -- over the user's whole history (the entries stay the record; the totals are checked
    -- against them in the tests).
    dep_total INTEGER NOT NULL,
    hold_total INTEGER NOT NULL,
    charge_total INTEGER NOT NULL,
    release_total INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_user ON ledger(user_id, id);
CREATE INDEX IF NOT EXISTS ledger_job ON ledger(job);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- The ledger is append-only: the store refuses to change or remove an entry.
CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
";

pub fn open(path: &Path, sync_full: bool) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    init(&conn, sync_full)?;
    Ok(conn)
}

pub fn open_memory() -> rusqlite::Result<Connection> {
    let conn = Connection::open_in_memory()?;
    init(&conn, false)?;
    Ok(conn)
}

fn init(conn: &Connection, sync_full: bool) -> rusqlite::Result<()> {
    // The busy timeout before anything that may meet another connection's lock.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if sync_full { "FULL" } else { "NORMAL" })?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.execute_batch(SCHEMA)?;
    migrate(conn)
}

/// Brings a store written by an earlier version up to the schema above (columns added since).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_reserved: bool =
        conn.prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'reserved'")?.exists([])?;
    if !has_reserved {
        conn.execute_batch("ALTER TABLE jobs ADD COLUMN reserved REAL")?;
    }
    Ok(())
}

pub const JOB_COLUMNS: &str =
    "j.id, u.name, j.name, j.state, j.command, j.estimate, j.procs, j.deadline, j.budget, \
     j.submit_time, j.deadline_at, j.start_time, j.end_time, j.share, j.cost, j.charged, j.cpu_seconds, \
     j.exit_code, j.reason, j.suggestion, \
     (SELECT group_concat(node, ',') FROM job_nodes n WHERE n.job = j.id)";

pub fn job_from_row(r: &Row) -> rusqlite::Result<JobInfo> {
    let state: String = r.get(3)?;
    let command: String = r.get(4)?;
    let suggestion: Option<String> = r.get(19)?;
    let nodes: Option<String> = r.get(20)?;
    Ok(JobInfo {
        id: r.get::<_, i64>(0)? as u64,
        user: r.get(1)?,
        name: r.get(2)?,
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        command: serde_json::from_str(&command).unwrap_or_default(),
        estimate: r.get(5)?,
        procs: r.get(6)?,
        deadline: r.get(7)?,
        budget: Money(r.get(8)?),
        submit_time: r.get(9)?,
        deadline_at: r.get(10)?,
        start_time: r.get(11)?,
        end_time: r.get(12)?,
        nodes: nodes.map(|n| n.split(',').map(str::to_string).collect()).unwrap_or_default(),
        share: r.get(13)?,
        cost: Money(r.get(14)?),
        charged: Money(r.get(15)?),
        cpu_seconds: r.get(16)?,
        exit_code: r.get(17)?,
        reason: r.get(18)?,
        suggestion: suggestion.and_then(|s| serde_json::from_str::<Suggestion>(&s).ok()),
    })
}

pub fn job(conn: &Connection, id: u64) -> rusqlite::Result<Option<JobInfo>> {
    conn.query_row(
        &format!("SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id WHERE j.id = ?1"),
        params![id as i64],
        job_from_row,
    )
    .optional()
}

/// Jobs, newest first; `user` limits to one user's.
pub fn jobs(conn: &Connection, user: Option<i64>, limit: u32) -> rusqlite::Result<Vec<JobInfo>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE (?1 IS NULL OR j.user_id = ?1) ORDER BY j.id DESC LIMIT ?2"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st.query_map(params![user, limit], job_from_row)?;
    rows.collect()
}

pub fn job_owner(conn: &Connection, id: u64) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT user_id FROM jobs WHERE id = ?1", params![id as i64], |r| r.get(0)).optional()
}

pub fn set_state(conn: &Connection, id: u64, state: JobState) -> rusqlite::Result<()> {
    conn.execute("UPDATE jobs SET state = ?2 WHERE id = ?1", params![id as i64, state.as_str()])?;
    Ok(())
}

pub fn setting(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM settings WHERE key = ?1", params![key], |r| r.get(0)).optional()
}

pub fn set_setting(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO settings(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// A finished job as a learning policy sees it (`Policy::observe`): the user, the estimate,
/// and the work it really took, CPU-seconds per processor.
const OBSERVATION: &str = "SELECT user_id, estimate, cpu_seconds / MAX(procs, 1) FROM jobs";

pub fn observation(conn: &Connection, job: u64) -> rusqlite::Result<Option<(u64, f64, f64)>> {
    conn.prepare_cached(&format!("{OBSERVATION} WHERE id = ?1"))?
        .query_row(params![job as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?)))
        .optional()
}

/// Every finished job, oldest first, so a learning policy starts where the last one stopped
/// (after a restart, or when an administrator changes the policy or its prices).
pub fn observations(conn: &Connection) -> rusqlite::Result<Vec<(u64, f64, f64)>> {
    conn.prepare(&format!("{OBSERVATION} WHERE state IN ('COMPLETED','DEADLINE') ORDER BY end_time, id"))?
        .query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?)))?
        .collect()
}
