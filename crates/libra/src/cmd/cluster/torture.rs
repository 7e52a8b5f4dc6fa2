//! `libra bench torture`: crash safety, proved by trying to break it. A real server and real
//! node agents on this machine, many submitters, jobs finishing all the time, and the server
//! and the agents killed with SIGKILL at random moments over and over. At the end every
//! accepted job must be in a final state, nothing held, every job started at most once, every
//! user's ledger balanced (available + held + charged = credit granted, the running totals equal
//! to the entries), every answer a client got matching the store, and SQLite's own integrity
//! check clean after every crash.

use super::common::{fmt_dur, parse_duration};
use crate::output::{emit, table, Render, Text};
use anyhow::{bail, Context, Result};
use clap::Args;
use libra_api::{Client, ClientError, JobState, SubmitRequest};
use libra_core::{JobSpec, Money};
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct TortureArgs {
    /// How long to submit and kill (30s, 10m); then the cluster is left to finish its jobs
    /// and everything is checked.
    #[arg(long, default_value = "1m")]
    pub duration: String,
    /// The same in minutes (`--minutes 10` is `--duration 10m`).
    #[arg(long, conflicts_with = "duration")]
    pub minutes: Option<f64>,
    /// Run the server and the node agents from another `libra` binary (an earlier release, say)
    /// to see what the torture finds there; this one still drives and checks.
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Node agents.
    #[arg(long, default_value_t = 2)]
    pub nodes: u32,
    /// Concurrent submitters (each its own user).
    #[arg(long, default_value_t = 8)]
    pub submitters: u32,
    /// Mean seconds between two kills (exponentially distributed).
    #[arg(long, default_value_t = 2.0)]
    pub kill_every: f64,
    /// Seed of the random submissions and kills.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the state (database, logs, job files) in this directory instead of a temporary one.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Port for the server on 127.0.0.1 (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

const JOIN: &str = "torture-join-token";
const ADMIN_PW: &str = "torture-admin";
/// Credit each submitter starts with.
const CREDIT: i64 = 1_000_000;

/// What the torture found.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub seconds: f64,
    pub server_kills: u64,
    pub node_kills: u64,
    pub integrity_checks: u64,
    pub submissions: u64,
    pub answered: u64,
    /// Submissions whose client never got an answer (every retry failed).
    pub unanswered: u64,
    pub accepted: u64,
    pub jobs_checked: u64,
    pub jobs_started: u64,
    pub invariants_checked: u64,
    pub violations: Vec<String>,
    /// The hosted sweep run through the torture: its jobs, how many ran, what it spent and
    /// what the cluster charged for it.
    pub sweep: Option<SweepCheck>,
    /// What could not be tried (and so was not checked).
    pub notes: Vec<String>,
}

impl Render for Report {
    fn text(&self) -> Text {
        let mut t = table(&["WHAT", "COUNT"]);
        let rows: [(&str, u64); 11] = [
            ("server kills (SIGKILL) survived", self.server_kills),
            ("node agent kills (SIGKILL) survived", self.node_kills),
            ("integrity checks after a crash", self.integrity_checks),
            ("submissions", self.submissions),
            ("answered", self.answered),
            ("never answered (client gave up)", self.unanswered),
            ("accepted", self.accepted),
            ("jobs checked", self.jobs_checked),
            ("jobs started on a node", self.jobs_started),
            ("invariants checked", self.invariants_checked),
            ("violations", self.violations.len() as u64),
        ];
        for (k, v) in rows {
            t.add_row(vec![k.to_string(), v.to_string()]);
        }
        let mut text = Text::new().line(t);
        text = text.line(format!("{} of torture", fmt_dur(self.seconds)));
        if let Some(sw) = &self.sweep {
            text = text.line(format!(
                "hosted sweep: {} with {} of {} jobs done, {} job runs; spent {} cents, the cluster charged {}",
                sw.state, sw.done, sw.jobs, sw.job_runs, sw.spent_cents, sw.cluster_charged_cents
            ));
        }
        for n in &self.notes {
            text = text.line(format!("note: {n}"));
        }
        for v in &self.violations {
            text = text.line(format!("VIOLATION: {v}"));
        }
        text
    }
}

