//! `libra sim experiment NAME`: the named reproductions.

use super::load::{read_trace, trace_path, ModelArgs, PricingArgs};
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use libra_sim::engine::ClusterConfig;
use libra_sim::experiment::{beyond, libraplus, placement, table1, Point, EXPERIMENTS};
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
#[command(after_help = experiments_help())]
pub struct ExperimentArgs {
    /// The experiment to run (see the list below), or "list".
    pub name: String,
    /// SWF trace for the Libra+$ studies. Default: the SDSC SP2 trace in ../shared/traces, from here or
    /// a directory above, else beside the checkout this binary was built in.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Nodes. Default: the trace header's MaxNodes (128 for SDSC SP2).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Directory for the CSV, JSON, Markdown and SVG outputs. Default: results/NAME.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Random draws per cell of libra-table1 (the batches are random).
    #[arg(long, default_value_t = 20)]
    pub seeds: usize,
    /// Node speed in MIPS for libra-table1: the paper gives job lengths in MI and leaves the
    /// speed open (1,000-10,900 MI jobs run 10-109 s at the default).
    #[arg(long, default_value_t = libra_sim::workload::libra_batches::NODE_MIPS)]
    pub node_mips: f64,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pricing: PricingArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn experiments_help() -> String {
    let mut s = String::from("Experiments:\n");
    for (name, what) in EXPERIMENTS {
        s.push_str(&format!("  {name:<16} {what}\n"));
    }
    s
}

fn progress(total: usize, name: &str) -> ProgressBar {
    let pb = ProgressBar::new(total as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs ({elapsed})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(name.to_string());
    pb
}

pub fn run(a: ExperimentArgs) -> anyhow::Result<()> {
    if a.name == "list" {
        print!("{}", experiments_help());
        return Ok(());
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("results").join(&a.name));
    crate::output::check_out_dir(&out)?;
    // The flags are checked before a trace is read (the nodes again if the trace names them).
    let cluster = |nodes| ClusterConfig { nodes, price_base: a.pricing.price_base };
    cluster(a.nodes.unwrap_or(1)).validate()?;
    let cluster_of = |max_nodes: Option<i64>| {
        let c = cluster(a.nodes.or(max_nodes.and_then(|n| usize::try_from(n).ok())).unwrap_or(128));
        c.validate().map(|()| c)
    };
    if a.name == "libra-table1" {
        anyhow::ensure!(
            a.seeds > 0 && a.seeds <= 10_000,
            "seeds: {} is not accepted: give 1 to 10000",
            a.seeds
        );
        anyhow::ensure!(
            a.node_mips.is_finite() && a.node_mips > 0.0 && a.node_mips <= 1e6,
            "node-mips: {} is not accepted: give a speed above 0 and at most 1000000",
            libra_core::Shown(a.node_mips)
        );
        let pb = progress(table1::run_count(a.seeds), &a.name);
        let cells = table1::run(a.seeds, a.model.seed, a.node_mips, a.pricing.params(), &|| pb.inc(1))?;
        pb.finish_and_clear();
        return super::output::table1(&out, &cells, a.json);
    }
    if a.name == "beyond" {
        let model = a.model.checked_model()?;
        let path = trace_path(a.trace.clone())?;
        let (records, max_nodes) = read_trace(&path, a.model.mode())?;
        let cluster = cluster_of(max_nodes)?;
        let studies = beyond::studies();
        let pb = progress(studies.iter().map(libraplus::run_count).sum(), &a.name);
        let mut all = Vec::new();
        for study in &studies {
            let points =
                libraplus::run_study(study, &records, &model, a.pricing.params(), cluster, &|| pb.inc(1))?;
            all.push((study.clone(), points));
        }
        pb.finish_and_clear();
        return super::output::studies(&out, "beyond", &all, a.json, &path);
    }
    if a.name == "placement" {
        let model = a.model.checked_model()?;
        let path = trace_path(a.trace.clone())?;
        let (records, max_nodes) = read_trace(&path, a.model.mode())?;
        let cluster = cluster_of(max_nodes)?;
        let pb = progress(placement::run_count(&model), &a.name);
        let points = placement::run(&records, &model, a.pricing.params(), cluster, &|| pb.inc(1))?;
        pb.finish_and_clear();
        return super::output::placement(&out, &points, a.model.delay_factor, a.json, &path);
    }
    let Some(study) = libraplus::study(&a.name) else {
        anyhow::bail!(
            "experiment: '{}' is not an experiment; accepted: {}",
            a.name,
            EXPERIMENTS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        );
    };
    let model = a.model.checked_model()?;
    let path = trace_path(a.trace.clone())?;
    let (records, max_nodes) = read_trace(&path, a.model.mode())?;
    let cluster = cluster_of(max_nodes)?;
    let pb = progress(libraplus::run_count(&study), &a.name);
    let points = libraplus::run_study(&study, &records, &model, a.pricing.params(), cluster, &|| pb.inc(1))?;
    pb.finish_and_clear();
    super::output::studies(&out, study.name, &[(study.clone(), points)], a.json, &path)
}

/// A study's points as rows: one per x value, a QoS and a profit column per series.
pub fn study_grid(study: &libraplus::Study, points: &[Point]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut series: Vec<String> = Vec::new();
    for p in points {
        if !series.contains(&p.series()) {
            series.push(p.series());
        }
    }
    let mut header = vec![study.x_label.to_string()];
    for s in &series {
        header.push(format!("{s} QoS"));
        header.push(format!("{s} profit"));
    }
    let rows = study
        .xs
        .iter()
        .map(|&x| {
            let mut row = vec![format!("{x}")];
            for s in &series {
                match points.iter().find(|p| p.x == x && &p.series() == s) {
                    Some(p) => {
                        row.push(format!("{:.1}%", 100.0 * p.qos_satisfaction));
                        row.push(format!("{:.1}%", 100.0 * p.profitability));
                    }
                    None => row.extend(["-".to_string(), "-".to_string()]),
                }
            }
            row
        })
        .collect();
    (header, rows)
}

/// The grid as a terminal table.
pub fn study_table(study: &libraplus::Study, points: &[Point]) -> comfy_table::Table {
    let (header, rows) = study_grid(study, points);
    crate::output::filled_table(&header, rows)
}

pub fn points_json(points: &[Point]) -> serde_json::Value {
    json!({ "points": points })
}

pub fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    // create_dir_all's "File exists" for a file of that name would read as a directory in the way.
    crate::output::check_out_dir(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create output directory {}", dir.display()))
}
