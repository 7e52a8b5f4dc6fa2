//! Sweeps hosted by the server: the broker's experiments, in a broker database beside the
//! server's store, each run by an engine thread of this process. Users create, watch and steer
//! them through the API; every sweep has an owner, and only the owner or an administrator may
//! see or steer it.
//!
//! What a hosted sweep may use is a security choice: `testqueue` resources (nothing runs) and
//! `libra` resources (jobs go to a Libra cluster through its API, with the user's own token)
//! are open to everyone, but a user's `libra` resource may only point at this server or a
//! cluster the configuration lists (`sweep_clusters`), since the server is the one that makes
//! the requests; `local` resources run the plan's commands as the server's own OS user, so only
//! administrators may use them.

use crate::auth::Caller;
use crate::buckets::{Buckets, Short};
use crate::error::{ApiError, ServerError};
use crate::store::hosted;
use libra_api::{SweepCreate, SweepInfo, SweepJob, SweepUsage};
use libra_broker::create::{create_from_text, expand_text, CreateError, TextSweep};
use libra_broker::engine::{self, EngineOptions};
use libra_broker::resources::{self, KindSpec};
use libra_broker::state::{ExperimentState, StateError};
use libra_broker::store::{Store, StoreError};
use libra_broker::view;
use libra_core::dbc::Algorithm;
use libra_core::Shown;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, RwLockWriteGuard};

/// The most jobs one hosted sweep may have: a request must not fill the server's disk.
pub const MAX_JOBS: u64 = 100_000;
/// The largest plan and resources texts a hosted sweep may be created with.
pub const MAX_PLAN_BYTES: usize = 256 * 1024;
pub const MAX_RESOURCES_BYTES: usize = 64 * 1024;
/// The most jobs' results one request is answered with (`GET /api/sweeps/{id}/results`, the
/// listings' page): a sweep holds up to `MAX_JOBS`, whose results in one answer took about
/// 100 MB of the server's memory each, so one user asking for them on many connections at once
/// could take the server's memory from everyone.
pub const MAX_RESULTS_PAGE: u32 = 10_000;

pub struct Sweeps {
    pub db: PathBuf,
    /// Origins (`http://host:port`) a user's `libra` resources may reach: the configured
    /// `sweep_clusters`, and this server's own address once it listens.
    clusters: Mutex<Vec<String>>,
    /// Experiments with an engine thread in this process.
    running: Mutex<HashSet<i64>>,
    /// Why an experiment's engine is not making progress (`SweepInfo::engine`): waiting for
    /// disk space, or stopped by an error.
    notes: Mutex<HashMap<i64, String>>,
    /// The program that keeps local sweep jobs (`EngineOptions::keeper`).
    keeper: Option<PathBuf>,
    /// This server's own origins (a subset of `clusters`): a sweep's `libra` resource there
    /// acts through a credential the server mints for the sweep, never the user's token.
    own: Mutex<Vec<String>>,
    /// The certificate this server answers https with, which a sweep's `libra` resource on this
    /// server trusts (a self-signed one is in no public root store). `None` on plain http.
    own_certificate: Mutex<Option<PathBuf>>,
    /// The server's store, where sweep credentials are kept (as digests) and revoked.
    server_db: PathBuf,
    /// Held (shared) by a sweep's creation from its credential's minting to its owner's record,
    /// and (exclusive) by a backup while it copies the store and the broker database: a backup
    /// never holds a sweep half made (`hold_creations`).
    creating: RwLock<()>,
    /// The most hosted sweeps one user may have that are not over (`max_active_sweeps`).
    max_unfinished: u32,
    /// The most ended sweeps one user keeps (`max_kept_sweeps`); 0: every one.
    max_kept: u32,
    /// Per user, the sweeps being created now (counted against `max_unfinished` with the ones
    /// made, so that creations side by side cannot pass it).
    being_created: Mutex<HashMap<i64, u32>>,
    /// The (user, idempotency key) of each creation going on now: a second request with the
    /// same key waits for the first to end (`Sweeps::claim_key`), then finds its sweep.
    keys_in_flight: Mutex<HashSet<(i64, String)>>,
    key_freed: std::sync::Condvar,
    /// Each user's bucket of plan jobs (`sweep_job_rate` a second, `MAX_JOBS` at once;
    /// `Sweeps::take_jobs`).
    job_buckets: Mutex<Buckets>,
    /// The last usage made of each sweep, by what it was made from (`usage`).
    usages: Mutex<HashMap<i64, (UsageVersion, SweepUsage)>>,
    /// Open connections to the broker database, kept for the next request (`store`).
    stores: Mutex<Vec<Store>>,
}

/// Connections to the broker database kept open at most (`Sweeps::store`).
const KEPT_STORES: usize = 8;

/// A connection to the broker database from `Sweeps::store`, handed back when dropped: opening
/// one runs the schema's statements and pragmas again, about 0.5 ms of the 1.4 ms a status took.
/// One left inside a transaction (an error between its begin and commit) is closed instead,
/// which rolls the transaction back, so the next request never finds itself inside another's.
pub(crate) struct Pooled<'a> {
    sweeps: &'a Sweeps,
    store: Option<Store>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store.as_ref().expect("a pooled store is held until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("a pooled store is held until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else { return };
        if store.conn.is_autocommit() {
            let mut kept = self.sweeps.stores.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < KEPT_STORES {
                kept.push(store);
            }
        }
    }
}

