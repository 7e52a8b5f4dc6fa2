//! `libra sweep simulate`: a plan over test queues on virtual time (the test queue's
//! virtual-time mode): deterministic and instant, through the engine's own scheduler.

use crate::cmd::time::parse_positive_duration;
use crate::output::{emit, table, Said, Text};
use anyhow::{bail, Context};
use clap::Args;
use libra_broker::create::{load_plan, load_resources};
use libra_broker::experiment::virtual_time;
use libra_broker::farm::{Farm, FarmResource};
use libra_core::dbc::Algorithm;
use libra_core::Money;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The plan file: only its number of jobs matters here.
    pub plan: PathBuf,
    /// The resources file: every resource must be a testqueue (its wall time is the job's).
    #[arg(long, short)]
    pub resources: PathBuf,
    /// The deadline from the start: 990, 33m, 2h.
    #[arg(long, value_parser = parse_positive_duration)]
    pub deadline: f64,
    /// The budget in credits.
    #[arg(long, value_parser = super::parse_budget)]
    pub budget: Money,
    /// What to optimise (see `libra sweep run --help`).
    #[arg(long, alias = "optimize", default_value = "cost")]
    pub optimise: Algorithm,
    /// Plan Libra's first jobs with the queues' declared wall time (else calibrate first).
    #[arg(long)]
    pub prior: bool,
    /// Write the jobs-in-execution plot here (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: SimulateArgs) -> anyhow::Result<()> {
    if let Some(path) = &a.svg {
        crate::output::check_out_file(path, "--svg")?;
    }
    let (_, _, jobs) = load_plan(&a.plan, 0)?;
    let resources = load_resources(&a.resources)?;
    let mut walls = Vec::new();
    for r in &resources {
        let Some(q) = r.testqueue() else {
            bail!(
                "resource '{}': kind must be testqueue to simulate (virtual time has no real processes)",
                r.name
            );
        };
        walls.push(q.wall);
    }
    // Each queue runs a job in its own wall time: jobs of length 1 at speed 1 / wall.
    let speeds: Vec<f64> = walls.iter().map(|w| 1.0 / w).collect();
    let names: Vec<String> = resources.iter().map(|r| r.name.clone()).collect();
    let farm = Farm {
        resources: resources
            .into_iter()
            .zip(&walls)
            .map(|(r, &w)| FarmResource::new(r, a.prior.then_some(w)))
            .collect(),
        algorithm: a.optimise,
        deadline: a.deadline,
        budget: a.budget,
        spent: Money::ZERO,
        fallback_secs: 60.0,
        calibration: libra_broker::farm::Calibration::default(),
        assumed_secs: None,
    };
    let n = usize::try_from(jobs.total).context("too many jobs to simulate")?;
    let out = virtual_time::run(farm, &vec![1.0; n], &speeds);
    if let Some(path) = &a.svg {
        super::output::usage_chart(
            path,
            &format!("{} · deadline {} s · budget {}", a.optimise, a.deadline, a.budget),
            &names,
            &out.usage,
        )?;
    }
    let pct = 100.0 * out.completed as f64 / out.jobs.max(1) as f64;
    let json = serde_json::json!({
        "algorithm": a.optimise, "jobs": out.jobs, "completed_pct": pct, "time": out.time,
        "cost_cents": out.cost, "budget_cents": a.budget, "deadline": a.deadline,
        "per_resource": names.iter().zip(&out.per_resource).map(|(n, j)| serde_json::json!({"name": n, "jobs": j})).collect::<Vec<_>>(),
    });
    let mut t = table(&["resource", "jobs"]);
    for (name, j) in names.iter().zip(&out.per_resource) {
        t.add_row(vec![name.clone(), j.to_string()]);
    }
    let text = Text::new()
        .line(format!(
            "{}: {} jobs, {pct:.0}% by the deadline, last ends at {:.0} s, cost {} of {}",
            a.optimise, out.jobs, out.time, out.cost, a.budget
        ))
        .line(t);
    emit(&Said::new(&json, text), a.json)
}
