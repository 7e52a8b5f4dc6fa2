//! The broker: parameter sweeps under a deadline and a budget across priced resources
//! (Nimrod/G, seed 004). Plan language, persistent task-farming engine, resources, experiments.

pub mod adapter;
pub mod bench;
pub mod create;
pub mod engine;
pub mod experiment;
pub mod farm;
pub mod plan;
pub mod resources;
pub mod store;

/// Re-exported so the `libra` binary prints tables and progress the same way.
pub use comfy_table;
pub use indicatif;
