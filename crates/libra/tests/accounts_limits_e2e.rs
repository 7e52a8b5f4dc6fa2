//! Accounts on a real cluster (a `libra server` process and node agents): a hosted sweep acts
//! through a credential of its own, so the sweeps' database never holds the user's token and
//! the credential dies with the sweep; a flood of wrong logins neither takes the server's
//! memory nor stops it answering; and the account commands (`libra logout`, `libra passwd`,
//! `libra admin user disable|enable|remove`, `libra admin audit`) do what they say.

mod common;

use common::*;
use libra_api::{Client, SweepCreate};
use libra_core::Money;
use std::process::Command;
use std::time::{Duration, Instant};

/// A hosted sweep of `plan` over `resources`, due in ten minutes.
fn hosted(plan: &str, resources: String, name: &str, budget: i64, estimate: f64) -> SweepCreate {
    SweepCreate {
        plan: plan.into(),
        resources,
        name: Some(name.into()),
        deadline: None,
        deadline_in: Some(600.0),
        budget: Money::from_credits(budget),
        optimise: None,
        max_retries: None,
        estimate: Some(estimate),
        seed: 0,
    }
}

/// A hosted sweep of `n` busy jobs (each uses CPU, so that a cancel has something to charge) on
/// this cluster, `n` slots at price 20; returns it and its jobs' ids on the cluster once all
/// run and have used some CPU.
fn busy_hosted_sweep(cl: &Cluster, user: &Client, n: usize, name: &str) -> (libra_api::SweepInfo, Vec<u64>) {
    let resources = format!(
        "[[resource]]\nname = \"here\"\nkind = \"libra\"\nslots = {n}\nprice = 20\nurl = \"{}\"\n",
        cl.url
    );
    let plan = format!("parameter x integer range from 1 to {n} step 1\ntask main\n    shexec \"while :; do :; done\"\nendtask\n");
    let sweep = user.sweep_create(&hosted(&plan, resources, name, 500, 5.0)).unwrap();
    let running = wait_until("the sweep's jobs running on the cluster, with CPU used", || {
        let jobs = user.jobs(false).ok()?;
        let r: Vec<u64> = jobs
            .iter()
            .filter(|j| j.state == libra_api::JobState::Running && j.cpu_seconds > 0.3)
            .map(|j| j.id)
            .collect();
        (r.len() == n).then_some(r)
    });
    (sweep, running)
}

fn user_token(cl: &Cluster, name: &str) -> String {
    Client::new(&cl.url, None).login(name, &format!("pw-{name}")).unwrap().token
}

