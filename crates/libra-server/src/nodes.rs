//! The node agents' side: registration, the sync exchange (reports in, commands out) and the
//! watchdog that marks silent nodes down.
//!
//! The exchange is a reconciliation, not a message queue: the node says what it runs and what
//! has ended; the server compares that with what the store says the node should run and answers
//! with the difference (start, kill, suspend, resume). Either side can restart at any moment and
//! the next exchange puts things right.

use crate::app::{Inner, NodeRt};
use crate::error::ApiError;
use crate::ledger::{self, LedgerError};
use crate::settle::{settle_job, Settled};
use libra_api::{
    ExitReport, JobState, NodeJobShare, OutputAck, OutputChunk, RegisterRequest, StartJob, Stream,
    SyncRequest, SyncResponse, OUTPUT_LIMIT,
};
use libra_core::billing::Ending;
use libra_core::{Money, NodeSpec};
use rusqlite::{params, OptionalExtension};
use std::collections::{HashMap, HashSet};

/// Memory or disk a node did not state: nothing to check a request against.
const UNSTATED: u64 = u64::MAX / 4;

/// A node as the policies see it, from what it registered (and the store keeps): the same
/// conversion on registration and on reload, so a restart changes nothing (memory 0, "not
/// stated", once came back as 0 MB and every `--mem` job was refused).
pub fn node_spec(name: &str, cpus: f64, mem_mb: u64, price_base: f64) -> NodeSpec {
    NodeSpec {
        name: name.to_string(),
        cpus,
        mem_mb: if mem_mb == 0 { UNSTATED } else { mem_mb },
        disk_mb: UNSTATED,
        price_base,
    }
}

