//! A job's scratch directory as a file system of its own. A job given no working directory runs
//! in a scratch directory inside the agent's work directory, and its output files are there too.
//! As a plain directory, one job writing without end (`yes > out`) fills the disk the agent
//! keeps every job's record on, and the node drains itself: one user stops everyone's jobs
//! there. So, where the agent can mount (it runs as root), each such job's scratch directory is
//! an ext4 file system of `scratch_mb` MiB on a sparse image in the job's record directory,
//! mounted with a loop device: the kernel refuses the job's writes past its size (ENOSPC), and
//! nothing the job does reaches the agent's files or another job's scratch.
//!
//! The image is sparse: it takes on disk what the job writes, not its size, so the node's disk
//! is not reserved ahead (jobs that write little cost nothing), and the bound is per job: a
//! user's jobs on one node write at most `scratch_mb` each.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The default size of a job's scratch file system, MiB.
pub const DEFAULT_MB: u64 = 1024;

/// The smallest size accepted, MiB: below it ext4's own structures leave a job next to nothing.
pub const MIN_MB: u64 = 4;

/// The largest size accepted, MiB (16 TiB, ext4's limit with 4 KiB blocks).
pub const MAX_MB: u64 = 16 * 1024 * 1024;

/// In the agent's directory for a job: the image its scratch file system lives on.
pub const IMAGE: &str = "scratch.img";

/// Where the tools are looked for: the agent may run with a PATH without the sbin directories.
const TOOL_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether this process may mount (it runs as root).
pub fn can_mount() -> bool {
    // SAFETY: geteuid has no memory effects.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `dir` is the root of a mount: on a device of its own, or its parent's inode is its
/// own (`/`).
pub fn is_mount_point(dir: &Path) -> bool {
    let Ok(d) = std::fs::symlink_metadata(dir) else { return false };
    let parent = dir.parent().unwrap_or(dir);
    let Ok(p) = std::fs::symlink_metadata(parent) else { return false };
    d.is_dir() && (d.dev() != p.dev() || d.ino() == p.ino())
}

/// Makes `scratch` (an empty directory) a file system of `mb` MiB, on the image `IMAGE` in
/// `record`, whose root belongs to `owner` (uid, gid) with mode 0700: nosuid and nodev, so that
/// nothing in it gains privileges. An image left by an earlier attempt is made anew. The error
/// says what failed; a full disk shows as "No space left on device".
pub fn mount(record: &Path, scratch: &Path, mb: u64, owner: Option<(u32, u32)>) -> Result<(), String> {
    if is_mount_point(scratch) {
        // An earlier start of this job, on this very directory: its file system goes.
        unmount(scratch);
    }
    let image = record.join(IMAGE);
    make_image(&image, mb)
        .map_err(|e| format!("cannot make the job's scratch image {}: {e}", image.display()))?;
    let made = |e: String| format!("cannot make the job's scratch file system: {e}");
    let mut mkfs = Command::new(tool("mkfs.ext4"));
    mkfs.env_clear().env("PATH", TOOL_PATH).args(["-q", "-F", "-m", "0", "-O", "^has_journal"]);
    // The job's account owns the root from the start: nothing in between is anyone else's.
    let mut extended = String::from("nodiscard");
    if let Some((uid, gid)) = owner {
        extended.push_str(&format!(",root_owner={uid}:{gid}"));
    }
    mkfs.args(["-E", &extended]).arg(&image);
    run(&mut mkfs, "mkfs.ext4").map_err(made)?;
    let mut mount = Command::new(tool("mount"));
    // noinit_itable: the image reads as zeros already, so the kernel need not write its inode
    // tables out in the background (which would take disk and time for nothing).
    mount.env_clear().env("PATH", TOOL_PATH).args(["-t", "ext4", "-o", "loop,nosuid,nodev,noinit_itable"]);
    mount.arg(&image).arg(scratch);
    run(&mut mount, "mount").map_err(made)?;
    // ext4's lost+found is root's; the job has no use for it, and the directory is the job's.
    let _ = std::fs::remove_dir(scratch.join("lost+found"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
        unmount(scratch);
        format!("cannot set the mode of the job's scratch {}: {e}", scratch.display())
    })?;
    Ok(())
}

/// Detaches the file system mounted on `scratch`, if one is: at once from the tree, and from its
/// loop device when the last file open in it closes (the loop device was set to clear itself).
/// A symbolic link is not followed. True when something was unmounted.
pub fn unmount(scratch: &Path) -> bool {
    let Ok(c) = CString::new(scratch.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) == 0 }
}

