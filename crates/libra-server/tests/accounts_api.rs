//! Accounts against a real server over HTTP: tokens expire, logout and a password change
//! revoke tokens at once (the server's token cache included), disabled and removed users are
//! locked out and their jobs cancelled with their holds released, administrator changes are
//! all or nothing, the store is bounded (sizes, rates, active jobs), listings are paginated,
//! and the audit log records administrator actions and refusals and cannot be changed.

use libra_api::{
    Client, ClientError, JobState, QuoteRequest, SetPricing, SubmitRequest, UpdateRequest, UserAdd,
};
use libra_core::{JobSpec, Money};
use libra_server::Config;
use libra_testkit::{wait_until, TestServer};

fn server(tweak: impl FnOnce(&mut Config)) -> TestServer {
    TestServer::start_with(tweak)
}

fn refused(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Status { status, message } => (status, message),
        e => panic!("not an HTTP refusal: {e}"),
    }
}

fn job(estimate: f64) -> SubmitRequest {
    SubmitRequest::new(JobSpec::simple(estimate, 3600.0, Money::from_credits(100)), vec!["true".into()])
}

#[test]
fn tokens_expire_and_logout_and_password_changes_revoke_them_at_once() {
    let s = server(|c| c.token_ttl = 2.0);
    let alice = s.user("alice", 10);
    // Used once, so the server has it in its token cache: expiry must still be honoured.
    alice.balance().unwrap();
    let (code, msg) = refused(wait_until("the token to expire", || alice.balance().err()));
    assert!(code == 401 && msg.contains("expired") && msg.contains("libra login"), "{code} {msg}");

    // Logout: the token stops working on the next request, cached or not.
    s.admin().user_add(&UserAdd::new("bob", "pw-bob", false)).unwrap();
    let bob = s.login("bob", "pw-bob");
    bob.balance().unwrap();
    bob.logout().unwrap();
    let (code, msg) = refused(bob.balance().unwrap_err());
    assert!(code == 401 && msg.contains("not valid"), "{code} {msg}");
}

#[test]
fn a_password_change_needs_the_old_one_and_revokes_the_other_tokens() {
    let s = server(|_| {});
    let here = s.user("carol", 10);
    let elsewhere = s.login("carol", "pw-carol");
    elsewhere.balance().unwrap();
    let (code, msg) = refused(here.passwd("wrong", "new-pw").unwrap_err());
    assert!(code == 403 && msg.contains("old_password"), "{code} {msg}");
    let (code, msg) = refused(here.passwd("pw-carol", "x").unwrap_err());
    assert!(code == 400 && msg.contains("new_password"), "{code} {msg}");
    // Refused changes changed nothing: the old password still logs in.
    s.login("carol", "pw-carol");
    let r = here.passwd("pw-carol", "new-pw").unwrap();
    assert_eq!(r.revoked_tokens, 2, "{r:?}"); // `elsewhere` and the login just above
    here.balance().unwrap();
    assert_eq!(refused(elsewhere.balance().unwrap_err()).0, 401);
    assert_eq!(refused(Client::new(&s.url, None).login("carol", "pw-carol").unwrap_err()).0, 401);
    s.login("carol", "new-pw").balance().unwrap();
}

