//! `libra up`, the README's main job: the scripted demo on a fresh state directory (accepted
//! jobs, a rejection with a suggestion that is then accepted, the jobs finishing, the balance),
//! and a cluster that stops with `up` when `up` is told to stop.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_libra");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Processes whose command line mentions `needle` (the test's own state directory).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

fn up(dir: &Path, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(["up", "--nodes", "2", "--cpus-per-node", "0.5", "--port", &port.to_string(), "--state"])
        .arg(dir.join("state"))
        .args(extra)
        .env("LIBRA_CONFIG_DIR", dir.join("config"))
        .env("LIBRA_DATA_DIR", dir.join("data"))
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_SERVER");
    c
}

/// Stops whatever this test started under its state directory, even when an assertion failed.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in processes_mentioning(&self.0) {
            // SAFETY: kill(2) on processes started by this test (their command line names the
            // test's own temporary state directory).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

fn wait_gone(needle: &str) {
    let t0 = Instant::now();
    while !processes_mentioning(needle).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "cluster processes outlived `libra up`");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn up_runs_the_demo_and_its_cluster_stops_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").display().to_string();
    let _cleanup = Cleanup(state.clone());
    let out = up(dir.path(), free_port(), &["--exit"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "libra up --exit failed: {stderr}\n{stdout}");
    let text = format!("{stdout}{stderr}");
    for want in ["accepted on", "REJECTED", "suggestion:", "resubmitting with the suggestion", "balance:"] {
        assert!(text.contains(want), "no '{want}' in the demo's output:\n{text}");
    }
    // Every accepted demo job ended COMPLETED (four of them; the rejected one is not listed).
    assert_eq!(stdout.matches("COMPLETED").count(), 4, "{stdout}");
    assert!(!stdout.contains("FAILED") && !stdout.contains("DEADLINE"), "{stdout}");
    wait_gone(&state);

    // Serving: a SIGTERM to `up` stops the server and the node agents too.
    let port = free_port();
    let mut child =
        up(dir.path(), port, &["--no-demo"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let client = libra_api::Client::new(&format!("http://127.0.0.1:{port}"), None);
    let t0 = Instant::now();
    while client.get::<serde_json::Value>("/api/openapi.json").is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the server did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Wait for "serving" so that the signal meets the serving loop.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    while !seen.contains("serving until interrupted") {
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap();
        assert!(n > 0, "up ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(!processes_mentioning(&state).is_empty());
    // A second `up` on the same port says the port is taken instead of joining the first.
    let second = up(dir.path(), port, &["--no-demo", "--exit"]).output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && err.contains("--port") && err.contains("another"), "{err}");
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "up ended with {status} on SIGTERM");
    wait_gone(&state);
    assert!(client.get::<serde_json::Value>("/api/openapi.json").is_err(), "the server still answers");
}
