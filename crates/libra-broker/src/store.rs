//! The broker's own database: every experiment, job, attempt, resource and payment, in SQLite
//! (WAL mode) so that another process can watch and steer, and a killed broker resumes.

use crate::plan::JobParams;
use crate::resources::ResourceConfig;
use crate::state::ExperimentState;
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("broker database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("broker database: stored {what} is unreadable: {detail}")]
    Corrupt { what: &'static str, detail: String },
    #[error("no sweep {0} in the broker database (see `libra sweep status`)")]
    NoExperiment(i64),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    plan_text TEXT NOT NULL,
    root_dir TEXT NOT NULL,
    work_dir TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    deadline REAL NOT NULL,
    budget_cents INTEGER NOT NULL,
    state TEXT NOT NULL,
    max_retries INTEGER NOT NULL,
    estimate_secs REAL,
    created REAL NOT NULL,
    finished REAL,
    engine_pid INTEGER,
    heartbeat REAL,
    sweep_key TEXT
);
CREATE TABLE IF NOT EXISTS resources (
    id INTEGER PRIMARY KEY,
    exp_id INTEGER NOT NULL REFERENCES experiments(id),
    pos INTEGER NOT NULL,
    name TEXT NOT NULL,
    config TEXT NOT NULL,
    available INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    exp_id INTEGER NOT NULL REFERENCES experiments(id),
    idx INTEGER NOT NULL,
    params TEXT NOT NULL,
    state TEXT NOT NULL,
    failures INTEGER NOT NULL DEFAULT 0,
    avoid_pos INTEGER,
    last_attempt INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(exp_id, state);
-- A page of results (`results_page`) starts at a job number without reading the jobs before it.
CREATE INDEX IF NOT EXISTS jobs_by_index ON jobs(exp_id, idx);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    exp_id INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    state TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    exit_code INTEGER,
    wall REAL,
    cpu REAL,
    price REAL NOT NULL,
    hold_cents INTEGER NOT NULL,
    charged_cents INTEGER,
    dir TEXT NOT NULL,
    message TEXT
);
CREATE INDEX IF NOT EXISTS attempts_by_state ON attempts(exp_id, state);
-- Each job's attempts (`results` counts them and sums their charges): without it every job read
-- every attempt of the database (a page of 1,000 jobs of a finished sweep of 20,000 took 2.9 s;
-- the whole results of one of 100,000, some 24 minutes).
CREATE INDEX IF NOT EXISTS attempts_by_job ON attempts(job_id);
-- Each resource's last attempt (`per_resource`: was it refused?) found by one seek.
CREATE INDEX IF NOT EXISTS attempts_by_resource ON attempts(exp_id, pos);
CREATE TABLE IF NOT EXISTS payments (
    id INTEGER PRIMARY KEY,
    exp_id INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    attempt_id INTEGER NOT NULL,
    price REAL NOT NULL,
    cpu REAL NOT NULL,
    amount_cents INTEGER NOT NULL,
    at REAL NOT NULL
);
-- A sweep's rows found by its id, to remove an ended one (`Store::remove_ended`).
CREATE INDEX IF NOT EXISTS payments_by_exp ON payments(exp_id);
CREATE INDEX IF NOT EXISTS resources_by_exp ON resources(exp_id);
"#;

/// What a status reads, kept by triggers in the transaction of every change to the rows they
/// total, so a status reads a few rows where totalling the rows read all of them: each sweep's
/// jobs by state (`Store::counts`; counting 100,000 jobs took 4.5 ms), each resource's attempts
/// by state with their wall, CPU and charges (`per_resource`), and each sweep's payments
/// (`spent`). A hosted sweep of 100,000 jobs, ended, took the server 83 ms a status and 109 ms
/// a listing of its owner's sweeps, which every `libra sweep status` and every read of a hosted
/// sweep paid. Their price is paid by the writes, which are bounded (a sweep's jobs are created
/// and rerun at `sweep_job_rate` on a server): inserting 100,000 jobs went from 0.38 s to about
/// 0.5 s, cancelling them all from 0.16 s to about 0.3 s (SQLite alone). Made in one
/// transaction with the totals of the rows already there (`Store::open`). A total left with no
/// row keeps a row of 0. The wall and CPU sums are added in the order the attempts end rather
/// than the order `SUM` reads them, so they may differ from it in the last bits.
const JOB_COUNTS: &str = r#"
CREATE TABLE job_counts (
    exp_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (exp_id, state)
) WITHOUT ROWID;
CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO job_counts (exp_id, state, n) VALUES (new.exp_id, new.state, 1)
        ON CONFLICT (exp_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1 WHERE exp_id = old.exp_id AND state = old.state;
END;
CREATE TRIGGER job_counts_update AFTER UPDATE OF exp_id, state ON jobs
    WHEN old.exp_id IS NOT new.exp_id OR old.state IS NOT new.state
BEGIN
    UPDATE job_counts SET n = n - 1 WHERE exp_id = old.exp_id AND state = old.state;
    INSERT INTO job_counts (exp_id, state, n) VALUES (new.exp_id, new.state, 1)
        ON CONFLICT (exp_id, state) DO UPDATE SET n = n + 1;
END;
INSERT INTO job_counts (exp_id, state, n) SELECT exp_id, state, COUNT(*) FROM jobs GROUP BY exp_id, state;
CREATE TABLE attempt_totals (
    exp_id INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    wall REAL NOT NULL,
    cpu REAL NOT NULL,
    cents INTEGER NOT NULL,
    PRIMARY KEY (exp_id, pos, state)
) WITHOUT ROWID;
CREATE TRIGGER attempt_totals_insert AFTER INSERT ON attempts BEGIN
    INSERT INTO attempt_totals (exp_id, pos, state, n, wall, cpu, cents)
        VALUES (new.exp_id, new.pos, new.state, 1, COALESCE(new.wall, 0), COALESCE(new.cpu, 0), COALESCE(new.charged_cents, 0))
        ON CONFLICT (exp_id, pos, state) DO UPDATE
        SET n = n + 1, wall = wall + excluded.wall, cpu = cpu + excluded.cpu, cents = cents + excluded.cents;
END;
CREATE TRIGGER attempt_totals_delete AFTER DELETE ON attempts BEGIN
    UPDATE attempt_totals
        SET n = n - 1, wall = wall - COALESCE(old.wall, 0), cpu = cpu - COALESCE(old.cpu, 0), cents = cents - COALESCE(old.charged_cents, 0)
        WHERE exp_id = old.exp_id AND pos = old.pos AND state = old.state;
END;
CREATE TRIGGER attempt_totals_update AFTER UPDATE OF exp_id, pos, state, wall, cpu, charged_cents ON attempts
    WHEN old.exp_id IS NOT new.exp_id OR old.pos IS NOT new.pos OR old.state IS NOT new.state
        OR old.wall IS NOT new.wall OR old.cpu IS NOT new.cpu OR old.charged_cents IS NOT new.charged_cents
BEGIN
    UPDATE attempt_totals
        SET n = n - 1, wall = wall - COALESCE(old.wall, 0), cpu = cpu - COALESCE(old.cpu, 0), cents = cents - COALESCE(old.charged_cents, 0)
        WHERE exp_id = old.exp_id AND pos = old.pos AND state = old.state;
    INSERT INTO attempt_totals (exp_id, pos, state, n, wall, cpu, cents)
        VALUES (new.exp_id, new.pos, new.state, 1, COALESCE(new.wall, 0), COALESCE(new.cpu, 0), COALESCE(new.charged_cents, 0))
        ON CONFLICT (exp_id, pos, state) DO UPDATE
        SET n = n + 1, wall = wall + excluded.wall, cpu = cpu + excluded.cpu, cents = cents + excluded.cents;
END;
INSERT INTO attempt_totals (exp_id, pos, state, n, wall, cpu, cents)
    SELECT exp_id, pos, state, COUNT(*), COALESCE(SUM(wall), 0), COALESCE(SUM(cpu), 0), COALESCE(SUM(charged_cents), 0)
    FROM attempts GROUP BY exp_id, pos, state;
CREATE TABLE payment_totals (exp_id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
CREATE TRIGGER payment_totals_insert AFTER INSERT ON payments BEGIN
    INSERT INTO payment_totals (exp_id, cents) VALUES (new.exp_id, new.amount_cents)
        ON CONFLICT (exp_id) DO UPDATE SET cents = cents + excluded.cents;
END;
CREATE TRIGGER payment_totals_delete AFTER DELETE ON payments BEGIN
    UPDATE payment_totals SET cents = cents - old.amount_cents WHERE exp_id = old.exp_id;
END;
CREATE TRIGGER payment_totals_update AFTER UPDATE OF exp_id, amount_cents ON payments
    WHEN old.exp_id IS NOT new.exp_id OR old.amount_cents IS NOT new.amount_cents
BEGIN
    UPDATE payment_totals SET cents = cents - old.amount_cents WHERE exp_id = old.exp_id;
    INSERT INTO payment_totals (exp_id, cents) VALUES (new.exp_id, new.amount_cents)
        ON CONFLICT (exp_id) DO UPDATE SET cents = cents + excluded.cents;
END;
INSERT INTO payment_totals (exp_id, cents) SELECT exp_id, SUM(amount_cents) FROM payments GROUP BY exp_id;
"#;

#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    pub id: i64,
    pub name: String,
    pub plan_text: String,
    pub root_dir: String,
    pub work_dir: String,
    pub algorithm: String,
    /// Unix seconds.
    pub deadline: f64,
    #[serde(rename = "budget_cents")]
    pub budget: Money,
    pub state: ExperimentState,
    pub max_retries: u32,
    pub estimate_secs: Option<f64>,
    pub created: f64,
    pub finished: Option<f64>,
    pub engine_pid: Option<i64>,
    pub heartbeat: Option<f64>,
}

pub struct NewExperiment<'a> {
    pub name: &'a str,
    pub plan_text: &'a str,
    pub root_dir: &'a str,
    pub work_dir: &'a str,
    pub algorithm: &'a str,
    pub deadline: f64,
    pub budget: Money,
    pub max_retries: u32,
    pub estimate_secs: Option<f64>,
    pub now: f64,
}

#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub id: i64,
    pub job_id: i64,
    pub pos: usize,
    pub started: f64,
    pub price: f64,
    pub hold: Money,
    pub dir: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    pub index: u64,
    pub params: serde_json::Value,
    pub state: String,
    pub resource: Option<String>,
    pub attempts: u32,
    pub exit_code: Option<i32>,
    pub wall: Option<f64>,
    #[serde(rename = "cost_cents")]
    pub cost: Money,
    pub output: Option<String>,
    /// Files the job copied back to the root.
    pub files: Vec<String>,
}

