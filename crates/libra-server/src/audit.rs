//! The audit log: every administrator action (any request other than a GET under
//! `/api/admin/`, whatever its answer) and every refused request (401, 403, 429), with who made
//! it and from which address, appended to the `audit` table, which the store refuses to change
//! or delete (triggers). One middleware sees every request, so a new route cannot forget it.
//!
//! A refusal costs the refuser little, and each entry is a write under the state's lock: a
//! client sending bad tokens, or a user past the submission rate, would otherwise turn a cheap
//! refusal into a store write per request and grow the store without bound. So within
//! `audit_repeat_window` of a written refusal, further refusals alike (same peer, status,
//! method and route; a peer is an address, an IPv6 /64, or a local user's account:
//! `crate::peer`) are counted in memory, and written as one entry with their count when the
//! window ends (`Repeats`; the watchdog writes them, and a graceful stop writes what is left).
//! A server killed with -9 loses at most the last window's counts, never a first refusal.

use crate::app::{now, App};
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    // A local user's requests name their Unix account too: on loopback the address alone does
    // not say who it was (`crate::peer`).
    let peer = req.extensions().get::<crate::peer::Peer>().copied();
    let address = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| match peer {
        Some(crate::peer::Peer::Account(uid)) => format!("{} (local uid {uid})", c.0.ip()),
        _ => c.0.ip().to_string(),
    });
    // Refusals alike are counted by peer: an IPv6 host by its /64 and a local user by their
    // account, whichever of their addresses each came from (or each new address would be a
    // new kind, and a write).
    let counted_as = peer.map(|p| p.to_string()).or_else(|| address.clone());
    let digest = crate::auth::bearer(req.headers()).map(crate::auth::token_digest);
    // The route the request matched (`/api/jobs/{id}`): refusals alike are counted by it. (A
    // shared string: nothing is copied unless the request is refused.)
    let route = req.extensions().get::<MatchedPath>().cloned();
    let admin_action = method != Method::GET && path.starts_with("/api/admin/");
    let (req, detail) = if admin_action {
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
                return finish(
                    &app, r, &method, &path, route, address, counted_as, digest,
                    // The refusal's own words name the limit (`finish` reads them).
                    None,
                )
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
    finish(&app, resp, &method, &path, route, address, counted_as, digest, detail).await
}

#[allow(clippy::too_many_arguments)]
async fn finish(
    app: &Arc<App>,
    resp: Response,
    method: &Method,
    path: &str,
    route: Option<MatchedPath>,
    address: Option<String>,
    counted_as: Option<String>,
    digest: Option<String>,
    detail: Option<String>,
) -> Response {
    let who = match (resp.extensions().get::<AuditCaller>(), digest) {
        (Some(c), _) => Who::Named(c.0.clone()),
        (None, Some(d)) => Who::Token(d),
        (None, None) => Who::Nobody,
    };
    if matches!(
        resp.status(),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
    ) {
        app.metrics.refusal(resp.status().as_u16());
        let kind = Kind {
            address: counted_as,
            status: resp.status().as_u16(),
            method: method.as_str().to_string(),
            route: route.map_or_else(|| path.to_string(), |m| cut(m.as_str(), 300)),
        };
        let (write, ended) = app.audit_repeats.note(kind, &who, now(), Instant::now());
        if let Some(r) = ended {
            write_repeated(app, vec![r]).await;
        }
        if !write {
            return resp;
        }
    }
    // A refusal's own words say why (the error bodies are small JSON), read only for an entry
    // that is written: a client sending thousands of refused requests a second, each counted
    // in memory, costs no more than the refusals themselves.
    let status = resp.status();
    let refused =
        matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS);
    let (resp, detail) = if refused || !status.is_success() {
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
        let detail = match serde_json::from_slice::<libra_api::ErrorBody>(&bytes) {
            Ok(e) => {
                let why = cut(&e.error, MAX_DETAIL);
                Some(match detail {
                    Some(d) => cut(&format!("{why} (request: {d})"), 2 * MAX_DETAIL),
                    None => why,
                })
            }
            Err(_) => detail,
        };
        (Response::from_parts(parts, Body::from(bytes)), detail)
    } else {
        (resp, detail)
    };
    let (method, path, status) = (method.as_str().to_string(), path.to_string(), resp.status().as_u16());
    let written = app
        .run(move |g| {
            let caller = caller_of(&g.db, Some(&who));
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

/// The most kinds of refusal counted at once. Past it (many addresses in one window) a refusal
/// is counted under its kind without its address, so memory stays bounded.
const MAX_KINDS: usize = 100_000;

/// What makes two refusals alike. `route` is the matched route (`/api/jobs/{id}`), so that
/// varying a path's parameters does not make each refusal new.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Kind {
    pub address: Option<String>,
    pub status: u16,
    pub method: String,
    pub route: String,
}

/// Who made a refused request, as far as the request says (resolved to a user when written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// A refused login names its user.
    Named(String),
    /// The digest of the bearer token sent.
    Token(String),
    Nobody,
}

