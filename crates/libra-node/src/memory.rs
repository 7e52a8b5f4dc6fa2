//! Memory limits for jobs that ask for memory (`--mem`): a job group in the cgroup v1 memory
//! hierarchy with `memory.limit_in_bytes`, joined before `exec` like the CPU group.

use crate::enforce::EnforceError;
use crate::job_groups::JobGroups;
use crate::kernel::Kernel;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct MemoryLimiter {
    groups: JobGroups,
}

impl MemoryLimiter {
    /// `<root>/libra/<node>` in the memory hierarchy, if it exists and can be written.
    pub fn new(kernel: Arc<dyn Kernel>, root: &Path, node: &str) -> Option<MemoryLimiter> {
        if !kernel.exists(&root.join("memory.limit_in_bytes")) {
            return None;
        }
        Some(MemoryLimiter { groups: JobGroups::open(kernel, root, node)? })
    }

    /// Creates the job's group with its limit; returns the file the child joins it through.
    pub fn prepare(&mut self, job: u64, mem_mb: u64) -> Result<PathBuf, EnforceError> {
        let dir = self.groups.make(job)?;
        let f = dir.join("memory.limit_in_bytes");
        self.groups
            .kernel()
            .write(&f, &(mem_mb.saturating_mul(1 << 20)).to_string())
            .map_err(|source| EnforceError::Cgroup { path: f.display().to_string(), source })?;
        Ok(dir.join("cgroup.procs"))
    }

    pub fn remove(&mut self, job: u64) {
        self.groups.remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FakeKernel;

    #[test]
    fn limits_in_bytes_and_absent_hierarchy() {
        let k = FakeKernel::default();
        assert!(MemoryLimiter::new(Arc::new(k.clone()), Path::new("/m"), "n").is_none());
        k.write(Path::new("/m/memory.limit_in_bytes"), "9223372036854771712").unwrap();
        let mut m = MemoryLimiter::new(Arc::new(k.clone()), Path::new("/m"), "n").unwrap();
        let procs = m.prepare(3, 512).unwrap();
        assert_eq!(procs, Path::new("/m/libra/n/job-3/cgroup.procs"));
        assert_eq!(k.get("/m/libra/n/job-3/memory.limit_in_bytes").as_deref(), Some("536870912"));
        m.remove(3);
        assert!(!k.exists(Path::new("/m/libra/n/job-3")));
    }
}
