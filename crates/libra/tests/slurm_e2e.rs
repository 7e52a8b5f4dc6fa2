//! End-to-end, on a real cluster: what Slurm users reach for every day. The queue hides other
//! users' jobs from users who are not administrators (in the API itself); `update` re-decides
//! and re-prices a job's promise (its hold and, for a running job, its node's share follow) or
//! refuses and keeps the old one; `hold` gives up a job's promise and no node starts it until
//! `release` admits it again; `history` filters on the server, with sacct's output forms.

mod common;

use common::libra_run as run;
use common::*;
use libra_api::{Client, ClientError, HistoryQuery, JobState, QueueEntry, QueueQuery, UpdateRequest};
use libra_core::Money;

fn status_of<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Status { status, message }) => (status, message),
        other => panic!("expected an HTTP error, got {other:?}"),
    }
}

fn held(c: &Client) -> Money {
    c.balance().unwrap().held
}

#[test]
fn the_queue_shows_every_job_and_hides_other_users_names_and_commands_from_non_administrators() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let admin = cl.admin();
    let alice = cl.user("alice", 500);
    let bob = cl.user("bob", 500);
    let mut secret = burn(60.0, 60.0, 900.0, 100);
    secret.name = Some("alice-secret-run".into());
    // A command that names her secret and still runs the burn.
    secret.command =
        vec!["sh".into(), "-c".into(), format!("exec '{EXE}' burn --cpu-seconds 60 # alice-secret-arg")];
    let a = alice.submit(&secret).unwrap();
    let b = bob.submit(&burn(60.0, 60.0, 600.0, 100)).unwrap();
    assert!(a.state.is_active() && b.state.is_active(), "{a:?} {b:?}");

    // Through the API itself: nothing of alice's job but its state, nodes, share and deadline.
    let raw: serde_json::Value = bob.get("/api/queue").unwrap();
    let text = raw.to_string();
    assert!(!text.contains("alice"), "bob sees alice's name, job name or command: {text}");
    let q: Vec<QueueEntry> = serde_json::from_value(raw).unwrap();
    let theirs = q.iter().find(|e| e.id == a.id).expect("alice's job is in the queue");
    assert_eq!((theirs.user.as_str(), theirs.mine), ("other", false));
    assert!(theirs.name.is_none() && theirs.command.is_empty() && theirs.cost.is_none(), "{theirs:?}");
    assert_eq!(theirs.nodes, a.nodes);
    assert!(theirs.share > 0.0 && (theirs.deadline_at - a.deadline_at).abs() < 1e-6);
    let mine = q.iter().find(|e| e.id == b.id).unwrap();
    assert!(mine.mine && mine.user == "bob" && mine.cost == Some(b.cost), "{mine:?}");
    // Sorted by deadline: bob's (10 minutes) before alice's (15).
    assert!(q.windows(2).all(|w| w[0].deadline_at <= w[1].deadline_at), "{q:?}");
    assert_eq!(q.iter().map(|e| e.id).collect::<Vec<_>>(), [b.id, a.id]);

    // An administrator sees who and what.
    let all = admin.queue(&QueueQuery::default()).unwrap();
    let seen = all.iter().find(|e| e.id == a.id).unwrap();
    assert_eq!(seen.user, "alice");
    assert_eq!(seen.name.as_deref(), Some("alice-secret-run"));
    assert!(seen.command.iter().any(|c| c.contains("alice-secret-arg")), "{seen:?}");

    // Filters: a user may name only themselves; states and nodes are checked.
    let (st, msg) = status_of(bob.queue(&QueueQuery { user: Some("alice".into()), ..Default::default() }));
    assert_eq!(st, 403, "{msg}");
    let own = bob.queue(&QueueQuery { user: Some("bob".into()), ..Default::default() }).unwrap();
    assert_eq!(own.iter().map(|e| e.id).collect::<Vec<_>>(), [b.id]);
    let by_admin = admin.queue(&QueueQuery { user: Some("alice".into()), ..Default::default() }).unwrap();
    assert_eq!(by_admin.iter().map(|e| e.id).collect::<Vec<_>>(), [a.id]);
    let (st, msg) =
        status_of(bob.queue(&QueueQuery { state: Some("COMPLETED".into()), ..Default::default() }));
    assert!(st == 400 && msg.contains("state") && msg.contains("HELD"), "{st} {msg}");
    let (st, msg) = status_of(bob.queue(&QueueQuery { node: Some("nowhere".into()), ..Default::default() }));
    assert!(st == 400 && msg.starts_with("node:") && msg.contains(&cl.node_names[0]), "{st} {msg}");
    let on_a = bob.queue(&QueueQuery { node: Some(a.nodes[0].clone()), ..Default::default() }).unwrap();
    assert!(on_a.iter().all(|e| e.nodes.contains(&a.nodes[0])) && on_a.iter().any(|e| e.id == a.id));
    let t0 = std::time::Instant::now();
    let running = loop {
        let r = bob.queue(&QueueQuery { state: Some("running".into()), ..Default::default() }).unwrap();
        if r.len() == 2 {
            break r;
        }
        let log = std::fs::read_to_string(cl.dir.join("server.log")).unwrap_or_default();
        assert!(
            t0.elapsed().as_secs() < 60,
            "not both running: {:?} {:?}\n{log}",
            admin.job(a.id).unwrap(),
            admin.job(b.id).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(running.iter().all(|e| e.state == JobState::Running));

    // The command line: a table with `other`, and the same anonymised JSON.
    let bob_token = token_of(&cl, "bob");
    let table = libra(&cl, &bob_token, &["queue"]);
    assert!(table.contains("other") && !table.contains("alice"), "{table}");
    assert!(table.contains("TIME LEFT"), "{table}");
    let json = libra(&cl, &bob_token, &["queue", "--json", "--state", "RUNNING"]);
    assert!(!json.contains("alice") && json.contains("\"other\""), "{json}");
    let (ok, _, err) = run(&cl, &bob_token, &["queue", "--state", "DONE"]);
    assert!(!ok && err.contains("--state") && err.contains("PENDING, RUNNING, SUSPENDED, HELD"), "{err}");
    let (ok, _, err) = run(&cl, &bob_token, &["queue", "--user", "alice"]);
    assert!(!ok && err.contains("administrator"), "{err}");
}

#[test]
fn update_reprices_a_running_job_its_node_follows_the_new_deadline_and_a_refusal_keeps_the_old_promise() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let admin = cl.admin();
    let alice = cl.user("alice", 1000);
    let bob = cl.user("bob", 1000);
    // 20 CPU-s due in 40 s: about half the node.
    let a = alice.submit(&burn(20.0, 20.0, 40.0, 100)).unwrap();
    assert_eq!(a.state, JobState::Pending, "{a:?}");
    wait_running(&alice, a.id);
    let node_share = |job: u64| {
        admin.nodes().ok()?.iter().flat_map(|n| n.jobs.clone()).find(|j| j.job == job).map(|j| j.share)
    };
    let before = wait_until("the node's share for the job", || node_share(a.id).filter(|s| *s > 0.0));
    assert!(before > 0.35, "share {before} before the update");

    // A later deadline: re-decided and re-priced at once, the hold follows the new price.
    let later = a.submit_time + 400.0;
    let up = alice.update(a.id, &UpdateRequest { deadline_at: Some(later), budget: None }).unwrap();
    assert!(up.accepted, "{up:?}");
    assert_eq!(up.previous_cost, a.cost);
    assert!((up.job.deadline_at - later).abs() < 1e-6, "{:?}", up.job);
    assert!(up.job.share < a.share, "share {} after, {} before", up.job.share, a.share);
    assert!(up.job.cost <= up.job.budget && up.job.cost.0 > 0, "{:?}", up.job);
    assert_eq!(held(&alice), up.job.cost, "the hold is the new price");
    // The node's job control follows the new promise: about 20 CPU-s over 6 minutes.
    wait_until("the node to lower the job's share", || node_share(a.id).filter(|s| *s < 0.2));

    // Another job takes most of what is left of the node.
    let b = bob.submit(&burn(30.0, 30.0, 40.0, 100)).unwrap();
    assert_eq!(b.state, JobState::Pending, "{b:?}");
    // An earlier deadline the node cannot keep beside bob's promise: refused, nothing changes.
    let job_before = alice.job(a.id).unwrap();
    let held_before = held(&alice);
    let soon =
        alice.update(a.id, &UpdateRequest { deadline_at: Some(libra_now() + 12.0), budget: None }).unwrap();
    assert!(!soon.accepted, "{soon:?}");
    assert!(soon.reason.as_deref().unwrap_or("").starts_with("deadline"), "{soon:?}");
    let sg = soon.suggestion.expect("a refused update comes with a suggestion");
    assert!(sg.deadline_at > libra_now() + 12.0, "{sg:?}");
    let job_after = alice.job(a.id).unwrap();
    assert_eq!(
        (job_after.deadline_at, job_after.cost, job_after.budget, job_after.share),
        (job_before.deadline_at, job_before.cost, job_before.budget, job_before.share)
    );
    assert_eq!(held(&alice), held_before);
    // A budget below the price: refused with a budget that would do.
    let poor = alice.update(a.id, &UpdateRequest { deadline_at: None, budget: Some(Money(1)) }).unwrap();
    assert!(!poor.accepted && poor.reason.as_deref().unwrap_or("").starts_with("budget"), "{poor:?}");
    // With a budget that would do, whether or not the job has earned more than the one asked.
    assert!(poor.suggestion.as_ref().is_some_and(|s| s.budget > Money(1)), "{poor:?}");
    assert_eq!(alice.job(a.id).unwrap().budget, job_before.budget);
    assert_eq!(held(&alice), held_before);
    // A higher budget: accepted, never held above it.
    let rich = alice
        .update(a.id, &UpdateRequest { deadline_at: None, budget: Some(Money::from_credits(150)) })
        .unwrap();
    assert!(rich.accepted && rich.job.budget == Money::from_credits(150), "{rich:?}");
    assert!(rich.job.cost <= rich.job.budget && held(&alice) == rich.job.cost);

    // Only the owner (or an administrator) may change a job.
    let (st, msg) =
        status_of(bob.update(a.id, &UpdateRequest { deadline_at: Some(later + 10.0), budget: None }));
    assert!(st == 403 && msg.contains("another user"), "{st} {msg}");
    assert!(
        admin
            .update(a.id, &UpdateRequest { deadline_at: Some(later + 10.0), budget: None })
            .unwrap()
            .accepted
    );
    // Bad input names the field.
    let (st, msg) = status_of(alice.update(a.id, &UpdateRequest::default()));
    assert!(st == 400 && msg.contains("deadline_at") && msg.contains("budget_cents"), "{st} {msg}");
    let (st, msg) = status_of(alice.update(a.id, &UpdateRequest { deadline_at: Some(1000.0), budget: None }));
    assert!(st == 400 && msg.starts_with("deadline_at") && msg.contains("past"), "{st} {msg}");
    // A budget past the largest a submission may have (the ledger's guard against overflowing
    // sums) was taken by an update: refused, as at submission, and nothing changes.
    let huge = Money::from_credits(libra_core::job::MAX_BUDGET_CREDITS + 1);
    let (st, msg) = status_of(alice.update(a.id, &UpdateRequest { deadline_at: None, budget: Some(huge) }));
    assert!(st == 400 && msg.starts_with("budget_cents") && msg.contains("at most"), "{st} {msg}");
    assert_eq!(alice.job(a.id).unwrap().budget, rich.job.budget);
    let token = token_of(&cl, "alice");
    let id = a.id.to_string();
    let (ok, _, err) = run(&cl, &token, &["update", &id, "--deadline", "yesterday"]);
    assert!(!ok && err.contains("--deadline"), "{err}");
    let (ok, _, err) = run(&cl, &token, &["update", &id, "--budget", "lots"]);
    assert!(!ok && err.contains("--budget"), "{err}");
    for bad in ["--budget=-1", "--budget=1000000000000.01"] {
        let (ok, _, err) = run(&cl, &token, &["update", &id, bad]);
        assert!(
            !ok && err.contains("--budget") && err.contains("at most 1000000000000 credits"),
            "{bad}: {err}"
        );
    }
    let (ok, _, err) = run(&cl, &token, &["update", &id]);
    assert!(!ok && err.contains("--deadline, --budget or both"), "{err}");
    // The command line: accepted, then refused (non-zero, with the suggestion's command).
    let out = libra(&cl, &token, &["update", &id, "--deadline", "9m"]);
    assert!(out.contains("updated") && out.contains("on hold (was"), "{out}");
    let (ok, out, err) = run(&cl, &token, &["update", &id, "--budget", "0.01"]);
    assert!(!ok && out.contains("refused: budget") && out.contains("libra update"), "{out}{err}");

    // A finished job cannot be changed.
    alice.cancel(a.id).unwrap();
    let (st, msg) =
        status_of(alice.update(a.id, &UpdateRequest { deadline_at: Some(later + 60.0), budget: None }));
    assert!(st == 409 && msg.contains("CANCELLED") && msg.contains("finished"), "{st} {msg}");
    let _ = bob.cancel(b.id);
}

