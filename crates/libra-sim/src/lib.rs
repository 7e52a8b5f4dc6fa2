//! Libra's discrete-event simulator: replays workloads (SWF traces, the Libra and Libra+$ workload
//! models, explicit job lists) through the very same `libra-core` policies that run in the server.

pub mod engine;
pub mod experiment;
pub mod plot;
pub mod report;
pub mod swf;
pub mod workload;

pub use engine::{simulate, ClusterConfig, SimResult};
pub use workload::SimJob;
