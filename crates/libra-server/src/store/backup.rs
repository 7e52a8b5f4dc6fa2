//! Backups of the live store, restores into a stopped one, and the lock that keeps two servers
//! (or a server and a restore) off one store.
//!
//! A backup is SQLite's online backup API run in one step from a connection of its own: one
//! read transaction, so the copy is the store as of one commit, while the server goes on
//! writing (WAL readers do not block writers, nor writers readers).
//!
//! The hosted sweeps' broker database travels inside the same file: copied the same way just
//! after the store, and kept whole as one row of `libra_backup_files`, which a restore takes
//! out again. One file is what an operator keeps, and it stays an SQLite file any tool opens.
//! Why the store first: everything the store's copy holds of a sweep is then in the broker's
//! too. A sweep's credential is made in the store before its experiment is made in the broker,
//! and revoked only after the experiment has ended there; jobs a sweep submitted after the
//! store's copy are submitted again by their idempotency keys when the restored sweep resumes.
//! The one window the order cannot close (a sweep half made: credential minted, experiment
//! made, credential not yet bound to it) is closed by the caller, which keeps sweeps from
//! being created while both copies are taken (`Sweeps::hold_creations`).

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
    /// Hosted sweeps in the broker database the backup carries; absent when it carries none
    /// (a server that never hosted one, or a backup from before Libra carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweeps: Option<u64>,
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
            sweeps: None,
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

/// The table of a backup file that carries other files whole, and the name the hosted sweeps'
/// broker database has in it.
const FILES_TABLE: &str = "libra_backup_files";
const BROKER_FILE: &str = "sweeps/broker.db";

/// Copies the live database at `db` into a new file at `to` (which must not exist), as of one
/// commit: a self-contained database (rollback journal, not WAL), readable by any SQLite tool.
fn online_copy(db: &Path, to: &Path) -> Result<Connection, ServerError> {
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
    Ok(dst)
}

/// Copies the live store at `db` into a new file at `to` (which must not exist), as of one
/// commit, and says what the copy holds. The copy is a self-contained database (rollback
/// journal, not WAL), readable by any SQLite tool.
pub fn backup_to(db: &Path, to: &Path) -> Result<Contents, ServerError> {
    let dst = online_copy(db, to)?;
    Ok(Contents::of(&dst)?)
}

/// `backup_to`, and then the hosted sweeps' broker database at `broker` (when there is one)
/// copied the same way and carried inside the backup (see the module's notes for the order).
pub fn backup_with_sweeps(db: &Path, broker: Option<&Path>, to: &Path) -> Result<Contents, ServerError> {
    let mut contents = backup_to(db, to)?;
    let Some(broker) = broker.filter(|b| std::fs::metadata(b).is_ok_and(|m| m.is_file() && m.len() > 0))
    else {
        return Ok(contents);
    };
    let dir = to.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new().prefix(".libra-backup-sweeps-").tempdir_in(dir)?;
    let copy = tmp.path().join("broker.db");
    let sweeps = {
        let c = online_copy(broker, &copy)?;
        sweep_count(&c)?
    };
    let bytes = std::fs::read(&copy)?;
    let dst = Connection::open(to)?;
    dst.execute_batch(&format!("CREATE TABLE {FILES_TABLE} (name TEXT PRIMARY KEY, bytes BLOB NOT NULL)"))?;
    dst.execute(
        &format!("INSERT INTO {FILES_TABLE} (name, bytes) VALUES (?1, ?2)"),
        rusqlite::params![BROKER_FILE, bytes],
    )?;
    contents.sweeps = Some(sweeps);
    Ok(contents)
}

/// Whether the database has a table of this name.
fn has_table(c: &Connection, name: &str) -> rusqlite::Result<bool> {
    c.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n > 0)
}

/// How many sweeps a broker database holds (0 for one without the broker's tables yet).
fn sweep_count(c: &Connection) -> rusqlite::Result<u64> {
    if !has_table(c, "experiments")? {
        return Ok(0);
    }
    c.query_row("SELECT COUNT(*) FROM experiments", [], |r| r.get::<_, i64>(0)).map(|v| v.max(0) as u64)
}

