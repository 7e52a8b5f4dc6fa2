//! Backups of the live store, restores into a stopped one, and the lock that keeps two servers
//! (or a server and a restore) off one store.
//!
//! A backup is SQLite's online backup API run in one step from a connection of its own: one
//! read transaction, so the copy is the store as of one commit, while the server goes on
//! writing (WAL readers do not block writers, nor writers readers).

use crate::error::ServerError;
use crate::store::{self, SCHEMA_VERSION};
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// What a backup (or a restored store) holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contents {
    pub schema_version: i64,
    pub users: u64,
    pub jobs: u64,
    /// The highest job id (0: none).
    pub last_job: u64,
    pub ledger_entries: u64,
    /// The highest ledger entry id (0: none).
    pub last_ledger_entry: u64,
}

impl Contents {
    pub fn of(c: &Connection) -> rusqlite::Result<Contents> {
        let n = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).map(|v| v.max(0) as u64);
        Ok(Contents {
            schema_version: c.query_row("PRAGMA user_version", [], |r| r.get(0))?,
            users: n("SELECT COUNT(*) FROM users")?,
            jobs: n("SELECT COUNT(*) FROM jobs")?,
            last_job: n("SELECT COALESCE(MAX(id), 0) FROM jobs")?,
            ledger_entries: n("SELECT COUNT(*) FROM ledger")?,
            last_ledger_entry: n("SELECT COALESCE(MAX(id), 0) FROM ledger")?,
        })
    }
}

/// An exclusive lock on a store, held while the value lives: `<store>.lock`, with the holder's
/// process id in it for the message another would-be holder gets.
#[derive(Debug)]
pub struct StoreLock {
    _file: std::fs::File,
}

pub fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl StoreLock {
    pub fn acquire(db: &Path) -> Result<StoreLock, ServerError> {
        let path = lock_path(db);
        let mut f =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        // SAFETY: flock(2) on a descriptor this function owns; no memory is passed.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                return Err(ServerError::Locked {
                    path: db.display().to_string(),
                    lock: path.display().to_string(),
                    pid: text.trim().parse().ok(),
                });
            }
            return Err(err.into());
        }
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{}", std::process::id())?;
        Ok(StoreLock { _file: f })
    }
}

/// Copies the live store at `db` into a new file at `to` (which must not exist), as of one
/// commit, and says what the copy holds. The copy is a self-contained database (rollback
/// journal, not WAL), readable by any SQLite tool.
pub fn backup_to(db: &Path, to: &Path) -> Result<Contents, ServerError> {
    let src =
        Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    src.busy_timeout(std::time::Duration::from_secs(5))?;
    let mut dst = Connection::open(to)?;
    {
        let b = rusqlite::backup::Backup::new(&src, &mut dst)?;
        // All pages in one step: one read transaction over the whole copy.
        b.step(-1)?;
    }
    dst.pragma_update(None, "journal_mode", "DELETE")?;
    Ok(Contents::of(&dst)?)
}

/// A backup as bytes (what the admin route sends), made through a temporary file beside the
/// store (the one directory a packaged server may write).
pub fn backup_bytes(db: &Path) -> Result<(Vec<u8>, Contents), ServerError> {
    let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new().prefix(".libra-backup-").suffix(".db").tempdir_in(dir)?;
    let path = tmp.path().join("backup.db");
    let contents = backup_to(db, &path)?;
    let bytes = std::fs::read(&path)?;
    Ok((bytes, contents))
}

/// Checks that `file` is a Libra store this build can run: readable, undamaged, not from a
/// newer version.
fn check_backup(file: &Path) -> Result<Contents, ServerError> {
    let bad = |msg: String| ServerError::Backup(format!("backup {}: {msg}", file.display()));
    if !file.is_file() {
        return Err(bad("no such file".into()));
    }
    let c = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| bad(format!("cannot be opened: {e}")))?;
    let check: String = c
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| bad(format!("is not an SQLite database ({e})")))?;
    if check != "ok" {
        return Err(bad(format!("is damaged: {check}")));
    }
    let contents = Contents::of(&c).map_err(|e| bad(format!("is not a Libra store ({e})")))?;
    if contents.schema_version > SCHEMA_VERSION {
        return Err(bad(format!(
            "was written by a newer Libra (schema version {}; this one knows up to {SCHEMA_VERSION}): restore it with that version",
            contents.schema_version
        )));
    }
    Ok(contents)
}

/// Restores the backup `file` into the store at `db` (the server must be stopped: the store's
/// lock is taken). A store that holds users or jobs is replaced only with `overwrite`. The
/// restored store is brought up to this version's schema at once.
pub fn restore(file: &Path, db: &Path, overwrite: bool) -> Result<Contents, ServerError> {
    let contents = check_backup(file)?;
    if let Some(dir) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let _lock = StoreLock::acquire(db)?;
    if db.exists() && std::fs::metadata(db)?.len() > 0 {
        let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        // A store without the tables (a new, empty file) holds nothing to lose.
        let count = |table: &str| -> u64 {
            c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get::<_, i64>(0))
                .map(|v| v.max(0) as u64)
                .unwrap_or(0)
        };
        let (users, jobs) = (count("users"), count("jobs"));
        if (users > 0 || jobs > 0) && !overwrite {
            return Err(ServerError::Backup(format!(
                "store {} is not empty ({users} users, {jobs} jobs): give --overwrite to replace it with the backup (take a backup of it first)",
                db.display()
            )));
        }
    }
    {
        let mut dst = Connection::open(db)?;
        dst.busy_timeout(std::time::Duration::from_secs(5))?;
        dst.restore(rusqlite::DatabaseName::Main, file, None::<fn(rusqlite::backup::Progress)>)?;
    }
    // Migrate (a backup of an earlier version) and check as a server would on start.
    let c =
        store::open(db, true).map_err(|e| ServerError::Open { path: db.display().to_string(), source: e })?;
    let after = Contents::of(&c)?;
    debug_assert_eq!((after.jobs, after.ledger_entries), (contents.jobs, contents.ledger_entries));
    Ok(after)
}
