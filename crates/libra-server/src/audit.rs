//! The audit log: every administrator action (any request other than a GET under
//! `/api/admin/`, whatever its answer) and every refused request (401, 403, 429), with who made
//! it and from which address, appended to the `audit` table, which the store refuses to change
//! or delete (triggers). One middleware sees every request, so a new route cannot forget it.

use crate::app::{now, App};
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

/// The most bytes of a request or refusal kept in an entry.
const MAX_DETAIL: usize = 1000;

/// Set on a response by a handler that knows who the request was for when no token says it
/// (a refused login names its user).
#[derive(Clone)]
pub struct AuditCaller(pub String);

/// `e` as a response that names `user` in the audit log.
pub fn with_caller(e: ApiError, user: &str) -> Response {
    let mut r = e.into_response();
    r.extensions_mut().insert(AuditCaller(user.chars().take(100).collect()));
    r
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// An administrator's request body as the log keeps it: JSON with every password field
/// replaced, cut to `MAX_DETAIL`.
fn redacted(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut v) => {
            fn hide(v: &mut serde_json::Value) {
                match v {
                    serde_json::Value::Object(m) => {
                        for (k, x) in m.iter_mut() {
                            if k.contains("password") || k.contains("token") {
                                *x = serde_json::Value::String("(hidden)".into());
                            } else {
                                hide(x);
                            }
                        }
                    }
                    serde_json::Value::Array(a) => a.iter_mut().for_each(hide),
                    _ => {}
                }
            }
            hide(&mut v);
            v.to_string()
        }
        // Not JSON: the handler refuses it; the log need not keep what it was.
        Err(_) => format!("({} bytes, not JSON)", body.len()),
    };
    Some(cut(&text, MAX_DETAIL))
}

pub async fn record(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = cut(req.uri().path(), 300);
    let address = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string());
    let digest = crate::auth::bearer(req.headers()).map(crate::auth::token_digest);
    let admin_action = method != Method::GET && path.starts_with("/api/admin/");
    let (req, mut detail) = if admin_action {
        let (parts, body) = req.into_parts();
        match axum::body::to_bytes(body, crate::routes::MAX_BODY_BYTES).await {
            Ok(bytes) => {
                let d = redacted(&bytes);
                (Request::from_parts(parts, Body::from(bytes)), d)
            }
            Err(_) => {
                let r = ApiError::TooLarge(format!(
                    "request body: larger than the {} bytes accepted",
                    crate::routes::MAX_BODY_BYTES
                ))
                .into_response();
                return finish(&app, r, &method, &path, address, digest, Some("(body too large)".into()))
                    .await;
            }
        }
    } else {
        (req, None)
    };
    let resp = next.run(req).await;
    let status = resp.status();
    let refused =
        matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS);
    if !admin_action && !refused {
        return resp;
    }
    // A refusal's own words say why; the error bodies are small JSON.
    let resp = if refused || !status.is_success() {
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
        if let Ok(e) = serde_json::from_slice::<libra_api::ErrorBody>(&bytes) {
            let why = cut(&e.error, MAX_DETAIL);
            detail = Some(match detail {
                Some(d) => cut(&format!("{why} (request: {d})"), 2 * MAX_DETAIL),
                None => why,
            });
        }
        Response::from_parts(parts, Body::from(bytes))
    } else {
        resp
    };
    finish(&app, resp, &method, &path, address, digest, detail).await
}

async fn finish(
    app: &Arc<App>,
    resp: Response,
    method: &Method,
    path: &str,
    address: Option<String>,
    digest: Option<String>,
    detail: Option<String>,
) -> Response {
    let named = resp.extensions().get::<AuditCaller>().map(|c| c.0.clone());
    let (method, path, status) = (method.as_str().to_string(), path.to_string(), resp.status().as_u16());
    let written = app
        .run(move |g| {
            // The token's owner, whether or not the token still works (an expired token or a
            // disabled user's is still theirs).
            let caller = named.or_else(|| crate::store::users::token_owner(&g.db, &digest?).ok().flatten());
            let entry =
                crate::store::audit::Entry { time: now(), caller, address, method, path, status, detail };
            Ok(crate::store::audit::append(&g.db, &entry)?)
        })
        .await;
    if let Err(e) = written {
        // The request was answered; an audit that cannot be written is an operator's problem.
        tracing::error!("audit: {e}");
    }
    resp
}

pub use crate::store::audit::entries;
