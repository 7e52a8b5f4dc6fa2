//! Settlement in the running server: the money rules applied to what nodes report, exits and
//! settlements in one transaction, stranded jobs settled on start, idempotent submission, and
//! node fields that survive a restart.

use crate::app::App;
use crate::ledger;
use crate::sched::tests::{app, exit, req, sync, user};
use libra_api::{JobState, OutputChunk, RegisterRequest, RunningReport, Stream};
use libra_core::Money;

fn node(app: &App, name: &str, mem_mb: u64, now: f64) {
    app.lock()
        .register(
            &RegisterRequest {
                name: name.into(),
                cpus: 1.0,
                mem_mb,
                mechanism: "none".into(),
                account: String::new(),
                switches_users: false,
            },
            1.0,
            now,
        )
        .unwrap();
}

fn running(job: u64, cpu: f64, start: f64) -> RunningReport {
    RunningReport { job, cpu_seconds: cpu, suspended: false, share: 0.5, start_time: start, output: vec![] }
}

fn failed(job: u64, code: i32, cpu: f64, start: f64, end: f64) -> libra_api::ExitReport {
    libra_api::ExitReport { exit_code: Some(code), ..exit(job, cpu, start, end) }
}

#[test]
fn users_pay_for_the_cpu_they_used_and_only_the_clusters_faults_are_free() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 100_000);
    let mut g = app.lock();
    let mut settle = |estimate: f64, deadline: f64, report: libra_api::ExitReport| {
        let j = g.submit(&u, &req(estimate, deadline, 1000), now).unwrap();
        assert_eq!(j.state, JobState::Pending, "{j:?}");
        let report = libra_api::ExitReport { job: j.id, ..report };
        g.sync(&sync("n1", vec![], vec![report]), now + 100.0).unwrap();
        let done = crate::store::job(&g.db, j.id).unwrap().unwrap();
        (j.cost, done)
    };
    // Overran a 2 s estimate (used 12) and ended after its 20 s deadline: today's trial charged
    // 0.00; it pays for the 12 CPU-seconds at the quoted rate.
    let (quoted, d) = settle(2.0, 20.0, exit(0, 12.0, now, now + 25.0));
    assert_eq!(d.state, JobState::Deadline);
    assert_eq!(d.charged, Money((quoted.0 as f64 * 6.0).floor() as i64), "{d:?}");
    assert!(!d.settlement.as_deref().unwrap().starts_with("free"), "{d:?}");
    // Exited non-zero after working: pays for what it used.
    let (quoted, d) = settle(10.0, 100.0, failed(0, 3, 6.0, now, now + 8.0));
    assert_eq!((d.state, d.charged), (JobState::Failed, Money((quoted.0 as f64 * 0.6).floor() as i64)));
    // Ended early: pays for what it used, not the whole quote.
    let (quoted, d) = settle(10.0, 100.0, exit(0, 5.0, now, now + 6.0));
    assert_eq!((d.state, d.charged), (JobState::Completed, Money(quoted.0 / 2)));
    // Late within its estimate: the cluster broke its promise, so it is free and says so.
    let (_, d) = settle(10.0, 20.0, exit(0, 9.5, now, now + 30.0));
    assert_eq!((d.state, d.charged), (JobState::Deadline, Money::ZERO));
    assert!(d.settlement.as_deref().unwrap().starts_with("free"), "{d:?}");
    // The ledger agrees with every settlement: nothing left on hold.
    let b = ledger::balance(&g.db, u.id).unwrap();
    assert_eq!(b.held, Money::ZERO);
    assert_eq!(b.deposited, b.available + b.charged);
}

