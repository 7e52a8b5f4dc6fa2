//! The processes a keeper's job runs, found in `/proc`: what a cancel kills when the job ignores
//! its SIGTERM. The keeper kills them rather than be killed with them, so that it lives to reap
//! its command and record the CPU the job used, which the sweep pays for (a job that ignored the
//! cancel used to be killed with its keeper and recorded free).
//!
//! And the processes a keeper left behind when it was killed from outside (`kill -9`, the OOM
//! killer): found by the attempt's key in their environment, since their parent and group say
//! nothing once the keeper is gone, and killed after their CPU is read, so that a job whose
//! keeper died neither runs on beside its next attempt nor runs free.

use libra_node::stat::Stat;
use std::collections::{HashMap, HashSet};

/// The processes `/proc` lists now: each pid, with its directory there.
fn listed() -> impl Iterator<Item = (i32, std::fs::DirEntry)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<i32>().ok()?, e)))
}

/// Every process `/proc` shows now, by pid (one that ends while it is read is left out).
fn processes() -> HashMap<i32, Stat> {
    libra_node::proc::listed().collect()
}

/// What `stop_by_key` killed: how many processes, and the CPU they had used (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stopped {
    pub processes: usize,
    pub cpu: f64,
}

/// The processes of this process's user, other than itself, whose environment holds `var=value`,
/// with the CPU each had used (clock ticks) when looked at.
fn by_key(var: &str, value: &str) -> Vec<(i32, u64)> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getpid and geteuid cannot fail.
    let (me, uid) = unsafe { (libc::getpid(), libc::geteuid()) };
    let want = format!("{var}={value}");
    let mut found = Vec::new();
    for (pid, e) in listed() {
        // Only our own user's: never another user's process that claims the key.
        if pid == me || e.metadata().map_or(true, |m| m.uid() != uid) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
        if !env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            continue;
        }
        // The directory of a process that made itself not dumpable is root's whoever runs it:
        // its real and effective ids must be ours too.
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        if !ids_are(&status, uid) {
            continue;
        }
        if let Some(s) = std::fs::read_to_string(e.path().join("stat")).ok().as_deref().and_then(Stat::parse)
        {
            found.push((pid, s.cpu_ticks));
        }
    }
    found
}

/// Whether the real and effective user ids of a `/proc/PID/status` text are both `uid`.
fn ids_are(status: &str, uid: u32) -> bool {
    let Some(line) = status.lines().find_map(|l| l.strip_prefix("Uid:")) else { return false };
    let ids: Vec<Option<u32>> = line.split_whitespace().take(2).map(|v| v.parse().ok()).collect();
    ids == [Some(uid), Some(uid)]
}

/// SIGKILL to every process of this user whose environment holds `var=value` (an attempt's
/// key, which each process of its job inherits from the keeper), after reading the CPU it had
/// used; looked for again until none is left (one may fork as the others are killed), at most ten
/// rounds; then waited for until each has ended (at most `GONE_WITHIN`): a SIGKILL takes effect
/// only when its process is next scheduled, and what the caller does next (record the attempt,
/// run it again) must not meet the job still running.
pub fn stop_by_key(var: &str, value: &str) -> Stopped {
    let hz = libra_node::stat::ticks_per_second();
    // Each process signalled, with its start time (its identity, should its pid be reused).
    let mut signalled: HashMap<i32, Option<u64>> = HashMap::new();
    let mut ticks = 0u64;
    let t0 = std::time::Instant::now();
    for _ in 0..10 {
        let new: Vec<(i32, u64)> =
            by_key(var, value).into_iter().filter(|(p, _)| !signalled.contains_key(p)).collect();
        if new.is_empty() {
            break;
        }
        for (pid, t) in new {
            let start = Stat::of(pid).map(|s| s.start_ticks);
            // SAFETY: a process of this user carrying the attempt's key: the job's own.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            signalled.insert(pid, start);
            ticks += t;
        }
    }
    while signalled.iter().any(|(&pid, &start)| running(pid, start)) && t0.elapsed() < GONE_WITHIN {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Stopped { processes: signalled.len(), cpu: ticks as f64 / hz }
}

/// Whether process `pid`, which started at `start`, has not yet ended: it is listed, is not a
/// zombie (ended, waiting to be reaped), and is the same process (not a new one with its pid).
fn running(pid: i32, start: Option<u64>) -> bool {
    Stat::of(pid).is_some_and(|s| !s.ended() && Some(s.start_ticks) == start)
}

/// How long `stop_by_key` waits for the processes it killed to be gone: a SIGKILL is final, so
/// this bounds only a process stuck in the kernel (uninterruptible sleep on a dead disk).
const GONE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// SIGKILL to each process `/proc` shows in process group `group`, by its pid: what is left of a
/// dead keeper's group (its job's processes without the key in their environment) once that
/// keeper was not our child, so that its group's id may no longer be its own to signal.
pub fn kill_group_members(group: i32) -> usize {
    let members: Vec<i32> =
        processes().into_iter().filter(|(_, p)| p.pgrp == group).map(|(pid, _)| pid).collect();
    for &pid in &members {
        // SAFETY: a process seen just now in the dead keeper's group.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    members.len()
}

/// What to kill, seen from process `me` in group `group`: its descendants (in any group: one
/// that left for a session of its own is still the job's), and, when `me` leads its group, the
/// other members of the group (the job's processes whose parents ended before them).
fn targets(all: &HashMap<i32, Stat>, me: i32, group: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, p) in all {
        children.entry(p.ppid).or_default().push(pid);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut todo = vec![me];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if c != me && found.insert(c) {
                todo.push(c);
            }
        }
    }
    if group == me {
        found.extend(all.iter().filter(|(&pid, p)| p.pgrp == group && pid != me).map(|(&pid, _)| pid));
    }
    let mut v: Vec<i32> = found.into_iter().collect();
    v.sort_unstable();
    v
}

