//! The credit ledger: append-only integer entries (deposit, hold, charge, release), the quote ->
//! lien -> charge -> refund cycle. Balances are sums over the entries, never stored numbers:
//!
//! - available = deposits - holds + releases
//! - held      = holds - charges - releases
//!
//! Each entry also carries the user's running totals after it, so reading a balance is one
//! indexed row however long the history.
//!
//! Invariants kept here (and property-tested): available never goes below zero (a hold or a
//! withdrawal that would take it there is refused); a job's charge plus its release equal its
//! hold exactly, and the hold never exceeds the job's budget, so no one is charged above it.

use crate::projects;
use crate::store::Cached;
use libra_api::{Balance, LedgerEntry, LedgerKind};
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("credit: {user} has {available} available, the job needs {needed} on hold; ask an administrator for credit or lower the budget")]
    Insufficient { user: String, available: Money, needed: Money },
    #[error("amount: {0} is not accepted: the hold must be between 0 and the job's budget {1}")]
    AboveBudget(Money, Money),
    /// A hold that, with what the job was charged already, could take its charges past its
    /// budget (a settled job's hold raised again).
    #[error("amount: a hold of {to} would let the job be charged past its budget {budget}: {charged} is charged already")]
    PastBudget { to: Money, budget: Money, charged: Money },
    /// `withdrawn` is the amount taken out (> 0).
    #[error(
        "amount: a withdrawal of {withdrawn} would take {user}'s available credit {available} below zero"
    )]
    Overdraw { user: String, withdrawn: Money, available: Money },
    /// A deposit past what a balance can hold (an i64 of cents): refused, where adding it would
    /// have wrapped round (a negative balance, or the overdraw refusal's words for a deposit).
    #[error("amount: a deposit of {amount} would take {user}'s available credit {available} past the largest amount the ledger holds, {}", Money(i64::MAX))]
    PastLargest { user: String, amount: Money, available: Money },
    /// A running total past what the ledger can hold: nothing is written.
    #[error(
        "amount: {amount} would take the ledger's running totals past the largest amount they hold, {}",
        Money(i64::MAX)
    )]
    TotalsPastLargest { amount: Money },
    #[error("credit: account {account} has {available} available, the job needs {needed} on hold; ask an administrator for credit, charge another account (--account) or lower the budget")]
    AccountShort { account: String, available: Money, needed: Money },
    #[error("limit: {user} may have at most {limit} charged and held against account {account} in its allocation period; {used} is used, {left} is left, the job needs {needed} on hold; ask an administrator to raise the limit, or charge another account (--account)")]
    LimitShort { user: String, account: String, limit: Money, used: Money, left: Money, needed: Money },
    /// Credit given to a removed user could never be used (they cannot log in again).
    #[error("user: {0} was removed: credit can only be taken back from them (a negative amount), not given")]
    Removed(String),
    #[error("job {0} has no open hold")]
    NoHold(u64),
    #[error("store: {0}")]
    Store(String),
    /// The store's disk is full (`store::is_disk_full`): nothing could be written.
    #[error("store: {0}")]
    StoreFull(String),
}

impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        if crate::store::is_disk_full(&e) {
            LedgerError::StoreFull(e.to_string())
        } else {
            LedgerError::Store(e.to_string())
        }
    }
}

fn kind_str(k: LedgerKind) -> &'static str {
    match k {
        LedgerKind::Deposit => "deposit",
        LedgerKind::Hold => "hold",
        LedgerKind::Charge => "charge",
        LedgerKind::Release => "release",
    }
}

