//! `libra sweep status [EXP] [--watch]`

use super::output::open;
use crate::cmd::time::now;
use crate::output::{emit, table, Said, Text};
use clap::Args;
use libra_broker::engine::live_engine;
use libra_broker::store::Store;
use std::path::Path;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The experiment id; without it, every experiment in the database is listed.
    pub exp: Option<i64>,
    /// Redraw every second until the sweep ends.
    #[arg(long)]
    pub watch: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(db: &Path, a: StatusArgs) -> anyhow::Result<()> {
    let Some(exp) = a.exp else {
        // No database yet is no sweep yet: the list is empty, and nothing is made to say so.
        return list(db.exists().then(|| open(db)).transpose()?.as_ref(), a.json);
    };
    let store = open(db)?;
    if !a.watch {
        return print(&store, exp, a.json);
    }
    loop {
        if !a.json {
            print!("\x1b[2J\x1b[H");
        }
        print(&store, exp, a.json)?;
        let e = store.experiment(exp)?;
        if e.state != "running" && e.state != "paused" {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

fn list(store: Option<&Store>, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut t = table(&["id", "name", "state", "optimise", "done", "failed", "total", "spent", "budget"]);
    if let Some(store) = store {
        for e in store.experiments()? {
            let c = store.counts(e.id)?;
            let total = c.pending + c.running + c.done + c.failed + c.cancelled;
            let spent = store.spent(e.id)?;
            // Money in integer cents under `*_cents`, as everywhere in Libra's JSON; the table shows credits.
            rows.push(serde_json::json!({
                "id": e.id, "name": e.name, "state": e.state, "algorithm": e.algorithm,
                "done": c.done, "failed": c.failed, "total": total,
                "spent_cents": spent, "budget_cents": e.budget,
            }));
            t.add_row(vec![
                e.id.to_string(),
                e.name,
                e.state.to_string(),
                e.algorithm,
                c.done.to_string(),
                c.failed.to_string(),
                total.to_string(),
                spent.to_string(),
                e.budget.to_string(),
            ]);
        }
    }
    emit(&Said::new(&serde_json::json!({ "experiments": rows }), Text::new().line(t)), json)
}

/// Prints one experiment's status.
pub fn print(store: &Store, exp: i64, json: bool) -> anyhow::Result<()> {
    let e = store.experiment(exp)?;
    let c = store.counts(exp)?;
    let spent = store.spent(exp)?;
    let held = store.held(exp)?;
    let per = store.per_resource(exp)?;
    let configs = store.resources(exp)?;
    let now = now();
    let total = c.pending + c.running + c.done + c.failed + c.cancelled;
    let elapsed = (e.finished.unwrap_or(now) - e.created).max(0.0);
    // Projected finish from the pace so far: simple, and honest about what it is.
    let projected = (c.done > 0 && c.pending + c.running > 0)
        .then(|| elapsed / c.done as f64 * (c.pending + c.running) as f64);
    let engine = live_engine(&e, now).map(|(pid, _)| pid);
    let summary = serde_json::json!({
            "id": e.id, "name": e.name, "state": e.state, "algorithm": e.algorithm,
            "jobs": { "total": total, "done": c.done, "failed": c.failed, "running": c.running, "pending": c.pending, "cancelled": c.cancelled },
            "spent_cents": spent, "held_cents": held, "budget_cents": e.budget,
            "deadline_in_s": e.deadline - now, "elapsed_s": elapsed, "projected_finish_in_s": projected,
            "engine_pid": engine, "work_dir": e.work_dir,
            "resources": per.iter().zip(&configs).map(|(p, cfg)| serde_json::json!({
                "name": p.name, "kind": cfg.kind(), "slots": cfg.slots, "price": cfg.price_at(now),
                "done": p.done, "failed": p.failed, "running": p.running, "spent_cents": p.spent,
                "secs_per_job": (p.done > 0).then(|| p.wall_sum / p.done as f64),
                "refused": p.refused.as_ref().map(|(m, _)| m), "refused_at": p.refused.as_ref().map(|(_, at)| at),
            })).collect::<Vec<_>>(),
    });
    let mut text = Text::new().line(format!(
        "sweep {} ({}): {} · optimise {} · {}/{} done, {} failed, {} running, {} pending{}",
        e.id,
        e.name,
        e.state,
        e.algorithm,
        c.done,
        total,
        c.failed,
        c.running,
        c.pending,
        if c.cancelled > 0 { format!(", {} cancelled", c.cancelled) } else { String::new() }
    ));
    text = text.line(format!(
        "money: spent {} + held {} of budget {} · deadline {} · elapsed {:.0} s{}{}",
        spent,
        held,
        e.budget,
        if e.deadline >= now {
            format!("in {:.0} s", e.deadline - now)
        } else {
            format!("passed {:.0} s ago", now - e.deadline)
        },
        elapsed,
        projected.map_or(String::new(), |p| format!(" · projected finish in {p:.0} s")),
        engine.map_or(String::new(), |p| format!(" · engine pid {p}")),
    ));
    // A progress bar that also reads in a log or a pipe.
    let finished = c.done + c.failed;
    let filled = (40 * finished).checked_div(total).unwrap_or(40) as usize;
    let pct = if total == 0 { 100.0 } else { 100.0 * finished as f64 / total as f64 };
    text = text.line(format!("[{}{}] {pct:.1}%", "#".repeat(filled), "-".repeat(40 - filled)));
    let mut t =
        table(&["resource", "kind", "slots", "price/cpu-s", "done", "failed", "running", "spent", "s/job"]);
    for (p, cfg) in per.iter().zip(&configs) {
        t.add_row(vec![
            p.name.clone(),
            format!("{:?}", cfg.kind()).to_lowercase(),
            cfg.slots.to_string(),
            format!("{}", cfg.price_at(now)),
            p.done.to_string(),
            p.failed.to_string(),
            p.running.to_string(),
            p.spent.to_string(),
            if p.done > 0 { format!("{:.3}", p.wall_sum / p.done as f64) } else { "-".into() },
        ]);
    }
    let mut text = text.line(t);
    for line in refusals(per.iter().map(|p| (p.name.as_str(), p.refused.as_ref())), now) {
        text = text.line(line);
    }
    emit(&Said::new(&summary, text), json)
}

/// A line for each resource whose latest attempt it refused: why, and how long ago (what a
/// sweep that makes no progress waits on).
pub fn refusals<'a>(
    per: impl Iterator<Item = (&'a str, Option<&'a (String, f64)>)>,
    now: f64,
) -> Vec<String> {
    per.filter_map(|(name, r)| {
        r.map(|(why, at)| format!("{name}: its last job was refused {:.0} s ago: {why}", (now - at).max(0.0)))
    })
    .collect()
}
