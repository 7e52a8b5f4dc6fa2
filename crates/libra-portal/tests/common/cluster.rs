//! A real `libra server` and a real `libra node` on loopback, started from the built `libra`
//! binary (this crate cannot name it with `CARGO_BIN_EXE_libra`, so it is found beside the test
//! executable and built first when missing or older than the portal's files).

use libra_api::{Client, UserAdd};
use libra_core::Money;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub const JOIN: &str = "portal-test-join-token";
pub const ADMIN_PW: &str = "admin-pw";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `target/<profile>`: the test runs as `target/<profile>/deps/<name>-<hash>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps").to_path_buf()
}

fn newest_source() -> SystemTime {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newest = SystemTime::UNIX_EPOCH;
    // The server's and the broker's sources too: the sweeps page needs the server behind it.
    for dir in ["src", "assets", "../libra-server/src", "../libra-server/src/routes", "../libra-broker/src"] {
        for e in std::fs::read_dir(root.join(dir)).into_iter().flatten().flatten() {
            if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                newest = newest.max(t);
            }
        }
    }
    newest
}

/// The `libra` binary with this portal in it.
pub fn libra_bin() -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join(format!("libra{}", std::env::consts::EXE_SUFFIX));
    let fresh = bin.metadata().and_then(|m| m.modified()).map(|t| t >= newest_source()).unwrap_or(false);
    if !fresh {
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
}

pub struct Cluster {
    pub dir: PathBuf,
    pub url: String,
    pub bin: PathBuf,
    children: Vec<Child>,
    node_names: Vec<String>,
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

impl Cluster {
    /// A server and one node agent, `n0`, of `cpus` CPUs.
    pub fn start(cpus: f64) -> Cluster {
        Cluster::with_nodes(1, cpus)
    }

    /// A server and `nodes` node agents, `n0`, `n1`, ..., of `cpus` CPUs each.
    pub fn with_nodes(nodes: usize, cpus: f64) -> Cluster {
        let bin = libra_bin();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("libra-portal-e2e-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let mut c = Cluster { dir, url, bin, children: Vec::new(), node_names: Vec::new() };
        let log = std::fs::File::create(c.dir.join("server.log")).unwrap();
        let server = Command::new(&c.bin)
            .args(["server", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--period", "0.5", "--no-fsync", "--db"])
            // Secrets through the environment: never on a command line.
            .env("LIBRA_JOIN_TOKEN", JOIN)
            .env("LIBRA_ADMIN_PASSWORD", ADMIN_PW)
            .arg(c.dir.join("server.db"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start libra server");
        c.children.push(server);
        let anon = Client::new(&c.url, None);
        wait_until("the server", || anon.get::<serde_json::Value>("/api/openapi.json").ok());
        for i in 0..nodes {
            // Unique on the machine: agents of the same name share control groups, and two
            // test clusters at once would stop each other's jobs.
            let name = format!("n{i}-{}", c.url.rsplit(':').next().unwrap_or("0"));
            c.node_names.push(name.clone());
            let log = std::fs::File::create(c.dir.join(format!("{name}.log"))).unwrap();
            let node = Command::new(&c.bin)
                .args(["node", "--server", &c.url, "--cpus", &cpus.to_string()])
                .env("LIBRA_JOIN_TOKEN", JOIN)
                .args(["--name", &name, "--period", "0.5", "--workdir"])
                .arg(c.dir.join(&name))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start libra node");
            c.children.push(node);
        }
        let admin = c.admin();
        wait_until("the nodes", || admin.nodes().ok().filter(|n| n.iter().filter(|x| x.up).count() == nodes));
        c
    }

    pub fn admin(&self) -> Client {
        let t = Client::new(&self.url, None).login("admin", ADMIN_PW).unwrap().token;
        Client::new(&self.url, Some(t))
    }

    /// A user with `credit` credits, logged in through the API.
    pub fn user(&self, name: &str, password: &str, credit: i64) -> Client {
        let admin = self.admin();
        // Jobs run as the account running the tests (root in CI: allowed, as an administrator would).
        let me = libra_node::proc::Identity::current();
        let add = UserAdd {
            unix_user: me.as_ref().map(|i| i.user.clone()),
            allow_root: me.is_some_and(|i| i.uid == 0),
            ..UserAdd::new(name, password, false)
        };
        admin.user_add(&add).unwrap();
        admin.credit(name, Money::from_credits(credit)).unwrap();
        let t = Client::new(&self.url, None).login(name, password).unwrap().token;
        Client::new(&self.url, Some(t))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Node first, so it does not spin against a dead server.
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Their control groups, and any job still in them.
        for name in &self.node_names {
            libra_node::enforce::remove_node_groups(&libra_node::group_name(name, &self.dir.join(name)));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
