//! Node choice, prices, suggestions and CPUs per task (issues 9 and 12): hand-computed cases
//! and properties over arrival sequences.

use super::suggest::{budget_with_margin, resubmission};
use super::*;
use crate::cluster::{Cluster, NodeSpec};
use crate::job::JobSpec;
use crate::pricing::cost_at;
use crate::share::{node_shares, JobControl};
use proptest::prelude::*;

/// Every policy that decides at submission (and so chooses nodes and prices at once).
const TIME_SHARED: [&str; 7] =
    ["libra", "libra+$", "libra-edf", "libra-edf-libra", "libra-edf-flat", "libra-risk", "libra-risk-est"];

fn node(name: &str, cpus: f64, price_base: f64) -> NodeSpec {
    NodeSpec { name: name.into(), cpus, mem_mb: 1 << 20, disk_mb: 1 << 20, price_base }
}

/// Node 0 nearly full, node 1 half full, node 2 idle and the cheapest by base price.
fn mixed_cluster() -> Cluster {
    let mut c = Cluster::new();
    c.add_node(node("full", 1.0, 1.0));
    c.add_node(node("half", 1.0, 1.0));
    c.add_node(node("idle", 1.0, 0.8));
    c.commit(1, 80.0, 100.0, &[0], 0.0).unwrap();
    c.commit(2, 50.0, 100.0, &[1], 0.0).unwrap();
    c
}

