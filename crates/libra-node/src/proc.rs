//! Job processes: launched in their own session (so the whole process tree can be signalled),
//! moved into their control group before `exec`, with stdout and stderr going to files in the
//! job's own working directory.

use crate::beside::Beside;
use crate::stat::Stat;
use std::ffi::CString;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a process ended, with the CPU it used (from the kernel's accounting of the child).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_seconds: f64,
}

/// The Unix account a job runs as.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub home: String,
    pub shell: String,
}

impl Identity {
    /// The account named `user` on this machine (None: there is no such account).
    pub fn lookup(user: &str) -> std::io::Result<Option<Identity>> {
        let name = CString::new(user).map_err(|_| std::io::Error::other("a user name with a NUL byte"))?;
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0u8; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: getpwnam_r writes into `pw` and `buf`, both ours and large enough (ERANGE
        // otherwise), and sets `found` to `&pw` or null.
        let r = unsafe {
            libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found)
        };
        if r != 0 {
            return Err(std::io::Error::from_raw_os_error(r));
        }
        if found.is_null() {
            return Ok(None);
        }
        let text = |p: *const libc::c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: a NUL-terminated string inside `buf`, which lives to the end of this function.
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        let mut groups = vec![0 as libc::gid_t; 256];
        let mut n = groups.len() as libc::c_int;
        // SAFETY: getgrouplist fills at most `n` entries of `groups` and sets `n`.
        let r = unsafe { libc::getgrouplist(name.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n) };
        groups.truncate(if r < 0 { 0 } else { n.max(0) as usize });
        Ok(Some(Identity {
            user: user.to_string(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
            groups,
            home: text(pw.pw_dir),
            shell: text(pw.pw_shell),
        }))
    }

    /// The account this process runs as.
    pub fn current() -> Option<Identity> {
        // SAFETY: geteuid has no memory effects.
        let uid = unsafe { libc::geteuid() };
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0u8; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: as in `lookup`.
        let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
        if r != 0 || found.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned();
        Identity::lookup(&name).ok().flatten()
    }
}

/// How to start a job's process. What the child does between fork and exec, in this order:
/// its own session; joins its control groups; writes its pid file (all still as the agent, so
/// neither can be refused or forged by the job); switches to the job's account, if any; then,
/// as that account, changes to the working directory and opens the output files (so that a job
/// can neither run in nor write to a place its owner could not).
pub struct Launch<'a> {
    pub argv: &'a [String],
    /// The working directory; it must exist.
    pub cwd: &'a Path,
    pub stdout: &'a Path,
    /// None: standard error goes to the standard output file.
    pub stderr: Option<&'a Path>,
    /// Open the output files for appending instead of truncating them.
    pub append: bool,
    /// None: the caller's own environment (tests); Some: exactly these variables.
    pub env: Option<&'a [(String, String)]>,
    /// Control groups to join before `exec`.
    pub cgroup_procs: &'a [PathBuf],
    /// Written by the child itself ("PID\n") before `exec`: a job started by an agent that dies
    /// the next instant is still known to the agent that follows (see `agent::orphans`).
    pub pid_file: Option<&'a Path>,
    /// The account to run as (None: this process's own).
    pub identity: Option<&'a Identity>,
    /// A descriptor the child keeps across `exec` (its close-on-exec flag cleared): the job's
    /// lock, which the agent hands to the keeper (see `agent::job_lock`).
    pub keep_fd: Option<i32>,
    /// A /tmp and /var/tmp of the job's own (`private_tmp`), of this many MiB.
    pub tmp_mb: Option<u64>,
    /// The agent's directory of the job (`job-ID` in its work directory), with `tmp_mb`: the
    /// other file systems mounted in the work directory (other jobs' scratch, those made ahead)
    /// are detached from the job's own mount namespace (`crate::beside`).
    pub record: Option<&'a Path>,
    /// Start a session (and process group) of its own, led by the child: true for what the
    /// agent starts (a keeper, or a job without one), whose session is then the job's. False
    /// for the job a keeper starts, which stays in its keeper's session and group: the agent
    /// counts the job's CPU by that session (`cpu_by_session`), finds its processes by it
    /// (`session_members`) and signals that group (suspend, resume, kill), all by the keeper's
    /// pid, the only one it knows.
    pub own_session: bool,
    /// With `identity` (an account other than root): the most processes and threads that
    /// account may have on this machine, the job's own included (`RLIMIT_NPROC`, soft and hard,
    /// set before the switch, so the job cannot raise it). The kernel counts them by account,
    /// so all of a user's jobs on the node share the limit and no user can take the node's
    /// process table from the others (a fork bomb meets EAGAIN). Root ignores it.
    pub max_tasks: Option<u64>,
    /// The job's `oom_score_adj` (/proc/PID/oom_score_adj, -1000 to 1000), written before the
    /// switch to its owner's account: written by root it is also the least the job may set
    /// (the kernel's `oom_score_adj_min`), so the job cannot lower it, and every process it
    /// starts inherits it. `agent::NO_MEMORY_OOM_SCORE_ADJ` for a job that asked no memory.
    pub oom_score_adj: Option<i16>,
}