#[test]
fn an_overrunning_job_raises_its_hold_and_is_stopped_when_its_budget_is_used_up() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 100_000);
    let mut g = app.lock();
    // Budget 3x the quote (Libra+$ prices 10 CPU-s at about 10 credits).
    let j = g.submit(&u, &req(10.0, 1000.0, 30), now).unwrap();
    assert_eq!(j.state, JobState::Pending);
    let rate = j.cost.0 as f64 / 10.0;
    g.sync(&sync("n1", vec![running(j.id, 15.0, now)], vec![]), now + 20.0).unwrap();
    let held = ledger::open_hold(&g.db, j.id).unwrap().unwrap().1;
    assert!(held.0 as f64 >= rate * 15.0, "held {held} for 15 CPU-s at {rate} cents/s");
    assert!(held <= j.budget);
    // Past the budget's worth of CPU: settled, charged the budget, and the node told to stop it.
    let cpu = j.budget.0 as f64 / rate + 1.0;
    let resp = g.sync(&sync("n1", vec![running(j.id, cpu, now)], vec![]), now + 40.0).unwrap();
    assert!(resp.kill.contains(&j.id), "{resp:?}");
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((d.state, d.charged), (JobState::Failed, j.budget), "{d:?}");
    assert!(d.reason.as_deref().unwrap().starts_with("budget exhausted"), "{d:?}");
    assert_eq!(ledger::balance(&g.db, u.id).unwrap().held, Money::ZERO);
}

#[test]
fn an_overrun_the_owners_credit_cannot_cover_stops_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 12);
    let mut g = app.lock();
    let j = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    assert_eq!(j.state, JobState::Pending, "{j:?}");
    let resp = g.sync(&sync("n1", vec![running(j.id, 40.0, now)], vec![]), now + 50.0).unwrap();
    assert!(resp.kill.contains(&j.id));
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert!(d.reason.as_deref().unwrap().contains("credit"), "{d:?}");
    // It pays what it used as far as the owner's credit goes, and no balance goes below zero.
    let b = ledger::balance(&g.db, u.id).unwrap();
    assert_eq!(
        (b.available, b.held, b.charged),
        (Money::ZERO, Money::ZERO, Money::from_credits(12)),
        "{b:?}"
    );
    assert_eq!(d.charged, Money::from_credits(12));
}

/// A job charged to a shared account overruns: its hold grows from the account within the
/// member's limit, and past the limit it is stopped and pays what the limit covers; the owner's
/// own credit is never touched.
#[test]
fn an_overrun_past_the_members_limit_in_an_account_stops_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 1000);
    let mut g = app.lock();
    let p = crate::projects::create(&g.db, "physics", now).unwrap();
    crate::projects::add_user(&g.db, "physics", "u", Some(Money::from_credits(12)), false, now).unwrap();
    crate::projects::deposit(&g.db, "physics", Money::from_credits(500), u.id, now).unwrap();
    let j = g
        .submit(
            &u,
            &libra_api::SubmitRequest { account: Some(p.name.clone()), ..req(10.0, 1000.0, 1000) },
            now,
        )
        .unwrap();
    assert_eq!((j.state, j.account.as_deref()), (JobState::Pending, Some("physics")), "{j:?}");
    let resp = g.sync(&sync("n1", vec![running(j.id, 40.0, now)], vec![]), now + 50.0).unwrap();
    assert!(resp.kill.contains(&j.id), "{resp:?}");
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert!(d.reason.as_deref().unwrap().contains("limit: u may have at most 12.00"), "{d:?}");
    assert_eq!(d.charged, Money::from_credits(12));
    let pid = crate::projects::project_id(&g.db, "physics").unwrap().unwrap();
    let a = crate::projects::info(&g.db, crate::projects::Acct::Project(pid), now + 60.0).unwrap();
    assert_eq!(
        (a.held, a.charged, a.available),
        (Money::ZERO, Money::from_credits(12), Money::from_credits(488))
    );
    let b = ledger::balance(&g.db, u.id).unwrap();
    assert_eq!((b.available, b.charged), (Money::from_credits(1000), Money::ZERO));
}

