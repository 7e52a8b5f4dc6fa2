//! Cluster histories for the property tests: commits, progress reports, releases and waits,
//! applied one step a second to a cluster of given nodes. Each test draws its own steps (its
//! own mix and ranges); the steps and how they are applied are shared here.

use crate::cluster::{Cluster, NodeSpec};
use crate::job::JobSpec;
use crate::money::Money;
use proptest::prelude::*;

/// The rate a progress report sets.
#[derive(Debug, Clone, Copy)]
pub enum Rate {
    Absolute(f64),
    /// That multiple of the job's Algorithm 2 share at the instant (below, at and above it are
    /// the cases the load bound treats apart). A job not committed is left alone.
    OfShare(f64),
}

/// One step of a cluster's history.
#[derive(Debug, Clone)]
pub enum Op {
    Commit {
        job: u64,
        nodes: Vec<usize>,
        estimate: f64,
        deadline: f64,
        cpt: u32,
    },
    Progress {
        job: u64,
        cpu: f64,
        rate: Rate,
    },
    Release {
        job: u64,
    },
    Wait {
        secs: f64,
    },
    /// Progress as the job's record itself gives it now, at the same rate: the simulator's
    /// update of a job whose rate did not change.
    Advance {
        job: u64,
    },
}

/// Seconds either from a few round values (so that loads tie, which the orders break by node)
/// or from a range.
pub fn secs(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    prop_oneof![(0usize..4).prop_map(move |i| (lo + 10.0) * [1.0, 2.0, 4.0, 8.0][i]), lo..hi]
}

/// A node of `cpus` CPUs with room for any job's memory and disk.
pub fn node(i: usize, cpus: f64, price_base: f64) -> NodeSpec {
    NodeSpec { name: format!("n{i}"), cpus, mem_mb: 1 << 20, disk_mb: 1 << 20, price_base }
}

/// `nodes`, and `ops` applied from `t0`, one step a second (and a wait's seconds more);
/// returns the cluster and the time reached. Steps the cluster refuses (a job committed twice,
/// progress of a job not committed) leave it as it was.
pub fn build(nodes: &[NodeSpec], ops: &[Op], t0: f64) -> (Cluster, f64) {
    let mut c = Cluster::new();
    for n in nodes {
        c.add_node(n.clone());
    }
    let mut now = t0;
    for op in ops {
        match op {
            Op::Commit { job, nodes, estimate, deadline, cpt } => {
                let mut nodes = nodes.clone();
                nodes.sort_unstable();
                nodes.dedup();
                let spec = JobSpec::simple(*estimate, *deadline, Money(0)).with_cpus_per_task(*cpt);
                let _ = c.commit_spec(*job, &spec, now, &nodes, now);
            }
            Op::Progress { job, cpu, rate } => {
                let rate = match rate {
                    Rate::Absolute(r) => Some(*r),
                    Rate::OfShare(f) => c.required_share(*job, now).map(|s| s * f),
                };
                if let Some(rate) = rate {
                    let _ = c.set_progress(*job, *cpu, rate, now);
                }
            }
            Op::Release { job } => {
                c.release(*job);
            }
            Op::Advance { job } => {
                if let Some((cpu, rate)) = c.commitment(*job).map(|j| (j.cpu_at(now), j.rate)) {
                    let _ = c.set_progress(*job, cpu, rate, now);
                }
            }
            Op::Wait { secs } => now += secs,
        }
        now += 1.0;
    }
    (c, now)
}
