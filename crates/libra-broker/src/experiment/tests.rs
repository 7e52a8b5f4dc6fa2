use super::table17_4::{self, run_all};
use super::table17_6;
use crate::farm::Calibration;
use libra_core::dbc::Algorithm;

#[test]
fn table17_4_libra_planners_meet_the_target() {
    let cells = run_all(true);
    for c in &cells {
        assert!(c.within_budget, "{} spent above its budget", c.algorithm);
    }
    for c in cells.iter().filter(|c| !c.algorithm.starts_with("nimrod") && c.feasible) {
        assert_eq!(c.completed_pct, 100.0, "{} {} {}", c.algorithm, c.deadline, c.budget);
        assert!(c.time <= c.deadline);
        if c.algorithm == "cost" || c.algorithm == "cost-time" {
            let opt = c.optimal_cost.unwrap_or(0.0);
            assert!(
                c.cost <= opt * 1.02,
                "{} {} {}: {} vs optimum {}",
                c.algorithm,
                c.deadline,
                c.budget,
                c.cost,
                opt
            );
        }
    }
}

/// Issue 14's aim, without the prior: every feasible cell done 100% within the deadline and
/// the budget, and `cost` / `cost-time` within 2% of the optimum, cell by cell.
#[test]
fn table17_4_without_the_prior_every_feasible_cell_is_within_2pct_of_the_optimum() {
    let cells = run_all(false);
    let headline: Vec<_> =
        cells.iter().filter(|c| !c.algorithm.starts_with("nimrod") && !c.algorithm.contains('+')).collect();
    assert_eq!(headline.iter().filter(|c| c.feasible).count(), 32);
    for c in &cells {
        assert!(
            c.within_budget,
            "{} {} {} spent {} above its budget",
            c.algorithm, c.deadline, c.budget, c.cost
        );
    }
    for c in headline.iter().filter(|c| c.feasible) {
        let at = format!("{} at {} s / {}", c.algorithm, c.deadline, c.budget);
        assert_eq!(c.completed_pct, 100.0, "{at}");
        assert!(c.time <= c.deadline, "{at}: last job ends at {}", c.time);
        if c.algorithm == "cost" || c.algorithm == "cost-time" {
            let opt = c.optimal_cost.expect("a feasible cell has an optimum");
            assert!(c.cost <= opt * 1.02, "{at}: {} vs optimum {opt}", c.cost);
        }
    }
    // The rule it replaces, kept under its own name, is what missed the aim (4.49% at 2970 s):
    // if both ever agree, the comparison in REPRODUCING.md is stale.
    let probe_all = cells.iter().find(|c| c.algorithm == "cost+probe-all" && c.deadline == 2970.0).unwrap();
    let opt = probe_all.optimal_cost.unwrap();
    assert!(probe_all.cost > opt * 1.02, "{} vs {opt}", probe_all.cost);
}

/// The no-prior planners learn the length from the queues: costing unmeasured queues at a
/// different fallback (instead of the true 90 s) changes nothing in any feasible cell.
#[test]
fn table17_4_without_the_prior_does_not_use_the_true_length() {
    for a in [Algorithm::Cost, Algorithm::CostTime, Algorithm::Time, Algorithm::Conservative] {
        for d in table17_4::DEADLINES {
            for b in table17_4::BUDGETS {
                let base = table17_4::run_cell(a, d, b, false, Calibration::Bound);
                if !base.feasible {
                    continue;
                }
                for fallback in [1.0, 60.0, 1000.0] {
                    let c = table17_4::run_cell_costing(a, d, b, false, Calibration::Bound, fallback);
                    assert_eq!(
                        (c.completed_pct, c.time, c.cost, &c.per_resource),
                        (base.completed_pct, base.time, base.cost, &base.per_resource),
                        "{a} {d} {b} with fallback {fallback}"
                    );
                }
            }
        }
    }
}

/// Table 17.6 without the prior: the default calibration is no worse than the rule it
/// replaced (cost no dearer, time no slower), and every job is done within deadline and budget.
#[test]
fn table17_6_without_the_prior_is_no_worse_than_probing_every_queue() {
    for a in [Algorithm::Cost, Algorithm::Time] {
        let new = table17_6::run(a, false, Calibration::Bound);
        let old = table17_6::run(a, false, Calibration::ProbeAll);
        assert!(new.within_deadline_and_budget, "{a}");
        assert_eq!(new.completed_pct, 100.0, "{a}");
        match a {
            Algorithm::Cost => assert!(new.cost <= old.cost, "cost: {} vs {}", new.cost, old.cost),
            _ => assert!(new.time_min <= old.time_min, "time: {} vs {} min", new.time_min, old.time_min),
        }
    }
}

#[test]
fn table17_6_cost_is_cheaper_and_time_is_faster() {
    let t = table17_6::run(Algorithm::Time, true, Calibration::Bound);
    let c = table17_6::run(Algorithm::Cost, true, Calibration::Bound);
    assert!(t.within_deadline_and_budget && c.within_deadline_and_budget);
    assert!(c.cost < t.cost);
    assert!(t.time_min < c.time_min);
    let _ = table17_4::optimum(990.0);
}

mod budget {
    use crate::experiment::{table17_4, virtual_time};
    use crate::farm::{Calibration, Farm, FarmResource};
    use libra_core::dbc::Algorithm;
    use libra_core::Money;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn virtual_sweeps_never_spend_above_the_budget(
            alg in 0usize..7,
            budget in 0i64..200_000,
            deadline in 100.0f64..3000.0,
            prior in any::<bool>(),
            probe_all in any::<bool>(),
            jobs in 1usize..60,
        ) {
            let a = Algorithm::ALL[alg];
            let farm = Farm {
                resources: table17_4::queues().into_iter().map(|q| {
                    let p = if prior { q.testqueue().map(|t| t.wall) } else { None };
                    FarmResource::new(q, p)
                }).collect(),
                algorithm: a,
                deadline,
                budget: Money::from_credits(budget),
                spent: Money::ZERO,
                fallback_secs: 90.0,
                calibration: if probe_all { Calibration::ProbeAll } else { Calibration::Bound },
                assumed_secs: None,
            };
            let out = virtual_time::run(farm, &vec![90.0; jobs], &[1.0; 10]);
            prop_assert!(out.cost <= Money::from_credits(budget), "{a}: spent {} of {budget}", out.cost);
            if !a.is_nimrod() || a == Algorithm::NimrodCost {
                // Planned jobs fit before the deadline (probes aside, whose length is unknown).
                prop_assert!(out.completed + 10 >= out.per_resource.iter().sum::<usize>());
            }
        }
    }
}
