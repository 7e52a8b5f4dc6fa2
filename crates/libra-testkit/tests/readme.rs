//! The README's commands for a fresh machine work as it spells them. Each command is read out of
//! README.md's "On a fresh machine" section (its indented code blocks), never copied here, so
//! the README and this test cannot drift apart.
//!
//! It lives in this crate, with the package test, because both test the workspace as a whole
//! (its README, its Debian package) and both need the release binary: `cargo test --workspace`
//! runs this crate's tests last, so CI builds that binary beside the other tests (`.ci/run`)
//! instead of waiting for it in the middle of them.

use libra_testkit::{as_from_a_shell, wait_gone, Cleanup, Lines};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The port `libra up` listens on unless told otherwise (the README's command does not).
const DEFAULT_PORT: u16 = 7878;

/// The commands run here each build and run the release binary and load the machine; one at a
/// time, so the demo's deadlines are not raced by the simulator.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn workspace() -> PathBuf {
    std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap()
}

/// The README's commands for a fresh machine, in the order it gives them.
fn fresh_machine_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("reading README.md");
    let heading = "\n## On a fresh machine\n";
    let start =
        readme.find(heading).expect("README.md has no '## On a fresh machine' section") + heading.len();
    let section = &readme[start..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    // Markdown's indented code blocks: lines of four spaces.
    section
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The README's command that `what` describes, found by `is_it`.
fn readme_command(what: &str, is_it: impl Fn(&[&str]) -> bool) -> String {
    let cmds = fresh_machine_commands();
    cmds.iter().find(|c| is_it(&c.split_whitespace().collect::<Vec<_>>())).cloned().unwrap_or_else(|| {
        panic!(
            "README.md's 'On a fresh machine' section has no indented {what} command (it has {cmds:?}): README.md and this test must agree"
        )
    })
}

fn main_command() -> String {
    readme_command("`cargo run ... -- up`", |w| w.starts_with(&["cargo", "run"]) && w.last() == Some(&"up"))
}

fn sim_command() -> String {
    readme_command("`cargo run ... -- sim ...`", |w| w.starts_with(&["cargo", "run"]) && w.contains(&"sim"))
}

fn test_command() -> String {
    readme_command("`cargo test ...`", |w| w.starts_with(&["cargo", "test"]))
}

/// Runs a README command as a shell would: `sh -c` with its exact text, in the workspace root,
/// in a process group of its own (as a terminal runs a foreground job), with the data and
/// configuration directories in `home` so that the developer's own state is left alone.
fn shell(cmd: &str, home: &std::path::Path) -> Command {
    let mut c = Command::new("sh");
    as_from_a_shell(&mut c)
        .args(["-c", cmd])
        .current_dir(workspace())
        .env("LIBRA_DATA_DIR", home.join("data"))
        .env("LIBRA_CONFIG_DIR", home.join("config"))
        .env_remove("LIBRA_SERVER")
        .env_remove("LIBRA_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    c
}

/// Keeps the last lines of a child's standard error (cargo's build output), for messages.
fn tail_of(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        let _ = r.read_to_string(&mut all);
        let lines: Vec<&str> = all.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    })
}

