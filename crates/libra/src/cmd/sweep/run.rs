//! `libra sweep run` and `libra sweep rerun --failed`.

use super::output::{is_terminal, open};
use super::status;
use crate::cmd::time::{deadline_from_now, now, parse_positive_duration};
use crate::output::{emit, Said};
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use libra_broker::adapter::libra::no_token;
use libra_broker::create::{create, load_resources, SweepSpec};
use libra_broker::engine::{self, EngineOptions, Progress};
use libra_broker::resources::{KindSpec, SavedLogin};
use libra_broker::state::ExperimentState;
use libra_core::dbc::Algorithm;
use libra_core::Money;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file (Nimrod/G syntax).
    pub plan: PathBuf,
    /// The resources file (TOML, one `[[resource]]` per resource).
    ///
    /// Each resource: `name`, `kind` (local | testqueue | libra | slurm), `slots`, `price`
    /// (credits per CPU-second), optional `job_secs` (expected seconds per job before
    /// calibration), `utc_offset` ("+10:00") and `peak = { start = "09:00", end = "18:00",
    /// price = 20 }` for a time-of-day price; testqueue: `wall`, `cpu`, `time_scale`; libra:
    /// `url`, `token` (default: LIBRA_TOKEN, else your `libra login` for that url); slurm (each job an sbatch job): `partition`, `cpus_per_job`,
    /// `sbatch_args = ["--time=30"]`.
    ///
    ///     [[resource]]
    ///     name = "laptop"
    ///     kind = "local"
    ///     slots = 2
    ///     price = 1.5
    #[arg(long, short, verbatim_doc_comment)]
    pub resources: PathBuf,
    /// When every job must be done: from now (3600, 90m, 2h) or a time (2026-11-22T21:00:00Z,
    /// 2026-11-22 21:00 UTC, @UNIXSECONDS).
    #[arg(long, value_parser = deadline_from_now)]
    pub deadline: f64,
    /// The most the sweep may spend, in credits (e.g. 396000 or 12.50).
    #[arg(long, value_parser = super::parse_budget)]
    pub budget: Money,
    /// What to optimise: cost, time, conservative, cost-time, or the seed's nimrod-cost,
    /// nimrod-time, nimrod-conservative.
    #[arg(long, alias = "optimize", default_value = "cost")]
    pub optimise: Algorithm,
    /// How many times a failed job is retried (on another resource when there is one).
    #[arg(long, default_value_t = 2)]
    pub max_retries: u32,
    /// Expected wall time of one job before calibration has measured it (e.g. 5m).
    #[arg(long, value_parser = parse_positive_duration)]
    pub estimate: Option<f64>,
    /// Seed for `random` parameters.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Only create the sweep and print its id; start it with `libra sweep resume ID`.
    #[arg(long)]
    pub detach: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The experiment id.
    pub exp: i64,
    /// Run the failed (and cancelled) jobs again.
    #[arg(long, required = true)]
    pub failed: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(db: &Path, a: RunArgs) -> anyhow::Result<()> {
    let resources = load_resources(&a.resources)?;
    // A `libra` resource with no way to a token would have every job refused (401): refuse the
    // sweep instead, before anything is recorded.
    let login = saved_login();
    for r in &resources {
        if let KindSpec::Libra(l) = &r.spec {
            if !l.has_token_with(login.as_ref()) {
                anyhow::bail!("resources file: resource '{}': {}", r.name, no_token(&l.url));
            }
        }
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let now = now();
    let exp = create(
        db,
        &SweepSpec {
            plan_path: &a.plan,
            resources,
            algorithm: a.optimise,
            deadline: now + a.deadline,
            budget: a.budget,
            max_retries: a.max_retries,
            estimate_secs: a.estimate,
            seed: a.seed,
            now,
        },
    )?;
    if !a.json {
        eprintln!("sweep {exp} created (database {})", db.display());
    }
    if a.detach {
        crate::cmd::quiet_on_closed_stdout();
        return emit(&Said::new(&serde_json::json!({ "experiment": exp }), exp.to_string()), a.json);
    }
    drive(db, exp, a.json)
}

/// The login `libra login` saved, which a `libra` resource on its server that names no token
/// acts through.
fn saved_login() -> Option<SavedLogin> {
    crate::cmd::cluster::common::saved_login().map(|l| SavedLogin {
        server: l.server,
        token: l.token,
        ca: l.ca,
        insecure_http: l.insecure_http,
    })
}

/// Cancels a sweep whose engine is gone by opening one here: it takes up the attempts the last
/// engine left running (a local job's keeper, a job on a Libra cluster found by its key, a
/// Slurm job), and the cancel stops them and records what they cost.
pub fn stop_here(db: &Path, exp: i64) -> anyhow::Result<()> {
    let opts = EngineOptions {
        keeper: std::env::current_exe().ok(),
        login: saved_login(),
        take_up_cancelled: true,
        ..EngineOptions::default()
    };
    let Some(engine) = libra_broker::engine::Engine::open(db, exp, opts)? else {
        anyhow::bail!("it has ended");
    };
    open(db)?.set_state(exp, libra_broker::state::ExperimentState::Cancelled, None)?;
    let state = engine.run()?;
    tracing::info!(exp, state = %state, "sweep cancelled with no engine running: its jobs were stopped");
    Ok(())
}

/// Runs the engine here with a progress bar on a terminal, then prints the status.
pub fn drive(db: &Path, exp: i64, json: bool) -> anyhow::Result<()> {
    // Local jobs run under a keeper (this binary), so a killed sweep's jobs are adopted by the
    // next `libra sweep resume`, not run again.
    let mut opts = EngineOptions {
        keeper: std::env::current_exe().ok(),
        login: saved_login(),
        ..EngineOptions::default()
    };
    if !json && is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} jobs  {msg}  [{elapsed_precise}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        opts.on_progress = Some(Box::new(move |p: &Progress| {
            bar.set_length(p.total);
            bar.set_position(p.counts.done + p.counts.failed);
            bar.set_message(format!(
                "running {} · failed {} · spent {} · held {}",
                p.counts.running, p.counts.failed, p.spent, p.held
            ));
            if !p.state.is_active() {
                bar.finish();
            }
        }));
    }
    let state = engine::run(db, exp, opts)?;
    tracing::info!(exp, state = %state, "sweep ended");
    crate::cmd::quiet_on_closed_stdout();
    let store = open(db)?;
    status::print(&store, exp, json)?;
    let c = store.counts(exp)?;
    ended(exp, state.as_str(), c.done, c.pending + c.running + c.done + c.failed + c.cancelled)
}

