//! The node agents' side: registration, the sync exchange (reports in, commands out) and the
//! watchdog that marks silent nodes down.
//!
//! The exchange is a reconciliation, not a message queue: the node says what it runs and what
//! has ended; the server compares that with what the store says the node should run and answers
//! with the difference (start, kill, suspend, resume). Either side can restart at any moment and
//! the next exchange puts things right.

use crate::app::{Inner, NodeRt};
use crate::error::ApiError;
use libra_api::{ExitReport, JobState, NodeJobShare, RegisterRequest, StartJob, SyncRequest, SyncResponse};
use libra_core::{Money, NodeSpec};
use rusqlite::{params, OptionalExtension};
use std::collections::{HashMap, HashSet};

/// Per job: open parts, failed parts, last end, an exit code, deadline, cost.
type PartsEnded = (i64, i64, Option<f64>, Option<i32>, f64, i64);

/// How much of a job's output the server keeps.
pub const OUTPUT_LIMIT: usize = 1 << 20;

impl Inner {
    pub fn register(&mut self, r: &RegisterRequest, default_price: f64, now: f64) -> Result<(), ApiError> {
        crate::auth::valid_user_name(&r.name).map_err(|_| {
            ApiError::BadRequest(format!(
                "name: '{}' is not a valid node name: give 1 to 64 letters, digits, '-', '_' or '.'",
                r.name
            ))
        })?;
        if !(r.cpus > 0.0 && r.cpus <= 4096.0) {
            return Err(ApiError::BadRequest(format!(
                "cpus: {} is not accepted: give a capacity between 0 and 4096 CPUs",
                r.cpus
            )));
        }
        let price = match self.nodes.get(&r.name) {
            Some(rt) => self.cluster.node(rt.idx).spec.price_base,
            None => default_price,
        };
        self.db.execute(
            "INSERT INTO nodes(name, cpus, mem_mb, mechanism, price_base, up, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6) \
             ON CONFLICT(name) DO UPDATE SET cpus = excluded.cpus, mem_mb = excluded.mem_mb, mechanism = excluded.mechanism, up = 1, last_seen = excluded.last_seen",
            params![r.name, r.cpus, r.mem_mb as i64, r.mechanism, price, now],
        )?;
        match self.nodes.get_mut(&r.name) {
            Some(rt) => {
                rt.mechanism = r.mechanism.clone();
                rt.last_seen = now;
                if (self.cluster.node(rt.idx).spec.cpus - r.cpus).abs() > 1e-9 {
                    tracing::warn!(node = %r.name, "capacity changed to {} CPUs; the new capacity applies after a server restart", r.cpus);
                }
                self.cluster.set_up(rt.idx, true);
            }
            None => {
                let mem = if r.mem_mb == 0 { u64::MAX / 4 } else { r.mem_mb };
                let idx = self.cluster.add_node(NodeSpec {
                    name: r.name.clone(),
                    cpus: r.cpus,
                    mem_mb: mem,
                    disk_mb: u64::MAX / 4,
                    price_base: price,
                });
                self.nodes.insert(
                    r.name.clone(),
                    NodeRt { idx, mechanism: r.mechanism.clone(), last_seen: now, shares: Vec::new() },
                );
            }
        }
        tracing::info!(node = %r.name, cpus = r.cpus, mechanism = %r.mechanism, "node registered");
        Ok(())
    }

