//! Multi-user safety with real processes: secrets never on a command line and private on disk,
//! node agents that keep their own credential across restarts and join again after an
//! administrator forgets them (also in the instant between joining and first reporting), https end to end with a self-signed certificate, and plain http
//! refused beyond loopback.

mod common;

use common::{
    closed_within, connect_from, free_port, open_at_most, processes_mentioning, wait_done, wait_until,
    Cleanup, Cluster, FaultyProxy, Lines, Scratch, ADMIN_PW, EXE, JOIN, SERIAL,
};
use libra_api::{Client, JobState};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("sec-{name}"))
}

/// `libra ARGS` with a clean environment of its own (no saved login, no server or token).
fn libra(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(args)
        .current_dir(dir)
        .env("LIBRA_CONFIG_DIR", dir.join("config"))
        .env("LIBRA_DATA_DIR", dir.join("data"))
        .env_remove("LIBRA_SERVER")
        .env_remove("LIBRA_TOKEN")
        .env_remove("LIBRA_CA")
        .env_remove("LIBRA_JOIN_TOKEN")
        .env_remove("LIBRA_ADMIN_PASSWORD")
        .env_remove("LIBRA_PASSWORD")
        .stdin(Stdio::null());
    c
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every process's command line, NUL-separated arguments joined.
fn all_command_lines() -> Vec<(i32, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            v.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    v
}

#[test]
fn up_keeps_secrets_off_command_lines_and_private_on_disk() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("up");
    let _cleanup = Cleanup(dir.display().to_string());
    let state = dir.join("state");
    let port = free_port();
    let mut up = libra(&dir, &["up", "--nodes", "1", "--cpus-per-node", "0.5", "--no-demo", "--port"])
        .arg(port.to_string())
        .arg("--state")
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = Lines::new(up.stdout.take().unwrap());
    if let Err(e) = out.until("serving until interrupted", Duration::from_secs(60)) {
        panic!("libra up: {e}");
    }
    let credential_file = state.join("node-1").join("node.credential");
    wait_until("the node's credential", || credential_file.exists().then_some(()));
    let secrets: Vec<(&str, String)> = ["join-token", "admin-password", "demo-password"]
        .iter()
        .map(|f| (*f, std::fs::read_to_string(state.join(f)).unwrap().trim().to_string()))
        .chain([("node.credential", std::fs::read_to_string(&credential_file).unwrap().trim().to_string())])
        .collect();
    // The cluster's processes are running (they name the state directory) ...
    let ours = processes_mentioning(&state.display().to_string());
    assert!(ours.len() >= 2, "the server and the node agent: {ours:?}");
    // ... and no process on the machine shows a secret in its arguments.
    for (pid, cmd) in all_command_lines() {
        for (what, secret) in &secrets {
            assert!(secret.len() >= 8);
            assert!(
                !cmd.contains(secret.as_str()),
                "process {pid} shows the {what} on its command line: {cmd}"
            );
        }
    }
    // Secrets and databases are their owner's only.
    assert_eq!(mode(&state), 0o700);
    for f in ["join-token", "admin-password", "demo-password", "server.db"] {
        assert_eq!(mode(&state.join(f)), 0o600, "{f}");
    }
    let wal = state.join("server.db-wal");
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600, "server.db-wal");
    }
    assert_eq!(mode(&state.join("sweeps")), 0o700, "the hosted sweeps' directory");
    assert_eq!(mode(&state.join("sweeps").join("broker.db")), 0o600, "broker.db");
    assert_eq!(mode(&credential_file), 0o600);
    // Others may pass through the node's directory to their jobs, not list it.
    assert_eq!(mode(&state.join("node-1")), 0o711);
    assert_eq!(mode(&dir.join("config").join("login.json")), 0o600);
    assert_eq!(mode(&dir.join("config")), 0o700);
    // SAFETY: SIGTERM to the `libra up` this test started.
    unsafe {
        libc::kill(up.id() as i32, libc::SIGTERM);
    }
    up.wait().unwrap();
}

