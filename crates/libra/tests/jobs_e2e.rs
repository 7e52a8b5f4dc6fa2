//! End-to-end: a job runs as a Slurm user expects, on a real cluster: in the directory it was
//! submitted from, with the submitter's environment (never the agent's) and Libra's variables,
//! its output in `libra-%j.out` (or the `-o`/`-e` patterns) and readable while it runs, stopped
//! at its time limit; and a retried submission never makes a second job.

mod common;

use common::*;
use libra_api::{Client, JobState, SubmitRequest};
use libra_core::{JobSpec, Money};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `libra` run from `dir` with a clean environment plus `env`.
fn libra_in(
    cl: &Cluster,
    token: &str,
    dir: &std::path::Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    Command::new(EXE)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", token)
        .env("LIBRA_CONFIG_DIR", cl.dir.join("config"))
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn job_id(out: &std::process::Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["id"].as_u64().unwrap()
}

#[test]
fn a_job_runs_where_it_was_submitted_with_the_submitters_environment_and_its_output_files() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // The node agents run with this test's environment (CARGO_* and more): none of it may
    // reach a job.
    let cl = Cluster::start(2, 0.5, 30.0);
    let c = cl.user("sam", 100);
    let token = token_of(&cl, "sam");
    let proj = cl.dir.join("project");
    std::fs::create_dir_all(&proj).unwrap();
    let sim = proj.join("simulate");
    std::fs::write(
        &sim,
        "#!/bin/sh\necho \"pwd=$(pwd)\"\necho \"foo=$FOO\"\necho \"job=$LIBRA_JOB_ID node=$LIBRA_NODE rank=$LIBRA_PROCID of $LIBRA_NNODES\"\n\
         echo \"submit=$LIBRA_SUBMIT_DIR deadline=$LIBRA_DEADLINE name=$LIBRA_JOB_NAME\"\nenv | grep -c '^CARGO' || true\necho oops >&2\n",
    )
    .unwrap();
    std::fs::set_permissions(&sim, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The README's own example: a relative program, run in the submit directory.
    let out = libra_in(
        &cl,
        &token,
        &proj,
        &[("FOO", "bar")],
        &["submit", "--json", "--estimate", "1s", "-d", "1m", "-b", "10", "--", "./simulate", "--steps", "3"],
    );
    let id = job_id(&out);
    let j = wait_done(&c, id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    let file = std::fs::read_to_string(proj.join(format!("libra-{id}.out"))).unwrap();
    assert!(file.contains(&format!("pwd={}", proj.display())), "{file}");
    assert!(file.contains("foo=bar"), "{file}");
    assert!(file.contains(&format!("job={id} node={} rank=0 of 1", j.nodes[0])), "{file}");
    assert!(
        file.contains(&format!("submit={} deadline={:.0} name=simulate", proj.display(), j.deadline_at)),
        "{file}"
    );
    assert!(file.contains("\n0\n"), "the agent's CARGO_* variables reached the job: {file}");
    assert!(file.contains("oops"), "stderr goes to the same file by default: {file}");
    let mode = std::fs::metadata(proj.join(format!("libra-{id}.out"))).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // `libra output` shows the same.
    let shown = c.output(id).unwrap();
    assert_eq!(shown.stdout, file);
    // The job had the submitter's environment when it was launched (foo=bar above); now that
    // it has ended, the server keeps none of it (it may hold the submitter's secrets).
    let env: Option<String> = rusqlite::Connection::open(&cl.db)
        .unwrap()
        .query_row("SELECT env FROM jobs WHERE id = ?1", [id as i64], |r| r.get(0))
        .unwrap();
    assert_eq!(env, None, "job {id}'s environment is still stored after it ended");

    // --export=NONE: only Libra's variables and a minimal PATH; -o/-e patterns; a two-node job
    // writes one file per rank with %t.
    let out = libra_in(
        &cl,
        &token,
        &proj,
        &[("FOO", "bar")],
        &[
            "submit",
            "--json",
            "--estimate",
            "1s",
            "-d",
            "1m",
            "-b",
            "10",
            "-n",
            "2",
            "--export=NONE",
            "-o",
            "out-%j-%t.txt",
            "-e",
            "err-%x-%N.txt",
            "-J",
            "two",
            "--",
            "./simulate",
        ],
    );
    let id = job_id(&out);
    let j = wait_done(&c, id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    for (rank, node) in j.nodes.iter().enumerate() {
        let o = std::fs::read_to_string(proj.join(format!("out-{id}-{rank}.txt"))).unwrap();
        assert!(o.contains("foo=\n") && o.contains(&format!("rank={rank} of 2")), "{o}");
        let e = std::fs::read_to_string(proj.join(format!("err-two-{node}.txt"))).unwrap();
        assert_eq!(e, "oops\n");
    }
    let shown = c.output(id).unwrap();
    assert_eq!(shown.parts.len(), 2);
    assert!(shown.parts[1].stdout.contains("rank=1 of 2"), "{shown:?}");
    // Once the server has how a job ended, its nodes remove their directories for it: a node's
    // work directory does not grow with every job it ever ran.
    for node in &j.nodes {
        let record = cl.dir.join(node).join(format!("job-{id}"));
        wait_until("the job's directory removed on its node", || (!record.exists()).then_some(()));
    }
    // So does a job given no working directory (an API client's), which ran in a scratch
    // directory there: what it printed stays readable from the server.
    let req = SubmitRequest::new(
        JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo from-scratch; echo kept > left.txt; ln -s /etc/passwd link".into(),
        ],
    );
    let j = wait_done(&c, c.submit(&req).unwrap().id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    let record = cl.dir.join(&j.nodes[0]).join(format!("job-{}", j.id));
    wait_until("the scratch job's directory removed", || (!record.exists()).then_some(()));
    // Moved aside at once, then removed whole: nothing of it stays in the node's directory.
    let aside = || {
        std::fs::read_dir(cl.dir.join(&j.nodes[0]))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".removing-"))
            .count()
    };
    wait_until("the directories moved aside removed", || (aside() == 0).then_some(()));
    assert!(std::path::Path::new("/etc/passwd").exists());
    assert_eq!(c.output(j.id).unwrap().stdout, "from-scratch\n");

    // --chdir, and a directory the node does not have: failed, with the reason, never run
    // somewhere else.
    let sub = proj.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let out = libra_in(
        &cl,
        &token,
        &proj,
        &[],
        &["submit", "--json", "--estimate", "1s", "-d", "1m", "-b", "10", "-D", "sub", "--", "pwd"],
    );
    let id = job_id(&out);
    wait_done(&c, id);
    assert_eq!(
        std::fs::read_to_string(sub.join(format!("libra-{id}.out"))).unwrap().trim(),
        sub.display().to_string()
    );
    let mut req =
        SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(10)), vec!["true".into()]);
    req.workdir = Some("/nonexistent/libra-e2e".into());
    let j = wait_done(&c, c.submit(&req).unwrap().id);
    assert_eq!(j.state, JobState::Failed, "{j:?}");
    let why = j.reason.unwrap_or_default();
    assert!(why.contains("/nonexistent/libra-e2e") && why.contains("does not exist on node"), "{why}");
    assert_eq!(j.charged, Money::ZERO);
    // The job's own fault (so is a program that does not exist): the node is not drained for it.
    let req = SubmitRequest::new(
        JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
        vec!["/nonexistent/prog".into()],
    );
    assert_eq!(wait_done(&c, c.submit(&req).unwrap().id).state, JobState::Failed);
    let nodes = cl.admin().nodes().unwrap();
    assert!(nodes.iter().all(|n| !n.drained), "{nodes:?}");
}

