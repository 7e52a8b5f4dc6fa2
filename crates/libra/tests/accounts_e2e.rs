//! Jobs run as their owners' Unix accounts, and strangers cannot reach each other: two real Unix
//! accounts made for the test, two Libra users mapped to them, a real server and a node agent
//! running as root. Alice's job tries what a hostile user would: read Bob's files, kill Bob's
//! job, leave its control group, read the agent's records and a root-only file, and get a
//! root-only file shown to her as her output. Every attempt must fail; Bob's job must run on.

mod common;

use common::*;
use libra_api::{Client, JobState, SubmitRequest, UserAdd};
use libra_core::{JobSpec, Money};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// A directory owned by `a`, readable by nobody else.
fn home(cl: &Cluster, a: &Account) -> std::path::PathBuf {
    let d = cl.dir.join(&a.name);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(a.uid), Some(a.gid)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn user(cl: &Cluster, name: &str, unix: &str, allow_root: bool) -> Client {
    let admin = cl.admin();
    let add = UserAdd {
        unix_user: Some(unix.into()),
        allow_root,
        ..UserAdd::new(name, &format!("pw-{name}"), false)
    };
    admin.user_add(&add).unwrap();
    admin.credit(name, Money::from_credits(1000)).unwrap();
    Client::new(&cl.url, Some(Client::new(&cl.url, None).login(name, &format!("pw-{name}")).unwrap().token))
}

/// Two Unix accounts made for a test, named `PREFIX` + `a`/`b` + a number of the test process
/// (a prefix of the test's own: tests run side by side); None, saying why, where they cannot be
/// made (not root, or no useradd).
fn two_accounts(prefix: &str) -> Option<(Account, Account)> {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: node agents cannot switch accounts here, not tested");
        return None;
    }
    let tag = std::process::id() % 100_000;
    let made = (Account::create(&format!("{prefix}a{tag}")), Account::create(&format!("{prefix}b{tag}")));
    if let (Some(a), Some(b)) = made {
        return Some((a, b));
    }
    eprintln!("useradd is not available: not tested");
    None
}

/// Alice and Bob, strangers on `cl`: each a Libra user mapped to one of the two accounts, with a
/// directory of their own.
struct Strangers {
    cl: Cluster,
    alice: Client,
    bob: Client,
    adir: std::path::PathBuf,
    bdir: std::path::PathBuf,
}

fn strangers(cl: Cluster, a: &Account, b: &Account) -> Strangers {
    let alice = user(&cl, "alice", &a.name, false);
    let bob = user(&cl, "bob", &b.name, false);
    let (adir, bdir) = (home(&cl, a), home(&cl, b));
    Strangers { cl, alice, bob, adir, bdir }
}

fn sh(dir: &std::path::Path, script: &str, out: &str) -> SubmitRequest {
    let mut r = SubmitRequest::new(
        JobSpec::simple(2.0, 120.0, Money::from_credits(50)),
        vec!["sh".into(), "-c".into(), script.into()],
    );
    r.workdir = Some(dir.display().to_string());
    r.stdout = Some(out.into());
    r
}

/// Live processes whose environment names job `id`, with their owners.
fn processes_of_job(id: u64) -> Vec<(i32, u32)> {
    let want = format!("LIBRA_JOB_ID={id}");
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        if env.split(|b| *b == 0).any(|x| x == want.as_bytes()) {
            if let Ok(m) = std::fs::metadata(format!("/proc/{pid}")) {
                v.push((pid, m.uid()));
            }
        }
    }
    v
}

