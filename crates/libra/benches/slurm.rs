//! Issue 13's figures for Libra on Slurm, as a table: the latency `libra submit` adds over a
//! plain sbatch, the share error on Slurm nodes, and jobs per second through the front end.
//! Needs root and a writable cgroup v1 (it brings up the project's two-node Slurm test cluster
//! with `scripts/slurm-cluster.sh`, as the end-to-end tests do):
//!
//!     cargo bench -p libra --bench slurm
//!
//! The measurement is the end-to-end test file's own `slurm_figures`, on the same site set-up.

#[path = "../tests/slurm_cluster_e2e.rs"]
#[allow(dead_code, unused_imports)]
mod e2e;

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to choose between.
    e2e::slurm_figures();
}
