//! Node identity, attacked over real HTTP: the join token admits a new node only, every later
//! call is checked against the credential of the node it names, and a node reports only on
//! the jobs it was given.

use libra_api::{
    Client, ExitReport, JobState, RegisterRequest, RunningReport, SubmitRequest, SyncRequest, UserAdd,
};
use libra_core::{JobSpec, Money};
use libra_server::{start_background, Config};

const JOIN: &str = "join-token-for-tests";

/// A server on a loopback port with a store in `dir`, the join token `JOIN` and an administrator.
fn config(dir: &tempfile::TempDir) -> Config {
    Config {
        listen: "127.0.0.1:0".into(),
        db: dir.path().join("server.db"),
        join_token: JOIN.into(),
        admin_password: Some("admin-pw".into()),
        sync_full: false,
        ..Config::default()
    }
}

fn reg(name: &str) -> RegisterRequest {
    RegisterRequest {
        name: name.into(),
        cpus: 1.0,
        mem_mb: 0,
        mechanism: "none".into(),
        account: String::new(),
        switches_users: false,
    }
}

fn sync(name: &str, running: Vec<RunningReport>, exited: Vec<ExitReport>) -> SyncRequest {
    SyncRequest { name: name.into(), mechanism: "none".into(), running, exited, wait_ms: 0 }
}

/// "The job finished well": what an attacker would send for a job it wants charged.
fn completed(job: u64) -> ExitReport {
    ExitReport {
        job,
        exit_code: Some(0),
        signal: None,
        cpu_seconds: 1.0,
        start_time: 10.0,
        end_time: 5.0,
        output: Vec::new(),
        error: None,
        timed_out: false,
        node_fault: false,
    }
}

fn running(job: u64) -> RunningReport {
    RunningReport {
        job,
        cpu_seconds: 0.5,
        suspended: false,
        share: 1.0,
        start_time: libra_server::app::now(),
        output: Vec::new(),
    }
}

#[test]
fn only_a_node_itself_reports_on_its_jobs_and_forget_lets_it_join_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_background(config(&dir)).unwrap();
    let url = format!("http://{}", server.addr);
    let anon = Client::new(&url, None);
    let admin = anon.with_token(Some(anon.login("admin", "admin-pw").unwrap().token));
    let joiner = anon.with_token(Some(JOIN.into()));

    // Joining mints a credential per node, sent once.
    let cred1 = joiner.register(&reg("n1")).unwrap().credential.expect("a credential for a new node");
    let cred2 = joiner.register(&reg("n2")).unwrap().credential.expect("a credential for a new node");
    assert_ne!(cred1, cred2);
    assert_ne!(cred1, JOIN);
    let n1 = anon.with_token(Some(cred1.clone()));
    let n2 = anon.with_token(Some(cred2.clone()));

    admin.user_add(&UserAdd::new("u", "pw-u", false)).unwrap();
    admin.credit("u", Money::from_credits(10_000)).unwrap();
    let user = anon.with_token(Some(anon.login("u", "pw-u").unwrap().token));
    let job = user
        .submit(&SubmitRequest::new(
            JobSpec::simple(100.0, 1000.0, Money::from_credits(500)),
            vec!["true".into()],
        ))
        .unwrap();
    assert_eq!(job.state, JobState::Pending);
    let (owner, owner_cred, other, other_cred) =
        if job.nodes == ["n1"] { ("n1", &n1, "n2", &n2) } else { ("n2", &n2, "n1", &n1) };
    assert_eq!(job.nodes, [owner]);
    // The owner starts it.
    let resp = owner_cred.sync(&sync(owner, vec![], vec![])).unwrap();
    assert_eq!(resp.start.iter().map(|s| s.job).collect::<Vec<_>>(), [job.id]);
    owner_cred.sync(&sync(owner, vec![running(job.id)], vec![])).unwrap();
    assert_eq!(user.job(job.id).unwrap().state, JobState::Running);
    let held = user.balance().unwrap().held;

    // 1. The join token is no node's identity: it cannot sync as the owner, nor mark its job
    //    COMPLETED, nor register the owner's name again.
    let e = joiner.sync(&sync(owner, vec![], vec![completed(job.id)])).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = joiner.sync(&sync(owner, vec![], vec![])).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = joiner.register(&reg(owner)).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    assert!(e.to_string().contains(&format!("libra admin node forget {owner}")), "{e}");

    // 2. Another node, with its own credential, can neither speak as the owner nor report on
    //    the owner's job under its own name.
    let e = other_cred.sync(&sync(owner, vec![], vec![completed(job.id)])).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = other_cred.sync(&sync(other, vec![], vec![completed(job.id)])).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    assert!(e.to_string().contains(&format!("was not given job {}", job.id)), "{e}");
    let e = other_cred.sync(&sync(other, vec![running(job.id)], vec![])).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = other_cred.register(&reg(owner)).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    // None of it changed anything: the job runs, nothing charged, its hold stands.
    let j = user.job(job.id).unwrap();
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.charged, Money::ZERO);
    assert_eq!(user.balance().unwrap().held, held);

    // 3. A restarted agent registers again with its credential (no new one is minted).
    let again = owner_cred.register(&reg(owner)).unwrap();
    assert!(again.credential.is_none());
    owner_cred.sync(&sync(owner, vec![running(job.id)], vec![])).unwrap();
    assert_eq!(user.job(job.id).unwrap().state, JobState::Running);

    // 4. Forgetting is for administrators; it loses the node's jobs (hold released) and its
    //    credential, and the join token may then claim the name again.
    assert_eq!(user.node_forget(owner).unwrap_err().status(), Some(403));
    assert_eq!(admin.node_forget("nosuch").unwrap_err().status(), Some(404));
    let f = admin.node_forget(owner).unwrap();
    assert_eq!(f.jobs_lost, [job.id]);
    let j = user.job(job.id).unwrap();
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.charged, Money::ZERO);
    assert_eq!(user.balance().unwrap().held, Money::ZERO);
    assert!(!admin.nodes().unwrap().iter().find(|n| n.name == owner).unwrap().up);
    // The forgotten credential is refused everywhere.
    assert_eq!(owner_cred.sync(&sync(owner, vec![], vec![])).unwrap_err().status(), Some(403));
    assert_eq!(owner_cred.register(&reg(owner)).unwrap_err().status(), Some(403));
    // Re-joining with the join token works and mints a new credential.
    let cred3 = joiner.register(&reg(owner)).unwrap().credential.expect("a new credential");
    assert_ne!(cred3, *if owner == "n1" { &cred1 } else { &cred2 });
    let rejoined = anon.with_token(Some(cred3));
    rejoined.sync(&sync(owner, vec![], vec![])).unwrap();
    assert!(admin.nodes().unwrap().iter().find(|n| n.name == owner).unwrap().up);
    // ... and the join token cannot claim it a second time.
    assert_eq!(joiner.register(&reg(owner)).unwrap_err().status(), Some(403));
}

