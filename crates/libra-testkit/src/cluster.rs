//! A real cluster for a test: a `libra server` and `libra node` agents on loopback, in a
//! directory of their own, stopped with every process they left when dropped; and running the
//! `libra` command against it as a user.

use crate::{as_me, free_port, pids_under, wait_until};
use libra_api::{Client, JobInfo, JobState, SubmitRequest};
use libra_core::{JobSpec, Money};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// Tests that must not overlap inside one test binary (they share the machine's cgroups or
/// count processes) take this lock.
pub static SERIAL: Mutex<()> = Mutex::new(());
pub const JOIN: &str = "test-join-token";
pub const ADMIN_PW: &str = "admin-pw";

/// The `libra` binary of the build running the test: cargo puts integration tests (and benches)
/// in `target/PROFILE/deps/` and binaries in `target/PROFILE/`. Inside the `libra` crate's own
/// tests cargo has just built it (`env!("CARGO_BIN_EXE_libra")` names the same file); the other
/// crates' tests cannot name it, so it is built here first when missing or older than the
/// workspace's sources.
pub fn exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let me = std::env::current_exe().expect("the test's own path");
        let mut dir = me.parent().expect("the test's directory").to_path_buf();
        if dir.ends_with("deps") {
            dir.pop();
        }
        let bin = dir.join(format!("libra{}", std::env::consts::EXE_SUFFIX));
        let built = bin.metadata().and_then(|m| m.modified()).ok();
        if built.is_none_or(|t| t < newest_source()) {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "libra"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build -p libra");
            assert!(st.success(), "cargo build -p libra failed; build it and run the test again");
        }
        assert!(bin.exists(), "{} is missing: run `cargo build -p libra` first", bin.display());
        bin
    })
}

