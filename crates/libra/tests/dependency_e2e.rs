//! End-to-end: job dependencies on a real cluster (`libra submit --dependency`): an afterok chain
//! runs in order; an afterok dependency that fails cancels the waiting job, free, its hold
//! released, while afterany runs after it anyway; a deadline too close to a dependency's promise
//! is refused with a suggestion that is then accepted (and `libra quote` with the dependency
//! answers the same); another user's job cannot be named (and is refused in the same words as a
//! job that does not exist); a job waiting when the server is killed with -9 still starts after
//! its dependency once the server is back.

mod common;

use common::libra_output as run;
use common::*;
use libra_api::{JobInfo, JobState, SubmitRequest};
use libra_core::dependency::{DepKind, Dependency};
use libra_core::{JobSpec, Money};
use std::process::Output;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `libra submit --json ARGS`: the job the server answered with (accepted or refused).
fn submit(cl: &Cluster, token: &str, args: &[&str]) -> (JobInfo, Output) {
    let mut all = vec!["submit", "--json"];
    all.extend_from_slice(args);
    let out = run(cl, token, &all);
    let job: JobInfo = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (job, out)
}

fn sh(estimate: f64, deadline: f64, budget: i64, script: &str) -> SubmitRequest {
    SubmitRequest::new(
        JobSpec::simple(estimate, deadline, Money::from_credits(budget)),
        vec!["sh".into(), "-c".into(), script.into()],
    )
}

fn after(kind: DepKind, job: u64) -> Vec<Dependency> {
    vec![Dependency { kind, job, task: None }]
}

#[test]
fn an_afterok_chain_runs_in_order_each_waiting_with_the_share_its_window_needs() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let c = cl.user("ada", 1000);
    let token = token_of(&cl, "ada");
    let a = c.submit(&sh(3.0, 60.0, 20, "sleep 2; echo a")).unwrap();
    assert_eq!(a.state, JobState::Pending, "{a:?}");
    let id_a = a.id.to_string();
    let (b, out) = submit(
        &cl,
        &token,
        &[
            "--dependency",
            &format!("afterok:{id_a}"),
            "--estimate",
            "1s",
            "-d",
            "2m",
            "-b",
            "5",
            "--",
            "sh",
            "-c",
            "echo b",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(b.state, JobState::Pending, "{b:?}");
    assert!(b.waiting, "{b:?}");
    assert_eq!(b.dependencies, after(DepKind::AfterOk, a.id));
    assert!(
        b.reason.as_deref().unwrap_or("").contains(&format!("waiting on dependencies: afterok:{id_a}")),
        "{b:?}"
    );
    // Admitted for the window between A's promised finish and B's deadline, held from now.
    let window = b.deadline_at - a.deadline_at;
    assert!(
        (b.share - b.estimate / window).abs() < 1e-3 * b.share,
        "share {} for a window of {window} s",
        b.share
    );
    // The third job reads its dependency from a `#LIBRA` line of its script.
    let script = cl.dir.join("third.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n#LIBRA --estimate 1s -d 3m -b 5\n#LIBRA --dependency afterok:{}\necho c\n", b.id),
    )
    .unwrap();
    let (cjob, out) = submit(&cl, &token, &[&script.display().to_string()]);
    assert!(out.status.success() && cjob.waiting, "{}", text(&out));
    assert_eq!(cjob.dependencies, after(DepKind::AfterOk, b.id));

    // While A runs, B waits where users look: status, queue (and no node has started it).
    let st = libra(&cl, &token, &["status", &b.id.to_string()]);
    assert!(st.contains("waiting on dependencies") && st.contains(&format!("afterok:{id_a}")), "{st}");
    let q = libra(&cl, &token, &["queue"]);
    assert!(q.contains("PENDING (dependency)"), "{q}");
    let b_now = c.job(b.id).unwrap();
    if c.job(a.id).unwrap().state.is_active() {
        assert!(b_now.start_time.is_none() && b_now.waiting, "{b_now:?}");
    }

    let (a, b, cj) = (wait_done(&c, a.id), wait_done(&c, b.id), wait_done(&c, cjob.id));
    for j in [&a, &b, &cj] {
        assert_eq!(j.state, JobState::Completed, "{j:?}");
        assert!(!j.waiting, "{j:?}");
    }
    assert!(
        b.start_time.unwrap() >= a.end_time.unwrap(),
        "B started {:?} before A ended {:?}",
        b.start_time,
        a.end_time
    );
    assert!(cj.start_time.unwrap() >= b.end_time.unwrap(), "C started before B ended: {b:?} {cj:?}");
}

