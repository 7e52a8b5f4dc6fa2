//! The seed's test queue for real (wall-clock) runs: each job takes a fixed wall time and
//! reports a fixed CPU time, both multiplied by `time_scale` so that tests run fast. The
//! virtual-time mode lives in `experiment::virtual_time`.

use super::{write_marker, AdapterError, Launch, Outcome, ResourceAdapter};
use crate::resources::TestqueueSpec;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub struct TestQueue {
    wall: f64,
    cpu: f64,
    cancelled: Arc<AtomicBool>,
}

impl TestQueue {
    pub fn new(cfg: &TestqueueSpec) -> Self {
        let scale = cfg.time_scale.unwrap_or(1.0);
        let wall = cfg.wall * scale;
        TestQueue {
            wall,
            cpu: cfg.cpu.map_or(wall, |c| c * scale),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ResourceAdapter for TestQueue {
    fn start(&mut self, l: Launch, done: Sender<Outcome>) -> Result<(), AdapterError> {
        let o = Outcome {
            attempt: l.attempt,
            resource: l.resource,
            ok: true,
            exit_code: Some(0),
            wall: self.wall,
            cpu: self.cpu,
            message: String::new(),
            rejected: false,
            billed: None,
        };
        // A wall beyond what an instant can hold (a huge `time_scale`) is a job that never
        // ends in this process's life: a billion seconds.
        let far = Duration::from_secs(1_000_000_000);
        let wall = Duration::try_from_secs_f64(self.wall.max(0.0)).unwrap_or(far).min(far);
        let now = Instant::now();
        let at = now.checked_add(wall).unwrap_or(now);
        timer().add(at, Ending { outcome: o, dir: l.dir, done, cancelled: self.cancelled.clone() });
        Ok(())
    }

    fn cancel_all(&mut self) -> Vec<(i64, libra_core::Money)> {
        self.cancelled.store(true, Ordering::Relaxed);
        // Its jobs are forgotten now rather than at the ends they will never reach.
        timer().forget(&self.cancelled);
        Vec::new()
    }
}

/// A test-queue job that will end: its outcome, reported on `done` at its time unless its
/// queue was cancelled.
struct Ending {
    outcome: Outcome,
    dir: std::path::PathBuf,
    done: Sender<Outcome>,
    cancelled: Arc<AtomicBool>,
}

/// When each test-queue job of the process ends, kept by one thread for every queue. A thread
/// per job (as before) let one hosted sweep of a server make it start a thread for each of up
/// to 100,000 slots per resource, each waking every 50 ms: the server's threads and CPU for
/// everyone. This one sleeps until the next end.
struct Timer {
    queue: Mutex<TimerQueue>,
    wake: Condvar,
}

#[derive(Default)]
struct TimerQueue {
    heap: BinaryHeap<Timed>,
    /// Numbers the jobs as they are added: jobs ending at the same instant end in that order.
    next: u64,
}

struct Timed {
    at: Instant,
    seq: u64,
    ending: Ending,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Timed {}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timed {
    /// Reversed, so that the heap's greatest is the earliest end.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The process's timer, started at its first job.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let t: &'static Timer =
            Box::leak(Box::new(Timer { queue: Mutex::new(TimerQueue::default()), wake: Condvar::new() }));
        std::thread::Builder::new()
            .name("testqueue-timer".into())
            .spawn(move || t.run())
            .expect("the test queue's timer thread starts");
        t
    })
}

impl Timer {
    fn lock(&self) -> std::sync::MutexGuard<'_, TimerQueue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, at: Instant, ending: Ending) {
        let mut q = self.lock();
        let seq = q.next;
        q.next += 1;
        let earliest = q.heap.peek().is_none_or(|t| at < t.at);
        q.heap.push(Timed { at, seq, ending });
        drop(q);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// Drops every job of the queue whose cancel flag is `cancelled`.
    fn forget(&self, cancelled: &Arc<AtomicBool>) {
        self.lock().heap.retain(|t| !Arc::ptr_eq(&t.ending.cancelled, cancelled));
    }

    fn run(&self) {
        let mut q = self.lock();
        loop {
            let now = Instant::now();
            match q.heap.peek().map(|t| t.at) {
                None => q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(at) if at > now => {
                    q = self.wake.wait_timeout(q, at - now).unwrap_or_else(|p| p.into_inner()).0;
                }
                Some(_) => {
                    let Some(Timed { ending, .. }) = q.heap.pop() else { continue };
                    // The files and the report without the lock: adding a job never waits on a
                    // disk.
                    drop(q);
                    if !ending.cancelled.load(Ordering::Relaxed) {
                        if std::fs::create_dir_all(&ending.dir).is_ok() {
                            write_marker(&ending.dir, &ending.outcome);
                        }
                        let _ = ending.done.send(ending.outcome);
                    }
                    q = self.lock();
                }
            }
        }
    }
}