#[test]
fn output_can_be_read_and_followed_while_the_job_runs_and_a_time_limit_stops_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 0.5, 30.0);
    let c = cl.user("tia", 100);
    let token = token_of(&cl, "tia");
    let dir = cl.dir.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    let script = "for i in 1 2 3 4 5 6; do echo line-$i; sleep 0.5; done";
    let out = libra_in(
        &cl,
        &token,
        &dir,
        &[],
        &["submit", "--json", "--estimate", "1s", "-d", "1m", "-b", "10", "--", "sh", "-c", script],
    );
    let id = job_id(&out);
    // Read while it runs.
    let seen = wait_until("output of the running job", || {
        let o = c.output(id).ok()?;
        (o.state == JobState::Running && o.stdout.contains("line-2")).then_some(o)
    });
    assert!(!seen.stdout.contains("line-6"), "{seen:?}");
    // Followed to the end: every line once, in order, and the command returns when the job ends.
    let mut follow = Command::new(EXE)
        .args(["output", "--follow", &id.to_string()])
        .env("LIBRA_SERVER", &cl.url)
        .env("LIBRA_TOKEN", &token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while follow.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "libra output --follow did not return");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut text = String::new();
    follow.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    let expected: String = (1..=6).map(|i| format!("line-{i}\n")).collect();
    assert_eq!(text, expected);

    // A time limit: stopped (TIMEOUT) long before its deadline, paying for what it used.
    let out = libra_in(
        &cl,
        &token,
        &dir,
        &[],
        &[
            "submit",
            "--json",
            "--estimate",
            "2s",
            "-d",
            "5m",
            "-b",
            "10",
            "--time-limit",
            "2s",
            "--",
            "sleep",
            "60",
        ],
    );
    let id = job_id(&out);
    let t0 = Instant::now();
    let j = wait_done(&c, id);
    assert_eq!(j.state, JobState::Timeout, "{j:?}");
    assert!(t0.elapsed() < Duration::from_secs(15), "stopped after {:?}", t0.elapsed());
    assert!(j.charged <= j.cost, "{j:?}");
    let b = c.balance().unwrap();
    assert_eq!(b.held, Money::ZERO);
}

