//! Space-shared baselines: PBS's default FIFO (no admission control, no backfilling) and EASY
//! backfilling with FCFS, SJF or EDF order and the "generous admission control" of the Libra+$
//! paper: a waiting job that can no longer meet its deadline is dropped and counts as rejected.
//! They charge the flat `E * PBase_j`, and only when the deadline is met.

use super::{Decision, Dispatch, Policy, Queued, RejectReason};
use crate::cluster::{Cluster, NodeIdx};
use crate::job::JobSpec;
use crate::pricing::cost_at;

/// Slack for "can still meet its deadline", so float rounding never drops a job that fits exactly.
const TIME_EPS: f64 = 1e-6;

/// The priority order of the backfilling queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillOrder {
    Fcfs,
    Sjf,
    Edf,
}

#[derive(Debug, Clone)]
pub struct Backfill {
    pub order: BackfillOrder,
}

impl Backfill {
    pub fn new(order: BackfillOrder) -> Self {
        Backfill { order }
    }
}

/// PBS's default: first in, first out, no admission control, nothing dropped.
#[derive(Debug, Clone, Copy)]
pub struct Fifo;

fn space_shared_admission(spec: &JobSpec, cluster: &Cluster) -> Decision {
    // Counted up to `procs` only: whether there are that many is all the answer needs, and on
    // 10,000 nodes a count of them all read every node's struct at every arrival.
    let procs = spec.procs() as usize;
    let able = cluster
        .nodes()
        .filter(|(_, n)| {
            n.up && n.accepting
                && n.spec.cpus > 0.0
                && n.spec.mem_mb >= spec.resources.mem_mb
                && n.spec.disk_mb >= spec.resources.disk_mb
        })
        .take(procs)
        .count();
    if procs == 0 || able < procs {
        Decision::Reject { reason: RejectReason::Resources, suggestion: None }
    } else {
        Decision::Queue
    }
}

/// The flat price per CPU-second on a node: its PBase, whatever the job and the load.
fn flat_price(cluster: &Cluster, node: NodeIdx) -> Option<f64> {
    Some(cluster.node(node).spec.price_base).filter(|p| p.is_finite())
}

/// Starts a job on the first idle nodes; it costs `E * PBase` at the dearest of them.
fn start(job: &Queued, idle: &mut Vec<NodeIdx>, cluster: &Cluster) -> Dispatch {
    let n = job.procs as usize;
    let nodes: Vec<NodeIdx> = idle.drain(..n).collect();
    let price = nodes.iter().map(|&j| cluster.node(j).spec.price_base).fold(0.0, f64::max);
    let cost = cost_at(job.estimate, price).unwrap_or(crate::Money(i64::MAX));
    Dispatch::Start { job: job.job, nodes, cost }
}

fn idle_nodes(cluster: &Cluster) -> Vec<NodeIdx> {
    cluster.idle_nodes().collect()
}

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, _now: f64) -> Decision {
        space_shared_admission(spec, cluster)
    }

    fn space_shared(&self) -> bool {
        true
    }

    fn price(
        &self,
        _spec: &JobSpec,
        _user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        _now: f64,
    ) -> Option<f64> {
        flat_price(cluster, node)
    }

    fn dispatch(&self, queue: &[Queued], cluster: &Cluster, _now: f64) -> Vec<Dispatch> {
        let mut idle = idle_nodes(cluster);
        let mut order: Vec<&Queued> = queue.iter().collect();
        order.sort_by(|a, b| a.submit.total_cmp(&b.submit).then(a.job.cmp(&b.job)));
        let mut out = Vec::new();
        for q in order {
            if q.procs as usize > idle.len() {
                break;
            }
            out.push(start(q, &mut idle, cluster));
        }
        out
    }
}

impl Policy for Backfill {
    fn name(&self) -> &'static str {
        match self.order {
            BackfillOrder::Fcfs => "fcfs-bf",
            BackfillOrder::Sjf => "sjf-bf",
            BackfillOrder::Edf => "edf-bf",
        }
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, _now: f64) -> Decision {
        space_shared_admission(spec, cluster)
    }

    fn space_shared(&self) -> bool {
        true
    }

    fn price(
        &self,
        _spec: &JobSpec,
        _user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        _now: f64,
    ) -> Option<f64> {
        flat_price(cluster, node)
    }

    fn dispatch(&self, queue: &[Queued], cluster: &Cluster, now: f64) -> Vec<Dispatch> {
        let mut out = Vec::new();
        let mut waiting: Vec<&Queued> = Vec::with_capacity(queue.len());
        for q in queue {
            if now + q.estimate > q.deadline_abs + TIME_EPS {
                out.push(Dispatch::Drop { job: q.job });
            } else {
                waiting.push(q);
            }
        }
        match self.order {
            BackfillOrder::Fcfs => {
                waiting.sort_by(|a, b| a.submit.total_cmp(&b.submit).then(a.job.cmp(&b.job)))
            }
            BackfillOrder::Sjf => waiting.sort_by(|a, b| {
                a.estimate.total_cmp(&b.estimate).then(a.submit.total_cmp(&b.submit)).then(a.job.cmp(&b.job))
            }),
            BackfillOrder::Edf => waiting.sort_by(|a, b| {
                a.deadline_abs
                    .total_cmp(&b.deadline_abs)
                    .then(a.submit.total_cmp(&b.submit))
                    .then(a.job.cmp(&b.job))
            }),
        }
        let mut idle = idle_nodes(cluster);
        let mut rest = waiting.into_iter();
        // Start jobs in priority order while they fit.
        let head = loop {
            match rest.next() {
                None => return out,
                Some(q) if (q.procs as usize) <= idle.len() => out.push(start(q, &mut idle, cluster)),
                Some(q) => break q,
            }
        };
        // The head does not fit: reserve for it at the earliest time enough nodes free up (the
        // shadow time), by the running jobs' estimates, counting what this pass started too.
        let mut ends: Vec<(f64, usize)> =
            cluster.commitments().map(|c| (c.expected_end(now), c.nodes.len())).collect();
        for d in &out {
            if let Dispatch::Start { job, nodes, .. } = d {
                if let Some(q) = queue.iter().find(|q| q.job == *job) {
                    ends.push((now + q.estimate, nodes.len()));
                }
            }
        }
        ends.sort_by(|a, b| a.0.total_cmp(&b.0));
        let need = head.procs as usize;
        let mut avail = idle.len();
        let mut shadow = f64::INFINITY;
        let mut extra = idle.len();
        let mut ends = ends.into_iter().peekable();
        while let Some((end, n)) = ends.next() {
            avail += n;
            if avail >= need {
                // Textbook EASY: every job whose estimated end is the shadow time frees its
                // nodes then, so all of them count toward the nodes the head leaves spare.
                while let Some(&(e, m)) = ends.peek() {
                    if e > end {
                        break;
                    }
                    avail += m;
                    ends.next();
                }
                shadow = end;
                extra = avail - need;
                break;
            }
        }
        // Backfill: a later job may start now if it fits and does not delay the head: it ends
        // by the shadow time, or it only uses nodes the head will not need.
        for q in rest {
            let n = q.procs as usize;
            if n > idle.len() {
                continue;
            }
            let ends_in_time = now + q.estimate <= shadow;
            if ends_in_time || n <= extra {
                if !ends_in_time {
                    extra -= n;
                }
                out.push(start(q, &mut idle, cluster));
            }
        }
        out
    }
}
