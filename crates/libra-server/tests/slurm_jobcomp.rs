//! The Slurm completion endpoint over real HTTP: only the Slurm notifier's secret (read from
//! its file at each request) is taken; anyone else, a user's token or the join token included,
//! is refused; a server that does not run its jobs on Slurm takes no records at all.

mod common;

use libra_server::config::{ExecutorConfig, ExecutorKind};
use libra_server::start_background;

fn post(url: &str, token: Option<&str>, body: &serde_json::Value) -> (u16, String) {
    let mut req = ureq::post(url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    match req.send_json(body.clone()) {
        Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn only_the_slurm_notifiers_secret_may_report_a_jobs_end() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("jobcomp.token");
    std::fs::write(&secret, "the-notifier-secret\n").unwrap();
    let config = libra_server::Config {
        executor: ExecutorConfig {
            kind: ExecutorKind::Slurm,
            jobcomp_token_file: Some(secret.clone()),
            ..ExecutorConfig::default()
        },
        ..common::test_config(dir.path())
    };
    let server = start_background(config).unwrap();
    let url = format!("http://{}/api/slurm/jobcomp", server.addr);
    let record = serde_json::json!({"job_id": 5, "job_state": 3, "exit_code": 0, "start": 1.0, "end": 2.0, "comment": "libra job=1"});
    let admin = libra_api::Client::new(&format!("http://{}", server.addr), None)
        .login("admin", "admin-pw")
        .unwrap()
        .token;
    for (who, token) in [
        ("nobody", None),
        ("a wrong secret", Some("guess")),
        ("the administrator", Some(admin.as_str())),
        ("the join token", Some("join-token-for-tests")),
    ] {
        let (status, body) = post(&url, token, &record);
        assert_eq!(status, 401, "{who}: {body}");
    }
    // The secret: taken (a Slurm job Libra does not know changes nothing).
    let (status, body) = post(&url, Some("the-notifier-secret"), &record);
    assert_eq!(status, 200, "{body}");
    let ack: libra_api::SlurmJobCompAck = serde_json::from_str(&body).unwrap();
    assert_eq!((ack.job, ack.settled), (None, false));
    // A new secret in the file takes effect at once; the old one is refused.
    std::fs::write(&secret, "a-new-secret\n").unwrap();
    assert_eq!(post(&url, Some("the-notifier-secret"), &record).0, 401);
    assert_eq!(post(&url, Some("a-new-secret"), &record).0, 200);
    // A malformed record is refused by name.
    let (status, body) = post(&url, Some("a-new-secret"), &serde_json::json!({"job_state": 3}));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("job_id"), "{body}");
    drop(server);

    // A server whose agents launch the jobs takes no records.
    let dir = tempfile::tempdir().unwrap();
    let server = start_background(common::test_config(dir.path())).unwrap();
    let (status, body) = post(&format!("http://{}/api/slurm/jobcomp", server.addr), Some("x"), &record);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("kind = \\\"slurm\\\"") || body.contains("slurm"), "{body}");
}