fn append(
    conn: &Connection,
    user: i64,
    job: Option<u64>,
    kind: LedgerKind,
    amount: Money,
    now: f64,
) -> Result<(), LedgerError> {
    let mut t = totals(conn, user)?;
    let slot = match kind {
        LedgerKind::Deposit => &mut t.0,
        LedgerKind::Hold => &mut t.1,
        LedgerKind::Charge => &mut t.2,
        LedgerKind::Release => &mut t.3,
    };
    // Checked: a total that wrapped round would read back as a wrong balance.
    *slot = slot.checked_add(amount.0).ok_or(LedgerError::TotalsPastLargest { amount })?;
    conn.prepare_cached(
        "INSERT INTO ledger(user_id, job, kind, amount, time, dep_total, hold_total, charge_total, release_total) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![user, job.map(|j| j as i64), kind_str(kind), amount.0, now, t.0, t.1, t.2, t.3])?;
    Ok(())
}

/// (deposits, holds, charges, releases) so far for a user.
fn totals(conn: &Connection, user: i64) -> rusqlite::Result<(i64, i64, i64, i64)> {
    Ok(conn
        .prepare_cached(
            "SELECT dep_total, hold_total, charge_total, release_total FROM ledger WHERE user_id = ?1 ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![user], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?
        .unwrap_or((0, 0, 0, 0)))
}

pub fn balance(conn: &Connection, user: i64) -> rusqlite::Result<Balance> {
    let name: String = conn
        .prepare_cached("SELECT name FROM users WHERE id = ?1")?
        .query_row(params![user], |r| r.get(0))?;
    let (dep, hold, charge, release) = totals(conn, user)?;
    Ok(Balance {
        user: name,
        available: Money(dep - hold + release),
        held: Money(hold - charge - release),
        charged: Money(charge),
        deposited: Money(dep),
    })
}

/// The totals summed from the entries themselves (what the running totals must agree with).
pub fn balance_from_entries(conn: &Connection, user: i64) -> rusqlite::Result<(i64, i64, i64, i64)> {
    conn.row(
        "SELECT COALESCE(SUM(CASE kind WHEN 'deposit' THEN amount END), 0), COALESCE(SUM(CASE kind WHEN 'hold' THEN amount END), 0), \
         COALESCE(SUM(CASE kind WHEN 'charge' THEN amount END), 0), COALESCE(SUM(CASE kind WHEN 'release' THEN amount END), 0) \
         FROM ledger WHERE user_id = ?1",
        params![user],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

fn removed(conn: &Connection, user: i64) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT removed FROM users WHERE id = ?1")?
        .query_row(params![user], |r| r.get::<_, Option<bool>>(0))
        .optional()
        .map(|r| r.flatten().unwrap_or(false))
}

/// A deposit (positive) or a withdrawal (negative) by an administrator.
pub fn deposit(conn: &Connection, user: i64, amount: Money, now: f64) -> Result<Balance, LedgerError> {
    let b = balance(conn, user)?;
    if amount.0 > 0 && removed(conn, user)? {
        return Err(LedgerError::Removed(b.user));
    }
    let Some(after) = b.available.0.checked_add(amount.0) else {
        return Err(LedgerError::PastLargest { user: b.user, amount, available: b.available });
    };
    if after < 0 {
        let withdrawn = Money(amount.0.saturating_neg());
        return Err(LedgerError::Overdraw { user: b.user, withdrawn, available: b.available });
    }
    append(conn, user, None, LedgerKind::Deposit, amount, now)?;
    Ok(balance(conn, user)?)
}

/// The lien placed when a job is accepted.
pub fn hold(
    conn: &Connection,
    user: i64,
    job: u64,
    amount: Money,
    budget: Money,
    now: f64,
) -> Result<(), LedgerError> {
    if amount.is_negative() || amount > budget {
        return Err(LedgerError::AboveBudget(amount, budget));
    }
    if let Some(p) = projects::job_project(conn, job)? {
        return projects::hold(conn, p, user, job, amount, now);
    }
    let b = balance(conn, user)?;
    if b.available < amount {
        return Err(LedgerError::Insufficient { user: b.user, available: b.available, needed: amount });
    }
    append(conn, user, Some(job), LedgerKind::Hold, amount, now)
}

/// What the owner of `job` can still add to its hold now: their available credit, or for a job
/// charged to a shared account, that account's (within the owner's limit in it).
pub fn available_for_job(conn: &Connection, job: u64, now: f64) -> rusqlite::Result<Money> {
    let owner: i64 = conn
        .prepare_cached("SELECT user_id FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get(0))?;
    match projects::job_project(conn, job)? {
        Some(p) => projects::available_to(conn, p, owner, now),
        None => Ok(balance(conn, owner)?.available),
    }
}

/// What is still on hold for a job (its hold minus what was charged or released).
pub fn open_hold(conn: &Connection, job: u64) -> rusqlite::Result<Option<(i64, Money)>> {
    if let Some(p) = projects::job_project(conn, job)? {
        return projects::open_hold(conn, p, job);
    }
    conn.prepare_cached(
        "SELECT user_id, SUM(CASE kind WHEN 'hold' THEN amount ELSE -amount END) FROM ledger \
         WHERE job = ?1 GROUP BY user_id",
    )?
    .query_row(params![job as i64], |r| Ok((r.get(0)?, Money(r.get(1)?))))
    .optional()
}

/// Settles a job's hold: `charge` (clamped to what is held) is captured and the rest released.
/// Returns what was charged. Settling a job twice does nothing the second time.
pub fn settle(conn: &Connection, job: u64, charge: Money, now: f64) -> Result<Money, LedgerError> {
    if let Some(p) = projects::job_project(conn, job)? {
        return projects::settle(conn, p, job, charge, now);
    }
    let Some((user, held)) = open_hold(conn, job)? else {
        return Ok(Money::ZERO);
    };
    if held.0 <= 0 {
        return Ok(Money::ZERO);
    }
    let charge = Money(charge.0.clamp(0, held.0));
    if charge.0 > 0 {
        append(conn, user, Some(job), LedgerKind::Charge, charge, now)?;
    }
    let rest = held - charge;
    if rest.0 > 0 {
        append(conn, user, Some(job), LedgerKind::Release, rest, now)?;
    }
    Ok(charge)
}

/// Charges a settled job `more` for CPU its node reported after the settlement (a job its owner
/// cancelled ran until the node's next exchange killed it): as much of it as the owner's
/// available credit (or the account's) covers, held and captured at once, so that the job's
/// charges and releases still equal its holds. Returns what was charged. The caller bounds
/// `more` by the budget less what the job was charged already.
pub fn charge_settled(conn: &Connection, job: u64, more: Money, now: f64) -> Result<Money, LedgerError> {
    let amount = more.min(available_for_job(conn, job, now)?.max(Money::ZERO));
    if amount.0 <= 0 {
        return Ok(Money::ZERO);
    }
    if let Some(p) = projects::job_project(conn, job)? {
        projects::raise(conn, p, job, amount, now)?;
        return projects::settle(conn, p, job, amount, now);
    }
    let user: i64 = conn
        .prepare_cached("SELECT user_id FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get(0))?;
    append(conn, user, Some(job), LedgerKind::Hold, amount, now)?;
    append(conn, user, Some(job), LedgerKind::Charge, amount, now)?;
    Ok(amount)
}

/// Raises a job's hold to `to` (a running job that overruns its estimate owes more than its
/// quote, up to its budget), taking the difference from the owner's available credit. Refused,
/// with nothing written, when the job's holds would pass its budget or the credit cannot cover
/// the difference: the caller then stops the job rather than let it run unpaid.
pub fn extend_hold(
    conn: &Connection,
    job: u64,
    to: Money,
    budget: Money,
    now: f64,
) -> Result<(), LedgerError> {
    let (user, held) = open_hold(conn, job)?.ok_or(LedgerError::NoHold(job))?;
    // Nothing left on hold: the job has settled (or costs nothing), there is nothing to extend.
    if held.0 <= 0 {
        return Err(LedgerError::NoHold(job));
    }
    if to <= held {
        return Ok(());
    }
    // The open hold is what a settlement can charge: that is what the budget bounds (a job
    // held and released by its owner, or re-priced by `libra update`, has more hold entries).
    let more = to - held;
    if to > budget {
        return Err(LedgerError::AboveBudget(to, budget));
    }
    if let Some(p) = projects::job_project(conn, job)? {
        return projects::raise(conn, p, job, more, now);
    }
    let b = balance(conn, user)?;
    if b.available < more {
        return Err(LedgerError::Insufficient { user: b.user, available: b.available, needed: more });
    }
    append(conn, user, Some(job), LedgerKind::Hold, more, now)?;
    Ok(())
}

/// Sets a job's open hold to `to` (the new price of a changed promise, `libra update`): more is
/// taken from the owner's available credit, less is released. Refused, with nothing written,
/// above the budget or beyond the owner's credit.
pub fn set_hold(conn: &Connection, job: u64, to: Money, budget: Money, now: f64) -> Result<(), LedgerError> {
    if to.is_negative() || to > budget {
        return Err(LedgerError::AboveBudget(to, budget));
    }
    let (user, held) = open_hold(conn, job)?.ok_or(LedgerError::NoHold(job))?;
    // A settled job's open hold is zero: raising it again must still leave its charges, past
    // and to come, within its budget.
    let charged = charged_for_job(conn, job)?;
    if to.0 > budget.0.saturating_sub(charged.0) {
        return Err(LedgerError::PastBudget { to, budget, charged });
    }
    if let Some(p) = projects::job_project(conn, job)? {
        return match to.cmp(&held) {
            std::cmp::Ordering::Greater => projects::raise(conn, p, job, to - held, now),
            std::cmp::Ordering::Less => projects::release(conn, p, job, held - to, now),
            std::cmp::Ordering::Equal => Ok(()),
        };
    }
    if to > held {
        let more = to - held;
        let b = balance(conn, user)?;
        if b.available < more {
            return Err(LedgerError::Insufficient { user: b.user, available: b.available, needed: more });
        }
        append(conn, user, Some(job), LedgerKind::Hold, more, now)?;
    } else if to < held {
        append(conn, user, Some(job), LedgerKind::Release, held - to, now)?;
    }
    Ok(())
}

/// Everything charged for `job` so far, to its owner or to a shared account.
pub fn charged_for_job(conn: &Connection, job: u64) -> rusqlite::Result<Money> {
    conn.prepare_cached(
        "SELECT (SELECT COALESCE(SUM(amount), 0) FROM ledger WHERE job = ?1 AND kind = 'charge') + \
         (SELECT COALESCE(SUM(amount), 0) FROM project_ledger WHERE job = ?1 AND kind = 'charge')",
    )?
    .query_row(params![job as i64], |r| r.get(0))
    .map(Money)
}

/// Lowers a job's open hold to `amount` (a queued job's lien on its whole budget becomes its
/// price once it is dispatched), releasing the difference.
pub fn reduce_hold(conn: &Connection, job: u64, amount: Money, now: f64) -> Result<(), LedgerError> {
    let (user, held) = open_hold(conn, job)?.ok_or(LedgerError::NoHold(job))?;
    if amount.is_negative() || amount > held {
        return Err(LedgerError::AboveBudget(amount, held));
    }
    let rest = held - amount;
    if let Some(p) = projects::job_project(conn, job)? {
        return projects::release(conn, p, job, rest, now);
    }
    if rest.0 > 0 {
        append(conn, user, Some(job), LedgerKind::Release, rest, now)?;
    }
    Ok(())
}

pub fn entries(conn: &Connection, user: Option<i64>, limit: u32) -> rusqlite::Result<Vec<LedgerEntry>> {
    let mut st = conn.prepare_cached(
        "SELECT l.id, u.name, l.job, l.kind, l.amount, l.time FROM ledger l JOIN users u ON u.id = l.user_id \
         WHERE (?1 IS NULL OR l.user_id = ?1) ORDER BY l.id DESC LIMIT ?2",
    )?;
    let rows = st.query_map(params![user, limit], |r| {
        let kind: String = r.get(3)?;
        Ok(LedgerEntry {
            id: r.get::<_, i64>(0)? as u64,
            user: r.get(1)?,
            job: r.get::<_, Option<i64>>(2)?.map(|j| j as u64),
            kind: match kind.as_str() {
                "deposit" => LedgerKind::Deposit,
                "hold" => LedgerKind::Hold,
                "charge" => LedgerKind::Charge,
                _ => LedgerKind::Release,
            },
            amount: Money(r.get(4)?),
            time: r.get(5)?,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests;

/// Everything charged for jobs since the store began.
pub fn charged_total(conn: &Connection) -> rusqlite::Result<Money> {
    conn.query_row("SELECT COALESCE(SUM(amount), 0) FROM ledger WHERE kind = 'charge'", [], |r| r.get(0))
        .map(Money)
}

/// Credit on hold for accepted jobs now, over every user (each user's last entry carries
/// their running totals).
pub fn held_total(conn: &Connection) -> rusqlite::Result<Money> {
    conn.query_row(
        "SELECT COALESCE(SUM(hold_total - charge_total - release_total), 0) FROM ledger \
         WHERE id IN (SELECT MAX(id) FROM ledger GROUP BY user_id)",
        [],
        |r| r.get(0),
    )
    .map(Money)
}
