//! The OpenAPI 3.0 document served at `/api/openapi.json`, built from one table of the routes
//! (kept beside the router so the two are changed together).

use axum::Json;
use serde_json::{json, Map, Value};

/// (method, path, summary, request body type, response type, who may call)
type Route = (&'static str, &'static str, &'static str, Option<&'static str>, &'static str, &'static str);

const ROUTES: &[Route] = &[
    (
        "post",
        "/api/login",
        "Exchange a user name and password for an API token",
        Some("LoginRequest"),
        "LoginResponse",
        "anyone",
    ),
    ("post", "/api/logout", "Revoke the API token the request carries", None, "LogoutResponse", "user"),
    (
        "post",
        "/api/passwd",
        "Change the caller's password (the current one required); revokes the caller's other tokens",
        Some("PasswdRequest"),
        "PasswdResponse",
        "user",
    ),
    (
        "post",
        "/api/jobs",
        "Submit a job: accepted (hold placed) or rejected with a reason and a suggestion",
        Some("SubmitRequest"),
        "JobInfo",
        "user",
    ),
    (
        "get",
        "/api/jobs",
        "The caller's jobs, newest first (?all=true: everyone's, administrators only; ?limit=N&after=JOB: a page)",
        None,
        "JobInfo[]",
        "user",
    ),
    (
        "post",
        "/api/quote",
        "What a job would cost now, and the price per CPU-second per node, without submitting",
        Some("QuoteRequest"),
        "QuoteResponse",
        "user",
    ),
    (
        "post",
        "/api/arrays",
        "Submit a job array (`array`: 0-99, 0-99:2, 1,3,5-7): every task admitted, or none kept with the tasks refused and a suggestion for them all",
        Some("ArrayRequest"),
        "ArrayResponse",
        "user",
    ),
    ("get", "/api/arrays/{id}", "Every task of an array, in task order (own arrays only unless administrator)", None, "JobInfo[]", "user"),
    (
        "post",
        "/api/arrays/{id}/cancel",
        "Cancel every active task of an array, each settled as a cancelled job",
        None,
        "JobInfo[]",
        "user",
    ),
    ("get", "/api/jobs/{id}", "One job (own jobs only unless administrator)", None, "JobInfo", "user"),
    (
        "post",
        "/api/jobs/{id}/cancel",
        "Cancel a job (own jobs only unless administrator)",
        None,
        "JobInfo",
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/update",
        "Change a job's deadline and/or budget: re-decided now by the admission policy; accepted (new price, hold adjusted) or refused with a reason and a suggestion, the old promise kept",
        Some("UpdateRequest"),
        "ChangeAnswer",
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/hold",
        "Hold a job that has not started: its promise and its hold are given up until it is released",
        None,
        "JobInfo",
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/release",
        "Release a held job: admitted again as a submission would be, or refused (it stays held) with a suggestion",
        None,
        "ChangeAnswer",
        "user",
    ),
    (
        "get",
        "/api/queue",
        "Every unfinished job, soonest deadline first (?user ?state ?node); other users' jobs anonymised unless administrator",
        None,
        "QueueEntry[]",
        "user",
    ),
    (
        "get",
        "/api/history",
        "The caller's jobs filtered like sacct (?start ?end Unix seconds, ?state, ?user: administrators, `all` for everyone's, ?limit)",
        None,
        "JobInfo[]",
        "user",
    ),
    ("get", "/api/jobs/{id}/output", "The job's captured stdout and stderr", None, "JobOutput", "user"),
    ("get", "/api/balance", "The caller's credit: available, held, charged", None, "Balance", "user"),
    ("get", "/api/ledger", "The caller's ledger entries, newest first", None, "LedgerEntry[]", "user"),
    (
        "post",
        "/api/sweeps",
        "Host a parameter sweep: plan and resources as text, deadline, budget, what to optimise (local resources: administrators only)",
        Some("SweepCreate"),
        "SweepInfo",
        "user",
    ),
    (
        "get",
        "/api/sweeps",
        "The caller's hosted sweeps (?all=true: everyone's, administrators only)",
        None,
        "SweepInfo[]",
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}",
        "One sweep: progress, jobs per resource, spent and held against the budget, projected finish (owner or administrator)",
        None,
        "SweepInfo",
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}/usage",
        "Jobs in execution per resource over time (a step function)",
        None,
        "SweepUsage",
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}/results",
        "Each job: parameters, state, resource, attempts, cost, output directory",
        None,
        "SweepJob[]",
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/deadline",
        "Move the deadline (a stalled sweep runs again)",
        Some("SweepDeadline"),
        "SweepInfo",
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/budget",
        "Change the budget (a stalled sweep runs again)",
        Some("SweepBudget"),
        "SweepInfo",
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/{action}",
        "pause, resume, cancel, or rerun the failed and cancelled jobs",
        None,
        "SweepInfo",
        "user",
    ),
    (
        "get",
        "/api/admin/nodes",
        "Nodes: state, load, shares, enforcement mechanism",
        None,
        "NodeInfo[]",
        "admin",
    ),
    (
        "post",
        "/api/admin/nodes/{name}/forget",
        "Forget a node's credential: it joins again with the join token; its jobs are lost",
        None,
        "NodeForgotten",
        "admin",
    ),
    (
        "post",
        "/api/admin/nodes/{name}/{action}",
        "Drain a node (it takes no new jobs; those it runs finish) or undrain it: action drain or undrain",
        None,
        "NodeInfo",
        "admin",
    ),
    (
        "get",
        "/api/admin/usage",
        "Jobs, CPU hours and revenue per user and per day",
        None,
        "UsageRow[]",
        "admin",
    ),
    ("get", "/api/admin/pricing", "Pricing parameters and per-node prices", None, "PricingInfo", "admin"),
    (
        "post",
        "/api/admin/pricing",
        "Change alpha, beta, and PBase per node",
        Some("SetPricing"),
        "PricingInfo",
        "admin",
    ),
    ("get", "/api/admin/policy", "The admission policy in force", None, "PolicyInfo", "admin"),
    ("post", "/api/admin/policy", "Change the admission policy", Some("SetPolicy"), "PolicyInfo", "admin"),
    ("post", "/api/admin/jobs/{id}/{action}", "Suspend, resume or cancel any job", None, "JobInfo", "admin"),
    (
        "get",
        "/api/admin/users",
        "Users, their state and credit, by name (?limit=N&after=NAME)",
        None,
        "UserInfo[]",
        "admin",
    ),
    ("post", "/api/admin/users", "Add a user", Some("UserAdd"), "UserInfo", "admin"),
    (
        "post",
        "/api/admin/users/{name}/{action}",
        "disable, enable or remove a user (disable and remove revoke their tokens and cancel their jobs, holds released)",
        None,
        "UserActionResponse",
        "admin",
    ),
    (
        "get",
        "/api/admin/audit",
        "The append-only audit log, newest first: administrator actions and refused requests (?limit=N&after=ID)",
        None,
        "AuditEntry[]",
        "admin",
    ),
    ("post", "/api/admin/credit", "Deposit (or withdraw) credit", Some("CreditRequest"), "Balance", "admin"),
    (
        "post",
        "/api/admin/backup",
        "A consistent copy of the live store (the SQLite file, application/vnd.sqlite3); what it holds is in the x-libra-backup header",
        None,
        "BackupFile",
        "admin",
    ),
    (
        "post",
        "/api/node/register",
        "A node agent joins: capacity and enforcement mechanism",
        Some("RegisterRequest"),
        "RegisterResponse",
        "node (join token for a new node, else its credential)",
    ),
    (
        "post",
        "/api/node/sync",
        "A node agent's report (running, exited) answered with commands; long poll",
        Some("SyncRequest"),
        "SyncResponse",
        "node (its credential)",
    ),
];

