//! `libra up`: a whole cluster on this machine in one command: a server, N node agents (each
//! capped at its own slice of the machine), an administrator and a demo user with credit, and a
//! short scripted demo.

use super::common::{data_dir, fmt_dur, money, save_login, Login};
use super::jobs::jobs_table;
use super::submit::{print_decision, resolve_command};
use anyhow::{bail, Context, Result};
use clap::Args;
use libra_api::{Client, JobInfo, JobState, SubmitRequest, UserAdd};
use libra_core::{JobSpec, Money};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Number of local node agents.
    #[arg(long, default_value_t = 2)]
    pub nodes: u32,
    /// CPUs per node (default: the machine's cores divided among the nodes).
    #[arg(long)]
    pub cpus_per_node: Option<f64>,
    /// Port for the server on 127.0.0.1.
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// State directory (default: `up` in the user's data directory).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Skip the scripted demo.
    #[arg(long)]
    pub no_demo: bool,
    /// Start, run the demo, and stop (instead of serving until interrupted).
    #[arg(long)]
    pub exit: bool,
}

/// Set by SIGINT or SIGTERM, so that `up` returns and its children are stopped with it (by
/// `Children`'s drop) instead of being left serving without it.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

fn stop_on_signals() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    &STOP
}

/// Kills the processes it started when dropped.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn secret(path: &Path) -> Result<String> {
    if let Ok(s) = std::fs::read_to_string(path) {
        if s.trim().len() >= 8 {
            return Ok(s.trim().to_string());
        }
    }
    let mut b = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    let s: String = b.iter().map(|x| format!("{x:02x}")).collect();
    std::fs::write(path, &s).with_context(|| format!("writing {}", path.display()))?;
    Ok(s)
}

fn spawn(args: &[String], log: &Path) -> Result<Child> {
    let exe = std::env::current_exe()?;
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting a libra process")
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if t0.elapsed() > timeout {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(a: UpArgs) -> Result<()> {
    if a.nodes == 0 || a.nodes > 64 {
        bail!("--nodes: {} is not accepted: give 1 to 64 local nodes", a.nodes);
    }
    // From here on a SIGTERM or SIGINT stops the cluster with `up` (once the demo is over).
    let stop = stop_on_signals();
    let cores = std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0);
    let cpus = a.cpus_per_node.unwrap_or(cores / a.nodes as f64).min(cores);
    let state = match a.state {
        Some(s) => s,
        None => data_dir()?.join("up"),
    };
    std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
    let join = secret(&state.join("join-token"))?;
    let admin_pw = secret(&state.join("admin-password"))?;
    // A server already on the port would answer for ours: say so rather than talk to it.
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", a.port)) {
        bail!(
            "--port: 127.0.0.1:{} cannot be used ({e}); another `libra up` or `libra server` may be running there: stop it, or give another --port",
            a.port
        );
    }
    let url = format!("http://127.0.0.1:{}", a.port);
    let s = |x: &str| x.to_string();
    let mut kids = Children(Vec::new());
    kids.0.push(spawn(
        &[
            s("server"),
            s("--listen"),
            format!("127.0.0.1:{}", a.port),
            s("--db"),
            state.join("server.db").display().to_string(),
            s("--join-token"),
            join.clone(),
            s("--admin-password"),
            admin_pw.clone(),
            s("--period"),
            s("1"),
        ],
        &state.join("server.log"),
    )?);
    let anon = Client::new(&url, None);
    wait_for("the server", Duration::from_secs(15), || {
        anon.get::<serde_json::Value>("/api/openapi.json").ok()
    })
    .with_context(|| format!("see {}", state.join("server.log").display()))?;
    for i in 1..=a.nodes {
        let name = format!("node-{i}");
        kids.0.push(spawn(
            &[
                s("node"),
                s("--server"),
                url.clone(),
                s("--join-token"),
                join.clone(),
                s("--cpus"),
                format!("{cpus}"),
                s("--name"),
                name.clone(),
                s("--workdir"),
                state.join(&name).display().to_string(),
            ],
            &state.join(format!("{name}.log")),
        )?);
    }
    let admin = Client::new(&url, Some(anon.login("admin", &admin_pw)?.token));
    match admin.user_add(&UserAdd { name: "demo".into(), password: "demo".into(), admin: false }) {
        Ok(_) => {
            admin.credit("demo", Money::from_credits(1000))?;
        }
        Err(e) if e.status() == Some(409) => {}
        Err(e) => return Err(e.into()),
    }
    let demo_token = anon.login("demo", "demo")?.token;
    save_login(&Login { server: url.clone(), user: "demo".into(), token: demo_token.clone() })?;
    let demo = Client::new(&url, Some(demo_token));
    let nodes = wait_for("the node agents", Duration::from_secs(20), || {
        admin.nodes().ok().filter(|n| n.iter().filter(|x| x.up).count() >= a.nodes as usize)
    })?;
    println!(
        "Libra is up at {url}: {} nodes of {cpus:.2} CPUs ({}), state in {}",
        nodes.len(),
        nodes[0].mechanism,
        state.display()
    );
    println!(
        "  logged in as demo (1000 credits); administrator: admin / password in {}",
        state.join("admin-password").display()
    );
    println!("  try:  libra submit --estimate 5s --deadline 1m --budget 50 -- libra burn --cpu-seconds 5");
    println!("        libra status; libra quote; libra balance; libra history");
    if !a.no_demo {
        demo_run(&demo, cpus, a.nodes)?;
    }
    if a.exit {
        return Ok(());
    }
    println!("serving until interrupted (Ctrl-C)");
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if stop.load(Ordering::Relaxed) {
            println!("stopping the cluster (its jobs keep running; the next `libra up` adopts them)");
            return Ok(());
        }
        for c in &mut kids.0 {
            if let Ok(Some(st)) = c.try_wait() {
                bail!("a cluster process exited ({st}); see the logs in {}", state.display());
            }
        }
    }
}

