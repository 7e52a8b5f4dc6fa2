//! Hosted sweeps through the HTTP API of a real server on loopback: a sweep over test queues
//! runs to completion in the server's engine thread, its budget and deadline are steered (a
//! sweep stalled by its budget runs again when the budget grows), another user gets 403, a
//! non-administrator's `local` resource gets 403, and a typo in the plan is a 400 naming its
//! line and column. A backup carries the hosted sweeps and a restore resumes them.

mod common;

use libra_api::{Client, SweepCreate, SweepDeadline, SweepInfo, UserAdd};
use libra_core::Money;
use libra_server::{start_background, Config};
use std::time::{Duration, Instant};

const PLAN: &str = "parameter x integer range from 1 to 20 step 1\ntask main\n    exec true\nendtask\n";

/// Two test queues of 50 ms jobs (1 s at time scale 0.05), one cheap and one dear.
const RES: &str = r#"
[[resource]]
name = "cheap"
kind = "testqueue"
slots = 2
price = 10
wall = 1
time_scale = 0.05

[[resource]]
name = "dear"
kind = "testqueue"
slots = 2
price = 30
wall = 1
time_scale = 0.05
"#;

fn sweep(plan: &str, res: &str, budget: i64) -> SweepCreate {
    SweepCreate {
        plan: plan.into(),
        resources: res.into(),
        name: Some("t".into()),
        deadline: None,
        deadline_in: Some(120.0),
        budget: Money::from_credits(budget),
        optimise: Some("cost".into()),
        max_retries: None,
        estimate: None,
        seed: 0,
    }
}

