//! The node agents' endpoints. The cluster join token admits a new node only; every node
//! proves who it is afterwards with the credential minted at its first registration.

use super::Body;
use crate::app::{now, App};
use crate::auth::{bearer, same_secret, token_digest};
use crate::error::ApiError;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use libra_api::{RegisterRequest, RegisterResponse, SyncRequest, SyncResponse};
use std::sync::Arc;
use std::time::Duration;

/// The longest a sync may be held open waiting for work.
const MAX_WAIT_MS: u64 = 30_000;

/// What a node agent presented: whether it is the cluster's join token, and its digest (to
/// compare with the nodes' credentials).
fn node_secret(app: &App, headers: &HeaderMap) -> Result<(bool, String), ApiError> {
    match bearer(headers) {
        Some(t) => Ok((same_secret(t, &app.config.join_token), token_digest(t))),
        None => Err(ApiError::Unauthorized(
            "node agents must present their node credential (or, to join, the cluster's join token)".into(),
        )),
    }
}

pub async fn register(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(r): Body<RegisterRequest>,
) -> Result<Json<RegisterResponse>, ApiError> {
    let (joining, digest) = node_secret(&app, &headers)?;
    let price_base = app.config.default_price_base;
    let (r, credential) = app
        .run(move |g| {
            let c = g.register_node(&r, joining, &digest, price_base, now())?;
            Ok((r, c))
        })
        .await?;
    Ok(Json(RegisterResponse { name: r.name, period: app.config.period, credential }))
}

/// Long poll: when there is nothing for the node right away, wait for new work (or the wait to
/// run out) and look again.
pub async fn sync(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(r): Body<SyncRequest>,
) -> Result<Json<SyncResponse>, ApiError> {
    let (joining, digest) = node_secret(&app, &headers)?;
    let notified = app.work.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    let (r, resp) = app
        .run(move |g| {
            g.check_sync(&r, joining, &digest)?;
            let resp = g.sync(&r, now())?;
            Ok((r, resp))
        })
        .await?;
    let r = Arc::new(r);
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
        let again = {
            let r = r.clone();
            app.run(move |g| {
                g.commands(&r, &mut again)?;
                // A job cancelled while we waited: the node still reports it running.
                let active = g.active_on(&r.name)?;
                again.kill.extend(r.running.iter().map(|j| j.job).filter(|j| !active.contains(j)));
                Ok(again)
            })
            .await?
        };
        if !(again.start.is_empty()
            && again.kill.is_empty()
            && again.suspend.is_empty()
            && again.resume.is_empty())
        {
            return Ok(Json(again));
        }
    }
}

/// Slurm's completion record of a job (`libra slurm jobcomp-lua` sends it), authenticated with
/// the Slurm notifier's secret (`[executor] jobcomp_token_file`, read at each request so that a
/// new secret takes effect without a restart).
pub async fn slurm_jobcomp(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(r): Body<libra_api::SlurmJobComp>,
) -> Result<Json<libra_api::SlurmJobCompAck>, ApiError> {
    let Some(file) = app.config.executor.jobcomp_token_file.clone() else {
        return Err(ApiError::NotFound(
            "this server does not run its jobs on Slurm ([executor] kind = \"slurm\"): no completion records are taken".into(),
        ));
    };
    let secret = tokio::task::spawn_blocking(move || std::fs::read_to_string(&file))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::Internal(format!("executor.jobcomp_token_file: {e}")))?;
    let secret = secret.trim();
    match bearer(&headers) {
        Some(t) if !secret.is_empty() && same_secret(t, secret) => {}
        _ => return Err(ApiError::Unauthorized(
            "Slurm completion records must carry the Slurm notifier's secret (executor.jobcomp_token_file)"
                .into(),
        )),
    }
    let partition = app.config.executor.partition.clone();
    let ack = app.run(move |g| g.slurm_jobcomp(&r, &partition, now())).await?;
    app.changed();
    Ok(Json(ack))
}