#[test]
fn disabled_and_removed_users_are_locked_out_and_their_jobs_cancelled_with_holds_released() {
    let s = server(|_| {});
    s.idle_node("n1", 4.0);
    let admin = s.admin();
    let dave = s.user("dave", 500);
    let jobs: Vec<u64> = (0..2).map(|_| dave.submit(&job(10.0)).unwrap()).map(|j| j.id).collect();
    let before = dave.balance().unwrap();
    assert!(before.held > Money::ZERO, "{before:?}");
    dave.balance().unwrap(); // cached

    let r = admin.user_action("dave", "disable").unwrap();
    assert_eq!((r.state.as_str(), r.cancelled_jobs.clone()), ("disabled", jobs.clone()), "{r:?}");
    // Its tokens are revoked (enabling the account again does not bring them back).
    let (code, msg) = refused(dave.balance().unwrap_err());
    assert!(code == 401 && msg.contains("not valid"), "{code} {msg}");
    let (code, msg) = refused(Client::new(&s.url, None).login("dave", "pw-dave").unwrap_err());
    assert!(code == 401 && msg.contains("disabled"), "{code} {msg}");
    for id in &jobs {
        let j = admin.job(*id).unwrap();
        assert_eq!(j.state, JobState::Cancelled, "{j:?}");
        assert_eq!(j.charged, Money::ZERO, "{j:?}");
    }
    // Every hold was released: nothing held, everything deposited is available again.
    let (held, available): (i64, i64) = s
        .db()
        .query_row(
            "SELECT hold_total - charge_total - release_total, dep_total - charge_total - (hold_total - charge_total - release_total) \
             FROM ledger WHERE user_id = (SELECT id FROM users WHERE name = 'dave') ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((held, available), (0, Money::from_credits(500).cents()));

    admin.user_action("dave", "enable").unwrap();
    let dave = s.login("dave", "pw-dave");
    assert_eq!(dave.balance().unwrap().held, Money::ZERO);

    let r = admin.user_action("dave", "remove").unwrap();
    assert_eq!(r.state, "removed");
    assert_eq!(refused(dave.balance().unwrap_err()).0, 401);
    assert_eq!(refused(Client::new(&s.url, None).login("dave", "pw-dave").unwrap_err()).0, 401);
    assert_eq!(refused(admin.user_action("dave", "enable").unwrap_err()).0, 409);
    // The history stays: the jobs and the ledger entries are still there.
    let entries: i64 = s
        .db()
        .query_row(
            "SELECT COUNT(*) FROM ledger WHERE user_id = (SELECT id FROM users WHERE name = 'dave')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(entries >= 5, "{entries} ledger entries"); // deposit, 2 holds, 2 releases
    assert_eq!(admin.jobs(true).unwrap().iter().filter(|j| j.user == "dave").count(), 2);
    let users = admin.users().unwrap();
    assert_eq!(users.iter().find(|u| u.name == "dave").map(|u| u.state.as_str()), Some("removed"));
    // An administrator cannot lock themselves out.
    assert_eq!(refused(admin.user_action("admin", "disable").unwrap_err()).0, 400);
}

#[test]
fn a_refused_pricing_change_changes_nothing() {
    let s = server(|_| {});
    s.idle_node("n1", 4.0);
    let admin = s.admin();
    let before = admin.pricing().unwrap();
    let bad: SetPricing =
        serde_json::from_value(serde_json::json!({"alpha": 3.0, "price_base": -1.0})).unwrap();
    let (code, msg) = refused(admin.set_pricing(&bad).unwrap_err());
    assert!(code == 400 && msg.contains("price_base"), "{code} {msg}");
    let bad: SetPricing =
        serde_json::from_value(serde_json::json!({"alpha": 3.0, "node": "nope", "price_base": 2.0})).unwrap();
    assert_eq!(refused(admin.set_pricing(&bad).unwrap_err()).0, 404);
    let after = admin.pricing().unwrap();
    assert_eq!(after.params.alpha, before.params.alpha, "a refused change moved alpha");
    assert_eq!(after.nodes[0].price_base, before.nodes[0].price_base);
    // The store too (a restart reads it).
    let stored: Option<String> =
        s.db().query_row("SELECT value FROM settings WHERE key = 'pricing'", [], |r| r.get(0)).ok();
    assert!(stored.is_none_or(|p| !p.contains("\"alpha\":3")), "a refused alpha was stored");
    // A valid change is taken whole.
    let good: SetPricing =
        serde_json::from_value(serde_json::json!({"alpha": 3.0, "price_base": 2.0})).unwrap();
    let after = admin.set_pricing(&good).unwrap();
    assert_eq!((after.params.alpha, after.nodes[0].price_base), (3.0, 2.0));
}

/// The size of the store's files (the database and its write-ahead log).
fn store_bytes(s: &TestServer) -> u64 {
    ["server.db", "server.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(s.dir.path().join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn oversized_submissions_are_refused_without_growing_the_store_and_refusals_are_kept_small() {
    let s = server(|_| {});
    s.idle_node("n1", 4.0);
    let eve = s.user("eve", 100);
    eve.submit(&job(1.0)).unwrap();
    let size = store_bytes(&s);
    // A 2 MB name: refused (413, the limit named) before anything is stored.
    for _ in 0..5 {
        let big = SubmitRequest { name: Some("x".repeat(2 << 20)), ..job(1.0) };
        let (code, msg) = refused(eve.submit(&big).unwrap_err());
        assert!(code == 413 && msg.contains(&(2 << 20).to_string()) && msg.contains("bytes"), "{code} {msg}");
    }
    // A name within the body limit but over the name's own: 400 naming it.
    let long = SubmitRequest { name: Some("x".repeat(300_000)), ..job(1.0) };
    let (code, msg) = refused(eve.submit(&long).unwrap_err());
    assert!(code == 400 && msg.starts_with("name") && msg.contains("256"), "{code} {msg}");
    // An argument, or a variable, longer than a program can be given (it could never start):
    // 400 naming it and the limit.
    let arg = SubmitRequest::new(job(1.0).spec, vec!["sh".into(), "x".repeat(libra_api::MAX_ARG_BYTES + 1)]);
    let (code, msg) = refused(eve.submit(&arg).unwrap_err());
    assert!(
        code == 400 && msg.starts_with("command: argument 1 ('xxx") && msg.contains("131071"),
        "{code} {msg}"
    );
    let mut var = job(1.0);
    var.env = Some([("BIG".to_string(), "y".repeat(libra_api::MAX_ARG_BYTES))].into());
    let (code, msg) = refused(eve.submit(&var).unwrap_err());
    assert!(
        code == 400 && msg.starts_with("env: BIG is 131075 bytes") && msg.contains("131071"),
        "{code} {msg}"
    );
    let jobs: i64 = s.db().query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0)).unwrap();
    assert_eq!(jobs, 1);
    let grown = store_bytes(&s).saturating_sub(size);
    assert!(grown < 200_000, "the store grew by {grown} bytes for refused submissions");
    // A refusal by the policy (the budget is too small) is kept, its command cut short.
    let poor = SubmitRequest::new(
        JobSpec::simple(100.0, 3600.0, Money(1)),
        vec!["echo".into(), "y".repeat(100_000), "y".repeat(100_000)],
    );
    let j = eve.submit(&poor).unwrap();
    assert_eq!(j.state, JobState::Rejected);
    let stored: i64 = s
        .db()
        .query_row("SELECT length(command) FROM jobs WHERE id = ?1", [j.id as i64], |r| r.get(0))
        .unwrap();
    assert!(stored < 2000, "a refused submission kept {stored} bytes of command");
    // Plans of hosted sweeps too.
    let plan = "#".repeat(300 * 1024);
    let sweep: libra_api::SweepCreate = serde_json::from_value(serde_json::json!({
        "plan": plan, "resources": "", "deadline_in": 60.0, "budget_cents": 0
    }))
    .unwrap();
    let (code, msg) = refused(eve.sweep_create(&sweep).unwrap_err());
    assert!(code == 413 && msg.starts_with("plan") && msg.contains("262144"), "{code} {msg}");
}

#[test]
fn per_user_submission_rate_and_active_jobs_are_limited_with_retry_after() {
    let s = server(|c| {
        c.submit_rate = 0.5;
        c.submit_burst = 3;
        c.max_active_jobs = 100;
    });
    s.idle_node("n1", 4.0);
    let fay = s.user("fay", 1000);
    let token = Client::new(&s.url, None).login("fay", "pw-fay").unwrap().token;
    for _ in 0..3 {
        fay.submit(&job(1.0)).unwrap();
    }
    // Raw HTTP: the client hides the headers.
    let r = ureq::post(&format!("{}/api/jobs", s.url))
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(serde_json::to_value(job(1.0)).unwrap());
    let resp = match r {
        Err(ureq::Error::Status(429, resp)) => resp,
        other => panic!("expected 429, got {:?}", other.map(|r| r.status())),
    };
    let wait: u64 = resp.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=3).contains(&wait), "Retry-After: {wait}");
    let msg = resp.into_string().unwrap();
    assert!(msg.contains("per second"), "{msg}");
    // Another user is not held back by fay's rate.
    s.user("gil", 1000).submit(&job(1.0)).unwrap();

    let s = server(|c| c.max_active_jobs = 2);
    s.idle_node("n1", 4.0);
    let hal = s.user("hal", 1000);
    hal.submit(&job(1.0)).unwrap();
    let second = hal.submit(&job(1.0)).unwrap();
    let (code, msg) = refused(hal.submit(&job(1.0)).unwrap_err());
    assert!(code == 429 && msg.contains("max_active_jobs = 2"), "{code} {msg}");
    // One ends: room for one more.
    hal.cancel(second.id).unwrap();
    hal.submit(&job(1.0)).unwrap();
}