fn wait(c: &Client, id: i64, what: &str, f: impl Fn(&SweepInfo) -> bool) -> SweepInfo {
    let t0 = Instant::now();
    loop {
        let s = c.sweep(id).unwrap();
        if f(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}: {s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status(e: libra_api::ClientError) -> (u16, String) {
    (e.status().unwrap_or(0), e.to_string())
}

#[test]
fn hosted_sweeps_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_background(Config {
        sweep_clusters: vec!["http://localhost:9".into()],
        ..common::test_config(dir.path())
    })
    .unwrap();
    let url = format!("http://{}", server.addr);
    let anon = Client::new(&url, None);
    let admin = Client::new(&url, Some(anon.login("admin", "admin-pw").unwrap().token));
    for u in ["alice", "bob"] {
        admin.user_add(&UserAdd::new(u, &format!("pw-{u}"), false)).unwrap();
    }
    let alice = Client::new(&url, Some(anon.login("alice", "pw-alice").unwrap().token));
    let bob = Client::new(&url, Some(anon.login("bob", "pw-bob").unwrap().token));

    // A sweep runs to completion in the server, within its budget, on the cheap queue first.
    let s = alice.sweep_create(&sweep(PLAN, RES, 1000)).unwrap();
    assert_eq!((s.owner.as_str(), s.jobs.total), ("alice", 20), "{s:?}");
    let done = wait(&alice, s.id, "the sweep to finish", |s| s.state == "done");
    assert_eq!(done.jobs.done, 20, "{done:?}");
    assert!(done.spent <= done.budget && done.spent > Money::ZERO, "{done:?}");
    assert_eq!(done.held, Money::ZERO);
    let usage = alice.sweep_usage(s.id).unwrap();
    assert_eq!(usage.resources, vec!["cheap", "dear"]);
    assert!(usage.points.iter().any(|p| p.running[0] > 0), "{usage:?}");
    assert_eq!(usage.points.last().unwrap().running, vec![0, 0], "jobs still in execution at the end");
    let results = alice.sweep_results(s.id).unwrap();
    assert_eq!(results.len(), 20);
    assert!(results.iter().all(|j| j.state == "done" && j.attempts == 1), "{results:?}");

    // Steering: a budget of nothing stalls the sweep; a budget raised from the API runs it.
    let s = alice.sweep_create(&sweep(PLAN, RES, 0)).unwrap();
    let stalled = wait(&alice, s.id, "the sweep to stall", |s| s.state == "stalled");
    assert_eq!(stalled.jobs.done, 0);
    let deadline = stalled.now + 3600.0;
    let moved = alice
        .sweep_set_deadline(s.id, &SweepDeadline { deadline: Some(deadline), deadline_in: None })
        .unwrap();
    assert_eq!(moved.deadline, deadline);
    let raised = alice.sweep_set_budget(s.id, Money::from_credits(1000)).unwrap();
    assert_eq!(raised.budget, Money::from_credits(1000));
    let done = wait(&alice, s.id, "the steered sweep to finish", |s| s.state == "done");
    assert_eq!(done.jobs.done, 20);
    // A finished sweep cannot be paused.
    assert_eq!(alice.sweep_action(s.id, "pause").unwrap_err().status(), Some(409));

    // Another user sees nothing of it and cannot steer it; an administrator can.
    let (code, msg) = status(bob.sweep(s.id).unwrap_err());
    assert!(code == 403 && msg.contains("another user"), "{code} {msg}");
    let (code, _) = status(bob.sweep_set_budget(s.id, Money::from_credits(1)).unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(bob.sweep_usage(s.id).unwrap_err().status(), Some(403));
    assert!(bob.sweeps(false).unwrap().is_empty());
    assert_eq!(bob.sweeps(true).unwrap_err().status(), Some(403));
    assert_eq!(admin.sweep(s.id).unwrap().owner, "alice");
    assert_eq!(admin.sweeps(true).unwrap().len(), 2);
    assert_eq!(alice.sweeps(false).unwrap().len(), 2);
    assert_eq!(alice.sweep(9999).unwrap_err().status(), Some(404));

    // A local resource runs commands as the server's user: administrators only.
    let local = "[[resource]]\nname = \"here\"\nkind = \"local\"\nslots = 1\n";
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, local, 10)).unwrap_err());
    assert!(code == 403 && msg.contains("local") && msg.contains("administrator"), "{code} {msg}");
    // So does a slurm resource (its batch jobs run as the server's user).
    let slurm = "[[resource]]\nname = \"hpc\"\nkind = \"slurm\"\nslots = 1\n";
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, slurm, 10)).unwrap_err());
    assert!(code == 403 && msg.contains("kind slurm") && msg.contains("administrator"), "{code} {msg}");
    let mine = admin.sweep_create(&sweep(PLAN, local, 10)).unwrap();
    admin.sweep_action(mine.id, "cancel").unwrap();
    wait(&admin, mine.id, "the cancel", |s| s.state == "cancelled" && s.finished.is_some());

    // Bad input is a 400 naming what is wrong.
    let typo = "parameter x integer range from 1 to 20 step 1\ntsk main\n    exec true\nendtask\n";
    let (code, msg) = status(alice.sweep_create(&sweep(typo, RES, 10)).unwrap_err());
    assert!(code == 400 && msg.contains("line 2, column 1"), "{code} {msg}");
    let (code, msg) =
        status(alice.sweep_create(&sweep(PLAN, &RES.replace("testqueue", "pbs"), 10)).unwrap_err());
    assert!(code == 400 && msg.contains("kind"), "{code} {msg}");
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, RES, -5)).unwrap_err());
    assert!(code == 400 && msg.starts_with("budget"), "{code} {msg}");
    // Past the largest budget a job may have: refused at creation and when steered.
    let absurd = libra_core::job::MAX_BUDGET_CREDITS + 1;
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, RES, absurd)).unwrap_err());
    assert!(code == 400 && msg.starts_with("budget") && msg.contains("at most"), "{code} {msg}");
    let (code, msg) = status(alice.sweep_set_budget(s.id, Money::from_credits(absurd)).unwrap_err());
    assert!(code == 400 && msg.starts_with("budget") && msg.contains("at most"), "{code} {msg}");
    let mut past = sweep(PLAN, RES, 10);
    past.deadline_in = None;
    past.deadline = Some(1.0);
    let (code, msg) = status(alice.sweep_create(&past).unwrap_err());
    assert!(code == 400 && msg.starts_with("deadline") && msg.contains("past"), "{code} {msg}");
    let mut alg = sweep(PLAN, RES, 10);
    alg.optimise = Some("cheapest".into());
    let (code, msg) = status(alice.sweep_create(&alg).unwrap_err());
    assert!(code == 400 && msg.starts_with("optimise"), "{code} {msg}");
    let libra = "[[resource]]\nname = \"c\"\nkind = \"libra\"\nurl = \"http://127.0.0.1:9\"\n";
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, libra, 10)).unwrap_err());
    assert!(code == 400 && msg.contains("token"), "{code} {msg}");
    assert_eq!(anon.sweeps(false).unwrap_err().status(), Some(401));
    // The server makes a libra resource's requests, so a user may aim it only at this server or
    // a cluster the configuration lists (here http://localhost:9).
    let at = |u: &str| format!("{libra}token = \"t\"\n").replace("http://127.0.0.1:9", u);
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, &at("http://127.0.0.1:10"), 10)).unwrap_err());
    assert!(code == 403 && msg.contains("sweep_clusters") && msg.contains("127.0.0.1:10"), "{code} {msg}");
    let (code, msg) =
        status(alice.sweep_create(&sweep(PLAN, &at("http://169.254.169.254/x"), 10)).unwrap_err());
    assert!(code == 403 && msg.contains("169.254.169.254:80"), "{code} {msg}");
    let (code, msg) = status(alice.sweep_create(&sweep(PLAN, &at("file:///etc/passwd"), 10)).unwrap_err());
    assert!((400..500).contains(&code) && msg.contains("url"), "{code} {msg}");
    for ok in ["http://LOCALHOST:9/", &url.replace("127.0.0.1", "localhost"), &url] {
        let s = alice.sweep_create(&sweep(PLAN, &at(ok), 0)).unwrap();
        alice.sweep_action(s.id, "cancel").unwrap();
        wait(&alice, s.id, "the cancel", |s| s.state == "cancelled" && s.finished.is_some());
    }

    // The API document lists the sweeps' routes.
    let doc: serde_json::Value = anon.get("/api/openapi.json").unwrap();
    for p in ["/api/sweeps", "/api/sweeps/{id}", "/api/sweeps/{id}/usage", "/api/sweeps/{id}/budget"] {
        assert!(doc["paths"][p].is_object(), "{p} is missing from the OpenAPI document");
    }
}

/// A server with its store in `dir`, its address, and clients of its administrator and of a
/// user alice.
fn server_with_alice(dir: &std::path::Path) -> (libra_server::Background, String, Client, Client) {
    server_with_alice_on(common::test_config(dir))
}

