//! The processes a keeper's job runs, found in `/proc`: what a cancel kills when the job ignores
//! its SIGTERM. The keeper kills them rather than be killed with them, so that it lives to reap
//! its command and record the CPU the job used, which the sweep pays for (a job that ignored the
//! cancel used to be killed with its keeper and recorded free).

use std::collections::{HashMap, HashSet};

/// A process as `/proc/PID/stat` gives it: its parent and its process group.
struct Proc {
    ppid: i32,
    pgrp: i32,
}

/// Every process `/proc` shows now, by pid (one that ends while it is read is left out).
fn processes() -> HashMap<i32, Proc> {
    let mut all = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return all;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(p) = std::fs::read_to_string(e.path().join("stat")).ok().as_deref().and_then(parse_stat) {
            all.insert(pid, p);
        }
    }
    all
}

/// The parent and group from a `stat` line: `pid (comm) state ppid pgrp ...`, where `comm` may
/// hold spaces and parentheses (so the fields are counted from the last `)`).
fn parse_stat(line: &str) -> Option<Proc> {
    let rest = &line[line.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let _state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Proc { ppid, pgrp })
}

/// What to kill, seen from process `me` in group `group`: its descendants (in any group: one
/// that left for a session of its own is still the job's), and, when `me` leads its group, the
/// other members of the group (the job's processes whose parents ended before them).
fn targets(all: &HashMap<i32, Proc>, me: i32, group: i32) -> Vec<i32> {
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
    fn a_stat_line_whose_name_holds_parentheses_and_spaces() {
        let p = parse_stat("4242 (a (b) c) S 17 4240 4240 0 -1 4194560").unwrap();
        assert_eq!((p.ppid, p.pgrp), (17, 4240));
        assert!(parse_stat("4242 (truncated").is_none());
    }

    #[test]
    fn descendants_in_any_group_and_the_led_groups_orphans() {
        let mut all = HashMap::new();
        let add = |all: &mut HashMap<i32, Proc>, pid, ppid, pgrp| {
            all.insert(pid, Proc { ppid, pgrp });
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
