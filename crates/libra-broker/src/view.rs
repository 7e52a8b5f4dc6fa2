//! An experiment as the API shows it (`libra_api::SweepInfo` and friends): progress, money,
//! projected finish, and jobs in execution per resource over time, read from the database.

use crate::store::{Store, StoreError};
use libra_api::{SweepCounts, SweepInfo, SweepJob, SweepResource, SweepUsage, SweepUsagePoint};

/// The most points a usage series carries: enough for any chart, small enough for a phone.
pub const MAX_USAGE_POINTS: usize = 1000;

pub fn info(store: &Store, exp: i64, owner: &str, now: f64) -> Result<SweepInfo, StoreError> {
    let e = store.experiment(exp)?;
    let c = store.counts(exp)?;
    let per = store.per_resource(exp)?;
    let configs = store.resources(exp)?;
    let total = c.pending + c.running + c.done + c.failed + c.cancelled;
    let elapsed = (e.finished.unwrap_or(now) - e.created).max(0.0);
    let active = e.state.is_active();
    // From the pace so far, as `libra sweep status` does: simple, and honest about what it is.
    let projected_finish = (active && c.done > 0 && c.pending + c.running > 0)
        .then(|| now + elapsed / c.done as f64 * (c.pending + c.running) as f64);
    let resources = per
        .iter()
        .zip(&configs)
        .map(|(p, cfg)| SweepResource {
            name: p.name.clone(),
            kind: format!("{:?}", cfg.kind()).to_lowercase(),
            slots: cfg.slots,
            price: cfg.price_at(now),
            done: p.done,
            failed: p.failed,
            running: p.running,
            spent: p.spent,
            secs_per_job: (p.done > 0).then(|| p.wall_sum / p.done as f64),
            refused: p.refused.as_ref().map(|(m, _)| m.clone()),
            refused_at: p.refused.as_ref().map(|(_, at)| *at),
        })
        .collect();
    Ok(SweepInfo {
        id: e.id,
        name: e.name,
        owner: owner.to_string(),
        state: e.state.to_string(),
        optimise: e.algorithm,
        created: e.created,
        finished: e.finished,
        deadline: e.deadline,
        budget: e.budget,
        spent: store.spent(exp)?,
        held: store.held(exp)?,
        jobs: SweepCounts {
            total,
            pending: c.pending,
            running: c.running,
            done: c.done,
            failed: c.failed,
            cancelled: c.cancelled,
        },
        projected_finish,
        resources,
        now,
        engine: None,
    })
}

/// The sweep's usage, and how many attempts it read to make it (its cost grows with them).
pub fn usage(store: &Store, exp: i64, now: f64) -> Result<(SweepUsage, usize), StoreError> {
    let e = store.experiment(exp)?;
    let resources: Vec<String> = store.resources(exp)?.into_iter().map(|r| r.name).collect();
    let spans = store.attempt_spans(exp)?;
    let points = usage_points(&spans, resources.len(), MAX_USAGE_POINTS);
    Ok((SweepUsage { id: exp, resources, start: e.created, points, now }, spans.len()))
}

/// The step function of jobs in execution per resource from attempts' (resource, start, end):
/// one point per distinct event time; beyond `max` points, time is cut into `max` equal
/// buckets and each keeps its busiest moment per resource, so no peak disappears.
pub fn usage_points(spans: &[(usize, f64, Option<f64>)], n: usize, max: usize) -> Vec<SweepUsagePoint> {
    let mut events: Vec<(f64, usize, i32)> = Vec::with_capacity(spans.len() * 2);
    for &(pos, start, end) in spans.iter().filter(|s| s.0 < n) {
        events.push((start, pos, 1));
        if let Some(end) = end {
            events.push((end.max(start), pos, -1));
        }
    }
    // At one instant, ends before starts: a slot handed from one job to the next is not two.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut running = vec![0i64; n];
    let mut points: Vec<SweepUsagePoint> = Vec::new();
    for (t, pos, d) in events {
        running[pos] += i64::from(d);
        let now: Vec<u32> = running.iter().map(|&r| r.max(0) as u32).collect();
        match points.last_mut() {
            Some(p) if p.t == t => p.running = now,
            _ => points.push(SweepUsagePoint { t, running: now }),
        }
    }
    if points.len() <= max.max(2) {
        return points;
    }
    let (t0, t1) = (points[0].t, points[points.len() - 1].t);
    let width = (t1 - t0) / max as f64;
    let mut out: Vec<SweepUsagePoint> = Vec::with_capacity(max + 1);
    for p in points {
        let b = (((p.t - t0) / width) as usize).min(max - 1);
        let bt = t0 + b as f64 * width;
        match out.last_mut() {
            Some(q) if q.t == bt => {
                for (x, y) in q.running.iter_mut().zip(&p.running) {
                    *x = (*x).max(*y);
                }
            }
            _ => out.push(SweepUsagePoint { t: bt, running: p.running }),
        }
    }
    out
}

pub fn results(store: &Store, exp: i64) -> Result<Vec<SweepJob>, StoreError> {
    results_page(store, exp, 0, u32::MAX)
}

/// `results`, a page at a time: at most `limit` jobs, from the job after job number `after`.
pub fn results_page(store: &Store, exp: i64, after: u64, limit: u32) -> Result<Vec<SweepJob>, StoreError> {
    Ok(store
        .results_page(exp, after, limit)?
        .into_iter()
        .map(|r| SweepJob {
            job: r.index + 1,
            params: r.params,
            state: r.state,
            resource: r.resource,
            attempts: r.attempts,
            exit_code: r.exit_code,
            wall: r.wall,
            cost: r.cost,
            output: r.output,
            files: r.files,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_a_step_function_per_resource() {
        // Resource 0: two jobs back to back in one slot; resource 1: one job still running.
        let spans = [(0, 0.0, Some(10.0)), (0, 10.0, Some(20.0)), (1, 5.0, None)];
        let p = usage_points(&spans, 2, 100);
        let at: Vec<(f64, Vec<u32>)> = p.into_iter().map(|p| (p.t, p.running)).collect();
        assert_eq!(at, vec![(0.0, vec![1, 0]), (5.0, vec![1, 1]), (10.0, vec![1, 1]), (20.0, vec![0, 1])]);
    }

    #[test]
    fn many_points_are_bucketed_keeping_peaks() {
        let spans: Vec<_> = (0..500).map(|i| (0usize, i as f64, Some(i as f64 + 0.5))).collect();
        let p = usage_points(&spans, 1, 50);
        assert!(p.len() <= 50, "{} points", p.len());
        assert!(p.iter().all(|x| x.running[0] == 1), "a bucket lost its peak");
    }
}