fn server_with_alice_on(config: Config) -> (libra_server::Background, String, Client, Client) {
    let server = start_background(config).unwrap();
    let url = format!("http://{}", server.addr);
    let anon = Client::new(&url, None);
    let admin = Client::new(&url, Some(anon.login("admin", "admin-pw").unwrap().token));
    admin.user_add(&UserAdd::new("alice", "pw-alice", false)).unwrap();
    let alice = Client::new(&url, Some(anon.login("alice", "pw-alice").unwrap().token));
    (server, url, admin, alice)
}

/// A backup carries the hosted sweeps' broker database, and a restore puts it back beside the
/// store: a server on the restored store lists every sweep with its owner, resumes a stalled
/// one that then finishes, and keeps a sweep's credential on this server bound to it. A broker
/// database that holds sweeps is replaced only with --overwrite, checked before the store is
/// written.
#[test]
fn a_backup_carries_the_hosted_sweeps_and_a_restore_resumes_them() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url, admin, alice) = server_with_alice(&dir.path().join("a"));
    let done = alice.sweep_create(&sweep(PLAN, RES, 1000)).unwrap();
    wait(&alice, done.id, "the first sweep to finish", |s| s.state == "done");
    let stalled = alice.sweep_create(&sweep(PLAN, RES, 0)).unwrap();
    wait(&alice, stalled.id, "the second sweep to stall", |s| s.state == "stalled");
    // A sweep on this server itself holds a credential the server minted, in the store.
    let own = format!("[[resource]]\nname = \"c\"\nkind = \"libra\"\nurl = \"{url}\"\ntoken = \"t\"\n");
    let on_server = alice.sweep_create(&sweep(PLAN, &own, 0)).unwrap();
    alice.sweep_action(on_server.id, "pause").unwrap();
    wait(&alice, on_server.id, "the third sweep to pause", |s| s.state == "paused");

    let (bytes, info) = admin.backup().unwrap();
    assert_eq!(info["sweeps"].as_u64(), Some(3), "{info}");
    let file = dir.path().join("backup.db");
    std::fs::write(&file, &bytes).unwrap();
    drop(server);

    let b = dir.path().join("b");
    let (db, broker) = (b.join("server.db"), b.join("sweeps").join("broker.db"));
    let r = libra_server::backup::restore(&file, &db, Some(&broker), false).unwrap();
    assert_eq!(r.sweeps, Some(3));
    // The store restored is the store, not the backup's carriage.
    let c = rusqlite::Connection::open(&db).unwrap();
    let tables: i64 = c
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'libra_backup_files'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 0);
    let bound: i64 =
        c.query_row("SELECT COUNT(*) FROM tokens WHERE sweep = ?1", [on_server.id], |r| r.get(0)).unwrap();
    assert_eq!(bound, 1, "the on-server sweep's credential is not in the restored store");
    drop(c);
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // Private from the start, as the server makes them: password hashes, ledger, credentials.
    assert_eq!((mode(&db), mode(&b)), (0o600, 0o700));
    assert_eq!((mode(&broker), mode(broker.parent().unwrap())), (0o600, 0o700));

    // Into a new store beside a broker database that holds sweeps: refused, and the store is
    // not written.
    let fresh = dir.path().join("c").join("server.db");
    let err = libra_server::backup::restore(&file, &fresh, Some(&broker), false).unwrap_err().to_string();
    assert!(err.contains("hosted sweeps' database") && err.contains("--overwrite"), "{err}");
    assert!(std::fs::metadata(&fresh).map_or(true, |m| m.len() == 0), "the store was written");
    // A backup that carries none leaves the broker database alone.
    let bare = dir.path().join("bare.db");
    libra_server::backup::backup_to(&db, &bare).unwrap();
    let r = libra_server::backup::restore(&bare, &fresh, Some(&broker), false).unwrap();
    assert_eq!(r.sweeps, None);

    let server = start_background(common::test_config(&b)).unwrap();
    let url = format!("http://{}", server.addr);
    let anon = Client::new(&url, None);
    let alice = Client::new(&url, Some(anon.login("alice", "pw-alice").unwrap().token));
    let mine = alice.sweeps(false).unwrap();
    let ids: Vec<i64> = mine.iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), 3, "{mine:?}");
    assert!(mine.iter().all(|s| s.owner == "alice"), "{mine:?}");
    assert_eq!(alice.sweep(done.id).unwrap().jobs.done, 20);
    assert_eq!(alice.sweep(on_server.id).unwrap().state, "paused");
    // The stalled sweep's engine was resumed: a budget raised now runs it to the end.
    alice.sweep_set_budget(stalled.id, Money::from_credits(1000)).unwrap();
    let finished = wait(&alice, stalled.id, "the restored sweep to finish", |s| s.state == "done");
    assert_eq!(finished.jobs.done, 20);
}