impl Inner {
    /// Admits a node. `joining` says the caller presented the cluster's join token, `digest` is
    /// the SHA-256 digest of whatever secret it presented. The join token admits only a name
    /// that has no credential (a new node, or one an administrator forgot); a known node proves
    /// itself with its own credential. Returns the credential minted for a node admitted by the
    /// join token (sent to it once; only its digest is kept).
    pub fn register_node(
        &mut self,
        r: &RegisterRequest,
        joining: bool,
        digest: &str,
        default_price: f64,
        now: f64,
    ) -> Result<Option<String>, ApiError> {
        let stored = self.nodes.get(&r.name).and_then(|rt| rt.cred_hash.clone());
        let minted = match stored {
            Some(h) if crate::auth::same_secret(&h, digest) => None,
            Some(_) if joining => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: node '{0}' is already registered with a credential of its own, and the join token only admits new nodes. \
                     Its agent reads the credential from node.credential in its work directory; if that is lost (the machine was \
                     reinstalled), an administrator runs `libra admin node forget {0}` and the agent joins again",
                    r.name
                )))
            }
            Some(_) => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: the credential presented is not node '{}''s",
                    r.name
                )))
            }
            None if joining => Some(crate::auth::new_token()),
            None => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: node '{}' has no credential on this server (new, or forgotten by an administrator): join with the cluster's join token",
                    r.name
                )))
            }
        };
        let minted_hash = minted.as_deref().map(crate::auth::token_digest);
        self.admit(r, minted_hash, default_price, now)?;
        Ok(minted)
    }

    /// Records a node's registration (trusted: the caller was checked), with the digest of a
    /// newly minted credential.
    pub fn register(&mut self, r: &RegisterRequest, default_price: f64, now: f64) -> Result<(), ApiError> {
        self.admit(r, None, default_price, now)
    }

    fn admit(
        &mut self,
        r: &RegisterRequest,
        minted_hash: Option<String>,
        default_price: f64,
        now: f64,
    ) -> Result<(), ApiError> {
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
            "INSERT INTO nodes(name, cpus, mem_mb, mechanism, price_base, up, last_seen, account, switches_users, cred_hash) VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9) \
             ON CONFLICT(name) DO UPDATE SET cpus = excluded.cpus, mem_mb = excluded.mem_mb, mechanism = excluded.mechanism, up = 1, last_seen = excluded.last_seen, \
             account = excluded.account, switches_users = excluded.switches_users, cred_hash = COALESCE(excluded.cred_hash, nodes.cred_hash)",
            params![r.name, r.cpus, r.mem_mb as i64, r.mechanism, price, now, r.account, r.switches_users, minted_hash],
        )?;
        match self.nodes.get_mut(&r.name) {
            Some(rt) => {
                rt.mechanism = r.mechanism.clone();
                rt.account = r.account.clone();
                rt.switches_users = r.switches_users;
                rt.last_seen = now;
                if minted_hash.is_some() {
                    rt.cred_hash = minted_hash;
                }
                if (self.cluster.node(rt.idx).spec.cpus - r.cpus).abs() > 1e-9 {
                    tracing::warn!(node = %r.name, "capacity changed to {} CPUs; the new capacity applies after a server restart", r.cpus);
                }
                self.cluster.set_up(rt.idx, true);
            }
            None => {
                let idx = self.cluster.add_node(node_spec(&r.name, r.cpus, r.mem_mb, price));
                self.nodes.insert(
                    r.name.clone(),
                    NodeRt {
                        idx,
                        mechanism: r.mechanism.clone(),
                        account: r.account.clone(),
                        switches_users: r.switches_users,
                        last_seen: now,
                        shares: Vec::new(),
                        cred_hash: minted_hash,
                    },
                );
            }
        }
        tracing::info!(node = %r.name, cpus = r.cpus, mechanism = %r.mechanism, "node registered");
        Ok(())
    }

    /// Checks that a sync comes from the node it names (its own credential, `digest` being
    /// the digest of the secret presented) and reports only on jobs given to that node: a job
    /// of another node named in the report refuses the whole report, before anything changes.
    /// Jobs this server does not know at all (a store replaced under a running agent) pass, and
    /// the node is told to stop them.
    pub fn check_sync(&self, r: &SyncRequest, joining: bool, digest: &str) -> Result<(), ApiError> {
        let Some(rt) = self.nodes.get(&r.name) else {
            // Unknown: the answer is "register", which changes nothing; only agents get it.
            return if joining {
                Ok(())
            } else {
                Err(ApiError::Forbidden(format!(
                    "forbidden: '{}' is not a node of this cluster: join with the cluster's join token",
                    r.name
                )))
            };
        };
        match &rt.cred_hash {
            Some(h) if crate::auth::same_secret(h, digest) => {}
            Some(_) => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: only node '{}' may report as itself, with its own credential (the join token only admits new nodes)",
                    r.name
                )))
            }
            None => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: node '{}' has no credential on this server (forgotten by an administrator): register again",
                    r.name
                )))
            }
        }
        let mut given = self.db.prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM jobs WHERE id = ?1), EXISTS(SELECT 1 FROM job_nodes WHERE job = ?1 AND node = ?2)",
        )?;
        for job in r.running.iter().map(|j| j.job).chain(r.exited.iter().map(|e| e.job)) {
            let (exists, ours): (bool, bool) =
                given.query_row(params![job as i64, r.name], |row| Ok((row.get(0)?, row.get(1)?)))?;
            if exists && !ours {
                tracing::warn!(node = %r.name, job, "a node reported on a job it was not given; refused");
                return Err(ApiError::Forbidden(format!(
                    "forbidden: node '{}' was not given job {job}: a node may report only on its own jobs",
                    r.name
                )));
            }
        }
        Ok(())
    }

    /// Forgets a node's credential (an administrator's decision: the machine was reinstalled,
    /// stolen or retired): its next registration needs the join token, its agent's old
    /// credential is refused, and its jobs are lost as a silent node's are. Returns them.
    pub fn forget_node(&mut self, name: &str, now: f64) -> Result<Vec<u64>, ApiError> {
        let Some(rt) = self.nodes.get_mut(name) else {
            return Err(ApiError::NotFound(format!("node: '{name}' is not a node of this cluster")));
        };
        rt.cred_hash = None;
        let idx = rt.idx;
        self.db.execute("UPDATE nodes SET cred_hash = NULL WHERE name = ?1", params![name])?;
        tracing::warn!(node = %name, "an administrator forgot the node's credential");
        self.node_lost(name, idx, &format!("lost: an administrator forgot node {name}"), now)
    }

    /// Marks a node down and settles its active jobs as lost (holds released).
    fn node_lost(&mut self, name: &str, idx: usize, reason: &str, now: f64) -> Result<Vec<u64>, ApiError> {
        self.cluster.set_up(idx, false);
        self.db.execute("UPDATE nodes SET up = 0 WHERE name = ?1", params![name])?;
        let jobs: Vec<u64> = self
            .db
            .prepare("SELECT j.id FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 AND j.state IN ('PENDING','RUNNING','SUSPENDED')")?
            .query_map(params![name], |r| r.get::<_, i64>(0).map(|v| v as u64))?
            .collect::<Result<_, _>>()?;
        for &job in &jobs {
            self.finish(job, Ending::Lost, Some(reason.to_string()), now)?;
        }
        Ok(jobs)
    }

    /// Takes a node's report, records it, and answers with what the node must change. Exits
    /// are recorded and settled in one transaction; running jobs' output is stored and their
    /// holds raised as they use CPU (or they are stopped when their budget or credit runs out).
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
        let mut settled: Vec<Settled> = Vec::new();
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
        let mut running: Vec<u64> = Vec::new();
        for j in &r.running {
            match assigned.get(&j.job) {
                Some((state, _)) if state.is_active() => {
                    tx.prepare_cached(
                        "UPDATE job_nodes SET seen = 1, cpu_seconds = MAX(cpu_seconds, ?3) WHERE job = ?1 AND node = ?2",
                    )?
                    .execute(params![j.job as i64, r.name, j.cpu_seconds])?;
                    tx.prepare_cached(
                        "UPDATE jobs SET start_time = COALESCE(start_time, ?2), state = CASE state WHEN 'PENDING' THEN 'RUNNING' ELSE state END, \
                         cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
                    )?
                    .execute(params![j.job as i64, j.start_time])?;
                    for c in &j.output {
                        store_output(&tx, j.job, &r.name, c)?;
                    }
                    running.push(j.job);
                }
                _ => resp.kill.push(j.job),
            }
        }
        let mut ended: Vec<u64> = Vec::new();
        for e in &r.exited {
            if assigned.contains_key(&e.job) {
                record_exit(&tx, &r.name, e, now)?;
                // The executor's own record of the end, if it came first, has the last word.
                crate::executor::slurm::apply_slurm_end(&tx, e.job)?;
                ended.push(e.job);
            }
            resp.ack.push(e.job);
        }
        let reported: HashSet<u64> =
            r.running.iter().map(|j| j.job).chain(r.exited.iter().map(|e| e.job)).collect();
        for (job, (state, seen)) in &assigned {
            if *seen && state.is_active() && !reported.contains(job) {
                // The node ran it and no longer knows it (the agent restarted without it).
                tx.execute(
                    "UPDATE job_nodes SET done = 1, failed = 1, lost = 1 WHERE job = ?1 AND node = ?2",
                    params![*job as i64, r.name],
                )?;
                ended.push(*job);
            }
        }
        for job in ended {
            if let Some((ending, reason)) = crate::settle::parts_ending(&tx, job, now)? {
                settled.extend(settle_job(&tx, job, ending, reason, now)?);
            }
        }
        for &job in &running {
            if let Some(s) = charge_as_it_runs(&tx, job, now)? {
                resp.kill.push(job);
                settled.push(s);
            }
        }
        tx.commit()?;
        let gone: HashSet<u64> = settled.iter().map(|s| s.job).collect();
        for j in r.running.iter().filter(|j| running.contains(&j.job) && !gone.contains(&j.job)) {
            if let Some(min_cpu) = self.min_cpu(j.job)? {
                let _ = self.cluster.report_progress(j.job, min_cpu, now);
            }
        }
        for s in &settled {
            self.settled(s)?;
        }
        self.commands(r, &mut resp)?;
        resp.output_acks = self.output_acks(&r.name, &running, &gone)?;
        resp.job_control = self.policy.job_control();
        Ok(resp)
    }

    fn min_cpu(&self, job: u64) -> rusqlite::Result<Option<f64>> {
        self.db
            .prepare_cached("SELECT MIN(cpu_seconds) FROM job_nodes WHERE job = ?1")?
            .query_row(params![job as i64], |r| r.get(0))
    }

    /// Where the server's copy of each running job's output ends on this node.
    fn output_acks(
        &self,
        node: &str,
        running: &[u64],
        gone: &HashSet<u64>,
    ) -> rusqlite::Result<Vec<OutputAck>> {
        let mut st =
            self.db.prepare_cached("SELECT out_end, err_end FROM job_nodes WHERE job = ?1 AND node = ?2")?;
        let mut acks = Vec::with_capacity(running.len());
        for &job in running.iter().filter(|j| !gone.contains(j)) {
            if let Some((out, err)) = st
                .query_row(params![job as i64, node], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .optional()?
            {
                acks.push(OutputAck { job, stdout: out.max(0) as u64, stderr: err.max(0) as u64 });
            }
        }
        Ok(acks)
    }

    /// What the node must start, suspend or resume, from the store and the node's report.
    pub fn commands(&self, r: &SyncRequest, resp: &mut SyncResponse) -> Result<(), ApiError> {
        let running: HashMap<u64, bool> = r.running.iter().map(|j| (j.job, j.suspended)).collect();
        let switches = self.nodes.get(&r.name).is_some_and(|rt| rt.switches_users);
        let exited: HashSet<u64> = r.exited.iter().map(|e| e.job).collect();
        let mut st = self.db.prepare_cached(
            "SELECT j.id, j.state, j.command, COALESCE(j.reserved, j.estimate), j.submit_time, j.deadline_at, j.share, n.seen, j.mem_mb, j.procs, \
             j.cpus_per_task, j.name, n.rank, j.workdir, j.env, j.stdout_pattern, j.stderr_pattern, j.time_limit, \
             (SELECT group_concat(node, ',') FROM (SELECT node FROM job_nodes m WHERE m.job = j.id ORDER BY rank)), \
             (SELECT COALESCE(u.unix_user, u.name) FROM users u WHERE u.id = j.user_id), \
             (SELECT u.allow_root FROM users u WHERE u.id = j.user_id), j.array_id, j.array_task, j.slurm_id \
             FROM job_nodes n JOIN jobs j ON j.id = n.job WHERE n.node = ?1 AND n.done = 0 \
             AND j.state IN ('PENDING','RUNNING','SUSPENDED') AND j.waiting = 0 AND (?2 = 0 OR j.slurm_id IS NOT NULL)",
        )?;
        // Under an executor that launches jobs itself (Slurm), the node's agent adopts a job
        // only once the executor has it (its id is known).
        let rows = st.query_map(params![r.name, self.exec.launches_itself], |row| {
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
                    array_task: row
                        .get::<_, Option<i64>>(22)?
                        .map(|t| t.clamp(0, i64::from(u32::MAX)) as u32),
                    slurm_job_id: row.get::<_, Option<i64>>(23)?.map(|t| t as u64),
                },
                row.get::<_, bool>(7)?,
            ))
        })?;
        for row in rows {
            let (start, seen) = row?;
            match running.get(&start.job) {
                Some(&is_suspended) => {
                    resp.promises.push(libra_api::JobPromise {
                        job: start.job,
                        deadline_at: start.deadline_at,
                        share: start.share,
                    });
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
            self.node_lost(&name, idx, &format!("lost: node {name} went down"), now)?;
        }
        Ok(())
    }
}

