mod common;

use common::setup;
use libra_broker::engine::{self, EngineOptions};
use libra_broker::store::Store;
use libra_core::dbc::Algorithm;
use libra_core::Money;

const TWO_LOCAL: &str = r#"
[[resource]]
name = "a"
kind = "local"
slots = 2
price = 1

[[resource]]
name = "b"
kind = "local"
slots = 1
price = 2
"#;

#[test]
fn local_jobs_run_stage_files_and_are_recorded() {
    let plan = r#"
parameter x integer range from 1 to 6 step 1
task main
    shexec "echo value-$x > out.txt; echo to-stderr 1>&2"
    copy node:out.txt results/out.$jobname
endtask
"#;
    let s = setup(plan, TWO_LOCAL, Algorithm::Time, 1000, 0);
    let state = engine::run(&s.db, s.exp, EngineOptions::default()).unwrap();
    assert_eq!(state, "done");
    let store = Store::open(&s.db).unwrap();
    let results = store.results(s.exp).unwrap();
    assert_eq!(results.len(), 6);
    for r in &results {
        assert_eq!(r.state, "done");
        let x = r.params["x"].as_str().unwrap();
        let out = std::fs::read_to_string(s.dir.path().join(format!("results/out.{}", r.index + 1))).unwrap();
        assert_eq!(out.trim(), format!("value-{x}"));
        assert_eq!(r.files.len(), 1);
        assert!(r.files[0].ends_with(&format!("results/out.{}", r.index + 1)));
        let dir = std::path::PathBuf::from(r.output.as_ref().unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("stderr")).unwrap().trim(), "to-stderr");
    }
    assert!(store.spent(s.exp).unwrap() <= Money::from_credits(1000));
}

#[test]
fn failed_jobs_retry_on_another_resource_then_rerun_failed() {
    let plan = r#"
parameter x integer range from 1 to 4 step 1
task main
    shexec "test $x -ne 3"
endtask
"#;
    let s = setup(plan, TWO_LOCAL, Algorithm::Time, 1000, 1);
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    let store = Store::open(&s.db).unwrap();
    let c = store.counts(s.exp).unwrap();
    assert_eq!((c.done, c.failed), (3, 1));
    let r = store.results(s.exp).unwrap();
    let failed = r.iter().find(|r| r.state == "failed").unwrap();
    assert_eq!(failed.params["x"], "3");
    assert_eq!(failed.attempts, 2);
    // The two attempts ran on different resources.
    let n: i64 = store
        .conn
        .query_row(
            "SELECT COUNT(DISTINCT pos) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.idx = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(store.rerun_failed(s.exp).unwrap(), 1);
    assert_eq!(store.counts(s.exp).unwrap().pending, 1);
}

#[test]
fn never_spends_above_the_budget() {
    // Each job costs 200 * 0.01 s = 2 credits on the test queue; 7 credits buy 3 jobs.
    let res = r#"
[[resource]]
name = "q"
kind = "testqueue"
slots = 2
price = 200
wall = 1
time_scale = 0.01
"#;
    let plan = "parameter x integer range from 1 to 10 step 1\ntask main\nexec true\nendtask\n";
    for alg in [Algorithm::Cost, Algorithm::Time, Algorithm::NimrodTime, Algorithm::NimrodCost] {
        let s = setup(plan, res, alg, 7, 0);
        let state = engine::run(&s.db, s.exp, EngineOptions::default()).unwrap();
        let store = Store::open(&s.db).unwrap();
        let spent = store.spent(s.exp).unwrap();
        assert!(spent <= Money::from_credits(7), "{alg}: spent {spent}");
        assert_eq!(state, "stalled", "{alg}");
        // Libra's planners buy as many jobs as the budget allows; the seed's time heuristic
        // stops once a job costs more than the budget per job left (as published).
        if !alg.is_nimrod() {
            assert_eq!(store.counts(s.exp).unwrap().done, 3, "{alg}");
        }
    }
}

#[test]
fn cancel_from_another_connection_stops_the_sweep() {
    let res = r#"
[[resource]]
name = "q"
kind = "testqueue"
slots = 1
price = 0
wall = 1
time_scale = 0.05
"#;
    let plan = "parameter x integer range from 1 to 200 step 1\ntask main\nexec true\nendtask\n";
    let s = setup(plan, res, Algorithm::Time, 100, 0);
    let db = s.db.clone();
    let exp = s.exp;
    let steer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        Store::open(&db)
            .unwrap()
            .set_state(exp, libra_broker::state::ExperimentState::Cancelled, None)
            .unwrap();
    });
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "cancelled");
    steer.join().unwrap();
    let c = Store::open(&s.db).unwrap().counts(s.exp).unwrap();
    assert!(c.done < 200 && c.cancelled > 0, "{c:?}");
}

