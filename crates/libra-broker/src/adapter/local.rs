//! The `local` resource: real processes on this machine, each attempt in its own directory,
//! files staged in and out as the plan's task says.
//!
//! With a keeper (the `libra` binary, `EngineOptions::keeper`) each attempt runs in a process of
//! its own, `libra sweep keep-attempt DIR`, in a session of its own: it outlives the engine, and
//! records its outcome in its directory, so a resumed engine waits for it (or reads how it
//! ended) instead of running the job a second time. Without one, attempts run on the engine's
//! threads and a crash of the engine loses them.

use super::{
    read_outcome_file, write_marker, write_outcome_file, AdapterError, Launch, Outcome, ResourceAdapter,
};
use crate::plan::{substitute, Command, ExecKind, FileRef, Loc, Plan, Step, Stream, Vars};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// In an attempt's directory: what its keeper runs.
pub const ATTEMPT_FILE: &str = "libra.attempt";
/// In an attempt's directory: the keeper's pid, written by the keeper itself before it starts
/// any of the job.
pub const KEEPER_PID_FILE: &str = "libra.keeper";
/// In a keeper's environment: its attempt's key, by which a resumed engine knows the process.
pub const KEY_VAR: &str = "LIBRA_SWEEP_ATTEMPT";

/// Everything a keeper needs to run an attempt without the engine.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct AttemptSpec {
    pub attempt: i64,
    pub resource: usize,
    pub plan: String,
    pub root: PathBuf,
    pub vars: Vars,
}

/// Set in a keeper by the SIGTERM of a cancel (sent to its whole process group): the keeper
/// lives on to record how its killed job ended and the CPU it used, and starts nothing more.
static KEEPER_TERMINATED: AtomicBool = AtomicBool::new(false);

