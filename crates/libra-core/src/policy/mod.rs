//! Admission and allocation policies behind one trait. A policy is a pure value: it reads the
//! cluster and returns a decision; the caller (simulator or server) applies it.
//!
//! Time-shared policies (Libra, Libra+$) decide at submission and start the job at once with a
//! share on each of its nodes. Space-shared policies (FIFO, the EASY backfilling family) answer
//! `Queue` at submission and pick jobs to start, or drop, in `dispatch`.

mod backfill;
mod edf;
mod libra;
mod libraplus;
mod risk;
mod suggest;

pub use backfill::{Backfill, BackfillOrder, Fifo};
pub use edf::{edf_node_shares, LibraEdf};
pub use libra::Libra;
pub use libraplus::LibraPlus;
pub use risk::LibraRisk;

use crate::cluster::{Cluster, NodeIdx};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{PricingKind, PricingParams};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a job was turned away (Algorithm 1's three messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectReason {
    /// Not enough nodes with the processors, memory or disk asked for.
    Resources,
    /// No set of nodes can finish the job by its deadline.
    Deadline,
    /// Nodes could finish it in time, but not within the budget.
    Budget,
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Resources => "resources",
            RejectReason::Deadline => "deadline",
            RejectReason::Budget => "budget",
        })
    }
}

/// SRS 3.1.5.4: what the user could ask for instead, that would be accepted right now: the
/// earliest deadline (never earlier than the one asked for) and the budget needed at it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    /// Seconds after submission.
    pub deadline: f64,
    /// `budget_cents` in JSON; `budget` is still read, because suggestions stored before the
    /// rename (the server's `jobs.suggestion` column) and older clients use it.
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Decision {
    /// Run now on `nodes`, each giving the job at least `share` of a CPU; charge `cost` if the
    /// deadline is met (`cost <= budget` always).
    Accept {
        nodes: Vec<NodeIdx>,
        share: f64,
        #[serde(rename = "cost_cents", alias = "cost")]
        cost: Money,
    },
    Reject {
        reason: RejectReason,
        suggestion: Option<Suggestion>,
    },
    /// Space-shared policies: the job waits in the queue; no promise is made yet.
    Queue,
}

impl Decision {
    pub fn is_accept(&self) -> bool {
        matches!(self, Decision::Accept { .. })
    }
}

/// A waiting job, as a space-shared policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub job: u64,
    pub submit: f64,
    pub estimate: f64,
    pub procs: u32,
    pub deadline_abs: f64,
}

/// What a space-shared policy does with the queue at one scheduling pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatch {
    /// Start the job now on these nodes; it pays `cost` if it meets its deadline.
    Start { job: u64, nodes: Vec<NodeIdx>, cost: Money },
    /// Drop the job: it can no longer meet its deadline (counts as rejected).
    Drop { job: u64 },
}

pub trait Policy: Send + Sync {
    /// The policy's name as used on the command line.
    fn name(&self) -> &'static str;

    /// Admission at submission time. Pure: calling it without acting on the answer is a quote.
    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision;

    /// Space-shared policies: one scheduling pass over the waiting queue.
    fn dispatch(&self, _queue: &[Queued], _cluster: &Cluster, _now: f64) -> Vec<Dispatch> {
        Vec::new()
    }

    /// Whether a node runs one job at a time (true) or time-shares by proportional shares.
    fn space_shared(&self) -> bool {
        false
    }

    /// Admission for a known user (policies that learn per user use it); defaults to `decide`.
    fn decide_as(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.decide(spec, cluster, now)
    }

    /// `decide_as` without the suggestion a rejected job would be given. The simulator shows no
    /// suggestions, and finding one takes more passes over the nodes than the decision itself.
    /// The decision (accept, nodes, cost, or the reject reason) is the same as `decide_as`'s.
    fn decide_only(&self, spec: &JobSpec, user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.decide_as(spec, user, cluster, now)
    }

    /// The work an accepted job is committed with on its nodes: the estimate, or more for a
    /// policy that pads estimates.
    fn reserved_estimate(&self, spec: &JobSpec, _user: Option<u64>) -> f64 {
        spec.estimate()
    }

