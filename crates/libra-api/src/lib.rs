//! Libra's wire types: every request and response of the server's HTTP API (JSON bodies), shared
//! by the server, the node agent and the command line, plus a small blocking client.
//!
//! The client is blocking on purpose: `libra submit` is one request, and starting an async
//! runtime for it would cost more than the request itself.

mod client;
mod sweep;
mod types;

pub use client::{new_idempotency_key, Client, ClientError};
pub use sweep::*;
pub use types::*;
