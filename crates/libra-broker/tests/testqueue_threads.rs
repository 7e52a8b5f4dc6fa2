//! A test queue keeps its jobs' ends on one timer thread for the whole process, whatever how
//! many run: a hosted sweep may give a test-queue resource up to 100,000 slots, and a thread per
//! running job (each waking every 50 ms) let one user's sweep take the server's threads and CPU
//! from everyone. Alone in its test binary, so that the process's thread count is this test's.

use libra_broker::adapter::testqueue::TestQueue;
use libra_broker::adapter::{Launch, ResourceAdapter};
use libra_broker::resources::TestqueueSpec;
use libra_core::Money;
use std::time::{Duration, Instant};

fn threads() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn launch(dir: &std::path::Path, attempt: i64) -> Launch {
    Launch {
        attempt,
        key: format!("k{attempt}"),
        resource: 0,
        dir: dir.join(format!("jobs/{attempt}-1")),
        vars: Default::default(),
        estimate: 1.0,
        deadline_in: 3600.0,
        budget: Money::from_credits(1),
    }
}

#[test]
fn two_thousand_running_test_queue_jobs_take_one_thread_and_each_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let before = threads();
    let (done, outcomes) = std::sync::mpsc::channel();
    // Jobs of 2 s, started over some tenths of a second: every one is running at once.
    let mut queue = TestQueue::new(&TestqueueSpec::new(2.0));
    for attempt in 1..=2000 {
        queue.start(launch(dir.path(), attempt), done.clone()).unwrap();
    }
    // A second queue, cancelled before its jobs end: they never report.
    let mut cancelled = TestQueue::new(&TestqueueSpec::new(1.0));
    for attempt in 5001..=5100 {
        cancelled.start(launch(dir.path(), attempt), done.clone()).unwrap();
    }
    let running = threads();
    assert!(running <= before + 2, "{} threads for 2,100 running jobs (from {before})", running - before);
    cancelled.cancel_all();
    drop(done);
    let t0 = Instant::now();
    let mut ended = Vec::new();
    while let Ok(o) = outcomes.recv_timeout(Duration::from_secs(60)) {
        assert!(o.ok && (o.wall - 2.0).abs() < 1e-9, "{o:?}");
        ended.push(o.attempt);
        if ended.len() == 2000 {
            break;
        }
    }
    assert!(t0.elapsed() >= Duration::from_millis(1000), "jobs of 2 s ended after {:?}", t0.elapsed());
    ended.sort_unstable();
    assert_eq!(ended, (1..=2000).collect::<Vec<i64>>(), "each job of the first queue ends once");
    // Nothing more: the cancelled queue's jobs are gone.
    assert!(outcomes.recv_timeout(Duration::from_millis(1500)).is_err(), "a cancelled job reported");
    assert!(dir.path().join("jobs/1-1").is_dir() && !dir.path().join("jobs/5001-1").exists());
}
