//! `libra up`: a whole cluster on this machine in one command: a server, N node agents (each
//! capped at its own slice of the machine), an administrator and a demo user with credit, and a
//! short scripted demo.

use super::common::{data_dir, fmt_dur, fmt_time, login_path, money, now, save_login, saved_login, Login};
use super::jobs::jobs_table;
use super::submit::{decision_text, resolve_command};
use anyhow::{bail, Context, Result};
use clap::Args;
use libra_api::{Client, ClientError, JobInfo, JobState, SubmitRequest};
use libra_core::{JobSpec, Money, Shown};
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
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
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub cpus_per_node: Option<f64>,
    /// Port for the server on 127.0.0.1.
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// State directory (default: `up` in the user's data directory).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Skip the scripted demo.
    #[arg(long, conflicts_with = "demo")]
    pub no_demo: bool,
    /// Run the scripted demo again (by itself it runs only on the first `up` of a state
    /// directory, so that later ones do not charge the demo user again).
    #[arg(long)]
    pub demo: bool,
    /// Start, run the demo, and stop (instead of serving until interrupted).
    #[arg(long)]
    pub exit: bool,
    /// Serve https with a self-signed certificate (kept in the state directory's tls/; the
    /// saved login and the node agents trust it). Off by default: the cluster is reached on
    /// 127.0.0.1 only, and a browser warns about a self-signed certificate.
    #[arg(long)]
    pub tls: bool,
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

/// Stops the processes it started when dropped: SIGTERM, so that each cleans up after itself
/// (a node agent removes its scratch file systems made ahead, the server finishes the requests
/// in flight), then SIGKILL for any still there after `STOP_WAIT`.
///
/// The second field names the node agents (name, work directory): once they have stopped, their
/// control groups left empty are removed (a job that runs on keeps its own).
struct Children(Vec<Child>, Vec<(String, PathBuf)>);

/// How long `Children` waits for its processes to stop on SIGTERM.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) on a child of this process, not yet waited for.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let until = std::time::Instant::now() + STOP_WAIT;
        for c in &mut self.0 {
            while matches!(c.try_wait(), Ok(None)) && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for (name, workdir) in &self.1 {
            libra_node::enforce::remove_empty_node_groups(&libra_node::group_name(name, workdir));
        }
    }
}

/// The state directory holds secrets (the join token, the passwords): only its owner may read
/// it. Created 0700; one left more open by an older `up` is closed.
fn private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private", dir.display()))
}

