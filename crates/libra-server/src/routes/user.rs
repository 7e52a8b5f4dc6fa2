//! What every user can do, each on their own jobs and money only.

use super::{Body, InPath, Params};
use crate::app::{now, App};
use crate::auth;
use crate::error::ApiError;
use crate::{ledger, store};
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use libra_api::*;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

type Res<T> = Result<Json<T>, ApiError>;

/// Passwords are checked a few at a time, an unknown user costs the same as a known one, and
/// repeated wrong passwords back off (`crate::login_guard`). A refusal carries the user name it
/// was for, for the audit log.
pub async fn login(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<crate::peer::Peer>,
    Body(req): Body<LoginRequest>,
) -> Result<Json<LoginResponse>, Response> {
    let named = |e: ApiError| crate::audit::with_caller(e, &req.user);
    let (id, admin) = check_password(&app, &req.user, &req.password, peer).await.map_err(named)?;
    let (token, expires) = app
        .run(move |g| {
            let t = now();
            let token = auth::issue_token(&g.db, id, g.token_ttl, None, t)?;
            if store::users::hold_tokens(&g.db, id, g.max_tokens_per_user, t)? > 0 {
                g.forget_tokens();
            }
            Ok((token, t + g.token_ttl))
        })
        .await
        .map_err(named)?;
    Ok(Json(LoginResponse { token, user: req.user, admin, expires: Some(expires) }))
}

/// The user's id and whether they are an administrator, if `password` is theirs and they may
/// log in; throttled and bounded as `login` says.
async fn check_password(
    app: &Arc<App>,
    user: &str,
    password: &str,
    addr: crate::peer::Peer,
) -> Result<(i64, bool), ApiError> {
    let guard = &app.login_guard;
    let started = std::time::Instant::now();
    if let Err(wait) = guard.check(user, addr, started) {
        let secs = wait.as_secs().max(1);
        return Err(ApiError::TooMany(
            format!("login: too many wrong passwords for {user} from {addr}; try again in {secs} s"),
            secs,
        ));
    }
    // One check at a time per peer: however many connections it opens, a peer takes at most
    // one of the hashing threads.
    let Some(_turn) = guard.turn(addr, crate::login_guard::PEER_WAIT).await else {
        return Err(ApiError::TooMany(
            format!("login: another login from {addr} is still being checked; try again in a second"),
            1,
        ));
    };
    let Some(permit) = guard.try_hash() else {
        return Err(ApiError::TooMany(
            "login: the server is checking too many passwords at once; try again in a second".into(),
            1,
        ));
    };
    let name = user.to_string();
    let found = app.run(move |g| Ok(store::users::login(&g.db, &name).ok().flatten())).await?;
    // Argon2 is slow on purpose: verify off the async workers and outside the lock; an unknown
    // (or removed) user is checked against a decoy so that both take the same time.
    // A removed account's hash is no hash at all: checked against the decoy too, so that it
    // takes as long as any other.
    let hash = found
        .as_ref()
        .map(|f| f.1.clone())
        .filter(|h| h.starts_with("$argon2"))
        .unwrap_or_else(|| guard.decoy.clone());
    let password = password.to_string();
    let verified = guard.hash(move |mem| auth::verify_password_in(&password, &hash, mem)).await?;
    drop(permit);
    match found {
        // Told only to whoever knows the password: the name's existence stays hidden.
        Some((_, _, _, true)) if verified => Err(ApiError::Unauthorized(format!(
            "login refused: the account {user} is disabled; ask an administrator"
        ))),
        Some((id, _, admin, false)) if verified => {
            guard.succeeded(user, addr);
            Ok((id, admin))
        }
        _ => {
            guard.failed(user, addr, std::time::Instant::now());
            Err(ApiError::Unauthorized("login refused: unknown user or wrong password".into()))
        }
    }
}