/// A sweep that ends without every job done is an error for the shell (after its status has
/// been printed), so scripts can tell.
pub fn ended(exp: i64, state: &str, done: u64, total: u64) -> anyhow::Result<()> {
    match state {
        "done" if done == total => Ok(()),
        "done" => anyhow::bail!(
            "sweep {exp} finished, but only {done} of {total} jobs succeeded; the rest failed after their retries (`libra sweep results {exp} --state failed`, then `libra sweep rerun {exp} --failed`)"
        ),
        "stalled" => anyhow::bail!(
            "sweep {exp} stalled with {done} of {total} jobs done: no resource can run the rest within the deadline and budget (or every one refused them); `libra sweep set-deadline`, `set-budget` or a better-paid resource, then `libra sweep resume {exp}`"
        ),
        s => anyhow::bail!("sweep {exp} ended {s} with {done} of {total} jobs done (see `libra sweep results {exp}`)"),
    }
}

pub fn rerun(db: &Path, a: RerunArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let n = store.rerun_failed(a.exp)?;
    if n == 0 && store.counts(a.exp)?.pending == 0 {
        crate::cmd::quiet_on_closed_stdout();
        if !a.json {
            println!("sweep {}: no failed jobs", a.exp);
        }
        return status::print(&store, a.exp, a.json);
    }
    store.set_state(a.exp, ExperimentState::Running, None)?;
    if !a.json {
        eprintln!("sweep {}: {n} failed jobs to run again", a.exp);
    }
    drop(store);
    drive(db, a.exp, a.json)
}
