//! The file systems beside a job: what a job given a mount namespace of its own (a /tmp of its
//! own, `proc::private_tmp`) must not keep a copy of.
//!
//! A mount namespace starts as a copy of the node's mount table, and wherever the node's mounts
//! do not propagate (no systemd) each copy holds its file system, and the loop device under it,
//! until the job's last process ends, long after the node has unmounted it: other jobs' scratch
//! file systems after those jobs end, and the ones made ahead (`crate::scratch_pool`) after
//! later jobs take them. So the job's own namespace drops every mount in the agent's work
//! directory but the job's own, right after it is made.
//!
//! Which mounts those are is read in the job's process itself, from its own mount table, after
//! `unshare`: a list made before would miss what was mounted meanwhile, and a start takes a
//! file system made ahead and so sets the pool making the next at that very moment. Between
//! fork and exec nothing may allocate, so the table is read into a buffer made before the fork,
//! and parsed in place.

use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How much of the mount table is read: about 20,000 mounts. A table beyond it is read that
/// far (the mounts past it are kept, as before this existed).
const TABLE_BYTES: usize = 4 << 20;

/// The longest path a mount point may have (PATH_MAX), and its NUL.
const PATH_BYTES: usize = 4096;

/// What the child needs to find and detach the mounts beside its job, made before the fork.
#[derive(Debug)]
pub struct Beside {
    /// The work directory as the mount table writes it, with a trailing `/`: the mounts below it.
    work: Vec<u8>,
    /// The job's own directory as the mount table writes it: it and the mounts in it stay.
    record: Vec<u8>,
    /// Room for the mount table (`TABLE_BYTES`), empty: never written by the parent, so the
    /// pages it reserves cost nothing until the child reads into them (zeroing them took 1.4 ms
    /// a start).
    table: Vec<u8>,
    path: Box<[u8]>,
}

impl Beside {
    /// For the job whose directory is `record` (`job-ID` in the agent's work directory, its
    /// parent).
    pub fn new(record: &Path) -> Beside {
        let record = std::fs::canonicalize(record).unwrap_or_else(|_| record.to_path_buf());
        let work = record.parent().unwrap_or(Path::new("/"));
        let mut work = escape(work.as_os_str().as_bytes());
        if work.last() != Some(&b'/') {
            work.push(b'/');
        }
        Beside {
            work,
            record: escape(record.as_os_str().as_bytes()),
            table: Vec::with_capacity(TABLE_BYTES),
            path: vec![0u8; PATH_BYTES].into_boxed_slice(),
        }
    }

    /// Whether there is a work directory to leave out: one at the root would make every mount of
    /// the machine "beside" the job (/proc, /dev), and then nothing is detached.
    fn applies(&self) -> bool {
        self.work.len() > 1
    }

