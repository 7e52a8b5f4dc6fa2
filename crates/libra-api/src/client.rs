//! A blocking JSON client over HTTPS (rustls), or plain HTTP on loopback.

use crate::array::*;
use crate::sweep::*;
use crate::types::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status and a message.
    #[error("{message} (HTTP {status})")]
    Status { status: u16, message: String },
    /// No answer: the server is down or unreachable. The transport error is kept whole, and
    /// written without its own copy of the address (`transport_text`).
    #[error("cannot reach the Libra server at {url}: {}", transport_text(.cause))]
    Transport { url: String, cause: Box<ureq::Transport> },
    #[error("the server's answer could not be read: {0}")]
    Body(#[from] std::io::Error),
    /// The client was set up wrongly (the server address, the CA file): nothing was sent.
    #[error("{0}")]
    Config(String),
}

/// What went wrong on the way to the server, without the request's address (the message names
/// the server already): "Connection Failed: Connect error: Connection refused (os error 111)".
fn transport_text(t: &ureq::Transport) -> String {
    let mut text = t.kind().to_string();
    if let Some(m) = t.message() {
        text.push_str(": ");
        text.push_str(m);
    }
    if let Some(cause) = std::error::Error::source(t) {
        text.push_str(": ");
        text.push_str(&cause.to_string());
    }
    text
}

/// Whether a server address may be used: https anywhere; plain http only to a loopback address
/// (the token and everything else would cross the network readable) unless `insecure_http`.
/// Decided from the address alone, before any connection.
pub fn check_server_url(base: &str, insecure_http: bool) -> Result<(), ClientError> {
    let url = url::Url::parse(base).map_err(|e| {
        ClientError::Config(format!(
            "server: '{base}' is not a URL ({e}): give https://HOST:PORT (or http://127.0.0.1:PORT on this machine)"
        ))
    })?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = match url.host() {
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                Some(url::Host::Ipv4(a)) => a.is_loopback(),
                Some(url::Host::Ipv6(a)) => a.is_loopback(),
                None => false,
            };
            if loopback || insecure_http {
                Ok(())
            } else {
                Err(ClientError::Config(format!(
                    "server: '{base}' is plain http to another machine: passwords and tokens would cross the network readable. \
                     Use https:// (the server's --tls-cert/--tls-key or --tls-self-signed, and --ca FILE here to trust a private CA), \
                     or give --insecure-http if the network itself is trusted"
                )))
            }
        }
        other => Err(ClientError::Config(format!(
            "server: the scheme '{other}' in '{base}' is not accepted: give https:// or http://"
        ))),
    }
}

