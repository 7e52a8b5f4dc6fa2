use super::*;
use proptest::prelude::*;

/// The seed's Table 17.4 queues: single-CPU, 90 s jobs, 10, 12, ..., 28 per CPU-second.
fn queues(calibrated: bool) -> Vec<ResourceState> {
    (0..10)
        .map(|k| ResourceState {
            slot_free_in: vec![0.0],
            secs_per_job: calibrated.then_some(90.0),
            cost_per_job: Money::from_credits(90 * (10 + 2 * k)),
            available: true,
        })
        .collect()
}

fn input(resources: Vec<ResourceState>, jobs: u64, time: f64, budget: i64) -> PlanInput {
    PlanInput { resources, jobs_left: jobs, time_left: time, budget_left: Money::from_credits(budget) }
}

#[test]
fn capacity_counts_whole_jobs_per_slot() {
    let r = ResourceState {
        slot_free_in: vec![0.0, 30.0, 100.0],
        secs_per_job: Some(40.0),
        cost_per_job: Money::ZERO,
        available: true,
    };
    // 100 s: slot 0 fits 2, slot 1 fits 1 (30+40=70, 110 > 100), slot 2 none.
    assert_eq!(r.capacity(100.0), 3);
    assert_eq!(r.capacity(990.0), 24 + 24 + 22);
    assert_eq!(ResourceState { available: false, ..r }.capacity(1e6), 0);
}

#[test]
fn cost_fills_cheapest_first_up_to_the_deadline() {
    let p = plan(Algorithm::Cost, &input(queues(true), 100, 990.0, 171_000));
    // 11 jobs fit in 990 s on each queue: nine cheapest full, one job on the dearest.
    assert_eq!(p.jobs, vec![11, 11, 11, 11, 11, 11, 11, 11, 11, 1]);
    assert_eq!(p.cost, Money::from_credits(162_900));
    assert!(p.feasible);
}

#[test]
fn cost_stops_using_expensive_queues_when_the_deadline_is_relaxed() {
    let p = plan(Algorithm::Cost, &input(queues(true), 100, 1980.0, 126_000));
    assert_eq!(p.jobs, vec![22, 22, 22, 22, 12, 0, 0, 0, 0, 0]);
    assert_eq!(p.cost, Money::from_credits(122_400));
    let p = plan(Algorithm::Cost, &input(queues(true), 100, 2970.0, 126_000));
    assert_eq!(p.jobs[..4], [33, 33, 33, 1]);
    assert!(p.jobs[4..].iter().all(|&n| n == 0));
    assert_eq!(optimal_cost(&input(queues(true), 100, 2970.0, 0)), Some(p.cost));
}

#[test]
fn infeasible_budget_plans_what_it_can_pay_for() {
    let i = input(queues(true), 100, 990.0, 126_000);
    assert_eq!(optimal_cost(&i), Some(Money::from_credits(162_900)));
    for a in Algorithm::ALL {
        let p = plan(a, &i);
        assert!(!p.feasible, "{a}");
        assert!(p.cost <= i.budget_left, "{a}: {} > budget", p.cost);
    }
    // Cheapest first maximises the jobs bought: 11 each on the seven cheapest (88,110), then
    // the 15,120 left buys 7 jobs at 2,160 on the eighth.
    let p = plan(Algorithm::Cost, &i);
    assert_eq!(p.jobs[..8], [11, 11, 11, 11, 11, 11, 11, 7]);
    assert_eq!(p.cost, Money::from_credits(126_000 - 15_120 + 7 * 2_160));
}

#[test]
fn time_spreads_evenly_when_the_budget_allows() {
    let p = plan(Algorithm::Time, &input(queues(true), 100, 990.0, 171_000));
    assert_eq!(p.jobs, vec![10; 10]);
    assert_eq!(p.cost, Money::from_credits(171_000));
    assert!((p.finish - 900.0).abs() < 1e-6);
    // The seed's heuristic reaches the same rectangle.
    let n = plan(Algorithm::NimrodTime, &input(queues(true), 100, 990.0, 171_000));
    assert_eq!(n.jobs, vec![10; 10]);
}

#[test]
fn time_under_a_tight_budget_is_earliest_affordable() {
    let p = plan(Algorithm::Time, &input(queues(true), 100, 1980.0, 126_000));
    assert!(p.feasible);
    assert!(p.cost <= Money::from_credits(126_000));
    // 1980 s is needed by the cheapest plan alone (22 on the four cheapest + 12): any earlier
    // finish must cost more, so the time plan finishes no later and is within budget.
    assert!(p.finish <= 1980.0);
    let cheaper_finish = plan(Algorithm::Cost, &input(queues(true), 100, 1980.0, 126_000)).finish;
    assert!(p.finish <= cheaper_finish);
}

