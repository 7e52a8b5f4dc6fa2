//! Each user's reads at a rate (`read_rate`, `read_burst`). A read costs no credit and each
//! takes the server's time: a status of a hosted sweep of 100,000 jobs about 5 ms, a listing of
//! a user's sweeps as much, so one user's clients reading in a loop kept most of the server's
//! cores busy (two Python clients: 1.35 of 2 cores) and everyone else's requests waiting.
//! Writes have limits of their own (submissions, quotes, changes, a sweep's jobs); cancels
//! are never limited.
//!
//! One middleware sees every request, so a new route cannot forget it. It asks only the token
//! cache, never the store: a request whose token the cache does not hold (the first with a new
//! login, or the first after the cache was emptied) is looked up by its handler as before and
//! is not counted; every later one is. A new token takes a login, and logins are one password
//! hash at a time per peer (`crate::login_guard`). Administrators are not held to it, nor are
//! hosted sweeps' own credentials (never cached: the server's engine reading its own jobs) and
//! node agents (no login token).

use crate::app::{now, App};
use crate::buckets::Short;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub async fn limit(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(e) = refused(&app, &req) {
        return e.into_response();
    }
    next.run(req).await
}

/// 429 when `req` is a read by a user whose bucket is empty.
fn refused(app: &App, req: &Request) -> Option<ApiError> {
    if !(req.method() == Method::GET || req.method() == Method::HEAD)
        || !req.uri().path().starts_with("/api/")
    {
        return None;
    }
    let token = crate::auth::bearer(req.headers())?;
    let t = now();
    let who = app.tokens.cached(&crate::auth::token_digest(token), t)?;
    if who.admin || who.sweep.is_some() {
        return None;
    }
    let mut buckets = app.read_buckets.lock().unwrap_or_else(|p| p.into_inner());
    let (rate, burst) = (buckets.rate(), buckets.burst());
    let Err(Short { wait, .. }) = buckets.take(who.id, 1.0, t) else { return None };
    Some(ApiError::TooMany(
        format!(
            "reads: {} may make at most {rate} reads (GET requests) per second ({burst} at once; read_rate, read_burst); try again in {wait} s",
            who.name
        ),
        wait,
    ))
}
