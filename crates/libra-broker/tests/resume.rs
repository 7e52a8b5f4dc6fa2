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
