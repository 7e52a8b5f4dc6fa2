//! Accounts (projects) that hold credit, as sites charge them (Gold / Moab Accounting Manager's
//! model): users belong to accounts, each with an optional limit, and a job's quote is held,
//! charged and refunded against the account it was submitted to.
//!
//! Every user keeps their own credit as before, in `ledger`: that is their *personal account*,
//! named after them, a member of no one else, and their default until an administrator sets
//! another. Shared accounts keep their credit in `project_ledger`, split into buckets: the
//! lasting credit (deposits and transfers, `allocation_id` NULL) and one bucket per allocation,
//! credit that can be held only between its start and its end. As in `ledger`, entries are
//! append-only integers and each carries its bucket's running totals:
//!
//! - a bucket's available = credited - holds + releases
//! - a bucket's held      = holds - charges - releases
//! - an account's available = the lasting bucket's + the active allocations' (start <= now < end)
//!
//! A hold draws from the allocation that ends first (use it or lose it), the lasting credit
//! last; a settlement charges the job's buckets in the same order and releases the rest to the
//! bucket it came from, so what an expired allocation gets back stays expired. Holds taken
//! from an allocation before its end stay valid until their jobs settle.
//!
//! A member's limit bounds what their jobs have charged in the account's allocation period (since
//! the start of the latest allocation that has started; all time before any) plus what they
//! hold now.

use crate::ledger::{self, LedgerError};
use crate::store::Cached;
use libra_api::{AccountEntry, AccountInfo, AccountMember, AllocationInfo, MyAccount, UsageQuery, UsageRow};
use libra_core::Money;
use rusqlite::{params, Connection, OptionalExtension};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectError {
    #[error(
        "account: no account is named '{0}' (`libra balance` lists yours; `libra admin account list` all)"
    )]
    NoAccount(String),
    #[error("account: {user} is not a member of account {account}; your accounts: {mine}")]
    NotMember { user: String, account: String, mine: String },
    #[error("user: '{0}' does not exist")]
    NoUser(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<rusqlite::Error> for ProjectError {
    fn from(e: rusqlite::Error) -> Self {
        ProjectError::Ledger(LedgerError::from(e))
    }
}

impl From<ProjectError> for crate::ApiError {
    fn from(e: ProjectError) -> Self {
        use crate::ApiError;
        match e {
            ProjectError::NoAccount(_) | ProjectError::NoUser(_) => ApiError::NotFound(e.to_string()),
            ProjectError::NotMember { .. } => ApiError::Forbidden(e.to_string()),
            ProjectError::Invalid(_) => ApiError::BadRequest(e.to_string()),
            ProjectError::Conflict(_) => ApiError::Conflict(e.to_string()),
            ProjectError::Ledger(LedgerError::Removed(_)) => ApiError::Conflict(e.to_string()),
            ProjectError::Ledger(l @ (LedgerError::Store(_) | LedgerError::StoreFull(_))) => {
                ApiError::from(l)
            }
            ProjectError::Ledger(l) => ApiError::BadRequest(l.to_string()),
        }
    }
}

/// An account: a user's personal one (their `ledger` credit) or a shared one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acct {
    Personal(i64),
    Project(i64),
}

/// The running totals of one bucket: (credited, holds, charges, releases).
type Totals = (i64, i64, i64, i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deposit,
    Transfer,
    Allocation,
    Hold,
    Charge,
    Release,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Deposit => "deposit",
            Kind::Transfer => "transfer",
            Kind::Allocation => "allocation",
            Kind::Hold => "hold",
            Kind::Charge => "charge",
            Kind::Release => "release",
        }
    }
}

/// One bucket of an account: its allocation (None: the lasting credit), whether it can be held
/// now, and its totals.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    alloc: Option<i64>,
    active: bool,
    t: Totals,
}

impl Bucket {
    fn available(&self) -> i64 {
        self.t.0 - self.t.1 + self.t.3
    }
    fn held(&self) -> i64 {
        self.t.1 - self.t.2 - self.t.3
    }
}