#[test]
fn the_main_command_runs_the_demo_then_serves_until_ctrl_c() {
    let cmd = main_command();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = TcpListener::bind(("127.0.0.1", DEFAULT_PORT)) {
        panic!(
            "port {DEFAULT_PORT} on 127.0.0.1 is taken ({e}): the README's `{cmd}` serves there; stop whatever listens on it (another `libra up`?) and run this test again"
        );
    }
    let home = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(home.path().display().to_string());
    let t0 = Instant::now();
    let mut child = shell(&cmd, home.path()).spawn().unwrap();
    let mut out = Lines::new(child.stdout.take().unwrap());
    let err = tail_of(child.stderr.take().unwrap());
    // The first time, cargo builds the release binary: minutes on a small machine.
    if let Err(e) = out.until("serving until interrupted", Duration::from_secs(45 * 60)) {
        // SAFETY: kill(2) on the process group this test started, so that its standard error
        // closes and can be shown.
        unsafe {
            libc::kill(-(child.id() as i32), libc::SIGKILL);
        }
        panic!("`{cmd}`: {e}\nits standard error ends:\n{}", err.join().unwrap());
    }
    let took = t0.elapsed();
    let seen = out.seen.clone();
    for want in [
        "sign in as demo, password ",
        "== demo",
        "accepted on",
        "REJECTED",
        "suggestion:",
        "resubmitting with the suggestion",
        "balance:",
    ] {
        assert!(seen.contains(want), "no '{want}' in the output of `{cmd}`:\n{seen}");
    }
    let resubmitted = &seen[seen.find("resubmitting with the suggestion").unwrap()..];
    assert!(resubmitted.lines().nth(1).is_some_and(|l| l.contains("accepted on")), "{seen}");
    // Four accepted jobs (three relaxed, the resubmitted urgent one), all done by their deadlines.
    assert_eq!(seen.matches("COMPLETED").count(), 4, "{seen}");
    assert!(!seen.contains("FAILED") && !seen.contains("DEADLINE"), "{seen}");
    let balance = seen.lines().find(|l| l.starts_with("balance:")).unwrap();
    assert!(balance.contains(" available, ") && balance.contains(" charged"), "{balance}");

    // Ctrl-C, as a terminal sends it: SIGINT to the whole foreground process group.
    // SAFETY: kill(2) on the process group this test started (its leader is our child).
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGINT);
    }
    let t1 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(30),
            "`{cmd}` did not stop on Ctrl-C:\n{}",
            out.rest(Duration::ZERO)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Our child is the `sh -c` that stands in for the user's shell, and it shares the job's
    // process group (rustup and cargo exec the binary, dash does not): being non-interactive it
    // dies of the SIGINT, which an interactive shell, outside the job's group, would not. What
    // the user sees is `up`'s own answer: it says it stops the cluster and closes its output
    // when it exits.
    assert!(
        status.success() || status.signal() == Some(libc::SIGINT),
        "`{cmd}` ended with {status} on Ctrl-C:\n{}",
        out.rest(Duration::ZERO)
    );
    out.until_end(Duration::from_secs(30), &format!("`{cmd}` after Ctrl-C"));
    let err = err.join().unwrap();
    let rest = &out.seen[seen.len()..];
    assert!(
        rest.contains("stopping the cluster"),
        "`{cmd}` did not stop on Ctrl-C as it should:\n{rest}\n{err}"
    );
    assert!(!err.lines().any(|l| l.starts_with("error")), "`{cmd}` reported an error on Ctrl-C:\n{err}");
    wait_gone(&home.path().display().to_string());
    let addr = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT));
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "something still listens on port {DEFAULT_PORT} after Ctrl-C"
    );
    eprintln!("`{cmd}` served after {took:?} (cargo's build included)");
}

/// The simulator's comparison is cheap enough to run as written (seconds once built): every
/// policy of the papers over the SDSC SP2 trace.
#[test]
fn the_simulator_command_compares_every_policy() {
    let cmd = sim_command();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = tempfile::tempdir().unwrap();
    let out = shell(&cmd, home.path()).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "`{cmd}` failed ({}): {stderr}\n{stdout}", out.status);
    assert!(stdout.contains("SDSC-SP2-1998-4.2-cln.swf.gz: 5000 jobs"), "{stdout}");
    for policy in ["libra", "libra+$", "fifo", "fcfs-bf", "sjf-bf", "edf-bf"] {
        assert!(
            stdout.lines().any(|l| l.split(['│', '┆']).nth(1).map(str::trim) == Some(policy)),
            "no row for {policy} in the output of `{cmd}`:\n{stdout}"
        );
    }
}

/// Running the README's test command from inside a test would run this test again, and cargo
/// would wait on the build directory the outer `cargo test` holds; and CI already runs it: CI
/// runs `.ci/run` on a clean checkout. So: `.ci/run` must run exactly the README's command, and
/// the command must be one cargo accepts (each of its options is one `cargo test` knows, and
/// with `--locked`, Cargo.lock is up to date), which costs no build.
#[test]
fn ci_runs_the_readme_test_command_and_cargo_accepts_it() {
    let cmd = test_command();
    let ci = std::fs::read_to_string(workspace().join(".ci/run")).expect("reading .ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == cmd),
        "`.ci/run` does not run the README's test command `{cmd}` as it is written"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let help = Command::new(&cargo).args(["test", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let words: Vec<&str> = cmd.split_whitespace().collect();
    for w in &words[2..] {
        let flag = w.split('=').next().unwrap();
        assert!(
            flag.starts_with('-')
                && help.split(|c: char| !(c.is_alphanumeric() || c == '-')).any(|h| h == flag),
            "`{cmd}`: `{w}` is not an option of `cargo test`"
        );
    }
    if words.contains(&"--locked") {
        let meta = Command::new(&cargo)
            .args(["metadata", "--locked", "--offline", "--format-version", "1"])
            .current_dir(workspace())
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            meta.status.success(),
            "`{cmd}` would fail: Cargo.lock is not up to date: {}",
            String::from_utf8_lossy(&meta.stderr)
        );
    }
}