/// Revokes the token the request carries.
pub async fn logout(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    _ignored: axum::body::Bytes,
) -> Res<serde_json::Value> {
    app.run(move |g| {
        let who = g.caller(&headers)?;
        if who.sweep.is_some() {
            return Err(ApiError::Forbidden(
                "forbidden: a hosted sweep's credential ends with its sweep; it cannot log out".into(),
            ));
        }
        let digest = auth::bearer(&headers).map(auth::token_digest).unwrap_or_default();
        store::users::delete_token(&g.db, &digest)?;
        g.forget_tokens();
        Ok(Json(serde_json::json!({ "user": who.name, "logged_out": true })))
    })
    .await
}

/// Changes the caller's password (the current one required) and revokes every other token of
/// theirs: whoever else held one is logged out.
pub async fn passwd(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Extension(peer): Extension<crate::peer::Peer>,
    Body(req): Body<PasswdRequest>,
) -> Res<PasswdResponse> {
    let h = headers.clone();
    let who = app.run(move |g| g.caller(&h)).await?;
    if who.sweep.is_some() {
        return Err(ApiError::Forbidden(
            "forbidden: a hosted sweep's credential cannot change its owner's password".into(),
        ));
    }
    if req.new_password.len() < 4 || req.new_password.len() > 1024 {
        return Err(ApiError::BadRequest("new_password: give 4 to 1024 characters".into()));
    }
    check_password(&app, &who.name, &req.old_password, peer).await.map_err(|e| match e {
        ApiError::Unauthorized(_) => {
            ApiError::Forbidden("old_password: not the current password; the password is unchanged".into())
        }
        e => e,
    })?;
    let pw = req.new_password.clone();
    let hash = app.login_guard.hash(move |mem| auth::hash_password_in(&pw, mem)).await??;
    app.run(move |g| {
        let keep = auth::bearer(&headers).map(auth::token_digest).unwrap_or_default();
        let revoked = store::users::set_password(&g.db, who.id, &hash, &keep)?;
        g.forget_tokens();
        Ok(Json(PasswdResponse { user: who.name, revoked_tokens: revoked }))
    })
    .await
}

/// `Idempotency-Key`: a client that retries a submission after losing the answer sends the same
/// key and gets the job its first attempt made, never a second one.
pub async fn submit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<SubmitRequest>,
) -> Res<JobInfo> {
    let key = idempotency_key(&headers)?;
    let job = app.submit_grouped(headers, req, key).await?;
    Ok(Json(handed_on(&app, job).await))
}

/// How long a submission's answer waits for an executor that launches jobs itself (Slurm) to
/// have the job, so that the answer carries its id (`slurm_job_id`). The admission is already
/// committed; past this the answer goes without the id (`libra status` shows it later).
const HAND_ON_WAIT: Duration = Duration::from_secs(3);

/// The job as the executor has it: under Slurm, once sbatch has given it an id (or refused it).
async fn handed_on(app: &Arc<App>, job: JobInfo) -> JobInfo {
    let waits = app.executor.limits().launches_itself
        && job.state == JobState::Pending
        && !job.nodes.is_empty()
        && job.slurm_job_id.is_none();
    if !waits {
        return job;
    }
    let deadline = tokio::time::Instant::now() + HAND_ON_WAIT;
    let mut job = job;
    loop {
        // The executor wakes the agents' waiters once it has recorded an id.
        let notified = app.work.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let id = job.id;
        match app.run(move |g| Ok(crate::store::job(&g.db, id)?)).await {
            Ok(Some(j)) => job = j,
            _ => return job,
        }
        if job.slurm_job_id.is_some() || job.state != JobState::Pending {
            return job;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return job;
        }
    }
}

/// The request's `Idempotency-Key`, if it carries a valid one.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    Ok(match headers.get("idempotency-key") {
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
    })
}

pub async fn quote(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(req): Body<QuoteRequest>,
) -> Res<QuoteResponse> {
    app.run(move |g| {
        let caller = g.caller(&headers)?;
        g.take_quote(&caller, now())?;
        Ok(Json(g.quote(&req.spec, &req.dependencies, &caller, now())?))
    })
    .await
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    limit: Option<u32>,
    /// The next page: jobs older than this job id.
    #[serde(default)]
    after: Option<u64>,
    /// These jobs only (comma-separated ids, at most `MAX_IDS`): a broker asking after all
    /// its jobs on this cluster at once (`libra_broker`'s `cluster_poll`).
    #[serde(default)]
    ids: Option<String>,
}

