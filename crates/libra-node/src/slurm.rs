//! The agent beside slurmd (`libra node --slurm`): Slurm launches the jobs, the agent adopts
//! them. Slurm 22.05's cgroup plugins make no group in the cpu controller, so the agent keeps
//! each job's processes (`scontrol listpids JOB NODE` at each look, and new steps as they start,
//! `slurm_steps`) in the job's group of its own enforcer (the same groups and quotas as jobs it
//! starts itself), and measures the job's CPU there, or in its accounting group where `cpuacct`
//! is mounted apart (`cpu_account`): either counts processes that have exited too, and the CPU
//! each process had used before it was moved is added. When Slurm no longer runs the job the
//! agent reports its end with that CPU; Slurm's own completion record gives the server the exit
//! code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How the agent reaches Slurm.
#[derive(Debug, Clone, Default)]
pub struct SlurmNode {
    /// Where scontrol and squeue are (None: PATH).
    pub bin_dir: Option<PathBuf>,
}

/// A Slurm job's state as squeue names it (`%T`), or None when Slurm has forgotten it.
pub type JobStates = HashMap<u64, String>;

impl SlurmNode {
    fn command(&self, name: &str) -> Command {
        let mut c = Command::new(match &self.bin_dir {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        });
        c.stdin(Stdio::null());
        c
    }

