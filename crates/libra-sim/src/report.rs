//! Writers for experiment results: CSV, pretty JSON, a Markdown pipe table and a terminal table,
//! all from one `Table` of headers and string rows (callers format numbers the way they want
//! them shown).

use comfy_table::{presets, CellAlignment, ContentArrangement};
use serde::Serialize;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("row {row} has {found} cells, but the table has {expected} columns")]
    RowLength { row: usize, found: usize, expected: usize },
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("cannot write CSV {path}: {source}")]
    Csv { path: String, source: csv::Error },
    #[error("cannot encode JSON for {path}: {source}")]
    Json { path: String, source: serde_json::Error },
}

/// A table of strings: headers and rows of the same length.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    /// Appends a row; it must have one cell per header.
    pub fn push_row<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) -> Result<(), ReportError> {
        let row: Vec<String> = row.into_iter().map(Into::into).collect();
        if row.len() != self.headers.len() {
            return Err(ReportError::RowLength {
                row: self.rows.len() + 1,
                found: row.len(),
                expected: self.headers.len(),
            });
        }
        self.rows.push(row);
        Ok(())
    }

    /// Checks that every row has one cell per header (rows may have been pushed directly).
    pub fn check(&self) -> Result<(), ReportError> {
        match self.rows.iter().position(|r| r.len() != self.headers.len()) {
            Some(i) => Err(ReportError::RowLength {
                row: i + 1,
                found: self.rows[i].len(),
                expected: self.headers.len(),
            }),
            None => Ok(()),
        }
    }

    /// Whether every non-empty cell of column `c` reads as a number (such columns are
    /// right-aligned).
    fn numeric(&self, c: usize) -> bool {
        let mut any = false;
        for r in &self.rows {
            let v = r.get(c).map_or("", |s| s.trim());
            if v.is_empty() {
                continue;
            }
            let v = v.trim_end_matches('%').trim_start_matches('$');
            if v.parse::<f64>().is_err() {
                return false;
            }
            any = true;
        }
        any
    }

    /// Rows as JSON objects keyed by header; cells that read as numbers become JSON numbers.
    pub fn to_json_value(&self) -> serde_json::Value {
        let rows = self.rows.iter().map(|r| {
            let obj = self
                .headers
                .iter()
                .zip(r)
                .map(|(h, v)| {
                    let val = v
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite())
                        .and_then(serde_json::Number::from_f64)
                        .map(|n| {
                            // Integers stay integers in the output.
                            v.parse::<i64>()
                                .map(serde_json::Value::from)
                                .unwrap_or(serde_json::Value::Number(n))
                        })
                        .unwrap_or_else(|| serde_json::Value::String(v.clone()));
                    (h.clone(), val)
                })
                .collect::<serde_json::Map<_, _>>();
            serde_json::Value::Object(obj)
        });
        serde_json::Value::Array(rows.collect())
    }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> ReportError + '_ {
    move |source| ReportError::Io { path: path.display().to_string(), source }
}

/// Writes the table as CSV with a header line.
pub fn write_csv(path: impl AsRef<Path>, table: &Table) -> Result<(), ReportError> {
    let path = path.as_ref();
    let file = File::create(path).map_err(io_err(path))?;
    write_csv_to(file, table).map_err(|e| match e {
        ReportError::Csv { source, .. } => ReportError::Csv { path: path.display().to_string(), source },
        other => other,
    })
}

/// Writes the table as CSV to any writer.
pub fn write_csv_to<W: Write>(out: W, table: &Table) -> Result<(), ReportError> {
    table.check()?;
    let csv_err = |source| ReportError::Csv { path: String::from("<output>"), source };
    let mut w = csv::Writer::from_writer(out);
    w.write_record(&table.headers).map_err(csv_err)?;
    for r in &table.rows {
        w.write_record(r).map_err(csv_err)?;
    }
    w.flush().map_err(|e| csv_err(e.into()))
}

/// Pretty-printed JSON of any serialisable value, ending in a newline.
pub fn to_json_pretty<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    Ok(s)
}

/// Writes any serialisable value as pretty JSON.
pub fn write_json<T: Serialize + ?Sized>(path: impl AsRef<Path>, value: &T) -> Result<(), ReportError> {
    let path = path.as_ref();
    let text = to_json_pretty(value)
        .map_err(|source| ReportError::Json { path: path.display().to_string(), source })?;
    std::fs::write(path, text).map_err(io_err(path))
}

fn md_cell(s: &str) -> String {
    // A pipe would end the cell and a line break the row.
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A Markdown pipe table; numeric columns are right-aligned.
pub fn to_markdown(table: &Table) -> Result<String, ReportError> {
    table.check()?;
    let cols = table.headers.len();
    let cells: Vec<Vec<String>> = std::iter::once(&table.headers)
        .chain(&table.rows)
        .map(|r| r.iter().map(|c| md_cell(c)).collect())
        .collect();
    let width: Vec<usize> =
        (0..cols).map(|c| cells.iter().map(|r| r[c].chars().count()).max().unwrap_or(0).max(3)).collect();
    let right: Vec<bool> = (0..cols).map(|c| table.numeric(c)).collect();
    let line = |r: &[String]| {
        let mut s = String::from("|");
        for (c, cell) in r.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            if right[c] {
                s.push_str(&format!(" {}{} |", " ".repeat(pad), cell));
            } else {
                s.push_str(&format!(" {}{} |", cell, " ".repeat(pad)));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&cells[0]);
    out.push('|');
    for c in 0..cols {
        let dashes = "-".repeat(width[c] - usize::from(right[c]));
        out.push_str(&format!(" {dashes}{} |", if right[c] { ":" } else { "" }));
    }
    out.push('\n');
    for r in &cells[1..] {
        out.push_str(&line(r));
    }
    Ok(out)
}

/// Writes a Markdown file: an optional `# title` line, then the table.
pub fn write_markdown(path: impl AsRef<Path>, title: Option<&str>, table: &Table) -> Result<(), ReportError> {
    let path = path.as_ref();
    let mut text = String::new();
    if let Some(t) = title {
        text.push_str(&format!("# {t}\n\n"));
    }
    text.push_str(&to_markdown(table)?);
    std::fs::write(path, text).map_err(io_err(path))
}

/// The table for a person at a terminal: box-drawn on a terminal, plain ASCII when piped (so
/// logs and golden files stay readable), numeric columns right-aligned.
pub fn to_terminal(table: &Table) -> Result<String, ReportError> {
    table.check()?;
    let mut t = comfy_table::Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(&table.headers);
    if !t.is_tty() {
        t.load_preset(presets::ASCII_FULL_CONDENSED);
    }
    for r in &table.rows {
        t.add_row(r);
    }
    for c in 0..table.headers.len() {
        if table.numeric(c) {
            if let Some(col) = t.column_mut(c) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    Ok(t.to_string())
}

/// Prints the terminal table to standard output.
pub fn print_table(table: &Table) -> Result<(), ReportError> {
    let text = to_terminal(table)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")
        .map_err(|source| ReportError::Io { path: String::from("standard output"), source })
}
