//! `libra admin ...`: the administrators' commands (the server refuses them to anyone else
//! with 403).

use super::common::{fmt_time, money, now, read_password, Conn};
use super::jobs::{members_table, Jobs};
use crate::cmd::time::{parse_duration, parse_instant};
use crate::output::{emit, table, Render, Said, Text};
use anyhow::Result;
use clap::{Args, Subcommand};
use libra_api::{AccountAllocate, AccountInfo, AccountUserAdd, Client, SetPricing, UsageQuery, UserAdd};
use libra_core::policy::Placement;
use libra_core::Money;

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub cmd: AdminCommand,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Nodes: state (up, down, DRAINED), capacity, load, job shares, enforcement mechanism.
    Nodes,
    /// Copy the server's live store into FILE without stopping it (SQLite's online backup: the
    /// store as of one moment), with the hosted sweeps' broker database inside it. Restore it
    /// with `libra server --restore FILE`.
    Backup {
        /// Where to write the backup (a single SQLite file, mode 0600: it holds password and
        /// token hashes).
        file: std::path::PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        overwrite: bool,
    },
    /// Everyone's jobs, newest first, a page at a time.
    Jobs(PageArgs),
    /// Jobs, CPU hours and what was charged per day, user and account (like sreport / Gold's
    /// gusage), filtered by --account, --user and --since/--until (the jobs submitted then).
    #[command(
        after_help = "Examples:\n  libra admin usage --account physics --since 2026-11-01\n  libra admin usage --user alice --since now-7d --json"
    )]
    Usage(UsageArgs),
    /// Accounts (projects) that hold credit, as sites charge them (like sacctmgr, or Gold's
    /// gmkaccount, gdeposit, gtransfer): members with limits, deposits, transfers, allocations
    /// that expire.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Show the pricing parameters, or set them (any of the flags).
    Pricing(PricingArgs),
    /// Show the admission policy and its node choice, or set them.
    Policy {
        /// libra+$, libra, libra-edf, libra-risk, libra-risk-est (past the papers), or a space-shared
        /// baseline: fifo, fcfs-bf, sjf-bf, edf-bf (`libra admin policy` shows the one in force).
        name: Option<String>,
        /// How a time-shared policy chooses among the nodes that accept a job: best-fit (the
        /// Libra+$ paper's, the default of libra+$ and the EDF policies), least-loaded (the Libra
        /// paper's, the default of libra) or cheapest (the lowest price for the job). Without a
        /// policy name, changes the node choice of the policy in force.
        #[arg(long)]
        placement: Option<Placement>,
    },
    /// Cancel anyone's job (nothing is charged).
    Cancel { job: u64 },
    /// Suspend a job (its processes are stopped; its promise and hold stay).
    Suspend { job: u64 },
    /// Resume a suspended job.
    Resume { job: u64 },
    /// Users.
    #[command(subcommand)]
    User(UserCommand),
    /// Node operations: drain and undrain (`libra admin node drain n1`), forget a node's
    /// identity.
    #[command(subcommand)]
    Node(NodeCommand),
    /// The audit log, newest first: every administrator action and every refused request
    /// (401, 403, 429) with its caller and address. Append-only: nothing can change it, and
    /// entries go only when older than the server's audit_keep_days (if set).
    Audit(PageArgs),
    /// Deposit credit (a negative amount withdraws, never below zero). Sent with an idempotency
    /// key and tried again when the connection fails: a lost answer is never credited twice.
    Credit {
        user: String,
        /// Credits, e.g. 500 or 12.50.
        #[arg(allow_hyphen_values = true)]
        amount: String,
    },
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Only jobs charged to this account (a user's personal account is named after them).
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// Only this user's jobs.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Only jobs submitted at or after this time: now-7d, a duration meaning that long ago (7d),
    /// a date (2026-11-01, midnight UTC), a time (2026-11-22T21:00:00Z) or @UNIXSECONDS.
    #[arg(long, short = 'S', visible_alias = "starttime")]
    pub since: Option<String>,
    /// Only jobs submitted before this time (the same forms as --since).
    #[arg(long, short = 'E', visible_alias = "endtime")]
    pub until: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Every shared account: credit, held, available, members.
    List,
    /// One account in detail: credit, allocations, members with their limits and use.
    Show { name: String },
    /// Create a shared account (its name may not be a user's: a user's personal account takes
    /// their name).
    #[command(
        after_help = "Example:\n  libra admin account create physics\n  libra admin account add-user physics alice --limit 500"
    )]
    Create { name: String },
    /// Add a user to an account, or change a member's limit.
    AddUser {
        name: String,
        user: String,
        /// The most the user may have charged and held against the account in its allocation
        /// period, in credits (default: no limit but the account's credit).
        #[arg(long, allow_hyphen_values = true)]
        limit: Option<String>,
        /// Make the account the user's default (what their jobs are charged to without --account).
        #[arg(long)]
        default: bool,
    },
    /// Remove a user from an account: their new jobs can no longer be charged to it; jobs
    /// already accepted settle against it. If it was their default, their personal account is.
    RemoveUser { name: String, user: String },
    /// Make an account a user's default (the user's own name: their personal account).
    Default { name: String, user: String },
    /// Deposit lasting credit (a negative amount withdraws, never below zero available). Sent
    /// with an idempotency key and tried again when the connection fails, as are transfer and
    /// allocate: a lost answer never moves credit twice.
    Deposit {
        name: String,
        /// Credits, e.g. 500 or 12.50.
        #[arg(allow_hyphen_values = true)]
        amount: String,
    },
    /// Move lasting credit from one account to another (personal or shared), in one
    /// transaction. Allocation credit stays with its account.
    Transfer { from: String, to: String, amount: String },
    /// Allocate credit that can be held only from --start to --end. At the end what is left of
    /// it is no longer available; holds taken from it before stay valid until their jobs settle,
    /// and what those jobs do not spend returns to the expired allocation.
    #[command(
        after_help = "Examples:\n  libra admin account allocate physics 10000 --start 2026-12-01 --end 2027-01-01\n  libra admin account allocate physics 500 --end 30d"
    )]
    Allocate {
        name: String,
        amount: String,
        /// When the credit becomes available: now (the default), a duration from now (2h), a
        /// date (2026-12-01, midnight UTC), a time (2026-12-01T08:00:00Z), @UNIXSECONDS, or
        /// now-2h.
        #[arg(long)]
        start: Option<String>,
        /// When it expires: a time (the forms of --start), or a duration after --start (30d).
        #[arg(long)]
        end: String,
    },
}

