//! Finding and stopping the processes a test started (by their working directory or their
//! command line, which name the test's own temporary directory).

use std::time::{Duration, Instant};

/// Processes whose working directory is under `dir` and has a component named `needle`.
pub fn pids_under(dir: &std::path::Path, needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
            if cwd.starts_with(dir) && cwd.strip_prefix(dir).is_ok_and(|rel| rel.iter().any(|c| c == needle))
            {
                pids.push(pid);
            }
        }
    }
    pids
}

/// utime + stime of a process, seconds (assuming the usual 100 ticks per second).
pub fn proc_cpu(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<f64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0.0)).collect();
    (f[11] + f[12]) / 100.0
}

/// Processes whose command line mentions `needle` (the test's own temporary directory).
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Stops whatever the test started under its directory, even when an assertion failed.
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in processes_mentioning(&self.0) {
            // SAFETY: kill(2) on processes started by this test (their command line names the
            // test's own temporary directory).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

pub fn wait_gone(needle: &str) {
    let t0 = Instant::now();
    while !processes_mentioning(needle).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "cluster processes outlived `libra up`");
        std::thread::sleep(Duration::from_millis(100));
    }
}
