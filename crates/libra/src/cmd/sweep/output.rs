//! Shared helpers: opening the database, tables, JSON.

use anyhow::Context;
use libra_broker::comfy_table::Table;
use libra_broker::store::Store;
use std::path::Path;

pub fn open(db: &Path) -> anyhow::Result<Store> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Store::open(db).with_context(|| format!("opening the broker database {}", db.display()))
}

pub fn table(header: &[&str]) -> Table {
    let mut t = crate::cmd::new_table();
    t.set_header(header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    t
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

pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}
