//! The audit log of administrator actions and refused requests (append-only: the store's
//! triggers refuse to change or remove an entry, except the removal of entries older than the
//! retention's cut-off, `prune`).

use libra_api::AuditEntry;
use rusqlite::{params, Connection};

/// An entry as it is written.
pub struct Entry {
    pub time: f64,
    pub caller: Option<String>,
    pub address: Option<String>,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub detail: Option<String>,
}

/// The setting that holds the retention's cut-off: the store lets an entry older than it go.
const KEPT_FROM: &str = "audit_kept_from";

/// Removes at most `limit` of the entries older than `before` (the retention's cut-off, now
/// minus `audit_keep_days`), oldest first, in one transaction with the record of the removal,
/// an entry of its own. The cut-off never moves back: an earlier `before` (a longer retention
/// set later) removes what the recorded one allows. Returns how many entries went; the caller
/// asks again while that is `limit` (so that a long backlog never holds the store for long).
pub fn prune(db: &Connection, before: f64, now: f64, keep_days: f64, limit: u32) -> rusqlite::Result<u64> {
    let tx = db.unchecked_transaction()?;
    let recorded: Option<f64> = super::setting(&tx, KEPT_FROM)?.and_then(|v| v.parse().ok());
    let cut = recorded.map_or(before, |r| r.max(before));
    super::set_setting(&tx, KEPT_FROM, &cut.to_string())?;
    // Compared with the setting as the trigger reads it (the same cast), so that the two agree
    // on every entry to the bit.
    let n = tx.execute(
        "DELETE FROM audit WHERE id IN (SELECT id FROM audit \
         WHERE time < (SELECT CAST(value AS REAL) FROM settings WHERE key = ?1) ORDER BY id LIMIT ?2)",
        rusqlite::params![KEPT_FROM, limit],
    )?;
    if n > 0 {
        append(
            &tx,
            &Entry {
                time: now,
                caller: None,
                address: None,
                method: "SERVER".into(),
                path: "audit_keep_days".into(),
                status: 200,
                detail: Some(format!(
                    "removed {n} entries older than @{:.0} (UNIX seconds; audit_keep_days = {keep_days})",
                    cut.floor()
                )),
            },
        )?;
    }
    tx.commit()?;
    Ok(n as u64)
}

pub fn append(db: &Connection, e: &Entry) -> rusqlite::Result<()> {
    db.prepare_cached(
        "INSERT INTO audit(time, caller, address, method, path, status, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![e.time, e.caller, e.address, e.method, e.path, e.status, e.detail])?;
    Ok(())
}

/// Entries newest first, at most `limit`, older than entry `after` if given.
pub fn entries(conn: &Connection, limit: u32, after: Option<u64>) -> rusqlite::Result<Vec<AuditEntry>> {
    let mut st = conn.prepare_cached(
        "SELECT id, time, caller, address, method, path, status, detail FROM audit \
         WHERE (?2 IS NULL OR id < ?2) ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = st.query_map(params![limit, after.map(|a| a as i64)], |r| {
        Ok(AuditEntry {
            id: r.get::<_, i64>(0)? as u64,
            time: r.get(1)?,
            caller: r.get(2)?,
            address: r.get(3)?,
            method: r.get(4)?,
            path: r.get(5)?,
            status: r.get::<_, i64>(6)? as u16,
            detail: r.get(7)?,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: f64 = 86_400.0;

    fn entry(time: f64) -> Entry {
        Entry {
            time,
            caller: Some("admin".into()),
            address: None,
            method: "POST".into(),
            path: "/api/admin/users".into(),
            status: 200,
            detail: None,
        }
    }

    fn times(db: &Connection) -> Vec<f64> {
        db.prepare("SELECT time FROM audit ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Only entries older than the recorded cut-off go, only through `prune`, and the cut-off
    /// never moves back; every other removal and every change is refused by the store itself.
    #[test]
    fn pruning_removes_only_entries_older_than_the_cut_off_and_the_log_stays_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::open(&dir.path().join("s.db"), false).unwrap();
        for d in 0..10 {
            append(&db, &entry(d as f64 * DAY)).unwrap();
        }
        let refused = |sql: &str| {
            let e = db.execute(sql, []).unwrap_err().to_string();
            assert!(e.contains("append-only"), "{sql}: {e}");
        };
        // Before any pruning, nothing may go, however old.
        refused("DELETE FROM audit WHERE time < 1");
        let now = 10.0 * DAY;
        // At most `limit` at a time, oldest first.
        assert_eq!(prune(&db, now - 5.5 * DAY, now, 5.5, 3).unwrap(), 3);
        assert_eq!(times(&db)[..2], [3.0 * DAY, 4.0 * DAY]);
        assert_eq!(prune(&db, now - 5.5 * DAY, now, 5.5, 3).unwrap(), 2);
        let left = times(&db);
        assert_eq!(&left[..5], &[5.0 * DAY, 6.0 * DAY, 7.0 * DAY, 8.0 * DAY, 9.0 * DAY]);
        // The removal is an entry of its own.
        let last = entries(&db, 1, None).unwrap().remove(0);
        assert_eq!((last.method.as_str(), last.path.as_str()), ("SERVER", "audit_keep_days"));
        assert!(last.detail.unwrap().starts_with("removed 2 entries older than @"));
        // Newer entries may not be removed or changed, by hand or otherwise.
        refused("DELETE FROM audit WHERE time >= 5 * 86400");
        refused("DELETE FROM audit");
        refused("UPDATE audit SET detail = 'x' WHERE time >= 5 * 86400");
        refused("UPDATE audit SET time = 0");
        // An entry older than the cut-off (a clock set back) goes at the next pruning even with
        // an earlier cut-off asked for: the recorded one does not move back.
        append(&db, &entry(1.0 * DAY)).unwrap();
        assert_eq!(prune(&db, 0.5 * DAY, now, 9.5, 100).unwrap(), 1);
        assert!(times(&db).iter().all(|&t| t >= 5.0 * DAY));
        // Nothing to remove writes nothing.
        let before = times(&db).len();
        assert_eq!(prune(&db, now - 5.5 * DAY, now, 5.5, 100).unwrap(), 0);
        assert_eq!(times(&db).len(), before);
    }
}
