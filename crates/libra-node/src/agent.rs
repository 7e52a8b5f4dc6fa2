//! The agent's loop: reap exits, run job control every period (Algorithm 2 from measured CPU
//! time, or EDF when the policy admits by EDF; re-told to the kernel), and exchange reports for
//! commands with the server. While the server is away the jobs keep running and the reports
//! wait; on reconnect everything is said again.

use crate::control::{self, JobProgress};
use crate::enforce::{detect, Enforcer};
use crate::kernel::RealKernel;
use crate::launch::{self, JobFiles, Watched};
use crate::proc;
use libra_api::{
    Client, ExitReport, JobControl, RegisterRequest, RunningReport, StartJob, SyncRequest, SyncResponse,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Relative change of a job's required share below which the kernel is not re-told.
pub const SHARE_HYSTERESIS: f64 = 0.10;

/// How long a job stopped at its time limit has between SIGTERM and SIGKILL.
pub const KILL_WAIT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The server, with how to reach it (its CA, whether plain http is allowed).
    pub client: Client,
    /// The cluster's join token: needed only to join (no `node.credential` in `workdir` yet,
    /// or the node was forgotten by an administrator).
    pub join_token: Option<String>,
    pub name: String,
    /// Capacity in CPUs (the node's control group is capped at it).
    pub cpus: f64,
    pub mem_mb: u64,
    /// Where each job gets its working directory.
    pub workdir: PathBuf,
    /// auto, cgroup-v2, cgroup-v1, stride or none.
    pub mechanism: String,
    /// Job-control period in seconds (None: the server's).
    pub period: Option<f64>,
    /// The program that keeps each job: `KEEPER job-keeper -- COMMAND...` (the `libra` binary)
    /// waits for the job and writes how it ended into the job's directory, so a job started by
    /// an agent that then crashes is adopted by the next agent and its end still reported.
    /// None: jobs are started directly, and a crash of the agent loses them.
    pub keeper: Option<PathBuf>,
    /// Beside slurmd (`libra node --slurm`): Slurm launches the jobs, the agent adopts them
    /// (`crate::slurm`). The node's name is the Slurm node name.
    pub slurm: Option<crate::slurm::SlurmNode>,
    /// The size in MiB of the file system each job given no working directory runs in
    /// (`crate::scratch`): None for `scratch::DEFAULT_MB` where the agent can mount (root, loop
    /// devices) and a plain directory elsewhere, with a warning; Some(0) for plain directories;
    /// Some(n) for n MiB, and the agent does not start where it cannot make them.
    pub scratch_mb: Option<u64>,
    /// A /tmp and /var/tmp of its own for each job, in memory, of this many MiB
    /// (`proc::private_tmp`); None or Some(0): the node's, shared by every job. Root only: the
    /// agent does not start where it cannot give them.
    pub tmp_mb: Option<u64>,
    /// How many scratch file systems are kept made ahead of the jobs that will run in them
    /// (`crate::scratch_pool`); None for `scratch_pool::READY`, Some(0) for none (each made at
    /// its job's start).
    pub scratch_ahead: Option<usize>,
    /// The most processes and threads one account's jobs may have on this node
    /// (`proc::Launch::max_tasks`): None for `default_max_tasks`, Some(0) for no limit.
    pub max_tasks: Option<u64>,
}

/// A third of the node's process ids (`kernel.pid_max`; systemd gives each user's sessions as
/// much), and at most `MAX_DEFAULT_TASKS`: no one account's jobs can take the process table from
/// the others, while a job with a use for thousands of threads still has them. 10,922 where
/// pid_max is 32,768; 32,768 where it is 4,194,304 (systemd's), where a third would let one
/// account's tasks take about 28 GB of the kernel's memory (some 20 KB each) before any limit.
pub fn default_max_tasks() -> u64 {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(32_768);
    (pid_max / 3).clamp(MIN_MAX_TASKS, MAX_DEFAULT_TASKS)
}

/// The `oom_score_adj` of a job that asked no memory (`--mem`), and of every process it starts
/// (`proc::Launch::oom_score_adj`). A job that asked memory is held to it by its own group and
/// cannot push the node out of memory; one that asked none can, and the kernel's OOM killer
/// then takes the largest process it finds, which may be another user's job that asked its
/// memory and stayed within it (a job that forks ten small processes beats one large one).
/// Half the scale, added to each of those processes' size as a share of memory (the node's,
/// or its group's limit), makes them its choice before any job that asked memory, the agent
/// or the node's own daemons, among themselves by size as before. The job cannot lower it.
pub const NO_MEMORY_OOM_SCORE_ADJ: i16 = 500;

/// The most the default `max_tasks` is, whatever the node's pid_max.
pub const MAX_DEFAULT_TASKS: u64 = 32_768;

/// The fewest `max_tasks` accepted (other than 0, no limit): a shell and a few programs.
pub const MIN_MAX_TASKS: u64 = 16;

/// The most `max_tasks` accepted: Linux's highest possible pid_max.
pub const MAX_MAX_TASKS: u64 = 4_194_304;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Enforce(#[from] crate::enforce::EnforceError),
    #[error("cpus: {} is not accepted: give a capacity greater than 0 and at most the machine's {} cores", libra_core::Shown(*.0), .1)]
    Cpus(f64, usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the server refused this node: {0}")]
    Refused(String),
    #[error("node.credential: {0}")]
    Credential(String),
    #[error("scratch_mb: {0}")]
    Scratch(String),
    #[error("tmp_mb: {0}")]
    PrivateTmp(String),
}

/// In the agent's work directory: the node's own credential, minted by the server when the
/// join token admitted it (mode 0600).
pub const CREDENTIAL_FILE: &str = "node.credential";

/// The Unix account (user id) that ran the server, on this machine's loopback, when the node
/// registered with it: an agent on the server's own machine sends nothing to a loopback server
/// run by another account (`Agent::server_is_its_own`).
pub const SERVER_UID_FILE: &str = "server.uid";

/// The node's credential saved in `workdir`, if it has one.
pub fn read_credential(workdir: &std::path::Path) -> Result<Option<String>, NodeError> {
    let path = workdir.join(CREDENTIAL_FILE);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NodeError::Credential(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Saves the credential, readable by the agent's account only, replacing any older one
/// atomically and durably (a crash leaves the old file or the new one, never half of one; once
/// this returns, the new one).
fn write_credential(workdir: &std::path::Path, credential: &str) -> Result<(), NodeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = workdir.join(CREDENTIAL_FILE);
    let tmp = workdir.join(format!("{CREDENTIAL_FILE}.new"));
    let fail = |e: std::io::Error| NodeError::Credential(format!("cannot write {}: {e}", path.display()));
    let _ = std::fs::remove_file(&tmp);
    let mut f =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(fail)?;
    f.write_all(credential.as_bytes()).and_then(|()| f.sync_all()).map_err(fail)?;
    std::fs::rename(&tmp, &path).map_err(fail)?;
    // The rename itself is made durable before the credential is used: once the server has seen
    // it used, the join token no longer frees the name, so a power cut must not bring back the
    // old file.
    std::fs::File::open(workdir).and_then(|d| d.sync_all()).map_err(fail)
}

struct Running {
    spec: StartJob,
    /// The job's first process (its keeper's, if it has one); its session is the job.
    pid: i32,
    /// When that process started (see `proc::start_ticks`), which tells it apart from a later
    /// process with the same pid.
    ticks: Option<u64>,
    /// Started by an earlier agent: not this agent's child, so its end is noticed by polling
    /// and read from the keeper's exit file.
    adopted: bool,
    start_time: f64,
    cpu: f64,
    share: f64,
    suspended: bool,
    /// The agent's directory for the job (its record; not the job's working directory).
    dir: PathBuf,
    /// The output files sent on to the server.
    watched: Vec<Watched>,
    /// Stopped at its time limit: SIGTERM sent at this instant, SIGKILL after `KILL_WAIT`.
    timed_out: Option<Instant>,
    /// A job Slurm launched (its Slurm job id) and the agent adopted: it has no process of the
    /// agent's (`pid` is 0), its processes are found in Slurm and kept in `group`.
    slurm: Option<SlurmJob>,
}

struct SlurmJob {
    id: u64,
    /// The job's group's cgroup.procs (None: the enforcer has no groups).
    procs: Option<PathBuf>,
    /// Its accounting group's cgroup.procs, where `cpuacct` is mounted apart from `cpu`
    /// (`cpu_account`): the CPU group does not count there.
    counted: Option<PathBuf>,
    /// Slurm has started it: reported to the server from then on (a job still pending in
    /// Slurm's queue is not running yet, whatever the server has decided).
    started: bool,
    /// When the server first said to stop it (see `SLURM_KILL_GRACE`).
    kill_asked: Option<Instant>,
}

/// The server stops a Slurm job with scancel, so that Slurm records it as cancelled; the agent
/// kills what is in the job's group itself only if the job is still there this long after the
/// server first said to stop it.
const SLURM_KILL_GRACE: Duration = Duration::from_secs(10);

/// In the agent's directory for a job Slurm launched: the job as the server sent it, so that
/// an agent that restarts adopts it again.
const SLURM_FILE: &str = "libra.slurm";

/// Makes the agent's directory for a job (its record: only the agent's account may read it) and,
/// for a job given no working directory, the scratch directory inside it that the job runs in,
/// owned by the job's account: a file system of its own, a copy of `template`
/// (`crate::scratch`), or a plain directory when there is none.
fn record_dir(
    dir: &std::path::Path,
    s: &StartJob,
    identity: Option<&proc::Identity>,
    template: Option<&crate::scratch::Template>,
    pool: Option<&crate::scratch_pool::Pool>,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let err = |p: &std::path::Path, e: std::io::Error| format!("cannot prepare {}: {e}", p.display());
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| err(dir, e))?;
    if s.workdir.is_none() {
        let scratch = launch::scratch_dir(dir);
        std::fs::create_dir_all(&scratch).map_err(|e| err(&scratch, e))?;
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(&scratch, e))?;
        if let Some(t) = template {
            let owner = identity.map(|i| (i.uid, i.gid));
            // One made ahead when there is one (`crate::scratch_pool`), else made now.
            // Only this thread takes from the pool, so one that is ready now is there to take.
            let taken = match pool.filter(|p| p.ready() > 0) {
                Some(p) => {
                    tracing::info!(job = s.job, "taking a scratch file system made ahead");
                    p.take(dir, &scratch, owner)
                        .map_err(|e| format!("cannot make the job's scratch file system: {e}"))?
                }
                None => false,
            };
            if !taken {
                tracing::info!(job = s.job, mb = t.mb, "making the job's scratch file system");
                crate::scratch::mount(dir, &scratch, t, owner)?;
            }
            tracing::info!(made_ahead = taken, job = s.job, "the job's scratch file system is mounted");
        }
        if let Some(i) = identity {
            std::os::unix::fs::chown(&scratch, Some(i.uid), Some(i.gid)).map_err(|e| err(&scratch, e))?;
            // The agent's directory must let the job's account through to its scratch, and no
            // further: search, not read.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).map_err(|e| err(dir, e))?;
        }
    }
    Ok(())
}

