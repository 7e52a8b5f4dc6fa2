//! What Slurm users reach for every day: `libra queue` (squeue), `libra update` (scontrol
//! update), `libra hold` / `libra release` (scontrol hold/release) and `libra history` with
//! sacct's filters and output forms.

use super::common::{fmt_dur, fmt_opt_time, fmt_time, money, now, Conn};
use crate::cmd::time::{parse_deadline, parse_instant};
use crate::output::{emit, table, Render, Said, Text};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use libra_api::{ChangeAnswer, HistoryQuery, JobInfo, JobState, QueueQuery, UpdateRequest};
use libra_core::Money;
use serde::Serialize;

/// `libra queue`'s long help (`--help`, the man page).
pub const QUEUE_ABOUT: &str =
    "Every unfinished job in the cluster (like squeue), soonest deadline first.\n\nOther users' \
     jobs show as `other`, without name, command or money (administrators see everything): the \
     queue tells you how busy each node is and how tight the promises are. Columns: the job's \
     state, its nodes, the CPU share each node gives it, and the time left to its deadline; your \
     own jobs also show what is held for them.\n\nExamples: `libra queue`, `libra queue --state \
     RUNNING --node n1`, `libra queue --user alice` (your own name; an administrator may name anyone).";

#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Only this user's jobs: your own name, or anyone's for an administrator.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Only jobs in this state: PENDING, RUNNING, SUSPENDED or HELD.
    #[arg(long, short = 't')]
    pub state: Option<String>,
    /// Only jobs on this node.
    #[arg(long, short = 'w')]
    pub node: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `libra update`'s long help (`--help`, the man page).
pub const UPDATE_ABOUT: &str =
    "Change an unfinished job's deadline and/or budget (Slurm's `scontrol update`).\n\nThe change \
     is decided at once, by the same admission policy as a submission, on the job's own nodes for \
     the work it has left: accepted, the job holds the new promise, its price is recomputed (what \
     its CPU time so far has earned plus the price of the rest) and the hold on your credit \
     follows it, never above the new budget; a running job's node gives it the share the new \
     deadline needs from its next exchange with the server. Refused, the job keeps its old \
     promise, price and hold, and you are told why and what would be accepted now. A later \
     deadline or a higher budget is usually accepted; an earlier deadline only if the nodes can \
     still keep it and every other promise. A HELD job just records the new terms: they are \
     decided when it is released.\n\nExamples: `libra update 42 --deadline 3h`, `libra update 42 \
     --budget 80`, `libra update 42 -d 2026-11-23T09:00:00Z -b 120`.";

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The job's number (as `libra submit`, `libra status` and `libra queue` show it).
    pub job: u64,
    /// New deadline: relative from now (2h, 90m) or absolute (2026-11-22T21:00:00Z, @UNIXSECONDS).
    #[arg(long, short = 'd')]
    pub deadline: Option<String>,
    /// New budget in credits (500, 12.50): the most the job may be charged.
    #[arg(long, short = 'b')]
    pub budget: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `libra hold`'s long help (`--help`, the man page).
pub const HOLD_ABOUT: &str =
    "Hold a job that has not started yet (Slurm's `scontrol hold`).\n\nHolding gives up the job's \
     promise: its hold on your credit is released and its place on the nodes freed, and no node \
     starts it. `libra release JOB` admits it again exactly as a new submission would be \
     (accepted at the price of the moment, or refused with a suggestion). A held job whose \
     deadline passes ends, charged nothing. Only PENDING jobs that no node has started can be \
     held.";

#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The job's number (as `libra submit`, `libra status` and `libra queue` show it).
    pub job: u64,
    #[command(flatten)]
    pub conn: Conn,
}

/// `libra release`'s long help (`--help`, the man page).
pub const RELEASE_ABOUT: &str =
    "Release a held job (Slurm's `scontrol release`): it is admitted again as a new submission \
     would be, for its deadline and budget, at the prices of the moment.\n\nRefused, it stays \
     HELD and you are told why and what would be accepted; change its terms with `libra update \
     JOB --deadline D --budget B` and release it again, or cancel it.";

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The job's number (as `libra submit`, `libra status` and `libra queue` show it).
    pub job: u64,
    #[command(flatten)]
    pub conn: Conn,
}

