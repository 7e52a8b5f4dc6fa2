//! Job control: Algorithm 2 of Libra+$ (the share a running job needs from now on to finish by
//! its deadline), EDF job control for the policies that admit by EDF, and the stride scheduler of
//! the Libra SRS (3.1.6, 3.1.10) for nodes that have to time-slice in user space.
//!
//! `node_shares` is the one function both worlds call: the simulator with the progress its
//! model assumes, a node agent with the CPU time it measured. Which control it runs is the
//! admission policy's (`Policy::job_control`), since a node must keep the promises the policy
//! made in the way it made them.

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How a node divides its CPU among its jobs. On the wire (a node agent is told which one to
/// run) as `libra` and `edf`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum JobControl {
    /// Algorithm 2: each job the share that finishes what is left of its estimate by its
    /// deadline (Libra, Libra+$).
    #[default]
    Libra,
    /// Earliest deadline first (`libra-edf`, `libra-risk`): parallel and overrun jobs hold their
    /// Algorithm 2 share; sequential jobs, in deadline order, the rate that finishes each at its
    /// deadline, as far as the capacity goes (`edf_shares`).
    Edf,
}

/// A job as job control sees it on one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControlledJob {
    pub job: u64,
    /// CPU-seconds the node is committed to (the estimate, padded under `libra-risk`).
    pub estimate: f64,
    /// CPU-seconds done so far (measured on a node; the model's on the simulator).
    pub cpu: f64,
    pub deadline_abs: f64,
    /// The share it was admitted with (what an overrun job keeps).
    pub admitted: f64,
    /// Nodes the job spans: a parallel job keeps a proportional share under EDF, since its
    /// parts on other nodes advance at their own pace.
    pub procs: u32,
    /// The most it may get here: `min(cpus_per_task, node cpus)`.
    pub cap: f64,
    /// Stopped by an administrator: holds no capacity under EDF.
    pub suspended: bool,
}

impl ControlledJob {
    /// Algorithm 2 for this job at `now`.
    pub fn algorithm2(&self, now: f64) -> f64 {
        required_share(self.estimate, self.cpu, self.deadline_abs, now, self.admitted, self.cap)
    }
}

/// Job control on one node of `capacity` CPUs: the share each of `jobs` should hold from `now`
/// until the next control period (or event), in the order of `jobs`.
pub fn node_shares(control: JobControl, jobs: &[ControlledJob], now: f64, capacity: f64) -> Vec<f64> {
    match control {
        JobControl::Libra => jobs.iter().map(|j| j.algorithm2(now)).collect(),
        JobControl::Edf => {
            let running: Vec<usize> = (0..jobs.len()).filter(|&i| !jobs[i].suspended).collect();
            let edf: Vec<EdfJob> = running
                .iter()
                .map(|&i| {
                    let j = &jobs[i];
                    EdfJob {
                        job: j.job,
                        remaining: (j.estimate - j.cpu).max(0.0),
                        deadline_abs: j.deadline_abs,
                        parallel: j.procs > 1,
                        required: j.algorithm2(now),
                        cap: j.cap,
                    }
                })
                .collect();
            // A suspended job keeps its Algorithm 2 share as its weight for when it resumes;
            // it runs nothing meanwhile, so it takes no capacity from the others.
            let mut out: Vec<f64> = jobs.iter().map(|j| j.algorithm2(now)).collect();
            for (&i, s) in running.iter().zip(edf_shares(&edf, now, capacity)) {
                out[i] = s;
            }
            out
        }
    }
}

/// Algorithm 2: `Partition_ij = (RE_i - clockCPU_ij) / (D_i - clockWall_i)`, written with
/// absolute times: `(estimate - cpu_done) / (deadline_abs - now)`.
///
/// A job that has used up its estimate, or whose deadline has passed, has no defined
/// requirement; it keeps running at best effort holding `fallback` (callers pass the share it was
/// admitted with). The result is capped at `cap` (a job cannot use more than one processor).
pub fn required_share(
    estimate: f64,
    cpu_done: f64,
    deadline_abs: f64,
    now: f64,
    fallback: f64,
    cap: f64,
) -> f64 {
    let remaining = estimate - cpu_done;
    let left = deadline_abs - now;
    let s = if remaining <= 0.0 {
        if estimate <= 0.0 {
            0.0
        } else {
            fallback
        }
    } else if left <= 0.0 {
        fallback
    } else {
        remaining / left
    };
    s.clamp(0.0, cap)
}

