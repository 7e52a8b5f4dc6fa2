//! Standard Workload Format (SWF) of the Parallel Workloads Archive: a streaming reader for plain
//! and gzipped files, and a writer that keeps the header (the SDSC JOBLOG notice must travel with
//! every excerpt of that trace).
//!
//! A bad line is an error that names its line number and what was wrong; it never panics. The
//! lenient mode skips such lines and records them, for traces that are known to be dirty.

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

/// Number of fields on every SWF data line.
pub const SWF_FIELDS: usize = 18;

/// The value SWF uses for "unknown or not applicable".
pub const UNKNOWN: i64 = -1;

/// Field names in SWF order (field `n` is `FIELD_NAMES[n - 1]`), used in error messages.
pub const FIELD_NAMES: [&str; SWF_FIELDS] = [
    "Job Number",
    "Submit Time",
    "Wait Time",
    "Run Time",
    "Number of Allocated Processors",
    "Average CPU Time Used",
    "Used Memory",
    "Requested Number of Processors",
    "Requested Time",
    "Requested Memory",
    "Status",
    "User ID",
    "Group ID",
    "Executable Number",
    "Queue Number",
    "Partition Number",
    "Preceding Job Number",
    "Think Time from Preceding Job",
];

/// At most this many skipped lines are remembered in lenient mode (all are counted), so that a
/// huge, badly broken file cannot exhaust memory through its error list.
pub const MAX_REMEMBERED_SKIPS: usize = 10_000;

/// One SWF job record. Integer fields keep the trace's `-1` for "unknown" so that a record is
/// written back exactly as read; the `known_*` helpers turn that into `Option`.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfRecord {
    pub job: i64,
    pub submit: i64,
    pub wait: i64,
    pub run_time: i64,
    pub alloc_procs: i64,
    /// Average CPU time per processor; the one field that may hold fractions.
    pub avg_cpu_time: f64,
    pub used_memory: i64,
    pub req_procs: i64,
    pub req_time: i64,
    pub req_memory: i64,
    pub status: i64,
    pub user: i64,
    pub group: i64,
    pub executable: i64,
    pub queue: i64,
    pub partition: i64,
    pub preceding_job: i64,
    pub think_time: i64,
}

/// `None` for SWF's "unknown" (any negative value), the value otherwise.
pub fn known(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

impl SwfRecord {
    pub fn known_run_time(&self) -> Option<u64> {
        known(self.run_time)
    }
    pub fn known_alloc_procs(&self) -> Option<u64> {
        known(self.alloc_procs)
    }
    pub fn known_req_procs(&self) -> Option<u64> {
        known(self.req_procs)
    }
    pub fn known_req_time(&self) -> Option<u64> {
        known(self.req_time)
    }
    pub fn known_wait(&self) -> Option<u64> {
        known(self.wait)
    }
    pub fn known_user(&self) -> Option<u64> {
        known(self.user)
    }

    /// Run time with unknown counted as 0 (how the Libra+$ paper's mean of 8671 s counts the
    /// cancelled jobs).
    pub fn run_time_or_zero(&self) -> u64 {
        self.known_run_time().unwrap_or(0)
    }

    /// Processors the job asked for: requested, else allocated, and at least 1.
    pub fn procs(&self) -> u64 {
        self.known_req_procs().filter(|p| *p > 0).or_else(|| self.known_alloc_procs()).unwrap_or(1).max(1)
    }

    fn from_fields(f: &[&str]) -> Result<Self, LineErrorKind> {
        let mut ints = [0i64; SWF_FIELDS];
        let mut cpu = 0.0;
        for (i, raw) in f.iter().enumerate() {
            let field = i + 1;
            if field == 6 {
                let v: f64 = raw
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite())
                    .ok_or_else(|| LineErrorKind::NotANumber { field, value: raw.to_string() })?;
                if v < -1.0 {
                    return Err(LineErrorKind::BelowUnknown { field, value: raw.to_string() });
                }
                cpu = v;
                continue;
            }
            let v: i64 = match raw.parse() {
                Ok(v) => v,
                Err(_) => {
                    let fractional = raw.parse::<f64>().is_ok_and(|x| x.is_finite());
                    return Err(if fractional {
                        LineErrorKind::NotAnInteger { field, value: raw.to_string() }
                    } else {
                        LineErrorKind::NotANumber { field, value: raw.to_string() }
                    });
                }
            };
            if v < -1 {
                return Err(LineErrorKind::BelowUnknown { field, value: raw.to_string() });
            }
            ints[i] = v;
        }
        if ints[1] < 0 {
            return Err(LineErrorKind::UnknownSubmit);
        }
        Ok(SwfRecord {
            job: ints[0],
            submit: ints[1],
            wait: ints[2],
            run_time: ints[3],
            alloc_procs: ints[4],
            avg_cpu_time: cpu,
            used_memory: ints[6],
            req_procs: ints[7],
            req_time: ints[8],
            req_memory: ints[9],
            status: ints[10],
            user: ints[11],
            group: ints[12],
            executable: ints[13],
            queue: ints[14],
            partition: ints[15],
            preceding_job: ints[16],
            think_time: ints[17],
        })
    }
}

