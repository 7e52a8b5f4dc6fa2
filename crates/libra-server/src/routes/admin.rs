//! Administrator endpoints: every one refuses a non-administrator with 403.

use super::{Body, InPath, Params};
use crate::app::{now, App};
use crate::auth;
use crate::error::ApiError;
use crate::ledger;
use crate::projects;
use crate::store;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use libra_api::*;
use libra_core::policy::{Placement, BEYOND_POLICY_NAMES};
use libra_core::{Money, POLICY_NAMES};

use std::sync::Arc;

type Res<T> = Result<Json<T>, ApiError>;

pub async fn nodes(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Vec<NodeInfo>> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("list the nodes")?;
        Ok(Json(node_infos(g)))
    })
    .await
}

/// Every node as the cluster view and its agent's last report have it, by name.
fn node_infos(g: &crate::app::Inner) -> Vec<NodeInfo> {
    let t = now();
    let mut v: Vec<NodeInfo> = g
        .nodes
        .iter()
        .map(|(name, rt)| {
            let n = g.cluster.node(rt.idx);
            NodeInfo {
                name: name.clone(),
                up: n.up,
                cpus: n.spec.cpus,
                load: g.shown_load(rt.idx, t),
                jobs: rt.shares.clone(),
                mechanism: rt.mechanism.clone(),
                price_base: n.spec.price_base,
                last_seen: rt.last_seen,
                runs_jobs_as: if rt.switches_users {
                    "each user's account".into()
                } else {
                    format!(
                        "{} only",
                        if rt.account.is_empty() { "the agent's account" } else { &rt.account }
                    )
                },
                drained: !n.accepting,
                drain_reason: rt.drain_reason.clone(),
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Forgets a node's credential: the node must join again with the join token, and its jobs
/// are lost as a silent node's are.
pub async fn node_forget(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
) -> Res<NodeForgotten> {
    let jobs_lost = app
        .run({
            let name = name.clone();
            move |g| {
                g.caller(&headers)?.require_admin("forget a node")?;
                g.forget_node(&name, now())
            }
        })
        .await?;
    app.changed();
    Ok(Json(NodeForgotten { name, jobs_lost }))
}

/// What `POST /api/admin/nodes/{name}/drain` may say: why (`?reason=...`).
#[derive(Debug, serde::Deserialize)]
pub struct DrainQuery {
    pub reason: Option<String>,
}

/// The longest drain reason kept, in bytes.
const MAX_DRAIN_REASON: usize = 1000;

/// `POST /api/admin/nodes/{name}/drain` (with an optional `?reason=`) or `/undrain`.
pub async fn node_action(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath((name, action)): InPath<(String, String)>,
    Params(q): Params<DrainQuery>,
) -> Res<NodeInfo> {
    let drained = match action.as_str() {
        "drain" => true,
        "undrain" => false,
        other => {
            return Err(ApiError::NotFound(format!(
                "action: '{other}' is not a node action; accepted: drain, undrain"
            )))
        }
    };
    let reason = q.reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if reason.as_ref().is_some_and(|r| r.len() > MAX_DRAIN_REASON) {
        return Err(ApiError::BadRequest(format!("reason: at most {MAX_DRAIN_REASON} bytes are accepted")));
    }
    let all = app
        .run({
            let name = name.clone();
            move |g| {
                g.caller(&headers)?.require_admin(&format!("{action} a node"))?;
                g.set_drained(&name, drained, reason)?;
                // Undrained capacity may start queued jobs (space-shared policies) at once.
                g.dispatch_queue(now())?;
                Ok(node_infos(g))
            }
        })
        .await?;
    app.changed();
    all.into_iter()
        .find(|n| n.name == name)
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("node: '{name}' is not a node of this cluster")))
}

/// Jobs, CPU hours and what was charged per UTC day, user and account (`?account=&user=&since=&until=`).
pub async fn usage(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(q): Params<UsageQuery>,
) -> Res<Vec<UsageRow>> {
    app.read(headers, move |db, who| {
        who.require_admin("see the cluster's usage")?;
        Ok(Json(projects::usage(db, &q)?))
    })
    .await
}

/// Every shared account with its credit, allocations and members.
pub async fn accounts(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<Vec<AccountInfo>> {
    app.read(headers, move |db, who| {
        who.require_admin("list the accounts")?;
        Ok(Json(projects::list(db, now())?))
    })
    .await
}

pub async fn account_create(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(a): Body<AccountCreate>,
) -> Res<AccountInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("create accounts")?;
        Ok(Json(projects::create(&g.db, &a.name, now())?))
    })
    .await
}