/// Near the end of its estimate a job's hold is topped up ahead of what it owes; when no credit
/// is left for that margin, the job runs on while its hold covers what it owes (it was stopped
/// at 90% of its estimate, charged for work it could not finish), and is stopped only once it
/// owes more than is held.
#[test]
fn a_job_within_its_hold_runs_on_when_no_credit_is_left_for_the_margin() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 1000);
    let mut g = app.lock();
    let j = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    assert_eq!(j.state, JobState::Pending, "{j:?}");
    // Every credit left withdrawn: the hold is all there is.
    let left = ledger::balance(&g.db, u.id).unwrap().available;
    ledger::deposit(&g.db, u.id, Money(-left.0), now).unwrap();
    let resp = g.sync(&sync("n1", vec![running(j.id, 9.5, now)], vec![]), now + 10.0).unwrap();
    assert!(!resp.kill.contains(&j.id), "stopped within its hold: {resp:?}");
    assert!(crate::store::job(&g.db, j.id).unwrap().unwrap().state.is_active());
    // Owing more than is held: stopped.
    let resp = g.sync(&sync("n1", vec![running(j.id, 12.0, now)], vec![]), now + 13.0).unwrap();
    assert!(resp.kill.contains(&j.id), "{resp:?}");
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((d.state, d.charged), (JobState::Failed, j.cost), "{d:?}");
    assert!(d.reason.as_deref().unwrap().contains("credit"), "{d:?}");
}

/// A settled job's part counts as running on its node (`parts_running`) until the node says it
/// has stopped it, or shows it no longer has it, or is lost itself: never for ever.
#[test]
fn a_settled_jobs_part_stops_counting_as_running_when_its_node_no_longer_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 100_000);
    let mut g = app.lock();
    let parts = |g: &crate::app::Inner, id: u64| crate::store::job(&g.db, id).unwrap().unwrap().parts_running;
    let a = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    let b = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    assert_eq!(parts(&g, a.id), 0, "not started yet");
    g.sync(&sync("n1", vec![running(a.id, 1.0, now), running(b.id, 1.0, now)], vec![]), now + 1.0).unwrap();
    assert_eq!((parts(&g, a.id), parts(&g, b.id)), (1, 1));
    g.cancel(&u, a.id, now + 2.0).unwrap();
    g.cancel(&u, b.id, now + 2.0).unwrap();
    // A report that has b still running and no word of a (its agent restarted without it).
    let resp = g.sync(&sync("n1", vec![running(b.id, 2.0, now)], vec![]), now + 3.0).unwrap();
    assert!(resp.kill.contains(&b.id), "{resp:?}");
    assert_eq!((parts(&g, a.id), parts(&g, b.id)), (0, 1));
    // The node lost before it reports b stopped.
    g.check_nodes(now + 10_000.0).unwrap();
    assert_eq!(parts(&g, b.id), 0);
}