    /// Detaches, in the calling process's own mount namespace, every mount below the work
    /// directory that is not the job's own directory or in it; one that cannot be (gone
    /// meanwhile) is left. Returns how many were detached.
    ///
    /// # Safety
    /// For a child between fork and exec that has a mount namespace of its own: only
    /// async-signal-safe calls (open, read, close, umount2), into the buffers made by `new`.
    pub unsafe fn detach(&mut self) -> usize {
        if !self.applies() {
            return 0;
        }
        let fd = libc::open(c"/proc/self/mountinfo".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        // The whole table first: a table read while it changes may skip lines.
        self.table.clear();
        let room = self.table.capacity();
        let at = self.table.as_mut_ptr();
        let mut n = 0;
        while n < room {
            let r = libc::read(fd, at.add(n).cast(), room - n);
            if r <= 0 {
                break;
            }
            n += r as usize;
        }
        libc::close(fd);
        // SAFETY: the first `n` bytes were written by `read`, within the capacity.
        self.table.set_len(n);
        let Beside { work, record, table, path } = self;
        let mut detached = 0;
        each_beside(table, work, record, |escaped| {
            if let Some(p) = unescape_into(escaped, path) {
                if libc::umount2(p.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) == 0 {
                    detached += 1;
                }
            }
        });
        detached
    }
}

/// Calls `f` with each mount point of `table` (the text of /proc/PID/mountinfo, as it writes
/// paths) that lies below `work` (ending in `/`) and is neither `record` nor in it; the last
/// line may be cut short (a table longer than was read), and is then left. Allocates nothing.
fn each_beside(table: &[u8], work: &[u8], record: &[u8], mut f: impl FnMut(&[u8])) {
    let complete = match table.iter().rposition(|&c| c == b'\n') {
        Some(end) => &table[..end],
        None => return,
    };
    for line in complete.split(|&c| c == b'\n') {
        // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the fifth field is
        // the mount point.
        let Some(point) = line.split(|&c| c == b' ').nth(4) else { continue };
        let own = point.strip_prefix(record).is_some_and(|rest| rest.is_empty() || rest[0] == b'/');
        if point.starts_with(work) && !own {
            f(point);
        }
    }
}

/// A path as the mount table writes it: space, tab, newline and backslash as octal escapes.
fn escape(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &c in path {
        match c {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{c:03o}").as_bytes()),
            _ => out.push(c),
        }
    }
    out
}

/// `escaped` decoded into `out`, NUL-terminated, as a C string in it; None when it does not fit
/// or holds a NUL. Allocates nothing.
pub(crate) fn unescape_into<'a>(escaped: &[u8], out: &'a mut [u8]) -> Option<&'a CStr> {
    let (mut i, mut n) = (0, 0);
    while i < escaped.len() {
        let octal = escaped
            .get(i + 1..i + 4)
            .filter(|d| escaped[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        let c = match octal {
            Some(d) => {
                i += 4;
                (d[0] - b'0').wrapping_mul(64).wrapping_add((d[1] - b'0') * 8 + (d[2] - b'0'))
            }
            None => {
                i += 1;
                escaped[i - 1]
            }
        };
        *out.get_mut(n)? = c;
        n += 1;
    }
    *out.get_mut(n)? = 0;
    CStr::from_bytes_with_nul(&out[..=n]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 7:1 / /var/lib/libra/node rw,relatime - ext4 /dev/loop1 rw
91 90 7:2 / /var/lib/libra/node/job-7/work rw,nosuid,nodev - ext4 /dev/loop2 rw
92 90 7:3 / /var/lib/libra/node/job-8/work rw,nosuid,nodev - ext4 /dev/loop3 rw
93 90 7:4 / /var/lib/libra/node/.scratch-pool/4 rw - ext4 /dev/loop4 rw
94 90 7:5 / /var/lib/libra/node/job-70/work rw - ext4 /dev/loop5 rw
95 90 7:6 / /var/lib/libra/node/my\\040job/work rw - ext4 /dev/loop6 rw
96 22 0:5 / /var/lib/libra/nodes rw - tmpfs tmpfs rw
97 90 7:7 / /var/lib/libra/node/job-7 rw - ext4 /dev/loop7 rw
98 90 7:8 / /var/lib/libra/node/.scratch-pool/5 rw - ext4 /dev/loo";

    fn beside(table: &str, work: &str, record: &str) -> Vec<String> {
        let mut seen = Vec::new();
        each_beside(table.as_bytes(), work.as_bytes(), record.as_bytes(), |p| {
            seen.push(String::from_utf8(p.to_vec()).unwrap())
        });
        seen
    }

    /// The others' scratch and the pool's below the work directory; not the work directory
    /// itself, nor a directory beside it that shares its name's start, nor the job's own
    /// directory and what is in it, nor a job whose id starts with the job's; a cut last line
    /// is left.
    #[test]
    fn the_mounts_beside_a_job_are_those_below_the_work_directory_but_its_own() {
        assert_eq!(
            beside(TABLE, "/var/lib/libra/node/", "/var/lib/libra/node/job-7"),
            [
                "/var/lib/libra/node/job-8/work",
                "/var/lib/libra/node/.scratch-pool/4",
                "/var/lib/libra/node/job-70/work",
                "/var/lib/libra/node/my\\040job/work",
            ]
        );
        assert!(beside("", "/w/", "/w/job-1").is_empty());
        assert!(beside("no newline at all", "/w/", "/w/job-1").is_empty());
    }

    /// An agent whose work directory is the root leaves its jobs' mount tables as they are.
    #[test]
    fn a_work_directory_at_the_root_detaches_nothing() {
        let b = Beside::new(Path::new("/job-1"));
        assert!(b.work == b"/" && !b.applies());
        assert!(Beside::new(Path::new("/var/lib/libra/job-1")).applies());
    }

    #[test]
    fn paths_go_to_and_from_the_tables_escapes() {
        let escaped = escape(b"/var/lib/my node\\x\ty\nz");
        assert_eq!(escaped, b"/var/lib/my\\040node\\134x\\011y\\012z");
        let mut out = [0u8; 64];
        let back = unescape_into(&escaped, &mut out).unwrap();
        assert_eq!(back.to_bytes(), b"/var/lib/my node\\x\ty\nz");
        // Too long for the buffer, or a NUL inside: nothing.
        assert!(unescape_into(b"/abc", &mut [0u8; 4]).is_none());
        assert!(unescape_into(b"/a\\000b", &mut out).is_none());
        // A backslash not followed by three octal digits is itself.
        assert_eq!(unescape_into(b"/a\\9b", &mut out).unwrap().to_bytes(), b"/a\\9b");
    }
}
