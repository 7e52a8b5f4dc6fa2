//! The manager's state: the store, the in-memory cluster view the policies read, and the node
//! agents' last reports. One mutex guards all of it: a decision and its durable record happen
//! together, so no two submissions can be promised the same capacity. Requests reach it only
//! through `App::run`, on tokio's blocking pool, never on the async workers; routes that only
//! read the store use `App::read` instead: a WAL read connection, without the lock.

use crate::buckets::{Buckets, Short};
use crate::config::Config;
use crate::error::{ApiError, ServerError};
use crate::store;
use libra_api::NodeJobShare;
use libra_core::job::{JobDetails, QosConstraints, QosOptimisation, ResourceRequirements};
use libra_core::policy::{build_policy_with, Placement};
use libra_core::{Cluster, JobSpec, Money, NodeIdx, Policy, PricingParams};
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

pub struct App {
    pub config: Config,
    inner: Mutex<Inner>,
    /// Woken when there is new work for node agents (a submission, a cancel, a suspend).
    pub work: Notify,
    /// The hosted sweeps (their own database and engine threads; not behind the lock).
    pub sweeps: std::sync::Arc<crate::sweeps::Sweeps>,
    /// Submissions waiting for the next group commit.
    pub(crate) submissions: crate::group_commit::SubmitQueue,
    /// Throttles password guessing and bounds concurrent password hashing.
    pub login_guard: crate::login_guard::LoginGuard,
    /// Counters for `GET /metrics`.
    pub metrics: crate::metrics::Metrics,
    /// Refusals the audit log is counting rather than writing one by one.
    pub audit_repeats: crate::audit::Repeats,
    /// The API's open connections, by peer (set when the server starts serving).
    pub connections: std::sync::OnceLock<std::sync::Arc<crate::connections::Gate>>,
    /// No other server opens this store while this one runs.
    _lock: crate::backup::StoreLock,
    /// The configuration as last loaded (at start or by a reload): what a reload compares with.
    live: Mutex<Config>,
    /// What carries out the scheduler's decisions (`[executor] kind`).
    pub executor: std::sync::Arc<dyn crate::executor::Executor>,
    /// Read-only connections to the store for the read-only routes (`App::read`).
    readers: store::Readers,
    /// The callers the token cache holds, shared with the state (`Inner::caller`).
    pub(crate) tokens: std::sync::Arc<TokenCache>,
    /// Each user's bucket of reads (`read_rate`, `read_burst`; `crate::read_limit`).
    pub(crate) read_buckets: Mutex<Buckets>,
}

/// Callers by token digest, so most requests skip a query. Every change to a user or a token
/// made through the state (logout, password change, disable, remove) empties it
/// (`Inner::forget_tokens`), and each entry is checked against its expiry; hosted sweeps'
/// credentials, revoked from the sweeps' threads, are never cached.
#[derive(Default)]
pub struct TokenCache {
    map: Mutex<(u64, HashMap<String, crate::auth::Caller>)>,
}

impl TokenCache {
    /// Who sent the request (401 without a valid token, saying why), looked up in `db` on a miss.
    pub fn caller(
        &self,
        db: &Connection,
        headers: &axum::http::HeaderMap,
    ) -> Result<crate::auth::Caller, ApiError> {
        let t = now();
        let digest = crate::auth::bearer(headers).map(crate::auth::token_digest);
        let generation = {
            let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(d) = &digest {
                match m.1.get(d) {
                    Some(c) if c.expires > t => return Ok(c.clone()),
                    Some(_) => {
                        m.1.remove(d);
                    }
                    None => {}
                }
            }
            m.0
        };
        let c = crate::auth::caller(db, headers, t)?;
        if let (Some(d), None) = (digest, c.sweep) {
            let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
            // A read connection's snapshot may predate a revocation that emptied the cache
            // since this lookup began: what it found is not kept then, or the revoked token
            // would work again until it expired.
            if m.0 == generation {
                if m.1.len() >= MAX_CACHED_TOKENS {
                    m.1.clear();
                }
                m.1.insert(d, c.clone());
            }
        }
        Ok(c)
    }

    /// The caller `digest` names if the cache holds it and it has not expired: no query. A
    /// request whose token is not held here is looked up by its handler (`caller`), which
    /// keeps it for the next.
    pub fn cached(&self, digest: &str, now: f64) -> Option<crate::auth::Caller> {
        let m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        m.1.get(digest).filter(|c| c.expires > now).cloned()
    }

