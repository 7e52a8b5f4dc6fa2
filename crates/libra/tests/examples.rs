//! The examples the README points to stay valid: the plan parses into the jobs it says, the
//! resources file loads, and the sweep runs to completion on them.

use std::path::PathBuf;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_libra");

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweep").join(name)
}

#[test]
fn the_sweep_example_checks_loads_and_runs() {
    let check =
        Command::new(EXE).args(["sweep", "check", "--json"]).arg(example("plan.pln")).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["jobs"], 12, "{v}");
    let res = libra_broker::create::load_resources(&example("resources.toml")).unwrap();
    assert_eq!(res.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let run = Command::new(EXE)
        .args(["sweep", "run", "--json", "--deadline", "10m", "--budget", "5000", "-r"])
        .arg(example("resources.toml"))
        .arg(example("plan.pln"))
        .env("LIBRA_BROKER_DB", dir.path().join("broker.db"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let status = Command::new(EXE)
        .args(["sweep", "status", "1", "--json"])
        .env("LIBRA_BROKER_DB", dir.path().join("broker.db"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["jobs"]["done"], 12, "{v}");
    // Money in JSON is integer cents under `*_cents`: the budget of 5000 credits is 500000.
    assert_eq!(v["budget_cents"], 500_000, "{v}");
    assert!(v["spent_cents"].as_i64().is_some() && v["held_cents"].as_i64().is_some(), "{v}");
    assert!(v["resources"][0]["spent_cents"].as_i64().is_some(), "{v}");
    let sweep = |args: &[&str]| -> serde_json::Value {
        let o = Command::new(EXE)
            .args(args)
            .env("LIBRA_BROKER_DB", dir.path().join("broker.db"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let list = sweep(&["sweep", "status", "--json"]);
    assert_eq!(list["experiments"][0]["budget_cents"], 500_000, "{list}");
    assert_eq!(list["experiments"][0]["spent_cents"], v["spent_cents"], "{list}");
    let set = sweep(&["sweep", "set-budget", "1", "6000", "--json"]);
    assert_eq!(set["budget_cents"], 600_000, "{set}");
    // The plan in virtual time, on a simulated queue of 90 s jobs at 1 credit per CPU-second.
    let queue = dir.path().join("queue.toml");
    std::fs::write(
        &queue,
        "[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nslots = 4\nprice = 1.0\nwall = 90\n",
    )
    .unwrap();
    let plan = example("plan.pln");
    let (plan, queue) = (plan.to_str().unwrap(), queue.to_str().unwrap());
    let sim =
        sweep(&["sweep", "simulate", plan, "-r", queue, "--deadline", "1h", "--budget", "5000", "--json"]);
    assert_eq!(sim["budget_cents"], 500_000, "{sim}");
    assert!(sim["cost_cents"].as_i64().is_some_and(|c| c > 0 && c <= 500_000), "{sim}");
}
