//! `libra sweep experiment table17.4|table17.6`: the seed's experiments on virtual time.

use crate::output::{emit, table, Said, Text};
use anyhow::Context;
use clap::{Args, ValueEnum};
use libra_broker::experiment::{table17_4, table17_6};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Which {
    /// 100 jobs of 90 s on ten test queues priced 10..28; 3 deadlines x 3 budgets.
    #[value(name = "table17.4")]
    Table17_4,
    /// 165 jobs of 5-6 min on six WWG-shaped queues; deadline 2 h, budget 396,000.
    #[value(name = "table17.6")]
    Table17_6,
}

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    pub which: Which,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Where the SVG plots (jobs in execution per resource over time) go.
    #[arg(long, default_value = "libra-out")]
    pub out: PathBuf,
    /// Libra's planners start without the declared job length and calibrate like the seed.
    #[arg(long)]
    pub no_prior: bool,
}

pub fn run(a: ExperimentArgs) -> anyhow::Result<()> {
    crate::output::check_out_dir(&a.out)?;
    match a.which {
        Which::Table17_4 => t17_4(&a),
        Which::Table17_6 => t17_6(&a),
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

fn t17_4(a: &ExperimentArgs) -> anyhow::Result<()> {
    let cells = table17_4::run_all(!a.no_prior);
    let dir = a.out.join("table17.4");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let names: Vec<String> = table17_4::queues().into_iter().map(|q| q.name).collect();
    for c in &cells {
        let path = dir.join(format!("{}-{}-{}.svg", c.algorithm, c.deadline, c.budget));
        super::output::usage_chart(
            &path,
            &format!("{} · deadline {} s · budget {}", c.algorithm, c.deadline, c.budget),
            &names,
            &c.outcome.usage,
        )?;
    }
    // The headline counts Libra's planners as they run by default; `+probe-all` rows are there
    // to compare with.
    let libra: Vec<_> = cells
        .iter()
        .filter(|c| !c.algorithm.starts_with("nimrod") && !c.algorithm.contains('+') && c.feasible)
        .collect();
    let all_done =
        libra.iter().filter(|c| c.completed_pct >= 100.0 && c.time <= c.deadline && c.within_budget).count();
    let worst_gap = cells
        .iter()
        .filter(|c| (c.algorithm == "cost" || c.algorithm == "cost-time") && c.feasible)
        .filter_map(|c| c.optimal_cost.map(|o| 100.0 * (c.cost - o) / o))
        .fold(0.0f64, f64::max);
    let mut t = table(&[
        "algorithm",
        "deadline",
        "budget",
        "feasible",
        "done %",
        "time s",
        "cost",
        "optimum",
        "seed done %",
        "seed time",
        "seed cost",
        "seed remark",
    ]);
    for c in &cells {
        t.add_row(vec![
            c.algorithm.clone(),
            format!("{}", c.deadline),
            c.budget.to_string(),
            if c.feasible { "yes".into() } else { "no".into() },
            format!("{:.0}", c.completed_pct),
            format!("{:.0}", c.time),
            format!("{:.0}", c.cost),
            c.optimal_cost.map_or("-".into(), |o| format!("{o:.0}")),
            opt(c.seed_completed_pct),
            opt(c.seed_time),
            opt(c.seed_cost),
            c.seed_remark.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    let text = Text::new().line(t).line(format!(
        "Libra's planners: {all_done} of {} feasible cells did 100% of the jobs within the deadline and the budget; cost and cost-time at most {worst_gap:.2}% above the optimum. Plots: {}",
        libra.len(),
        dir.display()
    ));
    let json = serde_json::json!({
        "cells": cells,
        "libra_feasible_cells": libra.len(),
        "libra_feasible_cells_all_done_in_time_and_budget": all_done,
        "cost_worst_gap_to_optimum_pct": worst_gap,
        "svg_dir": dir.display().to_string(),
    });
    emit(&Said::new(&json, text), a.json)
}

fn t17_6(a: &ExperimentArgs) -> anyhow::Result<()> {
    let runs = table17_6::run_all(!a.no_prior);
    let dir = a.out.join("table17.6");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let names: Vec<String> = table17_6::resources().into_iter().map(|r| r.name).collect();
    for r in &runs {
        let path: PathBuf = dir.join(format!("{}.svg", r.algorithm));
        super::output::usage_chart(
            &path,
            &format!("{} · 165 jobs · deadline 2 h · budget 396,000", r.algorithm),
            &names,
            &r.outcome.usage,
        )?;
    }
    let mut t = table(&[
        "algorithm",
        "done %",
        "time min",
        "cost",
        "jobs per resource",
        "seed time",
        "seed cost",
        "seed jobs",
    ]);
    for r in &runs {
        t.add_row(vec![
            r.algorithm.clone(),
            format!("{:.0}", r.completed_pct),
            format!("{:.1}", r.time_min),
            format!("{:.0}", r.cost),
            r.jobs_per_resource.iter().map(|(_, n)| n.to_string()).collect::<Vec<_>>().join("/"),
            opt(r.seed_time_min),
            opt(r.seed_cost),
            r.seed_jobs_per_resource
                .as_ref()
                .map_or("-".into(), |v| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("/")),
        ]);
    }
    let text = Text::new().line(t).line(format!("resources: {} · plots: {}", names.join("/"), show(&dir)));
    emit(&Said::new(&serde_json::json!({ "runs": runs, "svg_dir": dir.display().to_string() }), text), a.json)
}

fn show(p: &Path) -> String {
    p.display().to_string()
}
