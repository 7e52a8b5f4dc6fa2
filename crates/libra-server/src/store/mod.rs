//! The SQLite store: one file in WAL mode. Every change that matters (an accepted job and its
//! hold, a settlement, a node's state) is one transaction, so a SIGKILL at any moment leaves
//! either all of it or none of it.

pub mod audit;
pub mod backup;
pub mod deps;
pub mod endings;
pub mod hosted;
pub mod jobs;
pub mod nodes;
pub mod projects;
pub mod slurm;
pub mod users;

use libra_api::{JobInfo, JobOutput, JobState, OutputPart};
use libra_core::policy::Suggestion;
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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

/// Schema changes after the first released schema (version 1, `SCHEMA` above), in order: the
/// store's `PRAGMA user_version` is how many of versions 2.. have been applied plus one. Never
/// edit a released step; add one.
const MIGRATIONS: &[&str] = &[
    // 2: jobs run where they were submitted, with their environment, output files, CPUs per
    // task and time limit; settlement notes; idempotent submission; output kept per node.
    "ALTER TABLE jobs ADD COLUMN workdir TEXT;
     ALTER TABLE jobs ADD COLUMN env TEXT;
     ALTER TABLE jobs ADD COLUMN stdout_pattern TEXT;
     ALTER TABLE jobs ADD COLUMN stderr_pattern TEXT;
     ALTER TABLE jobs ADD COLUMN cpus_per_task INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE jobs ADD COLUMN time_limit REAL;
     ALTER TABLE jobs ADD COLUMN settlement TEXT;
     ALTER TABLE jobs ADD COLUMN idem_key TEXT;
     CREATE UNIQUE INDEX jobs_idem ON jobs(user_id, idem_key) WHERE idem_key IS NOT NULL;
     ALTER TABLE job_nodes ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN out BLOB;
     ALTER TABLE job_nodes ADD COLUMN out_start INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN out_end INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN err BLOB;
     ALTER TABLE job_nodes ADD COLUMN err_start INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN err_end INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN out_truncated INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE job_nodes ADD COLUMN error TEXT;",
    // 3: jobs run as their owners' Unix accounts (where the node agents can switch accounts).
    "ALTER TABLE users ADD COLUMN unix_user TEXT;
     ALTER TABLE users ADD COLUMN allow_root INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE nodes ADD COLUMN account TEXT NOT NULL DEFAULT '';
     ALTER TABLE nodes ADD COLUMN switches_users INTEGER NOT NULL DEFAULT 0;",
    // 4: each node proves who it is with a credential of its own, minted at its first
    // registration and stored only as a SHA-256 digest (NULL: none yet, or forgotten by an
    // administrator; the join token may then claim the name).
    "ALTER TABLE nodes ADD COLUMN cred_hash TEXT;",
    // 5: a drained node takes no new jobs (and stays drained across restarts).
    "ALTER TABLE nodes ADD COLUMN drained INTEGER NOT NULL DEFAULT 0;",
    // 6: accounts: tokens expire and may belong to a hosted sweep (revoked when it ends); users
    // may be disabled or removed (the row stays: the ledger and jobs refer to it); an
    // append-only audit of administrator actions and refused requests.
    "ALTER TABLE tokens ADD COLUMN expires REAL;
     ALTER TABLE tokens ADD COLUMN sweep INTEGER;
     -- Tokens issued before they expired get the default lifetime (30 days) from their issue.
     UPDATE tokens SET expires = created + 2592000;
     CREATE INDEX tokens_user ON tokens(user_id);
     CREATE INDEX tokens_sweep ON tokens(sweep) WHERE sweep IS NOT NULL;
     ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE users ADD COLUMN removed INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE audit (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         time REAL NOT NULL,
         caller TEXT,
         address TEXT,
         method TEXT NOT NULL,
         path TEXT NOT NULL,
         status INTEGER NOT NULL,
         detail TEXT
     );
     CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
     BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
     CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
     BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
    // 7: job arrays: each task is a job of its own that knows its array (the first task's job
    // id) and its task id.
    "ALTER TABLE jobs ADD COLUMN array_id INTEGER;
     ALTER TABLE jobs ADD COLUMN array_task INTEGER;
     CREATE INDEX jobs_array ON jobs(array_id, array_task) WHERE array_id IS NOT NULL;",
    // 8: job dependencies (`--dependency`): what the job was submitted with (JSON), whether it
    // still waits, the window (seconds) it was admitted for, and one row per job it waits on
    // (arrays expanded to their tasks), looked up both ways.
    "ALTER TABLE jobs ADD COLUMN dependency TEXT;
     ALTER TABLE jobs ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN wait_window REAL;
     CREATE INDEX jobs_waiting ON jobs(waiting) WHERE waiting = 1;
     CREATE TABLE job_deps (
         job INTEGER NOT NULL REFERENCES jobs(id),
         dep INTEGER NOT NULL REFERENCES jobs(id),
         kind TEXT NOT NULL CHECK (kind IN ('afterok','afterany')),
         PRIMARY KEY (job, dep)
     );
     CREATE INDEX job_deps_dep ON job_deps(dep);",
    // 9: accounts (projects) that hold credit, as sites charge them (Gold's model). A user's
    // own credit stays in `ledger` as their personal account; shared accounts keep theirs in
    // `project_ledger`, per bucket: the lasting credit (allocation_id NULL) and each
    // allocation, with the bucket's running totals after each entry as `ledger` has them.
    "CREATE TABLE projects (
         id INTEGER PRIMARY KEY,
         name TEXT NOT NULL UNIQUE,
         created REAL NOT NULL
     );
     CREATE TABLE project_members (
         project_id INTEGER NOT NULL REFERENCES projects(id),
         user_id INTEGER NOT NULL REFERENCES users(id),
         -- The most the user may have charged and held against the account in its
         -- allocation period (NULL: no limit but the account's credit).
         limit_cents INTEGER,
         added REAL NOT NULL,
         PRIMARY KEY (project_id, user_id)
     );
     CREATE INDEX project_members_user ON project_members(user_id);
     CREATE TABLE allocations (
         id INTEGER PRIMARY KEY,
         project_id INTEGER NOT NULL REFERENCES projects(id),
         amount INTEGER NOT NULL,
         start REAL NOT NULL,
         end REAL NOT NULL,
         created REAL NOT NULL
     );
     CREATE INDEX allocations_project ON allocations(project_id, start);
     -- NULL: the user's personal account.
     ALTER TABLE users ADD COLUMN default_project INTEGER REFERENCES projects(id);
     ALTER TABLE jobs ADD COLUMN project_id INTEGER REFERENCES projects(id);
     CREATE INDEX jobs_project ON jobs(project_id, submit_time) WHERE project_id IS NOT NULL;
     CREATE TABLE project_ledger (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         project_id INTEGER NOT NULL REFERENCES projects(id),
         allocation_id INTEGER REFERENCES allocations(id),
         -- The member whose job it is (hold, charge, release) or the administrator who moved
         -- the credit.
         user_id INTEGER REFERENCES users(id),
         job INTEGER,
         kind TEXT NOT NULL CHECK (kind IN ('deposit','transfer','allocation','hold','charge','release')),
         amount INTEGER NOT NULL,
         time REAL NOT NULL,
         credit_total INTEGER NOT NULL,
         hold_total INTEGER NOT NULL,
         charge_total INTEGER NOT NULL,
         release_total INTEGER NOT NULL
     );
     CREATE INDEX project_ledger_bucket ON project_ledger(project_id, allocation_id, id);
     CREATE INDEX project_ledger_job ON project_ledger(job);
     CREATE INDEX project_ledger_user ON project_ledger(project_id, user_id);
     CREATE TRIGGER project_ledger_no_update BEFORE UPDATE ON project_ledger
     BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
     CREATE TRIGGER project_ledger_no_delete BEFORE DELETE ON project_ledger
     BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;",
    // 10: jobs handed to Slurm (`[executor] kind = \"slurm\"`): the Slurm job id, what the
    // executor has carried out there (scancel sent, suspended), and Slurm's completion record
    // (jobcomp: its state, exit status and times, and when it arrived).
    "ALTER TABLE jobs ADD COLUMN slurm_id INTEGER;
     ALTER TABLE jobs ADD COLUMN slurm_cancelled INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN slurm_suspended INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE jobs ADD COLUMN slurm_state TEXT;
     ALTER TABLE jobs ADD COLUMN slurm_exit INTEGER;
     ALTER TABLE jobs ADD COLUMN slurm_start REAL;
     ALTER TABLE jobs ADD COLUMN slurm_end REAL;
     ALTER TABLE jobs ADD COLUMN slurm_reported REAL;
     CREATE INDEX jobs_slurm ON jobs(slurm_id) WHERE slurm_id IS NOT NULL;",
    // 11: each user's count of active jobs (PENDING, RUNNING, SUSPENDED), kept by triggers in
    // the same transaction as every change of a job's state, so that the max_active_jobs check
    // of a submission reads one row instead of counting the user's jobs (with 100,000 active
    // jobs that count was most of a submission's time). Triggers rather than code: no path
    // that changes a state (settlement, cancel, recovery, a rejection after the insert) can
    // forget it.
    "ALTER TABLE users ADD COLUMN active_jobs INTEGER NOT NULL DEFAULT 0;
     UPDATE users SET active_jobs = (SELECT COUNT(*) FROM jobs WHERE jobs.user_id = users.id
         AND jobs.state IN ('PENDING','RUNNING','SUSPENDED'));
     CREATE TRIGGER jobs_active_insert AFTER INSERT ON jobs
     WHEN NEW.state IN ('PENDING','RUNNING','SUSPENDED')
     BEGIN UPDATE users SET active_jobs = active_jobs + 1 WHERE id = NEW.user_id; END;
     CREATE TRIGGER jobs_active_update AFTER UPDATE OF state, user_id ON jobs
     WHEN OLD.state IN ('PENDING','RUNNING','SUSPENDED') OR NEW.state IN ('PENDING','RUNNING','SUSPENDED')
     BEGIN
       UPDATE users SET active_jobs = active_jobs - 1
         WHERE id = OLD.user_id AND OLD.state IN ('PENDING','RUNNING','SUSPENDED');
       UPDATE users SET active_jobs = active_jobs + 1
         WHERE id = NEW.user_id AND NEW.state IN ('PENDING','RUNNING','SUSPENDED');
     END;
     CREATE TRIGGER jobs_active_delete AFTER DELETE ON jobs
     WHEN OLD.state IN ('PENDING','RUNNING','SUSPENDED')
     BEGIN UPDATE users SET active_jobs = active_jobs - 1 WHERE id = OLD.user_id; END;",
    // 12: the scheduler tick's two sweeps read only the jobs they find, not every active job
    // (with 100,000 active jobs the tick read them all twice a second, most of the server's
    // CPU). Each job's count of open parts (`SUM(done = 0)` over its rows in job_nodes; NULL
    // while it has none) is kept by triggers in the same transaction as every change to
    // job_nodes, and two partial indexes hold the jobs the sweeps look for: active jobs whose
    // every part has ended (`endings::ended_unsettled`), and unstarted jobs by deadline
    // (`endings::unstarted_by`). Their conditions are written exactly as the queries write
    // them, which is what lets SQLite use them.
    "ALTER TABLE jobs ADD COLUMN open_parts INTEGER;
     UPDATE jobs SET open_parts = (SELECT SUM(done = 0) FROM job_nodes WHERE job = jobs.id);
     CREATE TRIGGER job_nodes_open_insert AFTER INSERT ON job_nodes
     BEGIN
       UPDATE jobs SET open_parts = (SELECT SUM(done = 0) FROM job_nodes WHERE job = NEW.job) WHERE id = NEW.job;
     END;
     CREATE TRIGGER job_nodes_open_update AFTER UPDATE OF done, job ON job_nodes
     BEGIN
       UPDATE jobs SET open_parts = (SELECT SUM(done = 0) FROM job_nodes WHERE job = OLD.job) WHERE id = OLD.job;
       UPDATE jobs SET open_parts = (SELECT SUM(done = 0) FROM job_nodes WHERE job = NEW.job)
         WHERE id = NEW.job AND NEW.job IS NOT OLD.job;
     END;
     CREATE TRIGGER job_nodes_open_delete AFTER DELETE ON job_nodes
     BEGIN
       UPDATE jobs SET open_parts = (SELECT SUM(done = 0) FROM job_nodes WHERE job = OLD.job) WHERE id = OLD.job;
     END;
     CREATE INDEX jobs_parts_ended ON jobs(state)
       WHERE open_parts = 0 AND state IN ('PENDING','RUNNING','SUSPENDED');
     CREATE INDEX jobs_unstarted ON jobs(state, deadline_at)
       WHERE state IN ('PENDING','SUSPENDED','HELD') AND start_time IS NULL;",
    // The audit log kept for `audit_keep_days` when an operator sets it: the store lets an entry
    // go only when it is older than the cut-off the server has recorded (`audit::prune`), which
    // only moves forward; every other removal, and every change, is refused as before.
    "DROP TRIGGER audit_no_delete;
     CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
     WHEN OLD.time >= COALESCE((SELECT CAST(value AS REAL) FROM settings WHERE key = 'audit_kept_from'), -1e308)
     BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: only entries older than audit_keep_days are removed'); END;",
    // Jobs' output kept for `output_keep_days` after they end when an operator sets it: when
    // the server removed it (NULL: kept), and the ended jobs whose output is still kept, by end.
    "ALTER TABLE jobs ADD COLUMN output_removed REAL;
     CREATE INDEX jobs_output_kept ON jobs(end_time) WHERE output_removed IS NULL AND end_time IS NOT NULL;",
    // Why a node is drained (an administrator's words, or the server's when the node could
    // not start a job through its own fault); NULL while it is not, or when no one said.
    "ALTER TABLE nodes ADD COLUMN drain_reason TEXT;",
    // 16: a quota on the output the server keeps per user (`output_quota_mb`): each user's kept
    // bytes, kept up to date by the store itself at every change of what a part holds (the
    // offsets say how many bytes it keeps), the jobs whose kept output may go first, and why a
    // job's output went.
    "ALTER TABLE users ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;
     UPDATE users SET output_bytes = COALESCE((SELECT SUM((p.out_end - p.out_start) + (p.err_end - p.err_start))
       FROM job_nodes p JOIN jobs j ON j.id = p.job WHERE j.user_id = users.id), 0);
     CREATE TRIGGER job_nodes_output_insert AFTER INSERT ON job_nodes
     BEGIN
       UPDATE users SET output_bytes = output_bytes + (NEW.out_end - NEW.out_start) + (NEW.err_end - NEW.err_start)
         WHERE id = (SELECT user_id FROM jobs WHERE id = NEW.job);
     END;
     CREATE TRIGGER job_nodes_output_update AFTER UPDATE OF job, out_start, out_end, err_start, err_end ON job_nodes
     BEGIN
       UPDATE users SET output_bytes = output_bytes - (OLD.out_end - OLD.out_start) - (OLD.err_end - OLD.err_start)
         WHERE id = (SELECT user_id FROM jobs WHERE id = OLD.job);
       UPDATE users SET output_bytes = output_bytes + (NEW.out_end - NEW.out_start) + (NEW.err_end - NEW.err_start)
         WHERE id = (SELECT user_id FROM jobs WHERE id = NEW.job);
     END;
     CREATE TRIGGER job_nodes_output_delete AFTER DELETE ON job_nodes
     BEGIN
       UPDATE users SET output_bytes = output_bytes - (OLD.out_end - OLD.out_start) - (OLD.err_end - OLD.err_start)
         WHERE id = (SELECT user_id FROM jobs WHERE id = OLD.job);
     END;
     ALTER TABLE jobs ADD COLUMN output_removed_for TEXT;
     CREATE INDEX jobs_output_kept_by_user ON jobs(user_id, end_time)
       WHERE output_removed IS NULL AND end_time IS NOT NULL;",
    // 17: a job's environment (the submitter's, `--export=ALL` by default: it may hold their
    // secrets, and may be 512 KiB) is kept only while the job may still be launched: the store
    // lets it go when the job reaches a final state, as Slurm lets a job's go when it ends.
    "UPDATE jobs SET env = NULL
       WHERE env IS NOT NULL AND state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','REJECTED','TIMEOUT');
     CREATE TRIGGER jobs_env_goes_at_the_end AFTER UPDATE OF state ON jobs
     WHEN NEW.env IS NOT NULL AND NEW.state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','REJECTED','TIMEOUT')
     BEGIN UPDATE jobs SET env = NULL WHERE id = NEW.id; END;
     CREATE TRIGGER jobs_env_not_kept_when_final AFTER INSERT ON jobs
     WHEN NEW.env IS NOT NULL AND NEW.state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','REJECTED','TIMEOUT')
     BEGIN UPDATE jobs SET env = NULL WHERE id = NEW.id; END;",
    // 18: a Slurm batch script's job (`libra sbatch`) gets the `SLURM_*` variables on the node.
    "ALTER TABLE jobs ADD COLUMN slurm_env INTEGER NOT NULL DEFAULT 0;",
    // 19: the CPU a settlement was reckoned on, which bounds what a node's later report of the
    // job (a cancelled job running until its kill) may add to the bill.
    "ALTER TABLE jobs ADD COLUMN settled_cpu REAL;",
    // 20: a part's end is recorded when its node stops a job already settled (`parts_running`
    // counts the parts without one). Parts of jobs settled before that are taken as ended with
    // their jobs; the parts not known to have ended are indexed by node, so that a node's report
    // finds the ones it no longer knows without reading its history.
    "UPDATE job_nodes SET end_time = COALESCE((SELECT j.end_time FROM jobs j WHERE j.id = job_nodes.job), 0)
       WHERE seen = 1 AND lost = 0 AND end_time IS NULL
       AND job IN (SELECT id FROM jobs WHERE state IN ('COMPLETED','FAILED','CANCELLED','DEADLINE','REJECTED','TIMEOUT'));
     CREATE INDEX IF NOT EXISTS job_nodes_unended ON job_nodes(node) WHERE seen = 1 AND lost = 0 AND end_time IS NULL;",
    // 21: a credential minted on joining is unused until the node first presents it; until then
    // the join token may replace it (the agent never got it, or died before saving it). The
    // credentials minted before this are taken as used.
    "ALTER TABLE nodes ADD COLUMN cred_unused INTEGER NOT NULL DEFAULT 0;",
    // 22: a credit made with an idempotency key records it, in the transaction of its ledger
    // entry: a retry after a lost answer is answered, not credited again.
    "CREATE TABLE credit_requests (
         caller INTEGER NOT NULL,
         key TEXT NOT NULL,
         user_id INTEGER NOT NULL,
         amount INTEGER NOT NULL,
         time REAL NOT NULL,
         PRIMARY KEY (caller, key)
     );",
    // 23: a shared account's deposit, transfer or allocation made with an idempotency key
    // records it (with what it did, to refuse the key for anything else), in the transaction of
    // its entries: a retry after a lost answer is answered, not made again.
    "CREATE TABLE account_requests (
         caller INTEGER NOT NULL,
         key TEXT NOT NULL,
         what TEXT NOT NULL,
         time REAL NOT NULL,
         PRIMARY KEY (caller, key)
     );",
    // 24: a credit's key joins the accounts' (one table, one check for every keyed change of
    // credit): each recorded credit is described as a new one is (`users::credit_description`,
    // `a credit of -12.50 to user alice`; the magnitude taken apart without `abs`, which would
    // overflow at the least integer), so that a retry across the upgrade is still answered. A
    // key its caller had also used for an account change keeps that change.
    "INSERT OR IGNORE INTO account_requests(caller, key, what, time)
         SELECT caller, key,
                printf('a credit of %s%d.%02d to user %s',
                       CASE WHEN amount < 0 THEN '-' ELSE '' END,
                       CASE WHEN amount < 0 THEN -(amount / 100) ELSE amount / 100 END,
                       CASE WHEN amount < 0 THEN -(amount % 100) ELSE amount % 100 END,
                       COALESCE((SELECT name FROM users WHERE id = user_id), '#' || user_id)),
                time
         FROM credit_requests;
     DROP TABLE credit_requests;",
    // 25: a quota on the commands the server keeps whole per user (`command_quota_mb`): a job's
    // command (a job script is its text, up to 256 KiB) is kept whole while it may run, and an
    // ended job's may be cut to its first KiB (`jobs::cut_command`) when its owner keeps more
    // than the quota, those that ended first going first. Each user's kept bytes of commands a
    // cut would shorten (past 1024 bytes, not cut, not a refusal's: a refusal keeps its first KiB
    // at once) are kept up to date by the store itself, the jobs whose command may be cut are
    // indexed by owner and end, and when a command was cut is recorded. The 1024 here is
    // `jobs::CUT_COMMAND_BYTES`.
    "ALTER TABLE jobs ADD COLUMN command_cut REAL;
     ALTER TABLE users ADD COLUMN command_bytes INTEGER NOT NULL DEFAULT 0;
     UPDATE users SET command_bytes = COALESCE((SELECT SUM(length(CAST(j.command AS BLOB))) FROM jobs j
       WHERE j.user_id = users.id AND j.state != 'REJECTED' AND length(CAST(j.command AS BLOB)) > 1024), 0);
     CREATE TRIGGER jobs_command_bytes_insert AFTER INSERT ON jobs
     WHEN NEW.command_cut IS NULL AND NEW.state != 'REJECTED' AND length(CAST(NEW.command AS BLOB)) > 1024
     BEGIN
       UPDATE users SET command_bytes = command_bytes + length(CAST(NEW.command AS BLOB)) WHERE id = NEW.user_id;
     END;
     CREATE TRIGGER jobs_command_bytes_update AFTER UPDATE OF command, command_cut, state, user_id ON jobs
     WHEN OLD.command IS NOT NEW.command OR OLD.command_cut IS NOT NEW.command_cut
       OR (OLD.state = 'REJECTED') IS NOT (NEW.state = 'REJECTED') OR OLD.user_id IS NOT NEW.user_id
     BEGIN
       UPDATE users SET command_bytes = command_bytes - length(CAST(OLD.command AS BLOB))
         WHERE id = OLD.user_id AND OLD.command_cut IS NULL AND OLD.state != 'REJECTED'
           AND length(CAST(OLD.command AS BLOB)) > 1024;
       UPDATE users SET command_bytes = command_bytes + length(CAST(NEW.command AS BLOB))
         WHERE id = NEW.user_id AND NEW.command_cut IS NULL AND NEW.state != 'REJECTED'
           AND length(CAST(NEW.command AS BLOB)) > 1024;
     END;
     CREATE TRIGGER jobs_command_bytes_delete AFTER DELETE ON jobs
     WHEN OLD.command_cut IS NULL AND OLD.state != 'REJECTED' AND length(CAST(OLD.command AS BLOB)) > 1024
     BEGIN
       UPDATE users SET command_bytes = command_bytes - length(CAST(OLD.command AS BLOB)) WHERE id = OLD.user_id;
     END;
     CREATE INDEX jobs_command_kept_by_user ON jobs(user_id, end_time)
       WHERE command_cut IS NULL AND end_time IS NOT NULL AND length(CAST(command AS BLOB)) > 1024;",
    // 26: refused submissions kept per user (`max_kept_refusals`): a refusal costs its maker
    // nothing (no credit is held), so without a bound one user could fill the store with them
    // at `submit_rate`. Each user's count of refusals is kept by the store itself, and their
    // refusals are indexed by owner and age, so that the oldest go first.
    "CREATE INDEX jobs_refused_by_user ON jobs(user_id, id) WHERE state = 'REJECTED';
     ALTER TABLE users ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;
     UPDATE users SET refusals = (SELECT COUNT(*) FROM jobs j WHERE j.user_id = users.id AND j.state = 'REJECTED');
     CREATE TRIGGER jobs_refusals_insert AFTER INSERT ON jobs WHEN NEW.state = 'REJECTED'
     BEGIN
       UPDATE users SET refusals = refusals + 1 WHERE id = NEW.user_id;
     END;
     CREATE TRIGGER jobs_refusals_update AFTER UPDATE OF state, user_id ON jobs
     WHEN (OLD.state = 'REJECTED') IS NOT (NEW.state = 'REJECTED') OR OLD.user_id IS NOT NEW.user_id
     BEGIN
       UPDATE users SET refusals = refusals - 1 WHERE id = OLD.user_id AND OLD.state = 'REJECTED';
       UPDATE users SET refusals = refusals + 1 WHERE id = NEW.user_id AND NEW.state = 'REJECTED';
     END;
     CREATE TRIGGER jobs_refusals_delete AFTER DELETE ON jobs WHEN OLD.state = 'REJECTED'
     BEGIN
       UPDATE users SET refusals = refusals - 1 WHERE id = OLD.user_id;
     END;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1 + MIGRATIONS.len() as i64;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("it was written by a newer Libra (schema version {found}; this one knows up to {SCHEMA_VERSION}): run that version, or restore a backup taken before the upgrade")]
    Newer { found: i64 },
    #[error(
        "it cannot be written ({0}): check the file's and its directory's permissions and the free space"
    )]
    ReadOnly(rusqlite::Error),
    #[error("it is damaged ({0}): restore it from a backup")]
    Corrupt(String),
}