#[test]
fn the_same_idempotency_key_never_makes_a_second_job() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 0.5, 30.0);
    let c = cl.user("uma", 100);
    let req = SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(10)), vec!["true".into()]);
    let a = c.submit_with_key(&req, "retry-1").unwrap();
    let b = c.submit_with_key(&req, "retry-1").unwrap();
    assert_eq!(a.id, b.id);
    assert_eq!(c.jobs(false).unwrap().len(), 1);
    let err = c.submit_with_key(&req, &"k".repeat(500)).unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
}

/// `libra admin credit` whose answer is lost on the way (the server made the credit) tries again
/// with the same idempotency key and is answered, not credited again; through the API, the same
/// key credits once, and the same key for another amount is refused, naming the header.
#[test]
fn the_same_idempotency_key_never_credits_twice() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 0.5, 30.0);
    let c = cl.user("wes", 100);
    let deposits = || c.ledger().unwrap().iter().filter(|e| e.kind == libra_api::LedgerKind::Deposit).count();
    assert_eq!(deposits(), 1);

    let proxy = FaultyProxy::losing(cl.port, b"POST /api/admin/credit ");
    let admin_t = cl.anon().login("admin", ADMIN_PW).unwrap().token;
    let o = libra_output_via(&cl, &proxy.url, &admin_t, &["admin", "credit", "wes", "50"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert!(proxy.done(), "the proxy lost no answer");
    assert!(said.contains("trying again"), "{said}");
    assert_eq!(c.balance().unwrap().available, Money::from_credits(150), "credited once");
    assert_eq!(deposits(), 2);

    let admin = cl.admin();
    admin.credit_with_key("wes", Money::from_credits(5), "credit-1").unwrap();
    let b = admin.credit_with_key("wes", Money::from_credits(5), "credit-1").unwrap();
    assert_eq!(b.available, Money::from_credits(155));
    assert_eq!(deposits(), 3);
    let e = admin.credit_with_key("wes", Money::from_credits(7), "credit-1").unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    assert!(e.to_string().contains("Idempotency-Key"), "{e}");
    assert_eq!(c.balance().unwrap().available, Money::from_credits(155));
}

/// Live processes with `LIBRA_JOB_ID=id` in their environment and a working directory under
/// `dir` (a job's processes, escaped or not, in the cluster of `dir`).
fn processes_of_job(id: u64, dir: &std::path::Path) -> Vec<i32> {
    let want = format!("LIBRA_JOB_ID={id}");
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        // This cluster's: a job of the same id left by another run (a test run killed midway
        // leaves its keepers) is not this one.
        if !std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir)) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(true);
        if !zombie && env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_job_ends_as_a_whole_with_the_processes_that_escaped_its_session() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 0.5, 30.0);
    let mech = cl.admin().nodes().unwrap()[0].mechanism.clone();
    let c = cl.user("vic", 100);
    let escape = "setsid sh -c 'exec sleep 600' </dev/null >/dev/null 2>&1 & sleep 0.5; echo left-behind";
    let mut req = SubmitRequest::new(
        JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
        vec!["sh".into(), "-c".into(), escape.into()],
    );
    req.workdir = Some(cl.dir.display().to_string());
    let id = c.submit(&req).unwrap().id;
    wait_until("the escapee to start", || (!processes_of_job(id, &cl.dir).is_empty()).then_some(()));
    // The job's lock (`libra.lock`) is held by its keeper alone: the keeper hands nothing of it
    // to the job, nor the job to what it leaves behind.
    let holds_lock = |pid: i32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.ends_with("libra.lock")))
    };
    let is_keeper = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"job-keeper"))
    };
    let procs = processes_of_job(id, &cl.dir);
    assert!(
        procs.iter().any(|&p| is_keeper(p) && holds_lock(p)),
        "no keeper holds the job's lock: {procs:?}"
    );
    for p in procs.into_iter().filter(|&p| !is_keeper(p)) {
        assert!(!holds_lock(p), "process {p} of the job holds its lock");
    }
    let j = wait_done(&c, id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    if !mech.starts_with("cgroup") {
        eprintln!("no control groups here ({mech}): a setsid escapee cannot be found, not tested");
        return;
    }
    wait_until("the escapee to be killed with its job", || {
        processes_of_job(id, &cl.dir).is_empty().then_some(())
    });
    let node = libra_node::group_name(&j.nodes[0], &cl.dir.join(&j.nodes[0]));
    let group = std::path::Path::new("/sys/fs/cgroup/cpu/libra").join(&node).join(format!("job-{id}"));
    let v2 = std::path::Path::new("/sys/fs/cgroup/libra").join(&node).join(format!("job-{id}"));
    wait_until("the job's group to be removed", || (!group.exists() && !v2.exists()).then_some(()));
}

