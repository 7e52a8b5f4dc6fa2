//! The `slurm` resource: each attempt is one Slurm batch job, submitted with `sbatch
//! --parsable`, watched with `squeue -j` (then `scontrol show job` for how it ended: there may
//! be no slurmdbd, so sacct is not relied on) and cancelled with `scancel`.
//!
//! The batch job runs the attempt exactly as a local keeper does (`libra sweep keep-attempt
//! DIR`): the plan's task in the attempt's directory, its outcome (exit code, wall and CPU
//! seconds) recorded there and in the experiment's outcome log. So the nodes must see the
//! broker's files and the `libra` binary at the same paths, as on a Slurm cluster with a shared
//! file system. The resource is priced by its configured rate on the CPU the job used, as a
//! local one; calibration and the DBC planning see it like any other.
//!
//! The Slurm job id is kept in the attempt's directory (`libra.slurm`), so a resumed engine
//! watches the job it had submitted instead of submitting it again.

use super::local::{AttemptSpec, ATTEMPT_FILE, KEY_VAR};
use super::{read_outcome_file, AdapterError, Launch, Outcome, ResourceAdapter};
use crate::plan::Plan;
use crate::resources::SlurmSpec;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// In an attempt's directory: the Slurm job id of the attempt.
pub const SLURM_JOB_FILE: &str = "libra.slurm";
/// In an attempt's directory: the batch job's own standard output and error (the task's go to
/// `stdout` / `stderr` beside it, as on a local resource).
pub const SLURM_OUT_FILE: &str = "slurm.out";

/// How often the resource's jobs' states are asked (one squeue call for all of them).
const POLL: Duration = Duration::from_millis(500);

pub struct Slurm {
    name: String,
    spec: SlurmSpec,
    plan_text: Arc<str>,
    root: PathBuf,
    keeper: PathBuf,
    /// Slurm jobs submitted or adopted and not yet seen to end, by job id: their attempt and
    /// where to report its outcome.
    live: Arc<Mutex<HashMap<String, Watched>>>,
    watcher_started: AtomicBool,
}

type Watched = (Launch, Sender<Outcome>);

/// Slurm's job states in which the job may still run (anything else is how it ended).
fn active(state: &str) -> bool {
    matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "SUSPENDED"
            | "COMPLETING"
            | "CONFIGURING"
            | "REQUEUED"
            | "REQUEUE_FED"
            | "REQUEUE_HOLD"
            | "RESIZING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "SPECIAL_EXIT"
    )
}

