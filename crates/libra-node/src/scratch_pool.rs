//! Scratch file systems made ahead of the jobs that will run in them.
//!
//! Making a job's scratch file system (`crate::scratch::mount`) reads the new ext4's metadata
//! through its loop device, and the loop device's reads are done by a kernel worker that runs at
//! the machine's own weight: beside jobs that take every CPU at Libra's weight, it waits, and a
//! job's start with it (measured: 2.0 s once, with eight busy loops beside the README's demo on
//! two cores, against about 2 ms idle). So the agent keeps a few made ahead, mounted in a
//! directory of its own (`POOL_DIR`, root's alone), by a thread of its own, off the path of any
//! start. A job's start takes one: its image is renamed into the job's directory (where
//! `scratch::mount` would have made it, and where the job's cleanup finds it), the file system
//! is bound onto the job's scratch directory and made nosuid and nodev there, and the pool's own
//! mount is detached. A bind is a change to the mount tree alone: no block is read. When none is
//! ready (a burst of starts, or a disk too full to make one), the start makes its own, as before.
//!
//! Nothing here outlives the agent by design: a clean stop detaches and removes the pool, and an
//! agent that starts clears whatever a killed one left (`Pool::start`). A job's file system, once
//! bound, is the job's: it is not under the pool's directory, and goes with the job's directory
//! as before.

use crate::scratch::{
    attach_and_mount, copy_sparse, give_root, is_mount_point, unmount, unmount_all_under, Template, IMAGE,
};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

/// In the agent's work directory: the file systems made ahead, each an image `N.img` mounted on
/// the directory `N`.
pub const POOL_DIR: &str = ".scratch-pool";

/// The most that may be kept ready (`AgentConfig::scratch_ahead`).
pub const MAX_READY: usize = 64;

/// How many are kept ready by default: enough for the starts of one exchange with the server on a node
/// (usually one or two jobs), few enough that an idle node holds little (each is a sparse
/// image of a few MiB written and a loop device).
pub const READY: usize = 2;

/// One file system made ahead: its image and where it is mounted.
struct Ready {
    image: PathBuf,
    root: PathBuf,
}

struct Shared {
    dir: PathBuf,
    template: Template,
    want: usize,
    ready: Mutex<Vec<Ready>>,
    /// Set when the pool is being removed: the filler makes no more.
    closed: AtomicBool,
    seq: AtomicU64,
}

/// The pool and its filler thread. Dropping it stops the thread and removes every file system
/// still in it.
pub struct Pool {
    shared: Arc<Shared>,
    wake: Option<Sender<()>>,
    filler: Option<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// Clears whatever an earlier agent left in `workdir`'s pool directory, makes it anew (root's
    /// alone) and starts the thread that keeps `want` file systems of `template` ready.
    pub fn start(workdir: &Path, template: Template, want: usize) -> std::io::Result<Pool> {
        let dir = workdir.join(POOL_DIR);
        clear(&dir);
        std::fs::create_dir(&dir)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let shared = Arc::new(Shared {
            dir,
            template,
            want,
            ready: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            seq: AtomicU64::new(0),
        });
        let (tx, rx) = channel::<()>();
        let s = shared.clone();
        let filler = std::thread::Builder::new().name("scratch-pool".into()).spawn(move || {
            // Filled at once, then after each take; a failure (a full disk) is tried again at
            // the next take, by when space may be back.
            let mut said = false;
            loop {
                match s.fill() {
                    Ok(()) => said = false,
                    Err(e) if !said => {
                        said = true;
                        tracing::warn!("cannot make a job's scratch file system ahead: {e}; each start makes its own meanwhile");
                    }
                    Err(_) => {}
                }
                if rx.recv().is_err() || s.closed.load(Ordering::Acquire) {
                    return;
                }
            }
        })?;
        tx.send(()).ok();
        Ok(Pool { shared, wake: Some(tx), filler: Some(filler) })
    }