/// The processes the attempts of a resource (or one keeper) run now, and whether they were told
/// to stop. Both under one lock with each start: a command started as the cancel comes is
/// either signalled by it or signalled at its start, never left running.
#[derive(Default)]
pub struct Children {
    pids: Mutex<HashSet<i32>>,
    stopped: AtomicBool,
}

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.pids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the attempts were told to stop: nothing more is started.
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || KEEPER_TERMINATED.load(Ordering::SeqCst)
    }

    /// Sends `signal` to every command running now, and SIGTERM to any started later.
    pub fn stop(&self, signal: libc::c_int) {
        let pids = self.lock();
        self.stopped.store(true, Ordering::SeqCst);
        for &pid in pids.iter() {
            // SAFETY: signalling a child this process started; it leaves the set as soon as
            // it is reaped (`exec`).
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    fn add(&self, pid: i32) {
        let mut pids = self.lock();
        pids.insert(pid);
        if self.stopped() {
            // SAFETY: our own child, just started and not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }

    fn remove(&self, pid: i32) {
        self.lock().remove(&pid);
    }
}

/// In a keeper: a cancel's SIGTERM to the keeper's process group kills its job's commands, and
/// the keeper records how the job ended and what CPU it used (which the sweep pays for) rather
/// than dying with it. A handler, not SIG_IGN: a caught signal is reset to its default in the
/// programs the keeper starts, an ignored one would stay ignored.
fn keep_through_sigterm() -> Result<(), String> {
    // SAFETY: the action only stores to an atomic, which is async-signal-safe.
    unsafe {
        signal_hook_registry::register(libc::SIGTERM, || KEEPER_TERMINATED.store(true, Ordering::SeqCst))
    }
    .map(|_| ())
    .map_err(|e| format!("catching SIGTERM: {e}"))
}

/// How long a keeper's job may run on after the cancel's SIGTERM before the keeper kills it: less
/// than the engine's wait for the outcome (`engine::CANCEL_GRACE`), so that the engine hears it.
pub const KEEPER_KILL_AFTER: Duration = Duration::from_secs(3);

/// In a keeper: once a SIGTERM has come, and `KEEPER_KILL_AFTER` later, SIGKILL to every process
/// of the job (the keeper's descendants and the rest of the group it leads), but not to the
/// keeper, which then reaps its command and records the CPU it used: a job that ignores the
/// cancel is paid for, as one that ends on it is. A thread that looks every 100 ms (the signal's
/// handler may only set a flag).
fn kill_after_sigterm() {
    std::thread::spawn(|| {
        while !KEEPER_TERMINATED.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(KEEPER_KILL_AFTER);
        super::descendants::kill_all();
    });
}

pub struct Local {
    name: String,
    plan: Arc<Plan>,
    plan_text: Arc<str>,
    root: PathBuf,
    children: Arc<Children>,
    node_started: bool,
    keeper: Option<PathBuf>,
    /// Running keepers (each the leader of its own process group): those this adapter started
    /// and those it took up from an engine before it.
    keepers: Arc<Mutex<HashSet<i32>>>,
}

impl Local {
    pub fn new(
        name: String,
        plan: Arc<Plan>,
        plan_text: Arc<str>,
        root: PathBuf,
        keeper: Option<PathBuf>,
    ) -> Self {
        Local {
            name,
            plan,
            plan_text,
            root,
            children: Arc::default(),
            node_started: false,
            keeper,
            keepers: Arc::default(),
        }
    }

    fn start_keeper(&mut self, exe: &Path, l: Launch, done: Sender<Outcome>) -> Result<(), AdapterError> {
        use std::os::unix::process::CommandExt;
        let err = |msg: String| AdapterError::Start { resource: self.name.clone(), msg };
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
        let log = File::create(l.dir.join("keeper.log")).map_err(|e| err(e.to_string()))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["sweep", "keep-attempt"])
            .arg(&l.dir)
            .env(KEY_VAR, &l.key)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| err(e.to_string()))?)
            .stderr(log);
        // SAFETY: setsid between fork and exec is async-signal-safe; the keeper's session (and
        // so its jobs) outlives this process and can be signalled as one group.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child =
            cmd.spawn().map_err(|e| err(format!("cannot start the keeper {}: {e}", exe.display())))?;
        let pid = child.id() as i32;
        if let Ok(mut k) = self.keepers.lock() {
            k.insert(pid);
        }
        let keepers = self.keepers.clone();
        std::thread::spawn(move || {
            // Seen ended but not reaped yet: until `wait` below no other process can take its
            // pid, so neither can another group take its group's id, which is signalled here.
            let ended = ended_unreaped(pid);
            if let Ok(mut k) = keepers.lock() {
                k.remove(&pid);
            }
            let recorded = read_outcome_file(&l.dir);
            let lost = recorded.is_none().then(|| {
                let how = format!(
                    "the keeper ended ({}) without recording an outcome",
                    ended.as_deref().unwrap_or("how is not known")
                );
                let (o, _) = keeper_lost(&l, &how);
                if ended.is_some() {
                    // What is left of its group without the key in its environment.
                    // SAFETY: the group of our own child, not yet reaped (above).
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                }
                o
            });
            let _ = child.wait();
            if let Some(o) = recorded.or(lost) {
                let _ = done.send(Outcome { attempt: l.attempt, resource: l.resource, ..o });
            }
        });
        Ok(())
    }
}

/// Waits for our child `pid` to end without reaping it (`WNOWAIT`), and says how it ended;
/// `None` when that cannot be seen (the caller's `wait` still reaps it).
fn ended_unreaped(pid: i32) -> Option<String> {
    // SAFETY: an all-zero siginfo is a valid value for the kernel to overwrite.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid on our own child, into a valid siginfo; WNOWAIT leaves it a zombie.
        let r =
            unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    // SAFETY: filled in by a successful waitid for an ended child.
    let status = unsafe { info.si_status() };
    Some(match info.si_code {
        libc::CLD_EXITED => format!("exit status {status}"),
        _ => format!("killed by signal {status}"),
    })
}

/// The outcome of an attempt whose keeper ended without recording one (`how`: how it ended), as
/// when it is killed from outside (`kill -9`, the OOM killer): the processes its job left
/// running, found by the attempt's key in their environment, are killed, and the CPU they had
/// used is the attempt's, which the sweep pays for. They would otherwise run on beside the
/// job's next attempt, and free.
fn keeper_lost(l: &Launch, how: &str) -> (Outcome, usize) {
    let s = super::descendants::stop_by_key(KEY_VAR, &l.key);
    let mut message = format!("{how}; see keeper.log");
    if s.processes > 0 {
        message.push_str(&format!(
            "; the {} process(es) its job left running were killed, having used {:.2} CPU-s",
            s.processes, s.cpu
        ));
    }
    let o = Outcome {
        attempt: l.attempt,
        resource: l.resource,
        ok: false,
        exit_code: None,
        wall: 0.0,
        cpu: s.cpu,
        message,
        rejected: false,
        billed: None,
    };
    if s.processes > 0 {
        // Recorded where the keeper would have: an engine killed before it records the attempt
        // leaves the next one the CPU paid for (the processes are gone: nothing else knows it)
        // instead of an attempt taken for lost and run again.
        if let Err(e) = write_outcome_file(&l.dir, &o) {
            tracing::warn!(attempt = l.attempt, "recording the outcome in {}: {e}", l.dir.display());
        }
        tracing::warn!(attempt = l.attempt, processes = s.processes, cpu = s.cpu, "{}", o.message);
    }
    (o, s.processes)
}

