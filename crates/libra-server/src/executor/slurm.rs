//! The Slurm executor: Libra admits, prices and holds credit, then hands each admitted job to
//! Slurm as its owner, on the node its policy chose:
//!
//! `sbatch --parsable --uid=U --gid=G -p PARTITION -w NODE --oversubscribe -c <node CPUs>
//! --mem=M --time=<minutes to the deadline> --comment "libra job=ID" --chdir DIR -o OUT -e ERR`
//!
//! It works as a reconciliation, like the agents' exchange: a loop compares the store with what
//! it has carried out (recorded in the store too: the Slurm job id, scancel sent, suspended) and
//! does the difference, off the async workers and after the admission's commit. A crash
//! between the commit and sbatch, or between sbatch and recording its id, is put right on the
//! next start: a job admitted with no Slurm id is looked up by its comment in squeue before it
//! is submitted again.
//!
//! A job ends when Slurm says so (the jobcomp record, `Inner::slurm_jobcomp`) and its node's
//! agent has reported the CPU it measured; whichever comes second settles it. An agent that
//! never reports is waited for `jobcomp_grace` seconds, then the CPU it last reported is used.
//! A job that leaves Slurm's queue with no jobcomp record (jobcomp not configured, or the
//! record lost) is settled the same way after the grace period.

use super::{ExecLimits, Executor};
use crate::app::{now, App, Inner};
use crate::config::{ExecutorConfig, ExecutorKind};
use crate::error::ApiError;
use crate::settle::{parts_ending, settle_job};
use libra_api::{SlurmJobComp, SlurmJobCompAck};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The comment that names a Libra job in Slurm (job_submit.lua accepts only jobs carrying it).
pub const COMMENT_PREFIX: &str = "libra job=";

/// How often the loop looks even when nothing woke it (Slurm's queue changes on its own).
const ROUND: Duration = Duration::from_secs(1);

pub struct Slurm {
    config: ExecutorConfig,
    cli: SlurmCli,
    wake: Notify,
    /// Look jobs up by their comment before submitting them (at start, and after an sbatch
    /// whose outcome is unknown).
    lookup: AtomicBool,
    /// Active jobs Slurm's queue no longer shows, and since when (the grace period).
    missing: Mutex<HashMap<u64, f64>>,
}

impl Slurm {
    pub fn new(config: ExecutorConfig) -> Slurm {
        Slurm {
            cli: SlurmCli { bin_dir: config.bin_dir.clone(), partition: config.partition.clone() },
            config,
            wake: Notify::new(),
            lookup: AtomicBool::new(true),
            missing: Mutex::new(HashMap::new()),
        }
    }
}

impl Executor for Slurm {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Slurm
    }

    fn limits(&self) -> ExecLimits {
        ExecLimits {
            launches_itself: true,
            jobs_per_node: Some(self.config.jobs_per_node as usize),
            default_mem_mb: self.config.default_mem_mb,
        }
    }

    fn changed(&self) {
        // A permit is kept if the loop is busy: the change is seen by its next round.
        self.wake.notify_one();
    }

    fn spawn(self: Arc<Self>, app: Arc<App>) -> Option<tokio::task::JoinHandle<()>> {
        Some(tokio::spawn(async move {
            loop {
                let _ = tokio::time::timeout(ROUND, self.wake.notified()).await;
                let (me, a) = (self.clone(), app.clone());
                // sbatch and friends block (20-50 ms each, more when slurmctld is busy).
                match tokio::task::spawn_blocking(move || me.reconcile(&a)).await {
                    Ok(Ok(true)) => app.work.notify_waiters(),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => tracing::error!("slurm executor: {e}"),
                    Err(e) => tracing::error!("slurm executor: {e}"),
                }
            }
        }))
    }
}

/// An admitted job as sbatch needs it.
#[derive(Debug, Clone)]
pub struct Launch {
    pub job: u64,
    pub user: String,
    pub allow_root: bool,
    pub nodes: Vec<String>,
    pub node_cpus: f64,
    pub mem_mb: u64,
    pub deadline_at: f64,
    pub time_limit: Option<f64>,
    pub command: Vec<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub workdir: Option<String>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub name: Option<String>,
    pub cpus_per_task: u32,
    pub array_id: Option<u64>,
    pub array_task: Option<u32>,
}

/// What the store says Slurm should be doing that it has not done yet.
#[derive(Debug, Default)]
struct Todo {
    submit: Vec<Launch>,
    cancel: Vec<(u64, u64)>,
    suspend: Vec<(u64, u64)>,
    resume: Vec<(u64, u64)>,
    /// Every active job with a Slurm id: (Libra job, Slurm job).
    active: Vec<(u64, u64)>,
}

