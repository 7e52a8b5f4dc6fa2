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
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let created = sweep(&db)
        .args(["run", "--detach", "--optimise", "time", "--max-retries", "0", "--estimate", "1"])
        .args(["--deadline", "1h", "--budget", "100000", "-r"])
        .arg(dir.path().join("res.toml"))
        .arg(dir.path().join("plan.pln"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let exp: i64 = String::from_utf8_lossy(&created.stdout).trim().parse().unwrap();

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
    let token = Client::new(&cl.url, None).login("ida", "pw-ida").unwrap().token;
    let dir = cl.dir.join("sweep");
    std::fs::create_dir_all(&dir).unwrap();
    let runs = dir.join("runs.log");
    let plan = format!(
        "parameter x integer range from 1 to 8 step 1\ntask main\n    shexec \"echo $x >> {}; sleep 1.5\"\nendtask\n",
        runs.display()
    );
    std::fs::write(dir.join("plan.pln"), plan).unwrap();
    let res = format!(
        "[[resource]]\nname = \"cluster\"\nkind = \"libra\"\nslots = 3\nprice = 10\nurl = \"{}\"\ntoken = \"{token}\"\n",
        cl.url
    );
    std::fs::write(dir.join("res.toml"), res).unwrap();
    let db = dir.join("broker.db");
    let created = sweep(&db)
        .args([
            "run",
            "--detach",
            "--optimise",
            "time",
            "--estimate",
            "2",
            "--deadline",
            "10m",
            "--budget",
            "500",
            "-r",
        ])
        .arg(dir.join("res.toml"))
        .arg(dir.join("plan.pln"))
        .env_remove("LIBRA_TOKEN")
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let exp: i64 = String::from_utf8_lossy(&created.stdout).trim().parse().unwrap();
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
