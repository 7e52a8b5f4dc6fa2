//! `libra sweep ... --server URL`: the same commands against a sweep hosted by a Libra server,
//! through its API, instead of the local broker database. The server runs the engine, so a
//! `run` that is interrupted here leaves the sweep running there.

use super::output::is_terminal;
use super::results::ResultsArgs;
use super::run::{RerunArgs, RunArgs};
use super::status::StatusArgs;
use super::steer::{BudgetArgs, DeadlineArgs, ExpArgs};
use super::SweepCommand;
use crate::cmd::cluster::common::{fmt_dur, fmt_time, Conn};
use crate::output::{emit, table, Render, Said, Text};
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use libra_api::{Client, SweepCreate, SweepDeadline, SweepInfo};
use serde::Serialize;
use std::time::Duration;

pub fn run(
    server: String,
    token: Option<String>,
    token_file: Option<std::path::PathBuf>,
    cmd: SweepCommand,
) -> anyhow::Result<()> {
    // TLS: the CA from LIBRA_CA, else the saved login's for this server.
    let client = || {
        Conn {
            server: Some(server.clone()),
            token: token.clone(),
            token_file: token_file.clone(),
            json: false,
            ca: std::env::var_os("LIBRA_CA").map(Into::into),
            insecure_http: false,
        }
        .client()
    };
    match cmd {
        SweepCommand::Run(a) => create(&client()?, a),
        SweepCommand::Status(a) => status(&client()?, a),
        SweepCommand::Results(a) => results(&client()?, a),
        SweepCommand::SetDeadline(a) => set_deadline(&client()?, a),
        SweepCommand::SetBudget(a) => set_budget(&client()?, a),
        SweepCommand::Pause(a) => action(&client()?, a, "pause"),
        SweepCommand::Resume(a) => action(&client()?, a, "resume"),
        SweepCommand::Cancel(a) => action(&client()?, a, "cancel"),
        SweepCommand::Rerun(a) => rerun(&client()?, a),
        _ => bail!(
            "--server {server}: only run, status, results, set-deadline, set-budget, pause, resume, cancel and rerun talk to a server; check, simulate, experiment and bench run here without --server"
        ),
    }
}

fn create(c: &Client, a: RunArgs) -> anyhow::Result<()> {
    let plan =
        std::fs::read_to_string(&a.plan).with_context(|| format!("reading the plan {}", a.plan.display()))?;
    let resources = std::fs::read_to_string(&a.resources)
        .with_context(|| format!("reading the resources file {}", a.resources.display()))?;
    // Checked here first, so that a mistake names the file it is in.
    libra_broker::plan::parse(&plan).with_context(|| format!("plan {}", a.plan.display()))?;
    libra_broker::resources::parse(&resources).with_context(|| format!("{}", a.resources.display()))?;
    let name = a.plan.file_stem().map(|n| n.to_string_lossy().into_owned());
    let create = SweepCreate {
        plan,
        resources,
        name,
        deadline: None,
        deadline_in: Some(a.deadline),
        budget: a.budget,
        optimise: Some(a.optimise.name().to_string()),
        max_retries: Some(a.max_retries),
        estimate: a.estimate,
        seed: a.seed,
    };
    // A retry after a lost answer gets the sweep the first request made, never a second one.
    let s = crate::cmd::retry::keyed(|key| c.sweep_create_with_key(&create, key))?;
    if a.detach {
        let json = serde_json::json!({ "experiment": s.id, "server": c.base() });
        return emit(&Said::new(&json, s.id.to_string()), a.json);
    }
    if !a.json {
        eprintln!(
            "sweep {} hosted by {}: it runs there; Ctrl-C stops watching, not the sweep (`libra sweep status --server {} {}`)",
            s.id,
            c.base(),
            c.base(),
            s.id
        );
    }
    follow(c, s.id, a.json)
}

