//! Job control on one node: the share each of its jobs should hold until the next period,
//! from the CPU time measured so far. Pure, so that what the agent tells the kernel can be
//! checked without a kernel.

use libra_api::JobControl;
use libra_core::share::{edf_shares, required_share, EdfJob};

/// A job as job control sees it.
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
    /// Stopped by an administrator: holds no capacity under EDF.
    pub suspended: bool,
}

/// `(job, share)` for every job. `Libra`: Algorithm 2, each job the share that finishes what
/// is left of its estimate by its deadline. `Edf`: the same division `libra-edf` admits by
/// (`libra_core::share::edf_shares`), so that what was promised under EDF is kept under EDF.
pub fn shares(mode: JobControl, jobs: &[JobProgress], now: f64, cpus: f64) -> Vec<(u64, f64)> {
    let cap = cpus.min(1.0);
    let algorithm2 = |j: &JobProgress| required_share(j.estimate, j.cpu, j.deadline_at, now, j.admitted, cap);
    match mode {
        JobControl::Libra => jobs.iter().map(|j| (j.job, algorithm2(j))).collect(),
        JobControl::Edf => {
            let edf: Vec<EdfJob> = jobs
                .iter()
                .filter(|j| !j.suspended)
                .map(|j| EdfJob {
                    job: j.job,
                    remaining: (j.estimate - j.cpu).max(0.0),
                    deadline_abs: j.deadline_at,
                    parallel: j.procs > 1,
                    required: algorithm2(j),
                })
                .collect();
            let mut out = edf_shares(&edf, now, cpus, cap);
            out.extend(jobs.iter().filter(|j| j.suspended).map(|j| (j.job, algorithm2(j))));
            out
        }
    }
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