#[test]
fn a_resource_that_does_not_answer_is_dropped_from_the_plan() {
    // The free Libra cluster is unreachable (nothing listens on port 9): its jobs come back
    // rejected, it sits out, and the paid local resource does the work.
    let res = r#"
[[resource]]
name = "cluster"
kind = "libra"
slots = 4
price = 0
url = "http://127.0.0.1:9"
token = "t"

[[resource]]
name = "here"
kind = "local"
slots = 2
price = 1
"#;
    let plan = "parameter x integer range from 1 to 5 step 1\ntask main\nexec true\nendtask\n";
    let s = setup(plan, res, Algorithm::Cost, 1000, 0);
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    let store = Store::open(&s.db).unwrap();
    let per = store.per_resource(s.exp).unwrap();
    assert_eq!((per[0].done, per[1].done), (0, 5));
    let lost: i64 = store
        .conn
        .query_row("SELECT COUNT(*) FROM attempts WHERE state = 'lost' AND pos = 0", [], |r| r.get(0))
        .unwrap();
    assert!(lost >= 1);
}

#[test]
fn a_libra_resource_without_a_token_is_left_out_and_the_engine_says_why() {
    if std::env::var_os("LIBRA_TOKEN").is_some() {
        eprintln!("LIBRA_TOKEN is set: every libra resource has a token here, not tested");
        return;
    }
    // No token in the resource, none in the environment, and a saved login for another
    // server: every request would be refused (401), so the resource is not used at all.
    let res = "[[resource]]\nname = \"cluster\"\nkind = \"libra\"\nslots = 1\nprice = 1\nurl = \"http://127.0.0.1:9\"\n";
    let plan = "parameter x integer range from 1 to 2 step 1\ntask main\nexec true\nendtask\n";
    // Options lending a login saved for `server`.
    let lending = |server: &str| EngineOptions {
        login: Some(libra_broker::resources::SavedLogin {
            server: server.into(),
            token: "saved".into(),
            ca: None,
            insecure_http: false,
        }),
        ..EngineOptions::default()
    };
    let s = setup(plan, res, Algorithm::Cost, 10, 0);
    let opts = lending("http://127.0.0.1:10");
    let e = engine::run(&s.db, s.exp, opts).unwrap_err().to_string();
    assert!(e.contains("no resource") && e.contains("'cluster': no API token for http://127.0.0.1:9"), "{e}");
    // The same login, for this server: lent, the resource is used (and refused by nothing
    // listening there, which is another story: it sits out, and the sweep is cancelled).
    let s = setup(plan, res, Algorithm::Cost, 10, 0);
    let (db, exp) = (s.db.clone(), s.exp);
    let engine = std::thread::spawn(move || engine::run(&db, exp, lending("http://127.0.0.1:9/")));
    let store = Store::open(&s.db).unwrap();
    let lost = || -> i64 {
        store.conn.query_row("SELECT COUNT(*) FROM attempts WHERE state = 'lost'", [], |r| r.get(0)).unwrap()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lost() == 0 {
        assert!(std::time::Instant::now() < until, "the lent login's resource was never tried");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    store.set_state(exp, libra_broker::state::ExperimentState::Cancelled, None).unwrap();
    assert_eq!(engine.join().unwrap().unwrap(), "cancelled");
}

#[test]
fn steering_is_not_locked_out_while_the_only_resource_sits_out() {
    // The only resource refuses (nothing listens on port 9), so it sits out for a while with
    // nothing in flight. The engine waits then without holding the database's write lock: a
    // cancel from another connection goes through at once and ends the sweep. (When the engine
    // waited inside its transaction, the cancel failed after the busy timeout with "database is
    // locked".)
    let res = "[[resource]]\nname = \"cluster\"\nkind = \"libra\"\nslots = 1\nprice = 0\nurl = \"http://127.0.0.1:9\"\ntoken = \"t\"\n";
    let plan = "parameter x integer range from 1 to 3 step 1\ntask main\nexec true\nendtask\n";
    let s = setup(plan, res, Algorithm::Cost, 10, 0);
    let (db, exp) = (s.db.clone(), s.exp);
    // The engine in a thread of its own: if the cancel is locked out, the test fails here
    // rather than waiting on an engine that never learns of it.
    let engine = std::thread::spawn(move || engine::run(&db, exp, EngineOptions::default()));
    let store = Store::open(&s.db).unwrap();
    // Until the refusal is on record: the resource is sitting out from then on.
    let lost = || -> i64 {
        store.conn.query_row("SELECT COUNT(*) FROM attempts WHERE state = 'lost'", [], |r| r.get(0)).unwrap()
    };
    while lost() == 0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    store
        .set_state(exp, libra_broker::state::ExperimentState::Cancelled, None)
        .expect("the cancel was locked out");
    assert_eq!(engine.join().unwrap().unwrap(), "cancelled");
}

#[test]
fn figure_17_11_runs_unchanged_on_the_local_resource() {
    let plan = r#"#Parameters Declaration
parameter angle_degree integer range from 1 to 165 step 1;
parameter time_base_value integer default 5;

#Task Definition
task main
    #Copy necessary executables depending on node type
    copy calc.$OS node:calc
    #Execute program with parameter values on remote node
    node:execute ./calc $angle_degree $time_base_value
    #Copy results file to use home node with jobname as extension
    copy node:output ./output.$jobname
endtask
"#;
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 2\nprice = 1\n";
    let s = setup(plan, res, Algorithm::Cost, 10_000, 0);
    let calc = s.dir.path().join(format!("calc.{}", std::env::consts::OS));
    std::fs::write(&calc, "#!/bin/sh\necho \"angle $1 base $2\" > output\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&calc, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    for j in [1, 90, 165] {
        let out = std::fs::read_to_string(s.dir.path().join(format!("output.{j}"))).unwrap();
        assert_eq!(out.trim(), format!("angle {j} base 5"));
    }
}

#[test]
fn substitute_redirect_and_onerror_do_what_the_plan_says() {
    let plan = r#"
parameter n integer select anyof 7 8
parameter mode text default fast
task nodestart
    shexec "echo started > marker"
endtask
task main
    copy input.tmpl node:input.tmpl
    substitute input.tmpl input.txt
    redirect stdout to captured.txt
    shexec "cat input.txt"
    redirect stdout off
    shexec "echo dropped"
    onerror ignore
    shexec "exit 3"
    onerror fail
    copy node:captured.txt out/captured.$jobname
endtask
"#;
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 1\nprice = 1\n";
    let s = setup(plan, res, Algorithm::Time, 1000, 0);
    std::fs::write(s.dir.path().join("input.tmpl"), "n=$n mode=${mode} job=$jobname\n").unwrap();
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    let store = Store::open(&s.db).unwrap();
    for r in store.results(s.exp).unwrap() {
        assert_eq!(r.state, "done");
        let n = r.params["n"].as_str().unwrap().to_string();
        let got =
            std::fs::read_to_string(s.dir.path().join(format!("out/captured.{}", r.index + 1))).unwrap();
        assert_eq!(got, format!("n={n} mode=fast job={}\n", r.index + 1));
        let dir = std::path::PathBuf::from(r.output.unwrap());
        // `redirect stdout off` dropped the echo: the job's own stdout file stayed empty.
        assert_eq!(std::fs::read_to_string(dir.join("stdout")).unwrap_or_default(), "");
        let nodestart = dir.parent().unwrap().join("nodestart-here").join("marker");
        assert!(nodestart.exists());
    }
}

#[test]
fn raising_the_budget_of_a_stalled_sweep_lets_it_finish() {
    let res = "[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nslots = 2\nprice = 200\nwall = 1\ntime_scale = 0.01\n";
    let plan = "parameter x integer range from 1 to 10 step 1\ntask main\nexec true\nendtask\n";
    let s = setup(plan, res, Algorithm::Cost, 7, 0);
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "stalled");
    let store = Store::open(&s.db).unwrap();
    assert_eq!(store.counts(s.exp).unwrap().done, 3);
    store.set_budget(s.exp, Money::from_credits(20)).unwrap();
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    assert_eq!(store.counts(s.exp).unwrap().done, 10);
    assert!(store.spent(s.exp).unwrap() <= Money::from_credits(20));
}

/// A job's own stdout/stderr files exist only when it wrote to them (creating two files per job
/// is what made big sweeps slow on ext4), hold all its commands' output in order, and a
/// background process the job leaves behind neither holds the job up nor loses its output.
#[test]
fn job_output_files_appear_only_when_written_and_keep_everything() {
    let plan = r#"
parameter x integer range from 1 to 4 step 1
task main
    shexec "test $x -eq 1 || exit 0; echo one; echo two; echo err 1>&2"
    shexec "test $x -eq 2 || exit 0; (sleep 2; echo late) &"
    shexec "test $x -eq 3 || exit 0; head -c 300000 /dev/zero | tr '\\0' a"
endtask
"#;
    let s = setup(plan, TWO_LOCAL, Algorithm::Time, 1000, 0);
    let t0 = std::time::Instant::now();
    assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "done");
    // The background `sleep 2` of job 2 kept its stdout open: the sweep did not wait for it.
    assert!(t0.elapsed() < std::time::Duration::from_millis(1800), "{:?}", t0.elapsed());
    let store = Store::open(&s.db).unwrap();
    let dirs: Vec<std::path::PathBuf> = {
        let mut r = store.results(s.exp).unwrap();
        r.sort_by_key(|r| r.index);
        r.iter().map(|r| std::path::PathBuf::from(r.output.as_ref().unwrap())).collect()
    };
    let read = |d: &std::path::Path, f: &str| std::fs::read_to_string(d.join(f)).ok();
    assert_eq!(read(&dirs[0], "stdout").as_deref(), Some("one\ntwo\n"));
    assert_eq!(read(&dirs[0], "stderr").as_deref(), Some("err\n"));
    assert_eq!(read(&dirs[2], "stdout").map(|t| t.len()), Some(300_000), "more than a pipe holds");
    assert_eq!(read(&dirs[2], "stderr"), None);
    // Job 4 printed nothing: no file at all.
    assert!(dirs[3].is_dir());
    assert_eq!((read(&dirs[3], "stdout"), read(&dirs[3], "stderr")), (None, None));
    // The late line of job 2's background process still reaches its file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read(&dirs[1], "stdout").as_deref() != Some("late\n") {
        assert!(std::time::Instant::now() < deadline, "the background output never arrived");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Past its deadline a sweep starts nothing more: it stalls, and says so (`libra sweep
/// set-deadline` and `resume` go on). Before, a resource not yet measured was probed again and
/// again past the deadline: a Libra cluster refused each job ("deadline: 1 s is shorter than
/// 60 s"), sat out 15 s and was probed again, and the sweep never ended.
#[test]
fn a_sweep_past_its_deadline_starts_nothing_and_stalls() {
    let res = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 2\nprice = 1\n";
    let plan = "parameter x integer range from 1 to 3 step 1\ntask main\nexec true\nendtask\n";
    for alg in [Algorithm::Cost, Algorithm::Time, Algorithm::NimrodCost] {
        let s = setup(plan, res, alg, 1000, 0);
        Store::open(&s.db).unwrap().set_deadline(s.exp, engine::now_unix() - 1.0).unwrap();
        assert_eq!(engine::run(&s.db, s.exp, EngineOptions::default()).unwrap(), "stalled", "{alg:?}");
        let store = Store::open(&s.db).unwrap();
        let attempts: i64 = store.conn.query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0)).unwrap();
        assert_eq!(attempts, 0, "{alg:?}: jobs were started past the deadline");
    }
}

