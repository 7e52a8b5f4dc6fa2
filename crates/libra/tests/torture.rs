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
    if r["violations"] != serde_json::json!([]) {
        // CI's machine is gone after the run: what the logs say of each job named is printed.
        let kept = dir.keep();
        panic!("{r}\n{}\nstate kept in {}", log_lines_of_named_jobs(&r, &kept.join("state")), kept.display());
    }
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

/// The log lines (server and node agents, colour codes stripped) about each job a violation
/// names by number, in the order of each file.
fn log_lines_of_named_jobs(r: &serde_json::Value, state: &std::path::Path) -> String {
    let ids: Vec<String> = r["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .filter_map(|v| v.split(|c: char| !c.is_ascii_digit()).find(|t| !t.is_empty()).map(str::to_string))
        .collect();
    let mut out = String::new();
    let Ok(files) = std::fs::read_dir(state) else { return out };
    let mut files: Vec<_> =
        files.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for line in text.lines() {
            let plain = strip_ansi(line);
            let about = ids.iter().any(|id| {
                plain
                    .match_indices(&format!("job={id}"))
                    .any(|(at, m)| !plain[at + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
            });
            if about {
                out.push_str(&format!("{}: {plain}\n", f.file_name().unwrap_or_default().to_string_lossy()));
            }
        }
    }
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What a failure prints: the lines about the job a violation names (colour codes stripped),
/// not those of a job whose number merely begins the same.
#[test]
fn a_failure_prints_the_log_lines_of_the_jobs_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let log = "\u{1b}[32m INFO\u{1b}[0m started \u{1b}[3mjob\u{1b}[0m\u{1b}[2m=\u{1b}[0m707 pid=1\n\
               \u{1b}[32m INFO\u{1b}[0m started \u{1b}[3mjob\u{1b}[0m\u{1b}[2m=\u{1b}[0m7070 pid=2\n\
               INFO adopted job=707\n";
    std::fs::write(dir.path().join("node-0.log"), log).unwrap();
    std::fs::write(dir.path().join("other.txt"), "job=707").unwrap();
    let r = serde_json::json!({"violations": ["job (id rank) 707 0 started 2 times"]});
    let out = log_lines_of_named_jobs(&r, dir.path());
    assert_eq!(out, "node-0.log:  INFO started job=707 pid=1\nnode-0.log: INFO adopted job=707\n", "{out}");
}