/// A cancel settles at once on the CPU of the node's last report; the job runs until the node's
/// next exchange kills it, and what it used meanwhile (in the kill's running report and in its
/// exit) is charged then: at the quoted rate, once, within the budget and the owner's credit,
/// and never for a job the cluster let off.
#[test]
fn cpu_used_between_a_cancel_and_the_kill_is_charged_when_the_node_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 100_000);
    let mut g = app.lock();
    let j = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    let rate = j.cost.0 as f64 / 10.0;
    let owed = |cpu: f64| Money((rate * cpu).floor() as i64);
    g.sync(&sync("n1", vec![running(j.id, 4.0, now)], vec![]), now + 5.0).unwrap();
    let c = g.cancel(&u, j.id, now + 6.0).unwrap();
    assert_eq!((c.state, c.charged), (JobState::Cancelled, owed(4.0)), "{c:?}");
    // Its part runs on its node until the kill: the charge is not final yet.
    assert_eq!(c.parts_running, 1, "{c:?}");
    // The node's next report still has it running, with more CPU: it is told to kill it, and
    // the CPU is billed.
    let resp = g.sync(&sync("n1", vec![running(j.id, 5.0, now)], vec![]), now + 7.0).unwrap();
    assert!(resp.kill.contains(&j.id), "{resp:?}");
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((d.charged, d.parts_running), (owed(5.0), 1));
    // Its exit, with the CPU read at the kill, and the same exit sent again.
    let mut e = exit(j.id, 5.5, now, now + 7.5);
    e.signal = Some(9);
    for _ in 0..2 {
        let resp = g.sync(&sync("n1", vec![], vec![e.clone()]), now + 8.0).unwrap();
        assert!(resp.ack.contains(&j.id));
    }
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((d.state, d.charged, d.cpu_seconds), (JobState::Cancelled, owed(5.5), 5.5), "{d:?}");
    assert_eq!(d.parts_running, 0, "its node reported it stopped: {d:?}");
    let note = d.settlement.unwrap();
    assert!(note.starts_with("cancelled; charged for 4.0 of 10.0 CPU-s used"), "{note}");
    assert!(
        note.ends_with(&format!("reported 5.5 CPU-s in all at its end: {} charged", owed(5.5))),
        "{note}"
    );
    let b = ledger::balance(&g.db, u.id).unwrap();
    assert_eq!((b.held, b.charged, b.deposited), (Money::ZERO, owed(5.5), b.available + owed(5.5)), "{b:?}");
    // A node out of reach while the job ran on against its owner's cancel reports far more:
    // what it used after the settlement is billed up to CPU_AFTER_SETTLING_PER_PART (the
    // cluster's fault past that), at the overrun rate past the estimate.
    let e = exit(j.id, 10_000.0, now, now + 9.0);
    g.sync(&sync("n1", vec![], vec![e]), now + 9.0).unwrap();
    let capped = 4.0 + crate::settle::CPU_AFTER_SETTLING_PER_PART;
    let d = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((d.charged, d.cpu_seconds), (owed(capped), 10_000.0), "{d:?}");
    assert!(d.settlement.unwrap().contains("billed up to 10 CPU-s a node"));
    assert_eq!(ledger::balance(&g.db, u.id).unwrap().charged, owed(capped));

    // An administrator's cancel is free, and stays free whatever the node reports later.
    let k = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    g.sync(&sync("n1", vec![running(k.id, 2.0, now)], vec![]), now + 10.0).unwrap();
    let admin = crate::auth::Caller { admin: true, name: "root".into(), ..u.clone() };
    assert_eq!(g.cancel(&admin, k.id, now + 11.0).unwrap().charged, Money::ZERO);
    g.sync(&sync("n1", vec![], vec![exit(k.id, 3.0, now, now + 12.0)]), now + 12.0).unwrap();
    assert_eq!(crate::store::job(&g.db, k.id).unwrap().unwrap().charged, Money::ZERO);

    // With no credit left, the late CPU is charged as far as the credit goes and the note says so.
    let m = g.submit(&u, &req(10.0, 1000.0, 1000), now).unwrap();
    g.sync(&sync("n1", vec![running(m.id, 1.0, now)], vec![]), now + 13.0).unwrap();
    g.cancel(&u, m.id, now + 14.0).unwrap();
    let left = ledger::balance(&g.db, u.id).unwrap().available;
    ledger::deposit(&g.db, u.id, Money(-(left.0 - 1)), now).unwrap();
    g.sync(&sync("n1", vec![], vec![exit(m.id, 3.0, now, now + 15.0)]), now + 15.0).unwrap();
    let d = crate::store::job(&g.db, m.id).unwrap().unwrap();
    assert_eq!(d.charged, owed(1.0) + Money(1), "{d:?}");
    assert!(d.settlement.unwrap().contains("capped at what the owner's credit or account allowed"));
    assert_eq!(ledger::balance(&g.db, u.id).unwrap().available, Money::ZERO);

    // A job charged to a shared account: the later CPU comes from the account, within the
    // member's limit, and the owner's own credit is not touched.
    let p = crate::projects::create(&g.db, "physics", now).unwrap();
    let lim = Money::from_credits(50);
    crate::projects::add_user(&g.db, "physics", "u", Some(lim), false, now).unwrap();
    crate::projects::deposit(&g.db, "physics", Money::from_credits(500), u.id, now).unwrap();
    let on = |r| libra_api::SubmitRequest { account: Some(p.name.clone()), ..r };
    let q = g.submit(&u, &on(req(10.0, 1000.0, 1000)), now).unwrap();
    let qrate = q.cost.0 as f64 / 10.0;
    g.sync(&sync("n1", vec![running(q.id, 2.0, now)], vec![]), now + 16.0).unwrap();
    g.cancel(&u, q.id, now + 17.0).unwrap();
    let mine = ledger::balance(&g.db, u.id).unwrap();
    let resp = g.sync(&sync("n1", vec![], vec![exit(q.id, 9.0, now, now + 18.0)]), now + 18.0).unwrap();
    assert!(resp.ack.contains(&q.id));
    let d = crate::store::job(&g.db, q.id).unwrap().unwrap();
    assert_eq!(d.charged, Money(((qrate * 9.0).floor() as i64).min(lim.0)), "{d:?}");
    let pid = crate::projects::project_id(&g.db, "physics").unwrap().unwrap();
    let a = crate::projects::info(&g.db, crate::projects::Acct::Project(pid), now + 19.0).unwrap();
    assert_eq!((a.held, a.charged), (Money::ZERO, d.charged), "{a:?}");
    let after = ledger::balance(&g.db, u.id).unwrap();
    assert_eq!(
        (after.available, after.charged),
        (mine.available, mine.charged),
        "the owner's own credit paid"
    );
}

