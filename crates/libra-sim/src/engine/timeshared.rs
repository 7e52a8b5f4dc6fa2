//! Time-shared nodes: every job on a node holds a weight (its required share, set by job
//! control) and the node's CPU is divided in proportion to the weights, so spare CPU goes to the
//! jobs present (work-conserving). A parallel job advances at the rate of its slowest node.
//!
//! Job control runs on a node at every event that touches it: the weights of its jobs are reset
//! by the policy's job control (`libra_core::share::node_shares`, the function the node agents
//! call too): Algorithm 2's `(E - cpu) / (D - wall)`, or EDF's. Each node keeps its own weights,
//! as each node agent keeps its own control groups, so an event on one node changes the rates of
//! the jobs on that node only.

use super::events::IndexedHeap;
use super::live::{Live, Reusable};
use super::{blank_record, spec_of, Arrived, ClusterConfig, JobRecord, Verdict};
use crate::workload::SimJob;
use libra_core::policy::{Decision, Policy};
use libra_core::share::{node_shares, JobControl};
use libra_core::{Cluster, JobSlot, NodeIdx};

#[derive(Debug, Clone, Default)]
struct Active {
    /// Actual CPU-seconds done as of `as_of`.
    done: f64,
    as_of: f64,
    rate: f64,
    nodes: Vec<NodeIdx>,
    /// Where the job sits in each of its nodes' lists (`pos[i]` in `nodes[i]`).
    pos: Vec<usize>,
    /// The rate the job gets on each of its nodes (parallel to `nodes`), as of that node's
    /// last job control: its weight over the node's sum, at most 1. A node's weights change
    /// only when job control runs on it, so the rates of the nodes an event did not touch are
    /// still right, and a job's rate (the least of these, in node order, as before) is read
    /// from one array instead of from every node it spans.
    rates: Vec<f64>,
    /// The least of `rates` while `refold` is false (`Active::set_rate`).
    least: f64,
    /// Whether `least` must be found again by reading every rate.
    refold: bool,
    /// Where the cluster keeps the job's commitment, so that a progress update skips the
    /// lookup by id.
    slot: Option<JobSlot>,
    /// The job's actual runtime (`SimJob::runtime`), kept here with what `reschedule` reads of
    /// the job anyway: the trace's record is elsewhere in memory, and reading it for this one
    /// number was a cache miss at every rate change.
    runtime: f64,
}

impl Reusable for Active {
    /// Every field as `insert` leaves it for `arrive` to set, the vectors' memory kept.
    fn clear(&mut self) {
        let (mut nodes, mut pos, mut rates) =
            (std::mem::take(&mut self.nodes), std::mem::take(&mut self.pos), std::mem::take(&mut self.rates));
        nodes.clear();
        pos.clear();
        rates.clear();
        *self = Active { nodes, pos, rates, ..Active::default() };
    }
}

impl Active {
    /// Sets the job's rate on its node `at` (`old` before), and keeps `least` without reading
    /// the other rates when that is exact. Among positive rates (no NaN, no zero of either
    /// sign) the least is one value with one bit pattern, so the least after a write is the old
    /// least or the new rate, unless the rate written over held the least and rose: only then,
    /// or when a rate is not positive, are all of them read again (`least_rate`). Most writes
    /// at an event lower the rates of a node that gained a job, or leave a job's least on
    /// another node.
    fn set_rate(&mut self, at: usize, old: f64, rate: f64) {
        debug_assert_eq!(self.rates[at].to_bits(), old.to_bits(), "a node's copy of the rate");
        self.rates[at] = rate;
        if self.refold || rate.to_bits() == old.to_bits() {
            return;
        }
        if !((rate > 0.0) & (old > 0.0) & (self.least > 0.0)) {
            self.refold = true;
        } else if rate < self.least {
            self.least = rate;
        } else if old <= self.least {
            self.refold = true;
        }
    }

    /// The job's rate: a parallel job advances at the pace of its slowest node (the least of
    /// `rates`, in node order; 0 when it has none).
    fn least_rate(&mut self) -> f64 {
        if self.refold {
            let least = self.rates.iter().copied().fold(f64::INFINITY, f64::min);
            self.least = if least.is_finite() { least } else { 0.0 };
            self.refold = false;
        }
        self.least
    }
}

/// A job on a node: its index, the weight it holds here, its rate here (`Active::rates[at]`, also
/// kept here, where job control reads it beside the weight, so that setting a rate reads
/// nothing of the job), and which of its nodes this is (the index into its `nodes`, `pos` and
/// `rates`).
#[derive(Debug, Clone, Copy)]
struct OnNode {
    job: usize,
    weight: f64,
    rate: f64,
    at: usize,
}

#[derive(Debug, Clone, Default)]
struct NodeSim {
    jobs: Vec<OnNode>,
    weight_sum: f64,
}