/// How a lost attempt's message starts when the resource refused the job: the rest is why.
pub const REFUSED: &str = "refused by the resource: ";

#[derive(Debug, Clone, Default, Serialize)]
pub struct ResourceSummary {
    pub name: String,
    pub done: u64,
    pub failed: u64,
    pub running: u64,
    #[serde(rename = "spent_cents")]
    pub spent: Money,
    pub wall_sum: f64,
    pub cpu_sum: f64,
    /// Why the resource refused the sweep's last job, and when, when its latest attempt was
    /// refused: what a sweep that makes no progress is waiting on.
    pub refused: Option<(String, f64)>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub pending: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
    pub cancelled: u64,
}

impl Counts {
    /// `n` jobs in `state` (any state but the four named counts as cancelled).
    fn add(&mut self, state: &str, n: u64) {
        match state {
            "pending" => self.pending += n,
            "running" => self.running += n,
            "done" => self.done += n,
            "failed" => self.failed += n,
            _ => self.cancelled += n,
        }
    }
}

pub struct Store {
    pub conn: Connection,
}

fn row_experiment(r: &rusqlite::Row) -> rusqlite::Result<Experiment> {
    Ok(Experiment {
        id: r.get(0)?,
        name: r.get(1)?,
        plan_text: r.get(2)?,
        root_dir: r.get(3)?,
        work_dir: r.get(4)?,
        algorithm: r.get(5)?,
        deadline: r.get(6)?,
        budget: Money::from_cents(r.get(7)?),
        state: {
            let s: String = r.get(8)?;
            ExperimentState::parse(&s).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(8, rusqlite::types::Type::Text, Box::new(e))
            })?
        },
        max_retries: r.get(9)?,
        estimate_secs: r.get(10)?,
        created: r.get(11)?,
        finished: r.get(12)?,
        engine_pid: r.get(13)?,
        heartbeat: r.get(14)?,
    })
}