/// `execute` and `query_row` through the connection's statement cache: rusqlite's own prepare
/// the SQL anew at every call, and under a stream of submissions parsing SQL took a fifth of
/// the server's CPU. Same results and errors (a statement that returns rows is refused by
/// `exec` as by `execute`).
pub(crate) trait Cached {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn row<T, P: rusqlite::Params, F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn row<T, P: rusqlite::Params, F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// Statements kept prepared per connection. The server uses about a hundred distinct ones;
/// rusqlite's default of 16 had them evict each other, so that cached statements were parsed
/// again nearly every time.
const STATEMENT_CACHE: usize = 256;

pub fn open(path: &Path, sync_full: bool) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    init(&conn, sync_full)?;
    // Refuse at start-up, with a reason, a store that would fail the first request that
    // writes: a read-only file (or directory, for the WAL) or a damaged database.
    let check: String = conn.row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(StoreError::Corrupt(check));
    }
    conn.exec(
        "INSERT INTO settings(key, value) VALUES ('opened', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
            .to_string()],
    )
    .map_err(StoreError::ReadOnly)?;
    Ok(conn)
}

/// The most idle read connections kept (more are opened when more readers come at once, and
/// closed after).
const MAX_IDLE_READERS: usize = 4;

/// Read-only connections to the store, for requests that only read: in WAL mode each sees the
/// last committed state without waiting for the writer's transaction or its fsync, and cannot
/// write (crash safety stays with the one writer connection and its full sync).
pub struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub fn new(path: &Path) -> Readers {
        Readers { path: path.to_path_buf(), idle: Mutex::default() }
    }

    /// Runs `f` with a read connection (an idle one, or a new one).
    pub fn with<T, E: From<rusqlite::Error>>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => open_reader(&self.path)?,
        };
        let r = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        r
    }
}

fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "query_only", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// `f` in one transaction on `db`: committed if it succeeds, rolled back if it fails.
pub fn in_transaction<T, E: From<rusqlite::Error>>(
    db: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, E>,
) -> Result<T, E> {
    let tx = db.unchecked_transaction()?;
    let v = f(&tx)?;
    tx.commit()?;
    Ok(v)
}

/// `f` inside a savepoint of the transaction `db` is in: what it wrote is kept if it
/// succeeds and undone if it fails, the rest of the transaction untouched either way.
pub fn in_savepoint<T, E: From<rusqlite::Error>>(
    db: &Connection,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    db.execute_batch("SAVEPOINT one")?;
    let r = f();
    db.execute_batch(if r.is_ok() { "RELEASE one" } else { "ROLLBACK TO one; RELEASE one" })?;
    r
}

/// Whether `e` is SQLite's "database or disk is full" (the file system had no space for a
/// write, or the database reached its page limit): a condition of the server, which the
/// request that met it did not cause and cannot mend.
pub fn is_disk_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

/// Whether the store answers a query (readiness).
pub fn answers(db: &Connection) -> rusqlite::Result<()> {
    db.row("SELECT COUNT(*) FROM settings", [], |r| r.get::<_, i64>(0)).map(drop)
}

/// Another connection to the store at `path` (the hosted sweeps' threads, which do not hold
/// the state), waiting up to 5 s for the writer's lock.
pub fn open_other(path: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(c)
}

