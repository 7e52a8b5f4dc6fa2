//! User-space stride scheduling (the Libra SRS, 3.1.6): every quantum the job with the smallest
//! pass runs (SIGCONT) and every other is stopped (SIGSTOP). A node whose capacity is below one
//! CPU holds an idle pseudo-job with the tickets of the unused capacity, so the node's jobs
//! together use no more than `--cpus`.
//!
//! Each quantum is charged for what the job had of it, not as a whole: the machine is shared
//! with processes outside Libra, and the kernel gives a job part of its quantum or all of it
//! depending on them (and favours a job it has just woken over one it keeps running). A job is
//! charged the CPU time its threads used, or the quantum's length less the time they waited,
//! runnable, for a CPU, whichever is more (`had`): a job kept off the CPU by others is charged
//! less and runs sooner; a job that sleeps through its quantum (waiting on its disk) is
//! charged all of it, as before, so it cannot hold the node by sleeping.

use crate::enforce::{EnforceError, Enforcer};
use libra_core::share::{tickets_for_share, StrideScheduler};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const QUANTUM: Duration = Duration::from_millis(20);
const IDLE: u64 = u64::MAX;
/// How often the processes of each job (its session: the children it started) are looked up
/// again; one read of every process's stat, too dear for every quantum.
const MEMBERS_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    sched: StrideScheduler,
    pids: HashMap<u64, i32>,
    /// Each job's processes as last looked up (its first process alone until then).
    members: HashMap<u64, Vec<i32>>,
    suspended: HashMap<u64, bool>,
    shares: HashMap<u64, f64>,
    running: Option<u64>,
    /// The quantum being run: whose, since when, and its threads' times when it began.
    quantum: Option<Quantum>,
    stop: bool,
}

struct Quantum {
    job: u64,
    began: Instant,
    threads: HashMap<i32, (u64, u64)>,
}

impl State {
    fn thread_times(&self, job: u64) -> HashMap<i32, (u64, u64)> {
        match (self.members.get(&job), self.pids.get(&job)) {
            (Some(m), _) if !m.is_empty() => crate::proc::thread_times(m),
            (_, Some(pid)) => crate::proc::thread_times(&[*pid]),
            _ => HashMap::new(),
        }
    }

    /// Settles the quantum that ends `now` with the scheduler, and returns the job's threads'
    /// times now (the start of its next quantum, if it goes on running).
    fn settle(&mut self, q: Quantum, now: Instant) -> HashMap<i32, (u64, u64)> {
        let wall = now.duration_since(q.began);
        let end = if q.job == IDLE { HashMap::new() } else { self.thread_times(q.job) };
        self.sched.charge(q.job, had(wall, &q.threads, &end) / QUANTUM.as_secs_f64());
        end
    }
}

/// The seconds of a quantum `wall` long that a job had, from its threads' (run, wait) times at
/// its start and end: what they ran, or the quantum less what they waited for a CPU, whichever
/// is more. Threads seen only once (started or ended within the quantum, or not readable) are
/// not counted; with none seen twice, the whole quantum.
pub(crate) fn had(wall: Duration, start: &HashMap<i32, (u64, u64)>, end: &HashMap<i32, (u64, u64)>) -> f64 {
    let (mut ran, mut waited, mut seen) = (0u64, 0u64, false);
    for (tid, (run1, wait1)) in end {
        if let Some((run0, wait0)) = start.get(tid) {
            ran += run1.saturating_sub(*run0);
            waited += wait1.saturating_sub(*wait0);
            seen = true;
        }
    }
    let wall = wall.as_secs_f64();
    if !seen {
        return wall;
    }
    let (ran, waited) = (ran as f64 * 1e-9, waited as f64 * 1e-9);
    ran.max(wall - waited).max(0.0)
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
            .spawn(move || {
                let mut looked_up: Option<Instant> = None;
                loop {
                    std::thread::sleep(QUANTUM);
                    if looked_up.is_none_or(|t| t.elapsed() >= MEMBERS_EVERY) {
                        // The lookup reads every process: done without the lock, so that the
                        // agent is not held up by it.
                        let Ok(pids) = st.lock().map(|s| s.pids.clone()) else { return };
                        let sessions: HashSet<i32> = pids.values().copied().collect();
                        let by_session = crate::proc::session_members(&sessions);
                        let Ok(mut s) = st.lock() else { return };
                        s.members = pids
                            .iter()
                            .filter_map(|(job, pid)| Some((*job, by_session.get(pid)?.clone())))
                            .collect();
                        looked_up = Some(Instant::now());
                    }
                    let Ok(mut s) = st.lock() else { return };
                    if s.stop {
                        return;
                    }
                    let now = Instant::now();
                    let ended = s.quantum.take().map(|q| (q.job, s.settle(q, now)));
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
                    s.quantum = next.map(|job| {
                        let threads = match ended {
                            Some((j, end)) if j == job => end,
                            _ if job == IDLE => HashMap::new(),
                            _ => s.thread_times(job),
                        };
                        Quantum { job, began: now, threads }
                    });
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
            s.members.remove(&job);
            s.shares.remove(&job);
            s.suspended.remove(&job);
            if s.running == Some(job) {
                s.running = None;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(v: &[(i32, u64, u64)]) -> HashMap<i32, (u64, u64)> {
        v.iter().map(|&(t, r, w)| (t, (r, w))).collect()
    }

    #[test]
    fn a_quantum_is_charged_for_what_the_job_had_of_it() {
        let q = Duration::from_millis(20);
        let ms = 1_000_000;
        let start = times(&[(7, 100 * ms, 5 * ms)]);
        // Ran all of it.
        assert!((had(q, &start, &times(&[(7, 120 * ms, 5 * ms)])) - 0.020).abs() < 1e-9);
        // Half of it taken by another process: charged the half it ran.
        assert!((had(q, &start, &times(&[(7, 110 * ms, 15 * ms)])) - 0.010).abs() < 1e-9);
        // Asleep: neither running nor waiting, charged the whole quantum.
        assert!((had(q, &start, &times(&[(7, 100 * ms, 5 * ms)])) - 0.020).abs() < 1e-9);
        // Two threads on two CPUs: charged what they ran, two quanta.
        let two = times(&[(7, 100 * ms, 5 * ms), (8, 0, 0)]);
        assert!((had(q, &two, &times(&[(7, 120 * ms, 5 * ms), (8, 20 * ms, 0)])) - 0.040).abs() < 1e-9);
        // Threads seen once are not counted; none seen twice is the whole quantum.
        assert!((had(q, &start, &times(&[(7, 110 * ms, 15 * ms), (9, 500 * ms, 0)])) - 0.010).abs() < 1e-9);
        assert!((had(q, &start, &times(&[(9, 500 * ms, 0)])) - 0.020).abs() < 1e-9);
        assert!((had(q, &HashMap::new(), &HashMap::new()) - 0.020).abs() < 1e-9);
    }
}