fn schema_ref(t: &str) -> Value {
    match t.strip_suffix("[]") {
        Some(inner) => json!({"type": "array", "items": {"$ref": format!("#/components/schemas/{inner}")}}),
        None => json!({"$ref": format!("#/components/schemas/{t}")}),
    }
}

pub fn build() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for (method, path, summary, body, resp, who) in ROUTES {
        let mut op = json!({
            "summary": summary,
            "description": format!("Caller: {who}. Errors: 400 bad input (names the field), 401 not logged in (or the token expired or was revoked), 403 not allowed, 404, 409, 413 too large (names the limit), 429 too many (Retry-After)."),
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": schema_ref(resp)}}},
                "default": {"description": "Error", "content": {"application/json": {"schema": schema_ref("ErrorBody")}}}
            }
        });
        if let Some(b) = body {
            op["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": schema_ref(b)}}});
            schemas.insert(b.to_string(), json!({"type": "object"}));
        }
        let params: Vec<Value> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        if !params.is_empty() {
            op["parameters"] = Value::Array(params);
        }
        if *who != "anyone" {
            op["security"] = json!([{"bearer": []}]);
        }
        schemas.insert(resp.trim_end_matches("[]").to_string(), json!({"type": "object"}));
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = op;
    }
    schemas.insert(
        "ErrorBody".into(),
        json!({"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}),
    );
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Libra cluster API", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Economy-driven admission, pricing and accounting. Money is integer cents, in fields whose names end in _cents (budget_cents, available_cents; the names without the suffix are still read); times are Unix seconds; durations are seconds."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    })
}

pub async fn document() -> Json<Value> {
    Json(build())
}
