//! End-to-end: operating a real cluster from the `libra` binary: draining a node, the
//! monitoring endpoints, and a backup taken while submissions run, restored into a new store.

mod common;

use common::*;
use libra_api::{Client, JobState};

fn admin_token(cl: &Cluster) -> String {
    Client::new(&cl.url, None).login("admin", ADMIN_PW).unwrap().token
}

#[test]
fn a_drained_node_takes_no_new_job_and_finishes_the_one_it_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let admin = cl.admin();
    let token = admin_token(&cl);
    let u = cl.user("dana", 1000);
    // A job that runs a few seconds on one node; drain that node while it runs.
    let first = u.submit(&burn(2.0, 3.0, 120.0, 50)).unwrap();
    assert_eq!(first.state, JobState::Pending, "{first:?}");
    let busy = first.nodes[0].clone();
    let other = cl.node_names.iter().find(|n| **n != busy).unwrap().clone();
    wait_running(&u, first.id);
    let out = libra(&cl, &token, &["admin", "node", "drain", &busy]);
    assert!(out.contains(&format!("node {busy} is drained")) && out.contains("1 job on it will finish"), "{out}");
    let table = libra(&cl, &token, &["admin", "nodes"]);
    let row = table.lines().find(|l| l.contains(&busy)).unwrap();
    assert!(row.contains("DRAINED"), "{table}");
    assert!(!table.lines().find(|l| l.contains(&other)).unwrap().contains("DRAINED"), "{table}");
    // New jobs that would fit on either node go to the other one, every time.
    for _ in 0..4 {
        let j = u.submit(&burn(0.1, 0.5, 120.0, 50)).unwrap();
        assert_eq!(j.state, JobState::Pending, "{j:?}");
        assert_eq!(j.nodes, vec![other.clone()], "a drained node got a job: {j:?}");
    }
    // A job needing two nodes cannot be had with one drained.
    let mut pair = burn(0.1, 0.5, 120.0, 50);
    pair.spec = pair.spec.with_procs(2);
    let two = u.submit(&pair).unwrap();
    assert_eq!(two.state, JobState::Rejected, "{two:?}");
    // Both drained: refused, with a reason.
    libra(&cl, &token, &["admin", "node", "drain", &other]);
    let refused = u.submit(&burn(0.1, 0.5, 120.0, 50)).unwrap();
    assert_eq!(refused.state, JobState::Rejected, "{refused:?}");
    // The promise made on the drained node is kept: the running job finishes there.
    let done = wait_done(&u, first.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert_eq!(done.nodes, vec![busy.clone()]);
    // Drained survives a restart of the server.
    let mut cl = cl;
    cl.kill_server();
    cl.start_server();
    let nodes = admin.nodes().unwrap();
    assert!(nodes.iter().all(|n| n.drained), "{nodes:?}");
    let out = libra(&cl, &token, &["admin", "node", "undrain", &busy]);
    assert!(out.contains(&format!("node {busy} takes new jobs again")), "{out}");
    let u = Client::new(&cl.url, Some(Client::new(&cl.url, None).login("dana", "pw-dana").unwrap().token));
    let j = wait_until("the undrained node back up", || {
        u.submit(&burn(0.1, 0.5, 120.0, 50)).ok().filter(|j| j.state == JobState::Pending)
    });
    assert_eq!(j.nodes, vec![busy.clone()]);
    // Unknown nodes and actions are named.
    let out = std::process::Command::new(EXE)
        .args(["admin", "node", "drain", "no-such-node"])
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", &token)
        .env("LIBRA_CONFIG_DIR", cl.dir.join("config"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'no-such-node' is not a node"), "{out:?}");
}
