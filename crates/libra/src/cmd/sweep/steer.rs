//! Steering through the database: any process may change a running sweep.

use super::output::{open, parse_duration};
use super::run::drive;
use clap::Args;
use libra_broker::engine::{live_engine, now_unix};
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
    pub exp: i64,
    /// The new deadline as a duration from now: 3600, 90m, 2h.
    #[arg(value_parser = parse_duration)]
    pub deadline: f64,
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    pub exp: i64,
    /// The new budget in credits.
    pub budget: Money,
}

pub fn set_deadline(db: &Path, a: DeadlineArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    store.set_deadline(a.exp, now_unix() + a.deadline)?;
    println!("experiment {}: deadline in {:.0} s", a.exp, a.deadline);
    Ok(())
}

pub fn set_budget(db: &Path, a: BudgetArgs) -> anyhow::Result<()> {
    if a.budget.is_negative() {
        anyhow::bail!("budget: must not be negative");
    }
    let store = open(db)?;
    store.set_budget(a.exp, a.budget)?;
    println!("experiment {}: budget {}", a.exp, a.budget);
    Ok(())
}

pub fn pause(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    store.set_state(a.exp, "paused", None)?;
    println!("experiment {}: paused (running jobs finish; `libra sweep resume {}` continues)", a.exp, a.exp);
    Ok(())
}

pub fn cancel(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let e = store.experiment(a.exp)?;
    if live_engine(&e, now_unix()).is_some() {
        // The live engine kills the running jobs and records the cancellation.
        store.set_state(a.exp, "cancelled", None)?;
    } else {
        store.begin()?;
        for at in store.running_attempts(a.exp)? {
            store.lose_attempt(&at, now_unix(), "cancelled")?;
        }
        store.cancel_pending(a.exp)?;
        store.set_state(a.exp, "cancelled", Some(now_unix()))?;
        store.commit()?;
    }
    println!("experiment {}: cancelled", a.exp);
    Ok(())
}

/// Unpauses; if no engine is alive for the sweep (it was killed, or never started), runs it
/// here, resuming where the database says it was.
pub fn resume(db: &Path, a: ExpArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let e = store.experiment(a.exp)?;
    if e.state == "done" || e.state == "cancelled" {
        println!("experiment {}: already {}", a.exp, e.state);
        return Ok(());
    }
    store.set_state(a.exp, "running", None)?;
    if let Some((pid, _)) = live_engine(&e, now_unix()) {
        println!("experiment {}: resumed (engine process {pid})", a.exp);
        return Ok(());
    }
    drop(store);
    drive(db, a.exp, a.json)
}
