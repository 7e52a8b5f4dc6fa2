//! Who owns each hosted sweep (experiment). In the broker database, beside the experiments, so
//! that one file holds a sweep whole; the broker itself never reads it.

use crate::store::Cached;
use rusqlite::{params, Connection, OptionalExtension};

/// Creates the table where it is missing.
pub fn init(db: &Connection) -> rusqlite::Result<()> {
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS hosted (
            exp_id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL,
            user_name TEXT NOT NULL
        )",
    )
}

pub fn add(db: &Connection, exp: i64, user: i64, user_name: &str) -> rusqlite::Result<()> {
    db.exec(
        "INSERT INTO hosted (exp_id, user_id, user_name) VALUES (?1, ?2, ?3)",
        params![exp, user, user_name],
    )?;
    Ok(())
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
