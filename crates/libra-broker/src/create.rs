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

/// The default broker database: `<data dir>/libra/broker.db`.
pub fn default_db() -> PathBuf {
    dirs::data_dir().unwrap_or_else(std::env::temp_dir).join("libra").join("broker.db")
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

/// Stores a new experiment and returns its id. Its files go under `<db dir>/experiments/<id>`.
pub fn create(db: &Path, s: &SweepSpec) -> Result<i64, CreateError> {
    if s.deadline.is_nan() || s.deadline <= s.now {
        return Err(CreateError::Invalid("deadline: must be in the future (e.g. --deadline 2h)".into()));
    }
    if s.budget.is_negative() {
        return Err(CreateError::Invalid("budget: must not be negative".into()));
    }
    let (text, _plan, jobs) = load_plan(s.plan_path, s.seed)?;
    let root = plan_root(s.plan_path);
    let name = s.plan_path.file_stem().map_or("sweep".into(), |n| n.to_string_lossy().into_owned());
    let mut store = Store::open(db)?;
    let id = store.create_experiment(
        &NewExperiment {
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
        },
        &s.resources,
        &jobs,
    )?;
    let base = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let work = base.join("experiments").join(id.to_string());
    std::fs::create_dir_all(work.join("jobs"))
        .map_err(|source| CreateError::WorkDir { path: work.display().to_string(), source })?;
    let work = std::fs::canonicalize(&work).unwrap_or(work);
    store.set_work_dir(id, &work.to_string_lossy())?;
    Ok(id)
}