/// `libra history`'s long help (`--help`, the man page).
pub const HISTORY_ABOUT: &str =
    "Your jobs, finished and unfinished, filtered like Slurm's sacct (filtering is done by the \
     server).\n\nTimes (--starttime, --endtime) are `now`, `now-2h`, a duration meaning that long \
     ago (2h, 1d), a date (2026-11-22, midnight UTC), or a time (2026-11-22T21:00:00Z, \
     @UNIXSECONDS).\n\nExamples: `libra history --starttime 1d --state COMPLETED`, `libra history \
     -S 2026-11-01 -E 2026-11-08 --format jobid,state,cost --parsable`.";

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only jobs unfinished at or ended after this time.
    #[arg(long, short = 'S')]
    pub starttime: Option<String>,
    /// Only jobs submitted at or before this time.
    #[arg(long, short = 'E')]
    pub endtime: Option<String>,
    /// Only jobs in this state (PENDING, RUNNING, COMPLETED, DEADLINE, HELD, ...).
    #[arg(long, short = 's')]
    pub state: Option<String>,
    /// Another user's jobs (administrators only), or `all` for everyone's.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// The columns to print, a comma list (case does not matter): jobid, jobname, user, state,
    /// submit, start, end, deadline, nodes, share, cputime, cost, budget, exitcode, reason, billing,
    /// account; and sacct's elapsed, nodelist, nnodes, alloccpus, timelimit, totalcpu, workdir.
    #[arg(long, short = 'o')]
    pub format: Option<String>,
    /// Print `|`-separated fields with a header line (like sacct -p), for scripts.
    #[arg(long, short = 'p')]
    pub parsable: bool,
    #[command(flatten)]
    pub conn: Conn,
}

fn left(deadline_at: f64, now: f64) -> String {
    if deadline_at > now {
        fmt_dur(deadline_at - now)
    } else {
        format!("passed {} ago", fmt_dur(now - deadline_at))
    }
}

pub fn queue(a: QueueArgs) -> Result<()> {
    if let Some(s) = &a.state {
        let ok = [JobState::Pending, JobState::Running, JobState::Suspended, JobState::Held];
        if !JobState::parse(s).is_some_and(|st| ok.contains(&st)) {
            bail!(
                "--state: '{s}' is not accepted; the queue holds only unfinished jobs: {}",
                ok.map(|s| s.as_str()).join(", ")
            );
        }
    }
    let q = QueueQuery { user: a.user, state: a.state, node: a.node };
    emit(a.conn.client()?.queue(&q)?.as_slice(), a.conn.json)
}

/// `libra queue`: an unfinished job a row.
impl Render for [libra_api::QueueEntry] {
    fn text(&self) -> Text {
        let mut t =
            table(&["JOB", "USER", "NAME", "STATE", "NODES", "SHARE", "TIME LEFT", "DEADLINE", "HELD"]);
        let now = now();
        for j in self {
            t.add_row(vec![
                match (j.array_id, j.array_task) {
                    (Some(a), Some(t)) => format!("{a}_{t}"),
                    _ => j.id.to_string(),
                },
                j.user.clone(),
                j.name.clone().unwrap_or_default(),
                if j.waiting { format!("{} (dependency)", j.state) } else { j.state.to_string() },
                if j.nodes.is_empty() { "(queued)".into() } else { j.nodes.join(",") },
                format!("{:.3}", j.share),
                left(j.deadline_at, now),
                fmt_time(j.deadline_at),
                j.cost.map(money).unwrap_or_default(),
            ]);
        }
        Text::new().line(t)
    }
}

/// What `libra update` and `libra release` say of a decision on a changed job.
#[derive(Serialize)]
#[serde(transparent)]
struct Answer<'a> {
    answer: &'a ChangeAnswer,
    #[serde(skip)]
    what: &'a str,
}

