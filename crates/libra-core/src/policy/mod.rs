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
pub mod placement;
mod risk;
mod stripes;
pub mod suggest;

pub use backfill::{Backfill, BackfillOrder, Fifo};
pub use edf::LibraEdf;
pub use libra::Libra;
pub use libraplus::LibraPlus;
pub use placement::{Placement, PlacementError};
pub use risk::LibraRisk;

use crate::cluster::{Cluster, NodeIdx};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{PricingKind, PricingParams};
use crate::share::JobControl;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a job was turned away (Algorithm 1's three messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

    /// The price per CPU-second this policy would charge `spec` on `node` now: what a quote
    /// shows. A job accepted on a set of nodes costs `pricing::cost_at(spec.estimate(), p)` for
    /// the highest `p` among them (Algorithm 1: `RE_i * P_ij`, the highest over its nodes); a
    /// space-shared policy charges it at dispatch. `None`: no price, as on a node that is full
    /// over the job's window under Libra+$ (PUtil unbounded).
    fn price(
        &self,
        spec: &JobSpec,
        user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64>;

    /// The least budget with which `spec`, at its own deadline, would be accepted now; `None`
    /// when no budget would do (the deadline cannot be met, or no node prices the job). What
    /// suggestions are built from (`suggest::resubmission`). The default is for policies that
    /// never turn a job away for its deadline or budget at submission (the space-shared ones).
    fn least_budget(
        &self,
        _spec: &JobSpec,
        _user: Option<u64>,
        _cluster: &Cluster,
        _now: f64,
    ) -> Option<Money> {
        None
    }

    /// How the policy chooses among the nodes that accept a job; `None` for the space-shared
    /// policies, which give each job whole idle nodes in turn.
    fn placement(&self) -> Option<Placement> {
        None
    }

    /// The job control the nodes must run for the policy's promises to hold: the simulator runs
    /// it (`share::node_shares`) and the server tells the node agents to.
    fn job_control(&self) -> JobControl {
        JobControl::Libra
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy: '{0}' is not a policy; accepted: {list}, {more}", list = POLICY_NAMES.join(", "), more = BEYOND_POLICY_NAMES.join(", "))]
    Unknown(String),
    #[error("pricing: {field} = {} is not accepted: {accepted}", crate::Shown(*.value))]
    Pricing { field: &'static str, value: f64, accepted: &'static str },
    #[error("placement: {policy} gives each job whole idle nodes in queue order and has no node choice; give a placement (best-fit, least-loaded, cheapest) only with a time-shared policy ({list}, {more})", list = TIME_SHARED_POLICY_NAMES.join(", "), more = BEYOND_POLICY_NAMES.join(", "))]
    NoNodeChoice { policy: &'static str },
}

/// Every policy name `build_policy` accepts.
pub const POLICY_NAMES: &[&str] = &["libra", "libra+$", "fifo", "fcfs-bf", "sjf-bf", "edf-bf"];

/// The seeds' policies that choose nodes (and so take a placement).
const TIME_SHARED_POLICY_NAMES: &[&str] = &["libra", "libra+$"];

/// The policies that go past the seeds (issue 6): EDF admission with each pricing function, and
/// the risk-aware variant charging the padded work (`libra-risk`) or the estimate
/// (`libra-risk-est`, issue 6's first version).
pub const BEYOND_POLICY_NAMES: &[&str] =
    &["libra-edf", "libra-edf-libra", "libra-edf-flat", "libra-risk", "libra-risk-est"];

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

/// Builds a policy by name, with its own default placement. `libraplus` and `libra-plus` are
/// accepted for `libra+$` (a `$` is awkward in shells).
pub fn build_policy(name: &str, pricing: PricingParams) -> Result<Box<dyn Policy>, PolicyError> {
    build_policy_with(name, pricing, None)
}

/// `build_policy` with a placement (`None`: the policy's default: best fit for `libra+$` and
/// the EDF policies, least loaded for `libra`). A placement given to a space-shared policy is
/// refused: it has no node choice to make.
pub fn build_policy_with(
    name: &str,
    pricing: PricingParams,
    placement: Option<Placement>,
) -> Result<Box<dyn Policy>, PolicyError> {
    validate_pricing(&pricing)?;
    let time_shared = |default: Placement| placement.unwrap_or(default);
    let edf = |kind| -> Box<dyn Policy> {
        Box::new(LibraEdf::with_placement(pricing, kind, time_shared(Placement::BestFit)))
    };
    let p: Box<dyn Policy> = match name.to_ascii_lowercase().as_str() {
        "libra" => Box::new(Libra::with_placement(pricing, time_shared(Placement::LeastLoaded))),
        "libra+$" | "libraplus" | "libra-plus" | "libra+" => {
            Box::new(LibraPlus::with_placement(pricing, time_shared(Placement::BestFit)))
        }
        "fifo" => Box::new(Fifo),
        "fcfs-bf" => Box::new(Backfill::new(BackfillOrder::Fcfs)),
        "sjf-bf" => Box::new(Backfill::new(BackfillOrder::Sjf)),
        "edf-bf" => Box::new(Backfill::new(BackfillOrder::Edf)),
        "libra-edf" => edf(PricingKind::LibraPlus),
        "libra-edf-libra" => edf(PricingKind::Libra),
        "libra-edf-flat" => edf(PricingKind::Flat),
        "libra-risk" => Box::new(LibraRisk::charging(pricing, time_shared(Placement::BestFit), true)),
        "libra-risk-est" => Box::new(LibraRisk::charging(pricing, time_shared(Placement::BestFit), false)),
        _ => return Err(PolicyError::Unknown(name.to_string())),
    };
    if placement.is_some() && p.placement().is_none() {
        return Err(PolicyError::NoNodeChoice { policy: p.name() });
    }
    Ok(p)
}

/// The procs-many nodes that pass the resource check (up, enough memory and disk).
pub(crate) fn nodes_with_resources(spec: &JobSpec, cluster: &Cluster) -> Vec<NodeIdx> {
    cluster
        .nodes()
        .filter(|(_, n)| n.has_resources(spec.resources.mem_mb, spec.resources.disk_mb))
        .map(|(i, _)| i)
        .collect()
}

/// How many nodes ahead a pass over every node asks for the entries it will read
/// (`Cluster::prefetch_entries`): far enough to hide a memory access behind the work on the
/// nodes between, near enough that the lines are still cached when reached.
pub(crate) const PREFETCH_AHEAD: usize = 8;

/// The nodes a pass will read next, oldest first: each node's struct is asked for when it
/// joins, its entries `PREFETCH_AHEAD` later (once its struct is near), and it is read
/// `2 * PREFETCH_AHEAD` after it joined.
#[derive(Default)]
pub(crate) struct Ahead {
    ring: [NodeIdx; 2 * PREFETCH_AHEAD],
    /// Nodes joined and nodes left.
    pushed: usize,
    popped: usize,
}

impl Ahead {
    /// Adds `j`; returns the oldest node once `2 * PREFETCH_AHEAD` are waiting.
    pub(crate) fn push(&mut self, j: NodeIdx, cluster: &Cluster) -> Option<NodeIdx> {
        const N: usize = 2 * PREFETCH_AHEAD;
        cluster.prefetch_node(j);
        if self.pushed >= self.popped + PREFETCH_AHEAD {
            cluster.prefetch_entries(self.ring[(self.pushed - PREFETCH_AHEAD) % N]);
        }
        let out = (self.pushed == self.popped + N).then(|| self.pop()).flatten();
        self.ring[self.pushed % N] = j;
        self.pushed += 1;
        out
    }

    pub(crate) fn pop(&mut self) -> Option<NodeIdx> {
        (self.popped < self.pushed).then(|| {
            let j = self.ring[self.popped % (2 * PREFETCH_AHEAD)];
            self.popped += 1;
            j
        })
    }
}

/// The widest vector code this processor runs, of those the screens of a pass over the nodes
/// (`libra`'s and `libra+$`'s) are compiled for beside the portable code (detected by the
/// standard library once, then cached). Each is the same operations on each node in the same
/// order (Rust never fuses a multiply and an add unless told, and every conversion rounds to
/// nearest), so every one gives the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    Portable,
    /// Four nodes per vector.
    Avx2,
    /// Eight nodes per vector, and each node's load line converted from its fixed-point
    /// integers in one instruction for four or eight nodes (AVX2 has none, so it converts one
    /// value at a time): with the nodes' fields in arrays of their own (`HotNodes`) the screen
    /// runs in about a quarter of AVX2's time. Only from a compiler on which AVX-512 is stable
    /// (Rust 1.89); on an older one this level is never detected.
    Avx512,
}

impl Simd {
    /// Every level this processor runs, the portable code included, for tests that compare
    /// them.
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Simd> {
        let mut all = vec![Simd::Portable];
        if has_avx2() {
            all.push(Simd::Avx2);
        }
        if has_avx512() {
            all.push(Simd::Avx512);
        }
        all
    }

    pub(crate) fn detect() -> Simd {
        if has_avx512() {
            Simd::Avx512
        } else if has_avx2() {
            Simd::Avx2
        } else {
            Simd::Portable
        }
    }
}

/// Whether this processor runs AVX2.
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this processor runs the AVX-512 the screens are compiled for (foundation,
/// double and quadword, and 128/256-bit vector lengths).
#[rustversion::since(1.89)]
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A compiler older than Rust 1.89 has no stable AVX-512 to compile the screens for.
#[rustversion::before(1.89)]
fn has_avx512() -> bool {
    false
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
mod props;
#[cfg(test)]
mod scale;
#[cfg(test)]
mod tests;