/// One page of a listing: `--after` the last entry of the page before.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// The most entries to show (at most 10000).
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// Show the entries after this one (the last id of the page before; older entries).
    #[arg(long)]
    pub after: Option<u64>,
}

#[derive(Debug, Args)]
pub struct PricingArgs {
    /// Libra+$ static factor alpha.
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub alpha: Option<f64>,
    /// Libra+$ dynamic factor beta.
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub beta: Option<f64>,
    /// Libra's runtime coefficient.
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub libra_gamma: Option<f64>,
    /// Libra's deadline coefficient.
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub libra_delta: Option<f64>,
    /// The node whose base price to set (default: every node).
    #[arg(long)]
    pub node: Option<String>,
    /// Base price PBase, credits per CPU-second.
    #[arg(long, value_parser = crate::cmd::parse_finite)]
    pub price_base: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Forget a node's credential: its agent's credential is refused from now on, the node must
    /// join again with the cluster's join token (the agent does so by itself where it was given
    /// one), and its running jobs are lost as a silent node's are (holds released, nothing
    /// charged). For a reinstalled, lost or retired machine.
    #[command(after_help = "Example:\n  libra admin node forget n17")]
    Forget {
        /// The node's name (`libra admin nodes` lists them).
        name: String,
    },
    /// Take no new jobs on the node and let those it runs finish (their promises are kept).
    /// Its capacity leaves admission at once; new jobs go to other nodes or are refused. The
    /// node stays drained across restarts until `undrain`.
    #[command(
        after_help = "Example:\n  libra admin node drain n17 --reason \"disk replacement, ticket 4711\""
    )]
    Drain {
        /// The node's name, as `libra admin nodes` shows it.
        name: String,
        /// Why, for the other administrators: `libra admin nodes` shows it until the node is
        /// undrained (at most 1000 bytes).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Let a drained node take new jobs again.
    Undrain {
        /// The node's name, as `libra admin nodes` shows it.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user.
    Add {
        name: String,
        /// Refused: a password on the command line is readable by every user of the machine.
        #[arg(long, hide = true)]
        password: Option<String>,
        /// A file holding the password (default: LIBRA_PASSWORD, else a line of standard input).
        #[arg(long, value_name = "FILE")]
        password_file: Option<std::path::PathBuf>,
        /// Make the user an administrator.
        #[arg(long)]
        admin: bool,
        /// The Unix account the user's jobs run as on the nodes (default: the account of the
        /// same name). Refused where the node agents are not root: their jobs all run as the
        /// agents' own account.
        #[arg(long)]
        unix_user: Option<String>,
        /// Let the user's jobs run as root (jobs never run as root otherwise).
        #[arg(long)]
        allow_root: bool,
    },
    /// List users, their state and credit, by name a page at a time.
    List {
        /// The most users to show (at most 10000).
        #[arg(long, default_value_t = 1000)]
        limit: u32,
        /// Show the users after this name.
        #[arg(long)]
        after: Option<String>,
    },
    /// Disable a user: their tokens are revoked, they cannot log in, and their pending and
    /// running jobs and hosted sweeps are cancelled (holds released, nothing charged).
    Disable { name: String },
    /// Enable a disabled user again (they log in anew).
    Enable { name: String },
    /// Remove a user for good: as disable, and the account can never log in or be enabled
    /// again. Their jobs and ledger stay in the history; the name stays taken.
    Remove { name: String },
}

/// Writes `bytes` to `file` whole or not at all: into `FILE.partial` beside it (0600), synced,
/// then renamed over `file`, and the directory synced, so that FILE is never a partial backup
/// and a crash leaves either the old file or the new one. On an error the partial file goes.
fn write_whole(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp_name = file.as_os_str().to_owned();
    tmp_name.push(".partial");
    let tmp = std::path::PathBuf::from(tmp_name);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    std::fs::File::open(dir)?.sync_all()
}

pub fn run(a: AdminArgs) -> Result<()> {
    let c = a.conn.client()?;
    let json = a.conn.json;
    match a.cmd {
        AdminCommand::Nodes => emit(c.nodes()?.as_slice(), json)?,
        AdminCommand::Backup { file, overwrite } => {
            if file.exists() && !overwrite {
                anyhow::bail!("{}: the file exists; give --overwrite to replace it", file.display());
            }
            // Checked before the server makes the backup, which may be large.
            let dir = match file.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => std::path::PathBuf::from("."),
            };
            if !dir.is_dir() {
                anyhow::bail!(
                    "{}: cannot write the backup there: {} is not a directory",
                    file.display(),
                    dir.display()
                );
            }
            let (bytes, info) = c.backup()?;
            write_whole(&file, &bytes)
                .map_err(|e| anyhow::anyhow!("{}: cannot write the backup: {e}", file.display()))?;
            let sweeps = match info["sweeps"].as_u64() {
                Some(n) => format!(", {n} hosted sweeps"),
                None => String::new(),
            };
            let said = format!(
                "backup {}: {} jobs (last {}), {} ledger entries (last {}), {} users{sweeps}, schema version {}, {} bytes",
                file.display(),
                info["jobs"],
                info["last_job"],
                info["ledger_entries"],
                info["last_ledger_entry"],
                info["users"],
                info["schema_version"],
                bytes.len()
            );
            let mut v = info;
            v["file"] = file.display().to_string().into();
            v["bytes"] = bytes.len().into();
            emit(&Said::new(&v, said), json)?;
        }
        AdminCommand::Node(NodeCommand::Drain { name, reason }) => {
            drain(&c, &name, "drain", reason.as_deref(), json)?
        }
        AdminCommand::Node(NodeCommand::Undrain { name }) => drain(&c, &name, "undrain", None, json)?,
        AdminCommand::Jobs(p) => {
            let jobs = c.jobs_page(true, p.limit, p.after)?;
            emit(&Jobs::new(&jobs, true), json)?;
        }
        AdminCommand::Usage(u) => {
            let n = now();
            let instant = |flag: &str, v: &Option<String>| {
                v.as_deref()
                    .map(|t| parse_instant(t, n))
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
            };
            let q = UsageQuery {
                account: u.account,
                user: u.user,
                since: instant("--since", &u.since)?,
                until: instant("--until", &u.until)?,
            };
            if let (Some(s), Some(e)) = (q.since, q.until) {
                if e <= s {
                    anyhow::bail!("--until: {} is not after --since {}", fmt_time(e), fmt_time(s));
                }
            }
            emit(c.usage_filtered(&q)?.as_slice(), json)?;
        }
        AdminCommand::Account(cmd) => account(&c, cmd, json)?,
        AdminCommand::Pricing(p) => {
            let change = SetPricing {
                alpha: p.alpha,
                beta: p.beta,
                libra_gamma: p.libra_gamma,
                libra_delta: p.libra_delta,
                node: p.node,
                price_base: p.price_base,
            };
            let changing = change.alpha.is_some()
                || change.beta.is_some()
                || change.libra_gamma.is_some()
                || change.libra_delta.is_some()
                || change.price_base.is_some()
                || change.node.is_some();
            let info = if changing { c.set_pricing(&change)? } else { c.pricing()? };
            emit(&info, json)?;
        }
        AdminCommand::Policy { name, placement } => {
            let info = match (name, placement) {
                (Some(n), p) => c.set_policy_placement(&n, p)?,
                (None, Some(p)) => c.set_policy_placement(&c.policy()?.policy, Some(p))?,
                (None, None) => c.policy()?,
            };
            let placement =
                info.placement.map_or("none (whole idle nodes in queue order)".into(), |p| p.to_string());
            let text = Text::new()
                .line(format!("policy: {} (available: {})", info.policy, info.available.join(", ")))
                .line(format!(
                    "placement: {placement} (available: {})",
                    info.placements.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
                ));
            emit(&Said::new(&info, text), json)?;
        }
        AdminCommand::Cancel { job } | AdminCommand::Suspend { job } | AdminCommand::Resume { job } => {
            let action = match a.cmd {
                AdminCommand::Cancel { .. } => "cancel",
                AdminCommand::Suspend { .. } => "suspend",
                _ => "resume",
            };
            let j = c.admin_job(job, action)?;
            emit(&Said::new(&j, format!("job {} is now {}", j.id, j.state)), json)?;
        }
        AdminCommand::Node(NodeCommand::Forget { name }) => {
            let f = c.node_forget(&name)?;
            let said = format!(
                "forgot node {}'s credential: it joins again with the join token; {}",
                f.name,
                match f.jobs_lost.len() {
                    0 => "it had no active jobs".to_string(),
                    _ => format!(
                        "its jobs {} are lost (holds released)",
                        f.jobs_lost.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(", ")
                    ),
                }
            );
            emit(&Said::new(&f, said), json)?;
        }
        AdminCommand::User(UserCommand::Add {
            name,
            password,
            password_file,
            admin,
            unix_user,
            allow_root,
        }) => {
            // The server checks the name too; checked here first, before asking a password.
            libra_server::auth::valid_user_name(&name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let password =
                read_password(password, password_file.as_deref(), &format!("password for {name}: "))?;
            let u = c.user_add(&UserAdd { name, password, admin, unix_user, allow_root })?;
            let said = format!(
                "added user {}{}; jobs run as {}{}",
                u.name,
                if u.admin { " (administrator)" } else { "" },
                u.unix_user,
                if u.allow_root { " (root allowed)" } else { "" }
            );
            emit(&Said::new(&u, said), json)?;
        }
        AdminCommand::User(UserCommand::List { limit, after }) => {
            emit(c.users_page(limit, after.as_deref())?.as_slice(), json)?;
        }
        AdminCommand::User(
            UserCommand::Disable { ref name }
            | UserCommand::Enable { ref name }
            | UserCommand::Remove { ref name },
        ) => {
            let action = match a.cmd {
                AdminCommand::User(UserCommand::Disable { .. }) => "disable",
                AdminCommand::User(UserCommand::Enable { .. }) => "enable",
                _ => "remove",
            };
            let r = c.user_action(name, action)?;
            let said = format!(
                "user {} is now {}; {} revoked; cancelled jobs: {}",
                r.user,
                r.state,
                tokens(r.revoked_tokens, ""),
                if r.cancelled_jobs.is_empty() {
                    "none".to_string()
                } else {
                    r.cancelled_jobs.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                }
            );
            emit(&Said::new(&r, said), json)?;
        }
        AdminCommand::Audit(p) => {
            emit(c.audit(p.limit, p.after)?.as_slice(), json)?;
        }
        AdminCommand::Credit { user, amount } => {
            let m = parse_amount("amount", &amount)?;
            // A retry after a lost answer is answered, never credited twice.
            let b = crate::cmd::retry::keyed(|key| c.credit_with_key(&user, m, key))?;
            let said = format!(
                "{}: {} available, {} on hold (at {})",
                b.user,
                money(b.available),
                money(b.held),
                fmt_time(now())
            );
            emit(&Said::new(&b, said), json)?;
        }
    }
    Ok(())
}

/// Credits given on the command line, negative ones too (a withdrawal).
fn parse_amount(field: &str, s: &str) -> Result<Money> {
    match s.strip_prefix('-') {
        Some(pos) => Ok(Money(-pos.parse::<Money>().map_err(|e| anyhow::anyhow!("{field}: {e}"))?.0)),
        None => s.parse().map_err(|e| anyhow::anyhow!("{field}: {e}")),
    }
}

fn account_line(a: &AccountInfo) -> String {
    format!(
        "account {}: {} available, {} on hold, {} charged, {} credited",
        a.name,
        money(a.available),
        money(a.held),
        money(a.charged),
        money(a.credited)
    )
}

/// `admin account ...`.
fn account(c: &Client, cmd: AccountCommand, json: bool) -> Result<()> {
    let print = |a: &AccountInfo| emit(a, json);
    match cmd {
        AccountCommand::List => emit(c.accounts_all()?.as_slice(), json),
        AccountCommand::Show { name } => {
            let a = c.account(&name)?;
            let mut text = a.account.text();
            if !a.account.allocations.is_empty() {
                let mut t = table(&["ALLOCATION", "AMOUNT", "START", "END", "REMAINING", "ACTIVE"]);
                for al in &a.account.allocations {
                    t.add_row(vec![
                        al.id.to_string(),
                        money(al.amount),
                        fmt_time(al.start),
                        fmt_time(al.end),
                        money(al.remaining),
                        if al.active { "yes" } else { "no" }.into(),
                    ]);
                }
                text = text.line(t);
            }
            emit(&Said::new(&a, text), json)
        }
        AccountCommand::Create { name } => print(&c.account_create(&name)?),
        AccountCommand::AddUser { name, user, limit, default } => {
            let limit = limit
                .as_deref()
                .map(|l| l.parse::<Money>().map_err(|e| anyhow::anyhow!("--limit: {e}")))
                .transpose()?;
            print(&c.account_add_user(&name, &AccountUserAdd { user, limit, default })?)
        }
        AccountCommand::RemoveUser { name, user } => print(&c.account_remove_user(&name, &user)?),
        AccountCommand::Default { name, user } => print(&c.account_default(&name, &user)?),
        AccountCommand::Deposit { name, amount } => {
            let amount = parse_amount("amount", &amount)?;
            // A retry after a lost answer is answered, never deposited twice.
            print(&crate::cmd::retry::keyed(|key| c.account_deposit_with_key(&name, amount, key))?)
        }
        AccountCommand::Transfer { from, to, amount } => {
            let amount: Money = amount.parse().map_err(|e| anyhow::anyhow!("amount: {e}"))?;
            let r = crate::cmd::retry::keyed(|key| c.account_transfer_with_key(&from, &to, amount, key))?;
            let text = Text::new()
                .line(format!("moved {} from {} to {}", money(amount), from, to))
                .line(account_line(&r.from))
                .line(account_line(&r.to));
            emit(&Said::new(&r, text), json)
        }
        AccountCommand::Allocate { name, amount, start, end } => {
            let amount: Money = amount.parse().map_err(|e| anyhow::anyhow!("amount: {e}"))?;
            let n = now();
            // A duration is from now, as a deadline's is (`--start 2h`: in two hours; it was
            // taken as two hours ago, the meaning of a filter's `--starttime 2h`).
            let start = match start.as_deref() {
                None => n,
                Some(s) => match parse_duration(s) {
                    Ok(d) => n + d,
                    Err(_) => parse_instant(s, n).map_err(|e| anyhow::anyhow!("--start: {e}"))?,
                },
            };
            // A duration is the allocation's length; anything else is a time.
            let end = match parse_duration(&end) {
                Ok(d) if d > 0.0 => start + d,
                _ => parse_instant(&end, n)
                    .map_err(|e| anyhow::anyhow!("--end: {e}; or a duration after --start (30d)"))?,
            };
            if end <= start {
                anyhow::bail!("--end: {} is not after --start {}", fmt_time(end), fmt_time(start));
            }
            if end <= n {
                anyhow::bail!("--end: {} is in the past: the allocation could never be used", fmt_time(end));
            }
            let alloc = AccountAllocate { amount, start, end };
            let a = crate::cmd::retry::keyed(|key| c.account_allocate_with_key(&name, &alloc, key))?;
            let said = format!(
                "allocated {} to {} from {} to {}",
                money(amount),
                name,
                fmt_time(start),
                fmt_time(end)
            );
            emit(&Said::new(&a, Text::new().line(said).raw(&a.text().to_string())), json)
        }
    }
}

/// `admin node drain|undrain NAME`.
fn drain(c: &Client, name: &str, action: &str, reason: Option<&str>, json: bool) -> anyhow::Result<()> {
    let n = c.node_action(name, action, reason)?;
    let said = if n.drained {
        let running = n.jobs.len();
        format!(
            "node {} is drained: it takes no new jobs; {running} job{} on it will finish{}",
            n.name,
            if running == 1 { "" } else { "s" },
            n.drain_reason.as_deref().map(|r| format!(" (reason: {r})")).unwrap_or_default()
        )
    } else {
        format!("node {} takes new jobs again", n.name)
    };
    emit(&Said::new(&n, said), json)
}

/// `admin nodes`: a node a row.
impl Render for [libra_api::NodeInfo] {
    fn text(&self) -> Text {
        let mut t = table(&[
            "NODE",
            "STATE",
            "CPUS",
            "LOAD",
            "JOBS (job:share)",
            "MECHANISM",
            "JOBS RUN AS",
            "PBASE",
            "LAST SEEN",
        ]);
        let n = now();
        for x in self {
            let jobs: Vec<String> = x.jobs.iter().map(|j| format!("{}:{:.2}", j.job, j.share)).collect();
            t.add_row(vec![
                x.name.clone(),
                match (x.up, x.drained) {
                    (true, false) => "up",
                    (true, true) => "DRAINED",
                    (false, false) => "down",
                    (false, true) => "down, DRAINED",
                }
                .into(),
                format!("{:.2}", x.cpus),
                format!("{:.3}", x.load),
                jobs.join(" "),
                x.mechanism.clone(),
                x.runs_jobs_as.clone(),
                format!("{:.4}", x.price_base),
                format!("{:.1}s ago", n - x.last_seen),
            ]);
        }
        let mut text = Text::new().line(t);
        for x in self.iter().filter(|x| x.drained) {
            if let Some(r) = &x.drain_reason {
                text = text.line(format!("{} is drained: {r}", x.name));
            }
        }
        text
    }
}

/// `admin usage`: a row per period, user and account, then the total per account.
impl Render for [libra_api::UsageRow] {
    fn text(&self) -> Text {
        if self.is_empty() {
            return Text::new().line("no jobs match");
        }
        let mut t = table(&["PERIOD", "USER", "ACCOUNT", "JOBS", "COMPLETED", "CPU HOURS", "CHARGED"]);
        let mut per_account: std::collections::BTreeMap<&str, Money> = Default::default();
        for r in self {
            let sum = per_account.entry(&r.account).or_insert(Money::ZERO);
            *sum = *sum + r.revenue;
            t.add_row(vec![
                r.period.clone(),
                r.user.clone(),
                r.account.clone(),
                r.jobs.to_string(),
                r.completed.to_string(),
                format!("{:.4}", r.cpu_hours),
                money(r.revenue),
            ]);
        }
        let mut sums = table(&["ACCOUNT", "CHARGED"]);
        for (a, m) in per_account {
            sums.add_row(vec![a.to_string(), money(m)]);
        }
        Text::new().line(t).line(sums)
    }
}

/// `admin pricing`: the parameters, then a node a row.
impl Render for libra_api::PricingInfo {
    fn text(&self) -> Text {
        let info = self;
        let mut t = table(&["NODE", "PBASE/CPU-S", "PRICE NOW/CPU-S", "LOAD"]);
        for n in &info.nodes {
            t.add_row(vec![
                n.node.clone(),
                format!("{:.4}", n.price_base),
                n.price_now.map_or("-".into(), |v| format!("{v:.4}")),
                format!("{:.3}", n.load),
            ]);
        }
        Text::new()
            .line(format!(
                "alpha {}  beta {}  libra_gamma {}  libra_delta {}",
                info.params.alpha, info.params.beta, info.params.libra_gamma, info.params.libra_delta
            ))
            .line(t)
    }
}

/// `admin user list`: a user a row.
impl Render for [libra_api::UserInfo] {
    fn text(&self) -> Text {
        let mut t = table(&["USER", "ADMIN", "STATE", "UNIX ACCOUNT", "AVAILABLE", "ON HOLD"]);
        for u in self {
            t.add_row(vec![
                u.name.clone(),
                if u.admin { "yes" } else { "" }.into(),
                u.state.clone(),
                format!("{}{}", u.unix_user, if u.allow_root { " (root allowed)" } else { "" }),
                money(u.available),
                money(u.held),
            ]);
        }
        Text::new().line(t)
    }
}

/// `admin audit`: an entry a row.
impl Render for [libra_api::AuditEntry] {
    fn text(&self) -> Text {
        let mut t = table(&["ID", "TIME", "CALLER", "ADDRESS", "REQUEST", "STATUS", "DETAIL"]);
        for e in self {
            t.add_row(vec![
                e.id.to_string(),
                fmt_time(e.time),
                e.caller.clone().unwrap_or_else(|| "-".into()),
                e.address.clone().unwrap_or_else(|| "-".into()),
                format!("{} {}", e.method, e.path),
                e.status.to_string(),
                e.detail.clone().unwrap_or_default().chars().take(120).collect(),
            ]);
        }
        Text::new().line(t)
    }
}

/// One account after a change: its credit, and its members when it is shared.
impl Render for AccountInfo {
    fn text(&self) -> Text {
        let a = self;
        let text = Text::new().line(account_line(a));
        if !a.personal && !a.members.is_empty() {
            return text.line(members_table(a));
        }
        text
    }
}

/// `admin account list`: an account a row.
impl Render for [AccountInfo] {
    fn text(&self) -> Text {
        let mut t =
            table(&["ACCOUNT", "AVAILABLE", "ON HOLD", "CHARGED", "CREDITED", "ALLOCATIONS", "MEMBERS"]);
        for a in self {
            t.add_row(vec![
                a.name.clone(),
                money(a.available),
                money(a.held),
                money(a.charged),
                money(a.credited),
                a.allocations.len().to_string(),
                a.members
                    .iter()
                    .map(|m| match m.limit {
                        Some(l) => format!("{} (limit {})", m.user, money(l)),
                        None => m.user.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]);
        }
        Text::new().line(t)
    }
}

/// "1 token", "2 other tokens".
pub(crate) fn tokens(n: u64, which: &str) -> String {
    format!("{n} {which}token{}", if n == 1 { "" } else { "s" })
}