#[test]
fn secrets_given_on_the_command_line_are_refused_with_the_safe_ways_named() {
    let dir = scratch("flags");
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &["status", "--server", "http://127.0.0.1:9", "--token", "sekrit-token"],
            "--token-file",
            "LIBRA_TOKEN",
        ),
        (
            &["sweep", "status", "--server", "http://127.0.0.1:9", "--token", "sekrit-token"],
            "--token-file",
            "LIBRA_TOKEN",
        ),
        (
            &["node", "--server", "http://127.0.0.1:9", "--join-token", "sekrit-token"],
            "--join-token-file",
            "LIBRA_JOIN_TOKEN",
        ),
        (&["server", "--join-token", "sekrit-token"], "--join-token-file", "LIBRA_JOIN_TOKEN"),
        (&["server", "--admin-password", "sekrit-pw"], "--admin-password-file", "LIBRA_ADMIN_PASSWORD"),
        (
            &["login", "--server", "http://127.0.0.1:9", "--user", "u", "--password", "sekrit-pw"],
            "--password-file",
            "LIBRA_PASSWORD",
        ),
    ];
    for (args, file_flag, env) in cases {
        let e = failed(&libra(&dir, args).output().unwrap());
        assert!(e.contains(file_flag) && e.contains(env) && e.contains("command line"), "{args:?}: {e}");
        assert!(!e.contains("sekrit"), "the error repeats the secret: {e}");
    }
    // An agent with neither a credential nor a join token says how to give one.
    let e = failed(
        &libra(&dir, &["node", "--server", "http://127.0.0.1:9", "--name", "x", "--workdir"])
            .arg(dir.join("w"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("node.credential") && e.contains("--join-token-file"), "{e}");
}

#[test]
fn agents_keep_their_credential_across_restarts_and_join_again_when_forgotten() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 0.5, 30.0);
    let name = cl.node_names[0].clone();
    let cred_file = cl.dir.join(&name).join("node.credential");
    // The server counts the node up once it has joined, which may be a moment before the
    // agent has saved the credential that joining minted.
    wait_until("the node's credential", || cred_file.exists().then_some(()));
    let first = std::fs::read_to_string(&cred_file).unwrap();
    assert_eq!(mode(&cred_file), 0o600);
    assert_ne!(first.trim(), JOIN);
    let admin = cl.admin();
    let up = |admin: &Client| admin.nodes().ok().filter(|n| n.iter().any(|x| x.name == name && x.up));
    let down = |admin: &Client| admin.nodes().ok().filter(|n| n.iter().any(|x| x.name == name && !x.up));

    // Restart the agent without its join token: its credential alone registers it again.
    let mut old = cl.nodes.pop().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    std::fs::remove_file(cl.dir.join("join-token")).unwrap();
    let log = std::fs::File::create(cl.dir.join("restart.log")).unwrap();
    let mut agent = Command::new(EXE)
        .args(["node", "--server", &cl.url, "--cpus", "0.5", "--name", &name, "--period", "0.5", "--workdir"])
        .arg(cl.dir.join(&name))
        .env_remove("LIBRA_JOIN_TOKEN")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let user = cl.user("carol", 1000);
    let j = user.submit(&common::burn(0.2, 2.0, 60.0, 50)).unwrap();
    assert_eq!(wait_done(&user, j.id).state, JobState::Completed);
    assert_eq!(std::fs::read_to_string(&cred_file).unwrap(), first, "no new credential on a restart");

    // Forgotten, an agent without the join token is refused and stops, saying why.
    admin.node_forget(&name).unwrap();
    let status = wait_until("the agent to stop", || agent.try_wait().unwrap());
    assert!(!status.success());
    let log = std::fs::read_to_string(cl.dir.join("restart.log")).unwrap();
    assert!(log.contains("refused"), "{log}");
    wait_until("the node down", || down(&admin));

    // With the join token, the forgotten node joins again with a new credential.
    std::fs::write(cl.dir.join("join-token"), JOIN).unwrap();
    cl.start_node(&name, 0.5);
    // The server counts the node up when it answers the join; the agent saves the credential
    // that answer carried a moment later.
    let second = wait_until("a second credential", || {
        std::fs::read_to_string(&cred_file).ok().filter(|c| *c != first && !c.is_empty())
    });
    wait_until("the node to join again", || up(&admin));
    assert_eq!(mode(&cred_file), 0o600);
    // A running agent forgotten by an administrator joins again by itself (it was given the
    // join token), and its old credential is refused from then on.
    admin.node_forget(&name).unwrap();
    wait_until("a third credential", || {
        std::fs::read_to_string(&cred_file).ok().filter(|c| *c != second && !c.is_empty())
    });
    wait_until("the node up again", || up(&admin));
    let stale = Client::new(&cl.url, Some(second.trim().to_string()));
    let e = stale
        .sync(&libra_api::SyncRequest {
            name: name.clone(),
            mechanism: "none".into(),
            running: vec![],
            exited: vec![],
            wait_ms: 0,
        })
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let j = user.submit(&common::burn(0.2, 2.0, 60.0, 50)).unwrap();
    assert_eq!(wait_done(&user, j.id).state, JobState::Completed);
}

