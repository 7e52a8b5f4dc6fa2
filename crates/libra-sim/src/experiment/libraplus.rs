//! The five studies of the Libra+$ paper (Figures 2 to 6) over a trace, with Table I defaults
//! for everything a study does not vary.

use super::runner::{run_all, RunSpec};
use super::Point;
use crate::engine::ClusterConfig;
use crate::swf::SwfRecord;
use crate::workload::libraplus::{generate, LibraPlusModel, ModelError};
use libra_core::policy::PolicyError;
use libra_core::PricingParams;
use std::sync::Arc;

/// What a study varies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Axis {
    ArrivalDelay,
    Beta,
    HighUrgencyPercent,
    UnderEstimatePercent,
}

/// One study: its x values and the (policy, beta) series it plots.
#[derive(Debug, Clone)]
pub struct Study {
    pub name: &'static str,
    pub study: &'static str,
    pub axis: Axis,
    pub x_label: &'static str,
    pub xs: Vec<f64>,
    /// `None` beta: the series follows the x value (the beta study).
    pub series: Vec<(&'static str, Option<f64>)>,
}

const DELAYS: [f64; 5] = [0.1, 0.25, 0.5, 0.75, 1.0];
const BETAS: [f64; 3] = [0.1, 0.5, 1.0];
const BASELINES: [&str; 3] = ["fcfs-bf", "sjf-bf", "edf-bf"];

fn beta_series() -> Vec<(&'static str, Option<f64>)> {
    let mut s: Vec<(&'static str, Option<f64>)> = BETAS.iter().map(|b| ("libra+$", Some(*b))).collect();
    s.push(("libra", Some(0.1)));
    s
}

/// The study behind a named experiment, if it is one of the Libra+$ figures.
pub fn study(name: &str) -> Option<Study> {
    let all_five = || {
        let mut s: Vec<(&'static str, Option<f64>)> = BASELINES.iter().map(|p| (*p, Some(0.1))).collect();
        s.push(("libra", Some(0.1)));
        s.push(("libra+$", Some(0.1)));
        s
    };
    Some(match name {
        "libraplus-fig2" => Study {
            name: "libraplus-fig2",
            study: "arrival-delay",
            axis: Axis::ArrivalDelay,
            x_label: "arrival delay factor",
            xs: DELAYS.to_vec(),
            series: all_five(),
        },
        "libraplus-fig3" => Study {
            name: "libraplus-fig3",
            study: "beta",
            axis: Axis::Beta,
            x_label: "dynamic pricing factor beta",
            xs: vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            series: {
                let mut s: Vec<(&'static str, Option<f64>)> =
                    BASELINES.iter().map(|p| (*p, Some(0.1))).collect();
                s.push(("libra", Some(0.1)));
                s.push(("libra+$", None));
                s
            },
        },
        "libraplus-fig4" => Study {
            name: "libraplus-fig4",
            study: "arrival-delay-beta",
            axis: Axis::ArrivalDelay,
            x_label: "arrival delay factor",
            xs: DELAYS.to_vec(),
            series: beta_series(),
        },
        "libraplus-fig5" => Study {
            name: "libraplus-fig5",
            study: "high-urgency",
            axis: Axis::HighUrgencyPercent,
            x_label: "high-urgency jobs (%)",
            xs: vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0],
            series: beta_series(),
        },
        "libraplus-fig6" => Study {
            name: "libraplus-fig6",
            study: "under-estimate",
            axis: Axis::UnderEstimatePercent,
            x_label: "runtime under-estimate (%)",
            xs: vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
            series: beta_series(),
        },
        _ => return None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// The model at one x value of a study.
pub fn model_at(base: &LibraPlusModel, axis: Axis, x: f64) -> LibraPlusModel {
    let mut m = base.clone();
    match axis {
        Axis::ArrivalDelay => m.arrival_delay_factor = x,
        Axis::Beta => {}
        Axis::HighUrgencyPercent => m.high_urgency_share = x / 100.0,
        Axis::UnderEstimatePercent => m.inaccuracy = x / 100.0,
    }
    m
}

/// Runs a study over `records`: every x value, every series. `tick` is called per finished run.
pub fn run_study(
    study: &Study,
    records: &[SwfRecord],
    base: &LibraPlusModel,
    pricing: PricingParams,
    cluster: ClusterConfig,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Point>, StudyError> {
    let mut specs = Vec::new();
    let mut labels = Vec::new();
    for &x in &study.xs {
        let workload = Arc::new(generate(records, &model_at(base, study.axis, x))?);
        for &(policy, beta) in &study.series {
            let beta = beta.unwrap_or(x);
            specs.push(RunSpec {
                workload: workload.clone(),
                policy: policy.to_string(),
                pricing: PricingParams { beta, ..pricing },
                cluster,
                placement: None,
            });
            labels.push((x, policy, beta));
        }
    }
    let results = run_all(&specs, tick)?;
    Ok(labels
        .into_iter()
        .zip(results)
        .map(|((x, policy, beta), r)| Point {
            study: study.study.to_string(),
            x,
            policy: policy.to_string(),
            beta,
            qos_satisfaction: r.metrics.qos_satisfaction,
            profitability: r.metrics.profitability,
            accepted: r.metrics.accepted,
            completed_in_time: r.metrics.completed_in_time,
            mean_wait: r.metrics.mean_wait,
            mean_bounded_slowdown: r.metrics.mean_bounded_slowdown,
            utilisation: r.metrics.utilisation,
        })
        .collect())
}

/// How many runs a study makes (for a progress bar).
pub fn run_count(study: &Study) -> usize {
    study.xs.len() * study.series.len()
}