/// A job as EDF job control sees it on one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdfJob {
    pub job: u64,
    /// Estimated CPU-seconds left (0 once the estimate is used up).
    pub remaining: f64,
    pub deadline_abs: f64,
    /// Runs on several nodes: keeps a constant proportional share.
    pub parallel: bool,
    /// The share Algorithm 2 gives it now (what a parallel or overrun job holds).
    pub required: f64,
    /// The most it may get: `min(cpus_per_task, node cpus)`.
    pub cap: f64,
}

/// Job control for a node that admits by EDF (`libra-edf`): parallel and overrun jobs hold their
/// Algorithm 2 share; then each sequential job, in deadline order, gets the constant rate that
/// would finish it exactly at its deadline, as far as the capacity goes. Spare CPU is left to
/// the proportional division of the kernel. Returns every job's share, in the order of `jobs`.
pub fn edf_shares(jobs: &[EdfJob], now: f64, capacity: f64) -> Vec<f64> {
    let mut out = vec![0.0; jobs.len()];
    let mut left = capacity;
    let mut seq: Vec<usize> = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        if j.remaining <= 0.0 || j.deadline_abs <= now || j.parallel {
            left -= j.required;
            out[i] = j.required;
        } else {
            seq.push(i);
        }
    }
    seq.sort_by(|&a, &b| {
        jobs[a].deadline_abs.total_cmp(&jobs[b].deadline_abs).then(jobs[a].job.cmp(&jobs[b].job))
    });
    for i in seq {
        let j = &jobs[i];
        let want = (j.remaining / (j.deadline_abs - now)).min(j.cap);
        let s = want.min(left.max(0.0));
        left -= s;
        out[i] = s;
    }
    out
}

/// The fixed-point numerator of strides: large so that integer strides stay precise.
pub const STRIDE1: u64 = 1 << 20;

/// Stride scheduling: each job holds tickets; its stride is `STRIDE1 / tickets`; the job with the
/// smallest pass runs the next quantum and its pass advances by its stride. Ties go to the job
/// that joined first (FIFO), as the SRS says. A quantum the job did not have in full (another
/// process took part of the CPU) can be charged for what it was (`charge`), as Waldspurger's
/// stride scheduling does for fractional quanta.
#[derive(Debug, Default, Clone)]
pub struct StrideScheduler {
    jobs: HashMap<u64, StrideEntry>,
    queue: BinaryHeap<Reverse<(u64, u64, u64)>>, // (pass, arrival order, job)
    next_order: u64,
    global_pass: u64,
}

#[derive(Debug, Clone, Copy)]
struct StrideEntry {
    tickets: u64,
    stride: u64,
    pass: u64,
    order: u64,
    /// What the last pick added to `pass`, until `charge` settles it.
    charged: u64,
}

impl StrideScheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a job or changes its tickets. A new job starts one stride after the current global
    /// pass, so it neither starves others nor is starved by history it did not take part in.
    pub fn set_tickets(&mut self, job: u64, tickets: u64) {
        let tickets = tickets.max(1);
        let stride = (STRIDE1 / tickets).max(1);
        match self.jobs.get_mut(&job) {
            Some(e) => {
                e.tickets = tickets;
                e.stride = stride;
            }
            None => {
                let order = self.next_order;
                self.next_order += 1;
                let pass = self.global_pass + stride;
                self.jobs.insert(job, StrideEntry { tickets, stride, pass, order, charged: 0 });
                self.queue.push(Reverse((pass, order, job)));
            }
        }
    }

    pub fn remove(&mut self, job: u64) {
        self.jobs.remove(&job);
    }

    pub fn tickets(&self, job: u64) -> Option<u64> {
        self.jobs.get(&job).map(|e| e.tickets)
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Picks the job to run for the next quantum and advances its pass.
    pub fn pick(&mut self) -> Option<u64> {
        while let Some(Reverse((pass, order, job))) = self.queue.pop() {
            let Some(e) = self.jobs.get_mut(&job) else {
                continue;
            };
            if e.pass != pass || e.order != order {
                continue; // stale entry
            }
            self.global_pass = pass;
            e.pass = pass + e.stride;
            e.charged = e.stride;
            self.queue.push(Reverse((e.pass, e.order, job)));
            return Some(job);
        }
        None
    }

    /// Charges the job's last pick `quanta` quanta instead of the one `pick` charged: less when
    /// the job had only part of its quantum, more when it had longer or used more than one CPU.
    /// Once per pick: a second charge, or one for a job not picked since, changes nothing.
    /// `quanta` is clamped to [0, 64] (NaN is 1).
    pub fn charge(&mut self, job: u64, quanta: f64) {
        let Some(e) = self.jobs.get_mut(&job) else { return };
        if e.charged == 0 {
            return;
        }
        let quanta = if quanta.is_nan() { 1.0 } else { quanta.clamp(0.0, 64.0) };
        // Never below the pass the pick was made at, so no job runs ahead of the global pass.
        let base = e.pass - e.charged;
        e.pass = base + (e.stride as f64 * quanta).round() as u64;
        e.charged = 0;
        self.queue.push(Reverse((e.pass, e.order, job)));
    }
}

