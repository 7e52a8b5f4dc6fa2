//! Errors: `ApiError` is what a request gets back (a status and a message naming the problem);
//! `ServerError` is what stops the server from starting.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use libra_api::ErrorBody;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// 413: the request is larger than a limit (the message names it).
    #[error("{0}")]
    TooLarge(String),
    /// 429, with how many seconds to wait (Retry-After).
    #[error("{0}")]
    TooMany(String, u64),
    /// 503: the store's disk is full, so nothing that writes can be done (the request changed
    /// nothing). The detail goes to the server's log, as an `Internal`'s does.
    #[error("the server's store is out of disk space")]
    StoreFull(String),
    /// A 500. The detail (a store's or a subsystem's own words) goes to the server's log
    /// under a request id; the client gets the id only (`IntoResponse`).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The header a 500 carries its request id in (the same id as in its body and the log).
pub const REQUEST_ID: &str = "x-request-id";

/// A fresh request id: 16 hex digits, random, to find a failure in the server's log.
fn request_id() -> String {
    use rand::RngCore;
    format!("{:016x}", rand::rng().next_u64())
}

impl From<rusqlite::Error> for ApiError {
    /// The store's own words go to the server's log, never to the client (`IntoResponse`):
    /// they can name tables, paths and other users' data.
    fn from(e: rusqlite::Error) -> Self {
        if crate::store::is_disk_full(&e) {
            ApiError::StoreFull(format!("store: {e}"))
        } else {
            ApiError::Internal(format!("store: {e}"))
        }
    }
}

impl From<crate::ledger::LedgerError> for ApiError {
    /// For the ledger's failures that are not the caller's to mend (the store's own, or a hold
    /// the server's records say is there): a user's shortfall is turned into its own answer
    /// where it can happen, before this.
    fn from(e: crate::ledger::LedgerError) -> Self {
        match e {
            crate::ledger::LedgerError::StoreFull(detail) => ApiError::StoreFull(format!("store: {detail}")),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

/// How long a client is asked to wait (Retry-After) when the store's disk is full: freeing
/// space is an administrator's work, not a moment's.
const STORE_FULL_RETRY_S: u64 = 60;

/// When the server last logged that its store's disk is full (seconds since the epoch): every
/// node agent's report and every submission meets it while it lasts, and one line a minute
/// says it without filling what is left of the disk with the same line.
static STORE_FULL_LOGGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Requests refused because the store's disk was full, since the process began (`/metrics`).
static STORE_FULL_REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn store_full_refusals() -> u64 {
    STORE_FULL_REFUSED.load(std::sync::atomic::Ordering::Relaxed)
}

fn log_store_full(detail: &str) {
    use std::sync::atomic::Ordering;
    STORE_FULL_REFUSED.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = STORE_FULL_LOGGED.load(Ordering::Relaxed);
    if now >= last.saturating_add(STORE_FULL_RETRY_S)
        && STORE_FULL_LOGGED.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        tracing::error!(
            "the store's disk is full ({detail}): every request that writes (submissions, node reports, settlements) is refused with 503 until space is freed; nothing accepted is lost, and node agents keep what they report until it is stored"
        );
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::Internal(format!("encoding: {e}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooMany(..) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::StoreFull(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let (error, id) = match &self {
            ApiError::Internal(detail) => {
                let id = request_id();
                tracing::error!(request_id = %id, "{detail}");
                (
                    format!(
                        "internal error: the server could not complete this request; its log has the details under request id {id}"
                    ),
                    Some(id),
                )
            }
            ApiError::StoreFull(detail) => {
                log_store_full(detail);
                (
                    "the server's store is out of disk space, so it cannot record anything now: this request changed nothing; try again once an administrator has freed space on the server".to_string(),
                    None,
                )
            }
            e => (e.to_string(), None),
        };
        let mut r = (status, Json(ErrorBody { error })).into_response();
        if let Some(v) = id.and_then(|id| axum::http::HeaderValue::from_str(&id).ok()) {
            r.headers_mut().insert(REQUEST_ID, v);
        }
        let retry_after = match &self {
            ApiError::TooMany(_, secs) => Some(*secs),
            ApiError::StoreFull(_) => Some(STORE_FULL_RETRY_S),
            _ => None,
        };
        if let Some(secs) = retry_after {
            if let Ok(v) = axum::http::HeaderValue::from_str(&secs.to_string()) {
                r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
            }
        }
        r
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("store {path}: {source}")]
    Store { path: String, source: rusqlite::Error },
    #[error("the store {path} cannot be used: {source}")]
    Open { path: String, source: crate::store::StoreError },
    #[error("configuration {path}: {msg}")]
    Config { path: String, msg: String },
    #[error("{0}")]
    Invalid(String),
    #[error("store {path} is in use by another libra server or restore{pid}: stop it first (lock file {lock})", pid = .pid.map(|p| format!(" (process {p})")).unwrap_or_default())]
    Locked { path: String, lock: String, pid: Option<u32> },
    #[error("{0}")]
    Backup(String),
    #[error("listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<rusqlite::Error> for ServerError {
    fn from(e: rusqlite::Error) -> Self {
        ServerError::Store { path: String::new(), source: e }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: std::ffi::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            Some("database or disk is full".into()),
        )
    }

    /// A full disk is the server's condition, not a fault to hide behind a request id: 503,
    /// Retry-After, and a reason; through the ledger too. Any other store error stays a 500.
    #[test]
    fn a_full_store_is_503_with_retry_after_and_other_store_errors_500() {
        for e in [
            ApiError::from(sqlite(rusqlite::ffi::SQLITE_FULL)),
            ApiError::from(crate::ledger::LedgerError::from(sqlite(rusqlite::ffi::SQLITE_FULL))),
        ] {
            assert!(matches!(e, ApiError::StoreFull(_)), "{e:?}");
            let r = e.into_response();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(r.headers()[axum::http::header::RETRY_AFTER], "60");
        }
        let other = ApiError::from(sqlite(rusqlite::ffi::SQLITE_IOERR));
        assert!(matches!(other, ApiError::Internal(_)), "{other:?}");
        assert_eq!(other.into_response().status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
