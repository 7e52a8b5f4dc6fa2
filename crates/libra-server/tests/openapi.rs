//! The OpenAPI document of a real server on loopback agrees with its router: every route the
//! router serves is documented with its method (and nothing else is), and the schemas are the
//! wire types' own, with real properties and money as integer cents.

mod common;

use libra_api::Client;
use libra_server::start_background;
use serde_json::Value;
use std::collections::BTreeSet;

/// The router's definition: the test walks the routes as written there, so a route added
/// without a line in the document's table fails here.
const ROUTER: &str = include_str!("../src/routes/mod.rs");

/// Operational endpoints for probes and Prometheus, outside the JSON API.
const NOT_API: &[&str] = &["/metrics", "/healthz", "/readyz"];

/// (method, path) of every `.route("path", get(..).post(..))` in the router.
fn router_routes() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut rest = ROUTER;
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        // The route's arguments run to the parenthesis that closes `.route(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map(|(j, _)| j)
            .expect("a .route( call closes");
        let args = &rest[..end];
        let path = args.split('"').nth(1).expect("a route's path is a string literal").to_string();
        let handlers = &args[args.find(',').expect("a route has a handler")..];
        let mut methods = 0;
        for m in ["get", "post", "put", "delete", "patch"] {
            let bare = handlers.trim_start_matches([',', ' ', '\n']);
            if bare.starts_with(&format!("{m}(")) || handlers.contains(&format!(".{m}(")) {
                out.insert((m.to_string(), path.clone()));
                methods += 1;
            }
        }
        assert!(methods > 0, "no method found for {path} in {args}");
        rest = &rest[end..];
    }
    out
}

/// The schema a `$ref` names (or the schema itself).
fn resolve<'a>(doc: &'a Value, s: &'a Value) -> &'a Value {
    match s["$ref"].as_str() {
        Some(r) => {
            let name = r.strip_prefix("#/components/schemas/").expect("refs point at components");
            let t = &doc["components"]["schemas"][name];
            assert!(t.is_object(), "{r} is not in the document's schemas");
            t
        }
        None => s,
    }
}

/// Whether a property's schema allows an integer (or only an integer and null).
fn is_integer(doc: &Value, s: &Value) -> bool {
    let s = resolve(doc, s);
    let ty = &s["type"];
    let integer = ty == "integer" || ty.as_array().is_some_and(|t| t.iter().any(|x| x == "integer"));
    let nothing_else = ty.as_array().is_none_or(|t| t.iter().all(|x| x == "integer" || x == "null"));
    if integer && nothing_else {
        return true;
    }
    // Option<Money>: one of a reference to an integer and null.
    s["oneOf"].as_array().is_some_and(|alts| {
        alts.iter().any(|a| a["type"] != "null" && is_integer(doc, a))
            && alts.iter().all(|a| a["type"] == "null" || is_integer(doc, a))
    })
}

#[test]
fn the_document_has_every_route_and_the_wire_types_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_background(common::test_config(dir.path())).unwrap();
    let anon = Client::new(&format!("http://{}", server.addr), None);
    let doc: Value = anon.get("/api/openapi.json").unwrap();

    let routes = router_routes();
    assert!(routes.len() > 30, "the router walk found too few routes: {routes:?}");
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(p, ops)| ops.as_object().unwrap().keys().map(move |m| (m.clone(), p.clone())))
        .collect();
    for (m, p) in &routes {
        if NOT_API.contains(&p.as_str()) {
            continue;
        }
        assert!(
            documented.contains(&(m.clone(), p.clone())),
            "{} {p} is served but not in the OpenAPI document",
            m.to_uppercase()
        );
    }
    for (m, p) in &documented {
        assert!(
            routes.contains(&(m.clone(), p.clone())),
            "{} {p} is documented but not served",
            m.to_uppercase()
        );
    }

    // Every request and response schema resolves, and each wire type has real properties.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (m, op) in ops.as_object().unwrap() {
            let mut uses = vec![&op["responses"]["200"]["content"]];
            if op["requestBody"].is_object() {
                uses.push(&op["requestBody"]["content"]);
            }
            for content in uses {
                let (kind, media) = content.as_object().unwrap().iter().next().expect("a media type");
                if kind == "text/plain" || path == "/api/openapi.json" {
                    continue;
                }
                let s = &media["schema"];
                let s = if s["type"] == "array" { &s["items"] } else { s };
                let t = resolve(&doc, s);
                assert!(
                    t["properties"].as_object().is_some_and(|p| !p.is_empty())
                        || t["enum"].is_array()
                        || t["format"] == "binary",
                    "{m} {path}: schema {s} has no properties: {t}"
                );
            }
        }
    }
    let props = |name: &str| {
        let p =
            schemas[name]["properties"].as_object().unwrap_or_else(|| panic!("{name}: {}", schemas[name]));
        p.clone()
    };
    let submit = props("SubmitRequest");
    for f in ["spec", "command", "workdir", "env", "time_limit"] {
        assert!(submit.contains_key(f), "SubmitRequest lacks {f}: {submit:?}");
    }
    // The job's spec is described too, down to its deadline and budget.
    let spec = resolve(&doc, &submit["spec"]);
    assert!(spec["properties"]["qos"].is_object(), "{spec}");
    let qos = resolve(&doc, &spec["properties"]["qos"]);
    assert!(qos["properties"].as_object().is_some_and(|p| p.len() >= 2), "{qos}");
    assert_eq!(submit["command"]["type"], "array", "{submit:?}");

    // Money is integer cents, under the *_cents names the server writes.
    let job = props("JobInfo");
    for f in ["budget_cents", "cost_cents", "charged_cents"] {
        assert!(job.contains_key(f), "JobInfo lacks {f}: {job:?}");
        assert!(is_integer(&doc, &job[f]), "JobInfo.{f} is not an integer: {}", job[f]);
    }
    assert!(!job.contains_key("budget"), "JobInfo's money is under the _cents names: {job:?}");
    assert!(is_integer(&doc, &props("QuoteResponse")["cost_cents"]), "{}", schemas["QuoteResponse"]);
    for (name, s) in schemas {
        for (f, p) in s["properties"].as_object().into_iter().flatten() {
            if f.ends_with("_cents") {
                assert!(is_integer(&doc, p), "{name}.{f} is money but not an integer: {p}");
            }
        }
    }
    // The states a job can be in are listed, as the server writes them.
    let state = resolve(&doc, &job["state"]);
    assert!(state.to_string().contains("PENDING") && state.to_string().contains("DEADLINE"), "{state}");
}
