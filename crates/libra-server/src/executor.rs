//! The executor boundary: what carries out the scheduler's decisions on the nodes.
//!
//! The scheduler decides (admission, prices, shares) and records its decisions in the store;
//! an executor makes them happen: it starts admitted jobs, stops cancelled ones, suspends and
//! resumes, and brings back progress and exits. Two executors exist, chosen by the server's
//! configuration (`[executor] kind`):
//!
//! - `libra` (`Agents`): Libra's own node agents pull their work in the sync exchange
//!   (`nodes.rs`: a reconciliation, the agent says what it runs, the server answers with start,
//!   kill, suspend and resume) and launch the jobs themselves.
//! - `slurm` (`slurm::Slurm`): each admitted job is handed to Slurm (`sbatch` as its owner, on
//!   the node the policy chose), cancelled with `scancel`, suspended with `scontrol`. The agents
//!   beside slurmd (`libra node --slurm`) keep the same sync exchange, but adopt the job Slurm
//!   started instead of launching it, and Slurm's completion record (jobcomp) joins their CPU
//!   figure to settle the job.
//!
//! The rest of the server sees only this module's surface: `App::changed` after any decision
//! an executor must carry out, and the limits (`ExecLimits`) admission must respect.

use crate::app::App;
use crate::config::{ExecutorConfig, ExecutorKind};
use crate::error::ApiError;
use crate::settle::{parts_ending, settle_job};
use std::sync::Arc;

pub mod slurm;

/// What admission and the agent exchange must know of the executor in force.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ExecLimits {
    /// The executor launches jobs itself (Slurm): a node's agent is given a job to adopt only
    /// once the executor has it, and a job has ended only once the executor says so too.
    pub launches_itself: bool,
    /// The most jobs a node runs at once (None: only the policy's own limits).
    pub jobs_per_node: Option<usize>,
    /// Memory a job that asked for none is given, MB (0: none; the policy ignores memory).
    pub default_mem_mb: u64,
}

/// An executor: carries out the decisions the scheduler committed to the store.
pub trait Executor: Send + Sync + 'static {
    fn kind(&self) -> ExecutorKind;

    fn limits(&self) -> ExecLimits;

    /// The store now says something else should run (a job admitted, cancelled, suspended,
    /// resumed, or settled): carry it out soon. Never blocks.
    fn changed(&self);

    /// The executor's own background work, if any (runs until the server stops).
    fn spawn(self: Arc<Self>, app: Arc<App>) -> Option<tokio::task::JoinHandle<()>>;
}

/// Libra's own node agents: everything goes through the sync exchange, which the server wakes
/// (`App::work`) on every change; there is nothing more to do here.
pub struct Agents;

impl Executor for Agents {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Libra
    }

    fn limits(&self) -> ExecLimits {
        ExecLimits::default()
    }

    fn changed(&self) {}

    fn spawn(self: Arc<Self>, _app: Arc<App>) -> Option<tokio::task::JoinHandle<()>> {
        None
    }
}

/// The executor the configuration asks for.
pub fn build(config: &ExecutorConfig) -> Arc<dyn Executor> {
    match config.kind {
        ExecutorKind::Libra => Arc::new(Agents),
        ExecutorKind::Slurm => Arc::new(slurm::Slurm::new(config.clone())),
    }
}

impl crate::app::Inner {
    /// The executor could not start `job` (it refused it): the job fails with `error`, charged
    /// nothing (it used no CPU), its hold released.
    pub fn executor_refused(&mut self, job: u64, error: &str, now: f64) -> Result<bool, ApiError> {
        let tx = self.db.transaction()?;
        let n = crate::store::jobs::refused_by_executor(&tx, job, error, now)?;
        let mut settled = None;
        if n > 0 {
            if let Some((ending, reason)) = parts_ending(&tx, job, now)? {
                settled = settle_job(&tx, job, ending, reason, now)?;
            }
        }
        tx.commit()?;
        if let Some(s) = &settled {
            self.settled(s)?;
        }
        Ok(settled.is_some())
    }
}