/// The mount points at or below `dir`, deepest first, from `/proc/self/mountinfo`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape(p)))
        .filter(|p| p.starts_with(&dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// Detaches every file system mounted at or below `dir` (`unmount`): for whoever removes a
/// tree of job directories whose agent is gone (a test, `libra bench torture`). The count.
pub fn unmount_all_under(dir: &Path) -> usize {
    mounts_under(dir).iter().filter(|m| unmount(m)).count()
}

/// A path as mountinfo writes it: space, tab, newline and backslash as octal escapes.
fn unescape(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal =
            b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Checks, at the agent's start, that a job's scratch file system can be made in `workdir`:
/// one of `MIN_MB` is made, written to, and removed. The error says what failed.
pub fn probe(workdir: &Path) -> Result<(), String> {
    if !can_mount() {
        return Err("the agent does not run as root, and only root may mount".into());
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = workdir.join(format!(".scratch-probe-{}-{seq}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scratch = dir.join("work");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("cannot make {}: {e}", scratch.display()))?;
    let made = mount(&dir, &scratch, MIN_MB, None).and_then(|()| {
        std::fs::write(scratch.join("probe"), b"probe").map_err(|e| format!("cannot write in it: {e}"))
    });
    unmount(&scratch);
    let _ = std::fs::remove_dir_all(&dir);
    made
}

fn make_image(image: &Path, mb: u64) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(image);
    let f = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(image)?;
    f.set_len(mb * (1 << 20))?;
    f.sync_all()
}

fn tool(name: &str) -> PathBuf {
    TOOL_PATH.split(':').map(|d| Path::new(d).join(name)).find(|p| p.exists()).unwrap_or_else(|| name.into())
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = crate::proc::run_tool(cmd.stdin(std::process::Stdio::null()))
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    // The tools' last line says what went wrong (mkfs.ext4 warns of each sector before it).
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or_default();
    Err(format!(
        "{what} failed ({}){}",
        out.status,
        if last.is_empty() { String::new() } else { format!(": {last}") }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("libra-scratch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("work")).unwrap();
        d
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape(r"/tmp/a\040b\011c\134d"), "/tmp/a b\tc\\d");
        assert_eq!(unescape(r"/x\04"), r"/x\04");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn a_plain_directory_is_no_mount_point_and_the_root_is() {
        let d = dir("plain");
        assert!(!is_mount_point(&d.join("work")));
        assert!(is_mount_point(Path::new("/")));
        assert!(!unmount(&d.join("work")), "unmounting a plain directory");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The file system refuses writes past its size, its root is the owner's with mode 0700, and
    /// the image takes on disk what was written, not the size.
    #[test]
    fn a_scratch_file_system_holds_at_most_its_size() {
        if !can_mount() || probe(&std::env::temp_dir()).is_err() {
            eprintln!("no loop mounts here (not root, or no loop devices): not tested");
            return;
        }
        let d = dir("size");
        let scratch = d.join("work");
        mount(&d, &scratch, 8, Some((12345, 12346))).unwrap();
        assert!(is_mount_point(&scratch));
        assert_eq!(mounts_under(&d), vec![scratch.clone()]);
        let meta = std::fs::metadata(&scratch).unwrap();
        assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o7777), (12345, 12346, 0o700));
        let image = std::fs::metadata(d.join(IMAGE)).unwrap();
        assert_eq!(image.len(), 8 << 20);
        assert_eq!(image.mode() & 0o777, 0o600);
        use std::io::Write;
        let mut f = std::fs::File::create(scratch.join("big")).unwrap();
        let block = vec![7u8; 1 << 20];
        let mut written = 0u64;
        let err = loop {
            match f.write_all(&block).and_then(|()| f.sync_all()) {
                Ok(()) => written += 1 << 20,
                Err(e) => break e,
            }
            assert!(written < 64 << 20, "wrote 64 MiB into an 8 MiB file system");
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        assert!(written <= 8 << 20, "{written}");
        // What the image takes on disk: what was written, and ext4's own few blocks.
        let taken = std::fs::metadata(d.join(IMAGE)).unwrap().blocks() * 512;
        assert!(taken <= (8 << 20) + (1 << 20), "{taken}");
        drop(f);
        assert!(unmount(&scratch));
        assert!(!is_mount_point(&scratch));
        assert!(
            std::fs::read_dir(&scratch).unwrap().next().is_none(),
            "the directory under the mount holds files"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