/// The order in which one answer's jobs are started: the nearest deadline first (then the
/// lowest id). Starting a job takes the agent a moment, longer on a loaded machine (up to 2 s
/// for a scratch file system beside busy jobs), and each start waits for those before it, so
/// the job with the least time to spare goes first.
fn earliest_deadline_first(starts: &mut [StartJob]) {
    starts.sort_by(|a, b| a.deadline_at.total_cmp(&b.deadline_at).then(a.job.cmp(&b.job)));
}

/// The template of each job's scratch file system (None: plain directories), from what was
/// asked (`AgentConfig::scratch_mb`) and what this machine allows, found by making one.
fn scratch_template(cfg: &AgentConfig) -> Result<Option<crate::scratch::Template>, NodeError> {
    use crate::scratch::{can_mount, Template, DEFAULT_MB, MAX_MB, MIN_MB};
    let made = |mb: u64| {
        Template::make(&cfg.workdir, mb).inspect(|_| {
            tracing::info!(mb, "each job given no working directory runs in a file system of its own")
        })
    };
    match cfg.scratch_mb {
        // Slurm launches the jobs beside slurmd: they run where Slurm puts them.
        _ if cfg.slurm.is_some() => Ok(None),
        Some(0) => {
            tracing::info!(
                "job scratch directories are plain directories: one job can fill the disk of {}",
                cfg.workdir.display()
            );
            Ok(None)
        }
        Some(mb) if !(MIN_MB..=MAX_MB).contains(&mb) => Err(NodeError::Scratch(format!(
            "{mb} MiB is not accepted: give 0 (plain directories, not limited) or from {MIN_MB} to {MAX_MB} MiB"
        ))),
        Some(mb) => made(mb).map(Some).map_err(|e| {
            NodeError::Scratch(format!(
                "cannot give jobs scratch file systems of {mb} MiB in {}: {e}; give 0 to run them in plain directories, not limited",
                cfg.workdir.display()
            ))
        }),
        None if !can_mount() => {
            tracing::info!("job scratch directories are plain directories: only root may mount, and every job runs as this agent's account");
            Ok(None)
        }
        None => match made(DEFAULT_MB) {
            Ok(t) => Ok(Some(t)),
            Err(e) => {
                tracing::warn!(
                    "job scratch directories are plain directories, not limited: one job can fill the disk of {} ({e})",
                    cfg.workdir.display()
                );
                Ok(None)
            }
        },
    }
}

/// Why a job could not be started: the node's fault, or the job's own.
enum Fault {
    Node(String),
    Job(String),
}

/// In the agent's directory for a job: "PID START_TICKS" of its process while it runs, until the
/// server has acknowledged how it ended.
const PID_FILE: &str = "libra.pid";

/// In a job's working directory: what the server asked for and when the job started, for an
/// agent that adopts the job after a crash of the one that started it.
const JOB_FILE: &str = "libra.job";

/// In the agent's directory for a job: a file whose lock (flock) the agent takes before it
/// starts the job's keeper and hands to the keeper, which holds it for as long as it lives. So
/// the lock is held exactly while a process of the job exists, from the fork on. An agent that
/// dies in the instant between the fork and the child's pid file leaves no pid file yet, and
/// a child still before its exec carries the dead agent's environment: the agent that follows
/// knows by the lock alone that the job runs, waits for its pid file and adopts it, instead of
/// taking it for a job never started (which the server then has started a second time) or one
/// that ended.
const LOCK_FILE: &str = "libra.lock";

/// Takes job directory `dir`'s lock for a start (see `LOCK_FILE`): `Ok(None)` when a process of
/// the job holds it (the job runs: it must not start again).
fn job_lock(dir: &std::path::Path) -> std::io::Result<Option<std::fs::File>> {
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(LOCK_FILE))?;
    Ok(try_lock(&f)?.then_some(f))
}

/// Whether a process of the job in directory `dir` holds its lock (see `LOCK_FILE`); false
/// when there is no lock file (a job started by an earlier release of the agent). A lock taken
/// here to find out is released as the file closes.
fn job_lock_held(dir: &std::path::Path) -> bool {
    std::fs::File::open(dir.join(LOCK_FILE)).is_ok_and(|f| matches!(try_lock(&f), Ok(false)))
}

