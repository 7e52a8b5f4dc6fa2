//! `libra server`: the manager of a running Libra cluster. HTTP API (JSON), admission and
//! pricing through `libra-core`'s policies over an in-memory view of the cluster, an SQLite store
//! (WAL) holding users, tokens, nodes, jobs and the append-only credit ledger.

pub mod app;
pub mod audit;
pub mod auth;
mod buckets;
mod change;
pub mod config;
pub mod connections;
pub mod error;
pub mod executor;
mod group_commit;
pub mod ledger;
pub mod login_guard;
pub mod metrics;
mod nodes;
pub mod openapi;
pub mod peer;
mod queue;
pub(crate) mod read_limit;
pub mod routes;
pub mod sched;
mod settle;
pub mod store;
pub mod sweeps;
pub mod tls;

pub use app::App;
pub use config::Config;
pub use error::{ApiError, ServerError};
/// The store's lock, backup and restore (`libra server backup` / `restore`).
pub use store::backup;
/// Shared accounts (projects) and their ledger: data and rules together in the store, as their
/// holds and charges are drawn over allocation buckets inside one transaction.
pub use store::projects;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Creates the `admin` account on an empty store. Returns the password when one was generated.
pub fn bootstrap_admin(app: &App) -> Result<Option<String>, ServerError> {
    let g = app.lock();
    let users = store::users::count(&g.db)?;
    if users > 0 {
        return Ok(None);
    }
    let (password, generated) = match &app.config.admin_password {
        Some(p) => (p.clone(), false),
        None => (auth::new_token()[..16].to_string(), true),
    };
    let hash = auth::hash_password(&password).map_err(|e| ServerError::Invalid(e.to_string()))?;
    store::users::insert(&g.db, "admin", &hash, true, None, false)?;
    Ok(generated.then_some(password))
}

/// Serves until `shutdown` resolves (https when `tls` is given). The watchdog marks silent
/// nodes down once a second.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    if let Ok(addr) = listener.local_addr() {
        app.sweeps.allow_own_address(addr);
    }
    if tls.is_some() {
        let cert = app.config.tls_cert.clone().unwrap_or_else(|| tls::self_signed_paths(&app.config).0);
        app.sweeps.trust_own_certificate(cert);
    }
    // Hosted sweeps that were running when the server stopped (or was killed) carry on.
    match app.sweeps.resume_all() {
        Ok(0) => {}
        Ok(n) => tracing::info!("resumed {n} hosted sweeps"),
        Err(e) => tracing::error!("resuming hosted sweeps: {e}"),
    }
    let watchdog = {
        let app = app.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            // When the audit log and the jobs' output were last pruned, and for which retention:
            // a retention changed by a reload is applied at the next tick.
            let mut pruned: Option<(std::time::Instant, f64)> = None;
            let mut outputs_pruned: Option<(std::time::Instant, f64)> = None;
            let mut tokens_pruned: Option<std::time::Instant> = None;
            loop {
                tick.tick().await;
                if tokens_pruned.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                    tokens_pruned = Some(std::time::Instant::now());
                    prune_tokens(&app).await;
                }
                let (audit_days, output_days) = app.retentions();
                if let Some(days) = audit_days {
                    if pruned.is_none_or(|(t, d)| d != days || t.elapsed() >= PRUNE_EVERY) {
                        pruned = Some((std::time::Instant::now(), days));
                        prune_audit(&app, days).await;
                    }
                }
                if let Some(days) = output_days {
                    if outputs_pruned.is_none_or(|(t, d)| d != days || t.elapsed() >= PRUNE_EVERY) {
                        outputs_pruned = Some((std::time::Instant::now(), days));
                        prune_outputs(&app, days).await;
                    }
                }
                let r = app
                    .run(|g| {
                        let now = app::now();
                        g.check_nodes(now)?;
                        let grace = now - g.node_timeout;
                        g.settle_stranded(now, Some(grace))?;
                        g.release_dependents(now)?;
                        g.dispatch_queue(now)
                    })
                    .await;
                if let Err(e) = r {
                    tracing::error!("scheduler tick: {e}");
                }
                app.work.notify_waiters();
                audit::write_repeated(&app, app.audit_repeats.due(std::time::Instant::now())).await;
            }
        })
    };
    let executor = app.executor.clone().spawn(app.clone());
    let app_for_stop = app.clone();
    let gate = connection_gate(&app);
    let header_timeout = Duration::from_secs_f64(app.config.header_timeout);
    let r = connections::serve(listener, tls, routes::router(app), gate, header_timeout, shutdown).await;
    watchdog.abort();
    if let Some(e) = executor {
        e.abort();
    }
    // Refusals counted in windows that have not ended yet.
    audit::write_repeated(&app_for_stop, app_for_stop.audit_repeats.drain()).await;
    r.map_err(ServerError::Io)
}

