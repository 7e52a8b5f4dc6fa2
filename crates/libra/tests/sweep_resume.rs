//! kill -9 of a sweep's engine mid-sweep, then `libra sweep resume`: nothing that finished runs
//! again, no result is lost. The engine runs inside the `libra` binary itself (`libra sweep
//! resume` runs it when no engine is alive), as it does for a user, so the workspace needs no
//! second binary for this test and `cargo run` has only one to choose from.

mod common;

use common::{Cluster, SERIAL};
use libra_api::{Client, JobState};
use libra_broker::store::Store;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_libra");

fn sweep(db: &Path) -> Command {
    let mut c = Command::new(EXE);
    c.arg("sweep").arg("--db").arg(db).env_remove("LIBRA_BROKER_DB");
    c
}

/// Writes `plan` and a `libra` resource on the cluster (`slots`, price 10, ida's token) into
/// `dir`, as plan.pln and res.toml.
fn on_the_cluster(cl: &Cluster, dir: &Path, plan: &str, slots: u32) {
    let token = Client::new(&cl.url, None).login("ida", "pw-ida").unwrap().token;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("plan.pln"), plan).unwrap();
    let res = format!(
        "[[resource]]\nname = \"cluster\"\nkind = \"libra\"\nslots = {slots}\nprice = 10\nurl = \"{}\"\ntoken = \"{token}\"\n",
        cl.url
    );
    std::fs::write(dir.join("res.toml"), res).unwrap();
}

/// Creates a sweep of `dir`'s plan.pln on res.toml (`on_the_cluster`) in database `db`, not run
/// yet (`--detach`, optimising time), with `options` (estimate, deadline, budget...). Returns its
/// id.
fn on_the_cluster_with(dir: &Path, db: &Path, options: &[&str]) -> String {
    let created = sweep(db)
        .args(["run", "--detach", "--optimise", "time"])
        .args(options)
        .arg("-r")
        .arg(dir.join("res.toml"))
        .arg(dir.join("plan.pln"))
        .env_remove("LIBRA_TOKEN")
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    String::from_utf8_lossy(&created.stdout).trim().to_string()
}

/// `on_the_cluster_with` a 30 s estimate, ten minutes and 800 credits, and `extra` options.
fn busy_on_the_cluster(dir: &Path, db: &Path, extra: &[&str]) -> String {
    let mut options = vec!["--estimate", "30", "--deadline", "10m", "--budget", "800"];
    options.extend_from_slice(extra);
    on_the_cluster_with(dir, db, &options)
}

/// A test cluster of one node, user ida, and a sweep of one busy job on it (`busy_on_the_cluster`
/// with `extra`) whose engine runs until the job has used some CPU there.
struct OneBusyJob {
    _cl: Cluster,
    ida: Client,
    db: std::path::PathBuf,
    exp: String,
    engine: std::process::Child,
    job: libra_api::JobInfo,
}

