//! The OpenAPI 3.1 document served at `/api/openapi.json`: one table of the routes (kept beside
//! the router; a test checks the two agree), whose request and response schemas are derived from
//! the wire types themselves (utoipa's `ToSchema`), so a field added to `JobInfo` is in the
//! document without anyone remembering to write it there.

use axum::Json;
use libra_api::*;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

/// Puts a type's schema (and those of the types it names) in `schemas`; gives its use.
type SchemaFn = fn(&mut Map<String, Value>) -> Value;

/// (method, path, summary, request body type, response type, who may call)
type Route = (&'static str, &'static str, &'static str, Option<SchemaFn>, SchemaFn, &'static str);

fn one<T: ToSchema>(schemas: &mut Map<String, Value>) -> Value {
    let mut all = vec![(T::name().into_owned(), T::schema())];
    T::schemas(&mut all);
    for (name, schema) in all {
        schemas.insert(name, serde_json::to_value(schema).expect("a schema is JSON"));
    }
    json!({"$ref": format!("#/components/schemas/{}", T::name())})
}

fn list<T: ToSchema>(schemas: &mut Map<String, Value>) -> Value {
    json!({"type": "array", "items": one::<T>(schemas)})
}

/// Logout answers with a small object of its own rather than a wire type.
fn logout_response(_: &mut Map<String, Value>) -> Value {
    json!({"type": "object", "required": ["user", "logged_out"],
           "properties": {"user": {"type": "string"}, "logged_out": {"type": "boolean"}}})
}

fn openapi_document(_: &mut Map<String, Value>) -> Value {
    json!({"type": "object", "description": "An OpenAPI 3.1 document"})
}

fn plain_text(_: &mut Map<String, Value>) -> Value {
    json!({"type": "string"})
}

/// A backup is the SQLite file itself.
fn backup_file(_: &mut Map<String, Value>) -> Value {
    json!({"type": "string", "format": "binary"})
}

