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
//!
//! A job's start runs no program: `mkfs.ext4` makes one empty file system when the agent starts
//! (`Template`), and each job's image is a copy of its few written blocks (the rest stays a hole);
//! the loop device is attached and the file system mounted by system calls. Jobs outweigh the
//! machine's other work in the CPU groups (`crate::enforce`), the agent included, so a program the
//! agent started while jobs run could wait for a CPU for seconds (measured: `mkfs.ext4` 0.9 s and
//! `mount` 0.7 s beside two busy jobs on two cores), and a job's start with it.

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

/// An empty file system of a job's scratch size, made once (`mkfs.ext4`) when the agent starts:
/// each job's image is a sparse copy of it (`mount`).
#[derive(Debug, Clone)]
pub struct Template {
    pub path: PathBuf,
    pub mb: u64,
}

impl Template {
    /// Makes the template of `mb` MiB in `dir` (a file only root may read: `.scratch-MB.img`),
    /// anew, and checks that a job's file system can be made of it here: one is mounted, written
    /// to, and removed. The error says what failed.
    pub fn make(dir: &Path, mb: u64) -> Result<Template, String> {
        if !can_mount() {
            return Err("the agent does not run as root, and only root may mount".into());
        }
        let path = dir.join(format!(".scratch-{mb}.img"));
        // An earlier agent's template of another size is of no use now.
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".scratch-") && name.ends_with(".img") && e.path() != path {
                let _ = std::fs::remove_file(e.path());
            }
        }
        make_image(&path, mb).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
        let mut mkfs = Command::new(tool("mkfs.ext4"));
        mkfs.env_clear().env("PATH", TOOL_PATH).args([
            "-q",
            "-F",
            "-m",
            "0",
            "-O",
            "^has_journal",
            "-E",
            "nodiscard",
        ]);
        run(mkfs.arg(&path), "mkfs.ext4")?;
        let template = Template { path, mb };
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = dir.join(format!(".scratch-probe-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&probe);
        let work = probe.join("work");
        std::fs::create_dir_all(&work).map_err(|e| format!("cannot make {}: {e}", work.display()))?;
        let checked = mount(&probe, &work, &template, None).and_then(|()| {
            std::fs::write(work.join("probe"), b"probe").map_err(|e| format!("cannot write in it: {e}"))
        });
        unmount(&work);
        let _ = std::fs::remove_dir_all(&probe);
        checked.map(|()| template)
    }
}

/// Makes `scratch` (an empty directory) a file system of the template's size, on the image
/// `IMAGE` in `record` (a sparse copy of `template`), whose root belongs to `owner` (uid, gid)
/// with mode 0700: nosuid and nodev, so that nothing in it gains privileges. An image left by an
/// earlier attempt is made anew. The error says what failed; a full disk shows as "No space
/// left on device".
pub fn mount(
    record: &Path,
    scratch: &Path,
    template: &Template,
    owner: Option<(u32, u32)>,
) -> Result<(), String> {
    let made = |e: String| format!("cannot make the job's scratch file system: {e}");
    if is_mount_point(scratch) {
        // An earlier start of this job, on this very directory: its file system goes.
        unmount(scratch);
    }
    let image = record.join(IMAGE);
    copy_sparse(&template.path, &image)
        .map_err(|e| made(format!("copying {}: {e}", template.path.display())))?;
    attach_and_mount(&image, scratch).map_err(made)?;
    give_root(scratch, owner).map_err(made)
}

/// Gives the root of the file system mounted on `scratch` to the job's account (`owner`), mode
/// 0700, without ext4's lost+found (root's, of no use to a job); unmounts it when that fails.
pub(crate) fn give_root(scratch: &Path, owner: Option<(u32, u32)>) -> Result<(), String> {
    let _ = std::fs::remove_dir(scratch.join("lost+found"));
    use std::os::unix::fs::PermissionsExt;
    let owned = match owner {
        Some((uid, gid)) => std::os::unix::fs::chown(scratch, Some(uid), Some(gid)),
        None => Ok(()),
    }
    .and_then(|()| std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o700)));
    if let Err(e) = owned {
        unmount(scratch);
        return Err(format!("cannot give its root to the job's account: {e}"));
    }
    Ok(())
}

/// Copies `from` into a new file `to` (0600) of the same length, only its written ranges
/// (SEEK_DATA / SEEK_HOLE): the rest stays a hole.
pub(crate) fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let src = std::fs::File::open(from)?;
    let len = src.metadata()?.len();
    let _ = std::fs::remove_file(to);
    let dst = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(to)?;
    dst.set_len(len)?;
    let (s, d) = (src.as_raw_fd(), dst.as_raw_fd());
    let mut at: i64 = 0;
    while (at as u64) < len {
        // SAFETY: lseek on descriptors owned by `src` for the call.
        let data = unsafe { libc::lseek(s, at, libc::SEEK_DATA) };
        if data < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // no data past `at`
            }
            return Err(e);
        }
        let hole = unsafe { libc::lseek(s, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (mut off_in, mut off_out) = (data, data);
        while off_in < hole {
            // SAFETY: copy_file_range between two open descriptors with offsets in locals.
            let n = unsafe {
                libc::copy_file_range(s, &mut off_in, d, &mut off_out, (hole - off_in) as usize, 0)
            };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if n == 0 {
                return Err(std::io::Error::other("the template ended while it was copied"));
            }
        }
        at = hole;
    }
    Ok(())
}

