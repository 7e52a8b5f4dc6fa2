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

/// The parent of a process, if it is still there.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split_whitespace().nth(1)?.parse().ok()
}

/// The processes that mention `needle` and all their descendants (a job's own processes do not
/// name the test's directory, but their keeper does).
fn with_descendants(needle: &str) -> Vec<i32> {
    let mut set = processes_mentioning(needle);
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    loop {
        let before = set.len();
        for &(pid, ppid) in &all {
            if set.contains(&ppid) && !set.contains(&pid) {
                set.push(pid);
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// Stops whatever the test started under its directory, even when an assertion failed.
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in with_descendants(&self.0) {
            // SAFETY: kill(2) on processes started by this test (their command line names the
            // test's own temporary directory, or they descend from one that does).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        // Jobs' scratch file systems outlive their agents (for the job the next agent adopts):
        // mounted, the test's directory could not be removed.
        libra_node::scratch::unmount_all_under(std::path::Path::new(&self.0));
        remove_agent_groups_under(std::path::Path::new(&self.0));
    }
}

/// Removes the control groups of the node agents that worked in directories under `root`:
/// an agent's groups outlive it by design (its jobs run on; the next agent of that work
/// directory adopts them), so a test that started agents in a directory of its own (`libra up`'s
/// state, a hand-started agent) leaves them on the machine unless it removes them. Agents are
/// found by the convention every test keeps: an agent's work directory is named as the agent
/// (`libra up`'s `STATE/node-1`).
pub fn remove_agent_groups_under(root: &std::path::Path) {
    fn walk(dir: &std::path::Path, depth: usize) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            libra_node::enforce::remove_node_groups(&libra_node::group_name(&name, &path));
            if depth > 1 {
                walk(&path, depth - 1);
            }
        }
    }
    walk(root, 3);
}

/// Every process naming `needle` is gone within 20 s.
pub fn wait_gone(needle: &str) {
    wait_gone_but(needle, |_| false);
}

/// The server and node agents naming `needle` are gone within 20 s; job keepers may stay, since a
/// keeper outlives its agent by design (its job goes on, and the next agent adopts it). Returns
/// the keepers left.
pub fn wait_cluster_gone(needle: &str) -> Vec<i32> {
    wait_gone_but(needle, is_job_keeper)
}

fn is_job_keeper(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).nth(1).is_some_and(|arg| arg == b"job-keeper"))
}

fn wait_gone_but(needle: &str, may_stay: fn(i32) -> bool) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let (stay, left): (Vec<i32>, Vec<i32>) =
            processes_mentioning(needle).into_iter().partition(|&p| may_stay(p));
        if left.is_empty() {
            return stay;
        }
        let names: Vec<String> = left
            .iter()
            .map(|p| {
                let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                format!("{p}: {}", String::from_utf8_lossy(&c).replace('\0', " "))
            })
            .collect();
        assert!(t0.elapsed() < Duration::from_secs(20), "cluster processes outlived `libra up`: {names:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
