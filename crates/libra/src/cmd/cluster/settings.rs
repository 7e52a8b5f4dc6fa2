//! The site's configuration file: one TOML file with a `[server]` table for `libra server` and a
//! `[node]` table for `libra node` (a file with neither is read as the server's settings alone,
//! as earlier versions wrote it), and `--print-config`: every setting in force and where its
//! value came from (default, the file, a flag or an environment variable).

use crate::output::{emit, Said, Text};
use anyhow::{anyhow, Context, Result};
use clap::Args;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `--print-config [--json]`, the same on `libra server` and `libra node`.
#[derive(Debug, Args)]
pub struct PrintConfig {
    /// Print the configuration in force (file, flags, environment, defaults) with the source of
    /// each value, and exit. Secrets are not shown.
    #[arg(long)]
    pub print_config: bool,
    /// With --print-config: as JSON.
    #[arg(long, requires = "print_config")]
    pub json: bool,
}

/// Settings whose values are never printed.
const SECRETS: &[&str] = &["join_token", "admin_password"];

/// One section of the file, parsed, and the keys the file sets in it (dotted: `pricing.alpha`).
pub struct Section<T> {
    pub value: T,
    pub keys: BTreeSet<String>,
}

fn keys_of(table: &toml::Table, prefix: &str, out: &mut BTreeSet<String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => keys_of(t, &key, out),
            _ => {
                out.insert(key);
            }
        }
    }
}

/// Reads section `name` (`server` or `node`) of the file at `path`; absent: the defaults.
pub fn load_section<T: DeserializeOwned + Default>(path: &Path, name: &str) -> Result<Section<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("configuration {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow!("configuration {}: {e}", path.display()))?;
    let sectioned = ["server", "node"].iter().any(|s| matches!(table.get(*s), Some(toml::Value::Table(_))));
    let section = if sectioned {
        if let Some(other) = table.keys().find(|k| *k != "server" && *k != "node") {
            return Err(anyhow!(
                "configuration {}: '{other}' is not a section; accepted: [server], [node] (each setting belongs in one of them)",
                path.display()
            ));
        }
        match table.get(name) {
            Some(toml::Value::Table(t)) => t.clone(),
            Some(_) => {
                return Err(anyhow!("configuration {}: {name} must be a table ([{name}])", path.display()))
            }
            None => toml::Table::new(),
        }
    } else if name == "server" {
        // Earlier versions: the server's settings at the top level.
        table
    } else {
        toml::Table::new()
    };
    let mut keys = BTreeSet::new();
    keys_of(&section, "", &mut keys);
    let value = if section.is_empty() {
        T::default()
    } else {
        toml::Value::Table(section)
            .try_into()
            .map_err(|e| anyhow!("configuration {}, [{name}]: {e}", path.display()))?
    };
    Ok(Section { value, keys })
}

/// Where each setting's value came from; unnamed keys are defaults.
#[derive(Default)]
pub struct Sources {
    map: BTreeMap<String, String>,
}

impl Sources {
    pub fn file(&mut self, path: &Path, keys: &BTreeSet<String>) {
        for k in keys {
            self.map.insert(k.clone(), format!("file {}", path.display()));
        }
    }

    /// A value given by flag `--flag`, or by environment variable `env` when it is set to the
    /// value (clap reads the flag from there when it is not on the command line).
    pub fn flag(&mut self, key: &str, flag: &str, env: Option<(&str, &str)>) {
        let source = match env {
            Some((var, value)) if std::env::var(var).is_ok_and(|v| v == value) => format!("env {var}"),
            _ => format!("flag --{flag}"),
        };
        self.map.insert(key.to_string(), source);
    }

    pub fn of(&self, key: &str) -> &str {
        self.map.get(key).map(String::as_str).unwrap_or("default")
    }
}

/// Prints every setting (`settings`: dotted key and value, unset options as null) with its
/// source: TOML that could go in the file's `[section]`, each line's source in a comment, or
/// JSON. `problems` (the configuration is not valid as it stands) are printed after it.
pub fn print(
    section: &str,
    settings: Vec<(String, Value)>,
    sources: &Sources,
    problems: Option<String>,
    json: bool,
) -> Result<()> {
    let shown = |k: &str, v: &Value| -> Value {
        match v {
            Value::String(s) if SECRETS.contains(&k) && !s.is_empty() => {
                Value::String(format!("(hidden: {} characters)", s.chars().count()))
            }
            other => other.clone(),
        }
    };
    let mut text = Text::new()
        .line(format!("# The effective configuration of libra {section}; each line's source after '#'."))
        .line(format!("[{section}]"));
    let mut m = serde_json::Map::new();
    for (k, v) in &settings {
        let source = sources.of(k);
        text = text.line(match shown(k, v) {
            Value::Null => format!("# {k} = (unset)  # {source}"),
            v => format!("{k} = {}  # {source}", toml_value(&v)),
        });
        m.insert(k.clone(), serde_json::json!({"value": shown(k, v), "source": source}));
    }
    let text = text.line_if(problems.as_ref().map(|p| format!("# NOT VALID as it stands: {p}")));
    let out = serde_json::json!({"section": section, "settings": m, "problems": problems});
    emit(&Said::new(&out, text), json)
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::String(s) => toml::Value::String(s.clone()).to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// Every setting of a serializable struct as dotted keys (unset options as null).
pub fn settings_of<T: serde::Serialize>(v: &T) -> Vec<(String, Value)> {
    libra_server::config::flatten(&serde_json::to_value(v).unwrap_or_default())
}