fn totals(conn: &Connection, project: i64, alloc: Option<i64>) -> rusqlite::Result<Totals> {
    Ok(conn
        .prepare_cached(
            "SELECT credit_total, hold_total, charge_total, release_total FROM project_ledger \
             WHERE project_id = ?1 AND allocation_id IS ?2 ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![project, alloc], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?
        .unwrap_or((0, 0, 0, 0)))
}

#[allow(clippy::too_many_arguments)]
fn append(
    conn: &Connection,
    project: i64,
    alloc: Option<i64>,
    user: Option<i64>,
    job: Option<u64>,
    kind: Kind,
    amount: i64,
    now: f64,
) -> Result<(), LedgerError> {
    let mut t = totals(conn, project, alloc)?;
    let slot = match kind {
        Kind::Deposit | Kind::Transfer | Kind::Allocation => &mut t.0,
        Kind::Hold => &mut t.1,
        Kind::Charge => &mut t.2,
        Kind::Release => &mut t.3,
    };
    // Checked: a total that wrapped round would read back as a wrong balance.
    *slot = slot.checked_add(amount).ok_or(LedgerError::TotalsPastLargest { amount: Money(amount) })?;
    conn.prepare_cached(
        "INSERT INTO project_ledger(project_id, allocation_id, user_id, job, kind, amount, time, \
         credit_total, hold_total, charge_total, release_total) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        project,
        alloc,
        user,
        job.map(|j| j as i64),
        kind.as_str(),
        amount,
        now,
        t.0,
        t.1,
        t.2,
        t.3
    ])?;
    Ok(())
}

/// Refuses new credit (a deposit, a transfer in, an allocation) that would take the account's
/// credit, summed over its buckets, past what an amount can hold: every balance shown is such a
/// sum, and one that wrapped round would be wrong.
fn room_for(conn: &Connection, p: i64, name: &str, amount: Money, now: f64) -> Result<(), LedgerError> {
    let bs = buckets(conn, p, now)?;
    let credited: i128 = bs.iter().map(|b| i128::from(b.t.0)).sum();
    if credited + i128::from(amount.0) > i128::from(i64::MAX) {
        let available = Money(available_of(&bs));
        return Err(LedgerError::PastLargest { user: format!("account {name}"), amount, available });
    }
    Ok(())
}

/// Every bucket of an account, in the order holds draw from them: allocations ending first,
/// the lasting credit last.
fn buckets(conn: &Connection, project: i64, now: f64) -> rusqlite::Result<Vec<Bucket>> {
    let allocs: Vec<(i64, f64, f64)> = conn
        .prepare_cached("SELECT id, start, end FROM allocations WHERE project_id = ?1 ORDER BY end, id")?
        .query_map(params![project], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut v = Vec::with_capacity(allocs.len() + 1);
    for (id, start, end) in allocs {
        v.push(Bucket {
            alloc: Some(id),
            active: start <= now && now < end,
            t: totals(conn, project, Some(id))?,
        });
    }
    v.push(Bucket { alloc: None, active: true, t: totals(conn, project, None)? });
    Ok(v)
}

fn available_of(bs: &[Bucket]) -> i64 {
    bs.iter().filter(|b| b.active).map(Bucket::available).sum()
}

pub fn project_id(conn: &Connection, name: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT id FROM projects WHERE name = ?1")?
        .query_row(params![name], |r| r.get(0))
        .optional()
}

fn project_name(conn: &Connection, id: i64) -> rusqlite::Result<String> {
    conn.prepare_cached("SELECT name FROM projects WHERE id = ?1")?.query_row(params![id], |r| r.get(0))
}

fn user_name(conn: &Connection, id: i64) -> rusqlite::Result<String> {
    conn.prepare_cached("SELECT name FROM users WHERE id = ?1")?.query_row(params![id], |r| r.get(0))
}

fn user_by_name(conn: &Connection, name: &str) -> Result<i64, ProjectError> {
    conn.prepare_cached("SELECT id FROM users WHERE name = ?1")?
        .query_row(params![name], |r| r.get(0))
        .optional()?
        .ok_or_else(|| ProjectError::NoUser(name.to_string()))
}

/// The account named `name`: a shared one, else the personal account of the user of that name
/// (the two never share a name).
pub fn resolve(conn: &Connection, name: &str) -> Result<Acct, ProjectError> {
    if let Some(p) = project_id(conn, name)? {
        return Ok(Acct::Project(p));
    }
    match conn
        .prepare_cached("SELECT id FROM users WHERE name = ?1")?
        .query_row(params![name], |r| r.get(0))
        .optional()?
    {
        Some(u) => Ok(Acct::Personal(u)),
        None => Err(ProjectError::NoAccount(name.to_string())),
    }
}

/// The shared account a job is charged to (None: its owner's personal account, or no such job).
pub fn job_project(conn: &Connection, job: u64) -> rusqlite::Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT project_id FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten())
}

fn job_owner(conn: &Connection, job: u64) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT user_id FROM jobs WHERE id = ?1")?
        .query_row(params![job as i64], |r| r.get(0))
}

/// Whether `user` is a member of `project`, and their limit.
fn membership(conn: &Connection, project: i64, user: i64) -> rusqlite::Result<Option<Option<Money>>> {
    conn.prepare_cached("SELECT limit_cents FROM project_members WHERE project_id = ?1 AND user_id = ?2")?
        .query_row(params![project, user], |r| Ok(r.get::<_, Option<i64>>(0)?.map(Money)))
        .optional()
}