impl<'a> Launch<'a> {
    /// `argv` in `cwd`, both output streams to `stdout`, as the agent's own account, with the
    /// caller's environment and nothing else: the rest is set by name where it is wanted.
    pub fn plain(argv: &'a [String], cwd: &'a Path, stdout: &'a Path) -> Launch<'a> {
        Launch {
            argv,
            cwd,
            stdout,
            stderr: None,
            append: false,
            env: None,
            cgroup_procs: &[],
            pid_file: None,
            identity: None,
            keep_fd: None,
            tmp_mb: None,
            record: None,
            own_session: true,
            max_tasks: None,
            oom_score_adj: None,
        }
    }
}

/// Starts `argv` in `dir`, its output in `dir`'s `stdout` and `stderr` files.
pub fn spawn(argv: &[String], dir: &Path, cgroup_procs: &[PathBuf]) -> std::io::Result<i32> {
    std::fs::create_dir_all(dir)?;
    launch(&Launch {
        stderr: Some(&dir.join("stderr")),
        cgroup_procs,
        ..Launch::plain(argv, dir, &dir.join("stdout"))
    })
}

/// Writes `n` in decimal into `buf`, returning the length; no allocation (it runs between fork
/// and exec).
fn decimal(mut n: u32, buf: &mut [u8; 12]) -> usize {
    let mut tmp = [0u8; 12];
    let mut len = 0;
    loop {
        tmp[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[i] = tmp[len - 1 - i];
    }
    buf[len] = b'\n';
    len + 1
}

fn cstring(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other(format!("{} contains a NUL byte", p.display())))
}

/// Opens an output file and puts it on the given descriptors (between fork and exec).
///
/// # Safety
/// Only async-signal-safe calls: open, dup2, close.
unsafe fn output_on(path: &CString, append: bool, fds: &[libc::c_int]) -> std::io::Result<()> {
    let mode = libc::O_WRONLY
        | libc::O_CREAT
        | libc::O_CLOEXEC
        | if append { libc::O_APPEND } else { libc::O_TRUNC };
    let fd = libc::open(path.as_ptr(), mode, 0o600 as libc::c_uint);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    for &to in fds {
        if libc::dup2(fd, to) < 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
    }
    libc::close(fd);
    Ok(())
}

/// The steps a child takes between fork and exec (`Launch`), told apart in a failed launch's
/// error. The standard library hands a step's failure to the parent as a bare OS error code, so
/// the child adds `step * STEP_CODE` to the errno (`at`) and the parent splits them (`explain`):
/// "No such file or directory" alone does not say whether the program, the working directory or
/// the directory of an output file is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Session = 1,
    KeepLock,
    ControlGroup,
    PidFile,
    PrivateTmp,
    TaskLimit,
    OomScore,
    Account,
    WorkDir,
    Stdout,
    Stderr,
}

/// Above every errno (Linux's are below 4096).
const STEP_CODE: i32 = 1 << 16;

/// The error of `step` (async-signal-safe: integer arithmetic only).
fn at(step: Step, e: std::io::Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(step as i32 * STEP_CODE + e.raw_os_error().unwrap_or(libc::EINVAL))
}

/// A failed launch's error, saying which step failed (`at`) and on what; a bare OS error is
/// exec's own. The kind stays the cause's (a busy program is retried by its kind).
fn explain(e: std::io::Error, l: &Launch) -> std::io::Error {
    let Some(code) = e.raw_os_error() else { return e };
    let (step, errno) = (code / STEP_CODE, code % STEP_CODE);
    let cause = std::io::Error::from_raw_os_error(errno);
    let what = match step {
        // The kernel refuses the exec of a process whose account is past `RLIMIT_NPROC` (it
        // was when the process switched to it).
        0 if errno == libc::EAGAIN && l.max_tasks.is_some() && l.identity.is_some_and(|i| i.uid != 0) => {
            let n = l.max_tasks.unwrap_or_default();
            let who = l.identity.map(|i| i.user.as_str()).unwrap_or_default();
            return std::io::Error::new(
                cause.kind(),
                format!(
                    "executing {}: {who} already has {n} processes and threads on this node, the most one account may have (max_tasks); let some of them end",
                    l.argv.first().map(String::as_str).unwrap_or("")
                ),
            );
        }
        0 => format!("executing {}", l.argv.first().map(String::as_str).unwrap_or("")),
        s if s == Step::Session as i32 => "starting its own session".into(),
        s if s == Step::KeepLock as i32 => "keeping the job's lock open".into(),
        s if s == Step::ControlGroup as i32 => "joining its control group".into(),
        s if s == Step::PidFile as i32 => "writing its pid file".into(),
        s if s == Step::PrivateTmp as i32 => "giving it a /tmp of its own".into(),
        s if s == Step::TaskLimit as i32 => "limiting its account's processes".into(),
        s if s == Step::OomScore as i32 => "setting its oom_score_adj".into(),
        s if s == Step::Account as i32 => "switching to its owner's account".into(),
        s if s == Step::WorkDir as i32 => format!("entering its working directory {}", l.cwd.display()),
        s if s == Step::Stdout as i32 => format!("opening its output file {}", l.stdout.display()),
        s if s == Step::Stderr as i32 => {
            format!("opening its error file {}", l.stderr.unwrap_or(l.stdout).display())
        }
        _ => return e,
    };
    std::io::Error::new(cause.kind(), format!("{what}: {cause}"))
}

/// The mount options of a job's own /tmp (`private_tmp`): a tmpfs of `mb` MiB, open to all
/// with the sticky bit, as /tmp is.
fn private_tmp_data(mb: u64) -> std::io::Result<CString> {
    CString::new(format!("size={mb}m,mode=1777")).map_err(std::io::Error::other)
}

