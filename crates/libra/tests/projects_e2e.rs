//! Accounts (projects), as sites charge them, on a real cluster (a `libra server` process and a
//! node agent), driven through the `libra` command as users and administrators type it: two
//! users sharing an account, a per-user limit refusing the second job, each job charged to the
//! right account, transfers, an allocation that expires, a non-member refused, and a non-admin
//! refused from the administrators' commands; and a deposit, transfer or allocation whose answer
//! is lost made once.

mod common;

use common::libra_run as run;
use common::*;
use libra_api::{AccountInfo, JobInfo, JobState, MyAccount, QuoteRequest, TransferResponse, UsageRow};
use libra_core::{JobSpec, Money};

fn json<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn token(cl: &Cluster, user: &str, pw: &str) -> String {
    cl.anon().login(user, pw).unwrap().token
}

/// `libra submit` of a CPU burn estimated at what it burns, with `extra` flags (`--account
/// ...`), as JSON.
fn submit(cl: &Cluster, tok: &str, cpu: f64, budget: &str, extra: &[&str]) -> (bool, JobInfo, String) {
    submit_estimated(cl, tok, cpu, cpu, budget, extra)
}

fn submit_estimated(
    cl: &Cluster,
    tok: &str,
    estimate: f64,
    cpu: f64,
    budget: &str,
    extra: &[&str],
) -> (bool, JobInfo, String) {
    let cpu = cpu.to_string();
    let est = format!("{estimate}s");
    let mut args = vec!["submit", "--json", "--estimate", &est, "-d", "10m", "-b", budget];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", EXE, "burn", "--cpu-seconds", &cpu]);
    let (ok, out, err) = run(cl, tok, &args);
    (ok, json(&out), err)
}

fn account_of(cl: &Cluster, tok: &str, name: &str) -> MyAccount {
    json(&libra(cl, tok, &["balance", "--account", name, "--json"]))
}

