//! Each user's reads at a rate (`read_rate`, `read_burst`). A read costs no credit and each
//! takes the server's time (a status of a hosted sweep of 100,000 jobs took 5 ms, 83 ms once
//! they had run, before the broker kept its totals), so one user's clients reading in a loop
//! kept most of the server's cores busy (two Python clients: 1.35 of 2 cores) and everyone
//! else's requests waiting.
//! Writes have limits of their own (submissions, quotes, changes, a sweep's jobs); cancels
//! are never limited.
//!
//! A read whose work grows with what it reads (a page of results, the usage of a sweep's every
//! attempt) says so on its response (`ReadCost`), and the rest is taken after it: a page of
//! 10,000 results costs 11 reads, the usage of a sweep of 100,000 attempts 101.
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

/// What a read cost in all, in reads, when more than one: set on its response by a handler whose
/// work grows with the rows it read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadCost(pub u32);

/// Rows a read may read for the one token every read takes: a read of 1,000 jobs' results
/// takes the server about what a status does.
const ROWS_PER_READ: usize = 1000;

impl ReadCost {
    pub fn of_rows(rows: usize) -> Self {
        ReadCost(u32::try_from(1 + rows / ROWS_PER_READ).unwrap_or(u32::MAX))
    }
}

pub async fn limit(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let user = match taken(&app, &req) {
        Ok(user) => user,
        Err(e) => return e.into_response(),
    };
    let resp = next.run(req).await;
    if let (Some(user), Some(&ReadCost(n))) = (user, resp.extensions().get::<ReadCost>()) {
        if n > 1 {
            let mut buckets = app.read_buckets.lock().unwrap_or_else(|p| p.into_inner());
            buckets.charge(user, f64::from(n - 1), now());
        }
    }
    resp
}

/// For a read by a user held to the rate: the user, once a token is taken from their bucket,
/// or 429 when it is empty. `None` for any other request.
fn taken(app: &App, req: &Request) -> Result<Option<i64>, ApiError> {
    if !(req.method() == Method::GET || req.method() == Method::HEAD)
        || !req.uri().path().starts_with("/api/")
    {
        return Ok(None);
    }
    let Some(token) = crate::auth::bearer(req.headers()) else { return Ok(None) };
    let t = now();
    let Some(who) = app.tokens.cached(&crate::auth::token_digest(token), t) else { return Ok(None) };
    if who.admin || who.sweep.is_some() {
        return Ok(None);
    }
    let mut buckets = app.read_buckets.lock().unwrap_or_else(|p| p.into_inner());
    let (rate, burst) = (buckets.rate(), buckets.burst());
    let Err(Short { wait, .. }) = buckets.take(who.id, 1.0, t) else { return Ok(Some(who.id)) };
    Err(ApiError::TooMany(
        format!(
            "reads: {} may make at most {rate} reads (GET requests) per second ({burst} at once; read_rate, read_burst; a page of results counts a read per 1,000 jobs, a sweep's usage a read per 1,000 attempts); try again in {wait} s",
            who.name
        ),
        wait,
    ))
}
