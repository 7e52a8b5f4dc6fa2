//! Sweeps hosted by a server: the broker's experiments, created, watched and steered through
//! the API. Money is integer cents (fields named `*_cents`); times are Unix seconds (the
//! server's clock, which every answer carries as `now` so that a client can show "in 5 min"
//! without trusting its own).

use libra_core::Money;
use serde::{Deserialize, Serialize};

/// `POST /api/sweeps`: a plan and a resources file, as text, with the sweep's deadline and
/// budget. Give the deadline either as Unix seconds (`deadline`) or as seconds from now
/// (`deadline_in`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepCreate {
    /// The plan (Nimrod/G syntax).
    pub plan: String,
    /// The resources file (TOML, one `[[resource]]` per resource).
    pub resources: String,
    /// A name to show (default "sweep").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_in: Option<f64>,
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
    /// cost, time, conservative, cost-time, nimrod-cost, nimrod-time, nimrod-conservative
    /// (default cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimise: Option<String>,
    /// How many times a failed job is retried (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Expected wall seconds of one job before calibration has measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<f64>,
    /// Seed for `random` parameters.
    #[serde(default)]
    pub seed: u64,
}

/// Jobs of a sweep by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepCounts {
    pub total: u64,
    pub pending: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// One resource of a sweep and what it has done. (A resource's token is never sent back.)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepResource {
    pub name: String,
    /// local, testqueue, libra or slurm.
    pub kind: String,
    pub slots: u32,
    /// Credits per CPU-second now.
    pub price: f64,
    pub done: u64,
    pub failed: u64,
    pub running: u64,
    #[serde(rename = "spent_cents", alias = "spent")]
    pub spent: Money,
    /// Measured wall seconds per successful job.
    pub secs_per_job: Option<f64>,
    /// Why the resource refused the sweep's last job, when it did (its latest attempt was
    /// refused): what a sweep that makes no progress there waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// When it refused it (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_at: Option<f64>,
}

/// A sweep: progress, money, time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepInfo {
    pub id: i64,
    pub name: String,
    /// The user who created it: only they and administrators may see or steer it.
    pub owner: String,
    /// running, paused, stalled (nothing more can start within the deadline and budget),
    /// done or cancelled.
    pub state: String,
    pub optimise: String,
    pub created: f64,
    pub finished: Option<f64>,
    pub deadline: f64,
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
    /// Paid for finished jobs.
    #[serde(rename = "spent_cents", alias = "spent")]
    pub spent: Money,
    /// Held (committed) for running jobs.
    #[serde(rename = "held_cents", alias = "held")]
    pub held: Money,
    pub jobs: SweepCounts,
    /// When the sweep should end at the pace so far (none before the first job is done).
    pub projected_finish: Option<f64>,
    pub resources: Vec<SweepResource>,
    /// The server's clock when it answered.
    pub now: f64,
    /// Why the sweep's engine is not making progress now, when the server knows (its disk is
    /// full, say); absent while it runs as it should.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// `GET /api/sweeps/{id}/usage`: jobs in execution per resource over time, a step function:
/// from `points[k].t` until the next point, `points[k].running[r]` jobs ran on resource `r`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepUsage {
    pub id: i64,
    pub resources: Vec<String>,
    pub start: f64,
    pub points: Vec<SweepUsagePoint>,
    pub now: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepUsagePoint {
    pub t: f64,
    pub running: Vec<u32>,
}

/// One job of a sweep (`GET /api/sweeps/{id}/results`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepJob {
    /// From 1, as the plan's `$jobname`.
    pub job: u64,
    pub params: serde_json::Value,
    pub state: String,
    pub resource: Option<String>,
    pub attempts: u32,
    pub exit_code: Option<i32>,
    pub wall: Option<f64>,
    #[serde(rename = "cost_cents", alias = "cost")]
    pub cost: Money,
    /// The last attempt's directory on the server.
    pub output: Option<String>,
    pub files: Vec<String>,
}

/// `POST /api/sweeps/{id}/deadline`: Unix seconds, or seconds from now.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepDeadline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_in: Option<f64>,
}

/// `POST /api/sweeps/{id}/budget`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepBudget {
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
}