const ROUTES: &[Route] = &[
    ("get", "/api/openapi.json", "This document", None, openapi_document, "anyone"),
    ("get", "/api/health", "Whether the server answers: the text ok", None, plain_text, "anyone"),
    (
        "post",
        "/api/login",
        "Exchange a user name and password for an API token",
        Some(one::<LoginRequest>),
        one::<LoginResponse>,
        "anyone",
    ),
    ("post", "/api/logout", "Revoke the API token the request carries", None, logout_response, "user"),
    (
        "post",
        "/api/passwd",
        "Change the caller's password (the current one required); revokes the caller's other tokens",
        Some(one::<PasswdRequest>),
        one::<PasswdResponse>,
        "user",
    ),
    (
        "post",
        "/api/jobs",
        "Submit a job: accepted (hold placed) or rejected with a reason and a suggestion; a retry with the same Idempotency-Key header gets the job the first request made",
        Some(one::<SubmitRequest>),
        one::<JobInfo>,
        "user",
    ),
    (
        "get",
        "/api/jobs",
        "The caller's jobs, newest first (?all=true: everyone's, administrators only; ?limit=N&after=JOB: a page; ?ids=1,2,3: those jobs only, at most 1000, one read per 1000 jobs)",
        None,
        list::<JobInfo>,
        "user",
    ),
    (
        "post",
        "/api/quote",
        "What a job would cost now, and the price per CPU-second per node, without submitting",
        Some(one::<QuoteRequest>),
        one::<QuoteResponse>,
        "user",
    ),
    (
        "post",
        "/api/arrays",
        "Submit a job array (`array`: 0-99, 0-99:2, 1,3,5-7): every task admitted, or none kept with the tasks refused and a suggestion for them all",
        Some(one::<ArrayRequest>),
        one::<ArrayResponse>,
        "user",
    ),
    (
        "get",
        "/api/arrays/{id}",
        "Every task of an array, in task order (own arrays only unless administrator)",
        None,
        list::<JobInfo>,
        "user",
    ),
    (
        "post",
        "/api/arrays/{id}/cancel",
        "Cancel every active task of an array, each settled as a cancelled job",
        None,
        list::<JobInfo>,
        "user",
    ),
    ("get", "/api/jobs/{id}", "One job (own jobs only unless administrator)", None, one::<JobInfo>, "user"),
    (
        "post",
        "/api/jobs/{id}/cancel",
        "Cancel a job (own jobs only unless administrator)",
        None,
        one::<JobInfo>,
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/update",
        "Change a job's deadline and/or budget: re-decided now by the admission policy; accepted (new price, hold adjusted) or refused with a reason and a suggestion, the old promise kept",
        Some(one::<UpdateRequest>),
        one::<ChangeAnswer>,
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/hold",
        "Hold a job that has not started: its promise and its hold are given up until it is released",
        None,
        one::<JobInfo>,
        "user",
    ),
    (
        "post",
        "/api/jobs/{id}/release",
        "Release a held job: admitted again as a submission would be, or refused (it stays held) with a suggestion",
        None,
        one::<ChangeAnswer>,
        "user",
    ),
    (
        "get",
        "/api/queue",
        "Every unfinished job, soonest deadline first (?user ?state ?node); other users' jobs anonymised unless administrator",
        None,
        list::<QueueEntry>,
        "user",
    ),
    (
        "get",
        "/api/history",
        "The caller's jobs filtered like sacct (?start ?end Unix seconds, ?state, ?user: administrators, `all` for everyone's, ?limit)",
        None,
        list::<JobInfo>,
        "user",
    ),
    ("get", "/api/jobs/{id}/output", "The job's captured stdout and stderr", None, one::<JobOutput>, "user"),
    ("get", "/api/balance", "The caller's credit: available, held, charged", None, one::<Balance>, "user"),
    ("get", "/api/ledger", "The caller's ledger entries, newest first", None, list::<LedgerEntry>, "user"),
    (
        "get",
        "/api/accounts",
        "The caller's accounts (personal first, then shared ones): credit, held, available, and the caller's limit and use",
        None,
        list::<MyAccount>,
        "user",
    ),
    (
        "get",
        "/api/accounts/{name}",
        "One account: one of the caller's (any for an administrator); 403 naming the caller's accounts otherwise",
        None,
        one::<MyAccount>,
        "user",
    ),
    (
        "get",
        "/api/accounts/{name}/ledger",
        "An account's ledger entries, newest first (one of the caller's; any for an administrator)",
        None,
        list::<AccountEntry>,
        "user",
    ),
    (
        "post",
        "/api/sweeps",
        "Host a parameter sweep: plan and resources as text, deadline, budget, what to optimise (local resources: administrators only); a retry with the same Idempotency-Key header gets the sweep the first request made",
        Some(one::<SweepCreate>),
        one::<SweepInfo>,
        "user",
    ),
    (
        "get",
        "/api/sweeps",
        "The caller's hosted sweeps (?all=true: everyone's, administrators only)",
        None,
        list::<SweepInfo>,
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}",
        "One sweep: progress, jobs per resource, spent and held against the budget, projected finish (owner or administrator)",
        None,
        one::<SweepInfo>,
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}/usage",
        "Jobs in execution per resource over time (a step function)",
        None,
        one::<SweepUsage>,
        "user",
    ),
    (
        "get",
        "/api/sweeps/{id}/results",
        "Each job in job order, a page at a time: parameters, state, resource, attempts, cost, output directory (?limit=N, default 1000, at most 10000; ?after=JOB: from the job after that job number)",
        None,
        list::<SweepJob>,
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/deadline",
        "Move the deadline (a stalled sweep runs again)",
        Some(one::<SweepDeadline>),
        one::<SweepInfo>,
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/budget",
        "Change the budget (a stalled sweep runs again)",
        Some(one::<SweepBudget>),
        one::<SweepInfo>,
        "user",
    ),
    (
        "post",
        "/api/sweeps/{id}/{action}",
        "pause, resume, cancel, or rerun the failed and cancelled jobs",
        None,
        one::<SweepInfo>,
        "user",
    ),
    (
        "get",
        "/api/admin/nodes",
        "Nodes: state, load, shares, enforcement mechanism",
        None,
        list::<NodeInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/nodes/{name}/forget",
        "Forget a node's credential: it joins again with the join token; its jobs are lost",
        None,
        one::<NodeForgotten>,
        "admin",
    ),
    (
        "post",
        "/api/admin/nodes/{name}/{action}",
        "Drain a node (it takes no new jobs; those it runs finish; ?reason=TEXT says why, at most 1000 bytes) or undrain it: action drain or undrain",
        None,
        one::<NodeInfo>,
        "admin",
    ),
    (
        "get",
        "/api/admin/usage",
        "Jobs, CPU hours and what was charged per day, user and account (?account=&user=&since=&until=, Unix seconds)",
        None,
        list::<UsageRow>,
        "admin",
    ),
    ("get", "/api/admin/accounts", "Every shared account: credit, allocations, members", None, list::<AccountInfo>, "admin"),
    (
        "post",
        "/api/admin/accounts",
        "Create a shared account (its name may not be a user's)",
        Some(one::<AccountCreate>),
        one::<AccountInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/transfer",
        "Move lasting credit between two accounts (personal or shared), in one transaction; a retry with the same Idempotency-Key header is answered with the accounts as they are, not made again",
        Some(one::<AccountTransfer>),
        one::<TransferResponse>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/{name}/users",
        "Add a user to an account with an optional limit (again: change the limit), optionally as their default",
        Some(one::<AccountUserAdd>),
        one::<AccountInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/{name}/remove-user",
        "Remove a user from an account (their accepted jobs settle against it)",
        Some(one::<AccountUserRemove>),
        one::<AccountInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/{name}/default",
        "Make the account a user's default (the user's own name: their personal account)",
        Some(one::<AccountDefault>),
        one::<AccountInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/{name}/deposit",
        "Deposit lasting credit (negative: withdraw, never below zero available); a retry with the same Idempotency-Key header is answered with the accounts as they are, not made again",
        Some(one::<AccountDeposit>),
        one::<AccountInfo>,
        "admin",
    ),
    (
        "post",
        "/api/admin/accounts/{name}/allocations",
        "Allocate credit that can be held only between start and end (Unix seconds); a retry with the same Idempotency-Key header is answered with the accounts as they are, not made again",
        Some(one::<AccountAllocate>),
        one::<AccountInfo>,
        "admin",
    ),
    ("get", "/api/admin/pricing", "Pricing parameters and per-node prices", None, one::<PricingInfo>, "admin"),
    (
        "post",
        "/api/admin/pricing",
        "Change alpha, beta, and PBase per node",
        Some(one::<SetPricing>),
        one::<PricingInfo>,
        "admin",
    ),
    ("get", "/api/admin/policy", "The admission policy in force", None, one::<PolicyInfo>, "admin"),
    ("post", "/api/admin/policy", "Change the admission policy", Some(one::<SetPolicy>), one::<PolicyInfo>, "admin"),
    ("post", "/api/admin/jobs/{id}/{action}", "Suspend, resume or cancel any job", None, one::<JobInfo>, "admin"),
    (
        "get",
        "/api/admin/users",
        "Users, their state and credit, by name (?limit=N&after=NAME)",
        None,
        list::<UserInfo>,
        "admin",
    ),
    ("post", "/api/admin/users", "Add a user", Some(one::<UserAdd>), one::<UserInfo>, "admin"),
    (
        "post",
        "/api/admin/users/{name}/{action}",
        "disable, enable or remove a user (disable and remove revoke their tokens and cancel their jobs, holds released)",
        None,
        one::<UserActionResponse>,
        "admin",
    ),
    (
        "get",
        "/api/admin/audit",
        "The append-only audit log, newest first: administrator actions and refused requests (?limit=N&after=ID)",
        None,
        list::<AuditEntry>,
        "admin",
    ),
    ("post", "/api/admin/credit", "Deposit (or withdraw) credit; a retry with the same Idempotency-Key header is answered with the balance, not credited again", Some(one::<CreditRequest>), one::<Balance>, "admin"),
    (
        "post",
        "/api/admin/backup",
        "A consistent copy of the live store (the SQLite file, application/vnd.sqlite3), carrying the hosted sweeps' broker database in its table libra_backup_files; what it holds is in the x-libra-backup header",
        None,
        backup_file,
        "admin",
    ),
    (
        "post",
        "/api/node/register",
        "A node agent joins: capacity and enforcement mechanism",
        Some(one::<RegisterRequest>),
        one::<RegisterResponse>,
        "node (join token for a new node, else its credential)",
    ),
    (
        "post",
        "/api/node/sync",
        "A node agent's report (running, exited) answered with commands; long poll",
        Some(one::<SyncRequest>),
        one::<SyncResponse>,
        "node (its credential)",
    ),
    (
        "post",
        "/api/slurm/jobcomp",
        "Slurm's completion record of a job Libra handed to Slurm (sent by the jobcomp script `libra slurm jobcomp-lua` makes)",
        Some(one::<SlurmJobComp>),
        one::<SlurmJobCompAck>,
        "Slurm (the notifier's secret)",
    ),
];

