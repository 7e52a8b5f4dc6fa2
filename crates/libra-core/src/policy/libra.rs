//! The Libra policy (Sherwani et al.): the budget is checked against `alpha*E + beta*E/D`; each
//! node accepts if the shares it owes its jobs plus the new job's `E/D` fit its capacity; the job
//! goes to the least loaded accepting node(s).

use super::suggest::earliest_deadline;
use super::{new_job_share, nodes_with_resources, Decision, Policy, RejectReason, Suggestion};
use crate::cluster::{Cluster, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{libra_cost, PricingParams};

#[derive(Debug, Clone)]
pub struct Libra {
    pub pricing: PricingParams,
}

impl Libra {
    pub fn new(pricing: PricingParams) -> Self {
        Libra { pricing }
    }

    fn cost(&self, estimate: f64, deadline: f64) -> Option<Money> {
        Money::from_credits_f64_ceil(libra_cost(&self.pricing, estimate, deadline))
    }

    fn suggestion(&self, spec: &JobSpec, cluster: &Cluster, res: &[usize], now: f64) -> Option<Suggestion> {
        let d =
            earliest_deadline(cluster, res, spec.procs() as usize, spec.estimate(), spec.deadline(), now)?;
        Some(Suggestion { deadline: d, budget: self.cost(spec.estimate(), d)? })
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
}

impl Libra {
    /// The decision, with a suggestion for a rejected job if `suggest`.
    fn admit(&self, spec: &JobSpec, cluster: &Cluster, now: f64, suggest: bool) -> Decision {
        let procs = spec.procs() as usize;
        let res = nodes_with_resources(spec, cluster);
        if procs == 0 || res.len() < procs {
            return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
        }
        let (e, d) = (spec.estimate(), spec.deadline());
        // The server first checks the budget against the minimum cost formula.
        let cost = match self.cost(e, d) {
            Some(c) if c <= spec.budget() => c,
            _ => {
                return Decision::Reject {
                    reason: RejectReason::Budget,
                    suggestion: suggest.then(|| self.suggestion(spec, cluster, &res, now)).flatten(),
                }
            }
        };
        // Then every node is asked whether it can still meet all its deadlines with the job.
        let share = new_job_share(e, d);
        let mut accepting: Vec<(f64, usize)> = res
            .iter()
            .filter_map(|&j| {
                let spec = &cluster.node(j).spec;
                if share > spec.per_job_cap() + SHARE_EPS {
                    return None;
                }
                let load = cluster.node_load(j, now) + share;
                (load <= spec.cpus + SHARE_EPS).then_some((load, j))
            })
            .collect();
        if accepting.len() < procs {
            return Decision::Reject {
                reason: RejectReason::Deadline,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res, now)).flatten(),
            };
        }
        // Least loaded first; ties to the lower node index, so runs are reproducible.
        accepting.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let nodes = accepting.into_iter().take(procs).map(|(_, j)| j).collect();
        Decision::Accept { nodes, share, cost }
    }
}