pub fn open_memory() -> Result<Connection, StoreError> {
    let conn = Connection::open_in_memory()?;
    init(&conn, false)?;
    Ok(conn)
}

fn init(conn: &Connection, sync_full: bool) -> Result<(), StoreError> {
    // The busy timeout before anything that may meet another connection's lock.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let corrupt = |e: rusqlite::Error| match e {
        rusqlite::Error::SqliteFailure(f, m)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) =>
        {
            StoreError::Corrupt(m.unwrap_or_else(|| f.to_string()))
        }
        rusqlite::Error::SqliteFailure(f, m)
            if matches!(f.code, rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen) =>
        {
            StoreError::ReadOnly(rusqlite::Error::SqliteFailure(f, m))
        }
        e => StoreError::Sqlite(e),
    };
    conn.pragma_update(None, "journal_mode", "WAL").map_err(corrupt)?;
    conn.pragma_update(None, "synchronous", if sync_full { "FULL" } else { "NORMAL" })?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrate(conn).map_err(|e| match e {
        StoreError::Sqlite(e) => corrupt(e),
        e => e,
    })
}

/// Brings a store written by an earlier version up to `SCHEMA_VERSION`, one transaction per
/// step, and refuses one written by a newer version.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let mut version: i64 = conn.row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Newer { found: version });
    }
    if version == 0 {
        // A new store, or one from before versions were recorded (schema 1, perhaps without
        // the `reserved` column added within it).
        conn.execute_batch(SCHEMA)?;
        let has_reserved: bool =
            conn.prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'reserved'")?.exists([])?;
        if !has_reserved {
            conn.execute_batch("ALTER TABLE jobs ADD COLUMN reserved REAL")?;
        }
        conn.pragma_update(None, "user_version", 1)?;
        version = 1;
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip((version - 1) as usize) {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", i as i64 + 2)?;
        tx.commit()?;
    }
    Ok(())
}

pub const JOB_COLUMNS: &str =
    "j.id, u.name, j.name, j.state, j.command, j.estimate, j.procs, j.deadline, j.budget, \
     j.submit_time, j.deadline_at, j.start_time, j.end_time, j.share, j.cost, j.charged, j.cpu_seconds, \
     j.exit_code, j.reason, j.suggestion, \
     (SELECT group_concat(node, ',') FROM (SELECT node FROM job_nodes n WHERE n.job = j.id ORDER BY rank)), \
     j.cpus_per_task, j.workdir, j.stdout_pattern, j.stderr_pattern, j.time_limit, j.settlement, \
     j.array_id, j.array_task, j.dependency, j.waiting, \
     COALESCE((SELECT p.name FROM projects p WHERE p.id = j.project_id), u.name), j.slurm_id, \
     (SELECT COUNT(*) FROM job_nodes n WHERE n.job = j.id AND n.seen = 1 AND n.lost = 0 AND n.end_time IS NULL), \
     j.command_cut";

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
        cpus_per_task: r.get::<_, i64>(21)?.clamp(1, i64::from(u32::MAX)) as u32,
        workdir: r.get(22)?,
        stdout: r.get(23)?,
        stderr: r.get(24)?,
        time_limit: r.get(25)?,
        settlement: r.get(26)?,
        array_id: r.get::<_, Option<i64>>(27)?.map(|a| a as u64),
        array_task: r.get::<_, Option<i64>>(28)?.map(|t| t.clamp(0, i64::from(u32::MAX)) as u32),
        dependencies: r
            .get::<_, Option<String>>(29)?
            .and_then(|d| serde_json::from_str(&d).ok())
            .unwrap_or_default(),
        waiting: r.get(30)?,
        account: r.get(31)?,
        slurm_job_id: r.get::<_, Option<i64>>(32)?.map(|t| t as u64),
        parts_running: r.get::<_, i64>(33)?.clamp(0, i64::from(u32::MAX)) as u32,
        command_cut: r.get(34)?,
    })
}