/// Writes a secret into a file only its owner can read: created 0600, never readable by others
/// even for a moment, and one left more open by an older `up` is closed before it is written.
fn write_secret(path: &Path, text: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

fn random_hex(bytes: usize) -> Result<String> {
    let mut b = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A secret of the state directory: the one saved in `path`, else a new random one saved there.
fn secret(path: &Path, min_len: usize) -> Result<String> {
    if let Ok(s) = std::fs::read_to_string(path) {
        if s.trim().len() >= min_len {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            return Ok(s.trim().to_string());
        }
    }
    let s = random_hex(12)?;
    write_secret(path, &s)?;
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

/// An error once SIGINT or SIGTERM has come: what `up` is waiting for is not worth finishing.
fn interrupted() -> Result<()> {
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
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
        interrupted()?;
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(a: UpArgs) -> Result<()> {
    if a.nodes == 0 || a.nodes > 64 {
        bail!("--nodes: {} is not accepted: give 1 to 64 local nodes", a.nodes);
    }
    if let Some(c) = a.cpus_per_node.filter(|c| *c <= 0.0) {
        bail!(
            "--cpus-per-node: {} is not accepted: give a capacity above 0 (fractions allowed, e.g. 0.5)",
            Shown(c)
        );
    }
    // From here on a SIGTERM or SIGINT stops the cluster with `up`.
    let stop = stop_on_signals();
    let cores = std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0);
    let cpus = a.cpus_per_node.unwrap_or(cores / a.nodes as f64).min(cores);
    let state = match a.state {
        Some(s) => s,
        None => data_dir()?.join("up"),
    };
    private_dir(&state)?;
    // Made here (random, 0600) if absent; the children read it from the file.
    secret(&state.join("join-token"), 8)?;
    let admin_pw = secret(&state.join("admin-password"), 8)?;
    // A server already on the port would answer for ours: say so rather than talk to it.
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", a.port)) {
        bail!(
            "--port: 127.0.0.1:{} cannot be used ({e}); another `libra up` or `libra server` may be running there: stop it, or give another --port",
            a.port
        );
    }
    let scheme = if a.tls { "https" } else { "http" };
    let url = format!("{scheme}://127.0.0.1:{}", a.port);
    // Where the server keeps its self-signed certificate (`libra server --tls-self-signed`).
    let ca = a.tls.then(|| state.join("tls").join("cert.pem"));
    let s = |x: &str| x.to_string();
    let path = |p: &Path| p.display().to_string();
    let mut kids = Children(Vec::new(), Vec::new());
    // Secrets go to the children as files (0600 in the 0700 state directory), never as
    // arguments: every user of the machine can read a process's command line.
    let mut server = vec![
        s("server"),
        s("--listen"),
        format!("127.0.0.1:{}", a.port),
        s("--db"),
        path(&state.join("server.db")),
        s("--join-token-file"),
        path(&state.join("join-token")),
        s("--admin-password-file"),
        path(&state.join("admin-password")),
        s("--period"),
        s("1"),
    ];
    if a.tls {
        server.push(s("--tls-self-signed"));
    }
    kids.0.push(spawn(&server, &state.join("server.log"))?);
    let anon = wait_for("the server", Duration::from_secs(15), || {
        // The certificate exists once the server has made it.
        let anon = Client::connect(&url, None, ca.as_deref(), false).ok()?;
        anon.get::<serde_json::Value>("/api/openapi.json").ok().map(|_| anon)
    })
    .with_context(|| format!("see {}", state.join("server.log").display()))?;
    for i in 1..=a.nodes {
        let name = format!("node-{i}");
        let mut node = vec![
            s("node"),
            s("--server"),
            url.clone(),
            s("--join-token-file"),
            path(&state.join("join-token")),
            s("--cpus"),
            format!("{cpus}"),
            s("--name"),
            name.clone(),
            s("--workdir"),
            path(&state.join(&name)),
        ];
        if let Some(ca) = &ca {
            node.extend([s("--ca"), path(ca)]);
        }
        kids.0.push(spawn(&node, &state.join(format!("{name}.log")))?);
        kids.1.push((name.clone(), state.join(&name)));
    }
    let admin = anon.with_token(Some(anon.login("admin", &admin_pw)?.token));
    let (demo_pw, demo_token) = demo_account(&anon, &admin, &state)?;
    let libra = invocation(std::env::var_os("PATH").as_deref(), &std::env::current_exe()?);
    let login_note = choose_login(&url, &demo_token, &libra, ca.as_deref())?;
    let demo = anon.with_token(Some(demo_token));
    let nodes = wait_for("the node agents", Duration::from_secs(20), || {
        admin.nodes().ok().filter(|n| n.iter().filter(|x| x.up).count() >= a.nodes as usize)
    })?;
    let credit = demo.balance()?.available;
    println!(
        "Libra is up at {url}: {} nodes of {cpus:.2} CPUs ({}), state in {}",
        nodes.len(),
        nodes[0].mechanism,
        state.display()
    );
    println!("  portal: {url}/  sign in as demo, password {demo_pw} ({} credits available)", money(credit));
    println!("          administrator: admin, password in {}", state.join("admin-password").display());
    // A personal cluster runs its jobs as the account that started it (`user_as_me`): started
    // as root, the demo user's jobs are root's, which a stranger to this README would not guess.
    if admin.users()?.iter().any(|u| u.name == "demo" && u.allow_root) {
        println!(
            "  note: the demo user's jobs run as root (this cluster was started as root): whoever signs in as\n        demo can do what root can. Start `libra up` as an ordinary user, or give other people users\n        of their own accounts (libra admin user add NAME --unix-user NAME)"
        );
    }
    println!("  {login_note}");
    println!(
        "  try:  {libra} submit --estimate 5s --deadline 1m --budget 50 -- {libra} burn --cpu-seconds 5"
    );
    println!("        {libra} status; {libra} quote; {libra} balance; {libra} history");
    let demo_done = state.join("demo-done");
    if a.demo || (!a.no_demo && !demo_done.exists()) {
        demo_run(&demo, cpus, a.nodes).map_err(|e| {
            // A terminal's Ctrl-C also reaches the server and the node agents, so the demo may
            // fail on a vanished server first: say what happened rather than what it broke.
            if stop.load(Ordering::Relaxed) {
                anyhow::anyhow!(
                    "interrupted during the demo (it runs again on the next `up`; its jobs already started keep running, and the next `up` adopts them)"
                )
            } else {
                e
            }
        })?;
        std::fs::write(&demo_done, format!("{} UTC\n", fmt_time(now())))
            .with_context(|| format!("writing {}", demo_done.display()))?;
    } else if !a.no_demo {
        let when = std::fs::read_to_string(&demo_done).unwrap_or_default();
        println!(
            "\nthe demo already ran in this state directory ({}); add --demo to run it again",
            when.trim()
        );
    }
    if a.exit {
        return Ok(());
    }
    println!("serving until interrupted (Ctrl-C)");
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if stop.load(Ordering::Relaxed) {
            println!("{STOPPING}");
            return Ok(());
        }
        for c in &mut kids.0 {
            if let Ok(Some(st)) = c.try_wait() {
                // Ctrl-C reaches the whole process group: a child may have stopped on the
                // signal that is about to stop `up` itself.
                if stop.load(Ordering::Relaxed) {
                    println!("{STOPPING}");
                    return Ok(());
                }
                bail!("a cluster process exited ({st}); see the logs in {}", state.display());
            }
        }
    }
}

const STOPPING: &str = "stopping the cluster (its jobs keep running; the next `libra up` adopts them)";

/// The demo user: created with a random password (kept in `demo-password` beside
/// `admin-password`) and 1,000 credits on the first `up` of a state directory, and only then,
/// so that no later `up` credits it again. Returns its password and a new API token.
fn demo_account(anon: &Client, admin: &Client, state: &Path) -> Result<(String, String)> {
    let path = state.join("demo-password");
    let password = secret(&path, 8)?;
    match admin.user_add(&super::common::user_as_me("demo", &password)) {
        Ok(_) => {
            admin.credit("demo", Money::from_credits(1000))?;
        }
        Err(e) if e.status() == Some(409) => {}
        Err(e) => return Err(e.into()),
    }
    match anon.login("demo", &password) {
        Ok(r) => Ok((password, r.token)),
        // The API cannot change a password, and the password is not ours to guess.
        Err(e) if e.status() == Some(401) => bail!(
            "the demo user of {} does not have the password in {} (an older `libra up` made it with a fixed one): remove {} to start afresh, or give another --state",
            state.display(),
            path.display(),
            state.display()
        ),
        Err(e) => Err(e.into()),
    }
}

/// What a saved login turned out to be.
enum Saved {
    /// Its server accepts its token, as this user.
    Works(String),
    /// Its server refuses the token, or it was a cluster on this machine that is gone.
    Stale,
    /// Not known (another machine's server is not contacted), so kept as it is.
    Unknown,
}

fn check_saved(l: &Login) -> Saved {
    if !is_loopback(&l.server) {
        return Saved::Unknown;
    }
    let Ok(client) = Client::connect(&l.server, Some(l.token.clone()), l.ca.as_deref(), l.insecure_http)
    else {
        return Saved::Unknown;
    };
    match client.balance() {
        Ok(b) => Saved::Works(b.user),
        Err(e) if e.status() == Some(401) => Saved::Stale,
        Err(ClientError::Transport { .. }) => Saved::Stale,
        Err(_) => Saved::Unknown,
    }
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Saves the demo user's login for the other commands only where that takes nothing away:
/// there is no saved login, or the saved one no longer works. Anyone else's (an
/// administrator's, a login to another cluster) is kept. Returns which login is in use.
fn choose_login(url: &str, demo_token: &str, libra: &str, ca: Option<&Path>) -> Result<String> {
    let path = login_path()?;
    let ca_flag = ca.map(|c| format!(" --ca {}", shell_word(&c.display().to_string()))).unwrap_or_default();
    let switch = format!("`{libra} login --server {url}{ca_flag} --user demo` (the portal's password)");
    let replaced = match saved_login() {
        None => None,
        Some(l) => match check_saved(&l) {
            Saved::Works(user) if l.server.trim_end_matches('/') == url => {
                return Ok(format!(
                "the commands below use your saved login ({user}, in {}); to act as the demo user: {switch}",
                path.display()
            ))
            }
            Saved::Works(_) | Saved::Unknown => {
                return Ok(format!(
                    "your saved login ({} at {}, in {}) is kept; to use this cluster first: {switch}",
                    l.user,
                    l.server,
                    path.display()
                ))
            }
            Saved::Stale => Some(l),
        },
    };
    save_login(&Login {
        server: url.to_string(),
        user: "demo".into(),
        token: demo_token.to_string(),
        ca: ca.map(Path::to_path_buf),
        insecure_http: false,
        server_uid: super::common::loopback_server_owner(url),
    })?;
    Ok(match replaced {
        None => format!("logged in as demo for the commands below (saved in {})", path.display()),
        Some(l) => format!(
            "logged in as demo for the commands below (saved in {}, in place of {}'s login to {}, which no longer works)",
            path.display(),
            l.user,
            l.server
        ),
    })
}

/// How the printed commands call this binary: plain `libra` when that is what a shell finds
/// first on PATH, else this binary's full path (`cargo run` leaves it in target/, off PATH).
fn invocation(path_var: Option<&OsStr>, exe: &Path) -> String {
    let found = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("libra"))
        .find(|c| std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0));
    let same = |p: &Path| std::fs::canonicalize(p).ok();
    match found {
        Some(c) if same(&c).is_some() && same(&c) == same(exe) => "libra".into(),
        _ => shell_word(&exe.display().to_string()),
    }
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// A job of `libra burn --cpu-seconds work` with the estimate `secs`.
fn burn(secs: f64, work: f64, deadline: f64, budget: Money, procs: u32, name: &str) -> SubmitRequest {
    SubmitRequest {
        name: Some(name.into()),
        ..SubmitRequest::new(
            JobSpec::simple(secs, deadline, budget).with_procs(procs),
            resolve_command(vec!["libra".into(), "burn".into(), "--cpu-seconds".into(), format!("{work}")]),
        )
    }
}

/// The `libra submit` command line that would submit `burn(...)`, for the demo's suggestion.
fn burn_line(secs: f64, work: f64, deadline: f64, budget: Money, procs: u32, name: &str) -> Vec<String> {
    let words = ["libra", "submit", "--estimate", &format!("{secs}s"), "--deadline", &format!("{deadline}s")];
    let more = ["--budget", &budget.to_string(), "-n", &procs.to_string(), "-J", name, "--", "libra", "burn"];
    words.iter().chain(&more).chain(&["--cpu-seconds", &format!("{work}")]).map(|w| w.to_string()).collect()
}

/// Submits a few jobs (one too urgent to fit, then again with the suggestion), watches them
/// finish and shows the balance.
fn demo_run(c: &Client, cpus: f64, nodes: u32) -> Result<()> {
    println!("\n== demo: three jobs with relaxed deadlines");
    let mut ids = Vec::new();
    for (i, secs) in [2.0, 3.0, 2.0].into_iter().enumerate() {
        let (budget, name) = (Money::from_credits(50), format!("relaxed-{i}"));
        let j = c.submit(&burn(secs, secs, 30.0, budget, 1, &name))?;
        print!("{}", decision_text(&j, &burn_line(secs, secs, 30.0, budget, 1, &name)));
        ids.push(j.id);
    }
    println!("\n== demo: an urgent job on every node at once, needing 90% of each node");
    // Best fit has packed the relaxed jobs onto one node, which has no 90% left: rejected.
    let urgent = 0.9 * cpus.min(1.0) * 4.0;
    // Its work is 80% of its estimate, as an estimate is an upper bound. The suggested deadline
    // leaves the job only the server's small margin, and on a small, busy machine the launch
    // and the processes outside Libra's shares (the server, the agents, the terminal) take
    // their CPU from it: work equal to the estimate has been seen to finish a few hundredths
    // of a second late there. Ending early, it also pays less than its hold.
    let work = (urgent * 80.0).round() / 100.0;
    let j = c.submit(&burn(urgent, work, 4.0, Money::from_credits(50), nodes, "urgent"))?;
    print!("{}", decision_text(&j, &burn_line(urgent, work, 4.0, Money::from_credits(50), nodes, "urgent")));
    if let (JobState::Rejected, Some(s)) = (j.state, j.suggestion) {
        println!("\n== demo: resubmitting with the suggestion");
        let d = s.deadline.ceil();
        let again = c.submit(&burn(urgent, work, d, s.budget, nodes, "urgent-again"))?;
        print!("{}", decision_text(&again, &burn_line(urgent, work, d, s.budget, nodes, "urgent-again")));
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
        interrupted()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn plain_libra_only_when_path_finds_this_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("target").join("libra");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::write(&exe, "").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (linked, other, plain) = (dir.path().join("l"), dir.path().join("o"), dir.path().join("p"));
        for d in [&linked, &other, &plain] {
            std::fs::create_dir(d).unwrap();
        }
        std::os::unix::fs::symlink(&exe, linked.join("libra")).unwrap();
        std::fs::write(other.join("libra"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(other.join("libra"), std::fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable: a shell skips it, and so do we.
        std::fs::write(plain.join("libra"), "").unwrap();
        let path = |ds: &[&PathBuf]| -> OsString { std::env::join_paths(ds.iter().copied()).unwrap() };
        let full = exe.display().to_string();
        assert_eq!(invocation(Some(&path(&[&plain, &linked])), &exe), "libra");
        assert_eq!(invocation(Some(&path(&[&other, &linked])), &exe), full, "PATH's libra is another binary");
        assert_eq!(invocation(Some(&path(&[&plain])), &exe), full);
        assert_eq!(invocation(None, &exe), full);
    }

    #[test]
    fn full_paths_are_quoted_for_the_shell() {
        assert_eq!(shell_word("/home/a/libra/target/release/libra"), "/home/a/libra/target/release/libra");
        assert_eq!(shell_word("/home/a b/libra"), "'/home/a b/libra'");
        assert_eq!(shell_word("/x/it's/libra"), r"'/x/it'\''s/libra'");
    }

    #[test]
    fn loopback_servers() {
        assert!(is_loopback("http://127.0.0.1:7878"));
        assert!(is_loopback("http://localhost:7878/"));
        assert!(is_loopback("http://[::1]:7878"));
        assert!(!is_loopback("http://10.0.0.5:7878"));
        assert!(!is_loopback("https://cluster.example.org"));
    }

    #[test]
    fn secrets_are_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("up");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&state).unwrap();
        assert_eq!(mode(&state), 0o700);
        let fresh = state.join("a");
        let s = secret(&fresh, 8).unwrap();
        assert_eq!(mode(&fresh), 0o600);
        assert_eq!(secret(&fresh, 8).unwrap(), s, "a saved secret is read back");
        assert_ne!(secret(&state.join("b"), 8).unwrap(), s, "each secret is random");
        // One an older `up` left readable is closed.
        let old = state.join("c");
        std::fs::write(&old, "0123456789").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(secret(&old, 8).unwrap(), "0123456789");
        assert_eq!(mode(&old), 0o600);
    }
}
