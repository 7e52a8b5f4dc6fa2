//! Libra's wire types: every request and response of the server's HTTP API (JSON bodies), shared
//! by the server, the node agent and the command line, plus a small blocking client.
//!
//! Money is an integer count of cents (`libra_core::Money`, exact, never a float) in a field whose
//! JSON name ends in `_cents` (`budget_cents`, `available_cents`), while people see credits with
//! two decimals: the suffix keeps a program from reading 100000 cents as 100,000 credits. The
//! names from before the suffix are still read, for older clients and stored rows.
//!
//! The client is blocking on purpose: `libra submit` is one request, and starting an async
//! runtime for it would cost more than the request itself.
//!
//! `duration` is the one parser of lengths of time (`90s`, `30d`) that the command line's flags
//! and the configuration files' fields share.

mod array;
mod client;
mod clock;
pub mod duration;
pub mod local;
mod queue;
mod sweep;
mod types;

pub use array::*;
pub use client::{new_idempotency_key, Client, ClientError};
pub use clock::unix_now;
pub use queue::*;
pub use sweep::*;
pub use types::*;

/// The longest argument, or environment entry (`NAME=value`), a job's program can be given:
/// Linux's `MAX_ARG_STRLEN` (32 pages of 4 KiB) less its terminating NUL. `execve` fails with
/// E2BIG past it, so the server refuses such a submission (naming the argument) rather than
/// let it fail on its node, and `libra submit` says so of a job script (its text is one).
pub const MAX_ARG_BYTES: usize = 32 * 4096 - 1;
