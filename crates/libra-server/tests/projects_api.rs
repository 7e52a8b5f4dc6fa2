//! Accounts (projects) over HTTP against a real server: every administrators' account route
//! refuses anyone else with 403 and changes nothing; bad input is refused naming the field; an
//! account the caller is not in is refused exactly like one that does not exist (naming only
//! the caller's own accounts), for a submission too, which then records no job.

use libra_api::*;
use libra_core::{JobSpec, Money};
use libra_testkit::TestServer;

/// The status and message of a refusal.
fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Status { status, message }) => (status, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn only_administrators_manage_accounts_and_bad_input_is_named() {
    let s = TestServer::start();
    let admin = s.login("admin", "admin-pw");
    let alice = s.user("alice", 100);
    let _bob = s.user("bob", 100);
    admin.account_create("physics").unwrap();
    admin
        .account_add_user("physics", &AccountUserAdd { user: "alice".into(), limit: None, default: false })
        .unwrap();
    admin.account_deposit("physics", Money::from_credits(100)).unwrap();

    let attempts: Vec<(&str, Result<serde_json::Value, ClientError>)> = vec![
        ("list", alice.get("/api/admin/accounts")),
        ("create", alice.post("/api/admin/accounts", &AccountCreate { name: "mine".into() })),
        (
            "add-user",
            alice.post(
                "/api/admin/accounts/physics/users",
                &AccountUserAdd { user: "bob".into(), limit: None, default: true },
            ),
        ),
        (
            "remove-user",
            alice
                .post("/api/admin/accounts/physics/remove-user", &AccountUserRemove { user: "alice".into() }),
        ),
        (
            "default",
            alice.post("/api/admin/accounts/physics/default", &AccountDefault { user: "alice".into() }),
        ),
        (
            "deposit",
            alice.post(
                "/api/admin/accounts/physics/deposit",
                &AccountDeposit { amount: Money::from_credits(5) },
            ),
        ),
        (
            "transfer",
            alice.post(
                "/api/admin/accounts/transfer",
                &AccountTransfer {
                    from: "physics".into(),
                    to: "alice".into(),
                    amount: Money::from_credits(5),
                },
            ),
        ),
        (
            "allocate",
            alice.post(
                "/api/admin/accounts/physics/allocations",
                &AccountAllocate { amount: Money::from_credits(5), start: 0.0, end: 4e9 },
            ),
        ),
        ("usage", alice.get("/api/admin/usage?account=physics")),
    ];
    for (what, r) in attempts {
        let (status, msg) = refused(r);
        assert_eq!(status, 403, "{what}: {msg}");
        assert!(msg.contains("alice is not an administrator"), "{what}: {msg}");
    }
    // Nothing changed.
    let all = admin.accounts_all().unwrap();
    assert_eq!(all.len(), 1);
    let p = &all[0];
    assert_eq!(
        (p.available, p.credited, p.allocations.len()),
        (Money::from_credits(100), Money::from_credits(100), 0)
    );
    assert_eq!(p.members.iter().map(|m| m.user.as_str()).collect::<Vec<_>>(), ["alice"]);
    assert_eq!(alice.balance().unwrap().available, Money::from_credits(100));

    // Bad input, named.
    let cases: Vec<(Result<AccountInfo, ClientError>, u16, &str)> = vec![
        (admin.account_create("no spaces"), 400, "name: 'no spaces' is not accepted"),
        (admin.account_create("physics"), 409, "name: account 'physics' already exists"),
        (admin.account_create("bob"), 409, "personal account of user bob"),
        (
            admin.account_add_user(
                "physics",
                &AccountUserAdd { user: "nobody".into(), limit: None, default: false },
            ),
            404,
            "user: 'nobody' does not exist",
        ),
        (
            admin.account_add_user(
                "physics",
                &AccountUserAdd { user: "bob".into(), limit: Some(Money(-1)), default: false },
            ),
            400,
            "limit: -0.01 is not accepted",
        ),
        (admin.account_deposit("nope", Money::from_credits(5)), 404, "account: no account is named 'nope'"),
        (
            admin.account_deposit("physics", Money::from_credits(-101)),
            400,
            "would take account physics's available",
        ),
        (
            admin.account_allocate(
                "physics",
                &AccountAllocate { amount: Money::from_credits(5), start: 10.0, end: 5.0 },
            ),
            400,
            "end: must be after start",
        ),
        (
            admin.account_allocate("physics", &AccountAllocate { amount: Money::ZERO, start: 1.0, end: 5.0 }),
            400,
            "amount: 0.00 is not accepted",
        ),
        (
            admin.account_allocate(
                "alice",
                &AccountAllocate { amount: Money::from_credits(1), start: 1.0, end: 5.0 },
            ),
            400,
            "'alice' is a personal account",
        ),
        (admin.account_default("physics", "bob"), 400, "user: bob is not a member of account physics"),
        (admin.account_remove_user("physics", "bob"), 400, "user: bob is not a member of account physics"),
    ];
    for (r, status, want) in cases {
        let (got, msg) = refused(r);
        assert_eq!(got, status, "{msg}");
        assert!(msg.contains(want), "wanted '{want}' in: {msg}");
    }
    // A credit change of nothing is a mistake, not an entry in the books.
    let (status, msg) = refused(admin.account_deposit("physics", Money::ZERO));
    assert!(status == 400 && msg.contains("amount: 0.00 is not accepted: it changes nothing"), "{msg}");
    let (status, msg) = refused(admin.credit("bob", Money::ZERO));
    assert!(status == 400 && msg.contains("amount: 0.00 is not accepted: it changes nothing"), "{msg}");
    let (status, msg) = refused(admin.credit("nobody", Money::from_credits(1)));
    assert!(status == 404 && msg.contains("user: 'nobody' does not exist"), "{msg}");
    let (status, msg) = refused(admin.account_transfer("physics", "alice", Money::ZERO));
    assert!(status == 400 && msg.contains("amount: 0.00 is not accepted"), "{msg}");
    let (status, msg) = refused(admin.account_transfer("physics", "physics", Money::from_credits(1)));
    assert!(status == 400 && msg.contains("to: the same account as from"), "{msg}");
    let (status, msg) = refused(admin.post::<_, AccountInfo>(
        "/api/admin/accounts/physics/deposit",
        &serde_json::json!({"amount_cents": "ten"}),
    ));
    assert!(status == 400 && msg.contains("amount_cents"), "{msg}");
    let (status, msg) = refused(admin.usage_filtered(&UsageQuery {
        since: Some(10.0),
        until: Some(5.0),
        ..Default::default()
    }));
    assert!(status == 400 && msg.contains("until: must be after since"), "{msg}");
    // A user name cannot take an account's name.
    let (status, msg) = refused(admin.user_add(&UserAdd::new("physics", "pw-physics", false)));
    assert!(status == 409 && msg.contains("'physics' is the name of an account"), "{msg}");
}

#[test]
fn an_account_the_caller_is_not_in_is_refused_like_one_that_does_not_exist() {
    let s = TestServer::start();
    let admin = s.login("admin", "admin-pw");
    let alice = s.user("alice", 100);
    let bob = s.user("bob", 100);
    admin.account_create("secret").unwrap();
    admin.account_create("open").unwrap();
    admin
        .account_add_user("open", &AccountUserAdd { user: "bob".into(), limit: None, default: false })
        .unwrap();
    admin
        .account_add_user("secret", &AccountUserAdd { user: "alice".into(), limit: None, default: false })
        .unwrap();
    for name in ["secret", "no-such-account", "alice"] {
        let (status, msg) = refused(bob.account(name));
        assert_eq!(status, 403, "{msg}");
        assert_eq!(msg, format!("account: bob is not a member of account {name}; your accounts: bob, open"));
        let job = SubmitRequest {
            account: Some(name.into()),
            ..SubmitRequest::new(JobSpec::simple(1.0, 60.0, Money::from_credits(5)), vec!["true".into()])
        };
        let (status, msg2) = refused(bob.submit(&job));
        assert_eq!((status, msg2), (403, msg));
    }
    assert!(bob.jobs(false).unwrap().is_empty(), "a refused account records no job");
    // bob's own accounts, his personal one first and his default.
    let mine = bob.accounts().unwrap();
    let names: Vec<(&str, bool)> = mine.iter().map(|m| (m.account.name.as_str(), m.default)).collect();
    assert_eq!(names, [("bob", true), ("open", false)]);
    // An administrator sees any account.
    assert_eq!(admin.account("secret").unwrap().account.members[0].user, "alice");
    assert_eq!(alice.account("secret").unwrap().account.name, "secret");
}
