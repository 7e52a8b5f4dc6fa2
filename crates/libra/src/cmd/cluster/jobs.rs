//! The users' job commands: status, cancel, balance, output (history: `queue.rs`).

use super::common::{fmt_dur, fmt_opt_time, fmt_time, money, now, Conn};
use crate::output::{emit, table, Render, Said, Text};
use anyhow::Result;
use anyhow::{anyhow, bail};
use clap::Args;
use libra_api::{parse_job_ref, Client, JobInfo};
use serde::Serialize;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One job in detail (default: your active and recent jobs): a job id (12), a task of an
    /// array (12_7), or an array's id (12) for all its tasks. Several (`libra status 12 13`, or
    /// `12,13` as squeue -j takes them): a table of those.
    #[arg(value_name = "JOB", value_delimiter = ',')]
    pub jobs: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Cancel a job. Before it starts nothing is charged; after it has started you pay for the CPU
/// it used, pro rata to the estimate (cost x min(1, CPU used / (estimate x procs))), and the rest of the
/// hold is released. A job an administrator cancels costs nothing.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// A job id (12), a task of an array (12_7), or an array's id (12): every unfinished task of
    /// it, each settled as above. Several may be given (`libra cancel 12 13 14_2`), as scancel
    /// takes them: each is cancelled on its own, and one that cannot be does not stop the rest.
    #[arg(required = true, value_name = "JOB")]
    pub jobs: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// Also list the ledger entries (deposits, holds, charges, releases) of your personal
    /// account, or with --account of that account (like sbank balance statement).
    #[arg(long)]
    pub ledger: bool,
    /// One account (like sbank balance -a): its credit, what is held and available, and your
    /// limit and use in it. Your personal account is named after you. Administrators may name
    /// any account.
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// A job's output as its nodes have sent it so far: a running job's too. The files themselves
/// are in the job's working directory on its nodes (`-o`/`-e`, by default `libra-JOB.out`).
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// A job id (12), or a task of an array (12_7).
    pub job: String,
    /// Show standard error instead of standard output (when the job wrote them to different
    /// files with `-e`).
    #[arg(long)]
    pub stderr: bool,
    /// Keep printing output as it arrives until the job ends (like tail -f).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print another user's job's output byte for byte on a terminal too. By default, where
    /// standard output is a terminal, the output of a job that is not yours shows its control
    /// characters as escapes (`\u{1b}`), as `libra status` shows commands: a stranger's job
    /// could otherwise retitle, rewrite or query an administrator's terminal. Your own jobs'
    /// output, and any output sent to a file or a pipe, is printed byte for byte either way.
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub conn: Conn,
}

fn progress(j: &JobInfo) -> String {
    format!("{:.0}%", (j.cpu_seconds / (j.estimate * j.procs.max(1) as f64).max(1e-9) * 100.0).min(999.0))
}

pub fn jobs_table(jobs: &[JobInfo], with_user: bool) -> comfy_table::Table {
    let mut h = vec!["JOB"];
    if with_user {
        h.push("USER");
    }
    h.extend(["NAME", "STATE", "NODES", "SHARE", "CPU", "DONE", "DUE", "COST", "REASON"]);
    let mut t = table(&h);
    let now = now();
    for j in jobs {
        let mut row = vec![libra_api::job_label(j)];
        if with_user {
            row.push(j.user.clone());
        }
        let due = if j.state.is_active() {
            format!("in {}", fmt_dur(j.deadline_at - now))
        } else {
            fmt_time(j.deadline_at)
        };
        row.extend([
            j.name.clone().unwrap_or_default(),
            j.state.to_string(),
            j.nodes.join(","),
            format!("{:.3}", j.share),
            fmt_dur(j.cpu_seconds),
            progress(j),
            due,
            money(if j.state.is_active() { j.cost } else { j.charged }),
            j.reason.clone().unwrap_or_default(),
        ]);
        t.add_row(row);
    }
    t
}

/// Jobs, a row each (`libra status`, `libra admin jobs`); in JSON the list.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Jobs<'a> {
    jobs: &'a [JobInfo],
    #[serde(skip)]
    with_user: bool,
}

impl<'a> Jobs<'a> {
    pub fn new(jobs: &'a [JobInfo], with_user: bool) -> Self {
        Jobs { jobs, with_user }
    }
}