fn one_busy_job(name: &str, extra: &[&str]) -> OneBusyJob {
    let cl = Cluster::start(1, 1.0, 30.0);
    let ida = cl.user("ida", 1000);
    let dir = cl.dir.join(name);
    let plan = "parameter x integer range from 1 to 1 step 1\ntask main\n    shexec \"while :; do :; done\"\nendtask\n";
    on_the_cluster(&cl, &dir, plan, 1);
    let db = dir.join("broker.db");
    let exp = busy_on_the_cluster(&dir, &db, extra);
    let engine = sweep(&db).args(["resume", &exp]).env_remove("LIBRA_TOKEN").spawn().unwrap();
    let t0 = Instant::now();
    let job = loop {
        let busy = ida
            .jobs(false)
            .unwrap()
            .into_iter()
            .find(|j| j.state == JobState::Running && j.cpu_seconds > 0.5);
        if let Some(j) = busy {
            break j;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the sweep's job did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    OneBusyJob { _cl: cl, ida, db, exp, engine, job }
}

/// Creates a sweep of `dir`'s plan.pln on res.toml in database `db`, not run yet (`--detach`),
/// with local jobs' options: one second each, no retries, an hour. Returns its id.
fn detached(dir: &Path, db: &Path, budget: &str) -> String {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let created = sweep(db)
        .args(["run", "--detach", "--optimise", "time", "--max-retries", "0", "--estimate", "1"])
        .args(["--deadline", "1h", "--budget", budget, "-r"])
        .arg(dir.join("res.toml"))
        .arg(dir.join("plan.pln"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    String::from_utf8_lossy(&created.stdout).trim().to_string()
}

#[test]
fn sigkill_then_resume_reruns_nothing_finished() {
    let plan = r#"
parameter x integer range from 1 to 24 step 1
task main
    shexec "echo $x >> ../../../../../runs.log; sleep 0.15; echo result-$x > out.txt"
    copy node:out.txt results/out.$x
endtask
"#;
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 2\nprice = 1\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.pln"), plan).unwrap();
    std::fs::write(dir.path().join("res.toml"), res).unwrap();
    let db = dir.path().join("db").join("broker.db");
    let exp: i64 = detached(dir.path(), &db, "100000").parse().unwrap();

    // Attempt directories are <root>/db/experiments/<id>/jobs/<n>-<attempt>: five levels up
    // is the plan's directory, where runs.log counts every start of every job.
    let mut child = sweep(&db).args(["resume", &exp.to_string()]).spawn().unwrap();
    let store = Store::open(&db).unwrap();
    let t0 = Instant::now();
    while store.counts(exp).unwrap().done < 5 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the engine made no progress");
        assert!(child.try_wait().unwrap().is_none(), "the engine ended before it was killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done_at_kill: Vec<u64> =
        store.results(exp).unwrap().into_iter().filter(|r| r.state == "done").map(|r| r.index).collect();
    assert!(done_at_kill.len() >= 5 && done_at_kill.len() < 24, "{done_at_kill:?}");
    // Let the orphaned children of the killed engine end before resuming.
    std::thread::sleep(Duration::from_millis(400));

    let resumed = sweep(&db).args(["resume", &exp.to_string()]).output().unwrap();
    assert!(resumed.status.success(), "resume failed: {}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(store.experiment(exp).unwrap().state, "done");
    let results = store.results(exp).unwrap();
    assert!(results.iter().all(|r| r.state == "done"));
    let log = std::fs::read_to_string(dir.path().join("runs.log")).unwrap();
    let mut starts: HashMap<u64, usize> = HashMap::new();
    for l in log.lines() {
        *starts.entry(l.trim().parse().unwrap()).or_default() += 1;
    }
    for idx in &done_at_kill {
        assert_eq!(
            starts.get(&(idx + 1)),
            Some(&1),
            "job {} finished before the kill and ran again",
            idx + 1
        );
    }
    // The jobs in flight at the kill ran on under their keepers and were adopted, not started
    // again: every job ran exactly once.
    for x in 1..=24u64 {
        assert_eq!(starts.get(&x), Some(&1), "job {x} ran {:?} times: {starts:?}", starts.get(&x));
    }
    for x in 1..=24 {
        let out = std::fs::read_to_string(dir.path().join(format!("results/out.{x}"))).unwrap();
        assert_eq!(out.trim(), format!("result-{x}"));
    }
}

/// The same on a Libra cluster: the broker is killed with jobs submitted and running on the
/// cluster; the resumed engine asks the cluster for each by its attempt's key, adopts what the
/// cluster ran, submits nothing twice, and the sweep's spending equals what the cluster charged.
#[test]
fn a_sweep_killed_mid_run_on_a_libra_cluster_resumes_without_running_or_paying_twice() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 0.5, 30.0);
    let ida = cl.user("ida", 1000);
    let dir = cl.dir.join("sweep");
    let runs = dir.join("runs.log");
    let plan = format!(
        "parameter x integer range from 1 to 8 step 1\ntask main\n    shexec \"echo $x >> {}; sleep 1.5\"\nendtask\n",
        runs.display()
    );
    on_the_cluster(&cl, &dir, &plan, 3);
    let db = dir.join("broker.db");
    let exp: i64 =
        on_the_cluster_with(&dir, &db, &["--estimate", "2", "--deadline", "10m", "--budget", "500"])
            .parse()
            .unwrap();
    let mut engine = sweep(&db).args(["resume", &exp.to_string()]).env_remove("LIBRA_TOKEN").spawn().unwrap();
    let store = Store::open(&db).unwrap();
    // Killed while jobs are in flight on the cluster.
    let t0 = Instant::now();
    loop {
        let on_cluster = ida.jobs(false).unwrap().iter().filter(|j| j.state == JobState::Running).count();
        if store.counts(exp).unwrap().done >= 1 && on_cluster >= 1 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the sweep made no progress");
        assert!(engine.try_wait().unwrap().is_none(), "the engine ended before it was killed");
        std::thread::sleep(Duration::from_millis(50));
    }
    engine.kill().unwrap(); // SIGKILL
    engine.wait().unwrap();
    let resumed = sweep(&db).args(["resume", &exp.to_string()]).env_remove("LIBRA_TOKEN").output().unwrap();
    assert!(resumed.status.success(), "resume failed: {}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(store.experiment(exp).unwrap().state, "done");
    // Each job ran once, and the cluster has one job per sweep job.
    let log = std::fs::read_to_string(&runs).unwrap();
    let mut starts: HashMap<u64, usize> = HashMap::new();
    for l in log.lines() {
        *starts.entry(l.trim().parse().unwrap()).or_default() += 1;
    }
    assert_eq!(starts.len(), 8, "{starts:?}");
    assert!(starts.values().all(|n| *n == 1), "a job ran twice: {starts:?}");
    let jobs: Vec<_> =
        ida.jobs(false).unwrap().into_iter().filter(|j| j.state != JobState::Rejected).collect();
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    // What the sweep says it spent is what the cluster charged.
    let charged = jobs.iter().fold(libra_core::Money::ZERO, |a, j| a + j.charged);
    assert_eq!(store.spent(exp).unwrap(), charged);
    assert_eq!(ida.balance().unwrap().charged, charged);
}

/// `libra sweep cancel` of a sweep on a Libra cluster whose engine was killed (here during a
/// cancel: the sweep is marked cancelled, not finished): its jobs on the cluster are found by
/// their keys and cancelled, and the sweep records what the cluster charged for them. The
/// cancel used to mark them lost while they ran on, and paid for, on the cluster.
#[test]
fn a_sweep_cancelled_after_its_engine_was_killed_cancels_its_jobs_on_the_libra_cluster() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 0.5, 30.0);
    let ida = cl.user("ida", 1000);
    let dir = cl.dir.join("sweep-cancelled");
    let plan = "parameter x integer range from 1 to 4 step 1\ntask main\n    shexec \"while :; do :; done\"\nendtask\n";
    on_the_cluster(&cl, &dir, plan, 2);
    let db = dir.join("broker.db");
    let exp = busy_on_the_cluster(&dir, &db, &[]);
    let mut engine = sweep(&db).args(["resume", &exp]).env_remove("LIBRA_TOKEN").spawn().unwrap();
    let running = || ida.jobs(false).unwrap().into_iter().filter(|j| j.state.is_active()).collect::<Vec<_>>();
    let t0 = Instant::now();
    while running().iter().filter(|j| j.state == JobState::Running).count() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the sweep's jobs did not start: {:?}", running());
        std::thread::sleep(Duration::from_millis(100));
    }
    // A running job shows its part running on its node.
    let on_nodes: Vec<_> = running().into_iter().filter(|j| j.state == JobState::Running).collect();
    assert!(on_nodes.iter().all(|j| j.parts_running == 1), "{on_nodes:?}");
    // They use some CPU, then their engine is killed.
    std::thread::sleep(Duration::from_millis(1500));
    engine.kill().unwrap(); // SIGKILL
    engine.wait().unwrap();
    // Marked cancelled, as an engine killed during its cancel leaves a sweep (the cancel is
    // then done by the next `libra sweep cancel`, which is what a user would run again).
    let e: i64 = exp.parse().unwrap();
    Store::open(&db).unwrap().set_state(e, libra_broker::state::ExperimentState::Cancelled, None).unwrap();
    let c = sweep(&db).args(["cancel", &exp]).env_remove("LIBRA_TOKEN").output().unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    // Cancelled on the cluster by the time the cancel returns (allowing the listing a moment).
    let t0 = Instant::now();
    while !running().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the sweep is cancelled but its jobs run on the cluster: {:?}",
            running()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let store = Store::open(&db).unwrap();
    let exp: i64 = exp.parse().unwrap();
    let e = store.experiment(exp).unwrap();
    assert_eq!(e.state, "cancelled");
    assert!(e.finished.is_some());
    let c = store.counts(exp).unwrap();
    assert_eq!((c.running, c.pending, c.done), (0, 0, 0), "{c:?}");
    // The sweep paid what the cluster charged in the end: the CPU each job used to its kill,
    // which its node reports after the cancel (the sweep paid only the charge at the cancel).
    let jobs: Vec<_> =
        ida.jobs(false).unwrap().into_iter().filter(|j| j.state != JobState::Rejected).collect();
    assert!(jobs.iter().all(|j| j.state == JobState::Cancelled), "{jobs:?}");
    assert!(
        jobs.iter().all(|j| j.parts_running == 0),
        "the cancel returned before the nodes stopped the jobs: {jobs:?}"
    );
    let charged = jobs.iter().fold(libra_core::Money::ZERO, |a, j| a + j.charged);
    let spent = store.spent(exp).unwrap();
    assert!(spent > libra_core::Money::ZERO, "spent {spent}");
    assert_eq!(spent, charged, "the sweep's spending against the cluster's charges: {jobs:?}");
    assert_eq!(ida.balance().unwrap().charged, charged);
    assert!(spent <= libra_core::Money::from_credits(800));
}

/// A sweep's job cancelled on the cluster by its owner (`libra cancel`, not through the sweep):
/// the sweep records the attempt failed and pays what the cluster charged in the end, the CPU to
/// the node's kill included. (The agent stops a cancelled job within about 100 ms here, before
/// the sweep's next look at the job, so this holds without `stopped_on_its_nodes` too; that wait
/// is for a node slower to answer.)
#[test]
fn a_job_cancelled_on_the_cluster_under_its_sweep_is_paid_what_the_cluster_charged_in_the_end() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let OneBusyJob { _cl, ida, db, exp, mut engine, job } =
        one_busy_job("sweep-cancelled-there", &["--max-retries", "0"]);
    let at_cancel = ida.cancel(job.id).unwrap();
    let status = engine.wait().unwrap();
    assert!(!status.success(), "the sweep's only job failed: {status:?}");
    let end = ida.job(job.id).unwrap();
    assert_eq!((end.state, end.parts_running), (JobState::Cancelled, 0), "{end:?}");
    assert!(end.charged > at_cancel.charged, "no CPU after the cancel was charged: {at_cancel:?} {end:?}");
    let store = Store::open(&db).unwrap();
    assert_eq!(store.spent(exp.parse().unwrap()).unwrap(), end.charged, "{end:?}");
}

/// A sweep's cancel cut short after its job on the cluster was cancelled there (the engine
/// killed during its wait for the nodes): the next `libra sweep cancel` takes the attempt up,
/// finds the job ended, and pays what it was charged. The attempt was recorded cancelled, paid
/// nothing, while the cluster charged the user for it.
#[test]
fn a_cancel_taken_up_after_its_jobs_were_cancelled_on_the_cluster_pays_what_they_were_charged() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let OneBusyJob { _cl, ida, db, exp, mut engine, job } = one_busy_job("sweep-cut-short", &[]);
    // Where a cancel killed in its wait leaves things: the job cancelled on the cluster, the
    // sweep marked cancelled, its attempt still running in its database.
    engine.kill().unwrap(); // SIGKILL
    engine.wait().unwrap();
    ida.cancel(job.id).unwrap();
    let e: i64 = exp.parse().unwrap();
    let store = Store::open(&db).unwrap();
    store.set_state(e, libra_broker::state::ExperimentState::Cancelled, None).unwrap();
    let c = sweep(&db).args(["cancel", &exp]).env_remove("LIBRA_TOKEN").output().unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    assert!(store.experiment(e).unwrap().finished.is_some());
    let end = ida.job(job.id).unwrap();
    assert_eq!((end.state, end.parts_running), (JobState::Cancelled, 0), "{end:?}");
    assert!(end.charged > libra_core::Money::ZERO, "{end:?}");
    assert_eq!(store.spent(e).unwrap(), end.charged, "{end:?}");
}