#[test]
fn users_share_an_account_within_their_limits_and_each_job_is_charged_to_its_account() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 2.0, 30.0);
    let alice = cl.user("alice", 100);
    let _bob = cl.user("bob", 100);
    let _carol = cl.user("carol", 100);
    let admin_t = token(&cl, "admin", ADMIN_PW);
    let (alice_t, bob_t, carol_t) =
        (token(&cl, "alice", "pw-alice"), token(&cl, "bob", "pw-bob"), token(&cl, "carol", "pw-carol"));

    // What the job costs now, so that alice's limit takes one such job but not two.
    let spec = JobSpec::simple(3.0, 600.0, Money::from_credits(50));
    let cost = alice.quote(&QuoteRequest::new(spec)).unwrap().cost.expect("the job is accepted");
    assert!(cost.0 > 0, "a job that costs nothing cannot show a limit");
    let limit = Money(cost.0 * 3 / 2);

    let created: AccountInfo =
        json(&libra(&cl, &admin_t, &["admin", "account", "create", "physics", "--json"]));
    assert_eq!((created.name.as_str(), created.available, created.personal), ("physics", Money::ZERO, false));
    libra(
        &cl,
        &admin_t,
        &["admin", "account", "add-user", "physics", "alice", "--limit", &limit.to_string()],
    );
    libra(&cl, &admin_t, &["admin", "account", "add-user", "physics", "bob"]);
    let a: AccountInfo =
        json(&libra(&cl, &admin_t, &["admin", "account", "deposit", "physics", "200", "--json"]));
    assert_eq!(a.available, Money::from_credits(200));

    // alice's first job is held against physics, not her own credit.
    let (ok, j1, err) = submit(&cl, &alice_t, 3.0, "50", &["--account", "physics"]);
    assert!(ok, "{err}");
    assert_eq!((j1.state, j1.account.as_deref()), (JobState::Pending, Some("physics")));
    let mine: libra_api::Balance = json(&libra(&cl, &alice_t, &["balance", "--json"]));
    assert_eq!((mine.available, mine.held), (Money::from_credits(100), Money::ZERO));
    let p = account_of(&cl, &alice_t, "physics");
    assert_eq!(p.account.held, j1.cost);
    assert_eq!((p.limit, p.used), (Some(limit), j1.cost));

    // Her second, while the first is held, would pass her limit: refused, naming the limit.
    let (ok, j2, _) = submit(&cl, &alice_t, 3.0, "50", &["--account", "physics"]);
    assert!(!ok);
    assert_eq!(j2.state, JobState::Rejected);
    let why = j2.reason.unwrap();
    assert!(why.starts_with("limit: alice may have at most") && why.contains("account physics"), "{why}");
    // The account itself had the credit: bob, sharing it without a limit, is accepted, with a
    // job script naming the account as sbatch's `#SBATCH -A` would.
    let script = cl.dir.join("bob.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n#LIBRA --estimate 1s -d 10m -b 50\n#LIBRA --account physics\n{EXE} burn --cpu-seconds 1\n"),
    )
    .unwrap();
    let jb: JobInfo = json(&libra(&cl, &bob_t, &["submit", "--json", script.to_str().unwrap()]));
    assert_eq!((jb.state, jb.account.as_deref()), (JobState::Pending, Some("physics")));
    // Without --account, each user's default: their personal account.
    let (ok, own, err) = submit(&cl, &alice_t, 1.0, "50", &[]);
    assert!(ok, "{err}");
    assert_eq!(own.account.as_deref(), Some("alice"));

    // carol is not a member: refused before anything is decided, naming her accounts; from a
    // script line too. An account that does not exist is answered the same way.
    for extra in [&["--account", "physics"][..], &["-A", "no-such-account"][..]] {
        let mut args = vec!["submit", "--estimate", "1s", "-d", "10m", "-b", "5"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let (ok, _, err) = run(&cl, &carol_t, &args);
        assert!(!ok);
        assert!(err.contains("not a member of account") && err.contains("your accounts: carol"), "{err}");
    }
    let (ok, _, err) = run(&cl, &carol_t, &["balance", "--account", "physics"]);
    assert!(!ok && err.contains("carol is not a member of account physics"), "{err}");

    // A non-administrator is refused every administrators' account command.
    for args in [
        &["admin", "account", "create", "mine"][..],
        &["admin", "account", "deposit", "physics", "1000"],
        &["admin", "account", "add-user", "physics", "alice", "--limit", "1000"],
        &["admin", "account", "transfer", "physics", "alice", "10"],
        &["admin", "account", "allocate", "physics", "10", "--end", "1d"],
        &["admin", "usage", "--account", "physics"],
    ] {
        let (ok, _, err) = run(&cl, &alice_t, args);
        assert!(!ok && err.contains("HTTP 403"), "{args:?}: {err}");
    }
    let p = account_of(&cl, &admin_t, "physics");
    assert_eq!(p.account.credited, Money::from_credits(200), "nothing changed");
    assert_eq!(p.account.members.iter().find(|m| m.user == "alice").unwrap().limit, Some(limit));

    // Each job settles against the account it was held on.
    let admin = cl.admin();
    let done: Vec<JobInfo> = [j1.id, jb.id, own.id].iter().map(|&id| wait_done(&admin, id)).collect();
    for j in &done {
        assert_eq!(j.state, JobState::Completed, "{j:?}");
    }
    let p = account_of(&cl, &admin_t, "physics");
    assert_eq!(p.account.held, Money::ZERO);
    assert_eq!(p.account.charged, done[0].charged + done[1].charged);
    assert_eq!(p.account.available, Money::from_credits(200) - p.account.charged);
    let mine: libra_api::Balance = json(&libra(&cl, &alice_t, &["balance", "--json"]));
    assert_eq!(mine.charged, done[2].charged, "alice's own credit paid only her own job");
    assert!(done[0].charged.0 > 0);
    // The account's ledger: alice's job held, charged and released there; bob's job too.
    let st: serde_json::Value = serde_json::from_str(&libra(
        &cl,
        &alice_t,
        &["balance", "--account", "physics", "--ledger", "--json"],
    ))
    .unwrap();
    let entries: Vec<libra_api::AccountEntry> = serde_json::from_value(st["ledger"].clone()).unwrap();
    let of = |job: u64, kind: &str| {
        entries.iter().filter(|e| e.job == Some(job) && e.kind == kind).map(|e| e.amount.0).sum::<i64>()
    };
    assert_eq!(Money(of(j1.id, "hold")), Money(of(j1.id, "charge") + of(j1.id, "release")));
    assert_eq!(Money(of(j1.id, "charge")), done[0].charged);
    assert_eq!(Money(of(jb.id, "charge")), done[1].charged);
    assert!(entries.iter().filter(|e| e.job == Some(j1.id)).all(|e| e.user.as_deref() == Some("alice")));
    assert_eq!(of(own.id, "hold"), 0, "alice's own job is not in physics's ledger");
    let (ok, _, err) = run(&cl, &carol_t, &["balance", "--account", "physics", "--ledger"]);
    assert!(!ok && err.contains("not a member of account physics"), "{err}");
    // sacct's Account column.
    let h = libra(&cl, &alice_t, &["history", "-o", "jobid,account", "-p"]);
    assert!(h.contains(&format!("{}|physics|", j1.id)) && h.contains(&format!("{}|alice|", own.id)), "{h}");

    // Usage per account and per user, filtered.
    let rows: Vec<UsageRow> =
        json(&libra(&cl, &admin_t, &["admin", "usage", "--account", "physics", "--json"]));
    let charged = |who: &str| rows.iter().filter(|r| r.user == who).map(|r| r.revenue.0).sum::<i64>();
    assert!(rows.iter().all(|r| r.account == "physics"), "{rows:?}");
    assert_eq!(Money(charged("alice")), done[0].charged);
    assert_eq!(Money(charged("bob")), done[1].charged);
    let rows: Vec<UsageRow> =
        json(&libra(&cl, &admin_t, &["admin", "usage", "--user", "alice", "--since", "now-1h", "--json"]));
    let accounts: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.account.as_str()).collect();
    assert_eq!(accounts, ["alice", "physics"].into_iter().collect(), "{rows:?}");
    let rows: Vec<UsageRow> = json(&libra(&cl, &admin_t, &["admin", "usage", "--until", "now-1h", "--json"]));
    assert!(rows.is_empty(), "nothing was submitted before an hour ago: {rows:?}");
    let (ok, _, err) = run(&cl, &admin_t, &["admin", "usage", "--account", "nope"]);
    assert!(!ok && err.contains("account: no account is named 'nope'"), "{err}");

    // Transfers move credit and conserve it: between shared accounts, and from a user's
    // personal account into a shared one.
    libra(&cl, &admin_t, &["admin", "account", "create", "chem"]);
    let before = account_of(&cl, &admin_t, "physics").account.available;
    let t: TransferResponse =
        json(&libra(&cl, &admin_t, &["admin", "account", "transfer", "physics", "chem", "50", "--json"]));
    assert_eq!(t.from.available, before - Money::from_credits(50));
    assert_eq!(t.to.available, Money::from_credits(50));
    let t: TransferResponse =
        json(&libra(&cl, &admin_t, &["admin", "account", "transfer", "carol", "chem", "30", "--json"]));
    assert_eq!((t.from.name.as_str(), t.from.available), ("carol", Money::from_credits(70)));
    assert_eq!(t.to.available, Money::from_credits(80));
    // More than is available is refused, naming how much is; nothing moves.
    let (ok, _, err) = run(&cl, &admin_t, &["admin", "account", "transfer", "chem", "physics", "81"]);
    assert!(!ok && err.contains("amount: account chem has 80.00"), "{err}");
    assert_eq!(account_of(&cl, &admin_t, "chem").account.available, Money::from_credits(80));

    // An account with too little credit refuses the job, naming the account and what it has.
    libra(&cl, &admin_t, &["admin", "account", "add-user", "chem", "alice"]);
    libra(&cl, &admin_t, &["admin", "account", "transfer", "chem", "carol", "79.99"]);
    let (ok, j, _) = submit(&cl, &alice_t, 3.0, "50", &["--account", "chem"]);
    assert!(!ok);
    let why = j.reason.unwrap();
    assert!(why.starts_with("credit: account chem has 0.01 available"), "{why}");
    // An array's tasks are each held and charged against the account named.
    let before = account_of(&cl, &admin_t, "physics").account;
    let arr: libra_api::ArrayResponse = json(&libra(
        &cl,
        &bob_t,
        &[
            "submit",
            "--json",
            "--array",
            "0-1",
            "-A",
            "physics",
            "--estimate",
            "1s",
            "-d",
            "10m",
            "-b",
            "5",
            "--",
            EXE,
            "burn",
            "--cpu-seconds",
            "0.5",
        ],
    ));
    assert!(arr.accepted && arr.tasks.len() == 2, "{arr:?}");
    assert!(arr.tasks.iter().all(|t| t.account.as_deref() == Some("physics")), "{arr:?}");
    let tasks: Vec<JobInfo> = arr.tasks.iter().map(|t| wait_done(&admin, t.id)).collect();
    let charged = tasks.iter().fold(Money::ZERO, |m, t| m + t.charged);
    assert!(charged.0 > 0, "{tasks:?}");
    let after = account_of(&cl, &admin_t, "physics").account;
    assert_eq!(after.charged, before.charged + charged);
    let bobs: libra_api::Balance = json(&libra(&cl, &bob_t, &["balance", "--json"]));
    assert_eq!(bobs.charged, Money::ZERO, "bob's own credit paid nothing");
    // Account and user names never collide (a personal account takes its user's name).
    let (ok, _, err) = run(&cl, &admin_t, &["admin", "account", "create", "alice"]);
    assert!(!ok && err.contains("personal account of user alice"), "{err}");
}