/// Stops the live keepers of attempts (each its directory and key) and their jobs: a sweep
/// cancelled while no engine runs, whose keepers outlive the engine that started them. SIGTERM
/// to each keeper's process group, then SIGKILL to those still alive after `grace` (a job that
/// ignores SIGTERM). Returns once none is alive or all were killed.
pub fn stop_keepers(attempts: &[(PathBuf, String)], grace: Duration) {
    // A keeper killed from outside left its job running, found by its key (`keeper_lost`).
    for (dir, key) in attempts {
        if live_keeper(dir, key).is_none() {
            super::descendants::stop_by_key(KEY_VAR, key);
        }
    }
    let signal = |signal: libc::c_int| {
        let mut alive = 0;
        for (dir, key) in attempts {
            if let Some(pid) = live_keeper(dir, key) {
                alive += 1;
                // SAFETY: the process group of the keeper of this attempt (its pid checked
                // against the attempt's key), which leads its group.
                unsafe {
                    libc::kill(-pid, signal);
                }
            }
        }
        alive
    };
    if signal(libc::SIGTERM) == 0 {
        return;
    }
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(100));
        if attempts.iter().all(|(dir, key)| live_keeper(dir, key).is_none()) {
            return;
        }
    }
    signal(libc::SIGKILL);
}

/// The live keeper process of an attempt, if there is one: the pid its keeper recorded, still
/// running with the attempt's key in its environment (not some later process with that pid).
fn live_keeper(dir: &Path, key: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.join(KEEPER_PID_FILE)).ok()?.trim().parse().ok()?;
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let want = format!("{KEY_VAR}={key}");
    (pid > 1 && env.split(|b| *b == 0).any(|v| v == want.as_bytes())).then_some(pid)
}

/// `libra sweep keep-attempt DIR`: runs the attempt described in DIR as the engine would have
/// (its main task), records the outcome in DIR and in the experiment's outcome log, and returns
/// the exit status to leave with.
pub fn keep_attempt(dir: &Path) -> i32 {
    if let Err(e) = std::fs::write(dir.join(KEEPER_PID_FILE), format!("{}\n", std::process::id())) {
        eprintln!("libra sweep keep-attempt: recording the pid in {}: {e}", dir.display());
        return 1;
    }
    let spec: AttemptSpec = match std::fs::read_to_string(dir.join(ATTEMPT_FILE))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("libra sweep keep-attempt: {}: {e}", dir.join(ATTEMPT_FILE).display());
            return 1;
        }
    };
    let plan = match crate::plan::parse(&spec.plan) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("libra sweep keep-attempt: the plan: {e}");
            return 1;
        }
    };
    if let Err(e) = keep_through_sigterm() {
        eprintln!("libra sweep keep-attempt: {e}");
        return 1;
    }
    kill_after_sigterm();
    let t0 = Instant::now();
    let children = Children::default();
    let (ok, exit_code, (message, cpu)) = run_steps(&plan.main, &spec.root, dir, &spec.vars, &children);
    let o = Outcome {
        attempt: spec.attempt,
        resource: spec.resource,
        ok,
        exit_code,
        wall: t0.elapsed().as_secs_f64(),
        cpu,
        message,
        rejected: false,
        billed: None,
    };
    write_marker(dir, &o);
    if let Err(e) = write_outcome_file(dir, &o) {
        eprintln!("libra sweep keep-attempt: recording the outcome: {e}");
        return 1;
    }
    0
}