/// A sweep's engine killed while its jobs ran on a Libra cluster and under a local keeper, then
/// run again where the cluster resource cannot be used (its token was in LIBRA_TOKEN, unset
/// now): `resume` refuses, naming the resource, and neither gives the cluster's job up nor runs
/// it again on the local resource (it was recorded lost and run a second time there while it
/// ran on, paid for, on the cluster). A `cancel` without the token marks the sweep cancelled,
/// unfinished, and stops the local job; with the token, the next `cancel` stops the cluster's.
#[test]
fn a_sweep_whose_cluster_resource_cannot_be_used_after_a_crash_neither_reruns_nor_drops_its_job_there() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let ida = cl.user("ida", 1000);
    let token = Client::new(&cl.url, None).login("ida", "pw-ida").unwrap().token;
    let dir = cl.dir.join("sweep-stranded");
    let runs = dir.join("runs.log");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = format!(
        "parameter x integer range from 1 to 2 step 1\ntask main\n    shexec \"echo $x >> {}; sleep 20\"\nendtask\n",
        runs.display()
    );
    std::fs::write(dir.join("plan.pln"), plan).unwrap();
    let res = format!(
        "[[resource]]\nname = \"cluster\"\nkind = \"libra\"\nslots = 1\nprice = 10\nurl = \"{}\"\n\n\
         [[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 1\nprice = 1\n",
        cl.url
    );
    std::fs::write(dir.join("res.toml"), res).unwrap();
    let no_login = tempfile::tempdir().unwrap();
    let db = dir.join("broker.db");
    let libra_sweep = |token: Option<&str>| {
        let mut c = sweep(&db);
        c.env("LIBRA_CONFIG_DIR", no_login.path()).env_remove("LIBRA_TOKEN");
        if let Some(t) = token {
            c.env("LIBRA_TOKEN", t);
        }
        c
    };
    let created = libra_sweep(Some(&token))
        .args(["run", "--detach", "--optimise", "time", "--estimate", "30", "--deadline", "10m"])
        .args(["--budget", "800", "-r"])
        .arg(dir.join("res.toml"))
        .arg(dir.join("plan.pln"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let exp = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let e: i64 = exp.parse().unwrap();
    let store = Store::open(&db).unwrap();
    let mut engine = libra_sweep(Some(&token)).args(["resume", &exp]).spawn().unwrap();
    let on_cluster =
        || ida.jobs(false).unwrap().into_iter().filter(|j| j.state != JobState::Rejected).collect::<Vec<_>>();
    let t0 = Instant::now();
    while store.counts(e).unwrap().running < 2 || !on_cluster().iter().any(|j| j.state == JobState::Running) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the sweep's jobs did not both start: {:?}",
            on_cluster()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    engine.kill().unwrap(); // SIGKILL
    engine.wait().unwrap();
    let runs_once = || {
        let log = std::fs::read_to_string(&runs).unwrap();
        let mut lines: Vec<&str> = log.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["1", "2"], "each job started once");
    };

    // Without the token: refused, nothing given up or run again.
    let r = libra_sweep(None).args(["resume", &exp]).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains("resource 'cluster': no API token")
            && err.contains("1 of the sweep's jobs was running on it"),
        "{err}"
    );
    assert_eq!(store.counts(e).unwrap().running, 2);
    assert_eq!(on_cluster().len(), 1, "{:?}", on_cluster());
    runs_once();

    // A cancel without it: marked cancelled, unfinished, the local job stopped.
    let c = libra_sweep(None).args(["cancel", &exp]).output().unwrap();
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(!c.status.success(), "{err}");
    assert!(err.contains("marked cancelled") && err.contains("jobs was running on it"), "{err}");
    let x = store.experiment(e).unwrap();
    assert_eq!((x.state.as_str(), x.finished), ("cancelled", None));
    assert_eq!(on_cluster()[0].state, JobState::Running);

    // With it: the cluster's job is cancelled, the sweep finished, nothing ran twice.
    let c = libra_sweep(Some(&token)).args(["cancel", &exp]).output().unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let x = store.experiment(e).unwrap();
    assert!(x.finished.is_some(), "{x:?}");
    assert_eq!(store.counts(e).unwrap().running, 0);
    let jobs = on_cluster();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].state, JobState::Cancelled, "{jobs:?}");
    runs_once();
    // The local job ended with the first cancel, and its keeper recorded how: stopped by the
    // cancel, with the CPU it used (it was taken up as a failure), like the cluster's job.
    let mut st = store.conn.prepare("SELECT state, message, cpu FROM attempts ORDER BY id").unwrap();
    let rows: Vec<(String, Option<String>, Option<f64>)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    assert!(rows.iter().all(|(s, m, _)| s == "lost" && m.as_deref() == Some("cancelled")), "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.2.is_some()).count(), 1, "the local job's CPU: {rows:?}");
    let c = store.counts(e).unwrap();
    assert_eq!((c.done, c.failed, c.pending), (0, 0, 0), "{c:?}");
}