#[test]
fn credentials_survive_a_restart_and_are_stored_only_as_digests() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir);
    let server = start_background(config.clone()).unwrap();
    let url = format!("http://{}", server.addr);
    let cred = Client::new(&url, Some(JOIN.into())).register(&reg("n1")).unwrap().credential.unwrap();
    drop(server);
    let stored: String = rusqlite::Connection::open(dir.path().join("server.db"))
        .unwrap()
        .query_row("SELECT cred_hash FROM nodes WHERE name = 'n1'", [], |r| r.get(0))
        .unwrap();
    assert_ne!(stored, cred, "the credential itself is not stored");
    assert!(!stored.contains(&cred));
    let server = start_background(config).unwrap();
    let url = format!("http://{}", server.addr);
    let node = Client::new(&url, Some(cred));
    assert!(node.register(&reg("n1")).unwrap().credential.is_none());
    node.sync(&sync("n1", vec![], vec![])).unwrap();
    assert_eq!(Client::new(&url, Some(JOIN.into())).register(&reg("n1")).unwrap_err().status(), Some(403));
}

/// A join whose answer never reached its agent (the connection dropped, the agent died before
/// saving the credential) can be made again with the join token, across a server restart too,
/// until the node first presents its credential (by a sync or a registration): from then on the
/// join token cannot claim the name. Before, the first answer's loss locked the name until an
/// administrator forgot the node. A credential replaced this way is refused.
#[test]
fn a_join_whose_answer_was_lost_can_be_made_again_until_its_credential_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir);
    let server = start_background(config.clone()).unwrap();
    let joiner = Client::new(&format!("http://{}", server.addr), Some(JOIN.into()));
    let join = |joiner: &Client, name: &str| joiner.register(&reg(name)).map(|r| r.credential);

    // The answer to the first join is lost; the second join is answered with a new credential.
    let lost = join(&joiner, "n1").unwrap().expect("a credential for a new node");
    let second = join(&joiner, "n1").expect("a second join before the first credential was used").unwrap();
    assert_ne!(second, lost);
    let node = |url: &str, cred: &str| Client::new(url, Some(cred.to_string()));
    let url = format!("http://{}", server.addr);
    assert_eq!(node(&url, &lost).sync(&sync("n1", vec![], vec![])).unwrap_err().status(), Some(403));

    // Still unused across a restart: lost again, joined again.
    drop(server);
    let server = start_background(config.clone()).unwrap();
    let url = format!("http://{}", server.addr);
    let joiner = Client::new(&url, Some(JOIN.into()));
    let third = join(&joiner, "n1").expect("a join after a restart, the credential still unused").unwrap();
    assert_ne!(third, second);
    assert_eq!(node(&url, &second).register(&reg("n1")).unwrap_err().status(), Some(403));

    // Used by a sync: the name is the node's, across a restart too.
    node(&url, &third).sync(&sync("n1", vec![], vec![])).unwrap();
    let e = join(&joiner, "n1").unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    drop(server);
    let server = start_background(config).unwrap();
    let url = format!("http://{}", server.addr);
    let joiner = Client::new(&url, Some(JOIN.into()));
    assert_eq!(join(&joiner, "n1").unwrap_err().status(), Some(403));
    assert!(node(&url, &third).register(&reg("n1")).unwrap().credential.is_none());

    // Used by a registration (a restarted agent registers before it syncs): the same.
    let n2 = join(&joiner, "n2").unwrap().unwrap();
    assert!(node(&url, &n2).register(&reg("n2")).unwrap().credential.is_none());
    assert_eq!(join(&joiner, "n2").unwrap_err().status(), Some(403));
    node(&url, &n2).sync(&sync("n2", vec![], vec![])).unwrap();
}