/// A backup as bytes (what the admin route sends), made through a temporary file beside the
/// store (the one directory a packaged server may write), with the hosted sweeps' broker
/// database at `broker` carried inside it.
pub fn backup_bytes(db: &Path, broker: Option<&Path>) -> Result<(Vec<u8>, Contents), ServerError> {
    let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new().prefix(".libra-backup-").suffix(".db").tempdir_in(dir)?;
    let path = tmp.path().join("backup.db");
    let contents = backup_with_sweeps(db, broker, &path)?;
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

/// The broker database a backup carries, whole, if it carries one.
fn carried_broker(file: &Path) -> rusqlite::Result<Option<Vec<u8>>> {
    use rusqlite::OptionalExtension;
    let c = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    if !has_table(&c, FILES_TABLE)? {
        return Ok(None);
    }
    c.query_row(&format!("SELECT bytes FROM {FILES_TABLE} WHERE name = ?1"), [BROKER_FILE], |r| r.get(0))
        .optional()
}

/// Restores the backup `file` into the store at `db` (the server must be stopped: the store's
/// lock is taken), and the hosted sweeps' broker database it carries into `broker`. A store
/// that holds users or jobs, or a broker database that holds sweeps, is replaced only with
/// `overwrite`; both are checked before either is written. A backup that carries no broker
/// database leaves `broker` as it is (`Contents::sweeps` is then absent). The restored store
/// is brought up to this version's schema at once.
pub fn restore(
    file: &Path,
    db: &Path,
    broker: Option<&Path>,
    overwrite: bool,
) -> Result<Contents, ServerError> {
    let contents = check_backup(file)?;
    let bad = |msg: String| ServerError::Backup(format!("backup {}: {msg}", file.display()));
    let carried =
        carried_broker(file).map_err(|e| bad(format!("its hosted sweeps' database is unreadable ({e})")))?;
    // The store holds password hashes and the ledger: private as the server makes it.
    if let Some(dir) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !dir.exists() {
            crate::tls::private_dir(dir)?;
        }
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
    // The broker database is staged (written out and checked) beside its place before anything
    // is replaced.
    let staged = match (carried, broker) {
        (Some(bytes), Some(target)) => {
            if let Some(dir) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                if !dir.exists() {
                    crate::tls::private_dir(dir)?;
                }
            }
            let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let tmp = tempfile::Builder::new().prefix(".libra-restore-sweeps-").tempdir_in(dir)?;
            let path = tmp.path().join("broker.db");
            crate::tls::write_private(&path, &bytes)?;
            let sweeps = {
                let c = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .map_err(|e| bad(format!("its hosted sweeps' database cannot be opened: {e}")))?;
                let check: String = c.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)).map_err(|e| {
                    bad(format!("its hosted sweeps' database is not an SQLite database ({e})"))
                })?;
                if check != "ok" {
                    return Err(bad(format!("its hosted sweeps' database is damaged: {check}")));
                }
                sweep_count(&c)
                    .map_err(|e| bad(format!("its hosted sweeps' database is unreadable ({e})")))?
            };
            if std::fs::metadata(target).is_ok_and(|m| m.len() > 0) {
                let c = Connection::open_with_flags(target, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
                c.busy_timeout(std::time::Duration::from_secs(5))?;
                let there = sweep_count(&c)?;
                if there > 0 && !overwrite {
                    return Err(ServerError::Backup(format!(
                        "hosted sweeps' database {} is not empty ({there} sweeps): give --overwrite to replace it with the backup's",
                        target.display()
                    )));
                }
            }
            Some((tmp, path, target, sweeps))
        }
        _ => None,
    };
    crate::tls::private_db_file(db)?;
    {
        let mut dst = Connection::open(db)?;
        dst.busy_timeout(std::time::Duration::from_secs(5))?;
        dst.restore(rusqlite::DatabaseName::Main, file, None::<fn(rusqlite::backup::Progress)>)?;
    }
    // Migrate (a backup of an earlier version) and check as a server would on start.
    let c =
        store::open(db, true).map_err(|e| ServerError::Open { path: db.display().to_string(), source: e })?;
    if has_table(&c, FILES_TABLE)? {
        // The carried files are the backup's, not the store's: out, and their pages given back.
        c.execute_batch(&format!("DROP TABLE {FILES_TABLE}; VACUUM;"))?;
    }
    crate::tls::private_db_file(db)?;
    let mut after = Contents::of(&c)?;
    debug_assert_eq!((after.jobs, after.ledger_entries), (contents.jobs, contents.ledger_entries));
    if let Some((_tmp, path, target, sweeps)) = staged {
        // The broker's credentials are in it: private from its creation.
        crate::tls::private_db_file(target)?;
        let mut dst = Connection::open(target)?;
        dst.busy_timeout(std::time::Duration::from_secs(5))?;
        dst.restore(rusqlite::DatabaseName::Main, &path, None::<fn(rusqlite::backup::Progress)>)?;
        drop(dst);
        crate::tls::private_db_file(target)?;
        after.sweeps = Some(sweeps);
    }
    Ok(after)
}