/// A TLS configuration that trusts the public roots and the certificates in `ca` (a PEM file:
/// a private CA, or a server's self-signed certificate).
fn tls_config(ca: &std::path::Path) -> Result<std::sync::Arc<rustls::ClientConfig>, ClientError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let bad = |msg: String| ClientError::Config(format!("ca: {}: {msg}", ca.display()));
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut added = 0;
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(format!("not a usable certificate: {e}")))?;
        added += 1;
    }
    if added == 0 {
        return Err(bad("no PEM certificate in it (give the server's CA or self-signed certificate)".into()));
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(std::sync::Arc::new(config))
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A fresh idempotency key: 128 random bits from the kernel, in hex (the time and process id if
/// the kernel's random source cannot be read).
pub fn new_idempotency_key() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = (t ^ (u128::from(std::process::id()) << 96)).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A client for one server, with an optional bearer token (a user's API token, a node's
/// credential or, to join, the cluster's join token).
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Client {
    /// Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

fn builder() -> ureq::AgentBuilder {
    ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(5)).timeout(Duration::from_secs(120))
}

impl Client {
    /// A client trusting the public roots, with no check of the address (tests, and callers
    /// that checked it already).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Client { base: base.trim_end_matches('/').to_string(), token, agent: builder().build() }
    }

    /// A client for a user-given address: plain http only to loopback unless `insecure_http`
    /// (see `check_server_url`), and the certificates in `ca` trusted besides the public roots.
    pub fn connect(
        base: &str,
        token: Option<String>,
        ca: Option<&std::path::Path>,
        insecure_http: bool,
    ) -> Result<Self, ClientError> {
        check_server_url(base, insecure_http)?;
        let agent = match ca {
            Some(ca) => builder().tls_config(tls_config(ca)?).build(),
            None => builder().build(),
        };
        Ok(Client { base: base.trim_end_matches('/').to_string(), token, agent })
    }

    /// The same server and TLS settings with another bearer token.
    pub fn with_token(&self, token: Option<String>) -> Self {
        Client { base: self.base.clone(), token, agent: self.agent.clone() }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        let r = self.agent.request(method, &format!("{}{}", self.base, path));
        match &self.token {
            Some(t) => r.set("Authorization", &format!("Bearer {t}")),
            None => r,
        }
    }

    fn finish<T: DeserializeOwned>(&self, r: Result<ureq::Response, ureq::Error>) -> Result<T, ClientError> {
        match r {
            Ok(resp) => Ok(resp.into_json()?),
            Err(ureq::Error::Status(status, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                let message = serde_json::from_str::<ErrorBody>(&text).map(|b| b.error).unwrap_or(text);
                Err(ClientError::Status { status, message })
            }
            Err(ureq::Error::Transport(t)) => {
                Err(ClientError::Transport { url: self.base.clone(), cause: Box::new(t) })
            }
        }
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.finish(self.request("GET", path).call())
    }

    /// A GET with query parameters (encoded by the HTTP client).
    pub fn get_query<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<T, ClientError> {
        let mut r = self.request("GET", path);
        for (k, v) in query {
            r = r.query(k, v);
        }
        self.finish(r.call())
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T, ClientError> {
        self.finish(self.request("POST", path).send_json(body))
    }

    /// A POST with an `Idempotency-Key`: the server makes the change once for the key, and
    /// answers a retry of it (the first answer was lost) without making it again.
    pub fn post_with_key<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        key: &str,
    ) -> Result<T, ClientError> {
        self.finish(self.request("POST", path).set("Idempotency-Key", key).send_json(body))
    }

    /// A POST that carries no body: an action on the resource named by the path. Sending none
    /// matters: a handler that takes no body leaves any bytes sent unread, and hyper then
    /// closes the connection after answering, so the next request on that pooled connection
    /// would meet a closed socket (ureq does not retry a POST).
    pub fn post_action<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.finish(self.request("POST", path).call())
    }

    pub fn login(&self, user: &str, password: &str) -> Result<LoginResponse, ClientError> {
        self.post("/api/login", &LoginRequest { user: user.into(), password: password.into() })
    }

    /// Revokes this client's token on the server.
    pub fn logout(&self) -> Result<serde_json::Value, ClientError> {
        self.post_action("/api/logout")
    }

    /// Changes the caller's password; the server revokes the caller's other tokens.
    pub fn passwd(&self, old_password: &str, new_password: &str) -> Result<PasswdResponse, ClientError> {
        self.post(
            "/api/passwd",
            &PasswdRequest { old_password: old_password.into(), new_password: new_password.into() },
        )
    }

    /// disable, enable or remove a user (administrators).
    pub fn user_action(&self, name: &str, action: &str) -> Result<UserActionResponse, ClientError> {
        self.post_action(&format!("/api/admin/users/{}/{action}", encode(name)))
    }

    /// The audit log, newest first: at most `limit` entries, older than entry `after` if given.
    pub fn audit(&self, limit: u32, after: Option<u64>) -> Result<Vec<AuditEntry>, ClientError> {
        let after = after.map_or(String::new(), |a| format!("&after={a}"));
        self.get(&format!("/api/admin/audit?limit={limit}{after}"))
    }

    /// Jobs, newest first, a page at a time: at most `limit`, older than job `after` if given
    /// (`all` = everyone's, administrators only).
    pub fn jobs_page(&self, all: bool, limit: u32, after: Option<u64>) -> Result<Vec<JobInfo>, ClientError> {
        let after = after.map_or(String::new(), |a| format!("&after={a}"));
        self.get(&format!("/api/jobs?all={all}&limit={limit}{after}"))
    }

    /// The caller's jobs of `ids` (at most 1,000), newest first; ids of no job of theirs are
    /// left out. A server from before `?ids=` answers its newest jobs instead: the caller
    /// checks that every job it got is one it asked for.
    pub fn jobs_by_ids(&self, ids: &[u64]) -> Result<Vec<JobInfo>, ClientError> {
        let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        self.get(&format!("/api/jobs?ids={list}"))
    }

    /// Users by name, a page at a time: at most `limit`, after the name `after` if given.
    pub fn users_page(&self, limit: u32, after: Option<&str>) -> Result<Vec<UserInfo>, ClientError> {
        let after = after.map_or(String::new(), |a| format!("&after={}", encode(a)));
        self.get(&format!("/api/admin/users?limit={limit}{after}"))
    }

    pub fn submit(&self, req: &SubmitRequest) -> Result<JobInfo, ClientError> {
        self.post("/api/jobs", req)
    }

    /// Submits with an `Idempotency-Key`: the same key (a retry after a lost answer) returns the
    /// job the first request made.
    pub fn submit_with_key(&self, req: &SubmitRequest, key: &str) -> Result<JobInfo, ClientError> {
        self.post_with_key("/api/jobs", req, key)
    }

    pub fn quote(&self, req: &QuoteRequest) -> Result<QuoteResponse, ClientError> {
        self.post("/api/quote", req)
    }

    pub fn job(&self, id: u64) -> Result<JobInfo, ClientError> {
        self.get(&format!("/api/jobs/{id}"))
    }

    /// The caller's jobs (`all` = everyone's, administrators only).
    pub fn jobs(&self, all: bool) -> Result<Vec<JobInfo>, ClientError> {
        self.get(if all { "/api/jobs?all=true" } else { "/api/jobs" })
    }

    pub fn cancel(&self, id: u64) -> Result<JobInfo, ClientError> {
        self.post_action(&format!("/api/jobs/{id}/cancel"))
    }

    /// Submits a job array: one answer for all its tasks (`ArrayResponse`).
    pub fn submit_array(&self, req: &ArrayRequest) -> Result<ArrayResponse, ClientError> {
        self.post("/api/arrays", req)
    }

    /// As `submit_array`, with an `Idempotency-Key`: a retry with the same key gets the array
    /// the first request made.
    pub fn submit_array_with_key(&self, req: &ArrayRequest, key: &str) -> Result<ArrayResponse, ClientError> {
        self.post_with_key("/api/arrays", req, key)
    }

    /// Every task of array `id`, in task order.
    pub fn array(&self, id: u64) -> Result<Vec<JobInfo>, ClientError> {
        self.get(&format!("/api/arrays/{id}"))
    }

    /// Cancels every active task of array `id`; returns every task as it is after.
    pub fn cancel_array(&self, id: u64) -> Result<Vec<JobInfo>, ClientError> {
        self.post_action(&format!("/api/arrays/{id}/cancel"))
    }

    pub fn output(&self, id: u64) -> Result<JobOutput, ClientError> {
        self.get(&format!("/api/jobs/{id}/output"))
    }

    /// One rank's output from the given offsets of its files (what a follower has not shown).
    pub fn output_from(
        &self,
        id: u64,
        rank: u32,
        stdout_from: u64,
        stderr_from: u64,
    ) -> Result<JobOutput, ClientError> {
        self.get(&format!(
            "/api/jobs/{id}/output?rank={rank}&stdout_from={stdout_from}&stderr_from={stderr_from}"
        ))
    }

    pub fn balance(&self) -> Result<Balance, ClientError> {
        self.get("/api/balance")
    }

    pub fn ledger(&self) -> Result<Vec<LedgerEntry>, ClientError> {
        self.get("/api/ledger")
    }

    pub fn nodes(&self) -> Result<Vec<NodeInfo>, ClientError> {
        self.get("/api/admin/nodes")
    }

    /// Drains (`drain`) or undrains (`undrain`) a node.
    /// `drain` (with why, if given) or `undrain` a node.
    pub fn node_action(
        &self,
        name: &str,
        action: &str,
        reason: Option<&str>,
    ) -> Result<NodeInfo, ClientError> {
        let mut r = self.request("POST", &format!("/api/admin/nodes/{name}/{action}"));
        if let Some(reason) = reason {
            r = r.query("reason", reason);
        }
        self.finish(r.call())
    }

    /// A backup of the server's live store: the database file's bytes, and what the server says
    /// it holds (the `x-libra-backup` header, JSON).
    pub fn backup(&self) -> Result<(Vec<u8>, serde_json::Value), ClientError> {
        match self.request("POST", "/api/admin/backup").call() {
            Ok(resp) => {
                let info = resp
                    .header("x-libra-backup")
                    .and_then(|h| serde_json::from_str(h).ok())
                    .unwrap_or(serde_json::Value::Null);
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut resp.into_reader(), &mut bytes)?;
                Ok((bytes, info))
            }
            Err(e) => self.finish::<serde_json::Value>(Err(e)).map(|_| unreachable!("an error answer")),
        }
    }

    pub fn usage(&self) -> Result<Vec<UsageRow>, ClientError> {
        self.get("/api/admin/usage")
    }

    /// Usage per day, user and account, filtered (administrators).
    pub fn usage_filtered(&self, q: &UsageQuery) -> Result<Vec<UsageRow>, ClientError> {
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(a) = &q.account {
            query.push(("account".into(), a.clone()));
        }
        if let Some(u) = &q.user {
            query.push(("user".into(), u.clone()));
        }
        if let Some(s) = q.since {
            query.push(("since".into(), s.to_string()));
        }
        if let Some(u) = q.until {
            query.push(("until".into(), u.to_string()));
        }
        self.get_query("/api/admin/usage", &query)
    }

    /// The caller's accounts: personal first, then the shared ones they are a member of.
    pub fn accounts(&self) -> Result<Vec<MyAccount>, ClientError> {
        self.get("/api/accounts")
    }

    /// One account (one of the caller's; any for an administrator).
    pub fn account(&self, name: &str) -> Result<MyAccount, ClientError> {
        self.get(&format!("/api/accounts/{}", encode(name)))
    }

    /// An account's ledger entries, newest first (one of the caller's; any for an administrator).
    pub fn account_ledger(&self, name: &str) -> Result<Vec<AccountEntry>, ClientError> {
        self.get(&format!("/api/accounts/{}/ledger", encode(name)))
    }

    /// Every shared account (administrators).
    pub fn accounts_all(&self) -> Result<Vec<AccountInfo>, ClientError> {
        self.get("/api/admin/accounts")
    }

    pub fn account_create(&self, name: &str) -> Result<AccountInfo, ClientError> {
        self.post("/api/admin/accounts", &AccountCreate { name: name.into() })
    }

    pub fn account_add_user(&self, account: &str, add: &AccountUserAdd) -> Result<AccountInfo, ClientError> {
        self.post(&format!("/api/admin/accounts/{}/users", encode(account)), add)
    }

    pub fn account_remove_user(&self, account: &str, user: &str) -> Result<AccountInfo, ClientError> {
        self.post(
            &format!("/api/admin/accounts/{}/remove-user", encode(account)),
            &AccountUserRemove { user: user.into() },
        )
    }

    pub fn account_default(&self, account: &str, user: &str) -> Result<AccountInfo, ClientError> {
        self.post(
            &format!("/api/admin/accounts/{}/default", encode(account)),
            &AccountDefault { user: user.into() },
        )
    }

    pub fn account_deposit(
        &self,
        account: &str,
        amount: libra_core::Money,
    ) -> Result<AccountInfo, ClientError> {
        self.post(&format!("/api/admin/accounts/{}/deposit", encode(account)), &AccountDeposit { amount })
    }

    pub fn account_transfer(
        &self,
        from: &str,
        to: &str,
        amount: libra_core::Money,
    ) -> Result<TransferResponse, ClientError> {
        self.post(
            "/api/admin/accounts/transfer",
            &AccountTransfer { from: from.into(), to: to.into(), amount },
        )
    }

    pub fn account_allocate(&self, account: &str, a: &AccountAllocate) -> Result<AccountInfo, ClientError> {
        self.post(&format!("/api/admin/accounts/{}/allocations", encode(account)), a)
    }

    /// As `account_deposit`, with an `Idempotency-Key`: a retry with the same key is answered
    /// with the account as it is, not deposited again.
    pub fn account_deposit_with_key(
        &self,
        account: &str,
        amount: libra_core::Money,
        key: &str,
    ) -> Result<AccountInfo, ClientError> {
        let path = format!("/api/admin/accounts/{}/deposit", encode(account));
        self.post_with_key(&path, &AccountDeposit { amount }, key)
    }

    /// As `account_transfer`, with an `Idempotency-Key`: a retry with the same key is answered
    /// with the two accounts as they are, not moved again.
    pub fn account_transfer_with_key(
        &self,
        from: &str,
        to: &str,
        amount: libra_core::Money,
        key: &str,
    ) -> Result<TransferResponse, ClientError> {
        let body = AccountTransfer { from: from.into(), to: to.into(), amount };
        self.post_with_key("/api/admin/accounts/transfer", &body, key)
    }

    /// As `account_allocate`, with an `Idempotency-Key`: a retry with the same key is answered
    /// with the account as it is, not allocated again.
    pub fn account_allocate_with_key(
        &self,
        account: &str,
        a: &AccountAllocate,
        key: &str,
    ) -> Result<AccountInfo, ClientError> {
        self.post_with_key(&format!("/api/admin/accounts/{}/allocations", encode(account)), a, key)
    }

    pub fn pricing(&self) -> Result<PricingInfo, ClientError> {
        self.get("/api/admin/pricing")
    }

    pub fn set_pricing(&self, p: &SetPricing) -> Result<PricingInfo, ClientError> {
        self.post("/api/admin/pricing", p)
    }

    pub fn policy(&self) -> Result<PolicyInfo, ClientError> {
        self.get("/api/admin/policy")
    }

    /// Sets the policy with its own default placement.
    pub fn set_policy(&self, name: &str) -> Result<PolicyInfo, ClientError> {
        self.set_policy_placement(name, None)
    }

    /// Sets the policy and how it chooses nodes (`None`: the policy's default).
    pub fn set_policy_placement(
        &self,
        name: &str,
        placement: Option<libra_core::policy::Placement>,
    ) -> Result<PolicyInfo, ClientError> {
        self.post("/api/admin/policy", &SetPolicy { policy: name.into(), placement })
    }

    /// `action` is `suspend` or `resume`.
    pub fn admin_job(&self, id: u64, action: &str) -> Result<JobInfo, ClientError> {
        self.post_action(&format!("/api/admin/jobs/{id}/{action}"))
    }

    pub fn user_add(&self, u: &UserAdd) -> Result<UserInfo, ClientError> {
        self.post("/api/admin/users", u)
    }

    pub fn users(&self) -> Result<Vec<UserInfo>, ClientError> {
        self.get("/api/admin/users")
    }

    pub fn credit(&self, user: &str, amount: libra_core::Money) -> Result<Balance, ClientError> {
        self.post("/api/admin/credit", &CreditRequest { user: user.into(), amount })
    }

    /// As `credit`, with an `Idempotency-Key`: the same key (a retry after a lost answer) is
    /// answered with the balance, not credited again.
    pub fn credit_with_key(
        &self,
        user: &str,
        amount: libra_core::Money,
        key: &str,
    ) -> Result<Balance, ClientError> {
        self.post_with_key("/api/admin/credit", &CreditRequest { user: user.into(), amount }, key)
    }

    /// Forgets a node's credential (administrators): it must join again with the join token.
    pub fn node_forget(&self, name: &str) -> Result<NodeForgotten, ClientError> {
        self.post_action(&format!("/api/admin/nodes/{name}/forget"))
    }

    pub fn register(&self, r: &RegisterRequest) -> Result<RegisterResponse, ClientError> {
        self.post("/api/node/register", r)
    }

    pub fn sync(&self, r: &SyncRequest) -> Result<SyncResponse, ClientError> {
        self.post("/api/node/sync", r)
    }

    /// Hosts a sweep on the server.
    pub fn sweep_create(&self, req: &SweepCreate) -> Result<SweepInfo, ClientError> {
        self.post("/api/sweeps", req)
    }

    /// As `sweep_create`, with an `Idempotency-Key`: the same key (a retry after a lost answer)
    /// returns the sweep the first request made.
    pub fn sweep_create_with_key(&self, req: &SweepCreate, key: &str) -> Result<SweepInfo, ClientError> {
        self.post_with_key("/api/sweeps", req, key)
    }

    /// The caller's sweeps (`all` = everyone's, administrators only).
    pub fn sweeps(&self, all: bool) -> Result<Vec<SweepInfo>, ClientError> {
        self.get(if all { "/api/sweeps?all=true" } else { "/api/sweeps" })
    }

    pub fn sweep(&self, id: i64) -> Result<SweepInfo, ClientError> {
        self.get(&format!("/api/sweeps/{id}"))
    }

    pub fn sweep_usage(&self, id: i64) -> Result<SweepUsage, ClientError> {
        self.get(&format!("/api/sweeps/{id}/usage"))
    }

    /// Every job's result, in job order, read a page at a time (`sweep_results_page`) until
    /// a page comes back empty (a server may answer fewer than asked).
    pub fn sweep_results(&self, id: i64) -> Result<Vec<SweepJob>, ClientError> {
        let mut all: Vec<SweepJob> = Vec::new();
        loop {
            let after = all.last().map_or(0, |j| j.job);
            let page = self.sweep_results_page(id, 10_000, after)?;
            // Each page starts past the last job read: one that does not is not a page of
            // this request (a server of before pages), and is the whole answer.
            if page.first().is_none_or(|j| j.job <= after) {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// At most `limit` jobs' results (the server answers at most 10,000), in job order, from
    /// the job after job number `after` (0: from the first).
    pub fn sweep_results_page(&self, id: i64, limit: u32, after: u64) -> Result<Vec<SweepJob>, ClientError> {
        self.get(&format!("/api/sweeps/{id}/results?limit={limit}&after={after}"))
    }

    pub fn sweep_set_deadline(&self, id: i64, d: &SweepDeadline) -> Result<SweepInfo, ClientError> {
        self.post(&format!("/api/sweeps/{id}/deadline"), d)
    }

    pub fn sweep_set_budget(&self, id: i64, budget: libra_core::Money) -> Result<SweepInfo, ClientError> {
        self.post(&format!("/api/sweeps/{id}/budget"), &SweepBudget { budget })
    }

    /// `action` is `pause`, `resume`, `cancel` or `rerun` (the failed and cancelled jobs).
    pub fn sweep_action(&self, id: i64, action: &str) -> Result<SweepInfo, ClientError> {
        self.post_action(&format!("/api/sweeps/{id}/{action}"))
    }
}

/// Percent-encodes a path segment or query value (user names are plain, but a name given on a
/// command line is not checked before it reaches the server).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_loopback_unless_insecure_http() {
        for ok in [
            "https://manager:7878",
            "https://10.0.0.5",
            "http://127.0.0.1:7878",
            "http://127.9.9.9",
            "http://localhost:1",
            "http://[::1]:7878",
        ] {
            check_server_url(ok, false).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "http://10.0.0.5:7878",
            "http://manager:7878",
            "http://[2001:db8::1]:7878",
            "http://0.0.0.0:7878",
        ] {
            let e = check_server_url(bad, false).unwrap_err().to_string();
            assert!(e.contains("--insecure-http") && e.contains(bad), "{bad}: {e}");
            check_server_url(bad, true).unwrap();
            // Refused before any connection: the client is never built.
            assert!(Client::connect(bad, None, None, false).is_err());
        }
        let e = check_server_url("ftp://x", true).unwrap_err().to_string();
        assert!(e.contains("'ftp'"), "{e}");
        let e = check_server_url("manager:7878", false).unwrap_err().to_string();
        assert!(e.starts_with("server:"), "{e}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_naming_it() {
        let path = std::env::temp_dir().join(format!("libra-ca-test-{}.pem", std::process::id()));
        std::fs::write(&path, "not a certificate").unwrap();
        let e = Client::connect("https://x", None, Some(&path), false).unwrap_err().to_string();
        let _ = std::fs::remove_file(&path);
        assert!(e.starts_with("ca: ") && e.contains("no PEM certificate"), "{e}");
        let e = Client::connect("https://x", None, Some(std::path::Path::new("/nonexistent/ca.pem")), false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("ca: /nonexistent/ca.pem"), "{e}");
    }
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// Serves two requests on one connection, records each request's head and what followed
    /// it, and answers each with a job so the client keeps the connection.
    #[test]
    fn actions_send_no_body_and_reuse_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut out = conn;
            let mut heads = Vec::new();
            for _ in 0..2 {
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    head.push(line.trim_end().to_ascii_lowercase());
                }
                let body = serde_json::json!({
                    "id": 7, "user": "u", "name": null, "state": "CANCELLED", "command": ["true"],
                    "estimate": 1.0, "procs": 1, "deadline": 10.0, "budget_cents": 5, "submit_time": 0.0,
                    "deadline_at": 10.0, "start_time": null, "end_time": null, "nodes": [],
                    "share": 0.0, "cost_cents": 0, "charged_cents": 0, "cpu_seconds": 0.0, "exit_code": null,
                    "reason": null, "suggestion": null
                })
                .to_string();
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
                heads.push(head);
            }
            heads
        });
        let c = Client::new(&url, Some("t".into()));
        c.cancel(7).unwrap();
        c.cancel(7).unwrap();
        let heads = server.join().unwrap();
        for head in heads {
            assert!(head[0].starts_with("post /api/jobs/7/cancel "), "{head:?}");
            let len =
                head.iter().find_map(|h| h.strip_prefix("content-length:")).map(|v| v.trim().to_string());
            assert!(len.is_none() || len.as_deref() == Some("0"), "a body was sent: {head:?}");
            assert!(!head.iter().any(|h| h.starts_with("transfer-encoding")), "{head:?}");
        }
    }
}
