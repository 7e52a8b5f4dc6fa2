//! `libra-edf`: exact admission for preemptive earliest-deadline-first on each node, in place of
//! Libra's sum-of-shares test, with Algorithm 1's best fit (or another placement) and any of the
//! three pricing functions. It goes past the seeds along the line the Libra paper names as future work (urgent
//! jobs pre-empting, with feasibility computed for that order); Libra and Libra+$ stay available
//! under their own names.
//!
//! A parallel job cannot be run in deadline order node by node (its parts must advance
//! together), so it keeps a constant proportional share on each of its nodes, as in Libra. The
//! sequential jobs of a node share what is left in deadline order. A job that has overrun its
//! estimate holds its admitted share with no end, like a parallel job.
//!
//! The test is exact for a uniprocessor node: for every deadline `d` of a sequential job, the
//! sequential work due by `d` fits in the capacity left by the constant shares until `d`.
//! Libra's test implies it, so `libra-edf` accepts every job Libra would on the same nodes.

use super::placement::{choose, least_budget, Candidate, Placement};
use super::suggest::earliest_deadline;
use super::{nodes_with_resources, Decision, Policy, RejectReason, Suggestion};
use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::policy::libraplus::LibraPlus;
use crate::pricing::{cost_at, libra_rate, libraplus_rate, putil, PricingKind, PricingParams};
use crate::share::JobControl;

/// A job as the node's EDF test sees it.
#[derive(Debug, Clone, Copy)]
enum Demand {
    /// A constant share from now until `until` (parallel or overrun jobs).
    Constant { share: f64, until: f64 },
    /// Sequential work due by a deadline, at most `cap` CPUs of it at a time.
    Work { remaining: f64, deadline: f64, cap: f64 },
}

fn node_demands(cluster: &Cluster, j: NodeIdx, now: f64) -> Vec<Demand> {
    cluster
        .node_entries(j)
        .map(|e| {
            let rem = e.remaining_estimate(now);
            if rem <= 0.0 || e.deadline_abs <= now {
                Demand::Constant { share: e.share(now), until: f64::INFINITY }
            } else if e.procs > 1 {
                Demand::Constant { share: e.share(now), until: e.deadline_abs }
            } else {
                Demand::Work { remaining: rem, deadline: e.deadline_abs, cap: e.cap }
            }
        })
        .collect()
}

/// The EDF test on one node with `extra` added.
fn edf_feasible(mut demands: Vec<Demand>, capacity: f64, now: f64) -> bool {
    let constant_now: f64 =
        demands.iter().map(|d| if let Demand::Constant { share, .. } = d { *share } else { 0.0 }).sum();
    if constant_now > capacity + SHARE_EPS {
        return false;
    }
    let constants: Vec<(f64, f64)> = demands
        .iter()
        .filter_map(|d| if let Demand::Constant { share, until } = d { Some((*share, *until)) } else { None })
        .collect();
    demands.retain(|d| matches!(d, Demand::Work { .. }));
    let mut work: Vec<(f64, f64, f64)> = demands
        .into_iter()
        .filter_map(|d| {
            if let Demand::Work { remaining, deadline, cap } = d {
                Some((deadline, remaining, cap))
            } else {
                None
            }
        })
        .collect();
    work.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut due = 0.0;
    for &(deadline, remaining, cap) in &work {
        let span = deadline - now;
        if remaining > cap * span + SHARE_EPS * span.max(1.0) {
            return false;
        }
        due += remaining;
        let reserved: f64 =
            constants.iter().map(|&(s, until)| s * (until.min(deadline) - now).max(0.0)).sum();
        if due > capacity * span - reserved + SHARE_EPS * span.max(1.0) {
            return false;
        }
    }
    true
}

#[derive(Debug, Clone)]
pub struct LibraEdf {
    pub pricing: PricingParams,
    pub kind: PricingKind,
    pub placement: Placement,
    /// Charge the work reserved rather than the user's estimate: the price per CPU-second of
    /// the estimate is scaled by `reserve / estimate`, so a padded job pays for the capacity it
    /// holds (`libra-risk`). Off for `libra-edf` (whose reserve is the estimate) and for
    /// `libra-risk-est`, which prices the estimate alone.
    pub charge_reserved: bool,
}

impl LibraEdf {
    /// Best fit, as Algorithm 1.
    pub fn new(pricing: PricingParams, kind: PricingKind) -> Self {
        Self::with_placement(pricing, kind, Placement::BestFit)
    }

    pub fn with_placement(pricing: PricingParams, kind: PricingKind, placement: Placement) -> Self {
        LibraEdf { pricing, kind, placement, charge_reserved: false }
    }

    /// The factor the price of the user's estimate is multiplied by for `reserve` CPU-seconds
    /// committed: 1, or `reserve / estimate` when the reservation is charged.
    fn charge_factor(&self, spec: &JobSpec, reserve: f64) -> f64 {
        if self.charge_reserved && spec.estimate() > 0.0 && reserve > spec.estimate() {
            reserve / spec.estimate()
        } else {
            1.0
        }
    }

    /// The EDF test on node `j` with a job of `estimate` CPU-seconds due in `deadline`, at most
    /// `cap` CPUs of it at a time.
    fn node_accepts(
        cluster: &Cluster,
        j: NodeIdx,
        (estimate, deadline, cap): (f64, f64, f64),
        parallel: bool,
        now: f64,
    ) -> bool {
        let spec = &cluster.node(j).spec;
        let mut d = node_demands(cluster, j, now);
        if estimate > 0.0 {
            d.push(if parallel {
                Demand::Constant { share: estimate / deadline.max(f64::MIN_POSITIVE), until: now + deadline }
            } else {
                Demand::Work { remaining: estimate, deadline: now + deadline, cap }
            });
        }
        edf_feasible(d, spec.cpus, now)
    }

