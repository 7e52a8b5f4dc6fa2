//! Deadline/budget-constrained planners for the broker (Nimrod/G section 17.4).
//!
//! A planner is a pure function: given what the broker knows about each resource now (free
//! slots, the measured wall time per job, the cost per job), the jobs not yet started, the time
//! left to the deadline and the budget left, it returns how many of those jobs each resource
//! should run. The broker calls it again at every event (a job finishes, a price changes, the
//! user steers) and starts, on each resource, as many of its planned jobs as it has free slots.
//!
//! Two families live here:
//! - the seed's heuristics as published (`nimrod-cost`, `nimrod-time`, `nimrod-conservative`),
//!   greedy and with a calibration probe on every resource whose rate is still unknown;
//! - Libra's planners (`cost`, `time`, `conservative`, `cost-time`), which solve for an
//!   assignment exactly: capacity of a resource by a time `T` is counted slot by slot
//!   (`floor((T - slot_free_in) / secs_per_job)`), so nothing is planned that cannot finish.
//!
//! Costs are `Money`: the caller rounds `price * cpu_seconds` up to the cent per job, so a plan
//! whose cost is within the budget can be paid.

mod libra;
mod nimrod;
#[cfg(test)]
mod tests;

use crate::Money;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What the broker knows about one resource at the moment of planning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// Seconds until each slot can start a new job (0 = idle now). One entry per slot.
    pub slot_free_in: Vec<f64>,
    /// Wall seconds one job takes on one slot: measured by calibration, or a declared prior.
    /// `None` until known.
    pub secs_per_job: Option<f64>,
    /// What one more job costs on this resource, rounded up to the cent.
    #[serde(rename = "cost_per_job_cents", alias = "cost_per_job")]
    pub cost_per_job: Money,
    /// False while the resource does not answer or is paused: it gets no jobs.
    pub available: bool,
}

impl ResourceState {
    /// Jobs this resource can finish within `horizon` seconds from now, slot by slot.
    pub fn capacity(&self, horizon: f64) -> u64 {
        match self.secs_per_job {
            Some(spj) if self.available => slot_capacity(&self.slot_free_in, spj, horizon),
            _ => 0,
        }
    }

    /// Slots free right now.
    pub fn free_slots(&self) -> usize {
        self.slot_free_in.iter().filter(|&&f| f <= 0.0).count()
    }

    pub(crate) fn calibrated(&self) -> bool {
        self.available && self.secs_per_job.is_some_and(|s| s > 0.0)
    }
}

fn slot_capacity(slot_free_in: &[f64], spj: f64, horizon: f64) -> u64 {
    if spj.is_nan() || spj <= 0.0 || !horizon.is_finite() {
        return 0;
    }
    slot_free_in
        .iter()
        .map(|&f| {
            let room = horizon - f.max(0.0);
            if room <= 0.0 {
                0
            } else {
                // The small slack keeps 990 / 90 from rounding to 10.999...
                (room / spj + 1e-9).floor() as u64
            }
        })
        .sum()
}

/// The planning problem at one scheduling event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInput {
    pub resources: Vec<ResourceState>,
    /// Jobs not yet started (running ones are already in `slot_free_in` and in the budget).
    pub jobs_left: u64,
    /// Seconds from now to the deadline.
    pub time_left: f64,
    /// Budget minus what was spent and what is committed to running jobs.
    #[serde(rename = "budget_left_cents", alias = "budget_left")]
    pub budget_left: Money,
}

/// How many of the jobs left each resource should run, and what that is predicted to cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Jobs per resource, in the order of `PlanInput::resources`.
    pub jobs: Vec<u64>,
    /// Predicted cost of the planned jobs.
    #[serde(rename = "cost_cents", alias = "cost")]
    pub cost: Money,
    /// Predicted seconds from now until the last planned job ends (0 if none planned).
    pub finish: f64,
    /// True if every job left is planned within the deadline and the budget.
    pub feasible: bool,
}

impl Plan {
    pub fn planned(&self) -> u64 {
        self.jobs.iter().sum()
    }
}

/// The scheduling algorithms the broker offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Libra: the cheapest assignment that finishes by the deadline (exact optimum).
    Cost,
    /// Libra: the earliest finish the budget allows, and the cheapest way to reach it.
    Time,
    /// Libra: the earliest finish using only resources whose cost per job is within the budget
    /// per job left; all resources only if that cannot meet the deadline.
    Conservative,
    /// Libra: the cheapest cost, then the earliest finish at that cost.
    CostTime,
    /// Seed 17.4: sort by cost, give each as many jobs as it can finish by the deadline.
    NimrodCost,
    /// Seed 17.4: one job at a time to the resource that completes it first, if its cost per
    /// job is within the remaining budget per job.
    NimrodTime,
    /// Seed 17.4: split by budget per job; cheap resources get jobs in inverse proportion to
    /// their completion time; repeat on the rest with a recalculated budget per job.
    NimrodConservative,
}