/// Reads cost no credit and take the server's time (a hosted sweep's status of 100,000 jobs
/// about 5 ms): one user reading in a loop is answered 429 with Retry-After past `read_burst`,
/// and reads again as the bucket fills at `read_rate`. Their writes, another user's reads and
/// an administrator's are not held back, and the refusal is in the audit log.
#[test]
fn a_users_reads_in_a_loop_are_held_to_the_read_rate() {
    let s = server(|c| {
        c.read_rate = 0.5;
        c.read_burst = 5;
    });
    s.idle_node("n1", 4.0);
    let fay = s.user("fay", 1000);
    let mut done = 0;
    let (code, msg) = loop {
        match fay.balance() {
            Ok(_) => done += 1,
            Err(e) => break refused(e),
        }
        assert!(done < 100, "100 reads in a loop, none refused");
    };
    // The first read with a new token looks it up in the store and is not counted.
    assert!((5..=6).contains(&done), "{done} reads before the first refusal");
    assert!(code == 429 && msg.starts_with("reads: fay") && msg.contains("read_rate"), "{code} {msg}");
    assert!(msg.contains("try again in"), "{msg}");
    // Raw HTTP (the client hides the headers), with a second login of fay's: the bucket is the
    // user's, not the token's. The new token's first read is its lookup, the second is counted.
    let token = Client::new(&s.url, None).login("fay", "pw-fay").unwrap().token;
    let get = || {
        ureq::get(&format!("{}/api/jobs", s.url))
            .set("Authorization", &format!("Bearer {token}"))
            .call()
            .map_err(Box::new)
    };
    assert_eq!(get().map(|r| r.status()).ok(), Some(200));
    let resp = match get().map_err(|e| *e) {
        Err(ureq::Error::Status(429, resp)) => resp,
        other => panic!("expected 429, got {:?}", other.map(|r| r.status())),
    };
    let wait: u64 = resp.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    // Writes have limits of their own.
    fay.submit(&job(1.0)).unwrap();
    // Another user's bucket is their own; an administrator is not held to one.
    let gil = s.user("gil", 10);
    for _ in 0..5 {
        gil.balance().unwrap();
    }
    let admin = s.admin();
    for _ in 0..20 {
        admin.jobs(true).unwrap();
    }
    // Refused reads are logged as any refusal.
    let logged: i64 = s
        .db()
        .query_row("SELECT count(*) FROM audit WHERE status = 429 AND method = 'GET'", [], |r| r.get(0))
        .unwrap();
    assert!(logged >= 1, "{logged}");
    // The bucket fills again: a token every two seconds.
    wait_until("fay's next read", || fay.balance().ok());
}