impl fmt::Display for SwfRecord {
    /// One data line, columns right-aligned in the archive's style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{}` on f64 prints the shortest text that reads back to the same value, and an
        // integral value without a decimal point.
        let cpu = if self.avg_cpu_time.fract() == 0.0 && self.avg_cpu_time.abs() < 1e15 {
            format!("{}", self.avg_cpu_time as i64)
        } else {
            format!("{}", self.avg_cpu_time)
        };
        write!(
            f,
            "{:>6} {:>9} {:>6} {:>6} {:>4} {:>8} {:>6} {:>4} {:>6} {:>6} {:>2} {:>4} {:>4} {:>5} {:>2} {:>2} {:>2} {:>2}",
            self.job,
            self.submit,
            self.wait,
            self.run_time,
            self.alloc_procs,
            cpu,
            self.used_memory,
            self.req_procs,
            self.req_time,
            self.req_memory,
            self.status,
            self.user,
            self.group,
            self.executable,
            self.queue,
            self.partition,
            self.preceding_job,
            self.think_time
        )
    }
}

/// The header comments: every raw line (so the writer reproduces them, copyright notices
/// included) and the `Label: value` pairs parsed from them, continuation lines joined by `\n`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwfHeader {
    /// Raw header lines as in the file, each starting with `;`, without the line end.
    pub lines: Vec<String>,
    /// `(label, value)` in file order; a label may repeat (`Queue`, `Note`).
    pub fields: Vec<(String, String)>,
}

impl SwfHeader {
    /// Builds the header from raw comment lines (each must start with `;`; others are ignored).
    pub fn from_lines<I, S>(lines: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut h = SwfHeader::default();
        for l in lines {
            h.push_line(l.into());
        }
        h
    }

    fn push_line(&mut self, line: String) {
        let Some(body) = line.strip_prefix(';') else {
            return;
        };
        if body.trim().is_empty() {
            self.lines.push(line);
            return;
        }
        // A new label is written `; Label: value`; a continuation is indented further, so a
        // URL such as `http://...` on a continuation line is never mistaken for a label.
        let lead = body.len() - body.trim_start().len();
        let labelled = if lead <= 1 {
            body.trim_start().split_once(':').filter(|(label, _)| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        } else {
            None
        };
        match labelled {
            Some((label, value)) => self.fields.push((label.to_string(), value.trim().to_string())),
            None => {
                let more = body.trim();
                // A continuation belongs to the last field unless a blank comment line has
                // closed it.
                let open = self.lines.last().is_some_and(|l| l.trim() != ";");
                match self.fields.last_mut() {
                    Some((_, v)) if open => {
                        if !v.is_empty() {
                            v.push('\n');
                        }
                        v.push_str(more);
                    }
                    _ => self.fields.push((String::new(), more.to_string())),
                }
            }
        }
        self.lines.push(line);
    }

    /// The first value of `label` (case-insensitive).
    pub fn get(&self, label: &str) -> Option<&str> {
        self.fields.iter().find(|(l, _)| l.eq_ignore_ascii_case(label)).map(|(_, v)| v.as_str())
    }

    /// Every value of a repeated label such as `Queue` or `Note`.
    pub fn get_all<'a>(&'a self, label: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields.iter().filter(move |(l, _)| l.eq_ignore_ascii_case(label)).map(|(_, v)| v.as_str())
    }

    fn number(&self, label: &str) -> Option<i64> {
        self.get(label)?.split_whitespace().next()?.parse().ok()
    }

    pub fn max_nodes(&self) -> Option<i64> {
        self.number("MaxNodes")
    }
    pub fn max_procs(&self) -> Option<i64> {
        self.number("MaxProcs")
    }
    pub fn max_jobs(&self) -> Option<i64> {
        self.number("MaxJobs")
    }
    pub fn max_records(&self) -> Option<i64> {
        self.number("MaxRecords")
    }
    /// Epoch seconds (UTC) of submit time 0.
    pub fn unix_start_time(&self) -> Option<i64> {
        self.number("UnixStartTime")
    }
    pub fn time_zone(&self) -> Option<i64> {
        self.number("TimeZone")
    }
    pub fn version(&self) -> Option<&str> {
        self.get("Version")
    }
    pub fn computer(&self) -> Option<&str> {
        self.get("Computer")
    }
    pub fn installation(&self) -> Option<&str> {
        self.get("Installation")
    }

