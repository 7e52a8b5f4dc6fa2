//! The Libra policy (Sherwani et al.): the budget is checked against `alpha*E + beta*E/D`; each
//! node accepts if the shares it owes its jobs plus the new job's `E/D` fit its capacity; the job
//! goes to the least loaded accepting node(s) (the paper's rule; another placement may be
//! chosen, `placement`).

use super::placement::{choose, Candidate, Placement};
use super::suggest::earliest_deadline;
use super::{new_job_share, nodes_with_resources, Decision, Policy, RejectReason, Suggestion};
use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::policy::LibraPlus;
use crate::pricing::{cost_at, libra_rate, PricingParams};

#[derive(Debug, Clone)]
pub struct Libra {
    pub pricing: PricingParams,
    pub placement: Placement,
}

impl Libra {
    /// Libra as published: least loaded.
    pub fn new(pricing: PricingParams) -> Self {
        Self::with_placement(pricing, Placement::LeastLoaded)
    }

    pub fn with_placement(pricing: PricingParams, placement: Placement) -> Self {
        Libra { pricing, placement }
    }

    /// `alpha*E + beta*E/D`, as `E` times the rate per CPU-second `alpha + beta/D`: the same
    /// on every node.
    fn cost(&self, estimate: f64, deadline: f64) -> Option<Money> {
        cost_at(estimate, libra_rate(&self.pricing, deadline))
    }

    fn suggestion(&self, spec: &JobSpec, cluster: &Cluster, res: &[usize], now: f64) -> Option<Suggestion> {
        let d = earliest_deadline(
            cluster,
            res,
            spec.procs() as usize,
            spec.estimate(),
            spec.cpus_per_task(),
            spec.deadline(),
            now,
        )?;
        Some(Suggestion { deadline: d, budget: self.cost(spec.estimate(), d)? })
    }

    /// The nodes that can still meet all their deadlines with the job (the share test).
    fn accepting(&self, spec: &JobSpec, res: &[NodeIdx], cluster: &Cluster, now: f64) -> Vec<Candidate> {
        let (e, d) = (spec.estimate(), spec.deadline());
        let share = new_job_share(e, d);
        let cost = self.cost(e, d);
        res.iter()
            .filter_map(|&j| {
                let node = &cluster.node(j).spec;
                if share > node.job_cap(spec.cpus_per_task()) + SHARE_EPS {
                    return None;
                }
                let load = cluster.node_load(j, now) + share;
                if load > node.cpus + SHARE_EPS {
                    return None;
                }
                // Only best fit reads RESFree; the paper's Libra never computes it.
                let res_free = match self.placement {
                    Placement::BestFit => LibraPlus::res_free(cluster, j, e, d, now).1,
                    _ => 0.0,
                };
                Some(Candidate { node: j, res_free, load, rate: libra_rate(&self.pricing, d), cost })
            })
            .collect()
    }
}

impl Policy for Libra {
    fn name(&self) -> &'static str {
        "libra"
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, true)
    }

    fn decide_only(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, false)
    }

    fn price(
        &self,
        spec: &JobSpec,
        _user: Option<u64>,
        _cluster: &Cluster,
        _node: NodeIdx,
        _now: f64,
    ) -> Option<f64> {
        Some(libra_rate(&self.pricing, spec.deadline())).filter(|r| r.is_finite())
    }

    fn least_budget(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Option<Money> {
        let procs = spec.procs() as usize;
        let res = nodes_with_resources(spec, cluster);
        if procs == 0 || self.accepting(spec, &res, cluster, now).len() < procs {
            return None;
        }
        self.cost(spec.estimate(), spec.deadline())
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement)
    }
}

impl Libra {
    /// The decision, with a suggestion for a rejected job if `suggest`.
    fn admit(&self, spec: &JobSpec, cluster: &Cluster, now: f64, suggest: bool) -> Decision {
        let procs = spec.procs() as usize;
        let res = nodes_with_resources(spec, cluster);
        if procs == 0 || res.len() < procs {
            return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
        }
        // The server first checks the budget against the minimum cost formula.
        if self.cost(spec.estimate(), spec.deadline()).is_none_or(|c| c > spec.budget()) {
            return Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res, now)).flatten(),
            };
        }
        // Then every node is asked whether it can still meet all its deadlines with the job, and
        // the job goes to the first PROC of them in the placement's order.
        let accepting = self.accepting(spec, &res, cluster, now);
        match choose(&accepting, procs, spec.budget(), self.placement, Placement::LeastLoaded) {
            Some((nodes, cost)) => {
                Decision::Accept { nodes, share: new_job_share(spec.estimate(), spec.deadline()), cost }
            }
            None => Decision::Reject {
                reason: RejectReason::Deadline,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res, now)).flatten(),
            },
        }
    }
}