    /// Empties the cache (after the change to users or tokens is committed).
    pub fn forget(&self) {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        m.0 += 1;
        m.1.clear();
    }
}

pub struct NodeRt {
    pub idx: NodeIdx,
    pub mechanism: String,
    /// The Unix account its agent runs as, and whether it can run jobs as their owners'.
    pub account: String,
    pub switches_users: bool,
    pub last_seen: f64,
    pub shares: Vec<NodeJobShare>,
    /// The SHA-256 digest of the node's own credential (None: not yet minted, or forgotten).
    pub cred_hash: Option<String>,
    /// The credential was minted on joining and the node has not presented it yet: the join
    /// token may replace it (its agent never got it, or died before saving it).
    pub cred_unused: bool,
    /// Why it is drained, when someone said (`NodeInfo::drain_reason`).
    pub drain_reason: Option<String>,
}

/// `output_quota_mb` or `command_quota_mb` in bytes (0: none).
fn quota_bytes(mb: u64) -> Option<i64> {
    (mb > 0).then(|| (mb * 1024 * 1024) as i64)
}

/// `max_kept_refusals` (0: none).
fn refusals_cap(n: u64) -> Option<i64> {
    (n > 0).then_some(n as i64)
}

pub struct Inner {
    pub db: Connection,
    pub cluster: Cluster,
    pub policy: Box<dyn Policy>,
    pub pricing: PricingParams,
    pub nodes: HashMap<String, NodeRt>,
    pub node_timeout: f64,
    /// Bytes of output kept per user (`output_quota_mb`); None: no quota.
    pub output_quota: Option<i64>,
    /// Bytes of commands kept whole per user (`command_quota_mb`); None: no quota.
    pub command_quota: Option<i64>,
    /// Refused submissions kept per user (`max_kept_refusals`); None: every one.
    pub refusals_cap: Option<i64>,
    /// The token cache (`TokenCache`), shared with the read path.
    tokens: std::sync::Arc<TokenCache>,
    /// Each user's bucket of submissions and job changes (`submit_rate`, `submit_burst`).
    submit_buckets: Buckets,
    /// Each user's bucket of quotes, as large and as fast as their submissions' (`take_quote`).
    quote_buckets: Buckets,
    pub token_ttl: f64,
    /// The most login tokens one user keeps (`max_tokens_per_user`).
    pub max_tokens_per_user: u32,
    pub max_active_jobs: u32,
    /// What admission and the agent exchange must respect of the executor in force.
    pub exec: crate::executor::ExecLimits,
}

/// The most callers kept in the token cache (a flood of distinct valid tokens cannot grow it
/// without bound).
const MAX_CACHED_TOKENS: usize = 10_000;

pub use libra_api::unix_now as now;