    /// Takes a node's report, records it, and answers with what the node must change.
    pub fn sync(&mut self, r: &SyncRequest, now: f64) -> Result<SyncResponse, ApiError> {
        let Some(rt) = self.nodes.get_mut(&r.name) else {
            return Ok(SyncResponse { reregister: true, ..Default::default() });
        };
        let idx = rt.idx;
        rt.last_seen = now;
        rt.mechanism = r.mechanism.clone();
        rt.shares = r
            .running
            .iter()
            .map(|j| NodeJobShare { job: j.job, share: j.share, cpu_seconds: j.cpu_seconds })
            .collect();
        let was_down = !self.cluster.node(idx).up;
        self.cluster.set_up(idx, true);
        let mut resp = SyncResponse::default();
        let mut finished: Vec<u64> = Vec::new();
        let mut lost: Vec<u64> = Vec::new();
        let tx = self.db.transaction()?;
        if was_down {
            tx.execute("UPDATE nodes SET up = 1, last_seen = ?2 WHERE name = ?1", params![r.name, now])?;
        }
        let assigned: HashMap<u64, (JobState, bool)> = {
            let mut st = tx.prepare_cached(
                "SELECT j.id, j.state, n.seen FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0",
            )?;
            let rows = st.query_map(params![r.name], |row| {
                let s: String = row.get(1)?;
                Ok((
                    row.get::<_, i64>(0)? as u64,
                    (JobState::parse(&s).unwrap_or(JobState::Failed), row.get::<_, bool>(2)?),
                ))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        for j in &r.running {
            match assigned.get(&j.job) {
                Some((state, _)) if state.is_active() => {
                    tx.prepare_cached(
                        "UPDATE job_nodes SET seen = 1, cpu_seconds = ?3 WHERE job = ?1 AND node = ?2",
                    )?
                    .execute(params![j.job as i64, r.name, j.cpu_seconds])?;
                    tx.prepare_cached(
                        "UPDATE jobs SET start_time = COALESCE(start_time, ?2), state = CASE state WHEN 'PENDING' THEN 'RUNNING' ELSE state END, \
                         cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
                    )?
                    .execute(params![j.job as i64, j.start_time])?;
                }
                _ => resp.kill.push(j.job),
            }
        }
        for e in &r.exited {
            if assigned.contains_key(&e.job) {
                record_exit(&tx, &r.name, e, now)?;
                finished.push(e.job);
            }
            resp.ack.push(e.job);
        }
        let reported: HashSet<u64> =
            r.running.iter().map(|j| j.job).chain(r.exited.iter().map(|e| e.job)).collect();
        for (job, (state, seen)) in &assigned {
            if *seen && state.is_active() && !reported.contains(job) {
                // The node ran it and no longer knows it (the agent restarted without it).
                tx.execute(
                    "UPDATE job_nodes SET done = 1, failed = 1 WHERE job = ?1 AND node = ?2",
                    params![*job as i64, r.name],
                )?;
                lost.push(*job);
            }
        }
        tx.commit()?;
        for j in &r.running {
            if let Some(min_cpu) = self.min_cpu(j.job)? {
                let _ = self.cluster.report_progress(j.job, min_cpu, now);
            }
        }
        for job in finished {
            self.settle_if_done(job, None, now)?;
        }
        for job in lost {
            self.settle_if_done(job, Some(format!("lost: node {} no longer runs it", r.name)), now)?;
        }
        self.commands(r, &mut resp)?;
        resp.job_control = self.policy.job_control();
        Ok(resp)
    }

    fn min_cpu(&self, job: u64) -> rusqlite::Result<Option<f64>> {
        self.db
            .prepare_cached("SELECT MIN(cpu_seconds) FROM job_nodes WHERE job = ?1")?
            .query_row(params![job as i64], |r| r.get(0))
    }

    /// What the node must start, suspend or resume, from the store and the node's report.
    pub fn commands(&self, r: &SyncRequest, resp: &mut SyncResponse) -> Result<(), ApiError> {
        let running: HashMap<u64, bool> = r.running.iter().map(|j| (j.job, j.suspended)).collect();
        let exited: HashSet<u64> = r.exited.iter().map(|e| e.job).collect();
        let mut st = self.db.prepare_cached(
            "SELECT j.id, j.state, j.command, COALESCE(j.reserved, j.estimate), j.submit_time, j.deadline_at, j.share, n.seen, j.mem_mb, j.procs \
             FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 \
             AND j.state IN ('PENDING','RUNNING','SUSPENDED')",
        )?;
        let rows = st.query_map(params![r.name], |row| {
            let state: String = row.get(1)?;
            let command: String = row.get(2)?;
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
                    cpus_per_task: 1,
                },
                row.get::<_, bool>(7)?,
            ))
        })?;
        for row in rows {
            let (start, seen) = row?;
            match running.get(&start.job) {
                Some(&is_suspended) => {
                    if start.suspended && !is_suspended {
                        resp.suspend.push(start.job);
                    } else if !start.suspended && is_suspended {
                        resp.resume.push(start.job);
                    }
                }
                None if !seen && !exited.contains(&start.job) => resp.start.push(start),
                None => {}
            }
        }
        Ok(())
    }