impl Slurm {
    /// One round: submit, cancel, suspend and resume what the store asks for; settle what
    /// Slurm has finished. Returns whether the agents have something new (a Slurm id).
    fn reconcile(&self, app: &App) -> Result<bool, ApiError> {
        let todo = {
            let g = app.lock();
            todo(&g)?
        };
        let mut new_ids = false;
        if !todo.submit.is_empty() {
            let known = if self.lookup.swap(false, Ordering::SeqCst) {
                match self.cli.libra_jobs() {
                    Ok(k) => k,
                    Err(e) => {
                        self.lookup.store(true, Ordering::SeqCst);
                        return Err(ApiError::Internal(format!("squeue: {e}")));
                    }
                }
            } else {
                HashMap::new()
            };
            for l in &todo.submit {
                let outcome = match known.get(&l.job) {
                    Some(&id) => {
                        tracing::info!(job = l.job, slurm_job = id, "found in Slurm's queue by its comment");
                        Ok(id)
                    }
                    None => self.cli.sbatch(l, now()),
                };
                match outcome {
                    Ok(id) => {
                        let g = app.lock();
                        crate::store::slurm::set_id(&g.db, l.job, id)?;
                        tracing::info!(job = l.job, slurm_job = id, node = %l.nodes.join(","), "handed to Slurm");
                        new_ids = true;
                        drop(g);
                    }
                    Err(SlurmError::Refused(why)) => {
                        tracing::warn!(job = l.job, "Slurm refused the job: {why}");
                        app.lock().executor_refused(l.job, &format!("Slurm refused it: {why}"), now())?;
                        new_ids = true;
                    }
                    Err(SlurmError::Unavailable(why)) => {
                        // Submitted or not, we cannot tell: look it up before trying again.
                        self.lookup.store(true, Ordering::SeqCst);
                        tracing::warn!(job = l.job, "sbatch failed, trying again: {why}");
                    }
                }
            }
        }
        for &(job, id) in &todo.cancel {
            match self.cli.run("scancel", &[&id.to_string()]) {
                Ok(_) | Err(SlurmError::Refused(_)) => {
                    // A held job gives its Slurm job up: its release is submitted anew.
                    crate::store::slurm::cancelled(&app.lock().db, job)?;
                    tracing::info!(job, slurm_job = id, "scancel");
                }
                Err(e) => tracing::warn!(job, slurm_job = id, "scancel: {e}"),
            }
        }
        for (list, verb, flag) in [(&todo.suspend, "suspend", true), (&todo.resume, "resume", false)] {
            for &(job, id) in list {
                // A job Slurm has not started cannot be suspended: recorded anyway, so it is not
                // tried every round (the agent freezes what it adopts).
                if let Err(e) = self.cli.run("scontrol", &[verb, &id.to_string()]) {
                    tracing::warn!(job, slurm_job = id, "scontrol {verb}: {e}");
                }
                crate::store::slurm::set_suspended(&app.lock().db, job, flag)?;
            }
        }
        self.settle_missing(app, &todo.active)?;
        let grace = self.config.jobcomp_grace;
        app.lock().slurm_settle_after_grace(now(), grace)?;
        Ok(new_ids)
    }

    /// Active jobs Slurm's queue no longer shows and no jobcomp record has ended: after the
    /// grace period, Slurm's end is taken as now and the job settled from its agent's report.
    fn settle_missing(&self, app: &App, active: &[(u64, u64)]) -> Result<(), ApiError> {
        if active.is_empty() {
            self.missing.lock().unwrap_or_else(|p| p.into_inner()).clear();
            return Ok(());
        }
        let queued = match self.cli.queued_ids() {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!("squeue: {e}");
                return Ok(());
            }
        };
        let t = now();
        let mut missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        missing.retain(|job, _| active.iter().any(|(j, _)| j == job));
        for &(job, id) in active {
            if queued.contains(&id) {
                missing.remove(&job);
                continue;
            }
            let since = *missing.entry(job).or_insert(t);
            if t - since >= self.config.jobcomp_grace {
                tracing::warn!(
                    job,
                    slurm_job = id,
                    "gone from Slurm's queue with no completion record: settled from its agent's report"
                );
                let mut g = app.lock();
                crate::store::slurm::gone(&g.db, job, t)?;
                g.slurm_settle_after_grace(t, 0.0)?;
                missing.remove(&job);
            }
        }
        Ok(())
    }
}

