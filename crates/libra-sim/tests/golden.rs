//! Golden files: every policy's decision for every job of a small slice of each shared trace,
//! compared exactly, so that any change in results shows in review as a diff of
//! `tests/golden/*.txt`. After an intended change, rewrite them with one command:
//!
//!     UPDATE_GOLDEN=1 cargo test -p libra-sim --test golden
//!
//! and explain the diff in the commit.

use libra_core::policy::{BEYOND_POLICY_NAMES, POLICY_NAMES};
use libra_core::PricingParams;
use libra_sim::engine::{ClusterConfig, SimResult};
use libra_sim::experiment::runner::{run_all, RunSpec};
use libra_sim::swf::{read_swf, ReadMode};
use libra_sim::workload::libraplus::{generate, LibraPlusModel};
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// (trace file, short name, nodes). A slice of 200 jobs at a heavy load (arrival delay 0.25)
/// and on a quarter of the machine, so that admission, pricing and queueing all decide.
const TRACES: [(&str, &str, usize); 3] = [
    ("SDSC-SP2-1998-4.2-cln.swf.gz", "sdsc", 32),
    ("KTH-SP2-1996-2.1-cln.swf.gz", "kth", 25),
    ("NASA-iPSC-1993-3.1-cln.swf.gz", "nasa", 32),
];

fn render(r: &SimResult) -> String {
    let mut s = String::new();
    writeln!(s, "# {}: {:?}", r.policy, r.metrics).unwrap();
    for rec in &r.records {
        let o = &rec.outcome;
        let t = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
        writeln!(
            s,
            "{} {:?} {:?} {} {} {}",
            rec.id,
            rec.verdict,
            rec.nodes,
            t(o.start),
            t(o.finish),
            if o.accepted { o.cost.cents().to_string() } else { "-".into() }
        )
        .unwrap();
    }
    s
}

#[test]
fn every_policy_decides_as_recorded_in_the_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut specs = Vec::new();
    let mut names = Vec::new();
    for (file, short, nodes) in TRACES {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(file);
        let records = read_swf(&path, ReadMode::Strict)
            .unwrap_or_else(|e| {
                panic!("the shared traces must sit in ../shared/traces beside the checkout: {e}")
            })
            .records;
        let model =
            LibraPlusModel { last_n: Some(200), arrival_delay_factor: 0.25, ..LibraPlusModel::default() };
        let jobs = Arc::new(generate(&records, &model).unwrap());
        for policy in POLICY_NAMES.iter().chain(BEYOND_POLICY_NAMES) {
            specs.push(RunSpec {
                workload: jobs.clone(),
                policy: policy.to_string(),
                pricing: PricingParams::default(),
                cluster: ClusterConfig { nodes, price_base: 1.0 },
                placement: None,
            });
            names.push(format!("{short}-{}.txt", policy.replace('$', "dollar")));
        }
    }
    let results = run_all(&specs, &|| {}).unwrap();
    let mut changed = Vec::new();
    for (name, r) in names.iter().zip(&results) {
        let text = render(r);
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != text {
            let first = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
            changed.push(format!(
                "{name}: first difference at line {}:\n  golden: {}\n  now:    {}",
                first + 1,
                want.lines().nth(first).unwrap_or("(missing)"),
                text.lines().nth(first).unwrap_or("(missing)")
            ));
        }
    }
    assert!(
        changed.is_empty(),
        "results changed (if intended: UPDATE_GOLDEN=1 cargo test -p libra-sim --test golden):\n{}",
        changed.join("\n")
    );
}