/// What a sweep's usage is made from: when it was created and its attempts' version
/// (`Store::attempts_version`).
type UsageVersion = (u64, (i64, i64, u64, i64));

/// Usages kept at most; past it, all are forgotten (each is at most a few hundred points).
const KEPT_USAGES: usize = 256;

/// A creation's hold on its idempotency key (`Sweeps::claim_key`), let go when dropped.
struct KeyClaim<'a> {
    sweeps: &'a Sweeps,
    claim: Option<(i64, String)>,
}

impl Drop for KeyClaim<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.claim.take() {
            self.sweeps.keys_in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&c);
            self.sweeps.key_freed.notify_all();
        }
    }
}

/// A user's place among the sweeps being created (`Sweeps::reserve`), given back when dropped.
struct Reservation<'a> {
    sweeps: &'a Sweeps,
    user: i64,
}

fn give_back(b: &mut HashMap<i64, u32>, user: i64) {
    if let Some(n) = b.get_mut(&user) {
        *n -= 1;
        if *n == 0 {
            b.remove(&user);
        }
    }
}

impl Reservation<'_> {
    /// Runs `record`, which makes the sweep count among its owner's, and gives the place back
    /// in the same step: the sweep is never counted twice (a creation beside it refused for a
    /// place that is not taken) nor not at all.
    fn fulfil<T>(self, record: impl FnOnce() -> T) -> T {
        let mut b = self.sweeps.being_created.lock().unwrap_or_else(|p| p.into_inner());
        let r = record();
        give_back(&mut b, self.user);
        drop(b);
        std::mem::forget(self);
        r
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        give_back(&mut self.sweeps.being_created.lock().unwrap_or_else(|p| p.into_inner()), self.user);
    }
}

/// The longest a creation waits for another with its idempotency key to end.
const KEY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How often a hosted sweep's engine stopped by a full disk tries again.
const FULL_DISK_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

const DISK_FULL_NOTE: &str = "waiting: the server's disk is full, so the sweep can record nothing; it goes on by itself once space is freed";

const STOPPED_NOTE: &str = "stopped: the sweep's engine met an error (the server's log says which); `libra sweep resume` or a restart of the server runs it again";

/// Whether the engine stopped because the broker database's disk is full.
fn engine_disk_full(e: &engine::EngineError) -> bool {
    matches!(e, engine::EngineError::Store(StoreError::Sql(e)) if crate::store::is_disk_full(e))
}

/// How long a sweep's credential outlives its deadline (the engine settles the last attempts
/// after it); a new deadline moves its expiry along.
const CREDENTIAL_GRACE: f64 = 86_400.0;

/// The origin of an `http://` address, `http://host:port` in lower case with the port made
/// explicit, so that the spellings of one address compare equal.
pub fn origin(url: &str) -> Result<String, String> {
    let url_t = url.trim();
    let (scheme, rest, default_port) = if let Some(r) = url_t.strip_prefix("https://") {
        ("https", r, 443)
    } else if let Some(r) = url_t.strip_prefix("http://") {
        ("http", r, 80)
    } else {
        return Err(format!(
            "'{url}' is not accepted: give an https:// or http:// address such as https://10.0.0.5:7878"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default().to_ascii_lowercase();
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "'{url}' is not accepted: give {scheme}://host:port with no user name or password"
        ));
    }
    // An IPv6 host is bracketed: its colons are not the port's.
    let split = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => Some((&authority[..i], &authority[i + 1..])),
        _ => None,
    };
    let (host, port) = match split {
        Some((h, p)) => {
            let port: u16 = p.parse().map_err(|_| {
                format!("'{url}' is not accepted: the port '{p}' is not a number from 0 to 65535")
            })?;
            (h.to_string(), port)
        }
        None => (authority.clone(), default_port),
    };
    if host.is_empty() {
        return Err(format!("'{url}' is not accepted: the address has no host"));
    }
    Ok(format!("{scheme}://{host}:{port}"))
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NoExperiment(id) => ApiError::NotFound(format!("no sweep {id} on this server")),
            // A change the sweep's state does not allow now (a pause of a sweep the engine has
            // just stalled): the caller's request meets the sweep's state, not a fault here.
            StoreError::State(e @ (StateError::Transition { .. } | StateError::Cancelling { .. })) => {
                ApiError::Conflict(e.to_string())
            }
            StoreError::Sql(e) if crate::store::is_disk_full(&e) => {
                ApiError::StoreFull(format!("broker store: {e}"))
            }
            e => {
                tracing::error!("broker store: {e}");
                ApiError::Internal(e.to_string())
            }
        }
    }
}

fn is_active(state: &ExperimentState) -> bool {
    state.is_active()
}

impl Sweeps {
    /// Opens (creating) the broker database.
    /// `clusters`: the Libra clusters besides this server that users' hosted sweeps may send
    /// jobs to.
    pub fn open(
        db: PathBuf,
        clusters: &[String],
        keeper: Option<PathBuf>,
        server_db: PathBuf,
        max_unfinished: u32,
        max_kept: u32,
        job_rate: f64,
    ) -> Result<Sweeps, ServerError> {
        if let Some(dir) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut allowed = Vec::new();
        for c in clusters {
            allowed.push(origin(c).map_err(|e| ServerError::Invalid(format!("sweep_clusters: {e}")))?);
        }
        let s = Sweeps {
            db,
            clusters: Mutex::new(allowed),
            running: Mutex::new(HashSet::new()),
            notes: Mutex::new(HashMap::new()),
            keeper,
            own: Mutex::new(Vec::new()),
            own_certificate: Mutex::new(None),
            server_db,
            creating: RwLock::new(()),
            max_unfinished,
            max_kept,
            being_created: Mutex::new(HashMap::new()),
            keys_in_flight: Mutex::new(HashSet::new()),
            key_freed: std::sync::Condvar::new(),
            job_buckets: Mutex::new(Buckets::new(job_rate, MAX_JOBS as f64)),
            usages: Mutex::new(HashMap::new()),
            stores: Mutex::new(Vec::new()),
        };
        s.store().map_err(|e| ServerError::Invalid(format!("broker database {}: {e}", s.db.display())))?;
        Ok(s)
    }