/// Backups taken while sweeps on this server are being created never hold one half made: in
/// each, every sweep has its owner, no credential is left "being created" (sweep 0), and every
/// sweep that may run has its credential in the store. (Without the backup keeping creations
/// out while it copies, a copy lands between the steps of a creation.)
#[test]
fn backups_taken_while_sweeps_are_created_hold_none_half_made() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    // Forty sweeps left paused: more than a user may have by default.
    let (server, url, admin, alice) =
        server_with_alice_on(Config { max_active_sweeps: 40, ..common::test_config(&dir.path().join("a")) });
    let own = format!("[[resource]]\nname = \"c\"\nkind = \"libra\"\nurl = \"{url}\"\ntoken = \"t\"\n");
    let stop = Arc::new(AtomicBool::new(false));
    let creator = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for _ in 0..40 {
                let s = alice.sweep_create(&sweep(PLAN, &own, 0)).unwrap();
                alice.sweep_action(s.id, "pause").unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let mut backups = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        backups.push(admin.backup().unwrap().0);
    }
    creator.join().unwrap();
    assert!(backups.len() >= 3, "only {} backups were taken during the creations", backups.len());
    let mut seen = 0;
    for (i, bytes) in backups.iter().enumerate() {
        let file = dir.path().join(format!("backup-{i}.db"));
        std::fs::write(&file, bytes).unwrap();
        let store = rusqlite::Connection::open(&file).unwrap();
        let half: i64 =
            store.query_row("SELECT COUNT(*) FROM tokens WHERE sweep = 0", [], |r| r.get(0)).unwrap();
        assert_eq!(half, 0, "backup {i} holds a credential of a sweep being created");
        let broker_bytes: Vec<u8> = store
            .query_row("SELECT bytes FROM libra_backup_files WHERE name = 'sweeps/broker.db'", [], |r| {
                r.get(0)
            })
            .unwrap();
        let broker_file = dir.path().join(format!("broker-{i}.db"));
        std::fs::write(&broker_file, broker_bytes).unwrap();
        let broker = rusqlite::Connection::open(&broker_file).unwrap();
        let ownerless: i64 = broker
            .query_row(
                "SELECT COUNT(*) FROM experiments WHERE id NOT IN (SELECT exp_id FROM hosted)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(ownerless, 0, "backup {i} holds a sweep without its owner");
        let active: Vec<i64> = broker
            .prepare("SELECT id FROM experiments WHERE state IN ('running', 'paused')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for id in active {
            let n: i64 =
                store.query_row("SELECT COUNT(*) FROM tokens WHERE sweep = ?1", [id], |r| r.get(0)).unwrap();
            assert_eq!(n, 1, "backup {i}: sweep {id} may run and its credential is not in the store");
            seen += 1;
        }
    }
    assert!(seen > 0, "no backup held a sweep that may run");
    drop(server);
}

/// A hosted sweep whose broker database's disk fills while it runs waits instead of losing its
/// engine: the API says why it makes no progress, and once space is freed the engine runs again
/// (recovering what it left in flight, as after a crash) and the sweep finishes, every job done
/// and paid within the budget.
#[test]
fn a_hosted_sweep_waits_out_a_full_disk_and_finishes() {
    let Some(disk) = libra_testkit::SmallDisk::mount(4) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (server, _, _, alice) = server_with_alice_on(Config {
        broker_db: Some(disk.dir.join("broker.db")),
        ..common::test_config(dir.path())
    });
    // Jobs of 0.2 s on four slots: about a second and a half of work, with a write at each
    // job's start and end.
    let slow = RES.replace("time_scale = 0.05", "time_scale = 0.2");
    let s = alice.sweep_create(&sweep(PLAN, &slow, 1000)).unwrap();
    wait(&alice, s.id, "the first jobs to run", |s| s.jobs.running > 0);
    let filler = disk.fill();
    let waiting = wait(&alice, s.id, "the engine to meet the full disk", |s| s.engine.is_some());
    let note = waiting.engine.clone().unwrap();
    assert!(note.contains("disk is full") && note.contains("goes on by itself"), "{note}");
    assert_eq!(waiting.state, "running", "{waiting:?}");
    std::fs::remove_file(filler).unwrap();
    let done = wait(&alice, s.id, "the sweep to finish once space is back", |s| s.state == "done");
    assert_eq!(done.engine, None, "{done:?}");
    assert_eq!((done.jobs.done, done.jobs.failed, done.jobs.total), (20, 0, 20), "{done:?}");
    assert!(done.spent <= done.budget && done.held == Money::ZERO, "{done:?}");
    let results = alice.sweep_results(s.id).unwrap();
    assert_eq!(results.len(), 20);
    drop(server);
}

