//! The evaluation metrics: Job QoS Satisfaction (Libra+$ eq. 7), Cluster Profitability (eq. 8),
//! and the system-centric ones (jobs completed in time, mean wait, mean bounded slowdown,
//! utilisation).

use crate::Money;
use serde::{Deserialize, Serialize};

/// A job finishing within this many seconds after its deadline counts as on time: float rounding
/// of proportional-share progress must not turn an exact finish into a miss.
pub const DEADLINE_EPS: f64 = 1e-3;

/// The threshold of bounded slowdown (seconds): short jobs do not dominate the mean.
pub const SLOWDOWN_BOUND: f64 = 10.0;

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub job: u64,
    pub submit: f64,
    pub deadline_abs: f64,
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
    /// Actual runtime on a dedicated processor.
    pub runtime: f64,
    pub procs: u32,
    /// Accepted (time-shared) or started (space-shared).
    pub accepted: bool,
    pub start: Option<f64>,
    pub finish: Option<f64>,
    /// The price quoted at acceptance (charged only if the QoS is met).
    #[serde(rename = "cost_cents", alias = "cost")]
    pub cost: Money,
}

impl Outcome {
    pub fn met_deadline(&self) -> bool {
        self.finish.is_some_and(|f| f <= self.deadline_abs + DEADLINE_EPS)
    }

    /// Eq. (7)'s condition: accepted, finished by the deadline, and charged within the budget.
    pub fn qos_satisfied(&self) -> bool {
        self.accepted && self.met_deadline() && self.cost <= self.budget
    }

    /// What the user is charged: the quoted cost when the QoS is met, nothing otherwise.
    pub fn charged(&self) -> Money {
        if self.qos_satisfied() {
            self.cost
        } else {
            Money::ZERO
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub jobs: usize,
    pub accepted: usize,
    pub rejected: usize,
    /// Jobs that finished by their deadline (whatever the budget).
    pub completed_in_time: usize,
    pub qos_satisfied: usize,
    /// Eq. (7): n_QoS / n.
    pub qos_satisfaction: f64,
    /// Eq. (8): sum of costs of QoS-satisfied jobs / sum of all budgets.
    pub profitability: f64,
    #[serde(rename = "revenue_cents", alias = "revenue")]
    pub revenue: Money,
    /// Mean seconds from submission to start over started jobs.
    pub mean_wait: f64,
    /// Mean of max(1, response / max(runtime, 10 s)) over finished jobs.
    pub mean_bounded_slowdown: f64,
    /// Processor-seconds of finished work over processor-seconds available from the first
    /// submission to the last finish.
    pub utilisation: f64,
    /// Seconds from the first submission to the last finish.
    #[serde(default)]
    pub makespan: f64,
}

impl Metrics {
    /// The figures of `outcomes` (a slice, or the outcomes of a run's records read in place:
    /// any iterator that can be gone through more than once).
    pub fn compute<'a, I>(outcomes: I, nodes: usize) -> Metrics
    where
        I: IntoIterator<Item = &'a Outcome>,
        I::IntoIter: Clone,
    {
        let outcomes = outcomes.into_iter();
        let jobs = outcomes.clone().count();
        let accepted = outcomes.clone().filter(|o| o.accepted).count();
        let completed_in_time = outcomes.clone().filter(|o| o.met_deadline()).count();
        let qos_satisfied = outcomes.clone().filter(|o| o.qos_satisfied()).count();
        let revenue: Money = outcomes.clone().map(Outcome::charged).sum();
        let budgets: Money = outcomes.clone().map(|o| o.budget).sum();
        let waits: Vec<f64> = outcomes.clone().filter_map(|o| o.start.map(|s| s - o.submit)).collect();
        let slowdowns: Vec<f64> = outcomes
            .clone()
            .filter_map(|o| o.finish.map(|f| ((f - o.submit) / o.runtime.max(SLOWDOWN_BOUND)).max(1.0)))
            .collect();
        let work: f64 =
            outcomes.clone().filter(|o| o.finish.is_some()).map(|o| o.runtime * o.procs as f64).sum();
        let first = outcomes.clone().map(|o| o.submit).fold(f64::INFINITY, f64::min);
        let last = outcomes.clone().filter_map(|o| o.finish).fold(f64::NEG_INFINITY, f64::max);
        let span = last - first;
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        Metrics {
            jobs,
            accepted,
            rejected: jobs - accepted,
            completed_in_time,
            qos_satisfied,
            qos_satisfaction: if jobs == 0 { 0.0 } else { qos_satisfied as f64 / jobs as f64 },
            profitability: if budgets.cents() <= 0 {
                0.0
            } else {
                revenue.cents() as f64 / budgets.cents() as f64
            },
            revenue,
            mean_wait: mean(&waits),
            mean_bounded_slowdown: mean(&slowdowns),
            utilisation: if span > 0.0 && nodes > 0 { work / (span * nodes as f64) } else { 0.0 },
            makespan: span.max(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(accepted: bool, finish: Option<f64>, cost: i64, budget: i64) -> Outcome {
        Outcome {
            job: 0,
            submit: 0.0,
            deadline_abs: 100.0,
            budget: Money(budget),
            runtime: 50.0,
            procs: 1,
            accepted,
            start: finish.map(|_| 0.0),
            finish,
            cost: Money(cost),
        }
    }

    #[test]
    fn qos_and_profit_by_hand() {
        let outs = vec![
            o(true, Some(90.0), 40, 100),   // satisfied, pays 40
            o(true, Some(120.0), 40, 100),  // late: not satisfied, pays nothing
            o(false, None, 0, 100),         // rejected
            o(true, Some(100.0), 150, 100), // over budget: not satisfied
        ];
        let m = Metrics::compute(&outs, 1);
        assert_eq!(m.qos_satisfied, 1);
        assert_eq!(m.completed_in_time, 2);
        assert!((m.qos_satisfaction - 0.25).abs() < 1e-12);
        assert!((m.profitability - 40.0 / 400.0).abs() < 1e-12);
        assert_eq!(m.revenue, Money(40));
        assert_eq!(m.rejected, 1);
        // Slowdowns: 90/50, 120/50, 100/50.
        assert!((m.mean_bounded_slowdown - (1.8 + 2.4 + 2.0) / 3.0).abs() < 1e-12);
        // 150 processor-seconds over 120 s on one node.
        assert!((m.utilisation - 150.0 / 120.0).abs() < 1e-12);
    }
}
