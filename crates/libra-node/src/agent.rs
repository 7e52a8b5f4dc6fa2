//! The agent's loop: reap exits, run job control every period (Algorithm 2 from measured CPU
//! time, or EDF when the policy admits by EDF; re-told to the kernel), and exchange reports for
//! commands with the server. While the server is away the jobs keep running and the reports
//! wait; on reconnect everything is said again.

use crate::control::{self, JobProgress};
use crate::enforce::{detect, Enforcer};
use crate::kernel::RealKernel;
use crate::proc;
use libra_api::{
    Client, ExitReport, JobControl, RegisterRequest, RunningReport, StartJob, SyncRequest, SyncResponse,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Relative change of a job's required share below which the kernel is not re-told.
pub const SHARE_HYSTERESIS: f64 = 0.10;

/// How much of a job's stdout and stderr is sent back to the server.
pub const OUTPUT_TAIL: u64 = 256 * 1024;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub server: String,
    pub join_token: String,
    pub name: String,
    /// Capacity in CPUs (the node's control group is capped at it).
    pub cpus: f64,
    pub mem_mb: u64,
    /// Where each job gets its working directory.
    pub workdir: PathBuf,
    /// auto, cgroup-v2, cgroup-v1, stride or none.
    pub mechanism: String,
    /// Job-control period in seconds (None: the server's).
    pub period: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Enforce(#[from] crate::enforce::EnforceError),
    #[error("cpus: {0} is not accepted: give a capacity greater than 0 and at most the machine's {1} cores")]
    Cpus(f64, usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the server refused this node: {0}")]
    Refused(String),
}

struct Running {
    spec: StartJob,
    pid: i32,
    start_time: f64,
    cpu: f64,
    share: f64,
    suspended: bool,
    dir: PathBuf,
}

/// In a job's working directory: "PID START_TICKS" of its process while it runs.
const PID_FILE: &str = "libra.pid";

/// Stops the jobs an earlier agent on this working directory left running (it crashed or was
/// killed; jobs outlive their agent so that a server restart costs nothing). The cgroup
/// enforcers also empty the job groups they find; this covers every mechanism, stride and none
/// included. This agent cannot
/// wait for them or learn how they end, and the server has marked them lost and released their
/// holds the moment it heard from a node that no longer knew them, so left alone they would only
/// burn CPU outside every share. Re-adopting them instead is the better end state; it needs each
/// job's exit status kept by something that outlives the agent.
fn stop_orphans(workdir: &std::path::Path) {
    let Ok(dirs) = std::fs::read_dir(workdir) else { return };
    for d in dirs.flatten() {
        let file = d.path().join(PID_FILE);
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let mut f = text.split_whitespace().map(str::parse::<u64>);
        if let (Some(Ok(pid)), Some(Ok(ticks))) = (f.next(), f.next()) {
            let pid = pid as i32;
            if pid > 1 && proc::start_ticks(pid) == Some(ticks) {
                tracing::warn!(pid, dir = %d.path().display(), "stopping a job an earlier agent left running");
                proc::signal_group(pid, libc::SIGCONT);
                proc::signal_group(pid, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_file(&file);
    }
}

pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

pub struct Agent {
    cfg: AgentConfig,
    client: Client,
    enforcer: Box<dyn Enforcer>,
    jobs: HashMap<u64, Running>,
    exited: HashMap<u64, ExitReport>,
    period: f64,
    /// Exits seen by the reaper thread (pid, how, when), stamped the moment they happen so a
    /// deadline is judged on the real end time, not on when the loop next looked.
    ended: Receiver<(i32, proc::Exit, f64)>,
    early: HashMap<i32, (proc::Exit, f64)>,
    /// Memory limits for jobs that ask for memory (cgroup v1 memory hierarchy), where writable.
    memory: Option<crate::memory::MemoryLimiter>,
    /// As the server's policy asks (Algorithm 2 until it says otherwise).
    job_control: JobControl,
}

impl Agent {
    pub fn new(cfg: AgentConfig) -> Result<Agent, NodeError> {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        if !(cfg.cpus > 0.0 && cfg.cpus <= cores as f64) {
            return Err(NodeError::Cpus(cfg.cpus, cores));
        }
        std::fs::create_dir_all(&cfg.workdir)?;
        stop_orphans(&cfg.workdir);
        let enforcer = detect(Arc::new(RealKernel), &cfg.mechanism, &cfg.name, cfg.cpus)?;
        tracing::info!(node = %cfg.name, mechanism = enforcer.mechanism(), "share enforcement");
        let client = Client::new(&cfg.server, Some(cfg.join_token.clone()));
        let name = cfg.name.clone();
        let (tx, ended) = channel();
        std::thread::Builder::new().name("reaper".into()).spawn(move || loop {
            match proc::wait_any() {
                Some((pid, exit)) => {
                    if tx.send((pid, exit, unix_now())).is_err() {
                        return;
                    }
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        })?;
        Ok(Agent {
            period: cfg.period.unwrap_or(2.0),
            cfg,
            client,
            enforcer,
            jobs: HashMap::new(),
            exited: HashMap::new(),
            ended,
            early: HashMap::new(),
            job_control: JobControl::default(),
            memory: crate::memory::MemoryLimiter::new(
                Arc::new(RealKernel),
                std::path::Path::new("/sys/fs/cgroup/memory"),
                &name,
            ),
        })
    }

    /// The share mechanism, with `+memory` when memory limits are enforced too.
    pub fn mechanism(&self) -> String {
        let m = self.enforcer.mechanism();
        if self.memory.is_some() {
            format!("{m}+memory")
        } else {
            m.to_string()
        }
    }

    fn register(&mut self) -> Result<(), libra_api::ClientError> {
        let r = self.client.register(&RegisterRequest {
            name: self.cfg.name.clone(),
            cpus: self.cfg.cpus,
            mem_mb: self.cfg.mem_mb,
            mechanism: self.mechanism(),
        })?;
        if self.cfg.period.is_none() {
            self.period = r.period;
        }
        Ok(())
    }

    /// Runs until `stop` returns true (checked every loop).
    pub fn run(&mut self, stop: impl Fn() -> bool) -> Result<(), NodeError> {
        let mut registered = false;
        let mut next_control = Instant::now();
        let mut backoff = Duration::from_millis(200);
        while !stop() {
            if !registered {
                match self.register() {
                    Ok(()) => {
                        registered = true;
                        backoff = Duration::from_millis(200);
                        tracing::info!(node = %self.cfg.name, server = %self.cfg.server, "registered");
                    }
                    Err(e) if e.status() == Some(403) || e.status() == Some(400) => {
                        return Err(NodeError::Refused(e.to_string()));
                    }
                    Err(e) => {
                        tracing::warn!("register: {e}; retrying");
                        self.reap();
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                }
            }
            self.reap();
            if Instant::now() >= next_control {
                self.control();
                next_control = Instant::now() + Duration::from_secs_f64(self.period);
            }
            let wait_ms = if self.exited.is_empty() { 500 } else { 0 };
            let req = SyncRequest {
                name: self.cfg.name.clone(),
                mechanism: self.mechanism(),
                running: self.running_reports(),
                exited: self.exited.values().cloned().collect(),
                wait_ms,
            };
            match self.client.sync(&req) {
                Ok(resp) => {
                    backoff = Duration::from_millis(200);
                    if resp.reregister {
                        registered = false;
                    }
                    self.apply(resp);
                }
                Err(e) => {
                    // The server is away: keep the jobs running, keep the reports, try again.
                    tracing::warn!("sync: {e}");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    if e.status() == Some(403) {
                        return Err(NodeError::Refused(e.to_string()));
                    }
                }
            }
        }
        Ok(())
    }

    fn running_reports(&self) -> Vec<RunningReport> {
        self.jobs
            .values()
            .map(|r| RunningReport {
                job: r.spec.job,
                cpu_seconds: r.cpu,
                suspended: r.suspended,
                share: r.share,
                start_time: r.start_time,
            })
            .collect()
    }

    fn apply(&mut self, resp: SyncResponse) {
        if resp.job_control != self.job_control {
            tracing::info!(from = ?self.job_control, to = ?resp.job_control, "job control changes with the policy");
            self.job_control = resp.job_control;
        }
        for job in resp.ack {
            self.exited.remove(&job);
        }
        for job in resp.kill {
            if let Some(r) = self.jobs.get(&job) {
                tracing::info!(job, "killing (cancelled or no longer this node's)");
                proc::signal_group(r.pid, libc::SIGCONT);
                proc::signal_group(r.pid, libc::SIGKILL);
            }
        }
        for job in resp.suspend {
            if let Some(r) = self.jobs.get_mut(&job) {
                self.enforcer.set_suspended(job, true);
                proc::signal_group(r.pid, libc::SIGSTOP);
                r.suspended = true;
            }
        }
        for job in resp.resume {
            if let Some(r) = self.jobs.get_mut(&job) {
                r.suspended = false;
                proc::signal_group(r.pid, libc::SIGCONT);
                self.enforcer.set_suspended(job, false);
            }
        }
        for s in resp.start {
            if self.jobs.contains_key(&s.job) || self.exited.contains_key(&s.job) {
                continue;
            }
            self.start(s);
        }
    }

    fn start(&mut self, s: StartJob) {
        let dir = self.cfg.workdir.join(format!("job-{}", s.job));
        let now = unix_now();
        let share = s.share;
        let memory = match (&mut self.memory, s.mem_mb) {
            (_, 0) => Ok(None),
            (Some(m), mb) => m.prepare(s.job, mb).map(Some).map_err(|e| e.to_string()),
            (None, _) => Ok(None),
        };
        let launched = memory.and_then(|mem| {
            self.enforcer
                .prepare(s.job, share)
                .map_err(|e| e.to_string())
                .map(|cpu| cpu.into_iter().chain(mem).collect::<Vec<_>>())
        });
        let launched = launched.and_then(|groups| {
            proc::spawn(&s.command, &dir, &groups).map_err(|e| format!("cannot start {:?}: {e}", s.command))
        });
        match launched {
            Ok(pid) => {
                tracing::info!(job = s.job, pid, share, "started");
                // So that an agent started after this one crashed can tell the job's process
                // from whatever later reuses its pid.
                let mark = proc::start_ticks(pid).map(|t| format!("{pid} {t}\n")).unwrap_or_default();
                if let Err(e) = std::fs::write(dir.join(PID_FILE), mark) {
                    tracing::warn!(job = s.job, "pid file not written: {e}");
                }
                self.enforcer.started(s.job, pid);
                if s.suspended {
                    self.enforcer.set_suspended(s.job, true);
                    proc::signal_group(pid, libc::SIGSTOP);
                }
                let suspended = s.suspended;
                self.jobs.insert(
                    s.job,
                    Running { spec: s, pid, start_time: now, cpu: 0.0, share, suspended, dir },
                );
            }
            Err(error) => {
                tracing::warn!(job = s.job, "{error}");
                self.enforcer.remove(s.job);
                if let Some(m) = &mut self.memory {
                    m.remove(s.job);
                }
                self.exited.insert(
                    s.job,
                    ExitReport {
                        job: s.job,
                        exit_code: None,
                        signal: None,
                        cpu_seconds: 0.0,
                        start_time: now,
                        end_time: now,
                        stdout: String::new(),
                        stderr: String::new(),
                        truncated: false,
                        error: Some(error),
                    },
                );
            }
        }
    }

    fn reap(&mut self) {
        while let Ok((pid, exit, at)) = self.ended.try_recv() {
            self.early.insert(pid, (exit, at));
        }
        let done: Vec<(u64, proc::Exit, f64)> = self
            .jobs
            .iter()
            .filter_map(|(id, r)| self.early.remove(&r.pid).map(|(e, at)| (*id, e, at)))
            .collect();
        for (id, exit, end_time) in done {
            let Some(r) = self.jobs.remove(&id) else { continue };
            // Make sure nothing the job left behind keeps running outside any accounting.
            proc::signal_group(r.pid, libc::SIGKILL);
            let _ = std::fs::remove_file(r.dir.join(PID_FILE));
            self.enforcer.remove(id);
            if let Some(m) = &mut self.memory {
                m.remove(id);
            }
            let (stdout, t1) = proc::tail(&r.dir.join("stdout"), OUTPUT_TAIL);
            let (stderr, t2) = proc::tail(&r.dir.join("stderr"), OUTPUT_TAIL);
            tracing::info!(job = id, code = ?exit.code, signal = ?exit.signal, cpu = exit.cpu_seconds, "exited");
            self.exited.insert(
                id,
                ExitReport {
                    job: id,
                    exit_code: exit.code,
                    signal: exit.signal,
                    cpu_seconds: exit.cpu_seconds.max(r.cpu),
                    start_time: r.start_time,
                    end_time,
                    stdout,
                    stderr,
                    truncated: t1 || t2,
                    error: None,
                },
            );
        }
    }

    /// Algorithm 2: each job's share from now on is what it has left over the time it has left,
    /// measured from the CPU time the kernel accounted to it.
    fn control(&mut self) {
        let now = unix_now();
        for r in self.jobs.values_mut() {
            if let Some(cpu) = proc::cpu_seconds(r.pid) {
                r.cpu = r.cpu.max(cpu);
            }
        }
        let progress: Vec<JobProgress> = self
            .jobs
            .values()
            .map(|r| JobProgress {
                job: r.spec.job,
                estimate: r.spec.estimate,
                cpu: r.cpu,
                deadline_at: r.spec.deadline_at,
                admitted: r.spec.share,
                procs: r.spec.procs,
                suspended: r.suspended,
            })
            .collect();
        for (job, share) in control::shares(self.job_control, &progress, now, self.cfg.cpus) {
            let Some(r) = self.jobs.get_mut(&job) else { continue };
            // Only a real change is re-told: every rewrite of a cap restarts the kernel's
            // accounting period and hands the job a fresh quota, so constant small corrections
            // would themselves skew the shares.
            if (share - r.share).abs() > SHARE_HYSTERESIS * r.share.max(0.01) {
                if let Err(e) = self.enforcer.set_share(r.spec.job, share) {
                    tracing::warn!(job = r.spec.job, "share not applied: {e}");
                    continue;
                }
                r.share = share;
            }
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Jobs are meant to outlive a restarting agent only while the agent is away by accident;
        // a clean stop of the agent leaves them running too (the server decides their fate).
        tracing::debug!("agent stopping with {} jobs", self.jobs.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_agent_stops_the_jobs_an_earlier_one_left_but_not_a_reused_pid() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job-7");
        let pid = proc::spawn(&["sleep".into(), "30".into()], &job, &[]).unwrap();
        let ticks = proc::start_ticks(pid).unwrap();
        // A pid file naming another process start (the pid was reused) is only removed.
        let other = dir.path().join("job-8");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(PID_FILE), format!("{pid} {}\n", ticks + 1)).unwrap();
        stop_orphans(dir.path());
        assert!(!other.join(PID_FILE).exists());
        assert!(proc::try_reap(pid).is_none(), "a reused pid was killed");
        std::fs::write(job.join(PID_FILE), format!("{pid} {ticks}\n")).unwrap();
        stop_orphans(dir.path());
        let t0 = Instant::now();
        let exit = loop {
            if let Some(e) = proc::try_reap(pid) {
                break e;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "the orphan was not stopped");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(exit.signal, Some(libc::SIGKILL));
    }
}