/// `update`, `hold` and `release` re-admit a job or write the ledger as a submission does, and
/// any of them can be repeated on one job without end: they take from the user's submission
/// rate, so holding and releasing one job over and over neither takes the scheduler's time nor
/// grows the books faster than submitting would. Quotes, which run the admission under the
/// state's lock too, have a bucket of their own as large. Another user is not held back.
#[test]
fn changes_and_quotes_take_from_the_users_rates() {
    let s = server(|c| {
        c.submit_rate = 0.01;
        c.submit_burst = 5;
    });
    s.idle_node("n1", 4.0);
    let fay = s.user("fay", 1000);
    let j = fay.submit(&job(1.0)).unwrap();
    let entries = |id: u64| -> i64 {
        s.db().query_row("SELECT count(*) FROM ledger WHERE job = ?1", [id as i64], |r| r.get(0)).unwrap()
    };
    let before = entries(j.id);
    // Four tokens left of five: hold, release, hold, release; then the fifth change waits.
    let mut done = 0;
    let refusal = loop {
        let r = if done % 2 == 0 { fay.hold(j.id).map(|_| ()) } else { fay.release(j.id).map(|_| ()) };
        match r {
            Ok(()) => done += 1,
            Err(e) => break refused(e),
        }
        assert!(done < 50, "50 changes of one job, none refused");
    };
    assert_eq!(done, 4, "{refusal:?}");
    let (code, msg) = refusal;
    assert!(code == 429 && msg.starts_with("hold:") && msg.contains("per second"), "{code} {msg}");
    assert_eq!(entries(j.id), before + 4, "one ledger entry per change, and no more");
    let (code, msg) = refused(
        fay.update(j.id, &UpdateRequest { deadline_at: None, budget: Some(Money::from_credits(90)) })
            .unwrap_err(),
    );
    assert!(code == 429 && msg.starts_with("update:"), "{code} {msg}");
    let (code, _) = refused(fay.submit(&job(1.0)).unwrap_err());
    assert_eq!(code, 429, "changes and submissions share one bucket");
    // Quotes run the admission too: a bucket of their own, as large as the submissions' (so a
    // sweep quoting before each submission is not slowed), and then they wait as well.
    let spec = job(1.0).spec;
    for _ in 0..5 {
        fay.quote(&QuoteRequest::new(spec.clone())).unwrap();
    }
    let (code, msg) = refused(fay.quote(&QuoteRequest::new(spec)).unwrap_err());
    assert!(code == 429 && msg.starts_with("quote:"), "{code} {msg}");
    // Another user is not held back by fay's changes.
    let gil = s.user("gil", 1000);
    let g = gil.submit(&job(1.0)).unwrap();
    gil.hold(g.id).unwrap();
    gil.release(g.id).unwrap();
}

