//! `libra-edf`: exact admission for preemptive earliest-deadline-first on each node, in place of
//! Libra's sum-of-shares test, with Algorithm 1's best fit and any of the three pricing
//! functions. It goes past the seeds along the line the Libra paper names as future work (urgent
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

use super::suggest::earliest_deadline;
use super::{nodes_with_resources, Decision, Policy, RejectReason, Suggestion};
use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::policy::libraplus::LibraPlus;
use crate::pricing::{flat_cost, libra_cost, libraplus_rate, putil, PricingKind, PricingParams};
use crate::share::{edf_shares, EdfJob};

/// A job as the node's EDF test sees it.
#[derive(Debug, Clone, Copy)]
enum Demand {
    /// A constant share from now until `until` (parallel or overrun jobs).
    Constant { share: f64, until: f64 },
    /// Sequential work due by a deadline.
    Work { remaining: f64, deadline: f64 },
}

fn node_demands(cluster: &Cluster, j: NodeIdx, now: f64) -> Vec<Demand> {
    let cap = cluster.node(j).spec.per_job_cap();
    cluster
        .node_entries(j)
        .iter()
        .map(|e| {
            let rem = e.remaining_estimate(now);
            if rem <= 0.0 || e.deadline_abs <= now {
                Demand::Constant { share: e.required_share(now, cap), until: f64::INFINITY }
            } else if e.procs > 1 {
                Demand::Constant { share: e.required_share(now, cap), until: e.deadline_abs }
            } else {
                Demand::Work { remaining: rem, deadline: e.deadline_abs }
            }
        })
        .collect()
}