/// The gate the API's connections pass (`connections`), made once per server: the server's
/// soft open-file limit raised to the hard one first, the default `max_connections` made from it.
fn connection_gate(app: &App) -> Arc<connections::Gate> {
    app.connections
        .get_or_init(|| {
            let open_files = connections::raise_open_files();
            let c = &app.config;
            let total = connections::total_limit(c.max_connections, open_files);
            if open_files != u64::MAX && total as u64 + connections::RESERVED_FILES > open_files {
                tracing::warn!(
                    "max_connections = {total} with an open-file limit of {open_files}: past about {}, connections will fail for want of descriptors (raise LimitNOFILE or lower max_connections)",
                    open_files.saturating_sub(connections::RESERVED_FILES)
                );
            }
            tracing::info!(
                max_connections = total,
                max_connections_per_address = c.max_connections_per_address,
                header_timeout = c.header_timeout,
                "taking at most {total} connections, {} from any one address",
                c.max_connections_per_address
            );
            Arc::new(connections::Gate::new(c.max_connections_per_address as usize, total))
        })
        .clone()
}

/// How often the audit log's entries and the jobs' output older than their retentions
/// (`audit_keep_days`, `output_keep_days`) are removed.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Runs `step` (which removes at most `batch` rows of the store as of `now` and says how many)
/// again and again, each time under the state's lock, until it removes fewer: a long backlog
/// never holds the store for long. Returns how many went; an error is logged with `what` and
/// ends the run.
async fn remove_in_batches(
    app: &Arc<App>,
    what: &'static str,
    batch: u32,
    step: impl Fn(&rusqlite::Connection, f64) -> rusqlite::Result<u64> + Copy + Send + 'static,
) -> u64 {
    let mut removed = 0;
    loop {
        match app.run(move |g| Ok(step(&g.db, app::now())?)).await {
            Ok(n) => {
                removed += n;
                if n < u64::from(batch) {
                    return removed;
                }
            }
            Err(e) => {
                tracing::error!("{what}: {e}");
                return removed;
            }
        }
    }
}

/// Removes the output of the jobs that ended more than `days` ago (`store::remove_old_output`).
async fn prune_outputs(app: &Arc<App>, days: f64) {
    const BATCH: u32 = 1_000;
    let step = move |db: &rusqlite::Connection, now: f64| {
        crate::store::remove_old_output(db, now - days * 86_400.0, now, BATCH)
    };
    let removed = remove_in_batches(app, "removing old jobs' output", BATCH, step).await;
    if removed > 0 {
        tracing::info!(jobs = removed, output_keep_days = days, "old jobs' output removed");
    }
}

/// Removes the tokens that expired a week ago or more (`store::users::remove_expired_tokens`):
/// every login stores one, and an expired token is of no use once its holder has been told.
async fn prune_tokens(app: &Arc<App>) {
    const BATCH: u32 = 10_000;
    let step =
        move |db: &rusqlite::Connection, now: f64| crate::store::users::remove_expired_tokens(db, now, BATCH);
    let removed = remove_in_batches(app, "removing expired tokens", BATCH, step).await;
    if removed > 0 {
        tracing::info!(removed, "tokens expired for a week or more removed");
    }
}

/// Removes the audit log's entries older than `days` (`store::audit::prune`).
async fn prune_audit(app: &Arc<App>, days: f64) {
    const BATCH: u32 = 10_000;
    let step = move |db: &rusqlite::Connection, now: f64| {
        crate::store::audit::prune(db, now - days * 86_400.0, now, days, BATCH)
    };
    let removed = remove_in_batches(app, "audit log: removing old entries", BATCH, step).await;
    if removed > 0 {
        tracing::info!(removed, audit_keep_days = days, "audit log: old entries removed");
    }
}

/// Says so when the server listens beyond this machine without TLS.
fn warn_if_plain(addr: std::net::SocketAddr, tls: bool) {
    if !tls && !addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {addr} without TLS: passwords, API tokens and node credentials cross the network readable. \
             Give --tls-cert FILE --tls-key FILE (or --tls-self-signed), or listen on 127.0.0.1 behind a TLS proxy"
        );
    }
}

