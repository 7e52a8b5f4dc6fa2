//! End-to-end: job arrays on a real cluster (`libra submit --array`): every task runs with its
//! array's variables and output files; an array with one task the cluster cannot take is
//! refused whole, leaving no job and no hold, with a suggestion that takes it all; `cancel ID`
//! cancels every task, `ID_TASK` one; bad specs are refused naming `--array`.

mod common;

use common::libra_output as run;
use common::*;
use libra_api::{ArrayRequest, ArrayResponse, JobInfo, JobState};
use libra_core::{JobSpec, Money};
use std::process::Output;

fn array_answer(out: &Output) -> ArrayResponse {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

#[test]
fn an_array_runs_every_task_with_its_ids_and_is_addressed_by_id_and_task() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(2, 1.0, 30.0);
    let c = cl.user("ada", 100);
    let token = token_of(&cl, "ada");
    let out = run(
        &cl,
        &token,
        &[
            "submit",
            "--json",
            "--array",
            "0-6:2",
            "--estimate",
            "1s",
            "-d",
            "2m",
            "-b",
            "5",
            "-o",
            "arr-%A_%a.out",
            "--",
            "sh",
            "-c",
            "echo array=$LIBRA_ARRAY_JOB_ID task=$LIBRA_ARRAY_TASK_ID job=$LIBRA_JOB_ID",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = array_answer(&out);
    assert!(a.accepted && a.refused.is_empty(), "{a:?}");
    let array = a.array_id.unwrap();
    assert_eq!(a.tasks.len(), 4);
    assert_eq!(array, a.tasks[0].id, "the array's id is its first task's job id");
    let tasks: Vec<u32> = a.tasks.iter().map(|j| j.array_task.unwrap()).collect();
    assert_eq!(tasks, vec![0, 2, 4, 6]);
    for j in &a.tasks {
        // Each task was admitted as a submission is: nodes, a share, a cost held within budget.
        assert_eq!(j.state, JobState::Pending, "{j:?}");
        assert!(!j.nodes.is_empty() && j.share > 0.0 && j.cost > Money::ZERO && j.cost <= j.budget, "{j:?}");
        assert_eq!(j.array_id, Some(array));
    }
    for j in &a.tasks {
        let t = j.array_task.unwrap();
        let done = wait_done(&c, j.id);
        assert_eq!(done.state, JobState::Completed, "{done:?}");
        let file = std::fs::read_to_string(cl.dir.join(format!("arr-{array}_{t}.out"))).unwrap();
        assert_eq!(file.trim(), format!("array={array} task={t} job={}", j.id));
    }

    // ID_TASK is one task; ID the whole array.
    let one = run(&cl, &token, &["status", "--json", &format!("{array}_4")]);
    let one: JobInfo = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!((one.id, one.array_task), (a.tasks[2].id, Some(4)));
    let all = run(&cl, &token, &["status", "--json", &array.to_string()]);
    let all: Vec<JobInfo> = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(
        all.iter().map(|j| j.id).collect::<Vec<_>>(),
        a.tasks.iter().map(|j| j.id).collect::<Vec<_>>()
    );
    let missing = run(&cl, &token, &["status", &format!("{array}_5")]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains(&format!("array {array} has no task 5")));
    // `libra output ID_TASK` is that task's output; an array alone names no one output.
    let shown = libra(&cl, &token, &["output", &format!("{array}_6")]);
    assert_eq!(shown.trim(), format!("array={array} task=6 job={}", a.tasks[3].id));
    let whole = run(&cl, &token, &["output", &array.to_string()]);
    assert!(!whole.status.success() && String::from_utf8_lossy(&whole.stderr).contains("is an array"));
    // History shows tasks as ID_TASK.
    let history = libra(&cl, &token, &["history", "--format", "jobid,state", "--parsable"]);
    for t in [0, 2, 4, 6] {
        assert!(history.contains(&format!("{array}_{t}|COMPLETED")), "{history}");
    }
}

#[test]
fn an_array_with_one_task_too_many_is_refused_whole_with_a_suggestion_for_all() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // One CPU: two tasks of 20 CPU-s fit in 50 s, the third does not.
    let cl = Cluster::start(1, 1.0, 30.0);
    let c = cl.user("bob", 1000);
    let token = token_of(&cl, "bob");
    let out = run(
        &cl,
        &token,
        &["submit", "--json", "--array", "0-2", "--estimate", "20s", "-d", "50s", "-b", "100", "--", "true"],
    );
    assert!(!out.status.success(), "a refused array is a failed submission");
    let a = array_answer(&out);
    assert!(!a.accepted && a.array_id.is_none() && a.tasks.is_empty(), "{a:?}");
    assert!(a.refused.iter().any(|r| r.task == 2 && r.reason.contains("deadline")), "{a:?}");
    assert!(a.refused.iter().all(|r| r.task != 0), "task 0 fits: {a:?}");
    // Nothing was kept: no job, no hold, the whole credit available.
    assert!(c.jobs(false).unwrap().is_empty(), "{:?}", c.jobs(false).unwrap());
    let b = c.balance().unwrap();
    assert_eq!((b.held, b.available), (Money::ZERO, Money::from_credits(1000)), "{b:?}");
    // The suggestion takes every task, as the array's own admission decides.
    let s = a.suggestion.expect("a suggestion");
    assert!(s.deadline > 50.0, "{s:?}");
    let text = run(
        &cl,
        &token,
        &["submit", "--array", "0-2", "--estimate", "20s", "-d", "50s", "-b", "100", "--", "true"],
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("array REFUSED: 1 of 3 tasks") && text.contains("per task"), "{text}");
    assert!(
        text.contains("--array 0-2") && text.contains("--deadline"),
        "the suggestion repeats the command: {text}"
    );
    let retry = ArrayRequest {
        array: "0-2".into(),
        job: libra_api::SubmitRequest::new(JobSpec::simple(20.0, s.deadline, s.budget), vec!["true".into()]),
    };
    let again = c.submit_array(&retry).unwrap();
    assert!(again.accepted && again.tasks.len() == 3, "{again:?}");
}

#[test]
fn cancel_id_cancels_every_task_and_id_task_one() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let c = cl.user("cy", 100);
    let token = token_of(&cl, "cy");
    let req = ArrayRequest {
        array: "1,3,5".into(),
        job: libra_api::SubmitRequest::new(
            JobSpec::simple(10.0, 600.0, Money::from_credits(50)),
            vec!["sleep".into(), "120".into()],
        ),
    };
    let a = c.submit_array_with_key(&req, "array-try-1").unwrap();
    assert!(a.accepted, "{a:?}");
    let array = a.array_id.unwrap();
    // A retry with the same key (the first answer lost) gets the same array, not a second one.
    let retried = c.submit_array_with_key(&req, "array-try-1").unwrap();
    assert_eq!(retried.array_id, Some(array));
    assert_eq!(c.jobs(false).unwrap().len(), 3);
    for j in &a.tasks {
        wait_running(&c, j.id);
    }
    let queue = libra(&cl, &token, &["queue"]);
    for t in [1, 3, 5] {
        assert!(queue.contains(&format!("{array}_{t}")), "{queue}");
    }
    let one = libra(&cl, &token, &["cancel", &format!("{array}_3")]);
    assert!(one.contains(&format!("job {array}_3 CANCELLED")), "{one}");
    let tasks = c.array(array).unwrap();
    // A task that ran is told that the CPU to its kill comes on the bill later.
    let ran = tasks[1].start_time.is_some();
    assert_eq!(ran, one.contains("until its node stops it is added when the node reports it"), "{one}");
    let states: Vec<JobState> = tasks.iter().map(|j| j.state).collect();
    assert_eq!(states, vec![JobState::Running, JobState::Cancelled, JobState::Running]);
    // Several at once, as scancel takes them: a task, a job that does not exist, and the array
    // (its unfinished task). The missing one is named and fails the command; the rest are done.
    let out = run(&cl, &token, &["cancel", &format!("{array}_1"), "999999", &array.to_string()]);
    let (all, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{all}{err}");
    assert!(err.contains("999999: job 999999 does not exist") && err.contains("1 of 3 could not"), "{err}");
    assert!(
        all.contains(&format!("job {array}_1 CANCELLED"))
            && all.contains(&format!("job {array}_5 CANCELLED")),
        "{all}"
    );
    for j in c.array(array).unwrap() {
        assert_eq!(j.state, JobState::Cancelled, "{j:?}");
        assert!(j.charged <= j.cost, "settled by the cancellation rule: {j:?}");
    }
    wait_until("the holds released", || (c.balance().ok()?.held == Money::ZERO).then_some(()));
    // The processes are gone.
    wait_until("the tasks' processes to end", || {
        a.tasks.iter().all(|j| job_pids(&cl, j.id).is_empty()).then_some(())
    });
    let again = run(&cl, &token, &["cancel", &array.to_string()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to cancel"));
    // One task, named by its label, is named back so.
    let task = &a.tasks[0];
    let again = run(&cl, &token, &["cancel", &format!("{array}_1")]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "{said}");
    assert!(said.contains(&format!("job {array}_1 (job {}) is already CANCELLED", task.id)), "{said}");
}

#[test]
fn bad_array_specs_are_refused_naming_the_flag() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let c = cl.user("dee", 100);
    let token = token_of(&cl, "dee");
    for (spec, why) in
        [("", "empty"), ("9-3", "reversed"), ("0-10000", "more than 10000"), ("1,x", "not a task id")]
    {
        let out = run(
            &cl,
            &token,
            &["submit", "--array", spec, "--estimate", "1s", "-d", "1m", "-b", "1", "--", "true"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--array") && err.contains(why), "{spec}: {err}");
        assert!(err.contains("0-99:2"), "says what is accepted: {err}");
    }
    // The server checks too (a client that skips the check), and refuses a %N limit it cannot
    // promise.
    let job = libra_api::SubmitRequest::new(
        JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
        vec!["true".into()],
    );
    for (spec, why) in [("5-1", "reversed"), ("0-3%2", "not supported")] {
        let e =
            c.submit_array(&ArrayRequest { array: spec.into(), job: job.clone() }).unwrap_err().to_string();
        assert!(e.contains("--array") && e.contains(why), "{spec}: {e}");
    }
    assert!(c.jobs(false).unwrap().is_empty());
    // A limit that covers every task promises nothing more and is accepted.
    let ok = c.submit_array(&ArrayRequest { array: "0-1%2".into(), job }).unwrap();
    assert!(ok.accepted && ok.tasks.len() == 2, "{ok:?}");
}