    /// The price per CPU-second on node `j` for a job due in `deadline`, whose reserved work
    /// leaves `res_free` of the node's `res_max` over the window.
    fn rate_on(&self, cluster: &Cluster, j: NodeIdx, deadline: f64, res_max: f64, res_free: f64) -> f64 {
        let pbase = cluster.node(j).spec.price_base;
        match self.kind {
            PricingKind::Flat => pbase,
            PricingKind::Libra => libra_rate(&self.pricing, deadline),
            PricingKind::LibraPlus => libraplus_rate(&self.pricing, pbase, putil(res_max, res_free, pbase)),
        }
    }

    /// The nodes that pass the EDF test for `spec` at `deadline`, with `reserve` CPU-seconds
    /// committed, priced on the user's own estimate (scaled to the reservation when it is
    /// charged).
    fn candidates(
        &self,
        spec: &JobSpec,
        reserve: f64,
        deadline: f64,
        res: &[NodeIdx],
        cluster: &Cluster,
        now: f64,
    ) -> Vec<Candidate> {
        let parallel = spec.procs() > 1;
        let factor = self.charge_factor(spec, reserve);
        res.iter()
            .filter(|&&j| {
                let cap = cluster.node(j).spec.job_cap(spec.cpus_per_task());
                Self::node_accepts(cluster, j, (reserve, deadline, cap), parallel, now)
            })
            .map(|&j| {
                let (res_max, res_free) = LibraPlus::res_free(cluster, j, reserve, deadline, now);
                let rate = self.rate_on(cluster, j, deadline, res_max, res_free) * factor;
                // Only least loaded reads the load: it is one more pass over the node's jobs.
                let load = match self.placement {
                    Placement::LeastLoaded => cluster.node_load(j, now),
                    _ => 0.0,
                };
                Candidate { node: j, res_free, load, rate, cost: cost_at(spec.estimate(), rate) }
            })
            .collect()
    }

    /// The price per CPU-second of `spec` on node `j` with `reserve` CPU-seconds committed.
    pub fn price_with(
        &self,
        spec: &JobSpec,
        reserve: f64,
        cluster: &Cluster,
        j: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        let (res_max, res_free) = LibraPlus::res_free(cluster, j, reserve, spec.deadline(), now);
        let rate =
            self.rate_on(cluster, j, spec.deadline(), res_max, res_free) * self.charge_factor(spec, reserve);
        Some(rate).filter(|r| r.is_finite())
    }

    /// The least budget accepted now for `spec` with `reserve` CPU-seconds committed.
    pub fn least_budget_with(
        &self,
        spec: &JobSpec,
        reserve: f64,
        cluster: &Cluster,
        now: f64,
    ) -> Option<Money> {
        let res = nodes_with_resources(spec, cluster);
        least_budget(
            &self.candidates(spec, reserve, spec.deadline(), &res, cluster, now),
            spec.procs() as usize,
        )
    }

    /// Algorithm 1 with the EDF test as the deadline check. `reserve` is the work admitted
    /// against (the estimate, or a padded one); the price is applied to the user's estimate,
    /// scaled to the reservation if `charge_reserved`.
    pub fn decide_with(&self, spec: &JobSpec, reserve: f64, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, reserve, cluster, now, true)
    }

    /// `decide_with`, with a suggestion for a rejected job only if `suggest`.
    pub fn admit(
        &self,
        spec: &JobSpec,
        reserve: f64,
        cluster: &Cluster,
        now: f64,
        suggest: bool,
    ) -> Decision {
        let procs = spec.procs() as usize;
        let res = nodes_with_resources(spec, cluster);
        if procs == 0 || res.len() < procs {
            return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
        }
        let cands = self.candidates(spec, reserve, spec.deadline(), &res, cluster, now);
        if cands.len() < procs {
            // The earliest deadline by Libra's test is a safe suggestion: EDF accepts whatever
            // the share test does.
            if !suggest {
                return Decision::Reject { reason: RejectReason::Deadline, suggestion: None };
            }
            let suggestion =
                earliest_deadline(cluster, &res, procs, reserve, spec.cpus_per_task(), spec.deadline(), now)
                    .and_then(|d| {
                        let at = self.candidates(spec, reserve, d, &res, cluster, now);
                        least_budget(&at, procs).map(|budget| Suggestion { deadline: d, budget })
                    });
            return Decision::Reject { reason: RejectReason::Deadline, suggestion };
        }
        match choose(&cands, procs, spec.budget(), self.placement, Placement::BestFit) {
            Some((nodes, cost)) => {
                let share = if reserve <= 0.0 { 0.0 } else { reserve / spec.deadline() };
                Decision::Accept { nodes, share, cost }
            }
            None => Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: least_budget(&cands, procs)
                    .filter(|_| suggest)
                    .map(|budget| Suggestion { deadline: spec.deadline(), budget }),
            },
        }
    }
}

impl Policy for LibraEdf {
    fn name(&self) -> &'static str {
        match self.kind {
            PricingKind::LibraPlus => "libra-edf",
            PricingKind::Libra => "libra-edf-libra",
            PricingKind::Flat => "libra-edf-flat",
        }
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.decide_with(spec, spec.estimate(), cluster, now)
    }

    fn decide_only(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, spec.estimate(), cluster, now, false)
    }

    fn price(
        &self,
        spec: &JobSpec,
        _user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        self.price_with(spec, spec.estimate(), cluster, node, now)
    }

    fn least_budget(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Option<Money> {
        self.least_budget_with(spec, spec.estimate(), cluster, now)
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement)
    }

    fn job_control(&self) -> JobControl {
        JobControl::Edf
    }
}