pub fn build() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let error = one::<ErrorBody>(&mut schemas);
    for (method, path, summary, body, resp, who) in ROUTES {
        let resp = resp(&mut schemas);
        // The responses that are not JSON: the store's file and the health check's text.
        let media = match (resp["type"].as_str(), resp["format"].as_str()) {
            (_, Some("binary")) => "application/vnd.sqlite3",
            (Some("string"), _) => "text/plain",
            _ => "application/json",
        };
        let mut op = json!({
            "summary": summary,
            "description": format!("Caller: {who}. Errors: 400 bad input (names the field), 401 not logged in (or the token expired or was revoked), 403 not allowed, 404, 409, 413 too large (names the limit), 429 too many (Retry-After), 503 the server's store is out of disk space (nothing was done; Retry-After)."),
            "responses": {
                "200": {"description": "OK", "content": {media: {"schema": resp}}},
                "default": {"description": "Error", "content": {"application/json": {"schema": error}}}
            }
        });
        if let Some(b) = body {
            op["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": b(&mut schemas)}}});
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
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Libra cluster API", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Economy-driven admission, pricing and accounting. Money is integer cents, in fields whose names end in _cents (budget_cents, available_cents; the names without the suffix are still read); times are Unix seconds; durations are seconds."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    })
}

pub async fn document() -> Json<Value> {
    Json(build())
}