/// When the account's allocation period started: the start of the latest allocation that has
/// started (None: none has, the period is all time).
fn period_start(conn: &Connection, project: i64, now: f64) -> rusqlite::Result<Option<f64>> {
    conn.prepare_cached("SELECT MAX(start) FROM allocations WHERE project_id = ?1 AND start <= ?2")?
        .query_row(params![project, now], |r| r.get(0))
}

/// What counts against `user`'s limit in `project`: charged in the period plus held now.
fn used(conn: &Connection, project: i64, user: i64, now: f64) -> rusqlite::Result<Money> {
    let since = period_start(conn, project, now)?.unwrap_or(f64::NEG_INFINITY);
    let (charged, held): (i64, i64) = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(CASE WHEN kind = 'charge' AND time >= ?3 THEN amount END), 0), \
             COALESCE(SUM(CASE kind WHEN 'hold' THEN amount WHEN 'charge' THEN -amount WHEN 'release' THEN -amount END), 0) \
             FROM project_ledger WHERE project_id = ?1 AND user_id = ?2 AND job IS NOT NULL",
        )?
        .query_row(params![project, user, since], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(Money(charged + held))
}

/// What `user`'s jobs may still hold against `project` now: the account's available credit,
/// or what is left of the user's limit when that is less.
pub fn available_to(conn: &Connection, project: i64, user: i64, now: f64) -> rusqlite::Result<Money> {
    let avail = available_of(&buckets(conn, project, now)?);
    Ok(match membership(conn, project, user)?.flatten() {
        Some(limit) => Money(avail.min((limit - used(conn, project, user, now)?).0.max(0))),
        None => Money(avail),
    })
}

/// Takes `amount` from the account's available credit for `job` of `user`, or refuses (nothing
/// written) naming what is short: the user's limit or the account's credit.
fn draw(
    conn: &Connection,
    project: i64,
    user: i64,
    job: u64,
    amount: Money,
    now: f64,
) -> Result<(), LedgerError> {
    if let Some(limit) = membership(conn, project, user)?.flatten() {
        let u = used(conn, project, user, now)?;
        if u + amount > limit {
            return Err(LedgerError::LimitShort {
                user: user_name(conn, user)?,
                account: project_name(conn, project)?,
                limit,
                used: u,
                left: Money((limit - u).0.max(0)),
                needed: amount,
            });
        }
    }
    let bs = buckets(conn, project, now)?;
    let available = Money(available_of(&bs));
    if available < amount {
        return Err(LedgerError::AccountShort {
            account: project_name(conn, project)?,
            available,
            needed: amount,
        });
    }
    // A zero hold is written too, so a free job has an open (empty) hold like any other.
    if amount.0 == 0 {
        append(conn, project, None, Some(user), Some(job), Kind::Hold, 0, now)?;
        return Ok(());
    }
    let mut left = amount.0;
    for b in bs.iter().filter(|b| b.active) {
        let take = left.min(b.available());
        if take > 0 {
            append(conn, project, b.alloc, Some(user), Some(job), Kind::Hold, take, now)?;
            left -= take;
        }
        if left == 0 {
            break;
        }
    }
    Ok(())
}

