//! Job control on one node: the share each of its jobs should hold until the next period, from
//! the CPU time measured so far. The division itself is `libra_core::share::node_shares`, the
//! function the simulator runs on its model, in the mode the server derives from the admission
//! policy; this module only says what the agent measured.

use libra_api::JobControl;
use libra_core::share::{node_shares, ControlledJob};

/// A job as the agent measures it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobProgress {
    pub job: u64,
    /// CPU-seconds the node is committed to (the estimate, padded under `libra-risk`).
    pub estimate: f64,
    /// CPU-seconds measured so far.
    pub cpu: f64,
    pub deadline_at: f64,
    /// The share it was admitted with (what an overrun job keeps).
    pub admitted: f64,
    pub procs: u32,
    /// CPUs its task may use at once.
    pub cpus_per_task: u32,
    /// Stopped by an administrator: holds no capacity under EDF.
    pub suspended: bool,
}

/// `(job, share)` for every job, on a node of `cpus` CPUs. Each job gets at most
/// `min(cpus_per_task, cpus)`.
pub fn shares(mode: JobControl, jobs: &[JobProgress], now: f64, cpus: f64) -> Vec<(u64, f64)> {
    let controlled: Vec<ControlledJob> = jobs
        .iter()
        .map(|j| ControlledJob {
            job: j.job,
            estimate: j.estimate,
            cpu: j.cpu,
            deadline_abs: j.deadline_at,
            admitted: j.admitted,
            procs: j.procs,
            cap: cpus.min(f64::from(j.cpus_per_task.max(1))),
            suspended: j.suspended,
        })
        .collect();
    jobs.iter().map(|j| j.job).zip(node_shares(mode, &controlled, now, cpus)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(job: u64, estimate: f64, cpu: f64, deadline_at: f64) -> JobProgress {
        JobProgress {
            job,
            estimate,
            cpu,
            deadline_at,
            admitted: estimate / deadline_at,
            procs: 1,
            cpus_per_task: 1,
            suspended: false,
        }
    }

    fn share_of(s: &[(u64, f64)], job: u64) -> f64 {
        s.iter().find(|(j, _)| *j == job).map(|(_, v)| *v).unwrap()
    }

    #[test]
    fn libra_mode_is_algorithm_2() {
        // 10 s of 20 done, 20 s left: 0.5.
        let s = shares(JobControl::Libra, &[job(1, 20.0, 10.0, 40.0)], 20.0, 1.0);
        assert_eq!(s, vec![(1, 0.5)]);
        // Behind: more; never above one CPU.
        let s = shares(JobControl::Libra, &[job(1, 20.0, 0.0, 25.0)], 20.0, 1.0);
        assert_eq!(s, vec![(1, 1.0)]);
    }

    #[test]
    fn a_task_of_several_cpus_may_have_that_many_and_no_more_than_the_node() {
        let mut wide = job(1, 20.0, 0.0, 25.0);
        wide.cpus_per_task = 2;
        // 20 CPU-seconds in 5 s: 4 CPUs wanted, 2 allowed on a 4-CPU node, 1.5 on a 1.5-CPU one.
        assert_eq!(shares(JobControl::Libra, &[wide], 20.0, 4.0), vec![(1, 2.0)]);
        assert_eq!(shares(JobControl::Libra, &[wide], 20.0, 1.5), vec![(1, 1.5)]);
        assert_eq!(shares(JobControl::Edf, &[wide], 20.0, 4.0), vec![(1, 2.0)]);
        // One CPU per task: one CPU, as before.
        assert_eq!(shares(JobControl::Libra, &[job(1, 20.0, 0.0, 25.0)], 20.0, 4.0), vec![(1, 1.0)]);
    }

    #[test]
    fn edf_mode_runs_the_earlier_deadline_first() {
        // A needs all of the CPU for 10 s; B needs a third of it for 30 s. Algorithm 2 would owe
        // 1.33 CPUs; EDF runs A at full speed and B after it, and both meet their deadlines.
        let jobs = [job(1, 10.0, 0.0, 10.0), job(2, 10.0, 0.0, 30.0)];
        let libra = shares(JobControl::Libra, &jobs, 0.0, 1.0);
        assert!(libra.iter().map(|(_, s)| s).sum::<f64>() > 1.3);
        let edf = shares(JobControl::Edf, &jobs, 0.0, 1.0);
        assert_eq!(share_of(&edf, 1), 1.0);
        assert_eq!(share_of(&edf, 2), 0.0);
        // Once A is done, B gets its rate: 10 s of work in the 20 s left.
        let edf = shares(JobControl::Edf, &[job(2, 10.0, 0.0, 30.0)], 10.0, 1.0);
        assert_eq!(share_of(&edf, 2), 0.5);
    }

    #[test]
    fn edf_mode_keeps_parallel_jobs_proportional_and_suspended_jobs_out_of_the_way() {
        let mut par = job(1, 10.0, 0.0, 40.0);
        par.procs = 2;
        let mut held = job(3, 30.0, 0.0, 31.0);
        held.suspended = true;
        let seq = job(2, 30.0, 0.0, 40.0);
        let s = shares(JobControl::Edf, &[par, seq, held], 0.0, 1.0);
        // The parallel job keeps its Algorithm 2 share (0.25); the sequential one its rate
        // (0.75), whole, since the suspended job takes no capacity.
        assert_eq!(share_of(&s, 1), 0.25);
        assert_eq!(share_of(&s, 2), 0.75);
        assert!(share_of(&s, 3) > 0.9);
    }
}