#[derive(Debug, Default, Serialize)]
pub struct SweepCheck {
    pub state: String,
    pub jobs: u64,
    pub done: u64,
    pub job_runs: u64,
    pub spent_cents: i64,
    pub cluster_charged_cents: i64,
}

/// One submission as its client saw it.
#[derive(Debug, Clone)]
struct Answer {
    user: String,
    key: String,
    job: Option<(u64, JobState)>,
}

struct Procs {
    exe: PathBuf,
    dir: PathBuf,
    port: u16,
    server: Option<Child>,
    nodes: Vec<Option<Child>>,
}

impl Procs {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn db(&self) -> PathBuf {
        self.dir.join("server.db")
    }

    fn log(&self, name: &str) -> Result<std::fs::File> {
        let p = self.dir.join(format!("{name}.log"));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .with_context(|| format!("opening {}", p.display()))
    }

    fn start_server(&mut self) -> Result<()> {
        let child = Command::new(&self.exe)
            .args(["server", "--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--period", "0.5", "--node-timeout", "20"])
            // Secrets through the environment, not the command line (which any user reads);
            // earlier releases (--binary) read the same variables.
            .env("LIBRA_JOIN_TOKEN", JOIN)
            .env("LIBRA_ADMIN_PASSWORD", ADMIN_PW)
            .arg("--db")
            .arg(self.db())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log("server")?)
            .spawn()
            .context("starting the server")?;
        self.server = Some(child);
        let anon = Client::new(&self.url(), None);
        let t0 = Instant::now();
        while anon.get::<serde_json::Value>("/api/openapi.json").is_err() {
            if t0.elapsed() > Duration::from_secs(30) {
                bail!("the server did not come up; see {}", self.dir.join("server.log").display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn start_node(&mut self, i: usize, cpus: f64) -> Result<()> {
        let name = format!("node-{i}");
        let child = Command::new(&self.exe)
            .args(["node", "--server", &self.url(), "--name", &name])
            .env("LIBRA_JOIN_TOKEN", JOIN)
            .args(["--cpus", &cpus.to_string(), "--period", "0.5"])
            .arg("--workdir")
            .arg(self.dir.join(&name))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log(&name)?)
            .spawn()
            .context("starting a node agent")?;
        self.nodes[i] = Some(child);
        Ok(())
    }

    fn kill(child: &mut Option<Child>) {
        if let Some(mut c) = child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.nodes.iter_mut() {
            Procs::kill(c);
        }
        Procs::kill(&mut self.server);
        // The jobs outlive their agents by design; these are ours: every process started in
        // our directories.
        for pid in processes_under(&self.dir) {
            // SAFETY: kill(2) of a process this run started (its working directory is ours).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        // A job given no working directory runs on a scratch file system of its own, which
        // outlives its killed agent: detached here so that the directory can go.
        libra_node::scratch::unmount_all_under(&self.dir);
        for i in 0..self.nodes.len() {
            let name = format!("node-{i}");
            libra_node::enforce::remove_node_groups(&libra_node::group_name(&name, &self.dir.join(&name)));
        }
    }
}

fn processes_under(dir: &Path) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == std::process::id() as i32 {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
            if cwd.starts_with(dir) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// SQLite's own check of the database file, as found after a crash, and the store's kept
/// counts (each user's active jobs and kept command bytes, each job's open parts) against what
/// they count.
fn integrity(db: &Path) -> Result<String> {
    let c = Connection::open(db)?;
    c.busy_timeout(Duration::from_secs(10))?;
    let check = c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))?;
    if check != "ok" {
        return Ok(check);
    }
    let off = libra_server::store::jobs::active_counts_disagreeing(&c)?;
    if let Some((user, kept, counted)) = off.first() {
        return Ok(format!("user {user}'s kept count of active jobs is {kept}, its jobs count {counted}"));
    }
    let commands = libra_server::store::jobs::command_bytes_disagreeing(&c)?;
    if let Some((user, kept, counted)) = commands.first() {
        return Ok(format!("user {user}'s kept count of command bytes is {kept}, its jobs count {counted}"));
    }
    let refusals = libra_server::store::jobs::refusals_disagreeing(&c)?;
    if let Some((user, kept, counted)) = refusals.first() {
        return Ok(format!("user {user}'s kept count of refusals is {kept}, its jobs count {counted}"));
    }
    let open = libra_server::store::jobs::open_parts_disagreeing(&c)?;
    Ok(match open.first() {
        None => check,
        Some((job, kept, counted)) => {
            format!("job {job}'s kept count of open parts is {kept:?}, its parts count {counted:?}")
        }
    })
}

pub fn run(a: TortureArgs) -> Result<()> {
    let secs = match a.minutes {
        Some(m) if m.is_finite() && m > 0.0 => m * 60.0,
        Some(m) => bail!("--minutes: {m} is not accepted: give a number of minutes greater than 0"),
        None => parse_duration(&a.duration).map_err(|e| anyhow::anyhow!("--duration: {e}"))?,
    };
    if a.nodes == 0 || a.submitters == 0 || a.kill_every <= 0.0 {
        bail!("--nodes, --submitters and --kill-every must be greater than 0");
    }
    let temp = a.state.is_none();
    let dir = match &a.state {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("libra-torture-{}", std::process::id())),
    };
    if dir.join("server.db").exists() {
        bail!("--state: {} already holds a torture run; give an empty directory", dir.display());
    }
    std::fs::create_dir_all(dir.join("jobs")).with_context(|| format!("creating {}", dir.display()))?;
    let result = torture(&a, secs, &dir);
    if temp && result.as_ref().is_ok_and(|r| r.violations.is_empty()) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let r = result?;
    emit(&r, a.json)?;
    if !r.violations.is_empty() {
        bail!("{} invariants were broken; the state is kept in {}", r.violations.len(), dir.display());
    }
    Ok(())
}

fn torture(a: &TortureArgs, secs: f64, dir: &Path) -> Result<Report> {
    let port = match a.port {
        Some(p) => p,
        None => std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port(),
    };
    let cores = std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0);
    let cpus = (cores / f64::from(a.nodes)).min(1.0);
    let mut procs = Procs {
        exe: match &a.binary {
            Some(b) => b.clone(),
            None => std::env::current_exe().context("finding the libra binary")?,
        },
        dir: dir.to_path_buf(),
        port,
        server: None,
        nodes: (0..a.nodes).map(|_| None).collect(),
    };
    procs.start_server()?;
    for i in 0..a.nodes as usize {
        procs.start_node(i, cpus)?;
    }
    let url = procs.url();
    let anon = Client::new(&url, None);
    let admin = Client::new(&url, Some(anon.login("admin", ADMIN_PW)?.token));
    let mut users = Vec::new();
    for i in 0..a.submitters {
        let name = format!("t{i}");
        admin.user_add(&super::common::user_as_me(&name, &format!("pw-{name}")))?;
        credit(&admin, &name)?;
        users.push((name.clone(), anon.login(&name, &format!("pw-{name}"))?.token));
    }
    let mut report = Report::default();
    let sweep = hosted_sweep(&admin, &anon, &url, dir, &mut report);
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let refused: Arc<Mutex<Vec<String>>> = Arc::default();
    let submissions = Arc::new(AtomicU64::new(0));
    eprintln!(
        "torture: {} submitters, {} nodes, a kill every {:.1} s on average, for {}",
        a.submitters,
        a.nodes,
        a.kill_every,
        fmt_dur(secs)
    );
    let mut report = Report::default();
    std::thread::scope(|s| -> Result<()> {
        for (i, (user, token)) in users.iter().enumerate() {
            let (stop, answers, submissions) = (stop.clone(), answers.clone(), submissions.clone());
            let refused = refused.clone();
            let client = Client::new(&url, Some(token.clone()));
            let jobs = dir.join("jobs");
            let seed = a.seed.wrapping_mul(1000).wrapping_add(i as u64);
            let exe = std::env::current_exe().unwrap_or_else(|_| procs.exe.clone());
            s.spawn(move || {
                submitter(&client, user, &exe, &jobs, seed, &stop, &answers, &submissions, &refused)
            });
        }
        // The chaos: kill the server or an agent, check the file, start it again.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(a.seed);
        while t0.elapsed().as_secs_f64() < secs {
            let wait = -a.kill_every * (1.0 - rng.random::<f64>()).ln();
            std::thread::sleep(Duration::from_secs_f64(wait.min(secs)));
            if t0.elapsed().as_secs_f64() >= secs {
                break;
            }
            if rng.random_bool(0.6) {
                Procs::kill(&mut procs.server);
                report.server_kills += 1;
                let check = integrity(&procs.db())?;
                report.integrity_checks += 1;
                if check != "ok" {
                    report
                        .violations
                        .push(format!("integrity check after server kill {}: {check}", report.server_kills));
                }
                std::thread::sleep(Duration::from_secs_f64(rng.random_range(0.0..1.5)));
                procs.start_server()?;
            } else {
                let i = rng.random_range(0..a.nodes as usize);
                Procs::kill(&mut procs.nodes[i]);
                report.node_kills += 1;
                std::thread::sleep(Duration::from_secs_f64(rng.random_range(0.0..2.0)));
                procs.start_node(i, cpus)?;
            }
        }
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    report.submissions = submissions.load(Ordering::Relaxed);
    if let Ok(r) = refused.lock() {
        if !r.is_empty() {
            report.violations.push(format!(
                "{} valid submissions were refused, the first: {}",
                r.len(),
                r[0]
            ));
        }
    }
    // Let the cluster finish what it accepted (the deadlines are at most a minute away).
    let admin = Client::new(&url, Some(anon.login("admin", ADMIN_PW)?.token));
    let t_end = Instant::now();
    loop {
        let active = admin.jobs(true).map(|j| j.iter().filter(|j| j.state.is_active()).count()).unwrap_or(1);
        if active == 0 {
            break;
        }
        if t_end.elapsed() > Duration::from_secs(120) {
            report.violations.push(format!("{active} jobs still active two minutes after the torture ended"));
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    if let Some((client, id)) = &sweep {
        let t = Instant::now();
        while client.sweep(*id).is_ok_and(|s| s.state == "running" || s.state == "paused") {
            if t.elapsed() > Duration::from_secs(120) {
                report
                    .violations
                    .push(format!("hosted sweep {id} still running two minutes after the torture ended"));
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    // A clean stop of the server, then the checks on the file itself.
    if let Some(mut srv) = procs.server.take() {
        // SAFETY: SIGTERM to the server this run started.
        unsafe {
            libc::kill(srv.id() as i32, libc::SIGTERM);
        }
        let _ = srv.wait();
    }
    let answers = answers.lock().map(|a| a.clone()).unwrap_or_default();
    check(&procs.db(), &dir.join("jobs").join("starts.log"), &answers, &mut report)?;
    if let Some((_, id)) = sweep {
        check_sweep(
            &procs.db(),
            &dir.join("sweeps").join("broker.db"),
            id,
            &dir.join("jobs").join("sweep-starts.log"),
            &mut report,
        )?;
    }
    Ok(report)
}

/// Gives a submitter its credit, in the request shape of this release or, for a server from an
/// earlier one (`--binary`), of that one.
fn credit(admin: &Client, user: &str) -> Result<()> {
    match admin.credit(user, Money::from_credits(CREDIT)) {
        Err(e) if e.status() == Some(400) => {
            let old = serde_json::json!({ "user": user, "amount": Money::from_credits(CREDIT).cents() });
            admin.post::<_, serde_json::Value>("/api/admin/credit", &old)?;
            Ok(())
        }
        r => Ok(r.map(|_| ())?),
    }
}

/// The user whose hosted sweep runs through the torture.
const SWEEPER: &str = "sweeper";
/// Jobs of the hosted sweep.
const SWEEP_JOBS: u64 = 40;

/// A sweep hosted by the server, whose `libra` resource is the server itself: its engine is
/// killed with the server, over and over. None (with a note) when the server cannot host it.
fn hosted_sweep(
    admin: &Client,
    anon: &Client,
    url: &str,
    dir: &Path,
    r: &mut Report,
) -> Option<(Client, i64)> {
    let made = (|| -> Result<(Client, i64)> {
        admin.user_add(&super::common::user_as_me(SWEEPER, &format!("pw-{SWEEPER}")))?;
        credit(admin, SWEEPER)?;
        let token = anon.login(SWEEPER, &format!("pw-{SWEEPER}"))?.token;
        let client = Client::new(url, Some(token.clone()));
        let log = dir.join("jobs").join("sweep-starts.log");
        // Each job uses CPU, so that it costs something: a sweep that paid twice would show.
        let exe = std::env::current_exe()?;
        let plan = format!(
            "parameter x integer range from 1 to {SWEEP_JOBS} step 1\ntask main\n    shexec \"echo $x >> {}; '{}' burn --cpu-seconds 0.3; sleep 0.5\"\nendtask\n",
            log.display(),
            exe.display()
        );
        let resources = format!(
            "[[resource]]\nname = \"here\"\nkind = \"libra\"\nslots = 2\nprice = 50\nurl = \"{url}\"\ntoken = \"{token}\"\n"
        );
        let create = libra_api::SweepCreate {
            plan,
            resources,
            name: Some("torture".into()),
            deadline: None,
            deadline_in: Some(3600.0),
            budget: Money::from_credits(100_000),
            optimise: Some("time".into()),
            max_retries: Some(0),
            estimate: Some(2.0),
            seed: 0,
        };
        let id = match client.sweep_create(&create) {
            Ok(info) => info.id,
            // A server of an earlier release (`--binary`) reads the request of its day.
            Err(e) if e.status() == Some(400) => {
                let mut old = serde_json::to_value(&create)?;
                if let Some(m) = old.as_object_mut() {
                    let b = m.remove("budget_cents").unwrap_or_default();
                    m.insert("budget".into(), b);
                }
                let v: serde_json::Value = client.post("/api/sweeps", &old)?;
                v["id"].as_i64().context("the server's answer names no sweep")?
            }
            Err(e) => return Err(e.into()),
        };
        Ok((client, id))
    })();
    match made {
        Ok(x) => Some(x),
        Err(e) => {
            r.notes.push(format!("no hosted sweep: {}", crate::output::error_line(&e)));
            None
        }
    }
}

/// The hosted sweep ran each job at most once and spent what the cluster charged for it.
fn check_sweep(db: &Path, broker: &Path, exp: i64, starts: &Path, r: &mut Report) -> Result<()> {
    let b = Connection::open_with_flags(broker, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let (state, spent): (String, i64) = b.query_row(
        "SELECT state, (SELECT COALESCE(SUM(amount_cents), 0) FROM payments WHERE exp_id = ?1) FROM experiments WHERE id = ?1",
        [exp],
        |x| Ok((x.get(0)?, x.get(1)?)),
    )?;
    let done: i64 =
        b.query_row("SELECT COUNT(*) FROM jobs WHERE exp_id = ?1 AND state = 'done'", [exp], |x| x.get(0))?;
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let charged: i64 = c.query_row(
        "SELECT COALESCE(SUM(j.charged), 0) FROM jobs j JOIN users u ON u.id = j.user_id WHERE u.name = ?1",
        [SWEEPER],
        |x| x.get(0),
    )?;
    let text = std::fs::read_to_string(starts).unwrap_or_default();
    let mut runs: HashMap<&str, u32> = HashMap::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        *runs.entry(l.trim()).or_default() += 1;
    }
    for (x, n) in &runs {
        r.invariants_checked += 1;
        if *n > 1 {
            r.violations.push(format!("hosted sweep job x={x} ran {n} times"));
        }
    }
    r.invariants_checked += 1;
    if spent != charged {
        r.violations.push(format!("the hosted sweep spent {spent} cents, the cluster charged {charged}"));
    }
    r.sweep = Some(SweepCheck {
        state,
        jobs: SWEEP_JOBS,
        done: done as u64,
        job_runs: runs.values().map(|n| u64::from(*n)).sum(),
        spent_cents: spent,
        cluster_charged_cents: charged,
    });
    Ok(())
}

/// One user submitting jobs (each with its own idempotency key, retried with the same key
/// until it is answered) and now and then cancelling one, until told to stop.
/// A submission as servers before money was named `*_cents` read it.
fn old_request(req: &SubmitRequest) -> serde_json::Value {
    fn rename(v: &mut serde_json::Value) {
        if let serde_json::Value::Object(m) = v {
            if let Some(b) = m.remove("budget_cents") {
                m.insert("budget".into(), b);
            }
            m.values_mut().for_each(rename);
        }
    }
    let mut v = serde_json::to_value(req).unwrap_or_default();
    rename(&mut v);
    v
}

#[allow(clippy::too_many_arguments)]
fn submitter(
    c: &Client,
    user: &str,
    exe: &Path,
    jobs: &Path,
    seed: u64,
    stop: &AtomicBool,
    answers: &Mutex<Vec<Answer>>,
    submissions: &AtomicU64,
    refused: &Mutex<Vec<String>>,
) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut mine: Vec<u64> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let estimate: f64 = rng.random_range(0.2..2.0);
        let deadline = estimate * rng.random_range(3.0..20.0);
        let budget = Money::from_credits(rng.random_range(5..60));
        // Every start is logged, so that a job started twice is seen.
        let work = if rng.random_bool(0.5) {
            format!("sleep {estimate:.2}")
        } else {
            format!("'{}' burn --cpu-seconds {:.2}", exe.display(), estimate / 2.0)
        };
        // The job id and rank from Libra's variables; an earlier release (`--binary`) has none,
        // but runs each rank in a directory of its own named after the job.
        let script = format!(
            "echo \"${{LIBRA_JOB_ID:-${{PWD##*job-}}}} ${{LIBRA_PROCID:-$PWD}}\" >> '{}'; {work}",
            jobs.join("starts.log").display()
        );
        let mut spec = JobSpec::simple(estimate, deadline, budget);
        spec.resources.procs = if rng.random_bool(0.1) { 2 } else { 1 };
        let mut req = SubmitRequest::new(spec, vec!["sh".into(), "-c".into(), script]);
        req.workdir = Some(jobs.display().to_string());
        req.stdout = Some("/dev/null".into());
        let key = libra_api::new_idempotency_key();
        // The key is also the job's name: what shows a second job made for one submission even
        // where the server does not know the key.
        req.name = Some(format!("t-{key}"));
        submissions.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let mut old_shape = false;
        let answer = loop {
            let sent = if old_shape {
                c.post::<_, libra_api::JobInfo>("/api/jobs", &old_request(&req))
            } else {
                c.submit_with_key(&req, &key)
            };
            match sent {
                Ok(j) => break Some((j.id, j.state)),
                Err(ClientError::Status { status: 429, .. }) => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                // A server of an earlier release (`--binary`) reads the request of its day.
                Err(ClientError::Status { status: 400, .. }) if !old_shape => old_shape = true,
                Err(ClientError::Status { status, message }) if status < 500 => {
                    if let Ok(mut r) = refused.lock() {
                        r.push(format!("a valid submission was refused: {message} (HTTP {status})"));
                    }
                    break None;
                }
                Err(_) if t0.elapsed() < Duration::from_secs(60) => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(_) => break None,
            }
        };
        if let Some((id, JobState::Pending | JobState::Running)) = answer {
            mine.push(id);
        }
        if let Ok(mut a) = answers.lock() {
            a.push(Answer { user: user.to_string(), key, job: answer });
        }
        if !mine.is_empty() && rng.random_bool(0.08) {
            let id = mine[rng.random_range(0..mine.len())];
            let _ = c.cancel(id);
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(5..60)));
    }
}

/// Every invariant, on the store as the last stop left it.
fn check(db: &Path, starts: &Path, answers: &[Answer], r: &mut Report) -> Result<()> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut inv = 0u64;
    let mut bad = |cond: bool, msg: String, r: &mut Report| {
        inv += 1;
        if !cond && r.violations.len() < 50 {
            r.violations.push(msg);
        }
    };
    let ic: String = c.query_row("PRAGMA integrity_check", [], |x| x.get(0))?;
    bad(ic == "ok", format!("final integrity check: {ic}"), r);
    // Jobs: final, settled exactly, never charged above the budget.
    let mut st = c.prepare(
        "SELECT j.id, u.name, j.state, j.budget, j.charged, CASE WHEN j.name LIKE 't-%' THEN substr(j.name, 3) END, \
         COALESCE((SELECT SUM(amount) FROM ledger l WHERE l.job = j.id AND kind = 'hold'), 0), \
         COALESCE((SELECT SUM(amount) FROM ledger l WHERE l.job = j.id AND kind = 'charge'), 0), \
         COALESCE((SELECT SUM(amount) FROM ledger l WHERE l.job = j.id AND kind = 'release'), 0) \
         FROM jobs j JOIN users u ON u.id = j.user_id",
    )?;
    type Row = (u64, String, String, i64, i64, Option<String>, i64, i64, i64);
    let rows: Vec<Row> = st
        .query_map([], |x| {
            Ok((
                x.get::<_, i64>(0)? as u64,
                x.get(1)?,
                x.get(2)?,
                x.get(3)?,
                x.get(4)?,
                x.get(5)?,
                x.get(6)?,
                x.get(7)?,
                x.get(8)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut by_key: HashMap<(String, String), (u64, String)> = HashMap::new();
    for (id, user, state, budget, charged, key, holds, charges, releases) in &rows {
        r.jobs_checked += 1;
        let st = JobState::parse(state);
        bad(st.is_some_and(|s| !s.is_active()), format!("job {id} is still {state}"), r);
        bad(
            holds == &(charges + releases),
            format!("job {id}: held {holds}, charged {charges} + released {releases}"),
            r,
        );
        bad(charges == charged, format!("job {id}: charged column {charged}, ledger {charges}"), r);
        bad(charged <= budget, format!("job {id}: charged {charged} above its budget {budget}"), r);
        if state != "REJECTED" {
            r.accepted += 1;
        }
        if let Some(k) = key {
            bad(
                by_key.insert((user.clone(), k.clone()), (*id, state.clone())).is_none(),
                format!("two jobs for {user}'s key {k}"),
                r,
            );
        }
    }
    // Users: available + held + charged = deposited; the running totals equal the entries.
    let mut st = c.prepare(
        "SELECT u.name, \
         COALESCE(SUM(CASE kind WHEN 'deposit' THEN amount END), 0), COALESCE(SUM(CASE kind WHEN 'hold' THEN amount END), 0), \
         COALESCE(SUM(CASE kind WHEN 'charge' THEN amount END), 0), COALESCE(SUM(CASE kind WHEN 'release' THEN amount END), 0), \
         (SELECT dep_total || ' ' || hold_total || ' ' || charge_total || ' ' || release_total FROM ledger m WHERE m.user_id = u.id ORDER BY m.id DESC LIMIT 1) \
         FROM users u JOIN ledger l ON l.user_id = u.id GROUP BY u.id",
    )?;
    let users: Vec<(String, i64, i64, i64, i64, Option<String>)> = st
        .query_map([], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?, x.get(5)?)))?
        .collect::<Result<_, _>>()?;
    for (u, d, h, ch, rel) in users.iter().map(|x| (&x.0, x.1, x.2, x.3, x.4)) {
        let available = d - h + rel;
        let held = h - ch - rel;
        bad(held == 0, format!("{u}: {held} still on hold"), r);
        bad(available >= 0, format!("{u}: available {available} below zero"), r);
        bad(available + held + ch == d, format!("{u}: available + held + charged != deposited"), r);
    }
    for (u, d, h, ch, rel, totals) in &users {
        bad(
            totals.as_deref() == Some(&format!("{d} {h} {ch} {rel}")),
            format!("{u}: running totals {totals:?} disagree with the entries"),
            r,
        );
    }
    // Every answer a client got is what the store holds.
    for a in answers {
        match a.job {
            Some((id, state)) => {
                r.answered += 1;
                let stored = by_key.get(&(a.user.clone(), a.key.clone()));
                bad(
                    stored.is_some_and(|(sid, _)| *sid == id),
                    format!("{}'s answer job {id} (key {}) is not the store's {stored:?}", a.user, a.key),
                    r,
                );
                if state == JobState::Rejected {
                    bad(
                        stored.is_some_and(|(_, s)| s == "REJECTED"),
                        format!("job {id} answered REJECTED, stored {stored:?}"),
                        r,
                    );
                }
            }
            None => r.unanswered += 1,
        }
    }
    // Every job started at most once on each of its nodes.
    let text = std::fs::read_to_string(starts).unwrap_or_default();
    let mut starts_of: HashMap<&str, u32> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        *starts_of.entry(line.trim()).or_default() += 1;
    }
    r.jobs_started = starts_of.len() as u64;
    for (job_rank, n) in &starts_of {
        bad(*n == 1, format!("job (id rank) {job_rank} started {n} times"), r);
    }
    let unknown: Vec<&&str> = starts_of
        .keys()
        .filter(|k| {
            k.split_whitespace()
                .next()
                .and_then(|id| id.parse::<u64>().ok())
                .is_none_or(|id| !rows.iter().any(|x| x.0 == id && x.2 != "REJECTED"))
        })
        .collect();
    bad(unknown.is_empty(), format!("processes started for jobs the store never accepted: {unknown:?}"), r);
    r.invariants_checked = inv;
    Ok(())
}