impl App {
    pub fn open(config: Config) -> Result<App, ServerError> {
        config.validate()?;
        // The store holds password hashes and the ledger: its directory 0700 where the server
        // makes it, the files 0600.
        if let Some(dir) = config.db.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !dir.exists() {
                crate::tls::private_dir(dir)?;
            }
        }
        crate::tls::private_db_file(&config.db)?;
        let broker_db = config.broker_db();
        if let Some(dir) = broker_db.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !dir.exists() {
                crate::tls::private_dir(dir)?;
            }
        }
        crate::tls::private_db_file(&broker_db)?;
        let lock = crate::backup::StoreLock::acquire(&config.db)?;
        let db = store::open(&config.db, config.sync_full)
            .map_err(|e| ServerError::Open { path: config.db.display().to_string(), source: e })?;
        let executor = crate::executor::build(&config.executor);
        let tokens = std::sync::Arc::new(TokenCache::default());
        let inner = Inner::load(db, &config, executor.limits(), tokens.clone(), now())?;
        let readers = store::Readers::new(&config.db);
        let sweeps = std::sync::Arc::new(crate::sweeps::Sweeps::open(
            config.broker_db(),
            &config.sweep_clusters,
            config.sweep_keeper.clone(),
            config.db.clone(),
            config.max_active_sweeps,
            config.max_kept_sweeps,
            config.sweep_job_rate,
        )?);
        let read_buckets = Mutex::new(Buckets::new(config.read_rate, f64::from(config.read_burst)));
        Ok(App {
            inner: Mutex::new(inner),
            work: Notify::new(),
            sweeps,
            submissions: Default::default(),
            // Argon2 takes about 19 MiB and tens of milliseconds per hash: a few at a time.
            login_guard: crate::login_guard::LoginGuard::new(
                std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8),
            ),
            metrics: Default::default(),
            audit_repeats: crate::audit::Repeats::new(config.audit_repeat_window),
            connections: std::sync::OnceLock::new(),
            _lock: lock,
            live: Mutex::new(config.clone()),
            config,
            executor,
            readers,
            tokens,
            read_buckets,
        })
    }

    /// The store now says something else should run (a job admitted, cancelled, suspended,
    /// resumed): the node agents waiting in a sync look again, and the executor carries it out.
    pub fn changed(&self) {
        self.work.notify_waiters();
        self.executor.changed();
    }

    /// Applies a reloaded configuration (SIGHUP): the settings in `config::RELOADABLE` that
    /// changed take effect now; the others that changed are named as needing a restart.
    /// Returns (applied, "key: old -> new" each; needing a restart). Nothing is applied when
    /// the new configuration is invalid.
    pub fn reload(
        &self,
        new: Config,
        set_log_level: &dyn Fn(&str) -> Result<(), String>,
    ) -> Result<(Vec<String>, Vec<String>), String> {
        new.validate().map_err(|e| e.to_string())?;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let old: std::collections::BTreeMap<String, serde_json::Value> =
            live.settings().into_iter().collect();
        let (mut applied, mut restart) = (Vec::new(), Vec::new());
        for (key, value) in new.settings() {
            let before = old.get(&key).cloned().unwrap_or_default();
            if before == value {
                continue;
            }
            if crate::config::RELOADABLE.contains(&key.as_str()) {
                applied.push(format!("{key}: {before} -> {value}"));
            } else {
                restart.push(key);
            }
        }
        let changed = |k: &str| applied.iter().any(|a| a.starts_with(&format!("{k}:")));
        if changed("log_level") {
            set_log_level(&new.log_level).map_err(|e| format!("log_level: {e}"))?;
        }
        {
            let mut g = self.lock();
            if [
                "policy",
                "placement",
                "pricing.alpha",
                "pricing.beta",
                "pricing.libra_gamma",
                "pricing.libra_delta",
            ]
            .iter()
            .any(|k| changed(k))
            {
                g.set_policy(&new.policy, new.pricing, new.placement).map_err(|e| e.to_string())?;
            }
            g.node_timeout = new.node_timeout;
            g.output_quota = quota_bytes(new.output_quota_mb);
            g.command_quota = quota_bytes(new.command_quota_mb);
            g.refusals_cap = refusals_cap(new.max_kept_refusals);
        }
        *live = new;
        Ok((applied, restart))
    }

    /// `audit_keep_days` and `output_keep_days` in force (a reload changes them).
    pub fn retentions(&self) -> (Option<f64>, Option<f64>) {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        (live.audit_keep_days, live.output_keep_days)
    }

    /// Runs `f` on the state on a blocking thread, never on the async workers: taking the
    /// state's lock can wait for a long admission batch or a slow fsync, and SQLite blocks.
    /// Every route that touches the state or the store goes through here (or `read`), so a
    /// held writer stalls only the requests that need it: `/api/health`, node agents' waits
    /// and reads keep being answered. (A dedicated core thread fed by a channel would also
    /// serialise the work; tokio's blocking pool does it with the lock the state already had,
    /// and lets the lock-free paths run beside it.)
    pub async fn run<T, F>(self: &std::sync::Arc<Self>, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Inner) -> Result<T, ApiError> + Send + 'static,
    {
        let app = std::sync::Arc::clone(self);
        blocking(move || f(&mut app.lock())).await
    }

    /// Runs `f` with a read-only connection to the store and the caller the headers name, on
    /// a blocking thread, without the state's lock: in WAL mode a reader sees the last
    /// committed state and waits neither for the writer's transaction nor for its fsync. For
    /// routes that only read the store (not the in-memory view).
    pub async fn read<T, F>(
        self: &std::sync::Arc<Self>,
        headers: axum::http::HeaderMap,
        f: F,
    ) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, crate::auth::Caller) -> Result<T, ApiError> + Send + 'static,
    {
        let app = std::sync::Arc::clone(self);
        blocking(move || {
            app.readers.with(|db| {
                let who = app.tokens.caller(db, &headers)?;
                f(db, who)
            })
        })
        .await
    }

    /// The state, even if a panicking request poisoned the lock: every change is a committed
    /// transaction or nothing, so the state behind a poisoned lock is still consistent.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `f` on tokio's blocking pool; a panic in it is a 500 that says nothing of the panic (the