    /// Settles a job once every node has reported its part ended.
    fn settle_if_done(&mut self, job: u64, lost_reason: Option<String>, now: f64) -> Result<(), ApiError> {
        let row: Option<PartsEnded> = self
            .db
            .query_row(
                "SELECT SUM(done = 0), SUM(failed), MAX(end_time), MAX(exit_code), \
                 (SELECT deadline_at FROM jobs WHERE id = ?1), (SELECT cost FROM jobs WHERE id = ?1) \
                 FROM job_nodes WHERE job = ?1",
                params![job as i64],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .optional()?;
        let Some((open, failed, end, exit_code, deadline_at, cost)) = row else { return Ok(()) };
        if open > 0 {
            return Ok(());
        }
        let end = end.unwrap_or(now).min(now);
        let (state, charge, reason) = if failed > 0 {
            let why = lost_reason.or_else(|| exit_code.filter(|c| *c != 0).map(|c| format!("exit code {c}")));
            (JobState::Failed, Money::ZERO, why.or_else(|| Some("failed".into())))
        } else if end <= deadline_at {
            (JobState::Completed, Money(cost), None)
        } else {
            (
                JobState::Deadline,
                Money::ZERO,
                Some(format!("finished {:.1} s after its deadline", end - deadline_at)),
            )
        };
        self.db.execute(
            "UPDATE jobs SET end_time = ?2, exit_code = ?3 WHERE id = ?1",
            params![job as i64, end, exit_code],
        )?;
        self.finish(job, state, charge, reason, now)
    }

    /// Marks nodes that have been silent longer than the timeout down; their jobs are lost and
    /// their holds released.
    pub fn check_nodes(&mut self, now: f64) -> Result<(), ApiError> {
        let silent: Vec<(String, usize)> = self
            .nodes
            .iter()
            .filter(|(_, rt)| self.cluster.node(rt.idx).up && now - rt.last_seen > self.node_timeout)
            .map(|(n, rt)| (n.clone(), rt.idx))
            .collect();
        for (name, idx) in silent {
            tracing::warn!(node = %name, "no word for {:.0} s: marking it down", self.node_timeout);
            self.cluster.set_up(idx, false);
            self.db.execute("UPDATE nodes SET up = 0 WHERE name = ?1", params![name])?;
            let jobs: Vec<u64> = self
                .db
                .prepare("SELECT j.id FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 AND j.state IN ('PENDING','RUNNING','SUSPENDED')")?
                .query_map(params![name], |r| r.get::<_, i64>(0).map(|v| v as u64))?
                .collect::<Result<_, _>>()?;
            for job in jobs {
                self.finish(
                    job,
                    JobState::Failed,
                    Money::ZERO,
                    Some(format!("lost: node {name} went down")),
                    now,
                )?;
            }
        }
        Ok(())
    }
}

fn record_exit(tx: &rusqlite::Transaction, node: &str, e: &ExitReport, now: f64) -> rusqlite::Result<()> {
    let failed = e.error.is_some() || e.signal.is_some() || e.exit_code != Some(0);
    tx.execute(
        "UPDATE job_nodes SET seen = 1, done = 1, exit_code = ?3, failed = ?4, cpu_seconds = ?5, end_time = ?6 WHERE job = ?1 AND node = ?2",
        params![e.job as i64, node, e.exit_code.or(e.signal.map(|s| 128 + s)), failed, e.cpu_seconds, e.end_time.min(now)],
    )?;
    let cut = |s: &str| -> String {
        if s.len() <= OUTPUT_LIMIT {
            return s.to_string();
        }
        let mut i = s.len() - OUTPUT_LIMIT;
        while !s.is_char_boundary(i) {
            i += 1;
        }
        s[i..].to_string()
    };
    let mut stderr = cut(&e.stderr);
    if let Some(err) = &e.error {
        stderr.push_str(&format!("\nlibra node {node}: {err}\n"));
    }
    tx.execute(
        "UPDATE jobs SET stdout = COALESCE(stdout, '') || ?2, stderr = COALESCE(stderr, '') || ?3, truncated = truncated OR ?4, \
         start_time = COALESCE(start_time, ?5), cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
        params![e.job as i64, cut(&e.stdout), stderr, e.truncated || e.stdout.len() > OUTPUT_LIMIT, e.start_time],
    )?;
    Ok(())
}

impl Inner {
    /// Jobs the store says a node should be running now.
    pub fn active_on(&self, node: &str) -> rusqlite::Result<HashSet<u64>> {
        self.db
            .prepare_cached(
                "SELECT j.id FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 \
                 AND j.state IN ('PENDING','RUNNING','SUSPENDED')",
            )?
            .query_map(params![node], |r| r.get::<_, i64>(0).map(|v| v as u64))?
            .collect()
    }
}
