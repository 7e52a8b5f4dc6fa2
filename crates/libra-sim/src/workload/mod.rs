//! Workloads: what the simulator replays. Every source (SWF trace + QoS model, the Libra batches,
//! an explicit CSV job list, the synthetic benchmark trace) produces a `Vec<SimJob>` sorted by
//! submit time.

pub mod as_recorded;
pub mod jobs_csv;
pub mod libra_batches;
pub mod libraplus;
pub mod synthetic;

pub use jobs_csv::{read_jobs_csv, write_jobs_csv, JobsCsvError};
pub use libra_batches::LibraBatch;
pub use libraplus::{LibraPlusModel, ModelError};
pub use synthetic::SyntheticConfig;

use libra_core::Money;
use serde::{Deserialize, Serialize};

/// One job as the simulator sees it: what the user declared (estimate, deadline, budget) and
/// what really happens (runtime).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJob {
    /// Job number (from the trace or the CSV); unique within a workload.
    pub id: u64,
    /// Submission time, seconds from the start of the workload.
    pub submit: f64,
    /// Actual runtime in seconds on one dedicated processor (what the job really needs).
    pub runtime: f64,
    /// The user's runtime estimate in seconds (may be below `runtime`: under-estimates).
    pub estimate: f64,
    /// Processors (nodes) required.
    pub procs: u32,
    /// Deadline, seconds after `submit`.
    pub deadline: f64,
    /// Budget.
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
    /// User number.
    pub user: u32,
    /// High-urgency class in the Libra+$ model (for reporting only).
    #[serde(default)]
    pub urgent: bool,
}