fn record_exit(tx: &rusqlite::Transaction, node: &str, e: &ExitReport, now: f64) -> rusqlite::Result<()> {
    let failed = e.error.is_some() || e.signal.is_some() || e.exit_code != Some(0);
    let error = e.error.as_ref().map(|err| format!("node {node}: {err}"));
    tx.execute(
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
        store_output(tx, e.job, node, c)?;
    }
    tx.execute(
        "UPDATE jobs SET start_time = COALESCE(start_time, ?2), cpu_seconds = (SELECT SUM(cpu_seconds) FROM job_nodes WHERE job = ?1) WHERE id = ?1",
        params![e.job as i64, e.start_time],
    )?;
    Ok(())
}

/// Appends a chunk of a job's output where the stored copy ends (a chunk sent again is
/// ignored; one that starts past the end marks the copy truncated), keeping the last
/// `OUTPUT_LIMIT` bytes.
fn store_output(tx: &rusqlite::Transaction, job: u64, node: &str, c: &OutputChunk) -> rusqlite::Result<()> {
    let Ok(bytes) = c.bytes() else {
        tracing::warn!(job, node, "an output chunk that is not base64 was ignored");
        return Ok(());
    };
    let (data, start, end) = match c.stream {
        Stream::Stdout => ("out", "out_start", "out_end"),
        Stream::Stderr => ("err", "err_start", "err_end"),
    };
    let row: Option<(Option<Vec<u8>>, i64)> = tx
        .prepare_cached(&format!("SELECT {data}, {end} FROM job_nodes WHERE job = ?1 AND node = ?2"))?
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

/// A running job pays as it goes: once the CPU it has used nears what is held for it, the hold
/// is raised from the owner's credit, up to the budget. A job whose CPU has used up its budget,
/// or whose owner's credit cannot cover more, is settled (and the node told to stop it).
fn charge_as_it_runs(tx: &rusqlite::Transaction, job: u64, now: f64) -> Result<Option<Settled>, ApiError> {
    let Some((state, usage)) = crate::settle::usage(tx, job)? else { return Ok(None) };
    if !state.is_active() || usage.owed() < Money(usage.quoted.0 * 9 / 10) {
        return Ok(None);
    }
    if usage.budget_exhausted() {
        let why = format!(
            "budget exhausted: {:.1} CPU-s used of an estimated {:.1}, and the budget {} pays for no more",
            usage.cpu_seconds,
            usage.quoted_cpu(),
            usage.budget
        );
        return settle_job(tx, job, Ending::OutOfCredit, Some(why), now);
    }
    match ledger::extend_hold(tx, job, usage.hold_needed(), usage.budget, now) {
        Ok(()) | Err(LedgerError::NoHold(_)) => Ok(None),
        Err(
            e @ (LedgerError::Insufficient { .. }
            | LedgerError::AccountShort { .. }
            | LedgerError::LimitShort { .. }),
        ) => {
            // The margin ahead is a precaution: while the hold still covers what the job owes
            // (a job within its estimate, or one whose hold came from an allocation that has
            // since expired), it runs on; it is stopped once it owes more than is held.
            let held = ledger::open_hold(tx, job)?.map_or(Money::ZERO, |h| h.1);
            if usage.owed() <= held {
                return Ok(None);
            }
            settle_job(
                tx,
                job,
                Ending::OutOfCredit,
                Some(format!("stopped: it overran its estimate and {e}")),
                now,
            )
        }
        Err(e) => Err(ApiError::Internal(e.to_string())),
    }
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