#[test]
fn an_allocation_expires_at_its_end_but_a_hold_taken_before_stays_valid() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 2.0, 30.0);
    let _dana = cl.user("dana", 0);
    let admin_t = token(&cl, "admin", ADMIN_PW);
    let dana_t = token(&cl, "dana", "pw-dana");
    libra(&cl, &admin_t, &["admin", "account", "create", "grant"]);
    // The account becomes dana's default: her jobs without --account are charged to it.
    libra(&cl, &admin_t, &["admin", "account", "add-user", "grant", "dana", "--default"]);
    let a: AccountInfo = json(&libra(
        &cl,
        &admin_t,
        &["admin", "account", "allocate", "grant", "100", "--end", "6s", "--json"],
    ));
    assert_eq!(a.available, Money::from_credits(100));
    assert!(a.allocations[0].active);
    let end = a.allocations[0].end;

    // A job that runs past the allocation's end, held from it while it lasts (estimated well
    // above what it burns, so it never needs more than its hold).
    let (ok, j, err) = submit_estimated(&cl, &dana_t, 16.0, 8.0, "50", &[]);
    assert!(ok, "{err}");
    assert_eq!(j.account.as_deref(), Some("grant"));
    assert!(j.cost.0 > 0);

    let expired = wait_until("the allocation to expire", || {
        let m = account_of(&cl, &dana_t, "grant");
        (!m.account.allocations[0].active).then_some(m)
    });
    assert_eq!(expired.account.available, Money::ZERO, "{expired:?}");
    assert_eq!(expired.account.held, j.cost, "the hold taken before the end stays");
    assert!(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() >= end);
    // New work finds no credit.
    let (ok, refused, _) = submit(&cl, &dana_t, 1.0, "50", &[]);
    assert!(!ok);
    let why = refused.reason.unwrap();
    assert!(why.starts_with("credit: account grant has 0.00 available"), "{why}");

    // The running job settles against its hold; what it did not spend returns to the expired
    // allocation, not to anything that can be held.
    let done = wait_done(&cl.admin(), j.id);
    assert_eq!(done.state, JobState::Completed, "{done:?}");
    assert!(done.charged.0 > 0);
    let after = account_of(&cl, &admin_t, "grant").account;
    assert_eq!((after.available, after.held, after.charged), (Money::ZERO, Money::ZERO, done.charged));
    assert_eq!(after.allocations[0].remaining, Money::from_credits(100) - done.charged);

    // Lasting credit deposited after the end is available again.
    libra(&cl, &admin_t, &["admin", "account", "deposit", "grant", "5"]);
    assert_eq!(account_of(&cl, &dana_t, "grant").available_to_me, Money::from_credits(5));
    // Bad input names the field.
    let (ok, _, err) =
        run(&cl, &admin_t, &["admin", "account", "allocate", "grant", "10", "--end", "yesterday"]);
    assert!(!ok && err.contains("--end:"), "{err}");
    let (ok, _, err) = run(
        &cl,
        &admin_t,
        &["admin", "account", "allocate", "grant", "10", "--start", "2026-12-02", "--end", "2026-12-01"],
    );
    assert!(!ok && err.contains("--end:") && err.contains("is not after --start"), "{err}");
    // A start given as a duration is from now, as a deadline's is: `--start 2h --end 1h` was
    // taken as from two hours ago, and made an allocation that had ended before it was made.
    let out = libra(
        &cl,
        &admin_t,
        &["admin", "account", "allocate", "grant", "10", "--start", "2h", "--end", "1h", "--json"],
    );
    let a: AccountInfo = json(&out);
    let made = a.allocations.iter().max_by_key(|x| x.id).unwrap();
    let now = libra_api::unix_now();
    assert!(made.start > now + 7000.0 && made.end > made.start + 3500.0 && !made.active, "{made:?}");
    // An allocation that has already ended is refused, by the command and by the server.
    let (ok, _, err) = run(
        &cl,
        &admin_t,
        &["admin", "account", "allocate", "grant", "10", "--start", "now-2h", "--end", "1h"],
    );
    assert!(!ok && err.contains("--end:") && err.contains("in the past"), "{err}");
    let past = libra_api::AccountAllocate {
        amount: Money::from_credits(10),
        start: now - 7200.0,
        end: now - 3600.0,
    };
    let e = cl.admin().account_allocate_with_key("grant", &past, "past-allocation").unwrap_err();
    assert!(e.to_string().contains("end:") && e.to_string().contains("could never be used"), "{e}");
}

