//! Slurm starts each step of a job (`srun` in a batch script) as a new process tree under
//! slurmstepd, outside the job's CPU group: until the agent moves it there, a step runs at full
//! speed and its CPU is not in the job's bill. `scontrol listpids` every period left a step of up
//! to a period unseen, and a step that ended sooner escaped both the share and the bill (a job of
//! six one-second steps was charged for a quarter of what they used). The catcher watches Slurm's
//! own freezer groups of each job, where slurmstepd puts every task before the task runs its
//! command, and moves what it finds into the job's group with the CPU it had used so far. It
//! wakes when slurmstepd makes a step's group or writes a task into one (inotify: a write to
//! cgroup.procs is a write like any other), and looks every `LOOK_EVERY` besides. Woken only by
//! its clock, a job that split its work into steps shorter than a look had about half their CPU
//! unbilled (30 steps of 30 ms). Every move of a job's processes, the agent's own each period
//! included, goes through one lock, so a process is moved, and its CPU from before counted, once.

use inotify::{Inotify, WatchMask};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often the catcher looks when nothing wakes it: where inotify is missing, a step's
/// processes run at most about this long (plus a look's own time) outside the job's group.
pub const LOOK_EVERY: Duration = Duration::from_millis(50);

/// After a wake-up, the catcher looks again this soon, then twice as late each time up to
/// `LOOK_EVERY`: a task written into a step's group may still be slurmstepd's (root) for a
/// moment, until it takes on the job's user, and only then is it the job's to move.
const SOON_AFTER: Duration = Duration::from_millis(1);

/// Where cgroup v1's freezer hierarchy is mounted, in which Slurm's cgroup plugins make
/// `slurm_NODE/uid_U/job_N/step_S` groups.
pub const FREEZER: &str = "/sys/fs/cgroup/freezer";

struct Followed {
    slurm_id: u64,
    /// The cgroup.procs of each of the job's groups; the first is the one whose count is its
    /// CPU (its accounting group where `cpuacct` is mounted apart from `cpu`).
    groups: Vec<PathBuf>,
    /// The CPU its processes had used before they were moved into its group.
    before: f64,
    /// Slurm's freezer group of the job, once found.
    slurm_group: Option<PathBuf>,
}

type Jobs = Mutex<HashMap<u64, Followed>>;

pub struct StepCatcher {
    jobs: Arc<Jobs>,
}

impl StepCatcher {
    /// Starts the catcher's thread, which looks under `freezer` (`FREEZER`) and ends with the
    /// catcher.
    pub fn start(freezer: PathBuf) -> StepCatcher {
        let jobs: Arc<Jobs> = Arc::default();
        let weak = Arc::downgrade(&jobs);
        std::thread::Builder::new()
            .name("slurm-steps".into())
            .spawn(move || look_until_dropped(&weak, &freezer))
            .ok();
        StepCatcher { jobs }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Followed>> {
        lock(&self.jobs)
    }

    /// Follows Libra job `job`, Slurm's `slurm_id`, whose groups' cgroup.procs are `groups`
    /// (the counting one first).
    pub fn follow(&self, job: u64, slurm_id: u64, groups: Vec<PathBuf>) {
        self.lock().entry(job).or_insert(Followed { slurm_id, groups, before: 0.0, slurm_group: None });
    }

    /// Moves `pids` (as Slurm lists them) into job `job`'s group; returns the CPU its processes
    /// had used before they were moved, all told so far (0 for a job not followed).
    pub fn keep(&self, job: u64, pids: &[i32]) -> f64 {
        let mut jobs = self.lock();
        let Some(f) = jobs.get_mut(&job) else { return 0.0 };
        f.keep(pids);
        f.before
    }

    /// Stops following `job`; returns the CPU its processes had used before they were moved.
    pub fn forget(&self, job: u64) -> f64 {
        self.lock().remove(&job).map_or(0.0, |f| f.before)
    }
}

impl Followed {
    /// Moves `pids` into every group of the job, counting the CPU they had used from the move
    /// into the counting one; returns how many that move took.
    fn keep(&mut self, pids: &[i32]) -> usize {
        let Some((counting, others)) = self.groups.split_first() else { return 0 };
        let moved = crate::slurm::keep_in_group(counting, pids);
        self.before += moved.cpu_before;
        for g in others {
            crate::slurm::keep_in_group(g, pids);
        }
        moved.processes
    }
}

fn lock(jobs: &Jobs) -> std::sync::MutexGuard<'_, HashMap<u64, Followed>> {
    jobs.lock().unwrap_or_else(|p| p.into_inner())
}