#[test]
fn an_exit_is_recorded_only_with_its_settlement() {
    // A failure while settling (a full disk, here a trigger) must not leave the exit recorded and
    // the job unsettled: the whole report is refused, the node reports again, and then it settles.
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 1000);
    let mut g = app.lock();
    let j = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
    g.db.execute_batch(
        "CREATE TRIGGER no_charges BEFORE INSERT ON ledger WHEN NEW.kind IN ('charge','release') \
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .unwrap();
    assert!(g.sync(&sync("n1", vec![], vec![exit(j.id, 10.0, now, now + 10.0)]), now + 11.0).is_err());
    let mid = crate::store::job(&g.db, j.id).unwrap().unwrap();
    let open: i64 = g
        .db
        .query_row("SELECT COUNT(*) FROM job_nodes WHERE job = ?1 AND done = 0", [j.id as i64], |r| r.get(0))
        .unwrap();
    assert_eq!((mid.state, open), (JobState::Pending, 1), "the exit was kept without its settlement");
    g.db.execute_batch("DROP TRIGGER no_charges").unwrap();
    let resp = g.sync(&sync("n1", vec![], vec![exit(j.id, 10.0, now, now + 10.0)]), now + 12.0).unwrap();
    assert!(resp.ack.contains(&j.id));
    let done = crate::store::job(&g.db, j.id).unwrap().unwrap();
    assert_eq!((done.state, done.charged), (JobState::Completed, j.cost));
}

#[test]
fn jobs_an_earlier_version_left_ended_and_unsettled_are_settled_on_start() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let (a, b, uid);
    {
        let app = app(dir.path());
        node(&app, "n1", 0, now);
        let u = user(&app, "u", 1000);
        uid = u.id;
        let mut g = app.lock();
        a = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
        b = g.submit(&u, &req(10.0, 20.0, 100), now).unwrap();
        // What a crash between the old two transactions left: the exit recorded, no settlement.
        g.db.execute(
            "UPDATE job_nodes SET seen = 1, done = 1, exit_code = 0, cpu_seconds = 10, end_time = ?2 WHERE job = ?1",
            rusqlite::params![a.id as i64, now + 10.0],
        )
        .unwrap();
        g.db.execute(
            "UPDATE jobs SET state = 'RUNNING', cpu_seconds = 10, start_time = ?2 WHERE id = ?1",
            rusqlite::params![a.id as i64, now],
        )
        .unwrap();
    }
    // Restarted well after b's deadline, which no node ever started.
    let mut cfg =
        crate::Config { db: dir.path().join("t.db"), join_token: "join-token".into(), ..Default::default() };
    cfg.sync_full = false;
    let app = App::open(cfg).unwrap();
    let g = app.lock();
    let ja = crate::store::job(&g.db, a.id).unwrap().unwrap();
    assert_eq!((ja.state, ja.charged), (JobState::Completed, a.cost));
    drop(g);
    let mut g = app.lock();
    g.settle_stranded(now + 50.0, Some(now + 50.0)).unwrap();
    let jb = crate::store::job(&g.db, b.id).unwrap().unwrap();
    assert_eq!((jb.state, jb.charged), (JobState::Deadline, Money::ZERO), "{jb:?}");
    assert_eq!(ledger::balance(&g.db, uid).unwrap().held, Money::ZERO);
    assert_eq!(g.cluster.job_count(), 0);
}