#[test]
fn jobs_run_as_their_owners_and_cannot_reach_each_other() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: node agents cannot switch accounts here, not tested");
        return;
    }
    let tag = std::process::id() % 100_000;
    let (Some(a), Some(b)) = (Account::create(&format!("lta{tag}")), Account::create(&format!("ltb{tag}")))
    else {
        eprintln!("useradd is not available: not tested");
        return;
    };
    let cl = Cluster::start(1, 1.0, 30.0);
    let admin = cl.admin();
    assert_eq!(admin.nodes().unwrap()[0].runs_jobs_as, "each user's account");
    let alice = user(&cl, "alice", &a.name, false);
    let bob = user(&cl, "bob", &b.name, false);
    let (adir, bdir) = (home(&cl, &a), home(&cl, &b));
    let secret = cl.dir.join("secret");
    std::fs::write(&secret, "TOP-SECRET\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();

    // Bob's job: his data, and a long run.
    let bj = bob.submit(&sh(&bdir, "id -u; echo bob-private > data.txt; sleep 60", "bob.out")).unwrap();
    assert_eq!(bj.state, JobState::Pending, "{bj:?}");
    wait_until("Bob's job to write its data", || {
        let j = bob.job(bj.id).unwrap();
        let log = std::fs::read_to_string(bdir.join("bob.out")).unwrap_or_default();
        assert!(j.state.is_active(), "{j:?}\n{log}");
        bdir.join("data.txt").exists().then_some(())
    });
    let bob_procs = processes_of_job(bj.id);
    assert!(
        bob_procs.iter().any(|(_, uid)| *uid == b.uid),
        "Bob's job does not run as {}: {bob_procs:?}",
        b.name
    );
    let bob_pids: Vec<String> = bob_procs.iter().map(|(p, _)| p.to_string()).collect();
    let record = cl.dir.join(&cl.node_names[0]).join(format!("job-{}", bj.id)).join("libra.job");
    assert!(record.exists());

    // Alice's attack, every step reporting what it got.
    let attack = format!(
        "id -u; \
         cat '{bd}/data.txt' 2>/dev/null && echo READ-BOB || echo cannot-read-bob; \
         for p in {pids}; do kill -9 $p 2>/dev/null && echo KILLED-$p || echo cannot-kill; done; \
         (echo $$ > /sys/fs/cgroup/cpu/cgroup.procs) 2>/dev/null && echo ESCAPED || echo cannot-escape; \
         cat '{rec}' 2>/dev/null && echo READ-RECORD || echo cannot-read-record; \
         cat '{sec}' 2>/dev/null && echo READ-SECRET || echo cannot-read-secret; \
         cat /proc/{agent}/environ >/dev/null 2>&1 && echo READ-AGENT-ENV || echo cannot-read-env",
        bd = bdir.display(),
        pids = bob_pids.join(" "),
        rec = record.display(),
        sec = secret.display(),
        agent = cl.nodes[0].id(),
    );
    let aj = wait_done(&alice, alice.submit(&sh(&adir, &attack, "alice.out")).unwrap().id);
    assert_eq!(aj.state, JobState::Completed, "{aj:?}");
    let out = std::fs::read_to_string(adir.join("alice.out")).unwrap();
    assert!(out.starts_with(&format!("{}\n", a.uid)), "Alice's job does not run as {}: {out}", a.name);
    for denied in
        ["cannot-read-bob", "cannot-escape", "cannot-read-record", "cannot-read-secret", "cannot-read-env"]
    {
        assert!(out.contains(denied), "{denied} missing: {out}");
    }
    assert!(!out.contains("KILLED") && out.contains("cannot-kill"), "{out}");
    let meta = std::fs::metadata(adir.join("alice.out")).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (a.uid, 0o600), "her output is hers alone");

    // Her output pointed at a file she may not read (by a link, or by a path): the job is not
    // started, and the agent, which reads as root, shows her nothing of it.
    std::os::unix::fs::symlink(&secret, adir.join("link.out")).unwrap();
    for out in ["link.out", secret.to_str().unwrap()] {
        let j = wait_done(&alice, alice.submit(&sh(&adir, "echo hi", out)).unwrap().id);
        assert_eq!(j.state, JobState::Failed, "{out}: {j:?}");
        // The reason names the step that failed, not only its errno.
        let reason = j.reason.as_deref().unwrap_or("");
        assert!(reason.contains("opening its output file") && reason.contains("ermission denied"), "{j:?}");
        let shown = alice.output(j.id).unwrap();
        assert!(!shown.stdout.contains("TOP-SECRET") && !shown.stderr.contains("TOP-SECRET"), "{shown:?}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP-SECRET\n", "the root-only file was touched");

    // Bob's job ran on untouched, as Bob.
    let still = bob.job(bj.id).unwrap();
    assert_eq!(still.state, JobState::Running, "{still:?}");
    let bout = std::fs::metadata(bdir.join("bob.out")).unwrap();
    assert_eq!((bout.uid(), bout.mode() & 0o777), (b.uid, 0o600));
    assert!(std::fs::read_to_string(bdir.join("bob.out")).unwrap().starts_with(&format!("{}\n", b.uid)));
    bob.cancel(bj.id).unwrap();

    // Root only when an administrator allows it; an account the node lacks is a clear failure.
    let carl = user(&cl, "carl", "root", false);
    let j = wait_done(&carl, carl.submit(&sh(&cl.dir, "id -u", "carl.out")).unwrap().id);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    assert!(j.reason.as_deref().unwrap_or("").contains("root"), "{j:?}");
    let dora = user(&cl, "dora", "root", true);
    let j = wait_done(&dora, dora.submit(&sh(&cl.dir, "id -u", "dora.out")).unwrap().id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert_eq!(std::fs::read_to_string(cl.dir.join("dora.out")).unwrap(), "0\n");
    let ed = user(&cl, "ed", "nosuchaccount", false);
    let j = wait_done(&ed, ed.submit(&sh(&cl.dir, "true", "ed.out")).unwrap().id);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    assert!(
        j.reason
            .as_deref()
            .unwrap_or("")
            .contains(": the Unix account nosuchaccount does not exist on this node"),
        "{j:?}"
    );
}

/// A job given no working directory runs in its scratch directory, where its output goes too.
fn scratch_sh(script: &str, estimate: f64) -> SubmitRequest {
    SubmitRequest::new(
        JobSpec::simple(estimate, 300.0, Money::from_credits(50)),
        vec!["sh".into(), "-c".into(), script.into()],
    )
}

/// The loop devices whose backing file lies under `dir`.
fn loops_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("loop/backing_file")).ok())
        .filter(|b| b.trim().starts_with(&dir))
        .collect()
}

/// Whether node agents can mount scratch file systems here (root, loop devices); saying why
/// not. In CI they must.
fn scratch_testable() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: node agents cannot mount scratch file systems here, not tested");
        return false;
    }
    if let Err(e) = libra_node::scratch::probe(&std::env::temp_dir()) {
        assert!(std::env::var_os("CI").is_none(), "CI must test scratch file systems: {e}");
        eprintln!("no loop mounts here ({e}): not tested");
        return false;
    }
    true
}