/// One user cannot take the server's threads and disk with hosted sweeps (each not over has an
/// engine thread and may hold 100,000 jobs): past `max_active_sweeps` of theirs that are not
/// over, creating one is a 429 that says why, also when the creations come side by side; a
/// sweep that ends gives its place back, and another user is not held back.
#[test]
fn a_user_has_at_most_max_active_sweeps_not_over() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _, admin, alice) =
        server_with_alice_on(Config { max_active_sweeps: 3, ..common::test_config(dir.path()) });
    // Budget 0: each stalls at once, and a stalled sweep is not over (it runs again when its
    // budget grows).
    let stalling = sweep(PLAN, RES, 0);
    let tries: Vec<_> = (0..6)
        .map(|_| {
            let (alice, stalling) = (alice.clone(), stalling.clone());
            std::thread::spawn(move || alice.sweep_create(&stalling))
        })
        .collect();
    let (made, refused): (Vec<_>, Vec<_>) =
        tries.into_iter().map(|t| t.join().unwrap()).partition(|r| r.is_ok());
    assert_eq!((made.len(), refused.len()), (3, 3), "side by side, exactly the limit is made");
    for r in refused {
        let (code, msg) = status(r.unwrap_err());
        assert_eq!(code, 429, "{msg}");
        assert!(msg.contains("max_active_sweeps = 3") && msg.contains("alice"), "{msg}");
    }
    let made: Vec<SweepInfo> = made.into_iter().map(Result::unwrap).collect();
    for s in &made {
        wait(&alice, s.id, "the sweep to stall", |s| s.state == "stalled");
    }
    let (code, msg) = status(alice.sweep_create(&stalling).unwrap_err());
    assert!(code == 429 && msg.contains("3 hosted sweeps not over"), "{code} {msg}");
    // Another user has places of their own.
    admin.user_add(&UserAdd::new("bob", "pw-bob", false)).unwrap();
    let anon = Client::new(&format!("http://{}", server.addr), None);
    let bob =
        Client::new(&format!("http://{}", server.addr), Some(anon.login("bob", "pw-bob").unwrap().token));
    bob.sweep_create(&stalling).unwrap();
    // A cancelled sweep is over: its place is alice's again, once.
    alice.sweep_action(made[0].id, "cancel").unwrap();
    wait(&alice, made[0].id, "the cancel", |s| s.state == "cancelled");
    alice.sweep_create(&stalling).unwrap();
    assert_eq!(status(alice.sweep_create(&stalling).unwrap_err()).0, 429);
    drop(server);
}

/// Creating a sweep and cancelling it costs no credit, and each ended sweep keeps its plan and
/// every one of its jobs' records: a user doing it over and over could fill the disk for
/// everyone. Each user keeps their newest `max_kept_sweeps` ended sweeps; as they create more,
/// those that ended first are removed, records and work directories, and no sweep of another
/// user's, and none not over, is touched.
#[test]
fn a_users_ended_sweeps_are_held_to_max_kept_sweeps_and_no_one_elses_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url, admin, alice) = server_with_alice_on(Config {
        max_kept_sweeps: 2,
        max_active_sweeps: 3,
        ..common::test_config(dir.path())
    });
    admin.user_add(&UserAdd::new("bob", "pw-bob", false)).unwrap();
    let bob = Client::new(&url, Some(Client::new(&url, None).login("bob", "pw-bob").unwrap().token));
    // Budget 0: each stalls at once and is cancelled; 2,000 jobs each.
    let big = "parameter x integer range from 1 to 2000 step 1\ntask main\n    exec true\nendtask\n";
    let stalling = sweep(big, RES, 0);
    let cancelled = |c: &Client| {
        let s = c.sweep_create(&stalling).unwrap();
        wait(c, s.id, "the sweep to stall", |s| s.state == "stalled");
        c.sweep_action(s.id, "cancel").unwrap();
        wait(c, s.id, "the cancel", |s| s.state == "cancelled");
        s.id
    };
    let bobs = cancelled(&bob);
    let broker = dir.path().join("sweeps").join("broker.db");
    let work_dir = |id: i64| -> String {
        rusqlite::Connection::open(&broker)
            .unwrap()
            .query_row("SELECT work_dir FROM experiments WHERE id = ?1", [id], |r| r.get(0))
            .unwrap()
    };
    let mut made = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..6 {
        let id = cancelled(&alice);
        dirs.push(work_dir(id));
        made.push(id);
    }
    // One more, still running: the six before it have ended, and only the two that ended last
    // are kept.
    let live = alice.sweep_create(&stalling).unwrap().id;
    for (i, id) in made.iter().enumerate() {
        let gone = i < 4;
        let r = alice.sweep(*id);
        if gone {
            assert_eq!(status(r.unwrap_err()).0, 404, "sweep {id} should be removed");
        } else {
            assert_eq!(r.unwrap().state, "cancelled");
        }
        assert_eq!(
            std::path::Path::new(&dirs[i]).exists(),
            !gone,
            "work directory of sweep {id}: {}",
            dirs[i]
        );
    }
    assert_eq!(bob.sweep(bobs).unwrap().state, "cancelled", "bob's ended sweep stays");
    alice.sweep(live).unwrap();
    let db = rusqlite::Connection::open(&broker).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT COUNT(*) FROM experiments"), 4, "bob's, alice's two kept and her live one");
    assert_eq!(count("SELECT COUNT(*) FROM jobs"), 4 * 2000, "only the kept sweeps' jobs are recorded");
    assert_eq!(count("SELECT COUNT(*) FROM hosted"), 4);
    assert_eq!(count("SELECT COUNT(*) FROM resources WHERE exp_id NOT IN (SELECT id FROM experiments)"), 0);
    drop(server);
}