fn accepted(d: Decision) -> (Vec<NodeIdx>, Money) {
    match d {
        Decision::Accept { nodes, cost, .. } => (nodes, cost),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_placement_picks_its_node_and_the_paper_rules_stay_the_defaults() {
    let c = mixed_cluster();
    let job = JobSpec::simple(10.0, 100.0, Money::from_credits(1000));
    let pick = |name: &str, p: Option<Placement>| {
        accepted(build_policy_with(name, PricingParams::default(), p).unwrap().decide(&job, &c, 0.0))
    };
    // Libra+$: best fit takes the fullest node, and charges its utilisation price.
    let (best, best_cost) = pick("libra+$", None);
    assert_eq!(best, vec![0]);
    assert_eq!(pick("libra+$", Some(Placement::BestFit)), (best.clone(), best_cost));
    assert_eq!(pick("libra+$", Some(Placement::LeastLoaded)).0, vec![2]);
    let (cheap, cheap_cost) = pick("libra+$", Some(Placement::Cheapest));
    assert_eq!(cheap, vec![2]);
    assert!(cheap_cost < best_cost, "{cheap_cost} < {best_cost}");
    // Libra: least loaded by default; best fit is the fullest node; the price is the same
    // everywhere, so cheapest falls back to least loaded.
    assert_eq!(pick("libra", None).0, vec![2]);
    assert_eq!(pick("libra", Some(Placement::BestFit)).0, vec![0]);
    assert_eq!(pick("libra", Some(Placement::Cheapest)).0, vec![2]);
    // The EDF policies: best fit by default, cheapest on request.
    assert_eq!(pick("libra-edf", None).0, vec![0]);
    assert_eq!(pick("libra-edf", Some(Placement::Cheapest)).0, vec![2]);
    assert_eq!(pick("libra-edf-flat", Some(Placement::Cheapest)).0, vec![2]);
    // Defaults as published, and no placement for a policy without a node choice.
    for (name, default) in [("libra", Placement::LeastLoaded), ("libra+$", Placement::BestFit)] {
        assert_eq!(build_policy(name, PricingParams::default()).unwrap().placement(), Some(default));
    }
    assert_eq!(build_policy("fcfs-bf", PricingParams::default()).unwrap().placement(), None);
    let e = build_policy_with("fcfs-bf", PricingParams::default(), Some(Placement::Cheapest)).err().unwrap();
    assert!(e.to_string().starts_with("placement: fcfs-bf"), "{e}");
}

#[test]
fn a_parallel_job_under_cheapest_pays_the_least_any_nodes_would_charge() {
    let c = mixed_cluster();
    let job = JobSpec::simple(10.0, 100.0, Money::from_credits(1000)).with_procs(2);
    let p = LibraPlus::with_placement(PricingParams::default(), Placement::Cheapest);
    let (nodes, cost) = accepted(p.decide(&job, &c, 0.0));
    assert_eq!(nodes, vec![2, 1]);
    assert_eq!(Some(cost), p.least_budget(&job, None, &c, 0.0));
    // Best fit takes the two fullest and pays the dearer of them.
    let (nodes, best) = accepted(LibraPlus::new(PricingParams::default()).decide(&job, &c, 0.0));
    assert_eq!(nodes, vec![0, 1]);
    assert!(best > cost);
}

/// A random cluster state: `n` nodes of varied capacity and base price, with jobs committed at
/// t = 0 and progress reported since.
fn arb_cluster() -> impl Strategy<Value = Cluster> {
    (
        proptest::collection::vec((1u32..5, 5u32..20), 2..5),
        proptest::collection::vec((1.0f64..200.0, 1.5f64..8.0, 0usize..5, 0.0f64..1.0), 0..12),
    )
        .prop_map(|(nodes, jobs)| {
            let mut c = Cluster::new();
            for (i, (cpus, pbase)) in nodes.iter().enumerate() {
                c.add_node(node(&format!("n{i}"), f64::from(*cpus) / 2.0, f64::from(*pbase) / 10.0));
            }
            for (k, (e, f, at, done)) in jobs.into_iter().enumerate() {
                let n = at % c.node_count();
                if c.node_load(n, 0.0) + 1.0 / f <= c.node(n).spec.cpus.min(1.0) {
                    c.commit(k as u64, e, e * f, &[n], 0.0).unwrap();
                    c.report_progress(k as u64, e * done * 0.2, 10.0).unwrap();
                }
            }
            c
        })
}

fn arb_spec() -> impl Strategy<Value = JobSpec> {
    (1.0f64..300.0, 1.0f64..15.0, 0i64..200_000, 1u32..3, 1u32..3).prop_map(|(e, f, b, procs, cpt)| {
        JobSpec::simple(e, e * f / f64::from(cpt), Money(b)).with_procs(procs).with_cpus_per_task(cpt)
    })
}

proptest! {
    /// Issue 12 item 1: under every policy, the price a quote shows for each node is the one
    /// admission charges: an accepted job's cost is `cost_at(estimate, p)` for the highest price
    /// `p` among its nodes; a space-shared one's at dispatch likewise.
    #[test]
    fn the_quoted_price_is_what_admission_charges(
        c in arb_cluster(),
        spec in arb_spec(),
        which in 0usize..TIME_SHARED.len(),
        placement in 0usize..4,
        beta in 0.0f64..1.5,
    ) {
        let pricing = PricingParams { beta, ..Default::default() };
        let placement = Placement::ALL.get(placement).copied();
        let policy = build_policy_with(TIME_SHARED[which], pricing, placement).unwrap();
        let now = 10.0;
        let quoted: Vec<Option<f64>> =
            (0..c.node_count()).map(|j| policy.price(&spec, Some(1), &c, j, now)).collect();
        if let Decision::Accept { nodes, cost, .. } = policy.decide_as(&spec, Some(1), &c, now) {
            let highest = nodes.iter().map(|&j| quoted[j].expect("a node that took the job has a price")).fold(0.0, f64::max);
            prop_assert_eq!(Some(cost), cost_at(spec.estimate(), highest), "{} on {:?}", policy.name(), nodes);
        }
    }

    #[test]
    fn space_shared_policies_charge_their_quoted_price_at_dispatch(
        prices in proptest::collection::vec(1u32..30, 1..6),
        estimate in 1.0f64..1000.0,
        procs in 1u32..4,
    ) {
        let mut c = Cluster::new();
        for (i, p) in prices.iter().enumerate() {
            c.add_node(node(&format!("n{i}"), 1.0, f64::from(*p) / 10.0));
        }
        let spec = JobSpec::simple(estimate, estimate * 10.0, Money(1)).with_procs(procs);
        for name in ["fifo", "fcfs-bf", "sjf-bf", "edf-bf"] {
            let policy = build_policy(name, PricingParams::default()).unwrap();
            let q = Queued { job: 1, submit: 0.0, estimate, procs, deadline_abs: estimate * 10.0 };
            for d in policy.dispatch(&[q], &c, 0.0) {
                if let Dispatch::Start { nodes, cost, .. } = d {
                    let highest = nodes.iter().map(|&j| policy.price(&spec, None, &c, j, 0.0).unwrap()).fold(0.0, f64::max);
                    prop_assert_eq!(Some(cost), cost_at(estimate, highest), "{}", name);
                }
            }
        }
    }

    /// Issues 9 and 12 item 3: a suggestion is accepted when taken, with every other option of
    /// the request kept; a job turned away for its budget alone keeps its deadline; and the
    /// budget suggested is within the stated margin of the cost then held.
    #[test]
    fn a_suggestion_is_accepted_and_its_budget_within_the_margin_of_the_cost(
        c in arb_cluster(),
        spec in arb_spec(),
        which in 0usize..TIME_SHARED.len(),
        placement in 0usize..4,
        beta in 0.0f64..1.5,
    ) {
        let pricing = PricingParams { beta, ..Default::default() };
        let placement = Placement::ALL.get(placement).copied();
        let policy = build_policy_with(TIME_SHARED[which], pricing, placement).unwrap();
        let now = 10.0;
        let Decision::Reject { reason, suggestion } = policy.decide_as(&spec, Some(1), &c, now) else {
            return Ok(());
        };
        prop_assume!(reason != RejectReason::Resources);
        let budget_only = policy.least_budget(&spec, Some(1), &c, now).is_some();
        let Some(s) = resubmission(policy.as_ref(), &spec, Some(1), &c, now, suggestion) else {
            return Ok(());
        };
        prop_assert!(s.deadline >= spec.deadline());
        if budget_only {
            prop_assert_eq!(s.deadline, spec.deadline(), "the deadline was fine: {:?}", reason);
        }
        let mut retry = spec.clone();
        retry.qos.deadline = s.deadline;
        retry.qos.budget = s.budget;
        prop_assert_eq!(retry.resources.clone(), spec.resources.clone());
        match policy.decide_as(&retry, Some(1), &c, now) {
            Decision::Accept { cost, .. } => {
                prop_assert!(cost <= s.budget);
                prop_assert!(s.budget <= budget_with_margin(cost).unwrap(), "{} suggested for a cost of {}", s.budget, cost);
            }
            other => prop_assert!(false, "{} refused its own suggestion {:?}: {:?}", policy.name(), s, other),
        }
    }
}

/// The trial of issue 9: best fit puts a job on the fullest node, the dearest. Asked with no
/// budget limit, it quoted that node's cost, and a budget-only rejection moved the deadline.
#[test]
fn a_budget_only_rejection_keeps_the_deadline_and_suggests_the_least_budget() {
    let c = mixed_cluster();
    let p = LibraPlus::new(PricingParams { beta: 1.0, ..Default::default() });
    let poor = JobSpec::simple(10.0, 100.0, Money::from_credits(1));
    let Decision::Reject { reason: RejectReason::Budget, suggestion } = p.decide(&poor, &c, 0.0) else {
        panic!("a budget rejection");
    };
    let s = resubmission(&p, &poor, None, &c, 0.0, suggestion).unwrap();
    assert_eq!(s.deadline, 100.0);
    // The idle node's price: RESFree 90 of 100 at PBase 0.8: 10 * (0.8 + 100/90 * 0.8) = 16.89.
    let least = cost_at(10.0, 0.8 + 100.0 / 90.0 * 0.8).unwrap();
    assert_eq!(least, Money(1689));
    assert_eq!(s.budget, Money::from_credits(18));
    // Unlimited, best fit would have taken the full node: 10 * (1 + 100/10) = 110.
    let rich = JobSpec::simple(10.0, 101.0, Money::from_credits(1_000_000));
    assert!(accepted(p.decide(&rich, &c, 0.0)).1 > Money::from_credits(100));
}

#[test]
fn a_deadline_rejection_suggests_the_earliest_deadline_and_the_least_budget_there() {
    let mut c = Cluster::homogeneous(2, 1.0);
    c.commit(1, 90.0, 100.0, &[0], 0.0).unwrap();
    c.commit(2, 50.0, 100.0, &[1], 0.0).unwrap();
    let p = LibraPlus::new(PricingParams::default());
    // 60 CPU-seconds in 50 s: no node has 1.2 CPUs free. Node 1 has 0.5: 120 s, plus 2%.
    let spec = JobSpec::simple(60.0, 50.0, Money::from_credits(1_000_000));
    let Decision::Reject { reason: RejectReason::Deadline, suggestion } = p.decide(&spec, &c, 0.0) else {
        panic!("a deadline rejection");
    };
    let s = resubmission(&p, &spec, None, &c, 0.0, suggestion).unwrap();
    assert_eq!(s.deadline, 123.0);
    let mut at = spec.clone();
    at.qos.deadline = s.deadline;
    assert_eq!(Some(s.budget), budget_with_margin(p.least_budget(&at, None, &c, 0.0).unwrap()));
}

#[test]
fn a_task_may_have_up_to_its_cpus_and_no_more() {
    let mut c = Cluster::new();
    c.add_node(node("wide", 4.0, 1.0));
    // 150 CPU-seconds in 100 s: 1.5 CPUs. Refused with one CPU per task, accepted with two.
    let one = JobSpec::simple(150.0, 100.0, Money::from_credits(10_000));
    let two = one.clone().with_cpus_per_task(2);
    for name in TIME_SHARED {
        let p = build_policy(name, PricingParams::default()).unwrap();
        assert!(
            matches!(p.decide(&one, &c, 0.0), Decision::Reject { reason: RejectReason::Deadline, .. }),
            "{name}"
        );
        assert!(p.decide(&two, &c, 0.0).is_accept(), "{name}");
    }
    // The suggestion for one CPU per task is the deadline one CPU can meet.
    let p = Libra::new(PricingParams::default());
    let Decision::Reject { suggestion: Some(s), .. } = p.decide(&one, &c, 0.0) else { panic!() };
    assert_eq!(s.deadline, 150.0);
    // Committed, the job's cap is its two CPUs, and the node's load counts 1.5.
    c.commit_spec(7, &two, 0.0, &[0], 0.0).unwrap();
    assert_eq!(c.commitment(7).unwrap().cap, 2.0);
    assert!((c.node_load(0, 0.0) - 1.5).abs() < 1e-12);
    // A task of more CPUs than the node has gets the node.
    assert_eq!(c.node(0).spec.job_cap(8), 4.0);
}

proptest! {
    /// Issue 9 (`--cpus-per-task`): on multi-CPU nodes, jobs of up to `c` CPUs per task with
    /// exact estimates, each progressing at the share job control gives it: no share exceeds its
    /// task's CPUs, no node's shares exceed its capacity, every accepted job finishes by its
    /// deadline, and a job needing more than `c` CPUs of share is refused.
    #[test]
    fn jobs_of_several_cpus_per_task_finish_in_time_within_capacity(
        jobs in proptest::collection::vec((1.0f64..400.0, 0.2f64..6.0, 1u32..5, 1u32..3, 0.0f64..40.0), 1..40),
        cpus in proptest::collection::vec(2u32..9, 1..4),
        plus in any::<bool>(),
    ) {
        let mut c = Cluster::new();
        for (i, n) in cpus.iter().enumerate() {
            c.add_node(node(&format!("n{i}"), f64::from(*n) / 2.0, 1.0));
        }
        let policy: Box<dyn Policy> = if plus {
            Box::new(LibraPlus::new(PricingParams::default()))
        } else {
            Box::new(Libra::new(PricingParams::default()))
        };
        // (job, estimate, deadline_abs, done, rate)
        let mut running: Vec<(u64, f64, f64, f64, f64)> = Vec::new();
        let mut now = 0.0;
        let mut arrivals = jobs.into_iter().enumerate().peekable();
        let mut next_arrival = 0.0;
        loop {
            // The next event: an arrival or a completion at the current rates.
            let completion = running
                .iter()
                .filter(|r| r.4 > 0.0)
                .map(|r| now + (r.1 - r.3) / r.4)
                .fold(f64::INFINITY, f64::min);
            let arrival = if arrivals.peek().is_some() { next_arrival } else { f64::INFINITY };
            if completion.is_infinite() && arrival.is_infinite() {
                break;
            }
            let t = completion.min(arrival);
            for r in running.iter_mut() {
                r.3 = (r.3 + r.4 * (t - now)).min(r.1);
            }
            now = t;
            running.retain(|r| {
                if r.1 - r.3 <= 1e-9 * r.1 {
                    assert!(now <= r.2 + 1e-6, "job {} finished at {now}, due {}", r.0, r.2);
                    c.release(r.0);
                    false
                } else {
                    true
                }
            });
            for r in &running {
                c.set_progress(r.0, r.3, 0.0, now).unwrap();
            }
            if t == arrival {
                let (i, (e, share, cpt, procs, gap)) = arrivals.next().unwrap();
                next_arrival = now + gap;
                let spec = JobSpec::simple(e, e / share, Money::from_credits(1_000_000))
                    .with_procs(procs)
                    .with_cpus_per_task(cpt);
                match policy.decide(&spec, &c, now) {
                    Decision::Accept { nodes, .. } => {
                        prop_assert!(share <= f64::from(cpt) + 1e-9, "a share of {share} above {cpt} CPUs accepted");
                        c.commit_spec(i as u64, &spec, now, &nodes, now).unwrap();
                        running.push((i as u64, e, now + spec.deadline(), 0.0, 0.0));
                    }
                    Decision::Reject { reason, .. } => {
                        if share > f64::from(cpt) + 1e-9 && procs as usize <= c.node_count() {
                            prop_assert_eq!(reason, RejectReason::Deadline);
                        }
                    }
                    Decision::Queue => prop_assert!(false),
                }
            }
            // Job control on every node; a parallel job runs at its slowest node's share.
            let mut rate: std::collections::HashMap<u64, f64> = std::collections::HashMap::new();
            for n in 0..c.node_count() {
                let controlled = c.controlled_jobs(n, now);
                let shares = node_shares(JobControl::Libra, &controlled, now, c.node(n).spec.cpus);
                prop_assert!(shares.iter().sum::<f64>() <= c.node(n).spec.cpus + 1e-6, "node {n} over capacity");
                for (j, s) in controlled.iter().zip(shares) {
                    prop_assert!(s <= j.cap + 1e-12);
                    let r = rate.entry(j.job).or_insert(f64::INFINITY);
                    *r = r.min(s);
                }
            }
            for r in running.iter_mut() {
                r.4 = rate.get(&r.0).copied().unwrap_or(0.0);
            }
        }
    }

    /// Placement changes where a job goes, never whether it is accepted; and under cheapest
    /// nobody pays more than under another placement for the same decision.
    #[test]
    fn admission_does_not_depend_on_placement_and_cheapest_is_cheapest(
        c in arb_cluster(),
        spec in arb_spec(),
        which in 0usize..TIME_SHARED.len(),
    ) {
        let decisions: Vec<Decision> = Placement::ALL
            .iter()
            .map(|&p| build_policy_with(TIME_SHARED[which], PricingParams::default(), Some(p)).unwrap().decide(&spec, &c, 10.0))
            .collect();
        let kind = |d: &Decision| match d {
            Decision::Accept { .. } => None,
            Decision::Reject { reason, .. } => Some(*reason),
            Decision::Queue => Some(RejectReason::Resources),
        };
        prop_assert!(decisions.iter().all(|d| kind(d) == kind(&decisions[0])), "{:?}", decisions);
        let cost = |d: &Decision| if let Decision::Accept { cost, .. } = d { Some(*cost) } else { None };
        if let Some(cheapest) = cost(&decisions[2]) {
            prop_assert!(decisions.iter().all(|d| cost(d).is_some_and(|c| cheapest <= c)));
        }
    }
}
