//! CPU-share enforcement. A node's capacity is a parent control group capped at `--cpus`; each
//! job is a child group whose weight follows its share (work-conserving: spare CPU goes to the
//! jobs present, so a job gets at least its share and never less). Where no cgroup hierarchy
//! can be written, stride scheduling in user space time-slices the jobs with SIGSTOP/SIGCONT.

use crate::kernel::Kernel;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum EnforceError {
    #[error("cgroup {path}: {source}")]
    Cgroup { path: String, source: std::io::Error },
    #[error("mechanism: '{0}' is not one of auto, cgroup-v2, cgroup-v1, stride, none")]
    UnknownMechanism(String),
    #[error("mechanism {0} is not available on this machine")]
    Unavailable(String),
}

/// Where the kernel puts a job, and how shares are told to it.
pub trait Enforcer: Send {
    /// Reported to the server and shown by `libra admin nodes`.
    fn mechanism(&self) -> &'static str;
    /// Prepares the job's group with its first share. Returns the file the child must write
    /// "0" into before `exec` (moving itself into the group), if the mechanism has one.
    fn prepare(&mut self, job: u64, share: f64) -> Result<Option<PathBuf>, EnforceError>;
    /// The job's process has started (its pid is its process group).
    fn started(&mut self, job: u64, pid: i32);
    fn set_share(&mut self, job: u64, share: f64) -> Result<(), EnforceError>;
    /// An administrator's suspend (the process group is stopped) or resume.
    fn set_suspended(&mut self, job: u64, suspended: bool);
    fn remove(&mut self, job: u64);
    /// Takes over a job an earlier agent started (it runs as `pid`, already in its group if the
    /// mechanism has groups).
    fn adopt(&mut self, job: u64, pid: i32, share: f64) -> Result<(), EnforceError> {
        self.prepare(job, share)?;
        self.started(job, pid);
        Ok(())
    }
    /// Stops what an earlier agent left in job groups other than `keep` (jobs nobody tracks any
    /// more, which would run outside every share) and removes those groups.
    fn clear_stale(&mut self, _keep: &std::collections::HashSet<u64>) {}
    /// Caps each job at exactly its share (quota = share x period) instead of its proportion
    /// of the node: on a node Libra shares with others (a Slurm node, whose other partitions'
    /// jobs run beside Libra's), Libra takes what it promised and no more.
    fn set_strict(&mut self, _strict: bool) {}
    /// Moves the agent itself (`pid`, the whole process) into a group of its own beside the
    /// node's (`agent_dir`), weighted as Libra's group is, so that the machine's other work does
    /// not delay what keeps the promises: starting a job, job control, its reports. Returns the
    /// group, or None where the mechanism has no groups.
    fn hold_agent(&mut self, _pid: u32) -> Result<Option<PathBuf>, EnforceError> {
        Ok(None)
    }
    /// The CPU seconds the job's group has used, every process in it counted (see
    /// `cpu_account`); None where the mechanism keeps no such count.
    fn cpu_seconds(&self, _job: u64) -> Option<f64> {
        None
    }
}

/// The most CPU the agent's own group may take (`Enforcer::hold_agent`), in CPUs: a bound on an
/// agent gone wrong, far above what one does (it is idle between jobs' starts and reports).
pub const AGENT_CPUS: f64 = 1.0;

/// The agent's own group beside node `node_dir`'s (`Enforcer::hold_agent`).
pub fn agent_dir(node_dir: &Path) -> PathBuf {
    let name = node_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    node_dir.with_file_name(format!("{name}-agent"))
}