/// log has it).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ApiError::Internal(format!("a request's work on the state failed: {e}"))))
}

pub fn spec_of(
    estimate: f64,
    deadline: f64,
    budget: Money,
    procs: u32,
    mem_mb: u64,
    cpus_per_task: u32,
) -> JobSpec {
    JobSpec {
        details: JobDetails { estimate, length_mi: None },
        resources: ResourceRequirements { procs, cpus_per_task, mem_mb, disk_mb: 0 },
        qos: QosConstraints { deadline, budget },
        optimise: QosOptimisation::Cost,
    }
}

impl Inner {
    /// Rebuilds the in-memory view from the store: nodes (given one timeout of grace to report
    /// again), the policy, its placement and the prices last set, and the commitments of every
    /// accepted job.
    fn load(
        db: Connection,
        config: &Config,
        exec: crate::executor::ExecLimits,
        tokens: std::sync::Arc<TokenCache>,
        now: f64,
    ) -> Result<Inner, ServerError> {
        let stored = store::setting(&db, "policy")?;
        // The placement was set with the policy: a stored policy comes with its stored placement
        // (none stored: the policy's default), the configured one with the configured one.
        let placement = match &stored {
            Some(_) => store::setting(&db, "placement")?
                .filter(|p| !p.is_empty())
                .map(|p| p.parse::<Placement>())
                .transpose()
                .map_err(|e| ServerError::Invalid(format!("stored setting: {e}")))?,
            None => config.placement,
        };
        let policy_name = stored.unwrap_or_else(|| config.policy.clone());
        let pricing = match store::setting(&db, "pricing")? {
            Some(p) => serde_json::from_str(&p).unwrap_or(config.pricing),
            None => config.pricing,
        };
        let policy = build_policy_with(&policy_name, pricing, placement)
            .map_err(|e| ServerError::Invalid(e.to_string()))?;
        let mut cluster = Cluster::new();
        cluster.set_max_jobs_per_node(exec.jobs_per_node);
        let mut nodes = HashMap::new();
        for n in store::nodes::all(&db)? {
            let idx = cluster.add_node(crate::nodes::node_spec(
                &n.name,
                n.cpus,
                n.mem_mb.max(0) as u64,
                n.price_base,
            ));
            cluster.set_accepting(idx, !n.drained);
            let rt = NodeRt {
                idx,
                mechanism: n.mechanism,
                account: n.account,
                switches_users: n.switches_users,
                last_seen: now,
                shares: Vec::new(),
                cred_hash: n.cred_hash,
                cred_unused: n.cred_unused,
                drain_reason: n.drain_reason,
            };
            nodes.insert(n.name, rt);
        }
        for (user, estimate, runtime) in store::observations(&db)? {
            policy.observe(Some(user), estimate, runtime);
        }
        let active = store::jobs::commitments(&db)?;
        for (id, spec, submit, node_names, cpu, reserved) in active {
            let idxs: Vec<NodeIdx> =
                node_names.split(',').filter_map(|n| nodes.get(n).map(|r| r.idx)).collect();
            // A queued job (space-shared policies) holds no node until it is dispatched.
            if !idxs.is_empty()
                && cluster.commit_spec_reserving(id, &spec, reserved, submit, &idxs, submit).is_ok()
            {
                let _ = cluster.report_progress(id, cpu, now);
            }
        }
        let mut inner = Inner {
            db,
            cluster,
            policy,
            pricing,
            nodes,
            node_timeout: config.node_timeout,
            output_quota: quota_bytes(config.output_quota_mb),
            command_quota: quota_bytes(config.command_quota_mb),
            refusals_cap: refusals_cap(config.max_kept_refusals),
            tokens,
            submit_buckets: Buckets::new(config.submit_rate, f64::from(config.submit_burst)),
            quote_buckets: Buckets::new(config.submit_rate, f64::from(config.submit_burst)),
            token_ttl: config.token_ttl,
            max_tokens_per_user: config.max_tokens_per_user,
            max_active_jobs: config.max_active_jobs,
            exec,
        };
        inner
            .recommit_waiting()
            .map_err(|e| ServerError::Invalid(format!("jobs waiting on dependencies: {e}")))?;
        // A store written before exits and settlements shared a transaction may hold jobs that
        // ended and were never charged: settle them before serving.
        match inner.settle_stranded(now, None) {
            Ok(0) => {}
            Ok(n) => tracing::warn!("settled {n} jobs that had ended before the last stop"),
            Err(e) => {
                return Err(ServerError::Invalid(format!(
                    "settling jobs that ended before the last stop: {e}"
                )))
            }
        }
        Ok(inner)
    }