/// Gives the calling process (a job's, between fork and exec) a /tmp and /var/tmp of its own:
/// a mount namespace of its own, without the mounts `beside` finds, in which a fresh tmpfs
/// (`data`: its size and mode) is mounted on /tmp and bound on /var/tmp. What the job writes
/// there is in memory, charged to the job's own memory group, and bounded by the size; no other
/// job sees it, the node's /tmp is neither seen nor filled, and it all goes when the job's last
/// process ends: nothing is left to clean up after a crash of the agent or the machine. The
/// rest of the tree is the node's as a slave: where the node's mounts propagate (systemd makes
/// them shared) a mount or unmount on the node still reaches the job, and nothing the job's
/// namespace does reaches the node. Root only (CAP_SYS_ADMIN).
///
/// # Safety
/// Only async-signal-safe calls (unshare, mount, and `Beside::detach`'s); `data` and `beside`
/// are prepared before the fork.
unsafe fn private_tmp(data: &CString, beside: Option<&mut Beside>) -> std::io::Result<()> {
    let last = std::io::Error::last_os_error;
    // An IPC namespace too: System V shared memory, semaphores and message queues a job makes
    // are its own, and go with its last process instead of holding the node's memory after it.
    if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC) < 0 {
        return Err(last());
    }
    let root = c"/";
    if libc::mount(
        std::ptr::null(),
        root.as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_SLAVE,
        std::ptr::null(),
    ) < 0
    {
        return Err(last());
    }
    // Before /tmp is covered (a work directory may be under it): the copies of the mounts the
    // job has no business holding go from its namespace alone.
    if let Some(b) = beside {
        b.detach();
    }
    let (tmp, var_tmp, tmpfs) = (c"/tmp", c"/var/tmp", c"tmpfs");
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    if libc::mount(tmpfs.as_ptr(), tmp.as_ptr(), tmpfs.as_ptr(), flags, data.as_ptr().cast()) < 0 {
        return Err(last());
    }
    // The same file system: one bound, for both. A machine without /var/tmp has nothing to hide.
    if libc::mount(tmp.as_ptr(), var_tmp.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) < 0 {
        let e = last();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
    // POSIX shared memory (/dev/shm) is files like /tmp's, which other jobs could read and which
    // outlive the job in the node's memory: a tmpfs of its own, as Slurm's job_container/tmpfs
    // gives. Of its own size (the same), not bound to /tmp's: a program's shared memory is not
    // its files.
    let shm = c"/dev/shm";
    if libc::mount(tmpfs.as_ptr(), shm.as_ptr(), tmpfs.as_ptr(), flags, data.as_ptr().cast()) < 0 {
        let e = last();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
    Ok(())
}

/// Whether this machine lets the agent give jobs a /tmp of their own (`private_tmp`), found by
/// doing it once for a program that does nothing.
pub fn can_give_private_tmp() -> std::io::Result<()> {
    let data = private_tmp_data(1)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "exit 0"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: only `private_tmp` between fork and exec (async-signal-safe calls), on `data`
    // prepared before.
    unsafe {
        cmd.pre_exec(move || private_tmp(&data, None));
    }
    let status = children_lock(|| cmd.status())?;
    if !status.success() {
        return Err(std::io::Error::other(format!("a test program ended {status}")));
    }
    Ok(())
}

/// Starts a job's process (see `Launch` for what the child does before exec). If a step fails,
/// the launch fails instead of running unenforced, elsewhere, or as someone else, and its error
/// names the step (`explain`).
pub fn launch(l: &Launch) -> std::io::Result<i32> {
    let (prog, args) = l.argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
    let procs = l.cgroup_procs.iter().map(|p| cstring(p)).collect::<Result<Vec<_>, _>>()?;
    let pid_file = l.pid_file.map(cstring).transpose()?;
    let cwd = cstring(l.cwd)?;
    let stdout = cstring(l.stdout)?;
    let stderr = l.stderr.map(cstring).transpose()?;
    let append = l.append;
    let identity = l.identity.map(|i| (i.uid as libc::uid_t, i.gid as libc::gid_t, i.groups.clone()));
    let task_limit = l
        .max_tasks
        .filter(|_| l.identity.is_some_and(|i| i.uid != 0))
        .map(|n| libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t });
    let oom_score_adj = l.oom_score_adj.map(|v| v.to_string().into_bytes());
    let keep_fd = l.keep_fd;
    let own_session = l.own_session;
    let tmp = l.tmp_mb.map(private_tmp_data).transpose()?;
    let mut beside = l.tmp_mb.and(l.record).map(Beside::new);
    let mut cmd = Command::new(prog);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(env) = l.env {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    // SAFETY: between fork and exec only async-signal-safe calls are made (setsid, getpid,
    // open, write, close, setrlimit, setgroups, setgid, setuid, chdir, dup2), on memory
    // prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let last = std::io::Error::last_os_error;
            if own_session && libc::setsid() < 0 {
                return Err(at(Step::Session, last()));
            }
            if let Some(fd) = keep_fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(at(Step::KeepLock, last()));
                }
            }
            for p in &procs {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(at(Step::ControlGroup, last()));
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = last();
                libc::close(fd);
                if n != 1 {
                    return Err(at(Step::ControlGroup, err));
                }
            }
            if let Some(p) = &pid_file {
                let fd = libc::open(
                    p.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                    0o600,
                );
                if fd < 0 {
                    return Err(at(Step::PidFile, last()));
                }
                let mut buf = [0u8; 12];
                let n = decimal(libc::getpid() as u32, &mut buf);
                let w = libc::write(fd, buf.as_ptr().cast(), n);
                let err = last();
                libc::close(fd);
                if w != n as isize {
                    return Err(at(Step::PidFile, err));
                }
            }
            if let Some(data) = &tmp {
                private_tmp(data, beside.as_mut()).map_err(|e| at(Step::PrivateTmp, e))?;
            }
            if let Some(limit) = &task_limit {
                if libc::setrlimit(libc::RLIMIT_NPROC, limit) < 0 {
                    return Err(at(Step::TaskLimit, last()));
                }
            }
            if let Some(adj) = &oom_score_adj {
                let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(at(Step::OomScore, last()));
                }
                let n = libc::write(fd, adj.as_ptr().cast(), adj.len());
                let err = last();
                libc::close(fd);
                if n != adj.len() as isize {
                    return Err(at(Step::OomScore, err));
                }
            }
            if let Some((uid, gid, groups)) = &identity {
                // Groups first, while still allowed to set them; then the group, then the user.
                if libc::setgroups(groups.len() as _, groups.as_ptr()) < 0
                    || libc::setgid(*gid) < 0
                    || libc::setuid(*uid) < 0
                {
                    return Err(at(Step::Account, last()));
                }
                // Never left with a way back.
                if *uid != 0 && (libc::setuid(0) == 0 || libc::geteuid() != *uid) {
                    return Err(at(Step::Account, std::io::Error::from_raw_os_error(libc::EPERM)));
                }
            }
            if libc::chdir(cwd.as_ptr()) < 0 {
                return Err(at(Step::WorkDir, last()));
            }
            match &stderr {
                Some(err) => {
                    output_on(&stdout, append, &[1]).map_err(|e| at(Step::Stdout, e))?;
                    output_on(err, append, &[2]).map_err(|e| at(Step::Stderr, e))?;
                }
                None => output_on(&stdout, append, &[1, 2]).map_err(|e| at(Step::Stdout, e))?,
            }
            Ok(())
        });
    }
    // Under `CHILDREN`: a launch that fails after the fork reaps its child inside `spawn`.
    let child = children_lock(|| cmd.spawn()).map_err(|e| explain(e, l))?;
    // The child is reaped with wait4 (for its resource usage), not through `Child`.
    Ok(child.id() as i32)
}

