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
}