    /// Who sent the request (401 without a valid token, saying why).
    pub fn caller(&self, headers: &axum::http::HeaderMap) -> Result<crate::auth::Caller, ApiError> {
        self.tokens.caller(&self.db, headers)
    }

    /// Empties the token cache: call after any change to users or tokens, so that a revoked
    /// token or a disabled user is refused from the next request on.
    pub fn forget_tokens(&self) {
        self.tokens.forget();
    }

    /// One more submission by `user` now, if their bucket allows it; otherwise 429 with the
    /// seconds until it will.
    pub fn take_submission(&mut self, user: &crate::auth::Caller, now: f64) -> Result<(), ApiError> {
        self.take_token(user, now, Taken::Submission)
    }

    /// One more change of a job by `user` now (`action`: update, hold, release), from the same
    /// bucket as their submissions: each re-admits the job or writes the ledger as a submission
    /// does, and any of them can be repeated on one job without end, so unbounded they would
    /// take the scheduler's time and grow the books at whatever rate a client can send.
    pub fn take_change(
        &mut self,
        user: &crate::auth::Caller,
        action: &str,
        now: f64,
    ) -> Result<(), ApiError> {
        self.take_token(user, now, Taken::Change(action))
    }

    /// One more quote by `user` now, from a bucket of their quotes as large and as fast as
    /// their submissions' (so that quoting before each submission, as a sweep does, never
    /// slows the submissions): a quote runs the admission a submission does, under the state's
    /// lock, and unbounded one user's quotes would keep everyone else's submissions waiting.
    pub fn take_quote(&mut self, user: &crate::auth::Caller, now: f64) -> Result<(), ApiError> {
        self.take_token(user, now, Taken::Quote)
    }

    /// A token from `user`'s bucket (`submit_rate`, `submit_burst`) for `what`, or 429 with the
    /// whole seconds until one is there.
    fn take_token(&mut self, user: &crate::auth::Caller, now: f64, what: Taken) -> Result<(), ApiError> {
        let buckets = match what {
            Taken::Quote => &mut self.quote_buckets,
            Taken::Submission | Taken::Change(_) => &mut self.submit_buckets,
        };
        let (rate, burst) = (buckets.rate(), buckets.burst());
        let Err(Short { wait, .. }) = buckets.take(user.id, 1.0, now) else { return Ok(()) };
        let name = &user.name;
        let message = match what {
            Taken::Submission => format!(
                "submissions: {name} may submit at most {rate} jobs per second ({burst} at once); try again in {wait} s"
            ),
            Taken::Change(action) => format!(
                "{action}: {name} may submit or change jobs at most {rate} times per second ({burst} at once; update, hold and release, and a hosted sweep's pause, resume, deadline and budget, count as submissions); try again in {wait} s"
            ),
            Taken::Quote => format!(
                "quote: {name} may ask at most {rate} quotes per second ({burst} at once, as many as submissions); try again in {wait} s"
            ),
        };
        Err(ApiError::TooMany(message, wait))
    }

