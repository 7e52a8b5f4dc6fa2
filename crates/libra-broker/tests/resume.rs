//! Resuming after the engine died: an attempt that finished meanwhile is not run again. (The
//! kill -9 of a running engine is tested through the `libra` binary, which runs the engine, in
//! crates/libra/tests/sweep_resume.rs.)

mod common;

use common::setup;
use libra_broker::engine::{self, EngineOptions};
use libra_broker::store::Store;
use libra_core::dbc::Algorithm;

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
