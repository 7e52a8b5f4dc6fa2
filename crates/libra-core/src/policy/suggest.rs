//! Suggestions for rejected jobs (SRS 3.1.5.4): the earliest deadline at which the share test
//! would pass right now on enough nodes.

use crate::cluster::{Cluster, NodeIdx, SHARE_EPS};

/// The smallest deadline `D >= asked` (seconds after now) such that at least `procs` of `nodes`
/// can take a job of `estimate` CPU-seconds with share `estimate / D`. `None` when no deadline
/// will do (too few nodes have any headroom).
pub(crate) fn earliest_deadline(
    cluster: &Cluster,
    nodes: &[NodeIdx],
    procs: usize,
    estimate: f64,
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
            let headroom = (spec.cpus - cluster.node_load(j, now)).min(spec.per_job_cap());
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