impl Render for Jobs<'_> {
    fn text(&self) -> Text {
        Text::new().line(jobs_table(self.jobs, self.with_user))
    }
}

/// One job in detail (`libra status JOB`): a field a row.
impl Render for JobInfo {
    fn text(&self) -> Text {
        let j = self;
        let mut t = table(&["FIELD", "VALUE"]);
        let rows: Vec<(&str, String)> = vec![
            ("job", j.id.to_string()),
            (
                "array task",
                match (j.array_id, j.array_task) {
                    (Some(a), Some(t)) => format!("{a}_{t} (task {t} of array {a})"),
                    _ => String::new(),
                },
            ),
            ("user", j.user.clone()),
            ("name", j.name.clone().unwrap_or_default()),
            (
                "state",
                if j.waiting {
                    format!("{} (waiting on dependencies)", j.state)
                } else {
                    j.state.to_string()
                },
            ),
            ("dependencies", libra_core::dependency::format_list(&j.dependencies)),
            ("command", {
                let shown: String = j.command.join(" ").chars().take(120).collect();
                match j.command_cut {
                    Some(at) => format!(
                        "{shown} (cut to its first KiB on {}: your ended jobs kept more than the server's command_quota_mb of commands)",
                        fmt_time(at)
                    ),
                    None => shown,
                }
            }),
            ("nodes", j.nodes.join(",")),
            ("slurm job", j.slurm_job_id.map(|s| s.to_string()).unwrap_or_default()),
            ("share", format!("{:.3} CPU", j.share)),
            ("estimate", fmt_dur(j.estimate)),
            ("cpu used", format!("{} ({})", fmt_dur(j.cpu_seconds), progress(j))),
            ("submitted", fmt_time(j.submit_time)),
            ("started", fmt_opt_time(j.start_time)),
            ("ended", fmt_opt_time(j.end_time)),
            ("deadline", fmt_time(j.deadline_at)),
            ("budget", money(j.budget)),
            ("cost held", money(j.cost)),
            (
                "charged",
                if !j.state.is_active() && j.parts_running > 0 {
                    // Its nodes have still to stop it: the CPU to their kill is billed too.
                    format!("{} so far (stopping on {} node(s))", money(j.charged), j.parts_running)
                } else {
                    money(j.charged)
                },
            ),
            ("exit code", j.exit_code.map(|c| c.to_string()).unwrap_or_default()),
            ("reason", j.reason.clone().unwrap_or_default()),
            ("billing", j.settlement.clone().unwrap_or_default()),
            ("cpus per task", j.cpus_per_task.to_string()),
            ("time limit", j.time_limit.map(fmt_dur).unwrap_or_else(|| "none".into())),
            ("working dir", j.workdir.clone().unwrap_or_else(|| "(the node's)".into())),
            (
                "output",
                j.stdout.clone().unwrap_or_else(|| {
                    if j.workdir.is_some() {
                        "libra-%j.out".into()
                    } else {
                        String::new()
                    }
                }),
            ),
        ];
        for (k, v) in rows {
            t.add_row(vec![k.to_string(), v]);
        }
        Text::new().line(t)
    }
}

/// What `ID` or `ID_TASK` names: one job, or (`ID` alone, when it is an array's first task) the
/// whole array.
enum Target {
    Job(Box<JobInfo>),
    Array(u64),
}

fn target(c: &Client, given: &str) -> Result<Target> {
    let (id, task) = parse_job_ref(given).map_err(|e| anyhow!(e))?;
    match task {
        Some(t) => c
            .array(id)?
            .into_iter()
            .find(|j| j.array_task == Some(t))
            .map(|j| Target::Job(Box::new(j)))
            .ok_or_else(|| anyhow!("job id: array {id} has no task {t}")),
        None => {
            let j = c.job(id)?;
            Ok(if j.array_id == Some(id) { Target::Array(id) } else { Target::Job(Box::new(j)) })
        }
    }
}