/// `libra admin account deposit|transfer|allocate` whose answer is lost on the way (the server
/// made the change) try again with the same idempotency key and are answered, not made again.
/// Through the API: the same key makes one change; the key given for another change, a user's
/// credit included, is refused (409, naming the change it made); a change that was refused does
/// not use up its key.
#[test]
fn a_change_of_account_credit_whose_answer_was_lost_is_made_once() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cl = Cluster::start(1, 0.5, 30.0);
    let wes = cl.user("wes", 100);
    let admin = cl.admin();
    admin.account_create("physics").unwrap();
    let admin_t = token(&cl, "admin", ADMIN_PW);
    let physics = || admin.account("physics").unwrap().account;
    let entries = || admin.account_ledger("physics").unwrap().len();

    // Each command through a proxy that loses the answer to its first request of that kind.
    let lossy = |prefix: &'static [u8], args: &[&str]| {
        let proxy = FaultyProxy::losing(cl.port, prefix);
        let o = libra_output_via(&cl, &proxy.url, &admin_t, args);
        let said = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "libra {args:?}: {said}");
        assert!(proxy.done(), "the proxy lost no answer to libra {args:?}");
        assert!(said.contains("trying again"), "{said}");
    };
    lossy(b"POST /api/admin/accounts/physics/deposit ", &["admin", "account", "deposit", "physics", "50"]);
    assert_eq!((physics().available, entries()), (Money::from_credits(50), 1), "deposited once");
    lossy(b"POST /api/admin/accounts/transfer ", &["admin", "account", "transfer", "physics", "wes", "20"]);
    assert_eq!((physics().available, entries()), (Money::from_credits(30), 2), "moved once");
    assert_eq!(wes.balance().unwrap().available, Money::from_credits(120));
    lossy(
        b"POST /api/admin/accounts/physics/allocations ",
        &["admin", "account", "allocate", "physics", "40", "--end", "30d"],
    );
    let p = physics();
    assert_eq!(
        (p.available, p.allocations.len(), entries()),
        (Money::from_credits(70), 1, 3),
        "allocated once"
    );

    // The API: one change per key, whatever is asked again with it.
    let five = Money::from_credits(5);
    let a = admin.account_deposit_with_key("physics", five, "k1").unwrap();
    let b = admin.account_deposit_with_key("physics", five, "k1").unwrap();
    assert_eq!((a.available, b.available, entries()), (Money::from_credits(75), Money::from_credits(75), 4));
    for e in [
        admin.account_deposit_with_key("physics", Money::from_credits(6), "k1").map(|_| ()),
        admin.account_deposit_with_key("wes", five, "k1").map(|_| ()),
        admin.account_transfer_with_key("physics", "wes", five, "k1").map(|_| ()),
        // A user's credit shares the caller's keys with the accounts' changes.
        admin.credit_with_key("wes", five, "k1").map(|_| ()),
    ] {
        let e = e.unwrap_err();
        assert_eq!(e.status(), Some(409), "{e}");
        let said = e.to_string();
        assert!(
            said.contains("Idempotency-Key") && said.contains("a deposit of 5.00 to account physics"),
            "{said}"
        );
    }
    // A refused transfer (more than the account has) changes nothing and leaves its key free.
    let e = admin.account_transfer_with_key("physics", "wes", Money::from_credits(1000), "k2").unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    let r = admin.account_transfer_with_key("physics", "wes", five, "k2").unwrap();
    assert_eq!((r.from.available, r.to.available), (Money::from_credits(70), Money::from_credits(125)));
    let again = admin.account_transfer_with_key("physics", "wes", five, "k2").unwrap();
    assert_eq!((again.from.available, again.to.available), (r.from.available, r.to.available));
    assert_eq!(entries(), 5);
    assert_eq!(physics().available, Money::from_credits(70));
    assert_eq!(wes.balance().unwrap().available, Money::from_credits(125));
}
