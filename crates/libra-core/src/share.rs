//! Job control: Algorithm 2 of Libra+$ (the share a running job needs from now on to finish by
//! its deadline) and the stride scheduler of the Libra SRS (3.1.6, 3.1.10) for nodes that have to
//! time-slice in user space.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

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
}

/// Job control for a node that admits by EDF (`libra-edf`): parallel and overrun jobs hold their
/// Algorithm 2 share; then each sequential job, in deadline order, gets the constant rate that
/// would finish it exactly at its deadline, as far as the capacity goes. Spare CPU is left to
/// the proportional division of the kernel. Returns `(job, share)` for every job.
pub fn edf_shares(jobs: &[EdfJob], now: f64, capacity: f64, cap: f64) -> Vec<(u64, f64)> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut left = capacity;
    let mut seq: Vec<&EdfJob> = Vec::new();
    for j in jobs {
        if j.remaining <= 0.0 || j.deadline_abs <= now || j.parallel {
            left -= j.required;
            out.push((j.job, j.required));
        } else {
            seq.push(j);
        }
    }
    seq.sort_by(|a, b| a.deadline_abs.total_cmp(&b.deadline_abs).then(a.job.cmp(&b.job)));
    for j in seq {
        let want = (j.remaining / (j.deadline_abs - now)).min(cap);
        let s = want.min(left.max(0.0));
        left -= s;
        out.push((j.job, s));
    }
    out
}

/// The fixed-point numerator of strides: large so that integer strides stay precise.
pub const STRIDE1: u64 = 1 << 20;

/// Stride scheduling: each job holds tickets; its stride is `STRIDE1 / tickets`; the job with the
/// smallest pass runs the next quantum and its pass advances by its stride. Ties go to the job
/// that joined first (FIFO), as the SRS says.
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
                self.jobs.insert(job, StrideEntry { tickets, stride, pass, order });
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
            self.queue.push(Reverse((e.pass, e.order, job)));
            return Some(job);
        }
        None
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
        };
        // A due at 1 needs all of the node now; B (due at 2) waits for it.
        let s = edf_shares(&[j(1, 1.0, 1.0, false, 1.0), j(2, 1.0, 2.0, false, 0.5)], 0.0, 1.0, 1.0);
        assert_eq!(s, vec![(1, 1.0), (2, 0.0)]);
        let s = edf_shares(
            &[j(1, 0.5, 1.0, false, 0.5), j(2, 1.5, 2.0, false, 0.75), j(3, 1.0, 10.0, true, 0.1)],
            0.0,
            1.0,
            1.0,
        );
        assert_eq!(s, vec![(3, 0.1), (1, 0.5), (2, 0.4)]);
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