pub fn status(a: StatusArgs) -> Result<()> {
    let c = a.conn.client()?;
    let json = a.conn.json;
    match a.jobs.as_slice() {
        [] => {
            let jobs: Vec<JobInfo> = c
                .jobs(false)?
                .into_iter()
                .filter(|j| j.state.is_active() || now() - j.submit_time < 3600.0)
                .collect();
            emit(&Jobs::new(&jobs, false), json)
        }
        [given] => match target(&c, given)? {
            Target::Job(j) => emit(&*j, json),
            Target::Array(id) => {
                let tasks = c.array(id)?;
                let text = Text::new()
                    .line(format!("array {id}: {} tasks", tasks.len()))
                    .line(jobs_table(&tasks, false));
                emit(&Said::new(&tasks, text), json)
            }
        },
        several => {
            // Every one asked for, or the first that cannot be shown (a typo, someone else's).
            let mut jobs = Vec::new();
            for given in several {
                match target(&c, given).map_err(|e| anyhow!("{given}: {e:#}"))? {
                    Target::Job(j) => jobs.push(*j),
                    Target::Array(id) => jobs.extend(c.array(id)?),
                }
            }
            emit(&Jobs::new(&jobs, false), json)
        }
    }
}

/// What `libra cancel` says of each job it cancelled.
fn cancelled_text(jobs: &[JobInfo]) -> Text {
    jobs.iter().fold(Text::new(), |t, j| {
        let note = j.settlement.as_deref().unwrap_or("");
        // A job that ran is billed here for the CPU its node last reported; the rest, to the
        // node's kill, when the node reports it (`libra_server::settle::cpu_after_settling`).
        let rest = if j.start_time.is_some() && !note.starts_with("free") {
            format!("; the CPU it uses until its node stops it is added when the node reports it (libra status {})", j.id)
        } else {
            String::new()
        };
        t.line(format!(
            "job {} {}: charged {} (quoted {}): {note}{rest}",
            libra_api::job_label(j),
            j.state,
            money(j.charged),
            money(j.cost),
        ))
    })
}

pub fn cancel(a: CancelArgs) -> Result<()> {
    let c = a.conn.client()?;
    // Each given job's answer, and whether it named an array (whose answer is a list).
    let one = |job: &str| -> Result<(Vec<JobInfo>, bool)> {
        Ok(match target(&c, job)? {
            Target::Job(j) => (vec![c.cancel(j.id)?], false),
            Target::Array(id) => (c.cancel_array(id)?, true),
        })
    };
    if let [job] = a.jobs.as_slice() {
        // --json: one job's answer as before; an array's, every task's (a list).
        return match one(job)? {
            (jobs, false) => emit(&Said::new(&jobs[0], cancelled_text(&jobs)), a.conn.json),
            (jobs, true) => emit(&Said::new(&jobs, cancelled_text(&jobs)), a.conn.json),
        };
    }
    // Several: every one is tried; --json lists every job cancelled; the failures are said on
    // standard error and make the exit status 1.
    let (mut done, mut failed) = (Vec::new(), 0);
    for job in &a.jobs {
        match one(job) {
            Ok((jobs, _)) => done.extend(jobs),
            Err(e) => {
                eprintln!("error: {job}: {e:#}");
                failed += 1;
            }
        }
    }
    emit(&Said::new(&done, cancelled_text(&done)), a.conn.json)?;
    if failed > 0 {
        bail!("{failed} of {} could not be cancelled", a.jobs.len());
    }
    Ok(())
}

pub fn balance(a: BalanceArgs) -> Result<()> {
    let c = a.conn.client()?;
    let json = a.conn.json;
    if let Some(name) = &a.account {
        let acc = c.account(name)?;
        let entries = if a.ledger { Some(c.account_ledger(name)?) } else { None };
        let mut text = Text::new();
        if let Some(entries) = &entries {
            let mut t = table(&["ENTRY", "TIME", "KIND", "USER", "JOB", "ALLOCATION", "AMOUNT"]);
            for e in entries {
                t.add_row(vec![
                    e.id.to_string(),
                    fmt_time(e.time),
                    e.kind.clone(),
                    e.user.clone().unwrap_or_default(),
                    e.job.map(|j| j.to_string()).unwrap_or_default(),
                    e.allocation.map(|j| j.to_string()).unwrap_or_default(),
                    money(e.amount),
                ]);
            }
            text = text.line(t);
        }
        let text = account_text(text, &acc);
        return match entries {
            None => emit(&Said::new(&acc, text), json),
            Some(e) => emit(&Said::new(&serde_json::json!({"account": acc, "ledger": e}), text), json),
        };
    }
    let b = c.balance()?;
    let entries = if a.ledger { Some(c.ledger()?) } else { None };
    // The shared accounts are for people only: JSON keeps the answer it always had.
    let accounts = if json { None } else { Some(c.accounts()?) };
    let text = balance_text(&b, entries.as_deref(), accounts.as_deref());
    match entries {
        None => emit(&Said::new(&b, text), json),
        Some(e) => emit(&Said::new(&serde_json::json!({"balance": b, "ledger": e}), text), json),
    }
}

