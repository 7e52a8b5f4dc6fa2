//! `libra sweep check plan.pln`

use crate::output::{emit, table, Said, Text};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plan file (Nimrod/G syntax).
    pub plan: PathBuf,
    /// How many of the first jobs to show.
    #[arg(long, default_value_t = 5)]
    pub show: u64,
    /// Seed for `random` parameters.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: CheckArgs) -> anyhow::Result<()> {
    let (_, plan, jobs) = libra_broker::create::load_plan(&a.plan, a.seed)?;
    let first: Vec<_> = (0..jobs.total.min(a.show)).map(|i| jobs.job(i)).collect();
    let n = |count: usize, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    let mut text = Text::new().line(format!(
        "{}: OK, {} from {}; task main has {}{}",
        a.plan.display(),
        n(jobs.total as usize, "job"),
        n(plan.parameters.len(), "parameter"),
        n(plan.main.len(), "command"),
        if plan.nodestart.is_empty() {
            String::new()
        } else {
            format!(", nodestart {}", plan.nodestart.len())
        }
    ));
    if !first.is_empty() {
        let mut header = vec!["job"];
        header.extend(jobs.names.iter().map(String::as_str));
        let mut t = table(&header);
        for (i, j) in first.iter().enumerate() {
            let mut row = vec![(i + 1).to_string()];
            row.extend(j.iter().map(|(_, v)| v.clone()));
            t.add_row(row);
        }
        text = text.line(t);
    }
    let first_json: Vec<serde_json::Map<String, serde_json::Value>> = first
        .iter()
        .map(|j| j.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect())
        .collect();
    let json = serde_json::json!({
        "plan": a.plan.display().to_string(),
        "jobs": jobs.total,
        "parameters": plan.parameters.iter().map(|p| &p.name).collect::<Vec<_>>(),
        "main_commands": plan.main.len(),
        "nodestart_commands": plan.nodestart.len(),
        "first": first_json,
    });
    emit(&Said::new(&json, text), a.json)
}