/// A refusal holds no credit, so a user refused at the submission rate could add to the store
/// for everyone for as long as they liked: each user keeps their newest `max_kept_refusals`
/// refusals (refused by the price or by their credit alike), the oldest removed as new ones
/// are stored, and no other user's refusal and no accepted job is removed.
#[test]
fn a_users_refusals_are_held_to_the_cap_and_no_one_elses_are_removed() {
    let s = server(|c| c.max_kept_refusals = 5);
    s.idle_node("n1", 4.0);
    let alice = s.user("alice", 1000);
    let mallory = s.user("mallory", 1);
    let too_cheap = || SubmitRequest::new(JobSpec::simple(50.0, 3600.0, Money(1)), vec!["true".into()]);
    let a_refused: Vec<u64> = (0..3).map(|_| alice.submit(&too_cheap()).unwrap().id).collect();
    let a_accepted = alice.submit(&job(1.0)).unwrap().id;
    // Refused for the price (a budget of a cent), or for the credit (50 s at the node's price
    // is past mallory's one credit).
    let floods: Vec<u64> = (0..200)
        .map(|i| {
            let r = mallory.submit(&if i % 2 == 0 { too_cheap() } else { job(50.0) }).unwrap();
            assert_eq!(r.state, JobState::Rejected, "{r:?}");
            r.id
        })
        .collect();
    let reasons: Vec<String> =
        floods[195..].iter().map(|&id| mallory.job(id).unwrap().reason.unwrap()).collect();
    assert!(
        reasons.iter().any(|r| r.starts_with("budget")) && reasons.iter().any(|r| r.starts_with("credit")),
        "{reasons:?}"
    );
    for &id in &floods[..195] {
        let (code, msg) = refused(mallory.job(id).unwrap_err());
        assert!(code == 404 && msg.contains("does not exist"), "job {id}: {code} {msg}");
    }
    for &id in a_refused.iter().chain([&a_accepted]) {
        alice.job(id).unwrap();
    }
    let db = s.db();
    let kept: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM jobs j JOIN users u ON u.id = j.user_id WHERE u.name = 'mallory'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 5, "mallory's rows in the store");
    assert_eq!(libra_server::store::jobs::refusals_disagreeing(&db).unwrap(), vec![]);
}

/// Each login stores a token: a user logging in again and again keeps at most
/// `max_tokens_per_user`, the oldest revoked at once (even where the server has it cached), and
/// no other user's.
#[test]
fn a_users_login_tokens_are_held_to_the_bound_and_the_oldest_stop_working() {
    let s = server(|c| c.max_tokens_per_user = 3);
    let bob = s.user("bob", 0);
    s.admin().user_add(&UserAdd::new("alice", "pw-alice", false)).unwrap();
    let logins: Vec<Client> = (0..5)
        .map(|_| {
            let c = s.login("alice", "pw-alice");
            // Used at once, so that the server has it in its token cache.
            c.balance().unwrap();
            c
        })
        .collect();
    for (i, c) in logins.iter().enumerate() {
        match c.balance() {
            Ok(_) => assert!(i >= 2, "login {i}'s token still works"),
            Err(e) => {
                let (code, _) = refused(e);
                assert!(code == 401 && i < 2, "login {i}: {code}");
            }
        }
    }
    bob.balance().unwrap();
    let kept: i64 = s
        .db()
        .query_row(
            "SELECT COUNT(*) FROM tokens t JOIN users u ON u.id = t.user_id WHERE u.name = 'alice'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 3);
}

/// Tokens that expired a week ago or more are removed as the server starts (and hourly after),
/// whoever's; one that expired since stays, so that its holder is told it expired.
#[test]
fn tokens_expired_a_week_ago_are_removed_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = libra_testkit::test_config(dir.path());
    drop(libra_server::start_background(config.clone()).unwrap());
    let db = rusqlite::Connection::open(&config.db).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let week = libra_server::store::users::EXPIRED_TOKEN_KEPT;
    for (hash, expires) in [("long-ago", now - week - 60.0), ("lately", now - 60.0)] {
        db.execute(
            "INSERT INTO tokens (hash, user_id, created, expires) SELECT ?1, id, ?2, ?3 FROM users WHERE name = 'admin'",
            rusqlite::params![hash, expires - 86_400.0, expires],
        )
        .unwrap();
    }
    let _server = libra_server::start_background(config).unwrap();
    let left = |h: &str| -> i64 {
        db.query_row("SELECT COUNT(*) FROM tokens WHERE hash = ?1", [h], |r| r.get(0)).unwrap()
    };
    wait_until("the token expired a week ago to be removed", || (left("long-ago") == 0).then_some(()));
    assert_eq!(left("lately"), 1);
}