/// `libra balance` for people: the ledger (with --ledger), the user's credit, and the shared
/// accounts they may charge.
fn balance_text(
    b: &libra_api::Balance,
    entries: Option<&[libra_api::LedgerEntry]>,
    accounts: Option<&[libra_api::MyAccount]>,
) -> Text {
    let mut text = Text::new();
    if let Some(entries) = entries {
        let mut t = table(&["ENTRY", "TIME", "KIND", "JOB", "AMOUNT"]);
        for e in entries {
            t.add_row(vec![
                e.id.to_string(),
                fmt_time(e.time),
                format!("{:?}", e.kind).to_lowercase(),
                e.job.map(|j| j.to_string()).unwrap_or_default(),
                money(e.amount),
            ]);
        }
        text = text.line(t);
    }
    let mut t = table(&["USER", "AVAILABLE", "ON HOLD", "CHARGED", "DEPOSITED"]);
    t.add_row(vec![b.user.clone(), money(b.available), money(b.held), money(b.charged), money(b.deposited)]);
    text = text.line(t);
    // The shared accounts the user may charge, when there are any (a user in none sees what
    // they always saw).
    let accounts = accounts.unwrap_or_default();
    if accounts.len() > 1 || accounts.first().is_some_and(|a| !a.default) {
        let mut t = table(&[
            "ACCOUNT",
            "DEFAULT",
            "AVAILABLE",
            "ON HOLD",
            "CHARGED",
            "YOUR LIMIT",
            "YOUR USE",
            "AVAILABLE TO YOU",
        ]);
        for m in accounts {
            t.add_row(vec![
                format!("{}{}", m.account.name, if m.account.personal { " (personal)" } else { "" }),
                if m.default { "yes" } else { "" }.into(),
                money(m.account.available),
                money(m.account.held),
                money(m.account.charged),
                m.limit.map_or("-".into(), money),
                money(m.used),
                money(m.available_to_me),
            ]);
        }
        text = text.line(t);
    }
    text
}

/// One account as `libra balance --account` shows it, after `text`.
fn account_text(text: Text, m: &libra_api::MyAccount) -> Text {
    let a = &m.account;
    let mut text = text.line(format!(
        "account {}{}{}",
        a.name,
        if a.personal { " (personal)" } else { "" },
        if m.default { ", your default" } else { "" }
    ));
    let mut t =
        table(&["CREDITED", "CHARGED", "ON HOLD", "AVAILABLE", "YOUR LIMIT", "YOUR USE", "AVAILABLE TO YOU"]);
    t.add_row(vec![
        money(a.credited),
        money(a.charged),
        money(a.held),
        money(a.available),
        m.limit.map_or("-".into(), money),
        money(m.used),
        money(m.available_to_me),
    ]);
    text = text.line(t).line_if(a.period_start.map(|p| format!("allocation period since {}", fmt_time(p))));
    if !a.allocations.is_empty() {
        let mut t = table(&["ALLOCATION", "AMOUNT", "START", "END", "REMAINING", "STATE"]);
        let n = now();
        for al in &a.allocations {
            t.add_row(vec![
                al.id.to_string(),
                money(al.amount),
                fmt_time(al.start),
                fmt_time(al.end),
                money(al.remaining),
                if al.active {
                    "active"
                } else if n < al.start {
                    "not started"
                } else {
                    "expired"
                }
                .into(),
            ]);
        }
        text = text.line(t);
    }
    if !a.personal {
        text = text.line(members_table(a));
    }
    text
}

/// An account's members, their limits and use.
pub fn members_table(a: &libra_api::AccountInfo) -> comfy_table::Table {
    let mut t = table(&["MEMBER", "LIMIT", "USED (PERIOD)", "DEFAULT"]);
    for m in &a.members {
        t.add_row(vec![
            m.user.clone(),
            m.limit.map_or("-".into(), money),
            money(m.used),
            if m.default { "yes" } else { "" }.into(),
        ]);
    }
    t
}

