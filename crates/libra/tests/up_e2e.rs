//! `libra up`, the README's main job: the scripted demo on a fresh state directory (accepted
//! jobs, a rejection with a suggestion that is then accepted, the jobs finishing, the balance),
//! how to sign in and which commands to type, the demo run once per state directory, a saved
//! login of someone else's left alone, and a cluster that stops with `up` when `up` is told to
//! stop.

mod common;

use common::{processes_mentioning, wait_cluster_gone, wait_gone, word_after, Cleanup, Lines};
use libra_api::{Client, LedgerKind};
use libra_core::Money;
use libra_testkit::free_port;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_libra");

/// A PATH with no `libra` on it (as after `cargo run`, or a fresh clone).
const NO_LIBRA_PATH: &str = "/usr/bin:/bin";

fn up(dir: &Path, port: u16, extra: &[&str]) -> Command {
    up_at(dir, &dir.join("state"), port, extra)
}

fn up_at(dir: &Path, state: &Path, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(["up", "--nodes", "2", "--cpus-per-node", "0.5", "--port", &port.to_string(), "--state"])
        .arg(state)
        .args(extra)
        .env("LIBRA_CONFIG_DIR", dir.join("config"))
        .env("LIBRA_DATA_DIR", dir.join("data"))
        .env("PATH", NO_LIBRA_PATH)
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_SERVER");
    c
}

fn ok(out: &Output, what: &str) -> String {
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}): {stderr}\n{stdout}", out.status);
    stdout.into_owned()
}