/// Every file the hosted sweeps keep (their database, its journal, the experiments' files), as
/// bytes.
fn sweep_store_bytes(cl: &Cluster) -> Vec<u8> {
    fn walk(dir: &std::path::Path, all: &mut Vec<u8>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, all);
            } else if let Ok(b) = std::fs::read(&p) {
                all.extend(b);
            }
        }
    }
    let mut all = Vec::new();
    walk(&cl.dir.join("sweeps"), &mut all);
    assert!(all.len() > 4096, "the sweeps' store was not found");
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_hosted_sweep_never_stores_the_users_token_and_its_credential_dies_with_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let kim = cl.user("kim", 1000);
    let token = user_token(&cl, "kim");
    // The user writes their own token into the resource, as for a sweep run elsewhere: the
    // server must drop it and act through the sweep's own credential.
    let resources = format!(
        "[[resource]]\nname = \"here\"\nkind = \"libra\"\nslots = 2\nprice = 20\nurl = \"{}\"\ntoken = \"{token}\"\n",
        cl.url
    );
    let sweep = kim
        .sweep_create(&hosted(
            // Jobs of about a second: the sweep's offers follow the time its jobs take, and the
            // cluster prices at least a second.
            "parameter x integer range from 1 to 3 step 1\ntask main\n    exec sleep 1\nendtask\n",
            resources,
            "cred",
            200,
            1.0,
        ))
        .unwrap();
    // The credential, as the sweep's store holds it: a token that is not the user's.
    let cfg: String = {
        let db = rusqlite::Connection::open(cl.dir.join("sweeps").join("broker.db")).unwrap();
        db.query_row("SELECT config FROM resources WHERE exp_id = ?1", [sweep.id], |r| r.get(0)).unwrap()
    };
    let cfg: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    let credential = cfg["token"].as_str().expect("the resource has the sweep's credential").to_string();
    assert_ne!(credential, token);
    let as_sweep = Client::new(&cl.url, Some(credential.clone()));
    // While the sweep runs it acts for kim on jobs only: it cannot start sweeps or change her
    // password.
    let probe = as_sweep.passwd("pw-kim", "stolen");
    if let Err(e) = &probe {
        assert!(matches!(e.status(), Some(401 | 403)), "{e}");
    } else {
        panic!("the sweep's credential changed its owner's password");
    }
    let t0 = Instant::now();
    let end = loop {
        if let Some(s) = kim.sweep(sweep.id).ok().filter(|s| s.state != "running" && s.state != "paused") {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            panic!(
                "the sweep did not end: {:?}\nserver log:\n{}",
                kim.sweep(sweep.id),
                std::fs::read_to_string(cl.dir.join("server.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!((end.state.as_str(), end.jobs.done), ("done", 3), "{end:?}");
    // Its jobs ran on the cluster as kim's.
    let jobs = kim.jobs(false).unwrap();
    assert!(jobs.iter().filter(|j| j.state == libra_api::JobState::Completed).count() >= 3, "{jobs:?}");
    // Nothing in the sweeps' store is kim's token.
    assert!(!contains(&sweep_store_bytes(&cl), &token), "the sweeps' database holds the user's token");
    // The server's store has tokens as digests only.
    assert!(!contains(&std::fs::read(cl.dir.join("server.db")).unwrap(), &credential));
    // The credential ended with the sweep.
    let e = as_sweep.balance().unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
    // kim's own token still works.
    kim.balance().unwrap();
}

/// The server's resident memory, and its peak, in kB.
fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[test]
fn two_hundred_concurrent_wrong_logins_keep_the_server_small_and_answering() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(0, 1.0, 30.0);
    let lee = cl.user("lee", 10);
    let pid = cl.server.as_ref().unwrap().id();
    let (before, _) = rss_kb(pid);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (refused, slowest) = std::thread::scope(|s| {
        // Others keep being answered during the flood.
        let watcher = s.spawn(|| {
            let mut slowest = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t0 = Instant::now();
                lee.balance().unwrap();
                slowest = slowest.max(t0.elapsed());
                std::thread::sleep(Duration::from_millis(20));
            }
            slowest
        });
        let attackers: Vec<_> = (0..200)
            .map(|i| {
                let url = cl.url.clone();
                s.spawn(move || {
                    let c = Client::new(&url, None);
                    // Known and unknown names alike.
                    let user = if i % 2 == 0 { "lee".to_string() } else { format!("nobody{i}") };
                    (0..3).filter(|_| c.login(&user, "wrong-password").is_err()).count()
                })
            })
            .collect();
        let refused: usize = attackers.into_iter().map(|a| a.join().unwrap()).sum();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (refused, watcher.join().unwrap())
    });
    assert_eq!(refused, 600, "a wrong password was accepted");
    let (rss, peak) = rss_kb(pid);
    assert!(peak < 200 * 1024, "the server's memory peaked at {peak} kB (now {rss} kB, {before} kB before)");
    assert!(slowest < Duration::from_secs(3), "another user waited {slowest:?} during the flood");
    // The right password from another address is not locked out by the flood; here (same
    // address) the backoff says how long to wait.
    match Client::new(&cl.url, None).login("lee", "pw-lee") {
        Ok(_) => {}
        Err(e) => assert_eq!(e.status(), Some(429), "{e}"),
    }
}

/// `libra ...` with its own saved login; returns (success, stdout, stderr).
fn cli(cl: &Cluster, args: &[&str]) -> (bool, String, String) {
    cli_env(cl, args, &[])
}

/// `cli` with environment variables (secrets go there, never on the command line).
fn cli_env(cl: &Cluster, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let o = Command::new(EXE)
        .args(args)
        .env("LIBRA_CONFIG_DIR", cl.dir.join("cli-config"))
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_SERVER")
        .env_remove("LIBRA_PASSWORD")
        .env_remove("LIBRA_NEW_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

/// Cancelling a hosted sweep cancels its jobs on the cluster at once. The jobs' threads used to
/// cancel them at their next look, by which time the sweep's end had revoked its credential: the
/// cancel was refused and the jobs ran on to their ends, paid for by the user.
#[test]
fn a_cancelled_hosted_sweeps_jobs_on_the_cluster_are_cancelled_with_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let lea = cl.user("lea", 1000);
    let (sweep, running) = busy_hosted_sweep(&cl, &lea, 3, "long");
    let c = lea.sweep_action(sweep.id, "cancel").unwrap();
    assert_eq!(c.state, "cancelled", "{c:?}");
    // Each is cancelled, as its owner's cancel (the CPU it used is paid), and nothing is held.
    // Stopped on their nodes too: then the CPU each used to its kill is charged.
    let ended = wait_for("the sweep's jobs to be cancelled and stopped", 20, || {
        let jobs: Vec<_> = running.iter().map(|&id| lea.job(id)).collect::<Result<_, _>>().ok()?;
        jobs.iter().all(|j| !j.state.is_active() && j.parts_running == 0).then_some(jobs)
    });
    for j in &ended {
        assert_eq!(j.state, libra_api::JobState::Cancelled, "{j:?}");
    }
    assert_eq!(lea.balance().unwrap().held, Money::ZERO);
    // The sweep says what its cancelled jobs cost: what the cluster charged in the end (it paid
    // only the charge at the cancel, without the CPU to each kill).
    let paid: Money = ended.iter().map(|j| j.charged).sum();
    assert_eq!(lea.balance().unwrap().charged, paid);
    let spent = wait_for("the sweep's books to take the final charges", 20, || {
        let spent = lea.sweep(sweep.id).ok()?.spent;
        (spent == paid).then_some(spent)
    });
    assert!(spent > Money::ZERO, "the sweep spent {spent}, the cluster charged {paid}");
    wait_until("the jobs' processes gone", || {
        running.iter().all(|&id| job_pids(&cl, id).is_empty()).then_some(())
    });
}

/// A hosted sweep whose cancel was under way when the server was killed (the sweep marked
/// cancelled, its engine gone with the server before it stopped the jobs): the restarted server
/// takes it up and cancels its jobs on the cluster. They ran on, paid for, to their ends.
#[test]
fn a_hosted_sweeps_cancel_cut_short_by_a_server_crash_is_finished_by_the_restarted_server() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 1.0, 30.0);
    let lea = cl.user("lea", 1000);
    let (sweep, running) = busy_hosted_sweep(&cl, &lea, 2, "cut-short");
    cl.kill_server();
    // What the cancel had written when the server died.
    let db = cl.dir.join("sweeps").join("broker.db");
    libra_broker::store::Store::open(&db)
        .unwrap()
        .set_state(sweep.id, libra_broker::state::ExperimentState::Cancelled, None)
        .unwrap();
    cl.start_server();
    let ended = wait_for("the sweep's jobs to be cancelled and stopped by the restarted server", 30, || {
        let jobs: Vec<_> = running.iter().map(|&id| lea.job(id)).collect::<Result<_, _>>().ok()?;
        jobs.iter().all(|j| !j.state.is_active() && j.parts_running == 0).then_some(jobs)
    });
    for j in &ended {
        assert_eq!(j.state, libra_api::JobState::Cancelled, "{j:?}");
    }
    let s = wait_until("the sweep's cancel recorded", || {
        lea.sweep(sweep.id).ok().filter(|s| s.state == "cancelled" && s.finished.is_some())
    });
    // The sweep paid what the cluster charged, the CPU to each kill included.
    let paid: Money = ended.iter().map(|j| j.charged).sum();
    assert_eq!(s.spent, paid, "the sweep's spending against the cluster's charges: {ended:?}");
    assert_eq!(lea.balance().unwrap().held, Money::ZERO);
}

/// A hosted sweep restored from a backup onto a server that lost its sweeps' directory (a new
/// machine, a dead disk; the backup carries the sweeps' database, not their work directories):
/// the sweep takes its jobs on the cluster up by their keys and submits none a second time. Its
/// random key was kept in its work directory alone: restored, its attempts had new keys, found
/// nothing, and their jobs were submitted again while the first ran on, paid for twice.
#[test]
fn a_hosted_sweep_restored_without_its_work_directory_submits_none_of_its_jobs_again() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 1.0, 30.0);
    let lea = cl.user("lea", 1000);
    let (sweep, running) = busy_hosted_sweep(&cl, &lea, 2, "restored");
    let admin_token = Client::new(&cl.url, None).login("admin", ADMIN_PW).unwrap().token;
    let file = cl.dir.join("backup.db");
    let b = Command::new(EXE)
        .args(["admin", "backup"])
        .arg(&file)
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", &admin_token)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    cl.kill_server();
    // The store and the sweeps' directory lost; the backup restored in their place.
    for f in ["server.db", "server.db-wal", "server.db-shm"] {
        let _ = std::fs::remove_file(cl.dir.join(f));
    }
    std::fs::remove_dir_all(cl.dir.join("sweeps")).unwrap();
    let r =
        Command::new(EXE).args(["server", "--restore"]).arg(&file).arg("--db").arg(&cl.db).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    cl.start_server();
    wait_until("the restored sweep's engine", || {
        lea.sweep(sweep.id).ok().filter(|s| s.state == "running" && s.jobs.running == 2)
    });
    // Its jobs are the ones it had: none submitted again (watched for 5 s: the period is 0.5 s).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let ids: Vec<u64> = lea.jobs(false).unwrap().iter().map(|j| j.id).collect();
        assert!(ids.iter().all(|id| running.contains(id)), "jobs submitted again: {ids:?} (had {running:?})");
        std::thread::sleep(Duration::from_millis(200));
    }
    // And it still steers them: cancelled, each paid for once, what the cluster charged.
    lea.sweep_action(sweep.id, "cancel").unwrap();
    let ended = wait_for("the sweep's jobs to be cancelled and stopped", 30, || {
        let jobs: Vec<_> = running.iter().map(|&id| lea.job(id)).collect::<Result<_, _>>().ok()?;
        jobs.iter().all(|j| j.state == libra_api::JobState::Cancelled && j.parts_running == 0).then_some(jobs)
    });
    let paid: Money = ended.iter().map(|j| j.charged).sum();
    let s = wait_for("the sweep's books to take the final charges", 20, || {
        lea.sweep(sweep.id).ok().filter(|s| s.finished.is_some() && s.spent == paid)
    });
    assert!(s.spent > Money::ZERO);
    assert_eq!(lea.balance().unwrap().charged, paid);
}

