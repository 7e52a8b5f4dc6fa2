//! Headless Debian Chromium driven through chromedriver (WebDriver over plain HTTP on loopback).

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use libra_testkit::{exe, free_port};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What CI installs; the message a machine without them gets.
pub const APT_LINE: &str = "apt-get update && apt-get install -y chromium chromium-driver";

pub type R<T> = Result<T, String>;

/// Where a check fails, the test says what it was waiting for.
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($msg)+));
        }
    };
}

fn tool(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
}

pub struct Browser {
    pub client: Client,
    pub base: String,
    driver: Child,
    profile: PathBuf,
    shots: PathBuf,
}

impl Browser {
    /// Chromium from `LIBRA_CHROMIUM` (default /usr/bin/chromium), chromedriver from
    /// `LIBRA_CHROMEDRIVER` (default /usr/bin/chromedriver).
    /// Fails, naming the packages to install, when Chromium or chromedriver is missing.
    pub fn require() -> (PathBuf, PathBuf) {
        let chromium = tool("LIBRA_CHROMIUM", "/usr/bin/chromium");
        let driver_bin = tool("LIBRA_CHROMEDRIVER", "/usr/bin/chromedriver");
        for (bin, pkg) in [(&chromium, "chromium"), (&driver_bin, "chromium-driver")] {
            assert!(
                bin.exists(),
                "{} is missing: the portal's browser tests need Debian's `{pkg}` package; install with: {APT_LINE}",
                bin.display()
            );
        }
        (chromium, driver_bin)
    }

    pub async fn start(base: &str) -> Browser {
        let (chromium, driver_bin) = Browser::require();
        let port = free_port();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile =
            std::env::temp_dir().join(format!("libra-portal-chromium-{}-{port}", std::process::id()));
        let caps = serde_json::json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }
        });
        let caps = match caps {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let url = format!("http://127.0.0.1:{port}");
        let t0 = Instant::now();
        // chromedriver takes a moment to listen; retry the session until it does.
        let client = loop {
            match ClientBuilder::new(HttpConnector::new()).capabilities(caps.clone()).connect(&url).await {
                Ok(c) => break c,
                Err(e) => {
                    assert!(
                        t0.elapsed() < Duration::from_secs(30),
                        "no WebDriver session from chromedriver: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        let shots =
            exe().parent().and_then(Path::parent).map(|t| t.join("portal-screenshots")).unwrap_or_default();
        std::fs::create_dir_all(&shots).expect("create target/portal-screenshots");
        Browser { client, base: base.to_string(), driver, profile, shots }
    }

    pub async fn close(self) {
        let Browser { client, mut driver, profile, .. } = self;
        let _ = client.close().await;
        let _ = driver.kill();
        let _ = driver.wait();
        let _ = std::fs::remove_dir_all(profile);
    }

    pub async fn open(&self, hash: &str) -> R<()> {
        self.client.goto(&format!("{}/{hash}", self.base)).await.map_err(|e| format!("open {hash}: {e}"))
    }

    pub async fn text(&self, css: &str) -> Option<String> {
        let e = self.client.find(Locator::Css(css)).await.ok()?;
        e.text().await.ok()
    }

    /// Waits until the element's text satisfies `ok`, polling as the page does.
    pub async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> R<String> {
        let t0 = Instant::now();
        let mut seen = None;
        while t0.elapsed() < Duration::from_secs(60) {
            if let Some(t) = self.text(css).await {
                if ok(&t) {
                    return Ok(t);
                }
                seen = Some(t);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("timed out waiting for {what} in {css}; last text: {seen:?}"))
    }

    pub async fn wait_present(&self, css: &str) -> R<()> {
        self.wait_text(css, "the element", |_| true).await.map(|_| ())
    }

    pub async fn fill(&self, id: &str, value: &str) -> R<()> {
        let e = self.client.find(Locator::Id(id)).await.map_err(|e| format!("#{id}: {e}"))?;
        e.clear().await.map_err(|e| format!("clear #{id}: {e}"))?;
        e.send_keys(value).await.map_err(|e| format!("type into #{id}: {e}"))
    }

    /// Clicks the element once it is there. Tables are rebuilt when their data changes, so a
    /// found element may go stale before the click lands: find it again and retry.
    pub async fn click(&self, css: &str) -> R<()> {
        let t0 = Instant::now();
        loop {
            let err = match self.client.find(Locator::Css(css)).await {
                Ok(e) => match e.click().await {
                    Ok(()) => return Ok(()),
                    Err(e) => format!("click {css}: {e}"),
                },
                Err(e) => format!("{css}: {e}"),
            };
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(err);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Submits form `form` twice in a row, as a double click does (the second before the first
    /// is answered), and returns once both requests to a path holding `path` are answered:
    /// what the server made of them can then be counted.
    #[allow(dead_code)] // Each test binary builds this module; only portal_e2e double-clicks.
    pub async fn submit_twice(&self, form: &str, path: &str) -> R<()> {
        let script = r#"
            var form = arguments[0], path = arguments[1], done = arguments[arguments.length - 1];
            var fetch0 = window.fetch, answered = 0;
            window.fetch = function (url) {
                var p = fetch0.apply(this, arguments);
                if (String(url).indexOf(path) >= 0) {
                    p.then(null, function () {}).then(function () {
                        if (++answered === 2) { window.fetch = fetch0; done(true); }
                    });
                }
                return p;
            };
            var f = document.getElementById(form);
            f.requestSubmit();
            f.requestSubmit();
        "#;
        let args = vec![serde_json::json!(form), serde_json::json!(path)];
        let both = self
            .client
            .execute_async(script, args)
            .await
            .map_err(|e| format!("submit #{form} twice: {e}"))?;
        check!(both == serde_json::json!(true), "submit #{form} twice: {both}");
        Ok(())
    }

    pub async fn login(&self, user: &str, password: &str) -> R<()> {
        self.open("#login").await?;
        self.wait_present("#login-user").await?;
        self.fill("login-user", user).await?;
        self.fill("login-password", password).await?;
        self.click("#login-submit").await?;
        self.wait_text("#who", "the signed-in user", |t| t.contains(user)).await.map(|_| ())
    }

    pub async fn sign_out(&self) -> R<()> {
        self.click("#signout").await?;
        self.wait_text("#h-login", "the sign-in page", |t| t == "Sign in").await.map(|_| ())
    }

    /// Saves a PNG of the viewport as target/portal-screenshots/NAME.png.
    pub async fn shot(&self, name: &str) -> R<()> {
        let png = self.client.screenshot().await.map_err(|e| format!("screenshot {name}: {e}"))?;
        check!(png.starts_with(b"\x89PNG"), "screenshot {name} is not a PNG");
        std::fs::write(self.shots.join(format!("{name}.png")), png).map_err(|e| format!("save {name}: {e}"))
    }
}
