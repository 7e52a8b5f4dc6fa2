//! The discrete-event engine. One run replays a workload through one policy on a cluster of
//! identical nodes and returns every job's outcome and the metrics.
//!
//! Two node models, chosen by the policy: time-shared (work-conserving proportional share with
//! job control at every event on a node) and space-shared (one job per node, a waiting queue).
//! Events sit in a binary heap keyed by (time, kind, sequence); arrivals stream from the sorted
//! workload, so the heap only ever holds one pending completion per running job.

mod events;
mod live;
mod reference;
mod replay;
mod spaceshared;
mod timeshared;

pub use reference::simulate_reference;
pub use replay::Replay;

use crate::workload::SimJob;
use libra_core::metrics::{Metrics, Outcome};
use libra_core::policy::{Policy, RejectReason};
use libra_core::{JobSpec, Money, NodeIdx};
use serde::{Deserialize, Serialize};

/// The cluster a run simulates: `nodes` identical uniprocessor nodes at base price `price_base`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClusterConfig {
    pub nodes: usize,
    pub price_base: f64,
}

/// A cluster no run can simulate: the field, its value and what is accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {value} is not accepted: {accepted}")]
pub struct ClusterConfigError {
    pub field: &'static str,
    pub value: String,
    pub accepted: &'static str,
}

impl ClusterConfig {
    /// The most nodes a run simulates: each node is a few hundred bytes however idle, so a
    /// typo of a few digits more would otherwise fill the memory before the first event.
    pub const MAX_NODES: usize = 10_000_000;

    /// At least one node and at most `MAX_NODES`; a base price finite and >= 0.
    pub fn validate(&self) -> Result<(), ClusterConfigError> {
        if !(1..=Self::MAX_NODES).contains(&self.nodes) {
            return Err(ClusterConfigError {
                field: "nodes",
                value: self.nodes.to_string(),
                accepted: "give 1 to 10,000,000",
            });
        }
        if !(self.price_base.is_finite() && self.price_base >= 0.0) {
            return Err(ClusterConfigError {
                field: "price-base",
                value: libra_core::Shown(self.price_base).to_string(),
                accepted: "give a non-negative number",
            });
        }
        Ok(())
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        // The SDSC SP2: 128 nodes; PBase 1 credit per CPU-second (the model's f(R) = R * PBase).
        ClusterConfig { nodes: 128, price_base: 1.0 }
    }
}

/// What the policy decided for one job, for `--decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Accepted,
    /// Rejected at submission.
    Rejected(RejectReason),
    /// Space-shared: dropped from the queue when it could no longer meet its deadline.
    Dropped,
}

/// One job's full record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    pub verdict: Verdict,
    pub nodes: Vec<NodeIdx>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    pub policy: String,
    pub nodes: usize,
    pub metrics: Metrics,
    pub records: Vec<JobRecord>,
    /// Events processed (arrivals + completions + scheduling passes).
    pub events: u64,
}

/// How often a run reports its progress (`simulate_with_progress`): every this many arrivals.
/// A call costs an indirect call; at this pace it is not measurable beside the arrivals.
pub const PROGRESS_EVERY: usize = 4096;

/// Runs `jobs` (sorted by submit time) through `policy`.
pub fn simulate(jobs: &[SimJob], policy: &dyn Policy, cluster: ClusterConfig) -> SimResult {
    simulate_with_progress(jobs, policy, cluster, &|_| {})
}

/// `simulate`, calling `progress(n)` as each `n` more jobs have arrived: every
/// `PROGRESS_EVERY` arrivals and once more for the rest after the last, so the calls add up to
/// the jobs of the run. The completions after the last arrival are not counted: a run's tail.
pub fn simulate_with_progress(
    jobs: &[SimJob],
    policy: &dyn Policy,
    cluster: ClusterConfig,
    progress: &(dyn Fn(usize) + Sync),
) -> SimResult {
    let mut arrived = Arrived { progress, told: 0 };
    // On a thread of rayon's pool (this one when it is, as in an experiment's runs): a policy
    // that reads a large cluster's nodes in stripes side by side hands a stripe to an idle
    // thread of the pool, and one that has been running the simulation takes it quickly.
    // Asked from a thread outside the pool, each arrival would wake the pool and then wait for
    // it, which cost more than the stripes saved (20,000 jobs on 10,000 nodes).
    let (records, events) = rayon::scope(|_| {
        if policy.space_shared() {
            spaceshared::run(jobs, policy, cluster, &mut arrived)
        } else {
            timeshared::run(jobs, policy, cluster, &mut arrived)
        }
    });
    arrived.rest(jobs.len());
    finish(policy.name(), cluster, records, events)
}

/// What a run has told of its arrivals (`simulate_with_progress`).
pub(crate) struct Arrived<'a> {
    progress: &'a (dyn Fn(usize) + Sync),
    told: usize,
}

impl Arrived<'_> {
    /// `n` jobs have arrived so far.
    #[inline]
    pub(crate) fn at(&mut self, n: usize) {
        if n % PROGRESS_EVERY == 0 {
            (self.progress)(n - self.told);
            self.told = n;
        }
    }

    /// The run is over: every one of its `n` jobs has arrived.
    fn rest(&mut self, n: usize) {
        if n > self.told {
            (self.progress)(n - self.told);
            self.told = n;
        }
    }
}

fn finish(name: &str, cluster: ClusterConfig, records: Vec<JobRecord>, events: u64) -> SimResult {
    SimResult {
        policy: name.to_string(),
        nodes: cluster.nodes,
        metrics: Metrics::compute(records.iter().map(|r| &r.outcome), cluster.nodes),
        records,
        events,
    }
}

/// The specification a simulated user submits.
pub(crate) fn spec_of(job: &SimJob) -> JobSpec {
    JobSpec::simple(job.estimate, job.deadline, job.budget).with_procs(job.procs.max(1))
}

/// A record for a job before anything happened to it.
pub(crate) fn blank_record(job: &SimJob) -> JobRecord {
    JobRecord {
        id: job.id,
        verdict: Verdict::Rejected(RejectReason::Resources),
        nodes: Vec::new(),
        outcome: Outcome {
            job: job.id,
            submit: job.submit,
            deadline_abs: job.submit + job.deadline,
            budget: job.budget,
            runtime: job.runtime,
            procs: job.procs.max(1),
            accepted: false,
            start: None,
            finish: None,
            cost: Money::ZERO,
        },
    }
}

#[cfg(test)]
mod tests;
