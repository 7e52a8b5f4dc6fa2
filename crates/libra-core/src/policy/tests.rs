//! Hand-computed decisions and property tests for the policies.

use super::*;
use crate::cluster::{Cluster, NodeSpec};
use crate::job::JobSpec;
use proptest::prelude::*;

fn credits(c: i64) -> Money {
    Money::from_credits(c)
}

#[test]
fn libra_picks_least_loaded_accepting_node() {
    let mut c = Cluster::homogeneous(3, 1.0);
    c.commit(1, 50.0, 100.0, &[0], 0.0).unwrap(); // node 0 owes 0.5
    c.commit(2, 20.0, 100.0, &[1], 0.0).unwrap(); // node 1 owes 0.2
    c.commit(3, 90.0, 100.0, &[2], 0.0).unwrap(); // node 2 owes 0.9
    let libra = Libra::new(PricingParams::default());
    // Needs 0.4: nodes 0 (0.9) and 1 (0.6) accept, node 2 (1.3) refuses; node 1 is least loaded.
    let d = libra.decide(&JobSpec::simple(40.0, 100.0, credits(1000)), &c, 0.0);
    match d {
        Decision::Accept { nodes, share, cost } => {
            assert_eq!(nodes, vec![1]);
            assert!((share - 0.4).abs() < 1e-12);
            // 1*40 + 1*40/100 = 40.4
            assert_eq!(cost, Money(4040));
        }
        other => panic!("{other:?}"),
    }
    // Two processors: nodes 1 and 0.
    let d = libra.decide(&JobSpec::simple(40.0, 100.0, credits(1000)).with_procs(2), &c, 0.0);
    assert!(matches!(d, Decision::Accept { ref nodes, .. } if nodes == &vec![1, 0]), "{d:?}");
    // Needs 0.6: only node 1 (0.8); two processors cannot be had.
    let d = libra.decide(&JobSpec::simple(60.0, 100.0, credits(1000)).with_procs(2), &c, 0.0);
    match d {
        Decision::Reject { reason: RejectReason::Deadline, suggestion: Some(s) } => {
            // Second-best headroom is node 0 with 0.5: D = 60 / 0.5 = 120.
            assert_eq!(s.deadline, 120.0);
            assert_eq!(s.budget, Money::from_credits_f64_ceil(60.0 + 60.0 / 120.0).unwrap());
        }
        other => panic!("{other:?}"),
    }
    // Four processors on three nodes: resources.
    let d = libra.decide(&JobSpec::simple(1.0, 100.0, credits(1000)).with_procs(4), &c, 0.0);
    assert_eq!(d, Decision::Reject { reason: RejectReason::Resources, suggestion: None });
}