    /// Gives the empty directory `scratch` one of the file systems made ahead, its image moved
    /// to `IMAGE` in `record` and its root given to `owner` (as `scratch::mount` does). `Ok(false)`
    /// when none is ready, or the one taken could not be moved there (logged): the caller makes
    /// one. An error only from giving the root to the job's account, as `scratch::mount`'s.
    pub fn take(&self, record: &Path, scratch: &Path, owner: Option<(u32, u32)>) -> Result<bool, String> {
        let Some(r) = self.shared.ready.lock().unwrap_or_else(|p| p.into_inner()).pop() else {
            return Ok(false);
        };
        // The filler makes the next one after this start is done, not beside it (both would
        // take the kernel's lock on the mount tree).
        let _refill = Refill(self.wake.as_ref());
        if is_mount_point(scratch) {
            // An earlier start of this job, on this very directory: its file system goes.
            unmount(scratch);
        }
        let image = record.join(IMAGE);
        let moved = std::fs::rename(&r.image, &image)
            .map_err(|e| format!("moving {} to {}: {e}", r.image.display(), image.display()))
            .and_then(|()| bind(&r.root, scratch));
        // The pool's own mount goes either way; once bound, the file system lives on in the
        // job's directory.
        unmount(&r.root);
        let _ = std::fs::remove_dir(&r.root);
        if let Err(e) = moved {
            tracing::warn!("cannot use a scratch file system made ahead ({e}); making one");
            let _ = std::fs::remove_file(&r.image);
            return Ok(false);
        }
        give_root(scratch, owner).map(|()| true)
    }

    /// How many file systems are ready now.
    pub fn ready(&self) -> usize {
        self.shared.ready.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Wakes the filler when dropped: at the end of a take, whichever way it ends.
struct Refill<'a>(Option<&'a Sender<()>>);

impl Drop for Refill<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.0 {
            let _ = w.send(());
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        // The filler finishes the file system it is making, sees `closed` and returns.
        drop(self.wake.take());
        if let Some(t) = self.filler.take() {
            let _ = t.join();
        }
        clear(&self.shared.dir);
    }
}

impl Shared {
    /// Makes file systems until `want` are ready (or the pool closes); the error of the first
    /// that could not be made.
    fn fill(&self) -> Result<(), String> {
        loop {
            let have = self.ready.lock().unwrap_or_else(|p| p.into_inner()).len();
            if have >= self.want || self.closed.load(Ordering::Acquire) {
                return Ok(());
            }
            let n = self.seq.fetch_add(1, Ordering::Relaxed);
            let (image, root) = (self.dir.join(format!("{n}.img")), self.dir.join(n.to_string()));
            if let Err(e) = self.make(&image, &root) {
                unmount(&root);
                let _ = std::fs::remove_dir(&root);
                let _ = std::fs::remove_file(&image);
                return Err(e);
            }
            self.ready.lock().unwrap_or_else(|p| p.into_inner()).push(Ready { image, root });
        }
    }

    fn make(&self, image: &Path, root: &Path) -> Result<(), String> {
        std::fs::create_dir(root).map_err(|e| format!("cannot make {}: {e}", root.display()))?;
        copy_sparse(&self.template.path, image)
            .map_err(|e| format!("copying {}: {e}", self.template.path.display()))?;
        attach_and_mount(image, root)?;
        // Root's alone until a job's start gives it away (`give_root`).
        give_root(root, None)
    }
}

/// Detaches every file system under `dir` and removes it (what is left of a pool).
pub fn clear(dir: &Path) {
    unmount_all_under(dir);
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(dir = %dir.display(), "removing the scratch file systems made ahead: {e}"),
    }
}

