//! Monitoring: `GET /metrics` in Prometheus' text format, `GET /healthz` (the process answers)
//! and `GET /readyz` (the store answers and at least one node is up).
//!
//! What happens between scrapes (admissions, their latency) is counted as it happens; what is a
//! state (jobs by state, credit on hold, nodes, sweeps) is read from the store and the cluster
//! view at each scrape, so a restart loses only the counters, as Prometheus expects.

use crate::app::{now, App};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use libra_api::{JobInfo, JobState};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

type Labels = Vec<(&'static str, String)>;

/// The counters kept between scrapes.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Decided submissions by outcome: accepted (a promise on nodes), queued (space-shared
    /// policies), rejected, error (refused before a decision: bad input, not logged in).
    admissions: Family<Labels, Counter>,
    /// Rejected submissions by reason: deadline, budget, resources, credit.
    rejections: Family<Labels, Counter>,
    /// From a submission's arrival to its durable answer (decision and group commit), seconds.
    latency: Histogram,
    /// Refused requests (401, 403, 429) by status, whether the audit log wrote them one by one
    /// or counted them (`audit::Repeats`): a flood shows here at once.
    refusals: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            admissions: Family::default(),
            rejections: Family::default(),
            // 0.5 ms to about 8 s.
            latency: Histogram::new(exponential_buckets(0.0005, 2.0, 15)),
            refusals: Family::default(),
        }
    }
}

/// A rejection's reason as a label: the field its message starts with (`deadline: ...`).
fn reason_label(reason: Option<&str>) -> String {
    let word = reason.and_then(|r| r.split(':').next()).unwrap_or("");
    match word {
        "deadline" | "budget" | "resources" | "credit" => word.to_string(),
        _ => "other".into(),
    }
}

impl Metrics {
    /// Counts one refused request.
    pub fn refusal(&self, status: u16) {
        self.refusals.get_or_create(&vec![("status", status.to_string())]).inc();
    }

    /// Counts one answered submission and how long it took.
    pub fn admission(&self, answer: &Result<JobInfo, crate::error::ApiError>, seconds: f64) {
        let outcome = match answer {
            Ok(j) if j.state == JobState::Rejected => {
                self.rejections.get_or_create(&vec![("reason", reason_label(j.reason.as_deref()))]).inc();
                "rejected"
            }
            Ok(j) if j.nodes.is_empty() && j.state == JobState::Pending => "queued",
            Ok(_) => "accepted",
            Err(_) => "error",
        };
        self.admissions.get_or_create(&vec![("outcome", outcome.to_string())]).inc();
        self.latency.observe(seconds);
    }
}

fn gauge_family() -> Family<Labels, Gauge<f64, AtomicU64>> {
    Family::default()
}

