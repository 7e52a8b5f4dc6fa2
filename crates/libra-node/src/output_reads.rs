//! Jobs' output files read off the agent's loop. A job's output is on a file system of its
//! owner's choosing, and a file system may not answer: a user's FUSE mount whose daemon never
//! replies, a hard NFS mount whose server went away. A read of such a file (even the lookup of
//! its path) waits in the kernel until the file system answers, and the agent's loop with it:
//! no reports, no job control, no ends for any job on the node. So each read runs on a thread of
//! its own, and the caller waits a short while for all of them together; a read not done by then
//! gives nothing now and finishes on its own, its result kept for the next call that asks for the
//! same thing. While a read of a file is still waiting, that file is not read again: a file
//! system that never answers holds one thread per file named on it, and nothing else.

use crate::launch::{self, Watched};
use libra_api::OutputChunk;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a caller waits for the reads it started: far above a read of a local file (tens of
/// microseconds) or of a working network file system, and short beside the agent's period.
pub const READ_WAIT: Duration = Duration::from_millis(250);

/// A finished read no caller has taken is dropped after this long (its job has ended, or it
/// asks for another part of its file by now).
const KEPT_FOR: Duration = Duration::from_secs(120);

/// A reading thread does little: a small stack.
const STACK: usize = 128 * 1024;

/// One read: the file, from where the server's copy ends, at most this many bytes.
type Key = (PathBuf, u64, u64);

#[derive(Default)]
struct State {
    /// Reads started and not finished.
    busy: std::collections::HashSet<Key>,
    /// Reads finished and not yet taken, with when they finished.
    done: HashMap<Key, (Option<OutputChunk>, Instant)>,
}

#[derive(Default)]
struct Reads {
    state: Mutex<State>,
    finished: Condvar,
}

fn reads() -> Arc<Reads> {
    static READS: OnceLock<Arc<Reads>> = OnceLock::new();
    READS.get_or_init(|| Arc::new(Reads::default())).clone()
}

/// `launch::chunk` of each of `files` (at most `max` bytes each) that can be read within
/// `READ_WAIT`.
pub fn chunks(files: &[Watched], max: u64) -> Vec<OutputChunk> {
    chunks_by(files, max, READ_WAIT, launch::chunk)
}

/// `chunks` with `read` for `launch::chunk`, waiting at most `wait` for the reads this call
/// starts.
fn chunks_by(
    files: &[Watched],
    max: u64,
    wait: Duration,
    read: fn(&Watched, u64) -> Option<OutputChunk>,
) -> Vec<OutputChunk> {
    let reads = reads();
    let mut st = reads.state.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    st.done.retain(|_, (_, at)| now.duration_since(*at) < KEPT_FOR);
    let keys: Vec<Key> = files.iter().map(|w| (w.path.clone(), w.acked, max)).collect();
    let mut started = Vec::new();
    for (w, key) in files.iter().zip(&keys) {
        if st.busy.contains(key) || st.done.contains_key(key) {
            continue;
        }
        let (w, k, r) = (w.clone(), key.clone(), reads.clone());
        let spawned =
            std::thread::Builder::new().name("output-read".into()).stack_size(STACK).spawn(move || {
                let c = read(&w, max);
                let mut st = r.state.lock().unwrap_or_else(|p| p.into_inner());
                st.busy.remove(&k);
                st.done.insert(k, (c, Instant::now()));
                r.finished.notify_all();
            });
        // No thread to be had (the machine is out of them): read at the next call.
        if spawned.is_ok() {
            st.busy.insert(key.clone());
            started.push(key.clone());
        }
    }
    // Only the reads started here are waited for: one still waiting from an earlier call is
    // on a file system that has not answered, and would cost every call the whole wait.
    let deadline = Instant::now() + wait;
    while started.iter().any(|k| st.busy.contains(k)) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        st = reads.finished.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
    }
    keys.iter().filter_map(|k| st.done.remove(k)).filter_map(|(c, _)| c).collect()
}