/// Polls the sweep until it ends (done, stalled or cancelled), with a progress bar on a
/// terminal, then prints it.
fn follow(c: &Client, id: i64, json: bool) -> anyhow::Result<()> {
    let bar = (!json && is_terminal()).then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} jobs  {msg}  [{elapsed_precise}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    loop {
        let s = c.sweep(id)?;
        if let Some(bar) = &bar {
            bar.set_length(s.jobs.total);
            bar.set_position(s.jobs.done + s.jobs.failed);
            bar.set_message(format!(
                "{} · running {} · failed {} · spent {} · held {}",
                s.state, s.jobs.running, s.jobs.failed, s.spent, s.held
            ));
        }
        if s.state != "running" && s.state != "paused" {
            if let Some(bar) = &bar {
                bar.finish();
            }
            emit(&s, json)?;
            return super::run::ended(id, &s.state, s.jobs.done, s.jobs.total);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn status(c: &Client, a: StatusArgs) -> anyhow::Result<()> {
    let Some(id) = a.exp else {
        let (list, everyone) = visible_sweeps(c)?;
        return emit(&Sweeps { list: &list, everyone }, a.json);
    };
    loop {
        let s = c.sweep(id)?;
        if a.watch && !a.json {
            print!("\x1b[2J\x1b[H");
        }
        emit(&s, a.json)?;
        if !a.watch || (s.state != "running" && s.state != "paused") {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `libra sweep status --server`: a sweep a row, with its owner when they are everyone's.
#[derive(Serialize)]
#[serde(transparent)]
struct Sweeps<'a> {
    list: &'a [SweepInfo],
    #[serde(skip)]
    everyone: bool,
}

impl Render for Sweeps<'_> {
    fn text(&self) -> Text {
        let (list, everyone) = (self.list, self.everyone);
        let mut head = vec!["id", "name", "state", "optimise", "done", "failed", "total", "spent", "budget"];
        if everyone {
            head.insert(2, "owner");
        }
        let mut t = table(&head);
        for s in list {
            let owner = everyone.then(|| s.owner.clone());
            t.add_row([s.id.to_string(), s.name.clone()].into_iter().chain(owner).chain([
                s.state.clone(),
                s.optimise.clone(),
                s.jobs.done.to_string(),
                s.jobs.failed.to_string(),
                s.jobs.total.to_string(),
                s.spent.to_string(),
                s.budget.to_string(),
            ]));
        }
        Text::new().line(t)
    }
}

/// Every sweep the caller may see: everyone's for an administrator (as on the portal's Sweeps
/// page), else their own; and whether that is everyone's. The server alone knows who is an
/// administrator, so the question is put to it, and a refusal means a plain user.
fn visible_sweeps(c: &Client) -> anyhow::Result<(Vec<SweepInfo>, bool)> {
    match c.sweeps(true) {
        Ok(list) => Ok((list, true)),
        Err(e) if e.status() == Some(403) => Ok((c.sweeps(false)?, false)),
        Err(e) => Err(e.into()),
    }
}

/// One sweep: a summary, a progress bar that also reads in a log, and a table per resource.
impl Render for SweepInfo {
    fn text(&self) -> Text {
        let s = self;
        let j = &s.jobs;
        let mut text = Text::new().line(format!(
            "sweep {} ({}, {}): {} · optimise {} · {}/{} done, {} failed, {} running, {} pending{}",
            s.id,
            s.name,
            s.owner,
            s.state,
            s.optimise,
            j.done,
            j.total,
            j.failed,
            j.running,
            j.pending,
            if j.cancelled > 0 { format!(", {} cancelled", j.cancelled) } else { String::new() }
        ));
        text = text.line(format!(
            "money: spent {} + held {} of budget {} · deadline {} ({}){}",
            s.spent,
            s.held,
            s.budget,
            fmt_time(s.deadline),
            if s.deadline >= s.now {
                format!("in {}", fmt_dur(s.deadline - s.now))
            } else {
                format!("passed {} ago", fmt_dur(s.now - s.deadline))
            },
            match (s.finished, s.projected_finish) {
                (Some(f), _) => format!(" · ended {}", fmt_time(f)),
                (None, Some(p)) => format!(" · projected finish {} (in {})", fmt_time(p), fmt_dur(p - s.now)),
                _ => String::new(),
            }
        ));
        let finished = j.done + j.failed;
        let filled = (40 * finished).checked_div(j.total).unwrap_or(40) as usize;
        let pct = if j.total == 0 { 100.0 } else { 100.0 * finished as f64 / j.total as f64 };
        text = text.line(format!("[{}{}] {pct:.1}%", "#".repeat(filled), "-".repeat(40 - filled)));
        if let Some(note) = &s.engine {
            text = text.line(format!("engine: {note}"));
        }
        let mut t = table(&[
            "resource",
            "kind",
            "slots",
            "price/cpu-s",
            "done",
            "failed",
            "running",
            "spent",
            "s/job",
        ]);
        for r in &s.resources {
            t.add_row(vec![
                r.name.clone(),
                r.kind.clone(),
                r.slots.to_string(),
                r.price.to_string(),
                r.done.to_string(),
                r.failed.to_string(),
                r.running.to_string(),
                r.spent.to_string(),
                r.secs_per_job.map_or("-".into(), |x| format!("{x:.3}")),
            ]);
        }
        let refused: Vec<(String, f64)> =
            s.resources.iter().map(|r| r.refused.clone().zip(r.refused_at).unwrap_or_default()).collect();
        let lines = super::status::refusals(
            s.resources.iter().zip(&refused).map(|(r, x)| (r.name.as_str(), r.refused.as_ref().map(|_| x))),
            s.now,
        );
        lines.into_iter().fold(text.line(t), |text, l| text.line(l))
    }
}

fn results(c: &Client, a: ResultsArgs) -> anyhow::Result<()> {
    let mut rows = c.sweep_results(a.exp)?;
    if let Some(s) = &a.state {
        rows.retain(|r| &r.state == s);
    }
    let mut t =
        table(&["job", "parameters", "state", "resource", "tries", "exit", "wall s", "cost", "output"]);
    for r in &rows {
        let params = super::output::params_text(&r.params);
        t.add_row(vec![
            r.job.to_string(),
            params,
            r.state.clone(),
            r.resource.clone().unwrap_or_else(|| "-".into()),
            r.attempts.to_string(),
            r.exit_code.map_or("-".into(), |c| c.to_string()),
            r.wall.map_or("-".into(), |w| format!("{w:.3}")),
            r.cost.to_string(),
            r.output.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    emit(&Said::new(&serde_json::json!({ "experiment": a.exp, "jobs": rows }), Text::new().line(t)), a.json)
}

fn said(s: &SweepInfo, json: bool, sentence: String) -> anyhow::Result<()> {
    emit(&Said::new(s, sentence), json)
}

fn set_deadline(c: &Client, a: DeadlineArgs) -> anyhow::Result<()> {
    let s = c.sweep_set_deadline(a.exp, &SweepDeadline { deadline: None, deadline_in: Some(a.deadline) })?;
    said(
        &s,
        a.json,
        format!("sweep {}: deadline {} (in {})", s.id, fmt_time(s.deadline), fmt_dur(a.deadline)),
    )
}

fn set_budget(c: &Client, a: BudgetArgs) -> anyhow::Result<()> {
    let s = c.sweep_set_budget(a.exp, a.budget)?;
    said(&s, a.json, format!("sweep {}: budget {} ({})", s.id, s.budget, s.state))
}

fn action(c: &Client, a: ExpArgs, what: &str) -> anyhow::Result<()> {
    let s = c.sweep_action(a.exp, what)?;
    said(&s, a.json, format!("sweep {}: {}", s.id, s.state))
}

fn rerun(c: &Client, a: RerunArgs) -> anyhow::Result<()> {
    let s = c.sweep_action(a.exp, "rerun")?;
    if !a.json {
        eprintln!("sweep {}: {} jobs to run ({})", s.id, s.jobs.pending, s.state);
    }
    follow(c, s.id, a.json)
}
