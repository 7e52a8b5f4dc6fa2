//! The audit log of administrator actions and refused requests (append-only: the store's
//! triggers refuse to change or remove an entry).

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
