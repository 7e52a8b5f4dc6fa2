//! A test's own scratch directory that does not outlive the test.

use std::path::{Path, PathBuf};

/// `libra-NAME-PID` under the system's temporary directory: emptied when made, and removed with
/// everything in it when dropped, even when the test fails. A test that starts processes in it
/// declares its `Cleanup` after the `Scratch`, so that the processes are stopped (the later
/// local drops first) before their directory goes. Made with the process's umask (not
/// `tempfile`'s private 0700), since some tests check the modes of what Libra creates in it
/// or let other Unix accounts reach into it.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("libra-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn is_removed_with_its_files_when_dropped() {
        let s = Scratch::new("testkit-scratch");
        let path = s.to_path_buf();
        std::fs::create_dir_all(s.join("a/b")).unwrap();
        std::fs::write(s.join("a/b/f"), "x").unwrap();
        drop(s);
        assert!(!path.exists(), "{} outlived its guard", path.display());
    }
}
