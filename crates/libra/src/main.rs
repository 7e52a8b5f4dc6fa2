//! `libra`: the one binary in front of the scheduler core, the simulator, the broker and the
//! running cluster. Each command lives in its own module under `cmd/`.

mod cmd;
mod cpu;
mod logging;
mod output;

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
    /// How log lines are written: text, or json (one object per line, with the job's id as a
    /// field on every line about a job). Beats log_format in a configuration file.
    #[arg(long, global = true, env = "LIBRA_LOG_FORMAT", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<libra_server::config::LogFormat>()))]
    pub log_format: Option<libra_server::config::LogFormat>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay workloads through the scheduling policies (simulator, experiments, benchmarks).
    Sim(cmd::sim::SimArgs),
    /// Run parameter sweeps under a deadline and a budget (the Nimrod/G broker).
    Sweep(cmd::sweep::SweepArgs),
    #[command(flatten)]
    Cluster(Box<cmd::cluster::ClusterCommand>),
}

impl Command {
    fn configures_logging(&self) -> bool {
        matches!(self, Command::Cluster(c) if c.configures_logging())
    }

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
    let cli = Cli::parse();
    logging::set_flag_format(cli.log_format);
    // The server and the node agent start logging once their configuration is read (its
    // log_level and log_format); everything else logs warnings now.
    if !cli.command.configures_logging() {
        let _ = logging::init("warn", cli.log_format.unwrap_or_default());
    }
    if !cli.command.serves() {
        cmd::quiet_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Sim(args) => cmd::sim::run(args),
        Command::Sweep(args) => cmd::sweep::run(args),
        Command::Cluster(c) => cmd::cluster::run(*c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::error_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The full command tree, for man pages and shell completions.
pub fn command_tree() -> clap::Command {
    Cli::command()
}
