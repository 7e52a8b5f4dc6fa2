//! Shared helpers: opening the database, parameters as text, the usage chart (printing is
//! `crate::output`'s).

use anyhow::Context;
use libra_broker::experiment::virtual_time::UsagePoint;
use libra_broker::store::Store;
use std::path::Path;

pub fn open(db: &Path) -> anyhow::Result<Store> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Store::open(db).with_context(|| format!("opening the broker database {}", db.display()))
}

/// A job's parameters as `name=value name=value` (the plan's order).
pub fn params_text(params: &serde_json::Value) -> String {
    params
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

pub fn is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

/// Jobs in execution per resource over time (the seed's Figures 17.12 to 17.19), drawn by the one
/// step-chart plotter the simulator uses too.
pub fn usage_chart(path: &Path, title: &str, names: &[String], usage: &[UsagePoint]) -> anyhow::Result<()> {
    let series: Vec<libra_sim::plot::Series> = names
        .iter()
        .enumerate()
        .map(|(k, name)| {
            // Only the change points (and the end): a step holds its value until the next.
            let mut points: Vec<(f64, f64)> = Vec::new();
            for p in usage {
                let y = p.running.get(k).copied().unwrap_or(0) as f64;
                if points.last().is_none_or(|&(_, last)| last != y) {
                    points.push((p.t, y));
                }
            }
            if let (Some(end), Some(&(t, _))) = (usage.last(), points.last()) {
                if end.t > t {
                    points.push((end.t, points.last().map_or(0.0, |p| p.1)));
                }
            }
            (name.clone(), points)
        })
        .collect();
    libra_sim::plot::step_chart(path, title, "time (s)", "jobs in execution", &series)?;
    Ok(())
}
