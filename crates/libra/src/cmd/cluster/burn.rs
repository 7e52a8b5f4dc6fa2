//! `libra burn`: a CPU-bound test job that stops after using the given CPU time (measured by
//! the kernel, so a job with a small share simply takes longer in wall-clock time).

use anyhow::{bail, Result};
use clap::Args;

#[derive(Debug, Args)]
pub struct BurnArgs {
    /// CPU seconds to burn (the process's own CPU time, not wall-clock time).
    #[arg(long)]
    pub cpu_seconds: f64,
}

fn cpu_time() -> f64 {
    // SAFETY: clock_gettime with an out-pointer to a local.
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

pub fn run(a: BurnArgs) -> Result<()> {
    if !(a.cpu_seconds.is_finite() && a.cpu_seconds >= 0.0 && a.cpu_seconds <= 86400.0 * 365.0) {
        bail!(
            "--cpu-seconds: {} is not accepted: give seconds from 0 to one year",
            libra_core::Shown(a.cpu_seconds)
        );
    }
    // The process's CPU time from its start, its own start-up included: a job asked to burn
    // N CPU-seconds uses N in all (the kernel's accounting of the job is what its owner pays
    // for), not N plus however long loading the binary took.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rounds: u64 = 0;
    while cpu_time() < a.cpu_seconds {
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        rounds += 1;
    }
    println!("burned {:.2} CPU seconds ({rounds} rounds, {x:x})", cpu_time());
    Ok(())
}