#[derive(Debug)]
struct Counting {
    /// The window ends here: a refusal alike after it is written again.
    until: Instant,
    count: u64,
    /// Unix seconds of the first and last refusal counted.
    first: f64,
    last: f64,
    who: Who,
    /// Whether the counted refusals came from more than one caller (or another than `who`).
    mixed: bool,
}

/// Refusals counted but not yet written: `count` more of `kind` between `first` and `last`.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeated {
    pub kind: Kind,
    pub count: u64,
    pub first: f64,
    pub last: f64,
    /// The caller of every one of them, when they share one.
    pub who: Option<Who>,
}

impl Repeated {
    /// The entry's detail: how many, when, and that they were counted rather than written.
    fn detail(&self) -> String {
        format!(
            "{} more refused like this one (status {}, {} {}) from {} between Unix times {:.3} and {:.3}{}: \
             counted, not written one by one",
            self.count,
            self.kind.status,
            self.kind.method,
            self.kind.route,
            self.kind.address.as_deref().unwrap_or("addresses past the tracked ones"),
            self.first,
            self.last,
            if self.who.is_some() { "" } else { ", from more than one caller" },
        )
    }
}

/// The refusals counted in the current windows (see the module's comment).
pub struct Repeats {
    window: Duration,
    counting: Mutex<HashMap<Kind, Counting>>,
}

impl Repeats {
    /// `window` seconds (0: every refusal is written).
    pub fn new(window: f64) -> Self {
        Repeats {
            window: Duration::from_secs_f64(window.clamp(0.0, 3600.0)),
            counting: Mutex::new(HashMap::new()),
        }
    }

    /// A refusal of `kind` by `who` at `wall` (Unix seconds), `at`. True when it is to be
    /// written now (the first alike in a window); then also the count of the window it ends,
    /// if that window counted any.
    pub fn note(&self, mut kind: Kind, who: &Who, wall: f64, at: Instant) -> (bool, Option<Repeated>) {
        if self.window.is_zero() {
            return (true, None);
        }
        let mut map = self.counting.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_KINDS && !map.contains_key(&kind) {
            kind.address = None;
        }
        match map.get_mut(&kind) {
            Some(c) if at < c.until => {
                c.count += 1;
                c.last = wall;
                c.mixed |= c.who != *who;
                (false, None)
            }
            _ => {
                let fresh = Counting {
                    until: at + self.window,
                    count: 0,
                    first: wall,
                    last: wall,
                    who: who.clone(),
                    mixed: false,
                };
                let ended = map.insert(kind.clone(), fresh);
                (true, ended.and_then(|c| Self::repeated(kind, c)))
            }
        }
    }

    /// The windows ended by `at`, forgotten; the counts of those that counted any.
    pub fn due(&self, at: Instant) -> Vec<Repeated> {
        let mut map = self.counting.lock().unwrap_or_else(|p| p.into_inner());
        let ended: Vec<Kind> = map.iter().filter(|(_, c)| c.until <= at).map(|(k, _)| k.clone()).collect();
        ended.into_iter().filter_map(|k| map.remove(&k).and_then(|c| Self::repeated(k, c))).collect()
    }

    /// Every window, ended or not (a stopping server writes them).
    pub fn drain(&self) -> Vec<Repeated> {
        let mut map = self.counting.lock().unwrap_or_else(|p| p.into_inner());
        map.drain().filter_map(|(k, c)| Self::repeated(k, c)).collect()
    }

    fn repeated(kind: Kind, c: Counting) -> Option<Repeated> {
        (c.count > 0).then(|| Repeated {
            kind,
            count: c.count,
            first: c.first,
            last: c.last,
            who: (!c.mixed).then_some(c.who),
        })
    }
}

/// The caller `who` names, looked up as a written entry's is.
fn caller_of(db: &rusqlite::Connection, who: Option<&Who>) -> Option<String> {
    match who? {
        Who::Named(n) => Some(n.clone()),
        // The token's owner, whether or not the token still works (an expired token or a
        // disabled user's is still theirs).
        Who::Token(d) => crate::store::users::token_owner(db, d).ok().flatten(),
        Who::Nobody => None,
    }
}