fn libra_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn a_held_job_gives_up_its_promise_is_not_started_and_release_admits_it_again() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 1.0, 60.0);
    let alice = cl.user("alice", 100);
    let bob = cl.user("bob", 100);
    let node = cl.node_names[0].clone();
    // With its agent stopped, the node stays up (for the timeout) and nothing is started on it.
    let mut agent = cl.nodes.remove(0);
    agent.kill().unwrap();
    agent.wait().unwrap();
    let j = alice.submit(&burn(1.0, 2.0, 600.0, 50)).unwrap();
    assert_eq!((j.state, j.nodes.clone()), (JobState::Pending, vec![node.clone()]), "{j:?}");
    assert_eq!(held(&alice), j.cost);

    let (st, msg) = status_of(bob.hold(j.id));
    assert!(st == 403 && msg.contains("another user"), "{st} {msg}");
    let h = alice.hold(j.id).unwrap();
    assert_eq!(h.state, JobState::Held, "{h:?}");
    assert!(h.nodes.is_empty(), "{h:?}");
    assert_eq!(held(&alice), Money::ZERO, "holding gives up the hold");
    let (st, msg) = status_of(alice.hold(j.id));
    assert!(st == 409 && msg.contains("HELD"), "{st} {msg}");
    let q = alice.queue(&QueueQuery { state: Some("HELD".into()), ..Default::default() }).unwrap();
    assert_eq!(q.iter().map(|e| e.id).collect::<Vec<_>>(), [j.id]);

    // The agent comes back: a held job is not started.
    let back = libra_now();
    cl.start_node(&node, 1.0);
    let admin = cl.admin();
    wait_until("two exchanges with the agent", || {
        admin.nodes().ok()?.iter().find(|n| n.name == node && n.last_seen > back + 1.2).map(|_| ())
    });
    let still = alice.job(j.id).unwrap();
    assert!(still.state == JobState::Held && still.start_time.is_none(), "{still:?}");
    assert!(job_pids(&cl, j.id).is_empty(), "a held job's processes run");

    // Released with a budget too small: refused, stays held, told what would do.
    let terms = alice.update(j.id, &UpdateRequest { deadline_at: None, budget: Some(Money(0)) }).unwrap();
    assert!(terms.accepted && terms.job.budget == Money(0), "{terms:?}");
    let (st, msg) = status_of(bob.release(j.id));
    assert!(st == 403, "{st} {msg}");
    let refused = alice.release(j.id).unwrap();
    assert!(
        !refused.accepted && refused.reason.as_deref().unwrap_or("").starts_with("budget"),
        "{refused:?}"
    );
    let sg = refused.suggestion.expect("a suggestion");
    assert!(sg.budget > Money(0), "{sg:?}");
    assert_eq!(alice.job(j.id).unwrap().state, JobState::Held);
    assert_eq!(held(&alice), Money::ZERO);
    // The command line says the same and fails.
    let token = token_of(&cl, "alice");
    let id = j.id.to_string();
    let (ok, out, err) = run(&cl, &token, &["release", &id]);
    assert!(!ok && out.contains("release refused: budget") && err.contains("stays HELD"), "{out}{err}");

    // With the suggested budget: admitted again like a new submission, and run.
    alice.update(j.id, &UpdateRequest { deadline_at: None, budget: Some(sg.budget) }).unwrap();
    let out = libra(&cl, &token, &["release", &id, "--json"]);
    let ok: libra_api::ChangeAnswer = serde_json::from_str(&out).unwrap();
    assert!(ok.accepted && ok.job.state.is_active() && ok.job.nodes == [node.clone()], "{out}");
    assert!(ok.job.cost <= sg.budget);
    assert_eq!(held(&alice), ok.job.cost);
    let done = wait_done(&alice, j.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert!(done.charged <= done.budget);
    // Finished: neither held nor released.
    let (st, msg) = status_of(alice.hold(j.id));
    assert!(st == 409 && msg.contains("COMPLETED"), "{st} {msg}");
    let (st, msg) = status_of(alice.release(j.id));
    assert!(st == 409 && msg.contains("only a HELD job"), "{st} {msg}");
    // A running job cannot be held.
    let r = alice.submit(&burn(30.0, 30.0, 600.0, 40)).unwrap();
    wait_running(&alice, r.id);
    let (st, msg) = status_of(alice.hold(r.id));
    assert!(st == 409 && msg.contains("RUNNING"), "{st} {msg}");
    alice.cancel(r.id).unwrap();
}

