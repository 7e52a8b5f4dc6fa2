//! A disk of a test's own ([`SmallDisk`]): a small tmpfs to fill, to see what Libra does when a
//! disk is full.

/// A small file system (tmpfs) of the test's own, unmounted when dropped: a disk that can be
/// filled without touching the machine's.
pub struct SmallDisk {
    pub dir: std::path::PathBuf,
}

impl SmallDisk {
    /// A tmpfs of `mib` MiB on a fresh directory; None, saying why on standard error, where
    /// mounting is not permitted (not root, or a container without the right): the test that
    /// asked is then not run.
    pub fn mount(mib: u32) -> Option<SmallDisk> {
        // SAFETY: geteuid has no memory effects.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: no file system of the test's own can be mounted here, not tested");
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "libra-small-disk-{}-{}",
            std::process::id(),
            crate::free_port()
        ));
        std::fs::create_dir_all(&dir).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0700"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("mount -t tmpfs is not permitted here: not tested");
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(SmallDisk { dir })
    }

    /// Takes every free byte with one file, written until the file system says ENOSPC.
    pub fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.dir.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        for chunk in [64 * 1024, 4096, 1] {
            let block = vec![0u8; chunk];
            loop {
                match f.write(&block) {
                    Ok(n) if n == chunk => {}
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => panic!("filling {}: {e}", path.display()),
                }
            }
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted =
            std::process::Command::new("umount").arg(&self.dir).status().is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a process of a failed test): detach it, it goes when they do.
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
