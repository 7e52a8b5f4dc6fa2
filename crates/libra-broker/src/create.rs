//! Creating an experiment: parse and expand the plan, load the resources, store it all.

use crate::plan::{self, PlanError};
use crate::resources::{self, ResourceConfig, ResourcesError};
use crate::store::{NewExperiment, Store, StoreError};
use libra_core::dbc::Algorithm;
use libra_core::Money;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("cannot read the plan {path}: {source}")]
    ReadPlan { path: String, source: std::io::Error },
    #[error("plan {path}: {source}")]
    Plan { path: String, source: PlanError },
    /// A plan sent as text (a hosted sweep): the error names its line and column.
    #[error("plan: {0}")]
    PlanText(PlanError),
    #[error(transparent)]
    Resources(#[from] ResourcesError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot create the experiment's directory {path}: {source}")]
    WorkDir { path: String, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
}

pub struct SweepSpec<'a> {
    pub plan_path: &'a Path,
    pub resources: Vec<ResourceConfig>,
    pub algorithm: Algorithm,
    /// Unix seconds.
    pub deadline: f64,
    pub budget: Money,
    pub max_retries: u32,
    pub estimate_secs: Option<f64>,
    pub seed: u64,
    pub now: f64,
}

/// Reads and parses a plan, expanding it relative to its own directory.
pub fn load_plan(path: &Path, seed: u64) -> Result<(String, plan::Plan, plan::JobParams), CreateError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CreateError::ReadPlan { path: path.display().to_string(), source })?;
    let p = plan::parse(&text)
        .map_err(|source| CreateError::Plan { path: path.display().to_string(), source })?;
    let root = plan_root(path);
    let jobs = plan::expand(&p, &root, seed)
        .map_err(|source| CreateError::Plan { path: path.display().to_string(), source })?;
    Ok((text, p, jobs))
}

fn plan_root(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

pub fn load_resources(path: &Path) -> Result<Vec<ResourceConfig>, CreateError> {
    Ok(resources::load(path)?)
}

/// A sweep whose plan arrives as text rather than as a file (one hosted by a server): it has
/// no directory of its own, so its work directory is also its root (where `files` parameters
/// are matched and `copy` finds and leaves files).
pub struct TextSweep<'a> {
    pub name: &'a str,
    /// The plan, parsed and expanded (`expand_text`).
    pub plan: &'a TextPlan<'a>,
    pub resources: Vec<ResourceConfig>,
    pub algorithm: Algorithm,
    /// Unix seconds.
    pub deadline: f64,
    pub budget: Money,
    pub max_retries: u32,
    pub estimate_secs: Option<f64>,
    pub now: f64,
}

/// A plan sent as text, parsed and expanded but not stored (`expand_text`): how many jobs it
/// makes is known before anything is written, so that a server can bound what one user may
/// make it write.
pub struct TextPlan<'a> {
    text: &'a str,
    jobs: plan::JobParams,
}

impl TextPlan<'_> {
    /// How many jobs the plan makes (the rows its sweep's creation writes).
    pub fn jobs(&self) -> u64 {
        self.jobs.total
    }
}

/// Parses and expands a plan sent as text for a sweep of broker database `db` (its errors name
/// the line and column), refusing one that makes more than `max_jobs` jobs (a server bounds
/// what one request can store).
pub fn expand_text<'a>(
    db: &Path,
    text: &'a str,
    seed: u64,
    max_jobs: u64,
) -> Result<TextPlan<'a>, CreateError> {
    let plan = plan::parse(text).map_err(CreateError::PlanText)?;
    // Nothing is in the work directory yet: a `files` parameter matches what is there then.
    let jobs = plan::expand(&plan, &experiments_dir(db), seed).map_err(CreateError::PlanText)?;
    if jobs.total > max_jobs {
        return Err(CreateError::Invalid(format!(
            "plan: makes {} jobs; at most {} are accepted here",
            jobs.total, max_jobs
        )));
    }
    Ok(TextPlan { text, jobs })
}

fn check_limits(deadline: f64, budget: Money, now: f64) -> Result<(), CreateError> {
    if deadline.is_nan() || deadline <= now {
        return Err(CreateError::Invalid("deadline: must be in the future (e.g. --deadline 2h)".into()));
    }
    if budget.is_negative() {
        return Err(CreateError::Invalid("budget: must not be negative".into()));
    }
    libra_core::job::check_budget(budget).map_err(|e| CreateError::Invalid(e.to_string()))?;
    Ok(())
}

/// Stores a new experiment and returns its id. Its files go under `<db dir>/experiments/<id>`.
pub fn create(db: &Path, s: &SweepSpec) -> Result<i64, CreateError> {
    check_limits(s.deadline, s.budget, s.now)?;
    let (text, _plan, jobs) = load_plan(s.plan_path, s.seed)?;
    let root = plan_root(s.plan_path);
    let name = s.plan_path.file_stem().map_or("sweep".into(), |n| n.to_string_lossy().into_owned());
    let new = NewExperiment {
        name: &name,
        plan_text: &text,
        root_dir: &root.to_string_lossy(),
        work_dir: "",
        algorithm: s.algorithm.name(),
        deadline: s.deadline,
        budget: s.budget,
        max_retries: s.max_retries,
        estimate_secs: s.estimate_secs,
        now: s.now,
    };
    store_new(db, &new, &s.resources, &jobs, false)
}

