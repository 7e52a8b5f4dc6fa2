//! The queue, changing, holding and releasing a job, and filtered history (`crate::change`).

use super::Body;
use crate::app::{now, App};
use crate::error::ApiError;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use libra_api::{ChangeAnswer, HistoryQuery, JobInfo, QueueEntry, QueueQuery, UpdateRequest};
use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

/// Query strings whose decoding errors name the parameter (400).
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(Params(v)),
            Err(e) => Err(ApiError::BadRequest(format!("query: {}", e.body_text()))),
        }
    }
}

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
    Path(id): Path<u64>,
    Body(req): Body<UpdateRequest>,
) -> Res<ChangeAnswer> {
    let answer = app
        .run(move |g| {
            let who = g.caller(&headers)?;
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
    Path(id): Path<u64>,
    _ignored: axum::body::Bytes,
) -> Res<JobInfo> {
    let job = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.hold(&who, id, now())
        })
        .await?;
    app.changed();
    Ok(Json(job))
}

pub async fn release(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    _ignored: axum::body::Bytes,
) -> Res<ChangeAnswer> {
    let answer = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.release(&who, id, now())
        })
        .await?;
    app.changed();
    Ok(Json(answer))
}
