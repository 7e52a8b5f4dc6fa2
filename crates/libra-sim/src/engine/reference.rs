//! A slow, obviously right model of time-shared nodes, to check the fast engine against: at
//! every event it recomputes every job's weight and rate from scratch and scans all jobs for the
//! next completion. Quadratic; for tests only.

use super::{blank_record, finish, spec_of, ClusterConfig, SimResult, Verdict};
use crate::workload::SimJob;
use libra_core::policy::{Decision, Policy};
use libra_core::share::node_shares;
use libra_core::{Cluster, NodeIdx};

pub fn simulate_reference(jobs: &[SimJob], policy: &dyn Policy, cfg: ClusterConfig) -> SimResult {
    let mut records: Vec<_> = jobs.iter().map(blank_record).collect();
    let mut cluster = Cluster::homogeneous(cfg.nodes, cfg.price_base);
    // (job, nodes, done, weights per node)
    let mut running: Vec<(usize, Vec<NodeIdx>, f64, Vec<f64>)> = Vec::new();
    let mut next = 0usize;
    let mut now = jobs.first().map_or(0.0, |j| j.submit);
    let mut events = 0u64;
    loop {
        // Rates from the weights last set by job control.
        let mut sums = vec![0.0; cfg.nodes];
        let mut counts = vec![0usize; cfg.nodes];
        for (_, nodes, _, w) in &running {
            for (n, w) in nodes.iter().zip(w) {
                sums[*n] += w;
                counts[*n] += 1;
            }
        }
        let rates: Vec<f64> = running
            .iter()
            .map(|(_, nodes, _, w)| {
                nodes
                    .iter()
                    .zip(w)
                    .map(
                        |(n, w)| {
                            if sums[*n] > 1e-12 {
                                (w / sums[*n]).min(1.0)
                            } else {
                                1.0 / counts[*n] as f64
                            }
                        },
                    )
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        // The policies see exact progress: the cluster extrapolates at these rates.
        for ((k, _, done, _), r) in running.iter().zip(&rates) {
            let _ = cluster.set_progress(*k as u64, *done, *r, now);
        }
        let next_done = running
            .iter()
            .zip(&rates)
            .filter(|(_, r)| **r > 0.0)
            .map(|((k, _, done, _), r)| now + (jobs[*k].runtime - done).max(0.0) / r)
            .fold(f64::INFINITY, f64::min);
        let next_arrival = jobs.get(next).map_or(f64::INFINITY, |j| j.submit);
        if next_done.is_infinite() && next_arrival.is_infinite() {
            break;
        }
        events += 1;
        let t = next_done.min(next_arrival);
        for ((_, _, done, _), r) in running.iter_mut().zip(&rates) {
            *done += r * (t - now);
        }
        now = t;
        let mut touched: Vec<NodeIdx> = Vec::new();
        if next_done <= next_arrival {
            // Every job whose work is done (within rounding) leaves.
            let mut i = 0;
            while i < running.len() {
                let k = running[i].0;
                if jobs[k].runtime - running[i].2 <= 1e-9 * jobs[k].runtime.max(1.0) {
                    records[k].outcome.finish = Some(now);
                    policy.observe(Some(u64::from(jobs[k].user)), jobs[k].estimate, jobs[k].runtime);
                    cluster.release(k as u64);
                    touched.extend(running[i].1.iter().copied());
                    running.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        } else {
            let i = next;
            next += 1;
            let job = &jobs[i];
            let spec = spec_of(job);
            let user = Some(u64::from(job.user));
            match policy.decide_only(&spec, user, &cluster, now) {
                Decision::Accept { nodes, cost, .. } => {
                    let rec = &mut records[i];
                    rec.verdict = Verdict::Accepted;
                    rec.outcome.accepted = true;
                    rec.outcome.start = Some(now);
                    rec.outcome.cost = cost;
                    rec.nodes = nodes.clone();
                    if job.runtime <= 0.0 {
                        rec.outcome.finish = Some(now);
                    } else if cluster
                        .commit(
                            i as u64,
                            policy.reserved_estimate(&spec, user),
                            now + job.deadline,
                            &nodes,
                            now,
                        )
                        .is_ok()
                    {
                        touched.extend(nodes.iter().copied());
                        running.push((i, nodes.clone(), 0.0, vec![0.0; nodes.len()]));
                    }
                }
                Decision::Reject { reason, .. } => records[i].verdict = Verdict::Rejected(reason),
                Decision::Queue => {}
            }
        }
        // Job control on the touched nodes.
        let shares: Vec<(NodeIdx, Vec<(u64, f64)>)> = touched
            .iter()
            .map(|&n| {
                let jobs = cluster.controlled_jobs(n, now);
                let s = node_shares(policy.job_control(), &jobs, now, cluster.node(n).spec.cpus);
                (n, jobs.iter().map(|j| j.job).zip(s).collect())
            })
            .collect();
        for (k, nodes, _, w) in running.iter_mut() {
            for (n, w) in nodes.iter().zip(w.iter_mut()) {
                if let Some((_, s)) = shares.iter().find(|(m, _)| m == n) {
                    *w = s.iter().find(|(j, _)| *j == *k as u64).map_or(0.0, |(_, s)| *s);
                }
            }
        }
    }
    finish(policy.name(), cfg, records, events)
}
