//! Users and their API tokens.

use crate::auth::Caller;
use crate::store::Cached;
use rusqlite::{params, Connection, OptionalExtension};

/// What a login checks: the user's id, password hash, whether an administrator, and whether
/// locked out (disabled or removed).
pub fn login(db: &Connection, name: &str) -> rusqlite::Result<Option<(i64, String, bool, bool)>> {
    db.row("SELECT id, pw_hash, admin, disabled, removed FROM users WHERE name = ?1", params![name], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, bool>(3)? || r.get::<_, bool>(4)?))
    })
    .optional()
}

pub fn count(db: &Connection) -> rusqlite::Result<i64> {
    db.row("SELECT COUNT(*) FROM users", [], |r| r.get(0))
}

pub fn insert(
    db: &Connection,
    name: &str,
    pw_hash: &str,
    admin: bool,
    unix_user: Option<&str>,
    allow_root: bool,
) -> rusqlite::Result<()> {
    db.exec(
        "INSERT INTO users(name, pw_hash, admin, unix_user, allow_root) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![name, pw_hash, admin, unix_user, allow_root],
    )?;
    Ok(())
}

/// One page of users by name, after `after`: (id, admin, Unix account, allow_root, disabled,
/// removed).
#[allow(clippy::type_complexity)]
pub fn page(
    db: &Connection,
    after: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Vec<(i64, bool, String, bool, bool, bool)>> {
    db.prepare_cached(
        "SELECT id, admin, COALESCE(unix_user, name), allow_root, disabled, removed FROM users \
         WHERE (?1 IS NULL OR name > ?1) ORDER BY name LIMIT ?2",
    )?
    .query_map(params![after, limit], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
    })?
    .collect()
}