impl Render for Answer<'_> {
    fn text(&self) -> Text {
        let (a, what) = (self.answer, self.what);
        let j = &a.job;
        if a.accepted {
            return Text::new().line(match &a.reason {
                Some(r) => format!("job {} {what}: {r}", j.id),
                None => format!(
                    "job {} {what}: due {} (in {}), share {:.3} CPU on {}, {} on hold (was {}), budget {}",
                    j.id,
                    fmt_time(j.deadline_at),
                    fmt_dur(j.deadline_at - now()),
                    j.share,
                    if j.nodes.is_empty() { "(queued)".into() } else { j.nodes.join(",") },
                    money(j.cost),
                    money(a.previous_cost),
                    money(j.budget)
                ),
            });
        }
        Text::new()
            .line(format!("job {} {what} refused: {}", j.id, a.reason.as_deref().unwrap_or("no reason given")))
            .line(match &a.suggestion {
                Some(s) => format!(
                    "suggestion: a deadline of {} (in {}) and a budget of {} would be accepted now:\n  libra update {} --deadline @{:.0} --budget {}",
                    fmt_time(s.deadline_at),
                    fmt_dur(s.deadline_at - now()),
                    s.budget,
                    j.id,
                    s.deadline_at.ceil(),
                    s.budget
                ),
                None => "no deadline or budget would be accepted now".into(),
            })
    }
}

pub fn update(a: UpdateArgs) -> Result<()> {
    let now = now();
    let deadline_at = a
        .deadline
        .as_deref()
        .map(|d| parse_deadline(d, now).map(|rel| now + rel))
        .transpose()
        .map_err(|e| anyhow!("--deadline: {e}"))?;
    let budget =
        a.budget.as_deref().map(|b| b.parse::<Money>()).transpose().map_err(|e| anyhow!("--budget: {e}"))?;
    // Checked here as the server checks it, so that the answer names the flag.
    if let Some(b) = budget {
        libra_core::job::check_budget(b).map_err(|e| anyhow!("--{e}"))?;
    }
    if deadline_at.is_none() && budget.is_none() {
        bail!("give --deadline, --budget or both (e.g. libra update {} --deadline 3h --budget 80)", a.job);
    }
    let answer = a.conn.client()?.update(a.job, &UpdateRequest { deadline_at, budget })?;
    let what = if answer.accepted { "updated" } else { "update" };
    emit(&Answer { answer: &answer, what }, a.conn.json)?;
    if !answer.accepted {
        bail!("job {} keeps its old deadline and budget", a.job);
    }
    Ok(())
}

pub fn hold(a: HoldArgs) -> Result<()> {
    let j = a.conn.client()?.hold(a.job)?;
    let said = format!(
        "job {} HELD: its promise is given up and nothing is on hold; `libra release {}` admits it again",
        j.id, j.id
    );
    emit(&Said::new(&j, said), a.conn.json)
}

pub fn release(a: ReleaseArgs) -> Result<()> {
    let answer = a.conn.client()?.release(a.job)?;
    let what = if answer.accepted { "released" } else { "release" };
    emit(&Answer { answer: &answer, what }, a.conn.json)?;
    if !answer.accepted {
        bail!("job {} stays HELD", a.job);
    }
    Ok(())
}

/// A column of `libra history`: its sacct name and how a job shows in it.
type Column = (&'static str, fn(&JobInfo) -> String);

const COLUMNS: &[Column] = &[
    ("JobID", libra_api::job_label),
    ("JobName", |j| j.name.clone().unwrap_or_default()),
    ("User", |j| j.user.clone()),
    ("State", |j| j.state.to_string()),
    ("Submit", |j| fmt_time(j.submit_time)),
    ("Start", |j| fmt_opt_time(j.start_time)),
    ("End", |j| fmt_opt_time(j.end_time)),
    ("Deadline", |j| fmt_time(j.deadline_at)),
    ("Nodes", |j| j.nodes.join(",")),
    ("Share", |j| format!("{:.3}", j.share)),
    ("CPUTime", |j| fmt_dur(j.cpu_seconds)),
    ("Cost", |j| money(if j.state.is_active() { j.cost } else { j.charged })),
    ("Budget", |j| money(j.budget)),
    ("ExitCode", |j| j.exit_code.map(|c| format!("{c}:0")).unwrap_or_default()),
    ("Reason", |j| j.reason.clone().unwrap_or_default()),
    ("Billing", |j| j.settlement.clone().unwrap_or_default()),
    ("Account", |j| j.account.clone().unwrap_or_default()),
    // sacct's names for what a Slurm user's scripts ask: the wall time from start to end (or
    // to now while running), the nodes, how many, the CPUs allocated (each node's cpus per
    // task), the time limit, the CPU time again, and the working directory.
    ("Elapsed", |j| match j.start_time {
        Some(start) => fmt_dur(j.end_time.unwrap_or_else(now) - start),
        None => String::new(),
    }),
    ("NodeList", |j| j.nodes.join(",")),
    ("NNodes", |j| j.procs.to_string()),
    ("AllocCPUS", |j| (u64::from(j.procs) * u64::from(j.cpus_per_task.max(1))).to_string()),
    ("Timelimit", |j| j.time_limit.map(fmt_dur).unwrap_or_else(|| "UNLIMITED".into())),
    ("TotalCPU", |j| fmt_dur(j.cpu_seconds)),
    ("WorkDir", |j| j.workdir.clone().unwrap_or_default()),
];

const DEFAULT_FORMAT: &str = "jobid,jobname,user,state,submit,start,end,cputime,cost,budget,exitcode,billing";

/// The columns `--format` names, in its order; an unknown one is refused with the list.
fn columns(format: &str) -> Result<Vec<&'static Column>> {
    format
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            COLUMNS.iter().find(|(name, _)| name.eq_ignore_ascii_case(c)).ok_or_else(|| {
                anyhow!(
                    "--format: '{c}' is not a column; accepted: {}",
                    COLUMNS.iter().map(|(n, _)| n.to_ascii_lowercase()).collect::<Vec<_>>().join(", ")
                )
            })
        })
        .collect::<Result<Vec<_>>>()
        .and_then(|v| if v.is_empty() { bail!("--format: give at least one column") } else { Ok(v) })
}

