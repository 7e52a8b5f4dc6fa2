//! Named reproductions of the seeds' tables and figures. Each experiment is a list of runs
//! (workload x policy x parameters) executed in parallel; the results do not depend on the
//! thread count because every run is a pure function of its inputs.

pub mod beyond;
pub mod libraplus;
pub mod placement;
pub mod runner;
pub mod table1;

use serde::{Deserialize, Serialize};

/// One point of a figure: a policy's metrics at one x value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Which study the point belongs to (e.g. "arrival-delay").
    pub study: String,
    pub x: f64,
    pub policy: String,
    /// The Libra+$ beta the run used (every policy's run carries the setting, used or not).
    pub beta: f64,
    pub qos_satisfaction: f64,
    pub profitability: f64,
    pub accepted: usize,
    pub completed_in_time: usize,
    pub mean_wait: f64,
    pub mean_bounded_slowdown: f64,
    pub utilisation: f64,
}

impl Point {
    /// The label a plot's legend shows: Libra+$ runs are told apart by beta, except in the
    /// beta study, where beta is the x axis.
    pub fn series(&self) -> String {
        let priced =
            matches!(self.policy.as_str(), "libra+$" | "libra-edf" | "libra-risk" | "libra-risk-est");
        if priced && self.study != "beta" {
            format!("{} beta={}", self.policy, self.beta)
        } else {
            self.policy.clone()
        }
    }
}

/// The named experiments `libra sim experiment` knows.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("libra-table1", "Libra paper Table 1: jobs completed in time, Libra against PBS FIFO, 4 cells"),
    ("libraplus-fig2", "Libra+$ Fig. 2: arrival delay factor, all five policies"),
    ("libraplus-fig3", "Libra+$ Fig. 3: dynamic pricing factor beta"),
    ("libraplus-fig4", "Libra+$ Fig. 4: arrival delay factor for several beta"),
    ("libraplus-fig5", "Libra+$ Fig. 5: share of high-urgency jobs for several beta"),
    ("libraplus-fig6", "Libra+$ Fig. 6: runtime under-estimates for several beta"),
    ("beyond", "libra-edf, libra-risk and libra-risk-est against Libra, Libra+$ and EDF-BF (arrival delay, under-estimates)"),
    (
        "placement",
        "node choice under Libra+$ and Libra: best fit, least loaded, cheapest; QoS, profit, price paid",
    ),
];
