//! Libra's pure domain logic: no I/O, no async, no clock of its own. Time enters as an
//! argument (`now`, seconds on whatever clock the caller runs: simulated or wall).
//!
//! The same policy values run in the simulator (`libra-sim`) and in the server
//! (`libra-server`).

pub mod dbc;
pub mod money;

pub use money::Money;
