//! The resources file (TOML): what each resource is, how many jobs it runs at once, what it
//! charges and how to reach it.
//!
//! ```toml
//! [[resource]]
//! name = "laptop"
//! kind = "local"          # local | testqueue | libra | slurm
//! slots = 2
//! price = 1.5             # credits per CPU-second (off-peak price when a peak is given); for
//!                         # a libra resource the most the sweep offers: the cluster sets its own
//!                         # price, charges no more than the job's share of the budget, and is paid
//!                         # what it charged
//! job_secs = 60           # optional: expected wall seconds per job before calibration
//! utc_offset = "+10:00"   # the resource's own time zone, for the peak window
//! peak = { start = "09:00", end = "18:00", price = 20 }
//!
//! [[resource]]
//! name = "q1"
//! kind = "testqueue"
//! wall = 90               # seconds per job
//! cpu = 90                # CPU seconds reported per job (default: wall)
//! time_scale = 0.01       # real runs sleep wall * time_scale
//!
//! [[resource]]
//! name = "hpc"
//! kind = "slurm"           # each job an sbatch job (this machine's Slurm client commands)
//! slots = 8                # at most 8 of the sweep's jobs queued or running at once
//! price = 2                # credits per CPU-second the job used, as for local
//! partition = "batch"      # optional (default: Slurm's default partition)
//! cpus_per_job = 1         # optional: sbatch -c
//! sbatch_args = ["--time=30", "--qos=low"]   # optional: more sbatch options
//! ```

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The longest job a resource may declare (about 31 years): past it a length is a typo, and
/// the planner's sums would lose the seconds of every other job.
pub const MAX_JOB_SECS: f64 = 1e9;

#[derive(Debug, thiserror::Error)]
pub enum ResourcesError {
    #[error("cannot read the resources file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("resources file: {0}")]
    // Not a `source`: the message already holds toml's, and a chain printed it twice.
    Toml(toml::de::Error),
    #[error("resource '{name}': {field} {problem}")]
    Field { name: String, field: &'static str, problem: String },
    #[error("resources file: no [[resource]] entries; at least one is needed")]
    Empty,
    #[error("resource '{name}': {field} is {value}: give a finite number")]
    NotFinite { name: String, field: String, value: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Local,
    Testqueue,
    Libra,
    Slurm,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// "HH:MM" (or "HH:MM:SS") in the resource's own time zone.
    pub start: String,
    pub end: String,
    /// Credits per CPU-second inside the window.
    pub price: f64,
}

/// One resource: the fields every kind shares, and the kind with its own fields.
///
/// The TOML stays flat (`kind = "testqueue"` next to `wall = 90`): deserialising splits the
/// table into the shared part and the kind's part, and each kind's struct refuses fields that
/// are not its own, so a `wall` on a libra resource is an error naming `wall` and the resource
/// rather than a value silently ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceConfig {
    pub name: String,
    pub slots: u32,
    /// Credits per CPU-second.
    pub price: f64,
    pub job_secs: Option<f64>,
    pub utc_offset: Option<String>,
    pub peak: Option<Peak>,
    #[serde(flatten)]
    pub spec: KindSpec,
}

/// The shortest runtime estimate a sweep offers a Libra cluster for a job, in seconds: a job
/// measured shorter is still offered, priced and held for this long (`Farm::job_secs`), so
/// that what the sweep offers per CPU-second is never below the resource's price.
pub const LIBRA_MIN_ESTIMATE_SECS: f64 = 1.0;

/// What a resource is, with the fields only that kind takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KindSpec {
    Local(LocalSpec),
    Testqueue(TestqueueSpec),
    Libra(LibraSpec),
    Slurm(SlurmSpec),
}

/// A local resource runs jobs on this machine and takes no fields of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalSpec {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestqueueSpec {
    /// Wall seconds per job.
    pub wall: f64,
    /// CPU seconds per job (default: wall).
    #[serde(default)]
    pub cpu: Option<f64>,
    /// Real seconds slept per simulated second.
    #[serde(default)]
    pub time_scale: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibraSpec {
    /// The cluster's API address.
    pub url: String,
    /// The user's API token (default: the LIBRA_TOKEN environment variable, else, where the
    /// engine is given one, the login saved for this very `url`: `LibraSpec::with_login`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A PEM file with the certificate (or CA) the cluster's TLS certificate is checked
    /// against (default: the LIBRA_CA environment variable, else the public roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
    /// Allow plain http to a cluster that is not on this machine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_http: bool,
}

