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