#[test]
fn cost_time_shares_equal_prices() {
    let r = |c: i64| ResourceState {
        slot_free_in: vec![0.0],
        secs_per_job: Some(10.0),
        cost_per_job: Money::from_credits(c),
        available: true,
    };
    let i = input(vec![r(1), r(1), r(5)], 10, 1000.0, 1000);
    assert_eq!(plan(Algorithm::Cost, &i).jobs, vec![10, 0, 0]);
    let p = plan(Algorithm::CostTime, &i);
    assert_eq!(p.jobs, vec![5, 5, 0]);
    assert_eq!(p.cost, Money::from_credits(10));
}

#[test]
fn conservative_keeps_to_the_budget_per_job() {
    // Budget per job 1,710: the six cheapest queues cost at most that (900..1,800 is the 6th: 1,800 > 1,710).
    let p = plan(Algorithm::Conservative, &input(queues(true), 100, 1980.0, 171_000));
    assert!(p.feasible);
    assert!(p.jobs[5..].iter().all(|&n| n == 0), "{:?}", p.jobs);
    let n = plan(Algorithm::NimrodConservative, &input(queues(true), 100, 1980.0, 171_000));
    assert!(n.cost <= Money::from_credits(171_000));
    assert_eq!(n.planned(), 100);
}

#[test]
fn nimrod_probes_every_unknown_queue_libra_only_when_needed() {
    let i = input(queues(false), 100, 1980.0, 171_000);
    let n = plan(Algorithm::NimrodCost, &i);
    assert_eq!(n.jobs, vec![1; 10]);
    // Libra with one calibrated queue able to carry everything probes nothing.
    let mut rs = queues(false);
    rs[0].secs_per_job = Some(1.0);
    let p = plan(Algorithm::Cost, &input(rs, 100, 1980.0, 171_000));
    assert_eq!(p.jobs[0], 100);
    assert_eq!(p.planned(), 100);
    // With nothing calibrated, Libra probes too.
    let p = plan(Algorithm::Cost, &i);
    assert_eq!(p.jobs, vec![1; 10]);
}

#[test]
fn unavailable_resources_get_nothing() {
    let mut rs = queues(true);
    rs[0].available = false;
    for a in Algorithm::ALL {
        assert_eq!(plan(a, &input(rs.clone(), 50, 2970.0, 252_000)).jobs[0], 0, "{a}");
    }
}

#[test]
fn names_round_trip() {
    for a in Algorithm::ALL {
        assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
    }
    assert!("fastest".parse::<Algorithm>().is_err());
}

fn arb_resource() -> impl Strategy<Value = ResourceState> {
    (
        proptest::collection::vec(0.0f64..50.0, 1..4),
        proptest::option::weighted(0.8, 1.0f64..100.0),
        0i64..2_000,
        proptest::bool::weighted(0.9),
    )
        .prop_map(|(slots, spj, cost, available)| ResourceState {
            slot_free_in: slots,
            secs_per_job: spj,
            cost_per_job: Money::from_cents(cost),
            available,
        })
}

proptest! {
    #[test]
    fn never_above_budget_nor_beyond_the_deadline(
        resources in proptest::collection::vec(arb_resource(), 1..6),
        jobs in 0u64..60,
        time in 0.0f64..600.0,
        budget in 0i64..60_000,
    ) {
        let i = PlanInput { resources, jobs_left: jobs, time_left: time, budget_left: Money::from_cents(budget) };
        for a in Algorithm::ALL {
            let p = plan(a, &i);
            prop_assert!(p.cost <= i.budget_left, "{a} planned {} over {}", p.cost, i.budget_left);
            prop_assert!(p.planned() <= jobs, "{a}");
            let sum: i64 = i.resources.iter().zip(&p.jobs).map(|(r, &n)| r.cost_per_job.cents() * n as i64).sum();
            prop_assert_eq!(p.cost.cents(), sum);
            for (r, &n) in i.resources.iter().zip(&p.jobs) {
                if !r.available { prop_assert_eq!(n, 0); }
                if a == Algorithm::NimrodTime { continue; } // as published, it ignores the deadline
                if r.calibrated() {
                    prop_assert!(n <= r.capacity(i.time_left), "{a}: {n} jobs on a resource that fits {}", r.capacity(i.time_left));
                } else {
                    prop_assert!(n <= 1, "{a}: more than one probe");
                }
            }
        }
    }

    #[test]
    fn cost_plan_is_the_optimum_when_feasible(
        resources in proptest::collection::vec(arb_resource(), 1..6),
        jobs in 1u64..60,
        time in 0.0f64..600.0,
    ) {
        let i = PlanInput { resources, jobs_left: jobs, time_left: time, budget_left: Money::from_cents(i64::MAX / 4) };
        if let Some(opt) = optimal_cost(&i) {
            let p = plan(Algorithm::Cost, &i);
            prop_assert!(p.feasible);
            prop_assert_eq!(p.cost, opt);
            let t = plan(Algorithm::Time, &i);
            prop_assert!(t.feasible);
            prop_assert!(t.finish <= p.finish + 1e-6);
            let ct = plan(Algorithm::CostTime, &i);
            prop_assert_eq!(ct.cost, opt);
            prop_assert!(ct.finish <= p.finish + 1e-6);
        }
    }
}
