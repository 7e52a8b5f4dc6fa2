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
        ApiError::Internal(format!("store: {e}"))
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
            e => (e.to_string(), None),
        };
        let mut r = (status, Json(ErrorBody { error })).into_response();
        if let Some(v) = id.and_then(|id| axum::http::HeaderValue::from_str(&id).ok()) {
            r.headers_mut().insert(REQUEST_ID, v);
        }
        if let ApiError::TooMany(_, secs) = &self {
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