/// The EDF test on one node with `extra` added.
fn edf_feasible(mut demands: Vec<Demand>, capacity: f64, cap: f64, now: f64) -> bool {
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
    let mut work: Vec<(f64, f64)> = demands
        .into_iter()
        .filter_map(|d| {
            if let Demand::Work { remaining, deadline } = d {
                Some((deadline, remaining))
            } else {
                None
            }
        })
        .collect();
    work.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut due = 0.0;
    for &(deadline, remaining) in &work {
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

/// Job control for an EDF node (`share::edf_shares` over the node's jobs). Returns
/// `(job, share)` for every job on the node.
pub fn edf_node_shares(cluster: &Cluster, j: NodeIdx, now: f64) -> Vec<(u64, f64)> {
    let node = cluster.node(j);
    let cap = node.spec.per_job_cap();
    let jobs: Vec<EdfJob> = cluster
        .node_entries(j)
        .iter()
        .map(|e| EdfJob {
            job: e.job,
            remaining: e.remaining_estimate(now),
            deadline_abs: e.deadline_abs,
            parallel: e.procs > 1,
            required: e.required_share(now, cap),
        })
        .collect();
    edf_shares(&jobs, now, node.spec.cpus, cap)
}

#[derive(Debug, Clone)]
pub struct LibraEdf {
    pub pricing: PricingParams,
    pub kind: PricingKind,
}

/// A node that passed the EDF test, with its best-fit key and the job's cost there.
struct Candidate {
    node: NodeIdx,
    res_free: f64,
    cost: Option<Money>,
}

impl LibraEdf {
    pub fn new(pricing: PricingParams, kind: PricingKind) -> Self {
        LibraEdf { pricing, kind }
    }

    fn node_accepts(
        cluster: &Cluster,
        j: NodeIdx,
        estimate: f64,
        deadline: f64,
        parallel: bool,
        now: f64,
    ) -> bool {
        let spec = &cluster.node(j).spec;
        let mut d = node_demands(cluster, j, now);
        if estimate > 0.0 {
            d.push(if parallel {
                Demand::Constant { share: estimate / deadline.max(f64::MIN_POSITIVE), until: now + deadline }
            } else {
                Demand::Work { remaining: estimate, deadline: now + deadline }
            });
        }
        edf_feasible(d, spec.cpus, spec.per_job_cap(), now)
    }

    fn cost_on(
        &self,
        cluster: &Cluster,
        j: NodeIdx,
        charge: f64,
        deadline: f64,
        res_max: f64,
        res_free: f64,
    ) -> Option<Money> {
        if charge <= 0.0 {
            return Some(Money::ZERO);
        }
        let pbase = cluster.node(j).spec.price_base;
        let credits = match self.kind {
            PricingKind::Flat => flat_cost(charge, pbase),
            PricingKind::Libra => libra_cost(&self.pricing, charge, deadline),
            PricingKind::LibraPlus => {
                charge * libraplus_rate(&self.pricing, pbase, putil(res_max, res_free, pbase))
            }
        };
        Money::from_credits_f64_ceil(credits)
    }

    #[allow(clippy::too_many_arguments)]
    fn candidates(
        &self,
        reserve: f64,
        charge: f64,
        deadline: f64,
        procs: usize,
        res: &[NodeIdx],
        cluster: &Cluster,
        now: f64,
    ) -> Vec<Candidate> {
        res.iter()
            .filter(|&&j| Self::node_accepts(cluster, j, reserve, deadline, procs > 1, now))
            .map(|&j| {
                let (res_max, res_free) = LibraPlus::res_free(cluster, j, reserve, deadline, now);
                Candidate {
                    node: j,
                    res_free,
                    cost: self.cost_on(cluster, j, charge, deadline, res_max, res_free),
                }
            })
            .collect()
    }

    fn min_budget(c: &[Candidate], procs: usize) -> Option<Money> {
        let mut costs: Vec<Money> = c.iter().filter_map(|c| c.cost).collect();
        if procs == 0 || costs.len() < procs {
            return None;
        }
        costs.sort();
        Some(costs[procs - 1])
    }

    /// Algorithm 1 with the EDF test as the deadline check. `reserve` is the work admitted
    /// against (the estimate, or a padded one); `charge` is what the price is applied to.
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
        let charge = spec.estimate();
        let cands = self.candidates(reserve, charge, spec.deadline(), procs, &res, cluster, now);
        if cands.len() < procs {
            // The earliest deadline by Libra's test is a safe suggestion: EDF accepts whatever
            // the share test does.
            if !suggest {
                return Decision::Reject { reason: RejectReason::Deadline, suggestion: None };
            }
            let suggestion =
                earliest_deadline(cluster, &res, procs, reserve, spec.deadline(), now).and_then(|d| {
                    let at = self.candidates(reserve, charge, d, procs, &res, cluster, now);
                    Self::min_budget(&at, procs).map(|budget| Suggestion { deadline: d, budget })
                });
            return Decision::Reject { reason: RejectReason::Deadline, suggestion };
        }
        let mut within: Vec<(f64, NodeIdx, Money)> = cands
            .iter()
            .filter_map(|c| c.cost.filter(|m| *m <= spec.budget()).map(|m| (c.res_free, c.node, m)))
            .collect();
        if within.len() < procs {
            return Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: Self::min_budget(&cands, procs)
                    .filter(|_| suggest)
                    .map(|budget| Suggestion { deadline: spec.deadline(), budget }),
            };
        }
        let by_fit =
            |a: &(f64, NodeIdx, Money), b: &(f64, NodeIdx, Money)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if within.len() > procs {
            within.select_nth_unstable_by(procs - 1, by_fit);
            within.truncate(procs);
        }
        within.sort_by(by_fit);
        let cost = within.iter().map(|w| w.2).max().unwrap_or(Money::ZERO);
        let share = if reserve <= 0.0 { 0.0 } else { reserve / spec.deadline() };
        Decision::Accept { nodes: within.into_iter().map(|w| w.1).collect(), share, cost }
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

    fn node_shares(&self, cluster: &Cluster, node: NodeIdx, now: f64) -> Option<Vec<(u64, f64)>> {
        Some(edf_node_shares(cluster, node, now))
    }

    fn edf_job_control(&self) -> bool {
        true
    }
}
