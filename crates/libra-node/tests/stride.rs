//! The user-space fallback with real processes: stride scheduling (SIGSTOP/SIGCONT) gives two
//! busy processes CPU in proportion to their shares, and keeps the node under its capacity.

use libra_node::enforce::Enforcer;
use libra_node::proc;
use libra_node::stride::StrideEnforcer;
use std::time::{Duration, Instant};

fn busy(dir: &std::path::Path) -> i32 {
    proc::spawn(&["sh".into(), "-c".into(), "while :; do :; done".into()], dir, &[]).unwrap()
}

/// The tests measure shares of the CPU: one at a time, so that they do not compete with each
/// other's busy processes on top of whatever else the machine runs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Ends the test's processes (continued first: a stopped process is killed all the same, but
/// its group may hold others) and reaps them.
fn end(pids: &[i32]) {
    for &p in pids {
        proc::signal_group(p, libc::SIGCONT);
        proc::signal_group(p, libc::SIGKILL);
        while proc::try_reap(p).is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn stride_shares_follow_tickets_and_the_capacity() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("libra-stride-{}", std::process::id()));
    let mut e = StrideEnforcer::start(0.5);
    e.prepare(1, 0.3).unwrap();
    e.prepare(2, 0.15).unwrap();
    let a = busy(&dir.join("a"));
    let b = busy(&dir.join("b"));
    e.started(1, a);
    e.started(2, b);
    std::thread::sleep(Duration::from_millis(500));
    let cpu = |p| proc::cpu_seconds(p).unwrap();
    let (a0, b0, t0) = (cpu(a), cpu(b), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (a1, b1, dt) = (cpu(a), cpu(b), t0.elapsed().as_secs_f64());
    end(&[a, b]);
    let _ = std::fs::remove_dir_all(&dir);
    let (ra, rb) = ((a1 - a0) / dt, (b1 - b0) / dt);
    eprintln!("stride: measured {ra:.3} and {rb:.3} CPU for shares 0.30 and 0.15 on a 0.5 CPU node");
    let fa = ra / (ra + rb);
    assert!((fa / (2.0 / 3.0) - 1.0).abs() <= 0.1, "job 1 got {fa:.3} of the node's CPU, assigned 0.667");
    assert!(ra + rb <= 0.5 * 1.1, "the node used {:.3} CPU of 0.5", ra + rb);
}

/// Starts a process (and so every child it forks) on one CPU, so that the test's processes
/// contend for it whatever else runs: the calling thread is pinned while it forks.
fn spawn_on(cpu: usize, dir: &std::path::Path, script: &str) -> i32 {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes within it; pid 0 is this
    // thread.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut was: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size, &mut was), 0);
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(libc::sched_setaffinity(0, size, &set), 0);
        let pid = proc::spawn(&["sh".into(), "-c".into(), script.into()], dir, &[]);
        assert_eq!(libc::sched_setaffinity(0, size, &was), 0);
        pid.unwrap()
    }
}

/// A process outside Libra takes half of every quantum of one job and none of the other's (it
/// shares one CPU with the first; the second has a CPU of its own). Charged a whole quantum per
/// pick, the first job would have half its share (a third of the jobs' CPU instead of two
/// thirds); charged what it had of each quantum, it is picked more often and the jobs' CPU
/// follows their shares. The first job's work is done by a child it started, as a job's
/// usually is (found among the job's processes, its session).
#[test]
fn stride_shares_hold_when_another_process_takes_part_of_a_jobs_quanta() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: sysconf has no memory effects.
    if unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } < 2 {
        eprintln!("not tested: this needs two CPUs");
        return;
    }
    let dir = std::env::temp_dir().join(format!("libra-stride-busy-{}", std::process::id()));
    let mut e = StrideEnforcer::start(0.5);
    e.prepare(1, 0.3).unwrap();
    e.prepare(2, 0.15).unwrap();
    let a = spawn_on(0, &dir.join("a"), "(while :; do :; done) & wait");
    let other = spawn_on(0, &dir.join("other"), "while :; do :; done");
    let b = spawn_on(1, &dir.join("b"), "while :; do :; done");
    e.started(1, a);
    e.started(2, b);
    // Past the first lookup of the jobs' processes.
    std::thread::sleep(Duration::from_millis(1500));
    let cpu = |p| proc::cpu_by_session().get(&p).copied().unwrap();
    let (a0, b0, t0) = (cpu(a), cpu(b), Instant::now());
    std::thread::sleep(Duration::from_secs(4));
    let (a1, b1, dt) = (cpu(a), cpu(b), t0.elapsed().as_secs_f64());
    drop(e);
    end(&[a, b, other]);
    let _ = std::fs::remove_dir_all(&dir);
    let (ra, rb) = ((a1 - a0) / dt, (b1 - b0) / dt);
    eprintln!("stride beside another process: measured {ra:.3} and {rb:.3} CPU for shares 0.30 and 0.15");
    let fa = ra / (ra + rb);
    assert!((fa / (2.0 / 3.0) - 1.0).abs() <= 0.1, "job 1 got {fa:.3} of the jobs' CPU, assigned 0.667");
}

/// A job that sleeps through its quanta is charged them whole: it cannot hold the node by
/// sleeping (charged only what it ran, it would be picked at every quantum and the busy job
/// beside it would starve), and the busy job is let run half the time, as its share says.
/// Measured as the time the busy job was runnable (running, or waiting for a CPU: a busy loop
/// let run is always one or the other, a stopped one neither), which other processes on the
/// machine do not change, rather than the CPU it got, which they do.
#[test]
fn a_sleeping_job_is_charged_its_quanta_and_starves_no_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("libra-stride-sleep-{}", std::process::id()));
    let mut e = StrideEnforcer::start(1.0);
    e.prepare(1, 0.5).unwrap();
    e.prepare(2, 0.5).unwrap();
    let sleeper = proc::spawn(&["sleep".into(), "60".into()], &dir.join("s"), &[]).unwrap();
    let b = busy(&dir.join("b"));
    e.started(1, sleeper);
    e.started(2, b);
    std::thread::sleep(Duration::from_millis(500));
    let runnable = || -> Option<f64> {
        let t = proc::thread_times(&[b]);
        (!t.is_empty()).then(|| t.values().map(|(run, wait)| (run + wait) as f64 * 1e-9).sum())
    };
    let (r0, t0) = (runnable(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (r1, dt) = (runnable(), t0.elapsed().as_secs_f64());
    drop(e);
    end(&[sleeper, b]);
    let _ = std::fs::remove_dir_all(&dir);
    let (Some(r0), Some(r1)) = (r0, r1) else {
        eprintln!("not tested: this kernel keeps no schedstat");
        return;
    };
    let let_run = (r1 - r0) / dt;
    eprintln!(
        "stride beside a sleeping job: the busy job was let run {let_run:.3} of the time, for a share of 0.5"
    );
    // The two ways this breaks are far apart: a sleeper charged only what it ran starves the
    // busy job (near 0), and a sleeper's quanta given away let it run all the time (near 1).
    // Above its share it also runs while the enforcer, itself a process, is late to stop it:
    // 0.61 was measured once with two compilers busy on both cores (CI, 2026-11-30). So below
    // the share the bound is tight, above it is wide enough for that lateness and no wider.
    assert!(
        (0.4..=0.75).contains(&let_run),
        "the busy job was let run {let_run:.3} of the time, assigned 0.5"
    );
}
