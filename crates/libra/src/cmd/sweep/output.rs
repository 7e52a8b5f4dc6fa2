//! Shared helpers: durations, opening the database, tables, JSON.

use anyhow::Context;
use libra_broker::comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use libra_broker::store::Store;
use std::path::Path;

/// Parses `90`, `90s`, `30m`, `2h`, `1h30m`, `1d` into seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a duration: expected e.g. 3600, 90s, 30m, 2h or 1h30m");
    if let Ok(v) = t.parse::<f64>() {
        return (v.is_finite() && v > 0.0).then_some(v).ok_or_else(bad);
    }
    let mut total = 0.0;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let v: f64 = num.parse().map_err(|_| bad())?;
        total += v * match c {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86_400.0,
            _ => return Err(bad()),
        };
        num.clear();
    }
    if !num.is_empty() || total <= 0.0 {
        return Err(bad());
    }
    Ok(total)
}

pub fn open(db: &Path) -> anyhow::Result<Store> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Store::open(db).with_context(|| format!("opening the broker database {}", db.display()))
}

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2h"), Ok(7200.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("990"), Ok(990.0));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5").is_err());
    }
}
