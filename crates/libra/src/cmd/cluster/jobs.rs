//! The users' job commands: status, cancel, balance, output (history: `queue.rs`).

use super::common::{fmt_dur, fmt_opt_time, fmt_time, money, now, print_json, table, Conn};
use anyhow::Result;
use anyhow::{anyhow, bail};
use clap::Args;
use libra_api::{parse_job_ref, Client, JobInfo};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One job in detail (default: your active and recent jobs): a job id (12), a task of an
    /// array (12_7), or an array's id (12) for all its tasks.
    pub job: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Cancel a job. Before it starts nothing is charged; after it has started you pay for the CPU
/// it used, pro rata to the estimate (cost x min(1, CPU used / (estimate x procs))), and the rest of the
/// hold is released. A job an administrator cancels costs nothing.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// A job id (12), a task of an array (12_7), or an array's id (12): every unfinished task of
    /// it, each settled as above.
    pub job: String,
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
    match a.job {
        Some(given) => {
            let j = match target(&c, &given)? {
                Target::Job(j) => *j,
                Target::Array(id) => {
                    let tasks = c.array(id)?;
                    if a.conn.json {
                        return print_json(&tasks);
                    }
                    println!("array {id}: {} tasks", tasks.len());
                    println!("{}", jobs_table(&tasks, false));
                    return Ok(());
                }
            };
            if a.conn.json {
                return print_json(&j);
            }
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
                ("command", j.command.join(" ").chars().take(120).collect()),
                ("nodes", j.nodes.join(",")),
                ("slurm job", j.slurm_job_id.map(|s| s.to_string()).unwrap_or_default()),
                ("share", format!("{:.3} CPU", j.share)),
                ("estimate", fmt_dur(j.estimate)),
                ("cpu used", format!("{} ({})", fmt_dur(j.cpu_seconds), progress(&j))),
                ("submitted", fmt_time(j.submit_time)),
                ("started", fmt_opt_time(j.start_time)),
                ("ended", fmt_opt_time(j.end_time)),
                ("deadline", fmt_time(j.deadline_at)),
                ("budget", money(j.budget)),
                ("cost held", money(j.cost)),
                ("charged", money(j.charged)),
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
            println!("{t}");
        }
        None => {
            let jobs: Vec<JobInfo> = c
                .jobs(false)?
                .into_iter()
                .filter(|j| j.state.is_active() || now() - j.submit_time < 3600.0)
                .collect();
            if a.conn.json {
                return print_json(&jobs);
            }
            println!("{}", jobs_table(&jobs, false));
        }
    }
    Ok(())
}

pub fn cancel(a: CancelArgs) -> Result<()> {
    let c = a.conn.client()?;
    // --json: one job's answer as before; an array's, every task's (a list).
    let cancelled = match target(&c, &a.job)? {
        Target::Job(j) => {
            let j = c.cancel(j.id)?;
            if a.conn.json {
                return print_json(&j);
            }
            vec![j]
        }
        Target::Array(id) => {
            let tasks = c.cancel_array(id)?;
            if a.conn.json {
                return print_json(&tasks);
            }
            tasks
        }
    };
    for j in &cancelled {
        println!(
            "job {} {}: charged {} (quoted {}): {}",
            libra_api::job_label(j),
            j.state,
            money(j.charged),
            money(j.cost),
            j.settlement.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

pub fn balance(a: BalanceArgs) -> Result<()> {
    let c = a.conn.client()?;
    if let Some(name) = &a.account {
        let acc = c.account(name)?;
        let entries = if a.ledger { Some(c.account_ledger(name)?) } else { None };
        if a.conn.json {
            return match entries {
                None => print_json(&acc),
                Some(e) => print_json(&serde_json::json!({"account": acc, "ledger": e})),
            };
        }
        if let Some(entries) = entries {
            let mut t = table(&["ENTRY", "TIME", "KIND", "USER", "JOB", "ALLOCATION", "AMOUNT"]);
            for e in entries {
                t.add_row(vec![
                    e.id.to_string(),
                    fmt_time(e.time),
                    e.kind,
                    e.user.unwrap_or_default(),
                    e.job.map(|j| j.to_string()).unwrap_or_default(),
                    e.allocation.map(|j| j.to_string()).unwrap_or_default(),
                    money(e.amount),
                ]);
            }
            println!("{t}");
        }
        print_account(&acc);
        return Ok(());
    }
    let b = c.balance()?;
    if a.conn.json && !a.ledger {
        return print_json(&b);
    }
    if a.ledger {
        let entries = c.ledger()?;
        if a.conn.json {
            return print_json(&serde_json::json!({"balance": b, "ledger": entries}));
        }
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
        println!("{t}");
    }
    let mut t = table(&["USER", "AVAILABLE", "ON HOLD", "CHARGED", "DEPOSITED"]);
    t.add_row(vec![b.user, money(b.available), money(b.held), money(b.charged), money(b.deposited)]);
    println!("{t}");
    // The shared accounts the user may charge, when there are any (a user in none sees what
    // they always saw).
    let accounts = c.accounts()?;
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
        println!("{t}");
    }
    Ok(())
}

/// One account as `libra balance --account` shows it.
fn print_account(m: &libra_api::MyAccount) {
    let a = &m.account;
    println!(
        "account {}{}{}",
        a.name,
        if a.personal { " (personal)" } else { "" },
        if m.default { ", your default" } else { "" }
    );
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
    println!("{t}");
    if let Some(p) = a.period_start {
        println!("allocation period since {}", fmt_time(p));
    }
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
        println!("{t}");
    }
    if !a.personal {
        println!("{}", members_table(a));
    }
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

pub fn output(a: OutputArgs) -> Result<()> {
    let c = a.conn.client()?;
    let id = match target(&c, &a.job)? {
        Target::Job(j) => j.id,
        Target::Array(id) => {
            bail!("job id: {id} is an array; give one of its tasks ({id}_TASK), as `libra status {id}` lists them")
        }
    };
    let o = c.output(id)?;
    if a.conn.json && !a.follow {
        return print_json(&o);
    }
    if o.truncated {
        eprintln!("(only the end of a long output was kept)");
    }
    let text = |p: &libra_api::OutputPart| if a.stderr { p.stderr.clone() } else { p.stdout.clone() };
    let with_text = o.parts.iter().filter(|p| !text(p).is_empty()).count();
    if o.parts.is_empty() || with_text == 0 {
        print!("{}", if a.stderr { &o.stderr } else { &o.stdout });
    } else {
        for p in &o.parts {
            if with_text > 1 {
                println!("== rank {} on {} ==", p.rank, p.node);
            }
            print!("{}", text(p));
        }
    }
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