#[test]
fn logout_passwd_disable_and_audit_from_the_command_line() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let mia = cl.user("mia", 100);
    let (ok, out, err) =
        cli_env(&cl, &["login", "--server", &cl.url, "--user", "mia"], &[("LIBRA_PASSWORD", "pw-mia")]);
    assert!(ok && out.contains("works until"), "{out}{err}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cl.dir.join("cli-config/login.json")).unwrap())
            .unwrap();
    let first_token = saved["token"].as_str().unwrap().to_string();

    // passwd: the old password is required; mia's other token (the client above) is revoked.
    let (ok, _, err) =
        cli_env(&cl, &["passwd"], &[("LIBRA_PASSWORD", "nope"), ("LIBRA_NEW_PASSWORD", "pw-mia-2")]);
    assert!(!ok && err.contains("old_password"), "{err}");
    let (ok, out, err) =
        cli_env(&cl, &["passwd"], &[("LIBRA_PASSWORD", "pw-mia"), ("LIBRA_NEW_PASSWORD", "pw-mia-2")]);
    assert!(ok && out.contains("password changed for mia"), "{out}{err}");
    assert_eq!(mia.balance().unwrap_err().status(), Some(401));
    let (ok, out, _) = cli(&cl, &["balance"]);
    assert!(ok && out.contains("mia"), "{out}");
    // Logging in again without --server goes where the saved login went (not to the default
    // port, where no server is).
    let (ok, out, err) = cli_env(&cl, &["login", "--user", "mia"], &[("LIBRA_PASSWORD", "pw-mia-2")]);
    assert!(ok && out.contains(&format!("logged in to {} as mia", cl.url)), "{out}{err}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cl.dir.join("cli-config/login.json")).unwrap())
            .unwrap();
    let saved_token = saved["token"].as_str().unwrap().to_string();
    assert_ne!(saved_token, first_token, "a new login saves a new token");

    // logout: revoked on the server, forgotten here.
    let (ok, out, err) = cli(&cl, &["logout"]);
    assert!(ok && out.contains("revoked"), "{out}{err}");
    assert!(!cl.dir.join("cli-config/login.json").exists());
    let e = Client::new(&cl.url, Some(saved_token)).balance().unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
    // Again: nothing to revoke or forget, which is done, not an error about a missing server.
    let (ok, out, err) = cli(&cl, &["logout"]);
    assert!(ok && out.contains("not logged in") && out.contains("nothing to log out"), "{out}{err}");

    // An administrator disables mia: her running job is cancelled and its hold released.
    let mia = Client::new(&cl.url, Some(Client::new(&cl.url, None).login("mia", "pw-mia-2").unwrap().token));
    let job = mia.submit(&burn(30.0, 40.0, 600.0, 50)).unwrap();
    wait_running(&mia, job.id);
    let (ok, out, err) =
        cli_env(&cl, &["login", "--server", &cl.url, "--user", "admin"], &[("LIBRA_PASSWORD", ADMIN_PW)]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = cli(&cl, &["admin", "user", "disable", "mia", "--json"]);
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["cancelled_jobs"], serde_json::json!([job.id]), "{r}");
    let admin = cl.admin();
    let j = wait_done(&admin, job.id);
    assert_eq!(j.state, libra_api::JobState::Cancelled);
    // The job's processes are gone, and nothing is held for it.
    wait_until("the job's processes to end", || job_pids(&cl, job.id).is_empty().then_some(()));
    let users = admin.users().unwrap();
    let m = users.iter().find(|u| u.name == "mia").unwrap();
    assert_eq!((m.state.as_str(), m.held), ("disabled", Money::ZERO), "{m:?}");
    let (ok, out, _) = cli(&cl, &["admin", "user", "list"]);
    assert!(ok && out.contains("disabled"), "{out}");

    // The audit log from the command line: the disable, and the refused passwd, with callers.
    let (ok, out, err) = cli(&cl, &["admin", "audit", "--json", "--limit", "50"]);
    assert!(ok, "{err}");
    let log: Vec<libra_api::AuditEntry> = serde_json::from_str(&out).unwrap();
    assert!(log.len() <= 50);
    assert!(
        log.iter().any(|e| e.path == "/api/admin/users/mia/disable"
            && e.caller.as_deref() == Some("admin")
            && e.status == 200),
        "{log:#?}"
    );
    assert!(
        log.iter().any(|e| e.path == "/api/passwd" && e.status == 403 && e.caller.as_deref() == Some("mia")),
        "{log:#?}"
    );
    let (ok, out, _) = cli(&cl, &["admin", "audit", "--limit", "3"]);
    assert!(ok && out.contains("CALLER") && out.contains("admin"), "{out}");
    let (ok, _, err) = cli(&cl, &["admin", "user", "remove", "nobody"]);
    assert!(!ok && err.contains("does not exist"), "{err}");

    // A removed user can be given nothing: no credit (taking it back is allowed), no account.
    let (ok, out, err) = cli(&cl, &["admin", "user", "remove", "mia"]);
    assert!(ok && out.contains("user mia is now removed; 0 tokens revoked"), "{out}{err}");
    let (ok, _, err) = cli(&cl, &["admin", "credit", "mia", "5"]);
    assert!(!ok && err.contains("user: mia was removed: credit can only be taken back"), "{err}");
    let (ok, _, err) = cli(&cl, &["admin", "account", "deposit", "mia", "5"]);
    assert!(!ok && err.contains("user: mia was removed"), "{err}");
    let (ok, out, err) = cli(&cl, &["admin", "credit", "mia", "-5"]);
    assert!(ok && out.contains("mia: 95.00 available"), "{out}{err}");
    let (ok, _, err) = cli(&cl, &["admin", "account", "create", "lab"]);
    assert!(ok, "{err}");
    let (ok, _, err) = cli(&cl, &["admin", "account", "add-user", "lab", "mia"]);
    assert!(!ok && err.contains("user: mia was removed; nothing can change it"), "{err}");
    let (ok, _, err) = cli(&cl, &["admin", "credit", "mia", "0"]);
    assert!(!ok && err.contains("amount: 0.00 is not accepted"), "{err}");
}