/// Each account change is one transaction: the membership, the default, the entries.
fn in_tx<T>(
    g: &crate::app::Inner,
    f: impl FnOnce(&rusqlite::Connection) -> Result<T, projects::ProjectError>,
) -> Result<T, ApiError> {
    Ok(store::in_transaction(&g.db, f)?)
}

/// Makes a change of credit (a user's credit, or a shared account's) once per idempotency key.
/// `(caller, key, what)`: who asks, their key (none: every request is a change of its own) and
/// what the change is. The first request with a key makes the change (`first`) and records the
/// key in the same transaction; a retry whose answer was lost is answered with `repeat`, the
/// balances as they are now, and changes nothing; the key given for another change is refused,
/// naming the one it was used for. A caller's keys are one set across every such change.
fn once_per_key<T, E: From<projects::ProjectError>>(
    db: &rusqlite::Connection,
    (caller, key, what): (i64, Option<&str>, &str),
    repeat: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    first: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
) -> Result<T, E> {
    let Some(key) = key else { return first(db) };
    match projects::request(db, caller, key).map_err(projects::ProjectError::from)? {
        Some(done) if done == what => repeat(db),
        Some(done) => Err(projects::ProjectError::Conflict(format!(
            "Idempotency-Key: this key was used for {done}; another change needs a new key"
        ))
        .into()),
        None => {
            projects::record_request(db, caller, key, what, now()).map_err(projects::ProjectError::from)?;
            first(db)
        }
    }
}

pub async fn account_add_user(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
    Body(a): Body<AccountUserAdd>,
) -> Res<AccountInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("add users to accounts")?;
        in_tx(g, |db| projects::add_user(db, &name, &a.user, a.limit, a.default, now())).map(Json)
    })
    .await
}

pub async fn account_remove_user(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
    Body(a): Body<AccountUserRemove>,
) -> Res<AccountInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("remove users from accounts")?;
        in_tx(g, |db| projects::remove_user(db, &name, &a.user, now())).map(Json)
    })
    .await
}

pub async fn account_default(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
    Body(a): Body<AccountDefault>,
) -> Res<AccountInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("set users' default accounts")?;
        in_tx(g, |db| projects::set_default(db, &name, &a.user, now())).map(Json)
    })
    .await
}

pub async fn account_deposit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
    Body(a): Body<AccountDeposit>,
) -> Res<AccountInfo> {
    let key = super::user::idempotency_key(&headers)?;
    app.run(move |g| {
        let who = g.caller(&headers)?;
        who.require_admin("change credit")?;
        some_amount(a.amount)?;
        let what = format!("a deposit of {} to account {name}", a.amount);
        in_tx(g, |db| {
            once_per_key(
                db,
                (who.id, key.as_deref(), &what),
                |db| projects::info(db, projects::resolve(db, &name)?, now()),
                |db| projects::deposit(db, &name, a.amount, who.id, now()),
            )
        })
        .map(Json)
    })
    .await
}

pub async fn account_transfer(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(a): Body<AccountTransfer>,
) -> Res<TransferResponse> {
    let key = super::user::idempotency_key(&headers)?;
    app.run(move |g| {
        let who = g.caller(&headers)?;
        who.require_admin("move credit")?;
        let what = format!("a transfer of {} from account {} to account {}", a.amount, a.from, a.to);
        in_tx(g, |db| {
            once_per_key(
                db,
                (who.id, key.as_deref(), &what),
                |db| {
                    let info = |name: &str| projects::info(db, projects::resolve(db, name)?, now());
                    Ok((info(&a.from)?, info(&a.to)?))
                },
                |db| projects::transfer(db, &a.from, &a.to, a.amount, who.id, now()),
            )
        })
        .map(|(from, to)| Json(TransferResponse { from, to }))
    })
    .await
}