fn saved_login(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("config").join("login.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn save_login(dir: &Path, server: &str, user: &str, token: &str) {
    std::fs::create_dir_all(dir.join("config")).unwrap();
    let l = serde_json::json!({ "server": server, "user": user, "token": token });
    std::fs::write(dir.join("config").join("login.json"), l.to_string()).unwrap();
}

/// `up` started in a process group of its own (as a terminal or a service manager starts it),
/// once its output has said `line`.
fn in_a_group_of_its_own(up: &mut Command, line: &str) -> (std::process::Child, Lines) {
    let mut child = up.stdout(Stdio::piped()).process_group(0).spawn().unwrap();
    let mut out = Lines::new(child.stdout.take().unwrap());
    if let Err(e) = out.until(line, Duration::from_secs(60)) {
        panic!("`libra up`, waiting for '{line}': {e}");
    }
    (child, out)
}

/// Sends `sig` to the whole process group of `child` (as Ctrl-C, `timeout` or `kill -PGID` do).
fn signal_group(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the process group of a child this test started.
    unsafe {
        libc::kill(-(child.id() as i32), sig);
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The full path `up` prints for itself (`current_exe`, which resolves symbolic links).
fn exe_path() -> PathBuf {
    std::fs::canonicalize(EXE).unwrap()
}

fn assert_demo_ran(stdout: &str, stderr: &str) {
    let text = format!("{stdout}{stderr}");
    for want in ["accepted on", "REJECTED", "suggestion:", "resubmitting with the suggestion", "balance:"] {
        assert!(text.contains(want), "no '{want}' in the demo's output:\n{text}");
    }
    // Every accepted demo job ended COMPLETED (four of them; the rejected one is not listed).
    assert_eq!(stdout.matches("COMPLETED").count(), 4, "{stdout}");
    assert!(!stdout.contains("FAILED") && !stdout.contains("DEADLINE"), "{stdout}");
}

#[test]
fn up_runs_the_demo_once_keeps_others_logins_and_stops_with_its_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let needle = state.display().to_string();
    let _cleanup = Cleanup(needle.clone());
    // A login to a cluster on this machine that is gone: `up` may take its place.
    save_login(dir.path(), &format!("http://127.0.0.1:{}", free_port()), "ghost", "stale");

    // First `up` of a state directory: the demo, and how to sign in and what to type.
    let first = up(dir.path(), free_port(), &["--exit"]).output().unwrap();
    let stdout = ok(&first, "libra up --exit");
    assert_demo_ran(&stdout, &String::from_utf8_lossy(&first.stderr));
    let password =
        word_after(&stdout, "sign in as demo, password ").expect("the portal's password").to_string();
    assert_eq!(std::fs::read_to_string(state.join("demo-password")).unwrap().trim(), password);
    assert!(password.len() >= 16 && password != "demo", "{password}");
    assert!(stdout.contains(&format!("{}/admin-password", state.display())), "{stdout}");
    // Started as root, the demo user's jobs are root's, and `up` says so; as anyone else, not.
    // SAFETY: geteuid has no memory effects.
    let as_root = unsafe { libc::geteuid() } == 0;
    assert_eq!(stdout.contains("the demo user's jobs run as root"), as_root, "{stdout}");
    // libra is not on PATH: every printed command names this binary by its full path.
    let exe = exe_path().display().to_string();
    let commands: Vec<&str> = stdout.lines().filter(|l| l.contains(" status; ")).collect();
    assert_eq!(commands.len(), 1, "{stdout}");
    let status_cmds = commands[0].trim().to_string();
    assert!(status_cmds.starts_with(&format!("{exe} status; {exe} quote; ")), "{status_cmds}");
    assert!(stdout.contains(&format!("try:  {exe} submit --estimate")), "{stdout}");
    assert!(stdout.contains("in place of ghost's login"), "{stdout}");
    assert_eq!(saved_login(dir.path())["user"], "demo");
    let demo_token = saved_login(dir.path())["token"].as_str().unwrap().to_string();
    // Secrets are the owner's only.
    assert_eq!(mode(&state), 0o700);
    for f in ["join-token", "admin-password", "demo-password"] {
        assert_eq!(mode(&state.join(f)), 0o600, "{f}");
    }
    let printed = word_after(&stdout, "balance: ").unwrap();
    let charged: Money = word_after(&stdout, "on hold, ").unwrap().parse().unwrap();
    assert!(charged > Money::ZERO, "{stdout}");
    wait_gone(&needle);

    // Second `up`, serving: no demo, nothing charged or credited, and the printed commands and
    // password work as printed.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = up(dir.path(), port, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut out = Lines::new(child.stdout.take().unwrap());
    if let Err(e) = out.until("serving until interrupted", Duration::from_secs(60)) {
        panic!("the second `libra up`: {e}");
    }
    assert!(
        out.seen.contains("the demo already ran in this state directory") && out.seen.contains("--demo"),
        "{}",
        out.seen
    );
    assert!(!out.seen.contains("== demo"), "the demo ran again:\n{}", out.seen);
    assert!(out.seen.contains(&format!("sign in as demo, password {password} ")), "{}", out.seen);
    let demo = Client::new(&url, Some(demo_token));
    let b = demo.balance().unwrap();
    assert_eq!((b.available.to_string().as_str(), b.charged), (printed, charged), "{}", out.seen);
    let ledger = demo.ledger().unwrap();
    let deposits: Vec<_> = ledger.iter().filter(|e| e.kind == LedgerKind::Deposit).collect();
    assert_eq!(deposits.len(), 1, "the demo user was credited again: {ledger:?}");
    assert_eq!(deposits[0].amount, Money::from_credits(1000));
    Client::new(&url, None).login("demo", &password).expect("the printed portal password");
    let env = |c: &mut Command| {
        c.env("LIBRA_CONFIG_DIR", dir.path().join("config")).env("PATH", NO_LIBRA_PATH);
    };
    let mut sh = Command::new("sh");
    sh.args(["-c", &status_cmds]);
    env(&mut sh);
    ok(&sh.output().unwrap(), &status_cmds);

    // An administrator logs in; a second `up` on the same port says the port is taken instead
    // of joining the first.
    let admin_pw = std::fs::read_to_string(state.join("admin-password")).unwrap();
    let mut login = Command::new(EXE);
    login.args(["login", "--server", &url, "--user", "admin"]).env("LIBRA_PASSWORD", admin_pw.trim());
    env(&mut login);
    ok(&login.output().unwrap(), "libra login as admin");
    let admin_login = saved_login(dir.path());
    assert_eq!(admin_login["user"], "admin");
    let second = up(dir.path(), port, &["--no-demo", "--exit"]).output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && err.contains("--port") && err.contains("another"), "{err}");
    assert!(!processes_mentioning(&needle).is_empty());
    // Serving: a SIGTERM to `up` stops the server and the node agents too.
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "up ended with {status} on SIGTERM");
    wait_gone(&needle);
    assert!(
        Client::new(&url, None).get::<serde_json::Value>("/api/health").is_err(),
        "the server still answers"
    );
    // No job runs on, so nothing of its node agents' control groups is left behind.
    let agents: Vec<PathBuf> = std::fs::read_dir(&state)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("node-") && e.path().is_dir())
        .map(|e| e.path())
        .collect();
    assert!(!agents.is_empty(), "no node work directory in {}", state.display());
    for workdir in &agents {
        let name = workdir.file_name().unwrap().to_string_lossy().into_owned();
        let group = libra_node::group_name(&name, workdir);
        for root in [
            "/sys/fs/cgroup/cpu/libra",
            "/sys/fs/cgroup/cpuacct/libra",
            "/sys/fs/cgroup/memory/libra",
            "/sys/fs/cgroup/libra",
        ] {
            for dir in [Path::new(root).join(&group), Path::new(root).join(format!("{group}-agent"))] {
                assert!(!dir.exists(), "{} left behind by a stopped `libra up`", dir.display());
            }
        }
    }

    // `--demo` runs the demo again, as the demo user, and the administrator's login to this
    // cluster (same port, so same server) stays.
    let again = up(dir.path(), port, &["--demo", "--exit"]).output().unwrap();
    let stdout = ok(&again, "libra up --demo --exit");
    // That it ran is the point here; how its jobs end is checked on the first run (checking it
    // twice would only double the test's exposure to a machine too loaded for the deadlines).
    assert!(stdout.contains("== demo: watching them run") && stdout.contains("balance:"), "{stdout}");
    assert!(stdout.contains("use your saved login (admin"), "{stdout}");
    assert_eq!(saved_login(dir.path()), admin_login, "`up` replaced the administrator's login");
    wait_gone(&needle);

    // A login to another machine's cluster is neither contacted nor replaced.
    let remote = "http://192.0.2.1:7878";
    save_login(dir.path(), remote, "alice", "hers");
    let third = up(dir.path(), free_port(), &["--exit"]).output().unwrap();
    let stdout = ok(&third, "libra up --exit with a remote login");
    assert!(stdout.contains(&format!("(alice at {remote}")) && stdout.contains("is kept"), "{stdout}");
    assert!(stdout.contains(&format!("{exe} login --server http://127.0.0.1:")), "{stdout}");
    assert_eq!(saved_login(dir.path())["user"], "alice");
    wait_gone(&needle);

    // Ctrl-C (SIGINT to the process group, as a terminal sends it) during the demo of a fresh
    // state directory stops `up` and its cluster there, and the demo is left for the next `up`.
    let fresh = dir.path().join("fresh");
    let needle = fresh.display().to_string();
    let _cleanup_fresh = Cleanup(needle.clone());
    let (mut child, mut out) = in_a_group_of_its_own(
        up_at(dir.path(), &fresh, free_port(), &[]).stderr(Stdio::piped()),
        "== demo: watching them run",
    );
    signal_group(&child, libc::SIGINT);
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the demo went on after Ctrl-C:\n{}",
            out.rest(Duration::ZERO)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success() && err.contains("interrupted during the demo"), "{status}: {err}");
    assert!(err.contains("jobs already started keep running"), "{err}");
    // The server and the agents go with `up`. The keepers of jobs still running may stay, as the
    // message says (a relaxed job capped at its small share can take half a minute more): they
    // are the only ones left.
    wait_cluster_gone(&needle);
    assert!(!fresh.join("demo-done").exists(), "an interrupted demo counts as run");
}

