//! The HTTP API. `router` returns the whole tree; the web portal (later) nests beside `/api`.

mod admin;
mod arrays;
mod node;
mod queue;
mod sweeps;
mod user;

use crate::app::App;
use crate::error::ApiError;
use axum::extract::{FromRequest, Request};
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// A JSON body whose decoding errors come back as 400 with the field that is wrong.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(e) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::TooLarge(format!(
                "request body: larger than the {MAX_BODY_BYTES} bytes accepted (see the limits on names, commands, environment and plans in the README)"
            ))),
            Err(e) => Err(ApiError::BadRequest(format!("request body: {}", e.body_text()))),
        }
    }
}

/// Query strings whose decoding errors name the parameter (400).
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Params(v)),
            Err(e) => Err(ApiError::BadRequest(format!("query: {}", e.body_text()))),
        }
    }
}

/// Path segments (`/api/jobs/{id}`) whose decoding errors come back as JSON, like every other
/// error of the API (400), rather than axum's plain text.
pub struct InPath<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> axum::extract::FromRequestParts<S> for InPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(InPath(v)),
            Err(e) => {
                let text = e.body_text();
                Err(ApiError::BadRequest(format!("path: {}", text.trim_start_matches("Invalid URL: "))))
            }
        }
    }
}

/// The largest request body accepted (413 beyond): the largest submission the field limits
/// allow (`crate::sched`) fits with room to spare.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/api/openapi.json", get(crate::openapi::document))
        .route("/api/health", get(|| async { "ok" }))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/healthz", get(crate::metrics::healthz))
        .route("/readyz", get(crate::metrics::readyz))
        .route("/api/login", post(user::login))
        .route("/api/logout", post(user::logout))
        .route("/api/passwd", post(user::passwd))
        .route("/api/jobs", post(user::submit).get(user::list))
        .route("/api/quote", post(user::quote))
        .route("/api/arrays", post(arrays::submit))
        .route("/api/arrays/{id}", get(arrays::get))
        .route("/api/arrays/{id}/cancel", post(arrays::cancel))
        .route("/api/jobs/{id}", get(user::job))
        .route("/api/jobs/{id}/cancel", post(user::cancel))
        .route("/api/jobs/{id}/output", get(user::output))
        .route("/api/jobs/{id}/update", post(queue::update))
        .route("/api/jobs/{id}/hold", post(queue::hold))
        .route("/api/jobs/{id}/release", post(queue::release))
        .route("/api/queue", get(queue::queue))
        .route("/api/history", get(queue::history))
        .route("/api/balance", get(user::balance))
        .route("/api/ledger", get(user::ledger))
        .route("/api/accounts", get(user::accounts))
        .route("/api/accounts/{name}", get(user::account))
        .route("/api/accounts/{name}/ledger", get(user::account_ledger))
        .route("/api/sweeps", post(sweeps::create).get(sweeps::list))
        .route("/api/sweeps/{id}", get(sweeps::get))
        .route("/api/sweeps/{id}/usage", get(sweeps::usage))
        .route("/api/sweeps/{id}/results", get(sweeps::results))
        .route("/api/sweeps/{id}/deadline", post(sweeps::set_deadline))
        .route("/api/sweeps/{id}/budget", post(sweeps::set_budget))
        .route("/api/sweeps/{id}/{action}", post(sweeps::action))
        .route("/api/admin/nodes", get(admin::nodes))
        .route("/api/admin/nodes/{name}/forget", post(admin::node_forget))
        .route("/api/admin/nodes/{name}/{action}", post(admin::node_action))
        .route("/api/admin/usage", get(admin::usage))
        .route("/api/admin/accounts", get(admin::accounts).post(admin::account_create))
        .route("/api/admin/accounts/transfer", post(admin::account_transfer))
        .route("/api/admin/accounts/{name}/users", post(admin::account_add_user))
        .route("/api/admin/accounts/{name}/remove-user", post(admin::account_remove_user))
        .route("/api/admin/accounts/{name}/default", post(admin::account_default))
        .route("/api/admin/accounts/{name}/deposit", post(admin::account_deposit))
        .route("/api/admin/accounts/{name}/allocations", post(admin::account_allocate))
        .route("/api/admin/pricing", get(admin::pricing).post(admin::set_pricing))
        .route("/api/admin/policy", get(admin::policy).post(admin::set_policy))
        .route("/api/admin/jobs/{id}/{action}", post(admin::job_action))
        .route("/api/admin/users", get(admin::users).post(admin::user_add))
        .route("/api/admin/users/{name}/{action}", post(admin::user_action))
        .route("/api/admin/audit", get(admin::audit))
        .route("/api/admin/credit", post(admin::credit))
        .route("/api/admin/backup", post(admin::backup))
        .route("/api/node/register", post(node::register))
        .route("/api/node/sync", post(node::sync))
        .route("/api/slurm/jobcomp", post(node::slurm_jobcomp))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        // Inside the audit log's layer, so that a refused read is logged as any refusal.
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::read_limit::limit))
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::audit::record))
        .with_state(app)
        // The portal serves only `/` and `/assets/*`: nothing under `/api` is shadowed.
        .merge(libra_portal::router())
}
