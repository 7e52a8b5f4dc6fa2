//! The running cluster: `libra server`, `libra node`, `libra up` and the user and administrator
//! commands.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Run a CPU-bound busy loop for the given CPU seconds (a test job).
    Burn {
        /// CPU seconds to burn.
        #[arg(long)]
        cpu_seconds: f64,
    },
}

pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Burn { .. } => anyhow::bail!("libra burn: not built yet"),
    }
}