    /// A connection to the broker database: one kept open from an earlier request, or a new one.
    fn store(&self) -> Result<Pooled<'_>, ApiError> {
        let kept = self.stores.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let store = match kept {
            Some(store) => store,
            None => {
                let store = Store::open(&self.db)?;
                hosted::init(&store.conn)?;
                store
            }
        };
        Ok(Pooled { sweeps: self, store: Some(store) })
    }

    /// Starts engines for the hosted sweeps that were running or paused when the server
    /// stopped (or was killed): each resumes where its database says it was.
    pub fn resume_all(self: &Arc<Self>) -> Result<usize, ApiError> {
        let store = self.store()?;
        let mut n = 0;
        for e in store.experiments()? {
            if owner(&store, e.id)?.is_none() {
                continue;
            }
            // A cancel whose engine died with the server before it finished: an engine takes up
            // what it left running (its jobs on this cluster) and stops it.
            let unfinished_cancel = e.state == ExperimentState::Cancelled && e.finished.is_none();
            if is_active(&e.state) || (unfinished_cancel && store.counts(e.id)?.running > 0) {
                self.start_engine(e.id);
                n += 1;
            } else {
                // Ended while the server was stopping: its credential goes now (a cancel left
                // with nothing running is recorded as finished first).
                finish_cancel(&store, e.id)?;
                self.revoke(e.id);
            }
        }
        Ok(n)
    }

    /// Keeps sweeps from being created while the guard lives (those being created finish
    /// first): what a backup holds while it copies the store and the broker database.
    pub fn hold_creations(&self) -> RwLockWriteGuard<'_, ()> {
        self.creating.write().unwrap_or_else(|p| p.into_inner())
    }

    fn server_store(&self) -> Result<rusqlite::Connection, rusqlite::Error> {
        crate::store::open_other(&self.server_db)
    }

    /// Mints the credential a sweep of `who` uses on this server: a token of theirs marked as
    /// the sweep's (`auth::Caller::sweep`), stored as a digest only, until `expires`. Sweep 0
    /// stands for "being created" until `bind_credential` names the sweep.
    fn mint_credential(&self, who: &Caller, expires: f64, now: f64) -> Result<String, ApiError> {
        let c = self.server_store()?;
        Ok(crate::auth::issue_token(&c, who.id, expires - now, Some(0), now)?)
    }

    fn bind_credential(&self, token: &str, exp: i64) -> Result<(), ApiError> {
        Ok(crate::store::users::bind_sweep_token(
            &self.server_store()?,
            &crate::auth::token_digest(token),
            exp,
        )?)
    }

    fn drop_credential(&self, token: &str) {
        if let Err(e) = self
            .server_store()
            .and_then(|c| crate::store::users::delete_token(&c, &crate::auth::token_digest(token)))
        {
            tracing::error!("dropping an unused sweep credential: {e}");
        }
    }

    /// Revokes the sweep's credential (it has ended). Failing to is logged: the credential
    /// still expires.
    fn revoke(&self, exp: i64) {
        match self.server_store().and_then(|c| crate::store::users::revoke_sweep_tokens(&c, exp)) {
            Ok(0) => {}
            Ok(_) => tracing::info!(exp, "hosted sweep ended: its credential is revoked"),
            Err(e) => tracing::error!(exp, "revoking the hosted sweep's credential: {e}"),
        }
    }

    /// Cancels every active hosted sweep of user `uid` (a disabled or removed account).
    pub fn cancel_owned_by(self: &Arc<Self>, admin: &Caller, uid: i64, now: f64) -> Result<(), ApiError> {
        let store = self.store()?;
        let ids = hosted::of_user(&store.conn, uid)?;
        for id in ids {
            if !store.experiment(id)?.state.is_final() {
                self.action(admin, id, "cancel", now)?;
            }
            self.revoke(id);
        }
        Ok(())
    }

    /// Runs the experiment's engine on a thread of its own unless one already runs it. When the
    /// engine ends, the state is read again under the same lock steering takes: a sweep set
    /// running again in between (a new deadline on a stalled sweep) is run again, never left
    /// without an engine.
    pub fn start_engine(self: &Arc<Self>, exp: i64) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if !running.insert(exp) {
            return;
        }
        self.note(exp, None);
        let me = self.clone();
        let spawned = std::thread::Builder::new().name(format!("sweep-{exp}")).spawn(move || loop {
            // A run that gets as far as its first committed round is past whatever stopped
            // the one before it (a full disk): what the API says of the engine goes with it,
            // not only when the run ends, which may be the sweep's end.
            let clear = me.clone();
            let opts = EngineOptions {
                keeper: me.keeper.clone(),
                take_up_cancelled: true,
                on_started: Some(Box::new(move || {
                    clear.note(exp, None);
                })),
                ..EngineOptions::default()
            };
            let r = engine::run(&me.db, exp, opts);
            match &r {
                // A full disk passes: the engine runs again, as after a crash (what it left in
                // flight is recovered), once space is back, instead of leaving the sweep
                // without an engine until a restart.
                Err(e) if engine_disk_full(e) => {
                    let first = me.note(exp, Some(DISK_FULL_NOTE.to_string())).is_none();
                    if first {
                        tracing::error!(exp, "hosted sweep engine: {e}: the sweep waits for disk space, trying again every {} s", FULL_DISK_RETRY.as_secs());
                    }
                    std::thread::sleep(FULL_DISK_RETRY);
                    continue;
                }
                Err(e) => {
                    tracing::error!(exp, "hosted sweep engine: {e}");
                    me.note(exp, Some(STOPPED_NOTE.to_string()));
                }
                Ok(_) => {
                    me.note(exp, None);
                }
            }
            let mut running = me.running.lock().unwrap_or_else(|p| p.into_inner());
            let again = r.is_ok()
                && me.store().and_then(|s| Ok(s.experiment(exp)?)).is_ok_and(|e| is_active(&e.state));
            if !again {
                running.remove(&exp);
                if let Ok(s) = me.store() {
                    // A cancel that came after the engine's last look.
                    let _ = finish_cancel(&s, exp);
                }
                // The engine stops on an error too (and is started again only by a restart or
                // a user's resume): the credential goes only with the sweep's end.
                let ended = me.store().and_then(|s| Ok(s.experiment(exp)?)).is_ok_and(|e| e.state.is_final());
                if r.is_ok() || ended {
                    me.revoke(exp);
                }
                return;
            }
        });
        if let Err(e) = spawned {
            tracing::error!(exp, "cannot start a sweep engine thread: {e}");
            running.remove(&exp);
        }
    }

    /// Sets (or, with None, clears) what `SweepInfo::engine` says of `exp`; the note before.
    fn note(&self, exp: i64, note: Option<String>) -> Option<String> {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        match note {
            Some(n) => notes.insert(exp, n),
            None => notes.remove(&exp),
        }
    }

    /// A sweep as the API shows it: the broker's view, with what this server knows of its engine.
    fn info(&self, store: &Store, exp: i64, owner: &str, now: f64) -> Result<SweepInfo, ApiError> {
        let mut info = view::info(store, exp, owner, now)?;
        // A sweep that is over has no engine to wait for (a note may outlive the run that
        // ended it by the instant between its last commit and its return).
        let over = ExperimentState::parse(&info.state).is_ok_and(|s| s.is_final());
        info.engine =
            if over { None } else { self.notes.lock().unwrap_or_else(|p| p.into_inner()).get(&exp).cloned() };
        Ok(info)
    }

    /// Lets users' sweeps reach this server itself, at the address it listens on (and, on a
    /// loopback or wildcard address, as 127.0.0.1 and localhost).
    pub fn allow_own_address(&self, addr: std::net::SocketAddr) {
        let port = addr.port();
        // Either scheme: the server speaks one of them on this address.
        let mut own = Vec::new();
        for scheme in ["http", "https"] {
            own.push(format!("{scheme}://{addr}"));
            if addr.ip().is_loopback() || addr.ip().is_unspecified() {
                own.extend([format!("{scheme}://127.0.0.1:{port}"), format!("{scheme}://localhost:{port}")]);
            }
        }
        let mut c = self.clusters.lock().unwrap_or_else(|p| p.into_inner());
        let mut mine = self.own.lock().unwrap_or_else(|p| p.into_inner());
        for o in own {
            if let Ok(o) = origin(&o) {
                if !c.contains(&o) {
                    c.push(o.clone());
                }
                if !mine.contains(&o) {
                    mine.push(o);
                }
            }
        }
    }

    /// Makes the sweeps created from now on trust `cert` (the server's own https certificate)
    /// in their `libra` resources on this server.
    pub fn trust_own_certificate(&self, cert: PathBuf) {
        *self.own_certificate.lock().unwrap_or_else(|p| p.into_inner()) = Some(cert);
    }

    fn has_engine(&self, exp: i64) -> bool {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).contains(&exp)
    }

    /// The store and the sweep's owner name, if `who` may see and steer it.
    fn owned(&self, who: &Caller, exp: i64) -> Result<(Pooled<'_>, String), ApiError> {
        let store = self.store()?;
        let (uid, name) = owner(&store, exp)?
            .ok_or_else(|| ApiError::NotFound(format!("no sweep {exp} on this server")))?;
        if uid != who.id && !who.admin {
            return Err(ApiError::Forbidden(format!(
                "forbidden: sweep {exp} belongs to another user; {} may see and steer only their own sweeps",
                who.name
            )));
        }
        Ok((store, name))
    }

    pub fn create(
        self: &Arc<Self>,
        who: &Caller,
        req: &SweepCreate,
        key: Option<&str>,
        now: f64,
    ) -> Result<SweepInfo, ApiError> {
        let bad = |m: String| Err(ApiError::BadRequest(m));
        if who.sweep.is_some() {
            return Err(ApiError::Forbidden(
                "forbidden: a hosted sweep's credential cannot start other sweeps".into(),
            ));
        }
        // A retried creation (the client lost the first answer) gets the sweep the first one
        // made: one sweep runs, spending at most its budget once.
        let _claim = self.claim_key(who.id, key)?;
        if let Some(key) = key {
            let store = self.store()?;
            if let Some(id) = hosted::by_key(&store.conn, who.id, key)? {
                return self.info(&store, id, &who.name, now);
            }
        }
        if req.plan.len() > MAX_PLAN_BYTES {
            return Err(ApiError::TooLarge(format!(
                "plan: {} bytes; at most {MAX_PLAN_BYTES} are accepted",
                req.plan.len()
            )));
        }
        if req.resources.len() > MAX_RESOURCES_BYTES {
            return Err(ApiError::TooLarge(format!(
                "resources: {} bytes; at most {MAX_RESOURCES_BYTES} are accepted",
                req.resources.len()
            )));
        }
        let mut res = resources::parse(&req.resources).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        // Resources on this server itself: the server acts for the user with a credential of
        // the sweep's own, so whatever token the user wrote is dropped, never stored; and it
        // trusts the server's own certificate, whatever file the user named (a user may not
        // make the server read a file).
        let own = self.own.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let own_certificate = self.own_certificate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut on_this_server = Vec::new();
        for (i, r) in res.iter_mut().enumerate() {
            let name = r.name.clone();
            let kind = if matches!(r.spec, KindSpec::Slurm(_)) { "slurm" } else { "local" };
            let l = match &mut r.spec {
                KindSpec::Local(_) | KindSpec::Slurm(_) if !who.admin => {
                    return Err(ApiError::Forbidden(format!(
                        "forbidden: resource '{}' is of kind {}, which runs commands as the server's own user; only an administrator may host a sweep on it ({} is not one): use testqueue or libra resources",
                        name, kind, who.name
                    )))
                }
                KindSpec::Libra(l) => l,
                KindSpec::Local(_) | KindSpec::Testqueue(_) | KindSpec::Slurm(_) => continue,
            };
            if let Ok(o) = origin(&l.url) {
                if own.contains(&o) {
                    l.token = None;
                    l.ca = own_certificate.clone();
                    on_this_server.push(i);
                    continue;
                }
            }
            // The server must never lend its own credentials (LIBRA_TOKEN in its environment).
            if l.token.as_deref().is_none_or(|t| t.trim().is_empty()) {
                return bad(format!(
                    "resource '{}': token is required for a libra resource of a hosted sweep (your API token on that cluster; the server has none of its own to lend)",
                    name
                ));
            }
            // The server would read the file named: a user may not make it read any file.
            if l.ca.is_some() && !who.admin {
                return Err(ApiError::Forbidden(format!(
                    "forbidden: resource '{}': ca names a file on the server, which only an administrator may do; hosted sweeps trust the public roots (and LIBRA_CA of the server, and its own certificate for a resource on the server itself)",
                    name
                )));
            }
            if !who.admin {
                let o = origin(&l.url)
                    .map_err(|e| ApiError::BadRequest(format!("resource '{}': url: {e}", name)))?;
                let allowed = self.clusters.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if !allowed.contains(&o) {
                    return Err(ApiError::Forbidden(format!(
                        "forbidden: resource '{}' sends jobs to {o}, which is not a cluster this server's sweeps may reach (allowed: {}); an administrator can add it to sweep_clusters in the server's configuration",
                        name,
                        allowed.join(", ")
                    )));
                }
            }
            // The clusters a hosted sweep may reach were vetted by an administrator
            // (sweep_clusters, or the server itself): plain http to them is their decision.
            let allowed = self.clusters.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let vetted = origin(&l.url).ok().is_some_and(|o| allowed.contains(&o));
            l.insecure_http = vetted || (who.admin && l.insecure_http);
        }
        let algorithm: Algorithm = match req.optimise.as_deref() {
            None => Algorithm::Cost,
            Some(o) => o.parse().map_err(|e: libra_core::dbc::UnknownAlgorithm| {
                ApiError::BadRequest(format!("optimise: {e}"))
            })?,
        };
        let deadline = match (req.deadline, req.deadline_in) {
            (Some(d), None) => d,
            (None, Some(d)) => now + d,
            _ => {
                return bad(
                    "deadline: give either deadline (Unix seconds) or deadline_in (seconds from now)".into()
                )
            }
        };
        if !deadline.is_finite() || deadline <= now {
            return bad(format!(
                "deadline: {deadline} is in the past (the server's time is {now:.0}): give a time to come"
            ));
        }
        if req.budget.is_negative() {
            return bad(format!("budget: {} is negative: give a budget of 0 credits or more", req.budget));
        }
        let max_retries = req.max_retries.unwrap_or(2);
        if max_retries > 100 {
            return bad(format!("max_retries: {max_retries} is too many: give at most 100"));
        }
        if req.estimate.is_some_and(|e| !(e.is_finite() && e > 0.0)) {
            return bad("estimate: give a positive number of seconds".into());
        }
        let name = req.name.clone().unwrap_or_default();
        if name.len() > 200 {
            return bad("name: give at most 200 characters".into());
        }
        let plan = expand_text(&self.db, &req.plan, req.seed, MAX_JOBS)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        // Counted from here until its owner's record counts it.
        let place = self.reserve(who)?;
        // Before anything is written (the credential, the sweep, its jobs' records).
        self.take_jobs(who, plan.jobs(), "this plan makes", now)?;
        // From here to the owner's record the sweep is half made (`hold_creations`).
        let creating = self.creating.read().unwrap_or_else(|p| p.into_inner());
        // The credential lives as long as the sweep may run (and is revoked when it ends).
        let credential = if on_this_server.is_empty() {
            None
        } else {
            let t = self.mint_credential(who, deadline.max(now) + CREDENTIAL_GRACE, now)?;
            for &i in &on_this_server {
                if let Some(l) = res[i].libra_mut() {
                    l.token = Some(t.clone());
                }
            }
            Some(t)
        };
        let created = create_from_text(
            &self.db,
            &TextSweep {
                name: &name,
                plan: &plan,
                resources: res,
                algorithm,
                deadline,
                budget: req.budget,
                max_retries,
                estimate_secs: req.estimate,
                now,
            },
        )
        .map_err(|e| match e {
            CreateError::Store(s) => ApiError::from(s),
            CreateError::WorkDir { .. } => ApiError::Internal(e.to_string()),
            e => ApiError::BadRequest(e.to_string()),
        });
        if created.is_err() {
            // Nothing was made: the jobs' records are not written, so they cost nothing.
            self.give_back_jobs(who, plan.jobs(), now);
        }
        let id = match (created, &credential) {
            (Ok(id), Some(t)) => {
                self.bind_credential(t, id)?;
                id
            }
            (Ok(id), None) => id,
            (Err(e), t) => {
                if let Some(t) = t {
                    self.drop_credential(t);
                }
                return Err(e);
            }
        };
        let store = self.store()?;
        place.fulfil(|| hosted::add(&store.conn, id, who.id, &who.name, key))?;
        drop(creating);
        self.start_engine(id);
        self.hold_ended_to_bound(&store, who.id);
        self.info(&store, id, &who.name, now)
    }

    /// Removes `user`'s ended sweeps (done or cancelled), those that ended first first, while
    /// they have more than `max_kept_sweeps`: their records, with their plans and jobs, and
    /// their work directories. Creating and cancelling a sweep costs no credit, and each keeps
    /// up to 256 KiB of plan and 100,000 jobs' records: without a bound one user could fill the
    /// disk for everyone. A sweep whose engine is still winding down stays for a later turn.
    /// Done after the new sweep is made, so that a failure here never loses the creation: it
    /// is logged, and the next creation goes on.
    fn hold_ended_to_bound(&self, store: &Store, user: i64) {
        if self.max_kept == 0 {
            return;
        }
        let ended = match hosted::ended_of_user(&store.conn, user) {
            Ok(e) => e,
            Err(e) => {
                return tracing::error!(
                    user,
                    "hosted sweeps: listing ended sweeps to hold max_kept_sweeps: {e}"
                )
            }
        };
        let over = ended.len().saturating_sub(self.max_kept as usize);
        let base = libra_broker::create::experiments_dir(&self.db);
        for exp in ended.into_iter().take(over) {
            if self.running.lock().unwrap_or_else(|p| p.into_inner()).contains(&exp) {
                continue;
            }
            let removed = store.remove_ended(exp, |tx| hosted::remove(tx, exp));
            let dir = match removed {
                Ok(Some(dir)) => dir,
                Ok(None) => continue,
                Err(e) => {
                    return tracing::error!(
                        exp,
                        "hosted sweeps: removing an ended sweep past max_kept_sweeps: {e}"
                    )
                }
            };
            self.notes.lock().unwrap_or_else(|p| p.into_inner()).remove(&exp);
            // Only a directory the broker made for it (never one a stored path names elsewhere).
            let dir = std::path::Path::new(&dir);
            if !dir.as_os_str().is_empty() && dir.starts_with(&base) && dir != base {
                if let Err(e) = std::fs::remove_dir_all(dir) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(exp, "hosted sweeps: removing {}: {e}", dir.display());
                    }
                }
            }
            tracing::info!(
                exp,
                user,
                "an ended hosted sweep was removed: its owner has more than max_kept_sweeps"
            );
        }
    }

    /// Holds `user`'s idempotency `key` (if any) for one creation, after waiting for another
    /// holding it to end (at most `KEY_WAIT`: past that the caller is told to ask again).
    fn claim_key(&self, user: i64, key: Option<&str>) -> Result<KeyClaim<'_>, ApiError> {
        let Some(key) = key else { return Ok(KeyClaim { sweeps: self, claim: None }) };
        let claim = (user, key.to_string());
        let mut keys = self.keys_in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let t0 = std::time::Instant::now();
        while keys.contains(&claim) {
            let left = KEY_WAIT.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(ApiError::TooMany(
                    "Idempotency-Key: a creation with this key is still going on; ask again with the same key".into(),
                    1,
                ));
            }
            keys = self.key_freed.wait_timeout(keys, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        keys.insert(claim.clone());
        Ok(KeyClaim { sweeps: self, claim: Some(claim) })
    }

    /// Takes `jobs` tokens from `who`'s bucket of plan jobs (`sweep_job_rate` a second, up to
    /// `MAX_JOBS`, so that the largest plan accepted can always be made from a full bucket), or
    /// 429 with the whole seconds until the bucket holds them (`what` says where the jobs come
    /// from). A sweep's creation writes a record per job, and `max_kept_sweeps` removes the
    /// oldest ended sweeps as new ones are made: without this one user creating and cancelling
    /// sweeps in a loop kept the disk writing about 6.5 MB/s (a 100,000-job plan a second). A
    /// rerun writes each job it runs again, and cancelling writes each again: a loop of both on
    /// one sweep of 100,000 jobs wrote 72 MB/s.
    fn take_jobs(&self, who: &Caller, jobs: u64, what: &str, now: f64) -> Result<(), ApiError> {
        let mut buckets = self.job_buckets.lock().unwrap_or_else(|p| p.into_inner());
        let Err(Short { held, wait }) = buckets.take(who.id, jobs as f64, now) else { return Ok(()) };
        Err(ApiError::TooMany(
            format!(
                "sweeps: {} may create or run again at most {} jobs of hosted sweeps per second on average and {} at once (sweep_job_rate); {what} {} jobs and {} are available now: try again in {} s",
                who.name,
                Shown(buckets.rate()),
                MAX_JOBS,
                jobs,
                held.floor() as u64,
                wait
            ),
            wait,
        ))
    }

    /// Puts back `jobs` tokens taken by a creation that made nothing.
    fn give_back_jobs(&self, who: &Caller, jobs: u64, now: f64) {
        self.job_buckets.lock().unwrap_or_else(|p| p.into_inner()).give_back(who.id, jobs as f64, now);
    }

    /// Takes a place for a sweep `who` creates, unless they already have `max_unfinished`
    /// sweeps not over (with those being created): each runs an engine thread in this
    /// process and may hold up to `MAX_JOBS` jobs in the broker database, so one user may not
    /// take the server's threads and disk from everyone.
    fn reserve(&self, who: &Caller) -> Result<Reservation<'_>, ApiError> {
        let mut b = self.being_created.lock().unwrap_or_else(|p| p.into_inner());
        let made = hosted::unfinished_of_user(&self.store()?.conn, who.id)?;
        let creating = b.get(&who.id).copied().unwrap_or(0);
        if made + creating >= self.max_unfinished {
            return Err(ApiError::TooMany(
                format!(
                    "sweeps: {} has {} hosted sweeps not over (running, paused or stalled{}), the most one user may have (max_active_sweeps = {}); cancel one (libra sweep cancel ID --server) or create more when some end",
                    who.name,
                    made + creating,
                    if creating > 0 { format!(", {creating} being created") } else { String::new() },
                    self.max_unfinished
                ),
                60,
            ));
        }
        *b.entry(who.id).or_insert(0) += 1;
        Ok(Reservation { sweeps: self, user: who.id })
    }

    pub fn list(&self, who: &Caller, all: bool, now: f64) -> Result<Vec<SweepInfo>, ApiError> {
        if all {
            who.require_admin("list everyone's sweeps")?;
        }
        let store = self.store()?;
        let rows = hosted::all(&store.conn)?;
        rows.into_iter()
            .filter(|(_, uid, _)| all || *uid == who.id)
            .map(|(id, _, name)| self.info(&store, id, &name, now))
            .collect()
    }

    pub fn get(&self, who: &Caller, exp: i64, now: f64) -> Result<SweepInfo, ApiError> {
        let (store, owner) = self.owned(who, exp)?;
        self.info(&store, exp, &owner, now)
    }

    /// The sweep's usage, and how many attempts were read to make it: none when its attempts
    /// have not changed since it was last made, which is kept. A usage reads every attempt of
    /// the sweep (46 to 130 ms for 100,000), and the portal asks it every two seconds.
    pub fn usage(&self, who: &Caller, exp: i64, now: f64) -> Result<(SweepUsage, usize), ApiError> {
        let (store, _) = self.owned(who, exp)?;
        let version = (store.experiment(exp)?.created.to_bits(), store.attempts_version(exp)?);
        let lock = || self.usages.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, usage)) = lock().get(&exp) {
            if *v == version {
                return Ok((SweepUsage { now, ..usage.clone() }, 0));
            }
        }
        let (usage, read) = view::usage(&store, exp, now)?;
        let mut kept = lock();
        if kept.len() >= KEPT_USAGES {
            kept.clear();
        }
        kept.insert(exp, (version, usage.clone()));
        Ok((usage, read))
    }

    /// A page of the jobs' results: at most `limit` (1 to `MAX_RESULTS_PAGE`), from the job
    /// after job number `after`.
    pub fn results(&self, who: &Caller, exp: i64, after: u64, limit: u32) -> Result<Vec<SweepJob>, ApiError> {
        let (store, _) = self.owned(who, exp)?;
        Ok(view::results_page(&store, exp, after, limit.clamp(1, MAX_RESULTS_PAGE))?)
    }

    /// A new deadline (Unix seconds) or budget; a stalled sweep runs again under it.
    pub fn set_limits(
        self: &Arc<Self>,
        who: &Caller,
        exp: i64,
        deadline: Option<f64>,
        budget: Option<libra_core::Money>,
        now: f64,
    ) -> Result<SweepInfo, ApiError> {
        let (store, owner) = self.owned(who, exp)?;
        if let Some(d) = deadline {
            if !d.is_finite() || d <= now {
                return Err(ApiError::BadRequest(format!(
                    "deadline: {d} is in the past (the server's time is {now:.0}): give a time to come"
                )));
            }
            store.set_deadline(exp, d)?;
            // The sweep's credential must last as long as the sweep may run.
            crate::store::users::extend_sweep_tokens(&self.server_store()?, exp, d + CREDENTIAL_GRACE)?;
        }
        if let Some(b) = budget {
            if b.is_negative() {
                return Err(ApiError::BadRequest(format!(
                    "budget: {b} is negative: give a budget of 0 credits or more"
                )));
            }
            libra_core::job::check_budget(b).map_err(|e| ApiError::BadRequest(e.to_string()))?;
            store.set_budget(exp, b)?;
        }
        if store.experiment(exp)?.state == ExperimentState::Stalled {
            store.set_state(exp, ExperimentState::Running, None)?;
            self.start_engine(exp);
        }
        self.info(&store, exp, &owner, now)
    }

    /// pause, resume, cancel, or rerun (the failed and cancelled jobs).
    pub fn action(
        self: &Arc<Self>,
        who: &Caller,
        exp: i64,
        action: &str,
        now: f64,
    ) -> Result<SweepInfo, ApiError> {
        let (store, owner) = self.owned(who, exp)?;
        let state = store.experiment(exp)?.state;
        let ended = state.is_final();
        let conflict = || ApiError::Conflict(format!("sweep {exp} is {state}: it cannot {action}"));
        match action {
            "pause" => {
                if ended {
                    return Err(conflict());
                }
                store.set_state(exp, ExperimentState::Paused, None)?;
            }
            "resume" => {
                if ended {
                    return Err(conflict());
                }
                store.set_state(exp, ExperimentState::Running, None)?;
                self.start_engine(exp);
            }
            "cancel" => {
                if ended {
                    return Err(conflict());
                }
                store.set_state(exp, ExperimentState::Cancelled, None)?;
                // A live engine kills the running jobs and records the cancellation itself
                // (and its end revokes the credential). With none (it stopped on an error), one
                // is started to take up and stop what is left running (its jobs on a Libra
                // cluster), if anything is.
                if !self.has_engine(exp) {
                    if store.counts(exp)?.running > 0 {
                        self.start_engine(exp);
                    } else {
                        finish_cancel(&store, exp)?;
                        self.revoke(exp);
                    }
                }
            }
            "rerun" => {
                // Each failed or cancelled job is written again, and runs again; refused while
                // a cancel has not ended (`Store::rerunnable`).
                let again = store.rerunnable(exp)?;
                self.take_jobs(who, again, "this rerun runs again", now)?;
                store.rerun_failed(exp)?;
                if store.counts(exp)?.pending > 0 {
                    store.set_state(exp, ExperimentState::Running, None)?;
                    self.start_engine(exp);
                }
            }
            other => {
                return Err(ApiError::NotFound(format!(
                    "action: '{other}' is not one: use pause, resume, cancel or rerun"
                )))
            }
        }
        self.info(&store, exp, &owner, now)
    }
}