impl ResourceAdapter for Local {
    fn resume(&mut self, l: Launch, done: Sender<Outcome>) -> Result<bool, AdapterError> {
        if self.keeper.is_none() {
            return Ok(false);
        }
        if let Some(pid) = live_keeper(&l.dir, &l.key) {
            // Not our child: its end is seen by looking, and its outcome read from its directory.
            if let Ok(mut k) = self.keepers.lock() {
                k.insert(pid);
            }
            let keepers = self.keepers.clone();
            std::thread::spawn(move || {
                while live_keeper(&l.dir, &l.key).is_some() {
                    std::thread::sleep(Duration::from_millis(200));
                }
                if let Ok(mut k) = keepers.lock() {
                    k.remove(&pid);
                }
                let o = read_outcome_file(&l.dir).unwrap_or_else(|| {
                    let (o, _) = keeper_lost(&l, "the keeper ended without recording an outcome");
                    super::descendants::kill_group_members(pid);
                    o
                });
                let _ = done.send(Outcome { attempt: l.attempt, resource: l.resource, ..o });
            });
            return Ok(true);
        }
        // Ended while no engine listened, its outcome in its own directory.
        if let Some(o) = read_outcome_file(&l.dir) {
            let _ = done.send(Outcome { attempt: l.attempt, resource: l.resource, ..o });
            return Ok(true);
        }
        // Its keeper killed while no engine listened: what its job left running would run on
        // beside the attempt that replaces it, unpaid. Stopped, and paid for, as a failure.
        let (o, left_running) =
            keeper_lost(&l, "the keeper had ended without recording an outcome when the engine came back");
        if left_running > 0 {
            let _ = done.send(o);
            return Ok(true);
        }
        Ok(false)
    }

