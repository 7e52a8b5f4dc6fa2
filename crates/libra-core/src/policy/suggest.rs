//! Suggestions for rejected jobs (SRS 3.1.5.4): what the user could ask for instead.
//!
//! `earliest_deadline` is the exact answer for this instant, which each policy's `decide` gives
//! with its rejection. `resubmission` is what a running cluster tells the user: a resubmission
//! comes a few seconds later, when running jobs have moved on and prices with them, so it adds a
//! margin, and it keeps everything else the user asked for (processors, memory, CPUs per task).

use super::Policy;
use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};
use crate::job::{JobSpec, MAX_BUDGET_CREDITS, MAX_SECONDS};
use crate::money::Money;
use crate::policy::Suggestion;

/// The smallest deadline `D >= asked` (seconds after now) such that at least `procs` of `nodes`
/// can take a job of `estimate` CPU-seconds with share `estimate / D`, within what a task of
/// `cpus_per_task` CPUs may use on each. `None` when no deadline will do (too few nodes have
/// any headroom).
pub(crate) fn earliest_deadline(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    procs: usize,
    estimate: f64,
    cpus_per_task: u32,
    asked: f64,
    now: f64,
) -> Option<f64> {
    if procs == 0 || nodes.len() < procs {
        return None;
    }
    let mut need: Vec<f64> = nodes
        .iter()
        .map(|&j| {
            let spec = &cluster.node(j).spec;
            let headroom = (spec.cpus - cluster.node_load(j, now)).min(spec.job_cap(cpus_per_task));
            if estimate <= 0.0 {
                0.0
            } else if headroom <= SHARE_EPS {
                f64::INFINITY
            } else {
                estimate / headroom
            }
        })
        .collect();
    need.sort_by(f64::total_cmp);
    let d = need[procs - 1];
    if !d.is_finite() {
        return None;
    }
    if d <= asked {
        return Some(asked);
    }
    // Whole seconds, rounded up; a float hair above a whole number is not a second more, but the
    // share test must still pass on resubmission.
    let headroom = estimate / d;
    let mut whole = (d - 1e-7).ceil();
    if estimate / whole > headroom + SHARE_EPS / 2.0 {
        whole += 1.0;
    }
    Some(whole.max(asked))
}

/// The deadline margin: 2% later, at least one second, in whole seconds.
pub fn deadline_with_margin(deadline: f64) -> f64 {
    (deadline + (deadline * 0.02).max(1.0)).ceil()
}

/// The budget margin: 5% more, rounded up to a whole credit. `None` past the largest budget a
/// specification may carry.
pub fn budget_with_margin(least: Money) -> Option<Money> {
    let cents = least.0.checked_mul(105)?.checked_add(99)? / 100;
    let credits = cents.checked_add(99)? / 100;
    (credits <= MAX_BUDGET_CREDITS).then(|| Money::from_credits(credits))
}

/// What a running cluster suggests to a user whose `spec` was turned away for its deadline or
/// its budget (`exact` is the policy's own suggestion for this instant, if it had one):
///
/// - If the deadline asked for can be met, only the budget was short: the deadline stays as
///   asked, and the budget is the least accepted at it now, plus the budget margin.
/// - Otherwise the earliest deadline accepted now (the policy's `exact` one, or the one asked
///   for), plus the deadline margin; if no budget gets the job accepted at that deadline, later
///   ones, each 20% further out. The budget is the least accepted at the deadline suggested,
///   plus the budget margin.
///
/// Every other field of the request is kept, so the suggestion is accepted for the job the user
/// asked for. The budget is a cap: the charge is still the price at admission, which is at
/// least the least budget, so the budget suggested is within the margin of the cost held. `None`
/// when neither would be accepted (not enough nodes have room).
pub fn resubmission(
    policy: &dyn Policy,
    spec: &JobSpec,
    user: Option<u64>,
    cluster: &Cluster,
    now: f64,
    exact: Option<Suggestion>,
) -> Option<Suggestion> {
    if let Some(least) = policy.least_budget(spec, user, cluster, now) {
        return Some(Suggestion { deadline: spec.deadline(), budget: budget_with_margin(least)? });
    }
    let first = exact.map_or(spec.deadline(), |s| s.deadline).max(spec.deadline());
    let mut probe = spec.clone();
    let mut deadline = deadline_with_margin(first);
    for _ in 0..40 {
        if deadline > MAX_SECONDS {
            break;
        }
        probe.qos.deadline = deadline;
        if let Some(least) = policy.least_budget(&probe, user, cluster, now) {
            return Some(Suggestion { deadline, budget: budget_with_margin(least)? });
        }
        deadline = (deadline * 1.2).ceil();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_are_as_stated() {
        assert_eq!(deadline_with_margin(10.0), 11.0);
        assert_eq!(deadline_with_margin(100.0), 102.0);
        assert_eq!(deadline_with_margin(1000.5), 1021.0);
        // 73.86 * 1.05 = 77.553 -> 78 credits; a whole amount stays whole after 5%.
        assert_eq!(budget_with_margin(Money(7386)), Some(Money::from_credits(78)));
        assert_eq!(budget_with_margin(Money::from_credits(20)), Some(Money::from_credits(21)));
        assert_eq!(budget_with_margin(Money::ZERO), Some(Money::ZERO));
        assert_eq!(budget_with_margin(Money(1)), Some(Money::from_credits(1)));
        assert_eq!(budget_with_margin(Money::from_credits(MAX_BUDGET_CREDITS)), None);
    }
}