/// Whether `dir` is a directory, when its file system answers within `wait`; None when it has
/// not (the look goes on, on a thread of its own; until it ends, the same directory is not
/// looked at again, and None is the answer at once).
pub fn is_dir_within(dir: &std::path::Path, wait: Duration) -> Option<bool> {
    static LOOKING: OnceLock<Mutex<std::collections::HashSet<PathBuf>>> = OnceLock::new();
    let looking = LOOKING.get_or_init(Default::default);
    if !looking.lock().unwrap_or_else(|p| p.into_inner()).insert(dir.to_path_buf()) {
        return None;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.to_path_buf();
    let spawned = std::thread::Builder::new().name("dir-look".into()).stack_size(STACK).spawn(move || {
        let answer = d.is_dir();
        looking.lock().unwrap_or_else(|p| p.into_inner()).remove(&d);
        let _ = tx.send(answer);
    });
    if spawned.is_err() {
        looking.lock().unwrap_or_else(|p| p.into_inner()).remove(dir);
        return Some(dir.is_dir());
    }
    rx.recv_timeout(wait).ok()
}

/// `f()` on a thread of its own, when it gives its answer within `wait`; None when it has not
/// (it goes on, and its answer is dropped): for a look at paths that resolve through file
/// systems of a job's choosing, once per job.
pub fn within<T: Send + 'static>(wait: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    match std::thread::Builder::new().name("path-look".into()).stack_size(STACK).spawn(move || {
        let _ = tx.send(f());
    }) {
        Ok(_) => rx.recv_timeout(wait).ok(),
        // No thread to be had (the machine is out of them): no answer.
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libra_api::Stream;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    fn watched(path: PathBuf) -> Watched {
        Watched { stream: Stream::Stdout, path, acked: 0, owner: None }
    }

    /// Held while set: a file system that does not answer, for files named `stuck`.
    static HOLD: AtomicBool = AtomicBool::new(true);
    static STUCK_READS: AtomicUsize = AtomicUsize::new(0);

    fn read(w: &Watched, max: u64) -> Option<OutputChunk> {
        if w.path.ends_with("stuck") {
            STUCK_READS.fetch_add(1, Ordering::SeqCst);
            while HOLD.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        launch::chunk(w, max)
    }

    #[test]
    fn files_that_answer_are_read_and_one_that_does_not_is_left_for_later_and_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, stuck) = (dir.path().join("a"), dir.path().join("stuck"));
        std::fs::write(&a, b"alpha").unwrap();
        std::fs::write(&stuck, b"late").unwrap();
        let files = [watched(a.clone()), watched(stuck.clone())];
        let text =
            |got: Vec<OutputChunk>| -> Vec<Vec<u8>> { got.iter().map(|c| c.bytes().unwrap()).collect() };
        // (Long enough for a file that answers on a busy machine; the stuck read costs the
        // first call all of it.)
        let wait = Duration::from_secs(2);
        // The file that answers is read; the other gives nothing now.
        assert_eq!(text(chunks_by(&files, 100, wait, read)), [b"alpha".to_vec()]);
        // Asked again while the first read still waits: not read a second time.
        assert_eq!(text(chunks_by(&files, 100, wait, read)), [b"alpha".to_vec()]);
        assert_eq!(STUCK_READS.load(Ordering::SeqCst), 1);
        // Once it answers, its read is taken by the next call that asks for the same thing.
        HOLD.store(false, Ordering::SeqCst);
        let mut got = Vec::new();
        for _ in 0..200 {
            got = text(chunks_by(&files[1..], 100, wait, read));
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got, [b"late".to_vec()]);
        assert_eq!(STUCK_READS.load(Ordering::SeqCst), 1, "the late read was done again");
    }

    #[test]
    fn an_answer_in_time_is_taken_and_one_too_late_is_none() {
        assert_eq!(within(Duration::from_secs(5), || 7), Some(7));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Waits until the sender goes, after the call has given up.
        assert_eq!(within(Duration::from_millis(20), move || rx.recv().is_err()), None);
        drop(tx);
    }

    #[test]
    fn a_directory_is_told_from_a_file_and_a_missing_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"").unwrap();
        let wait = Duration::from_secs(5);
        assert_eq!(is_dir_within(dir.path(), wait), Some(true));
        assert_eq!(is_dir_within(&dir.path().join("f"), wait), Some(false));
        assert_eq!(is_dir_within(&dir.path().join("missing"), wait), Some(false));
    }
}