    pub fn node_name(&self, i: NodeIdx) -> String {
        self.cluster.node(i).spec.name.clone()
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Sets the policy, its prices and how it chooses nodes (`None`: the policy's default),
    /// stored together so that a restart brings back the same policy.
    pub fn set_policy(
        &mut self,
        name: &str,
        pricing: PricingParams,
        placement: Option<Placement>,
    ) -> Result<(), ApiError> {
        let p =
            build_policy_with(name, pricing, placement).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let tx = self.db.transaction()?;
        store::set_setting(&tx, "policy", p.name())?;
        store::set_setting(&tx, "placement", p.placement().map_or("", Placement::as_str))?;
        store::set_setting(&tx, "pricing", &serde_json::to_string(&pricing)?)?;
        tx.commit()?;
        // A learning policy (libra-risk) starts from the cluster's whole history.
        for (user, estimate, runtime) in store::observations(&self.db)? {
            p.observe(Some(user), estimate, runtime);
        }
        self.policy = p;
        self.pricing = pricing;
        Ok(())
    }

    /// Drains a node (it takes no new jobs; those it runs finish) or undrains it. Stored, so a
    /// restart keeps it drained; its capacity leaves admission at once.
    pub fn set_drained(&mut self, node: &str, drained: bool, reason: Option<String>) -> Result<(), ApiError> {
        let rt = self
            .nodes
            .get_mut(node)
            .ok_or_else(|| ApiError::NotFound(format!("node: '{node}' is not a node of this cluster")))?;
        let idx = rt.idx;
        // Draining a drained node again without a reason keeps the one it has (an
        // administrator's ticket, or why the server drained it); undraining forgets it.
        let reason = if drained { reason.or_else(|| rt.drain_reason.clone()) } else { None };
        store::nodes::set_drained(&self.db, node, drained, reason.as_deref())?;
        rt.drain_reason = reason;
        self.cluster.set_accepting(idx, !drained);
        tracing::info!(node = %node, "{}", if drained { "node drained: it takes no new jobs" } else { "node undrained" });
        Ok(())
    }

    /// New pricing parameters for the policy in force and, optionally, a new base price for one
    /// node or all: all checked before anything is written, then written in one transaction, so
    /// a refused change changes nothing.
    pub fn set_pricing_and_price_base(
        &mut self,
        pricing: PricingParams,
        price_base: Option<(Option<&str>, f64)>,
    ) -> Result<(), ApiError> {
        let placement = self.policy.placement();
        let p = build_policy_with(self.policy_name(), pricing, placement)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let targets = match price_base {
            Some((node, price)) => Some((self.price_targets(node, price)?, price)),
            None => None,
        };
        let tx = self.db.transaction()?;
        store::set_setting(&tx, "pricing", &serde_json::to_string(&pricing)?)?;
        if let Some((targets, price)) = &targets {
            for (name, _) in targets {
                store::nodes::set_price_base(&tx, name, *price)?;
            }
        }
        tx.commit()?;
        for (user, estimate, runtime) in store::observations(&self.db)? {
            p.observe(Some(user), estimate, runtime);
        }
        self.policy = p;
        self.pricing = pricing;
        if let Some((targets, price)) = targets {
            for (_, idx) in targets {
                self.cluster.set_price_base(idx, price);
            }
        }
        Ok(())
    }

    /// The nodes a base price goes to, if the price is one a node may have.
    fn price_targets(&self, node: Option<&str>, price: f64) -> Result<Vec<(String, NodeIdx)>, ApiError> {
        if !(0.0..1e9).contains(&price) {
            return Err(ApiError::BadRequest(format!(
                "price_base: {} is not accepted: give a price from 0 to 1e9 per CPU-second",
                libra_core::Shown(price)
            )));
        }
        Ok(match node {
            Some(n) => {
                let rt = self.nodes.get(n).ok_or_else(|| {
                    ApiError::NotFound(format!("node: '{n}' is not a node of this cluster"))
                })?;
                vec![(n.to_string(), rt.idx)]
            }
            None => self.nodes.iter().map(|(n, r)| (n.clone(), r.idx)).collect(),
        })
    }

    pub fn set_price_base(&mut self, node: Option<&str>, price: f64) -> Result<(), ApiError> {
        let targets = self.price_targets(node, price)?;
        let tx = self.db.transaction()?;
        for (name, _) in &targets {
            store::nodes::set_price_base(&tx, name, price)?;
        }
        tx.commit()?;
        for (_, idx) in targets {
            self.cluster.set_price_base(idx, price);
        }
        Ok(())
    }
}

/// What a token of a user's rate is taken for (`Inner::take_token`).
#[derive(Debug, Clone, Copy)]
enum Taken<'a> {
    Submission,
    /// A change of a job, by its action's name.
    Change(&'a str),
    Quote,
}
