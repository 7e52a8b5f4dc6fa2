//! Memory groups in the cgroup v1 memory hierarchy, joined before `exec` like the CPU group:
//! one per job, limited (`memory.limit_in_bytes`) to what the job asked (`--mem`) where it
//! asked, under the node's group, limited to the memory the node offers (`libra node
//! --mem-mb`) where it offers a number. So jobs together never take more than the node
//! offers: past it, the kernel's OOM killer acts among the jobs alone, never on the agent or
//! the machine's other processes (and among the jobs, first on those that asked no memory:
//! `agent::NO_MEMORY_OOM_SCORE_ADJ`).

use crate::enforce::EnforceError;
use crate::job_groups::JobGroups;
use crate::kernel::Kernel;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct MemoryLimiter {
    groups: JobGroups,
}

impl MemoryLimiter {
    /// `<root>/libra/<node>` in the memory hierarchy, if it exists and can be written, limited
    /// to `node_mem_mb` MiB (0: not limited). A limit the kernel refuses (jobs adopted from an
    /// earlier agent already use more) is logged and left.
    pub fn new(kernel: Arc<dyn Kernel>, root: &Path, node: &str, node_mem_mb: u64) -> Option<MemoryLimiter> {
        if !kernel.exists(&root.join("memory.limit_in_bytes")) {
            return None;
        }
        let groups = JobGroups::open(kernel, root, node)?;
        let f = groups.node_dir().join("memory.limit_in_bytes");
        // -1: no limit (an agent restarted without --mem-mb lifts the earlier one).
        let limit = if node_mem_mb == 0 { "-1".to_string() } else { bytes(node_mem_mb) };
        if let Err(e) = groups.kernel().write(&f, &limit) {
            tracing::warn!(limit = %limit, "the node's memory group keeps its limit: {}: {e}", f.display());
        }
        Some(MemoryLimiter { groups })
    }

    /// Creates the job's group, limited to `mem_mb` MiB if it asked any (else within the node's
    /// limit only); returns the file the child joins it through.
    pub fn prepare(&mut self, job: u64, mem_mb: u64) -> Result<PathBuf, EnforceError> {
        let dir = self.groups.make(job)?;
        if mem_mb > 0 {
            let f = dir.join("memory.limit_in_bytes");
            self.groups
                .kernel()
                .write(&f, &bytes(mem_mb))
                .map_err(|source| EnforceError::Cgroup { path: f.display().to_string(), source })?;
        }
        Ok(dir.join("cgroup.procs"))
    }

    /// The job's group's `cgroup.procs`: every process of the job (none can leave the group).
    pub fn procs(&self, job: u64) -> Option<PathBuf> {
        self.groups.dir(job).map(|d| d.join("cgroup.procs"))
    }

    pub fn remove(&mut self, job: u64) {
        self.groups.remove(job);
    }
}

fn bytes(mb: u64) -> String {
    mb.saturating_mul(1 << 20).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FakeKernel;

    #[test]
    fn limits_in_bytes_and_absent_hierarchy() {
        let k = FakeKernel::default();
        assert!(MemoryLimiter::new(Arc::new(k.clone()), Path::new("/m"), "n", 0).is_none());
        k.write(Path::new("/m/memory.limit_in_bytes"), "9223372036854771712").unwrap();
        let mut m = MemoryLimiter::new(Arc::new(k.clone()), Path::new("/m"), "n", 1024).unwrap();
        assert_eq!(k.get("/m/libra/n/memory.limit_in_bytes").as_deref(), Some("1073741824"));
        let procs = m.prepare(3, 512).unwrap();
        assert_eq!(procs, Path::new("/m/libra/n/job-3/cgroup.procs"));
        assert_eq!(k.get("/m/libra/n/job-3/memory.limit_in_bytes").as_deref(), Some("536870912"));
        // A job that asked no memory has a group too, with no limit of its own.
        assert_eq!(m.prepare(4, 0).unwrap(), Path::new("/m/libra/n/job-4/cgroup.procs"));
        assert!(k.exists(Path::new("/m/libra/n/job-4")));
        assert_eq!(k.get("/m/libra/n/job-4/memory.limit_in_bytes"), None);
        m.remove(3);
        assert!(!k.exists(Path::new("/m/libra/n/job-3")));
        // A node that offers no number lifts its group's limit.
        MemoryLimiter::new(Arc::new(k.clone()), Path::new("/m"), "n", 0).unwrap();
        assert_eq!(k.get("/m/libra/n/memory.limit_in_bytes").as_deref(), Some("-1"));
    }
}