/// sacct -p: a header line, then one line per job, every field followed by `|`.
fn parsable(jobs: &[JobInfo], cols: &[&Column]) -> String {
    let mut out = String::new();
    for (name, _) in cols {
        out.push_str(name);
        out.push('|');
    }
    out.push('\n');
    for j in jobs {
        for (_, f) in cols {
            // A field may not carry the separator or a line break.
            out.push_str(&f(j).replace(['|', '\n'], " "));
            out.push('|');
        }
        out.push('\n');
    }
    out
}

pub fn history(a: HistoryArgs) -> Result<()> {
    let now = now();
    let cols = columns(a.format.as_deref().unwrap_or(DEFAULT_FORMAT))?;
    if let Some(s) = &a.state {
        if JobState::parse(s).is_none() {
            bail!(
                "--state: '{s}' is not a state; accepted: {}",
                JobState::ALL.map(|s| s.as_str()).join(", ")
            );
        }
    }
    let start = a
        .starttime
        .as_deref()
        .map(|t| parse_instant(t, now))
        .transpose()
        .map_err(|e| anyhow!("--starttime: {e}"))?;
    let end = a
        .endtime
        .as_deref()
        .map(|t| parse_instant(t, now))
        .transpose()
        .map_err(|e| anyhow!("--endtime: {e}"))?;
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            bail!("--endtime: {} is before --starttime {}", fmt_time(e), fmt_time(s));
        }
    }
    let q = HistoryQuery { start, end, state: a.state, user: a.user, limit: None };
    let jobs = a.conn.client()?.history(&q)?;
    emit(&History { jobs: &jobs, cols: &cols, parsable: a.parsable }, a.conn.json)
}

/// `libra history`: the `--format` columns of each job, as a table or `|`-separated.
#[derive(Serialize)]
#[serde(transparent)]
struct History<'a> {
    jobs: &'a [JobInfo],
    #[serde(skip)]
    cols: &'a [&'static Column],
    #[serde(skip)]
    parsable: bool,
}

impl Render for History<'_> {
    fn text(&self) -> Text {
        if self.parsable {
            return Text::new().raw(&parsable(self.jobs, self.cols));
        }
        let mut t = table(&self.cols.iter().map(|(n, _)| *n).collect::<Vec<_>>());
        for j in self.jobs {
            t.add_row(self.cols.iter().map(|(_, f)| f(j)).collect::<Vec<_>>());
        }
        Text::new().line(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_columns_in_any_case_and_refuses_unknown_ones_with_the_list() {
        let c = columns("JobID,state, COST").unwrap();
        assert_eq!(c.iter().map(|c| c.0).collect::<Vec<_>>(), ["JobID", "State", "Cost"]);
        let e = columns("jobid,maxrss").unwrap_err().to_string();
        assert!(e.contains("'maxrss' is not a column") && e.contains("jobid, jobname, user"), "{e}");
        assert!(columns(",").is_err());
    }
}