    fn start(&mut self, l: Launch, done: Sender<Outcome>) -> Result<(), AdapterError> {
        let err = |msg: String| AdapterError::Start { resource: self.name.clone(), msg };
        std::fs::create_dir_all(&l.dir)
            .map_err(|e| err(format!("cannot create {}: {e}", l.dir.display())))?;
        if !self.node_started && !self.plan.nodestart.is_empty() {
            // The node-start task runs once, before the first job, beside the job directories.
            let dir = l.dir.parent().unwrap_or(&l.dir).join(format!("nodestart-{}", self.name));
            std::fs::create_dir_all(&dir)
                .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
            let (ok, code, msg) = run_steps(&self.plan.nodestart, &self.root, &dir, &l.vars, &self.children);
            if !ok {
                return Err(err(format!("nodestart failed (exit {code:?}): {}", msg.0)));
            }
            self.node_started = true;
        }
        if let Some(exe) = self.keeper.clone() {
            return self.start_keeper(&exe, l, done);
        }
        let (plan, root, children) = (self.plan.clone(), self.root.clone(), self.children.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let (ok, exit_code, message) = run_steps(&plan.main, &root, &l.dir, &l.vars, &children);
            let o = Outcome {
                attempt: l.attempt,
                resource: l.resource,
                ok,
                exit_code,
                wall: t0.elapsed().as_secs_f64(),
                cpu: message.1,
                message: message.0,
                rejected: false,
                billed: None,
            };
            write_marker(&l.dir, &o);
            let _ = done.send(o);
        });
        Ok(())
    }

    /// SIGTERM to every command and keeper: each attempt's thread (or keeper) then reports how
    /// its job ended and the CPU it used, which the sweep pays for.
    fn cancel_all(&mut self) -> Vec<(i64, libra_core::Money)> {
        self.signal(libc::SIGTERM);
        Vec::new()
    }

    fn reports_after_cancel(&self) -> bool {
        true
    }

    /// SIGKILL to every command, and to every keeper still running (one that did not stop its
    /// job after the cancel), alone: its thread then reads the CPU its job used, which the sweep
    /// pays, before it kills the job (`keeper_lost`) and what is left of its group.
    fn kill_all(&mut self) {
        self.children.stop(libc::SIGKILL);
        if let Ok(k) = self.keepers.lock() {
            for &pid in k.iter() {
                // SAFETY: a keeper this adapter started (not yet seen ended: its thread takes it
                // out of the set first) or adopted (checked against the attempt's key when
                // taken up, and out of the set within 200 ms of its end).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Local {
    fn signal(&self, signal: libc::c_int) {
        self.children.stop(signal);
        if let Ok(k) = self.keepers.lock() {
            for &pid in k.iter() {
                // SAFETY: the process group of a keeper this adapter started or adopted (its
                // pid was checked against the attempt's key).
                unsafe {
                    libc::kill(-pid, signal);
                }
            }
        }
    }
}

fn resolve(f: &FileRef, root: &Path, node: &Path, vars: &Vars) -> Result<PathBuf, String> {
    let p = subst(&f.path, vars)?;
    Ok(match f.loc {
        Loc::Root => root.join(p),
        Loc::Node => node.join(p),
    })
}

fn subst(text: &str, vars: &Vars) -> Result<String, String> {
    substitute(text, &|n| vars.get(n).cloned()).map_err(|(_, n)| format!("unknown variable ${n}"))
}

/// Runs a task's steps in `node`. Returns (ok, last exit code, (message, CPU seconds)).
fn run_steps(
    steps: &[Step],
    root: &Path,
    node: &Path,
    vars: &Vars,
    children: &Children,
) -> (bool, Option<i32>, (String, f64)) {
    let mut ignore = false;
    let mut copied_back: Vec<String> = Vec::new();
    let mut out_target: Option<(Option<PathBuf>, bool)> = None;
    let mut err_target: Option<(Option<PathBuf>, bool)> = None;
    let mut cpu = 0.0;
    let mut last_code = Some(0);
    for s in steps {
        // Stopped (the sweep was cancelled): not even a step the plan lets fail goes on.
        if children.stopped() {
            record_copies(node, &copied_back);
            return (false, None, (STOPPED.to_string(), cpu));
        }
        let r: Result<(), String> = match &s.command {
            Command::OnError { ignore: i } => {
                ignore = *i;
                Ok(())
            }
            Command::Redirect { stream, append, target } => {
                let t = match target {
                    Some(f) => match subst(f, vars) {
                        Ok(p) => Some(node.join(p)),
                        Err(e) => return (false, None, (e, cpu)),
                    },
                    None => None,
                };
                match stream {
                    Stream::Stdout => out_target = Some((t, *append)),
                    Stream::Stderr => err_target = Some((t, *append)),
                }
                Ok(())
            }
            Command::Copy { from, to } => (|| {
                let a = resolve(from, root, node, vars)?;
                let b = resolve(to, root, node, vars)?;
                if let Some(parent) = b.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("copy: {}: {e}", parent.display()))?;
                }
                std::fs::copy(&a, &b).map_err(|e| format!("copy {} to {}: {e}", a.display(), b.display()))?;
                if to.loc == Loc::Root {
                    copied_back.push(b.to_string_lossy().into_owned());
                }
                Ok(())
            })(),
            Command::Substitute { input, output } => (|| {
                let a = node.join(subst(input, vars)?);
                let b = node.join(subst(output, vars)?);
                let text =
                    std::fs::read_to_string(&a).map_err(|e| format!("substitute {}: {e}", a.display()))?;
                let out = subst(&text, vars)?;
                std::fs::write(&b, out).map_err(|e| format!("substitute {}: {e}", b.display()))
            })(),
            Command::Exec { kind, args } => {
                match exec(*kind, args, node, vars, &out_target, &err_target, children) {
                    Ok((code, c)) => {
                        cpu += c;
                        last_code = code;
                        if code == Some(0) {
                            Ok(())
                        } else {
                            Err(format!(
                                "line {}: exited with {}",
                                s.line,
                                code.map_or("a signal".to_string(), |c| c.to_string())
                            ))
                        }
                    }
                    Err(e) => {
                        last_code = None;
                        Err(e)
                    }
                }
            }
        };
        if let Err(e) = r {
            if !ignore {
                record_copies(node, &copied_back);
                // Killed by the cancel: it says so (an engine taking up the outcome later, with
                // no message but this, records the job stopped rather than failed).
                if children.stopped() {
                    return (false, None, (STOPPED.to_string(), cpu));
                }
                return (false, last_code, (e, cpu));
            }
        }
    }
    record_copies(node, &copied_back);
    // Its last command killed by the cancel, but let fail by the plan: stopped all the same.
    if children.stopped() {
        return (false, None, (STOPPED.to_string(), cpu));
    }
    (true, last_code, (String::new(), cpu))
}

/// How an attempt stopped by its sweep's cancel ended. A keeper cannot tell its sweep's cancel
/// from any other SIGTERM (a Slurm time limit, say), so the words name both.
pub const STOPPED: &str = "stopped: its sweep was cancelled, or a SIGTERM came from outside it";

/// The files a job copied back to the root, one path a line, for `libra sweep results`.
pub const COPIED: &str = ".libra-copied";

fn record_copies(node: &Path, files: &[String]) {
    if !files.is_empty() {
        let _ = std::fs::write(node.join(COPIED), files.join("\n") + "\n");
    }
}