#[test]
fn a_failed_dependency_cancels_afterok_free_with_its_hold_released_and_afterany_runs_after_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let c = cl.user("bea", 1000);
    let token = token_of(&cl, "bea");
    let a = c.submit(&sh(3.0, 60.0, 20, "sleep 1; exit 3")).unwrap();
    let before = c.balance().unwrap();
    let dep = format!("afterok:{}", a.id);
    let (ok, out) =
        submit(&cl, &token, &["--dependency", &dep, "--estimate", "1s", "-d", "2m", "-b", "5", "--", "true"]);
    assert!(out.status.success() && ok.waiting, "{}", text(&out));
    assert!(ok.cost > Money::ZERO);
    assert_eq!(c.balance().unwrap().available, before.available - ok.cost, "the waiting job's price is held");
    let any = format!("afterany:{}", a.id);
    let (anyj, out) =
        submit(&cl, &token, &["--dependency", &any, "--estimate", "1s", "-d", "2m", "-b", "5", "--", "true"]);
    assert!(out.status.success() && anyj.waiting, "{}", text(&out));

    let a = wait_done(&c, a.id);
    assert_eq!(a.state, JobState::Failed, "{a:?}");
    let ok = wait_done(&c, ok.id);
    assert_eq!(ok.state, JobState::Cancelled, "{ok:?}");
    assert_eq!(ok.reason.as_deref(), Some(format!("dependency {} failed", a.id).as_str()), "{ok:?}");
    assert!(ok.start_time.is_none(), "it never started: {ok:?}");
    assert_eq!(ok.charged, Money::ZERO);
    let anyj = wait_done(&c, anyj.id);
    assert_eq!(anyj.state, JobState::Completed, "{anyj:?}");
    assert!(anyj.start_time.unwrap() >= a.end_time.unwrap(), "{a:?} {anyj:?}");
    // Everything held for the cancelled job came back: the credit moved by A's and the
    // afterany job's charges only.
    let after = c.balance().unwrap();
    assert_eq!(after.held, Money::ZERO, "{after:?}");
    assert_eq!(after.charged, a.charged + anyj.charged, "{after:?}");
    assert_eq!(
        after.available,
        before.available + before.held - a.charged - anyj.charged,
        "{before:?} {after:?}"
    );
    let st = libra(&cl, &token, &["status", &ok.id.to_string()]);
    assert!(st.contains(&format!("dependency {} failed", a.id)), "{st}");

    // A dependency that has already failed can never satisfy afterok: refused at submission.
    let out = run(
        &cl,
        &token,
        &["submit", "--dependency", &dep, "--estimate", "1s", "-d", "2m", "-b", "5", "--", "true"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("--dependency")
            && t.contains("already FAILED")
            && t.contains(&format!("afterany:{}", a.id)),
        "{t}"
    );
}

