//! Job processes: launched in their own session (so the whole process tree can be signalled),
//! moved into their control group before `exec`, with stdout and stderr going to files in the
//! job's own working directory.

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

/// Starts `argv` in `dir`. For every control group in `cgroup_procs` the child writes "0" to
/// its `cgroup.procs` between fork and exec (the kernel reads that as "this process"), so not
/// even an early child escapes the group; if a write fails, the launch fails instead of running
/// unenforced.
pub fn spawn(argv: &[String], dir: &Path, cgroup_procs: &[PathBuf]) -> std::io::Result<i32> {
    let (prog, args) = argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
    std::fs::create_dir_all(dir)?;
    let stdout = std::fs::File::create(dir.join("stdout"))?;
    let stderr = std::fs::File::create(dir.join("stderr"))?;
    let procs = cgroup_procs
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| std::io::Error::other("cgroup path contains a NUL byte"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args).current_dir(dir).stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    // SAFETY: between fork and exec only async-signal-safe calls are made (setsid, open,
    // write, close), on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for p in &procs {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(err);
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // The child is reaped with wait4 (for its resource usage), not through `Child`.
    Ok(child.id() as i32)
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
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
    if libc::WIFEXITED(status) {
        Some(Exit { code: Some(libc::WEXITSTATUS(status)), signal: None, cpu_seconds: cpu })
    } else if libc::WIFSIGNALED(status) {
        Some(Exit { code: None, signal: Some(libc::WTERMSIG(status)), cpu_seconds: cpu })
    } else {
        None
    }
}

/// CPU seconds used so far by a live process and its reaped children (/proc/PID/stat).
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14-17 of stat(5) (utime, stime, cutime, cstime) are 11..15 after the name.
    let ticks: f64 = f.get(11..15)?.iter().filter_map(|v| v.parse::<f64>().ok()).sum();
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks / hz)
}

/// When the process started (field 22 of stat(5), clock ticks since boot): with the pid, it
/// names one process for good, since pids are reused.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
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

/// Blocks until any child ends; `None` when there is no child (or a signal interrupted).
pub fn wait_any() -> Option<(i32, Exit)> {
    let mut status = 0;
    // SAFETY: plain wait4 with out-pointers to locals.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(-1, &mut status, 0, &mut ru) };
    if pid <= 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu_seconds = tv(ru.ru_utime) + tv(ru.ru_stime);
    let exit = if libc::WIFSIGNALED(status) {
        Exit { code: None, signal: Some(libc::WTERMSIG(status)), cpu_seconds }
    } else {
        Exit { code: Some(libc::WEXITSTATUS(status)), signal: None, cpu_seconds }
    };
    Some((pid, exit))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_group_that_cannot_be_joined_refuses_the_launch() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["true".to_string()];
        assert!(spawn(&argv, dir.path(), &[PathBuf::from("/nonexistent/cgroup.procs")]).is_err());
    }
}