/// The most jobs one `?ids=` may name.
pub const MAX_IDS: usize = 1000;

/// `?ids=1,2,3` as job ids, or 400 naming the field and what is accepted.
fn parse_ids(text: &str) -> Result<Vec<u64>, ApiError> {
    let ids: Vec<u64> = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            ApiError::BadRequest(format!(
                "ids: '{}' is not accepted: give job ids separated by commas (at most {MAX_IDS})",
                text.chars().take(100).collect::<String>()
            ))
        })?;
    if ids.len() > MAX_IDS {
        return Err(ApiError::BadRequest(format!(
            "ids: {} job ids is not accepted: give at most {MAX_IDS} (ask again for the rest)",
            ids.len()
        )));
    }
    Ok(ids)
}

/// The most entries one page of a listing may hold.
pub const MAX_PAGE: u32 = 10_000;

pub async fn list(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(q): Params<ListQuery>,
) -> Result<(axum::Extension<crate::read_limit::ReadCost>, Json<Vec<JobInfo>>), ApiError> {
    let page = app
        .read(headers, move |db, who| {
            if q.all {
                who.require_admin("list everyone's jobs")?;
            }
            let user = if q.all { None } else { Some(who.id) };
            if let Some(ids) = &q.ids {
                return Ok(store::jobs_by_ids(db, user, &parse_ids(ids)?)?);
            }
            let limit = q.limit.unwrap_or(1000).min(MAX_PAGE);
            Ok(store::jobs(db, user, limit, q.after)?)
        })
        .await?;
    // A page of 10,000 jobs is ten reads' work (`crate::read_limit`).
    Ok((axum::Extension(crate::read_limit::ReadCost::of_rows(page.len())), Json(page)))
}

pub async fn job(State(app): State<Arc<App>>, headers: HeaderMap, InPath(id): InPath<u64>) -> Res<JobInfo> {
    app.read(headers, move |db, who| Ok(Json(crate::sched::owned_job(db, &who, id)?))).await
}

/// Actions take no body but read whatever a client sends anyway (`_ignored`, here and in the
/// other action routes): hyper closes a keep-alive connection whose request body is left
/// unread, and a client's next request on that connection would then fail.
pub async fn cancel(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(id): InPath<u64>,
    _ignored: axum::body::Bytes,
) -> Res<JobInfo> {
    let job = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            g.cancel(&who, id, now())
        })
        .await?;
    app.changed();
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
    InPath(id): InPath<u64>,
    Params(q): Params<OutputQuery>,
) -> Res<JobOutput> {
    app.read(headers, move |db, who| {
        let job = crate::sched::owned_job(db, &who, id)?;
        Ok(Json(store::output(db, id, job.state, q.rank, q.stdout_from, q.stderr_from)?))
    })
    .await
}

pub async fn balance(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Balance> {
    app.read(headers, move |db, who| Ok(Json(ledger::balance(db, who.id)?))).await
}

/// The caller's accounts: their personal one and the shared ones they are a member of.
pub async fn accounts(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Vec<MyAccount>> {
    app.read(headers, move |db, who| Ok(Json(crate::projects::mine(db, who.id, now())?))).await
}

/// One account: one of the caller's (any for an administrator).
pub async fn account(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
) -> Res<MyAccount> {
    app.read(headers, move |db, who| {
        Ok(Json(crate::projects::one(db, who.id, &who.name, who.admin, &name, now())?))
    })
    .await
}

/// One account's ledger entries, newest first: one of the caller's (any for an administrator).
pub async fn account_ledger(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
) -> Res<Vec<AccountEntry>> {
    app.read(headers, move |db, who| {
        Ok(Json(crate::projects::entries(db, who.id, &who.name, who.admin, &name, 10_000)?))
    })
    .await
}

pub async fn ledger(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Vec<LedgerEntry>> {
    app.read(headers, move |db, who| Ok(Json(ledger::entries(db, Some(who.id), 10_000)?))).await
}