/// An exclusive flock on `f` without waiting: false when another open file holds it.
fn try_lock(f: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `f` owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// How long an agent waits, at its start, for the pid file of a job whose lock is held: the
/// child of an agent that died mid-start writes it before its exec.
const PID_FILE_WAIT: Duration = Duration::from_secs(10);

/// The pid file's text once it names a process, waiting up to `PID_FILE_WAIT` while the job's
/// lock is held (see `LOCK_FILE`); otherwise what is there now.
fn pid_file_text(dir: &std::path::Path, held: bool) -> Option<String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.join(PID_FILE)).ok();
        let named = text
            .as_deref()
            .and_then(|t| t.split_whitespace().next())
            .is_some_and(|p| p.parse::<i32>().is_ok());
        if named || !held || t0.elapsed() > PID_FILE_WAIT {
            return text;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct JobRecord {
    spec: StartJob,
    start_time: f64,
}

/// A job an earlier agent on this working directory started and did not see acknowledged.
enum Orphan {
    /// A job Slurm runs that an earlier agent adopted: adopt it again.
    Slurm { record: JobRecord },
    /// Still running: adopt it.
    Running { record: JobRecord, pid: i32, ticks: u64, dir: PathBuf },
    /// Ended while no agent watched (its keeper recorded how, if it had one): report it.
    Ended { record: JobRecord, dir: PathBuf },
}

/// The jobs an earlier agent on this working directory left (it crashed or was killed; jobs
/// outlive their agent so that a restart of the server or of the agent costs nothing). A
/// process without a job record (started by an older agent) is stopped instead: this agent
/// could not tell what it is owed, and left alone it would only burn CPU outside every share.
#[cfg(test)]
fn orphans(workdir: &std::path::Path) -> Vec<Orphan> {
    orphans_and_leftovers(workdir).0
}

/// `orphans`, and the job directories that hold nothing a later agent needs: no process of the
/// job (its lock is free), nothing to report (no pid file: the server acknowledged how the job
/// ended, or it never started), no Slurm job to follow; and those already on their way out
/// (`discard`). An agent that died while removing an acknowledged job's directory leaves one;
/// so does one that died between writing a job's record and starting it (the server asks for
/// that job again, and its directory is made anew: `discard` has moved the old one aside).
fn orphans_and_leftovers(workdir: &std::path::Path) -> (Vec<Orphan>, Vec<PathBuf>) {
    let Ok(dirs) = std::fs::read_dir(workdir) else { return (Vec::new(), Vec::new()) };
    let mut found = Vec::new();
    let mut leftovers = Vec::new();
    for d in dirs.flatten() {
        let dir = d.path();
        if let Some(record) = std::fs::read_to_string(dir.join(SLURM_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<JobRecord>(&t).ok())
        {
            found.push(Orphan::Slurm { record });
            continue;
        }
        // A held lock: a process of the job exists, though it may not have written its pid file
        // yet, nor exec'd (its environment still the dead agent's).
        let held = job_lock_held(&dir);
        let Some(text) = pid_file_text(&dir, held) else {
            let name = d.file_name();
            let name = name.to_str().unwrap_or_default();
            let (job, going) = (name.starts_with("job-"), name.starts_with(DISCARDED));
            if (going || (job && !held)) && d.file_type().is_ok_and(|t| t.is_dir()) {
                leftovers.push(dir);
            }
            continue;
        };
        let mut f = text.split_whitespace();
        let pid = f.next().and_then(|p| p.parse::<i32>().ok()).filter(|p| *p > 1);
        let ticks = f.next().and_then(|t| t.parse::<u64>().ok());
        let Some(pid) = pid else {
            let _ = std::fs::remove_file(dir.join(PID_FILE));
            continue;
        };
        let record = std::fs::read_to_string(dir.join(JOB_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<JobRecord>(&t).ok());
        // The job's process: the one that started at `ticks`; or, when the agent died between
        // starting it and recording its start time (the child wrote its pid itself), the live
        // process with this job's LIBRA_JOB_ID in its environment.
        let live = match (ticks, &record) {
            (Some(t), _) => proc::alive(pid, t).then_some(t),
            (None, Some(r)) => proc::start_ticks(pid).filter(|t| {
                proc::alive(pid, *t) && (held || proc::has_env(pid, "LIBRA_JOB_ID", &r.spec.job.to_string()))
            }),
            (None, None) => None,
        };
        match (record, live) {
            (Some(record), Some(ticks)) => found.push(Orphan::Running { record, pid, ticks, dir }),
            (Some(record), None) => found.push(Orphan::Ended { record, dir }),
            (None, live) => {
                if let Some(t) = ticks.filter(|t| live == Some(*t)) {
                    tracing::warn!(pid, ticks = t, dir = %dir.display(), "stopping a process an earlier agent left running");
                    proc::signal_group(pid, libc::SIGCONT);
                    proc::signal_group(pid, libc::SIGKILL);
                }
                let _ = std::fs::remove_file(dir.join(PID_FILE));
            }
        }
    }
    (found, leftovers)
}

/// The name a job's directory is given, in front of its own, when it is moved aside to be removed.
const DISCARDED: &str = ".removing-";

/// Moves a job's directory aside at once (a rename, so the job's name is free for a directory
/// made anew the moment this returns) and has `cleaner` remove it.
fn discard(cleaner: &std::sync::mpsc::Sender<PathBuf>, dir: &std::path::Path) {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else { return };
    if name.starts_with(DISCARDED) {
        let _ = cleaner.send(dir.to_path_buf());
        return;
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let aside = dir.with_file_name(format!("{DISCARDED}{name}-{}-{seq}", std::process::id()));
    match std::fs::rename(dir, &aside) {
        Ok(()) => {
            let _ = cleaner.send(aside);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(dir = %dir.display(), "moving a finished job's directory aside: {e}"),
    }
}

/// Removes job directories on a thread of their own: a job's scratch directory may hold any
/// number of files, and the agent's loop (job control, the exchange with the server) must not
/// wait for them. What fails to go is logged; a later agent finds it again (`orphans_and_leftovers`).
fn spawn_cleaner() -> std::io::Result<std::sync::mpsc::Sender<PathBuf>> {
    let (tx, rx) = channel::<PathBuf>();
    std::thread::Builder::new().name("job-dirs".into()).spawn(move || {
        for dir in rx {
            // A job's scratch file system is detached first (its files go with its image);
            // left mounted, the directory could not be removed. Never follows a symbolic link
            // a job left in its scratch directory (std's `remove_dir_all` unlinks the link
            // itself).
            crate::scratch::unmount(&launch::scratch_dir(&dir));
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), "removing a finished job's directory: {e}");
                }
            }
        }
    })?;
    Ok(tx)
}

/// How a job ended: from its keeper's exit file (the job's own exit, where the agent saw only
/// the keeper's), else from `seen` (what this agent reaped), else unknown: the job ended while
/// no agent watched it and no keeper recorded it. The rest of its output goes with it.
fn exit_report(
    record: &JobRecord,
    dir: &std::path::Path,
    watched: &[Watched],
    cpu: f64,
    seen: Option<(proc::Exit, f64)>,
    now: f64,
) -> ExitReport {
    let output = crate::output_reads::chunks(watched, libra_api::OUTPUT_LIMIT as u64);
    let (exit, end_time, error) = match (proc::read_exit(dir), seen) {
        (Some((exit, end, error)), _) => (exit, end, error),
        (None, Some((exit, end))) => (exit, end, None),
        (None, None) => (
            proc::Exit { code: None, signal: None, cpu_seconds: cpu },
            now,
            Some("the job ended while its node agent was down, and how it ended was not recorded".into()),
        ),
    };
    ExitReport {
        job: record.spec.job,
        exit_code: exit.code,
        signal: exit.signal,
        cpu_seconds: exit.cpu_seconds.max(cpu),
        start_time: record.start_time,
        end_time,
        output,
        error,
        timed_out: false,
        node_fault: false,
    }
}

/// The name of this agent's control groups: the node's name and a digest of its work directory,
/// so that two agents of the same name on one machine (two users' `libra up`, a test cluster
/// beside a real one) never share groups, where each would stop the other's jobs as strays.
pub fn group_name(name: &str, workdir: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let dir = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    // FNV-1a: stable across builds and platforms (a std hasher is not).
    let h = dir
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{name}-{:08x}", h as u32)
}

pub use libra_api::unix_now;

pub struct Agent {
    cfg: AgentConfig,
    /// Presents the node's credential (the join token only while joining).
    client: Client,
    credential: Option<String>,
    /// `SERVER_UID_FILE`'s account, once known.
    server_uid: Option<u32>,
    enforcer: Box<dyn Enforcer>,
    jobs: HashMap<u64, Running>,
    exited: HashMap<u64, ExitReport>,
    period: f64,
    /// Exits seen by the reaper thread (pid, how, when), stamped the moment they happen so a
    /// deadline is judged on the real end time, not on when the loop next looked.
    ended: Receiver<(i32, proc::Exit, f64)>,
    early: HashMap<i32, (proc::Exit, f64)>,
    /// Memory limits for jobs that ask for memory (cgroup v1 memory hierarchy), where writable.
    memory: Option<crate::memory::MemoryLimiter>,
    /// Whether a job can lower the `oom_score_adj` it was given (`NO_MEMORY_OOM_SCORE_ADJ`):
    /// where this agent lacks CAP_SYS_RESOURCE (some containers), the kernel does not make
    /// the value the job's least, so job control raises it again at each period
    /// (`raise_oom_scores`).
    oom_scores_lowerable: bool,
    /// Each job's group in a cgroup v1 `cpuacct` hierarchy mounted apart from `cpu`, where
    /// the kernel counts the CPU of all its processes (`cpu_account`).
    cpu_account: Option<crate::cpu_account::CpuAccount>,
    /// As the server's policy asks (Algorithm 2 until it says otherwise).
    job_control: JobControl,
    /// Directories of jobs the server has acknowledged, to be removed (`spawn_cleaner`).
    cleaner: std::sync::mpsc::Sender<PathBuf>,
    /// What each job's scratch file system is made of; None: plain directories
    /// (`AgentConfig::scratch_mb`).
    scratch: Option<crate::scratch::Template>,
    /// Scratch file systems made ahead (with `scratch`, where the pool could be made).
    pool: Option<crate::scratch_pool::Pool>,
    /// Beside slurmd: moves each Slurm job's new steps into its group as they start, and every
    /// move's CPU from before (`slurm_steps`).
    steps: Option<crate::slurm_steps::StepCatcher>,
    /// `AgentConfig::max_tasks` resolved: None for no limit.
    max_tasks: Option<u64>,
}

impl Agent {
    pub fn new(cfg: AgentConfig) -> Result<Agent, NodeError> {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        if !(cfg.cpus > 0.0 && cfg.cpus <= cores as f64) {
            return Err(NodeError::Cpus(cfg.cpus, cores));
        }
        std::fs::create_dir_all(&cfg.workdir)?;
        {
            // Others may pass through to their jobs' scratch directories, not list or read.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&cfg.workdir, std::fs::Permissions::from_mode(0o711))?;
        }
        let credential = read_credential(&cfg.workdir)?;
        if credential.is_none() && cfg.join_token.is_none() {
            return Err(NodeError::Credential(format!(
                "{} has no node credential yet: give the cluster's join token to join (--join-token-file FILE or LIBRA_JOIN_TOKEN)",
                cfg.workdir.join(CREDENTIAL_FILE).display()
            )));
        }
        let scratch = scratch_template(&cfg)?;
        let ahead = cfg.scratch_ahead.unwrap_or(crate::scratch_pool::READY);
        if ahead == 0 || scratch.is_none() {
            // None kept: an earlier agent's are no use.
            crate::scratch_pool::clear(&cfg.workdir.join(crate::scratch_pool::POOL_DIR));
        }
        let pool = scratch.as_ref().filter(|_| ahead > 0).and_then(|t| {
            crate::scratch_pool::Pool::start(&cfg.workdir, t.clone(), ahead)
                .inspect_err(|e| tracing::warn!("each job's scratch file system is made at its start: {e}"))
                .ok()
        });
        if let Some(mb) = cfg.tmp_mb.filter(|mb| *mb > 0) {
            if cfg.slurm.is_some() {
                return Err(NodeError::PrivateTmp(
                    "Slurm launches this node's jobs (--slurm): give them a /tmp of their own with Slurm's job_container/tmpfs".into(),
                ));
            }
            proc::can_give_private_tmp().map_err(|e| {
                NodeError::PrivateTmp(format!(
                    "cannot give jobs a /tmp of their own ({e}): it takes root (a mount namespace per job); leave tmp_mb unset or 0 for the node's /tmp"
                ))
            })?;
            tracing::info!(mb, "each job has a /tmp and /var/tmp of its own");
        }
        let (orphans, leftovers) = orphans_and_leftovers(&cfg.workdir);
        let cleaner = spawn_cleaner()?;
        if !leftovers.is_empty() {
            tracing::info!(count = leftovers.len(), "removing the directories of jobs already finished");
        }
        for dir in leftovers {
            discard(&cleaner, &dir);
        }
        let group = group_name(&cfg.name, &cfg.workdir);
        let mut enforcer = detect(Arc::new(RealKernel), &cfg.mechanism, &group, cfg.cpus)?;
        let adopting: std::collections::HashSet<u64> = orphans
            .iter()
            .filter_map(|o| match o {
                Orphan::Running { record, .. } | Orphan::Slurm { record } => Some(record.spec.job),
                Orphan::Ended { .. } => None,
            })
            .collect();
        enforcer.clear_stale(&adopting);
        // Beside slurmd the node's other partitions may run jobs too: Libra's jobs get exactly
        // their shares.
        enforcer.set_strict(cfg.slurm.is_some());
        tracing::info!(node = %cfg.name, mechanism = enforcer.mechanism(), "share enforcement");
        // Libra's group outweighs the machine's other work so that admitted deadlines hold on
        // a busy machine; the agent starts the jobs and keeps their shares, so it goes there
        // too. Left in the machine's own group beside eight busy programs on two cores, it took
        // 1 to 2.5 s to start a job, and the README's demo job missed its deadline.
        match enforcer.hold_agent(std::process::id()) {
            Ok(Some(dir)) => {
                tracing::info!(group = %dir.display(), "the agent runs in a group of its own beside the node's")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("the agent stays in its own control group, at the machine's weight: {e}")
            }
        }
        let client = cfg.client.with_token(credential.clone());
        let (tx, ended) = channel();
        std::thread::Builder::new().name("reaper".into()).spawn(move || loop {
            match proc::wait_any() {
                Some((pid, exit)) => {
                    if tx.send((pid, exit, unix_now())).is_err() {
                        return;
                    }
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        })?;
        let steps = cfg
            .slurm
            .is_some()
            .then(|| crate::slurm_steps::StepCatcher::start(crate::slurm_steps::FREEZER.into()));
        let node_mem_mb = cfg.mem_mb;
        let max_tasks = match cfg.max_tasks {
            None => Some(default_max_tasks()),
            Some(0) => None,
            Some(n) => Some(n),
        };
        // SAFETY: geteuid has no memory effects.
        if let (Some(n), 0, None) = (max_tasks, unsafe { libc::geteuid() }, &cfg.slurm) {
            tracing::info!(
                max_tasks = n,
                "each account's jobs may have at most this many processes and threads on this node"
            );
        }
        let mut agent = Agent {
            max_tasks,
            steps,
            server_uid: std::fs::read_to_string(cfg.workdir.join(SERVER_UID_FILE))
                .ok()
                .and_then(|t| t.trim().parse().ok()),
            period: cfg.period.unwrap_or(2.0),
            cfg,
            client,
            credential,
            enforcer,
            jobs: HashMap::new(),
            exited: HashMap::new(),
            ended,
            early: HashMap::new(),
            job_control: JobControl::default(),
            cleaner,
            scratch,
            pool,
            memory: crate::memory::MemoryLimiter::new(
                Arc::new(RealKernel),
                std::path::Path::new("/sys/fs/cgroup/memory"),
                &group,
                node_mem_mb,
            ),
            oom_scores_lowerable: !has_capability(CAP_SYS_RESOURCE),
            cpu_account: crate::cpu_account::CpuAccount::new(
                Arc::new(RealKernel),
                std::path::Path::new("/sys/fs/cgroup/cpuacct"),
                std::path::Path::new("/sys/fs/cgroup/cpu"),
                &group,
            ),
        };
        for o in orphans {
            agent.adopt(o);
        }
        Ok(agent)
    }

    /// Takes over a job an earlier agent started, or reports how it ended.
    fn adopt(&mut self, o: Orphan) {
        match o {
            Orphan::Slurm { record } => self.adopt_slurm(record.spec, Some(record.start_time)),
            Orphan::Running { record, pid, ticks, dir } => {
                let job = record.spec.job;
                let share = record.spec.share;
                if let Some(m) = &mut self.memory {
                    if let Err(e) = m.prepare(job, record.spec.mem_mb) {
                        tracing::warn!(job, "memory limit not re-applied: {e}");
                    }
                }
                if let Err(e) = self.enforcer.adopt(job, pid, share) {
                    tracing::warn!(job, "share not re-applied: {e}");
                }
                // The job's processes joined its accounting group when it started: the group is
                // taken over as it is.
                if let Some(a) = &mut self.cpu_account {
                    if let Err(e) = a.prepare(job) {
                        tracing::warn!(job, "CPU accounting group not found again: {e}");
                    }
                }
                let suspended = record.spec.suspended;
                tracing::info!(job, pid, "adopted a job an earlier agent started");
                let session = proc::cpu_by_session().get(&pid).copied().unwrap_or(0.0);
                let cpu = session.max(self.group_cpu(job).unwrap_or(0.0));
                let owner = self.identity_for(&record.spec).ok().flatten().map(|i| i.uid);
                let watched = JobFiles::plan(&record.spec, &dir, &self.cfg.name, owner)
                    .map(|f| f.watched)
                    .unwrap_or_default();
                self.jobs.insert(
                    job,
                    Running {
                        spec: record.spec,
                        pid,
                        ticks: Some(ticks),
                        adopted: true,
                        start_time: record.start_time,
                        cpu,
                        share,
                        suspended,
                        dir,
                        watched,
                        timed_out: None,
                        slurm: None,
                    },
                );
            }
            Orphan::Ended { record, dir } => {
                let owner = self.identity_for(&record.spec).ok().flatten().map(|i| i.uid);
                let watched = JobFiles::plan(&record.spec, &dir, &self.cfg.name, owner)
                    .map(|f| f.watched)
                    .unwrap_or_default();
                let report = exit_report(&record, &dir, &watched, 0.0, None, unix_now());
                tracing::info!(job = report.job, code = ?report.exit_code, "a job ended while no agent watched it");
                self.exited.insert(report.job, report);
            }
        }
    }

    /// The share mechanism, with `+memory` when memory limits are enforced too.
    pub fn mechanism(&self) -> String {
        let m = self.enforcer.mechanism();
        if self.memory.is_some() {
            format!("{m}+memory")
        } else {
            m.to_string()
        }
    }

    /// Registers with the node's credential; joins with the join token when it has none yet,
    /// or when the server refuses the credential (an administrator forgot the node) and a join
    /// token was given. A credential minted on joining is saved before it is used.
    fn register(&mut self) -> Result<(), NodeError> {
        let req = RegisterRequest {
            name: self.cfg.name.clone(),
            cpus: self.cfg.cpus,
            mem_mb: self.cfg.mem_mb,
            mechanism: self.mechanism(),
            account: proc::Identity::current().map(|i| i.user).unwrap_or_default(),
            // SAFETY: geteuid has no memory effects.
            switches_users: unsafe { libc::geteuid() } == 0,
        };
        let refused = |e: libra_api::ClientError| match e.status() {
            Some(400 | 401 | 403) => NodeError::Refused(e.to_string()),
            _ => NodeError::Io(std::io::Error::other(e.to_string())),
        };
        let r = match (&self.credential, &self.cfg.join_token) {
            (Some(_), join) => match self.client.register(&req) {
                Ok(r) => r,
                Err(e) if e.status() == Some(403) && join.is_some() => {
                    tracing::warn!(
                        "the server refused this node's credential ({e}); joining with the join token"
                    );
                    self.cfg.client.with_token(join.clone()).register(&req).map_err(refused)?
                }
                Err(e) => return Err(refused(e)),
            },
            (None, join) => self.cfg.client.with_token(join.clone()).register(&req).map_err(refused)?,
        };
        if let Some(c) = r.credential {
            write_credential(&self.cfg.workdir, &c)?;
            self.client = self.cfg.client.with_token(Some(c.clone()));
            self.credential = Some(c);
            tracing::info!(node = %self.cfg.name, "joined the cluster; the node's credential is saved in {CREDENTIAL_FILE}");
        }
        if self.cfg.period.is_none() {
            self.period = r.period;
        }
        Ok(())
    }

    /// A node agent on the server's own machine talks to it on loopback, where any local account
    /// may listen while the server is down and would then be sent the node's credential (or its
    /// join token) and its reports. The account that ran the server when the node registered is
    /// kept in `SERVER_UID_FILE`; a loopback server run by another is sent nothing (why, when
    /// not). A server elsewhere, or one the kernel cannot say about, is not checked.
    fn server_is_its_own(&self) -> Result<(), String> {
        let base = self.cfg.client.base();
        match (self.server_uid, libra_api::local::loopback_server_owner(base)) {
            (Some(want), Some(now)) if want != now => Err(format!(
                "the server at {base} is run by the Unix account with uid {now}, not uid {want} as when this node registered: \
                 another account may have taken its port while the server was down, so nothing is sent to it \
                 (if the server's account changed on purpose, remove {})",
                self.cfg.workdir.join(SERVER_UID_FILE).display()
            )),
            _ => Ok(()),
        }
    }

    /// Keeps the account running a loopback server the node has just registered with, if none
    /// is kept yet.
    fn keep_server_owner(&mut self) {
        if self.server_uid.is_some() {
            return;
        }
        if let Some(uid) = libra_api::local::loopback_server_owner(self.cfg.client.base()) {
            match std::fs::write(self.cfg.workdir.join(SERVER_UID_FILE), format!("{uid}\n")) {
                Ok(()) => self.server_uid = Some(uid),
                Err(e) => tracing::warn!("cannot keep the server's account in {SERVER_UID_FILE}: {e}"),
            }
        }
    }

    /// Runs until `stop` returns true (checked every loop).
    pub fn run(&mut self, stop: impl Fn() -> bool) -> Result<(), NodeError> {
        let mut registered = false;
        // Syncs refused right after registering, since the last one taken.
        let mut refused_fresh = 0u32;
        let mut next_control = Instant::now();
        let mut backoff = Duration::from_millis(200);
        while !stop() {
            let fresh = !registered;
            if let Err(why) = self.server_is_its_own() {
                tracing::warn!("{why}");
                self.reap();
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
            if !registered {
                match self.register() {
                    Ok(()) => {
                        registered = true;
                        self.keep_server_owner();
                        backoff = Duration::from_millis(200);
                        tracing::info!(node = %self.cfg.name, server = %self.cfg.client.base(), "registered");
                    }
                    Err(e @ (NodeError::Refused(_) | NodeError::Credential(_))) => return Err(e),
                    Err(e) => {
                        tracing::warn!("register: {e}; retrying");
                        self.reap();
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                }
            }
            self.reap();
            self.enforce_time_limits();
            if Instant::now() >= next_control {
                self.control();
                next_control = Instant::now() + Duration::from_secs_f64(self.period);
            }
            let wait_ms = if self.exited.is_empty() { 500 } else { 0 };
            let req = SyncRequest {
                name: self.cfg.name.clone(),
                mechanism: self.mechanism(),
                running: self.running_reports(),
                exited: self.exited.values().cloned().collect(),
                wait_ms,
            };
            match self.client.sync(&req) {
                Ok(resp) => {
                    backoff = Duration::from_millis(200);
                    refused_fresh = 0;
                    if resp.reregister {
                        registered = false;
                    }
                    self.apply(resp);
                }
                Err(e) => {
                    // The server is away: keep the jobs running, keep the reports, try again.
                    tracing::warn!("sync: {e}");
                    if e.status() == Some(403) {
                        // Register again: the server may have forgotten the node, and a
                        // registration refuses for good if it must. Refused right after
                        // registering, the server will not take this node's reports, unless it
                        // forgot the node in between (an administrator's `forget` as the node
                        // joined): with a join token, the node joins once more before it stops.
                        if fresh && (self.cfg.join_token.is_none() || refused_fresh > 0) {
                            return Err(NodeError::Refused(e.to_string()));
                        }
                        refused_fresh += u32::from(fresh);
                        registered = false;
                        continue;
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        Ok(())
    }

    fn running_reports(&self) -> Vec<RunningReport> {
        self.jobs
            .values()
            .filter(|r| r.slurm.as_ref().is_none_or(|s| s.started))
            .map(|r| RunningReport {
                job: r.spec.job,
                cpu_seconds: r.cpu,
                suspended: r.suspended,
                share: r.share,
                start_time: r.start_time,
                output: crate::output_reads::chunks(&r.watched, launch::RUNNING_CHUNK),
            })
            .collect()
    }

    fn apply(&mut self, resp: SyncResponse) {
        if resp.job_control != self.job_control {
            tracing::info!(from = ?self.job_control, to = ?resp.job_control, "job control changes with the policy");
            self.job_control = resp.job_control;
        }
        for a in resp.output_acks {
            if let Some(r) = self.jobs.get_mut(&a.job) {
                for w in &mut r.watched {
                    w.acked = match w.stream {
                        libra_api::Stream::Stdout => a.stdout,
                        libra_api::Stream::Stderr => a.stderr,
                    };
                }
            }
        }
        for p in resp.promises {
            // `libra update` moved the job's deadline: job control follows the new promise.
            if let Some(r) = self.jobs.get_mut(&p.job) {
                if r.spec.deadline_at != p.deadline_at || r.spec.share != p.share {
                    tracing::info!(
                        job = p.job,
                        deadline_at = p.deadline_at,
                        share = p.share,
                        "the job's promise changed"
                    );
                    r.spec.deadline_at = p.deadline_at;
                    r.spec.share = p.share;
                }
            }
        }
        for job in resp.ack {
            self.exited.remove(&job);
            // The server knows how the job ended: a later agent has nothing to report for it
            // (the pid file goes first: without it the directory is a leftover), and the
            // directory goes, scratch included (its output is on the server). Otherwise a
            // node's work directory would grow by a directory for every job it ever ran.
            let dir = self.cfg.workdir.join(format!("job-{job}"));
            let _ = std::fs::remove_file(dir.join(PID_FILE));
            let _ = std::fs::remove_file(dir.join(SLURM_FILE));
            if !self.jobs.contains_key(&job) {
                discard(&self.cleaner, &dir);
            }
        }
        for job in resp.kill {
            if let Some(r) = self.jobs.get_mut(&job) {
                match &mut r.slurm {
                    Some(sj) => {
                        let asked = *sj.kill_asked.get_or_insert_with(Instant::now);
                        if asked.elapsed() > SLURM_KILL_GRACE {
                            tracing::warn!(
                                job,
                                slurm_job = sj.id,
                                "still running after the server stopped it: killing what is in its group"
                            );
                            signal_procs(sj.procs.as_deref(), libc::SIGKILL);
                        }
                    }
                    None => {
                        tracing::info!(job, "killing (cancelled or no longer this node's)");
                        proc::signal_group(r.pid, libc::SIGCONT);
                        proc::signal_group(r.pid, libc::SIGKILL);
                    }
                }
            }
        }
        for job in resp.suspend {
            if let Some(r) = self.jobs.get_mut(&job) {
                self.enforcer.set_suspended(job, true);
                // Slurm suspends its own jobs (the server runs scontrol suspend).
                if r.slurm.is_none() {
                    proc::signal_group(r.pid, libc::SIGSTOP);
                }
                r.suspended = true;
            }
        }
        for job in resp.resume {
            if let Some(r) = self.jobs.get_mut(&job) {
                r.suspended = false;
                if r.slurm.is_none() {
                    proc::signal_group(r.pid, libc::SIGCONT);
                }
                self.enforcer.set_suspended(job, false);
            }
        }
        let mut starts = resp.start;
        earliest_deadline_first(&mut starts);
        for s in starts {
            if self.jobs.contains_key(&s.job) || self.exited.contains_key(&s.job) {
                continue;
            }
            match (&self.cfg.slurm, s.slurm_job_id) {
                (None, None) => self.start(s),
                (Some(_), Some(_)) => self.adopt_slurm(s, None),
                (Some(_), None) => {
                    let why = format!("node {} runs only jobs Slurm launches (libra node --slurm), and this one has no Slurm job id: the server's executor is not Slurm", self.cfg.name);
                    self.failed_start(&s, why, unix_now());
                }
                (None, Some(id)) => {
                    let why = format!("node {}'s agent does not adopt Slurm jobs (Slurm job {id}): run it as libra node --slurm beside slurmd", self.cfg.name);
                    self.failed_start(&s, why, unix_now());
                }
            }
        }
    }

    /// The account a job runs as: the one the server names, looked up on this node (refused if
    /// there is none, or if it is root and the server did not say an administrator allowed
    /// that). None: this agent's own account, which is all an agent that is not root can give.
    fn identity_for(&self, s: &StartJob) -> Result<Option<proc::Identity>, String> {
        let Some(user) = &s.unix_user else { return Ok(None) };
        // SAFETY: geteuid has no memory effects.
        if unsafe { libc::geteuid() } != 0 {
            let me = proc::Identity::current().map(|i| i.user).unwrap_or_default();
            return if *user == me {
                Ok(None)
            } else {
                // The server names the node before every reason a node gives.
                Err(format!(
                    "this node's agent is not root: it runs jobs only as its own account {me}, not as {user}"
                ))
            };
        }
        match proc::Identity::lookup(user) {
            Ok(Some(id)) if id.uid == 0 && !s.allow_root => Err(format!(
                "jobs do not run as root unless an administrator allows it for their user (the account mapped is {user})"
            )),
            Ok(Some(id)) => Ok(Some(id)),
            Ok(None) => Err(format!("the Unix account {user} does not exist on this node")),
            Err(e) => Err(format!("looking up the Unix account {user} on this node: {e}")),
        }
    }

    fn start(&mut self, s: StartJob) {
        let dir = self.cfg.workdir.join(format!("job-{}", s.job));
        let now = unix_now();
        let share = s.share;
        let identity = match self.identity_for(&s) {
            Ok(i) => i,
            Err(error) => return self.failed_start(&s, error, now),
        };
        // The agent's own directory for the job: failing that is the node's fault (its disk).
        if let Err(error) = record_dir(&dir, &s, identity.as_ref(), self.scratch.as_ref(), self.pool.as_ref())
        {
            return self.failed_start_on_node(&s, error, now);
        }
        let files = match JobFiles::plan(&s, &dir, &self.cfg.name, identity.as_ref().map(|i| i.uid)) {
            Ok(f) => f,
            Err(error) => return self.failed_start(&s, error, now),
        };
        let tmp_mb = self.cfg.tmp_mb.filter(|mb| *mb > 0);
        if tmp_mb.is_some() {
            // (Off the loop: the paths resolve through the job's file systems; see `plan`.)
            let (f, name) = (files.clone(), self.cfg.name.clone());
            let looked = crate::output_reads::within(launch::DIR_LOOK_WAIT, move || {
                launch::under_private_tmp(&f, &name)
            });
            let error = looked.unwrap_or_else(|| {
                Some(format!(
                    "its working directory or output files did not answer within {} s on node {}: their file system does not respond",
                    launch::DIR_LOOK_WAIT.as_secs(),
                    self.cfg.name
                ))
            });
            if let Some(error) = error {
                return self.failed_start(&s, error, now);
            }
        }
        // The job's lock, for its keeper to hold (see `LOCK_FILE`). Held already: a process of
        // this job runs that this agent does not know of (it outlived an agent that died
        // starting it, and gave no pid file in time). It is never started a second time: the
        // start fails, and the job ends failed (its groups are left as they are: the process is
        // in them).
        let lock = match &self.cfg.keeper {
            Some(_) => match job_lock(&dir) {
                Ok(Some(f)) => Some(f),
                Ok(None) => {
                    let why = "a process of this job, left by an agent that died starting it, still runs: not started a second time";
                    return self.failed_start(&s, why.to_string(), now);
                }
                Err(e) => {
                    return self.failed_start_on_node(&s, format!("cannot take the job's lock: {e}"), now)
                }
            },
            None => None,
        };
        let lock_fd = lock.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // Whose fault a failure to start is (`Fault`): everything up to the launch itself is the
        // node's (its control groups, its disk); the launch is the job's (its directory, its
        // program).
        // Every job is in a memory group of its own under the node's (whose limit is the
        // node's `mem_mb`, when it offers a number), limited to what it asked where it asked.
        let memory = match &mut self.memory {
            Some(m) => m.prepare(s.job, s.mem_mb).map(Some).map_err(|e| Fault::Node(e.to_string())),
            None => Ok(None),
        };
        // A job that asked no memory is the first the kernel's OOM killer takes.
        let oom_score_adj = (s.mem_mb == 0).then_some(NO_MEMORY_OOM_SCORE_ADJ);
        let counted = match &mut self.cpu_account {
            Some(a) => a.prepare(s.job).map(Some).map_err(|e| Fault::Node(e.to_string())),
            None => Ok(None),
        };
        let launched = memory.and_then(|mem| {
            let acct = counted?;
            self.enforcer
                .prepare(s.job, share)
                .map_err(|e| Fault::Node(e.to_string()))
                .map(|cpu| cpu.into_iter().chain(mem).chain(acct).collect::<Vec<_>>())
        });
        let account = identity.clone().or_else(proc::Identity::current);
        let env = launch::environment(&s, &self.cfg.name, &files, account.as_ref());
        // What the keeper is to start, as whom, where (the agent's account keeps the job: the
        // job cannot signal it, nor forge what it records).
        let job = proc::JobLaunch {
            argv: s.command.clone(),
            env: env.clone(),
            cwd: files.cwd.clone(),
            stdout: files.stdout.clone(),
            stderr: files.stderr.clone(),
            append: files.append,
            identity: identity.clone(),
            tmp_mb,
            max_tasks: self.max_tasks,
            oom_score_adj,
        };
        let keeper_log = dir.join("keeper.log");
        let argv: Vec<String> = match &self.cfg.keeper {
            Some(k) => vec![
                k.to_string_lossy().into_owned(),
                "job-keeper".into(),
                "--record".into(),
                dir.to_string_lossy().into_owned(),
            ],
            None => s.command.clone(),
        };
        let launched = launched.and_then(|groups| {
            serde_json::to_string(&job)
                .map_err(|e| e.to_string())
                .and_then(|t| std::fs::write(dir.join(proc::LAUNCH_FILE), t).map_err(|e| e.to_string()))
                .map_err(|e| {
                    Fault::Node(format!("cannot write the job's launch file in {}: {e}", dir.display()))
                })
                .map(|()| groups)
        });
        // A keeper's exit file from an earlier run of a job with this id must not be taken
        // for this one's.
        let _ = std::fs::remove_file(dir.join(proc::EXIT_FILE));
        // What the server asked for, before the process exists: an agent that dies the instant
        // after starting it leaves the next one all it needs to adopt the job (the child writes
        // its own pid file before exec) instead of starting it a second time. Without it (a
        // full disk) the job is not started: a crash of this agent would lose it.
        let launched = launched.and_then(|groups| {
            serde_json::to_string(&JobRecord { spec: s.clone(), start_time: now })
                .map_err(std::io::Error::other)
                .and_then(|r| std::fs::write(dir.join(JOB_FILE), r))
                .map_err(|e| Fault::Node(format!("cannot write the job's record in {}: {e}", dir.display())))
                .map(|()| groups)
        });
        let keeping = self.cfg.keeper.is_some();
        // The keeper's own environment: nothing of the job's (see `proc::JobLaunch`), but its id,
        // by which an agent that follows tells the keeper apart (see `orphans`).
        let mut keeper_env = vec![
            ("PATH".to_string(), "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("LIBRA_JOB_ID".to_string(), s.job.to_string()),
        ];
        if let Some(fd) = lock_fd {
            keeper_env.push((proc::JOB_LOCK_FD_ENV.to_string(), fd.to_string()));
        }
        let launched = launched.and_then(|groups| {
            let l = if keeping {
                proc::Launch {
                    argv: &argv,
                    cwd: &dir,
                    stdout: &keeper_log,
                    stderr: None,
                    append: true,
                    env: Some(&keeper_env),
                    cgroup_procs: &groups,
                    pid_file: Some(&dir.join(PID_FILE)),
                    identity: None,
                    keep_fd: lock_fd,
                    // The keeper stays in the node's namespace; the job it starts gets its own.
                    tmp_mb: None,
                    record: None,
                    own_session: true,
                    // The keeper is the agent's account; the job it starts is limited.
                    max_tasks: None,
                    oom_score_adj: None,
                }
            } else {
                proc::Launch {
                    argv: &argv,
                    cwd: &files.cwd,
                    stdout: &files.stdout,
                    stderr: files.stderr.as_deref(),
                    append: files.append,
                    env: Some(&env),
                    cgroup_procs: &groups,
                    pid_file: Some(&dir.join(PID_FILE)),
                    identity: identity.as_ref(),
                    keep_fd: None,
                    tmp_mb,
                    record: Some(&dir),
                    own_session: true,
                    max_tasks: self.max_tasks,
                    oom_score_adj,
                }
            };
            let who = identity.as_ref().map(|i| format!(" as {}", i.user)).unwrap_or_default();
            proc::launch(&l).map_err(|e| {
                Fault::Job(format!("cannot start {:?}{who} in {}: {e}", s.command, files.cwd.display()))
            })
        });
        // The keeper holds the lock now (or none was started): this agent's copy goes.
        drop(lock);
        match launched {
            Ok(pid) => {
                tracing::info!(job = s.job, pid, share, "started");
                // Its process told apart from whatever later reuses its pid.
                let ticks = proc::start_ticks(pid);
                if let Some(t) = ticks {
                    let tmp = dir.join(format!("{PID_FILE}.tmp"));
                    if let Err(e) = std::fs::write(&tmp, format!("{pid} {t}\n"))
                        .and_then(|()| std::fs::rename(&tmp, dir.join(PID_FILE)))
                    {
                        tracing::warn!(job = s.job, "start time not recorded: {e}");
                    }
                }
                self.enforcer.started(s.job, pid);
                if s.suspended {
                    self.enforcer.set_suspended(s.job, true);
                    proc::signal_group(pid, libc::SIGSTOP);
                }
                let suspended = s.suspended;
                self.jobs.insert(
                    s.job,
                    Running {
                        spec: s,
                        pid,
                        ticks,
                        adopted: false,
                        start_time: now,
                        cpu: 0.0,
                        share,
                        suspended,
                        dir,
                        watched: files.watched,
                        timed_out: None,
                        slurm: None,
                    },
                );
            }
            Err(fault) => {
                self.enforcer.remove(s.job);
                if let Some(m) = &mut self.memory {
                    m.remove(s.job);
                }
                if let Some(a) = &mut self.cpu_account {
                    a.remove(s.job);
                }
                match fault {
                    Fault::Node(error) => self.failed_start_on_node(&s, error, now),
                    Fault::Job(error) => self.failed_start(&s, error, now),
                }
            }
        }
    }

    /// Takes a job Slurm launched (or will launch) on this node: its group in the enforcer, with
    /// the admitted share; its processes are moved there by `follow_slurm_jobs`. `since`: when
    /// an earlier agent adopted it.
    fn adopt_slurm(&mut self, s: StartJob, since: Option<f64>) {
        let Some(id) = s.slurm_job_id else { return };
        let now = unix_now();
        let dir = self.cfg.workdir.join(format!("job-{}", s.job));
        let procs = match self.enforcer.prepare(s.job, s.share) {
            Ok(p) => p,
            Err(e) => {
                return self.failed_start(
                    &s,
                    format!("node {}: the job's CPU group: {e}", self.cfg.name),
                    now,
                )
            }
        };
        // Where cpuacct is mounted apart, the CPU group counts nothing: the job's processes join
        // an accounting group too, whose count holds its steps that have ended.
        let counted = match &mut self.cpu_account {
            Some(a) => a
                .prepare(s.job)
                .map_err(|e| {
                    tracing::warn!(
                        job = s.job,
                        "its accounting group: {e}; its CPU is read from its processes"
                    )
                })
                .ok(),
            None => None,
        };
        let owner = self.identity_for(&s).ok().flatten().map(|i| i.uid);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(job = s.job, "{}: {e}", dir.display());
        }
        let watched = JobFiles::plan(&s, &dir, &self.cfg.name, owner).map(|f| f.watched).unwrap_or_default();
        let start_time = since.unwrap_or(now);
        let record = serde_json::to_string(&JobRecord { spec: s.clone(), start_time })
            .map_err(std::io::Error::other)
            .and_then(|r| std::fs::write(dir.join(SLURM_FILE), r));
        if let Err(e) = record {
            tracing::warn!(
                job = s.job,
                "job record not written (a restart of this agent would lose the job): {e}"
            );
        }
        tracing::info!(job = s.job, slurm_job = id, share = s.share, "adopted from Slurm");
        let (share, suspended) = (s.share, s.suspended);
        if suspended {
            self.enforcer.set_suspended(s.job, true);
        }
        self.jobs.insert(
            s.job,
            Running {
                spec: s,
                pid: 0,
                ticks: None,
                adopted: false,
                start_time,
                cpu: 0.0,
                share,
                suspended,
                dir,
                watched,
                timed_out: None,
                slurm: Some(SlurmJob { id, procs, started: since.is_some(), kill_asked: None, counted }),
            },
        );
        // Its processes join its group at once, not a period later.
        self.follow_slurm_jobs(now);
    }

    /// Every period, for the jobs Slurm runs here: their processes (new steps too) into their
    /// groups, their CPU from the groups, and the end of those Slurm no longer runs.
    fn follow_slurm_jobs(&mut self, now: f64) {
        let Some(slurm) = self.cfg.slurm.clone() else { return };
        let ids: Vec<u64> = self.jobs.values().filter_map(|r| r.slurm.as_ref().map(|s| s.id)).collect();
        if ids.is_empty() {
            return;
        }
        let states = match slurm.states(&ids) {
            Ok(s) => s,
            Err(e) => {
                // Slurm cannot be asked: keep the jobs as they are until it can.
                tracing::warn!("{e}");
                return;
            }
        };
        let mut ended = Vec::new();
        for (job, r) in self.jobs.iter_mut() {
            let Some(sj) = &mut r.slurm else { continue };
            let state = states.get(&sj.id).map(String::as_str);
            if !sj.started && state.is_some_and(|s| s != "PENDING" && s != "CONFIGURING") {
                sj.started = true;
                r.start_time = now;
            }
            let pids = if state.is_some_and(crate::slurm::active) {
                slurm.listpids(sj.id, &self.cfg.name).unwrap_or_default()
            } else {
                Vec::new()
            };
            // Into its group (with the CPU they had used outside it, part of its bill), through
            // the step catcher, which moves new steps' processes between these looks.
            let groups: Vec<PathBuf> = sj.counted.iter().chain(sj.procs.iter()).cloned().collect();
            let before = match &self.steps {
                Some(steps) if !groups.is_empty() => {
                    steps.follow(*job, sj.id, groups);
                    steps.keep(*job, &pids)
                }
                _ => 0.0,
            };
            // What its group counts (the accounting group's where the CPU group counts nothing).
            let counted =
                self.enforcer.cpu_seconds(*job).or_else(|| self.cpu_account.as_ref()?.seconds(*job));
            let cpu =
                counted.map(|in_group| in_group + before).unwrap_or_else(|| crate::slurm::pids_cpu(&pids));
            r.cpu = r.cpu.max(cpu);
            if !state.is_some_and(crate::slurm::active) {
                ended.push(*job);
            }
        }
        for job in ended {
            let Some(r) = self.jobs.remove(&job) else { continue };
            if let Some(steps) = &self.steps {
                steps.forget(job);
            }
            // Whatever is left in its groups goes with it, and the groups.
            self.enforcer.remove(job);
            if let Some(a) = &mut self.cpu_account {
                a.remove(job);
            }
            let output = crate::output_reads::chunks(&r.watched, libra_api::OUTPUT_LIMIT as u64);
            tracing::info!(job, cpu = r.cpu, "Slurm no longer runs it");
            self.exited.insert(
                job,
                ExitReport {
                    job,
                    // Slurm's completion record gives the server the exit code.
                    exit_code: None,
                    signal: None,
                    cpu_seconds: r.cpu,
                    start_time: r.start_time,
                    end_time: now,
                    output,
                    error: None,
                    timed_out: false,
                    node_fault: false,
                },
            );
        }
    }

    /// Reports a job that could not be started, with the reason its owner will read.
    fn failed_start(&mut self, s: &StartJob, error: String, now: f64) {
        self.failed_start_as(s, error, now, false);
    }

    /// A start that failed through the node's own fault (its disk, its control groups): the
    /// server drains the node, so that it does not fail every job placed on it.
    fn failed_start_on_node(&mut self, s: &StartJob, error: String, now: f64) {
        self.failed_start_as(s, error, now, true);
    }

    fn failed_start_as(&mut self, s: &StartJob, error: String, now: f64, node_fault: bool) {
        tracing::warn!(job = s.job, node_fault, "{error}");
        self.exited.insert(
            s.job,
            ExitReport {
                job: s.job,
                exit_code: None,
                signal: None,
                cpu_seconds: 0.0,
                start_time: now,
                end_time: now,
                output: Vec::new(),
                error: Some(error),
                timed_out: false,
                node_fault,
            },
        );
    }

    /// Stops jobs that have run past their time limit (wall-clock time since they started):
    /// SIGTERM to the whole job, then SIGKILL after `KILL_WAIT`.
    fn enforce_time_limits(&mut self) {
        let now = unix_now();
        // Slurm stops its jobs at their time limit itself (sbatch --time).
        for r in self.jobs.values_mut().filter(|r| r.slurm.is_none()) {
            match (r.timed_out, r.spec.time_limit) {
                (None, Some(limit)) if now - r.start_time > limit => {
                    tracing::info!(job = r.spec.job, limit, "time limit reached: stopping the job");
                    proc::signal_group(r.pid, libc::SIGCONT);
                    proc::signal_group(r.pid, libc::SIGTERM);
                    r.timed_out = Some(Instant::now());
                }
                (Some(at), _) if at.elapsed() > KILL_WAIT => {
                    proc::signal_group(r.pid, libc::SIGKILL);
                }
                _ => {}
            }
        }
    }

    fn reap(&mut self) {
        while let Ok((pid, exit, at)) = self.ended.try_recv() {
            self.early.insert(pid, (exit, at));
        }
        let mut done: Vec<(u64, proc::Exit, f64)> = self
            .jobs
            .iter()
            .filter_map(|(id, r)| self.early.remove(&r.pid).map(|(e, at)| (*id, e, at)))
            .collect();
        // Adopted jobs are not our children: their end is seen by looking.
        let now = unix_now();
        done.extend(
            self.jobs
                .iter()
                .filter(|(_, r)| r.adopted && !r.ticks.is_some_and(|t| proc::alive(r.pid, t)))
                .map(|(id, _)| (*id, proc::Exit { code: None, signal: None, cpu_seconds: 0.0 }, now)),
        );
        for (id, exit, end_time) in done {
            let Some(mut r) = self.jobs.remove(&id) else { continue };
            // Its group's count, before what the job left behind (an escapee) is killed: the
            // CPU of every process it ever had.
            r.cpu = r.cpu.max(self.group_cpu(id).unwrap_or(0.0));
            // Make sure nothing the job left behind keeps running outside any accounting.
            proc::signal_group(r.pid, libc::SIGKILL);
            self.enforcer.remove(id);
            if let Some(m) = &mut self.memory {
                m.remove(id);
            }
            if let Some(a) = &mut self.cpu_account {
                a.remove(id);
            }
            let record = JobRecord { spec: r.spec, start_time: r.start_time };
            let seen = (!r.adopted).then_some((exit, end_time));
            let mut report =
                exit_report(&record, &r.dir, &r.watched, exit.cpu_seconds.max(r.cpu), seen, end_time);
            report.timed_out = r.timed_out.is_some();
            tracing::info!(job = id, code = ?report.exit_code, signal = ?report.signal, cpu = report.cpu_seconds, "exited");
            self.exited.insert(id, report);
        }
    }

    /// The CPU seconds job `id`'s control group has used, every process in it counted: its
    /// CPU group's count, else its accounting group's (`cpu_account`); None where neither
    /// counts (no control groups).
    fn group_cpu(&self, id: u64) -> Option<f64> {
        self.enforcer.cpu_seconds(id).or_else(|| self.cpu_account.as_ref()?.seconds(id))
    }

    /// Job control (Algorithm 2, or EDF under the EDF policies): each job's share from now on,
    /// from the CPU time the kernel accounted to it.
    fn control(&mut self) {
        let now = unix_now();
        self.raise_oom_scores();
        // Each job's whole session: children that are still running count too.
        let by_session = proc::cpu_by_session();
        self.follow_slurm_jobs(now);
        let groups: HashMap<u64, f64> =
            self.jobs.keys().filter_map(|&id| Some((id, self.group_cpu(id)?))).collect();
        for (id, r) in self.jobs.iter_mut().filter(|(_, r)| r.slurm.is_none()) {
            if let Some(cpu) = by_session.get(&r.pid).copied().or_else(|| proc::cpu_seconds(r.pid)) {
                r.cpu = r.cpu.max(cpu);
            }
            // The group counts the processes that left the session too (`cpu_account`).
            if let Some(&cpu) = groups.get(id) {
                r.cpu = r.cpu.max(cpu);
            }
        }
        let progress: Vec<JobProgress> = self
            .jobs
            .values()
            .map(|r| JobProgress {
                job: r.spec.job,
                estimate: r.spec.estimate,
                cpu: r.cpu,
                deadline_at: r.spec.deadline_at,
                admitted: r.spec.share,
                procs: r.spec.procs,
                cpus_per_task: r.spec.cpus_per_task,
                suspended: r.suspended,
            })
            .collect();
        for (job, share) in control::shares(self.job_control, &progress, now, self.cfg.cpus) {
            let Some(r) = self.jobs.get_mut(&job) else { continue };
            // Only a real change is re-told: every rewrite of a cap restarts the kernel's
            // accounting period and hands the job a fresh quota, so constant small corrections
            // would themselves skew the shares.
            if (share - r.share).abs() > SHARE_HYSTERESIS * r.share.max(0.01) {
                if let Err(e) = self.enforcer.set_share(r.spec.job, share) {
                    tracing::warn!(job = r.spec.job, "share not applied: {e}");
                    continue;
                }
                r.share = share;
            }
        }
    }
}

impl Agent {
    /// Gives every process of a job that asked no memory its `NO_MEMORY_OOM_SCORE_ADJ` again
    /// where it lowered it (possible only where the agent lacks CAP_SYS_RESOURCE): read from
    /// the job's memory group, which no process of the job can leave.
    fn raise_oom_scores(&mut self) {
        let (true, Some(memory)) = (self.oom_scores_lowerable, &self.memory) else { return };
        let want = NO_MEMORY_OOM_SCORE_ADJ.to_string();
        for r in self.jobs.values().filter(|r| r.slurm.is_none() && r.spec.mem_mb == 0) {
            let Some(procs) = memory.procs(r.spec.job) else { continue };
            for pid in std::fs::read_to_string(&procs).unwrap_or_default().split_whitespace() {
                let file = format!("/proc/{pid}/oom_score_adj");
                let Some(adj) =
                    std::fs::read_to_string(&file).ok().and_then(|v| v.trim().parse::<i16>().ok())
                else {
                    continue;
                };
                if adj < NO_MEMORY_OOM_SCORE_ADJ && std::fs::write(&file, &want).is_ok() {
                    tracing::info!(
                        job = r.spec.job,
                        pid,
                        adj,
                        "a job that asked no memory lowered its oom_score_adj: raised again"
                    );
                }
            }
        }
    }
}

/// CAP_SYS_RESOURCE's bit in a capability set.
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process has capability `bit` in its effective set (/proc/self/status).
fn has_capability(bit: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim().to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

/// Signals every process in a job's group (its cgroup.procs file).
fn signal_procs(procs: Option<&Path>, sig: i32) {
    let Some(procs) = procs else { return };
    for pid in std::fs::read_to_string(procs)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter(|p| *p > 1)
    {
        // SAFETY: kill(2) on a pid read from the job's own group, never 0 or 1.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Jobs are meant to outlive a restarting agent only while the agent is away by accident;
        // a clean stop of the agent leaves them running too (the server decides their fate).
        tracing::debug!("agent stopping with {} jobs", self.jobs.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(job: u64) -> String {
        serde_json::to_string(&JobRecord {
            spec: StartJob {
                job,
                command: vec!["sleep".into(), "30".into()],
                estimate: 30.0,
                submit_time: 1.0,
                deadline_at: 100.0,
                share: 0.5,
                suspended: false,
                mem_mb: 0,
                procs: 1,
                cpus_per_task: 1,
                name: None,
                rank: 0,
                nodes: Vec::new(),
                workdir: None,
                env: None,
                stdout: None,
                stderr: None,
                time_limit: None,
                unix_user: None,
                allow_root: false,
                array_id: None,
                array_task: None,
                slurm_job_id: None,
                slurm_env: false,
            },
            start_time: 2.0,
        })
        .unwrap()
    }

    #[test]
    fn an_answers_jobs_start_nearest_deadline_first() {
        let job = |id: u64, deadline_at: f64| {
            let r: JobRecord = serde_json::from_str(&record(id)).unwrap();
            StartJob { deadline_at, ..r.spec }
        };
        let mut starts = vec![job(2, 60.0), job(3, 60.0), job(5, 6.0), job(1, 61.0)];
        earliest_deadline_first(&mut starts);
        assert_eq!(starts.iter().map(|s| s.job).collect::<Vec<_>>(), [5, 2, 3, 1]);
    }

    fn reap_within(pid: i32, secs: u64) -> proc::Exit {
        let t0 = Instant::now();
        loop {
            if let Some(e) = proc::try_reap(pid) {
                return e;
            }
            assert!(t0.elapsed() < Duration::from_secs(secs), "process {pid} still runs");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_new_agent_stops_what_it_cannot_adopt_but_not_a_reused_pid() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job-7");
        let pid = proc::spawn(&["sleep".into(), "30".into()], &job, &[]).unwrap();
        let ticks = proc::start_ticks(pid).unwrap();
        // A pid file naming another process start (the pid was reused) is only removed.
        let other = dir.path().join("job-8");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(PID_FILE), format!("{pid} {}\n", ticks + 1)).unwrap();
        assert!(orphans(dir.path()).is_empty());
        assert!(!other.join(PID_FILE).exists());
        assert!(proc::try_reap(pid).is_none(), "a reused pid was killed");
        // A live process with no job record: nothing to adopt it by, so it is stopped.
        std::fs::write(job.join(PID_FILE), format!("{pid} {ticks}\n")).unwrap();
        assert!(orphans(dir.path()).is_empty());
        assert_eq!(reap_within(pid, 10).signal, Some(libc::SIGKILL));
    }

    #[test]
    fn a_job_whose_agent_died_before_recording_its_start_time_is_adopted_not_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job-7");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join(JOB_FILE), record(7)).unwrap();
        let argv: Vec<String> = vec!["sleep".into(), "30".into()];
        let env = |id: &str| vec![("LIBRA_JOB_ID".to_string(), id.to_string())];
        let (e7, e8) = (env("7"), env("8"));
        let launch = |env: &[(String, String)], pid_file: &std::path::Path| {
            proc::launch(&proc::Launch {
                env: Some(env),
                pid_file: Some(pid_file),
                ..proc::Launch::plain(&argv, &job, &job.join("stdout"))
            })
            .unwrap()
        };
        // Only what the child wrote before exec: its pid, no start time.
        let pid = launch(&e7, &job.join(PID_FILE));
        let found = orphans(dir.path());
        assert!(matches!(&found[..], [Orphan::Running { pid: p, .. }] if *p == pid), "not adopted");
        // A pid now held by some other job's process is not taken for this one.
        let other = dir.path().join("job-9");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(JOB_FILE), record(9)).unwrap();
        let pid8 = launch(&e8, &other.join(PID_FILE));
        let found = orphans(dir.path());
        assert!(found.iter().any(|o| matches!(o, Orphan::Ended { record, .. } if record.spec.job == 9)));
        assert!(proc::try_reap(pid8).is_none(), "the other process was stopped");
        for p in [pid, pid8] {
            proc::signal_group(p, libc::SIGKILL);
            reap_within(p, 10);
        }
    }

    /// The window the torture test found: an agent killed after forking a job's keeper and
    /// before the child wrote its pid file (joining the job's control groups first can take
    /// milliseconds). The next agent must not take the job for one never started, which the
    /// server would then have it start a second time: the job's lock, which the child holds from
    /// the fork on, says it runs, and the agent waits for the pid file and adopts it, though the
    /// child's environment is still the dead agent's.
    #[test]
    fn a_job_whose_agent_died_between_the_fork_and_its_pid_file_is_adopted_not_started_again() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job-7");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join(JOB_FILE), record(7)).unwrap();
        let lock = job_lock(&job).unwrap().expect("a free lock");
        let argv: Vec<String> = vec!["sleep".into(), "30".into()];
        // No LIBRA_JOB_ID: what a child before its exec shows.
        let env: Vec<(String, String)> = Vec::new();
        let pid = proc::launch(&proc::Launch {
            env: Some(&env),
            keep_fd: Some(lock.as_raw_fd()),
            ..proc::Launch::plain(&argv, &job, &job.join("stdout"))
        })
        .unwrap();
        // The agent is gone; its child holds the lock and writes its pid file a moment later.
        drop(lock);
        assert!(job_lock_held(&job));
        assert!(job_lock(&job).unwrap().is_none(), "a second start would take the lock");
        let pid_file = job.join(PID_FILE);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(pid_file, format!("{pid}\n")).unwrap();
        });
        let found = orphans(dir.path());
        writer.join().unwrap();
        assert!(
            matches!(&found[..], [Orphan::Running { pid: p, .. }] if *p == pid),
            "the job was not adopted: the server would start it again"
        );
        // Once its process is gone, the lock is free: a job directory with no pid file and a
        // free lock is a job that never started.
        proc::signal_group(pid, libc::SIGKILL);
        reap_within(pid, 10);
        assert!(!job_lock_held(&job));
        std::fs::remove_file(job.join(PID_FILE)).unwrap();
        assert!(orphans(dir.path()).is_empty());
        assert!(job_lock(&job).unwrap().is_some());
    }

    /// A job directory with no process of the job and nothing to report is a leftover, and is
    /// moved aside at once (its name free for a directory made anew) and removed whole, scratch
    /// included, without following a link the job left there; the node's other files and a
    /// running job's directory are not.
    #[test]
    fn finished_jobs_directories_are_leftovers_and_go_whole_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "keep").unwrap();
        std::fs::write(dir.path().join(CREDENTIAL_FILE), "secret").unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        // Job 5 ended and was acknowledged: its record, its exit, its lock and a scratch full
        // of the job's files, one a link out of the directory.
        let done = dir.path().join("job-5");
        std::fs::create_dir_all(done.join("work").join("deep")).unwrap();
        std::fs::write(done.join(JOB_FILE), record(5)).unwrap();
        drop(job_lock(&done).unwrap());
        std::fs::write(done.join("work").join("deep").join("data"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), done.join("work").join("out")).unwrap();
        // Job 6 runs.
        let running = dir.path().join("job-6");
        let pid = proc::spawn(&["sleep".into(), "30".into()], &running, &[]).unwrap();
        let ticks = proc::start_ticks(pid).unwrap();
        std::fs::write(running.join(PID_FILE), format!("{pid} {ticks}\n")).unwrap();
        std::fs::write(running.join(JOB_FILE), record(6)).unwrap();

        // A directory an earlier agent had moved aside and not finished removing.
        let aside = dir.path().join(format!("{DISCARDED}job-3-1-0"));
        std::fs::create_dir_all(aside.join("work")).unwrap();

        let (found, mut leftovers) = orphans_and_leftovers(dir.path());
        assert_eq!(found.len(), 1);
        leftovers.sort();
        assert_eq!(leftovers, vec![aside.clone(), done.clone()]);
        let cleaner = spawn_cleaner().unwrap();
        for d in &leftovers {
            discard(&cleaner, d);
        }
        // The job's name is free at once: a directory made anew for it is never removed.
        assert!(!done.exists());
        std::fs::create_dir_all(&done).unwrap();
        drop(cleaner);
        let t0 = Instant::now();
        let others = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(DISCARDED))
                .count()
        };
        while others() > 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(others(), 0, "a leftover was not removed");
        assert!(done.exists(), "the directory made anew was removed");
        assert_eq!(std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(), "keep");
        assert!(running.join(JOB_FILE).exists() && dir.path().join(CREDENTIAL_FILE).exists());
        assert!(dir.path().join("other").exists());
        proc::signal_group(pid, libc::SIGKILL);
        reap_within(pid, 10);
    }

    #[test]
    fn jobs_an_earlier_agent_left_are_adopted_or_their_end_reported() {
        let dir = tempfile::tempdir().unwrap();
        // Job 7 still runs.
        let running = dir.path().join("job-7");
        let pid = proc::spawn(&["sleep".into(), "30".into()], &running, &[]).unwrap();
        let ticks = proc::start_ticks(pid).unwrap();
        std::fs::write(running.join(PID_FILE), format!("{pid} {ticks}\n")).unwrap();
        std::fs::write(running.join(JOB_FILE), record(7)).unwrap();
        // Job 9 ended while no agent watched; its keeper wrote how.
        let ended = dir.path().join("job-9");
        std::fs::create_dir_all(&ended).unwrap();
        std::fs::write(ended.join(PID_FILE), format!("{pid} {}\n", ticks + 1)).unwrap();
        std::fs::write(ended.join(JOB_FILE), record(9)).unwrap();
        std::fs::create_dir_all(ended.join("work")).unwrap();
        std::fs::write(ended.join("work").join("stdout"), "result 42\n").unwrap();
        let exit = proc::Exit { code: Some(0), signal: None, cpu_seconds: 29.5 };
        proc::write_exit(&ended, &exit, 40.0, None).unwrap();
        // Job 11 ended too, with nothing recorded.
        let lost = dir.path().join("job-11");
        std::fs::create_dir_all(&lost).unwrap();
        std::fs::write(lost.join(PID_FILE), format!("{pid} {}\n", ticks + 2)).unwrap();
        std::fs::write(lost.join(JOB_FILE), record(11)).unwrap();

        let mut found = orphans(dir.path());
        found.sort_by_key(|o| match o {
            Orphan::Running { record, .. } | Orphan::Ended { record, .. } | Orphan::Slurm { record } => {
                record.spec.job
            }
        });
        assert_eq!(found.len(), 3);
        match &found[0] {
            Orphan::Running { record, pid: p, ticks: t, .. } => {
                assert_eq!((record.spec.job, *p, *t, record.start_time), (7, pid, ticks, 2.0));
            }
            Orphan::Ended { .. } | Orphan::Slurm { .. } => panic!("a running job was taken for ended"),
        }
        assert!(proc::try_reap(pid).is_none(), "an adopted job was stopped");
        let Orphan::Ended { record: r9, dir: d9 } = &found[1] else { panic!("job 9 is not ended") };
        let w9 = JobFiles::plan(&r9.spec, d9, "n", None).unwrap().watched;
        let rep = exit_report(r9, d9, &w9, 0.0, None, 50.0);
        assert_eq!((rep.job, rep.exit_code, rep.signal, rep.cpu_seconds), (9, Some(0), None, 29.5));
        assert_eq!((rep.start_time, rep.end_time), (2.0, 40.0));
        assert_eq!(rep.output[0].bytes().unwrap(), b"result 42\n");
        assert!(rep.error.is_none());
        let Orphan::Ended { record: r11, dir: d11 } = &found[2] else { panic!("job 11 is not ended") };
        let rep = exit_report(r11, d11, &[], 3.0, None, 50.0);
        assert_eq!((rep.exit_code, rep.cpu_seconds, rep.end_time), (None, 3.0, 50.0));
        assert!(rep.error.as_deref().unwrap_or("").contains("not recorded"), "{rep:?}");
        proc::signal_group(pid, libc::SIGKILL);
        reap_within(pid, 10);
    }
}