/// An administrator's request too large to read is refused (413) and still logged, with the
/// refusal's own words naming the limit.
#[test]
fn an_oversized_administrator_request_is_logged_with_the_limit() {
    let s = server(|_| {});
    let token = Client::new(&s.url, None).login("admin", libra_testkit::TEST_ADMIN_PW).unwrap().token;
    let big = format!("{{\"name\": \"x\", \"password\": \"{}\"}}", "p".repeat(3 * 1024 * 1024));
    let r = ureq::post(&format!("{}/api/admin/users", s.url))
        .set("Authorization", &format!("Bearer {token}"))
        .set("content-type", "application/json")
        .send_string(&big);
    // 413; or, when the server answered and closed before the client had sent the whole body,
    // the client's own write fails (a broken pipe): the refusal is logged either way.
    assert!(
        matches!(r, Err(ureq::Error::Status(413, _)) | Err(ureq::Error::Transport(_))),
        "{:?}",
        r.map(|r| r.status())
    );
    let (status, detail): (i64, String) = wait_until("the refusal in the audit log", || {
        s.db()
            .query_row(
                "SELECT status, detail FROM audit WHERE path = '/api/admin/users' ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok()
    });
    assert_eq!(status, 413);
    assert!(detail.starts_with("request body: larger than the 2097152 bytes accepted"), "{detail}");
}

/// `?ids=` answers those of the caller's jobs only (another user's are left out, as is an id
/// of no job), newest first; an administrator's `all=true` sees anyone's. A broker asks after
/// all its jobs on a cluster this way, one request for up to 1,000.
#[test]
fn jobs_are_asked_for_by_their_ids() {
    let s = server(|_| {});
    s.idle_node("n1", 4.0);
    let fay = s.user("fay", 1000);
    let gil = s.user("gil", 1000);
    let f: Vec<u64> = (0..3).map(|_| fay.submit(&job(1.0)).unwrap().id).collect();
    let g = gil.submit(&job(1.0)).unwrap().id;
    let got: Vec<u64> = fay.jobs_by_ids(&[f[0], f[2], g, 999_999]).unwrap().iter().map(|j| j.id).collect();
    assert_eq!(got, vec![f[2], f[0]], "fay's own, newest first");
    let all: Vec<u64> = s
        .admin()
        .get::<Vec<libra_api::JobInfo>>(&format!("/api/jobs?all=true&ids={},{g}", f[1]))
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(all, vec![g, f[1]]);
    let (code, msg) = refused(fay.get::<serde_json::Value>("/api/jobs?ids=1,x").unwrap_err());
    assert!(code == 400 && msg.starts_with("ids: '1,x' is not accepted"), "{code} {msg}");
    let many: Vec<u64> = (1..=1001).collect();
    let (code, msg) = refused(fay.jobs_by_ids(&many).unwrap_err());
    assert!(code == 400 && msg.contains("give at most 1000"), "{code} {msg}");
}

#[test]
fn listings_are_paginated() {
    let s = server(|_| {});
    s.idle_node("n1", 4.0);
    let ivy = s.user("ivy", 1000);
    let ids: Vec<u64> = (0..5).map(|_| ivy.submit(&job(1.0)).unwrap().id).collect();
    let admin = s.admin();
    let first = admin.jobs_page(true, 2, None).unwrap();
    assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), vec![ids[4], ids[3]]);
    let next = admin.jobs_page(true, 2, Some(ids[3])).unwrap();
    assert_eq!(next.iter().map(|j| j.id).collect::<Vec<_>>(), vec![ids[2], ids[1]]);
    for u in ["u1", "u2", "u3"] {
        admin.user_add(&UserAdd::new(u, "pw-u", false)).unwrap();
    }
    let page = admin.users_page(2, Some("ivy")).unwrap();
    assert_eq!(page.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(), vec!["u1", "u2"]);
}