fn burn(secs: f64, deadline: f64, budget: Money, procs: u32, name: &str) -> SubmitRequest {
    SubmitRequest {
        name: Some(name.into()),
        ..SubmitRequest::new(
            JobSpec::simple(secs, deadline, budget).with_procs(procs),
            resolve_command(vec!["libra".into(), "burn".into(), "--cpu-seconds".into(), format!("{secs}")]),
        )
    }
}

/// The `libra submit` command line that would submit `burn(...)`, for the demo's suggestion.
fn burn_line(secs: f64, deadline: f64, budget: Money, procs: u32, name: &str) -> Vec<String> {
    let words = ["libra", "submit", "--estimate", &format!("{secs}s"), "--deadline", &format!("{deadline}s")];
    let more = ["--budget", &budget.to_string(), "-n", &procs.to_string(), "-J", name, "--", "libra", "burn"];
    words.iter().chain(&more).chain(&["--cpu-seconds", &format!("{secs}")]).map(|w| w.to_string()).collect()
}

/// Submits a few jobs (one too urgent to fit, then again with the suggestion), watches them
/// finish and shows the balance.
fn demo_run(c: &Client, cpus: f64, nodes: u32) -> Result<()> {
    println!("\n== demo: three jobs with relaxed deadlines");
    let mut ids = Vec::new();
    for (i, secs) in [2.0, 3.0, 2.0].into_iter().enumerate() {
        let (budget, name) = (Money::from_credits(50), format!("relaxed-{i}"));
        let j = c.submit(&burn(secs, 30.0, budget, 1, &name))?;
        print_decision(&j, &burn_line(secs, 30.0, budget, 1, &name));
        ids.push(j.id);
    }
    println!("\n== demo: an urgent job on every node at once, needing 90% of each node");
    // Best fit has packed the relaxed jobs onto one node, which has no 90% left: rejected.
    let urgent = 0.9 * cpus.min(1.0) * 4.0;
    let j = c.submit(&burn(urgent, 4.0, Money::from_credits(50), nodes, "urgent"))?;
    print_decision(&j, &burn_line(urgent, 4.0, Money::from_credits(50), nodes, "urgent"));
    if let (JobState::Rejected, Some(s)) = (j.state, j.suggestion) {
        println!("\n== demo: resubmitting with the suggestion");
        let again = c.submit(&burn(urgent, s.deadline.ceil(), s.budget, nodes, "urgent-again"))?;
        print_decision(&again, &burn_line(urgent, s.deadline.ceil(), s.budget, nodes, "urgent-again"));
        ids.push(again.id);
    } else {
        ids.push(j.id);
    }
    println!("\n== demo: watching them run");
    let t0 = Instant::now();
    let jobs: Vec<JobInfo> = loop {
        let jobs: Vec<JobInfo> = c.jobs(false)?.into_iter().filter(|j| ids.contains(&j.id)).collect();
        if jobs.iter().all(|j| !j.state.is_active()) || t0.elapsed() > Duration::from_secs(120) {
            break jobs;
        }
        std::thread::sleep(Duration::from_secs(2));
        let running = jobs.iter().filter(|j| j.state == JobState::Running).count();
        println!(
            "  {} running, {} done after {}",
            running,
            jobs.iter().filter(|j| !j.state.is_active()).count(),
            fmt_dur(t0.elapsed().as_secs_f64())
        );
    };
    println!("{}", jobs_table(&jobs, false));
    let b = c.balance()?;
    println!(
        "balance: {} available, {} on hold, {} charged",
        money(b.available),
        money(b.held),
        money(b.charged)
    );
    Ok(())
}
