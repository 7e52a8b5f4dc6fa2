//! Request and response bodies. Money is `libra_core::Money` (integer cents on the wire); times
//! are Unix seconds (f64); durations are seconds.

use libra_core::job::JobSpec;
use libra_core::policy::{Placement, Suggestion};
use libra_core::{Money, PricingParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A job's state. Slurm's names where Slurm has one, plus REJECTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// Accepted (a promise and a hold), not yet started on its node.
    Pending,
    Running,
    /// Stopped by an administrator; resumes on `libra admin resume`.
    Suspended,
    /// Finished successfully by its deadline: the hold was captured.
    Completed,
    /// Exited with an error, or lost with its node: the hold was released.
    Failed,
    Cancelled,
    /// Finished after its deadline (free when the cluster was at fault, see `settlement`).
    Deadline,
    /// Not admitted: the reason and a suggestion were returned.
    Rejected,
    /// Stopped by its node at its time limit (`--time-limit`).
    Timeout,
    /// Held by its owner before it started (`libra hold`): no promise, nothing on hold, not
    /// started until `libra release` admits it again.
    Held,
}

impl JobState {
    pub const ALL: [JobState; 10] = [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Deadline,
        JobState::Rejected,
        JobState::Timeout,
        JobState::Held,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Deadline => "DEADLINE",
            JobState::Rejected => "REJECTED",
            JobState::Timeout => "TIMEOUT",
            JobState::Held => "HELD",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.as_str().eq_ignore_ascii_case(s))
    }

    /// Not finished: holds a promise on a node (and money on hold), or is held by its owner
    /// (`Held`: neither, until it is released).
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Pending | JobState::Running | JobState::Suspended | JobState::Held)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every error response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginRequest {
    pub user: String,
    pub password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginResponse {
    pub token: String,
    pub user: String,
    pub admin: bool,
    /// When the token stops working (Unix seconds; absent from servers whose tokens never did).
    #[serde(default)]
    pub expires: Option<f64>,
}

/// `POST /api/passwd`: the caller's new password, given with the current one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PasswdRequest {
    pub old_password: String,
    pub new_password: String,
}

/// `POST /api/passwd`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PasswdResponse {
    pub user: String,
    /// How many of the user's other tokens (other logins, hosted sweeps) were revoked.
    pub revoked_tokens: u64,
}

/// `POST /api/admin/users/{name}/{disable,enable,remove}`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserActionResponse {
    pub user: String,
    /// active, disabled or removed.
    pub state: String,
    /// The user's jobs this cancelled (their holds released).
    pub cancelled_jobs: Vec<u64>,
    pub revoked_tokens: u64,
}

/// One entry of the append-only audit log: an administrator's action, or a refused request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: u64,
    pub time: f64,
    /// The user who made the request (the user named at a refused login; absent: unknown).
    pub caller: Option<String>,
    /// The peer's IP address.
    pub address: Option<String>,
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The refusal's message, or the administrator's request (passwords left out).
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubmitRequest {
    pub spec: JobSpec,
    /// The program and its arguments, run on each of the job's nodes in `workdir`.
    pub command: Vec<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// The absolute directory the job runs in (where it was submitted from, or `--chdir`). A
    /// node without it fails the job with that reason. None: a directory of the node agent's
    /// own (clients that send no directory, such as older ones).
    #[serde(default)]
    pub workdir: Option<String>,
    /// The job's environment, captured at submission (`--export`). None: only the variables
    /// Libra sets and a minimal PATH and HOME.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Standard output file pattern, relative to `workdir` (`%j` job id, `%x` name, `%N` node,
    /// `%t` rank, `%%`). None: `libra-%j.out`.
    #[serde(default)]
    pub stdout: Option<String>,
    /// Standard error file pattern. None: the same file as standard output.
    #[serde(default)]
    pub stderr: Option<String>,
    /// Wall-clock seconds after which the node stops the job (TIMEOUT). None: no limit but the
    /// budget.
    #[serde(default)]
    pub time_limit: Option<f64>,
    /// Jobs this one waits for (`--dependency afterok:5`): it is admitted now for the window
    /// between their latest promised finish and its deadline, and starts when they end
    /// (`libra_core::dependency`). An array (its id, no task) stands for all its tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<libra_core::dependency::Dependency>,
    /// The account (project) the job is charged to: its quote is held against that account's
    /// credit and the caller's limit in it. None: the caller's default account (their personal
    /// account, named after them, unless an administrator set another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// A Slurm batch script's job (`libra sbatch`): the node also sets the `SLURM_*` variables a
    /// Slurm batch job has (`SLURM_JOB_ID`, `SLURM_ARRAY_TASK_ID`...), from the job's own
    /// values, in place of any the submitter's environment held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slurm_env: bool,
}