pub async fn account_allocate(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath(name): InPath<String>,
    Body(a): Body<AccountAllocate>,
) -> Res<AccountInfo> {
    let key = super::user::idempotency_key(&headers)?;
    app.run(move |g| {
        let who = g.caller(&headers)?;
        who.require_admin("allocate credit")?;
        // The times as the shortest decimals that read back as the same floats: equal exactly
        // when the allocations are.
        let what = format!("an allocation of {} to account {name} from {} to {}", a.amount, a.start, a.end);
        in_tx(g, |db| {
            once_per_key(
                db,
                (who.id, key.as_deref(), &what),
                |db| projects::info(db, projects::resolve(db, &name)?, now()),
                |db| projects::allocate(db, &name, a.amount, a.start, a.end, who.id, now()),
            )
        })
        .map(Json)
    })
    .await
}

pub async fn pricing(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<PricingInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("see the pricing parameters")?;
        Ok(Json(PricingInfo { params: g.pricing, nodes: g.node_prices(None, None, now()) }))
    })
    .await
}

/// All or nothing: every field is checked (the policy built with the new parameters, the base
/// price and its node) before anything is written, and then all of it is written in one
/// transaction.
pub async fn set_pricing(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(p): Body<SetPricing>,
) -> Res<PricingInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("change prices")?;
        let mut params = g.pricing;
        params.alpha = p.alpha.unwrap_or(params.alpha);
        params.beta = p.beta.unwrap_or(params.beta);
        params.libra_gamma = p.libra_gamma.unwrap_or(params.libra_gamma);
        params.libra_delta = p.libra_delta.unwrap_or(params.libra_delta);
        if p.node.is_some() && p.price_base.is_none() {
            return Err(ApiError::BadRequest("price_base: give the new base price for the node".into()));
        }
        g.set_pricing_and_price_base(params, p.price_base.map(|pb| (p.node.as_deref(), pb)))?;
        Ok(Json(PricingInfo { params: g.pricing, nodes: g.node_prices(None, None, now()) }))
    })
    .await
}

fn policy_info(policy: &dyn libra_core::Policy) -> PolicyInfo {
    PolicyInfo {
        policy: policy.name().into(),
        available: POLICY_NAMES.iter().chain(BEYOND_POLICY_NAMES).map(|s| s.to_string()).collect(),
        placement: policy.placement(),
        placements: Placement::ALL.to_vec(),
    }
}

pub async fn policy(State(app): State<Arc<App>>, headers: HeaderMap) -> Res<PolicyInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("see the policy")?;
        Ok(Json(policy_info(g.policy.as_ref())))
    })
    .await
}

pub async fn set_policy(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(p): Body<SetPolicy>,
) -> Res<PolicyInfo> {
    app.run(move |g| {
        g.caller(&headers)?.require_admin("change the policy")?;
        let pricing = g.pricing;
        g.set_policy(&p.policy, pricing, p.placement)?;
        Ok(Json(policy_info(g.policy.as_ref())))
    })
    .await
}

pub async fn job_action(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath((id, action)): InPath<(u64, String)>,
    _ignored: axum::body::Bytes,
) -> Res<JobInfo> {
    let job = app
        .run(move |g| {
            let who = g.caller(&headers)?;
            who.require_admin(&format!("{action} jobs"))?;
            match action.as_str() {
                "suspend" => g.suspend_resume(id, true),
                "resume" => g.suspend_resume(id, false),
                "cancel" => g.cancel(&who, id, now()),
                _ => Err(ApiError::NotFound(format!(
                    "action: '{action}' is not one of suspend, resume, cancel"
                ))),
            }
        })
        .await?;
    app.changed();
    Ok(Json(job))
}

#[derive(serde::Deserialize)]
pub struct Page {
    #[serde(default)]
    limit: Option<u32>,
    /// The next page: entries after this one (a user name; an audit entry's id).
    #[serde(default)]
    after: Option<String>,
}

fn page_limit(p: &Page) -> u32 {
    p.limit.unwrap_or(1000).clamp(1, super::user::MAX_PAGE)
}

fn user_state(disabled: bool, removed: bool) -> &'static str {
    if removed {
        "removed"
    } else if disabled {
        "disabled"
    } else {
        "active"
    }
}

pub async fn users(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(page): Params<Page>,
) -> Res<Vec<UserInfo>> {
    app.read(headers, move |db, who| {
        who.require_admin("list users")?;
        let ids = store::users::page(db, page.after.as_deref(), page_limit(&page))?;
        let mut v = Vec::new();
        for (id, admin, unix_user, allow_root, disabled, removed) in ids {
            let b = ledger::balance(db, id)?;
            v.push(UserInfo {
                name: b.user,
                admin,
                available: b.available,
                held: b.held,
                unix_user,
                allow_root,
                state: user_state(disabled, removed).into(),
            });
        }
        Ok(Json(v))
    })
    .await
}