/// linux/loop.h: the ioctls and structures this needs (the libc crate has none of them).
mod loop_dev {
    pub const LOOP_SET_FD: libc::c_ulong = 0x4C00;
    pub const LOOP_SET_STATUS64: libc::c_ulong = 0x4C04;
    pub const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
    pub const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
    /// The device detaches itself when its last user (the mount) lets go.
    pub const LO_FLAGS_AUTOCLEAR: u32 = 4;

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct LoopInfo64 {
        pub lo_device: u64,
        pub lo_inode: u64,
        pub lo_rdevice: u64,
        pub lo_offset: u64,
        pub lo_sizelimit: u64,
        pub lo_number: u32,
        pub lo_encrypt_type: u32,
        pub lo_encrypt_key_size: u32,
        pub lo_flags: u32,
        pub lo_file_name: [u8; 64],
        pub lo_crypt_name: [u8; 64],
        pub lo_encrypt_key: [u8; 32],
        pub lo_init: [u64; 2],
    }

    #[repr(C)]
    pub struct LoopConfig {
        pub fd: u32,
        pub block_size: u32,
        pub info: LoopInfo64,
        pub reserved: [u64; 8],
    }
}

/// Attaches `image` to a free loop device (set to clear itself) and mounts the ext4 on it at
/// `dir`, nosuid and nodev. The device goes with the mount, or at once if mounting fails.
pub(crate) fn attach_and_mount(image: &Path, dir: &Path) -> Result<(), String> {
    use loop_dev::*;
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .map_err(|e| format!("opening the image: {e}"))?;
    let ctl = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")
        .map_err(|e| format!("/dev/loop-control: {e}"))?;
    // SAFETY (every `ioctl` below): the loop driver's requests, on descriptors open for the
    // call, with arguments of the layout linux/loop.h gives.
    let mut tries = 0;
    let (device, path) = loop {
        tries += 1;
        let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE as _) };
        if n < 0 {
            return Err(format!("no free loop device: {}", std::io::Error::last_os_error()));
        }
        let path = format!("/dev/loop{n}");
        let device = match std::fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(d) => d,
            // The node appears as the device is added (devtmpfs); another agent may take it.
            Err(e) if tries < 20 => {
                tracing::debug!("{path}: {e}; trying another loop device");
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(format!("{path}: {e}")),
        };
        let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
        info.lo_flags = LO_FLAGS_AUTOCLEAR;
        let config = LoopConfig { fd: file.as_raw_fd() as u32, block_size: 0, info, reserved: [0; 8] };
        let mut r = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CONFIGURE as _, &config) };
        let mut err = std::io::Error::last_os_error();
        if r < 0 && matches!(err.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTTY)) {
            // A kernel before 5.8: the older two steps.
            r = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_SET_FD as _, file.as_raw_fd()) };
            err = std::io::Error::last_os_error();
            if r == 0 {
                r = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_SET_STATUS64 as _, &info) };
                err = std::io::Error::last_os_error();
            }
        }
        match r {
            0 => break (device, path),
            // Taken by someone else between asking and attaching: ask again.
            _ if err.raw_os_error() == Some(libc::EBUSY) && tries < 20 => continue,
            _ => return Err(format!("attaching {path}: {err}")),
        }
    };
    let cstr = |p: &[u8]| CString::new(p).map_err(|_| "a path with a NUL byte".to_string());
    let (source, target) = (cstr(path.as_bytes())?, cstr(dir.as_os_str().as_bytes())?);
    let (fstype, options) = (cstr(b"ext4")?, cstr(b"noinit_itable")?);
    // noinit_itable: the image reads as zeros already, so the kernel need not write its inode
    // tables out in the background (which would take disk and time for nothing).
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    let err = std::io::Error::last_os_error();
    // The mount holds the device now; closing it here lets it clear itself with the mount.
    drop(device);
    if r < 0 {
        return Err(format!("mounting {path} on {}: {err}", dir.display()));
    }
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
    // The decoding a job's own process does on its table (`crate::beside`), into a buffer of
    // the escaped length (a path only gets shorter decoded) and its NUL.
    let mut out = vec![0u8; p.len() + 1];
    match crate::beside::unescape_into(p.as_bytes(), &mut out) {
        Some(c) => c.to_string_lossy().into_owned(),
        None => p.to_string(),
    }
}

/// Whether a job's scratch file system can be made in `dir` (a template of `MIN_MB` is made,
/// mounted, written to, and removed). The error says what failed.
pub fn probe(dir: &Path) -> Result<(), String> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let at = dir.join(format!(".scratch-check-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&at).map_err(|e| format!("cannot make {}: {e}", at.display()))?;
    let made = Template::make(&at, MIN_MB).map(|_| ());
    let _ = std::fs::remove_dir_all(&at);
    made
}

fn make_image(image: &Path, mb: u64) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(image);
    let f = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(image)?;
    // Not synced: a scratch image is worth nothing after a crash of the machine, and an fsync
    // here waits for the whole disk's journal (seconds, beside a build or a busy store).
    f.set_len(mb * (1 << 20))
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
        let template = Template::make(&d, 8).unwrap();
        mount(&d, &scratch, &template, Some((12345, 12346))).unwrap();
        assert!(!scratch.join("lost+found").exists());
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