/// A job's open holds per bucket, in draw order (allocations ending first, lasting last).
fn job_buckets(conn: &Connection, project: i64, job: u64) -> rusqlite::Result<Vec<(Option<i64>, i64)>> {
    let mut v: Vec<(Option<i64>, i64, f64)> = conn
        .prepare_cached(
            "SELECT l.allocation_id, SUM(CASE l.kind WHEN 'hold' THEN l.amount ELSE -l.amount END), \
             COALESCE((SELECT a.end FROM allocations a WHERE a.id = l.allocation_id), 1e308) \
             FROM project_ledger l WHERE l.job = ?1 AND l.project_id = ?2 GROUP BY l.allocation_id",
        )?
        .query_map(params![job as i64, project], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    v.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    Ok(v.into_iter().map(|(a, h, _)| (a, h)).collect())
}

/// The job's owner and what is still held for it (None: nothing was ever held).
pub fn open_hold(conn: &Connection, project: i64, job: u64) -> rusqlite::Result<Option<(i64, Money)>> {
    let bs = job_buckets(conn, project, job)?;
    if bs.is_empty() {
        return Ok(None);
    }
    Ok(Some((job_owner(conn, job)?, Money(bs.iter().map(|b| b.1).sum()))))
}

pub fn hold(
    conn: &Connection,
    project: i64,
    user: i64,
    job: u64,
    amount: Money,
    now: f64,
) -> Result<(), LedgerError> {
    draw(conn, project, user, job, amount, now)
}

/// Raises a job's hold by `more`, within its owner's limit and the account's credit.
pub fn raise(conn: &Connection, project: i64, job: u64, more: Money, now: f64) -> Result<(), LedgerError> {
    draw(conn, project, job_owner(conn, job)?, job, more, now)
}

/// Gives back `amount` of a job's hold: to the lasting credit first, then to the allocations
/// ending last (where it is most likely still of use).
pub fn release(
    conn: &Connection,
    project: i64,
    job: u64,
    amount: Money,
    now: f64,
) -> Result<(), LedgerError> {
    let user = job_owner(conn, job)?;
    let mut left = amount.0;
    for (alloc, held) in job_buckets(conn, project, job)?.into_iter().rev() {
        let give = left.min(held);
        if give > 0 {
            append(conn, project, alloc, Some(user), Some(job), Kind::Release, give, now)?;
            left -= give;
        }
    }
    Ok(())
}

/// Settles a job's hold: `charge` (clamped to what is held) is captured from its buckets in
/// draw order and the rest released to each. Returns what was charged.
pub fn settle(
    conn: &Connection,
    project: i64,
    job: u64,
    charge: Money,
    now: f64,
) -> Result<Money, LedgerError> {
    let bs = job_buckets(conn, project, job)?;
    let held: i64 = bs.iter().map(|b| b.1).sum();
    if held <= 0 {
        return Ok(Money::ZERO);
    }
    let user = job_owner(conn, job)?;
    let charge = charge.0.clamp(0, held);
    let mut left = charge;
    for (alloc, h) in bs {
        if h <= 0 {
            continue;
        }
        let c = left.min(h);
        if c > 0 {
            append(conn, project, alloc, Some(user), Some(job), Kind::Charge, c, now)?;
            left -= c;
        }
        if h - c > 0 {
            append(conn, project, alloc, Some(user), Some(job), Kind::Release, h - c, now)?;
        }
    }
    Ok(Money(charge))
}

/// Which account a submission of `user` is charged to: `account` if the user is a member (or
/// it is their own name), else their default. None: their personal account.
pub fn for_submission(
    conn: &Connection,
    user: i64,
    user_name: &str,
    account: Option<&str>,
) -> Result<Option<i64>, ProjectError> {
    let Some(name) = account else {
        return Ok(default_project(conn, user)?);
    };
    if name == user_name {
        return Ok(None);
    }
    match resolve(conn, name) {
        Ok(Acct::Project(p)) if membership(conn, p, user)?.is_some() => Ok(Some(p)),
        // An account that does not exist is answered as one the user is not in: the names of
        // other accounts are not the user's business.
        Ok(_) | Err(ProjectError::NoAccount(_)) => Err(not_member(conn, user, user_name, name)?),
        Err(e) => Err(e),
    }
}

fn not_member(conn: &Connection, user: i64, user_name: &str, name: &str) -> rusqlite::Result<ProjectError> {
    let mut mine = vec![user_name.to_string()];
    mine.extend(member_of(conn, user)?.into_iter().map(|(_, n)| n));
    Ok(ProjectError::NotMember { user: user_name.into(), account: name.into(), mine: mine.join(", ") })
}

fn default_project(conn: &Connection, user: i64) -> rusqlite::Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT default_project FROM users WHERE id = ?1")?
        .query_row(params![user], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten())
}

/// The shared accounts `user` is a member of, by name.
fn member_of(conn: &Connection, user: i64) -> rusqlite::Result<Vec<(i64, String)>> {
    conn.prepare_cached(
        "SELECT p.id, p.name FROM project_members m JOIN projects p ON p.id = m.project_id \
         WHERE m.user_id = ?1 ORDER BY p.name",
    )?
    .query_map(params![user], |r| Ok((r.get(0)?, r.get(1)?)))?
    .collect()
}

