//! End-to-end: operating a real cluster from the `libra` binary: draining a node, the
//! monitoring endpoints, and a backup taken while submissions run, restored into a new store.

mod common;

use common::*;
use libra_api::{Client, JobState};
use libra_core::Money;

fn admin_token(cl: &Cluster) -> String {
    Client::new(&cl.url, None).login("admin", ADMIN_PW).unwrap().token
}

#[test]
fn a_drained_node_takes_no_new_job_and_finishes_the_one_it_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let admin = cl.admin();
    let token = admin_token(&cl);
    let u = cl.user("dana", 1000);
    // A job that runs a few seconds on one node; drain that node while it runs.
    let first = u.submit(&burn(2.0, 3.0, 120.0, 50)).unwrap();
    assert_eq!(first.state, JobState::Pending, "{first:?}");
    let busy = first.nodes[0].clone();
    let other = cl.node_names.iter().find(|n| **n != busy).unwrap().clone();
    wait_running(&u, first.id);
    let out = libra(&cl, &token, &["admin", "node", "drain", &busy, "--reason", "fan check, ticket 12"]);
    assert!(
        out.contains(&format!("node {busy} is drained"))
            && out.contains("1 job on it will finish")
            && out.contains("(reason: fan check, ticket 12)"),
        "{out}"
    );
    let table = libra(&cl, &token, &["admin", "nodes"]);
    let row = table.lines().find(|l| l.contains(&busy)).unwrap();
    assert!(row.contains("DRAINED"), "{table}");
    assert!(table.contains(&format!("{busy} is drained: fan check, ticket 12")), "{table}");
    // Drained again without a reason: the reason given before stays (a new one replaces it).
    let out = libra(&cl, &token, &["admin", "node", "drain", &busy]);
    assert!(out.contains("(reason: fan check, ticket 12)"), "{out}");
    let long = admin.node_action(&other, "drain", Some(&"x".repeat(1001))).unwrap_err();
    assert!(long.status() == Some(400) && long.to_string().contains("reason: at most 1000 bytes"), "{long}");
    assert!(!admin.nodes().unwrap().into_iter().find(|n| n.name == other).unwrap().drained);
    assert!(!table.lines().find(|l| l.contains(&other)).unwrap().contains("DRAINED"), "{table}");
    // New jobs that would fit on either node go to the other one, every time.
    for _ in 0..4 {
        let j = u.submit(&burn(0.1, 0.5, 120.0, 50)).unwrap();
        assert_eq!(j.state, JobState::Pending, "{j:?}");
        assert_eq!(j.nodes, vec![other.clone()], "a drained node got a job: {j:?}");
    }
    // A job needing two nodes cannot be had with one drained.
    let mut pair = burn(0.1, 0.5, 120.0, 50);
    pair.spec = pair.spec.with_procs(2);
    let two = u.submit(&pair).unwrap();
    assert_eq!(two.state, JobState::Rejected, "{two:?}");
    // Both drained: refused, with a reason.
    libra(&cl, &token, &["admin", "node", "drain", &other]);
    let refused = u.submit(&burn(0.1, 0.5, 120.0, 50)).unwrap();
    assert_eq!(refused.state, JobState::Rejected, "{refused:?}");
    // The promise made on the drained node is kept: the running job finishes there.
    let done = wait_done(&u, first.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert_eq!(done.nodes, vec![busy.clone()]);
    // Drained survives a restart of the server.
    let mut cl = cl;
    cl.kill_server();
    cl.start_server();
    let nodes = admin.nodes().unwrap();
    assert!(nodes.iter().all(|n| n.drained), "{nodes:?}");
    let reason = |n: &str| nodes.iter().find(|x| x.name == n).unwrap().drain_reason.clone();
    assert_eq!(reason(&busy).as_deref(), Some("fan check, ticket 12"), "the reason outlives a restart");
    assert_eq!(reason(&other), None);
    let out = libra(&cl, &token, &["admin", "node", "undrain", &busy]);
    assert!(out.contains(&format!("node {busy} takes new jobs again")), "{out}");
    let again = admin.nodes().unwrap().into_iter().find(|n| n.name == busy).unwrap();
    assert!(!again.drained && again.drain_reason.is_none(), "{again:?}");
    let u = Client::new(&cl.url, Some(Client::new(&cl.url, None).login("dana", "pw-dana").unwrap().token));
    let j = wait_until("the undrained node back up", || {
        u.submit(&burn(0.1, 0.5, 120.0, 50)).ok().filter(|j| j.state == JobState::Pending)
    });
    assert_eq!(j.nodes, vec![busy.clone()]);
    // Unknown nodes and actions are named.
    let out = std::process::Command::new(EXE)
        .args(["admin", "node", "drain", "no-such-node"])
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", &token)
        .env("LIBRA_CONFIG_DIR", cl.dir.join("config"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'no-such-node' is not a node"), "{out:?}");
}

/// A plain HTTP GET over loopback: (status, body).
fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// The samples of a Prometheus text exposition: `name{labels}` to value. Every line that is
/// not a comment must be a sample, or the exposition is malformed.
fn samples(text: &str) -> std::collections::HashMap<String, f64> {
    let mut m = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (key, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("not a value: {line}"));
        assert!(m.insert(key.to_string(), v).is_none(), "sample twice: {line}");
    }
    assert!(text.trim_end().ends_with("# EOF"), "no # EOF ending");
    m
}

fn sample(m: &std::collections::HashMap<String, f64>, key: &str) -> f64 {
    *m.get(key).unwrap_or_else(|| {
        let mut keys: Vec<_> = m.keys().collect();
        keys.sort();
        panic!("no sample {key}; have {keys:?}")
    })
}

#[test]
fn metrics_count_real_submissions_and_readiness_follows_the_nodes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 1.0, 3.0);
    let node = cl.node_names[0].clone();
    assert_eq!(http_get(cl.port, "/healthz"), (200, "ok\n".into()));
    let (status, body) = http_get(cl.port, "/readyz");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("1 nodes up"), "{body}");

    let u = cl.user("mo", 1000);
    let a = u.submit(&burn(0.2, 1.0, 120.0, 50)).unwrap();
    let b = u.submit(&burn(0.2, 1.0, 120.0, 50)).unwrap();
    // Holds three quarters of the node for a while.
    let long = u.submit(&burn(30.0, 30.0, 40.0, 100)).unwrap();
    assert_eq!((a.state, b.state, long.state), (JobState::Pending, JobState::Pending, JobState::Pending));
    // Needs half the node by its deadline: refused for the deadline.
    let late = u.submit(&burn(0.1, 30.0, 60.0, 5000)).unwrap();
    assert_eq!(late.state, JobState::Rejected, "{late:?}");
    assert!(late.reason.as_deref().unwrap_or("").starts_with("deadline"), "{late:?}");
    // Costs more than one cent.
    let mut poor = burn(0.1, 1.0, 120.0, 1);
    poor.spec.qos.budget = libra_core::Money(1);
    let poor = u.submit(&poor).unwrap();
    assert_eq!(poor.state, JobState::Rejected, "{poor:?}");
    assert!(poor.reason.as_deref().unwrap_or("").starts_with("budget"), "{poor:?}");
    // Impossible on its face: refused before any decision (400).
    assert_eq!(u.submit(&burn(0.1, 500.0, 10.0, 5000)).unwrap_err().status(), Some(400));
    let a = wait_done(&u, a.id);
    let b = wait_done(&u, b.id);
    assert_eq!((a.state, b.state), (JobState::Completed, JobState::Completed));
    wait_running(&u, long.id);

    let (status, text) = http_get(cl.port, "/metrics");
    assert_eq!(status, 200);
    let m = samples(&text);
    assert_eq!(sample(&m, r#"libra_admissions_total{outcome="accepted"}"#), 3.0, "{text}");
    assert_eq!(sample(&m, r#"libra_admissions_total{outcome="rejected"}"#), 2.0);
    assert_eq!(sample(&m, r#"libra_admissions_total{outcome="error"}"#), 1.0);
    assert_eq!(sample(&m, r#"libra_rejections_total{reason="deadline"}"#), 1.0);
    assert_eq!(sample(&m, r#"libra_rejections_total{reason="budget"}"#), 1.0);
    assert_eq!(sample(&m, "libra_admission_latency_seconds_count"), 6.0);
    assert!(sample(&m, "libra_admission_latency_seconds_sum") > 0.0);
    assert_eq!(sample(&m, r#"libra_admission_latency_seconds_bucket{le="+Inf"}"#), 6.0);
    assert_eq!(sample(&m, r#"libra_jobs{state="completed"}"#), 2.0);
    assert_eq!(sample(&m, r#"libra_jobs{state="rejected"}"#), 2.0);
    assert_eq!(sample(&m, r#"libra_jobs{state="running"}"#), 1.0);
    assert_eq!(sample(&m, "libra_revenue_cents"), (a.charged.0 + b.charged.0) as f64);
    assert!(a.charged.0 > 0);
    // The running job holds credit, and the metrics say how much.
    let held = u.balance().unwrap().held.0;
    assert!(held > 0);
    assert_eq!(sample(&m, "libra_credit_held_cents"), held as f64);
    assert_eq!(sample(&m, &format!(r#"libra_node_up{{node="{node}"}}"#)), 1.0);
    assert_eq!(sample(&m, &format!(r#"libra_node_drained{{node="{node}"}}"#)), 0.0);
    assert_eq!(sample(&m, &format!(r#"libra_node_cpus{{node="{node}"}}"#)), 1.0);
    assert!(sample(&m, &format!(r#"libra_node_load{{node="{node}"}}"#)) > 0.5);

    // The node's agent stops: the node goes down and the server is no longer ready.
    for n in cl.nodes.iter_mut() {
        n.kill().unwrap();
        n.wait().unwrap();
    }
    let body = wait_until("readyz to fail", || {
        let (status, body) = http_get(cl.port, "/readyz");
        (status == 503).then_some(body)
    });
    assert!(body.contains("no node is up"), "{body}");
    let m = samples(&http_get(cl.port, "/metrics").1);
    assert_eq!(sample(&m, &format!(r#"libra_node_up{{node="{node}"}}"#)), 0.0);
    assert_eq!(http_get(cl.port, "/healthz").0, 200);
}

fn run_libra(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(EXE).args(args).envs(env.iter().copied()).output().unwrap()
}

/// The ledger as rows that must match exactly between the live store and a restored copy.
fn ledger_rows(c: &rusqlite::Connection, up_to: i64) -> Vec<(i64, i64, Option<i64>, String, i64)> {
    c.prepare("SELECT id, user_id, job, kind, amount FROM ledger WHERE id <= ?1 ORDER BY id")
        .unwrap()
        .query_map([up_to], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn job_ids(c: &rusqlite::Connection, up_to: i64) -> Vec<i64> {
    c.prepare("SELECT id FROM jobs WHERE id <= ?1 ORDER BY id")
        .unwrap()
        .query_map([up_to], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_backup_taken_while_jobs_are_submitted_restores_every_job_and_ledger_entry_it_reported() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 2.0, 30.0);
    let token = admin_token(&cl);
    let env = [("LIBRA_SERVER", cl.url.as_str()), ("LIBRA_TOKEN", token.as_str())];
    let u = cl.user("bo", 100_000);
    // Submissions (some run and are charged, some are refused for their budget) go on while
    // the backup is taken.
    let acked: Arc<Mutex<Vec<(u64, Instant)>>> = Default::default();
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            // Bounded in count and time; paced so that it lasts until the backup is done.
            for i in 0..3000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                let mut req = burn(0.02, 0.05, 600.0, 5);
                if i % 4 != 0 {
                    req.spec.qos.budget = libra_core::Money(0);
                }
                let j = u.submit(&req).unwrap();
                acked.lock().unwrap().push((j.id, Instant::now()));
            }
        })
    };
    wait_until("jobs before the backup", || (acked.lock().unwrap().len() >= 20).then_some(()));
    // At least one job ran and was charged before the backup.
    let first = acked.lock().unwrap()[0].0;
    wait_done(&cl.admin(), first);
    let file = cl.dir.join("backup.db");
    let file_s = file.display().to_string();
    let asked = Instant::now();
    let out = run_libra(&["admin", "backup", &file_s, "--json"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n_before = acked.lock().unwrap().len();
    wait_until("jobs after the backup", || (acked.lock().unwrap().len() >= n_before + 20).then_some(()));
    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap();
    let (last_job, last_ledger) =
        (info["last_job"].as_i64().unwrap(), info["last_ledger_entry"].as_i64().unwrap());
    let acked = acked.lock().unwrap().clone();
    let before: Vec<u64> = acked.iter().filter(|(_, t)| *t < asked).map(|(id, _)| *id).collect();
    assert!(before.len() >= 20);
    assert!(acked.iter().any(|(id, _)| *id as i64 > last_job), "submissions went on after the backup");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    // A second backup to the same file is refused without --overwrite.
    let again = run_libra(&["admin", "backup", &file_s], &env);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("--overwrite"));
    // Into a directory that does not exist: refused by name before the server makes one, and
    // no partial file is left anywhere.
    let nowhere = cl.dir.join("no-such-dir").join("b.db");
    let out = run_libra(&["admin", "backup", &nowhere.display().to_string()], &env);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("no-such-dir is not a directory"), "{said}");
    assert!(!said.contains(".partial"), "{said}");
    let partial = std::fs::read_dir(&cl.dir)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial"));
    assert!(!partial, "a partial backup was left");

    // The live store cannot be restored into while its server runs, nor opened by a second one.
    let live = cl.dir.join("server.db");
    let live_s = live.display().to_string();
    let out = run_libra(&["server", "--restore", &file_s, "--db", &live_s, "--overwrite"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another libra server"), "{out:?}");
    let port = free_port().to_string();
    let out = run_libra(
        &["server", "--db", &live_s, "--listen", &format!("127.0.0.1:{port}")],
        &[("LIBRA_JOIN_TOKEN", JOIN)],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another libra server"), "{out:?}");

    // Restore into a new store.
    let restored = cl.dir.join("restored").join("server.db");
    let restored_s = restored.display().to_string();
    let out = run_libra(&["server", "--restore", &file_s, "--db", &restored_s], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    // The server's (empty) hosted sweeps' database came along, into its place beside the store.
    assert_eq!(info["sweeps"].as_u64(), Some(0), "{info}");
    let broker = restored.with_file_name("sweeps").join("broker.db");
    assert!(
        said.contains(&format!("restored the hosted sweeps' database into {}: 0 sweeps", broker.display())),
        "{said}"
    );
    assert!(broker.is_file());
    assert!(
        said.contains(&format!("{} jobs (last {last_job})", info["jobs"]))
            && said.contains(&format!("{} ledger entries (last {last_ledger})", info["ledger_entries"])),
        "{said} vs {info}"
    );
    let r = rusqlite::Connection::open(&restored).unwrap();
    let l = rusqlite::Connection::open_with_flags(&live, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    // Every job acknowledged before the backup was asked for is in it.
    let in_backup = job_ids(&r, i64::MAX);
    for id in &before {
        assert!(
            in_backup.contains(&(*id as i64)),
            "job {id} was acknowledged before the backup and is not in it"
        );
    }
    // The backup is the store as of one commit: every job and ledger entry up to the last it
    // reported, exactly as the live store has them, and nothing after.
    assert_eq!(in_backup.len() as u64, info["jobs"].as_u64().unwrap());
    assert_eq!(in_backup, job_ids(&l, last_job));
    let entries = ledger_rows(&r, i64::MAX);
    assert_eq!(entries.len() as u64, info["ledger_entries"].as_u64().unwrap());
    assert_eq!(entries, ledger_rows(&l, last_ledger));
    assert!(entries.iter().any(|e| e.3 == "charge"), "no charged job in the backup");
    drop(r);

    // A store that is not empty is replaced only when told to.
    let out = run_libra(&["server", "--restore", &file_s, "--db", &restored_s], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"), "{out:?}");
    let out = run_libra(&["server", "--restore", &file_s, "--db", &restored_s, "--overwrite"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // A server on the restored store serves the jobs.
    let port = free_port();
    let mut srv = std::process::Command::new(EXE)
        .args(["server", "--db", &restored_s, "--listen", &format!("127.0.0.1:{port}")])
        .env("LIBRA_JOIN_TOKEN", JOIN)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let admin = wait_until("the restored server", || Client::new(&url, None).login("admin", ADMIN_PW).ok());
    let admin = Client::new(&url, Some(admin.token));
    let j = admin.job(last_job as u64).unwrap();
    assert_eq!(j.user, "bo");
    assert_eq!(admin.job(before[0]).unwrap().id, before[0]);
    let _ = srv.kill();
    let _ = srv.wait();
}

/// The server's store on a disk that fills while a job runs: what cannot be recorded is refused
/// with 503 and a reason (never half done, never an opaque 500), reads go on, the job that ends
/// meanwhile is settled once space is back, at the charge its CPU time makes, and the server's
/// log names the cause once and no submission it did not store.
#[test]
fn a_full_disk_refuses_what_it_cannot_record_and_loses_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(disk) = SmallDisk::mount(8) else { return };
    // Dropped before the disk (declared after it): the server lets go of its store first.
    let cl = Cluster::start_with_store_in(&disk.dir, 1, 1.0, 30.0);
    let u = cl.user("erin", 1000);
    let token = token_of(&cl, "erin");
    let budget = 50;
    let running = u.submit(&burn(2.0, 4.0, 300.0, budget)).unwrap();
    assert_eq!(running.state, JobState::Pending, "{running:?}");
    wait_running(&u, running.id);
    let filler = disk.fill();

    let e = u.submit(&burn(0.5, 1.0, 300.0, budget)).unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    assert!(e.to_string().contains("out of disk space") && e.to_string().contains("changed nothing"), "{e}");
    let (ok, _, err) =
        libra_run(&cl, &token, &["submit", "--estimate", "1", "-d", "300", "-b", "50", "--", "true"]);
    assert!(!ok && err.contains("out of disk space") && err.contains("HTTP 503"), "{err}");
    let login = Client::new(&cl.url, None).login("erin", "pw-erin").unwrap_err();
    assert_eq!(login.status(), Some(503), "{login}");
    // Monitoring sees it: the /metrics scrape reads, and counts both refusals at least.
    let (status, body) = http_get(cl.port, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(sample(&samples(&body), "libra_store_full_refusals_total") >= 2.0, "{body}");
    // Reads answer; only the running job holds credit.
    let b = u.balance().unwrap();
    assert_eq!((b.held, b.charged), (running.cost, Money::ZERO), "{b:?}");
    assert_eq!(u.jobs(false).unwrap().len(), 1);

    // The job ends while nothing can be recorded: its end waits on its node, not lost, and
    // the server does not pretend it was stored.
    wait_until("the job's processes to exit", || job_pids(&cl, running.id).is_empty().then_some(()));
    std::thread::sleep(std::time::Duration::from_secs(2)); // four of the node's reports
    assert_eq!(u.job(running.id).unwrap().state, JobState::Running);

    std::fs::remove_file(filler).unwrap();
    let done = wait_done(&u, running.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert!(done.cpu_seconds > 1.5, "{done:?}");
    assert!(done.charged > Money::ZERO && done.charged <= Money::from_credits(budget), "{done:?}");
    let b = u.balance().unwrap();
    assert_eq!(b.held, Money::ZERO, "{b:?}");
    assert_eq!(b.charged, done.charged, "{b:?}");
    assert_eq!(b.available + b.charged, b.deposited, "{b:?}");
    let again = u.submit(&burn(0.2, 1.0, 300.0, budget)).unwrap();
    assert_eq!(again.state, JobState::Pending, "{again:?}");
    assert_eq!(wait_done(&u, again.id).state, JobState::Completed);

    let log = std::fs::read_to_string(cl.dir.join("server.log")).unwrap();
    assert!(!log.contains('\u{1b}'), "colour codes in a log file:\n{log}");
    assert_eq!(log.matches("the store's disk is full").count(), 1, "{log}");
    let submitted: Vec<&str> = log.lines().filter(|l| l.contains(" submitted ")).collect();
    assert_eq!(submitted.len(), 2, "only stored submissions are logged as submitted:\n{log}");
    assert!(submitted[0].contains(&format!("job={}", running.id)), "{log}");
    assert!(submitted[1].contains(&format!("job={}", again.id)), "{log}");
}

/// A node agent whose disk is full cannot write what a job's start needs (its launch file, its
/// record, without which a crash of the agent would lose the job): the job is not started, ends
/// FAILED with a reason that says what could not be written and why, and costs its owner
/// nothing; the server drains the node (every job placed there would fail alike), saying why in
/// the audit log, so that new jobs are not sent to it; once space is back and an administrator
/// undrains it, the node runs jobs again.
///
/// Twice: with plain scratch directories (what fails is the job's record), and with a scratch
/// file system per job, where the agent can mount (what fails first is making it).
#[test]
fn a_node_whose_disk_is_full_starts_nothing_it_cannot_record_and_charges_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    full_node_disk("0", "cannot write the job's");
    if libra_node::scratch::probe(&std::env::temp_dir()).is_ok() {
        full_node_disk("8", "cannot make the job's scratch file system");
    }
}

fn full_node_disk(scratch_mb: &str, failed_for: &str) {
    let Some(disk) = SmallDisk::mount(4) else { return };
    let mut cl = Cluster::start(0, 1.0, 30.0);
    let name = format!("full-{}", cl.port);
    // None made ahead: a start makes its own, and that is what the full disk stops (with file
    // systems made ahead, a start takes one and what fails is the record, as with plain
    // directories).
    cl.start_node_in_with(
        &name,
        1.0,
        &disk.dir.join("work"),
        &["--scratch-mb", scratch_mb, "--scratch-ahead", "0"],
    );
    let admin = cl.admin();
    wait_until("the node up", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let u = cl.user("fay", 1000);
    let filler = disk.fill();

    let j = u.submit(&burn(0.2, 1.0, 120.0, 50)).unwrap();
    assert_eq!(j.state, JobState::Pending, "{j:?}");
    let failed = wait_done(&u, j.id);
    assert_eq!(failed.state, JobState::Failed, "{failed:?}");
    let reason = failed.reason.clone().unwrap_or_default();
    assert!(reason.contains(failed_for) && reason.contains("No space left on device"), "{reason}");
    assert_eq!(failed.charged, Money::ZERO, "{failed:?}");
    assert!(pids_under(&disk.dir, &format!("job-{}", j.id)).is_empty(), "a process of the failed job runs");
    let b = u.balance().unwrap();
    assert_eq!((b.held, b.charged, b.available), (Money::ZERO, Money::ZERO, b.deposited), "{b:?}");
    let node = admin.nodes().unwrap().into_iter().find(|n| n.name == name).unwrap();
    assert!(node.drained, "{node:?}");
    let drained_for = node.drain_reason.clone().unwrap_or_default();
    assert!(drained_for.contains(&format!("could not start job {}", j.id)), "{node:?}");
    let why = admin.audit(50, None).unwrap().into_iter().find(|e| e.method == "SERVER").unwrap();
    let detail = why.detail.clone().unwrap_or_default();
    assert!(why.path.contains(&name) && detail.contains(&format!("could not start job {}", j.id)), "{why:?}");
    assert!(detail.contains("No space left on device") && detail.contains("undrain"), "{why:?}");
    let refused = u.submit(&burn(0.2, 1.0, 120.0, 50)).unwrap();
    assert_eq!(refused.state, JobState::Rejected, "the drained node took a job: {refused:?}");

    std::fs::remove_file(filler).unwrap();
    let token = Client::new(&cl.url, None).login("admin", ADMIN_PW).unwrap().token;
    libra(&cl, &token, &["admin", "node", "undrain", &name]);
    let next = u.submit(&burn(0.2, 1.0, 120.0, 50)).unwrap();
    assert_eq!(wait_done(&u, next.id).state, JobState::Completed);
}