/// The job's state as squeue tells it (None when Slurm no longer lists the job).
fn squeue_state(id: &str) -> Option<String> {
    let out = Command::new("squeue").args(["-h", "-j", id, "-t", "all", "-o", "%T"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `scontrol show job -o ID` as key=value pairs (None once Slurm has forgotten the job).
fn scontrol_job(id: &str) -> Option<BTreeMap<String, String>> {
    let out = Command::new("scontrol").args(["show", "job", "-o", id]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

impl Slurm {
    pub fn new(
        name: &str,
        spec: &SlurmSpec,
        plan: &Plan,
        plan_text: Arc<str>,
        root: PathBuf,
        keeper: Option<PathBuf>,
    ) -> Result<Slurm, AdapterError> {
        let err = |msg: String| AdapterError::Start { resource: name.to_string(), msg };
        let keeper = keeper.ok_or_else(|| {
            err("a slurm resource runs each job through the libra binary (`libra sweep keep-attempt`); \
                 run the sweep with `libra sweep run`"
                .into())
        })?;
        if !plan.nodestart.is_empty() {
            return Err(err(
                "the plan has a nodestart task, which a slurm resource does not run (it cannot \
                            tell the nodes in advance): do the setup in the main task"
                    .into(),
            ));
        }
        match Command::new("sbatch").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return Err(err(format!("sbatch --version failed: {}", String::from_utf8_lossy(&o.stderr).trim())))
            }
            Err(e) => {
                return Err(err(format!(
                    "cannot run sbatch ({e}): a slurm resource needs Slurm's client commands (sbatch, squeue, scontrol, scancel) on this machine"
                )))
            }
        }
        if let Some(p) = &spec.partition {
            // A partition Slurm does not have would refuse every job one by one; say it once.
            let out = Command::new("sinfo").args(["-h", "-o", "%R"]).output();
            if let Some(o) = out.ok().filter(|o| o.status.success()) {
                let names: Vec<String> =
                    String::from_utf8_lossy(&o.stdout).split_whitespace().map(String::from).collect();
                if !names.contains(p) {
                    return Err(err(format!(
                        "partition '{p}' is not a partition of this Slurm cluster (sinfo lists: {})",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    )));
                }
            }
        }
        Ok(Slurm {
            name: name.to_string(),
            spec: spec.clone(),
            plan_text,
            root,
            keeper,
            live: Arc::default(),
            watcher_started: AtomicBool::new(false),
        })
    }

    /// Watches job `id` of attempt `l` until Slurm says it ended, then reports the outcome the
    /// keeper recorded (or how Slurm says it ended, when none was). One thread per resource asks
    /// after all its jobs with one squeue call per poll, so a resource with many slots costs
    /// slurmctld one query, not one per job.
    fn watch(&self, id: String, l: Launch, done: Sender<Outcome>) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(id, (l, done));
        }
        if self.watcher_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let live = Arc::downgrade(&self.live);
        std::thread::spawn(move || loop {
            std::thread::sleep(POLL);
            // The adapter is gone (the engine ended): nobody is left to tell.
            let Some(live) = live.upgrade() else { return };
            let ids: Vec<String> = live.lock().map(|l| l.keys().cloned().collect()).unwrap_or_default();
            if ids.is_empty() {
                continue;
            }
            let states = squeue_states(&ids);
            for id in ids {
                if states.get(&id).is_some_and(|s| active(s)) {
                    continue;
                }
                let Some((l, done)) = live.lock().ok().and_then(|mut m| m.remove(&id)) else { continue };
                let _ = done.send(ended(&id, &l));
            }
        });
    }
}

/// The states of jobs `ids` (all of them at once); a job missing from the answer is one Slurm
/// no longer lists. When the one call fails (an id Slurm has forgotten can fail it), each job
/// is asked alone.
fn squeue_states(ids: &[String]) -> HashMap<String, String> {
    let mut states = HashMap::new();
    for chunk in ids.chunks(200) {
        let out = Command::new("squeue")
            .args(["-h", "-t", "all", "-o", "%i %T", "-j"])
            .arg(chunk.join(","))
            .output();
        match out {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    if let Some((id, state)) = line.trim().split_once(' ') {
                        states.insert(id.to_string(), state.trim().to_string());
                    }
                }
            }
            _ => {
                for id in chunk {
                    if let Some(s) = squeue_state(id) {
                        states.insert(id.clone(), s);
                    }
                }
            }
        }
    }
    states
}

/// How attempt `l`, Slurm job `id`, ended: the outcome its keeper recorded, else a failure with
/// what Slurm says (state, exit code, reason).
fn ended(id: &str, l: &Launch) -> Outcome {
    let o = read_outcome_file(&l.dir).unwrap_or_else(|| {
        let job = scontrol_job(id).unwrap_or_default();
        let get = |k: &str| job.get(k).map(String::as_str).unwrap_or("unknown");
        // ExitCode=CODE:SIGNAL
        let exit_code = job.get("ExitCode").and_then(|e| e.split(':').next()?.parse().ok());
        Outcome {
            attempt: l.attempt,
            resource: l.resource,
            ok: false,
            exit_code,
            wall: 0.0,
            cpu: 0.0,
            message: format!(
                "slurm job {id} ended {} (exit {}, reason {}) without recording an outcome; see {}",
                get("JobState"),
                get("ExitCode"),
                get("Reason"),
                l.dir.join(SLURM_OUT_FILE).display()
            ),
            rejected: false,
            billed: None,
        }
    });
    Outcome { attempt: l.attempt, resource: l.resource, ..o }
}