pub fn job(conn: &Connection, id: u64) -> rusqlite::Result<Option<JobInfo>> {
    conn.row(
        &format!("SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id WHERE j.id = ?1"),
        params![id as i64],
        job_from_row,
    )
    .optional()
}

/// The tasks of array `array`, in task order (none if there is no such array).
pub fn array_tasks(conn: &Connection, array: u64) -> rusqlite::Result<Vec<JobInfo>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE j.array_id = ?1 ORDER BY j.array_task"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st.query_map(params![array as i64], job_from_row)?;
    rows.collect()
}

/// Jobs, newest first; `user` limits to one user's; `before`: only jobs with a smaller id (the
/// next page after a page that ended at that id).
pub fn jobs(
    conn: &Connection,
    user: Option<i64>,
    limit: u32,
    before: Option<u64>,
) -> rusqlite::Result<Vec<JobInfo>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE (?1 IS NULL OR j.user_id = ?1) AND (?3 IS NULL OR j.id < ?3) ORDER BY j.id DESC LIMIT ?2"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st.query_map(params![user, limit, before.map(|b| b as i64)], job_from_row)?;
    rows.collect()
}

/// The jobs of `ids` (`user`'s only, when given), newest first; ids of no such job are left out.
pub fn jobs_by_ids(conn: &Connection, user: Option<i64>, ids: &[u64]) -> rusqlite::Result<Vec<JobInfo>> {
    let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN users u ON u.id = j.user_id \
         WHERE j.id IN (SELECT value FROM json_each(?1)) AND (?2 IS NULL OR j.user_id = ?2) ORDER BY j.id DESC"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st.query_map(params![list, user], job_from_row)?;
    rows.collect()
}

