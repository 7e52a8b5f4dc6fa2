//! End to end: sweeps hosted by a real `libra server` process, driven by the `libra sweep
//! ... --server URL` commands with the saved login: a sweep over test queues is started
//! detached, the server is killed with SIGKILL mid-sweep and started again, and the sweep
//! finishes without running again any job that had finished; it is steered from the command
//! line; another user is refused; a sweep run in the foreground follows it to the end.

use libra_api::{Client, SweepInfo, UserAdd};
use libra_core::Money;
use libra_testkit::{free_port, wait_until};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_libra");
const ADMIN_PW: &str = "admin-pw";

/// 40 jobs of 200 ms on two test queues of two slots: about two seconds of sweep.
const PLAN: &str = "parameter x integer range from 1 to 40 step 1\ntask main\n    exec true\nendtask\n";
const RES: &str = r#"
[[resource]]
name = "cheap"
kind = "testqueue"
slots = 2
price = 10
wall = 1
time_scale = 0.2

[[resource]]
name = "dear"
kind = "testqueue"
slots = 2
price = 20
wall = 1
time_scale = 0.2
"#;

struct Server {
    dir: PathBuf,
    port: u16,
    url: String,
    child: Option<Child>,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = free_port();
        let mut s =
            Server { dir: dir.to_path_buf(), port, url: format!("http://127.0.0.1:{port}"), child: None };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("server.log")).unwrap();
        let child = Command::new(EXE)
            .args(["server", "--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--no-fsync", "--db"])
            .arg(self.dir.join("server.db"))
            .env("LIBRA_JOIN_TOKEN", "test-join-token")
            .env("LIBRA_ADMIN_PASSWORD", ADMIN_PW)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let anon = Client::new(&self.url, None);
        wait_until("the server", || anon.get::<serde_json::Value>("/api/openapi.json").ok());
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap(); // SIGKILL
            c.wait().unwrap();
        }
    }

    fn client(&self, user: &str, pw: &str) -> Client {
        let t = Client::new(&self.url, None).login(user, pw).unwrap().token;
        Client::new(&self.url, Some(t))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Users of the server (password `pw-NAME`) whose jobs run as this test's own Unix account.
fn add_users(admin: &Client, users: &[&str]) {
    for u in users {
        admin
            .user_add(&UserAdd {
                unix_user: libra_node::proc::Identity::current().map(|i| i.user),
                allow_root: true,
                ..UserAdd::new(u, &format!("pw-{u}"), false)
            })
            .unwrap();
    }
}

/// `libra sweep ...` with its own configuration and data directories (the saved login).
fn libra(dir: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("LIBRA_CONFIG_DIR", dir.join("config"))
        .env("LIBRA_DATA_DIR", dir.join("data"))
        .env("LIBRA_BROKER_DB", dir.join("local-broker.db"))
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_SERVER")
        .output()
        .unwrap()
}

fn ok(o: Output) -> String {
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "failed: {err}\n{out}");
    out.into_owned()
}

