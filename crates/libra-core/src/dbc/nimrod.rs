//! The seed's heuristics (Nimrod/G section 17.4), as published, with the start-up step the
//! seed mentions but does not spell out: every resource whose job consumption rate is still
//! unknown gets one probe job (the "initial spike" of Figure 17.7).

use super::{plan_from, Plan, PlanInput};

/// One probe job on each available, uncalibrated resource with a free slot, cheapest first,
/// while the budget lasts. Returns the jobs and what they cost, in cents.
fn probes(input: &PlanInput) -> (Vec<u64>, i64) {
    let mut jobs = vec![0u64; input.resources.len()];
    let mut spent = 0i64;
    let mut left = input.jobs_left;
    let mut order: Vec<usize> = (0..input.resources.len())
        .filter(|&i| {
            let r = &input.resources[i];
            r.available && !r.calibrated() && r.free_slots() > 0
        })
        .collect();
    order.sort_by_key(|&i| (input.resources[i].cost_per_job, i));
    for i in order {
        let c = input.resources[i].cost_per_job.cents();
        if left == 0 || spent + c > input.budget_left.cents() {
            break;
        }
        jobs[i] = 1;
        spent += c;
        left -= 1;
    }
    (jobs, spent)
}

/// Sort resources by increasing cost; for each in order,, assign as many jobs as possible
/// without exceeding the deadline. The budget stops assignment when it runs out.
pub(super) fn cost(input: &PlanInput) -> Plan {
    let (mut jobs, mut spent) = probes(input);
    let mut left = input.jobs_left - jobs.iter().sum::<u64>();
    let mut order: Vec<usize> =
        (0..input.resources.len()).filter(|&i| input.resources[i].calibrated()).collect();
    order.sort_by_key(|&i| (input.resources[i].cost_per_job, i));
    for i in order {
        let r = &input.resources[i];
        let c = r.cost_per_job.cents();
        let mut take = r.capacity(input.time_left).min(left);
        if c > 0 {
            let room = (input.budget_left.cents() - spent).max(0);
            take = take.min((room / c) as u64);
        }
        jobs[i] += take;
        spent += c * take as i64;
        left -= take;
    }
    plan_from(&input.resources, jobs, input.jobs_left, input.time_left, input.budget_left)
}

/// For each resource, the next completion time of one more job given the jobs already
/// assigned; sort by it; assign one job to the first resource whose cost per job is at most
/// the remaining budget per job; repeat until all jobs are assigned (or none qualifies).
pub(super) fn time(input: &PlanInput) -> Plan {
    let (mut jobs, spent) = probes(input);
    let mut left = input.jobs_left - jobs.iter().sum::<u64>();
    let mut budget = input.budget_left.cents() - spent;
    let mut slots: Vec<Option<Vec<f64>>> = input
        .resources
        .iter()
        .map(|r| r.calibrated().then(|| r.slot_free_in.iter().map(|f| f.max(0.0)).collect()))
        .collect();
    while left > 0 {
        let mut best: Option<(f64, usize, usize)> = None;
        for (i, s) in slots.iter().enumerate() {
            let Some(s) = s else { continue };
            let r = &input.resources[i];
            let c = r.cost_per_job.cents();
            // cost <= budget / jobs, kept in integers.
            if c.saturating_mul(left as i64) > budget {
                continue;
            }
            let spj = r.secs_per_job.unwrap_or(f64::INFINITY);
            let Some((k, &free)) = s.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)) else {
                continue;
            };
            let done = free + spj;
            if best.is_none_or(|(t, _, _)| done < t) {
                best = Some((done, i, k));
            }
        }
        let Some((done, i, k)) = best else { break };
        if let Some(s) = slots[i].as_mut() {
            s[k] = done;
        }
        jobs[i] += 1;
        budget -= input.resources[i].cost_per_job.cents();
        left -= 1;
    }
    plan_from(&input.resources, jobs, input.jobs_left, input.time_left, input.budget_left)
}

/// Split resources by whether their cost per job is within the budget per job; give the
/// cheaper ones jobs in inverse proportion to their job completion time (capped at what each
/// can finish by the deadline); repeat on the more expensive ones with a recalculated budget
/// per job until all jobs are assigned.
pub(super) fn conservative(input: &PlanInput) -> Plan {
    let (mut jobs, spent) = probes(input);
    let mut left = input.jobs_left - jobs.iter().sum::<u64>();
    let mut budget = input.budget_left.cents() - spent;
    let mut pool: Vec<usize> =
        (0..input.resources.len()).filter(|&i| input.resources[i].calibrated()).collect();
    while left > 0 && !pool.is_empty() {
        let (cheap, rest): (Vec<usize>, Vec<usize>) = pool
            .iter()
            .partition(|&&i| input.resources[i].cost_per_job.cents().saturating_mul(left as i64) <= budget);
        if cheap.is_empty() {
            break;
        }
        // A resource's job completion time is its time per job over its slots.
        let rate = |i: usize| {
            let r = &input.resources[i];
            r.slot_free_in.len() as f64 / r.secs_per_job.unwrap_or(f64::INFINITY)
        };
        let total: f64 = cheap.iter().map(|&i| rate(i)).sum();
        let caps: Vec<u64> = cheap.iter().map(|&i| input.resources[i].capacity(input.time_left)).collect();
        let mut give: Vec<u64> = cheap
            .iter()
            .zip(&caps)
            .map(|(&i, &cap)| ((left as f64 * rate(i) / total).floor() as u64).min(cap))
            .collect();
        // Remainders of the rounding go to the fastest resources that still have room.
        let mut by_rate: Vec<usize> = (0..cheap.len()).collect();
        by_rate.sort_by(|&a, &b| rate(cheap[b]).total_cmp(&rate(cheap[a])));
        let mut extra = left.saturating_sub(give.iter().sum());
        for &k in &by_rate {
            if extra == 0 {
                break;
            }
            let add = (caps[k] - give[k]).min(extra).min(1);
            give[k] += add;
            extra -= add;
        }
        for (k, &i) in cheap.iter().enumerate() {
            jobs[i] += give[k];
            budget -= input.resources[i].cost_per_job.cents() * give[k] as i64;
            left -= give[k];
        }
        pool = rest;
    }
    plan_from(&input.resources, jobs, input.jobs_left, input.time_left, input.budget_left)
}
