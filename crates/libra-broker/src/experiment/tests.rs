use super::table17_4::{self, run_all};
use super::table17_6;
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
    let t = table17_6::run(Algorithm::Time, true);
    let c = table17_6::run(Algorithm::Cost, true);
    assert!(t.within_deadline_and_budget && c.within_deadline_and_budget);
    assert!(c.cost < t.cost);
    assert!(t.time_min < c.time_min);
    let _ = table17_4::optimum(990.0);
}
