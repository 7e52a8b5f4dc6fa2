#![allow(dead_code)]

use libra_broker::create::{create, SweepSpec};
use libra_broker::engine::now_unix;
use libra_broker::resources;
use libra_core::dbc::Algorithm;
use libra_core::Money;
use std::path::{Path, PathBuf};

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub exp: i64,
}

pub fn setup(plan: &str, res: &str, alg: Algorithm, budget: i64, retries: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.pln");
    std::fs::write(&plan_path, plan).unwrap();
    let db = dir.path().join("db").join("broker.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let spec = SweepSpec {
        plan_path: &plan_path,
        resources: resources::parse(res).unwrap(),
        algorithm: alg,
        deadline: now_unix() + 3600.0,
        budget: Money::from_credits(budget),
        max_retries: retries,
        estimate_secs: Some(1.0),
        seed: 1,
        now: now_unix(),
    };
    let exp = create(&db, &spec).unwrap();
    Setup { dir, db, exp }
}

pub fn root(s: &Setup) -> &Path {
    s.dir.path()
}