/// Waits until nothing of a job is mounted below a node agent's work directory and no job
/// directory is left there; then no loop device may be left on an image there either. The
/// agent's own file systems made ahead for the next jobs (`scratch_pool::POOL_DIR`) are no
/// job's: there must be `ready` of them, each a loop device on an image of the pool's, and
/// nothing else.
fn wait_clean(workdir: &std::path::Path, ready: usize) {
    use libra_node::scratch_pool::POOL_DIR;
    let pool = workdir.join(POOL_DIR);
    wait_until("the scratch file systems detached and their directories gone", || {
        let mounts = libra_node::scratch::mounts_under(workdir);
        let (pooled, jobs): (Vec<_>, Vec<_>) = mounts.iter().partition(|m| m.starts_with(&pool));
        let dirs: Vec<_> = std::fs::read_dir(workdir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != POOL_DIR)
            .map(|e| e.file_name())
            .collect();
        (jobs.is_empty() && dirs.is_empty() && pooled.len() == ready).then_some(())
    });
    let loops = loops_under(workdir);
    let pool_s = pool.display().to_string();
    let (pooled, jobs): (Vec<_>, Vec<_>) = loops.iter().partition(|b| b.trim().starts_with(&pool_s));
    assert_eq!(jobs, Vec::<&String>::new());
    assert_eq!(pooled.len(), ready, "{pooled:?}");
}

/// A hostile user's job writes without end into its scratch directory (the agent's disk, where
/// every job's record lives). It is stopped at its own scratch's size by the kernel (ENOSPC)
/// and takes no more of the node's disk than that; another user's job on the same node, beside
/// it, writes what it needs and completes; the file system is nosuid and nodev, its root the
/// job's account's, 0700; once the jobs end, nothing stays mounted and no loop device stays
/// attached. Without scratch file systems the writer fills 64 MiB and the test fails.
#[test]
fn a_job_that_writes_without_end_fills_only_its_own_scratch() {
    if !scratch_testable() {
        return;
    }
    let tag = std::process::id() % 100_000;
    let (Some(m), Some(a)) = (Account::create(&format!("lsm{tag}")), Account::create(&format!("lsa{tag}")))
    else {
        eprintln!("useradd is not available: not tested");
        return;
    };
    let mut cl = Cluster::start(0, 1.0, 30.0);
    let name = format!("scratch-{}", cl.port);
    cl.start_node_with(&name, 1.0, &["--scratch-mb", "16"]);
    let workdir = cl.dir.join(&name);
    let admin = cl.admin();
    wait_until("the node up", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let mallory = user(&cl, "mallory", &m.name, false);
    let alice = user(&cl, "alice", &a.name, false);

    let filler = mallory
        .submit(&scratch_sh("dd if=/dev/zero of=fill bs=1M count=64 2>&1; echo dd-exit=$?; sleep 60", 2.0))
        .unwrap();
    assert_eq!(filler.state, JobState::Pending, "{filler:?}");
    let out = wait_until("the filler's dd to stop", || {
        let o = mallory.output(filler.id).unwrap();
        o.stdout.contains("dd-exit=").then_some(o.stdout)
    });
    assert!(out.contains("No space left on device") && out.contains("dd-exit=1"), "{out}");

    // Her scratch: a file system of its own, hers, nosuid and nodev; on disk no more than its size.
    let job_dir = workdir.join(format!("job-{}", filler.id));
    let scratch = job_dir.join("work");
    assert!(libra_node::scratch::is_mount_point(&scratch), "{} is no mount", scratch.display());
    let meta = std::fs::metadata(&scratch).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (m.uid, 0o700), "{meta:?}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line =
        mountinfo.lines().find(|l| l.split(' ').nth(4) == Some(&scratch.display().to_string())).unwrap();
    assert!(line.contains("nosuid") && line.contains("nodev"), "{line}");
    let image = std::fs::metadata(job_dir.join(libra_node::scratch::IMAGE)).unwrap();
    assert!(image.blocks() * 512 <= 17 << 20, "the image takes {} bytes", image.blocks() * 512);
    let fill = std::fs::metadata(scratch.join("fill")).unwrap();
    assert!(fill.len() < 16 << 20, "{}", fill.len());

    // Alice's job beside it writes 8 MiB into hers and completes.
    let beside = alice
        .submit(&scratch_sh("dd if=/dev/zero of=mine bs=1M count=8 2>&1 && sync && echo alice-ok", 1.0))
        .unwrap();
    let done = wait_done(&alice, beside.id);
    let out = alice.output(beside.id).unwrap().stdout;
    assert_eq!(done.state, JobState::Completed, "{done:?}\n{out}");
    assert!(out.contains("alice-ok"), "{out}");

    mallory.cancel(filler.id).unwrap();
    wait_done(&mallory, filler.id);
    wait_clean(&workdir, libra_node::scratch_pool::READY);
}

/// The node agent's directory of kills: its work directory, log and name.
struct KilledAgent {
    name: String,
    workdir: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl KilledAgent {
    /// Kills the agent with SIGKILL the instant its log has `line` (polled every 0.2 ms), and
    /// starts the next on the same work directory with `args` (after `--scratch-mb 8`); says
    /// what the job's scratch was left as.
    fn kill_at(&self, cl: &mut Cluster, line: &str, job: u64, args: &[&str]) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !std::fs::read_to_string(&self.log).unwrap_or_default().contains(line) {
            assert!(std::time::Instant::now() < deadline, "the agent never logged {line:?}");
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let mut agent = cl.nodes.pop().unwrap();
        agent.kill().unwrap(); // SIGKILL
        agent.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300)); // an orphaned mkfs or mount ends
        let job_dir = self.workdir.join(format!("job-{job}"));
        let left = format!(
            "the image {}, the file system {}",
            if job_dir.join(libra_node::scratch::IMAGE).exists() { "made" } else { "not made" },
            if libra_node::scratch::is_mount_point(&job_dir.join("work")) {
                "mounted"
            } else {
                "not mounted"
            }
        );
        // The log of the agent that follows goes on from here (the file is made anew).
        let _ = std::fs::rename(&self.log, self.log.with_extension(format!("log.{job}")));
        let mut all = vec!["--scratch-mb", "8"];
        all.extend(args);
        cl.start_node_with(&self.name, 1.0, &all);
        left
    }

    /// Waits until the agent's pool holds `n` file systems made ahead (mounted in it).
    fn wait_pool(&self, n: usize) {
        let pool = self.workdir.join(libra_node::scratch_pool::POOL_DIR);
        wait_until("the scratch file systems made ahead", || {
            (libra_node::scratch::mounts_under(&pool).len() == n).then_some(())
        });
    }
}