/// Each job of a sweep's plan is a record its creation writes, and `max_kept_sweeps` removes
/// ended sweeps as new ones come: one user creating and cancelling the largest sweeps in a loop
/// would keep the server's disk writing (about 6.5 MB a 100,000-job creation) for free, and a
/// loop of cancel and rerun on one such sweep wrote 72 MB/s. A user may create or run again
/// plan jobs at `sweep_job_rate` a second, up to the largest plan at once: past it the creation
/// or the rerun is answered 429 with the wait, before anything is written, and other users'
/// creations go on.
#[test]
fn creating_sweeps_in_a_loop_is_held_to_sweep_job_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url, admin, alice) =
        server_with_alice_on(Config { sweep_job_rate: 2.0, ..common::test_config(dir.path()) });
    admin.user_add(&UserAdd::new("bob", "pw-bob", false)).unwrap();
    let bob = Client::new(&url, Some(Client::new(&url, None).login("bob", "pw-bob").unwrap().token));
    // The largest plan a sweep may have, from a full bucket; budget 0, so it stalls at once.
    let largest = "parameter x integer range from 1 to 100000 step 1\ntask main\n    exec true\nendtask\n";
    let first = alice.sweep_create(&sweep(largest, RES, 0)).unwrap();
    alice.sweep_action(first.id, "cancel").unwrap();
    wait(&alice, first.id, "the cancel to end", |s| s.state == "cancelled" && s.finished.is_some());
    let broker = dir.path().join("sweeps").join("broker.db");
    let count = |sql: &str| -> i64 {
        rusqlite::Connection::open(&broker).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
    };
    let jobs_before = count("SELECT COUNT(*) FROM jobs");
    assert_eq!(jobs_before, 100_000);
    // Her bucket is empty: the same again, and a plan of 1,000 jobs, wait (at 2 jobs a second).
    for plan in
        [largest, "parameter x integer range from 1 to 1000 step 1\ntask main\n    exec true\nendtask\n"]
    {
        let (code, message) = status(alice.sweep_create(&sweep(plan, RES, 0)).unwrap_err());
        assert_eq!(code, 429, "{message}");
        assert!(message.contains("sweep_job_rate") && message.contains("try again in"), "{message}");
    }
    assert_eq!(count("SELECT COUNT(*) FROM experiments"), 1, "a refused creation made a sweep");
    assert_eq!(count("SELECT COUNT(*) FROM jobs"), jobs_before, "a refused creation wrote jobs");
    // Running the cancelled jobs again writes each again, as a creation does: the same bucket.
    let (code, message) = status(alice.sweep_action(first.id, "rerun").unwrap_err());
    assert_eq!(code, 429, "{message}");
    assert!(message.contains("sweep_job_rate") && message.contains("rerun"), "{message}");
    assert_eq!(alice.sweep(first.id).unwrap().state, "cancelled");
    assert_eq!(
        count("SELECT COUNT(*) FROM jobs WHERE state = 'cancelled'"),
        100_000,
        "a refused rerun changed jobs"
    );
    // A rerun while a cancel is still being carried out (its engine marking the jobs) would
    // race with it and count too few jobs: it waits for the cancel's end.
    let set = |sql: &str, id: i64| {
        rusqlite::Connection::open(&broker).unwrap().execute(sql, [id]).unwrap();
    };
    let mid = bob.sweep_create(&sweep(PLAN, RES, 0)).unwrap();
    wait(&bob, mid.id, "bob's sweep to stall", |s| s.state == "stalled");
    set("UPDATE experiments SET state = 'cancelled', finished = NULL WHERE id = ?1", mid.id);
    let (code, message) = status(bob.sweep_action(mid.id, "rerun").unwrap_err());
    assert_eq!(code, 409, "{message}");
    assert!(message.contains("being cancelled"), "{message}");
    set("UPDATE experiments SET finished = 1 WHERE id = ?1", mid.id);
    bob.sweep_action(mid.id, "rerun").unwrap();
    // Another user's bucket is their own.
    let bobs = bob.sweep_create(&sweep(PLAN, RES, 1000)).unwrap();
    wait(&bob, bobs.id, "bob's sweep to finish", |s| s.state == "done");
    // What she gains back in a few seconds makes a small sweep.
    std::thread::sleep(Duration::from_millis(1500));
    alice
        .sweep_create(&sweep(
            "parameter x integer range from 1 to 2 step 1\ntask main\n    exec true\nendtask\n",
            RES,
            0,
        ))
        .unwrap();
    drop(server);
}

/// A sweep holds up to 100,000 jobs, and its results in one answer took about 100 MB of the
/// server's memory while it was made: one user asking for them on many connections at once
/// could take the server's memory from everyone. The results come a page at a time, in job
/// order, at most 10,000 a request whatever is asked, and the client reads them all page by
/// page.
#[test]
fn a_sweeps_results_come_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _url, _admin, alice) = server_with_alice_on(common::test_config(dir.path()));
    let plan = "parameter x integer range from 1 to 12000 step 1\ntask main\n    exec true\nendtask\n";
    // Budget 0: it stalls at once, every job pending.
    let s = alice.sweep_create(&sweep(plan, RES, 0)).unwrap();
    // A page as (how many, first job, last job), checked to run on without a gap.
    let span = |page: &[libra_api::SweepJob]| {
        assert!(page.windows(2).all(|w| w[1].job == w[0].job + 1), "a page out of order or with a gap");
        (page.len(), page.first().map(|j| j.job), page.last().map(|j| j.job))
    };
    // Asked for everything, on one request: one page.
    let everything: Vec<libra_api::SweepJob> = alice.get(&format!("/api/sweeps/{}/results", s.id)).unwrap();
    assert_eq!(span(&everything), (1000, Some(1), Some(1000)), "the default page");
    let most = alice.sweep_results_page(s.id, u32::MAX, 0).unwrap();
    assert_eq!(span(&most), (10_000, Some(1), Some(10_000)), "at most 10,000 a request");
    let next = alice.sweep_results_page(s.id, 1500, 10_000).unwrap();
    assert_eq!(span(&next), (1500, Some(10_001), Some(11_500)));
    assert_eq!(
        span(&alice.sweep_results_page(s.id, 1500, 11_500).unwrap()),
        (500, Some(11_501), Some(12_000))
    );
    assert!(alice.sweep_results_page(s.id, 1500, 12_000).unwrap().is_empty());
    assert_eq!(next[0].params["x"], "10001", "{:?}", next[0].params);
    // The client reads every page.
    assert_eq!(span(&alice.sweep_results(s.id).unwrap()), (12_000, Some(1), Some(12_000)));
    let (code, message) = status(
        alice.get::<serde_json::Value>(&format!("/api/sweeps/{}/results?limit=many", s.id)).unwrap_err(),
    );
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("limit"), "{message}");
    drop(server);
}

