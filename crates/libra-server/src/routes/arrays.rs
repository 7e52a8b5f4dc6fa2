//! Job arrays: submit one (`POST /api/arrays`), see its tasks, cancel all of them.

use super::{Body, InPath};
use crate::app::{now, App};
use crate::error::ApiError;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use libra_api::{ArrayRequest, ArrayResponse, JobInfo};
use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

/// One answer for every task. Counted as one submission against the caller's rate; decided off
/// the async workers, since an array of thousands of tasks takes a while. `Idempotency-Key`: a
/// retry gets the array the first attempt made.
pub async fn submit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<ArrayRequest>,
) -> Res<ArrayResponse> {
    let key = super::user::idempotency_key(&headers)?;
    let answer = app
        .run(move |g| {
            let t = now();
            let who = g.caller(&headers)?;
            g.take_submission(&who, t)?;
            g.submit_array(&who, &req, key.as_deref(), t)
        })
        .await?;
    if answer.accepted {
        app.changed();
    }
    Ok(Json(answer))
}

pub async fn get(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
) -> Res<Vec<JobInfo>> {
    app.read(headers, move |db, who| Ok(Json(crate::sched::owned_array(db, &who, id)?))).await
}

/// Reads and ignores a body, as the other action routes do (`user::cancel` says why).
pub async fn cancel(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
    _ignored: axum::body::Bytes,
) -> Res<Vec<JobInfo>> {
    let tasks = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.cancel_array(&who, id, now())
        })
        .await?;
    app.changed();
    Ok(Json(tasks))
}
