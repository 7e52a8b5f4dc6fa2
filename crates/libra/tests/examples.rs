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
}
