use super::*;
use crate::store;
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Debug, Clone)]
enum Op {
    Deposit { user: usize, cents: i64 },
    Hold { user: usize, cost: i64, extra_budget: i64 },
    Settle { job: usize, charge: i64 },
    Extend { job: usize, to: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, -2_000..5_000i64).prop_map(|(user, cents)| Op::Deposit { user, cents }),
        (0..3usize, 0..3_000i64, 0..1_000i64).prop_map(|(user, cost, extra_budget)| Op::Hold {
            user,
            cost,
            extra_budget
        }),
        (0..20usize, -100..6_000i64).prop_map(|(job, charge)| Op::Settle { job, charge }),
        (0..20usize, 0..6_000i64).prop_map(|(job, to)| Op::Extend { job, to }),
    ]
}

fn ledger_user(conn: &Connection, job: u64) -> i64 {
    conn.query_row("SELECT user_id FROM ledger WHERE job = ?1 LIMIT 1", params![job as i64], |r| r.get(0))
        .unwrap()
}

fn users(conn: &Connection) -> Vec<i64> {
    (0..3)
        .map(|i| {
            conn.execute("INSERT INTO users(name, pw_hash) VALUES (?1, 'x')", params![format!("u{i}")])
                .unwrap();
            conn.last_insert_rowid()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever happens: no balance below zero, nothing on hold below zero, deposits equal
    /// available + held + charged, and no job charged above its hold or its budget.
    #[test]
    fn ledger_invariants_hold(ops in prop::collection::vec(op(), 1..60)) {
        let conn = store::open_memory().unwrap();
        let ids = users(&conn);
        let mut jobs: Vec<(u64, Money)> = Vec::new(); // (job, budget)
        let mut next_job = 1u64;
        for (t, op) in ops.into_iter().enumerate() {
            let now = t as f64;
            match op {
                Op::Deposit { user, cents } => {
                    let before = balance(&conn, ids[user]).unwrap();
                    match deposit(&conn, ids[user], Money(cents), now) {
                        Ok(b) => prop_assert_eq!(b.available, before.available + Money(cents)),
                        Err(LedgerError::Overdraw { .. }) => prop_assert!(before.available.0 + cents < 0),
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                }
                Op::Hold { user, cost, extra_budget } => {
                    let budget = Money(cost + extra_budget);
                    let before = balance(&conn, ids[user]).unwrap();
                    match hold(&conn, ids[user], next_job, Money(cost), budget, now) {
                        Ok(()) => jobs.push((next_job, budget)),
                        Err(LedgerError::Insufficient { .. }) => prop_assert!(before.available.0 < cost),
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                    next_job += 1;
                    // A hold above the budget is always refused.
                    prop_assert!(hold(&conn, ids[user], 10_000 + next_job, budget + Money(1), budget, now).is_err());
                }
                Op::Extend { job, to } => {
                    if let Some(&(id, budget)) = jobs.get(job) {
                        let open = open_hold(&conn, id).unwrap().map(|h| h.1).unwrap_or(Money::ZERO);
                        let before = balance(&conn, ledger_user(&conn, id)).unwrap();
                        match extend_hold(&conn, id, Money(to), budget, now) {
                            Ok(()) => {}
                            Err(LedgerError::Insufficient { .. }) => {
                                prop_assert!(before.available < Money(to) - open)
                            }
                            Err(LedgerError::AboveBudget(..)) => {}
                            Err(LedgerError::NoHold(_)) => {}
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                }
                Op::Settle { job, charge } => {
                    if let Some(&(id, _)) = jobs.get(job) {
                        settle(&conn, id, Money(charge), now).unwrap();
                        // Settling twice changes nothing.
                        prop_assert_eq!(settle(&conn, id, Money(charge), now).unwrap(), Money::ZERO);
                    }
                }
            }
            for &u in &ids {
                let b = balance(&conn, u).unwrap();
                prop_assert!(b.available.0 >= 0, "available {:?}", b);
                prop_assert!(b.held.0 >= 0, "held {:?}", b);
                prop_assert_eq!(b.deposited, b.available + b.held + b.charged);
                let (d, h, c, r) = balance_from_entries(&conn, u).unwrap();
                prop_assert_eq!((b.available.0, b.held.0, b.charged.0), (d - h + r, h - c - r, c));
            }
            let mut per_job: HashMap<u64, (i64, i64)> = HashMap::new();
            for e in entries(&conn, None, 100_000).unwrap() {
                if let Some(j) = e.job {
                    let s = per_job.entry(j).or_default();
                    match e.kind {
                        LedgerKind::Hold => s.0 += e.amount.0,
                        LedgerKind::Charge => s.1 += e.amount.0,
                        _ => {}
                    }
                }
            }
            for (id, budget) in &jobs {
                let (held, charged) = per_job.get(id).copied().unwrap_or_default();
                prop_assert!(charged <= held && held <= budget.0, "job {id}: charged {charged}, held {held}, budget {}", budget.0);
            }
        }
    }
}

#[test]
fn the_ledger_is_append_only() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    deposit(&conn, ids[0], Money(500), 0.0).unwrap();
    assert!(conn.execute("UPDATE ledger SET amount = 1", []).is_err());
    assert!(conn.execute("DELETE FROM ledger", []).is_err());
    assert_eq!(balance(&conn, ids[0]).unwrap().available, Money(500));
}

#[test]
fn settle_splits_the_hold_into_charge_and_release() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    deposit(&conn, ids[1], Money(1000), 0.0).unwrap();
    hold(&conn, ids[1], 7, Money(400), Money(500), 1.0).unwrap();
    assert_eq!(balance(&conn, ids[1]).unwrap().held, Money(400));
    // A charge above the hold is clamped to it.
    assert_eq!(settle(&conn, 7, Money(900), 2.0).unwrap(), Money(400));
    let b = balance(&conn, ids[1]).unwrap();
    assert_eq!((b.available, b.held, b.charged), (Money(600), Money::ZERO, Money(400)));
    hold(&conn, ids[1], 8, Money(300), Money(300), 3.0).unwrap();
    assert_eq!(settle(&conn, 8, Money(100), 4.0).unwrap(), Money(100));
    let b = balance(&conn, ids[1]).unwrap();
    assert_eq!((b.available, b.held, b.charged), (Money(500), Money::ZERO, Money(500)));
    assert!(matches!(
        hold(&conn, ids[1], 9, Money(501), Money(600), 5.0),
        Err(LedgerError::Insufficient { .. })
    ));
}

/// A changed promise's price (`libra update`): the open hold is raised from the owner's credit
/// or lowered by a release, never above the budget; a lowered hold can be extended again up to
/// the budget (what the budget bounds is the open hold, not the sum of the hold entries).
#[test]
fn set_hold_moves_the_open_hold_within_the_budget_and_the_credit() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    deposit(&conn, ids[0], Money(1000), 0.0).unwrap();
    hold(&conn, ids[0], 7, Money(400), Money(500), 1.0).unwrap();
    set_hold(&conn, 7, Money(100), Money(500), 2.0).unwrap();
    assert_eq!(open_hold(&conn, 7).unwrap(), Some((ids[0], Money(100))));
    assert_eq!(balance(&conn, ids[0]).unwrap().available, Money(900));
    assert!(matches!(set_hold(&conn, 7, Money(501), Money(500), 3.0), Err(LedgerError::AboveBudget(..))));
    assert!(matches!(
        set_hold(&conn, 7, Money(2000), Money(5000), 3.0),
        Err(LedgerError::Insufficient { .. })
    ));
    assert_eq!(open_hold(&conn, 7).unwrap().unwrap().1, Money(100), "a refusal writes nothing");
    // 400 + 450 in hold entries, 450 open: within the budget of 500.
    extend_hold(&conn, 7, Money(450), Money(500), 4.0).unwrap();
    assert_eq!(open_hold(&conn, 7).unwrap().unwrap().1, Money(450));
    assert_eq!(settle(&conn, 7, Money(10_000), 5.0).unwrap(), Money(450));
    let b = balance(&conn, ids[0]).unwrap();
    assert_eq!((b.available, b.held, b.charged), (Money(550), Money(0), Money(450)));
    // Settled, its open hold is zero: raising it again may take its charges to the budget,
    // never past it (a hold of the whole budget again would have charged 950 of 500).
    assert!(matches!(
        set_hold(&conn, 7, Money(51), Money(500), 6.0),
        Err(LedgerError::PastBudget { charged: Money(450), .. })
    ));
    assert_eq!(open_hold(&conn, 7).unwrap().unwrap().1, Money::ZERO, "a refusal writes nothing");
    set_hold(&conn, 7, Money(50), Money(500), 6.0).unwrap();
    assert_eq!(settle(&conn, 7, Money(10_000), 7.0).unwrap(), Money(50));
    assert_eq!(charged_for_job(&conn, 7).unwrap(), Money(500));
}

/// The same for a job charged to a shared account: what the account was charged counts.
#[test]
fn a_settled_shared_account_jobs_hold_is_raised_only_within_its_budget() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    projects::create(&conn, "A", 0.0).unwrap();
    projects::add_user(&conn, "A", "u0", None, false, 0.0).unwrap();
    let p = projects::project_id(&conn, "A").unwrap().unwrap();
    projects::deposit(&conn, "A", Money(1000), ids[0], 0.0).unwrap();
    conn.execute(
        "INSERT INTO jobs(id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, submit_time, deadline_at, project_id) \
         VALUES (1, ?1, 'PENDING', '[]', 1, 1, 0, 60, 491, 0, 60, ?2)",
        params![ids[0], p],
    )
    .unwrap();
    hold(&conn, ids[0], 1, Money(63), Money(491), 1.0).unwrap();
    assert_eq!(settle(&conn, 1, Money(1), 2.0).unwrap(), Money(1));
    assert!(matches!(set_hold(&conn, 1, Money(491), Money(491), 3.0), Err(LedgerError::PastBudget { .. })));
    set_hold(&conn, 1, Money(490), Money(491), 3.0).unwrap();
    assert_eq!(settle(&conn, 1, Money(491), 4.0).unwrap(), Money(490));
    assert_eq!(charged_for_job(&conn, 1).unwrap(), Money(491));
}

// ---- accounts (projects) ----

use crate::projects;

/// What happens to accounts: the shared accounts are "A" and "B"; a user's personal account is
/// named after them ("u0".."u2"). Times are op indices plus the offsets given.
#[derive(Debug, Clone)]
enum AcctOp {
    Deposit {
        acct: usize,
        cents: i64,
    },
    Transfer {
        from: usize,
        to: usize,
        cents: i64,
    },
    Allocate {
        acct: usize,
        cents: i64,
        start_in: i64,
        len: i64,
    },
    /// A job of `user` charged to `acct` (2: their personal account).
    Hold {
        user: usize,
        acct: usize,
        cost: i64,
        extra_budget: i64,
    },
    Settle {
        job: usize,
        charge: i64,
    },
    Extend {
        job: usize,
        to: i64,
    },
    SetHold {
        job: usize,
        to: i64,
    },
}

const ACCOUNTS: [&str; 5] = ["A", "B", "u0", "u1", "u2"];

fn acct_op() -> impl Strategy<Value = AcctOp> {
    prop_oneof![
        (0..5usize, -1_500..4_000i64).prop_map(|(acct, cents)| AcctOp::Deposit { acct, cents }),
        (0..5usize, 0..5usize, -10..3_000i64).prop_map(|(from, to, cents)| AcctOp::Transfer {
            from,
            to,
            cents
        }),
        (0..2usize, 1..4_000i64, -5..8i64, 1..15i64)
            .prop_map(|(acct, cents, start_in, len)| AcctOp::Allocate { acct, cents, start_in, len }),
        (0..3usize, 0..3usize, 0..2_000i64, 0..800i64)
            .prop_map(|(user, acct, cost, extra_budget)| AcctOp::Hold { user, acct, cost, extra_budget }),
        (0..30usize, -100..3_000i64).prop_map(|(job, charge)| AcctOp::Settle { job, charge }),
        (0..30usize, 0..3_000i64).prop_map(|(job, to)| AcctOp::Extend { job, to }),
        (0..30usize, 0..3_000i64).prop_map(|(job, to)| AcctOp::SetHold { job, to }),
    ]
}

/// An account's available credit summed from its entries and the allocations' windows alone
/// (independent of the running totals and of the code that keeps them).
fn available_from_entries(conn: &Connection, project: i64, now: f64) -> i64 {
    conn.query_row(
        "SELECT COALESCE(SUM(CASE l.kind WHEN 'hold' THEN -l.amount WHEN 'charge' THEN 0 ELSE l.amount END), 0) \
         FROM project_ledger l LEFT JOIN allocations a ON a.id = l.allocation_id \
         WHERE l.project_id = ?1 AND (l.allocation_id IS NULL OR (a.start <= ?2 AND ?2 < a.end))",
        params![project, now],
        |r| r.get(0),
    )
    .unwrap()
}

/// Everything credited to every account, personal and shared (what only deposits and
/// allocations change; transfers move it).
fn all_credit(conn: &Connection) -> i64 {
    conn.query_row(
        "SELECT (SELECT COALESCE(SUM(amount), 0) FROM ledger WHERE kind = 'deposit') + \
         (SELECT COALESCE(SUM(amount), 0) FROM project_ledger WHERE kind IN ('deposit','transfer','allocation'))",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Whatever deposits, transfers, allocations (expiring), holds, charges and refunds happen
    /// across shared and personal accounts: no account (nor any of its buckets) below zero, no
    /// member past their limit, transfers conserve credit, the running totals equal the sums of
    /// the entries, an expired allocation's remainder is not available, and no job is charged
    /// above its hold or its budget.
    #[test]
    fn account_ledger_invariants_hold(
        ops in prop::collection::vec(acct_op(), 1..70),
        limits in prop::collection::vec(prop::option::of(0..3_000i64), 4),
    ) {
        let conn = store::open_memory().unwrap();
        let ids = users(&conn);
        projects::create(&conn, "A", 0.0).unwrap();
        projects::create(&conn, "B", 0.0).unwrap();
        let pid = |n: &str| projects::project_id(&conn, n).unwrap().unwrap();
        let (a, b) = (pid("A"), pid("B"));
        // u0, u1 in A; u1, u2 in B; u2 is not in A and u0 not in B.
        let members = [(0usize, "A"), (1, "A"), (1, "B"), (2, "B")];
        for (i, (u, p)) in members.iter().enumerate() {
            projects::add_user(&conn, p, &format!("u{u}"), limits[i].map(Money), false, 0.0).unwrap();
        }
        let limit_of = |u: usize, p: i64| -> Option<i64> {
            members.iter().zip(&limits).find(|((mu, mp), _)| *mu == u && pid(mp) == p).and_then(|(_, l)| *l)
        };
        let mut expected_credit = 0i64;
        let mut jobs: Vec<(u64, Money)> = Vec::new();
        for (t, op) in ops.into_iter().enumerate() {
            let now = t as f64;
            match op {
                AcctOp::Deposit { acct, cents } => {
                    if projects::deposit(&conn, ACCOUNTS[acct], Money(cents), ids[0], now).is_ok() {
                        expected_credit += cents;
                    }
                }
                AcctOp::Transfer { from, to, cents } => {
                    let _ = projects::transfer(&conn, ACCOUNTS[from], ACCOUNTS[to], Money(cents), ids[0], now);
                }
                AcctOp::Allocate { acct, cents, start_in, len } => {
                    let (start, end) = (now + start_in as f64, now + (start_in + len) as f64);
                    // One that has already ended is refused (it could never be held from).
                    match projects::allocate(&conn, ACCOUNTS[acct], Money(cents), start, end, ids[0], now) {
                        Ok(_) => expected_credit += cents,
                        Err(e) => prop_assert!(end <= now, "{}", e),
                    }
                }
                AcctOp::Hold { user, acct, cost, extra_budget } => {
                    let project = [Some(a), Some(b), None][acct];
                    let member = project.is_none_or(|p| members.iter().any(|(mu, mp)| *mu == user && pid(mp) == p));
                    let name = project.map_or(format!("u{user}"), |p| if p == a { "A".into() } else { "B".into() });
                    let resolved = projects::for_submission(&conn, ids[user], &format!("u{user}"), Some(&name));
                    prop_assert_eq!(resolved.is_ok(), member, "membership of u{} in {}", user, name);
                    if !member {
                        continue;
                    }
                    conn.execute(
                        "INSERT INTO jobs(user_id, state, command, estimate, procs, mem_mb, deadline, budget, submit_time, deadline_at, project_id) \
                         VALUES (?1, 'PENDING', '[]', 1, 1, 0, 60, ?2, ?3, ?3, ?4)",
                        params![ids[user], cost + extra_budget, now, project],
                    ).unwrap();
                    let job = conn.last_insert_rowid() as u64;
                    let budget = Money(cost + extra_budget);
                    let (avail, left) = match project {
                        Some(p) => {
                            let i = projects::info(&conn, projects::Acct::Project(p), now).unwrap();
                            let used = i.members.iter().find(|m| m.user == format!("u{user}")).unwrap().used;
                            (i.available.0, limit_of(user, p).map(|l| l - used.0))
                        }
                        None => (balance(&conn, ids[user]).unwrap().available.0, None),
                    };
                    match hold(&conn, ids[user], job, Money(cost), budget, now) {
                        Ok(()) => {
                            prop_assert!(cost <= avail && left.is_none_or(|l| cost <= l));
                            jobs.push((job, budget));
                        }
                        Err(LedgerError::LimitShort { .. }) => prop_assert!(left.is_some_and(|l| cost > l)),
                        Err(LedgerError::AccountShort { .. } | LedgerError::Insufficient { .. }) => prop_assert!(cost > avail),
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                }
                AcctOp::Settle { job, charge } => {
                    if let Some(&(id, _)) = jobs.get(job) {
                        let held = open_hold(&conn, id).unwrap().map_or(0, |h| h.1 .0);
                        let charged = settle(&conn, id, Money(charge), now).unwrap();
                        prop_assert_eq!(charged.0, charge.clamp(0, held.max(0)));
                        prop_assert_eq!(settle(&conn, id, Money(charge), now).unwrap(), Money::ZERO);
                    }
                }
                AcctOp::Extend { job, to } => {
                    if let Some(&(id, budget)) = jobs.get(job) {
                        let r = extend_hold(&conn, id, Money(to), budget, now);
                        prop_assert!(!matches!(r, Err(LedgerError::Store(_))), "{:?}", r);
                    }
                }
                AcctOp::SetHold { job, to } => {
                    if let Some(&(id, budget)) = jobs.get(job) {
                        let before = open_hold(&conn, id).unwrap();
                        match set_hold(&conn, id, Money(to), budget, now) {
                            Ok(()) => prop_assert_eq!(open_hold(&conn, id).unwrap().map(|h| h.1), Some(Money(to))),
                            Err(LedgerError::Store(e)) => prop_assert!(false, "{e}"),
                            // A refusal writes nothing.
                            Err(_) => prop_assert_eq!(open_hold(&conn, id).unwrap(), before),
                        }
                    }
                }
            }
            prop_assert_eq!(all_credit(&conn), expected_credit, "transfers conserve credit");
            for p in [a, b] {
                let i = projects::info(&conn, projects::Acct::Project(p), now).unwrap();
                prop_assert!(i.available.0 >= 0 && i.held.0 >= 0, "{:?}", i);
                prop_assert_eq!(i.available.0, available_from_entries(&conn, p, now), "{:?}", i);
                for al in &i.allocations {
                    prop_assert!(al.remaining.0 >= 0, "{:?}", al);
                    prop_assert_eq!(al.active, al.start <= now && now < al.end);
                }
                let active_alloc: i64 = i.allocations.iter().filter(|x| x.active).map(|x| x.remaining.0).sum();
                prop_assert!(active_alloc <= i.available.0, "an expired allocation's remainder is not available");
                for (summed, running) in projects::check_totals(&conn, p).unwrap() {
                    prop_assert_eq!(summed, running);
                }
                for m in &i.members {
                    let u: usize = m.user[1..].parse().unwrap();
                    prop_assert_eq!(m.limit.map(|l| l.0), limit_of(u, p));
                    if let Some(l) = m.limit {
                        prop_assert!(m.used <= l, "{} past their limit in {}: {:?}", m.user, i.name, m);
                    }
                }
            }
            for &u in &ids {
                let bal = balance(&conn, u).unwrap();
                prop_assert!(bal.available.0 >= 0 && bal.held.0 >= 0, "{:?}", bal);
            }
            for (id, budget) in &jobs {
                let (held, charged): (i64, i64) = conn.query_row(
                    "SELECT COALESCE(SUM(CASE kind WHEN 'hold' THEN amount ELSE -amount END), 0), COALESCE(SUM(CASE kind WHEN 'charge' THEN amount END), 0) \
                     FROM (SELECT kind, amount FROM ledger WHERE job = ?1 UNION ALL SELECT kind, amount FROM project_ledger WHERE job = ?1)",
                    params![*id as i64],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                ).unwrap();
                prop_assert!(held >= 0 && held <= budget.0, "job {id}: open hold {held}, budget {}", budget.0);
                prop_assert!(charged <= budget.0, "job {id}: charged {charged}, budget {}", budget.0);
            }
        }
    }
}

/// An allocation's credit is held only in its window; a hold taken before its end stays valid
/// and is charged after it, and what its job does not spend goes back to the expired allocation
/// (not available).
#[test]
fn an_allocation_expires_but_its_holds_stay_valid() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    projects::create(&conn, "A", 0.0).unwrap();
    projects::add_user(&conn, "A", "u0", None, true, 0.0).unwrap();
    let p = projects::project_id(&conn, "A").unwrap().unwrap();
    projects::allocate(&conn, "A", Money(1000), 10.0, 20.0, ids[0], 0.0).unwrap();
    let info = |now| projects::info(&conn, projects::Acct::Project(p), now).unwrap();
    assert_eq!(info(5.0).available, Money::ZERO, "not yet started");
    assert_eq!(info(10.0).available, Money(1000));
    // The default account of u0 is A now.
    assert_eq!(projects::for_submission(&conn, ids[0], "u0", None).unwrap(), Some(p));
    conn.execute(
        "INSERT INTO jobs(id, user_id, state, command, estimate, procs, mem_mb, deadline, budget, submit_time, deadline_at, project_id) \
         VALUES (1, ?1, 'PENDING', '[]', 1, 1, 0, 60, 800, 12, 72, ?2)",
        params![ids[0], p],
    )
    .unwrap();
    hold(&conn, ids[0], 1, Money(600), Money(800), 12.0).unwrap();
    assert_eq!(info(12.0).available, Money(400));
    assert_eq!(info(25.0).available, Money::ZERO, "expired");
    assert_eq!(info(25.0).held, Money(600), "the hold stays");
    assert_eq!(settle(&conn, 1, Money(250), 25.0).unwrap(), Money(250));
    let i = info(25.0);
    assert_eq!((i.available, i.held, i.charged), (Money::ZERO, Money::ZERO, Money(250)));
    assert_eq!(i.allocations[0].remaining, Money(750), "released to the expired allocation");
    // Lasting credit is still available after the allocation's end.
    projects::deposit(&conn, "A", Money(300), ids[0], 26.0).unwrap();
    assert_eq!(info(26.0).available, Money(300));
}

/// A deposit past what a balance can hold is refused by its own words and writes nothing: it
/// wrapped round to a negative sum and was refused as "a withdrawal of -92233720368547.00". A
/// running total past it (cumulative deposits, with the credit spent since) is refused too,
/// where it would have wrapped round and read back as a wrong balance.
#[test]
fn a_deposit_past_the_largest_amount_is_refused_and_nothing_wraps_round() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    let most = Money(i64::MAX - 10);
    deposit(&conn, ids[0], most, 0.0).unwrap();
    let e = deposit(&conn, ids[0], Money(11), 1.0).unwrap_err();
    assert!(matches!(e, LedgerError::PastLargest { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("a deposit of 0.11") && !text.contains("withdrawal"), "{text}");
    assert_eq!(balance(&conn, ids[0]).unwrap().available, most, "nothing was written");
    deposit(&conn, ids[0], Money(10), 2.0).unwrap();
    // Spent down to 1.00 by a job: the deposits' running total stays at the largest.
    let spent = Money(i64::MAX - 100);
    hold(&conn, ids[0], 7, spent, spent, 3.0).unwrap();
    assert_eq!(settle(&conn, 7, spent, 3.0).unwrap(), spent);
    let before = balance(&conn, ids[0]).unwrap();
    assert_eq!(before.available, Money(100));
    let e = deposit(&conn, ids[0], Money(1), 4.0).unwrap_err();
    assert!(matches!(e, LedgerError::TotalsPastLargest { .. }), "{e:?}");
    let after = balance(&conn, ids[0]).unwrap();
    assert_eq!(
        (after.available, after.deposited),
        (before.available, before.deposited),
        "nothing was written"
    );
    assert_eq!(balance_from_entries(&conn, ids[0]).ok().map(|t| t.0), Some(i64::MAX));
}

/// A shared account's credit is the sum of its buckets (lasting credit and each allocation):
/// new credit that would take that sum past what an amount can hold is refused, whether
/// deposited, transferred in or allocated, and nothing is written.
#[test]
fn a_shared_accounts_credit_stops_short_of_the_largest_amount() {
    let conn = store::open_memory().unwrap();
    let ids = users(&conn);
    projects::create(&conn, "A", 0.0).unwrap();
    let half = Money(i64::MAX / 2);
    projects::allocate(&conn, "A", half, 0.0, 100.0, ids[0], 0.0).unwrap();
    projects::deposit(&conn, "A", half, ids[0], 1.0).unwrap();
    let p = projects::project_id(&conn, "A").unwrap().unwrap();
    let before = projects::info(&conn, projects::Acct::Project(p), 2.0).unwrap();
    assert_eq!(before.credited, Money(half.0 * 2));
    fn past<T>(r: Result<T, projects::ProjectError>) -> bool {
        matches!(r, Err(projects::ProjectError::Ledger(LedgerError::PastLargest { .. })))
    }
    assert!(past(projects::allocate(&conn, "A", Money(10), 0.0, 100.0, ids[0], 2.0)));
    assert!(past(projects::deposit(&conn, "A", Money(10), ids[0], 2.0)));
    deposit(&conn, ids[0], Money(10), 2.0).unwrap();
    assert!(past(projects::transfer(&conn, "u0", "A", Money(10), ids[0], 2.0)));
    let after = projects::info(&conn, projects::Acct::Project(p), 2.0).unwrap();
    assert_eq!((after.credited, after.available), (before.credited, before.available), "nothing written");
    assert_eq!(balance(&conn, ids[0]).unwrap().available, Money(10), "the transfer took nothing");
    // What fits still goes in; an allocation that has already ended is refused.
    projects::deposit(&conn, "A", Money(1), ids[0], 3.0).unwrap();
    let e = projects::allocate(&conn, "A", Money(1), 0.0, 3.0, ids[0], 4.0).unwrap_err();
    assert!(e.to_string().starts_with("end:"), "{e}");
}