/// disable, enable or remove a user. Disabling or removing revokes every token of theirs
/// (hosted sweeps' included) and cancels their active jobs through the ordinary cancel path
/// (an administrator's cancel: nothing charged, holds released) and their hosted sweeps.
/// Removing keeps the user's row, jobs and ledger (the history stays whole); the name stays
/// taken and the account cannot be enabled again.
pub async fn user_action(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    InPath((name, action)): InPath<(String, String)>,
    _ignored: axum::body::Bytes,
) -> Res<UserActionResponse> {
    let (resp, admin, uid) = app
        .run(move |g| {
            let admin = g.caller(&headers)?;
            admin.require_admin(&format!("{action} users"))?;
            if !["disable", "enable", "remove"].contains(&action.as_str()) {
                return Err(ApiError::NotFound(format!(
                    "action: '{action}' is not one of disable, enable, remove"
                )));
            }
            let (uid, disabled, removed) = store::users::state(&g.db, &name)?
                .ok_or_else(|| ApiError::NotFound(format!("user: '{name}' does not exist")))?;
            if uid == admin.id && action != "enable" {
                return Err(ApiError::BadRequest(format!(
                    "user: {name} is you: an administrator cannot {action} their own account (another administrator can)"
                )));
            }
            if removed {
                return Err(ApiError::Conflict(format!("user: {name} was removed; nothing can change it")));
            }
            let t = now();
            let mut cancelled = Vec::new();
            let mut revoked = 0;
            let state = match action.as_str() {
                "enable" => {
                    store::users::enable(&g.db, uid)?;
                    "active"
                }
                _ => {
                    let remove = action == "remove";
                    revoked = store::users::disable(&g.db, uid, remove)?;
                    g.forget_tokens();
                    for id in store::users::active_jobs(&g.db, uid)? {
                        match g.cancel(&admin, id, t) {
                            Ok(_) => cancelled.push(id),
                            // Ended on its own in between: nothing left to cancel.
                            Err(ApiError::Conflict(_)) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    if !disabled || remove {
                        tracing::info!(user = %name, by = %admin.name, action = %action, "account changed");
                    }
                    if remove {
                        "removed"
                    } else {
                        "disabled"
                    }
                }
            };
            let resp = UserActionResponse {
                user: name.clone(),
                state: state.into(),
                cancelled_jobs: cancelled,
                revoked_tokens: revoked,
            };
            Ok((resp, admin, uid))
        })
        .await?;
    if resp.state != "active" {
        let sweeps = app.sweeps.clone();
        tokio::task::spawn_blocking(move || sweeps.cancel_owned_by(&admin, uid, now()))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))??;
    }
    app.changed();
    Ok(Json(resp))
}

pub async fn audit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(page): Params<Page>,
) -> Res<Vec<AuditEntry>> {
    app.read(headers, move |db, who| {
        who.require_admin("read the audit log")?;
        let after = match &page.after {
            None => None,
            Some(a) => Some(a.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!("after: '{a}' is not an audit entry id (a whole number)"))
            })?),
        };
        Ok(Json(crate::audit::entries(db, page_limit(&page), after)?))
    })
    .await
}

/// A Unix account name as `useradd` accepts them.
fn valid_unix_user(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "unix_user: '{name}' is not a Unix account name: give 1 to 32 lower-case letters, digits, '_', '-' or '.', starting with a letter or '_'"
        )))
    }
}