#[test]
fn the_audit_log_records_admin_actions_and_refusals_and_cannot_be_changed() {
    let s = server(|_| {});
    let admin = s.admin();
    admin.user_add(&UserAdd::new("jo", "secret-pw-jo", false)).unwrap();
    admin.credit("jo", Money::from_credits(5)).unwrap();
    let jo = s.login("jo", "secret-pw-jo");
    assert_eq!(refused(jo.users().unwrap_err()).0, 403);
    assert_eq!(refused(Client::new(&s.url, None).login("jo", "wrong").unwrap_err()).0, 401);
    assert_eq!(refused(Client::new(&s.url, Some("forged".into())).balance().unwrap_err()).0, 401);

    let log = admin.audit(100, None).unwrap();
    let find = |pred: &dyn Fn(&libra_api::AuditEntry) -> bool| {
        log.iter().find(|e| pred(e)).cloned().unwrap_or_else(|| panic!("not in the audit log: {log:#?}"))
    };
    let add = find(&|e| e.path == "/api/admin/users" && e.method == "POST");
    assert_eq!(
        (add.caller.as_deref(), add.status, add.address.as_deref()),
        (Some("admin"), 200, Some("127.0.0.1"))
    );
    let detail = add.detail.unwrap();
    assert!(detail.contains("jo") && !detail.contains("secret-pw-jo"), "{detail}");
    let credit = find(&|e| e.path == "/api/admin/credit");
    assert_eq!(credit.caller.as_deref(), Some("admin"));
    let forbidden = find(&|e| e.status == 403);
    assert_eq!((forbidden.caller.as_deref(), forbidden.path.as_str()), (Some("jo"), "/api/admin/users"));
    let login = find(&|e| e.status == 401 && e.path == "/api/login");
    assert_eq!(login.caller.as_deref(), Some("jo"));
    assert!(login.detail.unwrap_or_default().contains("login refused"));
    let forged = find(&|e| e.status == 401 && e.path == "/api/balance");
    assert_eq!(forged.caller, None);
    // Successful ordinary requests are not logged.
    assert!(!log.iter().any(|e| e.path == "/api/balance" && e.status == 200));
    // Paginated, newest first.
    let page = admin.audit(2, None).unwrap();
    assert_eq!(page.len(), 2);
    assert!(page[0].id > page[1].id);
    let next = admin.audit(2, Some(page[1].id)).unwrap();
    assert!(next.iter().all(|e| e.id < page[1].id));
    // Only administrators read it, and that refusal is logged too.
    assert_eq!(refused(jo.audit(10, None).unwrap_err()).0, 403);
    // Append-only: the store refuses to change or delete an entry.
    let db = s.db();
    assert!(db.execute("UPDATE audit SET caller = 'nobody'", []).is_err());
    assert!(db.execute("DELETE FROM audit", []).is_err());
}