#[test]
fn a_retried_submission_gets_the_job_the_first_one_made() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 1000);
    let mut g = app.lock();
    let r = req(10.0, 100.0, 100);
    let first = g.submit_batch(&[(&u, &r, Some("k1"))], now).pop().unwrap().unwrap();
    let again = g.submit_batch(&[(&u, &r, Some("k1")), (&u, &r, Some("k1"))], now + 1.0);
    for a in again {
        assert_eq!(a.unwrap().id, first.id);
    }
    let other = g.submit_batch(&[(&u, &r, Some("k2"))], now).pop().unwrap().unwrap();
    assert_ne!(other.id, first.id);
    let holds: i64 =
        g.db.query_row("SELECT COUNT(*) FROM ledger WHERE kind = 'hold'", [], |r| r.get(0)).unwrap();
    assert_eq!(holds, 2);
    // Keys are per user: another user's same key is another job.
    drop(g);
    let v = user(&app, "v", 1000);
    let mut g = app.lock();
    assert_ne!(g.submit_batch(&[(&v, &r, Some("k1"))], now).pop().unwrap().unwrap().id, first.id);
}

#[test]
fn a_nodes_memory_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let mem_job = |mb: u64| {
        let mut r = req(1.0, 100.0, 10);
        r.spec.resources.mem_mb = mb;
        r
    };
    {
        let app = app(dir.path());
        node(&app, "unstated", 0, now);
        node(&app, "small", 1024, now);
        let u = user(&app, "u", 1000);
        let mut g = app.lock();
        assert_eq!(g.submit(&u, &mem_job(512), now).unwrap().state, JobState::Pending);
    }
    let app = app(dir.path());
    let g = app.lock();
    let specs: Vec<_> = (0..2).map(|i| g.cluster.node(i).spec.clone()).collect();
    drop(g);
    let u =
        crate::auth::Caller { id: 1, name: "u".into(), admin: false, sweep: None, expires: f64::INFINITY };
    let mut g = app.lock();
    for s in &specs {
        match s.name.as_str() {
            "small" => assert_eq!(s.mem_mb, 1024),
            _ => assert!(s.mem_mb > 1 << 40, "unstated memory came back as {} MB", s.mem_mb),
        }
        assert_eq!((s.cpus, s.price_base), (1.0, 1.0));
    }
    // Every --mem job was refused after a restart when unstated memory came back as 0 MB.
    let j = g.submit(&u, &mem_job(4096), now + 1.0).unwrap();
    assert_eq!(j.state, JobState::Pending, "{j:?}");
    assert_eq!(j.nodes, vec!["unstated".to_string()]);
}

