//! End-to-end, on a real Slurm cluster (scripts/slurm-cluster.sh, through tests/common/slurm.rs):
//! a parameter sweep on a `slurm` resource runs every job as a Slurm batch job, collects the
//! results and pays for the CPU the jobs used at the resource's rate, like a local resource;
//! and a cancelled sweep scancels its Slurm jobs.

mod common;

use common::slurm::{SlurmCluster, SlurmKnobs};
use common::wait_until;
use libra_broker::store::Store;
use libra_core::Money;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_libra");

const RES: &str = r#"
[[resource]]
name = "hpc"
kind = "slurm"
slots = 6
price = 2
partition = "libra"
cpus_per_job = 1
"#;

fn sweep(db: &Path) -> Command {
    let mut c = Command::new(EXE);
    c.arg("sweep").arg("--db").arg(db).env_remove("LIBRA_BROKER_DB");
    c
}

/// Every file named `name` under `dir`.
fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(find(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
    out
}

fn slurm_ids(dir: &Path) -> BTreeSet<String> {
    find(dir, "libra.slurm").iter().map(|p| std::fs::read_to_string(p).unwrap().trim().to_string()).collect()
}

fn setup(plan: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.pln"), plan).unwrap();
    std::fs::write(dir.path().join("res.toml"), RES).unwrap();
    let db = dir.path().join("db").join("broker.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    (dir, db)
}

#[test]
fn a_sweep_runs_on_the_slurm_resource_and_pays_for_the_cpu_its_jobs_used() {
    let Some(slurm) = SlurmCluster::up("sweep_slurm_e2e", SlurmKnobs::default()) else { return };
    // Each job burns a little CPU (so that it costs something) and says which Slurm job ran it.
    let plan = r#"
parameter x integer range from 1 to 6 step 1
task main
    shexec "i=0; while [ $$i -lt 200000 ]; do i=$$((i+1)); done; echo result-$x-$$SLURM_JOB_ID > out.txt"
    copy node:out.txt results/out.$x
endtask
"#;
    let (dir, db) = setup(plan);
    let out = sweep(&db)
        .args(["run", "--json", "--optimise", "time", "--max-retries", "0", "--estimate", "2"])
        .args(["--deadline", "1h", "--budget", "100000", "-r"])
        .arg(dir.path().join("res.toml"))
        .arg(dir.path().join("plan.pln"))
        .output()
        .unwrap();
    assert!(out.status.success(), "sweep run: {}", String::from_utf8_lossy(&out.stderr));

    let store = Store::open(&db).unwrap();
    let exp = store.experiments().unwrap().last().unwrap().id;
    assert_eq!(store.experiment(exp).unwrap().state, "done");
    let results = store.results(exp).unwrap();
    assert_eq!(results.len(), 6);
    assert!(results.iter().all(|r| r.state == "done" && r.resource.as_deref() == Some("hpc")), "{results:?}");

    // Every job ran as a Slurm batch job of its own, which completed, and its result came back.
    let ids = slurm_ids(db.parent().unwrap());
    assert_eq!(ids.len(), 6, "one Slurm job per sweep job: {ids:?}");
    let mut seen = BTreeSet::new();
    for x in 1..=6 {
        let text = std::fs::read_to_string(dir.path().join(format!("results/out.{x}"))).unwrap();
        let id = text.trim().strip_prefix(&format!("result-{x}-")).unwrap_or_else(|| panic!("{text}"));
        seen.insert(id.to_string());
    }
    assert_eq!(seen, ids, "each result was written inside the Slurm job the broker recorded");
    for id in &ids {
        let job = slurm.job(id).expect("Slurm still lists the finished job (MinJobAge)");
        assert_eq!(job.get("JobState").map(String::as_str), Some("COMPLETED"), "{job:?}");
        assert_eq!(job.get("Partition").map(String::as_str), Some("libra"), "{job:?}");
    }

    // The money: each attempt paid its resource's price for the CPU it used, as a local one.
    let rows: Vec<(f64, f64, i64)> = store
        .conn
        .prepare("SELECT price, cpu, charged_cents FROM attempts WHERE exp_id = ?1")
        .unwrap()
        .query_map([exp], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 6);
    let mut total = Money::ZERO;
    for (price, cpu, charged) in rows {
        assert_eq!(price, 2.0);
        assert!(cpu > 0.0, "the keeper measured the job's CPU under Slurm");
        assert_eq!(Money::from_cents(charged), Money::from_credits_f64_ceil(price * cpu).unwrap());
        total = total + Money::from_cents(charged);
    }
    assert!(total > Money::ZERO);
    assert_eq!(store.spent(exp).unwrap(), total);
    assert!(slurm.queue().is_empty(), "no Slurm job left: {:?}", slurm.queue());
}

#[test]
fn a_cancelled_sweep_scancels_its_slurm_jobs() {
    let Some(slurm) = SlurmCluster::up("sweep_slurm_e2e", SlurmKnobs::default()) else { return };
    // Jobs 1 and 2 busy, the others asleep.
    let plan = "parameter x integer range from 1 to 6 step 1\ntask main\n    shexec \"if test $x -le 2; then touch busy; while :; do :; done; else sleep 120; fi\"\nendtask\n";
    let (dir, db) = setup(plan);

    // First, a partition this cluster does not have: named at once, no job submitted.
    std::fs::write(dir.path().join("bad.toml"), RES.replace("\"libra\"", "\"nosuch\"")).unwrap();
    let bad = sweep(&db)
        .args(["run", "--max-retries", "0", "--estimate", "1", "--deadline", "1h", "--budget", "100", "-r"])
        .arg(dir.path().join("bad.toml"))
        .arg(dir.path().join("plan.pln"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        err.contains("partition 'nosuch' is not a partition of this Slurm cluster (sinfo lists: libra)"),
        "{err}"
    );
    assert!(slurm.queue().is_empty());

    let created = sweep(&db)
        .args(["run", "--detach", "--optimise", "time", "--max-retries", "0", "--estimate", "200"])
        .args(["--deadline", "2h", "--budget", "100000", "-r"])
        .arg(dir.path().join("res.toml"))
        .arg(dir.path().join("plan.pln"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let exp = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    let root = db.parent().unwrap().to_path_buf();
    // Every job submitted and running under Slurm.
    let ids = wait_until("six Slurm jobs running", || {
        let ids = slurm_ids(&root);
        let running = ids
            .iter()
            .filter(|id| {
                slurm.job(id).is_some_and(|j| j.get("JobState").map(String::as_str) == Some("RUNNING"))
            })
            .count();
        (ids.len() == 6 && running == 6).then_some(ids)
    });
    // The busy jobs spinning (Slurm's RUNNING comes before the job's command starts), long
    // enough to have used some CPU.
    wait_until("the busy jobs spinning", || (find(&root, "busy").len() == 2).then_some(()));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let c = sweep(&db).args(["cancel", &exp]).output().unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    // The engine ends (non-zero: the sweep did not finish) once it has stopped the jobs.
    let status = engine.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    wait_until("squeue empty", || slurm.queue().is_empty().then_some(()));
    for id in &ids {
        let job = slurm.job(id).unwrap();
        assert_eq!(job.get("JobState").map(String::as_str), Some("CANCELLED"), "{job:?}");
    }
    let store = Store::open(&db).unwrap();
    assert_eq!(store.experiment(exp.parse().unwrap()).unwrap().state, "cancelled");
    // Each job's keeper recorded how it was stopped and the CPU it used, which the sweep took
    // (the attempts were recorded with no CPU, paid nothing, whatever they had used).
    let rows: Vec<CancelledAttempt> = store
        .conn
        .prepare("SELECT state, message, cpu, price, charged_cents, dir FROM attempts")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(
        rows.iter().all(|(s, m, cpu, ..)| s == "lost" && m.as_deref() == Some("cancelled") && cpu.is_some()),
        "{rows:?}"
    );
    // The busy jobs are paid for the CPU they used, at the resource's price, as local jobs are.
    let (mut spent, mut busy) = (Money::ZERO, 0);
    for (_, _, cpu, price, charged, dir) in &rows {
        let (cpu, charged) = (cpu.unwrap(), Money::from_cents(charged.unwrap_or_default()));
        assert_eq!(Some(charged), Money::from_credits_f64_ceil(price * cpu), "{rows:?}");
        let job = Path::new(dir).file_name().unwrap().to_string_lossy().into_owned();
        if job.starts_with("1-") || job.starts_with("2-") {
            assert!(cpu > 0.5 && charged > Money::ZERO, "busy job {job} spun 1.5 s: {rows:?}");
            busy += 1;
        }
        spent = spent + charged;
    }
    assert_eq!(busy, 2, "{rows:?}");
    assert_eq!(store.spent(exp.parse().unwrap()).unwrap(), spent);
}

/// A cancelled attempt as recorded: state, message, CPU, price, charged (cents), directory.
type CancelledAttempt = (String, Option<String>, Option<f64>, f64, Option<i64>, String);

#[test]
fn a_killed_engine_resumes_watching_its_slurm_jobs_without_submitting_them_again() {
    let Some(slurm) = SlurmCluster::up("sweep_slurm_e2e", SlurmKnobs::default()) else { return };
    let plan = r#"
parameter x integer range from 1 to 6 step 1
task main
    shexec "sleep 4; echo r-$x > out.txt"
    copy node:out.txt results/out.$x
endtask
"#;
    let (dir, db) = setup(plan);
    let created = sweep(&db)
        .args(["run", "--detach", "--optimise", "time", "--max-retries", "0", "--estimate", "5"])
        .args(["--deadline", "1h", "--budget", "100000", "-r"])
        .arg(dir.path().join("res.toml"))
        .arg(dir.path().join("plan.pln"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let exp = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let mut engine = sweep(&db).args(["resume", &exp]).spawn().unwrap();
    let root = db.parent().unwrap().to_path_buf();
    let ids = wait_until("six Slurm jobs submitted", || Some(slurm_ids(&root)).filter(|ids| ids.len() == 6));
    engine.kill().unwrap(); // SIGKILL: the Slurm jobs run on without it
    engine.wait().unwrap();
    assert!(slurm.queue().len() == 6, "the jobs outlive the engine: {:?}", slurm.queue());

    let resumed = sweep(&db).args(["resume", &exp]).output().unwrap();
    assert!(resumed.status.success(), "resume: {}", String::from_utf8_lossy(&resumed.stderr));
    let store = Store::open(&db).unwrap();
    let results = store.results(exp.parse().unwrap()).unwrap();
    assert!(results.iter().all(|r| r.state == "done" && r.attempts == 1), "{results:?}");
    for x in 1..=6 {
        let text = std::fs::read_to_string(dir.path().join(format!("results/out.{x}"))).unwrap();
        assert_eq!(text.trim(), format!("r-{x}"));
    }
    // No job was submitted a second time: Slurm knows exactly the six the first engine made.
    let out = Command::new("squeue").args(["-h", "-t", "all", "-o", "%i"]).output().unwrap();
    let known: BTreeSet<String> =
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect();
    assert_eq!(known, ids);
}