#[test]
fn libra_checks_budget_first_and_suggests() {
    let c = Cluster::homogeneous(1, 1.0);
    let libra = Libra::new(PricingParams::default());
    // Cost 100 + 100/200 = 100.5 > 100.
    let d = libra.decide(&JobSpec::simple(100.0, 200.0, credits(100)), &c, 0.0);
    match d {
        Decision::Reject { reason: RejectReason::Budget, suggestion: Some(s) } => {
            assert_eq!(s.deadline, 200.0);
            assert_eq!(s.budget, Money(10050));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn libra_uses_progress_of_running_jobs() {
    let mut c = Cluster::homogeneous(1, 1.0);
    c.commit(1, 100.0, 200.0, &[0], 0.0).unwrap(); // 0.5 at t=0
    let job = JobSpec::simple(60.0, 100.0, credits(1000)); // needs 0.6
    let libra = Libra::new(PricingParams::default());
    assert!(!libra.decide(&job, &c, 0.0).is_accept());
    // At t=50 the first job has done 80: it owes 20/150 = 0.133; now 0.6 fits.
    c.set_progress(1, 80.0, 0.0, 50.0).unwrap();
    assert!(libra.decide(&job, &c, 50.0).is_accept());
}

/// The paper's PUtil example set up on a real cluster: 100 units/hour node, other jobs using 90
/// units inside both windows, the job needing 10 units: $2 per unit at 2 hours, $1.25 at 5.
#[test]
fn libraplus_paper_example_on_a_cluster() {
    // One CPU; an "hour" is 100 s, so the node has 100 units per hour of deadline.
    let mut c = Cluster::new();
    c.add_node(NodeSpec { name: "n".into(), cpus: 1.0, mem_mb: 1, disk_mb: 1, price_base: 1.0 });
    // 90 units due within the first "hour" (so inside both windows).
    c.commit(1, 90.0, 100.0, &[0], 0.0).unwrap();
    let (max2, free2) = LibraPlus::res_free(&c, 0, 10.0, 200.0, 0.0);
    let (max5, free5) = LibraPlus::res_free(&c, 0, 10.0, 500.0, 0.0);
    assert!((crate::pricing::putil(max2, free2, 1.0) - 2.0).abs() < 1e-12);
    assert!((crate::pricing::putil(max5, free5, 1.0) - 1.25).abs() < 1e-12);
}

#[test]
fn libraplus_best_fit_budget_and_cost() {
    let p = PricingParams { alpha: 1.0, beta: 1.0, ..Default::default() };
    let lp = LibraPlus::new(p);
    let mut c = Cluster::homogeneous(3, 1.0);
    c.commit(1, 50.0, 100.0, &[0], 0.0).unwrap(); // node 0: 50 units due in the window
    c.commit(2, 25.0, 100.0, &[1], 0.0).unwrap(); // node 1: 25
                                                  // Job: E=20, D=100. RESFree: node 0: 100-50-20=30, node 1: 55, node 2: 80.
                                                  // Price: 1 + RESMax/RESFree: node 0: 1+100/30, node 1: 1+100/55, node 2: 1+100/80.
    let cost = |free: f64| Money::from_credits_f64_ceil(20.0 * (1.0 + 100.0 / free)).unwrap();
    let job = JobSpec::simple(20.0, 100.0, credits(1000));
    match lp.decide(&job, &c, 0.0) {
        Decision::Accept { nodes, cost: got, .. } => {
            assert_eq!(nodes, vec![0], "best fit takes the fullest node");
            assert_eq!(got, cost(30.0));
        }
        other => panic!("{other:?}"),
    }
    // Two processors: nodes 0 and 1, cost the higher (node 0's).
    match lp.decide(&job.clone().with_procs(2), &c, 0.0) {
        Decision::Accept { nodes, cost: got, .. } => {
            assert_eq!(nodes, vec![0, 1]);
            assert_eq!(got, cost(30.0));
        }
        other => panic!("{other:?}"),
    }
    // A budget that node 0 exceeds but node 1 meets: node 1 is skipped to, in RESFree order.
    let mut tight = job.clone();
    tight.qos.budget = cost(55.0);
    match lp.decide(&tight, &c, 0.0) {
        Decision::Accept { nodes, cost: got, .. } => {
            assert_eq!(nodes, vec![1]);
            assert_eq!(got, cost(55.0));
        }
        other => panic!("{other:?}"),
    }
    // Below every node's price: budget, with the least budget that would do.
    let mut poor = job;
    poor.qos.budget = credits(1);
    match lp.decide(&poor, &c, 0.0) {
        Decision::Reject { reason: RejectReason::Budget, suggestion: Some(s) } => {
            assert_eq!(s.budget, cost(80.0));
            assert_eq!(s.deadline, 100.0);
            let mut retry = poor.clone();
            retry.qos.budget = s.budget;
            assert!(lp.decide(&retry, &c, 0.0).is_accept());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn easy_backfill_respects_the_head_reservation() {
    let mut c = Cluster::homogeneous(4, 1.0);
    // Node 0..2 busy until t=100 (one 3-node job); node 3 idle.
    c.commit(1, 100.0, 1000.0, &[0, 1, 2], 0.0).unwrap();
    let q = |job, est: f64, procs, dl: f64| Queued {
        job,
        submit: job as f64,
        estimate: est,
        procs,
        deadline_abs: dl,
    };
    let queue = vec![
        q(10, 50.0, 4, 10_000.0),  // head: needs all 4, shadow at t=100, no extra nodes
        q(11, 200.0, 1, 10_000.0), // would delay the head
        q(12, 90.0, 1, 10_000.0),  // ends by t=100: backfills
        q(13, 10.0, 1, 5.0),       // cannot meet its deadline any more: dropped
    ];
    let bf = Backfill::new(BackfillOrder::Fcfs);
    let out = bf.dispatch(&queue, &c, 0.0);
    assert!(out.contains(&Dispatch::Drop { job: 13 }));
    let started: Vec<u64> = out
        .iter()
        .filter_map(|d| if let Dispatch::Start { job, .. } = d { Some(*job) } else { None })
        .collect();
    assert_eq!(started, vec![12]);
    // SJF order puts job 12 first anyway, and job 11 still may not pass the head.
    let sjf = Backfill::new(BackfillOrder::Sjf).dispatch(&queue, &c, 0.0);
    assert!(sjf.iter().all(|d| !matches!(d, Dispatch::Start { job: 11, .. })));
    // FIFO never backfills and never drops.
    assert!(Fifo.dispatch(&queue, &c, 0.0).is_empty());
}

#[test]
fn easy_counts_every_job_ending_at_the_shadow_time() {
    // 6 nodes: three 1-node jobs all estimated to end at t=100, one idle node and two more
    // busy until t=500. The head needs 3 nodes: at the shadow time (100) the idle node plus all
    // three ending jobs give 4, one spare, so a long 1-node job may backfill on the spare.
    // Stopping at the first job that reaches the head's need would count 3 and leave no spare.
    let mut c = Cluster::homogeneous(6, 1.0);
    for (job, node) in [(1, 0), (2, 1), (3, 2)] {
        c.commit(job, 100.0, 1000.0, &[node], 0.0).unwrap();
    }
    c.commit(4, 500.0, 1000.0, &[3, 4], 0.0).unwrap();
    let q =
        |job, est: f64, procs| Queued { job, submit: job as f64, estimate: est, procs, deadline_abs: 1e9 };
    let queue = vec![q(10, 50.0, 3), q(11, 1000.0, 1)];
    let out = Backfill::new(BackfillOrder::Fcfs).dispatch(&queue, &c, 0.0);
    let started: Vec<u64> = out
        .iter()
        .filter_map(|d| if let Dispatch::Start { job, .. } = d { Some(*job) } else { None })
        .collect();
    assert_eq!(started, vec![11], "the long job uses the node the head leaves spare");
    // With one more waiting long job there is no second spare node: it waits.
    let queue = vec![q(10, 50.0, 3), q(11, 1000.0, 1), q(12, 1000.0, 1)];
    let out = Backfill::new(BackfillOrder::Fcfs).dispatch(&queue, &c, 0.0);
    assert!(!out.iter().any(|d| matches!(d, Dispatch::Start { job: 12, .. })));
}

#[test]
fn build_policy_names() {
    for n in POLICY_NAMES {
        assert_eq!(build_policy(n, PricingParams::default()).unwrap().name(), *n);
    }
    assert!(build_policy("libraplus", PricingParams::default()).is_ok());
    let e = build_policy("lottery", PricingParams::default()).err().unwrap();
    assert!(e.to_string().contains("libra+$"));
    let bad = PricingParams { beta: -1.0, ..Default::default() };
    assert!(build_policy("libra", bad).err().unwrap().to_string().contains("beta"));
}

fn arb_job() -> impl Strategy<Value = (f64, f64, i64, u32)> {
    (1.0f64..500.0, 1.0f64..20.0, 0i64..5_000, 1u32..4)
        .prop_map(|(e, factor, budget, procs)| (e, e * factor, budget, procs))
}

proptest! {
    /// After every accepted job, no node owes more than its capacity, and no quoted cost exceeds
    /// the budget, whatever the arrival sequence.
    #[test]
    fn shares_within_capacity_and_cost_within_budget(
        jobs in proptest::collection::vec((arb_job(), 0.0f64..50.0), 1..60),
        plus in any::<bool>(),
        beta in 0.0f64..2.0,
    ) {
        let pricing = PricingParams { beta, ..Default::default() };
        let policy: Box<dyn Policy> = if plus { Box::new(LibraPlus::new(pricing)) } else { Box::new(Libra::new(pricing)) };
        let mut c = Cluster::homogeneous(4, 1.0);
        let mut now = 0.0;
        for (i, ((e, d, b, procs), gap)) in jobs.into_iter().enumerate() {
            now += gap;
            let spec = JobSpec::simple(e, d, Money(b * 10)).with_procs(procs);
            match policy.decide(&spec, &c, now) {
                Decision::Accept { nodes, share, cost } => {
                    prop_assert!(cost <= spec.budget());
                    prop_assert_eq!(nodes.len(), procs as usize);
                    prop_assert!((share - e / d).abs() < 1e-9);
                    c.commit(i as u64, e, now + d, &nodes, now).unwrap();
                    // The nodes that took the job still owe no more than they have. (Others may
                    // be over: this test never reports progress, so their jobs fall behind.)
                    for &j in &nodes {
                        prop_assert!(c.node_load(j, now) <= 1.0 + 1e-6);
                    }
                }
                Decision::Reject { suggestion: Some(s), .. } => {
                    // Taking the suggestion is accepted at once.
                    let mut retry = spec.clone();
                    retry.qos.deadline = s.deadline;
                    retry.qos.budget = s.budget;
                    prop_assert!(s.deadline >= spec.deadline());
                    prop_assert!(policy.decide(&retry, &c, now).is_accept(), "{:?} -> {:?}", spec, s);
                }
                Decision::Reject { .. } => {}
                Decision::Queue => prop_assert!(false, "time-shared policies never queue"),
            }
        }
    }
}

#[test]
fn libraplus_suggests_a_priced_deadline_when_the_earliest_fills_a_node() {
    // Half the node is promised; a job needing the other half exactly at the earliest deadline
    // would leave no free resource (PUtil unbounded, no budget buys it). The suggestion moves
    // the deadline on until a price exists, and taking it is accepted.
    let mut c = Cluster::homogeneous(1, 1.0);
    c.commit(1, 50.0, 100.0, &[0], 0.0).unwrap();
    let p = LibraPlus::new(PricingParams::default());
    let spec = JobSpec::simple(50.0, 50.0, credits(1_000_000));
    match p.decide(&spec, &c, 0.0) {
        Decision::Reject { reason: RejectReason::Deadline, suggestion: Some(s) } => {
            assert!(s.deadline > 100.0, "{s:?}");
            let mut retry = spec.clone();
            retry.qos.deadline = s.deadline;
            retry.qos.budget = s.budget;
            assert!(p.decide(&retry, &c, 0.0).is_accept(), "{s:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_commitment_needs_a_node() {
    let mut c = Cluster::homogeneous(1, 1.0);
    assert_eq!(c.commit(1, 1.0, 10.0, &[], 0.0), Err(crate::cluster::ClusterError::NoNodes(1)));
    assert_eq!(c.job_count(), 0);
}

#[test]
fn only_the_edf_policies_ask_for_edf_job_control() {
    for name in POLICY_NAMES.iter().chain(BEYOND_POLICY_NAMES) {
        let p = build_policy(name, PricingParams::default()).unwrap();
        let edf = name.starts_with("libra-edf") || name.starts_with("libra-risk");
        assert_eq!(p.job_control() == crate::share::JobControl::Edf, edf, "{name}");
    }
}

proptest! {
    /// `decide_only` is `decide_as` without the suggestion: the same accept, nodes and cost, or
    /// the same reject reason, for every time-shared policy, along a whole arrival sequence.
    #[test]
    fn decide_only_is_the_decision_without_the_suggestion(
        jobs in proptest::collection::vec((arb_job(), 0.0f64..50.0, 0u64..3), 1..40),
        which in 0usize..5,
    ) {
        let name = ["libra", "libra+$", "libra-edf", "libra-edf-libra", "libra-risk"][which];
        let policy = build_policy(name, PricingParams::default()).unwrap();
        let mut c = Cluster::homogeneous(4, 1.0);
        let mut now = 0.0;
        for (i, ((e, d, b, procs), gap, user)) in jobs.into_iter().enumerate() {
            now += gap;
            let spec = JobSpec::simple(e, d, Money(b * 10)).with_procs(procs);
            let full = policy.decide_as(&spec, Some(user), &c, now);
            let only = policy.decide_only(&spec, Some(user), &c, now);
            let stripped = match full.clone() {
                Decision::Reject { reason, .. } => Decision::Reject { reason, suggestion: None },
                other => other,
            };
            prop_assert_eq!(&only, &stripped, "{}", name);
            if let Decision::Accept { nodes, .. } = full {
                c.commit(i as u64, policy.reserved_estimate(&spec, Some(user)), now + d, &nodes, now).unwrap();
                policy.observe(Some(user), e, e * 1.2);
            }
        }
    }
}

/// The server stores a rejected job's suggestion as JSON; rows written before money fields were
/// named `*_cents` must still read, or the suggestion silently disappears from the job.
#[test]
fn suggestion_in_the_old_stored_format_still_reads() {
    let old: Suggestion = serde_json::from_str(r#"{"deadline": 6.5, "budget": 1200}"#).unwrap();
    assert_eq!(old, Suggestion { deadline: 6.5, budget: Money(1200) });
    let now = serde_json::to_value(old).unwrap();
    assert_eq!(now, serde_json::json!({"deadline": 6.5, "budget_cents": 1200}));
    assert_eq!(serde_json::from_value::<Suggestion>(now).unwrap(), old);
}

#[test]
fn a_drained_node_takes_no_new_job_under_any_policy_and_keeps_its_promises() {
    for name in POLICY_NAMES.iter().chain(BEYOND_POLICY_NAMES) {
        let p = build_policy(name, PricingParams::default()).unwrap();
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(1, 10.0, 100.0, &[0], 0.0).unwrap();
        c.set_accepting(1, false);
        // Node 1 is idle and would take the job; drained, only node 0 may.
        let d = p.decide(&JobSpec::simple(10.0, 100.0, credits(1000)), &c, 0.0);
        if let Decision::Accept { nodes, .. } = &d {
            assert_eq!(nodes, &vec![0], "{name}: {d:?}");
        }
        // Two processors cannot be had with one node drained.
        let d = p.decide(&JobSpec::simple(10.0, 100.0, credits(1000)).with_procs(2), &c, 0.0);
        assert!(matches!(d, Decision::Reject { .. }), "{name}: {d:?}");
        assert!(c.idle_nodes().all(|i| i != 1), "{name}: a drained node is never idle for dispatch");
        // The promise on the drained node stands.
        c.set_accepting(0, false);
        assert!(c.commitment(1).is_some());
        let d = p.decide(&JobSpec::simple(1.0, 100.0, credits(1000)), &c, 0.0);
        assert!(matches!(d, Decision::Reject { .. }), "{name}: every node drained: {d:?}");
        c.set_accepting(1, true);
        let d = p.decide(&JobSpec::simple(1.0, 100.0, credits(1000)), &c, 0.0);
        assert!(!matches!(d, Decision::Reject { .. }), "{name}: undrained: {d:?}");
    }
}

/// The space-shared policies queue a job exactly when enough up, accepting nodes exist for it
/// (counted only up to `procs`), whatever their jobs: on 70 nodes (past one word of 64) with
/// some down and some drained, every size around the count.
#[test]
fn space_shared_admission_queues_exactly_when_enough_nodes_can_run_the_job() {
    let mut c = Cluster::homogeneous(70, 1.0);
    for i in (0..70).step_by(7) {
        c.set_up(i, false);
    }
    for i in (3..70).step_by(11) {
        c.set_accepting(i, false);
    }
    c.commit(1, 10.0, 100.0, &[1, 2, 66], 0.0).unwrap();
    let able = c.nodes().filter(|(_, n)| n.up && n.accepting).count();
    assert!(able > 50 && able < 70, "{able}");
    for name in ["fifo", "fcfs-bf", "sjf-bf", "edf-bf"] {
        let p = build_policy(name, PricingParams::default()).unwrap();
        for procs in [1, able as u32 - 1, able as u32, able as u32 + 1, 70] {
            let spec = JobSpec::simple(10.0, 100.0, credits(1000)).with_procs(procs);
            let d = p.decide(&spec, &c, 0.0);
            if procs as usize <= able {
                assert!(matches!(d, Decision::Queue), "{name}, {procs} of {able}: {d:?}");
            } else {
                assert!(
                    matches!(d, Decision::Reject { reason: RejectReason::Resources, .. }),
                    "{name}, {procs} of {able}: {d:?}"
                );
            }
        }
    }
}