#[test]
fn history_filters_on_the_server_and_prints_sacct_columns() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let admin = cl.admin();
    let alice = cl.user("alice", 200);
    let bob = cl.user("bob", 100);
    let t0 = libra_now();
    let done = alice.submit(&burn(0.2, 1.0, 120.0, 10)).unwrap();
    let done = wait_done(&alice, done.id);
    assert_eq!(done.state, JobState::Completed);
    let rejected = alice.submit(&burn(1.0, 5.0, 120.0, 0)).unwrap();
    assert_eq!(rejected.state, JobState::Rejected);
    let live = alice.submit(&burn(30.0, 30.0, 600.0, 90)).unwrap();
    assert!(live.state.is_active(), "{live:?}");
    // Running, so that its state does not change under the output compared below.
    wait_running(&alice, live.id);
    bob.submit(&burn(0.2, 1.0, 120.0, 10)).unwrap();

    // Filtered by the server.
    let ids = |q: HistoryQuery, c: &Client| c.history(&q).unwrap().iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(
        ids(HistoryQuery { state: Some("completed".into()), ..Default::default() }, &alice),
        [done.id]
    );
    assert_eq!(ids(HistoryQuery { start: Some(libra_now()), ..Default::default() }, &alice), [live.id]);
    assert_eq!(ids(HistoryQuery { end: Some(t0 - 1.0), ..Default::default() }, &alice), Vec::<u64>::new());
    assert_eq!(ids(HistoryQuery::default(), &alice), [done.id, rejected.id, live.id]);
    let (st, msg) =
        status_of(bob.history(&HistoryQuery { user: Some("alice".into()), ..Default::default() }));
    assert!(st == 403 && msg.contains("administrator"), "{st} {msg}");
    let (st, msg) =
        status_of(alice.history(&HistoryQuery { state: Some("GONE".into()), ..Default::default() }));
    assert!(st == 400 && msg.starts_with("state:"), "{st} {msg}");
    assert_eq!(ids(HistoryQuery { user: Some("alice".into()), ..Default::default() }, &admin).len(), 3);
    assert_eq!(ids(HistoryQuery { user: Some("all".into()), ..Default::default() }, &admin).len(), 4);
    let (st, msg) =
        status_of(admin.history(&HistoryQuery { user: Some("nobody".into()), ..Default::default() }));
    assert!(st == 400 && msg.contains("user: there is no user named 'nobody'"), "{st} {msg}");

    // The command line: relative and absolute times, --format, --parsable.
    let token = token_of(&cl, "alice");
    let out = libra(
        &cl,
        &token,
        &["history", "--starttime", "now", "--format", "JobID,state,budget", "--parsable"],
    );
    assert_eq!(out, format!("JobID|State|Budget|\n{}|RUNNING|90.00|\n", live.id));
    let out = libra(&cl, &token, &["history", "-S", "1h", "-s", "COMPLETED", "-o", "jobid,state,cost", "-p"]);
    assert_eq!(out, format!("JobID|State|Cost|\n{}|COMPLETED|{}|\n", done.id, done.charged));
    let at = format!("@{:.0}", t0 - 10.0);
    let out = libra(&cl, &token, &["history", "--endtime", &at, "--json"]);
    assert_eq!(out.trim(), "[]");
    // sacct's own names for the wall time, the nodes and the CPUs.
    let out = libra(
        &cl,
        &token,
        &["history", "-S", "1h", "-s", "COMPLETED", "-o", "jobid,nnodes,alloccpus,nodelist,elapsed", "-p"],
    );
    let (start, end) = (done.start_time.unwrap(), done.end_time.unwrap());
    assert!(end - start < 60.0, "{done:?}");
    let cpus = u64::from(done.procs) * u64::from(done.cpus_per_task.max(1));
    let want = format!(
        "JobID|NNodes|AllocCPUS|NodeList|Elapsed|\n{}|{}|{cpus}|{}|{:.1}s|\n",
        done.id,
        done.procs,
        done.nodes.join(","),
        end - start
    );
    assert_eq!(out, want);
    let (ok, _, err) = run(&cl, &token, &["history", "--format", "jobid,maxrss"]);
    assert!(
        !ok && err.contains("'maxrss' is not a column") && err.contains("jobid, jobname, user, state"),
        "{err}"
    );
    let (ok, _, err) = run(&cl, &token, &["history", "--starttime", "soon"]);
    assert!(!ok && err.contains("--starttime"), "{err}");
    let (ok, _, err) = run(&cl, &token, &["history", "--user", "bob"]);
    assert!(!ok && err.contains("administrator"), "{err}");
    let table = libra(&cl, &token, &["history"]);
    assert!(table.contains("JobID") && table.contains("REJECTED"), "{table}");
    alice.cancel(live.id).unwrap();
}
