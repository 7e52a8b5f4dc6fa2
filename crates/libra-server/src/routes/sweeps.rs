//! Hosted sweeps (`crate::sweeps`): the caller is found under the lock, then the broker's
//! database is read or written off the async workers, as SQLite calls block.

use super::{Body, InPath, Params};
use crate::app::{now, App};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::read_limit::ReadCost;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use libra_api::{SweepBudget, SweepCreate, SweepDeadline, SweepInfo, SweepJob, SweepUsage};
use serde::Deserialize;
use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

/// Runs `f` with the caller and the sweeps on a blocking thread.
async fn with_caller<T: Send + 'static>(
    app: &Arc<App>,
    headers: &HeaderMap,
    f: impl FnOnce(Caller, &Arc<crate::sweeps::Sweeps>) -> Result<T, ApiError> + Send + 'static,
) -> Res<T> {
    steered(app, headers, None, f).await
}

/// `with_caller` for a change of a sweep named `change` (pause, resume, a new deadline or
/// budget), which takes a token from the caller's bucket of submissions and job changes
/// (`Inner::take_change`) first: each is a write to the sweeps' database (a resume may start the
/// sweep's engine again), and repeated without end one user's changes kept a core of the server
/// busy (150 a second from one client on a sweep of 100,000 jobs). A cancel is never limited.
async fn steered<T: Send + 'static>(
    app: &Arc<App>,
    headers: &HeaderMap,
    change: Option<String>,
    f: impl FnOnce(Caller, &Arc<crate::sweeps::Sweeps>) -> Result<T, ApiError> + Send + 'static,
) -> Res<T> {
    let headers = headers.clone();
    let who = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            if let Some(change) = change {
                g.take_change(&who, &change, now())?;
            }
            Ok(who)
        })
        .await?;
    let sweeps = app.sweeps.clone();
    crate::app::blocking(move || f(who, &sweeps)).await.map(Json)
}

pub async fn create(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<SweepCreate>,
) -> Res<SweepInfo> {
    let key = super::user::idempotency_key(&headers)?;
    with_caller(&app, &headers, move |who, s| s.create(&who, &req, key.as_deref(), now())).await
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    all: bool,
}

pub async fn list(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(q): Params<ListQuery>,
) -> Res<Vec<SweepInfo>> {
    with_caller(&app, &headers, move |who, s| s.list(&who, q.all, now())).await
}

pub async fn get(State(app): State<Arc<App>>, headers: HeaderMap, InPath(id): InPath<i64>) -> Res<SweepInfo> {
    with_caller(&app, &headers, move |who, s| s.get(&who, id, now())).await
}

/// A read that grows with the attempts it reads (`ReadCost`).
pub async fn usage(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<i64>,
) -> Result<(Extension<ReadCost>, Json<SweepUsage>), ApiError> {
    let Json((usage, read)) = with_caller(&app, &headers, move |who, s| s.usage(&who, id, now())).await?;
    Ok((Extension(ReadCost::of_rows(read)), Json(usage)))
}

#[derive(Deserialize)]
pub struct ResultsQuery {
    /// At most this many jobs (default 1000, at most `MAX_RESULTS_PAGE`) ...
    #[serde(default)]
    limit: Option<u32>,
    /// ... from the job after this job number (default: from the first).
    #[serde(default)]
    after: u64,
}

pub async fn results(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<i64>,
    Params(q): Params<ResultsQuery>,
) -> Result<(Extension<ReadCost>, Json<Vec<SweepJob>>), ApiError> {
    let limit = q.limit.unwrap_or(1000);
    let Json(page) = with_caller(&app, &headers, move |who, s| s.results(&who, id, q.after, limit)).await?;
    Ok((Extension(ReadCost::of_rows(page.len())), Json(page)))
}

pub async fn set_deadline(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<i64>,
    Body(req): Body<SweepDeadline>,
) -> Res<SweepInfo> {
    steered(&app, &headers, Some("sweep deadline".into()), move |who, s| {
        let t = now();
        let d = match (req.deadline, req.deadline_in) {
            (Some(d), None) => d,
            (None, Some(d)) => t + d,
            _ => {
                return Err(ApiError::BadRequest(
                    "deadline: give either deadline (Unix seconds) or deadline_in (seconds from now)".into(),
                ))
            }
        };
        s.set_limits(&who, id, Some(d), None, t)
    })
    .await
}

pub async fn set_budget(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<i64>,
    Body(req): Body<SweepBudget>,
) -> Res<SweepInfo> {
    steered(&app, &headers, Some("sweep budget".into()), move |who, s| {
        s.set_limits(&who, id, None, Some(req.budget), now())
    })
    .await
}

pub async fn action(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath((id, action)): InPath<(i64, String)>,
    _ignored: axum::body::Bytes,
) -> Res<SweepInfo> {
    // A cancel is never held back; an action that is none is refused by `Sweeps::action`.
    let change = (action != "cancel").then(|| format!("sweep {action}"));
    steered(&app, &headers, change, move |who, s| s.action(&who, id, &action, now())).await
}
