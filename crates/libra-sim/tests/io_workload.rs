//! Workload models: the Libra+$ urgency model over SWF records, the Libra batches, the synthetic
//! benchmark trace.

use libra_core::Money;
use libra_sim::swf::{read_swf, ReadMode, SwfRecord};
use libra_sim::workload::libraplus::{self, SD_OVER_MEAN};
use libra_sim::workload::{LibraBatch, LibraPlusModel, ModelError, SimJob, SyntheticConfig};
use std::path::PathBuf;

fn sdsc() -> Option<PathBuf> {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/SDSC-SP2-1998-4.2-cln.swf.gz");
    if p.exists() {
        Some(p)
    } else {
        println!("note: {} is absent; skipping this check", p.display());
        None
    }
}

fn rec(job: i64, submit: i64, run: i64, alloc: i64, req: i64, user: i64) -> SwfRecord {
    SwfRecord {
        job,
        submit,
        wait: 0,
        run_time: run,
        alloc_procs: alloc,
        avg_cpu_time: -1.0,
        used_memory: -1,
        req_procs: req,
        req_time: -1,
        req_memory: -1,
        status: 1,
        user,
        group: -1,
        executable: -1,
        queue: -1,
        partition: -1,
        preceding_job: -1,
        think_time: -1,
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n as f64
}

fn sorted(jobs: &[SimJob]) -> bool {
    jobs.windows(2).all(|w| w[0].submit <= w[1].submit)
}

#[test]
fn libraplus_maps_record_fields_as_the_model_says() {
    let recs = vec![
        rec(5, 1000, 100, 4, 8, 3),   // requested procs win
        rec(6, 1100, -1, -1, 2, 4),   // cancelled: runtime 0
        rec(7, 1300, 50, 16, -1, -1), // requested unknown: allocated
        rec(8, 1700, 10, -1, -1, 9),  // both unknown: one processor
    ];
    let model = LibraPlusModel { last_n: None, inaccuracy: 0.25, ..Default::default() };
    let jobs = libraplus::generate(&recs, &model).unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![5, 6, 7, 8]);
    let submits: Vec<f64> = jobs.iter().map(|j| j.submit).collect();
    assert_eq!(submits, vec![0.0, 50.0, 150.0, 350.0]);
    let procs: Vec<u32> = jobs.iter().map(|j| j.procs).collect();
    assert_eq!(procs, vec![8, 2, 16, 1]);
    let runtimes: Vec<f64> = jobs.iter().map(|j| j.runtime).collect();
    assert_eq!(runtimes, vec![100.0, 0.0, 50.0, 10.0]);
    let users: Vec<u32> = jobs.iter().map(|j| j.user).collect();
    assert_eq!(users, vec![3, 4, 0, 9]);
    for j in &jobs {
        assert_eq!(j.estimate, j.runtime * 0.75);
        assert!(j.deadline >= 0.0);
        assert!(!j.budget.is_negative());
    }
    assert_eq!(jobs[1].deadline, 0.0);
    assert_eq!(jobs[1].budget, Money::ZERO);

    let last2 = LibraPlusModel { last_n: Some(2), ..model.clone() };
    let jobs = libraplus::generate(&recs, &last2).unwrap();
    let got: Vec<(u64, f64)> = jobs.iter().map(|j| (j.id, j.submit)).collect();
    assert_eq!(got, vec![(7, 0.0), (8, 200.0)]);
}

#[test]
fn libraplus_classes_follow_table_one() {
    // Many identical jobs: the factors' sample means and spreads show the model's parameters.
    let recs: Vec<SwfRecord> = (0..20_000).map(|i| rec(i + 1, i * 60, 1000, 1, 1, 1)).collect();
    let model = LibraPlusModel { last_n: None, seed: 7, ..Default::default() };
    let jobs = libraplus::generate(&recs, &model).unwrap();
    let urgent: Vec<&SimJob> = jobs.iter().filter(|j| j.urgent).collect();
    let relaxed: Vec<&SimJob> = jobs.iter().filter(|j| !j.urgent).collect();
    let share = urgent.len() as f64 / jobs.len() as f64;
    assert!((share - 0.2).abs() < 0.015, "share {share}");
    let d = |js: &[&SimJob]| mean(js.iter().map(|j| j.deadline / j.runtime));
    let b = |js: &[&SimJob]| mean(js.iter().map(|j| j.budget.as_credits_f64() / j.runtime));
    assert!((d(&urgent) - 2.0).abs() < 0.05, "urgent D/R {}", d(&urgent));
    assert!((d(&relaxed) - 8.0).abs() < 0.1, "relaxed D/R {}", d(&relaxed));
    assert!((b(&urgent) - 8.0).abs() < 0.1, "urgent B/R {}", b(&urgent));
    assert!((b(&relaxed) - 2.0).abs() < 0.05, "relaxed B/R {}", b(&relaxed));
    let m = d(&relaxed);
    let sd = mean(relaxed.iter().map(|j| (j.deadline / j.runtime - m).powi(2))).sqrt();
    assert!((sd - SD_OVER_MEAN * 8.0).abs() < 0.1, "sd {sd}");
    assert!(jobs.iter().all(|j| j.deadline > 0.0 && j.budget > Money::ZERO));
    for j in &jobs {
        assert_eq!(j.estimate, j.runtime);
        assert_eq!(j.submit, (j.id - 1) as f64 * 30.0);
    }
}

