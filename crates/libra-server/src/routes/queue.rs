//! The queue, changing, holding and releasing a job, and filtered history (`crate::change`).

use super::{Body, InPath, Params};
use crate::app::{now, App};
use crate::error::ApiError;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use libra_api::{ChangeAnswer, HistoryQuery, JobInfo, QueueEntry, QueueQuery, UpdateRequest};
use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

pub async fn queue(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(q): Params<QueueQuery>,
) -> Res<Vec<QueueEntry>> {
    app.read(headers, move |db, who| Ok(Json(crate::change::queue(db, &who, &q)?))).await
}

pub async fn history(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(q): Params<HistoryQuery>,
) -> Res<Vec<JobInfo>> {
    app.read(headers, move |db, who| Ok(Json(crate::change::history(db, &who, &q)?))).await
}

pub async fn update(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
    Body(req): Body<UpdateRequest>,
) -> Res<ChangeAnswer> {
    let answer = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.take_change(&who, "update", now())?;
            g.update(&who, id, &req, now())
        })
        .await?;
    app.changed();
    Ok(Json(answer))
}

/// Takes no body but reads whatever a client sends (see `user::cancel`).
pub async fn hold(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
    _ignored: axum::body::Bytes,
) -> Res<JobInfo> {
    let job = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.take_change(&who, "hold", now())?;
            g.hold(&who, id, now())
        })
        .await?;
    app.changed();
    Ok(Json(job))
}

pub async fn release(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
    _ignored: axum::body::Bytes,
) -> Res<ChangeAnswer> {
    let answer = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.take_change(&who, "release", now())?;
            g.release(&who, id, now())
        })
        .await?;
    app.changed();
    Ok(Json(answer))
}
