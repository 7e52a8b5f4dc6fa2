//! `libra`: the one binary in front of the scheduler core, the simulator, the broker and the
//! running cluster. Each command lives in its own module under `cmd/`.

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};

/// Libra: an economy-driven resource manager.
///
/// Users submit jobs with a runtime estimate, a deadline and a budget; the cluster admits a job
/// only if it can keep every promise it has made, prices it by supply and demand, enforces CPU
/// shares so that admitted jobs meet their deadlines, and never charges above the budget.
#[derive(Debug, Parser)]
#[command(name = "libra", version, about, long_about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay workloads through the scheduling policies (simulator, experiments, benchmarks).
    Sim(cmd::sim::SimArgs),
    /// Run parameter sweeps under a deadline and a budget (the Nimrod/G broker).
    Sweep(cmd::sweep::SweepArgs),
    #[command(flatten)]
    Cluster(cmd::cluster::ClusterCommand),
}

impl Command {
    /// Whether the command serves or runs work (a server, a node agent, a sweep's engine) rather
    /// than only printing: such a command keeps SIGPIPE ignored (`cmd::quiet_on_closed_stdout`).
    fn serves(&self) -> bool {
        match self {
            Command::Sim(_) => false,
            Command::Sweep(a) => a.runs_engine(),
            Command::Cluster(c) => c.serves(),
        }
    }
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if !cli.command.serves() {
        cmd::quiet_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Sim(args) => cmd::sim::run(args),
        Command::Sweep(args) => cmd::sweep::run(args),
        Command::Cluster(c) => cmd::cluster::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The full command tree, for man pages and shell completions.
pub fn command_tree() -> clap::Command {
    Cli::command()
}
