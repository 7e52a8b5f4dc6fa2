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
                    .send_json(libra_api::QuoteRequest::new(libra_server::app::spec_of(
                        10.0,
                        100.0,
                        Money::from_credits(10),
                        1,
                        0,
                        1,
                    )))
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

/// The process's log, kept for the tests to read.
fn log() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static std::sync::Mutex<Vec<u8>>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static std::sync::Mutex<Vec<u8>> = Box::leak(Box::default());
        struct W(&'static std::sync::Mutex<Vec<u8>>);
        impl std::io::Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || W(buf)).finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buf
    })
}

#[test]
fn a_store_failure_is_a_generic_500_with_a_request_id_and_its_detail_only_in_the_log() {
    let log = log();
    let dir = tempfile::tempdir().unwrap();
    let bg = start_background(common::test_config(dir.path())).unwrap();
    let url = format!("http://{}", bg.addr);
    let admin = Client::new(&url, Some(Client::new(&url, None).login("admin", "admin-pw").unwrap().token));
    let dave = user(&url, &admin, "dave");

    // The store breaks under the server: the ledger table is gone (as a damaged or hand-edited
    // store would have it), so reading a balance fails inside SQLite.
    bg.app.lock().db.execute_batch("ALTER TABLE ledger RENAME TO ledger_elsewhere").unwrap();

    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let resp =
        match agent.get(&format!("{url}/api/balance")).set("Authorization", &format!("Bearer {dave}")).call()
        {
            Err(ureq::Error::Status(500, r)) => r,
            other => panic!("expected a 500, got {other:?}"),
        };
    let id = resp.header(libra_server::error::REQUEST_ID).expect("the request id header").to_string();
    let body: libra_api::ErrorBody = resp.into_json().unwrap();
    assert_eq!(id.len(), 16, "{id}");
    assert!(body.error.contains(&format!("request id {id}")), "{}", body.error);
    for leak in ["ledger", "no such table", "SQL", "sqlite", "server.db"] {
        assert!(
            !body.error.to_lowercase().contains(&leak.to_lowercase()),
            "the body names '{leak}': {}",
            body.error
        );
    }
    // The detail is in the server's log, under the same id.
    let logged = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let line =
        logged.lines().find(|l| l.contains(&id)).unwrap_or_else(|| panic!("no log line for {id}:\n{logged}"));
    assert!(line.contains("no such table: ledger"), "{line}");

    // Another failure, another id.
    let again =
        agent.get(&format!("{url}/api/balance")).set("Authorization", &format!("Bearer {dave}")).call();
    let Err(ureq::Error::Status(500, r)) = again else { panic!("expected a 500") };
    assert_ne!(r.header(libra_server::error::REQUEST_ID), Some(id.as_str()));
}

/// SQL lives in the store (`src/store/`) and the ledger (`src/ledger.rs`) only: every other
/// module calls their named functions. Test code (`#[cfg(test)]` and `tests.rs`) may set up
/// rows by hand.
#[test]
fn sql_is_only_in_the_store_and_the_ledger() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if rel != "store" && rel != "ledger" {
                    dirs.push(path);
                }
                continue;
            }
            if rel == "ledger.rs" || rel.ends_with("tests.rs") || !rel.ends_with(".rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (i, line) in code.lines().enumerate() {
                let statement =
                    ["SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "CREATE TABLE", "ALTER TABLE"]
                        .iter()
                        .any(|k| line.contains(k));
                let call = [".execute(", ".prepare(", ".prepare_cached(", ".query_row(", ".execute_batch("]
                    .iter()
                    .any(|k| line.contains(k));
                if (statement && line.contains('"')) || call {
                    offenders.push(format!("src/{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "SQL outside the store and the ledger:\n{}", offenders.join("\n"));
}

/// Every error of the API is JSON with an `error` field, malformed paths and query strings too
/// (axum's own rejections are plain text): a client reads one shape.
#[test]
fn a_malformed_path_or_query_is_a_json_400_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let bg = start_background(common::test_config(dir.path())).unwrap();
    let url = format!("http://{}", bg.addr);
    let admin_token = Client::new(&url, None).login("admin", "admin-pw").unwrap().token;
    let admin = Client::new(&url, Some(admin_token.clone()));
    let alice = user(&url, &admin, "alice");
    for (path, token, says) in [
        ("/api/jobs/abc", &alice, "`abc`"),
        ("/api/jobs/-1/output", &alice, "`-1`"),
        ("/api/arrays/99999999999999999999999", &alice, "99999999999999999999999"),
        ("/api/sweeps/x", &alice, "`x`"),
        ("/api/jobs?limit=-4", &alice, "limit"),
        ("/api/admin/users?limit=many", &admin_token, "limit"),
    ] {
        let (status, body) = get(&format!("{url}{path}"), Some(token), Duration::from_secs(30)).unwrap();
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
        let error = v["error"].as_str().unwrap_or_else(|| panic!("{path}: {body}"));
        assert!(error.contains(says), "{path}: {error}");
    }
}