/// The agent is killed with SIGKILL at each worst instant of a job's scratch file system. Made
/// at the job's start (`--scratch-ahead 0`): the moment it logs that it is making one (the image
/// half made, mkfs orphaned) and the moment it logs it mounted (mounted, and nothing of the job
/// recorded: its directory is a leftover the next agent removes, mount and all, before the
/// server's job is started anew). Made ahead (the default): the moment it logs it is taking one
/// (moved, bound, or neither yet), the moment it logs it mounted, and while the job runs on it
/// (the next agent adopts the job, whose file system outlived the agent). Each time the agent
/// that follows on the same work directory runs the job to its end on a scratch of 8 MiB, and
/// once it ends nothing of a job is left mounted, no loop device attached, no directory kept,
/// and the pool holds what it should.
#[test]
fn an_agent_killed_making_a_scratch_file_system_leaves_nothing_behind() {
    if !scratch_testable() {
        return;
    }
    let tag = std::process::id() % 100_000;
    let Some(k) = Account::create(&format!("lsk{tag}")) else {
        eprintln!("useradd is not available: not tested");
        return;
    };
    let mut cl = Cluster::start(0, 1.0, 30.0);
    let name = format!("killed-{}", cl.port);
    cl.start_node_with(&name, 1.0, &["--scratch-mb", "8", "--scratch-ahead", "0"]);
    let agent = KilledAgent { workdir: cl.dir.join(&name), log: cl.dir.join(format!("{name}.log")), name };
    let admin = cl.admin();
    wait_until("the node up", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let u = user(&cl, "kim", &k.name, false);
    let script = "echo hello > here && cat here && sleep 2 && df -k . | tail -1";
    use libra_node::scratch_pool::READY;
    let (none, made_ahead): (&[&str], &[&str]) = (&["--scratch-ahead", "0"], &[]);
    // Each step: the pool the running agent keeps, where to kill it, and the next agent's.
    for (step, ahead, line, next) in [
        ("making", 0, "making the job's scratch file system job=", none),
        ("mounted", 0, "the job's scratch file system is mounted made_ahead=false job=", made_ahead),
        ("taking", READY, "taking a scratch file system made ahead job=", made_ahead),
        ("mounted ahead", READY, "the job's scratch file system is mounted made_ahead=true job=", made_ahead),
        ("running", READY, "started job=", made_ahead),
    ] {
        agent.wait_pool(ahead);
        let j = u.submit(&scratch_sh(script, 1.0)).unwrap();
        let left = agent.kill_at(&mut cl, &format!("{line}{}", j.id), j.id, next);
        eprintln!("killed at {step:?}: {left}");
        let done = wait_done(&u, j.id);
        let out = u.output(j.id).unwrap().stdout;
        assert_eq!(done.state, JobState::Completed, "{step}: {done:?}\n{out}");
        assert!(out.contains("hello"), "{step}: {out}");
        // df of its working directory: a file system of about 8 MiB, not the machine's disk.
        let size_kb: u64 = out
            .lines()
            .last()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(size_kb <= 8 * 1024, "{step}: {out}");
        wait_clean(&agent.workdir, if next.is_empty() { READY } else { 0 });
    }
}

/// A directory outside /tmp and /var/tmp for a node whose jobs have a /tmp of their own (the
/// test cluster's own directory is under /tmp), removed at the end.
struct OutsideTmp(std::path::PathBuf);

impl Drop for OutsideTmp {
    fn drop(&mut self) {
        libra_node::scratch::unmount_all_under(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// With `--tmp-mb`, each job has a /tmp and /var/tmp of its own. A hostile user's job hides a
/// file in /tmp and writes without end there: it is stopped at its /tmp's size (ENOSPC), and
/// the node's /tmp gets neither file. Another user's job beside it sees nothing of the first's
/// /tmp, writes to its own and completes. A job whose working directory is under the node's
/// /tmp, which it could not see, does not start, and says why. Without the feature the filler
/// writes 64 MiB into the node's /tmp and Alice reads the secret: the test fails.
#[test]
fn each_job_has_a_tmp_of_its_own_where_asked() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: node agents cannot give jobs a /tmp of their own here, not tested");
        return;
    }
    if let Err(e) = libra_node::proc::can_give_private_tmp() {
        assert!(std::env::var_os("CI").is_none(), "CI must test private /tmp: {e}");
        eprintln!("no mount namespaces here ({e}): not tested");
        return;
    }
    let tag = std::process::id() % 100_000;
    let (Some(m), Some(a)) = (Account::create(&format!("lpm{tag}")), Account::create(&format!("lpa{tag}")))
    else {
        assert!(std::env::var_os("CI").is_none(), "CI must test private /tmp with two accounts");
        eprintln!("useradd is not available: not tested");
        return;
    };
    let base = OutsideTmp(std::path::PathBuf::from(format!("/var/lib/libra-e2e-tmp-{}", std::process::id())));
    std::fs::create_dir_all(&base.0).unwrap();
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cl = Cluster::start(0, 1.0, 30.0);
    let name = format!("tmp-{}", cl.port);
    cl.start_node_in_with(&name, 1.0, &base.0.join("node"), &["--tmp-mb", "8"]);
    let admin = cl.admin();
    wait_until("the node up", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let mallory = user(&cl, "mallory", &m.name, false);
    let alice = user(&cl, "alice", &a.name, false);
    let secret = format!("libra-secret-{tag}");
    let fill = format!("libra-fill-{tag}");

    let filler = mallory
        .submit(&scratch_sh(
            &format!(
                "echo TOP-SECRET > /tmp/{secret}; echo TOP-SECRET > /dev/shm/{secret}; ipcmk -M 4096 >/dev/null; \
                 dd if=/dev/zero of=/var/tmp/{fill} bs=1M count=64 2>&1; echo dd-exit=$?; sleep 60"
            ),
            2.0,
        ))
        .unwrap();
    assert_eq!(filler.state, JobState::Pending, "{filler:?}");
    let out = wait_until("the filler's dd to stop", || {
        let o = mallory.output(filler.id).unwrap();
        o.stdout.contains("dd-exit=").then_some(o.stdout)
    });
    assert!(out.contains("No space left on device") && out.contains("dd-exit=1"), "{out}");
    for f in [&secret, &fill] {
        for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
            assert!(!std::path::Path::new(dir).join(f).exists(), "{dir}/{f} is on the node");
        }
    }
    // Her System V shared memory is in her job's IPC namespace, not the node's.
    let segments_of = |uid: u32| -> usize {
        let table = std::fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
        // key shmid perms size cpid lpid nattch uid ...
        table.lines().skip(1).filter(|l| l.split_whitespace().nth(7) == Some(&uid.to_string())).count()
    };
    assert_eq!(segments_of(m.uid), 0, "mallory's shared memory segment is the node's");

    let beside = alice
        .submit(&scratch_sh(
            &format!(
                "cat /tmp/{secret} /var/tmp/{secret} /dev/shm/{secret} 2>/dev/null || echo cannot-see; \
                 ls -A /tmp /dev/shm | wc -l; ipcs -m | grep -c '^0x'; echo mine > /tmp/a && cat /var/tmp/a"
            ),
            1.0,
        ))
        .unwrap();
    let done = wait_done(&alice, beside.id);
    let out = alice.output(beside.id).unwrap().stdout;
    assert_eq!(done.state, JobState::Completed, "{done:?}\n{out}");
    // (`ls -A` of two directories names each, with a blank line between: three lines.)
    assert_eq!(
        out, "cannot-see\n3\n0\nmine\n",
        "her /tmp and /dev/shm are empty and hers, and no one's shared memory is in sight"
    );

    // Her next job's mount namespace keeps no copy of the file systems beside it in the node's
    // work directory: not the filler's scratch (it still runs), not those made ahead for later
    // jobs (each copy would hold its file system and loop device until her job ends); her own
    // scratch it keeps.
    if scratch_testable() {
        private_tmp_keeps_no_copy_of_the_mounts_beside(&base.0.join("node"), &alice, filler.id);
    }

    // A job run from the node's /tmp (the test cluster's directory is there) is refused at start.
    let adir = home(&cl, &a);
    let j = wait_done(&alice, alice.submit(&sh(&adir, "echo hi", "o.out")).unwrap().id);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    let reason = j.reason.unwrap_or_default();
    assert!(reason.contains("is under /tmp or /var/tmp") && reason.contains("-D/--chdir"), "{reason}");

    mallory.cancel(filler.id).unwrap();
    wait_done(&mallory, filler.id);
    assert_eq!(segments_of(m.uid), 0, "mallory's shared memory outlived her job");
}

/// `each_job_has_a_tmp_of_its_own_where_asked`, on a node with scratch file systems in
/// `workdir`: a job of `alice`'s started while job `running` runs sees neither that job's
/// scratch nor the file systems made ahead in its own mount namespace, and sees its own.
fn private_tmp_keeps_no_copy_of_the_mounts_beside(workdir: &std::path::Path, alice: &Client, running: u64) {
    let pool = workdir.join(libra_node::scratch_pool::POOL_DIR);
    wait_until("a file system made ahead", || {
        (!libra_node::scratch::mounts_under(&pool).is_empty()).then_some(())
    });
    // This node's mounts only, by their whole path: the other tests' nodes on this machine
    // have pools and job directories of their own, in work directories of their own.
    let at = std::fs::canonicalize(workdir).unwrap().display().to_string();
    let look = alice
        .submit(&scratch_sh(
            &format!(
                "grep -cF '{at}/{pool}/' /proc/self/mountinfo; grep -cF '{at}/job-{running}/work ' /proc/self/mountinfo; \
                 grep -cF \"{at}/job-$LIBRA_JOB_ID/work \" /proc/self/mountinfo",
                pool = libra_node::scratch_pool::POOL_DIR,
            ),
            1.0,
        ))
        .unwrap();
    let done = wait_done(alice, look.id);
    let out = alice.output(look.id).unwrap().stdout;
    assert_eq!(done.state, JobState::Completed, "{done:?}\n{out}");
    // Where the node's mounts propagate (systemd makes them shared), one the pool makes after
    // her job's namespace is made reaches it too, and goes from it with the node's: not held.
    if propagates(workdir) {
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1..], ["0", "1"], "the filler's scratch, her own: {out}");
    } else {
        assert_eq!(out, "0\n0\n1\n", "made ahead, the filler's scratch, her own");
    }
}