/// Tickets for a share: shares are fractions of a CPU; tickets are integers proportional to them.
pub fn tickets_for_share(share: f64) -> u64 {
    (share.clamp(0.0, 1.0) * 10_000.0).round().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm2_examples() {
        // The Libra paper: 2 CPU-hours left, 4 hours to the deadline -> 50%.
        assert!((required_share(7200.0, 0.0, 14400.0, 0.0, 0.0, 1.0) - 0.5).abs() < 1e-12);
        // Ahead of schedule: half done at a quarter of the time.
        assert!((required_share(100.0, 50.0, 200.0, 50.0, 0.5, 1.0) - 50.0 / 150.0).abs() < 1e-12);
        // Overrun: falls back.
        assert_eq!(required_share(100.0, 120.0, 200.0, 150.0, 0.5, 1.0), 0.5);
        assert_eq!(required_share(100.0, 10.0, 200.0, 250.0, 0.5, 1.0), 0.5);
        // Capped at one processor.
        assert_eq!(required_share(100.0, 0.0, 50.0, 0.0, 0.0, 1.0), 1.0);
        assert_eq!(required_share(0.0, 0.0, 0.0, 0.0, 0.3, 1.0), 0.0);
    }

    #[test]
    fn edf_shares_serve_deadlines_in_order() {
        let j = |job, remaining: f64, deadline_abs, parallel, required| EdfJob {
            job,
            remaining,
            deadline_abs,
            parallel,
            required,
            cap: 1.0,
        };
        // A due at 1 needs all of the node now; B (due at 2) waits for it.
        let s = edf_shares(&[j(1, 1.0, 1.0, false, 1.0), j(2, 1.0, 2.0, false, 0.5)], 0.0, 1.0);
        assert_eq!(s, vec![1.0, 0.0]);
        let s = edf_shares(
            &[j(1, 0.5, 1.0, false, 0.5), j(2, 1.5, 2.0, false, 0.75), j(3, 1.0, 10.0, true, 0.1)],
            0.0,
            1.0,
        );
        assert_eq!(s, vec![0.5, 0.4, 0.1]);
        // A task of two CPUs on a four-CPU node may take two of them; one of one CPU, one.
        let mut wide = j(1, 4.0, 2.0, false, 1.0);
        wide.cap = 2.0;
        let s = edf_shares(&[wide, j(2, 4.0, 2.0, false, 1.0)], 0.0, 4.0);
        assert_eq!(s, vec![2.0, 1.0]);
    }

    fn controlled(job: u64, estimate: f64, cpu: f64, deadline_abs: f64) -> ControlledJob {
        ControlledJob {
            job,
            estimate,
            cpu,
            deadline_abs,
            admitted: estimate / deadline_abs,
            procs: 1,
            cap: 1.0,
            suspended: false,
        }
    }

    #[test]
    fn libra_control_is_algorithm_2_capped_at_the_task() {
        // 10 s of 20 done, 20 s left: 0.5.
        assert_eq!(node_shares(JobControl::Libra, &[controlled(1, 20.0, 10.0, 40.0)], 20.0, 1.0), vec![0.5]);
        // Behind: more; never above the job's cap.
        assert_eq!(node_shares(JobControl::Libra, &[controlled(1, 20.0, 0.0, 25.0)], 20.0, 4.0), vec![1.0]);
        let mut wide = controlled(1, 20.0, 0.0, 25.0);
        wide.cap = 3.0;
        assert_eq!(node_shares(JobControl::Libra, &[wide], 20.0, 4.0), vec![3.0]);
    }

    #[test]
    fn edf_control_runs_the_earlier_deadline_first_and_keeps_input_order() {
        // A needs all of the CPU for 10 s; B needs a third of it for 30 s. Algorithm 2 would owe
        // 1.33 CPUs; EDF runs A at full speed and B after it.
        let jobs = [controlled(2, 10.0, 0.0, 30.0), controlled(1, 10.0, 0.0, 10.0)];
        assert!(node_shares(JobControl::Libra, &jobs, 0.0, 1.0).iter().sum::<f64>() > 1.3);
        assert_eq!(node_shares(JobControl::Edf, &jobs, 0.0, 1.0), vec![0.0, 1.0]);
        // A suspended job takes no capacity, and keeps its Algorithm 2 share as its weight.
        let mut held = controlled(3, 30.0, 0.0, 31.0);
        held.suspended = true;
        let mut par = controlled(4, 10.0, 0.0, 40.0);
        par.procs = 2;
        let s = node_shares(JobControl::Edf, &[par, controlled(5, 30.0, 0.0, 40.0), held], 0.0, 1.0);
        assert_eq!(s[0], 0.25);
        assert_eq!(s[1], 0.75);
        assert!(s[2] > 0.9);
    }

    #[test]
    fn stride_charged_for_what_each_quantum_was_gives_cpu_in_proportion_to_tickets() {
        // Job 1's quanta are half taken by something else; charged half, it is picked twice as
        // often, and the CPU the two jobs had follows their tickets (3:1).
        let mut s = StrideScheduler::new();
        s.set_tickets(1, 300);
        s.set_tickets(2, 100);
        let mut had = HashMap::new();
        for _ in 0..10_000 {
            let j = s.pick().unwrap();
            let got = if j == 1 { 0.5 } else { 1.0 };
            s.charge(j, got);
            *had.entry(j).or_insert(0.0) += got;
        }
        let ratio = had[&1] / had[&2];
        assert!((ratio - 3.0).abs() < 0.01, "{had:?}");
        // A charge settles its pick once: repeating it, or charging an unknown job, is nothing.
        let j = s.pick().unwrap();
        s.charge(j, 0.0);
        let before = s.clone();
        s.charge(j, 50.0);
        s.charge(99, 0.0);
        assert_eq!(format!("{:?}", before.jobs.get(&j)), format!("{:?}", s.jobs.get(&j)));
        // Charged more than one quantum (two CPUs' worth), a job waits longer for its next.
        let mut s = StrideScheduler::new();
        s.set_tickets(1, 100);
        s.set_tickets(2, 100);
        let mut picks = HashMap::new();
        for _ in 0..3_000 {
            let j = s.pick().unwrap();
            s.charge(j, if j == 1 { 2.0 } else { 1.0 });
            *picks.entry(j).or_insert(0u32) += 1;
        }
        assert!((picks[&2] as i32 - 2 * picks[&1] as i32).abs() <= 2, "{picks:?}");
    }

    #[test]
    fn stride_gives_quanta_in_proportion_to_tickets() {
        let mut s = StrideScheduler::new();
        s.set_tickets(1, 300);
        s.set_tickets(2, 100);
        s.set_tickets(3, 600);
        let mut count = HashMap::new();
        for _ in 0..10_000 {
            *count.entry(s.pick().unwrap()).or_insert(0u32) += 1;
        }
        assert!((count[&1] as i32 - 3000).abs() <= 2, "{count:?}");
        assert!((count[&2] as i32 - 1000).abs() <= 2, "{count:?}");
        assert!((count[&3] as i32 - 6000).abs() <= 2, "{count:?}");
        s.remove(3);
        let picks: Vec<u64> = (0..8).map(|_| s.pick().unwrap()).collect();
        assert_eq!(picks.iter().filter(|j| **j == 1).count(), 6);
        assert!(s.pick().is_some());
        s.remove(1);
        s.remove(2);
        assert_eq!(s.pick(), None);
    }
}
