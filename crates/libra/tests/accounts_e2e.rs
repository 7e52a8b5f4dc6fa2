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
        assert!(j.reason.as_deref().unwrap_or("").contains("ermission denied"), "{j:?}");
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
    assert!(j.reason.as_deref().unwrap_or("").contains("nosuchaccount has no account on node"), "{j:?}");
}