/// Held while the agent waits for a child of its own that is no job (a tool: `mkfs.ext4`,
/// `mount`, `scontrol`) and while it spawns a job. The agent's reaper takes it for each look
/// (`wait_any`) and reaps any child that ended, so without it the reaper would take a tool's
/// exit from under the code waiting for it (which then fails with ECHILD), and the tool's pid
/// would sit among the jobs' exits, to be taken for a job's if that pid came back as one.
static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn children_lock<T>(f: impl FnOnce() -> T) -> T {
    let _held = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    f()
}

/// Runs a tool (`cmd`) to its end and returns its output, its exit kept from the agent's
/// reaper (`CHILDREN`). Job exits wait meanwhile: keep tools short.
pub fn run_tool(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    children_lock(|| cmd.output())
}

/// The keeper's variable naming the descriptor of the job's lock it inherits.
pub const JOB_LOCK_FD_ENV: &str = "LIBRA_JOB_LOCK_FD";

/// In a job's record directory: how its keeper is to start it (`JobLaunch`), written by the
/// agent, read by the keeper.
pub const LAUNCH_FILE: &str = "libra.launch";

/// What a keeper starts: `Launch` without the parts that belong to the keeper itself (control
/// groups and pid file, which the agent gave the keeper). The job's environment travels here, not
/// in the keeper's: the keeper runs as the agent's account, and an environment the job's owner
/// chose (LD_PRELOAD, say) must never reach a process of that account.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct JobLaunch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub stdout: PathBuf,
    pub stderr: Option<PathBuf>,
    pub append: bool,
    pub identity: Option<Identity>,
    /// See `Launch::tmp_mb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_mb: Option<u64>,
    /// See `Launch::max_tasks` (absent in the files of agents before it: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<u64>,
    /// See `Launch::oom_score_adj` (absent in the files of agents before it: left as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i16>,
}

/// In a job's working directory: how the job ended, written by its keeper (`keep`) the moment
/// it ends, so that it is known even when no agent was there to see it.
pub const EXIT_FILE: &str = "libra.exit";

/// The job keeper: starts the job as `record`'s `LAUNCH_FILE` says (or `argv`, as it is, where
/// there is none), waits for it, writes how it ended to `EXIT_FILE` in `record` (the agent's
/// directory for the job; atomically), and returns the exit code to leave with. The keeper stays
/// the agent's account: the job cannot signal it, forge its record, or leave its groups. The
/// agent starts every job through a keeper so that a job outlives a crashed agent and its end is
/// still known to the next one.
pub fn keep(record: &Path, argv: &[String]) -> i32 {
    // The job's lock, held for as long as this keeper lives (an agent that follows a crashed one
    // knows by it that the job's process exists), and not passed on to the job.
    if let Some(fd) = std::env::var(JOB_LOCK_FD_ENV).ok().and_then(|v| v.parse::<i32>().ok()) {
        // SAFETY: fcntl on a descriptor number has no memory effects (a wrong one only fails).
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    let plan: Option<JobLaunch> =
        std::fs::read_to_string(record.join(LAUNCH_FILE)).ok().and_then(|t| serde_json::from_str(&t).ok());
    let started = match &plan {
        Some(p) => retry_while_busy(MAX_BUSY_WAIT, || {
            launch(&Launch {
                argv: &p.argv,
                cwd: &p.cwd,
                stdout: &p.stdout,
                stderr: p.stderr.as_deref(),
                append: p.append,
                env: Some(&p.env),
                cgroup_procs: &[],
                pid_file: None,
                identity: p.identity.as_ref(),
                keep_fd: None,
                tmp_mb: p.tmp_mb,
                record: Some(record),
                // The keeper's session and group are the job's (see `Launch::own_session`).
                own_session: false,
                max_tasks: p.max_tasks,
                oom_score_adj: p.oom_score_adj,
            })
        }),
        None if argv.is_empty() => Err(std::io::Error::other("no command given")),
        None => Command::new(&argv[0]).args(&argv[1..]).spawn().map(|c| c.id() as i32),
    };
    let pid = match started {
        Ok(pid) => pid,
        Err(e) => {
            let what = plan.as_ref().map(|p| p.argv.clone()).unwrap_or_else(|| argv.to_vec());
            let who = plan
                .as_ref()
                .and_then(|p| p.identity.as_ref())
                .map(|i| format!(" as {}", i.user))
                .unwrap_or_default();
            let dir = plan.as_ref().map(|p| format!(" in {}", p.cwd.display())).unwrap_or_default();
            let error = format!("cannot start {what:?}{who}{dir}: {e}");
            eprintln!("libra: {error}");
            let exit = Exit { code: Some(127), signal: None, cpu_seconds: 0.0 };
            let _ = write_exit(record, &exit, unix_time(), Some(&error));
            return 127;
        }
    };
    // Only the keeper ignores these (a disposition set before the spawn would be inherited):
    // a signal meant for the job's whole group ends the job, and the keeper records it.
    // SAFETY: setting signal dispositions to SIG_IGN has no memory effects.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let exit = loop {
        let mut status = 0;
        // SAFETY: wait4 on our own child with out-pointers to locals.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            if let Some(e) = exit_of(status, &ru) {
                break e;
            }
        } else if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break Exit { code: None, signal: Some(0), cpu_seconds: 0.0 };
        }
    };
    let _ = write_exit(record, &exit, unix_time(), None);
    match (exit.code, exit.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 1,
    }
}

