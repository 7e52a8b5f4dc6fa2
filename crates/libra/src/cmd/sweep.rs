//! `libra sweep`: the broker front end.

use clap::Args;

#[derive(Debug, Args)]
pub struct SweepArgs {}

pub fn run(_args: SweepArgs) -> anyhow::Result<()> {
    anyhow::bail!("libra sweep: not built yet")
}