/// The whole exposition: the counters, and the states read now.
pub fn render(app: &App) -> Result<String, crate::error::ApiError> {
    let mut reg = Registry::default();
    let m = &app.metrics;
    reg.register("libra_admissions", "Submissions answered, by outcome", m.admissions.clone());
    reg.register("libra_rejections", "Submissions rejected, by reason", m.rejections.clone());
    reg.register("libra_refusals", "Requests refused (401, 403, 429), by status", m.refusals.clone());
    let store_full = Counter::<u64, AtomicU64>::default();
    store_full.inc_by(crate::error::store_full_refusals());
    reg.register(
        "libra_store_full_refusals",
        "Requests refused with 503 because the store's disk was full (nothing they asked was done)",
        store_full,
    );
    if let Some(gate) = app.connections.get() {
        let open = Gauge::<i64>::default();
        open.set(gate.open() as i64);
        reg.register("libra_connections_open", "Connections the API holds open now", open);
        let refused = Family::<Labels, Counter>::default();
        for why in [crate::connections::Refused::Address, crate::connections::Refused::Total] {
            refused.get_or_create(&vec![("reason", why.label().to_string())]).inc_by(gate.refused(why));
        }
        reg.register(
            "libra_connections_refused",
            "Connections closed as they were taken: their address held max_connections_per_address (address), or the server max_connections (total)",
            refused,
        );
    }
    reg.register(
        "libra_admission_latency_seconds",
        "From a submission's arrival to its durable answer",
        m.latency.clone(),
    );
    let jobs = gauge_family();
    let (revenue, held) = (Gauge::<i64>::default(), Gauge::<i64>::default());
    let node_up = gauge_family();
    let node_drained = gauge_family();
    let node_cpus = gauge_family();
    let node_load = gauge_family();
    let share_error = gauge_family();
    let last_seen = gauge_family();
    {
        let g = app.lock();
        let t = now();
        let mut counts = crate::store::jobs::count_by_state(&g.db)?;
        for s in JobState::ALL {
            let n = counts.remove(s.as_str()).unwrap_or(0);
            jobs.get_or_create(&vec![("state", s.as_str().to_lowercase())]).set(n as f64);
        }
        revenue.set(crate::ledger::charged_total(&g.db)?.0);
        held.set(crate::ledger::held_total(&g.db)?.0);
        for (name, rt) in &g.nodes {
            let n = g.cluster.node(rt.idx);
            let l = vec![("node", name.clone())];
            node_up.get_or_create(&l).set(if n.up { 1.0 } else { 0.0 });
            node_drained.get_or_create(&l).set(if n.accepting { 0.0 } else { 1.0 });
            node_cpus.get_or_create(&l).set(n.spec.cpus);
            node_load.get_or_create(&l).set(g.shown_load(rt.idx, t));
            last_seen.get_or_create(&l).set((t - rt.last_seen).max(0.0));
            // How far the shares the agent reported enforcing are from what the server's model
            // requires of each job now (the largest gap on the node).
            let err = rt
                .shares
                .iter()
                .filter_map(|s| g.cluster.required_share(s.job, t).map(|want| (s.share - want).abs()))
                .fold(0.0, f64::max);
            share_error.get_or_create(&l).set(err);
        }
    }
    reg.register("libra_jobs", "Jobs in the store, by state", jobs);
    reg.register("libra_revenue_cents", "Credit charged for jobs since the store began, cents", revenue);
    reg.register("libra_credit_held_cents", "Credit on hold for accepted jobs now, cents", held);
    reg.register("libra_node_up", "1 if the node's agent is reporting, 0 if it is down", node_up);
    reg.register("libra_node_drained", "1 if the node is drained (takes no new jobs)", node_drained);
    reg.register("libra_node_cpus", "The node's capacity, CPUs", node_cpus);
    reg.register("libra_node_load", "Sum of the shares the node's jobs need now, CPUs", node_load);
    reg.register(
        "libra_node_share_error",
        "Largest gap on the node between a job's enforced share and the share it needs now, CPUs",
        share_error,
    );
    reg.register("libra_node_last_seen_seconds", "Seconds since the node's agent last reported", last_seen);

    let sweeps = gauge_family();
    let sweep_jobs = gauge_family();
    let everyone = crate::auth::Caller {
        id: 0,
        name: "metrics".into(),
        admin: true,
        sweep: None,
        expires: f64::INFINITY,
    };
    if let Ok(list) = app.sweeps.list(&everyone, true, now()) {
        let mut by_state: std::collections::BTreeMap<String, f64> = Default::default();
        for s in list {
            *by_state.entry(s.state.clone()).or_default() += 1.0;
            let c = &s.jobs;
            for (state, n) in [
                ("total", c.total),
                ("pending", c.pending),
                ("running", c.running),
                ("done", c.done),
                ("failed", c.failed),
                ("cancelled", c.cancelled),
            ] {
                sweep_jobs
                    .get_or_create(&vec![("sweep", s.id.to_string()), ("state", state.into())])
                    .set(n as f64);
            }
        }
        for (state, n) in by_state {
            sweeps.get_or_create(&vec![("state", state)]).set(n);
        }
    }
    reg.register("libra_sweeps", "Hosted sweeps, by state", sweeps);
    reg.register("libra_sweep_jobs", "A hosted sweep's jobs, by state (total: all of them)", sweep_jobs);

    let mut out = String::new();
    encode(&mut out, &reg).map_err(|e| crate::error::ApiError::Internal(e.to_string()))?;
    Ok(out)
}

pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    let app2 = app.clone();
    match crate::app::blocking(move || render(&app2)).await {
        Ok(text) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// The process answers.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready for work: the store answers a query and at least one node is up (503 with the reason
/// otherwise).
pub async fn readyz(State(app): State<Arc<App>>) -> Response {
    let state = app
        .run(|g| {
            if let Err(e) = crate::store::answers(&g.db) {
                return Ok(Err(e.to_string()));
            }
            let up = g.cluster.up_count();
            Ok(Ok((up, g.cluster.nodes().filter(|(_, n)| n.up && n.accepting).count())))
        })
        .await;
    let (up, accepting) = match state {
        Ok(Ok(counts)) => counts,
        Ok(Err(e)) => {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: the store does not answer: {e}\n"))
                .into_response()
        }
        Err(e) => return e.into_response(),
    };
    if up == 0 {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: no node is up\n".to_string()).into_response();
    }
    (StatusCode::OK, format!("ready: store ok, {up} nodes up, {accepting} taking new jobs\n")).into_response()
}