#[test]
fn output_is_kept_per_node_once_whatever_is_sent_twice() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    let u = user(&app, "u", 1000);
    let mut g = app.lock();
    let j = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
    let with = |chunks: Vec<OutputChunk>| RunningReport { output: chunks, ..running(j.id, 1.0, now) };
    let c = |off: u64, s: &str| OutputChunk::new(Stream::Stdout, off, s.as_bytes());
    let r = g.sync(&sync("n1", vec![with(vec![c(0, "hello ")])], vec![]), now + 1.0).unwrap();
    assert_eq!((r.output_acks[0].job, r.output_acks[0].stdout), (j.id, 6));
    // The same chunk again (a lost answer) and then the next one.
    g.sync(&sync("n1", vec![with(vec![c(0, "hello ")])], vec![]), now + 2.0).unwrap();
    g.sync(&sync("n1", vec![with(vec![c(6, "world")])], vec![]), now + 3.0).unwrap();
    let o = crate::store::output(&g.db, j.id, JobState::Running, None, 0, 0).unwrap();
    assert_eq!((o.stdout.as_str(), o.truncated), ("hello world", false));
    // A follower asks from where it is.
    let o = crate::store::output(&g.db, j.id, JobState::Running, Some(0), 6, 0).unwrap();
    assert_eq!(
        (o.parts[0].stdout.as_str(), o.parts[0].stdout_start, o.parts[0].stdout_end),
        ("world", 6, 11)
    );
    // A chunk past the end (output the node skipped): kept, marked truncated.
    let mut last = exit(j.id, 2.0, now, now + 5.0);
    last.output = vec![c(100, "!")];
    g.sync(&sync("n1", vec![], vec![last]), now + 6.0).unwrap();
    let o = crate::store::output(&g.db, j.id, JobState::Completed, None, 0, 0).unwrap();
    assert_eq!((o.stdout.as_str(), o.truncated), ("!", true));
}

