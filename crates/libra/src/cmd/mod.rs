//! One module per command family: `sim` (simulator), `sweep` (broker), `cluster` (server, node
//! agent and the user and administrator commands).

pub mod cluster;
pub mod retry;
pub mod sim;
pub mod sweep;
pub mod time;

/// Lets a command end quietly when the reader of its output goes away (`libra history | head`),
/// as command-line tools do, instead of panicking on a broken pipe: SIGPIPE back to its default.
/// Not for what serves or runs work (the server, a node agent, `libra up`, a job's keeper, a
/// sweep's engine): for them SIGPIPE stays ignored, so a peer that closes a socket or a pipe is
/// an error they handle, not their death. They call this once their work is done and only
/// printing is left.
pub fn quiet_on_closed_stdout() {
    libra_broker::default_sigpipe();
}

/// A number option that must be finite: `nan` and `inf` parse as floats, and an option sent to
/// the server as JSON would arrive as null, the same as not given (`admin pricing --beta nan`
/// changed nothing and said so as a success), or be capped into a default locally.
pub fn parse_finite(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err(format!("'{s}' is not a finite number")),
        Err(_) => Err(format!("'{s}' is not a number")),
    }
}

/// A count or a size that cannot be negative (`--max-tasks`, `--tmp-mb`): clap's own parser of
/// unsigned numbers answers `-5` with "invalid digit found in string", which does not say what
/// is accepted.
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if s.trim().parse::<f64>().is_ok() => {
            Err(format!("{s} is not accepted: give a whole number, 0 or more"))
        }
        Err(_) => Err(format!("'{s}' is not a number: give a whole number, 0 or more")),
    }
}
