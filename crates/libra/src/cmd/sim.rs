//! `libra sim`: the simulator front end.

use clap::Args;

#[derive(Debug, Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("libra sim: not built yet")
}