/// A cancel stops the sweep's local jobs and pays for the CPU they used, like any other end:
/// a cancel used to record them free, and a job that ignored SIGTERM ran on after its sweep's
/// end, as did the commands after a stopped one that the plan lets fail.
#[test]
fn a_cancel_stops_local_jobs_kills_one_that_ignores_it_and_pays_for_their_cpu() {
    let res = "[[resource]]\nname = \"a\"\nkind = \"local\"\nslots = 2\nprice = 1\n";
    // Job 2 ignores SIGTERM; each spins in its shell until it is stopped.
    let plan = r#"
parameter x integer range from 1 to 2 step 1
task main
    onerror ignore
    shexec "echo $$$$ > pid; if test $x = 2; then trap '' TERM; fi; while :; do :; done"
    shexec "touch after-cancel"
endtask
"#;
    let s = setup(plan, res, Algorithm::Time, 1000, 0);
    let (db, exp) = (s.db.clone(), s.exp);
    let engine = std::thread::spawn(move || engine::run(&db, exp, EngineOptions::default()).unwrap());
    let pid_files = || -> Vec<std::path::PathBuf> {
        let store = Store::open(&s.db).unwrap();
        let mut st = store.conn.prepare("SELECT dir FROM attempts WHERE dir != ''").unwrap();
        let dirs: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        dirs.iter().map(|d| std::path::Path::new(d).join("pid")).filter(|p| p.exists()).collect()
    };
    let t0 = std::time::Instant::now();
    while pid_files().len() < 2 {
        assert!(t0.elapsed().as_secs() < 30, "the two jobs did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pids: Vec<i32> = pid_files()
        .iter()
        .map(|p| loop {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            if let Ok(pid) = text.trim().parse() {
                break pid;
            }
            assert!(t0.elapsed().as_secs() < 30, "{}: {text:?} is not a pid", p.display());
            std::thread::sleep(std::time::Duration::from_millis(50));
        })
        .collect();
    // Whatever happens below, no job is left spinning.
    struct KillOnDrop(Vec<i32>);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            for &pid in &self.0 {
                // Only a process that is still one of this test's jobs.
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmd).contains("> pid; if test") {
                    // SAFETY: signalling this test's own job.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
    let _guard = KillOnDrop(pids.clone());
    // About a CPU-second each.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    Store::open(&s.db)
        .unwrap()
        .set_state(exp, libra_broker::state::ExperimentState::Cancelled, None)
        .unwrap();
    assert_eq!(engine.join().unwrap(), "cancelled");

    // Both gone, the one that ignored SIGTERM too, and nothing after them ran.
    for pid in &pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "job process {pid} still runs");
    }
    let store = Store::open(&s.db).unwrap();
    let mut st = store.conn.prepare("SELECT state, cpu, price, charged_cents, dir FROM attempts").unwrap();
    let rows: Vec<AttemptRecord> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut paid = Money::ZERO;
    for (state, cpu, price, charged, dir) in &rows {
        assert_eq!(state, "lost", "{rows:?}");
        assert!(
            !std::path::Path::new(dir).join("after-cancel").exists(),
            "a step ran after the cancel: {dir}"
        );
        // Each paid price times the CPU it used, rounded up to a cent, as a finished job does.
        let cpu = cpu.expect("the CPU it used is recorded");
        assert!(cpu > 0.3, "{rows:?}");
        let charged = Money::from_cents(charged.expect("charged"));
        assert_eq!(Some(charged), Money::from_credits_f64_ceil(price * cpu), "{rows:?}");
        paid = paid + charged;
    }
    assert_eq!(store.spent(exp).unwrap(), paid);
    assert!(paid <= Money::from_credits(1000));
    assert_eq!(store.counts(exp).unwrap().cancelled, 2);
    // How long each ran is recorded too (`libra sweep results` shows it).
    let timed: i64 =
        store.conn.query_row("SELECT COUNT(*) FROM attempts WHERE wall > 0.5", [], |r| r.get(0)).unwrap();
    assert_eq!(timed, 2);
}

/// An attempt as recorded: state, CPU, price, charged (cents), directory.
type AttemptRecord = (String, Option<f64>, f64, Option<i64>, String);

/// A job whose last command the plan lets fail (`onerror ignore`) and a cancel kills is
/// stopped, not done: it used to end as if it had succeeded.
#[test]
fn a_cancelled_job_whose_killed_last_command_may_fail_is_not_done() {
    let res = "[[resource]]\nname = \"a\"\nkind = \"local\"\nslots = 1\nprice = 1\n";
    let plan = "parameter x integer range from 1 to 1 step 1\ntask main\n    onerror ignore\n    shexec \"touch started; while :; do :; done\"\nendtask\n";
    let s = setup(plan, res, Algorithm::Time, 1000, 0);
    let (db, exp) = (s.db.clone(), s.exp);
    let engine = std::thread::spawn(move || engine::run(&db, exp, EngineOptions::default()).unwrap());
    let store = Store::open(&s.db).unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let dir: Option<String> =
            store.conn.query_row("SELECT dir FROM attempts WHERE dir != ''", [], |r| r.get(0)).ok();
        if dir.is_some_and(|d| std::path::Path::new(&d).join("started").exists()) {
            break;
        }
        assert!(t0.elapsed().as_secs() < 30, "the job did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    store.set_state(exp, libra_broker::state::ExperimentState::Cancelled, None).unwrap();
    assert_eq!(engine.join().unwrap(), "cancelled");
    let state: String = store.conn.query_row("SELECT state FROM attempts", [], |r| r.get(0)).unwrap();
    assert_eq!(state, "lost");
    let c = store.counts(exp).unwrap();
    assert_eq!((c.done, c.cancelled), (0, 1), "{c:?}");
}