/// SIGKILL to every process of this one's job (`targets`), looked for again until none is left
/// (one may fork as the others are killed), at most ten rounds. Returns how many were signalled.
pub fn kill_all() -> usize {
    // SAFETY: getpid and getpgrp cannot fail.
    let (me, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let mut signalled: HashSet<i32> = HashSet::new();
    for _ in 0..10 {
        let all = processes();
        // A zombie stays listed until its parent reaps it: signal each process once.
        let new: Vec<i32> = targets(&all, me, group).into_iter().filter(|p| !signalled.contains(p)).collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            // SAFETY: a descendant of this process, or a member of the group it leads.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            signalled.insert(pid);
        }
    }
    signalled.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_ours_when_its_real_and_effective_ids_are() {
        let status = |ids: &str| format!("Name:\tsh\nState:\tS (sleeping)\nUid:\t{ids}\nGid:\t0\t0\t0\t0\n");
        assert!(ids_are(&status("1000\t1000\t1000\t1000"), 1000));
        assert!(!ids_are(&status("1001\t1000\t1000\t1000"), 1000), "someone else's, setuid to us");
        assert!(!ids_are(&status("1000\t0\t0\t0"), 1000), "ours, setuid to another");
        assert!(!ids_are("Name:\tsh\n", 1000));
    }

    /// A process of ours carrying a key is found with the CPU it used, and killed; one without
    /// it is left alone.
    #[test]
    fn a_process_is_stopped_by_the_key_in_its_environment_and_its_cpu_counted() {
        let key = format!("descendants-test-{}", std::process::id());
        let spawn = |with: bool| {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 60"]);
            if with {
                c.env("LIBRA_TEST_KEY", &key);
            }
            c.spawn().unwrap()
        };
        let mut keyed = spawn(true);
        let mut other = spawn(false);
        // Until the busy loop has used some CPU (it then sleeps).
        let t0 = std::time::Instant::now();
        while by_key("LIBRA_TEST_KEY", &key).first().map_or(0, |p| p.1) < 5 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(30), "the keyed process used no CPU");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let s = stop_by_key("LIBRA_TEST_KEY", &key);
        assert_eq!(s.processes, 1, "{s:?}");
        assert!(s.cpu >= 0.05, "{s:?}");
        // Gone when it returns, not only signalled.
        let ended = keyed.try_wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(ended.map(|e| e.signal()), Some(Some(libc::SIGKILL)), "still running once stopped");
        assert!(other.try_wait().unwrap().is_none(), "a process without the key was killed");
        other.kill().unwrap();
        other.wait().unwrap();
        assert_eq!(stop_by_key("LIBRA_TEST_KEY", &key), Stopped::default());
    }

    #[test]
    fn descendants_in_any_group_and_the_led_groups_orphans() {
        let mut all = HashMap::new();
        let add = |all: &mut HashMap<i32, Stat>, pid, ppid, pgrp| {
            all.insert(
                pid,
                Stat {
                    state: 'S',
                    ppid,
                    pgrp,
                    session: pgrp,
                    cpu_ticks: 0,
                    children_ticks: 0,
                    start_ticks: 1,
                },
            );
        };
        add(&mut all, 1, 0, 1);
        add(&mut all, 10, 1, 5); // the keeper's parent
        add(&mut all, 100, 10, 100); // the keeper, leading its group
        add(&mut all, 101, 100, 100); // its command
        add(&mut all, 102, 101, 100); // the command's child
        add(&mut all, 103, 102, 103); // which left for a session of its own
        add(&mut all, 104, 1, 100); // orphaned, still in the keeper's group
        add(&mut all, 200, 1, 200); // someone else's
        assert_eq!(targets(&all, 100, 100), vec![101, 102, 103, 104]);
        // Not leading its group (a batch job's shell leads it): its descendants only.
        add(&mut all, 105, 10, 10);
        assert_eq!(targets(&all, 100, 10), vec![101, 102, 103]);
    }
}
