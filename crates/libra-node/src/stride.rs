//! User-space stride scheduling (the Libra SRS, 3.1.6): every quantum the job with the smallest
//! pass runs (SIGCONT) and every other is stopped (SIGSTOP). A node whose capacity is below one
//! CPU holds an idle pseudo-job with the tickets of the unused capacity, so the node's jobs
//! together use no more than `--cpus`.

use crate::enforce::{EnforceError, Enforcer};
use libra_core::share::{tickets_for_share, StrideScheduler};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const QUANTUM: Duration = Duration::from_millis(20);
const IDLE: u64 = u64::MAX;

#[derive(Default)]
struct State {
    sched: StrideScheduler,
    pids: HashMap<u64, i32>,
    suspended: HashMap<u64, bool>,
    shares: HashMap<u64, f64>,
    running: Option<u64>,
    stop: bool,
}

pub struct StrideEnforcer {
    state: Arc<Mutex<State>>,
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a process group we created; an error (already gone) is harmless.
    unsafe {
        libc::kill(-pid, sig);
    }
}

impl StrideEnforcer {
    pub fn start(cpus: f64) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        if cpus < 1.0 {
            if let Ok(mut s) = state.lock() {
                s.sched.set_tickets(IDLE, tickets_for_share(1.0 - cpus));
            }
        }
        let st = state.clone();
        std::thread::Builder::new()
            .name("stride".into())
            .spawn(move || loop {
                std::thread::sleep(QUANTUM);
                let Ok(mut s) = st.lock() else { return };
                if s.stop {
                    return;
                }
                let next = s.sched.pick();
                if next != s.running {
                    if let Some(pid) = s.running.and_then(|j| s.pids.get(&j)) {
                        signal(*pid, libc::SIGSTOP);
                    }
                    if let Some(pid) = next.and_then(|j| s.pids.get(&j)) {
                        signal(*pid, libc::SIGCONT);
                    }
                    s.running = next;
                }
            })
            .ok();
        StrideEnforcer { state }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }
}

impl Drop for StrideEnforcer {
    fn drop(&mut self) {
        self.with(|s| {
            s.stop = true;
            for pid in s.pids.values() {
                signal(*pid, libc::SIGCONT);
            }
        });
    }
}

impl Enforcer for StrideEnforcer {
    fn mechanism(&self) -> &'static str {
        "stride"
    }

    fn prepare(&mut self, job: u64, share: f64) -> Result<Option<PathBuf>, EnforceError> {
        self.with(|s| s.shares.insert(job, share));
        Ok(None)
    }

    fn started(&mut self, job: u64, pid: i32) {
        self.with(|s| {
            s.pids.insert(job, pid);
            let share = s.shares.get(&job).copied().unwrap_or(0.01);
            if !s.suspended.get(&job).copied().unwrap_or(false) {
                s.sched.set_tickets(job, tickets_for_share(share));
            }
            // Stopped until its first quantum.
            if s.running != Some(job) {
                signal(pid, libc::SIGSTOP);
            }
        });
    }

    fn set_share(&mut self, job: u64, share: f64) -> Result<(), EnforceError> {
        self.with(|s| {
            s.shares.insert(job, share);
            if s.pids.contains_key(&job) && !s.suspended.get(&job).copied().unwrap_or(false) {
                s.sched.set_tickets(job, tickets_for_share(share));
            }
        });
        Ok(())
    }

    fn set_suspended(&mut self, job: u64, suspended: bool) {
        self.with(|s| {
            s.suspended.insert(job, suspended);
            if suspended {
                s.sched.remove(job);
                if s.running == Some(job) {
                    s.running = None;
                }
            } else if s.pids.contains_key(&job) {
                let share = s.shares.get(&job).copied().unwrap_or(0.01);
                s.sched.set_tickets(job, tickets_for_share(share));
            }
        });
    }

    fn remove(&mut self, job: u64) {
        self.with(|s| {
            s.sched.remove(job);
            s.pids.remove(&job);
            s.shares.remove(&job);
            s.suspended.remove(&job);
            if s.running == Some(job) {
                s.running = None;
            }
        });
    }
}