fn look_until_dropped(jobs: &Weak<Jobs>, freezer: &Path) {
    let mut wake = Wake::new();
    let mut next = LOOK_EVERY;
    loop {
        next = if wake.wait(next) { SOON_AFTER } else { (next * 2).min(LOOK_EVERY) };
        let Some(jobs) = jobs.upgrade() else { return };
        let mut jobs = lock(&jobs);
        for (job, f) in jobs.iter_mut() {
            if f.slurm_group.is_none() {
                f.slurm_group = slurm_group(freezer, f.slurm_id);
            }
            let Some(group) = &f.slurm_group else { continue };
            let pids = pids_under(group, |dir| wake.watch(dir));
            if pids.is_empty() {
                continue;
            }
            let moved = f.keep(&pids);
            if moved > 0 {
                tracing::debug!(job, slurm_job = f.slurm_id, moved, "a step's processes caught");
            }
        }
    }
}

/// What wakes the catcher before its clock: a group made in, or a task written into, a watched
/// group of a followed job. Without inotify (none left for this user, say) it is the clock alone.
struct Wake {
    inotify: Option<Inotify>,
    buffer: Vec<u8>,
}

impl Wake {
    fn new() -> Wake {
        let inotify = Inotify::init()
            .map_err(|e| tracing::warn!("inotify: {e}: Slurm steps are looked for every {LOOK_EVERY:?} only"))
            .ok();
        Wake { inotify, buffer: vec![0; 4096] }
    }

    /// Watches `dir` for groups made in it and tasks written into it. Watching a directory
    /// already watched changes nothing; a removed group's watch goes with it.
    fn watch(&mut self, dir: &Path) {
        if let Some(i) = &self.inotify {
            i.watches().add(dir, WatchMask::CREATE | WatchMask::MODIFY).ok();
        }
    }

    /// Waits up to `timeout`; true when a watched group changed (its events read and dropped:
    /// the look that follows reads the groups themselves).
    fn wait(&mut self, timeout: Duration) -> bool {
        let Some(i) = &mut self.inotify else {
            std::thread::sleep(timeout);
            return false;
        };
        let mut fd = libc::pollfd { fd: i.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one pollfd, which lives across the call.
        if unsafe { libc::poll(&mut fd, 1, ms) } <= 0 {
            return false;
        }
        let mut woke = false;
        while let Ok(events) = i.read_events(&mut self.buffer) {
            if events.count() == 0 {
                break;
            }
            woke = true;
        }
        woke
    }
}

/// Slurm's freezer group of job `slurm_id`: `slurm*/uid_*/job_ID` under `freezer`.
pub fn slurm_group(freezer: &Path, slurm_id: u64) -> Option<PathBuf> {
    let name = format!("job_{slurm_id}");
    let dirs = |p: &Path, prefix: &'static str| {
        std::fs::read_dir(p).into_iter().flatten().flatten().map(|e| e.path()).filter(move |p| {
            p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
    };
    dirs(freezer, "slurm").flat_map(|s| dirs(&s, "uid_")).map(|u| u.join(&name)).find(|j| j.is_dir())
}

/// The processes of a job's steps: those in the groups under `group` (`step_*`, and their
/// tasks), at most three levels down, whose real user is the job's (the `uid_U` of the path).
/// Not the job's own group, where slurmstepd waits: a root daemon that is no part of the job's
/// share or bill, and that a job's end must not kill. `watch` is given each group before it is
/// read (the job's own before its list of groups), so that a change after the read wakes the
/// catcher.
pub fn pids_under(group: &Path, mut watch: impl FnMut(&Path)) -> Vec<i32> {
    fn walk(dir: &Path, depth: u32, out: &mut Vec<i32>, watch: &mut dyn FnMut(&Path)) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            watch(&e.path());
            let procs = std::fs::read_to_string(e.path().join("cgroup.procs")).unwrap_or_default();
            out.extend(procs.split_whitespace().filter_map(|p| p.parse::<i32>().ok()).filter(|p| *p > 1));
            if depth > 1 {
                walk(&e.path(), depth - 1, out, watch);
            }
        }
    }
    let Some(uid) =
        group.parent().and_then(|u| u.file_name()?.to_str()?.strip_prefix("uid_")?.parse::<u32>().ok())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    watch(group);
    walk(group, 3, &mut out, &mut watch);
    out.retain(|&pid| real_uid(pid) == Some(uid));
    out
}