/// `start()`, tried again while the program is "text file busy" (ETXTBSY), for up to `max` in
/// all. The kernel will not execute a file that some process has open for writing: a user who
/// has just written or copied a job's program may still hold it for a moment (a copy finishing,
/// an editor saving), or a child forked by another writer holds it until its own exec. Such a
/// job should start late, not fail. Only the keeper's launch of the job is retried: what the
/// child does before exec (a new session, the owner's identity, the working directory, opening
/// the output files, to which nothing has been written) may be done again in a fresh child. The
/// agent's launch of a keeper also joins control groups and writes a pid file, and its program
/// is Libra's own, which no one writes.
pub fn retry_while_busy<T>(
    max: std::time::Duration,
    mut start: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut wait = std::time::Duration::from_millis(1);
    let mut waited = std::time::Duration::ZERO;
    loop {
        match start() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && waited < max => {
                std::thread::sleep(wait);
                waited += wait;
                wait = (wait * 2).min(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// How long a keeper waits in all for a busy job program before it reports the error.
const MAX_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn unix_time() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn exit_of(status: i32, ru: &libc::rusage) -> Option<Exit> {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu_seconds = tv(ru.ru_utime) + tv(ru.ru_stime);
    if libc::WIFEXITED(status) {
        Some(Exit { code: Some(libc::WEXITSTATUS(status)), signal: None, cpu_seconds })
    } else if libc::WIFSIGNALED(status) {
        Some(Exit { code: None, signal: Some(libc::WTERMSIG(status)), cpu_seconds })
    } else {
        None
    }
}

/// `EXIT_FILE`: "CODE SIGNAL CPU_SECONDS END_TIME [ERROR...]", `-` for no code or signal.
pub fn write_exit(dir: &Path, exit: &Exit, end_time: f64, error: Option<&str>) -> std::io::Result<()> {
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let mut line = format!("{} {} {} {}", opt(exit.code), opt(exit.signal), exit.cpu_seconds, end_time);
    if let Some(e) = error {
        line.push(' ');
        line.push_str(&e.replace('\n', " "));
    }
    let tmp = dir.join(format!("{EXIT_FILE}.tmp"));
    std::fs::write(&tmp, line + "\n")?;
    std::fs::rename(tmp, dir.join(EXIT_FILE))
}

/// What a keeper wrote to `dir`'s `EXIT_FILE`: how the job ended, when, and any error.
pub fn read_exit(dir: &Path) -> Option<(Exit, f64, Option<String>)> {
    let text = std::fs::read_to_string(dir.join(EXIT_FILE)).ok()?;
    let mut f = text.trim_end().splitn(5, ' ');
    let opt = |v: Option<&str>| -> Option<Option<i32>> {
        match v? {
            "-" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    let code = opt(f.next())?;
    let signal = opt(f.next())?;
    let cpu_seconds: f64 = f.next()?.parse().ok()?;
    let end: f64 = f.next()?.parse().ok()?;
    let error = f.next().map(str::to_string);
    Some((Exit { code, signal, cpu_seconds }, end, error))
}

/// Whether the process that started at `ticks` (see `start_ticks`) is still running (a zombie
/// has ended).
pub fn alive(pid: i32, ticks: u64) -> bool {
    Stat::of(pid).is_some_and(|s| !s.ended() && s.start_ticks == ticks)
}

/// Whether process `pid` has `name=value` in its environment (how a job's process is told
/// apart from an unrelated one that reused its pid when its start time was never recorded).
pub fn has_env(pid: i32, name: &str, value: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
    let want = format!("{name}={value}");
    env.split(|b| *b == 0).any(|v| v == want.as_bytes())
}

/// CPU seconds used by each session on the machine: the live processes' own time plus the
/// children they have reaped (utime, stime, cutime, cstime). A job is started in a session of
/// its own (`spawn`), whose id is its first process's pid, so this counts the whole job,
/// children still running included, each process once.
pub fn cpu_by_session() -> std::collections::HashMap<i32, f64> {
    let hz = crate::stat::ticks_per_second();
    let mut by = std::collections::HashMap::new();
    for (_, s) in listed() {
        *by.entry(s.session).or_insert(0.0) += s.cpu_ticks as f64 / hz;
    }
    by
}

/// The live processes of each of `sessions` (a job's session id is its first process's pid;
/// see `cpu_by_session`), found by one read of every process's stat.
pub fn session_members(
    sessions: &std::collections::HashSet<i32>,
) -> std::collections::HashMap<i32, Vec<i32>> {
    let mut by: std::collections::HashMap<i32, Vec<i32>> = std::collections::HashMap::new();
    if sessions.is_empty() {
        return by;
    }
    for (pid, s) in listed() {
        if sessions.contains(&s.session) {
            by.entry(s.session).or_default().push(pid);
        }
    }
    by
}

/// For each thread of the processes `pids`, by thread id: nanoseconds it has run on a CPU and
/// nanoseconds it has waited, runnable, for one (the first two fields of
/// `/proc/PID/task/TID/schedstat`). Between two readings, the second is the part of a quantum
/// that other processes took. Threads that cannot be read are left out; empty where the
/// kernel keeps no schedstat.
pub fn thread_times(pids: &[i32]) -> std::collections::HashMap<i32, (u64, u64)> {
    let mut by = std::collections::HashMap::new();
    for pid in pids {
        for entry in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let Ok(line) = std::fs::read_to_string(entry.path().join("schedstat")) else { continue };
            let mut f = line.split_whitespace().map(|v| v.parse::<u64>());
            if let (Some(Ok(run)), Some(Ok(wait))) = (f.next(), f.next()) {
                by.insert(tid, (run, wait));
            }
        }
    }
    by
}

/// Reaps the process if it has ended.
pub fn try_reap(pid: i32) -> Option<Exit> {
    let mut status = 0;
    // SAFETY: plain wait4 on our own child with out-pointers to locals.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    if r != pid {
        if r < 0 {
            // Not our child any more (or never was): treat as gone.
            return Some(Exit { code: None, signal: Some(0), cpu_seconds: 0.0 });
        }
        return None;
    }
    exit_of(status, &ru)
}

/// CPU seconds used so far by a live process and its reaped children (/proc/PID/stat).
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    Some(Stat::of(pid)?.cpu_ticks as f64 / crate::stat::ticks_per_second())
}

/// CPU seconds used so far by a live process and its reaped children, the process's own to the
/// nanosecond (its CPU clock, `clock_getcpuclockid`): /proc's clock ticks count a process that
/// has run for a few milliseconds as none, which is what a Slurm step caught as it starts has
/// used. Its reaped children's are in ticks; /proc's figure where the clock cannot be read.
pub fn cpu_seconds_exact(pid: i32) -> Option<f64> {
    let stat = Stat::of(pid)?;
    let mut clock: libc::clockid_t = 0;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: out-pointers to locals, which live across the calls.
    let read = unsafe {
        libc::clock_getcpuclockid(pid, &mut clock) == 0 && libc::clock_gettime(clock, &mut ts) == 0
    };
    let per_tick = crate::stat::ticks_per_second();
    if !read {
        return Some(stat.cpu_ticks as f64 / per_tick);
    }
    Some(ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9 + stat.children_ticks as f64 / per_tick)
}

/// When the process started (field 22 of stat(5), clock ticks since boot): with the pid, it
/// names one process for good, since pids are reused.
pub fn start_ticks(pid: i32) -> Option<u64> {
    Some(Stat::of(pid)?.start_ticks)
}

/// Every process `/proc` lists, with its `stat` line (those that end while being read are left
/// out).
pub fn listed() -> impl Iterator<Item = (i32, Stat)> {
    std::fs::read_dir("/proc").into_iter().flatten().flatten().filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
        Some((pid, Stat::parse(&std::fs::read_to_string(entry.path().join("stat")).ok()?)?))
    })
}

/// Signals the job's whole process group.
pub fn signal_group(pid: i32, sig: i32) {
    // SAFETY: kill(2) on the group we created with setsid.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// The last `limit` bytes of a captured output file (lossy UTF-8), and whether it was cut.
pub fn tail(path: &PathBuf, limit: u64) -> (String, bool) {
    let Ok(mut f) = std::fs::File::open(path) else { return (String::new(), false) };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let cut = len > limit;
    if cut && f.seek(SeekFrom::Start(len - limit)).is_err() {
        return (String::new(), true);
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    (String::from_utf8_lossy(&buf).into_owned(), cut)
}

/// A child that has ended, reaped; `None` when none has (or there is no child). It does not
/// wait: a child a tool's runner waits for (`run_tool`) is left to it.
pub fn wait_any() -> Option<(i32, Exit)> {
    let mut status = 0;
    // SAFETY: plain wait4 with out-pointers to locals.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = children_lock(|| unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut ru) });
    if pid <= 0 {
        return None;
    }
    // Without WUNTRACED only ended children are reported.
    let exit = exit_of(status, &ru).unwrap_or(Exit { code: None, signal: Some(0), cpu_seconds: 0.0 });
    Some((pid, exit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that ran for a few milliseconds (less than a clock tick of /proc) is counted to
    /// the nanosecond, and agrees with /proc's ticks to within a tick.
    #[test]
    fn a_process_of_a_few_milliseconds_is_counted_exactly() {
        let mut p = crate::slurm::tests::busy_for_then_asleep(2000);
        let pid = p.id() as i32;
        let exact = cpu_seconds_exact(pid).unwrap();
        let ticks = cpu_seconds(pid).unwrap();
        let tick = 1.0 / crate::stat::ticks_per_second();
        assert!(exact > 0.0 && (exact - ticks).abs() <= tick + 1e-9, "{exact} against /proc's {ticks}");
        p.kill().unwrap();
        p.wait().unwrap();
        assert_eq!(cpu_seconds_exact(pid), None, "a reaped process has no figure");
    }

    #[test]
    fn runs_captures_and_reaps() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> =
            ["sh", "-c", "echo hello; echo oops >&2; exit 3"].iter().map(|s| s.to_string()).collect();
        let pid = spawn(&argv, dir.path(), &[]).unwrap();
        let exit = loop {
            if let Some(e) = try_reap(pid) {
                break e;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(exit.code, Some(3));
        assert_eq!(tail(&dir.path().join("stdout"), 100).0, "hello\n");
        assert_eq!(tail(&dir.path().join("stderr"), 3), ("ps\n".to_string(), true));
    }

    #[test]
    fn the_child_writes_its_own_pid_file_before_exec() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = ["sleep", "5"].iter().map(|s| s.to_string()).collect();
        let env = vec![("LIBRA_JOB_ID".to_string(), "77".to_string())];
        let (out, pid_file) = (dir.path().join("o"), dir.path().join("pid"));
        let pid = launch(&Launch {
            env: Some(&env),
            pid_file: Some(&pid_file),
            ..Launch::plain(&argv, dir.path(), &out)
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("pid")).unwrap(), format!("{pid}\n"));
        assert!(has_env(pid, "LIBRA_JOB_ID", "77") && !has_env(pid, "LIBRA_JOB_ID", "7"));
        signal_group(pid, libc::SIGKILL);
        while try_reap(pid).is_none() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut b = [0u8; 12];
        let n = decimal(4_294_967_295, &mut b);
        assert_eq!(&b[..n], b"4294967295\n");
        let n = decimal(0, &mut b);
        assert_eq!(&b[..n], b"0\n");
    }

    /// A job program still open for writing (by this process, as by a user's copy that has
    /// not finished) cannot be executed. The keeper's launch waits for it to be closed; a
    /// program held for longer than the wait is reported as busy, as before.
    #[test]
    fn a_program_being_written_starts_once_it_is_closed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("job.sh");
        let mut w = std::fs::File::create(&prog).unwrap();
        w.write_all(b"#!/bin/sh\necho started\n").unwrap();
        std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let argv = vec![prog.to_string_lossy().into_owned()];
        let out = dir.path().join("o");
        let start = || launch(&Launch::plain(&argv, dir.path(), &out));
        let busy = |r: std::io::Result<i32>| r.unwrap_err().kind() == std::io::ErrorKind::ExecutableFileBusy;
        // Without the retry, and with a wait shorter than the writer holds it: refused.
        assert!(busy(start()));
        assert!(busy(retry_while_busy(std::time::Duration::from_millis(50), start)));
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(w);
        });
        let pid = retry_while_busy(MAX_BUSY_WAIT, start).unwrap();
        closer.join().unwrap();
        let exit = loop {
            if let Some(e) = try_reap(pid) {
                break e;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(exit.code, Some(0));
        assert_eq!(tail(&out, 100).0, "started\n");
    }

    /// A failed launch says which step failed and on what: the same "No such file or
    /// directory" is a missing program, working directory, or directory of an output file.
    #[test]
    fn a_failed_launch_names_the_step_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let (sh, nowhere) =
            (vec!["sh".to_string(), "-c".into(), "true".into()], vec![missing.display().to_string()]);
        let (out, err_file, bad_out) = (dir.path().join("o"), dir.path().join("e"), missing.join("o"));
        let fail = |argv: &[String], cwd: &Path, stdout: &Path, stderr: Option<&Path>| {
            launch(&Launch { stderr, ..Launch::plain(argv, cwd, stdout) }).unwrap_err()
        };
        let e = fail(&sh, dir.path(), &bad_out, None);
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(
            e.to_string().starts_with(&format!("opening its output file {}: ", bad_out.display())),
            "{e}"
        );
        let e = fail(&sh, dir.path(), &out, Some(&bad_out));
        assert!(e.to_string().starts_with(&format!("opening its error file {}: ", bad_out.display())), "{e}");
        let e = fail(&sh, &missing, &out, Some(&err_file));
        assert!(
            e.to_string().starts_with(&format!("entering its working directory {}: ", missing.display())),
            "{e}"
        );
        let e = fail(&nowhere, dir.path(), &out, None);
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(e.to_string().starts_with(&format!("executing {}: ", missing.display())), "{e}");
        let e = spawn(&sh, dir.path(), &[PathBuf::from("/nonexistent/cgroup.procs")]).unwrap_err();
        assert!(e.to_string().starts_with("joining its control group: "), "{e}");
    }

    /// A job given a /tmp of its own writes there, sees nothing of the node's /tmp, and leaves
    /// nothing in it; its writes past the size are refused. Root only (skipped elsewhere).
    #[test]
    fn a_private_tmp_is_the_jobs_alone_and_bounded() {
        if let Err(e) = can_give_private_tmp() {
            eprintln!("skipped: no private /tmp here ({e})");
            return;
        }
        // Outside /tmp, which the job will not see (the checkout may be under /tmp).
        let dir = tempfile::Builder::new().prefix("libra-test-").tempdir_in("/var/lib").unwrap();
        let marker = tempfile::NamedTempFile::new_in("/tmp").unwrap();
        let name = format!("libra-private-tmp-{}", std::process::id());
        let script = format!(
            "test -e {m} && echo sees-the-nodes-tmp; echo mine > /tmp/{name} && cat /var/tmp/{name}; \
             dd if=/dev/zero of=/tmp/big bs=1M count=8 2>/dev/null || echo refused-past-its-size",
            m = marker.path().display()
        );
        let argv = vec!["sh".to_string(), "-c".into(), script];
        let out = dir.path().join("o");
        let pid = launch(&Launch { tmp_mb: Some(4), ..Launch::plain(&argv, dir.path(), &out) }).unwrap();
        while try_reap(pid).is_none() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(tail(&out, 1000).0, "mine\nrefused-past-its-size\n");
        assert!(!Path::new("/tmp").join(&name).exists() && !Path::new("/tmp/big").exists());
    }

    /// A job with a /tmp of its own keeps no copy of the other mounts in the agent's work
    /// directory (another job's scratch, one made ahead), only its own: a copy would hold the
    /// file system and its loop device for as long as the job runs. The node's mounts are not
    /// touched.
    #[test]
    fn a_private_tmp_job_keeps_no_copy_of_the_other_mounts_beside_it() {
        if let Err(e) = can_give_private_tmp() {
            eprintln!("skipped: no private /tmp here ({e})");
            return;
        }
        let work = tempfile::Builder::new().prefix("libra-test-").tempdir_in("/var/lib").unwrap();
        let own = work.path().join("job-1");
        let (own_scratch, other) =
            (crate::launch::scratch_dir(&own), crate::launch::scratch_dir(&work.path().join("job-2")));
        let ahead = work.path().join(crate::scratch_pool::POOL_DIR).join("0");
        for d in [&own_scratch, &other, &ahead] {
            mount_tmpfs(d);
        }
        let argv = vec!["cat".to_string(), "/proc/self/mountinfo".into()];
        let out = work.path().join("o");
        let pid = launch(&Launch {
            tmp_mb: Some(1),
            record: Some(&own),
            ..Launch::plain(&argv, &own_scratch, &out)
        })
        .unwrap();
        while try_reap(pid).is_none() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let seen = std::fs::read_to_string(&out).unwrap();
        // What is mounted after the start was prepared and before the job's namespace is made
        // goes too (a start takes a file system made ahead, and so sets the pool making the
        // next at that very moment): the job reads its own table once it has it.
        let mut beside = Beside::new(&own);
        let late = work.path().join(crate::scratch_pool::POOL_DIR).join("1");
        mount_tmpfs(&late);
        let data = private_tmp_data(1).unwrap();
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/mountinfo").stdin(Stdio::null()).stderr(Stdio::null());
        // SAFETY: only `private_tmp` between fork and exec, on what was prepared before.
        unsafe {
            cmd.pre_exec(move || private_tmp(&data, Some(&mut beside)));
        }
        let later = children_lock(|| cmd.output()).unwrap();
        let later = String::from_utf8_lossy(&later.stdout).into_owned();
        let on_node = crate::scratch::mounts_under(work.path());
        crate::scratch::unmount_all_under(work.path());
        let mounted = |text: &str, d: &Path| {
            let d = std::fs::canonicalize(work.path()).unwrap().join(d.strip_prefix(work.path()).unwrap());
            text.lines().any(|l| l.split(' ').nth(4) == Some(d.to_str().unwrap()))
        };
        assert!(mounted(&seen, &own_scratch), "its own scratch is gone from the job's view:\n{seen}");
        assert!(!mounted(&seen, &other) && !mounted(&seen, &ahead), "the job holds others' mounts:\n{seen}");
        assert!(mounted(&later, &own_scratch) && !mounted(&later, &late), "a late mount is held:\n{later}");
        assert_eq!(on_node.len(), 4, "the node's own mounts were touched: {on_node:?}");
    }

    /// A small tmpfs on `d` (made), for a test's mounts.
    fn mount_tmpfs(d: &Path) {
        std::fs::create_dir_all(d).unwrap();
        let c = cstring(d).unwrap();
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(c"tmpfs".as_ptr(), c.as_ptr(), c"tmpfs".as_ptr(), 0, c"size=1m".as_ptr().cast())
        };
        assert_eq!(r, 0, "{}: {}", d.display(), std::io::Error::last_os_error());
    }

    #[test]
    fn a_group_that_cannot_be_joined_refuses_the_launch() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["true".to_string()];
        assert!(spawn(&argv, dir.path(), &[PathBuf::from("/nonexistent/cgroup.procs")]).is_err());
    }

    #[test]
    fn exit_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_exit(dir.path()).is_none());
        let e = Exit { code: None, signal: Some(9), cpu_seconds: 1.25 };
        write_exit(dir.path(), &e, 1234.5, None).unwrap();
        assert_eq!(read_exit(dir.path()), Some((e, 1234.5, None)));
        let e = Exit { code: Some(127), signal: None, cpu_seconds: 0.0 };
        write_exit(dir.path(), &e, 1.0, Some("cannot start: no such file\nat all")).unwrap();
        assert_eq!(read_exit(dir.path()), Some((e, 1.0, Some("cannot start: no such file at all".into()))));
    }

    #[test]
    fn a_session_counts_the_cpu_of_children_still_running() {
        let dir = tempfile::tempdir().unwrap();
        // The busy loop is a child of the shell: the shell's own figures show nothing of it
        // until it has been reaped, the session's do.
        let argv: Vec<String> =
            ["sh", "-c", "while :; do :; done & wait"].iter().map(|s| s.to_string()).collect();
        let pid = spawn(&argv, dir.path(), &[]).unwrap();
        let ticks = start_ticks(pid).unwrap();
        assert!(alive(pid, ticks) && !alive(pid, ticks + 1));
        std::thread::sleep(std::time::Duration::from_millis(700));
        let session = cpu_by_session().get(&pid).copied().unwrap_or(0.0);
        let own = cpu_seconds(pid).unwrap_or(0.0);
        signal_group(pid, libc::SIGKILL);
        while try_reap(pid).is_none() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!alive(pid, ticks));
        assert!(session >= 0.1, "the session used {session} CPU seconds");
        assert!(own < 0.05, "the shell alone used {own}");
    }
}
