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
    pub plan_text: &'a str,
    pub resources: Vec<ResourceConfig>,
    pub algorithm: Algorithm,
    /// Unix seconds.
    pub deadline: f64,
    pub budget: Money,
    pub max_retries: u32,
    pub estimate_secs: Option<f64>,
    pub seed: u64,
    pub now: f64,
    /// The most jobs the plan may make (a server bounds what one request can store).
    pub max_jobs: u64,
}

fn check_limits(deadline: f64, budget: Money, now: f64) -> Result<(), CreateError> {
    if deadline.is_nan() || deadline <= now {
        return Err(CreateError::Invalid("deadline: must be in the future (e.g. --deadline 2h)".into()));
    }
    if budget.is_negative() {
        return Err(CreateError::Invalid("budget: must not be negative".into()));
    }
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

/// As `create`, for a plan given as text; its errors name the line and column.
pub fn create_from_text(db: &Path, s: &TextSweep) -> Result<i64, CreateError> {
    check_limits(s.deadline, s.budget, s.now)?;
    let plan = plan::parse(s.plan_text).map_err(CreateError::PlanText)?;
    // Nothing is in the work directory yet: a `files` parameter matches what is there then.
    let base = experiments_dir(db);
    let jobs = plan::expand(&plan, &base, s.seed).map_err(CreateError::PlanText)?;
    if jobs.total > s.max_jobs {
        return Err(CreateError::Invalid(format!(
            "plan: makes {} jobs; at most {} are accepted here",
            jobs.total, s.max_jobs
        )));
    }
    let name = if s.name.trim().is_empty() { "sweep" } else { s.name.trim() };
    let new = NewExperiment {
        name,
        plan_text: s.plan_text,
        root_dir: "",
        work_dir: "",
        algorithm: s.algorithm.name(),
        deadline: s.deadline,
        budget: s.budget,
        max_retries: s.max_retries,
        estimate_secs: s.estimate_secs,
        now: s.now,
    };
    store_new(db, &new, &s.resources, &jobs, true)
}

fn experiments_dir(db: &Path) -> PathBuf {
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
    let work = experiments_dir(db).join(id.to_string());
    std::fs::create_dir_all(work.join("jobs"))
        .map_err(|source| CreateError::WorkDir { path: work.display().to_string(), source })?;
    let work = std::fs::canonicalize(&work).unwrap_or(work);
    store.set_work_dir(id, &work.to_string_lossy())?;
    if root_is_work {
        store.set_root_dir(id, &work.to_string_lossy())?;
    }
    Ok(id)
}