/// Kills every process in a job's control group until it stays empty (a process may fork while
/// it is being killed), then removes the group. True when the group is gone.
pub fn end_group(kernel: &dyn Kernel, dir: &Path) -> bool {
    // cgroup v2 kills the whole group atomically where the kernel offers it.
    let _ = kernel.write(&dir.join("cgroup.kill"), "1");
    for _ in 0..100 {
        let procs = kernel.read(&dir.join("cgroup.procs")).unwrap_or_default();
        // Never 0 or 1: kill(0) would signal our own process group.
        let pids: Vec<i32> =
            procs.split_whitespace().filter_map(|p| p.parse().ok()).filter(|p| *p > 1).collect();
        for &pid in &pids {
            // SAFETY: kill(2) with a pid read from the job's own group: continued first, so a
            // stopped process dies too.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if pids.is_empty() && (kernel.rmdir(dir).is_ok() || !kernel.exists(dir)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Removes the control groups an agent left under `group` (its `group_name`): every job group
/// (killing what is still in it) and the node's own, in every hierarchy the agents use. For
/// those who start agents and clean up after them: benchmarks, tests, `libra up`.
pub fn remove_node_groups(group: &str) {
    let kernel = crate::kernel::RealKernel;
    for root in CGROUP_ROOTS {
        let node = Path::new(root).join(group);
        for job in std::fs::read_dir(&node).into_iter().flatten().flatten() {
            if job.file_name().to_string_lossy().starts_with("job-") {
                end_group(&kernel, &job.path());
            }
        }
        let _ = std::fs::remove_dir(&node);
        let _ = std::fs::remove_dir(agent_dir(&node));
    }
}

/// Removes the control groups of a stopped agent's node that are empty (its own group, and the
/// node's when no job group is left in it), killing nothing: a job that runs on keeps its group
/// and its node's, for the next agent to adopt. For `libra up` stopping.
pub fn remove_empty_node_groups(group: &str) {
    for root in CGROUP_ROOTS {
        let node = Path::new(root).join(group);
        let _ = std::fs::remove_dir(agent_dir(&node));
        let _ = std::fs::remove_dir(&node);
    }
}

/// Where the agents' groups are made, in every hierarchy they use (cgroup v1's cpu, cpuacct and
/// memory; the v2 unified tree).
const CGROUP_ROOTS: [&str; 4] = [
    "/sys/fs/cgroup/cpu/libra",
    "/sys/fs/cgroup/cpuacct/libra",
    "/sys/fs/cgroup/memory/libra",
    "/sys/fs/cgroup/libra",
];

/// Which cgroup interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// The bandwidth period. The kernel hands out quota in slices of a few milliseconds per CPU, so
/// a short period makes small caps imprecise (a 17 ms cap in a 100 ms period can be off by half);
/// a long one makes a job run in bursts, so any few-second window can catch a burst more or less
/// (with 1 s periods the measured shares over 5 s were off by up to 7%). 250 ms measured within
/// 1% here.
pub const CFS_PERIOD_US: u64 = 250_000;

/// cgroup v1 weight of the group holding all of Libra's nodes (the kernel's maximum).
pub const LIBRA_V1_SHARES: u64 = 262_144;

/// cgroup v1 `cpu.shares` for a share of CPUs (1024 = one CPU, the kernel's own unit).
pub fn v1_shares(share: f64) -> u64 {
    ((share * 1024.0).round() as u64).clamp(2, 262_144)
}

/// cgroup v2 `cpu.weight` for a share (100 = one CPU, the default weight).
pub fn v2_weight(share: f64) -> u64 {
    ((share * 100.0).round() as u64).clamp(1, 10_000)
}

pub struct CgroupEnforcer {
    kernel: Arc<dyn Kernel>,
    version: CgroupVersion,
    /// The node's own group (capped at its capacity).
    node_dir: PathBuf,
    cpus: f64,
    jobs: HashMap<u64, JobGroup>,
    /// See `Enforcer::set_strict`.
    strict: bool,
}

struct JobGroup {
    dir: PathBuf,
    share: f64,
    /// The cap last told to the kernel (0: none yet).
    quota: u64,
}

/// Each job's CPU cap: its share's proportion of the node's capacity. Weights alone do not
/// give proportional shares on a multi-core machine (a lone task on one core's run queue burns
/// the group's quota as fast as the crowd on the other core), so the caps carry the guarantee;
/// they add up to the node's capacity, so while the jobs are busy no capacity is left idle.
pub fn job_quotas(cpus: f64, shares: &[(u64, f64)]) -> Vec<(u64, u64)> {
    let total: f64 = shares.iter().map(|(_, s)| s.max(0.0)).sum();
    shares
        .iter()
        .map(|&(job, s)| {
            let frac = if total > 0.0 { s.max(0.0) / total } else { 1.0 / shares.len() as f64 };
            (job, ((frac * cpus * CFS_PERIOD_US as f64).round() as u64).max(1000))
        })
        .collect()
}

/// Each job's cap at exactly its share: quota = share x period (see `Enforcer::set_strict`).
pub fn strict_quotas(shares: &[(u64, f64)]) -> Vec<(u64, u64)> {
    shares
        .iter()
        .map(|&(job, s)| (job, ((s.max(0.0) * CFS_PERIOD_US as f64).round() as u64).max(1000)))
        .collect()
}

impl CgroupEnforcer {
    /// Creates `<root>/libra/<node>` capped at `cpus`. `root` is the cpu hierarchy: for v1 the
    /// `cpu` controller's mount, for v2 the unified mount with the cpu controller available.
    pub fn new(
        kernel: Arc<dyn Kernel>,
        version: CgroupVersion,
        root: &Path,
        node: &str,
        cpus: f64,
    ) -> Result<Self, EnforceError> {
        let err = |p: &Path| {
            let path = p.display().to_string();
            move |source| EnforceError::Cgroup { path, source }
        };
        let libra = root.join("libra");
        kernel.mkdir(&libra).map_err(err(&libra))?;
        // The nodes' capacity is promised to jobs: the group holding every node outweighs the
        // machine's other work, or a busy machine would quietly break admitted deadlines. The
        // per-node caps still bound what Libra takes.
        match version {
            CgroupVersion::V1 => {
                let f = libra.join("cpu.shares");
                kernel.write(&f, &LIBRA_V1_SHARES.to_string()).map_err(err(&f))?;
            }
            CgroupVersion::V2 => {
                let f = root.join("cgroup.subtree_control");
                kernel.write(&f, "+cpu").map_err(err(&f))?;
                let f = libra.join("cpu.weight");
                kernel.write(&f, "10000").map_err(err(&f))?;
                let f = libra.join("cgroup.subtree_control");
                kernel.write(&f, "+cpu").map_err(err(&f))?;
            }
        }
        let node_dir = libra.join(node);
        kernel.mkdir(&node_dir).map_err(err(&node_dir))?;
        let quota = (cpus * CFS_PERIOD_US as f64).round().max(1000.0) as u64;
        match version {
            CgroupVersion::V1 => {
                // Lifting the cap first keeps every intermediate state valid (the kernel refuses
                // a parent ratio below a child's).
                let f = node_dir.join("cpu.cfs_quota_us");
                kernel.write(&f, "-1").map_err(err(&f))?;
                let f = node_dir.join("cpu.cfs_period_us");
                kernel.write(&f, &CFS_PERIOD_US.to_string()).map_err(err(&f))?;
                let f = node_dir.join("cpu.cfs_quota_us");
                kernel.write(&f, &quota.to_string()).map_err(err(&f))?;
                let f = node_dir.join("cpu.shares");
                kernel.write(&f, &v1_shares(cpus).to_string()).map_err(err(&f))?;
            }
            CgroupVersion::V2 => {
                let f = node_dir.join("cpu.max");
                kernel.write(&f, &format!("{quota} {CFS_PERIOD_US}")).map_err(err(&f))?;
                let f = node_dir.join("cgroup.subtree_control");
                kernel.write(&f, "+cpu").map_err(err(&f))?;
            }
        }
        Ok(CgroupEnforcer { kernel, version, node_dir, cpus, jobs: HashMap::new(), strict: false })
    }

    pub fn node_dir(&self) -> &Path {
        &self.node_dir
    }

    fn write(&self, f: PathBuf, value: String) -> Result<(), EnforceError> {
        self.kernel
            .write(&f, &value)
            .map_err(|source| EnforceError::Cgroup { path: f.display().to_string(), source })
    }

    /// Tells the kernel every job's weight and cap (a change to one job's share moves the
    /// others' caps).
    fn rebalance(&mut self) -> Result<(), EnforceError> {
        let shares: Vec<(u64, f64)> = self.jobs.iter().map(|(j, g)| (*j, g.share)).collect();
        let quotas = if self.strict { strict_quotas(&shares) } else { job_quotas(self.cpus, &shares) };
        for (job, quota) in quotas {
            let Some(g) = self.jobs.get(&job) else { continue };
            // Each write restarts the kernel's accounting of the group's period: rewriting caps
            // that moved by a hair every job-control period would blur the shares it enforces.
            if g.quota != 0 && (quota as f64 - g.quota as f64).abs() <= 0.02 * g.quota as f64 {
                continue;
            }
            match self.version {
                CgroupVersion::V1 => {
                    self.write(g.dir.join("cpu.shares"), v1_shares(g.share).to_string())?;
                    if g.quota == 0 {
                        self.write(g.dir.join("cpu.cfs_period_us"), CFS_PERIOD_US.to_string())?;
                    }
                    self.write(g.dir.join("cpu.cfs_quota_us"), quota.to_string())?;
                }
                CgroupVersion::V2 => {
                    self.write(g.dir.join("cpu.weight"), v2_weight(g.share).to_string())?;
                    self.write(g.dir.join("cpu.max"), format!("{quota} {CFS_PERIOD_US}"))?;
                }
            }
            if let Some(g) = self.jobs.get_mut(&job) {
                g.quota = quota;
            }
        }
        Ok(())
    }
}

impl Enforcer for CgroupEnforcer {
    fn mechanism(&self) -> &'static str {
        match self.version {
            CgroupVersion::V1 => "cgroup-v1",
            CgroupVersion::V2 => "cgroup-v2",
        }
    }

    fn prepare(&mut self, job: u64, share: f64) -> Result<Option<PathBuf>, EnforceError> {
        let dir = self.node_dir.join(format!("job-{job}"));
        self.kernel
            .mkdir(&dir)
            .map_err(|source| EnforceError::Cgroup { path: dir.display().to_string(), source })?;
        let procs = dir.join("cgroup.procs");
        self.jobs.insert(job, JobGroup { dir, share, quota: 0 });
        self.rebalance()?;
        Ok(Some(procs))
    }

    fn started(&mut self, _job: u64, _pid: i32) {}

    fn set_share(&mut self, job: u64, share: f64) -> Result<(), EnforceError> {
        match self.jobs.get_mut(&job) {
            Some(g) => {
                g.share = share;
                self.rebalance()
            }
            None => Ok(()),
        }
    }

    fn set_suspended(&mut self, _job: u64, _suspended: bool) {}

    fn set_strict(&mut self, strict: bool) {
        self.strict = strict;
    }

    fn hold_agent(&mut self, pid: u32) -> Result<Option<PathBuf>, EnforceError> {
        let dir = agent_dir(&self.node_dir);
        self.kernel
            .mkdir(&dir)
            .map_err(|source| EnforceError::Cgroup { path: dir.display().to_string(), source })?;
        let cap = (AGENT_CPUS * CFS_PERIOD_US as f64).round() as u64;
        match self.version {
            CgroupVersion::V1 => {
                self.write(dir.join("cpu.shares"), LIBRA_V1_SHARES.to_string())?;
                self.write(dir.join("cpu.cfs_period_us"), CFS_PERIOD_US.to_string())?;
                self.write(dir.join("cpu.cfs_quota_us"), cap.to_string())?;
            }
            CgroupVersion::V2 => {
                self.write(dir.join("cpu.weight"), "10000".to_string())?;
                self.write(dir.join("cpu.max"), format!("{cap} {CFS_PERIOD_US}"))?;
            }
        }
        self.write(dir.join("cgroup.procs"), pid.to_string())?;
        Ok(Some(dir))
    }

    /// Job groups left by an agent that was killed whose jobs the new agent does not adopt:
    /// nobody tracks their processes any more (the server has marked them lost).
    fn clear_stale(&mut self, keep: &std::collections::HashSet<u64>) {
        let Ok(entries) = std::fs::read_dir(&self.node_dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let job = name.strip_prefix("job-").and_then(|j| j.parse::<u64>().ok());
            if job.is_some_and(|j| !keep.contains(&j) && !self.jobs.contains_key(&j)) {
                tracing::warn!("stopping what is left in {}", e.path().display());
                end_group(self.kernel.as_ref(), &e.path());
            }
        }
    }

    fn cpu_seconds(&self, job: u64) -> Option<f64> {
        crate::cpu_account::group_cpu(self.kernel.as_ref(), &self.jobs.get(&job)?.dir)
    }

    /// A job ends as a whole: whatever it left in its group (a `setsid` escapee, a daemon it
    /// forked) is killed with it, and the group removed.
    fn remove(&mut self, job: u64) {
        if let Some(JobGroup { dir, .. }) = self.jobs.remove(&job) {
            if !end_group(self.kernel.as_ref(), &dir) {
                tracing::warn!(job, "{} could not be emptied and removed", dir.display());
            }
            if let Err(e) = self.rebalance() {
                tracing::warn!(job, "shares after the job left: {e}");
            }
        }
    }
}

/// No enforcement at all (visible as `none`): jobs share the CPU as the kernel pleases.
pub struct NoEnforcer;

impl Enforcer for NoEnforcer {
    fn mechanism(&self) -> &'static str {
        "none"
    }
    fn prepare(&mut self, _: u64, _: f64) -> Result<Option<PathBuf>, EnforceError> {
        Ok(None)
    }
    fn started(&mut self, _: u64, _: i32) {}
    fn set_share(&mut self, _: u64, _: f64) -> Result<(), EnforceError> {
        Ok(())
    }
    fn set_suspended(&mut self, _: u64, _: bool) {}
    fn remove(&mut self, _: u64) {}
}

/// Finds the best mechanism this machine offers: cgroup v2 with a writable cpu controller, else
/// cgroup v1's cpu hierarchy, else user-space stride scheduling.
pub fn detect(
    kernel: Arc<dyn Kernel>,
    wanted: &str,
    node: &str,
    cpus: f64,
) -> Result<Box<dyn Enforcer>, EnforceError> {
    let v2_root = Path::new("/sys/fs/cgroup");
    let v1_root = Path::new("/sys/fs/cgroup/cpu");
    let try_v2 = || -> Result<Box<dyn Enforcer>, EnforceError> {
        let controllers = kernel.read(&v2_root.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "cpu") {
            return Err(EnforceError::Unavailable("cgroup-v2".into()));
        }
        Ok(Box::new(CgroupEnforcer::new(kernel.clone(), CgroupVersion::V2, v2_root, node, cpus)?))
    };
    let try_v1 = || -> Result<Box<dyn Enforcer>, EnforceError> {
        if !kernel.exists(&v1_root.join("cpu.shares")) {
            return Err(EnforceError::Unavailable("cgroup-v1".into()));
        }
        Ok(Box::new(CgroupEnforcer::new(kernel.clone(), CgroupVersion::V1, v1_root, node, cpus)?))
    };
    match wanted {
        "cgroup-v2" => try_v2(),
        "cgroup-v1" => try_v1(),
        "stride" => Ok(Box::new(crate::stride::StrideEnforcer::start(cpus))),
        "none" => Ok(Box::new(NoEnforcer)),
        "auto" => {
            match try_v2().or_else(|e2| {
                tracing::info!("{e2}");
                try_v1()
            }) {
                Ok(e) => Ok(e),
                Err(e) => {
                    tracing::warn!("no writable cgroup hierarchy ({e}): enforcing shares with user-space stride scheduling");
                    Ok(Box::new(crate::stride::StrideEnforcer::start(cpus)))
                }
            }
        }
        other => Err(EnforceError::UnknownMechanism(other.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FakeKernel;

    /// A cap of `cpus` CPUs in kernel units.
    fn q(cpus: f64) -> String {
        ((cpus * CFS_PERIOD_US as f64).round() as u64).to_string()
    }

    #[test]
    fn the_agent_is_held_beside_its_node_at_libras_weight_and_capped() {
        let k = FakeKernel::default();
        let mut e =
            CgroupEnforcer::new(Arc::new(k.clone()), CgroupVersion::V1, Path::new("/cg/cpu"), "n1", 0.5)
                .unwrap();
        assert_eq!(e.hold_agent(4242).unwrap().as_deref(), Some(Path::new("/cg/cpu/libra/n1-agent")));
        assert_eq!(k.get("/cg/cpu/libra/n1-agent/cpu.shares").as_deref(), Some("262144"));
        assert_eq!(k.get("/cg/cpu/libra/n1-agent/cpu.cfs_quota_us").as_deref(), Some(q(AGENT_CPUS).as_str()));
        assert_eq!(k.get("/cg/cpu/libra/n1-agent/cgroup.procs").as_deref(), Some("4242"));
        let k = FakeKernel::default();
        let mut e =
            CgroupEnforcer::new(Arc::new(k.clone()), CgroupVersion::V2, Path::new("/cg"), "n2", 2.0).unwrap();
        e.hold_agent(7).unwrap();
        assert_eq!(k.get("/cg/libra/n2-agent/cpu.weight").as_deref(), Some("10000"));
        assert_eq!(k.get("/cg/libra/n2-agent/cpu.max"), Some(format!("{} {CFS_PERIOD_US}", q(AGENT_CPUS))));
        assert_eq!(k.get("/cg/libra/n2-agent/cgroup.procs").as_deref(), Some("7"));
        // Not inside the node's group: the node's capacity is the jobs'.
        assert!(!k.exists(Path::new("/cg/libra/n2/n2-agent")));
        assert_eq!(NoEnforcer.hold_agent(1).unwrap(), None);
    }

    #[test]
    fn v1_caps_the_node_and_weights_jobs_by_share() {
        let k = FakeKernel::default();
        let root = Path::new("/cg/cpu");
        let mut e = CgroupEnforcer::new(Arc::new(k.clone()), CgroupVersion::V1, root, "n1", 0.5).unwrap();
        assert_eq!(k.get("/cg/cpu/libra/n1/cpu.cfs_quota_us").as_deref(), Some(q(0.5).as_str()));
        assert_eq!(k.get("/cg/cpu/libra/n1/cpu.cfs_period_us").as_deref(), Some(q(1.0).as_str()));
        let procs = e.prepare(7, 0.25).unwrap().unwrap();
        assert_eq!(procs, Path::new("/cg/cpu/libra/n1/job-7/cgroup.procs"));
        assert_eq!(k.get("/cg/cpu/libra/n1/job-7/cpu.shares").as_deref(), Some("256"));
        // Alone on the node, the job may use all of it.
        assert_eq!(k.get("/cg/cpu/libra/n1/job-7/cpu.cfs_quota_us").as_deref(), Some(q(0.5).as_str()));
        e.prepare(8, 0.25).unwrap();
        assert_eq!(k.get("/cg/cpu/libra/n1/job-7/cpu.cfs_quota_us").as_deref(), Some(q(0.25).as_str()));
        e.set_share(7, 0.5).unwrap();
        assert_eq!(k.get("/cg/cpu/libra/n1/job-7/cpu.shares").as_deref(), Some("512"));
        assert_eq!(k.get("/cg/cpu/libra/n1/job-7/cpu.cfs_quota_us").as_deref(), Some(q(0.333333).as_str()));
        assert_eq!(k.get("/cg/cpu/libra/n1/job-8/cpu.cfs_quota_us").as_deref(), Some(q(0.166667).as_str()));
        e.remove(8);
        e.remove(7);
        assert!(!k.exists(Path::new("/cg/cpu/libra/n1/job-7")));
        assert_eq!(e.mechanism(), "cgroup-v1");
    }

    #[test]
    fn v2_uses_cpu_max_and_weight() {
        let k = FakeKernel::default();
        let mut e =
            CgroupEnforcer::new(Arc::new(k.clone()), CgroupVersion::V2, Path::new("/cg"), "n2", 1.5).unwrap();
        assert_eq!(
            k.get("/cg/libra/n2/cpu.max").as_deref(),
            Some(format!("{} {CFS_PERIOD_US}", q(1.5)).as_str())
        );
        assert_eq!(k.get("/cg/cgroup.subtree_control").as_deref(), Some("+cpu"));
        e.prepare(1, 0.3).unwrap();
        assert_eq!(k.get("/cg/libra/n2/job-1/cpu.weight").as_deref(), Some("30"));
        assert_eq!(
            k.get("/cg/libra/n2/job-1/cpu.max").as_deref(),
            Some(format!("{} {CFS_PERIOD_US}", q(1.5)).as_str())
        );
        assert_eq!(e.mechanism(), "cgroup-v2");
    }

    #[test]
    fn unwritable_hierarchy_is_refused_not_ignored() {
        let k = FakeKernel::default();
        k.read_only.lock().unwrap().push(PathBuf::from("/ro"));
        assert!(CgroupEnforcer::new(Arc::new(k), CgroupVersion::V1, Path::new("/ro"), "n", 1.0).is_err());
    }

    #[test]
    fn detect_falls_back_to_stride_without_cgroups() {
        let k = FakeKernel::default();
        k.read_only.lock().unwrap().push(PathBuf::from("/sys"));
        let e = detect(Arc::new(k), "auto", "n", 0.5).unwrap();
        assert_eq!(e.mechanism(), "stride");
        assert!(detect(Arc::new(FakeKernel::default()), "bogus", "n", 1.0).is_err());
    }

    #[test]
    fn caps_are_proportional_and_fill_the_node() {
        let q = job_quotas(1.0, &[(1, 0.3), (2, 0.1)]);
        let p = CFS_PERIOD_US;
        assert_eq!(q, vec![(1, p * 3 / 4), (2, p / 4)]);
        assert_eq!(job_quotas(0.5, &[(1, 0.0), (2, 0.0)]), vec![(1, p / 4), (2, p / 4)]);
        // Strict (beside slurmd): exactly the share, whatever the others hold.
        assert_eq!(strict_quotas(&[(1, 0.3), (2, 0.1)]), vec![(1, p * 3 / 10), (2, p / 10)]);
    }

    #[test]
    fn share_units() {
        assert_eq!(v1_shares(1.0), 1024);
        assert_eq!(v1_shares(0.0), 2);
        assert_eq!(v2_weight(1.0), 100);
        assert_eq!(v2_weight(0.0), 1);
    }
}