/// Binds the file system mounted on `from` onto `to`, nosuid and nodev there (a bind takes
/// neither flag from its source: they are set by a second call, before any job can reach `to`).
fn bind(from: &Path, to: &Path) -> Result<(), String> {
    let cstr =
        |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|_| "a path with a NUL byte".to_string());
    let (source, target) = (cstr(from)?, cstr(to)?);
    // SAFETY (both calls): mount(2) with NUL-terminated strings that outlive the call and null
    // where the call takes none.
    let r = unsafe {
        libc::mount(source.as_ptr(), target.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null())
    };
    if r < 0 {
        return Err(format!(
            "binding {} on {}: {}",
            from.display(),
            to.display(),
            std::io::Error::last_os_error()
        ));
    }
    let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV;
    let r =
        unsafe { libc::mount(std::ptr::null(), target.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        unmount(to);
        return Err(format!("making {} nosuid and nodev: {e}", to.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::{can_mount, mounts_under, probe};
    use std::os::unix::fs::MetadataExt;

    fn wait_ready(pool: &Pool, n: usize) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while pool.ready() < n {
            assert!(std::time::Instant::now() < until, "{} of {n} made ahead", pool.ready());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A start takes a file system made ahead: the job's, nosuid and nodev in its directory, its
    /// image in the job's record, the pool's own mount gone, and another made in its place. One
    /// an earlier agent left is cleared at start; dropping the pool removes everything of it;
    /// with none ready, `take` says so and the caller makes one.
    #[test]
    fn a_start_takes_a_file_system_made_ahead_and_the_pool_refills() {
        if !can_mount() || probe(&std::env::temp_dir()).is_err() {
            eprintln!("no loop mounts here (not root, or no loop devices): not tested");
            return;
        }
        let d = std::env::temp_dir().join(format!("libra-scratch-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let (record, scratch) = (d.join("job-1"), d.join("job-1").join("work"));
        std::fs::create_dir_all(&scratch).unwrap();
        let template = Template::make(&d, 8).unwrap();
        // What a killed agent left: a mounted file system in the pool's directory.
        let left = d.join(POOL_DIR).join("7");
        std::fs::create_dir_all(&left).unwrap();
        attach_and_mount(&template.path, &left).unwrap();
        let pool = Pool::start(&d, template.clone(), 2).unwrap();
        assert!(!crate::scratch::is_mount_point(&left), "an earlier agent's file system stays");
        wait_ready(&pool, 2);
        let pooled = mounts_under(&d.join(POOL_DIR));
        assert_eq!(pooled.len(), 2, "{pooled:?}");

        assert!(pool.take(&record, &scratch, Some((12345, 12346))).unwrap());
        assert!(crate::scratch::is_mount_point(&scratch));
        let meta = std::fs::metadata(&scratch).unwrap();
        assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o7777), (12345, 12346, 0o700));
        assert!(!scratch.join("lost+found").exists());
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let line =
            info.lines().find(|l| l.split(' ').nth(4) == Some(&scratch.display().to_string())).unwrap();
        let opts = line.split(' ').nth(5).unwrap();
        assert!(opts.contains("nosuid") && opts.contains("nodev"), "{line}");
        assert_eq!(std::fs::metadata(record.join(IMAGE)).unwrap().len(), 8 << 20);
        // The job's writes stop at its size, in its file system alone.
        std::fs::write(scratch.join("f"), vec![1u8; 1 << 20]).unwrap();
        assert!(std::fs::write(scratch.join("g"), vec![1u8; 16 << 20]).is_err());
        // The one taken is no longer the pool's, and another is made in its place.
        wait_ready(&pool, 2);
        let now = mounts_under(&d.join(POOL_DIR));
        assert_eq!(now.len(), 2, "{now:?}");
        assert_eq!(now.iter().filter(|m| pooled.contains(m)).count(), 1, "{pooled:?} then {now:?}");

        // None ready (a pool of none): the caller makes one.
        let (record2, scratch2) = (d.join("job-2"), d.join("job-2").join("work"));
        std::fs::create_dir_all(&scratch2).unwrap();
        drop(pool);
        assert!(!d.join(POOL_DIR).exists(), "the pool's directory stays");
        let empty = Pool::start(&d, template, 0).unwrap();
        assert!(!empty.take(&record2, &scratch2, None).unwrap());
        assert!(!crate::scratch::is_mount_point(&scratch2));
        drop(empty);
        assert!(unmount(&scratch));
        assert_eq!(mounts_under(&d), Vec::<PathBuf>::new());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