/// The pids the sweep's jobs wrote in their attempt directories (`echo $$$$ > pid`), once
/// `n` have.
fn job_pids(db: &Path, n: usize) -> Vec<i32> {
    let store = Store::open(db).unwrap();
    let t0 = Instant::now();
    loop {
        let mut st = store.conn.prepare("SELECT dir FROM attempts WHERE dir != ''").unwrap();
        let dirs: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        let pids: Vec<i32> = dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(Path::new(d).join("pid")).ok()?.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{} of {n} jobs started", pids.len());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` is still one of this test's spinning jobs (and not a process that reused it).
fn spinning(pid: i32) -> bool {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmd).contains("> pid;")
}

/// Kills this test's jobs that are still spinning when it ends, whatever happened.
struct Spinners(Vec<i32>);

impl Drop for Spinners {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if spinning(pid) {
                // SAFETY: signalling this test's own job.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// `libra sweep cancel` of a standalone sweep whose local jobs run under keepers (processes that
/// outlive the engine): with the engine running, every job stops, even one that ignores SIGTERM,
/// and the ones that end on it are paid for (price times the CPU they used), not recorded free;
/// with no engine running, the keepers are stopped all the same (their jobs ran on after the
/// cancel).
#[test]
fn a_cancelled_sweeps_kept_jobs_stop_and_pay_for_their_cpu_with_or_without_an_engine() {
    let plan = r#"
parameter x integer range from 1 to 2 step 1
task main
    onerror ignore
    shexec "echo $$$$ > pid; if test $x = 2; then trap '' TERM; fi; while :; do :; done"
    shexec "touch after-cancel"
endtask
"#;
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 2\nprice = 1\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.pln"), plan).unwrap();
    std::fs::write(dir.path().join("res.toml"), res).unwrap();
    let make = |name: &str| {
        let db = dir.path().join(name).join("broker.db");
        let exp = detached(dir.path(), &db, "1000");
        (db, exp)
    };

    // With its engine running.
    let (db, exp) = make("live");
    let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    let pids = job_pids(&db, 2);
    let _spinners = Spinners(pids.clone());
    std::thread::sleep(Duration::from_millis(1000));
    let c = sweep(&db).args(["cancel", &exp]).output().unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let status = engine.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    for pid in &pids {
        assert!(!spinning(*pid), "job process {pid} still runs after its sweep was cancelled");
    }
    let store = Store::open(&db).unwrap();
    let exp_id: i64 = exp.parse().unwrap();
    let mut st = store.conn.prepare("SELECT state, cpu, price, charged_cents, dir FROM attempts").unwrap();
    let rows: Vec<AttemptRecord> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (state, _, _, _, dir) in &rows {
        assert_eq!(state, "lost", "{rows:?}");
        assert!(!Path::new(dir).join("after-cancel").exists(), "a step ran after the cancel: {dir}");
    }
    // Each job's keeper recorded the CPU it used, which the sweep paid for: job 1 ended on the
    // SIGTERM, job 2, which ignored it, was killed by its keeper 3 s later (it used to be killed
    // with its keeper, which could record nothing: it ran free).
    let mut spent = libra_core::Money::ZERO;
    for (_, cpu, price, charged, dir) in &rows {
        let cpu =
            cpu.unwrap_or_else(|| panic!("the CPU the stopped job in {dir} used is not recorded: {rows:?}"));
        assert!(cpu > 0.3, "{rows:?}");
        let charged = libra_core::Money::from_cents(charged.unwrap());
        assert_eq!(Some(charged), libra_core::Money::from_credits_f64_ceil(price * cpu), "{rows:?}");
        spent = spent + charged;
    }
    let job2 = |d: &str| Path::new(d).file_name().is_some_and(|n| n.to_string_lossy().starts_with("2-"));
    let (_, cpu2, _, _, _) = rows.iter().find(|r| job2(&r.4)).unwrap();
    assert!(cpu2.unwrap() > 2.0, "job 2 ran on for 3 s after the SIGTERM it ignored: {rows:?}");
    assert_eq!(store.spent(exp_id).unwrap(), spent);
    let shown = sweep(&db).args(["status", &exp, "--json"]).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["spent_cents"].as_i64(), Some(spent.cents()), "{shown}");

    // With no engine: the keepers outlive a killed engine, and the cancel stops them.
    let (db, exp) = make("orphaned");
    let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    let pids = job_pids(&db, 2);
    let _spinners2 = Spinners(pids.clone());
    engine.kill().unwrap(); // SIGKILL: no engine is left to stop the jobs
    engine.wait().unwrap();
    let store = Store::open(&db).unwrap();
    let t0 = Instant::now();
    // The engine is taken for dead once its heartbeat is stale.
    loop {
        let c = sweep(&db).args(["cancel", &exp]).output().unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        if store.experiment(exp.parse().unwrap()).unwrap().finished.is_some() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the killed engine is still taken for alive");
        std::thread::sleep(Duration::from_millis(500));
    }
    let t0 = Instant::now();
    while pids.iter().any(|&p| spinning(p)) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the jobs of a sweep cancelled with no engine still run: {:?}",
            pids.iter().filter(|&&p| spinning(p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An attempt as recorded: state, CPU, price, charged (cents), directory.
type AttemptRecord = (String, Option<f64>, f64, Option<i64>, String);

/// A directory with a plan of one job running `command` (plan.pln) and a local resource of one
/// slot at price 1 (res.toml).
fn one_local_job(command: &str) -> tempfile::TempDir {
    let plan = format!(
        "parameter x integer range from 1 to 1 step 1\ntask main\n    shexec \"{command}\"\nendtask\n"
    );
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 1\nprice = 1\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.pln"), plan).unwrap();
    std::fs::write(dir.path().join("res.toml"), res).unwrap();
    dir
}

/// Kills every job of the sweep in `.0` (its database) still spinning when the test ends, the
/// ones started after it looked included.
struct SweepSpinners(std::path::PathBuf);

impl Drop for SweepSpinners {
    fn drop(&mut self) {
        let Ok(store) = Store::open(&self.0) else { return };
        let Ok(mut st) = store.conn.prepare("SELECT dir FROM attempts WHERE dir != ''") else { return };
        let dirs: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        let pids = dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(Path::new(d).join("pid")).ok()?.trim().parse().ok());
        drop(Spinners(pids.collect()));
    }
}

/// The keeper of the sweep's only attempt (the pid it recorded in the attempt's directory).
fn keeper_of_only_attempt(db: &Path) -> i32 {
    let store = Store::open(db).unwrap();
    let dir: String = store.conn.query_row("SELECT dir FROM attempts", [], |r| r.get(0)).unwrap();
    std::fs::read_to_string(Path::new(&dir).join("libra.keeper")).unwrap().trim().parse().unwrap()
}

/// Waits up to `secs` for `child`, killing it and failing the test past that.
fn ends_within(child: &mut std::process::Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A local job's keeper killed from outside (`kill -9`, as the OOM killer would), with the engine
/// running and with none: the processes the job left running are killed, not left to run on
/// beside the job's next attempt (they used to run for ever, unpaid), and the attempt is a
/// failure that pays for the CPU they used; with no engine, the next one does this rather than
/// take the attempt for lost and run the job again beside them (also when the engine that killed
/// them is killed itself before it records the attempt); and a cancel with no engine stops them
/// too.
#[test]
fn a_kept_job_whose_keeper_is_killed_from_outside_stops_and_pays_and_never_runs_twice() {
    let dir = one_local_job("echo $$$$ > pid; while :; do :; done");
    let the_attempt = |db: &Path, exp: &str| {
        let store = Store::open(db).unwrap();
        let mut st =
            store.conn.prepare("SELECT state, cpu, price, charged_cents, message FROM attempts").unwrap();
        let rows: Vec<FailedAttempt> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows.len(), 1, "the job ran more than once: {rows:?}");
        let (state, cpu, price, charged, message) = rows.into_iter().next().unwrap();
        assert_eq!(state, "failed", "{message:?}");
        let message = message.unwrap_or_default();
        assert!(message.contains("process(es) its job left running were killed"), "{message}");
        let cpu = cpu.unwrap_or_default();
        assert!(cpu > 0.3, "the CPU the job used before its keeper died: {cpu} ({message})");
        let charged = libra_core::Money::from_cents(charged.unwrap_or_default());
        assert_eq!(Some(charged), libra_core::Money::from_credits_f64_ceil(price * cpu), "{message}");
        assert_eq!(store.spent(exp.parse().unwrap()).unwrap(), charged);
    };
    let gone_within = |pid: i32, secs: u64| {
        let t0 = Instant::now();
        while spinning(pid) {
            assert!(t0.elapsed() < Duration::from_secs(secs), "job process {pid} runs on without its keeper");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let kill9 = |pid: i32| {
        // SAFETY: a keeper this test's sweep started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    };

    // A sweep of its own (database under `name`), its engine running its job (`pid`).
    let started = |name: &str| {
        let db = dir.path().join(name).join("broker.db");
        let exp = detached(dir.path(), &db, "1000");
        let spinners = SweepSpinners(db.clone());
        let engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
        let pid = job_pids(&db, 1)[0];
        (db, exp, spinners, engine, pid)
    };

    // With its engine running: it hears the keeper end, and stops what it left.
    let (db, exp, _spinners, mut engine, pid) = started("live");
    std::thread::sleep(Duration::from_millis(1000));
    kill9(keeper_of_only_attempt(&db));
    gone_within(pid, 10);
    ends_within(&mut engine, 30, "the engine");
    the_attempt(&db, &exp);

    // With no engine: the keeper killed after the engine was, then `libra sweep resume`.
    let (db, exp, _spinners2, mut engine, pid) = started("dead");
    std::thread::sleep(Duration::from_millis(1000));
    engine.kill().unwrap();
    engine.wait().unwrap();
    kill9(keeper_of_only_attempt(&db));
    std::thread::sleep(Duration::from_millis(300));
    assert!(spinning(pid), "the job ran on after its keeper died");
    let mut resumed = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    ends_within(&mut resumed, 60, "the resumed engine");
    assert!(!spinning(pid), "job process {pid} runs on after the sweep ended");
    the_attempt(&db, &exp);

    // The engine killed (-9) the instant it says it killed what the keeper left: the next one
    // finds the attempt's CPU recorded, rather than taking it for lost and running it again.
    let db = dir.path().join("engine-killed").join("broker.db");
    let exp = detached(dir.path(), &db, "1000");
    let _spinners4 = SweepSpinners(db.clone());
    let mut engine = sweep(&db).args(["resume", &exp]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = job_pids(&db, 1)[0];
    let said = engine.stderr.take().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    kill9(keeper_of_only_attempt(&db));
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(said));
    let line = lines.find(|l| l.as_ref().is_ok_and(|l| l.contains("left running were killed")));
    engine.kill().unwrap();
    engine.wait().unwrap();
    assert!(line.is_some(), "the engine never said it killed the job");
    assert!(!spinning(pid), "job process {pid} runs on without its keeper");
    let mut resumed = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    ends_within(&mut resumed, 60, "the resumed engine");
    the_attempt(&db, &exp);

    // With no engine, then a cancel: what the dead keeper left is stopped with the sweep.
    let (db, exp, _spinners3, mut engine, pid) = started("cancelled");
    engine.kill().unwrap();
    engine.wait().unwrap();
    kill9(keeper_of_only_attempt(&db));
    let store = Store::open(&db).unwrap();
    let t0 = Instant::now();
    while store.experiment(exp.parse().unwrap()).unwrap().finished.is_none() {
        let c = sweep(&db).args(["cancel", &exp]).output().unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        assert!(t0.elapsed() < Duration::from_secs(30), "the killed engine is still taken for alive");
        std::thread::sleep(Duration::from_millis(300));
    }
    gone_within(pid, 10);
}

/// An attempt as recorded: state, CPU, price, charged (cents), message.
type FailedAttempt = (String, Option<f64>, f64, Option<i64>, Option<String>);

/// A cancel whose keeper does not stop its job (the keeper hung: stopped here with SIGSTOP, and
/// the job ignores SIGTERM): 5 s later the engine kills the keeper, then the job's processes,
/// after reading the CPU they used, which the sweep pays (the job used to be killed with its
/// keeper, its CPU not known and not paid). The same for a keeper the engine took up from the
/// one before it (killed with -9 here).
#[test]
fn a_cancelled_sweeps_job_whose_keeper_hung_is_killed_and_paid_for() {
    let dir = one_local_job("echo $$$$ > pid; trap '' TERM; while :; do :; done");
    for taken_up in [false, true] {
        let db = dir.path().join(format!("taken-up-{taken_up}")).join("broker.db");
        let exp = detached(dir.path(), &db, "1000");
        let _spinners = SweepSpinners(db.clone());
        let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
        let pid = job_pids(&db, 1)[0];
        if taken_up {
            engine.kill().unwrap();
            engine.wait().unwrap();
            engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
            // Taken up: its heartbeat is the new engine's.
            std::thread::sleep(Duration::from_millis(1500));
            assert!(engine.try_wait().unwrap().is_none(), "the resumed engine ended");
        }
        // SAFETY: a keeper this test's sweep started.
        assert_eq!(unsafe { libc::kill(keeper_of_only_attempt(&db), libc::SIGSTOP) }, 0);
        let c = sweep(&db).args(["cancel", &exp]).output().unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        ends_within(&mut engine, 30, "the engine");
        assert!(!spinning(pid), "job process {pid} runs on after its sweep was cancelled");
        let store = Store::open(&db).unwrap();
        let (state, message, cpu, price, charged): (String, Option<String>, Option<f64>, f64, Option<i64>) =
            store
                .conn
                .query_row("SELECT state, message, cpu, price, charged_cents FROM attempts", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .unwrap();
        assert_eq!((state.as_str(), message.as_deref()), ("lost", Some("cancelled")), "taken up: {taken_up}");
        let cpu = cpu.expect("the CPU of the job whose keeper hung is not recorded");
        assert!(cpu > 1.0, "it ran 5 s after the cancel: {cpu} (taken up: {taken_up})");
        let charged = libra_core::Money::from_cents(charged.unwrap_or_default());
        assert_eq!(Some(charged), libra_core::Money::from_credits_f64_ceil(price * cpu));
        assert_eq!(store.spent(exp.parse().unwrap()).unwrap(), charged);
    }
}

/// The engine finds a dead keeper's job by the attempt's key in its processes' environment. A
/// stranger's process that claims the key (another Unix account's, one that has made itself not
/// dumpable, which some kernels show as root's in `/proc`) is neither killed nor billed to the
/// sweep.
#[test]
fn a_strangers_process_claiming_a_lost_keepers_key_is_neither_killed_nor_billed() {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: no second account to attack from, not tested");
        return;
    }
    let Some(stranger) = common::Account::create(&format!("lsk{}", std::process::id() % 100_000)) else {
        eprintln!("useradd is not available: not tested");
        return;
    };
    let dir = one_local_job("echo $$$$ > pid; while :; do :; done");
    let db = dir.path().join("db").join("broker.db");
    let exp = detached(dir.path(), &db, "1000");
    let _spinners = SweepSpinners(db.clone());
    let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    let pid = job_pids(&db, 1)[0];
    let keeper = keeper_of_only_attempt(&db);
    let env = std::fs::read(format!("/proc/{keeper}/environ")).unwrap();
    let claim = env
        .split(|b| *b == 0)
        .map(String::from_utf8_lossy)
        .find(|v| v.starts_with("LIBRA_SWEEP_ATTEMPT="))
        .expect("the keeper's key")
        .into_owned();

    // The stranger's process: the key in its environment, busy, then not dumpable (prctl
    // PR_SET_DUMPABLE 0, by perl's syscall, which Debian always has), then asleep.
    #[cfg(target_arch = "x86_64")]
    const PRCTL: u32 = 157;
    #[cfg(not(target_arch = "x86_64"))]
    const PRCTL: u32 = 167;
    let script = format!(
        "$| = 1; for (1..2000000) {{}} syscall({PRCTL}, 4, 0, 0, 0, 0); print \"ready $$\\n\"; sleep 120"
    );
    let mut theirs = Command::new("runuser")
        .args(["-u", &stranger.name, "--", "env", &claim, "perl", "-e", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(theirs.stdout.take().unwrap()), &mut ready)
        .unwrap();
    let their_pid: i32 = ready
        .trim()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the stranger's process did not start: {ready:?}"));

    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: the keeper this test's sweep started.
    assert_eq!(unsafe { libc::kill(keeper, libc::SIGKILL) }, 0);
    ends_within(&mut engine, 30, "the engine");
    assert!(!spinning(pid), "the job runs on without its keeper");
    // SAFETY: signal 0 only asks whether the stranger's process, which this test started, lives.
    let alive = unsafe { libc::kill(their_pid, 0) } == 0;
    // SAFETY: the stranger's process this test started (its runuser, our child, waits for it:
    // the pid is still its).
    unsafe {
        libc::kill(their_pid, libc::SIGKILL);
    }
    let _ = theirs.wait();
    assert!(alive, "the stranger's process was killed as the sweep's job");
    let store = Store::open(&db).unwrap();
    let message: String = store.conn.query_row("SELECT message FROM attempts", [], |r| r.get(0)).unwrap();
    assert!(message.contains("the 1 process(es) its job left running were killed"), "{message}");
}