/// A read whose work grows with its rows counts a read per 1,000 of them against the user's
/// `read_rate` (`ReadCost`): a page of 3,000 results four reads, a sweep's usage one per 1,000
/// attempts. So the pages of a large sweep, or its usage over and over, are held to the rate
/// as a loop of statuses is, and a read that costs more than the bucket holds leaves a debt.
#[test]
fn a_large_read_counts_a_read_per_thousand_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _url, _admin, alice) =
        server_with_alice_on(Config { read_rate: 0.001, read_burst: 10, ..common::test_config(dir.path()) });
    let plan = "parameter x integer range from 1 to 3000 step 1\ntask main\n    exec true\nendtask\n";
    // Budget 0: it stalls at once, every job pending.
    let s = alice.sweep_create(&sweep(plan, RES, 0)).unwrap();
    // The creation looked the token up, so every read counts: one, then a page of 3,000 is
    // four more of the ten.
    alice.sweep(s.id).unwrap();
    assert_eq!(alice.sweep_results_page(s.id, 3000, 0).unwrap().len(), 3000);
    let mut more = 0;
    let (code, message) = loop {
        match alice.sweep(s.id) {
            Ok(_) => more += 1,
            Err(e) => break status(e),
        }
        assert!(more < 20, "20 reads after the page, none refused");
    };
    assert_eq!(more, 5, "ten reads, four of them the page's");
    assert!(code == 429 && message.contains("a read per 1,000"), "{code} {message}");
    // A page read on an almost empty bucket leaves a debt: the next read waits for it.
    let dir = tempfile::tempdir().unwrap();
    let (server2, _url, _admin, bob) =
        server_with_alice_on(Config { read_rate: 1.0, read_burst: 2, ..common::test_config(dir.path()) });
    let s = bob.sweep_create(&sweep(plan, RES, 0)).unwrap();
    bob.sweep(s.id).unwrap();
    assert_eq!(bob.sweep_results_page(s.id, 3000, 0).unwrap().len(), 3000);
    let (code, message) = status(bob.sweep(s.id).unwrap_err());
    // Two held: one read, then the page's one and three more after it, a debt of three: four
    // seconds to the next read at one a second (three, should a second have passed).
    assert!(code == 429, "{code} {message}");
    assert!(message.contains("try again in 4 s") || message.contains("try again in 3 s"), "{message}");
    drop((server, server2));
}

