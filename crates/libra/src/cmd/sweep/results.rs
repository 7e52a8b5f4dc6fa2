//! `libra sweep results EXP`

use super::output::open;
use crate::output::{emit, table, Said, Text};
use clap::Args;
use std::path::Path;

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// The experiment id.
    pub exp: i64,
    /// Only jobs in this state.
    #[arg(long, value_parser = ["pending", "running", "done", "failed", "cancelled"])]
    pub state: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(db: &Path, a: ResultsArgs) -> anyhow::Result<()> {
    let store = open(db)?;
    let mut rows = store.results(a.exp)?;
    if let Some(s) = &a.state {
        rows.retain(|r| &r.state == s);
    }
    let mut t = table(&[
        "job",
        "parameters",
        "state",
        "resource",
        "tries",
        "exit",
        "wall s",
        "cost",
        "output",
        "files",
    ]);
    for r in &rows {
        let params = super::output::params_text(&r.params);
        t.add_row(vec![
            (r.index + 1).to_string(),
            params,
            r.state.clone(),
            r.resource.clone().unwrap_or_else(|| "-".into()),
            r.attempts.to_string(),
            r.exit_code.map_or("-".into(), |c| c.to_string()),
            r.wall.map_or("-".into(), |w| format!("{w:.3}")),
            r.cost.to_string(),
            r.output.clone().unwrap_or_else(|| "-".into()),
            r.files.join(" "),
        ]);
    }
    emit(&Said::new(&serde_json::json!({ "experiment": a.exp, "jobs": rows }), Text::new().line(t)), a.json)
}
