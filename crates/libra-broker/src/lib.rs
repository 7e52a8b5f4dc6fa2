//! The broker: parameter sweeps under a deadline and a budget across priced resources
//! (Nimrod/G, seed 004). Plan language, persistent task-farming engine, resources, experiments.

pub mod adapter;
pub mod bench;
pub mod create;
pub mod engine;
pub mod experiment;
pub mod farm;
pub mod plan;
pub mod resources;
pub mod state;
pub mod store;
pub mod view;

/// Lets a printing command die quietly when its reader goes away (`libra sweep results | head`)
/// instead of panicking on a broken pipe, as command-line tools do.
pub fn default_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
