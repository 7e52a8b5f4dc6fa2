//! Whether this machine's processors run side by side right now, for `libra sim bench --aims`.
//!
//! On a virtual machine two processors can be two halves of one physical core, or take turns on
//! one, and which they are can change from minute to minute. Measured on the 2-core machine of
//! issue 14's thirty-third pass: a one-thread run of `libra+$` pinned to one processor took 8.0
//! to 8.7 s alone and 14.4 to 18.6 s with a busy loop pinned to the other; minutes later, 9.1 s
//! alone and 9.0 s beside it. A benchmark's times, and even which of two builds is faster when
//! one uses the second processor more, move with that. So the aims' runs are told apart by a
//! probe taken between them: a fixed piece of arithmetic timed alone and beside a thread that
//! spins, whose ratio is about 1 when the processors are independent and about 2 when they
//! share one core.

use serde::Serialize;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Rounds of the probe's arithmetic: about 50 ms on one core of the machine.
const WORK: u64 = 1 << 25;

/// Above this slowdown the processors are taken to share a core (the midpoint of 1 and 2 is
/// 1.5; this is lower, so that partial sharing is reported too).
pub const SHARED_ABOVE: f64 = 1.25;

/// One probe: the same arithmetic on this thread, alone and beside a spinning thread.
#[derive(Debug, Clone, Serialize)]
pub struct CoreProbe {
    /// When it was taken (`before round 2 of ...`).
    pub at: String,
    /// Seconds of the arithmetic alone (the least of three).
    pub alone_s: f64,
    /// Seconds of the arithmetic while another thread spins (the least of three).
    pub beside_busy_s: f64,
    /// `beside_busy_s / alone_s`: about 1 when the processors run side by side, about 2 when
    /// they take turns on one core.
    pub slowdown: f64,
    /// Whether `slowdown` is above `SHARED_ABOVE`.
    pub shared: bool,
}

/// A fixed piece of arithmetic (xorshift), in a register: no memory traffic.
fn work() -> f64 {
    let t = Instant::now();
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..WORK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x);
    t.elapsed().as_secs_f64()
}

/// Times `work` alone and beside a spinning thread, three of each in turn, the least of each.
/// `one_processor_is_seen_shared` checks that the spinner does take the processor.
pub fn probe(at: impl Into<String>) -> CoreProbe {
    let (mut alone, mut beside) = (f64::INFINITY, f64::INFINITY);
    let stop = AtomicBool::new(false);
    for _ in 0..3 {
        alone = alone.min(work());
        stop.store(false, Ordering::SeqCst);
        let started = AtomicBool::new(false);
        beside = beside.min(std::thread::scope(|s| {
            s.spawn(|| {
                started.store(true, Ordering::SeqCst);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = black_box(n + 1);
                }
            });
            while !started.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            let t = work();
            stop.store(true, Ordering::SeqCst);
            t
        }));
    }
    let slowdown = beside / alone;
    CoreProbe {
        at: at.into(),
        alone_s: alone,
        beside_busy_s: beside,
        slowdown,
        shared: slowdown > SHARED_ABOVE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe times real work both ways; its ratio is theirs, and `shared` follows it. Whether
    /// this machine's processors share a core is not asserted: that is the machine's.
    #[test]
    fn a_probe_times_both_ways() {
        let p = probe("test");
        assert_eq!(p.at, "test");
        assert!(p.alone_s > 0.0 && p.alone_s.is_finite(), "{p:?}");
        assert!(p.beside_busy_s > 0.0 && p.beside_busy_s.is_finite(), "{p:?}");
        assert_eq!(p.slowdown.to_bits(), (p.beside_busy_s / p.alone_s).to_bits());
        assert_eq!(p.shared, p.slowdown > SHARED_ABOVE);
    }

    /// On one processor the spinner takes turns with the work, and the probe says so: this
    /// thread is pinned to one processor, and the spinner it starts inherits the pin.
    #[test]
    fn one_processor_is_seen_shared() {
        // SAFETY: plain calls on this thread's own affinity mask, which is put back after.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            assert_eq!(libc::sched_getaffinity(0, size, &mut old), 0);
            let first =
                (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &old)).expect("a processor");
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(first, &mut one);
            assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
            let p = probe("pinned");
            assert_eq!(libc::sched_setaffinity(0, size, &old), 0);
            assert!(p.shared && p.slowdown > 1.3, "{p:?}");
        }
    }
}