/// A Slurm cluster reached through this machine's Slurm client commands: each of the sweep's
/// jobs is one batch job (`sbatch --parsable`), watched with squeue / scontrol and cancelled
/// with scancel. The job runs the plan's task through `libra sweep keep-attempt` in the
/// attempt's directory, so the nodes must see the broker's files (the shared file system a
/// Slurm cluster has) and the `libra` binary at the same path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSpec {
    /// The partition to submit to (default: the cluster's default partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// CPUs per job (`sbatch -c`; default: Slurm's, one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_job: Option<u32>,
    /// More sbatch options, one per element (`--time=30`, `--qos=low`, `--nodelist=n1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sbatch_args: Vec<String>,
}

/// sbatch options the slurm adapter sets itself for every job, refused in `sbatch_args`.
pub const SLURM_OWN_OPTIONS: &[&str] = &[
    "--parsable",
    "--wrap",
    "-D",
    "--chdir",
    "-o",
    "--output",
    "-e",
    "--error",
    "-J",
    "--job-name",
    "--array",
    "-a",
];

/// The fields every kind takes, besides `kind` itself.
const SHARED: &[&str] = &["name", "slots", "price", "job_secs", "utc_offset", "peak"];
const TESTQUEUE: &[&str] = &["wall", "cpu", "time_scale"];
const LIBRA: &[&str] = &["url", "token", "ca", "insecure_http"];
const SLURM: &[&str] = &["partition", "cpus_per_job", "sbatch_args"];

/// A login saved on this machine for one Libra server (`libra login`): what a `libra` resource
/// that names no token of its own acts through, on that server only.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedLogin {
    /// The server the login is for, as it was given to `libra login`.
    pub server: String,
    pub token: String,
    /// Its TLS settings go with it, as for every other command.
    pub ca: Option<std::path::PathBuf>,
    pub insecure_http: bool,
}

/// Whether two server addresses name the same server as written: a token is sent only to the
/// address it was saved for (no resolving of names: `localhost` is not `127.0.0.1`).
pub fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/').eq_ignore_ascii_case(b.trim_end_matches('/'))
}

impl LibraSpec {
    /// Whether it has a token to act through: its own, LIBRA_TOKEN, or `login` lent to it.
    pub fn has_token_with(&self, login: Option<&SavedLogin>) -> bool {
        std::env::var_os("LIBRA_TOKEN").is_some() || self.with_login(login).token.is_some()
    }

    /// This resource acting through `login` when it names no token and LIBRA_TOKEN is unset,
    /// and `login` is for its very server; otherwise as it is. The login's certificate and
    /// plain-http consent come with its token, as they do for `libra status`.
    pub fn with_login(&self, login: Option<&SavedLogin>) -> LibraSpec {
        self.lent(login, std::env::var_os("LIBRA_TOKEN").is_some())
    }

    /// `with_login`, LIBRA_TOKEN being set or not (`env_token`).
    fn lent(&self, login: Option<&SavedLogin>, env_token: bool) -> LibraSpec {
        match login {
            Some(l) if self.token.is_none() && !env_token && same_server(&l.server, &self.url) => LibraSpec {
                url: self.url.clone(),
                token: Some(l.token.clone()),
                ca: self.ca.clone().or_else(|| l.ca.clone()),
                insecure_http: self.insecure_http || l.insecure_http,
            },
            _ => self.clone(),
        }
    }
}

impl Kind {
    /// The fields this kind takes beyond the shared ones.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Local => &[],
            Kind::Testqueue => TESTQUEUE,
            Kind::Libra => LIBRA,
            Kind::Slurm => SLURM,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Local => "local",
            Kind::Testqueue => "testqueue",
            Kind::Libra => "libra",
            Kind::Slurm => "slurm",
        }
    }
}

