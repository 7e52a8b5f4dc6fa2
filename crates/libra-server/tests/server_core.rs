//! The server's core apart from its I/O, against a real server over HTTP: a request that waits
//! for the state (its writer held, here by the test) does not stall the async workers, so
//! `/api/health` and reads still answer; reads come from a WAL read connection and answer while
//! the writer holds a write transaction; a store failure reaches the client as a generic 500
//! with a request id, its detail only in the server's log.

mod common;

use libra_api::{Client, UserAdd};
use libra_core::Money;
use libra_server::start_background;
use std::time::{Duration, Instant};

/// A raw GET with a short timeout: Ok(status, body), or Err when nothing came back in time.
fn get(url: &str, token: Option<&str>, within: Duration) -> Result<(u16, String), String> {
    let agent = ureq::AgentBuilder::new().timeout(within).build();
    let mut r = agent.get(url);
    if let Some(t) = token {
        r = r.set("Authorization", &format!("Bearer {t}"));
    }
    match r.call() {
        Ok(resp) => Ok((resp.status(), resp.into_string().unwrap_or_default())),
        Err(ureq::Error::Status(s, resp)) => Ok((s, resp.into_string().unwrap_or_default())),
        Err(e) => Err(e.to_string()),
    }
}

/// A logged-in user with credit, and their token.
fn user(url: &str, admin: &Client, name: &str) -> String {
    admin.user_add(&UserAdd::new(name, &format!("pw-{name}"), false)).unwrap();
    admin.credit(name, Money::from_credits(100)).unwrap();
    Client::new(url, None).login(name, &format!("pw-{name}")).unwrap().token
}

#[test]
fn a_held_writer_stalls_neither_health_nor_another_users_reads() {
    let dir = tempfile::tempdir().unwrap();
    let bg = start_background(common::test_config(dir.path())).unwrap();
    let url = format!("http://{}", bg.addr);
    let admin_token = Client::new(&url, None).login("admin", "admin-pw").unwrap().token;
    let admin = Client::new(&url, Some(admin_token));
    let alice = user(&url, &admin, "alice");
    let bob = user(&url, &admin, "bob");

    // The writer is held (as a long admission batch or a slow fsync would hold it), and more
    // requests that need it arrive than the runtime has async workers (two).
    let held = bg.app.lock();
    let waiting: Vec<_> = (0..4)
        .map(|_| {
            let (url, t) = (url.clone(), alice.clone());
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
                agent
                    .post(&format!("{url}/api/quote"))
                    .set("Authorization", &format!("Bearer {t}"))
                    .send_json(libra_api::QuoteRequest {
                        spec: libra_server::app::spec_of(10.0, 100.0, Money::from_credits(10), 1, 0, 1),
                    })
                    .map(|r| r.status())
                    .or_else(|e| match e {
                        ureq::Error::Status(s, _) => Ok(s),
                        e => Err(e.to_string()),
                    })
            })
        })
        .collect();
    // Give them time to reach the server and wait for the writer (no answer can come while it
    // is held, so this only makes the test stricter, never flaky).
    std::thread::sleep(Duration::from_millis(300));

    let t = Instant::now();
    let health = get(&format!("{url}/api/health"), None, Duration::from_secs(5));
    assert_eq!(health, Ok((200, "ok".into())), "health while the writer is held");
    let balance = get(&format!("{url}/api/balance"), Some(&bob), Duration::from_secs(5));
    let (status, body) = balance.expect("bob's balance while the writer is held");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"bob\""), "{body}");
    let jobs = get(&format!("{url}/api/jobs"), Some(&bob), Duration::from_secs(5));
    assert_eq!(jobs.map(|(s, _)| s), Ok(200), "bob's job list while the writer is held");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // The writer's requests were waiting, not lost: they finish once it is free.
    drop(held);
    for w in waiting {
        assert_eq!(w.join().unwrap(), Ok(200));
    }
}

#[test]
fn reads_are_answered_while_the_writer_holds_a_write_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let bg = start_background(common::test_config(dir.path())).unwrap();
    let url = format!("http://{}", bg.addr);
    let admin_token = Client::new(&url, None).login("admin", "admin-pw").unwrap().token;
    let admin = Client::new(&url, Some(admin_token.clone()));
    let carol = user(&url, &admin, "carol");

    // The writer connection itself is in the middle of a write transaction (a change not yet
    // committed), as it is during every admission batch until its fsync returns.
    let held = bg.app.lock();
    held.db.execute_batch("BEGIN IMMEDIATE").unwrap();
    held.db.execute("UPDATE users SET unix_user = 'uncommitted' WHERE name = 'carol'", []).unwrap();

    let t = Instant::now();
    let paths = ["/api/balance", "/api/jobs", "/api/ledger", "/api/history", "/api/queue", "/api/accounts"];
    for path in paths {
        let (status, body) = get(&format!("{url}{path}"), Some(&carol), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{path} while the writer holds a transaction: {e}"));
        assert_eq!(status, 200, "{path}: {body}");
    }
    // Reads see the last committed state, not the writer's uncommitted change.
    let (status, body) =
        get(&format!("{url}/api/admin/users"), Some(&admin_token), Duration::from_secs(5)).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"unix_user\":\"carol\"") && !body.contains("uncommitted"), "{body}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    held.db.execute_batch("ROLLBACK").unwrap();
    drop(held);
}
