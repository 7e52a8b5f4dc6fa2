//! `libra bench cluster`: see `bench_cluster`.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Submissions per second, admission latency, start latency, share error, `libra submit` time.
    Cluster,
}

pub fn run(a: BenchArgs) -> Result<()> {
    match a.what {
        BenchWhat::Cluster => bail!("not built yet"),
    }
}
