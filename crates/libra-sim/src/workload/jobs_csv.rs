//! An explicit job list (`libra sim run --jobs FILE.csv`): every job's QoS given by the user, so
//! that a workload can be replayed exactly.
//!
//! Columns, in any order: `id,submit,runtime,estimate,procs,deadline,budget,user`. Times are
//! seconds; `deadline` counts from `submit`; `budget` is credits with at most two decimals.
//! `estimate` (default: the runtime) and `user` (default 0) may be left out.

use super::SimJob;
use libra_core::Money;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

/// Every column, in the order the writer uses.
pub const COLUMNS: [&str; 8] = ["id", "submit", "runtime", "estimate", "procs", "deadline", "budget", "user"];
const OPTIONAL: [&str; 2] = ["estimate", "user"];
const ACCEPTED_COLUMNS: &str = "id, submit, runtime, estimate, procs, deadline, budget, user";

/// Upper bounds that catch unit mistakes (milliseconds, epoch times) rather than limit use.
const MAX_TIME: f64 = 1e10;
const MAX_RUNTIME: f64 = 1e9;
const MAX_PROCS: u64 = 1_000_000;
const MAX_BUDGET_CREDITS: i64 = 1_000_000_000_000;

#[derive(Debug, thiserror::Error)]
pub enum JobsCsvError {
    #[error("cannot open job list {path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("writing the job list failed: {0}")]
    Write(#[source] io::Error),
    #[error("job list, line {line}: {source}")]
    Csv { line: u64, source: csv::Error },
    #[error("the job list is empty: the first line must name the columns ({ACCEPTED_COLUMNS})")]
    NoHeader,
    #[error("job list, line 1: unknown column '{column}'; accepted columns are {ACCEPTED_COLUMNS}")]
    UnknownColumn { column: String },
    #[error("job list, line 1: column '{column}' appears twice")]
    DuplicateColumn { column: String },
    #[error("job list, line 1: column '{column}' is missing; required are id, submit, runtime, procs, deadline, budget (estimate and user are optional)")]
    MissingColumn { column: &'static str },
    #[error("job list, line {line}: {found} values, but the header names {expected} columns")]
    FieldCount { line: u64, found: usize, expected: usize },
    #[error("job list, line {line}, column '{column}': '{value}' is not accepted; expected {accepted}")]
    Value { line: u64, column: &'static str, value: String, accepted: &'static str },
    #[error("job list, line {line}: job id {id} was already used on line {first_line}; ids must be unique")]
    DuplicateId { id: u64, line: u64, first_line: u64 },
}

/// Reads a job list from a file.
pub fn read_jobs_csv(path: impl AsRef<Path>) -> Result<Vec<SimJob>, JobsCsvError> {
    let path = path.as_ref();
    let f =
        File::open(path).map_err(|source| JobsCsvError::Open { path: path.display().to_string(), source })?;
    read_jobs_csv_from(io::BufReader::new(f))
}

/// Reads a job list from any reader; the jobs come back sorted by submit time (ties keep file
/// order).
pub fn read_jobs_csv_from<R: Read>(input: R) -> Result<Vec<SimJob>, JobsCsvError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(input);
    let mut records = rdr.records();
    let csv_err =
        |source: csv::Error| JobsCsvError::Csv { line: source.position().map_or(0, |p| p.line()), source };
    let header = match records.next() {
        None => return Err(JobsCsvError::NoHeader),
        Some(h) => h.map_err(csv_err)?,
    };
    // Column index of each known column, by position in COLUMNS.
    let mut at: [Option<usize>; 8] = [None; 8];
    for (i, name) in header.iter().enumerate() {
        let name = name.trim_start_matches('\u{feff}');
        let Some(k) = COLUMNS.iter().position(|c| c.eq_ignore_ascii_case(name)) else {
            return Err(JobsCsvError::UnknownColumn { column: name.to_string() });
        };
        if at[k].replace(i).is_some() {
            return Err(JobsCsvError::DuplicateColumn { column: COLUMNS[k].to_string() });
        }
    }
    if let Some(k) = (0..COLUMNS.len()).find(|k| at[*k].is_none() && !OPTIONAL.contains(&COLUMNS[*k])) {
        return Err(JobsCsvError::MissingColumn { column: COLUMNS[k] });
    }

    let mut jobs = Vec::new();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for rec in records {
        let rec = rec.map_err(csv_err)?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.iter().all(str::is_empty) {
            continue;
        }
        if rec.len() != header.len() {
            return Err(JobsCsvError::FieldCount { line, found: rec.len(), expected: header.len() });
        }
        let cell = |k: usize| at[k].and_then(|i| rec.get(i)).filter(|v| !v.is_empty());
        let bad = |k: usize, accepted| JobsCsvError::Value {
            line,
            column: COLUMNS[k],
            value: cell(k).unwrap_or("").to_string(),
            accepted,
        };
        let num = |k: usize, max: f64, accepted| -> Result<Option<f64>, JobsCsvError> {
            match cell(k) {
                None if OPTIONAL.contains(&COLUMNS[k]) => Ok(None),
                None => Err(bad(k, accepted)),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0 && *x <= max)
                    .map(Some)
                    .ok_or_else(|| bad(k, accepted)),
            }
        };
        let int = |k: usize, min: u64, max: u64, accepted| -> Result<Option<u64>, JobsCsvError> {
            match cell(k) {
                None if OPTIONAL.contains(&COLUMNS[k]) => Ok(None),
                None => Err(bad(k, accepted)),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|x| (min..=max).contains(x))
                    .map(Some)
                    .ok_or_else(|| bad(k, accepted)),
            }
        };
        let id = int(0, 0, u64::MAX, "a whole number from 0 up")?.unwrap_or(0);
        let submit = num(1, MAX_TIME, "seconds from 0 to 1e10")?.unwrap_or(0.0);
        let runtime = num(2, MAX_RUNTIME, "seconds from 0 to 1e9")?.unwrap_or(0.0);
        let estimate =
            num(3, MAX_RUNTIME, "seconds from 0 to 1e9, or empty for the runtime")?.unwrap_or(runtime);
        let procs = int(4, 1, MAX_PROCS, "a whole number of processors from 1 to 1000000")?.unwrap_or(1);
        let deadline = num(5, MAX_TIME, "seconds after submit, from 0 to 1e10")?.unwrap_or(0.0);
        let budget_text = cell(6).unwrap_or("");
        let budget = budget_text
            .parse::<Money>()
            .ok()
            .filter(|m| !m.is_negative() && m.cents() / 100 <= MAX_BUDGET_CREDITS)
            .ok_or_else(|| bad(6, "credits from 0 to 1e12 with at most two decimals, e.g. 500 or 12.50"))?;
        let user = int(7, 0, u64::from(u32::MAX), "a whole number from 0 to 4294967295")?.unwrap_or(0);
        if let Some(first_line) = seen.insert(id, line) {
            return Err(JobsCsvError::DuplicateId { id, line, first_line });
        }
        jobs.push(SimJob {
            id,
            submit,
            runtime,
            estimate,
            procs: procs as u32,
            deadline,
            budget,
            user: user as u32,
            urgent: false,
        });
    }
    jobs.sort_by(|a, b| a.submit.total_cmp(&b.submit));
    Ok(jobs)
}

