//! Libra+$ (Yeo and Buyya), Algorithm 1: resource check, deadline check (the proportional-share
//! test), best fit by RESFree ascending, budget check with the price
//! `P_ij = alpha*PBase_j + beta*PUtil_ij`; the job's cost is the highest among its nodes.

use super::suggest::earliest_deadline;
use super::{new_job_share, nodes_with_resources, Decision, Policy, RejectReason, Suggestion};
use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{libraplus_rate, putil, PricingParams};

#[derive(Debug, Clone)]
pub struct LibraPlus {
    pub pricing: PricingParams,
}

/// A node that passed the deadline check, with its free processor time over the job's window
/// and the job's cost there.
#[derive(Debug, Clone, Copy)]
struct Priced {
    node: NodeIdx,
    res_free: f64,
    cost: Option<Money>,
}

impl LibraPlus {
    pub fn new(pricing: PricingParams) -> Self {
        LibraPlus { pricing }
    }

    /// Eq. (6): `RESFree_ij = RESMax_j - sum_k RE_k - RE_i` over the window `[now, now + D]`,
    /// where `RESMax_j` is the node's processor time in the window and `RE_k` is what job `k`
    /// still needs from the node inside the window at its required share (a job that has
    /// overrun its estimate holds its admitted share through the whole window).
    pub fn res_free(cluster: &Cluster, j: NodeIdx, estimate: f64, deadline: f64, now: f64) -> (f64, f64) {
        let (_, res_max, res_free) = Self::load_and_res_free(cluster, j, estimate, deadline, now);
        (res_max, res_free)
    }

    /// One pass over a node's jobs: its load (sum of required shares) and eq. (6).
    fn load_and_res_free(
        cluster: &Cluster,
        j: NodeIdx,
        estimate: f64,
        deadline: f64,
        now: f64,
    ) -> (f64, f64, f64) {
        let node = cluster.node(j);
        let res_max = node.spec.cpus * deadline.max(0.0);
        let cap = node.spec.per_job_cap();
        let (mut load, mut committed) = (0.0, 0.0);
        for c in cluster.node_entries(j) {
            let req = c.required_share(now, cap);
            let rem = c.remaining_estimate(now);
            load += req;
            committed +=
                if rem > 0.0 && c.deadline_abs > now { rem.min(req * deadline) } else { req * deadline };
        }
        (load, res_max, res_max - committed - estimate.max(0.0))
    }

    /// The deadline check (lines 9-16) and the price of every node that passes (unsorted).
    fn priced_nodes(
        &self,
        spec_estimate: f64,
        deadline: f64,
        res: &[NodeIdx],
        cluster: &Cluster,
        now: f64,
    ) -> Vec<Priced> {
        let share = new_job_share(spec_estimate, deadline);
        res.iter()
            .filter_map(|&j| {
                let nspec = &cluster.node(j).spec;
                if share > nspec.per_job_cap() + SHARE_EPS {
                    return None;
                }
                let (load, res_max, res_free) =
                    Self::load_and_res_free(cluster, j, spec_estimate, deadline, now);
                if load + share > nspec.cpus + SHARE_EPS {
                    return None;
                }
                let rate = libraplus_rate(
                    &self.pricing,
                    nspec.price_base,
                    putil(res_max, res_free, nspec.price_base),
                );
                let cost = if spec_estimate <= 0.0 {
                    Some(Money::ZERO)
                } else {
                    Money::from_credits_f64_ceil(spec_estimate * rate)
                };
                Some(Priced { node: j, res_free, cost })
            })
            .collect()
    }

    /// The least budget with which `procs` nodes of `priced` are within budget.
    fn min_budget(priced: &[Priced], procs: usize) -> Option<Money> {
        let mut costs: Vec<Money> = priced.iter().filter_map(|p| p.cost).collect();
        if costs.len() < procs || procs == 0 {
            return None;
        }
        costs.sort();
        Some(costs[procs - 1])
    }

    fn suggestion(&self, spec: &JobSpec, cluster: &Cluster, res: &[NodeIdx], now: f64) -> Option<Suggestion> {
        let procs = spec.procs() as usize;
        let first = earliest_deadline(cluster, res, procs, spec.estimate(), spec.deadline(), now)?;
        // At the earliest deadline the job may fill a node exactly: no free resource is left,
        // PUtil is unbounded and no budget buys it. A little later leaves some free, and a price.
        let mut d = first;
        for step in 0..12 {
            let priced = self.priced_nodes(spec.estimate(), d, res, cluster, now);
            if let Some(budget) = Self::min_budget(&priced, procs) {
                return Some(Suggestion { deadline: d, budget });
            }
            d = (first * (1.0 + 0.01 * f64::from(1u32 << step))).ceil().max(d + 1.0);
        }
        None
    }
}

impl Policy for LibraPlus {
    fn name(&self) -> &'static str {
        "libra+$"
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, true)
    }

    fn decide_only(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, false)
    }
}

impl LibraPlus {
    /// Algorithm 1, with a suggestion for a rejected job if `suggest`.
    fn admit(&self, spec: &JobSpec, cluster: &Cluster, now: f64, suggest: bool) -> Decision {
        let procs = spec.procs() as usize;
        // Lines 1-8: enough nodes with the resources.
        let res = nodes_with_resources(spec, cluster);
        if procs == 0 || res.len() < procs {
            return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
        }
        // Lines 9-17: nodes that can finish the job by its deadline, best fit first.
        let priced = self.priced_nodes(spec.estimate(), spec.deadline(), &res, cluster, now);
        if priced.len() < procs {
            return Decision::Reject {
                reason: RejectReason::Deadline,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res, now)).flatten(),
            };
        }
        // Lines 17-29: sorted by RESFree ascending (best fit), the first PROC nodes within
        // budget; the cost is the highest among them. Taking the PROC smallest RESFree among the
        // nodes within budget is the same set, found by selection instead of a full sort.
        let mut within: Vec<(f64, NodeIdx, Money)> = priced
            .iter()
            .filter_map(|p| p.cost.filter(|c| *c <= spec.budget()).map(|c| (p.res_free, p.node, c)))
            .collect();
        if within.len() < procs {
            // Lines 30-31. The deadline is fine: suggest the budget that would do at it.
            return Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: Self::min_budget(&priced, procs)
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
        let nodes = within.into_iter().map(|w| w.1).collect();
        Decision::Accept { nodes, share: new_job_share(spec.estimate(), spec.deadline()), cost }
    }
}