#[test]
fn a_deadline_too_close_to_the_promise_is_refused_with_a_suggestion_that_is_accepted() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let c = cl.user("cyd", 5000);
    let token = token_of(&cl, "cyd");
    let a = c.submit(&sh(5.0, 600.0, 20, "sleep 60")).unwrap();
    assert_eq!(a.state, JobState::Pending, "{a:?}");
    let dep = format!("afterok:{}", a.id);
    let argv = ["--dependency", dep.as_str(), "--estimate", "20s", "-d", "5m", "-b", "500", "--", "true"];
    let (b, out) = submit(&cl, &token, &argv);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(b.state, JobState::Rejected, "{b:?}");
    let reason = b.reason.clone().unwrap_or_default();
    assert!(reason.contains(&format!("dependency: job {} promises to finish", a.id)), "{reason}");
    // `libra quote` with the same flags answers as the submission did (and takes the job
    // without the dependency).
    let quote = |with_dep: bool| {
        let mut all = vec!["quote", "--json"];
        all.extend_from_slice(if with_dep { &argv[..8] } else { &argv[2..8] });
        let out = run(&cl, &token, &all);
        let q = serde_json::from_slice::<libra_api::QuoteResponse>(&out.stdout).unwrap();
        // It exits as the submission would: 1 for a job that would be rejected.
        assert_eq!(out.status.success(), q.accepted, "{}", text(&out));
        q
    };
    let q = quote(true);
    assert!(!q.accepted && q.reason.as_deref() == Some("deadline"), "{q:?}");
    assert!(q.dependency.as_deref().unwrap_or_default().contains(&format!("job {} promises", a.id)), "{q:?}");
    // A moment later than the submission, so the deadline may be a second off.
    let (qd, bd) = (q.suggestion.expect("a suggestion").deadline, b.suggestion.as_ref().unwrap().deadline);
    assert!((qd - bd).abs() <= 1.0, "quote {qd}, submission {bd}");
    assert!(quote(false).accepted);
    let s = b.suggestion.expect("a suggestion");
    // The earliest deadline that fits: A's promise plus B's 20 s.
    let promise = a.deadline_at - b.submit_time;
    assert!(s.deadline >= promise + 20.0 && s.deadline <= promise + 40.0, "{s:?}, promise in {promise} s");
    // The human answer says it too, with the command that would be accepted.
    let human = run(
        &cl,
        &token,
        &["submit", "--dependency", &dep, "--estimate", "20s", "-d", "5m", "-b", "500", "--", "true"],
    );
    assert!(text(&human).contains("suggestion: a deadline of"), "{}", text(&human));
    // Taking the suggestion is accepted: the job waits on A.
    let d = format!("{}s", s.deadline.ceil());
    let budget = s.budget.to_string();
    let (b2, out) = submit(
        &cl,
        &token,
        &["--dependency", &dep, "--estimate", "20s", "-d", &d, "-b", &budget, "--", "true"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(b2.state == JobState::Pending && b2.waiting, "{b2:?}");
    // Cancelling the dependency cancels the waiting job, free.
    c.cancel(a.id).unwrap();
    let b2 = wait_done(&c, b2.id);
    assert_eq!(b2.state, JobState::Cancelled, "{b2:?}");
    assert_eq!(b2.reason.as_deref(), Some(format!("dependency {} was cancelled", a.id).as_str()));
    assert_eq!((b2.charged, c.balance().unwrap().held), (Money::ZERO, Money::ZERO));
}

#[test]
fn only_your_own_jobs_can_be_named_and_a_stranger_cannot_tell_which_exist() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let bob = cl.user("bob", 100);
    let dan = cl.user("dan", 100);
    let token = token_of(&cl, "dan");
    let x = bob.submit(&sh(1.0, 600.0, 5, "sleep 30")).unwrap();
    let refusal = |id: &str| {
        let out = run(
            &cl,
            &token,
            &[
                "submit",
                "--dependency",
                &format!("afterok:{id}"),
                "--estimate",
                "1s",
                "-d",
                "1h",
                "-b",
                "5",
                "--",
                "true",
            ],
        );
        assert!(!out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stderr).replace(&format!("no job {id} "), "no job ID ")
    };
    let theirs = refusal(&x.id.to_string());
    let missing = refusal("987654");
    assert!(theirs.contains("--dependency: dan has no job ID"), "{theirs}");
    assert_eq!(theirs, missing, "another user's job must read as one that does not exist");
    // Nothing was stored for dan, and bob's job is untouched.
    assert!(dan.jobs(false).unwrap().is_empty());
    let x_now = bob.job(x.id).unwrap();
    assert!(x_now.state.is_active() && x_now.reason.is_none(), "{x_now:?}");
    // Bad syntax is refused by the command line, naming the flag.
    let out = run(
        &cl,
        &token,
        &["submit", "--dependency", "afternotok:5", "--estimate", "1s", "-d", "1h", "-b", "5", "--", "true"],
    );
    assert!(
        !out.status.success() && text(&out).contains("--dependency: 'afternotok:5' is not accepted"),
        "{}",
        text(&out)
    );
    // An array cannot wait (yet): refused naming the flag.
    let out = run(
        &cl,
        &token,
        &[
            "submit",
            "--array",
            "0-1",
            "--dependency",
            "afterany:1",
            "--estimate",
            "1s",
            "-d",
            "1h",
            "-b",
            "5",
            "--",
            "true",
        ],
    );
    assert!(
        !out.status.success() && text(&out).contains("--dependency: an array cannot wait"),
        "{}",
        text(&out)
    );
    bob.cancel(x.id).unwrap();
}

