//! Many clients submitting at once through the HTTP API of a real server (group commit): every
//! submission gets its own answer, no more is promised than the node has, and every hold in the
//! ledger belongs to an accepted job.

mod common;

use libra_api::{Client, JobState, RegisterRequest, SubmitRequest, UserAdd};
use libra_core::{JobSpec, Money};
use libra_server::start_background;

#[test]
fn concurrent_submissions_are_each_answered_and_never_over_promise() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_background(common::test_config(dir.path())).unwrap();
    let url = format!("http://{}", server.addr);
    let anon = Client::new(&url, None);
    let admin = Client::new(&url, Some(anon.login("admin", "admin-pw").unwrap().token));
    Client::new(&url, Some("join-token-for-tests".into()))
        .register(&RegisterRequest {
            name: "n1".into(),
            cpus: 1.0,
            mem_mb: 0,
            mechanism: "none".into(),
            account: String::new(),
            switches_users: false,
        })
        .unwrap();
    admin.user_add(&UserAdd::new("u", "pw-u", false)).unwrap();
    admin.credit("u", Money::from_credits(100_000)).unwrap();
    let token = anon.login("u", "pw-u").unwrap().token;
    // Each job needs a tenth of the node: at most ten can be promised.
    let answers: Vec<libra_api::JobInfo> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let c = Client::new(&url, Some(token.clone()));
                s.spawn(move || {
                    (0..25)
                        .map(|_| {
                            c.submit(&SubmitRequest {
                                name: None,
                                ..SubmitRequest::new(
                                    JobSpec::simple(10.0, 100.0, Money::from_credits(1000)),
                                    vec!["true".into()],
                                )
                            })
                            .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(answers.len(), 200);
    let mut ids: Vec<u64> = answers.iter().map(|j| j.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "every submission is its own job");
    let accepted: Vec<_> = answers.iter().filter(|j| j.state == JobState::Pending).collect();
    assert!((1..=10).contains(&accepted.len()), "{} accepted", accepted.len());
    let node = admin.nodes().unwrap().into_iter().next().unwrap();
    assert!(node.load <= node.cpus + 1e-6, "promised {} of {}", node.load, node.cpus);
    let held: Money = accepted.iter().map(|j| j.cost).fold(Money::ZERO, |a, b| a + b);
    let u = Client::new(&url, Some(token));
    assert_eq!(u.balance().unwrap().held, held);
    assert_eq!(u.jobs(false).unwrap().len(), 200);
}