/// Whether mounts made below `dir` reach other mount namespaces: the mount holding it is shared.
fn propagates(dir: &std::path::Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap();
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let holder = table
        .lines()
        .filter_map(|l| Some((std::path::PathBuf::from(l.split(' ').nth(4)?), l)))
        .filter(|(point, _)| dir.starts_with(point))
        .max_by_key(|(point, _)| point.components().count());
    holder.is_some_and(|(_, line)| line.split(" - ").next().is_some_and(|head| head.contains("shared:")))
}

/// The agent reads each job's output files as root to send them on. A job that swaps its output
/// file for a pipe with no writer, or for a link to a device, must not make that read block (it
/// would stall the agent's reports for every job on the node) or open the device (opening some
/// devices does something: a tape rewinds, a watchdog starts its count). Bob's job on the same
/// node must run and end as if Alice's were not there, and the device is never opened.
#[test]
fn a_job_that_swaps_its_output_for_a_pipe_or_a_device_stalls_no_one_and_opens_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((a, b)) = two_accounts("lsw") else { return };
    let Strangers { cl, alice, bob, adir, bdir } = strangers(Cluster::start(1, 1.0, 30.0), &a, &b);
    // A device of root's (the null device's numbers), watched for any open of it.
    let device = cl.dir.join("device");
    let c = std::ffi::CString::new(device.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mknod, inotify_init1 and inotify_add_watch touch no memory
    // of ours beyond it.
    let watch = unsafe {
        assert_eq!(libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)), 0);
        let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
        assert!(fd >= 0 && libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN) >= 0);
        fd
    };
    let opened = || {
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a buffer of ours of its length.
        unsafe { libc::read(watch, buf.as_mut_ptr().cast(), buf.len()) > 0 }
    };
    // Alice's jobs: each writes a line, swaps its output file, and lives on, so that the agent
    // keeps reading the new one while the job runs.
    let swaps = [
        ("pipe.out", "rm -f pipe.out && mkfifo pipe.out".to_string()),
        ("dev.out", format!("rm -f dev.out && ln -s '{}' dev.out", device.display())),
    ];
    let mut hers = Vec::new();
    for (out, swap) in &swaps {
        let script = format!("echo before; {swap} && sleep 30");
        hers.push(alice.submit(&sh(&adir, &script, out)).unwrap().id);
    }
    wait_until("Alice's jobs to swap their output files", || {
        swaps
            .iter()
            .all(|(out, _)| std::fs::symlink_metadata(adir.join(out)).is_ok_and(|m| !m.is_file()))
            .then_some(())
    });
    // Bob's job starts and ends while hers run: the agent reports it as it would alone.
    let bj = bob.submit(&sh(&bdir, "echo bob-done", "bob.out")).unwrap();
    let done = wait_for(&format!("Bob's job {} to end", bj.id), 20, || {
        bob.job(bj.id).ok().filter(|j| !j.state.is_active())
    });
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert_eq!(bob.output(bj.id).unwrap().stdout, "bob-done\n");
    let node = &cl.admin().nodes().unwrap()[0];
    assert!(node.up, "{node:?}");
    // Hers end when cancelled, showing at most what they wrote before the swap (whether the
    // agent read it before the swap is a race of the job's making).
    for id in hers {
        alice.cancel(id).unwrap();
        let j = wait_done(&alice, id);
        assert_eq!(j.state, JobState::Cancelled, "{j:?}");
        let shown = alice.output(id).unwrap().stdout;
        assert!(["", "before\n"].contains(&shown.as_str()), "job {id}: {shown:?}");
    }
    assert!(!opened(), "the agent opened the device a job's output file links to");
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(watch) };
}