/// The shared part, read from the table once the kind's fields are taken out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shared {
    name: String,
    #[serde(default = "one")]
    slots: u32,
    #[serde(default)]
    price: f64,
    #[serde(default)]
    job_secs: Option<f64>,
    #[serde(default)]
    utc_offset: Option<String>,
    #[serde(default)]
    peak: Option<Peak>,
}

impl<'de> Deserialize<'de> for ResourceConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_json::{Map, Value};
        // Through a JSON map: it takes both the TOML users write and the JSON the sweep store
        // keeps, where older rows carry `"wall": null` and the like for every kind.
        let mut all: Map<String, Value> = Map::deserialize(d)?;
        all.retain(|_, v| !v.is_null());
        let name = match all.get("name") {
            Some(Value::String(n)) => n.clone(),
            Some(_) => return Err(D::Error::custom("resource: name must be a string")),
            None => return Err(D::Error::custom("resource: missing field `name`")),
        };
        let bad = |msg: String| D::Error::custom(format!("resource '{name}': {msg}"));
        let kinds = "local, testqueue, libra or slurm";
        let kind: Kind = match all.get("kind") {
            None => return Err(bad(format!("missing field `kind` ({kinds})"))),
            Some(k) => Kind::deserialize(k.clone())
                .map_err(|_| bad(format!("kind {k} is not a kind of resource: use {kinds}")))?,
        };
        let mut own = Map::new();
        let mut shared = Map::new();
        for (k, v) in all {
            if k == "kind" {
                continue;
            } else if kind.fields().contains(&k.as_str()) {
                own.insert(k, v);
            } else if SHARED.contains(&k.as_str()) {
                shared.insert(k, v);
            } else {
                let other = [Kind::Testqueue, Kind::Libra, Kind::Slurm]
                    .into_iter()
                    .find(|o| o.fields().contains(&k.as_str()));
                let mut accepted: Vec<&str> = SHARED.to_vec();
                accepted.push("kind");
                accepted.extend(kind.fields());
                let whose = other.map_or(String::new(), |o| format!(" (it is a {} field)", o.name()));
                return Err(bad(format!(
                    "field `{k}` is not accepted for a {} resource{whose}; accepted: {}",
                    kind.name(),
                    accepted.join(", ")
                )));
            }
        }
        // A required field of the kind, named with what it is for.
        let need = |field: &str, what: &str| -> Result<(), D::Error> {
            if own.contains_key(field) {
                Ok(())
            } else {
                Err(bad(format!("{field} is required for a {} resource: {what}", kind.name())))
            }
        };
        match kind {
            Kind::Testqueue => need("wall", "positive seconds per job")?,
            Kind::Libra => need("url", "the cluster's API address")?,
            Kind::Local | Kind::Slurm => {}
        }
        // Each part read on its own type, with the path to a mistyped field ("wall: invalid
        // type: string \"ninety\", expected f64"): serde's own errors from a map name no field.
        let at =
            |e: serde_path_to_error::Error<serde_json::Error>| bad(format!("{}: {}", e.path(), e.inner()));
        let own = Value::Object(own);
        let spec = match kind {
            Kind::Local => KindSpec::Local(serde_path_to_error::deserialize(own).map_err(at)?),
            Kind::Testqueue => KindSpec::Testqueue(serde_path_to_error::deserialize(own).map_err(at)?),
            Kind::Libra => KindSpec::Libra(serde_path_to_error::deserialize(own).map_err(at)?),
            Kind::Slurm => KindSpec::Slurm(serde_path_to_error::deserialize(own).map_err(at)?),
        };
        let s: Shared = serde_path_to_error::deserialize(Value::Object(shared)).map_err(at)?;
        Ok(ResourceConfig {
            name: s.name,
            slots: s.slots,
            price: s.price,
            job_secs: s.job_secs,
            utc_offset: s.utc_offset,
            peak: s.peak,
            spec,
        })
    }
}

impl TestqueueSpec {
    /// A test queue of `wall` seconds per job, reporting as much CPU, in real time.
    pub fn new(wall: f64) -> Self {
        TestqueueSpec { wall, cpu: None, time_scale: None }
    }