fn json(o: Output) -> serde_json::Value {
    let out = ok(o);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn hosted_sweep_survives_kill_9_and_is_steered_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("libra-sweep-hosted-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.pln"), PLAN).unwrap();
    std::fs::write(dir.join("res.toml"), RES).unwrap();
    let mut server = Server::start(&dir);
    let url = server.url.clone();
    let admin = server.client("admin", ADMIN_PW);
    add_users(&admin, &["alice", "bob"]);
    std::fs::write(dir.join("alice-password"), "pw-alice").unwrap();
    let pw_file = dir.join("alice-password").display().to_string();
    ok(libra(&dir, &["login", "--server", &url, "--user", "alice", "--password-file", &pw_file]));
    let plan = dir.join("plan.pln").display().to_string();
    let res = dir.join("res.toml").display().to_string();

    // Started detached with the saved login: the id comes back at once.
    let started = json(libra(
        &dir,
        &["sweep", "run", &plan, "-r", &res, "--deadline", "10m", "--budget", "1000"]
            .into_iter()
            .chain(["--server", &url, "--detach", "--json"])
            .collect::<Vec<_>>(),
    ));
    let id = started["experiment"].as_i64().unwrap();
    let alice = server.client("alice", "pw-alice");

    // SIGKILL the server mid-sweep; the jobs seen done then must not run again.
    let done_before: HashSet<u64> = wait_until("some jobs done", || {
        let done: HashSet<u64> =
            alice.sweep_results(id).ok()?.into_iter().filter(|j| j.state == "done").map(|j| j.job).collect();
        (done.len() >= 6).then_some(done)
    });
    server.kill();
    assert!(done_before.len() < 40, "the sweep finished before the kill; make its jobs longer");
    server.spawn();
    let alice = server.client("alice", "pw-alice");
    let end: SweepInfo = wait_until("the resumed sweep to finish", || {
        alice.sweep(id).ok().filter(|s| s.state != "running" && s.state != "paused")
    });
    assert_eq!((end.state.as_str(), end.jobs.done), ("done", 40), "{end:?}");
    assert!(end.spent <= end.budget);
    let results = json(libra(&dir, &["sweep", "results", "--server", &url, &id.to_string(), "--json"]));
    let jobs = results["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 40);
    for j in jobs {
        let n = j["job"].as_u64().unwrap();
        if done_before.contains(&n) {
            assert_eq!(j["attempts"], 1, "job {n} was done before the kill and ran again: {j}");
        }
        assert_eq!(j["state"], "done", "{j}");
    }

    // Steering from the command line, through the API.
    let s = json(libra(&dir, &["sweep", "set-budget", "--server", &url, &id.to_string(), "2000", "--json"]));
    assert_eq!(s["budget_cents"], Money::from_credits(2000).cents());
    let s = json(libra(&dir, &["sweep", "set-deadline", "--server", &url, &id.to_string(), "2h", "--json"]));
    let left = s["deadline"].as_f64().unwrap() - s["now"].as_f64().unwrap();
    assert!((left - 7200.0).abs() < 5.0, "deadline in {left} s");
    let o = libra(&dir, &["sweep", "pause", "--server", &url, &id.to_string()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("is done"), "{o:?}");
    let table = ok(libra(&dir, &["sweep", "status", "--server", &url, &id.to_string()]));
    assert!(table.contains("40/40 done") && table.contains("cheap"), "{table}");
    let list = json(libra(&dir, &["sweep", "status", "--server", &url, "--json"]));
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");

    // Another user, with a token of their own: refused, and told why.
    let bob = Client::new(&url, None).login("bob", "pw-bob").unwrap().token;
    // Tokens go to the command in files (a token on the command line is refused).
    std::fs::write(dir.join("bob-token"), &bob).unwrap();
    let bob = dir.join("bob-token").display().to_string();
    let o = libra(&dir, &["sweep", "status", "--server", &url, "--token-file", &bob, &id.to_string()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("403") && err.contains("another user"), "{err}");

    // In the foreground, `run --server` follows the sweep to its end and prints it.
    std::fs::write(dir.join("small.pln"), PLAN.replace("to 40", "to 4")).unwrap();
    let small = dir.join("small.pln").display().to_string();
    let out = ok(libra(
        &dir,
        &["sweep", "run", &small, "-r", &res, "--deadline", "10m", "--budget", "100", "--server", &url],
    ));
    assert!(out.contains("4/4 done") && out.contains(": done"), "{out}");

    // A typo in the plan is caught with its line and column before anything is sent.
    std::fs::write(dir.join("typo.pln"), PLAN.replace("task main", "tsk main")).unwrap();
    let typo = dir.join("typo.pln").display().to_string();
    let o = libra(
        &dir,
        &["sweep", "run", &typo, "-r", &res, "--deadline", "1h", "--budget", "1", "--server", &url],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("line 2, column 1"), "{err}");

    // An administrator's list is everyone's sweeps, with their owners (as on the portal); a
    // plain user's is their own.
    let bobs = json(libra(
        &dir,
        &["sweep", "run", &small, "-r", &res, "--deadline", "10m", "--budget", "100", "--server", &url]
            .into_iter()
            .chain(["--token-file", &bob, "--detach", "--json"])
            .collect::<Vec<_>>(),
    ));
    let admin_token = Client::new(&url, None).login("admin", ADMIN_PW).unwrap().token;
    std::fs::write(dir.join("admin-token"), &admin_token).unwrap();
    let admin_token = dir.join("admin-token").display().to_string();
    let owners = |list: serde_json::Value| -> Vec<(i64, String)> {
        let list = list.as_array().unwrap_or_else(|| panic!("{list}")).clone();
        list.iter().map(|s| (s["id"].as_i64().unwrap(), s["owner"].as_str().unwrap().to_string())).collect()
    };
    let all = owners(json(libra(
        &dir,
        &["sweep", "status", "--server", &url, "--token-file", &admin_token, "--json"],
    )));
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.contains(&(bobs["experiment"].as_i64().unwrap(), "bob".into())), "{all:?}");
    assert_eq!(all.iter().filter(|(_, o)| o == "alice").count(), 2, "{all:?}");
    let table = ok(libra(&dir, &["sweep", "status", "--server", &url, "--token-file", &admin_token]));
    assert!(table.contains("owner") && table.contains("bob") && table.contains("alice"), "{table}");
    let bob_sees =
        owners(json(libra(&dir, &["sweep", "status", "--server", &url, "--token-file", &bob, "--json"])));
    assert_eq!(bob_sees.iter().map(|(_, o)| o.as_str()).collect::<Vec<_>>(), ["bob"]);
    let alice_sees = owners(json(libra(&dir, &["sweep", "status", "--server", &url, "--json"])));
    assert!(alice_sees.len() == 2 && alice_sees.iter().all(|(_, o)| o == "alice"), "{alice_sees:?}");
    let table = ok(libra(&dir, &["sweep", "status", "--server", &url]));
    assert!(!table.contains("owner"), "{table}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `libra sweep run --server` whose first answer is lost on the way (the server made the
/// sweep) tries again with the same idempotency key and gets that sweep: one sweep runs, never a
/// second one beside it spending its own budget. Through the API: the same key, from one
/// request after another or two side by side, makes one sweep; another key makes another; a key
/// is the user's own (another user's same key makes theirs); an unusable key is refused.
#[test]
fn a_hosted_sweep_whose_answer_was_lost_is_made_once() {
    let dir = std::env::temp_dir().join(format!("libra-sweep-idem-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let slow = PLAN.replace("exec true", "exec sleep 5");
    std::fs::write(dir.join("plan.pln"), &slow).unwrap();
    std::fs::write(dir.join("res.toml"), RES).unwrap();
    let server = Server::start(&dir);
    let admin = server.client("admin", ADMIN_PW);
    add_users(&admin, &["carol", "dave"]);
    let proxy = libra_testkit::FaultyProxy::losing(server.port, b"POST /api/sweeps ");
    std::fs::write(dir.join("carol-password"), "pw-carol").unwrap();
    let pw_file = dir.join("carol-password").display().to_string();
    ok(libra(&dir, &["login", "--server", &proxy.url, "--user", "carol", "--password-file", &pw_file]));
    let plan = dir.join("plan.pln").display().to_string();
    let res = dir.join("res.toml").display().to_string();
    let o = libra(
        &dir,
        &["sweep", "run", &plan, "-r", &res, "--deadline", "10m", "--budget", "1000"]
            .into_iter()
            .chain(["--server", &proxy.url, "--detach", "--json"])
            .collect::<Vec<_>>(),
    );
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(proxy.done(), "the proxy lost no answer");
    assert!(said.contains("trying again"), "{said}");
    let id = json(o)["experiment"].as_i64().unwrap();
    let carol = server.client("carol", "pw-carol");
    let made: Vec<i64> = carol.sweeps(false).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(made, [id], "one sweep, the one the command names");

    let req = libra_api::SweepCreate {
        plan: slow,
        resources: RES.into(),
        name: None,
        deadline: None,
        deadline_in: Some(600.0),
        budget: Money::from_credits(100),
        optimise: None,
        max_retries: None,
        estimate: None,
        seed: 0,
    };
    let a = carol.sweep_create_with_key(&req, "k-1").unwrap().id;
    assert_eq!(carol.sweep_create_with_key(&req, "k-1").unwrap().id, a);
    let side_by_side: Vec<i64> = std::thread::scope(|s| {
        let one = || s.spawn(|| carol.sweep_create_with_key(&req, "k-2").unwrap().id);
        let (x, y) = (one(), one());
        vec![x.join().unwrap(), y.join().unwrap()]
    });
    assert_eq!(side_by_side[0], side_by_side[1], "two requests with one key made two sweeps");
    assert!(![id, a].contains(&side_by_side[0]));
    let dave = server.client("dave", "pw-dave");
    let theirs = dave.sweep_create_with_key(&req, "k-1").unwrap().id;
    assert!(![id, a, side_by_side[0]].contains(&theirs), "another user's key gave them carol's sweep");
    assert_eq!(carol.sweeps(false).unwrap().len(), 3);
    assert_eq!(dave.sweeps(false).unwrap().len(), 1);
    let e = carol.sweep_create_with_key(&req, &"k".repeat(500)).unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    assert!(e.to_string().contains("Idempotency-Key"), "{e}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
