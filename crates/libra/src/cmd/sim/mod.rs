//! `libra sim`: replay workloads through the policies, reproduce the papers, benchmark.

mod aims;
mod bench;
mod cores;
mod experiment;
mod load;
mod output;
mod run;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Simulate one workload under one policy or all of them and print the metrics.
    ///
    /// The workload is an SWF trace with the Libra+$ QoS model (--trace), an explicit job list
    /// (--jobs), or one of the Libra paper's batches (--batch). On a terminal, a bar on
    /// standard error counts the jobs arrived in every run and the runs finished; once every
    /// job has arrived it says the runs are finishing the jobs still running.
    ///
    /// Example: libra sim run --trace ../shared/traces/SDSC-SP2-1998-4.2-cln.swf.gz --policy all
    Run(run::RunArgs),
    /// Run a named reproduction of a table or figure of the papers; writes CSV, JSON, a
    /// Markdown table and SVG plots to --out.
    Experiment(experiment::ExperimentArgs),
    /// Benchmark the simulator: the full SDSC SP2 trace under every policy and a synthetic
    /// million-job trace on 10,000 nodes; prints wall time, jobs per second and peak memory.
    ///
    /// With --aims: the simulator's speed aims measured side by side in rounds and judged (met or
    /// not), each time-shared run timed again with its own decisions replayed (the engine alone).
    ///
    /// Example: libra sim bench --aims --rounds 3 --million
    Bench(bench::BenchArgs),
    /// (internal) one benchmark case in a fresh process, so peak memory is its own.
    #[command(hide = true)]
    BenchOne(bench::BenchOneArgs),
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Run(a) => run::run(a),
        SimCommand::Experiment(a) => experiment::run(a),
        SimCommand::Bench(a) => bench::run(a),
        SimCommand::BenchOne(a) => bench::run_one(a),
    }
}