impl ResourceAdapter for Slurm {
    fn start(&mut self, l: Launch, done: Sender<Outcome>) -> Result<(), AdapterError> {
        let err = |msg: String| AdapterError::Start { resource: self.name.clone(), msg };
        std::fs::create_dir_all(&l.dir)
            .map_err(|e| err(format!("cannot create {}: {e}", l.dir.display())))?;
        let spec = AttemptSpec {
            attempt: l.attempt,
            resource: l.resource,
            plan: self.plan_text.to_string(),
            root: self.root.clone(),
            vars: l.vars.clone(),
        };
        let text = serde_json::to_string(&spec).map_err(|e| err(e.to_string()))?;
        std::fs::write(l.dir.join(ATTEMPT_FILE), text)
            .map_err(|e| err(format!("{}: {e}", l.dir.display())))?;
        let keeper = shlex::try_join([self.keeper.to_string_lossy().as_ref(), "sweep", "keep-attempt"])
            .map_err(|e| err(e.to_string()))?;
        let dir = shlex::try_quote(&l.dir.to_string_lossy()).map_err(|e| err(e.to_string()))?.into_owned();
        let mut cmd = Command::new("sbatch");
        cmd.arg("--parsable")
            .arg(format!("--job-name=libra-sweep-{}", l.attempt))
            .arg("--chdir")
            .arg(&l.dir)
            .arg("--output")
            .arg(l.dir.join(SLURM_OUT_FILE))
            // The keeper knows its attempt by this key, as a local one does.
            .arg(format!("--export=ALL,{KEY_VAR}={}", l.key));
        if let Some(p) = &self.spec.partition {
            cmd.arg(format!("--partition={p}"));
        }
        if let Some(c) = self.spec.cpus_per_job {
            cmd.arg(format!("--cpus-per-task={c}"));
        }
        cmd.args(&self.spec.sbatch_args).arg("--wrap").arg(format!("exec {keeper} {dir}"));
        let out = cmd.output().map_err(|e| err(format!("cannot run sbatch: {e}")))?;
        if !out.status.success() {
            // Refused (a job_submit policy, a partition that is down or full): the resource sits
            // out for a while, as a Libra cluster that rejects.
            let _ = done.send(Outcome {
                attempt: l.attempt,
                resource: l.resource,
                ok: false,
                exit_code: None,
                wall: 0.0,
                cpu: 0.0,
                message: format!("sbatch refused the job: {}", String::from_utf8_lossy(&out.stderr).trim()),
                rejected: true,
                billed: None,
            });
            return Ok(());
        }
        // "1234" or "1234;cluster"
        let stdout = String::from_utf8_lossy(&out.stdout);
        let id = stdout.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            return Err(err(format!("sbatch --parsable answered {:?}, not a job id", stdout.trim())));
        }
        std::fs::write(l.dir.join(SLURM_JOB_FILE), format!("{id}\n"))
            .map_err(|e| err(format!("{}: {e}", l.dir.display())))?;
        self.watch(id, l, done);
        Ok(())
    }

    fn resume(&mut self, l: Launch, done: Sender<Outcome>) -> Result<bool, AdapterError> {
        let Ok(id) = std::fs::read_to_string(l.dir.join(SLURM_JOB_FILE)) else {
            return Ok(false);
        };
        let id = id.trim().to_string();
        if squeue_state(&id).is_some_and(|s| active(&s)) || read_outcome_file(&l.dir).is_some() {
            self.watch(id, l, done);
            return Ok(true);
        }
        // Ended while no engine listened and recorded nothing: its job runs again.
        Ok(false)
    }

    /// A scancelled job's keeper records how it ended and the CPU it used (Slurm's SIGTERM is a
    /// cancel's to it), which the watcher reports once the job has left the queue.
    fn reports_after_cancel(&self) -> bool {
        true
    }

    fn cancel_all(&mut self) -> Vec<(i64, libra_core::Money)> {
        let ids: Vec<String> = self.live.lock().map(|l| l.keys().cloned().collect()).unwrap_or_default();
        if ids.is_empty() {
            return Vec::new();
        }
        match Command::new("scancel").args(&ids).output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                tracing::warn!(resource = %self.name, "scancel {ids:?}: {}", String::from_utf8_lossy(&o.stderr))
            }
            Err(e) => tracing::warn!(resource = %self.name, "scancel {ids:?}: {e}"),
        }
        Vec::new()
    }
}

/// The attempt directory's Slurm job id, if the attempt was submitted to Slurm.
pub fn slurm_job_of(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(SLURM_JOB_FILE)).ok().map(|s| s.trim().to_string())
}