/// The attack on the bill: a job whose own process sleeps while a process it put in a session
/// of its own (`setsid`), and left to init, does the work. Counting by the job's session and
/// its keeper's rusage saw the sleeper alone and charged nothing; the job's control group holds the escapee too, and its count is the
/// job's CPU (cgroup v2's `cpu.stat`, v1's `cpuacct`, in a hierarchy of its own where it is not
/// mounted with `cpu`).
#[test]
fn the_cpu_a_job_hides_in_a_process_outside_its_session_is_charged() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let mech = cl.admin().nodes().unwrap()[0].mechanism.clone();
    if !mech.starts_with("cgroup") {
        eprintln!("no control groups here ({mech}): a setsid escapee's CPU cannot be counted, not tested");
        return;
    }
    let c = cl.user("wes", 1000);
    // In a subshell that leaves at once, so that the burner is nobody's child in the job: its
    // CPU is in no rusage the keeper reaps either.
    let hide = format!("(setsid {} burn --cpu-seconds 2 </dev/null >/dev/null 2>&1 &); sleep 4", EXE);
    let mut req = SubmitRequest::new(
        JobSpec::simple(5.0, 120.0, Money::from_credits(100)),
        vec!["sh".into(), "-c".into(), hide],
    );
    req.workdir = Some(cl.dir.display().to_string());
    let j = c.submit(&req).unwrap();
    assert_eq!(j.state, JobState::Pending, "{j:?}");
    let done = wait_done(&c, j.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert!(done.cpu_seconds >= 1.8, "the escapee's 2 CPU-s were not counted: {done:?}");
    assert!(done.charged > Money::ZERO && done.charged <= done.budget, "{done:?}");
}

#[test]
fn a_job_may_use_several_cpus_of_a_node_when_it_asks_for_them() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if cores < 2 {
        eprintln!("one core here: a node of two CPUs cannot be started, not tested");
        return;
    }
    let cl = Cluster::start(1, 2.0, 30.0);
    let c = cl.user("wes", 1000);
    let token = token_of(&cl, "wes");
    // 3 CPU-seconds by a 2-second deadline need 1.5 CPUs: more than one CPU, refused unless the
    // job may use two at once.
    let args = ["submit", "--json", "--estimate", "3s", "-d", "2s", "-b", "100"];
    let burn = format!("'{EXE}' burn --cpu-seconds 1.4 & '{EXE}' burn --cpu-seconds 1.4; wait");
    let refused = libra_in(&cl, &token, &cl.dir, &[], &[&args[..], &["--", "sh", "-c", &burn]].concat());
    assert!(!refused.status.success(), "a 1.5-CPU job was accepted with one CPU per task");
    let out =
        libra_in(&cl, &token, &cl.dir, &[], &[&args[..], &["-c", "2", "--", "sh", "-c", &burn]].concat());
    let id = job_id(&out);
    let j = c.job(id).unwrap();
    assert_eq!(j.cpus_per_task, 2);
    assert!(j.share > 1.0 && j.share <= 2.0, "{j:?}");
    let j = wait_done(&c, id);
    // On time unless this shared machine is busy; either way both burners ran in it.
    assert!(matches!(j.state, JobState::Completed | JobState::Deadline), "{j:?}");
    assert!(j.cpu_seconds >= 2.5, "two burners ran: {j:?}");
}

