//! The node agents' endpoints, authenticated by the cluster join token.

use super::Body;
use crate::app::{now, App};
use crate::auth::{bearer, same_secret};
use crate::error::ApiError;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use libra_api::{RegisterRequest, RegisterResponse, SyncRequest, SyncResponse};
use std::sync::Arc;
use std::time::Duration;

/// The longest a sync may be held open waiting for work.
const MAX_WAIT_MS: u64 = 30_000;

fn check_join(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    match bearer(headers) {
        Some(t) if same_secret(t, &app.config.join_token) => Ok(()),
        Some(_) => Err(ApiError::Forbidden("forbidden: the join token is not this cluster's".into())),
        None => Err(ApiError::Unauthorized("node agents must present the cluster join token".into())),
    }
}

pub async fn register(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(r): Body<RegisterRequest>,
) -> Result<Json<RegisterResponse>, ApiError> {
    check_join(&app, &headers)?;
    app.lock().register(&r, app.config.default_price_base, now())?;
    Ok(Json(RegisterResponse { name: r.name, period: app.config.period }))
}

/// Long poll: when there is nothing for the node right away, wait for new work (or the wait to
/// run out) and look again.
pub async fn sync(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(r): Body<SyncRequest>,
) -> Result<Json<SyncResponse>, ApiError> {
    check_join(&app, &headers)?;
    let notified = app.work.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    let resp = app.lock().sync(&r, now())?;
    let idle =
        resp.start.is_empty() && resp.kill.is_empty() && resp.suspend.is_empty() && resp.resume.is_empty();
    if !idle || resp.reregister || r.wait_ms == 0 || !r.exited.is_empty() {
        return Ok(Json(resp));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(r.wait_ms.min(MAX_WAIT_MS));
    loop {
        if tokio::time::timeout_at(deadline, notified.as_mut()).await.is_err() {
            return Ok(Json(resp));
        }
        notified.set(app.work.notified());
        notified.as_mut().enable();
        let mut again = resp.clone();
        {
            let g = app.lock();
            g.commands(&r, &mut again)?;
            // A job cancelled while we waited: the node still reports it running.
            let active = g.active_on(&r.name)?;
            again.kill.extend(r.running.iter().map(|j| j.job).filter(|j| !active.contains(j)));
        }
        if !(again.start.is_empty()
            && again.kill.is_empty()
            && again.suspend.is_empty()
            && again.resume.is_empty())
        {
            return Ok(Json(again));
        }
    }
}
