//! Waiting on a condition, polled, with a deadline that names what was awaited.

use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it gives a value; panics naming `what` after 60 s.
pub fn wait_until<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_for(what, 60, f)
}

/// Polls `f` every 50 ms until it gives a value; panics naming `what` after `secs` seconds.
pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_the_condition_holds() {
        let mut n = 0;
        assert_eq!(
            wait_for("three polls", 5, || {
                n += 1;
                (n == 3).then_some(n)
            }),
            3
        );
    }

    #[test]
    #[should_panic(expected = "timed out after 0 s waiting for nothing")]
    fn names_what_it_waited_for_when_it_times_out() {
        wait_for("nothing", 0, || None::<()>);
    }
}