/// A stop sent to `up`'s whole process group (`timeout`, `kill -TERM -PGID`, a service manager
/// stopping a unit) reaches each node agent twice at once: from the sender and from `up`
/// stopping its children. The agents took the second as "now" and died mid-clean-up, their file
/// systems made ahead left mounted under the state directory; they stop as on one signal now.
#[test]
fn a_stop_sent_to_ups_whole_process_group_leaves_nothing_mounted() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let needle = state.display().to_string();
    let _cleanup = Cleanup(needle.clone());
    let (mut child, _out) = in_a_group_of_its_own(
        up(dir.path(), free_port(), &["--no-demo"]).stderr(Stdio::null()),
        "serving until interrupted",
    );
    // As root the agents make scratch file systems ahead: wait for some, so that there is
    // something to clean up.
    // SAFETY: geteuid has no memory effects.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        let t0 = Instant::now();
        while libra_node::scratch::mounts_under(&state).len() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(60), "no file system made ahead");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    signal_group(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    assert!(status.success(), "up ended with {status} on SIGTERM to its group");
    wait_gone(&needle);
    assert_eq!(libra_node::scratch::mounts_under(&state), Vec::<PathBuf>::new(), "left mounted");
    for node in ["node-1", "node-2"] {
        let log = std::fs::read_to_string(state.join(format!("{node}.log"))).unwrap();
        assert!(log.contains("stopped on a signal"), "{node} did not stop as asked:\n{log}");
    }
}