#[test]
fn a_whole_array_or_one_task_can_be_waited_on() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let c = cl.user("eve", 1000);
    let token = token_of(&cl, "eve");
    let out = run(
        &cl,
        &token,
        &[
            "submit",
            "--json",
            "--array",
            "0-2",
            "--estimate",
            "2s",
            "-d",
            "2m",
            "-b",
            "5",
            "--",
            "sh",
            "-c",
            "sleep 1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let arr: libra_api::ArrayResponse = serde_json::from_slice(&out.stdout).unwrap();
    let id = arr.array_id.unwrap();
    let (whole, out) = submit(
        &cl,
        &token,
        &["--dependency", &format!("afterok:{id}"), "--estimate", "1s", "-d", "3m", "-b", "5", "--", "true"],
    );
    assert!(out.status.success() && whole.waiting, "{}", text(&out));
    let (one, out) = submit(
        &cl,
        &token,
        &[
            "--dependency",
            &format!("afterany:{id}_1"),
            "--estimate",
            "1s",
            "-d",
            "3m",
            "-b",
            "5",
            "--",
            "true",
        ],
    );
    assert!(out.status.success() && one.waiting, "{}", text(&out));
    assert_eq!(one.dependencies, vec![Dependency { kind: DepKind::AfterAny, job: id, task: Some(1) }]);
    let tasks: Vec<JobInfo> = arr.tasks.iter().map(|t| wait_done(&c, t.id)).collect();
    let whole = wait_done(&c, whole.id);
    let one = wait_done(&c, one.id);
    assert_eq!((whole.state, one.state), (JobState::Completed, JobState::Completed));
    let last_end = tasks.iter().filter_map(|t| t.end_time).fold(0.0, f64::max);
    assert!(whole.start_time.unwrap() >= last_end, "started before the last task ended: {whole:?} {tasks:?}");
    assert!(one.start_time.unwrap() >= tasks[1].end_time.unwrap(), "{one:?} {:?}", tasks[1]);
}

#[test]
fn a_job_waiting_when_the_server_is_killed_starts_after_its_dependency_once_it_is_back() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 1.0, 30.0);
    let c = cl.user("fay", 1000);
    let a = c.submit(&sh(10.0, 120.0, 20, "sleep 8")).unwrap();
    let b = c
        .submit(&SubmitRequest { dependencies: after(DepKind::AfterOk, a.id), ..sh(1.0, 180.0, 5, "true") })
        .unwrap();
    assert!(b.waiting && b.state == JobState::Pending, "{b:?}");
    wait_running(&c, a.id);
    cl.kill_server();
    cl.start_server();
    let c = {
        let anon = cl.anon();
        anon.with_token(Some(anon.login("fay", "pw-fay").unwrap().token))
    };
    // Back from a SIGKILL: B still waits on A, and is not started while A runs.
    let kept = c.job(b.id).unwrap();
    assert_eq!(kept.dependencies, after(DepKind::AfterOk, a.id), "{kept:?}");
    assert!(kept.waiting && kept.state == JobState::Pending, "{kept:?}");
    assert!(!job_pids(&cl, a.id).is_empty(), "A should still be running after the restart");
    assert!(c.job(b.id).unwrap().start_time.is_none());
    let b = wait_done(&c, b.id);
    let a = c.job(a.id).unwrap();
    assert_eq!(a.state, JobState::Completed, "{a:?}");
    assert_eq!(b.state, JobState::Completed, "{b:?}");
    assert!(b.start_time.unwrap() >= a.end_time.unwrap(), "{a:?} {b:?}");
}