    /// Adds a `; Note: ...` line (e.g. "excerpt: the last 5000 jobs"), keeping the rest.
    pub fn add_note(&mut self, note: &str) {
        self.push_line(format!("; Note: {note}"));
    }
}

/// What was wrong with one data line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineErrorKind {
    #[error("expected {SWF_FIELDS} whitespace-separated numeric fields, found {found}")]
    FieldCount { found: usize },
    #[error("field {field} ({}) is '{value}', which is not a number", FIELD_NAMES[*field - 1])]
    NotANumber { field: usize, value: String },
    #[error("field {field} ({}) is '{value}': an integer is expected (only field 6 may hold fractions)", FIELD_NAMES[*field - 1])]
    NotAnInteger { field: usize, value: String },
    #[error("field {field} ({}) is {value}: values below -1 are not accepted (-1 means unknown)", FIELD_NAMES[*field - 1])]
    BelowUnknown { field: usize, value: String },
    #[error("field 2 (Submit Time) is -1: every job needs a known submit time")]
    UnknownSubmit,
    #[error("submit time {submit} is earlier than the previous job's {previous}: SWF lines must be sorted by submit time")]
    DecreasingSubmit { submit: i64, previous: i64 },
    #[error("the line is not ASCII/UTF-8 text")]
    NotText,
}

/// A bad data line: its 1-based line number in the file and what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct SwfLineError {
    pub line: u64,
    pub kind: LineErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum SwfError {
    #[error("cannot open SWF file {path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("reading SWF input failed at line {line}: {source}")]
    Read { line: u64, source: io::Error },
    #[error("writing SWF output failed: {0}")]
    Write(#[source] io::Error),
    #[error(transparent)]
    Line(#[from] SwfLineError),
}

/// Whether a bad line stops the read (strict) or is skipped and recorded (lenient).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    #[default]
    Strict,
    Lenient,
}

/// Streaming SWF reader: the header is read when the reader is built; records come one at a
/// time from the iterator, so a large trace is never held as text.
pub struct SwfReader<R> {
    input: R,
    header: SwfHeader,
    mode: ReadMode,
    line_no: u64,
    buf: Vec<u8>,
    /// The first data line, read while looking for the header's end.
    pending: Option<(u64, Vec<u8>)>,
    last_submit: Option<i64>,
    skipped: Vec<SwfLineError>,
    skipped_count: u64,
    done: bool,
}

/// A reader over a file, plain or gzipped (detected by the gzip magic bytes, not the name).
pub type SwfFileReader = SwfReader<Box<dyn BufRead>>;

impl SwfFileReader {
    pub fn open(path: impl AsRef<Path>, mode: ReadMode) -> Result<Self, SwfError> {
        let path = path.as_ref();
        let open_err = |source| SwfError::Open { path: path.display().to_string(), source };
        let mut file = BufReader::new(File::open(path).map_err(open_err)?);
        let gz = file.fill_buf().map_err(open_err)?.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead> =
            if gz { Box::new(BufReader::new(MultiGzDecoder::new(file))) } else { Box::new(file) };
        SwfReader::new(input, mode)
    }
}

impl<R: BufRead> SwfReader<R> {
    /// Reads the header comments from `input`; records follow through the iterator.
    pub fn new(input: R, mode: ReadMode) -> Result<Self, SwfError> {
        let mut r = SwfReader {
            input,
            header: SwfHeader::default(),
            mode,
            line_no: 0,
            buf: Vec::with_capacity(256),
            pending: None,
            last_submit: None,
            skipped: Vec::new(),
            skipped_count: 0,
            done: false,
        };
        while let Some(line) = r.next_raw()? {
            let text = String::from_utf8_lossy(&line);
            let t = text.trim_end_matches(['\r', '\n']);
            if t.starts_with(';') {
                r.header.push_line(t.to_string());
            } else if !t.trim().is_empty() {
                r.pending = Some((r.line_no, line));
                break;
            }
        }
        Ok(r)
    }

    pub fn header(&self) -> &SwfHeader {
        &self.header
    }

    /// Lines skipped so far in lenient mode (the first `MAX_REMEMBERED_SKIPS`).
    pub fn skipped(&self) -> &[SwfLineError] {
        &self.skipped
    }

    /// How many lines were skipped so far in lenient mode.
    pub fn skipped_count(&self) -> u64 {
        self.skipped_count
    }

    fn next_raw(&mut self) -> Result<Option<Vec<u8>>, SwfError> {
        self.buf.clear();
        let n = self
            .input
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| SwfError::Read { line: self.line_no + 1, source })?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        Ok(Some(std::mem::take(&mut self.buf)))
    }

    fn parse_line(&mut self, line_no: u64, raw: &[u8]) -> Option<Result<SwfRecord, SwfLineError>> {
        let Ok(text) = std::str::from_utf8(raw) else {
            return Some(Err(SwfLineError { line: line_no, kind: LineErrorKind::NotText }));
        };
        let t = text.trim();
        // Comments after the first record carry nothing a simulator needs; blank lines neither.
        if t.is_empty() || t.starts_with(';') {
            return None;
        }
        let mut fields = [""; SWF_FIELDS];
        let mut found = 0;
        for f in t.split_ascii_whitespace() {
            if found < SWF_FIELDS {
                fields[found] = f;
            }
            found += 1;
        }
        let err = |kind| Some(Err(SwfLineError { line: line_no, kind }));
        if found != SWF_FIELDS {
            return err(LineErrorKind::FieldCount { found });
        }
        let rec = match SwfRecord::from_fields(&fields) {
            Ok(r) => r,
            Err(kind) => return err(kind),
        };
        if let Some(previous) = self.last_submit.filter(|p| rec.submit < *p) {
            return err(LineErrorKind::DecreasingSubmit { submit: rec.submit, previous });
        }
        self.last_submit = Some(rec.submit);
        Some(Ok(rec))
    }

    /// Reads everything left into a `SwfTrace`.
    pub fn read_all(mut self) -> Result<SwfTrace, SwfError> {
        let mut records = Vec::new();
        for r in self.by_ref() {
            records.push(r?);
        }
        Ok(SwfTrace {
            header: self.header,
            records,
            skipped: self.skipped,
            skipped_count: self.skipped_count,
        })
    }
}