/// An administrator forgets a node in the instant after it joined, before its first sync (a
/// proxy runs the `forget` just before that sync reaches the server). The agent, which has the
/// join token, joins again with a new credential and runs jobs, rather than stopping as one
/// whose reports a server will not take.
#[test]
fn an_agent_forgotten_between_joining_and_its_first_sync_joins_again() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(0, 0.5, 30.0);
    let name = "late";
    let cred_file = cl.dir.join(name).join("node.credential");
    let admin = cl.admin();
    let (url, token) = (cl.url.clone(), cl.anon().login("admin", ADMIN_PW).unwrap().token);
    // The credential the agent joined with (saved before it sent that sync), read as it is
    // forgotten: the agent may join again within a millisecond.
    let first = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (first_here, cred) = (first.clone(), cred_file.clone());
    let proxy = FaultyProxy::before(cl.port, b"POST /api/node/sync ", move || {
        *first_here.lock().unwrap() = std::fs::read_to_string(&cred).unwrap();
        Client::new(&url, Some(token)).node_forget(name).unwrap();
    });
    let log = std::fs::File::create(cl.dir.join("late.log")).unwrap();
    let agent = Command::new(EXE)
        .args(["node", "--server", &proxy.url, "--cpus", "0.5", "--name", name, "--period", "0.5"])
        .arg("--join-token-file")
        .arg(cl.dir.join("join-token"))
        .arg("--workdir")
        .arg(cl.dir.join(name))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    cl.nodes.push(agent);
    // Its control groups are removed with the cluster's (they were left behind at every run).
    cl.node_names.push(name.to_string());
    wait_until("the forget before the first sync", || proxy.done().then_some(()));
    let first = first.lock().unwrap().clone();
    assert!(!first.is_empty());
    let log = || std::fs::read_to_string(cl.dir.join("late.log")).unwrap_or_default();
    let agent = cl.nodes.last_mut().unwrap();
    let t0 = std::time::Instant::now();
    let joined_again = loop {
        if let Some(status) = agent.try_wait().unwrap() {
            break Err(status);
        }
        if let Some(c) = std::fs::read_to_string(&cred_file).ok().filter(|c| *c != first && !c.is_empty()) {
            break Ok(c);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "neither a new credential nor the agent's end:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let second = match joined_again {
        Ok(c) => c,
        Err(status) => panic!("the agent stopped ({status}) instead of joining again:\n{}", log()),
    };
    assert_ne!(second, first);
    let up = |admin: &Client| admin.nodes().ok().filter(|n| n.iter().any(|x| x.name == name && x.up));
    wait_until("the node up", || up(&admin));
    let user = cl.user("dora", 1000);
    let j = user.submit(&common::burn(0.2, 2.0, 60.0, 50)).unwrap();
    assert_eq!(wait_done(&user, j.id).state, JobState::Completed, "{}", log());
}

