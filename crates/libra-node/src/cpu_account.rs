//! The CPU a job has used, every process of it: those that left its session (`setsid`, a
//! daemon handed to init) included, which the count by session (`proc::cpu_by_session`) and
//! the keeper's rusage both miss. A job is billed by its CPU, so a count that a job can step
//! around is a way not to pay. The job's control group holds all its processes, and the kernel
//! counts their CPU there: cgroup v2's `cpu.stat`, v1's `cpuacct.usage`. Where v1 mounts
//! `cpuacct` apart from `cpu`, the job gets a group in the `cpuacct` hierarchy too
//! (`CpuAccount`), joined before `exec` as the CPU and memory groups are.

use crate::enforce::EnforceError;
use crate::job_groups::JobGroups;
use crate::kernel::Kernel;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The CPU seconds the processes of control group `group` have used, those that exited
/// included: `cpuacct.usage` (v1, nanoseconds) where the group has it, else `usage_usec` of
/// `cpu.stat` (v2). None where neither is there (a v1 `cpu` group whose `cpuacct` is mounted
/// apart).
pub fn group_cpu(kernel: &dyn Kernel, group: &Path) -> Option<f64> {
    if let Ok(ns) = kernel.read(&group.join("cpuacct.usage")) {
        return ns.trim().parse::<f64>().ok().map(|n| n / 1e9);
    }
    let stat = kernel.read(&group.join("cpu.stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|us| us / 1e6)
}

/// Job groups in a v1 `cpuacct` hierarchy mounted apart from `cpu`: `<root>/libra/<node>/job-N`.
pub struct CpuAccount {
    groups: JobGroups,
}

impl CpuAccount {
    /// The `cpuacct` hierarchy mounted at `root`, when it counts (`cpuacct.usage`), can be
    /// written, and is not the one at `cpu_root` (the `cpu` controller's mount: where the two
    /// share a mount, the CPU group counts already). None otherwise.
    pub fn new(kernel: Arc<dyn Kernel>, root: &Path, cpu_root: &Path, node: &str) -> Option<CpuAccount> {
        if !kernel.exists(&root.join("cpuacct.usage")) || kernel.exists(&cpu_root.join("cpuacct.usage")) {
            return None;
        }
        Some(CpuAccount { groups: JobGroups::open(kernel, root, node)? })
    }

    /// Makes the job's group (or takes the one an earlier agent made, for a job it adopts);
    /// returns the file the job joins it through.
    pub fn prepare(&mut self, job: u64) -> Result<PathBuf, EnforceError> {
        Ok(self.groups.make(job)?.join("cgroup.procs"))
    }

    /// The CPU seconds the job's group has used.
    pub fn seconds(&self, job: u64) -> Option<f64> {
        group_cpu(self.groups.kernel(), self.groups.dir(job)?)
    }

    /// Kills what is left in the job's group and removes it.
    pub fn remove(&mut self, job: u64) {
        self.groups.remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FakeKernel;

    #[test]
    fn a_group_counts_in_v1_nanoseconds_or_v2_microseconds_and_else_says_nothing() {
        let k = FakeKernel::default();
        k.write(Path::new("/v1/job-1/cpuacct.usage"), "2500000000\n").unwrap();
        k.write(Path::new("/v2/job-1/cpu.stat"), "usage_usec 1500000\nuser_usec 1000000\n").unwrap();
        k.write(Path::new("/apart/job-1/cpu.stat"), "nr_periods 3\nnr_throttled 0\n").unwrap();
        assert_eq!(group_cpu(&k, Path::new("/v1/job-1")), Some(2.5));
        assert_eq!(group_cpu(&k, Path::new("/v2/job-1")), Some(1.5));
        assert_eq!(group_cpu(&k, Path::new("/apart/job-1")), None);
    }

    #[test]
    fn a_cpuacct_hierarchy_apart_from_cpu_gets_job_groups_and_one_shared_with_cpu_does_not() {
        let k = FakeKernel::default();
        let (acct, cpu) = (Path::new("/sys/acct"), Path::new("/sys/cpu"));
        assert!(CpuAccount::new(Arc::new(k.clone()), acct, cpu, "n").is_none(), "no cpuacct");
        k.write(&acct.join("cpuacct.usage"), "0").unwrap();
        k.write(&cpu.join("cpuacct.usage"), "0").unwrap();
        assert!(CpuAccount::new(Arc::new(k.clone()), acct, cpu, "n").is_none(), "shared with cpu");
        let apart = FakeKernel::default();
        apart.write(&acct.join("cpuacct.usage"), "0").unwrap();
        let mut a = CpuAccount::new(Arc::new(apart.clone()), acct, cpu, "n").unwrap();
        assert_eq!(a.prepare(4).unwrap(), Path::new("/sys/acct/libra/n/job-4/cgroup.procs"));
        apart.write(Path::new("/sys/acct/libra/n/job-4/cpuacct.usage"), "750000000").unwrap();
        assert_eq!(a.seconds(4), Some(0.75));
        assert_eq!(a.seconds(5), None);
        a.remove(4);
        assert!(!apart.exists(Path::new("/sys/acct/libra/n/job-4")));
        assert_eq!(a.seconds(4), None);
    }
}