/// The attack on the audit log: a flood of refused requests (forged tokens, a user past the
/// submission rate) would cost a store write each and grow the store without bound. Refusals
/// alike within the window are counted and written as one entry; every refusal is still
/// accounted for (the first of each window in full, the rest by count), varying a path's
/// parameters does not escape the count, and administrators' actions are still written one
/// by one.
#[test]
fn a_flood_of_refusals_costs_a_few_audit_entries_and_every_refusal_is_counted() {
    let window = 2.0;
    let s = server(|c| {
        c.audit_repeat_window = window;
        c.submit_rate = 0.01;
        c.submit_burst = 1;
    });
    s.idle_node("n1", 4.0);
    let admin = s.admin();
    let count_rows = |db: &rusqlite::Connection| -> u64 {
        db.query_row("SELECT COUNT(*) FROM audit", [], |r| r.get::<_, i64>(0)).unwrap() as u64
    };
    let before = count_rows(&s.db());
    let started = std::time::Instant::now();
    let (forged, probes, rated) = (400u64, 120u64, 60u64);
    for i in 0..forged {
        let e = Client::new(&s.url, Some(format!("forged-{i}"))).balance().unwrap_err();
        assert_eq!(refused(e).0, 401);
        if i == forged / 2 {
            admin.credit("admin", Money::from_credits(1)).unwrap();
        }
    }
    for i in 0..probes {
        assert_eq!(refused(Client::new(&s.url, Some("forged".into())).job(1000 + i).unwrap_err()).0, 401);
    }
    let ivy = s.user("ivy", 1000);
    ivy.submit(&job(1.0)).unwrap();
    for _ in 0..rated {
        assert_eq!(refused(ivy.submit(&job(1.0)).unwrap_err()).0, 429);
    }
    let elapsed = started.elapsed().as_secs_f64();

    // Each refusal is the first of its window (an entry of its own) or counted in a later one.
    let accounted = |pred: &dyn Fn(&libra_api::AuditEntry) -> bool| -> (u64, u64) {
        let log = admin.audit(10_000, None).unwrap();
        let rows: Vec<_> = log.into_iter().filter(|e| pred(e)).collect();
        let total = rows
            .iter()
            .map(|e| match e.detail.as_deref().and_then(|d| d.split_once(" more refused like this one")) {
                Some((n, _)) => n.parse::<u64>().unwrap(),
                None => 1,
            })
            .sum();
        (rows.len() as u64, total)
    };
    let balance = |e: &libra_api::AuditEntry| e.status == 401 && e.path == "/api/balance";
    let probing = |e: &libra_api::AuditEntry| e.status == 401 && e.path.starts_with("/api/jobs/");
    let rate = |e: &libra_api::AuditEntry| e.status == 429 && e.path == "/api/jobs";
    wait_until("the windows' counts to be written", || {
        (accounted(&balance).1 == forged && accounted(&probing).1 == probes && accounted(&rate).1 == rated)
            .then_some(())
    });
    // At most a first entry and a count per window that the flood spanned, per kind.
    let windows = (elapsed / window).ceil() as u64 + 1;
    for (what, pred) in
        [("forged tokens", &balance as &dyn Fn(&_) -> bool), ("probes", &probing), ("429s", &rate)]
    {
        let (rows, total) = accounted(pred);
        assert!(rows <= 2 * windows, "{what}: {rows} entries for {total} refusals over {elapsed:.1} s");
    }
    // The counted entries name the route, and the rate-limited user, who was the only caller.
    let log = admin.audit(10_000, None).unwrap();
    assert!(log.iter().any(|e| probing(e) && e.path == "/api/jobs/{id}"), "{log:#?}");
    assert!(log.iter().filter(|e| rate(e)).all(|e| e.caller.as_deref() == Some("ivy")), "{log:#?}");
    // The administrator's action in the middle of the flood is an entry of its own.
    assert!(log
        .iter()
        .any(|e| e.path == "/api/admin/credit" && e.status == 200 && e.caller.as_deref() == Some("admin")));
    let added = count_rows(&s.db()) - before;
    assert!(added < 30, "{added} audit entries for {} refusals", forged + probes + rated);
    // The flood shows in the metrics, every refusal counted there too.
    let metrics = ureq::get(&format!("{}/metrics", s.url)).call().unwrap().into_string().unwrap();
    let refused_with = |status: &str| -> u64 {
        let line = format!("libra_refusals_total{{status=\"{status}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(line.as_str())).map_or(0, |v| v.trim().parse().unwrap())
    };
    assert_eq!((refused_with("401"), refused_with("429")), (forged + probes, rated), "{metrics}");
}

/// With `audit_keep_days`, a server removes the entries older than that when it starts (and
/// once an hour, and when a reload changes it), says so in an entry of its own, and keeps
/// every newer one; a server without it keeps everything.
#[test]
fn the_audit_log_keeps_entries_for_audit_keep_days_when_set() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("server.db");
    let now = libra_server::app::now();
    {
        // A store that has been serving for a while: entries from 400 days ago to today.
        let db = libra_server::store::open(&db_path, false).unwrap();
        for days in [400.0, 200.0, 31.0, 29.0, 1.0] {
            db.execute(
                "INSERT INTO audit(time, caller, method, path, status) VALUES (?1, 'admin', 'POST', '/api/admin/credit', 200)",
                [now - days * 86_400.0],
            )
            .unwrap();
        }
    }
    let ages = |c: &Client| -> Vec<f64> {
        let mut v: Vec<f64> = c
            .audit(100, None)
            .unwrap()
            .iter()
            .filter(|e| e.path == "/api/admin/credit")
            .map(|e| ((now - e.time) / 86_400.0).round())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let start = |keep: Option<f64>| {
        let mut c = libra_testkit::server::test_config(dir.path());
        c.audit_keep_days = keep;
        let bg = libra_server::start_background(c).unwrap();
        let url = format!("http://{}", bg.addr);
        let admin =
            Client::new(&url, None).login("admin", libra_testkit::server::TEST_ADMIN_PW).unwrap().token;
        (bg, Client::new(&url, Some(admin)))
    };
    // Unset: every entry stays.
    let (bg, admin) = start(None);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(ages(&admin), vec![1.0, 29.0, 31.0, 200.0, 400.0]);
    drop(bg);
    // 30 days: the three older entries go at start, and the removal is written.
    let (bg, admin) = start(Some(30.0));
    let removal = wait_until("the old entries' removal", || {
        admin.audit(100, None).unwrap().into_iter().find(|e| e.path == "audit_keep_days")
    });
    assert_eq!((removal.method.as_str(), removal.status, removal.caller.as_deref()), ("SERVER", 200, None));
    assert!(
        removal.detail.as_deref().unwrap_or_default().starts_with("removed 3 entries older than @"),
        "{removal:?}"
    );
    assert_eq!(ages(&admin), vec![1.0, 29.0]);
    // A reload (SIGHUP) to 10 days applies at once: the 29-day entry goes at the next tick.
    let mut shorter = libra_testkit::server::test_config(dir.path());
    shorter.audit_keep_days = Some(10.0);
    let (applied, restart) = bg.app.reload(shorter, &|_| Ok(())).unwrap();
    assert_eq!((applied, restart), (vec!["audit_keep_days: 30.0 -> 10.0".to_string()], vec![]));
    wait_until("the reloaded retention applied", || (ages(&admin) == vec![1.0]).then_some(()));
    drop(bg);
    // Out of range is refused at start, naming the setting.
    let mut c = libra_testkit::server::test_config(dir.path());
    c.audit_keep_days = Some(0.0);
    let e = libra_server::start_background(c).err().expect("audit_keep_days = 0 refused").to_string();
    assert!(e.starts_with("audit_keep_days: 0 is not accepted"), "{e}");
}
