//! The space-shared baselines (FIFO, FCFS/SJF/EDF with EASY backfilling) in the running
//! cluster: an accepted job waits in a queue with a lien on its whole budget; every scheduler
//! tick asks the policy which queued jobs start now (on idle nodes, the whole node each) and
//! which are dropped because their deadline can no longer be met (state DEADLINE, as Slurm
//! cancels pending jobs past `--deadline`). A started job's lien becomes its price.

use crate::app::{spec_of, Inner};
use crate::error::ApiError;
use crate::ledger;
use crate::store;
use libra_core::billing::Ending;
use libra_core::policy::{Dispatch, Queued};

impl Inner {
    /// Returns true when a job was started (the node agents have work).
    pub fn dispatch_queue(&mut self, now: f64) -> Result<bool, ApiError> {
        if !self.policy.space_shared() {
            return Ok(false);
        }
        let queued = store::jobs::queued(&self.db)?;
        if queued.is_empty() {
            return Ok(false);
        }
        let list: Vec<Queued> = queued.iter().map(|q| q.0.clone()).collect();
        let mut started = false;
        for d in self.policy.dispatch(&list, &self.cluster, now) {
            match d {
                Dispatch::Start { job, nodes, cost } => {
                    let Some((q, budget, mem)) = queued.iter().find(|q| q.0.job == job) else { continue };
                    if cost > *budget {
                        self.finish(
                            job,
                            Ending::Withdrawn,
                            Some(format!(
                                "budget: its price at dispatch, {cost}, is above the budget {budget}"
                            )),
                            now,
                        )?;
                        continue;
                    }
                    let names: Vec<String> = nodes.iter().map(|&i| self.node_name(i)).collect();
                    let share =
                        nodes.iter().map(|&i| self.cluster.node(i).spec.job_cap(1)).fold(1.0, f64::min);
                    let tx = self.db.transaction()?;
                    store::jobs::place(&tx, job, &names)?;
                    store::jobs::dispatched(&tx, job, cost, share)?;
                    ledger::reduce_hold(&tx, job, cost, now)?;
                    tx.commit()?;
                    let spec = spec_of(q.estimate, q.deadline_abs - q.submit, *budget, q.procs, *mem, 1);
                    if let Err(e) = self.cluster.commit_spec(job, &spec, q.submit, &nodes, now) {
                        tracing::error!(job, "cluster view refused the dispatch: {e}");
                    }
                    started = true;
                }
                Dispatch::Drop { job } => {
                    self.finish(
                        job,
                        Ending::NeverStarted,
                        Some("dropped from the queue: it can no longer start in time".into()),
                        now,
                    )?;
                }
            }
        }
        Ok(started)
    }
}
