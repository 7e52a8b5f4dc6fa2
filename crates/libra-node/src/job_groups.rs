//! A node's job groups in one cgroup v1 hierarchy beside the CPU controller's (memory, a
//! `cpuacct` mounted apart): `<root>/libra/<node>/job-N`, each joined by the job before `exec`
//! and ended with it. What such a hierarchy does for a job (a limit, a count) is its user's.

use crate::enforce::EnforceError;
use crate::kernel::Kernel;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct JobGroups {
    kernel: Arc<dyn Kernel>,
    node_dir: PathBuf,
    jobs: HashMap<u64, PathBuf>,
}

impl JobGroups {
    /// `<root>/libra/<node>`, made if missing; None when it cannot be.
    pub fn open(kernel: Arc<dyn Kernel>, root: &Path, node: &str) -> Option<JobGroups> {
        let libra = root.join("libra");
        let node_dir = libra.join(node);
        if kernel.mkdir(&libra).is_err() || kernel.mkdir(&node_dir).is_err() {
            return None;
        }
        Some(JobGroups { kernel, node_dir, jobs: HashMap::new() })
    }

    /// `<root>/libra/<node>`: the parent of the node's job groups.
    pub fn node_dir(&self) -> &Path {
        &self.node_dir
    }

    pub fn kernel(&self) -> &dyn Kernel {
        self.kernel.as_ref()
    }

    /// Makes the job's group (or takes the one an earlier agent made, for a job it adopts);
    /// returns its directory.
    pub fn make(&mut self, job: u64) -> Result<PathBuf, EnforceError> {
        let dir = self.node_dir.join(format!("job-{job}"));
        self.kernel
            .mkdir(&dir)
            .map_err(|source| EnforceError::Cgroup { path: dir.display().to_string(), source })?;
        self.jobs.insert(job, dir.clone());
        Ok(dir)
    }

    /// The job's group, while it has one.
    pub fn dir(&self, job: u64) -> Option<&Path> {
        self.jobs.get(&job).map(PathBuf::as_path)
    }

    /// Kills what is left in the job's group and removes it.
    pub fn remove(&mut self, job: u64) {
        if let Some(dir) = self.jobs.remove(&job) {
            crate::enforce::end_group(self.kernel.as_ref(), &dir);
        }
    }
}
