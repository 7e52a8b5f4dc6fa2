//! The user-space fallback with real processes: stride scheduling (SIGSTOP/SIGCONT) gives two
//! busy processes CPU in proportion to their shares, and keeps the node under its capacity.

use libra_node::enforce::Enforcer;
use libra_node::proc;
use libra_node::stride::StrideEnforcer;
use std::time::{Duration, Instant};

fn busy(dir: &std::path::Path) -> i32 {
    proc::spawn(&["sh".into(), "-c".into(), "while :; do :; done".into()], dir, &[]).unwrap()
}

#[test]
fn stride_shares_follow_tickets_and_the_capacity() {
    let dir = std::env::temp_dir().join(format!("libra-stride-{}", std::process::id()));
    let mut e = StrideEnforcer::start(0.5);
    e.prepare(1, 0.3).unwrap();
    e.prepare(2, 0.15).unwrap();
    let a = busy(&dir.join("a"));
    let b = busy(&dir.join("b"));
    e.started(1, a);
    e.started(2, b);
    std::thread::sleep(Duration::from_millis(500));
    let cpu = |p| proc::cpu_seconds(p).unwrap();
    let (a0, b0, t0) = (cpu(a), cpu(b), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (a1, b1, dt) = (cpu(a), cpu(b), t0.elapsed().as_secs_f64());
    for p in [a, b] {
        proc::signal_group(p, libc::SIGCONT);
        proc::signal_group(p, libc::SIGKILL);
        while proc::try_reap(p).is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (ra, rb) = ((a1 - a0) / dt, (b1 - b0) / dt);
    eprintln!("stride: measured {ra:.3} and {rb:.3} CPU for shares 0.30 and 0.15 on a 0.5 CPU node");
    let fa = ra / (ra + rb);
    assert!((fa / (2.0 / 3.0) - 1.0).abs() <= 0.1, "job 1 got {fa:.3} of the node's CPU, assigned 0.667");
    assert!(ra + rb <= 0.5 * 1.1, "the node used {:.3} CPU of 0.5", ra + rb);
}
