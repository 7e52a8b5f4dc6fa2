//! The kernel interfaces the agent writes to, behind a trait so that enforcement can be tested
//! with a fake. The real one is the cgroup file system.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub trait Kernel: Send + Sync {
    fn exists(&self, path: &Path) -> bool;
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    fn read(&self, path: &Path) -> io::Result<String>;
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
}

/// The real file system.
pub struct RealKernel;

impl Kernel for RealKernel {
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        match std::fs::create_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            r => r,
        }
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        std::fs::write(path, value)
    }
}

/// An in-memory stand-in: directories and files in a map; every write is recorded.
#[derive(Clone, Default)]
pub struct FakeKernel {
    pub files: Arc<Mutex<BTreeMap<PathBuf, String>>>,
    pub dirs: Arc<Mutex<BTreeMap<PathBuf, ()>>>,
    /// Paths whose writes fail (to test refusal).
    pub read_only: Arc<Mutex<Vec<PathBuf>>>,
}

impl FakeKernel {
    pub fn get(&self, path: impl AsRef<Path>) -> Option<String> {
        self.files.lock().ok()?.get(path.as_ref()).cloned()
    }
}

impl Kernel for FakeKernel {
    fn exists(&self, path: &Path) -> bool {
        self.dirs.lock().is_ok_and(|d| d.contains_key(path))
            || self.files.lock().is_ok_and(|f| f.contains_key(path))
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        if self.read_only.lock().is_ok_and(|r| r.iter().any(|p| path.starts_with(p))) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "read-only"));
        }
        self.dirs.lock().map_err(|_| io::Error::other("poisoned"))?.insert(path.to_path_buf(), ());
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.dirs.lock().map_err(|_| io::Error::other("poisoned"))?.remove(path);
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        self.get(path).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        if self.read_only.lock().is_ok_and(|r| r.iter().any(|p| path.starts_with(p))) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "read-only"));
        }
        self.files
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .insert(path.to_path_buf(), value.to_string());
        Ok(())
    }
}