/// As `create`, for a plan given as text and expanded (`expand_text`).
pub fn create_from_text(db: &Path, s: &TextSweep) -> Result<i64, CreateError> {
    check_limits(s.deadline, s.budget, s.now)?;
    let name = if s.name.trim().is_empty() { "sweep" } else { s.name.trim() };
    let new = NewExperiment {
        name,
        plan_text: s.plan.text,
        root_dir: "",
        work_dir: "",
        algorithm: s.algorithm.name(),
        deadline: s.deadline,
        budget: s.budget,
        max_retries: s.max_retries,
        estimate_secs: s.estimate_secs,
        now: s.now,
    };
    store_new(db, &new, &s.resources, &s.plan.jobs, true)
}

/// A work directory no other sweep has used, `ID` in `base` (`ID.2`, `ID.3`... when taken), with
/// its `jobs` directory and its key (`SWEEP_KEY`). Another broker database in the same
/// directory, or one made anew after the old was removed, numbers its sweeps from 1 again: in
/// the same directory the new sweep would read the old one's records of how its attempts ended
/// as its own, and send a Libra cluster the old attempts' keys, which give back the old sweep's
/// jobs (done, and paid) instead of running its own.
fn fresh_work_dir(base: &Path, id: i64) -> Result<PathBuf, CreateError> {
    let failed = |path: &Path, source| CreateError::WorkDir { path: path.display().to_string(), source };
    std::fs::create_dir_all(base).map_err(|e| failed(base, e))?;
    let mut n = 1u32;
    let work = loop {
        let work = if n == 1 { base.join(id.to_string()) } else { base.join(format!("{id}.{n}")) };
        match std::fs::create_dir(&work) {
            Ok(()) => break work,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(failed(&work, e)),
        }
    };
    let jobs = work.join("jobs");
    std::fs::create_dir(&jobs).map_err(|e| failed(&jobs, e))?;
    let key = work.join(crate::engine::SWEEP_KEY);
    std::fs::write(&key, random_hex()).map_err(|e| failed(&key, e))?;
    Ok(work)
}

/// 128 random bits in hex, from the kernel.
fn random_hex() -> String {
    let mut b = [0u8; 16];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // Not expected on Linux >= 3.17; the clock and the process still tell sweeps apart.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Where the sweeps of broker database `db` have their work directories.
pub fn experiments_dir(db: &Path) -> PathBuf {
    db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).join("experiments")
}

fn store_new(
    db: &Path,
    new: &NewExperiment,
    resources: &[ResourceConfig],
    jobs: &plan::JobParams,
    root_is_work: bool,
) -> Result<i64, CreateError> {
    let mut store = Store::open(db)?;
    let id = store.create_experiment(new, resources, jobs)?;
    let work = fresh_work_dir(&experiments_dir(db), id)?;
    let work = std::fs::canonicalize(&work).unwrap_or(work);
    store.set_work_dir(id, &work.to_string_lossy())?;
    // The key into the database too, which a backup carries (the directory may be lost).
    crate::engine::sweep_key(&store, id, &work)?;
    if root_is_work {
        store.set_root_dir(id, &work.to_string_lossy())?;
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_in(db: &Path) -> (i64, PathBuf) {
        let text = "parameter x integer range from 1 to 2 step 1\ntask main\n    exec true\nendtask\n";
        let plan = expand_text(db, text, 0, 100).unwrap();
        assert_eq!(plan.jobs(), 2);
        let s = TextSweep {
            name: "s",
            plan: &plan,
            resources: Vec::new(),
            algorithm: Algorithm::Cost,
            deadline: 3600.0,
            budget: Money::from_credits(10),
            max_retries: 0,
            estimate_secs: None,
            now: 0.0,
        };
        let id = create_from_text(db, &s).unwrap();
        let work = Store::open(db).unwrap().experiment(id).unwrap().work_dir;
        (id, PathBuf::from(work))
    }

    /// Two broker databases in one directory, and one made anew after the old was removed,
    /// number their sweeps from 1 alike: each sweep still gets a work directory of its own and a
    /// key of its own, so that neither reads the other's records nor gets the other's jobs back
    /// from a cluster by their attempts' keys.
    #[test]
    fn every_sweep_has_a_work_directory_and_a_key_of_its_own() {
        let d = tempfile::tempdir().unwrap();
        let (a, wa) = sweep_in(&d.path().join("broker.db"));
        let (b, wb) = sweep_in(&d.path().join("other.db"));
        assert_eq!((a, b), (1, 1));
        assert_ne!(wa, wb);
        assert!(wa.join("jobs").is_dir() && wb.join("jobs").is_dir());
        std::fs::remove_file(d.path().join("broker.db")).unwrap();
        let (c, wc) = sweep_in(&d.path().join("broker.db"));
        assert_eq!(c, 1);
        assert!(wc != wa && wc != wb, "{wc:?}");
        let key = |w: &Path| {
            crate::engine::attempt_key(w, &std::fs::read(w.join(crate::engine::SWEEP_KEY)).unwrap(), 1)
        };
        let keys: Vec<String> = [&wa, &wb, &wc].iter().map(|w| key(w)).collect();
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2], "{keys:?}");
        // The same directory made anew (removed with its database): a key of its own still.
        let key_a = key(&wa);
        std::fs::remove_dir_all(d.path().join("experiments")).unwrap();
        std::fs::remove_file(d.path().join("broker.db")).unwrap();
        std::fs::remove_file(d.path().join("other.db")).unwrap();
        let (_, again) = sweep_in(&d.path().join("broker.db"));
        assert_eq!(again, wa);
        assert_ne!(key(&again), key_a);
    }
}