    /// Feedback when a job completes: its estimate and its actual runtime.
    fn observe(&self, _user: Option<u64>, _estimate: f64, _runtime: f64) {}

    /// Job control on one node: the share each of its jobs should hold from now on. `None`
    /// means Algorithm 2 (each job's required share).
    fn node_shares(&self, _cluster: &Cluster, _node: NodeIdx, _now: f64) -> Option<Vec<(u64, f64)>> {
        None
    }

    /// Whether node agents run EDF job control (`share::edf_shares`) rather than Algorithm 2.
    /// True exactly for the policies whose `node_shares` is EDF's, so that the running cluster
    /// controls its nodes as the simulator does.
    fn edf_job_control(&self) -> bool {
        false
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy: '{0}' is not a policy; accepted: {list}, {more}", list = POLICY_NAMES.join(", "), more = BEYOND_POLICY_NAMES.join(", "))]
    Unknown(String),
    #[error("pricing: {field} = {value} is not accepted: {accepted}")]
    Pricing { field: &'static str, value: f64, accepted: &'static str },
}

/// Every policy name `build_policy` accepts.
pub const POLICY_NAMES: &[&str] = &["libra", "libra+$", "fifo", "fcfs-bf", "sjf-bf", "edf-bf"];

/// The policies that go past the seeds (issue 6): EDF admission with each pricing function, and
/// the risk-aware variant.
pub const BEYOND_POLICY_NAMES: &[&str] = &["libra-edf", "libra-edf-libra", "libra-edf-flat", "libra-risk"];

/// Checks pricing coefficients: finite and non-negative.
pub fn validate_pricing(p: &PricingParams) -> Result<(), PolicyError> {
    for (field, value) in
        [("alpha", p.alpha), ("beta", p.beta), ("libra_gamma", p.libra_gamma), ("libra_delta", p.libra_delta)]
    {
        if !(0.0..=1e9).contains(&value) {
            return Err(PolicyError::Pricing { field, value, accepted: "a number from 0 to 1e9" });
        }
    }
    Ok(())
}

/// Builds a policy by name. `libraplus` and `libra-plus` are accepted for `libra+$` (a `$` is
/// awkward in shells).
pub fn build_policy(name: &str, pricing: PricingParams) -> Result<Box<dyn Policy>, PolicyError> {
    validate_pricing(&pricing)?;
    Ok(match name.to_ascii_lowercase().as_str() {
        "libra" => Box::new(Libra::new(pricing)),
        "libra+$" | "libraplus" | "libra-plus" | "libra+" => Box::new(LibraPlus::new(pricing)),
        "fifo" => Box::new(Fifo),
        "fcfs-bf" => Box::new(Backfill::new(BackfillOrder::Fcfs)),
        "sjf-bf" => Box::new(Backfill::new(BackfillOrder::Sjf)),
        "edf-bf" => Box::new(Backfill::new(BackfillOrder::Edf)),
        "libra-edf" => Box::new(LibraEdf::new(pricing, PricingKind::LibraPlus)),
        "libra-edf-libra" => Box::new(LibraEdf::new(pricing, PricingKind::Libra)),
        "libra-edf-flat" => Box::new(LibraEdf::new(pricing, PricingKind::Flat)),
        "libra-risk" => Box::new(LibraRisk::new(pricing)),
        _ => return Err(PolicyError::Unknown(name.to_string())),
    })
}

/// The procs-many nodes that pass the resource check (up, enough memory and disk).
pub(crate) fn nodes_with_resources(spec: &JobSpec, cluster: &Cluster) -> Vec<NodeIdx> {
    cluster
        .nodes()
        .filter(|(_, n)| n.has_resources(spec.resources.mem_mb, spec.resources.disk_mb))
        .map(|(i, _)| i)
        .collect()
}

/// The share a new job needs on a node: `E / D`, with a zero-length job needing nothing.
pub(crate) fn new_job_share(estimate: f64, deadline: f64) -> f64 {
    if estimate <= 0.0 {
        0.0
    } else if deadline > 0.0 {
        estimate / deadline
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests;