/// Writes a job list with every column, sorted by submit time (ties by id). Numbers are written
/// in the shortest form that reads back to the same value, so a write/read round trip is exact.
pub fn write_jobs_csv_to<W: Write>(out: W, jobs: &[SimJob]) -> Result<(), JobsCsvError> {
    let mut sorted: Vec<&SimJob> = jobs.iter().collect();
    sorted.sort_by(|a, b| a.submit.total_cmp(&b.submit).then(a.id.cmp(&b.id)));
    let mut w = csv::Writer::from_writer(out);
    let to_io = |e: csv::Error| JobsCsvError::Write(io::Error::other(e));
    w.write_record(COLUMNS).map_err(to_io)?;
    for j in sorted {
        w.write_record([
            j.id.to_string(),
            j.submit.to_string(),
            j.runtime.to_string(),
            j.estimate.to_string(),
            j.procs.to_string(),
            j.deadline.to_string(),
            j.budget.to_string(),
            j.user.to_string(),
        ])
        .map_err(to_io)?;
    }
    w.flush().map_err(JobsCsvError::Write)
}

/// Writes a job list to a file.
pub fn write_jobs_csv(path: impl AsRef<Path>, jobs: &[SimJob]) -> Result<(), JobsCsvError> {
    let path = path.as_ref();
    let f = File::create(path)
        .map_err(|source| JobsCsvError::Open { path: path.display().to_string(), source })?;
    write_jobs_csv_to(io::BufWriter::new(f), jobs)
}