/// How a running server reloads its configuration on SIGHUP: `load` reads it again (the file,
/// with the same flags over it), `set_log_level` changes what is logged.
pub struct Reloader {
    pub load: Box<dyn Fn() -> Result<Config, String> + Send + Sync>,
    pub set_log_level: Box<LogLevelSetter>,
}

/// Changes what a running process logs (`log_level`).
pub type LogLevelSetter = dyn Fn(&str) -> Result<(), String> + Send + Sync;

fn reload(app: &App, r: &Reloader) {
    let new = match (r.load)() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("SIGHUP: the configuration was not reloaded, nothing changed: {e}");
            return;
        }
    };
    match app.reload(new, &*r.set_log_level) {
        Err(e) => tracing::error!("SIGHUP: the configuration was not reloaded, nothing changed: {e}"),
        Ok((applied, restart)) => {
            if applied.is_empty() {
                tracing::info!("SIGHUP: configuration reloaded; nothing that a reload applies changed");
            } else {
                tracing::info!("SIGHUP: configuration reloaded; applied {}", applied.join(", "));
            }
            if !restart.is_empty() {
                tracing::warn!(
                    "SIGHUP: changed in the configuration but not applied until a restart: {}",
                    restart.join(", ")
                );
            }
        }
    }
}

/// Opens the store, binds and serves on a runtime of its own (the `libra server` command).
pub fn run(config: Config) -> Result<(), ServerError> {
    run_with(config, None)
}

/// `run`, reloading the configuration on SIGHUP with `reloader`.
pub fn run_with(config: Config, reloader: Option<Reloader>) -> Result<(), ServerError> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let addr = config.listen.clone();
        let tls = tls::server_config(&config)?;
        let app = Arc::new(App::open(config)?);
        if let Some(pw) = bootstrap_admin(&app)? {
            eprintln!("created the administrator account: user admin, password {pw}");
        }
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| ServerError::Listen { addr: addr.clone(), source: e })?;
        let local = listener.local_addr()?;
        warn_if_plain(local, tls.is_some());
        eprintln!("libra server listening on {}://{local}", if tls.is_some() { "https" } else { "http" });
        if app.config.tls_self_signed && app.config.tls_cert.is_none() {
            eprintln!(
                "clients trust its self-signed certificate with --ca {}",
                tls::self_signed_paths(&app.config).0.display()
            );
        }
        if let Some(r) = reloader {
            let app = app.clone();
            let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    // Reading the file and taking the state's lock: off the async workers.
                    tokio::task::block_in_place(|| reload(&app, &r));
                }
            });
        }
        serve(app, listener, tls, async {
            // Ctrl-C or SIGTERM: stop taking requests, finish those in flight. (Nothing is lost
            // by a harder stop either: every answer was committed before it was sent.)
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        })
        .await
    })
}

/// A server running on a thread of its own (benchmarks, embedding); stops when dropped.
pub struct Background {
    pub addr: std::net::SocketAddr,
    /// The running server's state (tests hold its writer to show what does not wait for it).
    pub app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a server on its own runtime and thread, listening on `config.listen` (port 0 picks a
/// free port; the chosen address is in the result).
pub fn start_background(config: Config) -> Result<Background, ServerError> {
    type Started = Result<(std::net::SocketAddr, Arc<App>), ServerError>;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Started>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("libra-server".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = addr_tx.send(Err(e.into()));
                return;
            }
        };
        rt.block_on(async move {
            let started = async {
                let tls = tls::server_config(&config)?;
                let app = Arc::new(App::open(config.clone())?);
                bootstrap_admin(&app)?;
                let listener = tokio::net::TcpListener::bind(&config.listen)
                    .await
                    .map_err(|e| ServerError::Listen { addr: config.listen.clone(), source: e })?;
                Ok::<_, ServerError>((app, listener, tls))
            };
            match started.await {
                Ok((app, listener, tls)) => {
                    // Counted from the first connection the caller may make.
                    connection_gate(&app);
                    let _ = addr_tx
                        .send(listener.local_addr().map_err(ServerError::Io).map(|a| (a, app.clone())));
                    if let Err(e) = serve(app, listener, tls, async {
                        let _ = stop_rx.await;
                    })
                    .await
                    {
                        tracing::error!("server: {e}");
                    }
                }
                Err(e) => {
                    let _ = addr_tx.send(Err(e));
                }
            }
        });
    })?;
    let (addr, app) = addr_rx
        .recv()
        .map_err(|_| ServerError::Invalid("the server thread ended before listening".into()))??;
    Ok(Background { addr, app, stop: Some(stop_tx), thread: Some(thread) })
}