/// With `output_keep_days`, the server removes a job's kept output that many days after the job
/// ended (the job's record and its charge stay), and `libra output` says when; newer output is
/// kept. Unset, everything is kept.
#[test]
fn a_jobs_output_is_removed_output_keep_days_after_it_ended() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start(1, 0.5, 30.0);
    let c = cl.user("ola", 100);
    let token = token_of(&cl, "ola");
    let printing = |text: &str| {
        let req = SubmitRequest::new(
            JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
            vec!["/bin/sh".into(), "-c".into(), format!("echo {text}")],
        );
        let j = wait_done(&c, c.submit(&req).unwrap().id);
        assert_eq!(c.output(j.id).unwrap().stdout, format!("{text}\n"));
        j
    };
    let (old, new) = (printing("from-long-ago"), printing("from-today"));
    // The first job ended 40 days ago, as far as the store knows.
    cl.kill_server();
    {
        let db = rusqlite::Connection::open(cl.dir.join("server.db")).unwrap();
        db.execute("UPDATE jobs SET end_time = end_time - 40 * 86400 WHERE id = ?1", [old.id as i64])
            .unwrap();
    }
    std::fs::write(cl.dir.join("server.toml"), "[server]\noutput_keep_days = 30\n").unwrap();
    cl.start_server();
    let c = Client::new(&cl.url, Some(Client::new(&cl.url, None).login("ola", "pw-ola").unwrap().token));
    let gone = wait_until("the old output removed", || c.output(old.id).ok().filter(|o| o.removed.is_some()));
    assert_eq!((gone.stdout.as_str(), gone.parts[0].stdout.as_str()), ("", ""), "{gone:?}");
    assert_eq!(c.output(new.id).unwrap().stdout, "from-today\n");
    // The record and what was charged stay.
    let j = c.job(old.id).unwrap();
    assert_eq!((j.state, j.charged), (JobState::Completed, old.charged));
    let out = libra_in(&cl, &token, &cl.dir, &[], &["output", &old.id.to_string()]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("removed this job's output") && said.contains("output_keep_days"), "{said}");
}

/// A user whose jobs print without end cannot fill the server's store for everyone: past
/// `output_quota_mb` the output of that user's jobs that ended first goes first (the record and
/// the charge stay, and `libra output` says why), what they just printed is kept, and another
/// user's output is untouched.
#[test]
fn a_users_kept_output_is_held_to_the_quota_and_no_one_elses_goes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start_configured(30.0, "[server]\noutput_quota_mb = 1\n");
    cl.start_node("n1", 1.0);
    let alice = cl.user("alice", 100);
    let mallory = cl.user("mallory", 100);
    let token = token_of(&cl, "mallory");
    let run = |c: &Client, script: &str| {
        let req = SubmitRequest::new(
            JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
            vec!["/bin/sh".into(), "-c".into(), script.into()],
        );
        wait_done(c, c.submit(&req).unwrap().id)
    };
    let kept = run(&alice, "echo alice-keeps-this");
    // 600 KiB each: two of them are more than the quota.
    let flood = "head -c 614400 /dev/zero | tr '\\0' x";
    let floods: Vec<_> = (0..3).map(|_| run(&mallory, flood)).collect();
    let bytes_of = |user: &str| -> i64 {
        let db = rusqlite::Connection::open(&cl.db).unwrap();
        db.query_row("SELECT output_bytes FROM users WHERE name = ?1", [user], |r| r.get(0)).unwrap()
    };
    // The newest flood is kept whole; the two before it went, oldest first, for the quota.
    let newest = mallory.output(floods[2].id).unwrap();
    assert_eq!((newest.stdout.len(), newest.removed), (614_400, None));
    for f in &floods[..2] {
        let o = mallory.output(f.id).unwrap();
        // (Lengths, not the text: a failure would print 600 KiB.)
        assert_eq!((o.stdout.len(), o.removed_for.as_deref()), (0, Some("output_quota_mb")), "job {}", f.id);
        let j = mallory.job(f.id).unwrap();
        assert_eq!((j.state, j.charged), (JobState::Completed, f.charged));
    }
    assert!(bytes_of("mallory") <= 1 << 20, "mallory keeps {} bytes", bytes_of("mallory"));
    assert_eq!(bytes_of("mallory"), 614_400);
    // Alice's output stays, and so does her count.
    assert_eq!(alice.output(kept.id).unwrap().stdout, "alice-keeps-this\n");
    assert_eq!(bytes_of("alice"), "alice-keeps-this\n".len() as i64);
    let out = libra_in(&cl, &token, &cl.dir, &[], &["output", &floods[0].id.to_string()]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("removed this job's output") && said.contains("output_quota_mb"), "{said}");
}

