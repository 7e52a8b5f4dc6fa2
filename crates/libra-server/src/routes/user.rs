//! What every user can do, each on their own jobs and money only.

use super::Body;
use crate::app::{now, App};
use crate::auth;
use crate::error::ApiError;
use crate::{ledger, store};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use libra_api::*;
use rusqlite::params;
use serde::Deserialize;
use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

/// Passwords are checked a few at a time, an unknown user costs the same as a known one, and
/// repeated wrong passwords back off (`crate::login_guard`).
pub async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    Body(req): Body<LoginRequest>,
) -> Res<LoginResponse> {
    let guard = &app.login_guard;
    let started = std::time::Instant::now();
    if let Err(wait) = guard.check(&req.user, peer.ip(), started) {
        let secs = wait.as_secs().max(1);
        return Err(ApiError::TooMany(
            format!(
                "login: too many wrong passwords for {} from {}; try again in {secs} s",
                req.user,
                peer.ip()
            ),
            secs,
        ));
    }
    let Some(permit) = guard.try_hash() else {
        return Err(ApiError::TooMany(
            "login: the server is checking too many passwords at once; try again in a second".into(),
            1,
        ));
    };
    let found = {
        let g = app.lock();
        g.db.query_row("SELECT id, pw_hash, admin FROM users WHERE name = ?1", params![req.user], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, bool>(2)?))
        })
        .ok()
    };
    // Argon2 is slow on purpose: verify off the async workers and outside the lock; an unknown
    // user is checked against a decoy so that both take the same time.
    let hash = found.as_ref().map_or_else(|| guard.decoy.clone(), |f| f.1.clone());
    let password = req.password.clone();
    let verified = tokio::task::spawn_blocking(move || auth::verify_password(&password, &hash))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    drop(permit);
    let (id, admin) = match found {
        Some((id, _, admin)) if verified => (id, admin),
        _ => {
            guard.failed(&req.user, peer.ip(), std::time::Instant::now());
            return Err(ApiError::Unauthorized("login refused: unknown user or wrong password".into()));
        }
    };
    guard.succeeded(&req.user, peer.ip());
    let token = auth::new_token();
    app.lock().db.execute(
        "INSERT INTO tokens(hash, user_id, created) VALUES (?1, ?2, ?3)",
        params![auth::token_digest(&token), id, now()],
    )?;
    Ok(Json(LoginResponse { token, user: req.user, admin }))
}

/// `Idempotency-Key`: a client that retries a submission after losing the answer sends the same
/// key and gets the job its first attempt made, never a second one.
pub async fn submit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<SubmitRequest>,
) -> Res<JobInfo> {
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let k = v.to_str().ok().filter(|k| {
                !k.is_empty()
                    && k.len() <= crate::sched::MAX_IDEMPOTENCY_KEY
                    && k.bytes().all(|b| b.is_ascii_graphic())
            });
            let k = k.ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "Idempotency-Key: give 1 to {} visible ASCII characters",
                    crate::sched::MAX_IDEMPOTENCY_KEY
                ))
            })?;
            Some(k.to_string())
        }
    };
    Ok(Json(app.submit_grouped(headers, req, key).await?))
}

pub async fn quote(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<QuoteRequest>,
) -> Res<QuoteResponse> {
    let g = app.lock();
    let caller = g.caller(&headers)?;
    Ok(Json(g.quote(&req.spec, Some(caller.id as u64), now())?))
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    limit: Option<u32>,
}

pub async fn list(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Res<Vec<JobInfo>> {
    let g = app.lock();
    let who = g.caller(&headers)?;
    if q.all {
        who.require_admin("list everyone's jobs")?;
    }
    let limit = q.limit.unwrap_or(1000).min(100_000);
    Ok(Json(store::jobs(&g.db, if q.all { None } else { Some(who.id) }, limit)?))
}

pub async fn job(State(app): State<Arc<App>>, headers: HeaderMap, Path(id): Path<u64>) -> Res<JobInfo> {
    let g = app.lock();
    let who = g.caller(&headers)?;
    Ok(Json(g.owned_job(&who, id)?))
}

/// Actions take no body but read whatever a client sends anyway (`_ignored`, here and in the
/// other action routes): hyper closes a keep-alive connection whose request body is left
/// unread, and a client's next request on that connection would then fail.
pub async fn cancel(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    _ignored: axum::body::Bytes,
) -> Res<JobInfo> {
    let job = {
        let mut g = app.lock();
        let who = g.caller(&headers)?;
        g.cancel(&who, id, now())?
    };
    app.work.notify_waiters();
    Ok(Json(job))
}

#[derive(Deserialize)]
pub struct OutputQuery {
    /// Only this rank's part...
    rank: Option<u32>,
    /// ... from these offsets of its output files (what a follower has already shown).
    #[serde(default)]
    stdout_from: u64,
    #[serde(default)]
    stderr_from: u64,
}

/// The job's output as its nodes have sent it so far (a running job's too), part by part.
pub async fn output(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    Query(q): Query<OutputQuery>,
) -> Res<JobOutput> {
    let g = app.lock();
    let who = g.caller(&headers)?;
    let job = g.owned_job(&who, id)?;
    Ok(Json(store::output(&g.db, id, job.state, q.rank, q.stdout_from, q.stderr_from)?))
}

pub async fn balance(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Balance> {
    let g = app.lock();
    let who = g.caller(&headers)?;
    Ok(Json(ledger::balance(&g.db, who.id)?))
}

pub async fn ledger(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Vec<LedgerEntry>> {
    let g = app.lock();
    let who = g.caller(&headers)?;
    Ok(Json(ledger::entries(&g.db, Some(who.id), 10_000)?))
}