/// The real user id of process `pid` (`Uid:` of its status), None once it has ended.
fn real_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's freezer group is found under any node's and user's directory; the processes of
    /// its steps are read from every level below it, not its own group's (slurmstepd's), and
    /// only those of the job's user.
    #[test]
    fn a_jobs_group_and_its_steps_processes_are_found() {
        let me = std::process::id() as i32;
        // SAFETY: getuid has no memory effects.
        let uid = unsafe { libc::getuid() };
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("slurm_n1").join(format!("uid_{uid}")).join("job_42");
        std::fs::create_dir_all(job.join("step_0").join("task_0")).unwrap();
        std::fs::create_dir_all(job.join("step_batch")).unwrap();
        std::fs::create_dir_all(root.path().join("slurm_n1").join("uid_99999").join("job_7")).unwrap();
        let mut other = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let other_pid = other.id() as i32;
        // 1 (init) is never one of them; a pid that no process has is skipped.
        std::fs::write(job.join("cgroup.procs"), format!("{other_pid}\n")).unwrap();
        std::fs::write(job.join("step_batch").join("cgroup.procs"), format!("{me}\n1\n")).unwrap();
        std::fs::write(
            job.join("step_0").join("task_0").join("cgroup.procs"),
            format!("{other_pid}\n2147483000\n"),
        )
        .unwrap();
        assert_eq!(slurm_group(root.path(), 42), Some(job.clone()));
        assert_eq!(slurm_group(root.path(), 43), None);
        let mut pids = pids_under(&job, |_| {});
        pids.sort_unstable();
        let mut want = vec![me, other_pid];
        want.sort_unstable();
        assert_eq!(pids, want);
        // Another user's job: our processes in it are not its steps'.
        let theirs = root.path().join("slurm_n1").join("uid_99999").join("job_7");
        std::fs::create_dir_all(theirs.join("step_0")).unwrap();
        std::fs::write(theirs.join("step_0").join("cgroup.procs"), format!("{me}\n")).unwrap();
        assert_eq!(pids_under(&theirs, |_| {}), Vec::<i32>::new());
        other.kill().unwrap();
        other.wait().unwrap();
    }

    /// The catcher is woken by a group made in a watched group and by a task written into one;
    /// with nothing changed, its clock ends the wait.
    #[test]
    fn the_catcher_wakes_when_a_watched_group_changes() {
        let root = tempfile::tempdir().unwrap();
        let mut wake = Wake::new();
        assert!(wake.inotify.is_some(), "inotify is available here");
        wake.watch(root.path());
        assert!(!wake.wait(Duration::from_millis(20)), "nothing changed");
        std::fs::create_dir(root.path().join("step_0")).unwrap();
        assert!(wake.wait(Duration::from_secs(10)), "a step's group was made");
        assert!(!wake.wait(Duration::from_millis(20)), "its events were read");
        wake.watch(&root.path().join("step_0"));
        std::fs::write(root.path().join("step_0").join("cgroup.procs"), "1\n").unwrap();
        assert!(wake.wait(Duration::from_secs(10)), "a task was written into it");
    }

    /// A process found in a followed job's Slurm group is moved into the job's group by the
    /// catcher's thread, with the CPU it had used; a forgotten job is left alone.
    #[test]
    fn the_catcher_moves_a_steps_process_with_the_cpu_it_used() {
        let root = tempfile::tempdir().unwrap();
        // SAFETY: getuid has no memory effects.
        let uid = unsafe { libc::getuid() };
        let job = root.path().join("slurm_n1").join(format!("uid_{uid}")).join("job_9");
        std::fs::create_dir_all(job.join("step_0")).unwrap();
        // A plain file stands for the agent's cgroup.procs: a write names the process moved.
        let procs = root.path().join("ours.procs");
        std::fs::write(&procs, "").unwrap();
        let mut busy = crate::slurm::tests::busy_then_asleep();
        let pid = busy.id() as i32;
        let catcher = StepCatcher::start(root.path().to_path_buf());
        catcher.follow(5, 9, vec![procs.clone()]);
        std::fs::write(job.join("step_0").join("cgroup.procs"), format!("{pid}\n")).unwrap();
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&procs).unwrap().trim() != pid.to_string() {
            assert!(t0.elapsed() < Duration::from_secs(10), "the step's process was not moved");
            std::thread::sleep(Duration::from_millis(10));
        }
        let used = crate::proc::cpu_seconds(pid).unwrap();
        // Moved once: the next looks find it inside.
        std::thread::sleep(LOOK_EVERY * 3);
        let before = catcher.forget(5);
        assert!(used > 0.05 && (before - used).abs() < 0.02, "{before} against {used}");
        assert_eq!(catcher.keep(5, &[pid]), 0.0, "a forgotten job is not followed");
        busy.kill().unwrap();
        busy.wait().unwrap();
    }
}