impl SubmitRequest {
    /// A job with no working directory, environment or output files of its own (as clients that
    /// only know the job's program send).
    pub fn new(spec: JobSpec, command: Vec<String>) -> Self {
        SubmitRequest {
            spec,
            command,
            name: None,
            workdir: None,
            env: None,
            stdout: None,
            stderr: None,
            time_limit: None,
            dependencies: Vec::new(),
            account: None,
            slurm_env: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuoteRequest {
    pub spec: JobSpec,
    /// As in `SubmitRequest`: a job that waits for others is quoted for the window after their
    /// latest promised finish, as its submission would be decided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<libra_core::dependency::Dependency>,
}

impl QuoteRequest {
    /// A quote for a job that waits for nothing.
    pub fn new(spec: JobSpec) -> Self {
        QuoteRequest { spec, dependencies: Vec::new() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodePrice {
    pub node: String,
    pub up: bool,
    /// Base price (PBase) per CPU-second.
    pub price_base: f64,
    /// The price per CPU-second the policy in force would charge the quoted job (or a
    /// one-CPU-second job due in a minute) on this node now (`Policy::price`): Libra+$'s eq. 3
    /// for its window, Libra's `alpha + beta/D`, or the base price. `null`: no price (the node is
    /// full over the job's window).
    pub price_now: Option<f64>,
    pub load: f64,
    pub cpus: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuoteResponse {
    pub policy: String,
    pub accepted: bool,
    #[serde(rename = "cost_cents", alias = "cost")]
    pub cost: Option<Money>,
    pub nodes: Vec<String>,
    pub share: Option<f64>,
    pub reason: Option<String>,
    pub suggestion: Option<Suggestion>,
    pub prices: Vec<NodePrice>,
    /// For a job with dependencies that would wait: the latest promised finish among them and
    /// the window the job was decided for (or, refused, how much time it leaves and the least
    /// deadline that could do). `null` otherwise.
    #[serde(default)]
    pub dependency: Option<String>,
}

/// Everything known about one job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobInfo {
    pub id: u64,
    pub user: String,
    pub name: Option<String>,
    pub state: JobState,
    pub command: Vec<String>,
    pub estimate: f64,
    pub procs: u32,
    /// Deadline as seconds after submission.
    pub deadline: f64,
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
    pub submit_time: f64,
    pub deadline_at: f64,
    pub start_time: Option<f64>,
    pub end_time: Option<f64>,
    pub nodes: Vec<String>,
    /// CPUs per node the job was admitted with.
    pub share: f64,
    /// The quoted cost placed on hold at admission.
    #[serde(rename = "cost_cents", alias = "cost")]
    pub cost: Money,
    /// What was finally charged (captured); zero until settled.
    #[serde(rename = "charged_cents", alias = "charged")]
    pub charged: Money,
    pub cpu_seconds: f64,
    pub exit_code: Option<i32>,
    /// Why the job was rejected, failed or cancelled.
    pub reason: Option<String>,
    pub suggestion: Option<Suggestion>,
    /// CPUs per node the job may use at once (`-c`).
    #[serde(default = "one")]
    pub cpus_per_task: u32,
    /// The directory the job runs in on its nodes.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Output file patterns (None: the defaults, see `SubmitRequest`).
    #[serde(default)]
    pub stdout: Option<String>,
    #[serde(default)]
    pub stderr: Option<String>,
    #[serde(default)]
    pub time_limit: Option<f64>,
    /// How the charge was decided when the job settled ("charged for 12.0 of 10.0 CPU-s used",
    /// "free: the cluster missed the deadline it promised ...").
    #[serde(default)]
    pub settlement: Option<String>,
    /// The array this job is a task of (`libra submit --array`): its id is the first task's
    /// job id. None for a job submitted alone.
    #[serde(default)]
    pub array_id: Option<u64>,
    /// The job's task id in its array (`LIBRA_ARRAY_TASK_ID`).
    #[serde(default)]
    pub array_task: Option<u32>,
    /// The jobs it depends on, as submitted (`--dependency`; an array named whole stays one
    /// entry here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<libra_core::dependency::Dependency>,
    /// True while it waits for its dependencies to end (state PENDING, no node starts it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
    /// The account the job is charged to (a user's personal account is named after the user).
    /// None from servers before accounts.
    #[serde(default)]
    pub account: Option<String>,
    /// The Slurm job id this job runs as, on a server whose executor is Slurm
    /// (`[executor] kind = "slurm"`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job_id: Option<u64>,
    /// Parts of the job its nodes were last known to run and have not reported ended. For a job
    /// that has ended by the cluster's word (cancelled, out of budget or credit), those a node
    /// has still to stop: what they use until then is billed too (within the budget), so the
    /// job's `charged` is final once this is 0. Absent (0) from servers before it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parts_running: u32,
    /// When the server cut this ended job's stored command to its first KiB (its owner's ended
    /// jobs kept more than the server's `command_quota_mb` of commands, and the commands of those
    /// that ended first went first); absent while the command is kept whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_cut: Option<f64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A job's captured output: what its nodes have sent so far (while it runs, too), the last
/// `OUTPUT_LIMIT` bytes of each stream per node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobOutput {
    pub id: u64,
    pub state: JobState,
    /// Every part's standard output in rank order (lossy UTF-8).
    pub stdout: String,
    pub stderr: String,
    /// True when the beginning of a long output was dropped.
    pub truncated: bool,
    /// Per node (rank): the bytes kept and where they sit in the node's output files.
    #[serde(default)]
    pub parts: Vec<OutputPart>,
    /// When the server removed the output it kept: Unix seconds; absent while it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<f64>,
    /// Why, with `removed`: "output_keep_days" (that many days after the job ended) or
    /// "output_quota_mb" (the owner's jobs kept more than the quota; the output of the jobs
    /// that ended first goes first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_for: Option<String>,
}

/// One node's part of a job's output.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputPart {
    pub node: String,
    pub rank: u32,
    pub stdout: String,
    pub stderr: String,
    /// Byte offsets in the output files: the text kept starts at `*_start` and the file had
    /// `*_end` bytes when last reported. A follower asks again from `*_end`.
    pub stdout_start: u64,
    pub stdout_end: u64,
    pub stderr_start: u64,
    pub stderr_end: u64,
    pub truncated: bool,
}

/// How much of each output stream of each node the server keeps (the end of it).
pub const OUTPUT_LIMIT: usize = 1 << 20;

/// Which output stream a chunk is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Bytes of a job's output file from `offset`, sent by its node while it runs and when it ends.
/// The server takes a chunk only where it continues what it has (or skips ahead, marking the
/// output truncated), so a chunk sent twice is stored once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputChunk {
    pub stream: Stream,
    pub offset: u64,
    /// The bytes, base64 (output need not be UTF-8).
    pub data: String,
}

impl OutputChunk {
    pub fn new(stream: Stream, offset: u64, bytes: &[u8]) -> Self {
        use base64::Engine;
        OutputChunk { stream, offset, data: base64::engine::general_purpose::STANDARD.encode(bytes) }
    }

    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(&self.data)
    }
}

/// The server's end offsets of a job's output streams on one node: where the node's next chunk
/// must start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputAck {
    pub job: u64,
    pub stdout: u64,
    pub stderr: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Balance {
    pub user: String,
    /// What can be held for new jobs.
    #[serde(rename = "available_cents", alias = "available")]
    pub available: Money,
    /// Held for accepted jobs that have not settled.
    #[serde(rename = "held_cents", alias = "held")]
    pub held: Money,
    /// Charged so far, in total.
    #[serde(rename = "charged_cents", alias = "charged")]
    pub charged: Money,
    #[serde(rename = "deposited_cents", alias = "deposited")]
    pub deposited: Money,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LedgerKind {
    Deposit,
    Hold,
    Charge,
    Release,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LedgerEntry {
    pub id: u64,
    pub user: String,
    pub job: Option<u64>,
    pub kind: LedgerKind,
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
    pub time: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeInfo {
    pub name: String,
    pub up: bool,
    pub cpus: f64,
    /// Sum of the shares its jobs need now (Algorithm 2), in CPUs.
    pub load: f64,
    pub jobs: Vec<NodeJobShare>,
    /// How the node enforces shares: cgroup-v2, cgroup-v1, stride or none.
    pub mechanism: String,
    pub price_base: f64,
    pub last_seen: f64,
    /// Whose account its jobs run as: "each user's", or the one account its agent runs as.
    #[serde(default)]
    pub runs_jobs_as: String,
    /// Drained by an administrator: takes no new jobs, finishes those it has.
    #[serde(default)]
    pub drained: bool,
    /// Why it is drained: the administrator's words (`libra admin node drain NAME --reason`),
    /// or the server's when the node could not start a job through its own fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeJobShare {
    pub job: u64,
    pub share: f64,
    pub cpu_seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageRow {
    /// The period (a UTC day, `YYYY-MM-DD`), or "all".
    pub period: String,
    pub user: String,
    pub jobs: u64,
    pub completed: u64,
    pub cpu_hours: f64,
    #[serde(rename = "revenue_cents", alias = "revenue")]
    pub revenue: Money,
    /// The account the jobs were charged to (a personal account is named after its user).
    /// Empty from servers before accounts.
    #[serde(default)]
    pub account: String,
}

/// `GET /api/admin/usage` filters: the jobs submitted in `[since, until)` (Unix seconds),
/// charged to `account`, of `user`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
}

// ---- accounts (projects) ----

/// An allocation: credit of an account that can be held only in `[start, end)` (Unix seconds).
/// After its end what is left of it is no longer available; holds already taken from it stay
/// valid until their jobs settle.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllocationInfo {
    pub id: u64,
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
    pub start: f64,
    pub end: f64,
    /// What is left of it to hold (zero before its start is not implied: see `active`).
    #[serde(rename = "remaining_cents", alias = "remaining")]
    pub remaining: Money,
    /// Whether it can be held now (start <= now < end).
    pub active: bool,
}

/// A member of an account, with their limit and what counts against it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountMember {
    pub user: String,
    /// The most the user may have charged and held against the account in the allocation
    /// period (null: no limit but the account's credit).
    #[serde(rename = "limit_cents", alias = "limit")]
    pub limit: Option<Money>,
    /// Charged in the period plus held now, by this user's jobs against this account.
    #[serde(rename = "used_cents", alias = "used")]
    pub used: Money,
    /// Whether this account is the user's default.
    #[serde(default)]
    pub default: bool,
}

/// An account's credit. `personal`: the account of one user, named after them (their credit
/// from before accounts, and what `libra admin credit` changes).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountInfo {
    pub name: String,
    pub personal: bool,
    /// What can be held for new jobs now: lasting credit plus the active allocations' remainder.
    #[serde(rename = "available_cents", alias = "available")]
    pub available: Money,
    /// Held for accepted jobs that have not settled.
    #[serde(rename = "held_cents", alias = "held")]
    pub held: Money,
    /// Charged so far, in total.
    #[serde(rename = "charged_cents", alias = "charged")]
    pub charged: Money,
    /// Deposited, transferred in and allocated, less withdrawn and transferred out.
    #[serde(rename = "credited_cents", alias = "credited")]
    pub credited: Money,
    /// When the current allocation period started (the latest started allocation's start; null:
    /// no allocation yet, the period is all time).
    #[serde(default)]
    pub period_start: Option<f64>,
    #[serde(default)]
    pub allocations: Vec<AllocationInfo>,
    pub members: Vec<AccountMember>,
}

/// `GET /api/accounts`: the caller's accounts and what the caller may still hold in each.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MyAccount {
    pub account: AccountInfo,
    /// The caller's limit in the account (null: none).
    #[serde(rename = "limit_cents", alias = "limit")]
    pub limit: Option<Money>,
    #[serde(rename = "used_cents", alias = "used")]
    pub used: Money,
    /// What the caller's next jobs may hold: the account's available credit, or what is left
    /// of the caller's limit when that is less.
    #[serde(rename = "available_to_me_cents", alias = "available_to_me")]
    pub available_to_me: Money,
    pub default: bool,
}

/// One entry of an account's ledger (`GET /api/accounts/NAME/ledger`). Kinds: deposit,
/// transfer, allocation (credit in), hold, charge, release (a job's).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountEntry {
    pub id: u64,
    pub time: f64,
    pub kind: String,
    /// The member whose job it is, or the administrator who moved the credit.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub job: Option<u64>,
    /// The allocation the entry belongs to (null: the lasting credit).
    #[serde(default)]
    pub allocation: Option<u64>,
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountCreate {
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountUserAdd {
    pub user: String,
    /// The user's limit (null: none). Adding a member again changes their limit.
    #[serde(default, rename = "limit_cents", alias = "limit")]
    pub limit: Option<Money>,
    /// Make the account the user's default.
    #[serde(default)]
    pub default: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountUserRemove {
    pub user: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountDeposit {
    /// Positive deposits lasting credit; negative withdraws it (never below zero available).
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountTransfer {
    pub from: String,
    pub to: String,
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransferResponse {
    pub from: AccountInfo,
    pub to: AccountInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountAllocate {
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
    /// Unix seconds.
    pub start: f64,
    /// Unix seconds, after `start`.
    pub end: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountDefault {
    pub user: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PricingInfo {
    pub params: PricingParams,
    pub nodes: Vec<NodePrice>,
}

/// Changes to pricing; absent fields are left alone. `node` with `price_base` sets one node's
/// PBase; `price_base` without `node` sets every node's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetPricing {
    pub alpha: Option<f64>,
    pub beta: Option<f64>,
    pub libra_gamma: Option<f64>,
    pub libra_delta: Option<f64>,
    pub node: Option<String>,
    pub price_base: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyInfo {
    pub policy: String,
    pub available: Vec<String>,
    /// How the policy chooses among the nodes that accept a job; `null` for the space-shared
    /// policies, which have no choice to make.
    #[serde(default)]
    pub placement: Option<Placement>,
    /// Every placement a time-shared policy accepts.
    #[serde(default)]
    pub placements: Vec<Placement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetPolicy {
    pub policy: String,
    /// The node choice; absent: the policy's own default (best fit for libra+$ and the EDF
    /// policies, least loaded for libra). Refused for a space-shared policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserAdd {
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub admin: bool,
    /// The Unix account the user's jobs run as on the nodes (default: the account of the same
    /// name).
    #[serde(default)]
    pub unix_user: Option<String>,
    /// Let the user's jobs run as root (refused otherwise, whatever the account maps to).
    #[serde(default)]
    pub allow_root: bool,
}

impl UserAdd {
    /// A user whose jobs run as the Unix account of the same name.
    pub fn new(name: &str, password: &str, admin: bool) -> Self {
        UserAdd { name: name.into(), password: password.into(), admin, unix_user: None, allow_root: false }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserInfo {
    pub name: String,
    pub admin: bool,
    #[serde(rename = "available_cents", alias = "available")]
    pub available: Money,
    #[serde(rename = "held_cents", alias = "held")]
    pub held: Money,
    /// The Unix account the user's jobs run as (where node agents can switch accounts).
    #[serde(default)]
    pub unix_user: String,
    #[serde(default)]
    pub allow_root: bool,
    /// active, disabled or removed (empty from servers before accounts could be disabled).
    #[serde(default)]
    pub state: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreditRequest {
    pub user: String,
    /// Positive deposits; negative withdraws (never below zero available).
    #[serde(rename = "amount_cents", alias = "amount")]
    pub amount: Money,
}

// ---- node agent <-> server ----

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRequest {
    pub name: String,
    pub cpus: f64,
    #[serde(default)]
    pub mem_mb: u64,
    pub mechanism: String,
    /// The Unix account the agent runs as.
    #[serde(default)]
    pub account: String,
    /// The agent can run jobs as their owners' accounts (it runs as root).
    #[serde(default)]
    pub switches_users: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterResponse {
    pub name: String,
    /// Job-control period the server asks for, seconds.
    pub period: f64,
    /// The node's own credential, minted when the join token admitted it (sent this once: the
    /// server keeps only a digest). The agent presents it on every later call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

/// What `POST /api/admin/nodes/{name}/forget` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeForgotten {
    pub name: String,
    /// The node's jobs that were active, now lost (their holds released).
    pub jobs_lost: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunningReport {
    pub job: u64,
    pub cpu_seconds: f64,
    pub suspended: bool,
    /// The share the node currently gives the job (CPUs).
    pub share: f64,
    pub start_time: f64,
    /// New output since the server's last acknowledged offsets.
    #[serde(default)]
    pub output: Vec<OutputChunk>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExitReport {
    pub job: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_seconds: f64,
    pub start_time: f64,
    pub end_time: f64,
    /// The rest of the job's output (from the server's acknowledged offsets).
    #[serde(default)]
    pub output: Vec<OutputChunk>,
    /// Set when the node could not start the job at all.
    pub error: Option<String>,
    /// The node stopped the job at its time limit.
    #[serde(default)]
    pub timed_out: bool,
    /// The job could not be started through the node's own fault (its disk, its control
    /// groups), not the job's: the server drains the node.
    #[serde(default)]
    pub node_fault: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SyncRequest {
    pub name: String,
    pub mechanism: String,
    pub running: Vec<RunningReport>,
    pub exited: Vec<ExitReport>,
    /// How long the server may hold the request open when it has nothing to say (long poll).
    #[serde(default)]
    pub wait_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartJob {
    pub job: u64,
    pub command: Vec<String>,
    /// CPU-seconds the node is committed to run the job for: the user's estimate, or more
    /// under a policy that pads estimates (`libra-risk`).
    pub estimate: f64,
    pub submit_time: f64,
    pub deadline_at: f64,
    /// The admitted share (CPUs).
    pub share: f64,
    pub suspended: bool,
    /// Memory limit per node, MB (0: none asked for).
    #[serde(default)]
    pub mem_mb: u64,
    /// Processors (nodes) the job runs on: a parallel job keeps its proportional share under
    /// EDF job control, since its parts on other nodes advance at their own pace.
    #[serde(default = "one")]
    pub procs: u32,
    /// CPUs the job's task may use at once: job control gives it at most this many (and at most
    /// the node's).
    #[serde(default = "one")]
    pub cpus_per_task: u32,
    #[serde(default)]
    pub name: Option<String>,
    /// This node's rank among the job's nodes (0-based; `LIBRA_PROCID`).
    #[serde(default)]
    pub rank: u32,
    /// Every node of the job in rank order (`LIBRA_NODELIST`).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// See `SubmitRequest`.
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub stdout: Option<String>,
    #[serde(default)]
    pub stderr: Option<String>,
    #[serde(default)]
    pub time_limit: Option<f64>,
    /// The Unix account the job runs as on the node (None: the agent's own, on a cluster whose
    /// agents cannot switch accounts).
    #[serde(default)]
    pub unix_user: Option<String>,
    /// An administrator allowed this user's jobs to run as root.
    #[serde(default)]
    pub allow_root: bool,
    /// See `JobInfo`: the node sets `LIBRA_ARRAY_JOB_ID`/`LIBRA_ARRAY_TASK_ID` and expands
    /// `%A`/`%a` in output patterns.
    #[serde(default)]
    pub array_id: Option<u64>,
    #[serde(default)]
    pub array_task: Option<u32>,
    /// On a Slurm node (`libra node --slurm`): the Slurm job to adopt instead of launching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job_id: Option<u64>,
    /// See `SubmitRequest::slurm_env`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slurm_env: bool,
}

fn one() -> u32 {
    1
}

/// Slurm's completion record of one job, as the jobcomp script Libra generates
/// (`libra slurm jobcomp-lua`) sends it to `POST /api/slurm/jobcomp` when a job ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlurmJobComp {
    /// The Slurm job id.
    pub job_id: u64,
    /// Slurm's job state number (`job_state`: 3 completed, 4 cancelled, 5 failed, 6 timeout,
    /// 7 node failure, ...; flag bits above 255 are ignored).
    pub job_state: u32,
    /// The job's wait status as Slurm records it (exit code << 8, or the signal).
    #[serde(default)]
    pub exit_code: i64,
    /// Start and end, seconds since the epoch (0: never started).
    #[serde(default)]
    pub start: f64,
    #[serde(default)]
    pub end: f64,
    /// The job's comment (`libra job=ID`): names the Libra job.
    #[serde(default)]
    pub comment: Option<String>,
    /// The job's partition: a record of a job outside Libra's partitions never names a Libra
    /// job by its comment (anyone may write any comment there).
    #[serde(default)]
    pub partition: Option<String>,
}

/// What the server did with a jobcomp record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlurmJobCompAck {
    /// The Libra job it belongs to (None: a job Libra did not submit, ignored).
    pub job: Option<u64>,
    /// The job is settled now (its node's agent had already reported its CPU, or never will).
    pub settled: bool,
}

/// How a node divides its CPU among its jobs between syncs: the admission policy's own
/// (`Policy::job_control`), the one the simulator runs too.
pub use libra_core::share::JobControl;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SyncResponse {
    pub start: Vec<StartJob>,
    pub kill: Vec<u64>,
    pub suspend: Vec<u64>,
    pub resume: Vec<u64>,
    /// Exit reports the server has durably recorded: the node may forget them.
    pub ack: Vec<u64>,
    /// The node is not registered (the server lost it or never knew it): register again.
    #[serde(default)]
    pub reregister: bool,
    /// The job control the admission policy in force expects of the node.
    #[serde(default)]
    pub job_control: JobControl,
    /// Where the server's copy of each running job's output ends: the node sends on from there.
    #[serde(default)]
    pub output_acks: Vec<OutputAck>,
    /// The promise each job the node runs holds now (`libra update` can move a running job's
    /// deadline): the node's job control follows it.
    #[serde(default)]
    pub promises: Vec<JobPromise>,
}

/// A running job's promise as the server holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPromise {
    pub job: u64,
    pub deadline_at: f64,
    /// The share it was admitted with.
    pub share: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_control_and_start_job_keep_their_wire_form() {
        assert_eq!(serde_json::to_string(&JobControl::Libra).unwrap(), "\"libra\"");
        assert_eq!(serde_json::from_str::<JobControl>("\"edf\"").unwrap(), JobControl::Edf);
        // A server from before cpus_per_task: one CPU per task.
        let old = r#"{"job":1,"command":["true"],"estimate":1.0,"submit_time":0.0,"deadline_at":10.0,"share":0.1,"suspended":false}"#;
        let s: StartJob = serde_json::from_str(old).unwrap();
        assert_eq!((s.procs, s.cpus_per_task), (1, 1));
    }

    #[test]
    fn states_round_trip_by_name() {
        for s in JobState::ALL {
            assert_eq!(JobState::parse(s.as_str()), Some(s));
            let j = serde_json::to_string(&s).unwrap();
            assert_eq!(j, format!("\"{}\"", s.as_str()));
        }
        assert_eq!(JobState::parse("nope"), None);
    }
}
