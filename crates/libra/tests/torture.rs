//! The torture test's short form, in every CI run: submitters, jobs finishing all the time, the
//! server and the node agents killed with SIGKILL at random over and over, then every invariant
//! checked (`libra bench torture`; its long form's figures are in README.md).

use std::process::Command;

#[test]
fn the_cluster_survives_random_sigkills_with_every_invariant_intact() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_libra"))
        .args(["bench", "torture", "--duration", "25s", "--kill-every", "1.5", "--submitters", "6", "--json"])
        .arg("--state")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    eprintln!("{r}");
    assert_eq!(r["violations"], serde_json::json!([]), "{r}");
    assert!(out.status.success(), "{stderr}");
    let kills = r["server_kills"].as_u64().unwrap() + r["node_kills"].as_u64().unwrap();
    assert!(kills >= 5, "only {kills} kills: {r}");
    assert!(r["accepted"].as_u64().unwrap() >= 20, "{r}");
    assert_eq!(r["integrity_checks"], r["server_kills"]);
    // The hosted sweep went through the kills: no job of it ran twice, and it spent exactly what
    // the cluster charged (both checked as invariants above; here, that it ran at all).
    let sweep = &r["sweep"];
    assert!(sweep.is_object(), "no hosted sweep ran: {r}");
    assert!(sweep["job_runs"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(sweep["spent_cents"], sweep["cluster_charged_cents"], "{r}");
}
