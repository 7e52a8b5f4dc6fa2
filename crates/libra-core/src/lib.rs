//! Libra's pure domain logic: no I/O, no async, no clock of its own. Time enters as an
//! argument (`now`, seconds on whatever clock the caller runs: simulated or wall).
//!
//! The same policy values run in the simulator (`libra-sim`) and in the server
//! (`libra-server`).

pub mod billing;
pub mod cluster;
pub mod dbc;
pub mod dependency;
#[cfg(test)]
pub(crate) mod history;
pub mod job;
pub mod load_line;
pub mod metrics;
pub mod money;
pub mod policy;
pub mod pricing;
pub mod share;
pub mod shown;
pub mod still;

pub use cluster::{Cluster, JobSlot, NodeIdx, NodeSpec};
pub use job::JobSpec;
pub use money::Money;
pub use policy::{build_policy, Decision, Policy, RejectReason, Suggestion, POLICY_NAMES};
pub use pricing::PricingParams;
pub use shown::Shown;