#[test]
fn libraplus_is_deterministic_and_sweeps_share_random_numbers() {
    let recs: Vec<SwfRecord> = (0..2_000).map(|i| rec(i + 1, i * 10, 100 + i, 1, 2, 1)).collect();
    let m = LibraPlusModel { last_n: None, ..Default::default() };
    let a = libraplus::generate(&recs, &m).unwrap();
    assert_eq!(a, libraplus::generate(&recs, &m).unwrap());
    let other = LibraPlusModel { seed: 2, ..m.clone() };
    assert_ne!(a, libraplus::generate(&recs, &other).unwrap());
    // Raising the high-urgency share only turns relaxed jobs urgent, never the reverse.
    let more = LibraPlusModel { high_urgency_share: 0.5, ..m.clone() };
    let b = libraplus::generate(&recs, &more).unwrap();
    assert!(a.iter().zip(&b).all(|(x, y)| !x.urgent || y.urgent));
    assert!(b.iter().filter(|j| j.urgent).count() > a.iter().filter(|j| j.urgent).count());
    // Changing the delay factor changes only the submit times.
    let slow = LibraPlusModel { arrival_delay_factor: 1.0, ..m.clone() };
    let c = libraplus::generate(&recs, &slow).unwrap();
    for (x, y) in a.iter().zip(&c) {
        assert_eq!((x.deadline, x.budget, x.urgent), (y.deadline, y.budget, y.urgent));
        assert_eq!(x.submit * 2.0, y.submit);
    }
}

#[test]
fn libraplus_rejects_bad_parameters_by_name() {
    for (m, field) in [
        (LibraPlusModel { high_urgency_share: 1.5, ..Default::default() }, "high_urgency_share"),
        (LibraPlusModel { inaccuracy: 1.0, ..Default::default() }, "inaccuracy"),
        (LibraPlusModel { arrival_delay_factor: 0.0, ..Default::default() }, "arrival_delay_factor"),
        (LibraPlusModel { budget_low_mean: f64::NAN, ..Default::default() }, "budget_low_mean"),
    ] {
        match libraplus::generate(&[rec(1, 0, 1, 1, 1, 1)], &m) {
            Err(e @ ModelError::Parameter { .. }) => {
                assert!(e.to_string().starts_with(field), "{e}")
            }
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn libraplus_over_the_sdsc_subset() {
    let Some(p) = sdsc() else { return };
    let model = LibraPlusModel::default();
    let jobs = libraplus::from_trace(&p, ReadMode::Strict, &model).unwrap();
    assert_eq!(jobs.len(), 5000);
    assert_eq!((jobs[0].id, jobs[4999].id), (68_497, 73_496));
    assert_eq!(jobs[0].submit, 0.0);
    assert!(sorted(&jobs));
    let inter = jobs[4999].submit / 4999.0;
    assert!((inter - 1969.0 * 0.5).abs() < 1.0, "{inter}");
    let run = mean(jobs.iter().map(|j| j.runtime));
    assert!((run - 8671.0).abs() < 1.0, "{run}");
    let procs = mean(jobs.iter().map(|j| f64::from(j.procs)));
    assert!((procs - 16.9).abs() < 0.05, "{procs}");
    // The streaming path agrees with the in-memory one.
    let all = read_swf(&p, ReadMode::Strict).unwrap();
    assert_eq!(jobs, libraplus::generate(&all.records, &model).unwrap());
}

#[test]
fn libra_batches_follow_table_one_recipe() {
    for (batch, n, arrival_max) in [(LibraBatch::batch1(), 100, 102.0), (LibraBatch::batch2(), 200, 208.0)] {
        let jobs = batch.generate(42);
        assert_eq!(jobs.len(), n);
        assert!(sorted(&jobs));
        let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, (1..=n as u64).collect::<Vec<_>>());
        let base = jobs.iter().filter(|j| j.budget == Money::from_credits(1000)).count();
        assert_eq!(base, n * 8 / 10);
        for j in &jobs {
            assert!((1.0..=arrival_max).contains(&j.submit));
            assert!((10.0..=109.0).contains(&j.runtime), "{}", j.runtime);
            assert_eq!(j.estimate, j.runtime);
            assert_eq!(j.procs, 1);
            assert!((1.0..=1200.0).contains(&j.deadline));
            assert!(j.budget >= Money::from_credits(1000));
            assert!(j.budget <= Money::from_credits(12000));
        }
        assert_eq!(jobs, batch.generate(42));
        assert_ne!(jobs, batch.generate(43));
    }
}

#[test]
fn synthetic_offers_the_asked_load() {
    let cfg = SyntheticConfig { jobs: 40_000, nodes: 10_000, ..Default::default() };
    let jobs = cfg.generate().unwrap();
    assert_eq!(jobs.len(), 40_000);
    assert!(sorted(&jobs));
    assert!(jobs.iter().all(|j| j.procs.is_power_of_two() && j.procs <= 128));
    assert!(jobs.iter().any(|j| j.procs == 128) && jobs.iter().any(|j| j.procs == 1));
    assert!(jobs.iter().all(|j| (10.0..=36.0 * 3600.0).contains(&j.runtime)));
    let work: f64 = jobs.iter().map(|j| f64::from(j.procs) * j.runtime).sum();
    let span = jobs[jobs.len() - 1].submit - jobs[0].submit;
    let load = work / (span * 10_000.0);
    assert!((load - 0.8).abs() < 0.08, "offered load {load}");
    let urgent = jobs.iter().filter(|j| j.urgent).count() as f64 / jobs.len() as f64;
    assert!((urgent - 0.2).abs() < 0.02, "{urgent}");
    assert_eq!(jobs, cfg.generate().unwrap());
    let bad = SyntheticConfig { nodes: 0, ..cfg };
    assert!(bad.generate().unwrap_err().to_string().starts_with("nodes"));
}