pub async fn user_add(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(u): Body<UserAdd>,
) -> Res<UserInfo> {
    let h = headers.clone();
    app.run(move |g| g.caller(&h)?.require_admin("add users")).await?;
    auth::valid_user_name(&u.name)?;
    if u.password.len() < 4 {
        return Err(ApiError::BadRequest("password: give at least 4 characters".into()));
    }
    let unix_user = u.unix_user.clone().unwrap_or_else(|| u.name.clone());
    valid_unix_user(&unix_user)?;
    {
        // Where no agent can switch accounts, every job runs as the agents' own account: a
        // mapping to another would be a promise nobody keeps.
        let (mapped, unix) = (u.unix_user.is_some(), unix_user.clone());
        app.run(move |g| {
            let accounts: std::collections::BTreeSet<&str> =
                g.nodes.values().map(|n| n.account.as_str()).collect();
            let single = !g.nodes.is_empty() && g.nodes.values().all(|n| !n.switches_users);
            if single && mapped && !accounts.contains(unix.as_str()) {
                return Err(ApiError::BadRequest(format!(
                    "unix_user: this cluster's node agents are not root, so every job runs as their own account ({}); a user cannot be mapped to {unix} here",
                    accounts.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
            Ok(())
        })
        .await?;
    }
    let pw = u.password.clone();
    let hash = app.login_guard.hash(move |mem| auth::hash_password_in(&pw, mem)).await??;
    app.run(move |g| {
        if auth::user_id(&g.db, &u.name)?.is_some() {
            return Err(ApiError::Conflict(format!("name: user '{}' already exists", u.name)));
        }
        if projects::name_taken(&g.db, &u.name)? {
            return Err(ApiError::Conflict(format!(
                "name: '{}' is the name of an account; a user's personal account takes their name, choose another",
                u.name
            )));
        }
        store::users::insert(&g.db, &u.name, &hash, u.admin, u.unix_user.as_deref(), u.allow_root)?;
        Ok(Json(UserInfo {
            name: u.name,
            admin: u.admin,
            available: Money::ZERO,
            held: Money::ZERO,
            unix_user,
            allow_root: u.allow_root,
            state: "active".into(),
        }))
    })
    .await
}

/// A credit change of nothing is refused rather than written as an entry that changes nothing
/// (a typo, most likely: `1e3` read as 0, a forgotten amount).
fn some_amount(amount: Money) -> Result<(), ApiError> {
    if amount == Money::ZERO {
        return Err(ApiError::BadRequest(
            "amount: 0.00 is not accepted: it changes nothing; give a positive amount to add credit, a negative one to take it back"
                .into(),
        ));
    }
    Ok(())
}

/// `POST /api/admin/credit`. With an `Idempotency-Key`, a retry (the first answer was lost) is
/// answered with the balance as it is, not credited again; the key is recorded in the
/// transaction of the credit, so a crash leaves both or neither.
pub async fn credit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(c): Body<CreditRequest>,
) -> Res<Balance> {
    let key = super::user::idempotency_key(&headers)?;
    app.run(move |g| {
        let who = g.caller(&headers)?;
        who.require_admin("change credit")?;
        some_amount(c.amount)?;
        let (id, _) = auth::user_id(&g.db, &c.user)?
            .ok_or_else(|| ApiError::NotFound(format!("user: '{}' does not exist", c.user)))?;
        let what = store::users::credit_description(c.amount, &c.user);
        store::in_transaction(&g.db, |db| {
            once_per_key(
                db,
                (who.id, key.as_deref(), &what),
                |db| Ok(Json(ledger::balance(db, id)?)),
                |db| {
                    ledger::deposit(db, id, c.amount, now()).map(Json).map_err(|e| match e {
                        ledger::LedgerError::Removed(_) => ApiError::Conflict(e.to_string()),
                        ledger::LedgerError::Store(_) | ledger::LedgerError::StoreFull(_) => {
                            ApiError::from(e)
                        }
                        e => ApiError::BadRequest(e.to_string()),
                    })
                },
            )
        })
    })
    .await
}

/// `POST /api/admin/backup`: a consistent copy of the live store, made without stopping the
/// server, with the hosted sweeps' broker database inside it, sent as the database file itself;
/// what it holds is in the `x-libra-backup` header (JSON: `backup::Contents`).
pub async fn backup(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    app.run(move |g| g.caller(&headers)?.require_admin("take a backup of the store")).await?;
    let db = app.config.db.clone();
    let sweeps = app.sweeps.clone();
    let (bytes, contents) = tokio::task::spawn_blocking(move || {
        // No sweep is half made while the store and the broker database are copied.
        let _quiet = sweeps.hold_creations();
        crate::backup::backup_bytes(&db, Some(&sweeps.db))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?
    .map_err(|e| ApiError::Internal(format!("backup: {e}")))?;
    tracing::info!(
        jobs = contents.jobs,
        ledger_entries = contents.ledger_entries,
        sweeps = contents.sweeps,
        bytes = bytes.len(),
        "backup taken"
    );
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/vnd.sqlite3".to_string()),
            (axum::http::HeaderName::from_static("x-libra-backup"), serde_json::to_string(&contents)?),
        ],
        bytes,
    )
        .into_response())
}
