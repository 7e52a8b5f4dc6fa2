//! What the whole-process tests share: a real cluster (a `libra server` and `libra node` agents on
//! loopback, in a directory of their own, stopped with every process they left when dropped),
//! finding and stopping the processes a test started, and reading a child's output as it comes.
#![allow(dead_code)]

pub mod slurm;

use libra_api::{Client, JobInfo, JobState, SubmitRequest, UserAdd};
use libra_core::{JobSpec, Money};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub static SERIAL: Mutex<()> = Mutex::new(());
pub const EXE: &str = env!("CARGO_BIN_EXE_libra");
pub const JOIN: &str = "test-join-token";
pub const ADMIN_PW: &str = "admin-pw";

pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
    pub server: Option<Child>,
    pub nodes: Vec<Child>,
    pub url: String,
    pub node_timeout: f64,
    pub node_names: Vec<String>,
    /// The server's self-signed certificate, when it serves https (`start_tls`).
    pub ca: Option<PathBuf>,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Cluster {
    pub fn start(nodes: usize, cpus: f64, node_timeout: f64) -> Cluster {
        Cluster::start_with(nodes, cpus, node_timeout, false)
    }

    /// A cluster whose server serves https with a self-signed certificate, trusted by the
    /// agents and the test's clients through `--ca`.
    pub fn start_tls(nodes: usize, cpus: f64, node_timeout: f64) -> Cluster {
        Cluster::start_with(nodes, cpus, node_timeout, true)
    }

    /// A server reading the site configuration file `config` (TOML: `[server]`,
    /// `[server.executor]`, ...) with no node agents yet: the test starts its own.
    pub fn start_configured(node_timeout: f64, config: &str) -> Cluster {
        Cluster::start_full(0, 1.0, node_timeout, false, Some(config))
    }

    fn start_with(nodes: usize, cpus: f64, node_timeout: f64, tls: bool) -> Cluster {
        Cluster::start_full(nodes, cpus, node_timeout, tls, None)
    }

    fn start_full(nodes: usize, cpus: f64, node_timeout: f64, tls: bool, config: Option<&str>) -> Cluster {
        let dir = std::env::temp_dir().join(format!("libra-e2e-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        // The secrets reach the processes as files, never as arguments.
        std::fs::write(dir.join("join-token"), JOIN).unwrap();
        std::fs::write(dir.join("admin-password"), ADMIN_PW).unwrap();
        if let Some(config) = config {
            std::fs::write(dir.join("server.toml"), config).unwrap();
        }
        let port = free_port();
        let scheme = if tls { "https" } else { "http" };
        let mut c = Cluster {
            url: format!("{scheme}://127.0.0.1:{port}"),
            dir: dir.clone(),
            port,
            server: None,
            nodes: Vec::new(),
            node_timeout,
            node_names: Vec::new(),
            ca: tls.then(|| dir.join("tls").join("cert.pem")),
        };
        c.start_server();
        for i in 0..nodes {
            c.start_node(&format!("n{i}-{port}"), cpus);
        }
        let admin = c.admin();
        wait_until("nodes up", || admin.nodes().ok().filter(|n| n.iter().filter(|x| x.up).count() == nodes));
        c
    }

    pub fn start_server(&mut self) {
        let log = std::fs::File::create(self.dir.join("server.log")).unwrap();
        let child = Command::new(EXE)
            .args(["server", "--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--join-token-file")
            .arg(self.dir.join("join-token"))
            .arg("--admin-password-file")
            .arg(self.dir.join("admin-password"))
            .args(if self.ca.is_some() { &["--tls-self-signed"][..] } else { &[] })
            .args([
                "--db",
                &self.dir.join("server.db").display().to_string(),
                "--period",
                "0.5",
                "--no-fsync",
            ])
            .args(["--node-timeout", &self.node_timeout.to_string()])
            .args(
                Some(self.dir.join("server.toml"))
                    .filter(|f| f.exists())
                    .into_iter()
                    .flat_map(|f| [std::ffi::OsString::from("--config"), f.into_os_string()]),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.server = Some(child);
        wait_until("server", || {
            // With TLS, the certificate exists once the server has made it.
            let anon = self.try_anon()?;
            anon.get::<serde_json::Value>("/api/health")
                .ok()
                .or_else(|| anon.get::<serde_json::Value>("/api/openapi.json").ok())
        });
    }

    fn try_anon(&self) -> Option<Client> {
        Client::connect(&self.url, None, self.ca.as_deref(), false).ok()
    }

    /// A client with no token (trusting the cluster's certificate where it has one).
    pub fn anon(&self) -> Client {
        self.try_anon().expect("a client for the cluster")
    }

    pub fn start_node(&mut self, name: &str, cpus: f64) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(EXE)
            .args(["node", "--server", &self.url, "--cpus", &cpus.to_string(), "--name", name])
            .arg("--join-token-file")
            .arg(self.dir.join("join-token"))
            .args(self.ca.iter().flat_map(|ca| [std::ffi::OsStr::new("--ca"), ca.as_os_str()]))
            .args(["--workdir", &self.dir.join(name).display().to_string(), "--period", "0.5"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes.push(child);
        if !self.node_names.iter().any(|n| n == name) {
            self.node_names.push(name.to_string());
        }
    }

    pub fn kill_server(&mut self) {
        if let Some(mut s) = self.server.take() {
            s.kill().unwrap(); // SIGKILL
            s.wait().unwrap();
        }
    }

    pub fn admin(&self) -> Client {
        let anon = self.anon();
        let t = anon.login("admin", ADMIN_PW).unwrap().token;
        anon.with_token(Some(t))
    }

    /// A user with `credit` credits, logged in.
    pub fn user(&self, name: &str, credit: i64) -> Client {
        let admin = self.admin();
        admin.user_add(&as_me(name, &("pw-".to_string() + name))).unwrap();
        admin.credit(name, Money::from_credits(credit)).unwrap();
        let anon = self.anon();
        let t = anon.login(name, &("pw-".to_string() + name)).unwrap().token;
        anon.with_token(Some(t))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.nodes.iter_mut().chain(self.server.iter_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Jobs outlive a killed agent by design; these are ours, stop them.
        for pid in pids_under(&self.dir, "") {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        // The nodes' control groups.
        for name in &self.node_names {
            libra_node::enforce::remove_node_groups(&libra_node::group_name(name, &self.dir.join(name)));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A user whose jobs run as the account running the tests (root in CI: allowed explicitly, as
/// an administrator would).
pub fn as_me(name: &str, password: &str) -> UserAdd {
    let me = libra_node::proc::Identity::current();
    UserAdd {
        unix_user: me.as_ref().map(|i| i.user.clone()),
        allow_root: me.is_some_and(|i| i.uid == 0),
        ..UserAdd::new(name, password, false)
    }
}

pub fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn burn(cpu: f64, estimate: f64, deadline: f64, budget: i64) -> SubmitRequest {
    SubmitRequest::new(
        JobSpec::simple(estimate, deadline, Money::from_credits(budget)),
        vec![EXE.into(), "burn".into(), "--cpu-seconds".into(), cpu.to_string()],
    )
}

pub fn wait_done(c: &Client, id: u64) -> JobInfo {
    wait_until(&format!("job {id} to end"), || c.job(id).ok().filter(|j| !j.state.is_active()))
}

pub fn wait_running(c: &Client, id: u64) -> JobInfo {
    wait_until(&format!("job {id} to run"), || c.job(id).ok().filter(|j| j.state == JobState::Running))
}

/// The processes of a job submitted without a working directory (found by their working
/// directory: the keeper's is the job's record directory, the job's its scratch directory in it).
pub fn job_pids(cl: &Cluster, job: u64) -> Vec<i32> {
    pids_under(&cl.dir, &format!("job-{job}"))
}

/// Processes whose working directory is under `dir` and has a component named `needle`.
pub fn pids_under(dir: &std::path::Path, needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
            if cwd.starts_with(dir) && cwd.strip_prefix(dir).is_ok_and(|rel| rel.iter().any(|c| c == needle))
            {
                pids.push(pid);
            }
        }
    }
    pids
}

/// utime + stime of a process, seconds (assuming the usual 100 ticks per second).
pub fn proc_cpu(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<f64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0.0)).collect();
    (f[11] + f[12]) / 100.0
}

/// Runs the `libra` command against the cluster with a token; returns stdout.
pub fn libra(cl: &Cluster, token: &str, args: &[&str]) -> String {
    let out = libra_output(cl, token, args);
    assert!(out.status.success(), "libra {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `libra ARGS` as the holder of `token`, whatever its outcome.
pub fn libra_output(cl: &Cluster, token: &str, args: &[&str]) -> std::process::Output {
    // In the cluster's directory: jobs run (and write their output files) where they are
    // submitted from.
    Command::new(EXE)
        .args(args)
        .current_dir(&cl.dir)
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", token)
        .env("LIBRA_CONFIG_DIR", cl.dir.join("config"))
        // A cluster serving https: its certificate, trusted like `--ca`.
        .envs(cl.ca.iter().map(|ca| ("LIBRA_CA", ca)))
        .output()
        .unwrap()
}

/// `libra ARGS` as the holder of `token`: (succeeded, stdout, stderr).
pub fn libra_run(cl: &Cluster, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = libra_output(cl, token, args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The token of a user made by `Cluster::user` (whose password is `pw-NAME`).
pub fn token_of(cl: &Cluster, name: &str) -> String {
    Client::new(&cl.url, None).login(name, &format!("pw-{name}")).unwrap().token
}

/// Processes whose command line mentions `needle` (the test's own temporary directory).
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
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

/// Stops whatever the test started under its directory, even when an assertion failed.
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in processes_mentioning(&self.0) {
            // SAFETY: kill(2) on processes started by this test (their command line names the
            // test's own temporary directory).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

pub fn wait_gone(needle: &str) {
    let t0 = Instant::now();
    while !processes_mentioning(needle).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "cluster processes outlived `libra up`");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child's output, line by line, as it comes (read on a thread of its own, so that a child
/// that prints nothing cannot hang the test past its deadline).
pub struct Lines {
    rx: Receiver<String>,
    /// Everything read so far.
    pub seen: String,
}

impl Lines {
    pub fn new(r: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx, seen: String::new() }
    }

    /// Reads until a line contains `want`; says why not, with the output so far, if the output
    /// ends first or `timeout` passes.
    pub fn until(&mut self, want: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(want) {
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no '{want}' after {timeout:?}; output so far:\n{}", self.seen))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the output ended without '{want}':\n{}", self.seen))
                }
            }
        }
    }

    /// Reads until the output ends (every writer has closed it: the child has exited); panics
    /// with `what` if that takes longer than `timeout`.
    pub fn until_end(&mut self, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{what}: still writing after {timeout:?}; output so far:\n{}", self.seen)
                }
            }
        }
    }

    /// Whatever else arrives within `wait` (for error messages).
    pub fn rest(&mut self, wait: Duration) -> String {
        while let Ok(line) = self.rx.recv_timeout(wait) {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        self.seen.clone()
    }
}

/// The value after `key` on the line that has it, up to the next space.
pub fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(key)? + key.len();
    text[at..].split_whitespace().next()
}

/// A Unix account made for a test, removed when dropped.
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl Account {
    pub fn create(name: &str) -> Option<Account> {
        let made = Command::new("useradd").args(["--no-create-home", "--shell", "/bin/sh", name]).status();
        if !made.is_ok_and(|s| s.success()) {
            return None;
        }
        let id = libra_node::proc::Identity::lookup(name).ok().flatten()?;
        Some(Account { name: name.into(), uid: id.uid, gid: id.gid })
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}
