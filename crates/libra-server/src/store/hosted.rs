//! Who owns each hosted sweep (experiment). In the broker database, beside the experiments, so
//! that one file holds a sweep whole; the broker itself never reads it.

use crate::store::Cached;
use rusqlite::{params, Connection, OptionalExtension};

/// Creates the table where it is missing, and its idempotency keys where a database from
/// before them lacks them (each sweep created with a key records it: a retry of the creation
/// whose answer was lost gets the same sweep rather than a second one running beside it).
pub fn init(db: &Connection) -> rusqlite::Result<()> {
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS hosted (
            exp_id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL,
            user_name TEXT NOT NULL
        )",
    )?;
    let has_key =
        db.prepare("SELECT 1 FROM pragma_table_info('hosted') WHERE name = 'idem_key'")?.exists([])?;
    if !has_key {
        db.execute_batch("ALTER TABLE hosted ADD COLUMN idem_key TEXT")?;
    }
    db.execute_batch(
        "CREATE UNIQUE INDEX IF NOT EXISTS hosted_idem ON hosted(user_id, idem_key) WHERE idem_key IS NOT NULL;
         CREATE INDEX IF NOT EXISTS hosted_user ON hosted(user_id);",
    )
}

/// Records `user` as the owner of sweep `exp`, created with idempotency key `key` if any.
pub fn add(db: &Connection, exp: i64, user: i64, user_name: &str, key: Option<&str>) -> rusqlite::Result<()> {
    db.exec(
        "INSERT INTO hosted (exp_id, user_id, user_name, idem_key) VALUES (?1, ?2, ?3, ?4)",
        params![exp, user, user_name, key],
    )?;
    Ok(())
}

/// The sweep `user` created with idempotency key `key`, if any.
pub fn by_key(db: &Connection, user: i64, key: &str) -> rusqlite::Result<Option<i64>> {
    db.row("SELECT exp_id FROM hosted WHERE user_id = ?1 AND idem_key = ?2", params![user, key], |r| r.get(0))
        .optional()
}

/// The hosted sweeps of user `user`.
pub fn of_user(db: &Connection, user: i64) -> rusqlite::Result<Vec<i64>> {
    db.prepare("SELECT exp_id FROM hosted WHERE user_id = ?1")?.query_map([user], |r| r.get(0))?.collect()
}

/// How many of `user`'s hosted sweeps are not over (running, paused or stalled: each may run
/// again, with an engine thread of the server's).
pub fn unfinished_of_user(db: &Connection, user: i64) -> rusqlite::Result<u32> {
    db.query_row(
        "SELECT COUNT(*) FROM hosted h JOIN experiments e ON e.id = h.exp_id \
         WHERE h.user_id = ?1 AND e.state NOT IN ('done', 'cancelled')",
        [user],
        |r| r.get(0),
    )
}

/// `user`'s hosted sweeps that have ended (done or cancelled), those that ended first first.
pub fn ended_of_user(db: &Connection, user: i64) -> rusqlite::Result<Vec<i64>> {
    db.prepare(
        "SELECT h.exp_id FROM hosted h JOIN experiments e ON e.id = h.exp_id \
         WHERE h.user_id = ?1 AND e.state IN ('done', 'cancelled') ORDER BY COALESCE(e.finished, e.created), e.id",
    )?
    .query_map([user], |r| r.get(0))?
    .collect()
}

/// Forgets the owner of sweep `exp` (removed with it).
pub fn remove(db: &Connection, exp: i64) -> rusqlite::Result<()> {
    db.execute("DELETE FROM hosted WHERE exp_id = ?1", [exp])?;
    Ok(())
}

/// Every hosted sweep: (experiment, owner's id, owner's name), by experiment.
pub fn all(db: &Connection) -> rusqlite::Result<Vec<(i64, i64, String)>> {
    db.prepare("SELECT exp_id, user_id, user_name FROM hosted ORDER BY exp_id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// The owner (id, name) of hosted sweep `exp`.
pub fn owner(db: &Connection, exp: i64) -> rusqlite::Result<Option<(i64, String)>> {
    db.row("SELECT user_id, user_name FROM hosted WHERE exp_id = ?1", [exp], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}
