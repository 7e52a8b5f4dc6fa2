//! `libra sweep`: the broker front end. One module per subcommand.

mod bench;
mod check;
mod experiment;
mod output;
mod remote;
mod results;
mod run;
mod simulate;
mod status;
mod steer;

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Run parameter sweeps (Nimrod/G plan files) across priced resources under a deadline and a
/// budget, and watch or steer them from any shell.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The broker database (default: broker.db in the data directory: LIBRA_DATA_DIR, else
    /// libra/ in the user's data directory, as for every other command).
    #[arg(long, global = true, env = "LIBRA_BROKER_DB")]
    pub db: Option<PathBuf>,
    /// A Libra server that hosts the sweep (e.g. http://127.0.0.1:7878): run, status, results
    /// and the steering commands go through its API instead of the local database.
    #[arg(long, global = true)]
    pub server: Option<String>,
    /// A file holding the API token for --server (default: LIBRA_TOKEN, else the one saved by
    /// `libra login` for that server).
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Refused: a token on the command line is readable by every user of the machine.
    #[arg(long, global = true, hide = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: SweepCommand,
}

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Validate a plan file and show how many jobs it makes and the first few.
    Check(check::CheckArgs),
    /// Start a sweep: plan, resources, deadline, budget, what to optimise.
    Run(run::RunArgs),
    /// Resume a sweep after a crash, or unpause it (runs the engine here if none is alive).
    Resume(steer::ExpArgs),
    /// Progress of one sweep (or a list of all): jobs per resource, money spent and held.
    Status(status::StatusArgs),
    /// Each job's parameters, state, resource, cost and output directory.
    Results(results::ResultsArgs),
    /// Run the failed jobs of a sweep again.
    Rerun(run::RerunArgs),
    /// Move a sweep's deadline (from now: 90m, 2h, 3600s; or a time: 2026-11-22T21:00:00Z).
    SetDeadline(steer::DeadlineArgs),
    /// Change a sweep's budget (credits, e.g. 396000 or 12.50).
    SetBudget(steer::BudgetArgs),
    /// Stop starting new jobs (running ones finish).
    Pause(steer::ExpArgs),
    /// Stop the sweep: running jobs are stopped and pay for the CPU they used, pending ones
    /// are cancelled.
    ///
    /// A local job gets SIGTERM, then SIGKILL from its keeper if it still runs 3 s later (the
    /// keeper records the CPU it used, which is paid, as for one that ends on the SIGTERM;
    /// what still runs 5 s after the cancel, keeper and all, is killed unpaid). A job on a
    /// Libra cluster is cancelled there, which charges the CPU it used to its kill (the cancel
    /// waits up to 6 s for its node to report it, so that the sweep pays what the cluster
    /// charged). A Slurm job is scancelled, and pays for the CPU its keeper recorded. With no
    /// engine running (it was killed), the command opens one to find what the last one left
    /// running and stops it the same way.
    Cancel(steer::ExpArgs),
    /// Reproduce the seed's experiments on virtual time (table17.4, table17.6).
    Experiment(experiment::ExperimentArgs),
    /// Run a plan over test queues on virtual time: instant, deterministic, nothing recorded.
    Simulate(simulate::SimulateArgs),
    /// Trivial jobs through the engine and the local resource, beside xargs -P.
    Bench(bench::BenchArgs),
    /// Run one local attempt of a sweep on its own and record its outcome in its directory
    /// (what the engine starts each local job through, so that the job outlives a crashed
    /// engine; not for direct use).
    #[command(hide = true)]
    KeepAttempt(KeepArgs),
}

#[derive(Debug, clap::Args)]
pub struct KeepArgs {
    /// The attempt's directory, holding what to run.
    pub dir: PathBuf,
}

impl SweepArgs {
    /// Whether the command runs a sweep's engine here (see `cmd::quiet_on_closed_stdout`).
    pub fn runs_engine(&self) -> bool {
        use SweepCommand::*;
        self.server.is_none()
            && matches!(self.command, Run(_) | Resume(_) | Rerun(_) | Bench(_) | KeepAttempt(_))
    }
}

/// A sweep's budget on the command line: an amount of credits, zero or more. A negative one is
/// refused by its flag before anything is read or recorded (`sweep simulate` planned with one).
pub(crate) fn parse_budget(s: &str) -> Result<libra_core::Money, String> {
    let m: libra_core::Money = s.parse().map_err(|e: libra_core::money::MoneyError| e.to_string())?;
    if m.is_negative() {
        return Err(format!("'{s}' is negative: a budget is zero or more credits, e.g. 500 or 12.50"));
    }
    // The range every budget is held to, a job's and a sweep's alike.
    libra_core::job::check_budget(m).map_err(|e| e.to_string())?;
    Ok(m)
}

impl SweepCommand {
    /// The sweep a command is about, for the commands that act on one already made.
    fn named_sweep(&self) -> Option<i64> {
        use SweepCommand::*;
        match self {
            Resume(a) | Pause(a) | Cancel(a) => Some(a.exp),
            Status(a) => a.exp,
            Results(a) => Some(a.exp),
            Rerun(a) => Some(a.exp),
            SetDeadline(a) => Some(a.exp),
            SetBudget(a) => Some(a.exp),
            Check(_) | Run(_) | Experiment(_) | Simulate(_) | Bench(_) | KeepAttempt(_) => None,
        }
    }
}

pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    if let Some(server) = args.server {
        return remote::run(server, args.token, args.token_file, args.command);
    }
    let db = match args.db {
        Some(db) => db,
        None => crate::cmd::cluster::common::data_dir()?.join("broker.db"),
    };
    // A command about a sweep already made never makes the database: a --db with a typo left an
    // empty file behind and said there was no such sweep "in the broker database".
    if let Some(exp) = args.command.named_sweep() {
        if !db.exists() {
            anyhow::bail!(
                "no sweep {exp}: there is no broker database at {} (`libra sweep run` makes it; --db or LIBRA_BROKER_DB names another)",
                db.display()
            );
        }
    }
    match args.command {
        SweepCommand::Check(a) => check::run(a),
        SweepCommand::Run(a) => run::run(&db, a),
        SweepCommand::Resume(a) => steer::resume(&db, a),
        SweepCommand::Status(a) => status::run(&db, a),
        SweepCommand::Results(a) => results::run(&db, a),
        SweepCommand::Rerun(a) => run::rerun(&db, a),
        SweepCommand::SetDeadline(a) => steer::set_deadline(&db, a),
        SweepCommand::SetBudget(a) => steer::set_budget(&db, a),
        SweepCommand::Pause(a) => steer::pause(&db, a),
        SweepCommand::Cancel(a) => steer::cancel(&db, a),
        SweepCommand::Experiment(a) => experiment::run(a),
        SweepCommand::Simulate(a) => simulate::run(a),
        SweepCommand::Bench(a) => bench::run(a),
        SweepCommand::KeepAttempt(a) => {
            std::process::exit(libra_broker::adapter::local::keep_attempt(&a.dir))
        }
    }
}
