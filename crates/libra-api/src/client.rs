//! A blocking JSON client over loopback HTTP.

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
    #[error("cannot reach the Libra server at {url}: {source}")]
    Transport { url: String, source: Box<ureq::Transport> },
    #[error("the server's answer could not be read: {0}")]
    Body(#[from] std::io::Error),
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

/// A client for one server, with an optional bearer token (a user's API token or a node's join
/// token).
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str, token: Option<String>) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .timeout(Duration::from_secs(120))
            .build();
        Client { base: base.trim_end_matches('/').to_string(), token, agent }
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
                Err(ClientError::Transport { url: self.base.clone(), source: Box::new(t) })
            }
        }
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.finish(self.request("GET", path).call())
    }

    pub fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T, ClientError> {
        self.finish(self.request("POST", path).send_json(body))
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
        self.finish(self.request("POST", "/api/jobs").set("Idempotency-Key", key).send_json(req))
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

    pub fn usage(&self) -> Result<Vec<UsageRow>, ClientError> {
        self.get("/api/admin/usage")
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

    pub fn sweep_results(&self, id: i64) -> Result<Vec<SweepJob>, ClientError> {
        self.get(&format!("/api/sweeps/{id}/results"))
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
