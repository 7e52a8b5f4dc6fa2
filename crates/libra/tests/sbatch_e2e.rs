//! End-to-end, on a real cluster: `libra sbatch` takes a Slurm batch script as it is. Its
//! `#SBATCH` lines are honoured (name, CPUs, time limit, output pattern, working directory: seen
//! by the running job and in its output file), the command line wins over the script, an option
//! Libra cannot honour is refused by name with no job made, and a missing deadline or budget is
//! refused naming both.

mod common;

use common::libra_run as run;
use common::*;
use libra_api::JobInfo;

const SCRIPT: &str = "#!/bin/bash
# a Slurm user's script, unchanged but for the #LIBRA line
#SBATCH --job-name=simjob
#SBATCH -c 2 -t 2
#SBATCH -o out-%x-%j.txt
#SBATCH --chdir=work
#SBATCH --partition=batch
#LIBRA --estimate 2s
set -u
declare -A seen=([id]=$SLURM_JOB_ID)
echo \"name=$LIBRA_JOB_NAME cpus=$LIBRA_CPUS_PER_TASK pwd=$(pwd) arg=$1 id=$LIBRA_JOB_ID\"
echo \"slurm: ${seen[id]} $SLURM_JOB_NAME $SLURM_CPUS_PER_TASK $SLURM_SUBMIT_DIR $SLURM_NNODES\"
";

#[test]
fn sbatch_lines_are_honoured_and_the_command_line_wins_over_them() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 2.0, 30.0);
    let alice = cl.user("alice", 1000);
    let tok = token_of(&cl, "alice");
    std::fs::create_dir_all(cl.dir.join("work")).unwrap();
    std::fs::write(cl.dir.join("job.sh"), SCRIPT).unwrap();

    // The script's lines alone (plus the deadline and budget Libra needs); --json answers the job.
    let (ok, out, err) =
        run(&cl, &tok, &["sbatch", "--deadline", "1h", "--budget", "20", "--json", "job.sh", "first"]);
    assert!(ok, "{err}");
    assert!(err.contains("warning: --partition=batch ignored"), "{err}");
    let job: JobInfo = serde_json::from_str(&out).unwrap();
    assert_eq!(job.name.as_deref(), Some("simjob"));
    assert_eq!(job.cpus_per_task, 2);
    assert_eq!(job.time_limit, Some(120.0), "#SBATCH -t 2 is two minutes");
    assert_eq!(job.estimate, 2.0, "#LIBRA --estimate over the time limit");
    let done = wait_done(&alice, job.id);
    assert_eq!(done.exit_code, Some(0), "{done:?}");
    let work = cl.dir.join("work").canonicalize().unwrap();
    let file = work.join(format!("out-simjob-{}.txt", job.id));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    // Libra's submit directory is where the job runs (`--chdir` here), as LIBRA_SUBMIT_DIR.
    let submit_dir = &work;
    assert_eq!(
        text.trim(),
        format!(
            "name=simjob cpus=2 pwd={} arg=first id={}\nslurm: {} simjob 2 {} 1",
            work.display(),
            job.id,
            job.id,
            submit_dir.display()
        ),
        "the running job saw the script's name, CPUs, directory and argument, run by bash (an \
         associative array), and Slurm's variables for them"
    );

    // The command line over the script: another name, output file and directory, no estimate
    // (the time limit, now 1:30 from the command line, is used and said so).
    let script =
        "#!/bin/sh\n#SBATCH -J fromscript -o script-%j.out -t 5\necho \"name=$LIBRA_JOB_NAME pwd=$(pwd)\"\n";
    std::fs::write(cl.dir.join("job2.sh"), script).unwrap();
    let (ok, out, err) = run(
        &cl,
        &tok,
        &[
            "sbatch",
            "-J",
            "fromcli",
            "-o",
            "cli-%j.out",
            "-t",
            "1:30",
            "-D",
            ".",
            "--deadline",
            "1h",
            "--budget",
            "200",
            "--parsable",
            "job2.sh",
        ],
    );
    assert!(ok, "{err}");
    assert!(err.contains("the time limit (90s) is used as the runtime estimate"), "{err}");
    let id: u64 = out.trim().parse().unwrap_or_else(|_| panic!("--parsable prints only the id: {out:?}"));
    let job = alice.job(id).unwrap();
    assert_eq!((job.name.as_deref(), job.time_limit, job.estimate), (Some("fromcli"), Some(90.0), 90.0));
    wait_done(&alice, id);
    let dir = cl.dir.canonicalize().unwrap();
    let text = std::fs::read_to_string(dir.join(format!("cli-{id}.out"))).unwrap();
    assert_eq!(text.trim(), format!("name=fromcli pwd={}", dir.display()));
    assert!(!dir.join(format!("script-{id}.out")).exists());

    // A rejection under --parsable: nothing on standard output (what a script captures), the
    // reason on standard error, exit status 1.
    let (ok, out, err) =
        run(&cl, &tok, &["sbatch", "--deadline", "1h", "--budget", "0.01", "--parsable", "job2.sh"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("REJECTED"), "{err}");

    // A rejection's suggestion repeats the user's own sbatch line.
    let (ok, out, _) =
        run(&cl, &tok, &["sbatch", "-J", "again", "--deadline", "1h", "--budget", "0.01", "job2.sh"]);
    assert!(!ok && out.contains("REJECTED"), "{out}");
    assert!(out.contains("libra sbatch -J again --deadline ") && out.contains(" job2.sh"), "{out}");

    // The human answer: the decision, the node, the price.
    let (ok, out, err) = run(&cl, &tok, &["sbatch", "--deadline", "1h", "--budget", "500", "job2.sh"]);
    assert!(ok, "{err}");
    assert!(out.contains("accepted on") && out.contains("on hold"), "{out}");
}