/// A job's output so far (`libra output`): the text of its ranks, or the server's answer.
#[derive(Serialize)]
#[serde(transparent)]
struct JobOutput<'a> {
    o: &'a libra_api::JobOutput,
    #[serde(skip)]
    stderr: bool,
    /// Shown with control characters as escapes (`Text::shown`), not byte for byte.
    #[serde(skip)]
    escaped: bool,
}

impl Render for JobOutput<'_> {
    fn text(&self) -> Text {
        let (o, stderr) = (self.o, self.stderr);
        fn text(p: &libra_api::OutputPart, stderr: bool) -> &str {
            if stderr {
                &p.stderr
            } else {
                &p.stdout
            }
        }
        let start = if self.escaped { Text::new() } else { Text::verbatim("") };
        let with_text = o.parts.iter().filter(|p| !text(p, stderr).is_empty()).count();
        if o.parts.is_empty() || with_text == 0 {
            return start.raw(if stderr { &o.stderr } else { &o.stdout });
        }
        o.parts.iter().fold(start, |t, p| {
            let t = if with_text > 1 { t.line(format!("== rank {} on {} ==", p.rank, p.node)) } else { t };
            t.raw(text(p, stderr))
        })
    }
}

pub fn output(a: OutputArgs) -> Result<()> {
    use std::io::IsTerminal;
    let c = a.conn.client()?;
    let job = match target(&c, &a.job)? {
        Target::Job(j) => j,
        Target::Array(id) => {
            bail!("job id: {id} is an array; give one of its tasks ({id}_TASK), as `libra status {id}` lists them")
        }
    };
    let id = job.id;
    // A stranger's bytes reach this terminal only as text (`--raw` says otherwise). Whose the
    // caller is costs a request, asked only then; not knowing counts as a stranger's.
    let escaped = !a.raw
        && std::io::stdout().is_terminal()
        && c.balance().ok().map(|b| b.user).as_deref() != Some(job.user.as_str());
    let o = c.output(id)?;
    let sofar = JobOutput { o: &o, stderr: a.stderr, escaped };
    if a.conn.json && !a.follow {
        return emit(&sofar, true);
    }
    if let Some(at) = o.removed {
        let why = match o.removed_for.as_deref() {
            Some("output_quota_mb") => {
                "your jobs' kept output passed the server's output_quota_mb, and the output of the jobs that ended first goes first"
            }
            _ => "it keeps output for output_keep_days after a job ends",
        };
        eprintln!("(the server removed this job's output on {}: {why})", crate::cmd::time::fmt_time(at));
    } else if o.truncated {
        eprintln!(
            "(only the end of a long output was kept: the server keeps the last MiB of each stream per node; \
             the whole of it is in the job's output file on its nodes, which `libra status {id}` names)"
        );
    }
    // --follow streams text (what arrives later is text too), --json or not.
    emit(&sofar, false)?;
    let text = |p: &libra_api::OutputPart| {
        let t = if a.stderr { &p.stderr } else { &p.stdout };
        if escaped {
            Text::new().raw(t).shown().into_owned()
        } else {
            t.clone()
        }
    };
    if !a.follow {
        if o.state.is_active() {
            eprintln!("(job {} is {}: this is its output so far; --follow waits for more)", o.id, o.state);
        }
        return Ok(());
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // Each rank's files, from where what was printed ends.
    let mut ends: Vec<(u32, u64, u64)> =
        o.parts.iter().map(|p| (p.rank, p.stdout_end, p.stderr_end)).collect();
    let mut state = o.state;
    while state.is_active() {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let job = c.job(id)?;
        state = job.state;
        if ends.is_empty() {
            // Queued jobs have no nodes yet.
            ends = c.output(id)?.parts.iter().map(|p| (p.rank, 0, 0)).collect();
        }
        for (rank, out_end, err_end) in &mut ends {
            let more = c.output_from(id, *rank, *out_end, *err_end)?;
            for p in more.parts.iter().filter(|p| p.rank == *rank) {
                print!("{}", text(p));
                (*out_end, *err_end) = (p.stdout_end.max(*out_end), p.stderr_end.max(*err_end));
            }
        }
        let _ = std::io::stdout().flush();
    }
    eprintln!("(job {} {})", id, state);
    Ok(())
}
