//! Steering through the database: any process may change a running sweep.

use super::output::open;
use super::run::drive;
use crate::cmd::time::deadline_from_now;
use crate::cmd::time::now;
use crate::output::{emit, Said};
use clap::Args;
use libra_broker::engine::live_engine;
use libra_broker::state::ExperimentState;
use libra_core::Money;
use std::path::Path;

#[derive(Debug, Args)]
pub struct ExpArgs {
    /// The experiment id (see `libra sweep status`).
    pub exp: i64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DeadlineArgs {
    /// The experiment id.
    pub exp: i64,
    /// The new deadline: from now (3600, 90m, 2h) or a time (2026-11-22T21:00:00Z, 2026-11-22
    /// 21:00 UTC, @UNIXSECONDS).
    #[arg(value_parser = deadline_from_now)]
    pub deadline: f64,
    /// Print JSON instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The experiment id.
    pub exp: i64,
    /// The new budget in credits.
    #[arg(value_parser = super::parse_budget)]
    pub budget: Money,
    /// Print JSON instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

/// Prints what a steering command did: a sentence, or the experiment's new settings as JSON.
fn report(store: &libra_broker::store::Store, exp: i64, json: bool, sentence: String) -> anyhow::Result<()> {
    // `resume` runs an engine, but not when all it does is say so.
    crate::cmd::quiet_on_closed_stdout();
    let e = store.experiment(exp)?;
    let settings = serde_json::json!({
        "experiment": exp, "state": e.state, "budget_cents": e.budget,
        "deadline_in_s": e.deadline - now(),
    });
    emit(&Said::new(&settings, sentence), json)
}

pub fn set_deadline(db: &Path, a: DeadlineArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    store.set_deadline(a.exp, now() + a.deadline)?;
    report(&store, a.exp, a.json, format!("sweep {}: deadline in {:.0} s", a.exp, a.deadline))
}

pub fn set_budget(db: &Path, a: BudgetArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    store.set_budget(a.exp, a.budget)?;
    report(&store, a.exp, a.json, format!("sweep {}: budget {}", a.exp, a.budget))
}

pub fn pause(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    store.set_state(a.exp, ExperimentState::Paused, None)?;
    report(
        &store,
        a.exp,
        a.json,
        format!("sweep {}: paused (running jobs finish; `libra sweep resume {}` continues)", a.exp, a.exp),
    )
}

pub fn cancel(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let e = store.experiment(a.exp)?;
    if live_engine(&e, now()).is_some() {
        // The live engine kills the running jobs and records the cancellation.
        store.set_state(a.exp, ExperimentState::Cancelled, None)?;
    } else if (!e.state.is_final() || (e.state == ExperimentState::Cancelled && e.finished.is_none()))
        && store.counts(a.exp)?.running > 0
    {
        // No engine, and jobs it left running (local jobs under keepers that outlive it, jobs on
        // a Libra cluster or under Slurm): an engine opened here takes them up and stops them,
        // paying what they cost, as a live engine's cancel does.
        drop(store);
        if let Err(err) = super::run::stop_here(db, a.exp) {
            if let Some(stranded @ libra_broker::engine::EngineError::Stranded { .. }) = err.downcast_ref() {
                // Its jobs there cannot be stopped from here yet: the sweep is marked cancelled,
                // unfinished (nothing more starts; the next cancel takes them up), and what runs
                // under local keepers is stopped (their keepers record how it ended).
                let store = open(db)?;
                store.set_state(a.exp, ExperimentState::Cancelled, None)?;
                let work = std::path::PathBuf::from(store.experiment(a.exp)?.work_dir);
                let own = libra_broker::engine::sweep_key(&store, a.exp, &work)?;
                let keepers: Vec<_> = store
                    .running_attempts(a.exp)?
                    .iter()
                    .map(|r| {
                        (
                            std::path::PathBuf::from(&r.dir),
                            libra_broker::engine::attempt_key(&work, &own, r.id),
                        )
                    })
                    .collect();
                libra_broker::adapter::local::stop_keepers(&keepers, libra_broker::engine::CANCEL_GRACE);
                anyhow::bail!(
                    "sweep {}: marked cancelled (nothing more starts), but not finished: {stranded}; or cancel them there by hand (`libra status`, `libra cancel`)",
                    a.exp
                );
            }
            eprintln!(
                "warning: sweep {}: {err:#}; its jobs are recorded as cancelled, and its local jobs stopped; \
                 any it had on a Libra cluster may still run there (`libra status`, `libra cancel`)",
                a.exp
            );
            let store = open(db)?;
            let keepers = libra_broker::engine::cancel_without_engine(&store, a.exp, now())?;
            libra_broker::adapter::local::stop_keepers(&keepers, libra_broker::engine::CANCEL_GRACE);
        }
        return report(&open(db)?, a.exp, a.json, format!("sweep {}: cancelled", a.exp));
    } else {
        // No engine: a local job's keeper may still run it; it is stopped too.
        let keepers = libra_broker::engine::cancel_without_engine(&store, a.exp, now())?;
        libra_broker::adapter::local::stop_keepers(&keepers, libra_broker::engine::CANCEL_GRACE);
    }
    report(&store, a.exp, a.json, format!("sweep {}: cancelled", a.exp))
}

/// Unpauses; if no engine is alive for the sweep (it was killed, or never started), runs it
/// here, resuming where the database says it was.
pub fn resume(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let e = store.experiment(a.exp)?;
    if e.state == "done" || e.state == "cancelled" {
        return report(&store, a.exp, a.json, format!("sweep {}: already {}", a.exp, e.state));
    }
    store.set_state(a.exp, ExperimentState::Running, None)?;
    if let Some((pid, _)) = live_engine(&e, now()) {
        return report(&store, a.exp, a.json, format!("sweep {}: resumed (engine process {pid})", a.exp));
    }
    drop(store);
    drive(db, a.exp, a.json)
}
