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
    use crate::farm::{Farm, FarmResource};
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
                calibration: crate::farm::Calibration::default(),
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
