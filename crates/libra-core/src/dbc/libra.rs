//! Libra's planners: exact assignments rather than greedy ones.

use super::{cheapest_fill, plan_from, Plan, PlanInput, ResourceState};
use crate::Money;

fn caps(resources: &[ResourceState], horizon: f64) -> Vec<u64> {
    resources.iter().map(|r| r.capacity(horizon)).collect()
}

/// Cheapest assignment of all jobs by the deadline; if none fits the budget, the most jobs the
/// budget buys, cheapest first.
pub(super) fn cost(input: &PlanInput) -> Plan {
    let c = caps(&input.resources, input.time_left);
    let (jobs, _) = cheapest_fill(&input.resources, &c, input.jobs_left, Some(input.budget_left));
    with_probes(input, jobs)
}

/// Earliest finish within the budget, at the least cost for that finish.
pub(super) fn time(input: &PlanInput) -> Plan {
    time_with_budget(input, input.budget_left)
}

fn time_with_budget(input: &PlanInput, budget: Money) -> Plan {
    let n = input.jobs_left;
    let fits = |t: f64| {
        let c = caps(&input.resources, t);
        cheapest_fill(&input.resources, &c, n, Some(budget)).0.iter().sum::<u64>() == n
    };
    if n == 0 || !fits(input.time_left) {
        // No schedule meets both: do what the budget and the deadline allow.
        let c = caps(&input.resources, input.time_left);
        let (jobs, _) = cheapest_fill(&input.resources, &c, n, Some(budget));
        return with_probes(input, jobs);
    }
    // Feasibility is monotone in the horizon: more time never removes capacity.
    let (mut lo, mut hi) = (0.0f64, input.time_left);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1e-7 {
            break;
        }
    }
    let c = caps(&input.resources, hi);
    let (jobs, _) = cheapest_fill(&input.resources, &c, n, Some(budget));
    plan_from(&input.resources, jobs, n, input.time_left, input.budget_left)
}

/// Earliest finish on the resources whose cost per job is within the budget per job left;
/// only if those cannot meet the deadline, the earliest finish on all of them.
pub(super) fn conservative(input: &PlanInput) -> Plan {
    if input.jobs_left == 0 {
        return time(input);
    }
    let per_job = input.budget_left.cents() / input.jobs_left as i64;
    let restricted: Vec<ResourceState> = input
        .resources
        .iter()
        .map(|r| ResourceState { available: r.available && r.cost_per_job.cents() <= per_job, ..r.clone() })
        .collect();
    let sub = PlanInput { resources: restricted, ..input.clone() };
    let p = time(&sub);
    if p.feasible {
        return plan_from(&input.resources, p.jobs, input.jobs_left, input.time_left, input.budget_left);
    }
    time(input)
}

/// The least cost, then the earliest finish at that cost (equal-priced resources share).
pub(super) fn cost_time(input: &PlanInput) -> Plan {
    let c = cost(input);
    if !c.feasible {
        return c;
    }
    let p = time_with_budget(input, c.cost);
    if p.feasible {
        p
    } else {
        c
    }
}

/// When the calibrated resources cannot carry every job, give one probe job to each
/// uncalibrated resource, cheapest first, while the budget lasts: only then is its rate learnt.
fn with_probes(input: &PlanInput, mut jobs: Vec<u64>) -> Plan {
    let planned: u64 = jobs.iter().sum();
    let mut left = input.jobs_left.saturating_sub(planned);
    if left > 0 {
        let mut spent: i64 =
            input.resources.iter().zip(&jobs).map(|(r, &n)| r.cost_per_job.cents() * n as i64).sum();
        let mut idle: Vec<usize> = (0..input.resources.len())
            .filter(|&i| {
                let r = &input.resources[i];
                r.available && !r.calibrated() && r.free_slots() > 0
            })
            .collect();
        idle.sort_by_key(|&i| (input.resources[i].cost_per_job, i));
        for i in idle {
            let c = input.resources[i].cost_per_job.cents();
            if left == 0 || spent + c > input.budget_left.cents() {
                break;
            }
            jobs[i] += 1;
            spent += c;
            left -= 1;
        }
    }
    plan_from(&input.resources, jobs, input.jobs_left, input.time_left, input.budget_left)
}
