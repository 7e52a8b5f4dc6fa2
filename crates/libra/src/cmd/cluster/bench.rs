//! `libra bench cluster`: the running cluster's speed, measured on this machine and printed as
//! a table (a benchmark, not a test): durable submissions per second through the API, admission
//! latency at 10, 100 and 1,000 (simulated) nodes, admission latency and server CPU per
//! submission with 1,000 to 100,000 jobs already active on 1,000 nodes, acceptance-to-start
//! latency on a real node agent, the share error of the enforcement, and `libra submit` as a
//! whole command.

use crate::cpu::{process_cpu, thread_cpu};
use crate::output::{emit, table, Render, Text};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use libra_api::{Client, JobState, RegisterRequest, SubmitRequest};
use libra_core::{JobSpec, Money};
use libra_server::{start_background, Background, Config};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Submissions per second, admission latency, start latency, share error, `libra submit` time.
    Cluster(ClusterBench),
    /// Crash safety: submitters, jobs, and the server and node agents killed with SIGKILL at
    /// random over and over; then every invariant of jobs, money and answers is checked.
    Torture(super::torture::TortureArgs),
}

#[derive(Debug, Args)]
pub struct ClusterBench {
    /// Submissions for the throughput run.
    #[arg(long, default_value_t = 2000)]
    pub submissions: usize,
    /// Client threads for the throughput run.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Timed submissions per node count for the latency run.
    #[arg(long, default_value_t = 300)]
    pub latency_samples: usize,
    /// Runs of the `libra submit` command.
    #[arg(long, default_value_t = 30)]
    pub cli_runs: usize,
    /// Active jobs (comma-separated, ascending) at which admission latency and server CPU per
    /// submission are measured on `--active-nodes` nodes. The jobs are submitted first by
    /// `--clients` threads and stay active (the nodes are simulated and run nothing), so the
    /// last level costs that many submissions of setup (about 15 minutes for 100,000 on a 2-core
    /// machine before the store kept each user's count of active jobs; about a minute now).
    /// `--active` with no value skips this part.
    #[arg(long, default_value = "1000,10000,100000", value_delimiter = ',', num_args = 0..=1)]
    pub active: Vec<usize>,
    /// Simulated nodes for the active-jobs run.
    #[arg(long, default_value_t = 1000)]
    pub active_nodes: usize,
    /// Only the active-jobs run (for comparing two builds side by side).
    #[arg(long)]
    pub only_active: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    metric: String,
    value: f64,
    unit: &'static str,
    aim: String,
}

const JOIN: &str = "bench-join-token";
const ADMIN_PW: &str = "bench-admin";