/// (id, disabled, removed) of the user named `name`.
pub fn state(db: &Connection, name: &str) -> rusqlite::Result<Option<(i64, bool, bool)>> {
    db.row("SELECT id, disabled, removed FROM users WHERE name = ?1", params![name], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .optional()
}

pub fn enable(db: &Connection, user: i64) -> rusqlite::Result<()> {
    db.exec("UPDATE users SET disabled = 0 WHERE id = ?1", params![user])?;
    Ok(())
}

/// Disables the user (and with `remove`, removes them: no password verifies against theirs
/// again) and revokes every token of theirs, in one transaction. Returns the tokens revoked.
pub fn disable(db: &Connection, user: i64, remove: bool) -> rusqlite::Result<u64> {
    let tx = db.unchecked_transaction()?;
    if remove {
        tx.exec(
            "UPDATE users SET disabled = 1, removed = 1, pw_hash = '!removed' WHERE id = ?1",
            params![user],
        )?;
    } else {
        tx.exec("UPDATE users SET disabled = 1 WHERE id = ?1", params![user])?;
    }
    let revoked = tx.exec("DELETE FROM tokens WHERE user_id = ?1", params![user])? as u64;
    tx.commit()?;
    Ok(revoked)
}

/// The user's jobs that have not ended, oldest first.
pub fn active_jobs(db: &Connection, user: i64) -> rusqlite::Result<Vec<u64>> {
    db.prepare_cached(
        "SELECT id FROM jobs WHERE user_id = ?1 AND state IN ('PENDING','RUNNING','SUSPENDED') ORDER BY id",
    )?
    .query_map(params![user], |r| r.get::<_, i64>(0).map(|v| v as u64))?
    .collect()
}

/// A new password hash, and every token of the user's revoked but `keep` (a digest), in one
/// transaction. Returns the tokens revoked.
pub fn set_password(db: &Connection, user: i64, pw_hash: &str, keep: &str) -> rusqlite::Result<u64> {
    let tx = db.unchecked_transaction()?;
    tx.exec("UPDATE users SET pw_hash = ?2 WHERE id = ?1", params![user, pw_hash])?;
    let revoked = tx.exec("DELETE FROM tokens WHERE user_id = ?1 AND hash != ?2", params![user, keep])?;
    tx.commit()?;
    Ok(revoked as u64)
}

/// How long a token is kept after it expired: its holder is told that it expired (and to log
/// in again), not that it is unknown. Then it goes (`remove_expired_tokens`).
pub const EXPIRED_TOKEN_KEPT: f64 = 7.0 * 86_400.0;

/// Holds `user`'s login tokens (not their sweeps' credentials) to `max`: removes those that
/// expired more than `EXPIRED_TOKEN_KEPT` before `now`, then, while they have more than `max`,
/// the oldest. Run as a login stores a new one: each login stores a token, and without a bound
/// a user logging in again and again would add rows to the store for as long as they liked.
/// Returns how many went (the caller forgets its cached tokens if any did).
pub fn hold_tokens(db: &Connection, user: i64, max: u32, now: f64) -> rusqlite::Result<usize> {
    let expired = db.exec(
        "DELETE FROM tokens WHERE user_id = ?1 AND sweep IS NULL AND expires < ?2",
        params![user, now - EXPIRED_TOKEN_KEPT],
    )?;
    let oldest = db.exec(
        "DELETE FROM tokens WHERE hash IN (SELECT hash FROM tokens WHERE user_id = ?1 AND sweep IS NULL \
         ORDER BY created DESC, rowid DESC LIMIT -1 OFFSET ?2)",
        params![user, max],
    )?;
    Ok(expired + oldest)
}

/// Removes at most `limit` tokens, any user's or sweep's, that expired more than
/// `EXPIRED_TOKEN_KEPT` before `now`. Returns how many went.
pub fn remove_expired_tokens(db: &Connection, now: f64, limit: u32) -> rusqlite::Result<u64> {
    let n = db.exec(
        "DELETE FROM tokens WHERE rowid IN (SELECT rowid FROM tokens WHERE expires < ?1 LIMIT ?2)",
        params![now - EXPIRED_TOKEN_KEPT, limit],
    )?;
    Ok(n as u64)
}

/// Revokes the token with this digest.
pub fn delete_token(db: &Connection, digest: &str) -> rusqlite::Result<()> {
    db.exec("DELETE FROM tokens WHERE hash = ?1", params![digest])?;
    Ok(())
}

/// The name of the token's owner, whether or not the token still works.
pub fn token_owner(db: &Connection, digest: &str) -> rusqlite::Result<Option<String>> {
    db.row(
        "SELECT u.name FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1",
        params![digest],
        |r| r.get(0),
    )
    .optional()
}

/// The caller a token digest names, with whether their account is disabled and removed.
pub fn token_caller(db: &Connection, digest: &str) -> rusqlite::Result<Option<(Caller, bool, bool)>> {
    db.prepare_cached(
        "SELECT u.id, u.name, u.admin, t.sweep, t.expires, u.disabled, u.removed \
         FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1",
    )?
    .query_row(params![digest], |r| {
        Ok((
            Caller {
                id: r.get(0)?,
                name: r.get(1)?,
                admin: r.get(2)?,
                sweep: r.get(3)?,
                expires: r.get::<_, Option<f64>>(4)?.unwrap_or(0.0),
            },
            r.get(5)?,
            r.get(6)?,
        ))
    })
    .optional()
}

pub fn insert_token(
    db: &Connection,
    digest: &str,
    user: i64,
    created: f64,
    expires: f64,
    sweep: Option<i64>,
) -> rusqlite::Result<()> {
    db.exec(
        "INSERT INTO tokens(hash, user_id, created, expires, sweep) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![digest, user, created, expires, sweep],
    )?;
    Ok(())
}

/// The id of the user named `name`, and whether an administrator.
pub fn id_of(db: &Connection, name: &str) -> rusqlite::Result<Option<(i64, bool)>> {
    db.row("SELECT id, admin FROM users WHERE name = ?1", params![name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// The token with this digest belongs to hosted sweep `sweep`.
pub fn bind_sweep_token(db: &Connection, digest: &str, sweep: i64) -> rusqlite::Result<()> {
    db.exec("UPDATE tokens SET sweep = ?2 WHERE hash = ?1", params![digest, sweep])?;
    Ok(())
}

/// Revokes the tokens of hosted sweep `sweep`; returns how many.
pub fn revoke_sweep_tokens(db: &Connection, sweep: i64) -> rusqlite::Result<usize> {
    db.exec("DELETE FROM tokens WHERE sweep = ?1", params![sweep])
}

/// The tokens of hosted sweep `sweep` last at least until `until`.
pub fn extend_sweep_tokens(db: &Connection, sweep: i64, until: f64) -> rusqlite::Result<()> {
    db.exec("UPDATE tokens SET expires = MAX(expires, ?2) WHERE sweep = ?1", params![sweep, until])?;
    Ok(())
}

/// How a credit made with an idempotency key is recorded (`projects::record_request`'s `what`):
/// the amount as `Money` prints it and the user's name. Schema step 24 wrote the credits
/// recorded before it the same way.
pub fn credit_description(amount: libra_core::Money, user: &str) -> String {
    format!("a credit of {amount} to user {user}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(db: &Connection) -> Vec<String> {
        db.prepare("SELECT hash FROM tokens ORDER BY hash")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// A login past the bound removes that user's oldest login tokens, never a sweep's
    /// credential nor another user's; tokens expired for a week go, and those expired since
    /// stay (their holders are told they expired).
    #[test]
    fn a_users_tokens_are_held_to_the_bound_and_expired_ones_go_after_a_week() {
        let db = crate::store::open_memory().unwrap();
        db.execute_batch("INSERT INTO users (id, name, pw_hash) VALUES (1, 'a', 'x'), (2, 'b', 'x')")
            .unwrap();
        let now = 100.0 * 86_400.0;
        let week = EXPIRED_TOKEN_KEPT;
        for (hash, user, created, expires, sweep) in [
            ("a-old", 1, now - 50.0, now + 10.0, None),
            ("a-mid", 1, now - 40.0, now + 10.0, None),
            ("a-new", 1, now - 30.0, now + 10.0, None),
            ("a-newest", 1, now - 20.0, now + 10.0, None),
            ("a-sweep", 1, now - 60.0, now + 10.0, Some(7)),
            ("a-expired-long-ago", 1, now - 90.0 * 86_400.0, now - week - 1.0, None),
            ("a-expired-lately", 1, now - 31.0 * 86_400.0, now - 5.0, None),
            ("b-old", 2, now - 100.0, now + 10.0, None),
            ("b-expired-long-ago", 2, now - 90.0 * 86_400.0, now - week - 1.0, None),
            ("sweep-expired-long-ago", 2, now - 90.0 * 86_400.0, now - week - 1.0, Some(8)),
        ] {
            insert_token(&db, hash, user, created, expires, sweep).unwrap();
        }
        // Three of user 1's login tokens are kept: the newest (the lately expired one is older).
        assert_eq!(hold_tokens(&db, 1, 3, now).unwrap(), 3, "one expired a week ago, then the two oldest");
        assert_eq!(
            tokens(&db),
            [
                "a-mid",
                "a-new",
                "a-newest",
                "a-sweep",
                "b-expired-long-ago",
                "b-old",
                "sweep-expired-long-ago"
            ]
        );
        assert_eq!(hold_tokens(&db, 1, 3, now).unwrap(), 0, "within the bound");
        // Every token expired a week ago or more goes, whoever's, a batch at a time.
        assert_eq!(remove_expired_tokens(&db, now, 1).unwrap(), 1);
        assert_eq!(remove_expired_tokens(&db, now, 10).unwrap(), 1);
        assert_eq!(tokens(&db), ["a-mid", "a-new", "a-newest", "a-sweep", "b-old"]);
    }
}
