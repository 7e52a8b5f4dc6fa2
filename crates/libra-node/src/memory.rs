//! Memory limits for jobs that ask for memory (`--mem`): a job group in the cgroup v1 memory
//! hierarchy with `memory.limit_in_bytes`, joined before `exec` like the CPU group.

use crate::enforce::EnforceError;
use crate::kernel::Kernel;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct MemoryLimiter {
    kernel: Arc<dyn Kernel>,
    node_dir: PathBuf,
    jobs: HashMap<u64, PathBuf>,
}

impl MemoryLimiter {
    /// `<root>/libra/<node>` in the memory hierarchy, if it exists and can be written.
    pub fn new(kernel: Arc<dyn Kernel>, root: &Path, node: &str) -> Option<MemoryLimiter> {
        if !kernel.exists(&root.join("memory.limit_in_bytes")) {
            return None;
        }
        let libra = root.join("libra");
        let node_dir = libra.join(node);
        if kernel.mkdir(&libra).is_err() || kernel.mkdir(&node_dir).is_err() {
            return None;
        }
        Some(MemoryLimiter { kernel, node_dir, jobs: HashMap::new() })
    }

    /// Creates the job's group with its limit; returns the file the child joins it through.
    pub fn prepare(&mut self, job: u64, mem_mb: u64) -> Result<PathBuf, EnforceError> {
        let dir = self.node_dir.join(format!("job-{job}"));
        let err = |p: &Path| {
            let path = p.display().to_string();
            move |source| EnforceError::Cgroup { path, source }
        };
        self.kernel.mkdir(&dir).map_err(err(&dir))?;
        let f = dir.join("memory.limit_in_bytes");
        self.kernel.write(&f, &(mem_mb.saturating_mul(1 << 20)).to_string()).map_err(err(&f))?;
        self.jobs.insert(job, dir.clone());
        Ok(dir.join("cgroup.procs"))
    }

    pub fn remove(&mut self, job: u64) {
        if let Some(dir) = self.jobs.remove(&job) {
            crate::enforce::end_group(self.kernel.as_ref(), &dir);
        }
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