/// The newest modification time of the workspace's crate sources and the portal's assets.
fn newest_source() -> SystemTime {
    fn walk(dir: &Path, newest: &mut SystemTime) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                walk(&e.path(), newest);
            } else if let Ok(t) = meta.modified() {
                *newest = (*newest).max(t);
            }
        }
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut newest = SystemTime::UNIX_EPOCH;
    for krate in std::fs::read_dir(&crates).into_iter().flatten().flatten() {
        walk(&krate.path().join("src"), &mut newest);
        walk(&krate.path().join("assets"), &mut newest);
    }
    newest
}

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
    /// The server's store (`dir/server.db`, or in the directory given to
    /// `start_with_store_in`).
    pub db: PathBuf,
    /// Agents started with a work directory outside `dir` (`start_node_in`): their names and
    /// work directories, whose control groups go with the cluster.
    pub elsewhere: Vec<(String, PathBuf)>,
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

    /// A cluster whose server keeps its store in `store_dir` (a file system of the test's
    /// own, say), everything else in the cluster's directory.
    pub fn start_with_store_in(store_dir: &Path, nodes: usize, cpus: f64, node_timeout: f64) -> Cluster {
        Cluster::start_full_in(nodes, cpus, node_timeout, false, None, Some(store_dir))
    }

    fn start_with(nodes: usize, cpus: f64, node_timeout: f64, tls: bool) -> Cluster {
        Cluster::start_full(nodes, cpus, node_timeout, tls, None)
    }

    fn start_full(nodes: usize, cpus: f64, node_timeout: f64, tls: bool, config: Option<&str>) -> Cluster {
        Cluster::start_full_in(nodes, cpus, node_timeout, tls, config, None)
    }

    fn start_full_in(
        nodes: usize,
        cpus: f64,
        node_timeout: f64,
        tls: bool,
        config: Option<&str>,
        store_dir: Option<&Path>,
    ) -> Cluster {
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
            db: store_dir.unwrap_or(&dir).join("server.db"),
            elsewhere: Vec::new(),
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
        let child = Command::new(exe())
            .args(["server", "--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--join-token-file")
            .arg(self.dir.join("join-token"))
            .arg("--admin-password-file")
            .arg(self.dir.join("admin-password"))
            .args(if self.ca.is_some() { &["--tls-self-signed"][..] } else { &[] })
            .args(["--db", &self.db.display().to_string(), "--period", "0.5", "--no-fsync"])
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
        self.start_node_at(name, cpus, &self.dir.join(name));
        if !self.node_names.iter().any(|n| n == name) {
            self.node_names.push(name.to_string());
        }
    }

    /// A node agent whose work directory is `workdir` (on a file system of the test's own, say).
    pub fn start_node_in(&mut self, name: &str, cpus: f64, workdir: &Path) {
        self.start_node_at(name, cpus, workdir);
        self.elsewhere.push((name.to_string(), workdir.to_path_buf()));
    }

    /// `start_node_in` with `extra` arguments of `libra node`.
    pub fn start_node_in_with(&mut self, name: &str, cpus: f64, workdir: &Path, extra: &[&str]) {
        self.start_node_args(name, cpus, workdir, extra);
        self.elsewhere.push((name.to_string(), workdir.to_path_buf()));
    }

    /// A node agent given `extra` arguments of `libra node` besides the usual ones.
    pub fn start_node_with(&mut self, name: &str, cpus: f64, extra: &[&str]) {
        self.start_node_args(name, cpus, &self.dir.join(name), extra);
        if !self.node_names.iter().any(|n| n == name) {
            self.node_names.push(name.to_string());
        }
    }

    fn start_node_at(&mut self, name: &str, cpus: f64, workdir: &Path) {
        self.start_node_args(name, cpus, workdir, &[]);
    }

    fn start_node_args(&mut self, name: &str, cpus: f64, workdir: &Path, extra: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(exe())
            .args(["node", "--server", &self.url, "--cpus", &cpus.to_string(), "--name", name])
            .arg("--join-token-file")
            .arg(self.dir.join("join-token"))
            .args(self.ca.iter().flat_map(|ca| [std::ffi::OsStr::new("--ca"), ca.as_os_str()]))
            .args(["--workdir", &workdir.display().to_string(), "--period", "0.5"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes.push(child);
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
        if credit != 0 {
            admin.credit(name, Money::from_credits(credit)).unwrap();
        }
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
        let dirs = std::iter::once(&self.dir).chain(self.elsewhere.iter().map(|(_, w)| w));
        for pid in dirs.flat_map(|d| pids_under(d, "")) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        // The nodes' control groups.
        for name in &self.node_names {
            libra_node::enforce::remove_node_groups(&libra_node::group_name(name, &self.dir.join(name)));
        }
        for (name, workdir) in &self.elsewhere {
            libra_node::enforce::remove_node_groups(&libra_node::group_name(name, workdir));
        }
        // Jobs' scratch file systems that the killed agents left mounted (they outlive an
        // agent, for the job it adopts): mounted, their directories could not be removed.
        for d in std::iter::once(&self.dir).chain(self.elsewhere.iter().map(|(_, w)| w)) {
            libra_node::scratch::unmount_all_under(d);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn burn(cpu: f64, estimate: f64, deadline: f64, budget: i64) -> SubmitRequest {
    SubmitRequest::new(
        JobSpec::simple(estimate, deadline, Money::from_credits(budget)),
        vec![exe().display().to_string(), "burn".into(), "--cpu-seconds".into(), cpu.to_string()],
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

/// Runs the `libra` command against the cluster with a token; returns stdout.
pub fn libra(cl: &Cluster, token: &str, args: &[&str]) -> String {
    let out = libra_output(cl, token, args);
    assert!(out.status.success(), "libra {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `libra ARGS` as the holder of `token`, whatever its outcome.
pub fn libra_output(cl: &Cluster, token: &str, args: &[&str]) -> std::process::Output {
    libra_output_via(cl, &cl.url, token, args)
}

/// `libra_output` sent to `server` (a proxy in front of the cluster's server).
pub fn libra_output_via(cl: &Cluster, server: &str, token: &str, args: &[&str]) -> std::process::Output {
    // In the cluster's directory: jobs run (and write their output files) where they are
    // submitted from.
    Command::new(exe())
        .args(args)
        .current_dir(&cl.dir)
        .env("LIBRA_SERVER", server)
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