fn owner(store: &Store, exp: i64) -> Result<Option<(i64, String)>, ApiError> {
    Ok(hosted::owner(&store.conn, exp)?)
}

/// Records a cancellation no engine will record (`engine::cancel_without_engine`: attempts left
/// running are lost, pending jobs cancelled, local jobs' keepers stopped). Does nothing unless
/// the sweep is cancelled and not yet finished.
fn finish_cancel(store: &Store, exp: i64) -> Result<(), StoreError> {
    let e = store.experiment(exp)?;
    if e.state != ExperimentState::Cancelled || e.finished.is_some() {
        return Ok(());
    }
    let keepers = engine::cancel_without_engine(store, exp, engine::now_unix())?;
    if !keepers.is_empty() {
        // Not on the request's thread: a job that ignores SIGTERM is killed only after a grace.
        std::thread::spawn(move || {
            libra_broker::adapter::local::stop_keepers(&keepers, engine::CANCEL_GRACE)
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{origin, Sweeps};

    /// A connection to the broker database is kept for the next request, and one left inside
    /// a transaction is closed (its transaction rolled back) rather than handed on.
    #[test]
    fn a_broker_connection_is_kept_for_the_next_request_unless_left_in_a_transaction() {
        let d = tempfile::tempdir().unwrap();
        let sweeps =
            Sweeps::open(d.path().join("broker.db"), &[], None, d.path().join("server.db"), 10, 100, 1000.0)
                .unwrap();
        // A temporary table is its connection's own: seen again, the connection is the same.
        let marked = |store: &libra_broker::store::Store| -> bool {
            store
                .conn
                .query_row("SELECT count(*) FROM temp.sqlite_master WHERE name = 'marker'", [], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap()
                == 1
        };
        let first = sweeps.store().unwrap();
        first.conn.execute_batch("CREATE TEMP TABLE marker (x)").unwrap();
        drop(first);
        let again = sweeps.store().unwrap();
        assert!(marked(&again), "a new connection for each request");
        // Left inside a transaction: not handed on.
        again.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        drop(again);
        let next = sweeps.store().unwrap();
        assert!(!marked(&next), "a connection left in a transaction was handed on");
        assert!(next.conn.is_autocommit());
        // And the write lock it held is gone with it.
        next.conn.execute_batch("BEGIN IMMEDIATE; COMMIT").unwrap();
    }

    #[test]
    fn origins_compare_equal_however_spelled_and_only_http_and_https_are_accepted() {
        for (url, want) in [
            ("http://LocalHost:7878/", "http://localhost:7878"),
            ("http://10.0.0.5:7878/api/jobs?x=1", "http://10.0.0.5:7878"),
            ("http://example.org", "http://example.org:80"),
            ("http://[::1]:7878/", "http://[::1]:7878"),
            ("http://[::1]", "http://[::1]:80"),
            ("https://Manager:7878/", "https://manager:7878"),
            ("https://example.org", "https://example.org:443"),
        ] {
            assert_eq!(origin(url).as_deref(), Ok(want), "{url}");
        }
        for bad in
            ["ftp://x:1", "file:///etc/passwd", "http://", "https://u:p@host:1", "http://h:99999", "h:1"]
        {
            assert!(origin(bad).is_err(), "{bad} was accepted");
        }
    }
}