/// Writes counted refusals, one entry per window.
pub async fn write_repeated(app: &Arc<App>, repeated: Vec<Repeated>) {
    if repeated.is_empty() {
        return;
    }
    let written = app
        .run(move |g| {
            for r in &repeated {
                let entry = crate::store::audit::Entry {
                    time: now(),
                    caller: caller_of(&g.db, r.who.as_ref()),
                    address: r.kind.address.clone(),
                    method: r.kind.method.clone(),
                    path: r.kind.route.clone(),
                    status: r.kind.status,
                    detail: Some(r.detail()),
                };
                crate::store::audit::append(&g.db, &entry)?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = written {
        tracing::error!("audit: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(address: &str, status: u16, route: &str) -> Kind {
        Kind { address: Some(address.into()), status, method: "GET".into(), route: route.into() }
    }

    #[test]
    fn the_first_refusal_is_written_the_rest_of_its_window_counted_and_nothing_lost() {
        let r = Repeats::new(10.0);
        let t0 = Instant::now();
        let k = kind("10.0.0.1", 401, "/api/balance");
        assert_eq!(r.note(k.clone(), &Who::Nobody, 100.0, t0), (true, None));
        for i in 1..=999u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 5);
            assert_eq!(r.note(k.clone(), &Who::Nobody, 100.0 + f64::from(i) * 0.005, at), (false, None));
        }
        // Another address, status or route is another kind: written at once.
        assert!(r.note(kind("10.0.0.2", 401, "/api/balance"), &Who::Nobody, 101.0, t0).0);
        assert!(r.note(kind("10.0.0.1", 403, "/api/balance"), &Who::Nobody, 101.0, t0).0);
        assert!(r.note(kind("10.0.0.1", 401, "/api/jobs/{id}"), &Who::Nobody, 101.0, t0).0);
        // Nothing is due before the window ends; then the count, once, and the kinds that
        // counted nothing are forgotten without an entry.
        assert!(r.due(t0 + Duration::from_secs(9)).is_empty());
        let due = r.due(t0 + Duration::from_secs(10));
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!((due[0].count, due[0].first, due[0].who.clone()), (999, 100.0, Some(Who::Nobody)));
        assert!((due[0].last - 104.995).abs() < 1e-9);
        assert!(due[0]
            .detail()
            .starts_with("999 more refused like this one (status 401, GET /api/balance) from 10.0.0.1"));
        assert!(r.due(t0 + Duration::from_secs(3600)).is_empty());
        // After its window, the kind is written again.
        assert!(r.note(k, &Who::Nobody, 200.0, t0 + Duration::from_secs(11)).0);
    }

    #[test]
    fn a_refusal_after_the_window_writes_the_count_before_itself() {
        let r = Repeats::new(1.0);
        let t0 = Instant::now();
        let k = kind("10.0.0.1", 429, "/api/jobs");
        let alice = Who::Token("digest-a".into());
        assert!(r.note(k.clone(), &alice, 1.0, t0).0);
        assert!(!r.note(k.clone(), &alice, 1.5, t0 + Duration::from_millis(500)).0);
        let (write, ended) = r.note(k.clone(), &alice, 2.5, t0 + Duration::from_millis(1500));
        assert!(write);
        let ended = ended.expect("the ended window's count");
        assert_eq!((ended.count, ended.who), (1, Some(alice.clone())));
        // Callers that differ within a window are not attributed to the first.
        assert!(!r.note(k.clone(), &Who::Token("digest-b".into()), 2.6, t0 + Duration::from_millis(1600)).0);
        let left = r.drain();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].who, None);
        assert!(left[0].detail().contains("from more than one caller"), "{}", left[0].detail());
    }

    #[test]
    fn a_zero_window_writes_every_refusal() {
        let r = Repeats::new(0.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(r.note(kind("10.0.0.1", 401, "/api/balance"), &Who::Nobody, 1.0, t0), (true, None));
        }
        assert!(r.drain().is_empty());
    }

    #[test]
    fn many_addresses_in_one_window_are_counted_without_their_address_past_the_bound() {
        let r = Repeats::new(10.0);
        let t0 = Instant::now();
        for i in 0..MAX_KINDS {
            assert!(r.note(kind(&format!("a{i}"), 401, "/api/balance"), &Who::Nobody, 1.0, t0).0);
        }
        // The next new address shares one kind with every later one.
        assert!(r.note(kind("b0", 401, "/api/balance"), &Who::Nobody, 1.0, t0).0);
        for i in 1..1000 {
            assert!(!r.note(kind(&format!("b{i}"), 401, "/api/balance"), &Who::Nobody, 1.0, t0).0);
        }
        assert!(r.counting.lock().unwrap().len() <= MAX_KINDS + 1);
        let due = r.due(t0 + Duration::from_secs(10));
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].kind.address.clone(), due[0].count), (None, 999));
        assert!(due[0].detail().contains("from addresses past the tracked ones"));
    }
}
