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
use crate::store;
use libra_api::{NodeJobShare, OutputAck, RegisterRequest, SyncRequest, SyncResponse};
use libra_core::billing::Ending;
use libra_core::{Money, NodeSpec};
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
    /// that has no credential (a new node, or one an administrator forgot), or whose credential
    /// was minted and never presented (the answer that carried it was lost, or the agent died
    /// before saving it: without this the name would be locked until an administrator forgot
    /// it); a known node proves itself with its own credential. Returns the credential minted for
    /// a node admitted by the join token (sent to it once; only its digest is kept).
    pub fn register_node(
        &mut self,
        r: &RegisterRequest,
        joining: bool,
        digest: &str,
        default_price: f64,
        now: f64,
    ) -> Result<Option<String>, ApiError> {
        let known = self.nodes.get(&r.name);
        let stored = known.and_then(|rt| rt.cred_hash.clone());
        let unused = known.is_some_and(|rt| rt.cred_unused);
        let minted = match stored {
            Some(h) if crate::auth::same_secret(&h, digest) => {
                self.credential_used(&r.name)?;
                None
            }
            Some(_) if joining && unused => {
                tracing::warn!(
                    node = %r.name,
                    "the node joins again before it ever used the credential minted for it (its agent did not get it, or died before saving it): a new one replaces it"
                );
                Some(crate::auth::new_token())
            }
            Some(_) if joining => {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: node '{0}' is already registered with a credential of its own, which it has used, and the join token only admits new nodes. \
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
                "cpus: {} is not accepted: give a capacity above 0 and at most 4096 CPUs (fractions allowed, e.g. 0.5)",
                libra_core::Shown(r.cpus)
            )));
        }
        let price = match self.nodes.get(&r.name) {
            Some(rt) => self.cluster.node(rt.idx).spec.price_base,
            None => default_price,
        };
        store::nodes::register(&self.db, r, price, now, minted_hash.as_deref())?;
        match self.nodes.get_mut(&r.name) {
            Some(rt) => {
                rt.mechanism = r.mechanism.clone();
                rt.account = r.account.clone();
                rt.switches_users = r.switches_users;
                rt.last_seen = now;
                if minted_hash.is_some() {
                    rt.cred_hash = minted_hash;
                    rt.cred_unused = true;
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
                        cred_unused: minted_hash.is_some(),
                        cred_hash: minted_hash,
                        drain_reason: None,
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
    pub fn check_sync(&mut self, r: &SyncRequest, joining: bool, digest: &str) -> Result<(), ApiError> {
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
            Some(h) if crate::auth::same_secret(h, digest) => self.credential_used(&r.name)?,
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
        for job in r.running.iter().map(|j| j.job).chain(r.exited.iter().map(|e| e.job)) {
            let (exists, ours) = store::nodes::given(&self.db, job, &r.name)?;
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

    /// Node `name` presented its own credential: it is used, and the join token can no longer
    /// replace it. Written once (the store is not touched for a credential already used).
    fn credential_used(&mut self, name: &str) -> Result<(), ApiError> {
        if let Some(rt) = self.nodes.get_mut(name).filter(|rt| rt.cred_unused) {
            store::nodes::credential_used(&self.db, name)?;
            rt.cred_unused = false;
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
        rt.cred_unused = false;
        let idx = rt.idx;
        store::nodes::forget_credential(&self.db, name)?;
        tracing::warn!(node = %name, "an administrator forgot the node's credential");
        self.node_lost(name, idx, &format!("lost: an administrator forgot node {name}"), now)
    }

    /// Marks a node down and settles its active jobs as lost (holds released).
    fn node_lost(&mut self, name: &str, idx: usize, reason: &str, now: f64) -> Result<Vec<u64>, ApiError> {
        self.cluster.set_up(idx, false);
        store::nodes::set_down(&self.db, name)?;
        let jobs = store::nodes::active_jobs(&self.db, name)?;
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
            store::nodes::set_up(&tx, &r.name, now)?;
        }
        let assigned = store::nodes::assigned(&tx, &r.name)?;
        let mut running: Vec<u64> = Vec::new();
        for j in &r.running {
            match assigned.get(&j.job) {
                Some((state, _)) if state.is_active() => {
                    store::nodes::running(&tx, j.job, &r.name, j.cpu_seconds, j.start_time)?;
                    for c in &j.output {
                        store::nodes::append_output(&tx, j.job, &r.name, c)?;
                    }
                    running.push(j.job);
                }
                _ => {
                    // Settled already (cancelled, out of credit) and running until this kill:
                    // the CPU it used since the settlement is billed.
                    crate::settle::cpu_after_settling(&tx, j.job, &r.name, j.cpu_seconds, now)?;
                    store::nodes::running_after_settling(&tx, j.job, &r.name)?;
                    resp.kill.push(j.job)
                }
            }
        }
        let mut ended: Vec<u64> = Vec::new();
        let mut drain: Option<String> = None;
        for e in &r.exited {
            if assigned.contains_key(&e.job) {
                if e.node_fault && drain.is_none() && self.cluster.node(idx).accepting {
                    let why = format!(
                        "the server drained it: it could not start job {}: {}; undrain it (libra admin node undrain {}) once mended",
                        e.job,
                        e.error.as_deref().unwrap_or("no reason given"),
                        r.name
                    );
                    drain_node(&tx, &r.name, &why, now)?;
                    drain = Some(why);
                }
                store::nodes::record_exit(&tx, &r.name, e, now)?;
                // The executor's own record of the end, if it came first, has the last word.
                crate::executor::slurm::apply_slurm_end(&tx, e.job)?;
                ended.push(e.job);
            } else {
                crate::settle::cpu_after_settling(&tx, e.job, &r.name, e.cpu_seconds, now)?;
                store::nodes::ended_after_settling(&tx, e.job, &r.name, e.end_time.min(now))?;
            }
            resp.ack.push(e.job);
        }
        let reported: HashSet<u64> =
            r.running.iter().map(|j| j.job).chain(r.exited.iter().map(|e| e.job)).collect();
        store::nodes::forgotten_after_settling(&tx, &r.name, &reported, now)?;
        for (job, (state, seen)) in &assigned {
            if *seen && state.is_active() && !reported.contains(job) {
                // The node ran it and no longer knows it (the agent restarted without it).
                store::nodes::part_lost(&tx, *job, &r.name)?;
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
        if let Some(quota) = self.output_quota {
            // Whose kept output this report added to: each is held to the quota, once the
            // jobs that ended here are settled (and so among those whose output may go).
            let owners: HashSet<i64> = r
                .running
                .iter()
                .filter(|j| !j.output.is_empty())
                .map(|j| j.job)
                .chain(r.exited.iter().filter(|e| !e.output.is_empty()).map(|e| e.job))
                .filter_map(|job| store::job_owner(&tx, job).transpose())
                .collect::<Result<_, _>>()?;
            for user in owners {
                let n = store::hold_output_to_quota(&tx, user, quota, now)?;
                if n > 0 {
                    tracing::info!(user, jobs = n, "a user's kept output passed output_quota_mb: the output of their jobs that ended first was removed");
                }
            }
        }
        tx.commit()?;
        if let Some(why) = drain {
            // Every job placed on it would fail the same way: new ones go elsewhere.
            self.cluster.set_accepting(idx, false);
            tracing::warn!(node = %r.name, "{why}");
            if let Some(rt) = self.nodes.get_mut(&r.name) {
                rt.drain_reason = Some(why);
            }
        }
        let gone: HashSet<u64> = settled.iter().map(|s| s.job).collect();
        for j in r.running.iter().filter(|j| running.contains(&j.job) && !gone.contains(&j.job)) {
            if let Some(min_cpu) = store::nodes::min_cpu(&self.db, j.job)? {
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

    /// Where the server's copy of each running job's output ends on this node.
    fn output_acks(
        &self,
        node: &str,
        running: &[u64],
        gone: &HashSet<u64>,
    ) -> rusqlite::Result<Vec<OutputAck>> {
        let mut acks = Vec::with_capacity(running.len());
        for &job in running.iter().filter(|j| !gone.contains(j)) {
            if let Some((out, err)) = store::nodes::output_end(&self.db, job, node)? {
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
        // Under an executor that launches jobs itself (Slurm), the node's agent adopts a job
        // only once the executor has it (its id is known).
        let rows = store::nodes::to_run(&self.db, &r.name, self.exec.launches_itself, switches)?;
        for (start, seen) in rows {
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
        Err(e) => Err(ApiError::from(e)),
    }
}

impl Inner {
    /// Jobs the store says a node should be running now.
    pub fn active_on(&self, node: &str) -> rusqlite::Result<HashSet<u64>> {
        Ok(store::nodes::active_jobs(&self.db, node)?.into_iter().collect())
    }
}

/// Drains `node` for a fault of its own, in the sync's transaction, with the reason in the
/// audit log (a server's entry, as its own retention's are): an administrator finds why there.
fn drain_node(tx: &rusqlite::Connection, node: &str, why: &str, now: f64) -> rusqlite::Result<()> {
    store::nodes::set_drained(tx, node, true, Some(why))?;
    store::audit::append(
        tx,
        &store::audit::Entry {
            time: now,
            caller: None,
            address: None,
            method: "SERVER".into(),
            path: format!("/api/admin/nodes/{node}/drain"),
            status: 200,
            detail: Some(why.to_string()),
        },
    )
}