/// Where one output stream of a command goes.
enum Sink {
    /// Discarded, or a file the plan named (opened now: the plan asked for it).
    Now(Stdio),
    /// The job's own `stdout` / `stderr` file, created only once the command writes to it.
    Lazy(PathBuf),
}

fn open_out(node: &Path, target: &Option<(Option<PathBuf>, bool)>, default: &str) -> Result<Sink, String> {
    let (path, append) = match target {
        Some((None, _)) => return Ok(Sink::Now(Stdio::null())),
        Some((Some(p), a)) => (p.clone(), *a),
        // The job's own stdout/stderr files gather the output of all its commands.
        None => return Ok(Sink::Lazy(node.join(default))),
    };
    let f: File = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Sink::Now(Stdio::from(f)))
}

/// A job's own output file behind a pipe: the file is created at the first byte. Most jobs of
/// a large sweep print nothing, and creating two files per job (and deleting them later) was
/// most of what a job cost the file system: on ext4 without a journal the inode allocator skips
/// every inode deleted in the last minutes, so back-to-back sweeps of 10,000 jobs slowed down
/// run after run (REPRODUCING.md, "Bench").
struct LazyOut {
    path: PathBuf,
    read: File,
    file: Option<File>,
}

impl LazyOut {
    /// Moves what the pipe holds into the file. True at the end of the stream.
    fn pump(&mut self, buf: &mut [u8]) -> bool {
        use std::io::{Read, Write};
        match self.read.read(buf) {
            Ok(0) => true,
            Ok(n) => {
                if self.file.is_none() {
                    match OpenOptions::new().create(true).append(true).open(&self.path) {
                        Ok(f) => self.file = Some(f),
                        Err(e) => {
                            tracing::warn!(path = %self.path.display(), "cannot record the job's output: {e}")
                        }
                    }
                }
                if let Some(f) = self.file.as_mut() {
                    if let Err(e) = f.write_all(&buf[..n]) {
                        tracing::warn!(path = %self.path.display(), "cannot record the job's output: {e}");
                        self.file = None;
                    }
                }
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => false,
            Err(_) => true,
        }
    }
}

/// A pipe whose write end becomes the command's stream (both ends close on exec).
fn lazy_pipe(path: PathBuf) -> Result<(Stdio, LazyOut), String> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors, which are owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("a pipe for {}: {}", path.display(), std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and nothing else owns them.
    let (read, write) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    Ok((Stdio::from(write), LazyOut { path, read, file: None }))
}

/// Relays the pipes into their files until they end, or until the command `pid` has exited
/// while something it left behind still holds a pipe open: then a thread of its own keeps
/// relaying (`pid` None: until the end), so that the job ends when its command does, as it did
/// with plain files.
fn relay(mut outs: Vec<LazyOut>, pid: Option<i32>) {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 64 * 1024];
    while !outs.is_empty() {
        let mut fds: Vec<libc::pollfd> = outs
            .iter()
            .map(|o| libc::pollfd { fd: o.read.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        let timeout = if pid.is_some() { 200 } else { -1 };
        // SAFETY: a valid array of pollfd of the given length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if r == 0 {
            if pid.is_some_and(exited) {
                let rest = std::mem::take(&mut outs);
                std::thread::spawn(move || relay(rest, None));
            }
            continue;
        }
        for i in (0..fds.len()).rev() {
            if fds[i].revents != 0 && outs[i].pump(&mut buf) {
                outs.remove(i);
            }
        }
    }
}

/// Has our child `pid` exited? (Looked at without reaping it: wait4 reaps it with its rusage.)
fn exited(pid: i32) -> bool {
    // SAFETY: an all-zero siginfo_t is valid for the kernel to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waiting on our own child with a valid pointer; WNOWAIT leaves it unreaped.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: si_pid is set by waitid for a child that changed state (0 when none did).
    r == 0 && unsafe { info.si_pid() } != 0
}

/// `cmd.spawn()`, tried again while the program is "text file busy"
/// (`libra_node::proc::retry_while_busy`). A job's program is often a file the broker has just
/// copied into the job's directory, and while it was open for writing another job's thread may
/// have forked: that child holds the write end until it executes its own program, a moment
/// later. Jobs run side by side, so on a loaded machine this happens now and then.
fn spawn_when_not_busy(cmd: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    libra_node::proc::retry_while_busy(MAX_BUSY_WAIT, || cmd.spawn())
}

/// How long `spawn_when_not_busy` waits in all for a busy program before it reports the error.
const MAX_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs one command and returns its exit code (None if killed by a signal) and CPU seconds.
fn exec(
    kind: ExecKind,
    args: &[String],
    node: &Path,
    vars: &Vars,
    out: &Option<(Option<PathBuf>, bool)>,
    err: &Option<(Option<PathBuf>, bool)>,
    children: &Children,
) -> Result<(Option<i32>, f64), String> {
    let words: Vec<String> = args.iter().map(|a| subst(a, vars)).collect::<Result<_, _>>()?;
    let mut cmd = match kind {
        ExecKind::Shexec => {
            let mut c = std::process::Command::new("/bin/sh");
            c.arg("-c").arg(words.join(" "));
            c
        }
        ExecKind::Lexec => {
            let prog = words.first().ok_or("lexec: no program")?;
            // Not searched on PATH: a bare name means a file in the job's directory.
            let p = if prog.contains('/') { PathBuf::from(prog) } else { node.join(prog) };
            let mut c = std::process::Command::new(p);
            c.args(&words[1..]);
            c
        }
        ExecKind::Exec | ExecKind::Lpexec => {
            let prog = words.first().ok_or("exec: no program")?;
            let mut c = std::process::Command::new(prog);
            c.args(&words[1..]);
            c
        }
    };
    let mut lazy = Vec::new();
    let mut stdio = |sink: Sink| -> Result<Stdio, String> {
        match sink {
            Sink::Now(s) => Ok(s),
            Sink::Lazy(path) => {
                let (s, l) = lazy_pipe(path)?;
                lazy.push(l);
                Ok(s)
            }
        }
    };
    let (so, se) = (stdio(open_out(node, out, "stdout")?)?, stdio(open_out(node, err, "stderr")?)?);
    cmd.current_dir(node).stdin(Stdio::null()).stdout(so).stderr(se);
    let spawned = spawn_when_not_busy(&mut cmd);
    // The write ends of the pipes live in `cmd`: closed here, so that the relay sees the end
    // of the streams when the command (and whatever it started) is done.
    drop(cmd);
    let child = spawned.map_err(|e| format!("cannot run {:?}: {e}", words.first()))?;
    let pid = child.id() as i32;
    children.add(pid);
    relay(lazy, Some(pid));
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 rather than Child::wait: it also returns the child's CPU time, which is what
    // the resource charges for.
    let r = loop {
        // SAFETY: waiting on our own child with valid pointers to locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    children.remove(pid);
    drop(child);
    if r != pid {
        return Err(format!("waiting for {:?}: {}", words.first(), std::io::Error::last_os_error()));
    }
    let cpu = ru.ru_utime.tv_sec as f64
        + ru.ru_utime.tv_usec as f64 * 1e-6
        + ru.ru_stime.tv_sec as f64
        + ru.ru_stime.tv_usec as f64 * 1e-6;
    let code = if libc::WIFEXITED(status) { Some(libc::WEXITSTATUS(status)) } else { None };
    Ok((code, cpu))
}

#[cfg(test)]
mod tests {
    use super::{spawn_when_not_busy, MAX_BUSY_WAIT};
    use std::os::unix::fs::PermissionsExt;

    /// A program open for writing somewhere (as a file just copied is, in a child forked from
    /// another job's thread) cannot be executed; once it is closed it runs, without the job
    /// failing for it. Held open for good, the error comes back after `MAX_BUSY_WAIT`.
    #[test]
    fn a_program_busy_for_a_moment_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("calc");
        std::fs::write(&prog, "#!/bin/sh\nexit 7\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = || std::fs::OpenOptions::new().write(true).open(&prog).unwrap();
        let busy = open();
        let e = std::process::Command::new(&prog).spawn().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ExecutableFileBusy, "{e}");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(busy);
        });
        let mut child = spawn_when_not_busy(&mut std::process::Command::new(&prog)).unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(7));
        closer.join().unwrap();

        let _busy = open();
        let started = std::time::Instant::now();
        let e = spawn_when_not_busy(&mut std::process::Command::new(&prog)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ExecutableFileBusy, "{e}");
        assert!(started.elapsed() >= MAX_BUSY_WAIT, "gave up early: {:?}", started.elapsed());
    }
}
