//! Drives a `Farm` on a virtual clock over test queues: deterministic, instant, and the very
//! scheduler the real engine runs.

use crate::farm::Farm;
use libra_core::Money;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// A point of the usage trace: at `t`, this many jobs running on each resource.
#[derive(Debug, Clone, Serialize)]
pub struct UsagePoint {
    pub t: f64,
    pub running: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VirtualOutcome {
    pub jobs: usize,
    /// Jobs that ended by the deadline.
    pub completed: usize,
    /// When the last job ended.
    pub time: f64,
    #[serde(rename = "cost_cents")]
    pub cost: Money,
    /// Jobs done per resource.
    pub per_resource: Vec<usize>,
    pub usage: Vec<UsagePoint>,
}

struct Ev {
    t: f64,
    seq: u64,
    r: usize,
    attempt: i64,
    wall: f64,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    // Earliest first out of a max-heap.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// Runs `job_secs.len()` jobs; job `j` takes `job_secs[j] / speed[r]` seconds (all CPU) on
/// resource `r`. Jobs are started only at events, as the broker would.
pub fn run(mut farm: Farm, job_secs: &[f64], speed: &[f64]) -> VirtualOutcome {
    let mut pending: VecDeque<usize> = (0..job_secs.len()).collect();
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut now = 0.0f64;
    let mut usage = Vec::new();
    let mut per_resource = vec![0usize; farm.resources.len()];
    let (mut completed, mut last) = (0usize, 0.0f64);
    loop {
        let d = farm.decide(now, pending.len() as u64);
        for (r, &n) in d.start.iter().enumerate() {
            for _ in 0..n {
                let Some(j) = pending.pop_front() else { break };
                seq += 1;
                let attempt = seq as i64;
                farm.start(r, attempt, j as i64, now);
                let wall = job_secs[j] / speed[r].max(1e-9);
                heap.push(Ev { t: now + wall, seq, r, attempt, wall });
            }
        }
        usage.push(UsagePoint { t: now, running: farm.resources.iter().map(|r| r.running.len()).collect() });
        let Some(first) = heap.pop() else { break };
        now = first.t;
        let mut batch = vec![first];
        while heap.peek().is_some_and(|e: &Ev| e.t <= now) {
            if let Some(e) = heap.pop() {
                batch.push(e);
            }
        }
        for e in batch {
            farm.finish(e.r, e.attempt, e.wall, e.wall, true);
            per_resource[e.r] += 1;
            if e.t <= farm.deadline + 1e-6 {
                completed += 1;
            }
            last = last.max(e.t);
        }
    }
    VirtualOutcome { jobs: job_secs.len(), completed, time: last, cost: farm.spent, per_resource, usage }
}