fn todo(g: &Inner) -> Result<Todo, ApiError> {
    use crate::store::slurm::{self as q, Pending};
    Ok(Todo {
        submit: q::launches(&g.db)?,
        cancel: q::pending(&g.db, Pending::Cancel)?,
        suspend: q::pending(&g.db, Pending::Suspend)?,
        resume: q::pending(&g.db, Pending::Resume)?,
        active: q::pending(&g.db, Pending::Active)?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// Slurm answered no (a bad account, a limit): trying again would not help.
    #[error("{0}")]
    Refused(String),
    /// Slurm could not be asked (slurmctld down, a timeout, the program missing).
    #[error("{0}")]
    Unavailable(String),
}

/// Slurm's commands, run as the server's account (root, or SlurmUser: `--uid` needs one of
/// them).
#[derive(Debug, Clone)]
pub struct SlurmCli {
    pub bin_dir: Option<PathBuf>,
    pub partition: String,
}

impl SlurmCli {
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        }
    }

    fn command(&self, name: &str) -> Command {
        let mut c = Command::new(self.program(name));
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// Runs a Slurm command; its standard output on success.
    pub fn run(&self, name: &str, args: &[&str]) -> Result<String, SlurmError> {
        finish(name, self.command(name).args(args).output())
    }

    /// Every job of Libra's partition Slurm still has: Slurm job ids.
    pub fn queued_ids(&self) -> Result<std::collections::HashSet<u64>, SlurmError> {
        Ok(self
            .run("squeue", &["-h", "-p", &self.partition, "-o", "%i"])?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// Libra's jobs Slurm has (queued, running, or ended within MinJobAge): Libra job id ->
    /// Slurm job id, from their comments. Cancelled ones are left out: Libra cancelled them
    /// (a hold gives up the Slurm job; its release submits a new one).
    pub fn libra_jobs(&self) -> Result<HashMap<u64, u64>, SlurmError> {
        let mut found: HashMap<u64, u64> = HashMap::new();
        for l in self.run("squeue", &["-h", "-t", "all", "-p", &self.partition, "-o", "%i|%T|%k"])?.lines() {
            let mut f = l.splitn(3, '|');
            let (Some(id), Some(state), Some(comment)) = (f.next(), f.next(), f.next()) else { continue };
            let (Some(job), Ok(id)) = (libra_job_of(comment), id.trim().parse::<u64>()) else { continue };
            if state.trim() != "CANCELLED" {
                let e = found.entry(job).or_insert(id);
                *e = (*e).max(id);
            }
        }
        Ok(found)
    }

    /// Submits `l` as its owner; returns the Slurm job id.
    pub fn sbatch(&self, l: &Launch, now: f64) -> Result<u64, SlurmError> {
        let (uid, gid) = account(&l.user)?;
        if uid == 0 && !l.allow_root {
            return Err(SlurmError::Refused(format!(
                "the job's owner maps to the Unix account {} (root), and no administrator allowed it to run as root",
                l.user
            )));
        }
        let args = sbatch_args(l, uid, gid, &self.partition, now);
        let mut cmd = self.command("sbatch");
        cmd.args(&args).stdin(Stdio::piped()).env_clear().envs(environment(l));
        let mut child = cmd
            .spawn()
            .map_err(|e| SlurmError::Unavailable(format!("{}: {e}", self.program("sbatch").display())))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(script(l).as_bytes());
        }
        let out = finish("sbatch", child.wait_with_output())?;
        let first = out.trim().split(';').next().unwrap_or_default();
        first.parse().map_err(|_| {
            SlurmError::Unavailable(format!("sbatch --parsable printed '{}', not a job id", out.trim()))
        })
    }
}

fn finish(name: &str, out: std::io::Result<std::process::Output>) -> Result<String, SlurmError> {
    let out = out.map_err(|e| SlurmError::Unavailable(format!("{name}: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    // Slurm's own words for "the controller cannot be reached".
    let transient =
        ["Unable to contact", "Socket timed out", "Connection refused", "Zero Bytes", "try again"];
    if transient.iter().any(|t| stderr.contains(t)) || out.status.code().is_none() {
        Err(SlurmError::Unavailable(format!("{name}: {stderr}")))
    } else {
        Err(SlurmError::Refused(format!("{name}: {stderr}")))
    }
}

/// The Libra job a Slurm comment names.
pub fn libra_job_of(comment: &str) -> Option<u64> {
    let rest = comment.trim().strip_prefix(COMMENT_PREFIX)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The account's uid and primary gid.
fn account(user: &str) -> Result<(u32, u32), SlurmError> {
    let c = std::ffi::CString::new(user)
        .map_err(|_| SlurmError::Refused(format!("'{user}' is not a Unix account name")))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, the buffer outlives it, and only the
    // numeric fields are read back.
    let rc =
        unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return Err(SlurmError::Refused(format!(
            "the job's owner has no Unix account '{user}' on the server's host: an administrator maps the user to one (`libra admin user unix-user`)"
        )));
    }
    Ok((pw.pw_uid, pw.pw_gid))
}

/// `%j` (Libra's job id), `%x` (name), `%A`/`%a` (array) replaced; `%N`, `%t`, `%%` and the
/// rest left for Slurm, which reads them the same way.
pub fn expand(pattern: &str, l: &Launch) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('j') => out.push_str(&l.job.to_string()),
            Some('x') => out.push_str(&job_name(l)),
            Some('A') if l.array_id.is_some() => out.push_str(&l.array_id.unwrap_or_default().to_string()),
            Some('a') if l.array_task.is_some() => {
                out.push_str(&l.array_task.unwrap_or_default().to_string())
            }
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

fn job_name(l: &Launch) -> String {
    l.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        l.command
            .first()
            .and_then(|p| std::path::Path::new(p).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "job".into())
    })
}

/// sbatch's options for `l` (its script comes on standard input).
pub fn sbatch_args(l: &Launch, uid: u32, gid: u32, partition: &str, now: f64) -> Vec<String> {
    // Slurm kills a job at its time limit: the deadline, or the user's own limit if sooner.
    let mut secs = (l.deadline_at - now).max(60.0);
    if let Some(t) = l.time_limit {
        secs = secs.min(t.max(60.0));
    }
    let minutes = (secs / 60.0).ceil() as u64;
    let workdir = l.workdir.clone().unwrap_or_else(|| "/tmp".into());
    let stdout = expand(l.stdout.as_deref().unwrap_or("libra-%j.out"), l);
    let mut a = vec![
        "--parsable".to_string(),
        format!("--uid={uid}"),
        format!("--gid={gid}"),
        format!("--partition={partition}"),
        format!("--nodes={}", l.nodes.len().max(1)),
        format!("--nodelist={}", l.nodes.join(",")),
        "--oversubscribe".into(),
        // Every job may use the whole node: Libra's share (the agent's CPU quota) divides it.
        format!("--cpus-per-task={}", l.node_cpus.ceil().max(1.0) as u64),
        format!("--time={minutes}"),
        format!("--comment={COMMENT_PREFIX}{}", l.job),
        format!("--job-name={}", job_name(l)),
        format!("--chdir={workdir}"),
        format!("--output={stdout}"),
    ];
    if l.mem_mb > 0 {
        a.push(format!("--mem={}", l.mem_mb));
    }
    if let Some(e) = &l.stderr {
        a.push(format!("--error={}", expand(e, l)));
    }
    a
}

/// The batch script: the job's command, each word quoted for the shell. A job on several
/// nodes runs its command on each (one task per node, as Libra's own agents do), through srun.
pub fn script(l: &Launch) -> String {
    let words: Vec<String> = l.command.iter().map(|w| format!("'{}'", w.replace('\'', "'\\''"))).collect();
    let launcher = if l.nodes.len() > 1 {
        format!("srun --nodes={0} --ntasks={0} --ntasks-per-node=1 ", l.nodes.len())
    } else {
        String::new()
    };
    format!(
        "#!/bin/sh\n# Libra job {}: submitted through Libra (libra submit)\nexec {launcher}{}\n",
        l.job,
        words.join(" ")
    )
}

/// sbatch's environment, which Slurm gives the job (`--export=ALL`): what was captured at
/// submission (without SLURM_* and SBATCH_*: sbatch reads those as its own options), then the
/// `LIBRA_*` variables the agent sets too. Nothing of the server's own, but the Slurm
/// configuration's location.
pub fn environment(l: &Launch) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into());
    if let Some(captured) = &l.env {
        env.extend(
            captured
                .iter()
                .filter(|(k, _)| !k.starts_with("SLURM_") && !k.starts_with("SBATCH_"))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    if let Ok(conf) = std::env::var("SLURM_CONF") {
        env.insert("SLURM_CONF".into(), conf);
    }
    let libra = [
        ("LIBRA_JOB_ID", l.job.to_string()),
        ("LIBRA_JOB_NAME", job_name(l)),
        ("LIBRA_NNODES", l.nodes.len().max(1).to_string()),
        ("LIBRA_NODELIST", l.nodes.join(",")),
        ("LIBRA_DEADLINE", format!("{:.0}", l.deadline_at)),
        ("LIBRA_SUBMIT_DIR", l.workdir.clone().unwrap_or_else(|| "/tmp".into())),
        ("LIBRA_CPUS_PER_TASK", l.cpus_per_task.to_string()),
    ];
    env.extend(libra.into_iter().map(|(k, v)| (k.to_string(), v)));
    if let (Some(a), Some(t)) = (l.array_id, l.array_task) {
        env.insert("LIBRA_ARRAY_JOB_ID".into(), a.to_string());
        env.insert("LIBRA_ARRAY_TASK_ID".into(), t.to_string());
    }
    env.into_iter().collect()
}

/// Slurm's job states (`enum job_states`), the base state without its flag bits.
fn state_name(state: u32) -> &'static str {
    match state & 0xff {
        0 => "PENDING",
        1 => "RUNNING",
        2 => "SUSPENDED",
        3 => "COMPLETED",
        4 => "CANCELLED",
        5 => "FAILED",
        6 => "TIMEOUT",
        7 => "NODE_FAIL",
        8 => "PREEMPTED",
        9 => "BOOT_FAIL",
        10 => "DEADLINE",
        11 => "OUT_OF_MEMORY",
        _ => "UNKNOWN",
    }
}

/// Puts Slurm's end (jobcomp) into the job's parts: exit code, failure, time limit, end time.
/// Nothing when Slurm has not reported yet. The agent cannot know the exit code of a job it
/// did not start; Slurm does.
pub fn apply_slurm_end(tx: &rusqlite::Connection, job: u64) -> rusqlite::Result<()> {
    let row = crate::store::slurm::end(tx, job)?;
    let Some((state, status, end)) = row else { return Ok(()) };
    let state = state.unwrap_or_else(|| "UNKNOWN".into());
    // A wait status: the signal in the low bits, else the exit code above them.
    let code = status.map(|s| if s & 0x7f != 0 { 128 + (s & 0x7f) } else { (s >> 8) & 0xff });
    let failed = state != "COMPLETED" || code.is_some_and(|c| c != 0);
    let error = match state.as_str() {
        "COMPLETED" | "FAILED" | "TIMEOUT" => None,
        "UNKNOWN" => code.is_none().then(|| "Slurm's completion record never came".to_string()),
        other => Some(format!("Slurm ended it: {other}")),
    };
    crate::store::slurm::end_parts(
        tx,
        job,
        &crate::store::slurm::PartsEnd {
            code,
            failed: failed || (state == "UNKNOWN" && code.is_none()),
            timed_out: state == "TIMEOUT",
            error,
            end,
            lost: state == "NODE_FAIL",
        },
    )
}

impl Inner {
    /// Slurm's completion record of a job: recorded, and the job settled if its agent has
    /// reported its end too (else when it does, or after the grace period).
    /// `partition`: Libra's (`[executor] partition`).
    pub fn slurm_jobcomp(
        &mut self,
        rec: &SlurmJobComp,
        partition: &str,
        now: f64,
    ) -> Result<SlurmJobCompAck, ApiError> {
        let tx = self.db.transaction()?;
        let mut job = crate::store::slurm::job_of(&tx, rec.job_id)?;
        let ours = rec.partition.as_deref().is_some_and(|p| p.split(',').any(|p| p == partition));
        if job.is_none() && ours && state_name(rec.job_state) != "CANCELLED" {
            // Submitted just before a crash, its id never recorded: the comment names it (only
            // Libra submits to its partition, and nobody may change a comment there). A
            // cancelled one is a held job's old Slurm job.
            if let Some(j) = rec.comment.as_deref().and_then(libra_job_of) {
                let n = crate::store::slurm::set_id(&tx, j, rec.job_id)?;
                job = (n > 0).then_some(j);
            }
        }
        let Some(job) = job else {
            tx.commit()?;
            return Ok(SlurmJobCompAck { job: None, settled: false });
        };
        let end = if rec.end > 0.0 { rec.end.min(now) } else { now };
        let start = (rec.start > 0.0).then_some(rec.start);
        crate::store::slurm::record_end(&tx, job, state_name(rec.job_state), rec.exit_code, start, end, now)?;
        apply_slurm_end(&tx, job)?;
        let mut settled = None;
        if let Some((ending, reason)) = parts_ending(&tx, job, now)? {
            settled = settle_job(&tx, job, ending, reason, now)?;
        }
        tx.commit()?;
        if let Some(s) = &settled {
            self.settled(s)?;
        }
        tracing::info!(
            job,
            slurm_job = rec.job_id,
            state = state_name(rec.job_state),
            settled = settled.is_some(),
            "Slurm reported the job's end"
        );
        Ok(SlurmJobCompAck { job: Some(job), settled: settled.is_some() })
    }

    /// Jobs Slurm ended more than `grace` seconds ago whose agent never reported its end:
    /// settled with the CPU it last reported.
    pub fn slurm_settle_after_grace(&mut self, now: f64, grace: f64) -> Result<usize, ApiError> {
        let late = crate::store::slurm::reported_by(&self.db, now - grace)?;
        if late.is_empty() {
            return Ok(0);
        }
        let tx = self.db.transaction()?;
        let mut settled = Vec::new();
        for job in late {
            crate::store::slurm::parts_done(&tx, job)?;
            apply_slurm_end(&tx, job)?;
            if let Some((ending, reason)) = parts_ending(&tx, job, now)? {
                settled.extend(settle_job(&tx, job, ending, reason, now)?);
            }
        }
        tx.commit()?;
        for s in &settled {
            tracing::warn!(job = s.job, "settled from Slurm's record and the CPU its agent last reported");
            self.settled(s)?;
        }
        Ok(settled.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libra_core::Money;
    use rusqlite::params;

    fn launch() -> Launch {
        Launch {
            job: 42,
            user: "alice".into(),
            allow_root: false,
            nodes: vec!["n1".into()],
            node_cpus: 2.0,
            mem_mb: 300,
            deadline_at: 1000.0,
            time_limit: None,
            command: vec!["/bin/echo".into(), "it's".into()],
            env: Some(
                [("SBATCH_PARTITION".to_string(), "other".to_string()), ("FOO".into(), "1".into())].into(),
            ),
            workdir: Some("/home/alice".into()),
            stdout: Some("out-%j-%N-%%.txt".into()),
            stderr: None,
            name: None,
            cpus_per_task: 1,
            array_id: None,
            array_task: None,
        }
    }

    #[test]
    fn sbatch_gets_the_owner_the_node_the_deadline_and_the_comment() {
        let a = sbatch_args(&launch(), 1001, 1002, "libra", 879.0);
        for want in [
            "--uid=1001",
            "--gid=1002",
            "--partition=libra",
            "--nodelist=n1",
            "--oversubscribe",
            "--cpus-per-task=2",
            "--mem=300",
            // 121 s to the deadline: 3 minutes, rounded up.
            "--time=3",
            "--comment=libra job=42",
            "--chdir=/home/alice",
            "--output=out-42-%N-%%.txt",
            "--job-name=echo",
        ] {
            assert!(a.contains(&want.to_string()), "{want} missing from {a:?}");
        }
        // A time limit shorter than the deadline wins.
        let l = Launch { time_limit: Some(61.0), ..launch() };
        assert!(sbatch_args(&l, 1, 1, "p", 0.0).contains(&"--time=2".to_string()));
        assert_eq!(script(&launch()).lines().last().unwrap(), r"exec '/bin/echo' 'it'\''s'");
        // On several nodes the command runs on each, one task per node.
        let two = Launch { nodes: vec!["n1".into(), "n2".into()], ..launch() };
        assert!(script(&two).contains("exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 '/bin/echo'"));
        let env = environment(&launch());
        assert!(env.contains(&("FOO".into(), "1".into())));
        assert!(env.contains(&("LIBRA_JOB_ID".into(), "42".into())));
        assert!(!env.iter().any(|(k, _)| k == "SBATCH_PARTITION"), "SBATCH_* would change sbatch's options");
    }

    #[test]
    fn the_comment_names_the_libra_job() {
        assert_eq!(libra_job_of("libra job=17"), Some(17));
        assert_eq!(libra_job_of("libra job=17 share=0.5"), Some(17));
        assert_eq!(libra_job_of("my job=17"), None);
        assert_eq!(libra_job_of("libra job=x"), None);
    }

    fn slurm_app(dir: &std::path::Path) -> App {
        App::open(crate::config::Config {
            db: dir.join("t.db"),
            join_token: "join-token".into(),
            sync_full: false,
            executor: ExecutorConfig {
                kind: ExecutorKind::Slurm,
                jobcomp_token_file: Some(dir.join("jobcomp.token")),
                jobcomp_grace: 30.0,
                ..ExecutorConfig::default()
            },
            ..crate::config::Config::default()
        })
        .unwrap()
    }

    fn register(app: &App, name: &str, now: f64) {
        app.lock()
            .register(
                &libra_api::RegisterRequest {
                    name: name.into(),
                    cpus: 2.0,
                    mem_mb: 4000,
                    mechanism: "slurm".into(),
                    account: "root".into(),
                    switches_users: true,
                },
                1.0,
                now,
            )
            .unwrap();
    }

    fn charges(g: &Inner, job: u64) -> i64 {
        g.db.query_row(
            "SELECT COUNT(*) FROM ledger WHERE job = ?1 AND kind = 'charge'",
            params![job as i64],
            |r| r.get(0),
        )
        .unwrap()
    }

    fn comp(slurm_id: u64, state: u32, status: i64, end: f64) -> SlurmJobComp {
        SlurmJobComp {
            job_id: slurm_id,
            job_state: state,
            exit_code: status,
            start: 0.0,
            end,
            comment: None,
            partition: Some("libra".into()),
        }
    }

    impl Inner {
        fn slurm_jobcomp_t(&mut self, rec: &SlurmJobComp, now: f64) -> Result<SlurmJobCompAck, ApiError> {
            self.slurm_jobcomp(rec, "libra", now)
        }
    }

    fn agent_exit(job: u64, cpu: f64, start: f64, end: f64) -> libra_api::ExitReport {
        // The agent adopted the job: it measured its CPU but cannot know its exit code.
        libra_api::ExitReport { exit_code: None, ..crate::sched::tests::exit(job, cpu, start, end) }
    }

    #[test]
    fn a_slurm_job_is_adopted_once_it_has_an_id_and_settled_once_by_whichever_report_comes_second() {
        use crate::sched::tests::{req, sync, user};
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = slurm_app(dir.path());
        register(&app, "n1", now);
        let u = user(&app, "u", 100_000);
        let mut g = app.lock();
        let j = g.submit(&u, &req(10.0, 100.0, 1000), now).unwrap();
        assert_eq!(j.state, libra_api::JobState::Pending, "{j:?}");
        // Slurm would give a job without --mem the whole node: it gets the default, counted.
        let mem: i64 =
            g.db.query_row("SELECT mem_mb FROM jobs WHERE id = ?1", params![j.id as i64], |r| r.get(0))
                .unwrap();
        assert_eq!(mem, 512);
        // Not handed to the agent before Slurm has it.
        let r = g.sync(&sync("n1", vec![], vec![]), now).unwrap();
        assert!(r.start.is_empty(), "{r:?}");
        assert_eq!(todo(&g).unwrap().submit.len(), 1);
        g.db.execute("UPDATE jobs SET slurm_id = 77 WHERE id = ?1", params![j.id as i64]).unwrap();
        assert!(todo(&g).unwrap().submit.is_empty());
        let r = g.sync(&sync("n1", vec![], vec![]), now).unwrap();
        assert_eq!(r.start.len(), 1);
        assert_eq!(r.start[0].slurm_job_id, Some(77));
        assert_eq!(crate::store::job(&g.db, j.id).unwrap().unwrap().slurm_job_id, Some(77));
        // The agent's exit first: nothing is settled until Slurm reports.
        g.sync(&sync("n1", vec![], vec![agent_exit(j.id, 4.0, now, now + 5.0)]), now + 5.0).unwrap();
        let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
        assert!(d.state.is_active(), "{d:?}");
        assert_eq!(charges(&g, j.id), 0);
        // Slurm's record (COMPLETED, exit 0) settles it, with the agent's CPU.
        let ack = g.slurm_jobcomp_t(&comp(77, 3 | 32768, 0, now + 5.0), now + 6.0).unwrap();
        assert_eq!((ack.job, ack.settled), (Some(j.id), true));
        let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
        assert_eq!(d.state, libra_api::JobState::Completed, "{d:?}");
        assert_eq!(d.exit_code, Some(0));
        assert!(d.charged > Money::ZERO && d.charged <= d.budget, "{d:?}");
        assert_eq!(d.cpu_seconds, 4.0);
        // A record sent twice settles nothing twice.
        let ack = g.slurm_jobcomp_t(&comp(77, 3, 0, now + 5.0), now + 7.0).unwrap();
        assert!(!ack.settled);
        assert_eq!(charges(&g, j.id), 1);
        assert_eq!(crate::ledger::balance(&g.db, u.id).unwrap().held, Money::ZERO);

        // Slurm's record first (exit 3): the agent's final report settles it, failed, exit 3.
        let j = g.submit(&u, &req(10.0, 100.0, 1000), now).unwrap();
        g.db.execute("UPDATE jobs SET slurm_id = 78 WHERE id = ?1", params![j.id as i64]).unwrap();
        g.sync(&sync("n1", vec![], vec![]), now).unwrap();
        let ack = g.slurm_jobcomp_t(&comp(78, 5, 3 << 8, now + 3.0), now + 3.0).unwrap();
        assert_eq!((ack.job, ack.settled), (Some(j.id), false));
        g.sync(&sync("n1", vec![], vec![agent_exit(j.id, 2.0, now, now + 3.0)]), now + 4.0).unwrap();
        let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
        assert_eq!((d.state, d.exit_code), (libra_api::JobState::Failed, Some(3)), "{d:?}");
        assert_eq!(charges(&g, j.id), 1);

        // The agent never reports: after the grace period, the CPU it last reported is charged.
        let j = g.submit(&u, &req(10.0, 100.0, 1000), now).unwrap();
        g.db.execute("UPDATE jobs SET slurm_id = 79 WHERE id = ?1", params![j.id as i64]).unwrap();
        g.sync(&sync("n1", vec![], vec![]), now).unwrap();
        let running = libra_api::RunningReport {
            job: j.id,
            cpu_seconds: 1.5,
            suspended: false,
            share: 0.5,
            start_time: now,
            output: vec![],
        };
        g.sync(&sync("n1", vec![running], vec![]), now + 2.0).unwrap();
        g.slurm_jobcomp_t(&comp(79, 3, 0, now + 3.0), now + 3.0).unwrap();
        assert_eq!(g.slurm_settle_after_grace(now + 10.0, 30.0).unwrap(), 0);
        assert_eq!(g.slurm_settle_after_grace(now + 40.0, 30.0).unwrap(), 1);
        let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
        assert_eq!((d.state, d.cpu_seconds), (libra_api::JobState::Completed, 1.5), "{d:?}");
        assert_eq!(charges(&g, j.id), 1);
    }

    #[test]
    fn a_record_names_a_libra_job_by_comment_only_from_libras_partition() {
        use crate::sched::tests::{req, user};
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = slurm_app(dir.path());
        register(&app, "n1", now);
        let u = user(&app, "u", 100_000);
        let mut g = app.lock();
        let j = g.submit(&u, &req(10.0, 100.0, 1000), now).unwrap();
        // A job of another partition whose owner wrote Libra's comment: not Libra's.
        let forged = SlurmJobComp {
            comment: Some(format!("libra job={}", j.id)),
            partition: Some("batch".into()),
            ..comp(500, 3, 0, now + 1.0)
        };
        assert_eq!(g.slurm_jobcomp_t(&forged, now + 1.0).unwrap().job, None);
        assert_eq!(crate::store::job(&g.db, j.id).unwrap().unwrap().slurm_job_id, None);
        // Libra's own submission whose id a crash lost: found by its comment.
        let lost =
            SlurmJobComp { comment: Some(format!("libra job={}", j.id)), ..comp(501, 3, 0, now + 1.0) };
        assert_eq!(g.slurm_jobcomp_t(&lost, now + 1.0).unwrap().job, Some(j.id));
        assert_eq!(crate::store::job(&g.db, j.id).unwrap().unwrap().slurm_job_id, Some(501));
    }

    #[test]
    fn admission_counts_slurms_jobs_per_node_and_a_cancel_asks_for_scancel() {
        use crate::sched::tests::{req, user};
        let dir = tempfile::tempdir().unwrap();
        let now = 1000.0;
        let app = slurm_app(dir.path());
        register(&app, "n1", now);
        let u = user(&app, "u", 100_000);
        let mut g = app.lock();
        let mut ids = Vec::new();
        for _ in 0..4 {
            let j = g.submit(&u, &req(1.0, 1000.0, 1000), now).unwrap();
            assert_eq!(j.state, libra_api::JobState::Pending, "{j:?}");
            ids.push(j.id);
        }
        // OverSubscribe=FORCE:4: a fifth job would wait in Slurm's queue; Libra refuses it.
        let j = g.submit(&u, &req(1.0, 1000.0, 1000), now).unwrap();
        assert_eq!(j.state, libra_api::JobState::Rejected, "{j:?}");
        assert!(j.reason.as_deref().unwrap().starts_with("resources"), "{j:?}");
        g.db.execute("UPDATE jobs SET slurm_id = 90 WHERE id = ?1", params![ids[0] as i64]).unwrap();
        g.cancel(&u, ids[0], now + 1.0).unwrap();
        assert_eq!(todo(&g).unwrap().cancel, vec![(ids[0], 90)]);
        // Its place is free again.
        let j = g.submit(&u, &req(1.0, 1000.0, 1000), now + 1.0).unwrap();
        assert_eq!(j.state, libra_api::JobState::Pending, "{j:?}");
    }
}
