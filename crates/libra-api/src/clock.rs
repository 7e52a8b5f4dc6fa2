//! The wall clock as Unix seconds: the one clock the server, the node agents, the broker and the
//! command line read (libra-core never reads it: every policy takes `now` as an argument).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, as the times on the wire are (0 if the clock is before 1970).
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