/// A resource's last attempt (`exp_id` ?1, `pos` ?2) when it was lost: its message and when.
const LAST_LOST: &str = "SELECT message, ended FROM attempts WHERE id = (SELECT MAX(id) FROM attempts WHERE exp_id = ?1 AND pos = ?2) AND state = 'lost'";

const EXP_COLS: &str = "id, name, plan_text, root_dir, work_dir, algorithm, deadline, budget_cents, state, max_retries, estimate_secs, created, finished, engine_pid, heartbeat";

impl Store {
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        // WAL lets status and steering read and write while the engine runs; NORMAL
        // synchronisation keeps every commit across a crash of the process (not of the
        // machine's power), which is what `kill -9` then `resume` needs.
        // The busy timeout first: even the pragmas below can meet a lock (another connection
        // checkpointing, or recovering the WAL index after the last one closed), and without it
        // they fail at once with "database is locked".
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        // Databases from before the sweep's key was kept in them (it was in its work directory
        // only, which a backup of the hosted sweeps' database does not carry).
        let has_key = |conn: &Connection| {
            conn.prepare("SELECT 1 FROM pragma_table_info('experiments') WHERE name = 'sweep_key'")?
                .exists([])
        };
        if !has_key(&conn)? {
            // Another process opening it at the same moment may add it first.
            if let Err(e) = conn.execute_batch("ALTER TABLE experiments ADD COLUMN sweep_key TEXT") {
                if !has_key(&conn)? {
                    return Err(e.into());
                }
            }
        }
        // Databases from before the totals were kept (`JOB_COUNTS`): made, and
        // counted, in one transaction that holds the write lock, so another process opening it
        // at the same moment finds either nothing or the whole of it, and no job changes between
        // the count and the first trigger.
        let has_counts = |conn: &Connection| {
            conn.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'job_counts'")?
                .exists([])
        };
        if !has_counts(&conn)? {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let made = match has_counts(&conn) {
                Ok(true) => Ok(()),
                Ok(false) => conn.execute_batch(JOB_COUNTS),
                Err(e) => Err(e),
            };
            match made {
                Ok(()) => conn.execute_batch("COMMIT")?,
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(e.into());
                }
            }
        }
        Ok(Store { conn })
    }

    /// The sweep's random key (`engine::sweep_key`), None for one made before it was kept here.
    pub fn sweep_key(&self, exp: i64) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT sweep_key FROM experiments WHERE id = ?1", [exp], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten())
    }

    pub fn set_sweep_key(&self, exp: i64, key: &str) -> Result<(), StoreError> {
        self.conn.execute("UPDATE experiments SET sweep_key = ?2 WHERE id = ?1", params![exp, key])?;
        Ok(())
    }

    pub fn begin(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    pub fn commit(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }

    pub fn create_experiment(
        &mut self,
        e: &NewExperiment,
        resources: &[ResourceConfig],
        jobs: &JobParams,
    ) -> Result<i64, StoreError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiments (name, plan_text, root_dir, work_dir, algorithm, deadline, budget_cents, state, max_retries, estimate_secs, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, ?10)",
            params![e.name, e.plan_text, e.root_dir, e.work_dir, e.algorithm, e.deadline, e.budget.cents(), e.max_retries, e.estimate_secs, e.now],
        )?;
        let id = tx.last_insert_rowid();
        for (pos, r) in resources.iter().enumerate() {
            let cfg = serde_json::to_string(r)
                .map_err(|err| StoreError::Corrupt { what: "resource", detail: err.to_string() })?;
            tx.execute(
                "INSERT INTO resources (exp_id, pos, name, config) VALUES (?1, ?2, ?3, ?4)",
                params![id, pos as i64, r.name, cfg],
            )?;
        }
        {
            let mut ins =
                tx.prepare("INSERT INTO jobs (exp_id, idx, params, state) VALUES (?1, ?2, ?3, 'pending')")?;
            for i in 0..jobs.total {
                let map: serde_json::Map<String, serde_json::Value> =
                    jobs.job(i).into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
                ins.execute(params![id, i as i64, serde_json::Value::Object(map).to_string()])?;
            }
        }
        tx.commit()?;
        Ok(id)
    }

    pub fn experiment(&self, id: i64) -> Result<Experiment, StoreError> {
        self.conn
            .query_row(&format!("SELECT {EXP_COLS} FROM experiments WHERE id = ?1"), [id], row_experiment)
            .optional()?
            .ok_or(StoreError::NoExperiment(id))
    }

    /// Removes experiment `exp` and everything recorded of it (its resources, jobs, attempts
    /// and payments) if it has ended (done or cancelled), in one transaction that the caller
    /// may widen: `also` runs inside it, after the rows are gone. Returns its work directory,
    /// for the caller to remove, or None (nothing removed) if it had not ended or is not there.
    pub fn remove_ended(
        &self,
        exp: i64,
        also: impl FnOnce(&Connection) -> rusqlite::Result<()>,
    ) -> Result<Option<String>, StoreError> {
        // Immediate: no rerun can start it between the check and the removal.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)?;
        let ended: Option<(String, String)> = tx
            .query_row("SELECT state, work_dir FROM experiments WHERE id = ?1", [exp], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let Some((state, work_dir)) = ended else { return Ok(None) };
        if !ExperimentState::parse(&state).is_ok_and(ExperimentState::is_final) {
            return Ok(None);
        }
        tx.execute_batch(&format!(
            "DELETE FROM payments WHERE exp_id = {exp}; DELETE FROM attempts WHERE exp_id = {exp}; \
             DELETE FROM jobs WHERE exp_id = {exp}; DELETE FROM job_counts WHERE exp_id = {exp}; \
             DELETE FROM attempt_totals WHERE exp_id = {exp}; DELETE FROM payment_totals WHERE exp_id = {exp}; \
             DELETE FROM resources WHERE exp_id = {exp}; \
             DELETE FROM experiments WHERE id = {exp};"
        ))?;
        also(&tx)?;
        tx.commit()?;
        Ok(Some(work_dir))
    }

    pub fn experiments(&self) -> Result<Vec<Experiment>, StoreError> {
        let mut st = self.conn.prepare(&format!("SELECT {EXP_COLS} FROM experiments ORDER BY id"))?;
        let rows = st.query_map([], row_experiment)?.collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    pub fn resources(&self, exp: i64) -> Result<Vec<ResourceConfig>, StoreError> {
        let mut st = self.conn.prepare("SELECT config FROM resources WHERE exp_id = ?1 ORDER BY pos")?;
        let rows: Vec<String> = st.query_map([exp], |r| r.get(0))?.collect::<Result<_, _>>()?;
        rows.iter()
            .map(|s| {
                serde_json::from_str(s)
                    .map_err(|e| StoreError::Corrupt { what: "resource", detail: e.to_string() })
            })
            .collect()
    }

    pub fn set_deadline(&self, exp: i64, deadline: f64) -> Result<(), StoreError> {
        self.experiment(exp)?;
        self.conn.execute("UPDATE experiments SET deadline = ?2 WHERE id = ?1", params![exp, deadline])?;
        Ok(())
    }

    pub fn set_budget(&self, exp: i64, budget: Money) -> Result<(), StoreError> {
        self.experiment(exp)?;
        self.conn.execute(
            "UPDATE experiments SET budget_cents = ?2 WHERE id = ?1",
            params![exp, budget.cents()],
        )?;
        Ok(())
    }

    /// Moves an experiment to `state` (with the time it ended, for a final state), refusing a
    /// change `ExperimentState::can_become` does not allow.
    pub fn set_state(&self, exp: i64, state: ExperimentState, now: Option<f64>) -> Result<(), StoreError> {
        let from = self.experiment(exp)?.state;
        if !from.can_become(state) {
            return Err(crate::state::StateError::Transition { exp, from, to: state }.into());
        }
        self.conn.execute(
            "UPDATE experiments SET state = ?2, finished = ?3 WHERE id = ?1",
            params![exp, state.as_str(), now],
        )?;
        Ok(())
    }

    /// Marks this process as the experiment's engine.
    pub fn claim(&self, exp: i64, pid: u32, now: f64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE experiments SET engine_pid = ?2, heartbeat = ?3 WHERE id = ?1",
            params![exp, pid, now],
        )?;
        Ok(())
    }

    pub fn heartbeat(&self, exp: i64, now: f64) -> Result<(), StoreError> {
        self.conn.execute("UPDATE experiments SET heartbeat = ?2 WHERE id = ?1", params![exp, now])?;
        Ok(())
    }

    pub fn release(&self, exp: i64) -> Result<(), StoreError> {
        self.conn.execute("UPDATE experiments SET engine_pid = NULL WHERE id = ?1", params![exp])?;
        Ok(())
    }

    /// Pending jobs: (job id, resource position to avoid after a failure there).
    pub fn pending(&self, exp: i64) -> Result<Vec<(i64, Option<usize>)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, avoid_pos FROM jobs WHERE exp_id = ?1 AND state = 'pending' ORDER BY idx")?;
        let rows = st
            .query_map([exp], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?.map(|p| p as usize))))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    pub fn running_attempts(&self, exp: i64) -> Result<Vec<AttemptRow>, StoreError> {
        let mut st = self.conn.prepare(
            "SELECT id, job_id, pos, started, price, hold_cents, dir FROM attempts WHERE exp_id = ?1 AND state = 'running'",
        )?;
        let rows = st
            .query_map([exp], |r| {
                Ok(AttemptRow {
                    id: r.get(0)?,
                    job_id: r.get(1)?,
                    pos: r.get::<_, i64>(2)? as usize,
                    started: r.get(3)?,
                    price: r.get(4)?,
                    hold: Money::from_cents(r.get(5)?),
                    dir: r.get(6)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Per resource position: successful jobs, failures, and what they measured and cost.
    pub fn per_resource(&self, exp: i64) -> Result<Vec<ResourceSummary>, StoreError> {
        let names: Vec<String> = self.resources(exp)?.into_iter().map(|r| r.name).collect();
        let mut out: Vec<ResourceSummary> =
            names.into_iter().map(|name| ResourceSummary { name, ..Default::default() }).collect();
        // Kept by triggers (`JOB_COUNTS`).
        let mut st = self
            .conn
            .prepare_cached("SELECT pos, state, n, wall, cpu, cents FROM attempt_totals WHERE exp_id = ?1")?;
        let rows = st.query_map([exp], |r| {
            Ok((
                r.get::<_, i64>(0)? as usize,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)? as u64,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?;
        for row in rows {
            let (pos, state, n, wall, cpu, cents) = row?;
            let Some(s) = out.get_mut(pos) else { continue };
            s.spent = s.spent + Money::from_cents(cents);
            match state.as_str() {
                "done" => {
                    s.done += n;
                    s.wall_sum += wall;
                    s.cpu_sum += cpu;
                }
                "failed" => s.failed += n,
                "running" => s.running += n,
                _ => {}
            }
        }
        // Each resource's last attempt, one seek each (`attempts_by_resource`).
        let mut last = self.conn.prepare_cached(LAST_LOST)?;
        for pos in 0..out.len() {
            let row = last
                .query_row(params![exp, pos as i64], |r| {
                    Ok((r.get::<_, Option<String>>(0)?, r.get::<_, Option<f64>>(1)?))
                })
                .optional()?;
            let Some((message, ended)) = row else { continue };
            let refused = message.as_deref().and_then(|m| m.strip_prefix(REFUSED));
            if let (Some(s), Some(m), Some(at)) = (out.get_mut(pos), refused, ended) {
                s.refused = Some((m.to_string(), at));
            }
        }
        Ok(out)
    }

    /// What changes whenever the sweep's attempts do (one starts, one ends, what one measured
    /// changes), from the kept totals (`JOB_COUNTS`): every attempt, those running, the sum of
    /// their wall times' bits and of their charges. Two reads with the same version read the
    /// same attempts' spans (`attempt_spans`), so a usage made from them may be kept.
    pub fn attempts_version(&self, exp: i64) -> Result<(i64, i64, u64, i64), StoreError> {
        let mut st = self.conn.prepare_cached(
            "SELECT COALESCE(SUM(n), 0), COALESCE(SUM(CASE WHEN state = 'running' THEN n ELSE 0 END), 0), \
             COALESCE(SUM(wall), 0.0), COALESCE(SUM(cents), 0) FROM attempt_totals WHERE exp_id = ?1",
        )?;
        Ok(st.query_row([exp], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, f64>(2)?.to_bits(), r.get(3)?)))?)
    }

    pub fn counts(&self, exp: i64) -> Result<Counts, StoreError> {
        let mut c = Counts::default();
        // Kept by triggers (`JOB_COUNTS`): the same numbers as counting the jobs.
        let mut st = self.conn.prepare_cached("SELECT state, n FROM job_counts WHERE exp_id = ?1")?;
        for row in st.query_map([exp], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))? {
            let (s, n) = row?;
            c.add(&s, n);
        }
        Ok(c)
    }

    pub fn spent(&self, exp: i64) -> Result<Money, StoreError> {
        // Kept by triggers (`JOB_COUNTS`).
        let cents: i64 = self.conn.query_row(
            "SELECT COALESCE((SELECT cents FROM payment_totals WHERE exp_id = ?1), 0)",
            [exp],
            |r| r.get(0),
        )?;
        Ok(Money::from_cents(cents))
    }

    pub fn held(&self, exp: i64) -> Result<Money, StoreError> {
        let cents: i64 = self.conn.query_row(
            "SELECT COALESCE(SUM(hold_cents), 0) FROM attempts WHERE exp_id = ?1 AND state = 'running'",
            [exp],
            |r| r.get(0),
        )?;
        Ok(Money::from_cents(cents))
    }

    pub fn job(&self, job_id: i64) -> Result<(u64, String), StoreError> {
        Ok(self.conn.query_row("SELECT idx, params FROM jobs WHERE id = ?1", [job_id], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
        })?)
    }

    /// Records a start; `dir_for` names the attempt's directory from its id.
    #[allow(clippy::too_many_arguments)]
    pub fn start_attempt(
        &self,
        exp: i64,
        job_id: i64,
        pos: usize,
        now: f64,
        price: f64,
        hold: Money,
        dir_for: &dyn Fn(i64) -> String,
    ) -> Result<(i64, String), StoreError> {
        let mut st = self.conn.prepare_cached(
            "INSERT INTO attempts (job_id, exp_id, pos, state, started, price, hold_cents, dir) VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, '')",
        )?;
        st.execute(params![job_id, exp, pos as i64, now, price, hold.cents()])?;
        let id = self.conn.last_insert_rowid();
        let dir = dir_for(id);
        let mut d = self.conn.prepare_cached("UPDATE attempts SET dir = ?2 WHERE id = ?1")?;
        d.execute(params![id, dir])?;
        let mut up =
            self.conn.prepare_cached("UPDATE jobs SET state = 'running', last_attempt = ?2 WHERE id = ?1")?;
        up.execute(params![job_id, id])?;
        Ok((id, dir))
    }

    pub fn set_root_dir(&self, exp: i64, dir: &str) -> Result<(), StoreError> {
        self.conn.execute("UPDATE experiments SET root_dir = ?2 WHERE id = ?1", params![exp, dir])?;
        Ok(())
    }

    /// Every attempt's resource position, start and end (none while it runs), by start.
    pub fn attempt_spans(&self, exp: i64) -> Result<Vec<(usize, f64, Option<f64>)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT pos, started, ended FROM attempts WHERE exp_id = ?1 ORDER BY started, id")?;
        let rows = st
            .query_map([exp], |r| Ok((r.get::<_, i64>(0)? as usize, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    pub fn set_work_dir(&self, exp: i64, dir: &str) -> Result<(), StoreError> {
        self.conn.execute("UPDATE experiments SET work_dir = ?2 WHERE id = ?1", params![exp, dir])?;
        Ok(())
    }

    /// Records an attempt's end and its payment; the job becomes done, failed, or pending again
    /// (to be retried elsewhere) while it has retries left.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_attempt(
        &self,
        exp: i64,
        a: &AttemptRow,
        ok: bool,
        exit_code: Option<i32>,
        wall: f64,
        cpu: f64,
        charge: Money,
        message: &str,
        now: f64,
        max_retries: u32,
    ) -> Result<&'static str, StoreError> {
        let mut st = self.conn.prepare_cached(
            "UPDATE attempts SET state = ?2, ended = ?3, exit_code = ?4, wall = ?5, cpu = ?6, charged_cents = ?7, message = ?8 WHERE id = ?1",
        )?;
        st.execute(params![
            a.id,
            if ok { "done" } else { "failed" },
            now,
            exit_code,
            wall,
            cpu,
            charge.cents(),
            message
        ])?;
        if charge.cents() > 0 {
            let mut pay = self.conn.prepare_cached(
                "INSERT INTO payments (exp_id, pos, attempt_id, price, cpu, amount_cents, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            pay.execute(params![exp, a.pos as i64, a.id, a.price, cpu, charge.cents(), now])?;
        }
        let state = if ok {
            "done"
        } else {
            let failures: i64 =
                self.conn.query_row("SELECT failures FROM jobs WHERE id = ?1", [a.job_id], |r| r.get(0))?;
            if failures as u32 + 1 > max_retries {
                "failed"
            } else {
                "pending"
            }
        };
        let mut up = self.conn.prepare_cached(
            "UPDATE jobs SET state = ?2, failures = failures + ?3, avoid_pos = CASE WHEN ?3 = 1 THEN ?4 ELSE avoid_pos END WHERE id = ?1",
        )?;
        up.execute(params![a.job_id, state, i64::from(!ok), a.pos as i64])?;
        Ok(state)
    }

    /// An attempt whose outcome is unknown (the broker died, the job left no record): the job
    /// goes back to pending, without counting as a failure.
    pub fn lose_attempt(&self, a: &AttemptRow, now: f64, why: &str) -> Result<(), StoreError> {
        self.lose_attempt_charged(a, now, why, Money::ZERO, None)
    }

    /// As `lose_attempt`, for an attempt that is paid for all the same (a job cancelled on a
    /// Libra cluster, or stopped by a cancel, pays for the CPU it used): `used`, its wall and CPU
    /// seconds, when they are known.
    pub fn lose_attempt_charged(
        &self,
        a: &AttemptRow,
        now: f64,
        why: &str,
        charged: Money,
        used: Option<(f64, f64)>,
    ) -> Result<(), StoreError> {
        let (wall, cpu) = (used.map(|u| u.0), used.map(|u| u.1));
        self.conn.execute(
            "UPDATE attempts SET state = 'lost', ended = ?2, charged_cents = ?4, message = ?3, wall = COALESCE(?5, wall), cpu = COALESCE(?6, cpu) WHERE id = ?1",
            params![a.id, now, why, charged.cents(), wall, cpu],
        )?;
        if charged.cents() > 0 {
            let exp: i64 =
                self.conn.query_row("SELECT exp_id FROM attempts WHERE id = ?1", [a.id], |r| r.get(0))?;
            self.conn
                .prepare_cached(
                    "INSERT INTO payments (exp_id, pos, attempt_id, price, cpu, amount_cents, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![exp, a.pos as i64, a.id, a.price, cpu.unwrap_or(0.0), charged.cents(), now])?;
        }
        self.conn
            .execute("UPDATE jobs SET state = 'pending' WHERE id = ?1 AND state = 'running'", [a.job_id])?;
        Ok(())
    }

    pub fn cancel_pending(&self, exp: i64) -> Result<(), StoreError> {
        self.conn
            .execute("UPDATE jobs SET state = 'cancelled' WHERE exp_id = ?1 AND state = 'pending'", [exp])?;
        Ok(())
    }

    /// `rerun --failed`: failed jobs become pending with a fresh retry count.
    /// How many jobs a rerun would run again (the failed and the cancelled), or
    /// `StateError::Cancelling` while a cancel of the sweep has not ended.
    pub fn rerunnable(&self, exp: i64) -> Result<u64, StoreError> {
        let e = self.experiment(exp)?;
        if e.state == ExperimentState::Cancelled && e.finished.is_none() {
            return Err(crate::state::StateError::Cancelling { exp }.into());
        }
        let c = self.counts(exp)?;
        Ok(c.failed + c.cancelled)
    }

    /// Sets the failed and cancelled jobs pending again (`rerunnable` says how many, and
    /// refuses while a cancel has not ended).
    pub fn rerun_failed(&self, exp: i64) -> Result<usize, StoreError> {
        self.rerunnable(exp)?;
        let n = self.conn.execute(
            "UPDATE jobs SET state = 'pending', failures = 0 WHERE exp_id = ?1 AND state = 'failed'",
            [exp],
        )?;
        self.conn
            .execute("UPDATE jobs SET state = 'pending' WHERE exp_id = ?1 AND state = 'cancelled'", [exp])
            .map(|_| ())?;
        Ok(n)
    }

    /// Every job's result, in job order.
    pub fn results(&self, exp: i64) -> Result<Vec<JobResult>, StoreError> {
        self.results_page(exp, 0, u32::MAX)
    }

    /// At most `limit` jobs' results, in job order, from the job after the `after`th (job
    /// numbers count from 1, as `$jobname`; 0: from the first).
    pub fn results_page(&self, exp: i64, after: u64, limit: u32) -> Result<Vec<JobResult>, StoreError> {
        // A sweep that is not there is an error, as for every other command, not an empty list.
        self.experiment(exp)?;
        let names: Vec<String> = self.resources(exp)?.into_iter().map(|r| r.name).collect();
        let mut st = self.conn.prepare(RESULTS_PAGE)?;
        // The job numbered `after` has index `after - 1`: the page starts at index `after`.
        let from = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = st.query_map(rusqlite::params![exp, from, i64::from(limit)], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i32>>(5)?,
                r.get::<_, Option<f64>>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, Option<String>>(8)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (idx, params, state, pos, attempts, exit_code, wall, cents, dir) = row?;
            out.push(JobResult {
                index: idx as u64,
                params: serde_json::from_str(&params)
                    .map_err(|e| StoreError::Corrupt { what: "job parameters", detail: e.to_string() })?,
                state,
                resource: pos.and_then(|p| names.get(p as usize).cloned()),
                attempts: attempts as u32,
                exit_code,
                wall,
                cost: Money::from_cents(cents),
                files: dir.as_deref().map(copied_files).unwrap_or_default(),
                output: dir,
            });
        }
        Ok(out)
    }
}

/// A page of a sweep's jobs with their last attempt, how many attempts each had and what they
/// were charged (`Store::results_page`): sweep, first job index, most rows.
const RESULTS_PAGE: &str = "SELECT j.idx, j.params, j.state, a.pos, (SELECT COUNT(*) FROM attempts x WHERE x.job_id = j.id), a.exit_code, a.wall,
        (SELECT COALESCE(SUM(charged_cents), 0) FROM attempts y WHERE y.job_id = j.id), a.dir
     FROM jobs j LEFT JOIN attempts a ON a.id = j.last_attempt WHERE j.exp_id = ?1 AND j.idx >= ?2
     ORDER BY j.idx LIMIT ?3";

fn copied_files(dir: &str) -> Vec<String> {
    std::fs::read_to_string(Path::new(dir).join(crate::adapter::local::COPIED))
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of `jobs` jobs (`x` from 1) on `resources`, made in the broker database `db`.
    fn create_sweep(db: &Path, jobs: u32, resources: Vec<ResourceConfig>) -> i64 {
        let text =
            format!("parameter x integer range from 1 to {jobs} step 1\ntask main\n    exec true\nendtask\n");
        let plan = crate::create::expand_text(db, &text, 0, 100).unwrap();
        let sweep = crate::create::TextSweep {
            name: "s",
            plan: &plan,
            resources,
            algorithm: libra_core::dbc::Algorithm::Cost,
            deadline: 3600.0,
            budget: Money::from_credits(1),
            max_retries: 0,
            estimate_secs: None,
            now: 0.0,
        };
        crate::create::create_from_text(db, &sweep).unwrap()
    }

    /// A page of results reads its own jobs and their own attempts, each by an index: with a
    /// scan of the jobs (to sort them) or of the attempts (for each job) a page of a finished
    /// sweep of 100,000 jobs cost minutes, whatever its size.
    #[test]
    fn a_page_of_results_reads_only_its_jobs_and_their_attempts() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("broker.db")).unwrap();
        let plan: Vec<String> = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {RESULTS_PAGE}"))
            .unwrap()
            .query_map(params![1, 0, 10], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(plan.iter().all(|step| !step.starts_with("SCAN")), "a scan: {plan:#?}");
        assert!(!plan.iter().any(|step| step.contains("TEMP B-TREE")), "a sort: {plan:#?}");
        assert!(plan.iter().any(|step| step.contains("USING INDEX jobs_by_index")), "{plan:#?}");
        assert_eq!(plan.iter().filter(|step| step.contains("INDEX attempts_by_job")).count(), 2, "{plan:#?}");
    }

    /// The totals a status reads (`counts`, `per_resource`, `spent`, kept by triggers) are
    /// those of the rows themselves, totalled directly, after every kind of change the broker
    /// makes: creation, attempts started, finished (done, failed, retried), lost and charged,
    /// payments, the pending cancelled, a rerun, another sweep's changes beside it, and an ended
    /// sweep removed; and a database from before the totals were kept is totalled when opened.
    #[test]
    fn the_kept_totals_are_the_rows_own() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("broker.db");
        let resources = crate::resources::parse(
            "[[resource]]\nname = \"p\"\nkind = \"testqueue\"\nslots = 2\nprice = 1\nwall = 1\n\n[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nslots = 2\nprice = 2\nwall = 1\n",
        )
        .unwrap();
        let (a, b) = (create_sweep(&db, 40, resources.clone()), create_sweep(&db, 40, resources));
        let store = Store::open(&db).unwrap();
        let direct = |exp: i64| -> Counts {
            let mut c = Counts::default();
            let mut st = store
                .conn
                .prepare("SELECT state, COUNT(*) FROM jobs WHERE exp_id = ?1 GROUP BY state")
                .unwrap();
            for row in
                st.query_map([exp], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))).unwrap()
            {
                let (state, n) = row.unwrap();
                c.add(&state, n);
            }
            c
        };
        // Each resource's attempts totalled directly, as `per_resource` did before the totals.
        let direct_per = |exp: i64| -> Vec<(u64, u64, u64, i64, f64, f64)> {
            (0..store.resources(exp).unwrap().len() as i64)
                .map(|pos| {
                    let q = |sql: &str| -> (i64, f64, f64, i64) {
                        store
                            .conn
                            .query_row(
                                &format!("SELECT COUNT(*), COALESCE(SUM(wall), 0), COALESCE(SUM(cpu), 0), COALESCE(SUM(charged_cents), 0) FROM attempts WHERE exp_id = ?1 AND pos = ?2 {sql}"),
                                params![exp, pos],
                                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                            )
                            .unwrap()
                    };
                    let (done, wall, cpu, _) = q("AND state = 'done'");
                    let (failed, ..) = q("AND state = 'failed'");
                    let (running, ..) = q("AND state = 'running'");
                    let (.., cents) = q("");
                    (done as u64, failed as u64, running as u64, cents, wall, cpu)
                })
                .collect()
        };
        let same = |what: &str| {
            for exp in [a, b] {
                let (kept, counted) = (store.counts(exp).unwrap(), direct(exp));
                assert_eq!(format!("{kept:?}"), format!("{counted:?}"), "sweep {exp} after {what}");
                let per: Vec<_> = store
                    .per_resource(exp)
                    .unwrap()
                    .iter()
                    .map(|r| (r.done, r.failed, r.running, r.spent.cents(), r.wall_sum, r.cpu_sum))
                    .collect();
                let want = direct_per(exp);
                assert_eq!(per.len(), want.len());
                for (k, w) in per.iter().zip(&want) {
                    assert_eq!((k.0, k.1, k.2, k.3), (w.0, w.1, w.2, w.3), "sweep {exp} after {what}");
                    // Sums of the same values in another order: equal but for the last bits.
                    assert!((k.4 - w.4).abs() <= 1e-9 * w.4.abs().max(1.0), "wall {k:?} {w:?} after {what}");
                    assert!((k.5 - w.5).abs() <= 1e-9 * w.5.abs().max(1.0), "cpu {k:?} {w:?} after {what}");
                }
                let paid: i64 = store
                    .conn
                    .query_row(
                        "SELECT COALESCE(SUM(amount_cents), 0) FROM payments WHERE exp_id = ?1",
                        [exp],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(store.spent(exp).unwrap().cents(), paid, "sweep {exp} after {what}");
            }
        };
        same("creation");
        assert_eq!(store.counts(a).unwrap().pending, 40);
        let set = |exp: i64, from: &str, to: &str, n: i64| {
            store
                .conn
                .execute(
                    "UPDATE jobs SET state = ?3 WHERE id IN (SELECT id FROM jobs WHERE exp_id = ?1 AND state = ?2 ORDER BY idx LIMIT ?4)",
                    params![exp, from, to, n],
                )
                .unwrap();
        };
        set(a, "pending", "running", 12);
        // An attempt for each running job, on one resource or the other, then ended.
        let attempt = |exp: i64,
                       job: i64,
                       pos: i64,
                       state: &str,
                       wall: Option<f64>,
                       cents: Option<i64>,
                       message: Option<&str>| {
            store
                .conn
                .execute(
                    "INSERT INTO attempts (job_id, exp_id, pos, state, started, ended, wall, cpu, price, hold_cents, charged_cents, dir, message) VALUES (?1, ?2, ?3, ?4, 1.0, ?5, ?6, ?7, 1.0, 5, ?8, '', ?9)",
                    params![job, exp, pos, state, wall.map(|w| w + 1.0), wall, wall.map(|w| w * 0.9), cents, message],
                )
                .unwrap();
            store.conn.last_insert_rowid()
        };
        let running: Vec<i64> = store
            .conn
            .prepare("SELECT id FROM jobs WHERE exp_id = ?1 AND state = 'running' ORDER BY idx")
            .unwrap()
            .query_map([a], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let ids: Vec<i64> = running
            .iter()
            .enumerate()
            .map(|(k, &j)| attempt(a, j, k as i64 % 2, "running", None, None, None))
            .collect();
        let first_of_b: i64 =
            store.conn.query_row("SELECT MIN(id) FROM jobs WHERE exp_id = ?1", [b], |r| r.get(0)).unwrap();
        attempt(b, first_of_b, 0, "running", None, None, None);
        same("attempts started");
        for (k, &id) in ids.iter().enumerate() {
            let (state, wall) = match k % 4 {
                0 | 1 => ("done", 0.1 + k as f64 / 3.0),
                2 => ("failed", 0.7),
                _ => ("lost", 0.0),
            };
            store
                .conn
                .execute(
                    "UPDATE attempts SET state = ?2, ended = 9.0, wall = ?3, cpu = ?3 * 0.9, charged_cents = ?4 WHERE id = ?1",
                    params![id, state, wall, k as i64 * 7],
                )
                .unwrap();
            store
                .conn
                .execute(
                    "INSERT INTO payments (exp_id, pos, attempt_id, price, cpu, amount_cents, at) VALUES (?1, ?2, ?3, 1.0, 1.0, ?4, 9.0)",
                    params![a, k as i64 % 2, id, k as i64 * 7],
                )
                .unwrap();
        }
        // A charge corrected on an ended attempt, and a payment moved: totals follow.
        store.conn.execute("UPDATE attempts SET charged_cents = 1000 WHERE id = ?1", [ids[0]]).unwrap();
        store
            .conn
            .execute("UPDATE payments SET amount_cents = amount_cents + 3 WHERE attempt_id = ?1", [ids[1]])
            .unwrap();
        same("attempts ended and paid");
        // Resource p's last attempt refused: the status says so, from one seek.
        let last = attempt(a, running[0], 0, "lost", Some(0.0), Some(0), Some(&format!("{REFUSED}no room")));
        store.conn.execute("UPDATE attempts SET ended = 12.5 WHERE id = ?1", [last]).unwrap();
        let per = store.per_resource(a).unwrap();
        assert_eq!(per[0].refused, Some(("no room".to_string(), 12.5)));
        assert_eq!(per[1].refused, None);
        let plan: Vec<String> = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {LAST_LOST}"))
            .unwrap()
            .query_map(params![a, 0], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(plan.iter().all(|step| !step.starts_with("SCAN")), "a scan: {plan:#?}");
        same("a refused attempt");
        set(a, "running", "done", 5);
        set(a, "running", "failed", 3);
        set(a, "running", "pending", 2);
        set(b, "pending", "running", 1);
        same("attempts finished, failed, retried and lost");
        store.cancel_pending(a).unwrap();
        same("the pending cancelled");
        store.conn.execute("UPDATE experiments SET finished = 1 WHERE id = ?1", [a]).unwrap();
        store.rerun_failed(a).unwrap();
        same("a rerun");
        set(a, "pending", "done", 100);
        set(a, "running", "done", 100);
        store.set_state(a, ExperimentState::Done, Some(2.0)).unwrap();
        assert_eq!(store.counts(a).unwrap().done, 40);
        assert!(store.remove_ended(a, |_| Ok(())).unwrap().is_some());
        same("the removal of an ended sweep");
        assert_eq!(store.counts(a).unwrap().done, 0);
        for table in ["job_counts", "attempt_totals", "payment_totals"] {
            let left: i64 = store
                .conn
                .query_row(&format!("SELECT COUNT(*) FROM {table} WHERE exp_id = ?1"), [a], |r| r.get(0))
                .unwrap();
            assert_eq!(left, 0, "a removed sweep leaves nothing in {table}");
        }
        // A database from before the counts: opened, its jobs are counted.
        store
            .conn
            .execute_batch(
                "DROP TRIGGER job_counts_insert; DROP TRIGGER job_counts_delete; DROP TRIGGER job_counts_update; DROP TABLE job_counts; \
                 DROP TRIGGER attempt_totals_insert; DROP TRIGGER attempt_totals_delete; DROP TRIGGER attempt_totals_update; DROP TABLE attempt_totals; \
                 DROP TRIGGER payment_totals_insert; DROP TRIGGER payment_totals_delete; DROP TRIGGER payment_totals_update; DROP TABLE payment_totals;",
            )
            .unwrap();
        set(b, "pending", "failed", 4);
        store
            .conn
            .execute(
                "INSERT INTO payments (exp_id, pos, attempt_id, price, cpu, amount_cents, at) VALUES (?1, 1, 1, 1.0, 1.0, 42, 9.0)",
                [b],
            )
            .unwrap();
        drop(store);
        let store = Store::open(&db).unwrap();
        let kept = store.counts(b).unwrap();
        assert_eq!((kept.pending, kept.running, kept.failed), (35, 1, 4), "{kept:?}");
        assert_eq!(store.per_resource(b).unwrap()[0].running, 1);
        assert_eq!(store.spent(b).unwrap().cents(), 42);
        // Opened again: counted once, not twice.
        drop(store);
        assert_eq!(Store::open(&db).unwrap().counts(b).unwrap().pending, 35);
    }

    /// While a cancel is being carried out (the sweep cancelled, not yet finished) its engine
    /// is still marking the jobs cancelled: a rerun then, from any process, would race with it.
    #[test]
    fn a_rerun_waits_for_a_cancel_to_end() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("broker.db");
        let exp = create_sweep(&db, 3, Vec::new());
        let store = Store::open(&db).unwrap();
        store
            .conn
            .execute("UPDATE jobs SET state = 'cancelled' WHERE exp_id = ?1 AND idx > 0", [exp])
            .unwrap();
        store
            .conn
            .execute("UPDATE experiments SET state = 'cancelled', finished = NULL WHERE id = ?1", [exp])
            .unwrap();
        let e = store.rerun_failed(exp).unwrap_err();
        assert!(matches!(e, StoreError::State(crate::state::StateError::Cancelling { .. })), "{e}");
        assert!(e.to_string().contains("being cancelled"), "{e}");
        assert_eq!(store.counts(exp).unwrap().cancelled, 2, "a refused rerun changed jobs");
        store.conn.execute("UPDATE experiments SET finished = 1 WHERE id = ?1", [exp]).unwrap();
        assert_eq!(store.rerunnable(exp).unwrap(), 2);
        store.rerun_failed(exp).unwrap();
        assert_eq!(store.counts(exp).unwrap().pending, 3);
    }
}