impl Algorithm {
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Cost,
        Algorithm::Time,
        Algorithm::Conservative,
        Algorithm::CostTime,
        Algorithm::NimrodCost,
        Algorithm::NimrodTime,
        Algorithm::NimrodConservative,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Cost => "cost",
            Algorithm::Time => "time",
            Algorithm::Conservative => "conservative",
            Algorithm::CostTime => "cost-time",
            Algorithm::NimrodCost => "nimrod-cost",
            Algorithm::NimrodTime => "nimrod-time",
            Algorithm::NimrodConservative => "nimrod-conservative",
        }
    }

    /// The seed's heuristics probe every uncalibrated resource; Libra's planners only when the
    /// calibrated ones cannot make a feasible plan.
    pub fn is_nimrod(self) -> bool {
        matches!(self, Algorithm::NimrodCost | Algorithm::NimrodTime | Algorithm::NimrodConservative)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown algorithm '{0}': expected one of cost, time, conservative, cost-time, nimrod-cost, nimrod-time, nimrod-conservative")]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        let t = match t.as_str() {
            "cost-optimisation" | "cost-optimization" => "cost",
            "time-optimisation" | "time-optimization" => "time",
            other => other,
        }
        .to_string();
        Algorithm::ALL.into_iter().find(|a| a.name() == t).ok_or_else(|| UnknownAlgorithm(s.to_string()))
    }
}

/// Plans the jobs left with `algorithm`. Never plans above `budget_left`.
pub fn plan(algorithm: Algorithm, input: &PlanInput) -> Plan {
    match algorithm {
        Algorithm::Cost => libra::cost(input),
        Algorithm::Time => libra::time(input),
        Algorithm::Conservative => libra::conservative(input),
        Algorithm::CostTime => libra::cost_time(input),
        Algorithm::NimrodCost => nimrod::cost(input),
        Algorithm::NimrodTime => nimrod::time(input),
        Algorithm::NimrodConservative => nimrod::conservative(input),
    }
}

/// The cheapest cost of running all `jobs_left` by the deadline, ignoring the budget, or
/// `None` if the deadline cannot be met at any price. This is the optimum the experiments
/// compare against.
pub fn optimal_cost(input: &PlanInput) -> Option<Money> {
    let caps: Vec<u64> = input.resources.iter().map(|r| r.capacity(input.time_left)).collect();
    let (jobs, cost) = cheapest_fill(&input.resources, &caps, input.jobs_left, None);
    (jobs.iter().sum::<u64>() == input.jobs_left).then_some(cost)
}

/// Fills the cheapest resources first up to their capacities, at most `n` jobs, never above
/// `budget` when one is given. For linear costs and box capacities this is the exact minimum
/// cost for any number of jobs, and the maximum number of jobs any budget buys.
pub(crate) fn cheapest_fill(
    resources: &[ResourceState],
    caps: &[u64],
    n: u64,
    budget: Option<Money>,
) -> (Vec<u64>, Money) {
    let mut order: Vec<usize> = (0..resources.len()).filter(|&i| caps[i] > 0).collect();
    order.sort_by(|&a, &b| {
        resources[a]
            .cost_per_job
            .cmp(&resources[b].cost_per_job)
            .then_with(|| {
                let sa = resources[a].secs_per_job.unwrap_or(f64::INFINITY);
                let sb = resources[b].secs_per_job.unwrap_or(f64::INFINITY);
                sa.total_cmp(&sb)
            })
            .then(a.cmp(&b))
    });
    let mut jobs = vec![0u64; resources.len()];
    let mut left = n;
    let mut cost = Money::ZERO;
    for i in order {
        if left == 0 {
            break;
        }
        let c = resources[i].cost_per_job.cents().max(0);
        let mut take = caps[i].min(left);
        if let Some(b) = budget {
            let room = b.cents() - cost.cents();
            if room <= 0 && c > 0 {
                break;
            }
            if c > 0 {
                take = take.min((room / c) as u64);
            }
        }
        jobs[i] = take;
        left -= take;
        cost = Money::from_cents(cost.cents() + c * take as i64);
    }
    (jobs, cost)
}

/// Predicted time from now until the last of `n` jobs placed on resource `r` ends, placing
/// each job on the slot that frees first.
pub(crate) fn finish_of(r: &ResourceState, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let Some(spj) = r.secs_per_job else {
        return f64::INFINITY;
    };
    if r.slot_free_in.is_empty() {
        return f64::INFINITY;
    }
    // With equal job lengths the k-th job on a slot ends at free_in + k * spj; the finish of
    // n jobs is the smallest time by which the slots can hold n, found by bisection so that a
    // million jobs cost no more than a few.
    let lo_free = r.slot_free_in.iter().fold(f64::INFINITY, |a, &f| a.min(f.max(0.0)));
    let mut lo = 0.0f64;
    let mut hi = lo_free + spj * n as f64 + spj;
    if slot_capacity(&r.slot_free_in, spj, hi) < n {
        return f64::INFINITY;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if slot_capacity(&r.slot_free_in, spj, mid) >= n {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1e-7 {
            break;
        }
    }
    hi
}

pub(crate) fn plan_from(
    resources: &[ResourceState],
    jobs: Vec<u64>,
    jobs_left: u64,
    time_left: f64,
    budget: Money,
) -> Plan {
    let cost =
        Money::from_cents(resources.iter().zip(&jobs).map(|(r, &n)| r.cost_per_job.cents() * n as i64).sum());
    let finish = resources.iter().zip(&jobs).map(|(r, &n)| finish_of(r, n)).fold(0.0f64, f64::max);
    let planned: u64 = jobs.iter().sum();
    Plan {
        jobs,
        cost,
        finish,
        feasible: planned == jobs_left && finish <= time_left + 1e-6 && cost <= budget,
    }
}