impl<R: BufRead> Iterator for SwfReader<R> {
    type Item = Result<SwfRecord, SwfError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let (line_no, raw) = match self.pending.take() {
                Some(p) => p,
                None => match self.next_raw() {
                    Ok(Some(raw)) => (self.line_no, raw),
                    Ok(None) => {
                        self.done = true;
                        return None;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
            };
            let parsed = self.parse_line(line_no, &raw);
            // Hand the buffer back so the next line reuses its allocation.
            self.buf = raw;
            match parsed {
                None => continue,
                Some(Ok(rec)) => return Some(Ok(rec)),
                Some(Err(e)) if self.mode == ReadMode::Lenient => {
                    tracing::debug!("skipping SWF {e}");
                    self.skipped_count += 1;
                    if self.skipped.len() < MAX_REMEMBERED_SKIPS {
                        self.skipped.push(e);
                    }
                }
                Some(Err(e)) => return Some(Err(e.into())),
            }
        }
    }
}

/// A whole trace in memory: header, records, and (lenient mode) the lines that were skipped.
#[derive(Debug, Clone, Default)]
pub struct SwfTrace {
    pub header: SwfHeader,
    pub records: Vec<SwfRecord>,
    pub skipped: Vec<SwfLineError>,
    pub skipped_count: u64,
}

/// Reads a whole SWF file (plain or gzipped).
pub fn read_swf(path: impl AsRef<Path>, mode: ReadMode) -> Result<SwfTrace, SwfError> {
    SwfReader::open(path, mode)?.read_all()
}

/// Reads SWF text from any reader (plain text; use `MultiGzDecoder` first for gzip).
pub fn read_swf_from<R: Read>(input: R, mode: ReadMode) -> Result<SwfTrace, SwfError> {
    SwfReader::new(BufReader::new(input), mode)?.read_all()
}

/// Writes the header lines verbatim, then one line per record.
pub fn write_swf_to<W: Write>(mut out: W, header: &SwfHeader, records: &[SwfRecord]) -> Result<(), SwfError> {
    let mut w = || -> io::Result<()> {
        for l in &header.lines {
            writeln!(out, "{l}")?;
        }
        for r in records {
            writeln!(out, "{r}")?;
        }
        out.flush()
    };
    w().map_err(SwfError::Write)
}

/// Writes an SWF file; a name ending in `.gz` is gzipped.
pub fn write_swf(path: impl AsRef<Path>, header: &SwfHeader, records: &[SwfRecord]) -> Result<(), SwfError> {
    let path = path.as_ref();
    let file =
        File::create(path).map_err(|source| SwfError::Open { path: path.display().to_string(), source })?;
    let out = io::BufWriter::new(file);
    if path.extension().is_some_and(|e| e == "gz") {
        let mut gz = GzEncoder::new(out, Compression::default());
        write_swf_to(&mut gz, header, records)?;
        gz.finish().map_err(SwfError::Write)?.flush().map_err(SwfError::Write)
    } else {
        write_swf_to(out, header, records)
    }
}