/// A job's output: each node's part (from the given file offsets when `rank` is given), and
/// the parts joined. Jobs from before output was kept per node have only the joined copy.
pub fn output(
    conn: &Connection,
    id: u64,
    state: JobState,
    rank: Option<u32>,
    stdout_from: u64,
    stderr_from: u64,
) -> rusqlite::Result<JobOutput> {
    let mut st = conn.prepare_cached(
        "SELECT node, rank, out, out_start, out_end, err, err_start, err_end, out_truncated FROM job_nodes \
         WHERE job = ?1 AND (?2 IS NULL OR rank = ?2) ORDER BY rank",
    )?;
    let from = |bytes: Option<Vec<u8>>, start: i64, want: u64| -> (String, u64) {
        let bytes = bytes.unwrap_or_default();
        let start = start.max(0) as u64;
        let skip = want.saturating_sub(start).min(bytes.len() as u64) as usize;
        (
            String::from_utf8_lossy(&bytes[skip..]).into_owned(),
            start.max(want.min(start + bytes.len() as u64)),
        )
    };
    let parts: Vec<OutputPart> = st
        .query_map(params![id as i64, rank], |r| {
            let (stdout, stdout_start) = from(r.get(2)?, r.get(3)?, stdout_from);
            let (stderr, stderr_start) = from(r.get(5)?, r.get(6)?, stderr_from);
            Ok(OutputPart {
                node: r.get(0)?,
                rank: r.get::<_, i64>(1)?.max(0) as u32,
                stdout,
                stderr,
                stdout_start,
                stdout_end: r.get::<_, i64>(4)?.max(0) as u64,
                stderr_start,
                stderr_end: r.get::<_, i64>(7)?.max(0) as u64,
                truncated: r.get(8)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let join = |f: fn(&OutputPart) -> &str| parts.iter().map(f).collect::<Vec<_>>().concat();
    let (mut stdout, mut stderr) = (join(|p| &p.stdout), join(|p| &p.stderr));
    let mut truncated = parts.iter().any(|p| p.truncated);
    if stdout.is_empty() && stderr.is_empty() && rank.is_none() {
        let (o, e, t): (Option<String>, Option<String>, bool) =
            conn.row("SELECT stdout, stderr, truncated FROM jobs WHERE id = ?1", params![id as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        (stdout, stderr, truncated) = (o.unwrap_or_default(), e.unwrap_or_default(), t);
    }
    let (removed, removed_for): (Option<f64>, Option<String>) = conn.row(
        "SELECT output_removed, output_removed_for FROM jobs WHERE id = ?1",
        params![id as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let removed_for = removed.and(Some(removed_for.unwrap_or_else(|| OUTPUT_KEEP_DAYS.to_string())));
    Ok(JobOutput { id, state, stdout, stderr, truncated, parts, removed, removed_for })
}

/// Removes the output kept of at most `limit` jobs that ended before `before` (the cut-off of
/// `output_keep_days`), oldest first, recording when; their records and the ledger stay.
/// Returns how many jobs' output went; the caller asks again while that is `limit`.
pub fn remove_old_output(conn: &Connection, before: f64, now: f64, limit: u32) -> rusqlite::Result<u64> {
    let tx = conn.unchecked_transaction()?;
    let going: Vec<i64> = tx
        .prepare_cached(
            "SELECT id FROM jobs WHERE output_removed IS NULL AND end_time IS NOT NULL \
             AND end_time < ?1 ORDER BY end_time, id LIMIT ?2",
        )?
        .query_map(params![before, limit], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for &job in &going {
        remove_output(&tx, job, now, OUTPUT_KEEP_DAYS)?;
    }
    tx.commit()?;
    Ok(going.len() as u64)
}

/// Why a job's kept output went (`JobOutput::removed_for`).
pub const OUTPUT_KEEP_DAYS: &str = "output_keep_days";
pub const OUTPUT_QUOTA: &str = "output_quota_mb";

/// Removes a job's kept output, recording when and why; its record and the ledger stay. The
/// offsets stay where the output ended, so that nothing reads as still to come.
fn remove_output(tx: &Connection, job: i64, now: f64, why: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE job_nodes SET out = NULL, err = NULL, out_start = out_end, err_start = err_end WHERE job = ?1",
    )?
    .execute(params![job])?;
    tx.prepare_cached(
        "UPDATE jobs SET stdout = NULL, stderr = NULL, output_removed = ?2, output_removed_for = ?3 WHERE id = ?1",
    )?
    .execute(params![job, now, why])?;
    Ok(())
}

/// The bytes of output the server keeps for `user`'s jobs (kept up to date by the store).
pub fn output_bytes(conn: &Connection, user: i64) -> rusqlite::Result<i64> {
    conn.row("SELECT output_bytes FROM users WHERE id = ?1", params![user], |r| r.get(0))
        .optional()
        .map(|b| b.unwrap_or(0))
}

/// Holds `user`'s kept output to `quota` bytes: while it is above, the output of the user's job
/// that ended first (of those whose output is still kept) goes, recorded as removed for the
/// quota. The output of jobs still running stays (each part keeps at most the last
/// `OUTPUT_LIMIT` bytes of each stream, and a user runs at most `max_active_jobs`), so a user
/// may be above the quota by what their running jobs keep, never by ended ones. Returns how
/// many jobs' output went.
pub fn hold_output_to_quota(tx: &Connection, user: i64, quota: i64, now: f64) -> rusqlite::Result<u64> {
    // At most this many jobs in one call, so that one report never holds the store for long
    // (a long history of ended jobs whose output was small); the next call goes on.
    const AT_MOST: u64 = 1_000;
    let mut removed = 0;
    while removed < AT_MOST && output_bytes(tx, user)? > quota {
        // The oldest few at a time, each removed only while the user is still above.
        let oldest: Vec<i64> = tx
            .prepare_cached(
                "SELECT id FROM jobs WHERE user_id = ?1 AND output_removed IS NULL \
                 AND end_time IS NOT NULL ORDER BY end_time, id LIMIT 16",
            )?
            .query_map(params![user], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if oldest.is_empty() {
            break;
        }
        for job in oldest {
            if output_bytes(tx, user)? <= quota {
                break;
            }
            remove_output(tx, job, now, OUTPUT_QUOTA)?;
            removed += 1;
        }
    }
    Ok(removed)
}

pub fn job_owner(conn: &Connection, id: u64) -> rusqlite::Result<Option<i64>> {
    conn.row("SELECT user_id FROM jobs WHERE id = ?1", params![id as i64], |r| r.get(0)).optional()
}

pub fn set_state(conn: &Connection, id: u64, state: JobState) -> rusqlite::Result<()> {
    conn.exec("UPDATE jobs SET state = ?2 WHERE id = ?1", params![id as i64, state.as_str()])?;
    Ok(())
}

pub fn setting(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.row("SELECT value FROM settings WHERE key = ?1", params![key], |r| r.get(0)).optional()
}

pub fn set_setting(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.exec(
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

#[cfg(test)]
mod tests {
    use super::*;
    use libra_api::{OutputChunk, Stream};

    #[test]
    fn a_damaged_newer_or_unwritable_store_is_refused_at_start_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        std::fs::write(
            &garbage,
            "this is not a database, only text that looks nothing like one\n".repeat(200),
        )
        .unwrap();
        let e = open(&garbage, false).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e}");
        assert!(e.to_string().contains("restore it from a backup"), "{e}");

        let newer = dir.path().join("newer.db");
        drop(open(&newer, false).unwrap());
        Connection::open(&newer).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let e = open(&newer, false).unwrap_err();
        assert!(matches!(e, StoreError::Newer { .. }), "{e}");

        // Unwritable even for root: an immutable file (where the file system has the flag).
        let fixed = dir.path().join("fixed.db");
        drop(open(&fixed, false).unwrap());
        let immutable = std::process::Command::new("chattr").arg("+i").arg(&fixed).status();
        if immutable.is_ok_and(|s| s.success()) {
            let e = open(&fixed, false);
            let _ = std::process::Command::new("chattr").arg("-i").arg(&fixed).status();
            let e = e.unwrap_err();
            assert!(matches!(e, StoreError::ReadOnly(_)), "{e}");
            assert!(e.to_string().contains("cannot be written"), "{e}");
        } else {
            eprintln!("chattr +i is not available here: the unwritable store is not tested");
        }
    }

    #[test]
    fn a_store_from_before_versions_were_recorded_is_brought_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.db");
        {
            // Schema 1 as the first releases wrote it: no `reserved`, no user_version.
            let c = Connection::open(&p).unwrap();
            c.execute_batch(&SCHEMA.replace("    reserved REAL\n", "    unused_tail INTEGER\n")).unwrap();
            c.execute("INSERT INTO users(name, pw_hash) VALUES ('u', 'x')", []).unwrap();
        }
        let c = open(&p, false).unwrap();
        let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        for col in ["reserved", "workdir", "settlement", "idem_key"] {
            let has: bool = c
                .prepare(&format!("SELECT 1 FROM pragma_table_info('jobs') WHERE name = '{col}'"))
                .unwrap()
                .exists([])
                .unwrap();
            assert!(has, "{col}");
        }
        // Opening again applies nothing twice.
        drop(c);
        open(&p, false).unwrap();
    }

    /// Step 20: a store written before parts' ends were recorded after a settlement shows its
    /// settled jobs with no part running (they would count one for ever), and its running
    /// jobs' parts as they were.
    #[test]
    fn settled_jobs_of_a_store_before_step_20_have_no_part_running() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        {
            let db = open(&p, false).unwrap();
            db.execute("INSERT INTO users (id, name, pw_hash) VALUES (1, 'u', 'x')", []).unwrap();
            for (id, state, end) in [(1, "CANCELLED", Some(50.0)), (2, "RUNNING", None)] {
                db.execute(
                    "INSERT INTO jobs (id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                     submit_time, deadline_at, end_time) VALUES (?1, 1, ?2, '[]', 1, 1, 0, 100, 0, 0, 100, ?3)",
                    params![id, state, end],
                )
                .unwrap();
                db.execute(
                    "INSERT INTO job_nodes (job, node, seen, done) VALUES (?1, 'n', 1, ?2)",
                    params![id, id == 1],
                )
                .unwrap();
            }
            db.execute_batch(
                &format!("DROP INDEX job_nodes_unended; ALTER TABLE nodes DROP COLUMN cred_unused; DROP TABLE IF EXISTS credit_requests; \
                 DROP TABLE account_requests; {UNDO_STEP_26} {UNDO_STEP_25} PRAGMA user_version = 19;"),
            )
            .unwrap();
        }
        let db = open(&p, false).unwrap();
        let parts = |id: u64| job(&db, id).unwrap().unwrap().parts_running;
        assert_eq!((parts(1), parts(2)), (0, 1));
        let ended: Option<f64> =
            db.query_row("SELECT end_time FROM job_nodes WHERE job = 1", [], |r| r.get(0)).unwrap();
        assert_eq!(ended, Some(50.0));
        let indexed: bool = db
            .prepare("SELECT 1 FROM sqlite_master WHERE name = 'job_nodes_unended'")
            .unwrap()
            .exists([])
            .unwrap();
        assert!(indexed);
    }

    /// Step 25 undone, for a test that makes a store of an earlier version.
    const UNDO_STEP_26: &str =
        "DROP TRIGGER jobs_refusals_insert; DROP TRIGGER jobs_refusals_update; DROP TRIGGER jobs_refusals_delete; \
         DROP INDEX jobs_refused_by_user; ALTER TABLE users DROP COLUMN refusals;";

    /// Step 26: a store written before refusals were counted counts each user's, and the cap
    /// then removes the oldest.
    #[test]
    fn refusals_of_a_store_before_step_26_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        {
            let db = open(&p, false).unwrap();
            db.execute_batch(&format!("{UNDO_STEP_26} PRAGMA user_version = 25;")).unwrap();
            db.execute_batch(
                "INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'x')",
            )
            .unwrap();
            for (user, state) in
                [(1, "REJECTED"), (2, "REJECTED"), (1, "COMPLETED"), (1, "REJECTED"), (1, "REJECTED")]
            {
                db.execute(
                    "INSERT INTO jobs (user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                     submit_time, deadline_at) VALUES (?1, ?2, '[]', 1, 1, 0, 100, 0, 0, 100)",
                    params![user, state],
                )
                .unwrap();
            }
        }
        let db = open(&p, false).unwrap();
        let kept = |u: i64| jobs::refusals(&db, u).unwrap();
        assert_eq!((kept(1), kept(2), kept(3)), (3, 1, 0));
        assert_eq!(jobs::refusals_disagreeing(&db).unwrap(), vec![]);
        assert_eq!(jobs::hold_refusals_to_cap(&db, 1, 1).unwrap(), 2);
        let ids: Vec<i64> = db
            .prepare("SELECT id FROM jobs ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            ids,
            vec![2, 3, 5],
            "user 1's two oldest refusals went; their accepted job and user 2's stayed"
        );
        assert_eq!(jobs::refusals_disagreeing(&db).unwrap(), vec![]);
    }

    const UNDO_STEP_25: &str =
        "DROP TRIGGER jobs_command_bytes_insert; DROP TRIGGER jobs_command_bytes_update; \
         DROP TRIGGER jobs_command_bytes_delete; DROP INDEX jobs_command_kept_by_user; \
         ALTER TABLE jobs DROP COLUMN command_cut; ALTER TABLE users DROP COLUMN command_bytes;";

    /// Step 25: a store written before commands were counted counts each user's commands
    /// longer than a KiB as stored (a refusal's not), and the quota then cuts them.
    #[test]
    fn commands_of_a_store_before_step_25_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        let long = |n: usize| serde_json::to_string(&["sh".to_string(), "-c".into(), "x".repeat(n)]).unwrap();
        {
            let db = open(&p, false).unwrap();
            db.execute_batch(&format!("{UNDO_STEP_26} {UNDO_STEP_25} PRAGMA user_version = 24;")).unwrap();
            db.execute_batch(
                "INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'x')",
            )
            .unwrap();
            for (user, state, command, end) in [
                (1, "COMPLETED", long(5000), Some(10.0)),
                (1, "RUNNING", long(3000), None),
                (1, "COMPLETED", long(100), Some(5.0)),
                (2, "REJECTED", long(1500), None),
                (2, "FAILED", long(2000), Some(1.0)),
            ] {
                db.execute(
                    "INSERT INTO jobs (user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                     submit_time, deadline_at, end_time) VALUES (?1, ?2, ?3, 1, 1, 0, 100, 0, 0, 100, ?4)",
                    params![user, state, command, end],
                )
                .unwrap();
            }
        }
        let db = open(&p, false).unwrap();
        let bytes = |u: i64| jobs::command_bytes(&db, u).unwrap();
        assert_eq!(
            (bytes(1), bytes(2), bytes(3)),
            ((long(5000).len() + long(3000).len()) as i64, long(2000).len() as i64, 0)
        );
        assert_eq!(jobs::command_bytes_disagreeing(&db).unwrap(), vec![]);
        // Held to 4 KiB, user 1's ended job is cut; the running one stays whole.
        assert_eq!(jobs::hold_commands_to_quota(&db, 1, 4096, 20.0).unwrap(), 1);
        assert_eq!(bytes(1), long(3000).len() as i64);
        let cut: Option<f64> =
            db.query_row("SELECT command_cut FROM jobs WHERE id = 1", [], |r| r.get(0)).unwrap();
        assert_eq!(cut, Some(20.0));
        assert_eq!(jobs::command_bytes_disagreeing(&db).unwrap(), vec![]);
    }

    /// Old jobs' output goes a batch at a time, oldest end first, and only the output: the
    /// job, its parts' offsets and every newer or unfinished job's output stay.
    /// Step 24: the credits recorded with an idempotency key before it (their own table, step
    /// 22) join the accounts' keys, each described as the credit route describes a new one
    /// (`users::credit_description`), so that a retry across the upgrade is answered; negative
    /// amounts, the least one, and a user gone since are described; a key its caller had used
    /// for an account change too keeps that change.
    #[test]
    fn keyed_credits_of_a_store_before_step_24_are_found_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.db");
        let credits = [
            (1i64, "k1", 1, 1250i64),
            (1, "k2", 1, -5),
            (2, "k3", 2, i64::MIN),
            (1, "k4", 9, 300),
            (1, "both", 1, 700),
        ];
        {
            let db = open(&p, false).unwrap();
            db.execute_batch(
                &format!("INSERT INTO users (id, name, pw_hash) VALUES (1, 'alice', 'x'), (2, 'bob', 'x');
                 DROP TABLE account_requests;
                 CREATE TABLE credit_requests (caller INTEGER NOT NULL, key TEXT NOT NULL, user_id INTEGER NOT NULL,
                     amount INTEGER NOT NULL, time REAL NOT NULL, PRIMARY KEY (caller, key));
                 CREATE TABLE account_requests (caller INTEGER NOT NULL, key TEXT NOT NULL, what TEXT NOT NULL,
                     time REAL NOT NULL, PRIMARY KEY (caller, key));
                 INSERT INTO account_requests VALUES (1, 'both', 'a deposit of 1.00 to account physics', 5);
                 {UNDO_STEP_26} {UNDO_STEP_25} PRAGMA user_version = 23;"),
            )
            .unwrap();
            for (caller, key, user, amount) in credits {
                db.execute(
                    "INSERT INTO credit_requests VALUES (?1, ?2, ?3, ?4, 7)",
                    params![caller, key, user, amount],
                )
                .unwrap();
            }
        }
        let db = open(&p, false).unwrap();
        let gone: bool = db
            .prepare("SELECT 1 FROM sqlite_master WHERE name = 'credit_requests'")
            .unwrap()
            .exists([])
            .unwrap();
        assert!(!gone, "the credits' own table is gone");
        let name = |user: i64| match user {
            1 => "alice".to_string(),
            2 => "bob".to_string(),
            other => format!("#{other}"),
        };
        for (caller, key, user, amount) in credits {
            let want = match key {
                "both" => "a deposit of 1.00 to account physics".to_string(),
                _ => users::credit_description(Money::from_cents(amount), &name(user)),
            };
            assert_eq!(projects::request(&db, caller, key).unwrap(), Some(want), "{key}");
        }
        assert_eq!(
            projects::request(&db, 1, "k2").unwrap().as_deref(),
            Some("a credit of -0.05 to user alice"),
            "as `Money` prints it"
        );
    }

    #[test]
    fn old_output_is_removed_in_batches_oldest_first_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("s.db"), false).unwrap();
        db.execute("INSERT INTO users (id, name, pw_hash) VALUES (1, 'u', 'x')", []).unwrap();
        // Jobs 1-4 ended 40, 35, 31 and 1 days before `now`; job 5 runs.
        let now = 100.0 * 86_400.0;
        for (id, ended) in [(1, Some(40.0)), (2, Some(35.0)), (3, Some(31.0)), (4, Some(1.0)), (5, None)] {
            db.execute(
                "INSERT INTO jobs (id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                 submit_time, deadline_at, end_time, stdout) VALUES (?1, 1, 'COMPLETED', '[]', 1, 1, 0, 1, 0, 0, 1, ?2, 'joined')",
                params![id, ended.map(|d: f64| now - d * 86_400.0)],
            )
            .unwrap();
            db.execute(
                "INSERT INTO job_nodes (job, node, out, out_start, out_end, err, err_start, err_end) \
                 VALUES (?1, 'n', X'6869', 10, 12, X'21', 0, 1)",
                [id],
            )
            .unwrap();
        }
        let kept = |id: i64| -> (Option<Vec<u8>>, i64, i64, Option<f64>) {
            db.query_row(
                "SELECT out, out_start, out_end, (SELECT output_removed FROM jobs WHERE id = ?1) FROM job_nodes WHERE job = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap()
        };
        let cut = now - 30.0 * 86_400.0;
        assert_eq!(remove_old_output(&db, cut, now, 2).unwrap(), 2);
        assert_eq!(kept(1), (None, 12, 12, Some(now)));
        assert_eq!(kept(2).0, None);
        assert_eq!(kept(3), (Some(b"hi".to_vec()), 10, 12, None), "a batch went past its limit");
        assert_eq!(remove_old_output(&db, cut, now, 2).unwrap(), 1);
        assert_eq!(remove_old_output(&db, cut, now, 2).unwrap(), 0);
        assert_eq!(kept(3).0, None);
        for id in [4, 5] {
            assert_eq!(kept(id), (Some(b"hi".to_vec()), 10, 12, None));
        }
        let joined: Vec<Option<String>> = db
            .prepare("SELECT stdout FROM jobs ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(joined, vec![None, None, None, Some("joined".into()), Some("joined".into())]);
        let out = output(&db, 1, JobState::Completed, None, 0, 0).unwrap();
        assert_eq!((out.stdout.as_str(), out.removed), ("", Some(now)));
        let jobs: i64 = db.query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0)).unwrap();
        assert_eq!(jobs, 5);
    }

    /// A job's environment is kept while the job may still be launched and goes when it
    /// reaches a final state, also in a store written before the store did this.
    #[test]
    fn a_jobs_environment_goes_when_the_job_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let db = open(&path, false).unwrap();
        db.execute("INSERT INTO users (id, name, pw_hash) VALUES (1, 'u', 'x')", []).unwrap();
        let insert = |db: &Connection, id: i64, state: &str| {
            db.execute(
                "INSERT INTO jobs (id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                 submit_time, deadline_at, env) VALUES (?1, 1, ?2, '[]', 1, 1, 0, 1, 0, 0, 1, '{\"TOKEN\":\"s3cret\"}')",
                params![id, state],
            )
            .unwrap();
        };
        let env = |db: &Connection, id: i64| -> Option<String> {
            db.query_row("SELECT env FROM jobs WHERE id = ?1", [id], |r| r.get(0)).unwrap()
        };
        for (id, state) in [(1, "PENDING"), (2, "RUNNING"), (3, "HELD"), (4, "SUSPENDED"), (5, "REJECTED")] {
            insert(&db, id, state);
        }
        assert!(
            env(&db, 1).is_some() && env(&db, 2).is_some() && env(&db, 3).is_some() && env(&db, 4).is_some()
        );
        assert_eq!(env(&db, 5), None, "stored refused");
        db.execute("UPDATE jobs SET state = 'RUNNING' WHERE id = 1", []).unwrap();
        assert!(env(&db, 1).is_some(), "launched, still running");
        for (id, state) in [(1, "COMPLETED"), (2, "CANCELLED"), (4, "TIMEOUT")] {
            db.execute("UPDATE jobs SET state = ?2 WHERE id = ?1", params![id, state]).unwrap();
            assert_eq!(env(&db, id), None, "{state}");
        }
        assert!(env(&db, 3).is_some(), "a held job may be released and run");
        // A store from before step 17 (version 16) holding an ended job's environment loses it
        // on upgrade. Later steps are undone too, as they will be applied again.
        db.execute_batch(
            &format!("DROP TRIGGER jobs_env_goes_at_the_end; DROP TRIGGER jobs_env_not_kept_when_final; \
             ALTER TABLE jobs DROP COLUMN slurm_env; ALTER TABLE jobs DROP COLUMN settled_cpu; DROP INDEX job_nodes_unended; \
             ALTER TABLE nodes DROP COLUMN cred_unused; DROP TABLE IF EXISTS credit_requests; DROP TABLE account_requests; \
             {UNDO_STEP_26} {UNDO_STEP_25} PRAGMA user_version = 16;"),
        )
        .unwrap();
        insert(&db, 6, "FAILED");
        assert!(env(&db, 6).is_some());
        drop(db);
        let db = open(&path, false).unwrap();
        assert_eq!(env(&db, 6), None);
        assert!(env(&db, 3).is_some());
    }

    /// One change to what the store keeps of jobs' output, for `output_bytes_is_what_is_kept`.
    #[derive(Debug, Clone)]
    enum Change {
        /// A chunk of `len` bytes for (job, node), at the stored end plus `gap` (0: in order;
        /// more: some was lost, the copy starts again), or sent again (`resend`).
        Append { job: usize, node: usize, err: bool, len: usize, gap: u64, resend: bool },
        /// The job ends (its output may now go first).
        End { job: usize, at: u16 },
        /// Its parts given up (a held job).
        Hold { job: usize },
        /// `output_keep_days` removes what ended before `at`.
        Age { at: u16 },
        /// The user is held to `quota` bytes.
        Quota { user: usize, quota: u32 },
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..6usize, 0..2usize, any::<bool>(), 0..1_500_000usize, prop_oneof![3 => Just(0u64), 1 => 1..5000u64], any::<bool>())
                .prop_map(|(job, node, err, len, gap, resend)| Change::Append { job, node, err, len, gap, resend }),
            1 => (0..6usize, 0..1000u16).prop_map(|(job, at)| Change::End { job, at }),
            1 => (0..6usize).prop_map(|job| Change::Hold { job }),
            1 => (0..1000u16).prop_map(|at| Change::Age { at }),
            1 => (0..2usize, 0..3_000_000u32).prop_map(|(user, quota)| Change::Quota { user, quota }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// What the store counts as each user's kept output is, after any sequence of appends,
        /// ends, holds and removals, the bytes it keeps; held to a quota, a user keeps no more
        /// than the quota unless only running jobs' output is left, and no running job's output
        /// and no other user's goes.
        #[test]
        fn output_bytes_is_what_is_kept(changes in proptest::collection::vec(change(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let db = open(&dir.path().join("s.db"), false).unwrap();
            db.execute_batch("INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x')").unwrap();
            // Jobs 1-6, alternately the two users', each on nodes n0 and n1.
            for job in 1..=6i64 {
                db.execute(
                    "INSERT INTO jobs (id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, \
                     submit_time, deadline_at) VALUES (?1, ?2, 'RUNNING', '[]', 1, 2, 0, 1, 0, 0, 1)",
                    params![job, 1 + (job - 1) % 2],
                )
                .unwrap();
                for node in ["n0", "n1"] {
                    db.execute("INSERT INTO job_nodes (job, node) VALUES (?1, ?2)", params![job, node]).unwrap();
                }
            }
            let kept = |db: &Connection, user: i64| -> i64 {
                db.query_row(
                    "SELECT COALESCE(SUM(LENGTH(COALESCE(p.out, X'')) + LENGTH(COALESCE(p.err, X''))), 0) \
                     FROM job_nodes p JOIN jobs j ON j.id = p.job WHERE j.user_id = ?1",
                    [user],
                    |r| r.get(0),
                )
                .unwrap()
            };
            let running_bytes = |db: &Connection| -> Vec<(i64, i64)> {
                db.prepare(
                    "SELECT p.job, LENGTH(COALESCE(p.out, X'')) + LENGTH(COALESCE(p.err, X'')) FROM job_nodes p \
                     JOIN jobs j ON j.id = p.job WHERE j.end_time IS NULL ORDER BY p.job, p.node",
                )
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
            };
            for c in changes {
                match c {
                    Change::Append { job, node, err, len, gap, resend } => {
                        let (job, node) = (job as u64 + 1, format!("n{node}"));
                        let stream = if err { Stream::Stderr } else { Stream::Stdout };
                        // A held job has no parts: its chunk is dropped, as from a node.
                        let (out_end, err_end) = crate::store::nodes::output_end(&db, job, &node).unwrap().unwrap_or((0, 0));
                        let end = if err { err_end } else { out_end } as u64;
                        let offset = if resend { end.saturating_sub(len as u64 / 2) } else { end + gap };
                        let chunk = OutputChunk::new(stream, offset, &vec![b'x'; len]);
                        crate::store::nodes::append_output(&db, job, &node, &chunk).unwrap();
                    }
                    Change::End { job, at } => {
                        db.execute(
                            "UPDATE jobs SET state = 'COMPLETED', end_time = ?2 WHERE id = ?1 AND end_time IS NULL",
                            params![job as i64 + 1, f64::from(at)],
                        )
                        .unwrap();
                    }
                    Change::Hold { job } => crate::store::jobs::hold(&db, job as u64 + 1, "test").unwrap(),
                    Change::Age { at } => {
                        remove_old_output(&db, f64::from(at), 5000.0, 2).unwrap();
                    }
                    Change::Quota { user, quota } => {
                        let user = user as i64 + 1;
                        let other = kept(&db, 3 - user);
                        let running = running_bytes(&db);
                        hold_output_to_quota(&db, user, i64::from(quota), 5000.0).unwrap();
                        let ended_kept: i64 = db
                            .query_row(
                                "SELECT COUNT(*) FROM jobs j WHERE j.user_id = ?1 AND j.end_time IS NOT NULL AND EXISTS \
                                 (SELECT 1 FROM job_nodes p WHERE p.job = j.id AND (p.out_end > p.out_start OR p.err_end > p.err_start))",
                                [user],
                                |r| r.get(0),
                            )
                            .unwrap();
                        proptest::prop_assert!(kept(&db, user) <= i64::from(quota) || ended_kept == 0);
                        proptest::prop_assert_eq!(kept(&db, 3 - user), other);
                        proptest::prop_assert_eq!(running_bytes(&db), running);
                    }
                }
                for user in [1, 2] {
                    proptest::prop_assert_eq!(output_bytes(&db, user).unwrap(), kept(&db, user));
                }
            }
        }
    }
}