pub fn run(a: BenchArgs) -> Result<()> {
    match a.what {
        BenchWhat::Cluster(c) => cluster(c),
        BenchWhat::Torture(t) => super::torture::run(t),
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn server(dir: &Path, name: &str, node_timeout: f64) -> Result<Background> {
    let config = Config {
        listen: "127.0.0.1:0".into(),
        db: dir.join(format!("{name}.db")),
        join_token: JOIN.into(),
        admin_password: Some(ADMIN_PW.into()),
        node_timeout,
        period: 0.5,
        sync_full: true,
        // The benchmark measures what the server can take, not one user's allowance: one user
        // submits everything.
        submit_rate: 1e6,
        submit_burst: u32::MAX,
        read_rate: 1e6,
        read_burst: u32::MAX,
        max_active_jobs: u32::MAX,
        ..Config::default()
    };
    Ok(start_background(config)?)
}

/// An administrator and a user with plenty of credit, logged in.
fn clients(url: &str) -> Result<(Client, Client)> {
    let anon = Client::new(url, None);
    let admin = Client::new(url, Some(anon.login("admin", ADMIN_PW)?.token));
    admin.user_add(&super::common::user_as_me("bench", "bench"))?;
    admin.credit("bench", Money::from_credits(1_000_000_000))?;
    let user = Client::new(url, Some(anon.login("bench", "bench")?.token));
    Ok((admin, user))
}

/// A job so small that any number of them fit: the decision and the write are what is timed.
fn tiny() -> SubmitRequest {
    SubmitRequest::new(JobSpec::simple(1.0, 1e6, Money::from_credits(100)), vec!["true".into()])
}

fn simulated_nodes(url: &str, n: usize) -> Result<()> {
    let node = Client::new(url, Some(JOIN.into()));
    for i in 0..n {
        node.register(&RegisterRequest {
            name: format!("sim-{i}"),
            cpus: 1.0,
            mem_mb: 0,
            mechanism: "simulated".into(),
            account: String::new(),
            switches_users: false,
        })?;
    }
    Ok(())
}

fn cluster(a: ClusterBench) -> Result<()> {
    if a.active.windows(2).any(|w| w[0] >= w[1]) {
        bail!(
            "--active: the levels must be ascending active-job counts, such as 1000,10000,100000 (got {:?})",
            a.active
        );
    }
    let dir = std::env::temp_dir().join(format!("libra-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(&a, &dir);
    // The scratch file systems of jobs whose agent is gone: mounted, the directory would stay.
    libra_node::scratch::unmount_all_under(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = result?;
    crate::cmd::quiet_on_closed_stdout();
    emit(rows.as_slice(), a.json)
}

/// The measurements: a metric a row.
impl Render for [Row] {
    fn text(&self) -> Text {
        let mut t = table(&["METRIC", "VALUE", "UNIT", "AIM"]);
        for r in self {
            t.add_row(vec![r.metric.clone(), format!("{:.3}", r.value), r.unit.into(), r.aim.clone()]);
        }
        Text::new().line(t)
    }
}

fn measure(a: &ClusterBench, dir: &Path) -> Result<Vec<Row>> {
    if a.only_active {
        return active_levels(a, dir);
    }
    let mut rows = Vec::new();
    // Admission latency at 10, 100, 1000 simulated nodes (agents that registered and stay up).
    for n in [10usize, 100, 1000] {
        eprintln!("admission latency at {n} nodes ...");
        let srv = server(dir, &format!("lat-{n}"), 80_000.0)?;
        let url = format!("http://{}", srv.addr);
        // The user before the nodes: simulated agents switch no accounts, and a cluster of such
        // agents refuses a user mapped to an account they do not run as.
        let (_, user) = clients(&url)?;
        simulated_nodes(&url, n)?;
        let mut lat = Vec::with_capacity(a.latency_samples);
        for _ in 0..a.latency_samples {
            let t0 = Instant::now();
            let j = user.submit(&tiny())?;
            lat.push(t0.elapsed().as_secs_f64() * 1e3);
            if j.state != JobState::Pending {
                bail!("a benchmark job was not accepted: {:?}", j.reason);
            }
        }
        let (p50, p99) = (pct(&mut lat, 0.5), pct(&mut lat, 0.99));
        rows.push(Row {
            metric: format!("admission latency p50, {n} nodes"),
            value: p50,
            unit: "ms",
            aim: String::new(),
        });
        rows.push(Row {
            metric: format!("admission latency p99, {n} nodes"),
            value: p99,
            unit: "ms",
            aim: if n == 1000 { "< 5 ms".into() } else { String::new() },
        });
        if n == 10 {
            // Durable submissions per second: several clients at once, each answer committed.
            eprintln!("throughput ...");
            let per = a.submissions / a.clients.max(1);
            let t0 = Instant::now();
            let handles: Vec<_> = (0..a.clients.max(1))
                .map(|_| {
                    let u = user.clone();
                    std::thread::spawn(move || -> Result<usize> {
                        for _ in 0..per {
                            u.submit(&tiny())?;
                        }
                        Ok(per)
                    })
                })
                .collect();
            let mut done = 0;
            for h in handles {
                done += h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
            }
            let rate = done as f64 / t0.elapsed().as_secs_f64();
            rows.push(Row {
                metric: format!("durable submissions/s ({} clients, fsync)", a.clients),
                value: rate,
                unit: "1/s",
                aim: ">= 2000".into(),
            });
            // `libra submit` as a whole command: process start, parse, request, answer.
            eprintln!("libra submit end to end ...");
            let exe = std::env::current_exe()?;
            let token = Client::new(&url, None).login("bench", "bench")?.token;
            let mut times = Vec::new();
            for _ in 0..a.cli_runs {
                let t0 = Instant::now();
                let out = Command::new(&exe)
                    .args([
                        "submit",
                        "--estimate",
                        "1s",
                        "--deadline",
                        "10d",
                        "--budget",
                        "100",
                        "--",
                        "true",
                    ])
                    .env("LIBRA_SERVER", &url)
                    .env("LIBRA_TOKEN", &token)
                    .output()
                    .context("running libra submit")?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
                if !out.status.success() {
                    bail!("libra submit failed: {}", String::from_utf8_lossy(&out.stderr));
                }
            }
            rows.push(Row {
                metric: "`libra submit` end to end, median".into(),
                value: pct(&mut times, 0.5),
                unit: "ms",
                aim: "< 5 ms".into(),
            });
        }
    }
    rows.extend(active_levels(a, dir)?);
    rows.extend(real_node(dir)?);
    Ok(rows)
}

/// Submits `n` tiny jobs from `clients` threads at once (setup, not timed).
fn fill(user: &Client, n: usize, clients: usize) -> Result<()> {
    let clients = clients.max(1);
    let handles: Vec<_> = (0..clients)
        .map(|k| {
            let u = user.clone();
            let mine = n / clients + usize::from(k < n % clients);
            std::thread::spawn(move || -> Result<()> {
                for _ in 0..mine {
                    let j = u.submit(&tiny())?;
                    if !j.state.is_active() {
                        bail!("a filler job was not accepted: {:?}", j.reason);
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    Ok(())
}

/// Admission with many jobs active: one server with `--active-nodes` simulated nodes, filled
/// to each level of `--active` in turn; at each level `--latency-samples` submissions one after
/// another, timed (p50, p99) and with the server's CPU per submission: the process's CPU
/// (getrusage) less the submitting thread's own (the server runs in this process; its
/// background work during the run counts, the client's does not).
fn active_levels(a: &ClusterBench, dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    if a.active.is_empty() {
        return Ok(rows);
    }
    let n = a.active_nodes;
    let srv = server(dir, "active", 80_000.0)?;
    let url = format!("http://{}", srv.addr);
    let (_, user) = clients(&url)?;
    simulated_nodes(&url, n)?;
    let mut active = 0usize;
    let mut cpu_at = Vec::new();
    for &level in &a.active {
        if level > active {
            eprintln!("filling to {level} active jobs on {n} nodes ...");
            fill(&user, level - active, a.clients)?;
            active = level;
        }
        eprintln!("admission with {active} active jobs on {n} nodes ...");
        let mut lat = Vec::with_capacity(a.latency_samples);
        let (p0, t0) = (process_cpu(), thread_cpu());
        for _ in 0..a.latency_samples {
            let t = Instant::now();
            let j = user.submit(&tiny())?;
            lat.push(t.elapsed().as_secs_f64() * 1e3);
            if j.state != JobState::Pending {
                bail!("a benchmark job was not accepted: {:?}", j.reason);
            }
        }
        let server_cpu = (process_cpu() - p0) - (thread_cpu() - t0);
        active += a.latency_samples;
        let per = server_cpu / a.latency_samples.max(1) as f64 * 1e3;
        cpu_at.push((level, per));
        rows.push(Row {
            metric: format!("admission latency p50, {n} nodes, {level} active"),
            value: pct(&mut lat, 0.5),
            unit: "ms",
            aim: String::new(),
        });
        rows.push(Row {
            metric: format!("admission latency p99, {n} nodes, {level} active"),
            value: pct(&mut lat, 0.99),
            unit: "ms",
            aim: "< 5 ms".into(),
        });
        rows.push(Row {
            metric: format!("server CPU per submission, {n} nodes, {level} active"),
            value: per,
            unit: "ms",
            aim: String::new(),
        });
    }
    if let (Some(&(lo, first)), Some(&(hi, last))) = (cpu_at.first(), cpu_at.last()) {
        if hi > lo {
            rows.push(Row {
                metric: format!("server CPU per submission, {hi} / {lo} active"),
                value: last / first,
                unit: "x",
                aim: "<= 2 (flat)".into(),
            });
        }
    }
    Ok(rows)
}

struct NodeChild(Child);

impl Drop for NodeChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn burn(secs: f64, deadline: f64) -> Result<SubmitRequest> {
    Ok(SubmitRequest::new(
        JobSpec::simple(secs, deadline, Money::from_credits(10_000)),
        vec![
            std::env::current_exe()?.display().to_string(),
            "burn".into(),
            "--cpu-seconds".into(),
            secs.to_string(),
        ],
    ))
}

/// CPU seconds of the process whose working directory is the job's.
fn job_cpu(workdir: &Path, job: u64) -> Option<f64> {
    // Every process working in the job's directory or under it: the keeper that waits for the
    // job (in the record directory) and the job itself (in its scratch directory inside it).
    let want: PathBuf = workdir.join(format!("job-{job}"));
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut total = None;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if !std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&want)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let f: Vec<f64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0.0)).collect();
        if let (Some(u), Some(s)) = (f.get(11), f.get(12)) {
            *total.get_or_insert(0.0) += (u + s) / hz;
        }
    }
    total
}

/// A real node agent (a child process, half a CPU): start latency and share error.
fn real_node(dir: &Path) -> Result<Vec<Row>> {
    eprintln!("real node: start latency and share error ...");
    let srv = server(dir, "real", 30.0)?;
    let url = format!("http://{}", srv.addr);
    let (admin, user) = clients(&url)?;
    let workdir = dir.join("node");
    let name = format!("bench-{}", std::process::id());
    let node = NodeChild(
        Command::new(std::env::current_exe()?)
            .args(["node", "--server", &url, "--cpus", "0.5", "--name", &name, "--period", "0.5"])
            .arg("--workdir")
            .arg(&workdir)
            // The secret through the environment, not the command line (which any user reads).
            .env("LIBRA_JOIN_TOKEN", JOIN)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mechanism = wait("the node agent", || {
        admin.nodes().ok().and_then(|n| n.into_iter().find(|x| x.up)).map(|n| n.mechanism)
    })?;
    let mut starts = Vec::new();
    for _ in 0..10 {
        let j = user.submit(&burn(0.05, 60.0)?)?;
        let started = wait("a job to start", || user.job(j.id).ok().and_then(|x| x.start_time))?;
        starts.push((started - j.submit_time) * 1e3);
        wait("a job to end", || user.job(j.id).ok().filter(|x| !x.state.is_active()))?;
    }
    let mut rows = vec![
        Row {
            metric: "acceptance to process start, p50".into(),
            value: pct(&mut starts, 0.5),
            unit: "ms",
            aim: String::new(),
        },
        Row {
            metric: "acceptance to process start, max".into(),
            value: pct(&mut starts, 1.0),
            unit: "ms",
            aim: String::new(),
        },
    ];
    // Two jobs with shares 0.3 and 0.15 on the node; measured over 5 s against the shares the
    // node reports enforcing.
    let a = user.submit(&burn(6.0, 20.0)?)?;
    let b = user.submit(&burn(3.0, 20.0)?)?;
    wait("both jobs running", || {
        (job_cpu(&workdir, a.id).is_some() && job_cpu(&workdir, b.id).is_some()).then_some(())
    })?;
    std::thread::sleep(Duration::from_secs(1));
    let shares = || -> Option<(f64, f64)> {
        let n = admin.nodes().ok()?.into_iter().find(|x| x.name == name)?;
        let s = |id| n.jobs.iter().find(|j| j.job == id).map(|j| j.share);
        Some((s(a.id)?, s(b.id)?))
    };
    let (sa0, sb0) = shares().context("the node's shares")?;
    let (a0, b0, t0) =
        (job_cpu(&workdir, a.id).unwrap_or(0.0), job_cpu(&workdir, b.id).unwrap_or(0.0), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    let (a1, b1, dt) = (
        job_cpu(&workdir, a.id).unwrap_or(0.0),
        job_cpu(&workdir, b.id).unwrap_or(0.0),
        t0.elapsed().as_secs_f64(),
    );
    let (sa1, sb1) = shares().context("the node's shares")?;
    let (ra, rb) = ((a1 - a0) / dt, (b1 - b0) / dt);
    let (sa, sb) = ((sa0 + sa1) / 2.0, (sb0 + sb1) / 2.0);
    let err = ((ra / (ra + rb)) / (sa / (sa + sb)) - 1.0).abs() * 100.0;
    rows.push(Row {
        metric: format!("share error ({mechanism}): measured vs assigned proportion"),
        value: err,
        unit: "%",
        aim: "< 5 %".into(),
    });
    rows.push(Row {
        metric: format!("node CPU used of 0.5 ({mechanism})"),
        value: ra + rb,
        unit: "CPU",
        aim: "<= 0.5".into(),
    });
    let _ = user.cancel(a.id);
    let _ = user.cancel(b.id);
    std::thread::sleep(Duration::from_millis(700));
    drop(node);
    // The benchmark node's control groups go with it.
    libra_node::enforce::remove_node_groups(&libra_node::group_name(&name, &workdir));
    Ok(rows)
}