/// A job that forks without end (Alice's) stops at its account's limit on the node
/// (`--max-tasks`), the node's process table is not hers to fill, and Bob's job starts and ends
/// beside it. Her next job cannot start while her limit is taken, and says why; once her jobs
/// end, she starts again.
#[test]
fn a_job_that_forks_without_end_stops_at_its_accounts_limit_and_no_one_elses_job_is_held() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((a, b)) = two_accounts("lfk") else { return };
    const LIMIT: usize = 40;
    let mut cl = Cluster::start_configured(30.0, "");
    cl.start_node_with("n1", 1.0, &["--max-tasks", &LIMIT.to_string()]);
    let admin = cl.admin();
    wait_until("the node", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let Strangers { cl, alice, bob, adir, bdir } = strangers(cl, &a, &b);
    // Counted from nothing: no process of an account this id belonged to before lives on.
    wait_until("no process of Alice's account", || (processes_of_uid(a.uid) == 0).then_some(()));
    // The bomb: a shell that starts sleepers until a fork fails (dash then ends); its parent
    // takes the place it left, and stays.
    let bomb = "sh -c 'i=0; while [ $i -lt 1000 ]; do sleep 600 & i=$((i+1)); done'; echo stopped-at-the-limit; sleep 600 & exec sleep 600";
    let bomb_job = alice.submit(&sh(&adir, bomb, "bomb.out")).unwrap().id;
    wait_until("Alice's bomb to meet her limit", || {
        let j = alice.job(bomb_job).unwrap();
        let out = std::fs::read_to_string(adir.join("bomb.out")).unwrap_or_default();
        assert!(j.state.is_active(), "{j:?}\n{out}");
        out.contains("stopped-at-the-limit").then_some(())
    });
    wait_until("Alice's bomb to take her whole limit", || {
        let hers = processes_of_uid(a.uid);
        assert!(hers <= LIMIT, "Alice has {hers} processes; her limit is {LIMIT}");
        (hers == LIMIT).then_some(())
    });
    let out = std::fs::read_to_string(adir.join("bomb.out")).unwrap();
    assert!(out.contains("fork"), "her shell did not meet a refused fork: {out}");
    // Bob's job, beside hers on the same node, runs and ends.
    let bj = bob.submit(&sh(&bdir, "echo bob-done", "bob.out")).unwrap();
    let done = wait_done(&bob, bj.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert_eq!(std::fs::read_to_string(bdir.join("bob.out")).unwrap(), "bob-done\n");
    // Her next job cannot start while her limit is taken, and says why. (The kernel lets a
    // process that takes her account on be one past the limit, since 5.19 or so, and refuses
    // the next: so a first one that stays may start, a second may not.)
    let mut started = Vec::new();
    let failed = loop {
        let id = alice.submit(&sh(&adir, "exec sleep 600", "next.out")).unwrap().id;
        // Running as the server sees it is its keeper's start; the job's own is its process.
        // (Waited for by hand: a failure says what was seen, and the agent's log.)
        let t0 = std::time::Instant::now();
        let j = loop {
            let hers = processes_of_uid(a.uid);
            assert!(hers <= LIMIT + 1, "Alice has {hers} processes; her limit is {LIMIT}");
            let j = alice.job(id);
            if let Ok(j) = &j {
                if !j.state.is_active() || hers == LIMIT + 1 + started.len() {
                    break j.clone();
                }
            }
            if t0.elapsed() > std::time::Duration::from_secs(60) {
                let log = std::fs::read_to_string(cl.dir.join("n1.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "Alice's job {id} neither started nor failed in 60 s: {j:?}, {hers} processes of hers; \
                     the agent's log ends:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        if j.state.is_active() {
            assert!(started.is_empty(), "a second job past her limit started: {j:?}");
            started.push(id);
            continue;
        }
        break j;
    };
    assert_eq!(failed.state, JobState::Failed, "{failed:?}");
    let reason = failed.reason.as_deref().unwrap_or("");
    assert!(reason.contains("max_tasks") && reason.contains(&a.name), "{failed:?}");
    // Her jobs cancelled, their processes go, and she starts again.
    for id in started.into_iter().chain([bomb_job]) {
        alice.cancel(id).unwrap();
        wait_done(&alice, id);
    }
    wait_until("Alice's processes to end", || (processes_of_uid(a.uid) == 0).then_some(()));
    let again = wait_done(&alice, alice.submit(&sh(&adir, "echo again", "again.out")).unwrap().id);
    assert_eq!(again.state, JobState::Completed, "{again:?}");
    assert_eq!(std::fs::read_to_string(adir.join("again.out")).unwrap(), "again\n");
}

/// A file system that does not answer, mounted for a test and gone with it: a FUSE mount
/// whose daemon never replies (no one reads its device), open to every account
/// (`allow_other`), as a hard NFS mount whose server is away is, or a user's FUSE mount where
/// the site allows `user_allow_other`. Anything that looks inside it waits.
struct DeadMount {
    at: std::path::PathBuf,
    fd: i32,
}

impl DeadMount {
    fn make(at: &std::path::Path) -> Option<DeadMount> {
        std::fs::create_dir_all(at).unwrap();
        let dev = c"/dev/fuse";
        // SAFETY: open, mount and close with NUL-terminated strings of ours.
        unsafe {
            let fd = libc::open(dev.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let target = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
            let opts =
                std::ffi::CString::new(format!("fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other"))
                    .unwrap();
            let r = libc::mount(
                c"libra-test-dead".as_ptr(),
                target.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            );
            if r != 0 {
                libc::close(fd);
                return None;
            }
            Some(DeadMount { at: at.to_path_buf(), fd })
        }
    }
}

impl Drop for DeadMount {
    fn drop(&mut self) {
        // Closing its device ends the connection: whatever waits on it gets an error.
        let target = std::ffi::CString::new(self.at.to_str().unwrap()).unwrap();
        // SAFETY: our descriptor, closed once; a NUL-terminated path.
        unsafe {
            libc::close(self.fd);
            libc::umount2(target.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// The agent reads jobs' output files and looks at their working directories on file systems
/// of their owners' choosing. One that does not answer (`DeadMount`) must hold only the job that
/// named it: Alice's job links its output into one, and a job is given a working directory in
/// it; Bob's job on the same node runs and ends, and the node stays up.
#[test]
fn a_file_system_that_does_not_answer_holds_only_the_jobs_that_name_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((a, b)) = two_accounts("ldf") else { return };
    let Strangers { cl, alice, bob, adir, bdir } = strangers(Cluster::start(1, 1.0, 30.0), &a, &b);
    let Some(dead) = DeadMount::make(&cl.dir.join("dead")) else {
        assert!(!std::path::Path::new("/dev/fuse").exists(), "/dev/fuse is here and a FUSE mount failed");
        eprintln!("no /dev/fuse: not tested");
        return;
    };
    // Alice's job links its output file into it, and lives on.
    let script =
        format!("echo before; rm -f out.txt && ln -s '{}' out.txt && sleep 30", dead.at.join("x").display());
    let hers = alice.submit(&sh(&adir, &script, "out.txt")).unwrap().id;
    wait_until("Alice's job to link its output away", || {
        std::fs::symlink_metadata(adir.join("out.txt"))
            .is_ok_and(|m| m.file_type().is_symlink())
            .then_some(())
    });
    // A job whose working directory is in it cannot start, and says why.
    let lost_id = alice.submit(&sh(&dead.at.join("sub"), "true", "o.txt")).unwrap().id;
    let lost = wait_for("a job in the dead file system to end", 30, || {
        alice.job(lost_id).ok().filter(|j| !j.state.is_active())
    });
    assert_eq!(lost.state, JobState::Failed, "{lost:?}");
    assert!(lost.reason.as_deref().unwrap_or("").contains("did not answer"), "{lost:?}");
    // Bob's job starts and ends while hers runs: the agent reports it as it would alone.
    let bj = bob.submit(&sh(&bdir, "echo bob-done", "bob.out")).unwrap();
    let done = wait_for(&format!("Bob's job {} to end", bj.id), 20, || {
        bob.job(bj.id).ok().filter(|j| !j.state.is_active())
    });
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert_eq!(bob.output(bj.id).unwrap().stdout, "bob-done\n");
    assert!(cl.admin().nodes().unwrap()[0].up);
    alice.cancel(hers).unwrap();
    assert_eq!(wait_done(&alice, hers).state, JobState::Cancelled);
    drop(dead);
}

/// Memory among strangers, with a real out-of-memory kill. The node offers 500 MiB
/// (`--mem-mb`): its jobs together are held to that in its memory group, so they can run it out
/// of memory but never the machine. Alice asked 350 MiB and holds 250 in one process; Mallory
/// asked nothing and takes 4 x 80 MiB in four, each smaller than Alice's, which the kernel's
/// OOM killer (which takes the largest process it finds) would have made Alice's job its
/// victim. A job that asked no memory is its first choice (`oom_score_adj` 500, set before the
/// switch to Mallory's account; where the agent has CAP_SYS_RESOURCE she cannot lower it,
/// elsewhere the agent raises it again each period): one of Mallory's processes is killed, and
/// Alice's job holds all it took and ends well.
#[test]
fn a_job_that_asked_no_memory_cannot_get_anothers_job_killed_by_running_the_node_out_of_memory() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some((a, b)) = two_accounts("lom") else { return };
    let mut cl = Cluster::start_configured(30.0, "");
    if !std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        eprintln!("no cgroup v1 memory hierarchy: not tested");
        return;
    }
    cl.start_node_with("n1", 1.0, &["--mem-mb", "500"]);
    let admin = cl.admin();
    wait_until("the node", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    let group = std::path::Path::new("/sys/fs/cgroup/memory/libra")
        .join(libra_node::group_name("n1", &cl.dir.join("n1")));
    assert_eq!(
        std::fs::read_to_string(group.join("memory.limit_in_bytes")).unwrap().trim(),
        (500u64 << 20).to_string(),
        "the node's memory group is not held to what the node offers"
    );
    // Where the machine swaps, the node's group must not (or no one runs out of memory here):
    // its job groups, made after, inherit it.
    let swaps = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("SwapTotal:") && !l.ends_with(" 0 kB"));
    if swaps {
        std::fs::write(group.join("memory.swappiness"), "0").unwrap();
    }
    let Strangers { cl: _cl, alice, bob: mallory, adir, bdir: mdir } = strangers(cl, &a, &b);

    // Alice: 250 MiB in one process (tail keeps a line it has not seen the end of), held 15 s,
    // and counted at the end: all of it, or the job fails.
    let mut hers = sh(
        &adir,
        "n=$( (head -c 250M /dev/zero; sleep 15) | tail | wc -c); echo $n; [ \"$n\" -eq 262144000 ]",
        "alice.out",
    );
    hers.spec = JobSpec::simple(30.0, 600.0, Money::from_credits(100));
    hers.spec.resources.mem_mb = 350;
    let aj = alice.submit(&hers).unwrap().id;
    let ajob = group.join(format!("job-{aj}"));
    wait_until("Alice's job to hold its 250 MiB", || {
        let used: u64 =
            std::fs::read_to_string(ajob.join("memory.usage_in_bytes")).ok()?.trim().parse().ok()?;
        (used >= 250 << 20).then_some(())
    });
    // Mallory: lowers her job's score first (the kernel refuses where the agent that set it has
    // CAP_SYS_RESOURCE; elsewhere the agent raises it again at its next period), then takes
    // 4 x 80 MiB.
    let script = "{ echo 0 > /proc/self/oom_score_adj; } 2>/dev/null && echo lowered || echo kept; \
                  sleep 3; cat /proc/self/oom_score_adj; \
                  for i in 1 2 3 4; do ( (head -c 80M /dev/zero; sleep 600) | tail | wc -c ) & done; wait";
    let mut theirs = sh(&mdir, script, "mallory.out");
    theirs.spec = JobSpec::simple(30.0, 600.0, Money::from_credits(100));
    let mj = mallory.submit(&theirs).unwrap().id;

    let done = wait_done(&alice, aj);
    let out = std::fs::read_to_string(adir.join("alice.out")).unwrap_or_default();
    let said = std::fs::read_to_string(mdir.join("mallory.out")).unwrap_or_default();
    assert_eq!(done.state, JobState::Completed, "Alice's job: {done:?}, output {out:?}; Mallory's {said:?}");
    assert_eq!(out, "262144000\n");
    let mut lines = said.lines();
    let (tried, score) = (lines.next(), lines.next());
    assert!(matches!(tried, Some("kept" | "lowered")) && score == Some("500"), "Mallory's job: {said:?}");
    // Killed: at least one of Mallory's four, whose count ended short (the others hold theirs
    // until cancelled).
    let short = said.lines().skip(2).filter(|l| l.parse::<u64>().is_ok_and(|n| n < 80 << 20)).count();
    assert!(
        short >= 1,
        "none of Mallory's processes was killed: the node's jobs took more than it offers ({said:?})"
    );
    mallory.cancel(mj).unwrap();
    wait_done(&mallory, mj);
}