/// A sweep's usage reads every attempt (a read per 1,000 of them against `read_rate`); asked
/// again with no attempt changed (the portal asks every two seconds), the usage made last is
/// answered, for one read, and an attempt that starts makes it anew.
#[test]
fn a_usage_asked_again_unchanged_costs_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { read_rate: 0.001, read_burst: 20, ..common::test_config(dir.path()) };
    let broker = config.broker_db();
    let (server, _url, _admin, alice) = server_with_alice_on(config);
    let plan = "parameter x integer range from 1 to 3000 step 1\ntask main\n    exec true\nendtask\n";
    // Budget 0: it stalls at once; its attempts are written here, 3,000 of them ended.
    let s = alice.sweep_create(&sweep(plan, RES, 0)).unwrap();
    let db = rusqlite::Connection::open(&broker).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let attempt = |job: i64, started: f64, ended: Option<f64>| {
        db.execute(
            "INSERT INTO attempts (job_id, exp_id, pos, state, started, ended, wall, cpu, price, hold_cents, charged_cents, dir) \
             VALUES (?1, ?2, 0, ?3, ?4, ?5, 1.0, 1.0, 1.0, 0, 0, '')",
            rusqlite::params![job, s.id, if ended.is_some() { "done" } else { "running" }, started, ended],
        )
        .unwrap();
    };
    let jobs: Vec<i64> = db
        .prepare("SELECT id FROM jobs WHERE exp_id = ?1 ORDER BY idx")
        .unwrap()
        .query_map([s.id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    db.execute_batch("BEGIN").unwrap();
    for (k, &job) in jobs.iter().enumerate() {
        attempt(job, s.created + k as f64, Some(s.created + k as f64 + 0.5));
    }
    db.execute_batch("COMMIT").unwrap();
    // Four reads (3,000 attempts), then one: the same answer.
    let first = alice.sweep_usage(s.id).unwrap();
    let again = alice.sweep_usage(s.id).unwrap();
    assert_eq!(format!("{:?}", first.points), format!("{:?}", again.points));
    // An attempt starts: made anew (four reads), and it shows.
    attempt(jobs[0], s.created + 5000.0, None);
    let after = alice.sweep_usage(s.id).unwrap();
    assert_ne!(format!("{:?}", after.points), format!("{:?}", again.points), "a usage kept past a change");
    // 20 - 4 - 1 - 4 = 11 reads left.
    let mut more = 0;
    while alice.sweep(s.id).is_ok() {
        more += 1;
        assert!(more < 30, "30 reads, none refused");
    }
    assert_eq!(more, 11, "a usage asked again unchanged costs one read");
    drop(server);
}

/// A sweep's jobs on a Libra cluster are asked after together, one listing a round, not each
/// by itself: twenty running at once asked forty times a second, past the cluster's read rate
/// for their owner, whose own reads were then refused. Here the cluster holds its users to four
/// reads a second; after the sweep's jobs have run there for six seconds, their owner still
/// reads.
#[test]
fn a_sweeps_jobs_on_a_libra_cluster_are_asked_after_together() {
    // The cluster the jobs go to: a node that takes them and never ends them.
    let b = libra_testkit::TestServer::start_with(|c| {
        c.read_rate = 4.0;
        c.read_burst = 40;
    });
    b.idle_node("n1", 64.0);
    let bob = b.user("bob", 100_000);
    // Read once, so that the server knows this login: every read of it after counts.
    bob.balance().unwrap();
    let token = Client::new(&b.url, None).login("bob", "pw-bob").unwrap().token;
    let dir = tempfile::tempdir().unwrap();
    let (server, _url, _admin, alice) = server_with_alice_on(Config {
        sweep_clusters: vec![b.url.clone()],
        ..common::test_config(dir.path())
    });
    let res = format!(
        "[[resource]]\nname = \"b\"\nkind = \"libra\"\nslots = 20\nprice = 10\nurl = \"{}\"\ntoken = \"{token}\"\n",
        b.url
    );
    let plan = "parameter x integer range from 1 to 20 step 1\ntask main\n    exec true\nendtask\n";
    let s = alice
        .sweep_create(&SweepCreate {
            estimate: Some(10.0),
            deadline_in: Some(3600.0),
            ..sweep(plan, &res, 100_000)
        })
        .unwrap();
    let admin_b = b.admin();
    libra_testkit::wait_until("the sweep's twenty jobs on the cluster", || {
        (admin_b.jobs(true).unwrap().iter().filter(|j| j.state.is_active()).count() >= 20).then_some(())
    });
    std::thread::sleep(Duration::from_secs(6));
    // Asked one by one: 40 reads a second for 6 s against 4 a second and 40 at once, and
    // refused (the cluster counts its refusals in /metrics).
    let metrics = ureq::get(&format!("{}/metrics", b.url)).call().unwrap().into_string().unwrap();
    let refused: Vec<&str> = metrics.lines().filter(|l| l.starts_with("libra_refusals_total{")).collect();
    assert!(refused.is_empty(), "{refused:?}");
    bob.balance().expect("the owner's reads are not taken by the sweep's questions");
    alice.sweep_action(s.id, "cancel").unwrap();
    drop(server);
}

/// Pausing, resuming, moving a hosted sweep's deadline or budget each write the sweeps'
/// database (a resume may start its engine again), and one client repeating them kept a core of
/// the server busy: they take from the user's bucket of submissions and job changes, and past it
/// are answered 429. A cancel is never held back.
#[test]
fn a_sweeps_changes_take_from_the_users_rate_and_a_cancel_never_waits() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _url, _admin, alice) = server_with_alice_on(Config {
        submit_rate: 0.001,
        submit_burst: 4,
        ..common::test_config(dir.path())
    });
    // Budget 0: it stalls at once, and stays there.
    let s = alice.sweep_create(&sweep(PLAN, RES, 0)).unwrap();
    wait(&alice, s.id, "the sweep to stall", |s| s.state == "stalled");
    // A stalled sweep cannot be paused: the request meets the sweep's state (409), as a change
    // it still counts.
    let (code, message) = status(alice.sweep_action(s.id, "pause").unwrap_err());
    assert_eq!(code, 409, "{message}");
    assert!(message.contains("stalled"), "{message}");
    alice.sweep_action(s.id, "resume").unwrap();
    alice.sweep_set_budget(s.id, Money::from_credits(0)).unwrap();
    alice.sweep_set_deadline(s.id, &SweepDeadline { deadline: None, deadline_in: Some(600.0) }).unwrap();
    for (what, refused) in [
        ("pause", alice.sweep_action(s.id, "pause").map(|_| ())),
        ("budget", alice.sweep_set_budget(s.id, Money::from_credits(0)).map(|_| ())),
        (
            "deadline",
            alice
                .sweep_set_deadline(s.id, &SweepDeadline { deadline: None, deadline_in: Some(60.0) })
                .map(|_| ()),
        ),
    ] {
        let (code, message) = status(refused.unwrap_err());
        assert_eq!(code, 429, "{what}: {message}");
        assert!(message.contains("sweep") && message.contains("try again in"), "{what}: {message}");
    }
    // The refused changes changed nothing: the deadline is the one set last.
    let info = alice.sweep(s.id).unwrap();
    assert!(info.deadline - info.now > 300.0, "{info:?}");
    alice.sweep_action(s.id, "cancel").unwrap();
    wait(&alice, s.id, "the cancel", |s| s.state == "cancelled");
    drop(server);
}
