//! Node choice (issue 9): best fit (Algorithm 1, the Libra+$ paper's rule), least loaded (the
//! Libra paper's) and cheapest, under Libra+$ and, for comparison, Libra, on a trace with the
//! Table I model, over the arrival delay factors of Figure 2 (0.5 is Table I's default). Besides
//! Job QoS Satisfaction and Cluster Profitability it reports what users paid per CPU-second: the
//! money charged over the CPU-seconds it was charged for. Algorithm 1 charges `RE_i * P_ij`
//! whatever the job's processors, so that is the estimate: the mean is the estimate-weighted
//! mean of the rates `P_ij` users paid.

use super::libraplus::{model_at, Axis, StudyError};
use super::runner::{run_all, RunSpec};
use crate::engine::{ClusterConfig, SimResult};
use crate::swf::SwfRecord;
use crate::workload::libraplus::{generate, LibraPlusModel};
use crate::workload::SimJob;
use libra_core::policy::Placement;
use libra_core::{Money, PricingParams};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The policies compared: Libra+$ (the subject), and Libra, whose own rule is least loaded.
pub const POLICIES: [&str; 2] = ["libra+$", "libra"];
/// The arrival delay factors (Figure 2's).
pub const DELAYS: [f64; 5] = [0.1, 0.25, 0.5, 0.75, 1.0];

/// The delay factors a run covers: Figure 2's, and the model's own if it is not one of them.
pub fn delays(base: &LibraPlusModel) -> Vec<f64> {
    let mut xs = DELAYS.to_vec();
    if !xs.contains(&base.arrival_delay_factor) {
        xs.push(base.arrival_delay_factor);
        xs.sort_by(f64::total_cmp);
    }
    xs
}

/// One policy and placement at one arrival delay factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlacementPoint {
    pub policy: String,
    pub delay_factor: f64,
    pub placement: Placement,
    pub qos_satisfaction: f64,
    pub profitability: f64,
    pub accepted: usize,
    pub completed_in_time: usize,
    /// What users were charged, in all.
    pub revenue: Money,
    /// The CPU-seconds that was charged for: the estimates of the jobs that paid.
    pub charged_cpu_seconds: f64,
    /// `revenue / charged_cpu_seconds`, credits per CPU-second.
    pub mean_price: f64,
    pub utilisation: f64,
}

/// What users paid per CPU-second in one run: (revenue, CPU-seconds charged, the mean).
pub fn price_paid(result: &SimResult, jobs: &[SimJob]) -> (Money, f64, f64) {
    let (mut revenue, mut cpu) = (Money::ZERO, 0.0);
    for (rec, job) in result.records.iter().zip(jobs) {
        let charged = rec.outcome.charged();
        if charged > Money::ZERO {
            revenue = revenue + charged;
            cpu += job.estimate;
        }
    }
    let mean = if cpu > 0.0 { revenue.as_credits_f64() / cpu } else { 0.0 };
    (revenue, cpu, mean)
}

/// Every policy of `POLICIES` with every placement at every delay factor of `delays(base)`,
/// with `pricing` on `cluster`.
pub fn run(
    records: &[SwfRecord],
    base: &LibraPlusModel,
    pricing: PricingParams,
    cluster: ClusterConfig,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<PlacementPoint>, StudyError> {
    let mut specs = Vec::new();
    let mut xs = Vec::new();
    for x in delays(base) {
        let workload = Arc::new(generate(records, &model_at(base, Axis::ArrivalDelay, x))?);
        for policy in POLICIES {
            for p in Placement::ALL {
                specs.push(RunSpec {
                    workload: workload.clone(),
                    policy: policy.to_string(),
                    pricing,
                    cluster,
                    placement: Some(p),
                });
                xs.push(x);
            }
        }
    }
    let results = run_all(&specs, tick)?;
    Ok(specs
        .iter()
        .zip(results)
        .zip(xs)
        .map(|((spec, r), x)| {
            let (revenue, charged_cpu_seconds, mean_price) = price_paid(&r, &spec.workload);
            PlacementPoint {
                policy: spec.policy.clone(),
                delay_factor: x,
                placement: spec.placement.unwrap_or(Placement::BestFit),
                qos_satisfaction: r.metrics.qos_satisfaction,
                profitability: r.metrics.profitability,
                accepted: r.metrics.accepted,
                completed_in_time: r.metrics.completed_in_time,
                revenue,
                charged_cpu_seconds,
                mean_price,
                utilisation: r.metrics.utilisation,
            }
        })
        .collect())
}

/// How many runs `run` makes (for a progress bar).
pub fn run_count(base: &LibraPlusModel) -> usize {
    delays(base).len() * POLICIES.len() * Placement::ALL.len()
}
