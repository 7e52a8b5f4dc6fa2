//! Runs many simulations in parallel (rayon) with an optional progress callback.

use crate::engine::{simulate_with_progress, ClusterConfig, SimResult};
use crate::workload::SimJob;
use libra_core::policy::{build_policy_with, Placement, PolicyError};
use libra_core::PricingParams;
use rayon::prelude::*;
use std::sync::Arc;

/// One simulation to run: a workload, a policy by name, pricing, the cluster, and the node
/// choice (`None`: the policy's own default).
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub workload: Arc<Vec<SimJob>>,
    pub policy: String,
    pub pricing: PricingParams,
    pub cluster: ClusterConfig,
    pub placement: Option<Placement>,
}

/// Runs every spec, in parallel, returning results in the order of `specs`. `tick` is called
/// once per finished run (from worker threads).
pub fn run_all(specs: &[RunSpec], tick: &(dyn Fn() + Sync)) -> Result<Vec<SimResult>, PolicyError> {
    run_all_with_progress(specs, tick, &|_| {})
}

/// `run_all`, with `arrived(n)` called as `n` more jobs of any run have arrived
/// (`engine::simulate_with_progress`; from worker threads): the calls add up to the jobs of
/// every spec.
pub fn run_all_with_progress(
    specs: &[RunSpec],
    tick: &(dyn Fn() + Sync),
    arrived: &(dyn Fn(usize) + Sync),
) -> Result<Vec<SimResult>, PolicyError> {
    // Fail on a bad policy name before spending any time.
    for s in specs {
        build_policy_with(&s.policy, s.pricing, s.placement)?;
    }
    specs
        .par_iter()
        .map(|s| {
            let policy = build_policy_with(&s.policy, s.pricing, s.placement)?;
            let r = simulate_with_progress(&s.workload, policy.as_ref(), s.cluster, arrived);
            tick();
            Ok(r)
        })
        .collect()
}