/// The tick's two sweeps read kept state (each job's count of open parts, kept by triggers)
/// through partial indexes instead of scanning every active job. After every kind of change
/// (admitted on one node and on two, held and released, cancelled, one part and then every
/// part exited, parts an earlier version closed without a settlement, never started, lost with
/// its node) the kept counts equal the parts counted one by one, and both sweeps return what
/// the full scans they replaced return, in the same order.
#[test]
fn the_ticks_sweeps_find_what_the_full_scans_found_after_every_change() {
    use crate::store::endings::{ended_unsettled, unstarted_by, ENDED_UNSETTLED, UNSTARTED_BY};
    let dir = tempfile::tempdir().unwrap();
    let now = 1000.0;
    let app = app(dir.path());
    node(&app, "n1", 0, now);
    node(&app, "n2", 0, now);
    let u = user(&app, "u", 10_000);
    let mut g = app.lock();
    // Rows of column `col` of `sql`, its one parameter (if it has one) bound to `t`.
    fn rows<T: rusqlite::types::FromSql>(db: &rusqlite::Connection, sql: &str, t: f64, col: usize) -> Vec<T> {
        let mut st = db.prepare(sql).unwrap();
        if st.parameter_count() == 1 {
            st.raw_bind_parameter(1, t).unwrap();
        }
        let mut rows = st.raw_query();
        let mut out = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            out.push(r.get(col).unwrap());
        }
        out
    }
    let scan = |db: &rusqlite::Connection, sql: &str, t: f64| -> Vec<u64> {
        rows::<i64>(db, sql, t, 0).into_iter().map(|v| v as u64).collect()
    };
    let agree = |g: &crate::app::Inner| {
        assert_eq!(crate::store::jobs::open_parts_disagreeing(&g.db).unwrap(), vec![]);
        // The full scans as they were, with the order SQLite read them in (the state index).
        let ended = scan(
            &g.db,
            "SELECT j.id FROM jobs j WHERE j.state IN ('PENDING','RUNNING','SUSPENDED') \
             AND EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id) \
             AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.job = j.id AND n.done = 0) \
             ORDER BY j.state, j.id",
            0.0,
        );
        assert_eq!(ended_unsettled(&g.db).unwrap(), ended);
        for t in [f64::NEG_INFINITY, now, now + 5.0, now + 5.5, now + 50.0, now + 1e9, f64::INFINITY] {
            let unstarted = scan(
                &g.db,
                "SELECT id FROM jobs WHERE state IN ('PENDING','SUSPENDED','HELD') \
                 AND start_time IS NULL AND deadline_at < ?1 ORDER BY state, id",
                t,
            );
            assert_eq!(unstarted_by(&g.db, t).unwrap(), unstarted, "at {t}");
        }
    };
    let open = |g: &crate::app::Inner, job: u64| -> Option<i64> {
        g.db.query_row("SELECT open_parts FROM jobs WHERE id = ?1", [job as i64], |r| r.get(0)).unwrap()
    };
    agree(&g);
    let a = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
    let mut two = req(10.0, 100.0, 100);
    two.spec.resources.procs = 2;
    let b = g.submit(&u, &two, now).unwrap();
    let c = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
    let d = g.submit(&u, &req(10.0, 100.0, 100), now).unwrap();
    let f = g.submit(&u, &req(1.0, 5.0, 100), now).unwrap();
    let refused = g.submit(&u, &req(95.0, 100.0, 100), now).unwrap();
    assert_eq!(refused.state, JobState::Rejected);
    assert_eq!((open(&g, a.id), open(&g, b.id), open(&g, refused.id)), (Some(1), Some(2), None));
    agree(&g);
    g.hold(&u, c.id, now + 1.0).unwrap();
    assert_eq!(open(&g, c.id), None, "a held job has no parts");
    agree(&g);
    g.release(&u, c.id, now + 2.0).unwrap();
    assert_eq!(open(&g, c.id), Some(1));
    agree(&g);
    g.cancel(&u, d.id, now + 3.0).unwrap();
    assert_eq!(open(&g, d.id), Some(0));
    agree(&g);
    // The nodes start what they are given; a ends, then one part of b, then the other.
    g.sync(&sync("n1", vec![], vec![]), now + 4.0).unwrap();
    g.sync(&sync("n2", vec![], vec![]), now + 4.0).unwrap();
    g.sync(&sync("n1", vec![], vec![exit(a.id, 10.0, now + 4.0, now + 14.0)]), now + 15.0).unwrap();
    assert_eq!(crate::store::job(&g.db, a.id).unwrap().unwrap().state, JobState::Completed);
    agree(&g);
    g.sync(&sync("n1", vec![], vec![exit(b.id, 10.0, now + 4.0, now + 14.0)]), now + 15.0).unwrap();
    assert_eq!(open(&g, b.id), Some(1), "one part of two ended");
    agree(&g);
    g.sync(&sync("n2", vec![], vec![exit(b.id, 10.0, now + 4.0, now + 14.0)]), now + 15.0).unwrap();
    assert_eq!(crate::store::job(&g.db, b.id).unwrap().unwrap().state, JobState::Completed);
    agree(&g);
    // What an earlier version could leave: every part of e ended, e not settled. The sweeps
    // find e and f (due at now + 5, never started), and the tick settles both.
    let e = g.submit(&u, &req(10.0, 100.0, 100), now + 16.0).unwrap();
    g.db.execute(
        "UPDATE job_nodes SET seen = 1, done = 1, end_time = ?2 WHERE job = ?1",
        rusqlite::params![e.id as i64, now + 17.0],
    )
    .unwrap();
    assert_eq!(ended_unsettled(&g.db).unwrap(), vec![e.id]);
    assert_eq!(unstarted_by(&g.db, now + 20.0).unwrap(), vec![f.id], "e is due later");
    agree(&g);
    g.settle_stranded(now + 20.0, Some(now + 20.0)).unwrap();
    assert_eq!(ended_unsettled(&g.db).unwrap(), Vec::<u64>::new());
    assert_eq!(unstarted_by(&g.db, f64::INFINITY).unwrap(), vec![c.id], "c waits for its node");
    assert_eq!(crate::store::job(&g.db, f.id).unwrap().unwrap().state, JobState::Deadline);
    agree(&g);
    // Lost with its nodes.
    g.check_nodes(now + 1e6).unwrap();
    assert!(!crate::store::job(&g.db, c.id).unwrap().unwrap().state.is_active());
    agree(&g);
    // The sweeps read their partial indexes, not every active job.
    for (sql, index) in [(ENDED_UNSETTLED, "jobs_parts_ended"), (UNSTARTED_BY, "jobs_unstarted")] {
        let plan: Vec<String> = rows(&g.db, &format!("EXPLAIN QUERY PLAN {sql}"), now, 3);
        assert!(plan.iter().any(|p| p.contains(&format!("INDEX {index} "))), "{sql}: {plan:?}");
    }
}
