//! What Slurm users reach for every day: the cluster's queue (`squeue`), changing a job's
//! deadline or budget (`scontrol update`), holding and releasing it (`scontrol hold/release`)
//! and filtered history (`sacct`).

use crate::{Client, ClientError, JobInfo, JobState};
use libra_core::Money;
use serde::{Deserialize, Serialize};

/// The name shown instead of another user's (and their job's name and command) to a caller who
/// is not an administrator.
pub const ANONYMOUS: &str = "other";

/// One unfinished job in the cluster's queue. Another user's job shows as `other`, with no name,
/// command or money, unless the caller is an administrator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueEntry {
    pub id: u64,
    /// The owner's name, or `other`.
    pub user: String,
    /// Whether the caller owns the job.
    pub mine: bool,
    pub name: Option<String>,
    /// Empty for another user's job.
    pub command: Vec<String>,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub procs: u32,
    /// CPUs per node the job was admitted with.
    pub share: f64,
    pub submit_time: f64,
    pub start_time: Option<f64>,
    pub deadline_at: f64,
    /// What is held for it (the caller's own jobs, or any for an administrator).
    #[serde(rename = "cost_cents", default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Money>,
    #[serde(rename = "budget_cents", default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Money>,
    /// See `JobInfo`: the array and task id of an array task (shown `ARRAY_TASK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task: Option<u32>,
    /// PENDING and waiting for its dependencies to end (`--dependency`); which ones is shown
    /// only to its owner (`libra status`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
}

/// `GET /api/queue` filters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueQuery {
    /// Only this user's jobs (an administrator's, or the caller's own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only jobs in this state (PENDING, RUNNING, SUSPENDED, HELD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only jobs on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// `POST /api/jobs/{id}/update`: a new deadline (absolute, Unix seconds) and/or budget.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<f64>,
    #[serde(rename = "budget_cents", alias = "budget", default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Money>,
}

/// What would be accepted now instead of a refused change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangeSuggestion {
    pub deadline_at: f64,
    #[serde(rename = "budget_cents")]
    pub budget: Money,
}

/// The answer to an update or a release: accepted (the job holds the new promise, at `job.cost`,
/// held from the owner's credit) or refused (why, what would be accepted now; an update leaves
/// the job's old promise as it was, a refused release leaves the job held).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangeAnswer {
    pub accepted: bool,
    pub reason: Option<String>,
    pub suggestion: Option<ChangeSuggestion>,
    /// What was held for the job before.
    #[serde(rename = "previous_cost_cents")]
    pub previous_cost: Money,
    pub job: JobInfo,
}

/// `GET /api/history` filters (sacct's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryQuery {
    /// Jobs still unfinished or ended at or after this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// Jobs submitted at or before this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Another user's jobs (administrators only); `all` for everyone's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `(key, value)` pairs of a query's set fields, for a query string.
fn pairs<T: Serialize>(q: &T) -> Vec<(String, String)> {
    let v = serde_json::to_value(q).unwrap_or_default();
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect()
        })
        .unwrap_or_default()
}

impl Client {
    /// Every unfinished job in the cluster, soonest deadline first.
    pub fn queue(&self, q: &QueueQuery) -> Result<Vec<QueueEntry>, ClientError> {
        self.get_query("/api/queue", &pairs(q))
    }

    pub fn update(&self, id: u64, req: &UpdateRequest) -> Result<ChangeAnswer, ClientError> {
        self.post(&format!("/api/jobs/{id}/update"), req)
    }

    pub fn hold(&self, id: u64) -> Result<JobInfo, ClientError> {
        self.post_action(&format!("/api/jobs/{id}/hold"))
    }

    pub fn release(&self, id: u64) -> Result<ChangeAnswer, ClientError> {
        self.post_action(&format!("/api/jobs/{id}/release"))
    }

    /// Jobs filtered on the server, oldest first.
    pub fn history(&self, q: &HistoryQuery) -> Result<Vec<JobInfo>, ClientError> {
        self.get_query("/api/history", &pairs(q))
    }
}
