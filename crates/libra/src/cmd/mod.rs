//! One module per command family: `sim` (simulator), `sweep` (broker), `cluster` (server, node
//! agent and the user and administrator commands).

pub mod cluster;
pub mod sim;
pub mod sweep;
pub mod time;