    fn run(&self, name: &str, args: &[&str]) -> Result<String, String> {
        let out = crate::proc::run_tool(self.command(name).args(args)).map_err(|e| format!("{name}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("{name} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    /// The node's CPUs and memory (MB) as Slurm knows them (`scontrol show node`).
    pub fn node_info(&self, node: &str) -> Result<(f64, u64), String> {
        let text = self.run("scontrol", &["-o", "show", "node", node])?;
        let field = |k: &str| {
            text.split_whitespace().find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let cpus = field("CPUTot").and_then(|v| v.parse::<f64>().ok());
        let mem = field("RealMemory").and_then(|v| v.parse::<u64>().ok());
        match cpus {
            Some(c) if c > 0.0 => Ok((c, mem.unwrap_or(0))),
            _ => Err(format!(
                "Slurm does not know node '{node}': give --name the Slurm node name this slurmd runs as"
            )),
        }
    }

    /// The processes of a job's steps on this node.
    pub fn listpids(&self, job: u64, node: &str) -> Result<Vec<i32>, String> {
        let text = self.run("scontrol", &["listpids", &job.to_string(), node])?;
        Ok(parse_listpids(&text))
    }

    /// The states of `jobs` (those Slurm has forgotten are absent).
    pub fn states(&self, jobs: &[u64]) -> Result<JobStates, String> {
        if jobs.is_empty() {
            return Ok(JobStates::new());
        }
        let list: Vec<String> = jobs.iter().map(u64::to_string).collect();
        match self.run("squeue", &["-h", "-t", "all", "-o", "%i|%T", "-j", &list.join(",")]) {
            Ok(t) => Ok(parse_states(&t)),
            // squeue refuses the whole list when one id is unknown: ask one by one.
            Err(e) if e.contains("Invalid job id") && jobs.len() > 1 => {
                let mut all = JobStates::new();
                for &j in jobs {
                    all.extend(self.states(&[j]).unwrap_or_default());
                }
                Ok(all)
            }
            Err(e) if e.contains("Invalid job id") => Ok(JobStates::new()),
            Err(e) => Err(e),
        }
    }
}

fn parse_listpids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.split_whitespace().next()?.parse::<i32>().ok()).filter(|p| *p > 1).collect()
}

fn parse_states(text: &str) -> JobStates {
    text.lines()
        .filter_map(|l| {
            let (id, state) = l.trim().split_once('|')?;
            Some((id.trim().parse().ok()?, state.trim().to_string()))
        })
        .collect()
}

/// Whether Slurm still runs (or is about to run) a job in this state.
pub fn active(state: &str) -> bool {
    matches!(
        state,
        "PENDING" | "CONFIGURING" | "RUNNING" | "SUSPENDED" | "COMPLETING" | "RESIZING" | "REQUEUED"
    )
}

/// What `keep_in_group` moved: how many processes, and the CPU they had used before (their own
/// and their reaped children's), which the group's count does not hold.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Moved {
    pub processes: usize,
    pub cpu_before: f64,
}

/// Moves the processes not yet there into the job's group (`procs`: its cgroup.procs file), and
/// says what CPU they had used outside it: a job's first seconds, before the agent first
/// adopts its processes, ran in Slurm's groups, and the job's bill must hold them.
pub fn keep_in_group(procs: &Path, pids: &[i32]) -> Moved {
    let inside: std::collections::HashSet<i32> = std::fs::read_to_string(procs)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let mut moved = Moved::default();
    for pid in pids.iter().filter(|p| !inside.contains(p)) {
        // Read before the move: what it uses between the two is counted nowhere, never twice.
        let before = crate::proc::cpu_seconds_exact(*pid).unwrap_or(0.0);
        // A process that ended since it was listed cannot be moved: nothing lost.
        if std::fs::write(procs, pid.to_string()).is_ok() {
            moved.processes += 1;
            moved.cpu_before += before;
        }
    }
    moved
}

/// The CPU seconds of live processes (the fallback where the group keeps no count).
pub fn pids_cpu(pids: &[i32]) -> f64 {
    pids.iter().filter_map(|p| crate::proc::cpu_seconds(*p)).sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn listpids_and_squeue_output_are_read() {
        let t = "PID      JOBID    STEPID   LOCALID GLOBALID\n4242     17       batch    0       0\n-1 17 extern - -\n4243 17 0 0 0\n";
        assert_eq!(parse_listpids(t), vec![4242, 4243]);
        let s = parse_states("17|RUNNING\n18|COMPLETED\n");
        assert_eq!(s.get(&17).map(String::as_str), Some("RUNNING"));
        assert!(!active(&s[&18]) && active(&s[&17]));
    }

    /// A process that has used some CPU (a busy loop) and now sleeps, for a minute.
    pub(crate) fn busy_then_asleep() -> std::process::Child {
        busy_for_then_asleep(300_000)
    }

    /// A process that has counted to `rounds` in a shell loop and now sleeps, for a minute.
    pub(crate) fn busy_for_then_asleep(rounds: u32) -> std::process::Child {
        let busy = std::process::Command::new("sh")
            .args(["-c", &format!("i=0; while [ $i -lt {rounds} ]; do i=$((i+1)); done; exec sleep 60")])
            .spawn()
            .unwrap();
        let pid = busy.id();
        let t0 = std::time::Instant::now();
        // Until its busy loop is over (it has become `sleep`).
        while !std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .starts_with("sleep")
        {
            assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the busy loop did not end");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        busy
    }

    /// A process moved into a job's group brings the CPU it had used before (counted once: a
    /// process already inside is not counted again).
    #[test]
    fn a_process_moved_into_the_group_brings_the_cpu_it_used_before() {
        let dir = tempfile::tempdir().unwrap();
        // A plain file stands for cgroup.procs: a write names the process moved.
        let procs = dir.path().join("cgroup.procs");
        std::fs::write(&procs, "").unwrap();
        let mut busy = busy_then_asleep();
        let pid = busy.id() as i32;
        let used = crate::proc::cpu_seconds(pid).unwrap();
        assert!(used > 0.05, "{used}");
        let moved = keep_in_group(&procs, &[pid]);
        assert_eq!(moved.processes, 1);
        assert!((moved.cpu_before - used).abs() < 0.02, "{moved:?} against {used}");
        assert_eq!(keep_in_group(&procs, &[pid]), Moved::default(), "moved again");
        busy.kill().unwrap();
        busy.wait().unwrap();
    }
}