fn valid_name(what: &str, name: &str) -> Result<(), ProjectError> {
    if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ProjectError::Invalid(format!(
            "{what}: '{name}' is not accepted: give 1 to 64 letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

pub fn create(conn: &Connection, name: &str, now: f64) -> Result<AccountInfo, ProjectError> {
    valid_name("name", name)?;
    if project_id(conn, name)?.is_some() {
        return Err(ProjectError::Conflict(format!("name: account '{name}' already exists")));
    }
    if conn.prepare_cached("SELECT 1 FROM users WHERE name = ?1")?.exists(params![name])? {
        return Err(ProjectError::Conflict(format!(
            "name: '{name}' is the personal account of user {name}; choose another name"
        )));
    }
    conn.exec("INSERT INTO projects(name, created) VALUES (?1, ?2)", params![name, now])?;
    info(conn, Acct::Project(conn.last_insert_rowid()), now)
}

/// Whether a shared account has this name (a new user may not take it).
pub fn name_taken(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    Ok(project_id(conn, name)?.is_some())
}

fn shared(conn: &Connection, name: &str, what: &str) -> Result<i64, ProjectError> {
    match resolve(conn, name)? {
        Acct::Project(p) => Ok(p),
        Acct::Personal(_) => Err(ProjectError::Invalid(format!(
            "account: '{name}' is a personal account: {what} only a shared account (`libra admin account create`)"
        ))),
    }
}

/// Adds `user` to the account (or changes their limit if they are a member).
pub fn add_user(
    conn: &Connection,
    name: &str,
    user: &str,
    limit: Option<Money>,
    make_default: bool,
    now: f64,
) -> Result<AccountInfo, ProjectError> {
    let p = shared(conn, name, "users are added to")?;
    let u = user_by_name(conn, user)?;
    let removed: bool = conn.row("SELECT removed FROM users WHERE id = ?1", params![u], |r| r.get(0))?;
    if removed {
        return Err(ProjectError::Conflict(format!("user: {user} was removed; nothing can change it")));
    }
    if limit.is_some_and(|l| l.is_negative()) {
        return Err(ProjectError::Invalid(format!(
            "limit: {} is not accepted: give zero or more credits",
            limit.unwrap_or_default()
        )));
    }
    conn.exec(
        "INSERT INTO project_members(project_id, user_id, limit_cents, added) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT(project_id, user_id) DO UPDATE SET limit_cents = excluded.limit_cents",
        params![p, u, limit.map(|l| l.0), now],
    )?;
    if make_default {
        conn.exec("UPDATE users SET default_project = ?2 WHERE id = ?1", params![u, p])?;
    }
    info(conn, Acct::Project(p), now)
}

/// Removes `user` from the account: their new jobs can no longer be charged to it (their jobs
/// already accepted keep their holds and settle against it). If it was their default, their
/// personal account is again.
pub fn remove_user(conn: &Connection, name: &str, user: &str, now: f64) -> Result<AccountInfo, ProjectError> {
    let p = shared(conn, name, "users are removed from")?;
    let u = user_by_name(conn, user)?;
    let n = conn.exec("DELETE FROM project_members WHERE project_id = ?1 AND user_id = ?2", params![p, u])?;
    if n == 0 {
        return Err(ProjectError::Invalid(format!("user: {user} is not a member of account {name}")));
    }
    conn.exec(
        "UPDATE users SET default_project = NULL WHERE id = ?1 AND default_project = ?2",
        params![u, p],
    )?;
    info(conn, Acct::Project(p), now)
}

/// Makes `name` the default account of `user` (their own name: their personal account).
pub fn set_default(conn: &Connection, name: &str, user: &str, now: f64) -> Result<AccountInfo, ProjectError> {
    let u = user_by_name(conn, user)?;
    let acct = resolve(conn, name)?;
    match acct {
        Acct::Personal(owner) if owner == u => {
            conn.exec("UPDATE users SET default_project = NULL WHERE id = ?1", params![u])?;
        }
        Acct::Personal(_) => {
            return Err(ProjectError::Invalid(format!(
                "account: '{name}' is another user's personal account; {user}'s default can be {user} or a shared account they are a member of"
            )))
        }
        Acct::Project(p) => {
            if membership(conn, p, u)?.is_none() {
                return Err(ProjectError::Invalid(format!(
                    "user: {user} is not a member of account {name}; add them first (`libra admin account add-user {name} {user}`)"
                )));
            }
            conn.exec("UPDATE users SET default_project = ?2 WHERE id = ?1", params![u, p])?;
        }
    }
    info(conn, acct, now)
}

/// A deposit (positive) or withdrawal (negative, never below zero available) of lasting credit.
pub fn deposit(
    conn: &Connection,
    name: &str,
    amount: Money,
    actor: i64,
    now: f64,
) -> Result<AccountInfo, ProjectError> {
    let acct = resolve(conn, name)?;
    match acct {
        Acct::Personal(u) => {
            ledger::deposit(conn, u, amount, now)?;
        }
        Acct::Project(p) => {
            let lasting = totals(conn, p, None)?;
            let available = Money(lasting.0 - lasting.1 + lasting.3);
            let Some(after) = available.0.checked_add(amount.0) else {
                return Err(
                    LedgerError::PastLargest { user: format!("account {name}"), amount, available }.into()
                );
            };
            if amount.0 > 0 {
                room_for(conn, p, name, amount, now)?;
            }
            if after < 0 {
                let withdrawn = Money(amount.0.saturating_neg());
                return Err(
                    LedgerError::Overdraw { user: format!("account {name}"), withdrawn, available }.into()
                );
            }
            append(conn, p, None, Some(actor), None, Kind::Deposit, amount.0, now)?;
        }
    }
    info(conn, acct, now)
}

/// Moves lasting credit from one account to another: what leaves one enters the other, in the
/// same transaction. Allocation credit does not move (it belongs to its account's period).
pub fn transfer(
    conn: &Connection,
    from: &str,
    to: &str,
    amount: Money,
    actor: i64,
    now: f64,
) -> Result<(AccountInfo, AccountInfo), ProjectError> {
    if amount.0 <= 0 {
        return Err(ProjectError::Invalid(format!(
            "amount: {amount} is not accepted: give more than zero credits"
        )));
    }
    let (a, b) = (resolve(conn, from)?, resolve(conn, to)?);
    if a == b {
        return Err(ProjectError::Invalid(format!("to: the same account as from ({from})")));
    }
    if let Acct::Project(p) = b {
        room_for(conn, p, to, amount, now)?;
    }
    match a {
        Acct::Personal(u) => {
            let available = ledger::balance(conn, u)?.available;
            if available < amount {
                return Err(ProjectError::Invalid(format!(
                    "amount: {from} has {available} available, less than the {amount} to transfer"
                )));
            }
            ledger::deposit(conn, u, Money(-amount.0), now)?;
        }
        Acct::Project(p) => {
            let lasting = totals(conn, p, None)?;
            let available = Money(lasting.0 - lasting.1 + lasting.3);
            if available < amount {
                let allocated = Money(available_of(&buckets(conn, p, now)?)) - available;
                return Err(ProjectError::Invalid(format!(
                    "amount: account {from} has {available} of lasting credit available, less than the {amount} to transfer{}",
                    if allocated.0 > 0 { format!(" ({allocated} more is allocation credit, which stays with its account)") } else { String::new() }
                )));
            }
            append(conn, p, None, Some(actor), None, Kind::Transfer, -amount.0, now)?;
        }
    }
    match b {
        Acct::Personal(u) => {
            ledger::deposit(conn, u, amount, now)?;
        }
        Acct::Project(p) => append(conn, p, None, Some(actor), None, Kind::Transfer, amount.0, now)?,
    }
    Ok((info(conn, a, now)?, info(conn, b, now)?))
}

/// Credit the account can hold only in `[start, end)`.
pub fn allocate(
    conn: &Connection,
    name: &str,
    amount: Money,
    start: f64,
    end: f64,
    actor: i64,
    now: f64,
) -> Result<AccountInfo, ProjectError> {
    let p = shared(conn, name, "allocations are made to")?;
    if amount.0 <= 0 {
        return Err(ProjectError::Invalid(format!(
            "amount: {amount} is not accepted: give more than zero credits"
        )));
    }
    if !start.is_finite() || !end.is_finite() {
        return Err(ProjectError::Invalid("start, end: give both as times".into()));
    }
    if end <= start {
        return Err(ProjectError::Invalid("end: must be after start".into()));
    }
    // Credit that has already expired could never be held: a typo, not an allocation.
    if end <= now {
        return Err(ProjectError::Invalid(format!(
            "end: {end:.0} is not in the future (the server's time is {now:.0}): the allocation could never be used"
        )));
    }
    room_for(conn, p, name, amount, now)?;
    conn.exec(
        "INSERT INTO allocations(project_id, amount, start, end, created) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![p, amount.0, start, end, now],
    )?;
    let alloc = conn.last_insert_rowid();
    append(conn, p, Some(alloc), Some(actor), None, Kind::Allocation, amount.0, now)?;
    info(conn, Acct::Project(p), now)
}

/// An account's credit, allocations and members now.
pub fn info(conn: &Connection, acct: Acct, now: f64) -> Result<AccountInfo, ProjectError> {
    Ok(match acct {
        Acct::Personal(u) => {
            let b = ledger::balance(conn, u)?;
            AccountInfo {
                name: b.user.clone(),
                personal: true,
                available: b.available,
                held: b.held,
                charged: b.charged,
                credited: b.deposited,
                period_start: None,
                allocations: Vec::new(),
                members: vec![AccountMember {
                    user: b.user,
                    limit: None,
                    used: b.held + b.charged,
                    default: default_project(conn, u)?.is_none(),
                }],
            }
        }
        Acct::Project(p) => {
            let bs = buckets(conn, p, now)?;
            let allocations = conn
                .prepare_cached(
                    "SELECT id, amount, start, end FROM allocations WHERE project_id = ?1 ORDER BY start, id",
                )?
                .query_map(params![p], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<Vec<(i64, i64, f64, f64)>, _>>()?
                .into_iter()
                .map(|(id, amount, start, end)| {
                    let b = bs.iter().find(|b| b.alloc == Some(id));
                    AllocationInfo {
                        id: id as u64,
                        amount: Money(amount),
                        start,
                        end,
                        remaining: Money(b.map_or(0, Bucket::available)),
                        active: b.is_some_and(|b| b.active),
                    }
                })
                .collect();
            let members = conn
                .prepare_cached(
                    "SELECT u.id, u.name, m.limit_cents, u.default_project IS ?1 FROM project_members m \
                     JOIN users u ON u.id = m.user_id WHERE m.project_id = ?1 ORDER BY u.name",
                )?
                .query_map(params![p], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<i64>>(2)?, r.get(3)?))
                })?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .map(|(id, user, limit, default)| {
                    Ok(AccountMember {
                        user,
                        limit: limit.map(Money),
                        used: used(conn, p, id, now)?,
                        default,
                    })
                })
                .collect::<rusqlite::Result<_>>()?;
            AccountInfo {
                name: project_name(conn, p)?,
                personal: false,
                available: Money(available_of(&bs)),
                held: Money(bs.iter().map(Bucket::held).sum()),
                charged: Money(bs.iter().map(|b| b.t.2).sum()),
                credited: Money(bs.iter().map(|b| b.t.0).sum()),
                period_start: period_start(conn, p, now)?,
                allocations,
                members,
            }
        }
    })
}

/// Every shared account, by name.
pub fn list(conn: &Connection, now: f64) -> Result<Vec<AccountInfo>, ProjectError> {
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM projects ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    ids.into_iter().map(|p| info(conn, Acct::Project(p), now)).collect()
}

/// `user`'s accounts: their personal one first, then the shared ones by name.
pub fn mine(conn: &Connection, user: i64, now: f64) -> Result<Vec<MyAccount>, ProjectError> {
    let default = default_project(conn, user)?;
    let personal = info(conn, Acct::Personal(user), now)?;
    let mut v = vec![MyAccount {
        limit: None,
        used: personal.held + personal.charged,
        available_to_me: personal.available,
        default: default.is_none(),
        account: personal,
    }];
    for (p, _) in member_of(conn, user)? {
        let limit = membership(conn, p, user)?.flatten();
        let account = info(conn, Acct::Project(p), now)?;
        v.push(MyAccount {
            limit,
            used: used(conn, p, user, now)?,
            available_to_me: available_to(conn, p, user, now)?,
            default: default == Some(p),
            account,
        });
    }
    Ok(v)
}

/// Account `name` as `(user, user_name, admin)` may see it, and whether `user` is a member (a
/// personal account's member is its user): an account the user is not in is refused exactly
/// like one that does not exist (naming only the user's own accounts); an administrator sees
/// every account.
fn visible(
    conn: &Connection,
    (user, user_name, admin): (i64, &str, bool),
    name: &str,
) -> Result<(Acct, bool), ProjectError> {
    let acct = match resolve(conn, name) {
        Ok(a) => Some(a),
        Err(ProjectError::NoAccount(_)) if !admin => None,
        Err(e) => return Err(e),
    };
    let member = match acct {
        Some(Acct::Personal(u)) => u == user,
        Some(Acct::Project(p)) => membership(conn, p, user)?.is_some(),
        None => false,
    };
    match acct.filter(|_| member || admin) {
        Some(acct) => Ok((acct, member)),
        None => Err(not_member(conn, user, user_name, name)?),
    }
}

/// One account as `user` sees it: theirs (personal or a member's), refused otherwise unless
/// `admin` (an account that does not exist is refused as one the user is not in).
pub fn one(
    conn: &Connection,
    user: i64,
    user_name: &str,
    admin: bool,
    name: &str,
    now: f64,
) -> Result<MyAccount, ProjectError> {
    let (acct, member) = visible(conn, (user, user_name, admin), name)?;
    let account = info(conn, acct, now)?;
    let default = default_project(conn, user)?;
    Ok(match acct {
        Acct::Project(p) if member => MyAccount {
            limit: membership(conn, p, user)?.flatten(),
            used: used(conn, p, user, now)?,
            available_to_me: available_to(conn, p, user, now)?,
            default: default == Some(p),
            account,
        },
        Acct::Project(_) => MyAccount {
            limit: None,
            used: Money::ZERO,
            available_to_me: Money::ZERO,
            default: false,
            account,
        },
        Acct::Personal(u) => MyAccount {
            limit: None,
            used: account.held + account.charged,
            available_to_me: if u == user { account.available } else { Money::ZERO },
            default: u == user && default.is_none(),
            account,
        },
    })
}

/// An account's ledger, newest first (at most `limit` entries), for `user` if it is theirs or
/// for an administrator (refused as `one` refuses). A personal account's entries are its
/// user's `ledger` entries.
pub fn entries(
    conn: &Connection,
    user: i64,
    user_name: &str,
    admin: bool,
    name: &str,
    limit: u32,
) -> Result<Vec<AccountEntry>, ProjectError> {
    let (acct, _) = visible(conn, (user, user_name, admin), name)?;
    Ok(match acct {
        Acct::Personal(u) => ledger::entries(conn, Some(u), limit)?
            .into_iter()
            .map(|e| AccountEntry {
                id: e.id,
                time: e.time,
                kind: format!("{:?}", e.kind).to_lowercase(),
                user: Some(e.user),
                job: e.job,
                allocation: None,
                amount: e.amount,
            })
            .collect(),
        Acct::Project(p) => conn
            .prepare_cached(
                "SELECT l.id, l.time, l.kind, u.name, l.job, l.allocation_id, l.amount FROM project_ledger l \
                 LEFT JOIN users u ON u.id = l.user_id WHERE l.project_id = ?1 ORDER BY l.id DESC LIMIT ?2",
            )?
            .query_map(params![p, limit], |r| {
                Ok(AccountEntry {
                    id: r.get::<_, i64>(0)? as u64,
                    time: r.get(1)?,
                    kind: r.get(2)?,
                    user: r.get(3)?,
                    job: r.get::<_, Option<i64>>(4)?.map(|j| j as u64),
                    allocation: r.get::<_, Option<i64>>(5)?.map(|a| a as u64),
                    amount: Money(r.get(6)?),
                })
            })?
            .collect::<Result<_, _>>()?,
    })
}

/// Jobs, CPU hours and what was charged, per UTC day, user and account, filtered.
pub fn usage(conn: &Connection, q: &UsageQuery) -> Result<Vec<UsageRow>, ProjectError> {
    if let Some(a) = &q.account {
        resolve(conn, a)?;
    }
    if let Some(u) = &q.user {
        user_by_name(conn, u)?;
    }
    if let (Some(s), Some(u)) = (q.since, q.until) {
        if u <= s {
            return Err(ProjectError::Invalid("until: must be after since".into()));
        }
    }
    let mut st = conn.prepare_cached(
        "SELECT date(j.submit_time, 'unixepoch'), u.name, COALESCE(p.name, u.name), COUNT(*), SUM(j.state = 'COMPLETED'), \
         SUM(j.cpu_seconds) / 3600.0, SUM(j.charged) FROM jobs j JOIN users u ON u.id = j.user_id \
         LEFT JOIN projects p ON p.id = j.project_id \
         WHERE (?1 IS NULL OR COALESCE(p.name, u.name) = ?1) AND (?2 IS NULL OR u.name = ?2) \
         AND (?3 IS NULL OR j.submit_time >= ?3) AND (?4 IS NULL OR j.submit_time < ?4) \
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    )?;
    let rows = st.query_map(params![q.account, q.user, q.since, q.until], |r| {
        Ok(UsageRow {
            period: r.get(0)?,
            user: r.get(1)?,
            account: r.get(2)?,
            jobs: r.get::<_, i64>(3)? as u64,
            completed: r.get::<_, i64>(4)? as u64,
            cpu_hours: r.get::<_, Option<f64>>(5)?.unwrap_or(0.0),
            revenue: Money(r.get::<_, Option<i64>>(6)?.unwrap_or(0)),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A shared account's bucket totals summed from the entries themselves, and its running totals
/// (what the two must agree on).
#[cfg(test)]
pub(crate) fn check_totals(conn: &Connection, project: i64) -> rusqlite::Result<Vec<(Totals, Totals)>> {
    let allocs: Vec<Option<i64>> = conn
        .prepare("SELECT DISTINCT allocation_id FROM project_ledger WHERE project_id = ?1")?
        .query_map(params![project], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    allocs
        .into_iter()
        .map(|a| {
            let summed = conn.query_row(
                "SELECT COALESCE(SUM(CASE WHEN kind IN ('deposit','transfer','allocation') THEN amount END), 0), \
                 COALESCE(SUM(CASE kind WHEN 'hold' THEN amount END), 0), COALESCE(SUM(CASE kind WHEN 'charge' THEN amount END), 0), \
                 COALESCE(SUM(CASE kind WHEN 'release' THEN amount END), 0) FROM project_ledger WHERE project_id = ?1 AND allocation_id IS ?2",
                params![project, a],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
            Ok((summed, totals(conn, project, a)?))
        })
        .collect()
}

/// What `caller` did with idempotency key `key` on the shared accounts (`record_request`'s
/// `what`), if the key was used.
pub fn request(conn: &Connection, caller: i64, key: &str) -> rusqlite::Result<Option<String>> {
    conn.row("SELECT what FROM account_requests WHERE caller = ?1 AND key = ?2", params![caller, key], |r| {
        r.get(0)
    })
    .optional()
}

/// Records that `caller` does `what` with idempotency key `key` (in the transaction of the
/// change itself, so that both are kept or neither).
pub fn record_request(
    conn: &Connection,
    caller: i64,
    key: &str,
    what: &str,
    now: f64,
) -> rusqlite::Result<()> {
    conn.exec(
        "INSERT INTO account_requests(caller, key, what, time) VALUES (?1, ?2, ?3, ?4)",
        params![caller, key, what, now],
    )?;
    Ok(())
}