    fn validate(&self, r: &ResourceConfig) -> Result<(), ResourcesError> {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        if !(pos(self.wall) && self.wall <= MAX_JOB_SECS) {
            return Err(r.bad("wall", "is required for a testqueue: positive seconds per job, at most 1e9"));
        }
        if self.cpu.is_some_and(|c| !c.is_finite() || !(0.0..=MAX_JOB_SECS).contains(&c)) {
            return Err(r.bad("cpu", "must be non-negative seconds, at most 1e9"));
        }
        if self.time_scale.is_some_and(|t| !pos(t)) {
            return Err(r.bad("time_scale", "must be positive"));
        }
        Ok(())
    }
}

impl LibraSpec {
    fn validate(&self, r: &ResourceConfig) -> Result<(), ResourcesError> {
        if self.url.trim().is_empty() {
            return Err(r.bad("url", "is required for a libra resource (the cluster's API address)"));
        }
        Ok(())
    }
}

impl SlurmSpec {
    fn validate(&self, r: &ResourceConfig) -> Result<(), ResourcesError> {
        if let Some(p) = &self.partition {
            if p.trim().is_empty() || p.contains(char::is_whitespace) || p.contains(',') {
                return Err(r.bad(
                    "partition",
                    "must be one partition name (no spaces or commas), or left out for the default",
                ));
            }
        }
        if self.cpus_per_job.is_some_and(|c| c == 0 || c > 4096) {
            return Err(r.bad("cpus_per_job", "must be between 1 and 4096 (sbatch -c)"));
        }
        for a in &self.sbatch_args {
            let opt = a.split('=').next().unwrap_or(a);
            // `-o x` as one element, or `-ox`: the short options the adapter sets, in any form.
            let short = |o: &str| o.len() == 2 && (opt == o || (a.starts_with(o) && !a.starts_with("--")));
            if SLURM_OWN_OPTIONS.iter().any(|o| if o.len() == 2 { short(o) } else { opt == *o }) {
                return Err(r.bad(
                    "sbatch_args",
                    &format!(
                        "'{a}' is set by the broker for every job (its directory, output, name and the command); accepted: other sbatch options such as --time=30, --qos=low"
                    ),
                ));
            }
            if !a.starts_with('-') {
                return Err(r.bad(
                    "sbatch_args",
                    &format!("'{a}' is not an sbatch option: give one option per element, with its value after '=' (\"--time=30\")"),
                ));
            }
            if a.trim() != a || a.contains('\n') {
                return Err(r.bad(
                    "sbatch_args",
                    &format!("'{a}': one option per element, without surrounding spaces"),
                ));
            }
        }
        Ok(())
    }
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    // Read as TOML first (syntax errors keep their line), each resource after: toml would
    // point a resource's error at the first [[resource]], and the error names its resource.
    #[serde(default)]
    resource: Vec<toml::Value>,
}

pub fn load(path: &Path) -> Result<Vec<ResourceConfig>, ResourcesError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ResourcesError::Read { path: path.display().to_string(), source })?;
    parse(&text)
}

pub fn parse(text: &str) -> Result<Vec<ResourceConfig>, ResourcesError> {
    let f: File = toml::from_str(text).map_err(ResourcesError::Toml)?;
    if f.resource.is_empty() {
        return Err(ResourcesError::Empty);
    }
    for r in &f.resource {
        if let Some((field, value)) = non_finite(r, "") {
            let name = r.get("name").and_then(toml::Value::as_str).unwrap_or("(no name)").to_string();
            return Err(ResourcesError::NotFinite { name, field, value });
        }
    }
    let resources = f
        .resource
        .into_iter()
        .map(ResourceConfig::deserialize)
        .collect::<Result<Vec<_>, _>>()
        .map_err(ResourcesError::Toml)?;
    for (i, r) in resources.iter().enumerate() {
        r.validate()?;
        if resources[..i].iter().any(|q| q.name == r.name) {
            return Err(r.bad("name", "is used twice: names must be unique"));
        }
    }
    Ok(resources)
}

