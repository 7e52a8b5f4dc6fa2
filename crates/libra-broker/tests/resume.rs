//! kill -9 of the engine mid-sweep, then resume: nothing that finished runs again, no result
//! is lost.

mod common;

use common::setup;
use libra_broker::engine::{self, EngineOptions};
use libra_broker::store::Store;
use libra_core::dbc::Algorithm;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

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
    let s = setup(plan, res, Algorithm::Time, 100_000, 0);
    // Attempt directories are <root>/db/experiments/<id>/jobs/<n>-<attempt>: five levels up
    // is the plan's directory, where runs.log counts every start of every job.
    let mut child = Command::new(env!("CARGO_BIN_EXE_libra-broker-engine"))
        .arg(&s.db)
        .arg(s.exp.to_string())
        .spawn()
        .unwrap();
    let store = Store::open(&s.db).unwrap();
    let t0 = Instant::now();
    while store.counts(s.exp).unwrap().done < 5 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the engine made no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done_at_kill: Vec<u64> =
        store.results(s.exp).unwrap().into_iter().filter(|r| r.state == "done").map(|r| r.index).collect();
    assert!(done_at_kill.len() >= 5 && done_at_kill.len() < 24, "{done_at_kill:?}");
    // Let the orphaned children of the killed engine end before resuming.
    std::thread::sleep(Duration::from_millis(400));

    let state = engine::run(&s.db, s.exp, EngineOptions::default()).unwrap();
    assert_eq!(state, "done");
    let results = store.results(s.exp).unwrap();
    assert!(results.iter().all(|r| r.state == "done"));
    let log = std::fs::read_to_string(s.dir.path().join("runs.log")).unwrap();
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
    for x in 1..=24 {
        let out = std::fs::read_to_string(s.dir.path().join(format!("results/out.{x}"))).unwrap();
        assert_eq!(out.trim(), format!("result-{x}"));
    }
}

#[test]
fn an_attempt_that_finished_while_the_broker_was_down_is_not_run_again() {
    let plan = "parameter x integer range from 1 to 2 step 1\ntask main\n    shexec \"echo $x >> ../../../../../runs.log\"\nendtask\n";
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 1\nprice = 1\n";
    let s = setup(plan, res, Algorithm::Time, 100, 0);
    let store = Store::open(&s.db).unwrap();
    let e = store.experiment(s.exp).unwrap();
    // The broker had started job 1 and died; the job finished and recorded its outcome.
    let (job_id, _) = store.pending(s.exp).unwrap()[0];
    let work = std::path::PathBuf::from(&e.work_dir);
    let (attempt, dir) = store
        .start_attempt(s.exp, job_id, 0, 0.0, 1.0, libra_core::Money::ZERO, &|id| {
            work.join("jobs").join(format!("1-{id}")).to_string_lossy().into_owned()
        })
        .unwrap();
    let o = libra_broker::adapter::Outcome {
        attempt,
        resource: 0,
        ok: true,
        exit_code: Some(0),
        wall: 0.5,
        cpu: 0.25,
        message: String::new(),
        rejected: false,
        billed: None,
    };
    std::fs::create_dir_all(&dir).unwrap();
    libra_broker::adapter::write_marker(std::path::Path::new(&dir), &o);

    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    let log = std::fs::read_to_string(s.dir.path().join("runs.log")).unwrap();
    assert_eq!(log.trim(), "2", "only job 2 ran");
    let r = store.results(s.exp).unwrap();
    assert_eq!(r[0].state, "done");
    assert_eq!(r[0].wall, Some(0.5));
    // Paid for the CPU it used: 0.25 s at 1 credit per CPU-second, rounded up to the cent.
    assert_eq!(r[0].cost, libra_core::Money::from_cents(25));
}