struct State<'a> {
    jobs: &'a [SimJob],
    policy: &'a dyn Policy,
    cluster: Cluster,
    active: Live<Active>,
    nodes: Vec<NodeSim>,
    queue: IndexedHeap,
    /// Marks a job as already collected in the current event (the event number).
    mark: Vec<u64>,
    /// A job's new weight on the node being controlled, by job index.
    scratch: Vec<f64>,
    /// The jobs an event touches, kept between events so that no event allocates it.
    affected: Vec<usize>,
    event_no: u64,
}

pub(super) fn run(
    jobs: &[SimJob],
    policy: &dyn Policy,
    cfg: ClusterConfig,
    arrived: &mut Arrived<'_>,
) -> (Vec<JobRecord>, u64) {
    let mut records: Vec<JobRecord> = jobs.iter().map(blank_record).collect();
    let mut st = State {
        jobs,
        policy,
        cluster: Cluster::homogeneous(cfg.nodes, cfg.price_base),
        active: Live::with_jobs(jobs.len()),
        nodes: vec![NodeSim::default(); cfg.nodes],
        queue: IndexedHeap::with_jobs(jobs.len()),
        mark: vec![0; jobs.len()],
        scratch: vec![0.0; jobs.len()],
        affected: Vec::new(),
        event_no: 0,
    };
    let mut next_arrival = 0usize;
    let mut events = 0u64;
    loop {
        let completion = st.queue.peek();
        let arrival = jobs.get(next_arrival).map(|j| j.submit);
        let take_completion = match (completion, arrival) {
            (None, None) => break,
            (Some((c, _)), Some(a)) => c <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        events += 1;
        st.event_no += 1;
        if take_completion {
            let Some((time, job)) = completion else { break };
            st.queue.remove(job);
            st.complete(job, time, &mut records[job]);
        } else {
            let i = next_arrival;
            next_arrival += 1;
            st.arrive(i, &mut records[i]);
            arrived.at(next_arrival);
        }
    }
    (records, events)
}

impl State<'_> {
    fn arrive(&mut self, i: usize, rec: &mut JobRecord) {
        let job = &self.jobs[i];
        let now = job.submit;
        let spec = spec_of(job);
        let user = Some(u64::from(job.user));
        match self.policy.decide_only(&spec, user, &self.cluster, now) {
            Decision::Accept { nodes, cost, .. } => {
                rec.verdict = Verdict::Accepted;
                rec.outcome.accepted = true;
                rec.outcome.start = Some(now);
                rec.outcome.cost = cost;
                rec.nodes = nodes;
                let nodes = &rec.nodes;
                if job.runtime <= 0.0 {
                    rec.outcome.finish = Some(now);
                    return;
                }
                let reserved = self.policy.reserved_estimate(&spec, user);
                if self.cluster.commit(i as u64, reserved, now + job.deadline, nodes, now).is_err() {
                    // Only a policy bug can get here (a node that does not exist, or a job
                    // committed twice); count the job as rejected rather than crash a sweep.
                    rec.verdict = Verdict::Rejected(libra_core::RejectReason::Resources);
                    rec.outcome.accepted = false;
                    return;
                }
                let slot = self.cluster.slot_of(i as u64);
                let a = self.active.insert(i);
                for (at, &n) in nodes.iter().enumerate() {
                    self.nodes[n].jobs.push(OnNode { job: i, weight: 0.0, rate: 0.0, at });
                    a.pos.push(self.nodes[n].jobs.len() - 1);
                    // Every rate is set by the job control on all its nodes just below.
                    a.rates.push(0.0);
                }
                a.nodes.extend_from_slice(nodes);
                a.as_of = now;
                a.refold = true;
                a.slot = slot;
                a.runtime = job.runtime;
                self.job_control(nodes, now);
            }
            Decision::Reject { reason, .. } => rec.verdict = Verdict::Rejected(reason),
            Decision::Queue => {
                // A time-shared run never queues; a policy that does belongs to the other model.
                rec.verdict = Verdict::Rejected(libra_core::RejectReason::Resources);
            }
        }
    }

    fn complete(&mut self, i: usize, now: f64, rec: &mut JobRecord) {
        let Some(a) = self.active.get_mut(i) else { return };
        let pos = std::mem::take(&mut a.pos);
        rec.outcome.finish = Some(now);
        let job = &self.jobs[i];
        self.policy.observe(Some(u64::from(job.user)), job.estimate, job.runtime);
        // The job's nodes are its record's (`arrive`).
        for (&n, &p) in rec.nodes.iter().zip(&pos) {
            let list = &mut self.nodes[n].jobs;
            debug_assert_eq!(list[p].job, i);
            list.swap_remove(p);
            // The job that was last now sits at `p`: tell it.
            if let Some(&moved) = list.get(p) {
                if let Some(m) = self.active.get_mut(moved.job) {
                    m.pos[moved.at] = p;
                }
            }
        }
        if let Some(a) = self.active.get_mut(i) {
            a.pos = pos;
        }
        self.active.remove(i);
        self.cluster.release(i as u64);
        self.job_control(&rec.nodes, now);
    }

    /// Job control on each of `touched`, then new rates and completion times for every job on
    /// them.
    fn job_control(&mut self, touched: &[NodeIdx], now: f64) {
        let mut affected = std::mem::take(&mut self.affected);
        affected.clear();
        for &n in touched {
            for &OnNode { job: k, .. } in &self.nodes[n].jobs {
                if self.mark[k] != self.event_no {
                    self.mark[k] = self.event_no;
                    affected.push(k);
                }
            }
        }
        // Bring progress up to now at the old rates before anything changes.
        for &k in &affected {
            if let Some(a) = self.active.get_mut(k) {
                a.done += a.rate * (now - a.as_of);
                a.as_of = now;
            }
        }
        let control = self.policy.job_control();
        // Algorithm 2 is each job's own share, the same on every node it spans: computed once
        // per job here (`Cluster::share_in`), rather than once per node it is on below.
        let once = control == JobControl::Libra
            && affected.iter().all(|&k| {
                let share = self
                    .active
                    .get(k)
                    .and_then(|a| a.slot)
                    .and_then(|s| self.cluster.share_in(s, k as u64, now));
                if let Some(share) = share {
                    self.scratch[k] = share;
                }
                share.is_some()
            });
        for &n in touched {
            // The cluster's entries of the node and the node's own list hold the same jobs in
            // different orders: the shares go through `scratch`, by job.
            match control {
                JobControl::Libra if once => {}
                // The same shares read from the node's entries (`Cluster::node_job_shares`,
                // bit for bit what `node_shares` computes on `controlled_jobs`), without
                // building either vector: for a job whose slot is not known.
                JobControl::Libra => {
                    for (job, share) in self.cluster.node_job_shares(n, now) {
                        self.scratch[job as usize] = share;
                    }
                }
                JobControl::Edf => {
                    let jobs = self.cluster.controlled_jobs(n, now);
                    let shares = node_shares(control, &jobs, now, self.cluster.node(n).spec.cpus);
                    for (j, s) in jobs.iter().zip(shares) {
                        self.scratch[j.job as usize] = s;
                    }
                }
            }
            let node = &mut self.nodes[n];
            let mut sum = 0.0;
            for j in node.jobs.iter_mut() {
                j.weight = self.scratch[j.job];
                sum += j.weight;
            }
            node.weight_sum = sum;
            // Each job's rate here, for `reschedule`: work-conserving proportional share.
            let count = node.jobs.len().max(1) as f64;
            for j in node.jobs.iter_mut() {
                let rate = if sum > 1e-12 { (j.weight / sum).min(1.0) } else { 1.0 / count };
                let old = std::mem::replace(&mut j.rate, rate);
                if let Some(a) = self.active.get_mut(j.job) {
                    a.set_rate(j.at, old, rate);
                }
            }
        }
        for &k in &affected {
            self.reschedule(k, now);
        }
        self.affected = affected;
    }

    fn reschedule(&mut self, k: usize, now: f64) {
        let Some(a) = self.active.get_mut(k) else { return };
        let rate = a.least_rate();
        a.rate = rate;
        let (done, runtime, slot) = (a.done, a.runtime, a.slot);
        let _ = match slot {
            Some(slot) => self.cluster.set_progress_in(slot, k as u64, done, rate, now),
            None => self.cluster.set_progress(k as u64, done, rate, now),
        };
        if rate > 0.0 {
            let left = (runtime - done).max(0.0);
            self.queue.set(k, now + left / rate);
        } else {
            self.queue.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Active;
    use proptest::prelude::*;

    fn active(nodes: usize) -> Active {
        Active {
            done: 0.0,
            as_of: 0.0,
            rate: 0.0,
            nodes: (0..nodes).collect(),
            pos: vec![0; nodes],
            rates: vec![0.0; nodes],
            least: 0.0,
            refold: true,
            slot: None,
            runtime: 1.0,
        }
    }

    /// Rates as job control makes them, with the values that trip a kept least: zeros of both
    /// signs, ties, 1, and values that rise and fall.
    fn rate() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(0.5),
            Just(0.25),
            (1u32..8).prop_map(|k| f64::from(k) / 8.0),
            (1e-6f64..1.0),
        ]
    }

    proptest! {
        /// The kept least is the least of the rates, to the bit, after every event's writes,
        /// whatever the writes: `least_rate` against the fold it replaced.
        #[test]
        fn least_rate_is_the_fold_of_the_rates(
            nodes in 1usize..6,
            events in proptest::collection::vec(proptest::collection::vec((0usize..6, rate()), 0..5), 1..40),
        ) {
            let mut a = active(nodes);
            for writes in events {
                for (at, r) in writes {
                    let at = at % nodes;
                    let old = a.rates[at];
                    a.set_rate(at, old, r);
                }
                let fold = a.rates.iter().copied().fold(f64::INFINITY, f64::min);
                let fold = if fold.is_finite() { fold } else { 0.0 };
                prop_assert_eq!(a.least_rate().to_bits(), fold.to_bits(), "rates {:?}", a.rates);
            }
        }
    }
}