/// The first float in `v` that is not a finite number (TOML's `nan` and `inf`), with its dotted
/// path under `path`. A resource is read through JSON, which has no such numbers: the field
/// would be dropped as if it were not there, and a `price = inf` would become the default, 0.
fn non_finite(v: &toml::Value, path: &str) -> Option<(String, f64)> {
    let under = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match v {
        toml::Value::Float(f) if !f.is_finite() => Some((path.to_string(), *f)),
        toml::Value::Table(t) => t.iter().find_map(|(k, v)| non_finite(v, &under(k))),
        toml::Value::Array(a) => {
            a.iter().enumerate().find_map(|(i, v)| non_finite(v, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

/// Seconds past midnight of a time of day ("09:00", "17:30:15"); jiff refuses what no clock
/// shows ("24:00", "16:99") rather than rolling it over.
fn time_of_day(s: &str) -> Option<i64> {
    let t: jiff::civil::Time = s.trim().parse().ok()?;
    Some(i64::from(t.hour()) * 3600 + i64::from(t.minute()) * 60 + i64::from(t.second()))
}

/// Seconds east of UTC from "+10:00" / "-05:30" / "Z" / "UTC" (-12:00 to +14:00).
fn offset(s: &str) -> Option<i64> {
    let s = s.trim();
    if s == "Z" || s == "UTC" {
        return Some(0);
    }
    // Only a fixed offset: a named zone would need the time-zone database, which is not built in.
    if !s.starts_with(['+', '-']) {
        return None;
    }
    let tz = jiff::fmt::temporal::DateTimeParser::new().parse_time_zone(s).ok()?;
    let secs = i64::from(tz.to_fixed_offset().ok()?.seconds());
    // jiff takes offsets up to ±25:59; the world's clocks run from UTC-12 to UTC+14.
    (-12 * 3600..=14 * 3600).contains(&secs).then_some(secs)
}

impl ResourceConfig {
    /// A resource with the shared fields at their defaults (one slot, free).
    pub fn new(name: impl Into<String>, spec: KindSpec) -> Self {
        ResourceConfig {
            name: name.into(),
            slots: 1,
            price: 0.0,
            job_secs: None,
            utc_offset: None,
            peak: None,
            spec,
        }
    }

    pub fn kind(&self) -> Kind {
        match self.spec {
            KindSpec::Local(_) => Kind::Local,
            KindSpec::Testqueue(_) => Kind::Testqueue,
            KindSpec::Libra(_) => Kind::Libra,
            KindSpec::Slurm(_) => Kind::Slurm,
        }
    }

    pub fn testqueue(&self) -> Option<&TestqueueSpec> {
        match &self.spec {
            KindSpec::Testqueue(t) => Some(t),
            _ => None,
        }
    }

    pub fn libra(&self) -> Option<&LibraSpec> {
        match &self.spec {
            KindSpec::Libra(l) => Some(l),
            _ => None,
        }
    }

    pub fn libra_mut(&mut self) -> Option<&mut LibraSpec> {
        match &mut self.spec {
            KindSpec::Libra(l) => Some(l),
            _ => None,
        }
    }

    fn bad(&self, field: &'static str, problem: &str) -> ResourcesError {
        ResourcesError::Field { name: self.name.clone(), field, problem: problem.to_string() }
    }

    pub fn validate(&self) -> Result<(), ResourcesError> {
        let pos = |v: Option<f64>| v.is_none_or(|x| x.is_finite() && x > 0.0);
        if self.name.trim().is_empty() {
            return Err(self.bad("name", "must not be empty"));
        }
        if self.slots == 0 || self.slots > 100_000 {
            return Err(self.bad("slots", "must be between 1 and 100000"));
        }
        if !self.price.is_finite() || self.price < 0.0 {
            return Err(self.bad("price", "must be a non-negative number of credits per CPU-second"));
        }
        if !pos(self.job_secs) || self.job_secs.is_some_and(|x| x > MAX_JOB_SECS) {
            return Err(self.bad("job_secs", "must be a positive number of seconds, at most 1e9"));
        }
        if let Some(o) = &self.utc_offset {
            if offset(o).is_none() {
                return Err(self.bad("utc_offset", "must look like +10:00, -05:30 or Z (-12:00 to +14:00)"));
            }
        }
        if let Some(p) = &self.peak {
            if time_of_day(&p.start).is_none() || time_of_day(&p.end).is_none() {
                return Err(self.bad("peak", "start and end must be times of day HH:MM (00:00 to 23:59)"));
            }
            if !p.price.is_finite() || p.price < 0.0 {
                return Err(self.bad("peak", "price must be a non-negative number"));
            }
        }
        match &self.spec {
            KindSpec::Testqueue(t) => t.validate(self)?,
            KindSpec::Libra(l) => l.validate(self)?,
            KindSpec::Slurm(sl) => sl.validate(self)?,
            KindSpec::Local(_) => {}
        }
        Ok(())
    }

    /// Price per CPU-second at `unix` seconds: the peak price inside the peak window of the
    /// resource's own day, the base price outside it (Table 17.5).
    pub fn price_at(&self, unix: f64) -> f64 {
        let Some(p) = &self.peak else { return self.price };
        let off = self.utc_offset.as_deref().and_then(offset).unwrap_or(0);
        let (Some(a), Some(b)) = (time_of_day(&p.start), time_of_day(&p.end)) else { return self.price };
        let second = (unix.floor() as i64 + off).rem_euclid(86_400);
        let inside = if a <= b { second >= a && second < b } else { second >= a || second < b };
        if inside {
            p.price
        } else {
            self.price
        }
    }

    /// Expected wall seconds per job before calibration: the testqueue's own length, the
    /// declared `job_secs`, or the run's estimate.
    pub fn prior_secs(&self, estimate: Option<f64>) -> Option<f64> {
        match &self.spec {
            KindSpec::Testqueue(t) => self.job_secs.or(Some(t.wall * t.time_scale.unwrap_or(1.0))),
            _ => self.job_secs.or(estimate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kinds_and_peak_prices() {
        let r = parse(
            r#"
[[resource]]
name = "monash"
kind = "local"
slots = 4
price = 5
utc_offset = "+10:00"
peak = { start = "09:00", end = "18:00", price = 20 }

[[resource]]
name = "q"
kind = "testqueue"
wall = 90
time_scale = 0.001
"#,
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        // 00:00 UTC is 10:00 in Melbourne: peak.
        assert_eq!(r[0].price_at(0.0), 20.0);
        // 12:00 UTC is 22:00 there: off-peak.
        assert_eq!(r[0].price_at(12.0 * 3600.0), 5.0);
        // A test queue run at a time scale takes (and is expected to take) scaled time.
        assert_eq!(r[1].prior_secs(None), Some(90.0 * 0.001));
    }

    #[test]
    fn bad_fields_are_named() {
        let e = parse("[[resource]]\nname = \"q\"\nkind = \"testqueue\"\n").unwrap_err();
        assert!(e.to_string().contains("'q': wall"), "{e}");
        let e = parse("[[resource]]\nname = \"a\"\nkind = \"local\"\nslots = 0\n").unwrap_err();
        assert!(e.to_string().contains("slots"), "{e}");
        let e = parse("[[resource]]\nname = \"a\"\nkind = \"pbs\"\n").unwrap_err();
        assert!(e.to_string().contains("kind") || e.to_string().contains("variant"), "{e}");
        assert!(matches!(parse(""), Err(ResourcesError::Empty)));
    }

    /// TOML's nan and inf are refused by their field: read through JSON they were dropped, so
    /// `price = inf` made a free resource. Absurd lengths are refused too.
    #[test]
    fn numbers_that_are_not_finite_or_absurd_are_named() {
        let q = "[[resource]]\nname = \"q\"\nkind = \"testqueue\"\n";
        for (extra, named) in [
            ("wall = 1\nprice = inf\n", "'q': price is inf"),
            ("wall = 1\nprice = nan\n", "'q': price is NaN"),
            ("wall = 1\njob_secs = -inf\n", "'q': job_secs is -inf"),
            (
                "wall = 1\npeak = { start = \"09:00\", end = \"18:00\", price = inf }\n",
                "'q': peak.price is inf",
            ),
            ("wall = nan\n", "'q': wall is NaN"),
            (
                "wall = 1e300\n",
                "'q': wall is required for a testqueue: positive seconds per job, at most 1e9",
            ),
            ("wall = 1\ncpu = 2e9\n", "'q': cpu must be non-negative seconds, at most 1e9"),
            (
                "wall = 1\njob_secs = 1e10\n",
                "'q': job_secs must be a positive number of seconds, at most 1e9",
            ),
        ] {
            let e = parse(&format!("{q}{extra}")).unwrap_err();
            assert!(e.to_string().contains(named), "{extra}: {e}");
        }
        // The largest accepted length still parses.
        assert!(parse(&format!("{q}wall = 1e9\n")).is_ok());
    }

    #[test]
    fn a_field_of_another_kind_is_refused_by_name() {
        let e = parse(
            "[[resource]]\nname = \"hpc\"\nkind = \"libra\"\nurl = \"https://hpc.example:8443\"\nwall = 90\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("'hpc'") && e.contains("`wall`") && e.contains("testqueue field"), "{e}");
        let e = parse("[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nwall = 1\ntoken = \"t\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'q'") && e.contains("`token`") && e.contains("libra field"), "{e}");
        let e = parse("[[resource]]\nname = \"l\"\nkind = \"local\"\ncolour = \"red\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'l'") && e.contains("`colour`") && e.contains("accepted: name"), "{e}");
        // A field of the right kind but the wrong type is named too.
        let e = parse("[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nwall = \"ninety\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'q': wall: invalid type"), "{e}");
        let e = parse("[[resource]]\nname = \"p\"\nkind = \"local\"\npeak = { start = \"09:00\", end = \"17:00\", price = \"x\" }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'p': peak.price: invalid type"), "{e}");
        let e = parse("[[resource]]\nname = \"c\"\nkind = \"libra\"\n").unwrap_err().to_string();
        assert!(e.contains("'c'") && e.contains("url is required"), "{e}");
    }

    #[test]
    fn a_slurm_resource_takes_its_own_fields_and_bad_ones_are_named() {
        let r = parse(
            "[[resource]]\nname = \"hpc\"\nkind = \"slurm\"\nslots = 8\nprice = 2\npartition = \"batch\"\ncpus_per_job = 2\nsbatch_args = [\"--time=30\", \"--qos=low\"]\n",
        )
        .unwrap();
        assert_eq!(r[0].kind(), Kind::Slurm);
        let KindSpec::Slurm(sl) = &r[0].spec else { panic!("{r:?}") };
        assert_eq!(
            (sl.partition.as_deref(), sl.cpus_per_job, sl.sbatch_args.as_slice()),
            (Some("batch"), Some(2), ["--time=30".to_string(), "--qos=low".to_string()].as_slice())
        );
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Vec<ResourceConfig>>(&json).unwrap(), r);
        // Nothing but the kind is required.
        assert!(parse("[[resource]]\nname = \"s\"\nkind = \"slurm\"\n").is_ok());
        let bad = |extra: &str| {
            parse(&format!("[[resource]]\nname = \"s\"\nkind = \"slurm\"\n{extra}\n"))
                .unwrap_err()
                .to_string()
        };
        let e = bad("url = \"http://x\"");
        assert!(
            e.contains("'s'")
                && e.contains("`url`")
                && e.contains("libra field")
                && e.contains("sbatch_args"),
            "{e}"
        );
        let e = bad("partition = \"a,b\"");
        assert!(e.contains("'s': partition must be one partition name"), "{e}");
        let e = bad("cpus_per_job = 0");
        assert!(e.contains("'s': cpus_per_job must be between 1"), "{e}");
        let e = bad("cpus_per_job = \"two\"");
        assert!(e.contains("'s': cpus_per_job: invalid type"), "{e}");
        for own in ["--output=x", "-o", "-ox", "--chdir=/tmp", "--wrap=true", "-J name"] {
            let e = bad(&format!("sbatch_args = [\"{own}\"]"));
            assert!(e.contains("'s': sbatch_args") && e.contains("set by the broker"), "{own}: {e}");
        }
        let e = bad("sbatch_args = [\"time=30\"]");
        assert!(e.contains("not an sbatch option"), "{e}");
        let e = bad("sbatch_args = \"--time=30\"");
        assert!(e.contains("'s': sbatch_args: invalid type"), "{e}");
        let e = bad("wall = 3");
        assert!(e.contains("testqueue field"), "{e}");
    }

    #[test]
    fn kinds_carry_their_own_fields_and_round_trip_through_the_store() {
        let r = parse(
            "[[resource]]\nname = \"hpc\"\nkind = \"libra\"\nurl = \"http://127.0.0.1:1\"\ntoken = \"t\"\ninsecure_http = true\n\n[[resource]]\nname = \"q\"\nkind = \"testqueue\"\nwall = 2\ncpu = 0\n",
        )
        .unwrap();
        let l = r[0].libra().unwrap();
        assert_eq!(
            (l.url.as_str(), l.token.as_deref(), l.insecure_http),
            ("http://127.0.0.1:1", Some("t"), true)
        );
        assert_eq!(r[1].testqueue().map(|t| (t.wall, t.cpu)), Some((2.0, Some(0.0))));
        // The sweep store keeps resources as JSON, flat as in the file.
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""kind":"libra""#) && json.contains(r#""wall":2.0"#), "{json}");
        assert_eq!(serde_json::from_str::<Vec<ResourceConfig>>(&json).unwrap(), r);
        // Rows written before the kinds had their own fields carry every field, null when unused.
        let old = r#"{"name":"a","kind":"local","slots":2,"price":1.5,"job_secs":null,"utc_offset":null,"peak":null,"wall":null,"cpu":null,"time_scale":null,"url":null}"#;
        let a: ResourceConfig = serde_json::from_str(old).unwrap();
        assert_eq!((a.kind(), a.slots, a.price), (Kind::Local, 2, 1.5));
    }

    #[test]
    fn a_saved_login_is_lent_only_to_a_resource_on_its_own_server_that_names_no_token() {
        let spec = |url: &str, token: Option<&str>| LibraSpec {
            url: url.into(),
            token: token.map(Into::into),
            ca: None,
            insecure_http: false,
        };
        let login = SavedLogin {
            server: "http://10.0.0.5:7878/".into(),
            token: "saved".into(),
            ca: Some("/etc/libra/ca.pem".into()),
            insecure_http: true,
        };
        let lent = spec("HTTP://10.0.0.5:7878", None).lent(Some(&login), false);
        assert_eq!(lent.token.as_deref(), Some("saved"));
        // Its certificate and plain-http consent come with it, as for every other command.
        assert_eq!((lent.ca, lent.insecure_http), (Some("/etc/libra/ca.pem".into()), true));
        // Another server, another name for the same one, another port: nothing lent.
        for url in
            ["http://10.0.0.6:7878", "http://localhost:7878", "http://10.0.0.5:7879", "https://10.0.0.5:7878"]
        {
            assert_eq!(spec(url, None).lent(Some(&login), false), spec(url, None), "{url}");
        }
        // The resource's own token, or LIBRA_TOKEN, wins; no login, nothing changes.
        let own = spec("http://10.0.0.5:7878", Some("mine"));
        assert_eq!(own.lent(Some(&login), false), own);
        let bare = spec("http://10.0.0.5:7878", None);
        assert_eq!(bare.lent(Some(&login), true), bare);
        assert_eq!(bare.lent(None, false), bare);
    }

    #[test]
    fn peak_times_and_offsets_are_real_clock_readings() {
        let res = |offset: &str, start: &str| {
            parse(&format!(
                "[[resource]]\nname = \"a\"\nkind = \"local\"\nutc_offset = \"{offset}\"\npeak = {{ start = \"{start}\", end = \"18:00\", price = 2 }}\n"
            ))
        };
        for bad in ["16:99", "24:00", "+09:00", "9", "nine"] {
            let e = res("+10:00", bad).unwrap_err().to_string();
            assert!(e.contains("'a': peak") && e.contains("HH:MM"), "{bad}: {e}");
        }
        for bad in ["+25:00", "10:00", "Australia/Melbourne", "+1O:00"] {
            let e = res(bad, "09:00").unwrap_err().to_string();
            assert!(e.contains("utc_offset"), "{bad}: {e}");
        }
        // Seconds count: 08:59:59 UTC at -05:30 is 03:29:59 there, before a 03:30 start.
        let r = &res("-05:30", "03:30:00").unwrap()[0];
        assert_eq!(r.price_at(8.0 * 3600.0 + 59.0 * 60.0 + 59.0), 0.0);
        assert_eq!(r.price_at(9.0 * 3600.0), 2.0);
        assert_eq!(res("Z", "09:00").unwrap()[0].price_at(9.0 * 3600.0), 2.0);
    }
}