#[test]
fn an_sbatch_array_runs_every_task_with_its_own_output_file() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 2.0, 30.0);
    let alice = cl.user("alice", 1000);
    let tok = token_of(&cl, "alice");
    let script = "#!/bin/sh\n#SBATCH --array=0-2 -o arr-%A_%a.out -t 1\n#LIBRA --estimate 1s\necho task=$LIBRA_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID\n";
    std::fs::write(cl.dir.join("arr.sh"), script).unwrap();
    let (ok, out, err) =
        run(&cl, &tok, &["sbatch", "--deadline", "1h", "--budget", "20", "--parsable", "arr.sh"]);
    assert!(ok, "{err}");
    let array: u64 = out.trim().parse().unwrap_or_else(|_| panic!("--parsable prints the array id: {out:?}"));
    let jobs = alice.jobs(false).unwrap();
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let dir = cl.dir.canonicalize().unwrap();
    for j in jobs {
        assert_eq!(j.array_id, Some(array));
        let task = j.array_task.unwrap();
        wait_done(&alice, j.id);
        let text = std::fs::read_to_string(dir.join(format!("arr-{array}_{task}.out"))).unwrap();
        assert_eq!(text.trim(), format!("task={task} of {array}"));
    }
}

#[test]
fn options_libra_cannot_honour_and_a_missing_deadline_or_budget_are_refused_by_name() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 1.0, 30.0);
    let alice = cl.user("alice", 1000);
    let tok = token_of(&cl, "alice");
    std::fs::write(cl.dir.join("gpu.sh"), "#!/bin/sh\n#SBATCH -J g\n#SBATCH --gres=gpu:1\nhostname\n")
        .unwrap();
    let (ok, _, err) = run(&cl, &tok, &["sbatch", "--deadline", "1h", "--budget", "5", "gpu.sh"]);
    assert!(!ok);
    assert!(err.contains("gpu.sh:3: #SBATCH --gres: not an sbatch option Libra honours"), "{err}");
    assert!(err.contains("CPUs only"), "{err}");

    std::fs::write(cl.dir.join("ok.sh"), "#!/bin/sh\n#SBATCH -t 1\nhostname\n").unwrap();
    // Libra's dependencies take sbatch's syntax; a type Libra does not have is named.
    let (ok, _, err) = run(
        &cl,
        &tok,
        &["sbatch", "--dependency=afternotok:1", "--deadline", "1h", "--budget", "5", "ok.sh"],
    );
    assert!(!ok);
    assert!(err.contains("dependency") && err.contains("afterok"), "{err}");
    let (ok, _, err) =
        run(&cl, &tok, &["sbatch", "--begin=now+1h", "--deadline", "1h", "--budget", "5", "ok.sh"]);
    assert!(!ok);
    assert!(err.contains("--begin: not an sbatch option Libra honours"), "{err}");

    let (ok, _, err) = run(&cl, &tok, &["sbatch", "ok.sh"]);
    assert!(!ok);
    assert!(err.contains("--deadline and --budget:"), "{err}");
    let (ok, _, err) = run(&cl, &tok, &["sbatch", "--deadline", "1h", "ok.sh"]);
    assert!(!ok);
    assert!(err.contains("--budget:") && !err.contains("--deadline and"), "{err}");

    // Nothing was submitted by any of these.
    assert!(alice.jobs(false).unwrap().is_empty(), "a refused sbatch made a job");
    assert_eq!(alice.balance().unwrap().held, libra_core::Money::ZERO);
}
