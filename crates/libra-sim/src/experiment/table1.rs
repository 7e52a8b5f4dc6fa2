//! Table 1 of the Libra paper: jobs completed in time by PBS's FIFO and by Libra, for the two
//! batches on 10 and 20 nodes. The batches are random; each cell is the mean over `seeds`
//! independent draws, with how many draws Libra beat FIFO.

use super::runner::{run_all, RunSpec};
use crate::engine::ClusterConfig;
use crate::workload::libra_batches::LibraBatch;
use libra_core::policy::PolicyError;
use libra_core::PricingParams;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The paper's numbers: (jobs, nodes, FIFO completed, Libra completed).
pub const PAPER: [(usize, usize, u32, u32); 4] =
    [(100, 10, 77, 86), (100, 20, 86, 90), (200, 10, 95, 102), (200, 20, 165, 177)];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub jobs: usize,
    pub nodes: usize,
    /// Mean over the seeds of jobs completed by their deadline.
    pub fifo_completed: f64,
    pub libra_completed: f64,
    pub paper_fifo_completed: u32,
    pub paper_libra_completed: u32,
    pub seeds: usize,
    /// Draws in which Libra completed more jobs in time than FIFO.
    pub libra_wins: usize,
}

/// Runs the four cells over `seeds` draws starting at `first_seed`, on nodes of `node_mips`
/// (the paper leaves node speed open; `libra_batches::NODE_MIPS` is ours).
pub fn run(
    seeds: usize,
    first_seed: u64,
    node_mips: f64,
    pricing: PricingParams,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Cell>, PolicyError> {
    let mut specs = Vec::new();
    for &(jobs, nodes, _, _) in &PAPER {
        let base = if jobs == 100 { LibraBatch::batch1() } else { LibraBatch::batch2() };
        let batch = LibraBatch { node_mips, ..base };
        for s in 0..seeds as u64 {
            let w = Arc::new(batch.generate(first_seed + s));
            for policy in ["fifo", "libra"] {
                specs.push(RunSpec {
                    workload: w.clone(),
                    policy: policy.into(),
                    pricing,
                    cluster: ClusterConfig { nodes, price_base: 1.0 },
                    placement: None,
                });
            }
        }
    }
    let results = run_all(&specs, tick)?;
    let mut cells = Vec::new();
    for (c, &(jobs, nodes, pf, pl)) in PAPER.iter().enumerate() {
        let chunk = &results[c * seeds * 2..(c + 1) * seeds * 2];
        let (mut f, mut l, mut wins) = (0usize, 0usize, 0usize);
        for pair in chunk.chunks(2) {
            let (fi, li) = (pair[0].metrics.completed_in_time, pair[1].metrics.qos_satisfied);
            f += fi;
            l += li;
            wins += usize::from(li > fi);
        }
        let n = seeds.max(1) as f64;
        cells.push(Cell {
            jobs,
            nodes,
            fifo_completed: f as f64 / n,
            libra_completed: l as f64 / n,
            paper_fifo_completed: pf,
            paper_libra_completed: pl,
            seeds,
            libra_wins: wins,
        });
    }
    Ok(cells)
}

/// The number of simulations `run` makes.
pub fn run_count(seeds: usize) -> usize {
    PAPER.len() * seeds * 2
}
