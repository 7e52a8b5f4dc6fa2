//! What Libra's integration tests share, in one place instead of a copy per test file: a real
//! cluster of `libra server` and `libra node` processes on loopback ([`Cluster`]), an in-process
//! server for the server crate's tests ([`TestServer`]), a real two-node Slurm ([`slurm`]), Unix
//! accounts made for a test ([`Account`]), finding and stopping the processes a test started,
//! reading a child's output as it comes ([`Lines`]), and waiting on a condition with a deadline
//! instead of a fixed sleep ([`wait_until`]).
//!
//! Every item is re-exported at the top, so a test file can `use libra_testkit::*` (the `libra`
//! crate's tests reach it as `common::...` through a one-line module).

pub mod cluster;
pub mod lines;
pub mod procs;
pub mod scratch;
pub mod server;
pub mod slurm;
pub mod unix;
pub mod wait;

pub use cluster::*;
pub use lines::*;
pub use procs::*;
pub use scratch::*;
pub use server::*;
pub use unix::*;
pub use wait::*;

/// A TCP port free on loopback at the time of asking (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