/// The longest argument a program can be given (Linux's MAX_ARG_STRLEN less its NUL) reaches
/// the job's program on a real node; one byte more is refused at submission, naming the argument,
/// rather than accepted to fail on the node (execve's E2BIG).
#[test]
fn the_longest_argument_a_program_takes_runs_and_a_longer_one_is_refused_at_submission() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let alice = cl.user("alice", 100);
    let with = |n: usize| {
        SubmitRequest::new(
            JobSpec::simple(1.0, 60.0, Money::from_credits(10)),
            vec![
                "/bin/sh".into(),
                "-c".into(),
                "printf %s \"$1\" | wc -c".into(),
                "sh".into(),
                "x".repeat(n),
            ],
        )
    };
    let j = wait_done(&alice, alice.submit(&with(libra_api::MAX_ARG_BYTES)).unwrap().id);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert_eq!(alice.output(j.id).unwrap().stdout.trim(), libra_api::MAX_ARG_BYTES.to_string());
    let e = match alice.submit(&with(libra_api::MAX_ARG_BYTES + 1)) {
        Ok(j) => panic!("accepted as job {}, to fail on its node", j.id),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("argument 4") && e.contains("131071"), "{e}");
}

/// A user who submits long commands (a job script is its text) cannot fill the server's store
/// for everyone: past `command_quota_mb` the commands of that user's jobs that ended first are
/// cut to their first KiB (the record and the charge stay, and `libra status` says when), the
/// store's pages in use grow by about the quota, not by what was sent, the newest command and
/// every active one stay whole, and another user's commands are untouched.
#[test]
fn a_users_kept_commands_are_held_to_the_quota_and_no_one_elses_are_cut() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut cl = Cluster::start_configured(30.0, "[server]\ncommand_quota_mb = 1\n");
    cl.start_node("n1", 1.0);
    let alice = cl.user("alice", 100);
    let mallory = cl.user("mallory", 100);
    let token = token_of(&cl, "mallory");
    // 240 KiB of command in four arguments (the kernel takes at most 128 KiB in one).
    let long = |tag: &str| -> Vec<String> {
        let mut c = vec!["/bin/sh".to_string(), "-c".into(), format!("exit 0 # {tag}")];
        c.extend((0..4).map(|i| format!("{i}{}", "x".repeat(60 * 1024))));
        c
    };
    let run = |c: &Client, command: Vec<String>| {
        let req = SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(10)), command);
        wait_done(c, c.submit(&req).unwrap().id)
    };
    let in_use = || -> i64 {
        let db = rusqlite::Connection::open(&cl.db).unwrap();
        db.query_row(
            "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count, pragma_freelist_count, pragma_page_size",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let kept = run(&alice, long("alice"));
    let before = in_use();
    let floods: Vec<_> = (0..16).map(|i| run(&mallory, long(&format!("flood {i}")))).collect();
    let grown = in_use() - before;
    let sent = 16 * 240 * 1024;
    eprintln!("the store grew by {grown} bytes for {sent} bytes of commands");
    assert!(grown < (1 << 20) + 512 * 1024, "the store grew by {grown} bytes for {sent} bytes of commands");
    // The newest commands are whole (about four fit in a MiB); the first ones were cut, first
    // ended first, and say when; their record and charge stay.
    let newest = mallory.job(floods[15].id).unwrap();
    assert_eq!((newest.command, newest.command_cut), (long("flood 15"), None));
    for f in &floods[..8] {
        let j = mallory.job(f.id).unwrap();
        let stored = serde_json::to_string(&j.command).unwrap().len();
        assert!(
            j.command_cut.is_some() && stored <= 1024,
            "job {}: {stored} bytes, cut {:?}",
            f.id,
            j.command_cut
        );
        assert_eq!(j.command[..3], long(&format!("flood {}", f.id - floods[0].id))[..3]);
        assert_eq!(j.command.last().map(String::as_str), Some("..."));
        assert_eq!((j.state, j.charged), (JobState::Completed, f.charged));
    }
    let cut: Vec<bool> = floods.iter().map(|f| mallory.job(f.id).unwrap().command_cut.is_some()).collect();
    assert!(cut.windows(2).all(|w| w[0] >= w[1]), "not cut first ended first: {cut:?}");
    // Alice's long command stays whole.
    let a = alice.job(kept.id).unwrap();
    assert_eq!((a.command, a.command_cut), (long("alice"), None));
    let out = libra_in(&cl, &token, &cl.dir, &[], &["status", &floods[0].id.to_string()]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("cut to its first KiB") && said.contains("command_quota_mb"), "{said}");
}

/// A job's command, its output pattern and the reasons quoting them are strings of its owner's
/// choosing, and an administrator's `libra status` and `libra queue` print them: an escape
/// sequence in them would retitle that terminal, clear it or rewrite what it shows. They reach
/// it as visible escapes, and so does the job's output on the administrator's terminal;
/// `--json`, `--raw`, the output through a pipe and on its owner's terminal are as they were.
#[test]
fn a_commands_escape_sequences_reach_an_administrators_terminal_as_text() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let mallory = cl.user("mallory", 100);
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{202e}";
    let mut req = SubmitRequest::new(
        JobSpec::simple(5.0, 120.0, Money::from_credits(10)),
        vec!["sh".into(), "-c".into(), format!("printf 'out\\033[0m\\n'; sleep 30 # {hostile}")],
    );
    req.workdir = Some(cl.dir.display().to_string());
    req.stdout = Some(format!("out-{hostile}.txt"));
    let id = mallory.submit(&req).unwrap().id;
    wait_running(&mallory, id);
    let admin = cl.anon().login("admin", ADMIN_PW).unwrap().token;
    let id_s = id.to_string();
    for args in [vec!["status", id_s.as_str()], vec!["queue"]] {
        let (ok, out, err) = libra_run(&cl, &admin, &args);
        assert!(ok, "{args:?}: {err}");
        assert!(
            !out.chars().any(|c| c.is_control() && c != '\n'),
            "{args:?} printed control characters: {out:?}"
        );
        assert!(!out.contains('\u{202e}'), "{args:?}: {out:?}");
        if args[0] == "status" {
            assert!(out.contains("\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{d}\\u{202e}"), "{out}");
        }
    }
    // Programs get the strings themselves, and the job's output is its own, byte for byte.
    let (_, json, _) = libra_run(&cl, &admin, &["status", &id.to_string(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["command"][2].as_str().unwrap().ends_with(hostile), "{v}");
    wait_until("its output", || {
        let (_, out, _) = libra_run(&cl, &admin, &["output", &id.to_string()]);
        (out == "out\u{1b}[0m\n").then_some(())
    });
    // On a terminal (util-linux's `script` makes one), the administrator sees that output as
    // text; with `--raw`, and its owner, the bytes.
    let on_terminal = |token: &str, args: &str| -> String {
        let out = Command::new("script")
            .args(["-q", "-e", "-c", &format!("'{}' {args}", exe().display()), "/dev/null"])
            .current_dir(&cl.dir)
            .env("LIBRA_SERVER", &cl.url)
            .env("LIBRA_TOKEN", token)
            .env("LIBRA_CONFIG_DIR", cl.dir.join("config"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = on_terminal(&admin, &format!("output {id}"));
    assert!(shown.contains("out\\u{1b}[0m") && !shown.contains('\u{1b}'), "{shown:?}");
    let raw = on_terminal(&admin, &format!("output --raw {id}"));
    assert!(raw.contains("out\u{1b}[0m"), "{raw:?}");
    let own = on_terminal(&token_of(&cl, "mallory"), &format!("output {id}"));
    assert!(own.contains("out\u{1b}[0m"), "{own:?}");
    mallory.cancel(id).unwrap();
}
