//! The seed's test queue for real (wall-clock) runs: each job takes a fixed wall time and
//! reports a fixed CPU time, both multiplied by `time_scale` so that tests run fast. The
//! virtual-time mode lives in `experiment::virtual_time`.

use super::{write_marker, AdapterError, Launch, Outcome, ResourceAdapter};
use crate::resources::TestqueueSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

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
        let (wall, cpu, cancelled) = (self.wall, self.cpu, self.cancelled.clone());
        std::thread::spawn(move || {
            let end = std::time::Instant::now() + Duration::from_secs_f64(wall);
            while std::time::Instant::now() < end {
                if cancelled.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_secs_f64(wall.min(0.05)));
            }
            let o = Outcome {
                attempt: l.attempt,
                resource: l.resource,
                ok: true,
                exit_code: Some(0),
                wall,
                cpu,
                message: String::new(),
                rejected: false,
                billed: None,
            };
            if std::fs::create_dir_all(&l.dir).is_ok() {
                write_marker(&l.dir, &o);
            }
            let _ = done.send(o);
        });
        Ok(())
    }

    fn cancel_all(&mut self) -> Vec<(i64, libra_core::Money)> {
        self.cancelled.store(true, Ordering::Relaxed);
        Vec::new()
    }
}