#[test]
fn https_end_to_end_with_a_self_signed_certificate() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start_tls(1, 0.5, 30.0);
    assert!(cl.url.starts_with("https://"));
    let ca = cl.ca.clone().unwrap();
    // The agent joined over https (Cluster::start waited for it) and a job runs.
    let user = cl.user("dana", 1000);
    std::fs::write(cl.dir.join("dana-password"), "pw-dana").unwrap();
    // The CLI: login with --ca (remembered), then commands with no TLS flag at all.
    let dir = cl.dir.clone();
    let out = libra(&dir, &["login", "--server", &cl.url, "--user", "dana", "--password-file"])
        .arg(dir.join("dana-password"))
        .arg("--ca")
        .arg(&ca)
        .output()
        .unwrap();
    assert!(out.status.success(), "login: {}", String::from_utf8_lossy(&out.stderr));
    let login: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config").join("login.json")).unwrap())
            .unwrap();
    assert_eq!(login["ca"], ca.display().to_string());
    let out = libra(
        &dir,
        &[
            "submit",
            "--estimate",
            "2s",
            "--deadline",
            "1m",
            "--budget",
            "50",
            "--json",
            "--",
            EXE,
            "burn",
            "--cpu-seconds",
            "0.2",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "submit: {}", String::from_utf8_lossy(&out.stderr));
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = job["id"].as_u64().unwrap();
    assert_eq!(wait_done(&user, id).state, JobState::Completed);

    // A hosted sweep on this server reaches it over https, trusting the server's own
    // certificate (no LIBRA_CA in the server's environment), whatever file its owner names.
    let res = format!(
        "[[resource]]\nname = \"here\"\nkind = \"libra\"\nurl = \"{}\"\nprice = 5\nca = \"/etc/hostname\"\n",
        cl.url
    );
    let s = user
        .sweep_create(&libra_api::SweepCreate {
            plan: "parameter x integer range from 1 to 1 step 1\ntask main\n    exec true\nendtask\n".into(),
            resources: res,
            name: Some("tls".into()),
            deadline: None,
            deadline_in: Some(600.0),
            budget: libra_core::Money::from_credits(200),
            optimise: None,
            max_retries: None,
            estimate: Some(5.0),
            seed: 0,
        })
        .unwrap();
    let t0 = std::time::Instant::now();
    let done = loop {
        let i = user.sweep(s.id).unwrap();
        if i.state != "running" {
            break i;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let log = std::fs::read_to_string(cl.dir.join("server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            panic!("the hosted sweep over https did not end in 60 s: {i:?}\nthe server's last lines, newest first:\n{}", tail.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!((done.state.as_str(), done.jobs.done), ("done", 1), "{done:?}");

    // Without the certificate the client refuses the server: nothing is sent to it.
    let untrusting = Client::connect(&cl.url, None, None, false).unwrap();
    let e = untrusting.login("dana", "pw-dana").unwrap_err();
    assert!(matches!(e, libra_api::ClientError::Transport { .. }), "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    let out = libra(&dir, &["login", "--server", &cl.url, "--user", "dana", "--password-file"])
        .arg(dir.join("dana-password"))
        .env("LIBRA_CONFIG_DIR", dir.join("other-config"))
        .output()
        .unwrap();
    let e = failed(&out);
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    // Plain http to the https port gets no answer that works either.
    let plain = Client::new(&cl.url.replace("https://", "http://"), None);
    assert!(plain.login("admin", ADMIN_PW).is_err());
}

#[test]
fn plain_http_beyond_loopback_is_refused_before_connecting() {
    let dir = scratch("http");
    std::fs::write(dir.join("pw"), "pw").unwrap();
    std::fs::write(dir.join("jt"), JOIN).unwrap();
    // 192.0.2.0/24 is reserved for documentation: nothing is there, and nothing is sent
    // (the address is refused before any connection; an attempt would take the 5 s connect
    // timeout and fail with another message).
    for args in [
        vec!["login", "--server", "http://192.0.2.10:7878", "--user", "u", "--password-file", "pw"],
        vec!["node", "--server", "http://192.0.2.10:7878", "--join-token-file", "jt", "--workdir", "w"],
        vec!["status", "--server", "http://192.0.2.10:7878"],
    ] {
        let t0 = std::time::Instant::now();
        let mut c = libra(&dir, &args);
        if args[0] == "status" {
            c.env("LIBRA_TOKEN", "t");
        }
        let e = failed(&c.output().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(4), "{args:?} waited for a connection");
        assert!(
            e.contains("plain http") && e.contains("--insecure-http") && e.contains("https://"),
            "{args:?}: {e}"
        );
    }
    // Loopback http stays allowed (a personal cluster): this fails on the connection instead.
    let e = failed(
        &libra(&dir, &["login", "--server", "http://127.0.0.1:9", "--user", "u", "--password-file", "pw"])
            .output()
            .unwrap(),
    );
    assert!(!e.contains("plain http"), "{e}");
}

#[test]
fn up_with_tls_serves_https_and_its_login_trusts_the_certificate() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("up-tls");
    let _cleanup = Cleanup(dir.display().to_string());
    let state = dir.join("state");
    let port = free_port();
    let out = libra(&dir, &["up", "--tls", "--nodes", "1", "--cpus-per-node", "0.5", "--no-demo", "--exit"])
        .args(["--port", &port.to_string()])
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "libra up --tls: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("Libra is up at https://127.0.0.1:{port}")), "{stdout}");
    let ca = state.join("tls").join("cert.pem");
    assert!(ca.exists());
    assert_eq!(mode(&state.join("tls").join("key.pem")), 0o600);
    let login: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config").join("login.json")).unwrap())
            .unwrap();
    assert_eq!(login["server"], format!("https://127.0.0.1:{port}"));
    assert_eq!(login["ca"], ca.display().to_string());
}

#[test]
fn a_server_listening_beyond_loopback_without_tls_warns() {
    let dir = scratch("warn");
    let _cleanup = Cleanup(dir.display().to_string());
    for (tls, warned) in [(false, true), (true, false)] {
        let port = free_port();
        // Listening on every address sends nothing anywhere; the server is stopped at once.
        let mut c = libra(&dir, &["server", "--listen", &format!("0.0.0.0:{port}"), "--no-fsync", "--db"]);
        c.arg(dir.join(format!("s{port}.db"))).env("LIBRA_JOIN_TOKEN", JOIN);
        if tls {
            c.arg("--tls-self-signed");
        }
        let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut err = Lines::new(child.stderr.take().unwrap());
        // With TLS, the line after "listening" says which certificate clients trust.
        let last = if tls { "clients trust" } else { "libra server listening on" };
        let r = err.until(last, Duration::from_secs(30));
        child.kill().unwrap();
        child.wait().unwrap();
        r.unwrap();
        assert_eq!(err.seen.contains("warning: listening on 0.0.0.0"), warned, "tls {tls}: {}", err.seen);
        if tls {
            assert!(err.seen.contains("libra server listening on https://"), "{}", err.seen);
            assert!(err.seen.contains("--ca "), "{}", err.seen);
        }
    }
}

/// Open file descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// `GET path` on a connection of its own (from 127.0.0.1): the status and the body.
fn raw_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// A Prometheus sample's value in an exposition.
fn metric(text: &str, key: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no sample {key} in:\n{text}"))
}

/// Connections are the one thing a stranger can take from the server before saying who they
/// are, and each holds one of its file descriptors: a peer that opened them and sent nothing
/// used to keep them for good, until the server could take no more and no one reached it (the
/// node agents neither, so their nodes went down with their jobs). With
/// `max_connections_per_address`, `max_connections` and `header_timeout`, one hostile host
/// keeps at most its share and only for the timeout, a header or a body sent a byte at a time is
/// cut off,
/// and many hosts together cannot take the server's descriptors; meanwhile a user's job is
/// admitted, runs and ends on a node that stays up.
#[test]
fn a_peer_that_holds_connections_open_locks_out_no_one() {
    use std::io::Write;
    use std::net::{Ipv4Addr, SocketAddr, TcpStream};
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start_configured(
        10.0,
        "[server]\nmax_connections_per_address = 16\nmax_connections = 64\nheader_timeout = 5\n",
    );
    cl.start_node("n0", 0.5);
    let admin = cl.admin();
    wait_until("the node up", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let user = cl.user("erin", 1000);
    let pid = cl.server.as_ref().unwrap().id();
    let server: SocketAddr = format!("127.0.0.1:{}", cl.port).parse().unwrap();
    let log = || std::fs::read_to_string(cl.dir.join("server.log")).unwrap_or_default();
    let before = open_fds(pid);

    // One hostile host opens 200 connections and sends nothing.
    let mallory = Ipv4Addr::new(127, 0, 0, 2);
    let held: Vec<TcpStream> = (0..200).map(|_| connect_from(mallory, server).unwrap()).collect();
    // Meanwhile Erin, from another address, submits a job.
    let job = user.submit(&common::burn(0.2, 2.0, 60.0, 50)).unwrap();
    let kept = open_at_most(&held, 16, Duration::from_secs(3));
    assert!(kept <= 16, "the server kept {kept} of one address's 200 idle connections (at most 16)");
    let fds = open_fds(pid);
    assert!(
        fds <= before + 16 + 8,
        "the server holds {fds} descriptors, {before} before the 200 connections"
    );
    // The 16 it took are closed once the header timeout (5 s) passes with no request.
    let t0 = std::time::Instant::now();
    let lingering = held.iter().filter(|s| !closed_within(s, Duration::from_secs(12))).count();
    assert_eq!(lingering, 0, "idle connections still open {:?} after the header timeout", t0.elapsed());
    drop(held);

    // A header sent a byte at a time is cut off too, though bytes keep coming.
    let mut drip = connect_from(Ipv4Addr::new(127, 0, 0, 3), server).unwrap();
    drip.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    let t0 = std::time::Instant::now();
    let cut = loop {
        if drip.write_all(b"a").is_err() || closed_within(&drip, Duration::from_millis(300)) {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            break false;
        }
    };
    assert!(cut, "a header dripping a byte every 300 ms was still being read after 15 s");

    // So is a body that follows its header in time and then comes a byte at a time: answered
    // 400, naming the timeout, and closed.
    let mut drip = connect_from(Ipv4Addr::new(127, 0, 0, 4), server).unwrap();
    drip.write_all(
        b"POST /api/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let mut answer = Vec::new();
    let cut = loop {
        use std::io::Read;
        if drip.write_all(b" ").is_err() {
            break true;
        }
        drip.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut buf = [0u8; 4096];
        match drip.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
        if t0.elapsed() > Duration::from_secs(15) {
            break false;
        }
    };
    let answer = String::from_utf8_lossy(&answer);
    assert!(cut, "a body dripping a byte every 300 ms was still being read after 15 s: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("header_timeout"), "{answer}");

    // Many hosts together: no more than max_connections held, whoever they are.
    let crowd: Vec<TcpStream> = (10..16u8)
        .flat_map(|h| (0..16).map(move |_| connect_from(Ipv4Addr::new(127, 0, 0, h), server).unwrap()))
        .collect();
    open_at_most(&crowd, 64, Duration::from_secs(3));
    let fds = open_fds(pid);
    assert!(fds <= before + 64 + 8, "the server holds {fds} descriptors with 96 connections from six hosts");
    drop(crowd);

    // Erin's job ran and ended on a node that stayed up; the refusals are counted and logged.
    assert_eq!(wait_done(&user, job.id).state, JobState::Completed, "{}", log());
    assert!(admin.nodes().unwrap().iter().all(|n| n.up), "a node went down: {}", log());
    let (status, text) = raw_get(cl.port, "/metrics");
    assert_eq!(status, 200, "{text}");
    let by_address = metric(&text, "libra_connections_refused_total{reason=\"address\"}");
    let by_total = metric(&text, "libra_connections_refused_total{reason=\"total\"}");
    assert!(by_address >= 184.0 && by_total >= 1.0, "refused: {by_address} by address, {by_total} in all");
    let log = log();
    assert!(
        log.contains("127.0.0.2 already holds 16 open connections")
            && log.contains("max_connections_per_address = 16")
            && log.contains("max_connections = 64"),
        "{log}"
    );
}

/// What a local account squatting a stopped server's port runs (as that account, for the test
/// below: this test binary re-run with `LIBRA_TEST_SQUAT` naming the port): it listens there,
/// says so, and counts every byte it is sent until its input closes. Without that variable it
/// does nothing.
#[test]
fn a_squatter_on_a_servers_port() {
    use std::io::Read;
    let Ok(port) = std::env::var("LIBRA_TEST_SQUAT") else { return };
    let listener = std::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    listener.set_nonblocking(true).unwrap();
    println!("listening");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let mut received = 0;
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    received += n;
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    println!("received {received} bytes");
}

/// Any local account may listen on a loopback port while the server that uses it is down, and
/// would then be sent what the next command sends. `libra login` records which Unix account ran
/// the server, and a command (or a login again) refuses a loopback server run by another
/// account before it sends anything: here a real process of a test account on the port of a
/// killed server is sent neither the administrator's token nor their password.
#[test]
fn a_local_account_on_a_stopped_servers_port_is_sent_neither_password_nor_token() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((me, mallory)) = squatter_account("lsq") else { return };
    let mut cl = Cluster::start(1, 1.0, 30.0);
    let config = Scratch::new("squat-config");
    let pw = config.join("admin-password");
    std::fs::write(&pw, ADMIN_PW).unwrap();
    let libra = |args: &[&str]| {
        Command::new(EXE).args(args).env("LIBRA_CONFIG_DIR", &*config).stdin(Stdio::null()).output().unwrap()
    };
    let url = cl.url.clone();
    let login = ["login", "--server", &url, "--user", "admin", "--password-file", pw.to_str().unwrap()];
    let out = libra(&login);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config.join("login.json")).unwrap()).unwrap();
    assert_eq!(saved["server_uid"], me, "the login records the server's account: {saved}");
    assert!(libra(&["balance"]).status.success());

    // The server goes down; her process takes its port.
    cl.kill_server();
    let (_dir, mut squatter, mut lines) = squat(&mallory, cl.port);
    // A command with the saved token, and a login again with the password: both refused, naming
    // her account, before anything is sent.
    for args in [&["balance"][..], &login[..]] {
        let out = libra(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "libra {args:?} went ahead: {err}");
        assert!(err.contains(&format!("uid {}", mallory.uid)) && err.contains("nothing was sent"), "{err}");
    }
    drop(squatter.stdin.take());
    lines.until("received", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    assert!(lines.seen.contains("received 0 bytes"), "she was sent something: {}", lines.seen);
    assert!(squatter.wait().unwrap().success());
}

/// Runs `a_squatter_on_a_servers_port` on `port` as `account` (this test binary copied where the
/// account can run it), once it listens: its directory, the process, and its output.
fn squat(account: &common::Account, port: u16) -> (Scratch, std::process::Child, Lines) {
    use std::os::unix::process::CommandExt;
    let dir = Scratch::new("squatter");
    std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("test-binary");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new(&exe)
        .args(["a_squatter_on_a_servers_port", "--exact", "--nocapture", "--test-threads=1"])
        .env("LIBRA_TEST_SQUAT", port.to_string())
        .uid(account.uid)
        .gid(account.gid)
        .current_dir(&*dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(child.stdout.take().unwrap());
    lines.until("listening", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    (dir, child, lines)
}

/// A node agent on the server's machine talks to it on loopback too, and would send its
/// credential and its reports to whoever holds the port while the server is down: the agent
/// keeps the account that ran the server when it registered (`server.uid`), and sends nothing to
/// a loopback server run by another. Here a real process of a test account on the port of a
/// killed server receives nothing from the node's agent, which keeps trying meanwhile.
#[test]
fn a_node_agent_sends_a_squatter_on_its_servers_port_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((me, mallory)) = squatter_account("lsn") else { return };
    let mut cl = Cluster::start(1, 1.0, 30.0);
    let kept = cl.dir.join(&cl.node_names[0]).join("server.uid");
    wait_until("the agent to keep the server's account", || std::fs::read_to_string(&kept).ok());
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), me.to_string());
    cl.kill_server();
    let (_dir, mut squatter, mut lines) = squat(&mallory, cl.port);
    // The agent retries at least every 2 s; give it several turns.
    std::thread::sleep(Duration::from_secs(5));
    drop(squatter.stdin.take());
    lines.until("received", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    assert!(lines.seen.contains("received 0 bytes"), "the agent sent her something: {}", lines.seen);
    assert!(squatter.wait().unwrap().success());
}

/// This account's user id and a Unix account made for the test (`None`, having said why, where
/// none can be made or its processes run: not root, no useradd).
fn squatter_account(prefix: &str) -> Option<(u32, common::Account)> {
    // SAFETY: geteuid has no memory effects.
    let me = unsafe { libc::geteuid() };
    if me != 0 {
        eprintln!("not root: cannot run a process as another account here, not tested");
        return None;
    }
    let made = common::Account::create(&format!("{prefix}{}", std::process::id() % 100_000));
    if made.is_none() {
        eprintln!("useradd is not available: not tested");
    }
    made.map(|a| (me, a))
}
