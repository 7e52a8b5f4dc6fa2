//! Libra's web portal: one HTML page, a style sheet and small plain-JavaScript files, all
//! embedded in the binary so that a server on a machine without internet serves the whole
//! portal. The pages hold no power of their own: every action is a call to the JSON API with
//! the user's bearer token, so the API's checks are the portal's checks.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// One embedded file: its name under `/assets/`, its media type and its bytes.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $mime:expr) => {
        Asset { name: $name, mime: $mime, body: include_bytes!(concat!("../assets/", $name)) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("api.js", JS),
    asset!("util.js", JS),
    asset!("app.js", JS),
    asset!("login.js", JS),
    asset!("submit.js", JS),
    asset!("jobs.js", JS),
    asset!("job.js", JS),
    asset!("queue.js", JS),
    asset!("account.js", JS),
    asset!("chart.js", JS),
    asset!("sweeps.js", JS),
    asset!("admin-nodes.js", JS),
    asset!("admin-jobs.js", JS),
    asset!("admin-usage.js", JS),
    asset!("admin-pricing.js", JS),
    asset!("admin-users.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
];

const INDEX: &str = include_str!("../assets/index.html");

/// Scripts only from this origin and no inline code: a job name or output that carries markup
/// cannot run as script even if a page forgot to escape it.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The portal's routes: `/` and `/assets/{file}`. They share no path with `/api`, so merging
/// this router beside the API's shadows nothing.
pub fn router() -> Router {
    Router::new().route("/", get(index)).route("/assets/{file}", get(asset))
}

fn with_headers(mime: &'static str, body: &'static [u8]) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    // The assets change with the binary; revalidating keeps an upgraded server's pages current.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

async fn index() -> Response {
    with_headers("text/html; charset=utf-8", INDEX.as_bytes())
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => with_headers(a.mime, a.body),
        None => (StatusCode::NOT_FOUND, format!("no portal asset named '{file}'")).into_response(),
    }
}

/// The names of the embedded assets (for tests and for a server that lists what it serves).
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_the_page_loads_is_embedded_and_every_asset_is_used() {
        for name in asset_names() {
            assert!(
                INDEX.contains(&format!("/assets/{name}")),
                "asset {name} is embedded but index.html does not load it"
            );
        }
        for part in INDEX.split("/assets/").skip(1) {
            let name: String = part.chars().take_while(|c| *c != '"').collect();
            assert!(
                asset_names().any(|a| a == name),
                "index.html loads /assets/{name}, which is not embedded"
            );
        }
    }

    #[tokio::test]
    async fn serves_the_page_and_assets_with_their_types_and_refuses_unknown_names() {
        let page = index().await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(page.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'"));
        let js = asset(Path("app.js".to_string())).await;
        assert_eq!(js.status(), StatusCode::OK);
        assert_eq!(js.headers()[header::CONTENT_TYPE], JS);
        let css = asset(Path("style.css".to_string())).await;
        assert!(css.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/css"));
        for bad in ["nope.js", "../Cargo.toml", "index.html", ""] {
            assert_eq!(asset(Path(bad.to_string())).await.status(), StatusCode::NOT_FOUND, "{bad}");
        }
    }

    #[test]
    fn pages_carry_no_inline_script_or_remote_resource() {
        assert!(!INDEX.contains("<script>"), "inline scripts are refused by the CSP");
        let lower = INDEX.to_ascii_lowercase();
        for (i, _) in lower.match_indices(" on") {
            let rest = &lower[i + 3..];
            let word: String = rest.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            assert!(!rest[word.len()..].starts_with('='), "inline handler on{word}= is refused by the CSP");
        }
        for a in ASSETS {
            // The SVG namespace is a name, not a fetch.
            let text = String::from_utf8_lossy(a.body).replace("http://www.w3.org/2000/svg", "");
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{} must not load anything from another host",
                a.name
            );
        }
    }
}
