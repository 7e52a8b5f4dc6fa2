//! The one-pass admission of `libra+$` and `libra` (early exit on a full node, the best nodes
//! kept as they come) against the direct computation it replaced: every node's load and RESFree
//! read in full, the priced nodes collected, then `choose`. Decisions must be identical, bit
//! for bit (nodes, order, cost, reason), on clusters built by arbitrary commits, progress
//! reports and releases.

use super::placement::{choose, Candidate};
use super::*;
use crate::cluster::{Cluster, KeptShares, SHARE_EPS};
use crate::history::{self, node, secs, Op, Rate};
use crate::pricing::{cost_at, libra_rate, libraplus_rate, putil};
use proptest::prelude::*;

/// A node's load and eq. (6) from its entries in full (`NodeEntry`), as admission computed them
/// before it read shares through `Cluster::node_shares`.
fn load_and_res_free(cluster: &Cluster, j: usize, estimate: f64, window: f64, now: f64) -> (f64, f64, f64) {
    let res_max = cluster.node(j).spec.cpus * window.max(0.0);
    let (mut load, mut committed) = (0.0, 0.0);
    for c in cluster.node_entries(j) {
        let req = c.share(now);
        let rem = c.remaining_estimate(now);
        load += req;
        committed += if rem > 0.0 && c.deadline_abs > now { rem.min(req * window) } else { req * window };
    }
    (load, res_max, res_max - committed - estimate.max(0.0))
}

/// `Cluster::node_load` from the entries in full.
fn node_load(cluster: &Cluster, j: usize, now: f64) -> f64 {
    cluster.node_entries(j).map(|e| e.share(now)).sum()
}

/// Libra+$ as it was: every node with the resources, its full load and eq. (6), then `choose`.
fn libraplus_direct(p: &LibraPlus, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
    let procs = spec.procs() as usize;
    let res = nodes_with_resources(spec, cluster);
    if procs == 0 || res.len() < procs {
        return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
    }
    let (e, d) = (spec.estimate(), spec.deadline());
    let share = new_job_share(e, d);
    let priced: Vec<Candidate> = res
        .iter()
        .filter_map(|&j| {
            let n = &cluster.node(j).spec;
            if share > n.job_cap(spec.cpus_per_task()) + SHARE_EPS {
                return None;
            }
            let (load, res_max, res_free) = load_and_res_free(cluster, j, e, d, now);
            if load + share > n.cpus + SHARE_EPS {
                return None;
            }
            let rate = libraplus_rate(&p.pricing, n.price_base, putil(res_max, res_free, n.price_base));
            Some(Candidate { node: j, res_free, load: load + share, rate, cost: cost_at(e, rate) })
        })
        .collect();
    if priced.len() < procs {
        return Decision::Reject { reason: RejectReason::Deadline, suggestion: None };
    }
    match choose(&priced, procs, spec.budget(), p.placement, Placement::BestFit) {
        Some((nodes, cost)) => Decision::Accept { nodes, share, cost },
        None => Decision::Reject { reason: RejectReason::Budget, suggestion: None },
    }
}

/// Every node that accepts the job under Libra's share test, from its full `node_load`.
fn libra_accepting_direct(p: &Libra, spec: &JobSpec, cluster: &Cluster, now: f64) -> Vec<Candidate> {
    let (e, d) = (spec.estimate(), spec.deadline());
    let cost = cost_at(e, libra_rate(&p.pricing, d));
    let share = new_job_share(e, d);
    nodes_with_resources(spec, cluster)
        .iter()
        .filter_map(|&j| {
            let n = &cluster.node(j).spec;
            if share > n.job_cap(spec.cpus_per_task()) + SHARE_EPS {
                return None;
            }
            let load = node_load(cluster, j, now) + share;
            if load > n.cpus + SHARE_EPS {
                return None;
            }
            let res_free = match p.placement {
                Placement::BestFit => load_and_res_free(cluster, j, e, d, now).2,
                _ => 0.0,
            };
            Some(Candidate { node: j, res_free, load, rate: libra_rate(&p.pricing, d), cost })
        })
        .collect()
}

/// Libra as it was: the budget formula, then every node's full `node_load`, then `choose`.
fn libra_direct(p: &Libra, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
    let procs = spec.procs() as usize;
    let res = nodes_with_resources(spec, cluster);
    if procs == 0 || res.len() < procs {
        return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
    }
    let (e, d) = (spec.estimate(), spec.deadline());
    let cost = cost_at(e, libra_rate(&p.pricing, d));
    if cost.is_none_or(|c| c > spec.budget()) {
        return Decision::Reject { reason: RejectReason::Budget, suggestion: None };
    }
    let share = new_job_share(e, d);
    match choose(
        &libra_accepting_direct(p, spec, cluster, now),
        procs,
        spec.budget(),
        p.placement,
        Placement::LeastLoaded,
    ) {
        Some((nodes, cost)) => Decision::Accept { nodes, share, cost },
        None => Decision::Reject { reason: RejectReason::Deadline, suggestion: None },
    }
}

/// Libra's least budget as it was: its cost formula, when at least `procs` nodes accept the job.
fn libra_least_budget_direct(p: &Libra, spec: &JobSpec, cluster: &Cluster, now: f64) -> Option<Money> {
    let procs = spec.procs() as usize;
    if procs == 0 || libra_accepting_direct(p, spec, cluster, now).len() < procs {
        return None;
    }
    cost_at(spec.estimate(), libra_rate(&p.pricing, spec.deadline()))
}

/// Drops the suggestion, which the direct versions do not compute.
fn bare(d: Decision) -> Decision {
    match d {
        Decision::Reject { reason, .. } => Decision::Reject { reason, suggestion: None },
        other => other,
    }
}

/// Commits, releases, and progress at an absolute rate or (a third of the time) at a multiple of
/// the job's share at the instant: below, at and above it, the cases the node's load lower
/// bound treats apart.
fn op() -> impl Strategy<Value = Op> {
    op_over(6, 16, 4)
}

/// `op` on the first `nodes` nodes, with job ids below `jobs` and at most `span - 1` nodes a job.
/// Some jobs have no estimate: they owe a share of exactly +0, so a busy node's load can be 0
/// and tie an idle node's (least loaded then breaks the tie by index).
fn op_over(nodes: usize, jobs: u64, span: usize) -> impl Strategy<Value = Op> {
    let estimate = prop_oneof![7 => secs(1.0, 400.0), 1 => Just(0.0)];
    prop_oneof![
        3 => (0u64..jobs, proptest::collection::vec(0usize..nodes, 1..span), estimate, secs(90.0, 800.0), 1u32..3)
            .prop_map(|(job, nodes, estimate, deadline, cpt)| Op::Commit { job, nodes, estimate, deadline, cpt }),
        2 => (0u64..jobs, secs(0.0, 500.0), prop_oneof![
                2 => prop_oneof![Just(0.0), Just(0.5), 0.0f64..1.5].prop_map(Rate::Absolute),
                1 => prop_oneof![Just(0.5), Just(1.0), Just(1.25), Just(20.0)].prop_map(Rate::OfShare),
             ])
            .prop_map(|(job, cpu, rate)| Op::Progress { job, cpu, rate }),
        1 => (0u64..jobs).prop_map(|job| Op::Release { job }),
    ]
}

/// Jobs piled on the first two nodes (best fit's way), small enough that a hundred fit, most of
/// them still and before their deadlines: commits, reports at rate 0 (some past the estimate),
/// a few at a rate (the node then moving), and releases.
fn piled_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u64..400, proptest::collection::vec(0usize..2, 1..3), prop_oneof![secs(1.0, 20.0), 0.1f64..5.0], secs(400.0, 5000.0), 1u32..3)
            .prop_map(|(job, nodes, estimate, deadline, cpt)| Op::Commit { job, nodes, estimate, deadline, cpt }),
        3 => (0u64..400, prop_oneof![0.0f64..50.0, secs(0.0, 500.0)])
            .prop_map(|(job, cpu)| Op::Progress { job, cpu, rate: Rate::Absolute(0.0) }),
        1 => (0u64..400, 0.0f64..1.5).prop_map(|(job, r)| Op::Progress { job, cpu: 1.0, rate: Rate::Absolute(r) }),
        1 => (0u64..400).prop_map(|job| Op::Release { job }),
    ]
}

/// `op_over` on two nodes, mostly commits and reports at rate 0: nodes whose jobs are all still.
fn still_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..48, proptest::collection::vec(0usize..2, 1..3), secs(1.0, 400.0), secs(20.0, 800.0), 1u32..3)
            .prop_map(|(job, nodes, estimate, deadline, cpt)| Op::Commit { job, nodes, estimate, deadline, cpt }),
        3 => (0u64..48, prop_oneof![secs(0.0, 500.0), Just(1e4)])
            .prop_map(|(job, cpu)| Op::Progress { job, cpu, rate: Rate::Absolute(0.0) }),
        1 => (0u64..48, 0.0f64..1.5).prop_map(|(job, r)| Op::Progress { job, cpu: 1.0, rate: Rate::Absolute(r) }),
        1 => (0u64..48).prop_map(|job| Op::Release { job }),
    ]
}

/// Nodes of mixed sizes and prices (the history's steps touch the first six; any more stay
/// idle), and the history applied one step a second.
fn build(cpus: &[u8], ops: &[Op]) -> (Cluster, f64) {
    build_priced(cpus, 3, ops)
}

/// `build` with base prices from the first `prices` (1 to 3) of three, so that a cluster can
/// have as few (capacity, price) kinds as one.
fn build_priced(cpus: &[u8], prices: usize, ops: &[Op]) -> (Cluster, f64) {
    let nodes: Vec<_> = cpus
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            node(i, [0.5, 1.0, 2.0, 4.0][usize::from(k)], [0.8, 1.0, 1.25][i % prices.clamp(1, 3)])
        })
        .collect();
    history::build(&nodes, ops, 0.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Same decision as the direct computation, under every placement, for jobs of one or
    /// several nodes, tight or loose deadlines and budgets, at the history's end and later
    /// (when progress at the assumed rates has overrun some estimates and passed some deadlines).
    ///
    /// Up to eight more nodes stay idle, of the same few sizes and prices, so that idle nodes of
    /// one kind tie and more of a kind can take a job than it asks for; and any node may be
    /// down or drained, so that the nodes with the resources are fewer or more than `procs`.
    /// Half the clusters have one or two sizes and one or two prices, so that every kind of
    /// idle node can be exhausted and the pass stop reading them.
    #[test]
    fn one_pass_admission_decides_as_the_direct_computation(
        cpus in proptest::collection::vec(0u8..4, 6..14),
        few_kinds in proptest::option::of((0u8..4, 0u8..4, 1usize..3)),
        ops in proptest::collection::vec(op(), 0..60),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0],
        estimate in secs(1.0, 300.0),
        deadline in secs(1.0, 600.0),
        budget in 0i64..100_000,
        procs in 1u32..6,
        cpt in 1u32..3,
        placement in 0usize..3,
        off in proptest::collection::vec(0u8..8, 14),
    ) {
        let (mut c, end) = match few_kinds {
            // Sizes from two values (often one) and one or two prices.
            Some((a, b, prices)) => {
                let two: Vec<u8> = cpus.iter().map(|&k| if k % 2 == 0 { a } else { b }).collect();
                build_priced(&two, prices, &ops)
            }
            None => build(&cpus, &ops),
        };
        for (n, &o) in off.iter().enumerate().take(c.node_count()) {
            match o {
                0 => c.set_up(n, false),
                1 => c.set_accepting(n, false),
                _ => {}
            }
        }
        let now = end + later;
        let spec = JobSpec::simple(estimate, deadline, Money(budget)).with_procs(procs).with_cpus_per_task(cpt);
        let placement = Placement::ALL[placement];
        let pricing = PricingParams::default();
        let lp = LibraPlus::with_placement(pricing, placement);
        let direct = libraplus_direct(&lp, &spec, &c, now);
        prop_assert_eq!(&bare(lp.decide(&spec, &c, now)), &direct);
        prop_assert_eq!(&lp.decide_only(&spec, None, &c, now), &direct);
        let judging = lp.clone().judging_every_cluster();
        prop_assert_eq!(&bare(judging.decide(&spec, &c, now)), &direct);
        prop_assert_eq!(&judging.decide_only(&spec, None, &c, now), &direct);
        let l = Libra::with_placement(pricing, placement);
        let direct = libra_direct(&l, &spec, &c, now);
        prop_assert_eq!(&bare(l.decide(&spec, &c, now)), &direct);
        prop_assert_eq!(&l.decide_only(&spec, None, &c, now), &direct);
    }

    /// The same on 24 to 160 busy nodes, with jobs of up to 12 nodes: enough nodes that `libra`'s
    /// pass holds some back while it asks for their memory (`Ahead`, 16 at a time) and reads
    /// them later against a lower bar, and that both passes screen several words of 64 nodes
    /// (the last one partly filled) against the bar as each word begins.
    #[test]
    fn one_pass_admission_decides_as_the_direct_computation_on_many_nodes(
        cpus in proptest::collection::vec(0u8..4, 24..160),
        ops in proptest::collection::vec(op_over(160, 160, 9), 0..400),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0],
        estimate in secs(1.0, 300.0),
        deadline in secs(1.0, 600.0),
        budget in 0i64..100_000,
        procs in 1u32..12,
        placement in 0usize..3,
        bar in prop_oneof![Just(0.5), Just(1.0), 0.0f64..4.0],
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        let spec = JobSpec::simple(estimate, deadline, Money(budget)).with_procs(procs);
        let placement = Placement::ALL[placement];
        let pricing = PricingParams::default();
        let l = Libra::with_placement(pricing, placement);
        let direct = libra_direct(&l, &spec, &c, now);
        prop_assert_eq!(&l.decide_only(&spec, None, &c, now), &direct);
        // Without the bar: every accepting node counted.
        prop_assert_eq!(l.least_budget(&spec, None, &c, now), libra_least_budget_direct(&l, &spec, &c, now));
        let lp = LibraPlus::with_placement(pricing, placement);
        let direct = libraplus_direct(&lp, &spec, &c, now);
        prop_assert_eq!(&lp.decide_only(&spec, None, &c, now), &direct);
        // Busy nodes in three stripes, dealt one-word chunks in turn (`Split::EVERY_CLUSTER`),
        // so that every stripe reads some and what each keeps must be merged.
        prop_assert_eq!(&lp.clone().judging_every_cluster().decide_only(&spec, None, &c, now), &direct);
        // The screens compiled for AVX2 (where the processor has it) pass the same nodes:
        // `libra`'s against no bar, the bars its pass meets (loads and the shares beside
        // them), and a tie.
        prop_assert!(lp.screens_agree(&spec, &c, now));
        for bar in [f64::INFINITY, bar, bar + spec.estimate() / spec.deadline(), 0.0] {
            prop_assert!(Libra::screens_agree(&spec, &c, now, bar), "bar {}", bar);
        }
    }

    /// The shares admission reads (`node_shares`: 16 bytes a job on a node whose jobs are all
    /// at rate 0, 40 otherwise, and a job's cap and admitted share only off the common case)
    /// are the entries' own `NodeEntry::share`, bit for bit, with the same work left and
    /// deadline; `node_load` is their sum and eq. (6) is as computed from the entries in full.
    /// At the history's end and later (overruns, passed deadlines, shares above a job's cap on
    /// small nodes), after nodes went from all still to moving and back, and emptied.
    #[test]
    fn node_shares_are_the_entries_shares_to_the_bit(
        cpus in proptest::collection::vec(0u8..4, 6),
        ops in proptest::collection::vec(op(), 0..60),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0, 1e3f64..1e6],
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        for n in 0..c.node_count() {
            let fast: Vec<(u64, f64, u64)> =
                c.node_shares(n, now).map(|e| (e.share.to_bits(), e.remaining, e.deadline_abs.to_bits())).collect();
            let full: Vec<(u64, f64, u64)> = c
                .node_entries(n)
                .map(|e| (e.share(now).to_bits(), e.remaining_estimate(now), e.deadline_abs.to_bits()))
                .collect();
            prop_assert_eq!(&fast, &full);
            let by_job: Vec<(u64, u64)> = c.node_job_shares(n, now).map(|(j, s)| (j, s.to_bits())).collect();
            let full_by_job: Vec<(u64, u64)> = c.node_entries(n).map(|e| (e.job, e.share(now).to_bits())).collect();
            prop_assert_eq!(by_job, full_by_job);
            prop_assert_eq!(c.node_load(n, now).to_bits(), node_load(&c, n, now).to_bits());
            let (e, w) = (100.0, 600.0);
            let (load, res_max, res_free) = load_and_res_free(&c, n, e, w, now);
            let fast = LibraPlus::load_and_res_free(&c, n, e, w, now);
            prop_assert_eq!((load.to_bits(), res_max.to_bits(), res_free.to_bits()), (fast.0.to_bits(), fast.1.to_bits(), fast.2.to_bits()));
        }
    }

    /// What lets `libra+$` pass over a node without reading its jobs: the RESFree its
    /// side-by-side bytes give is at least the node's own (eq. 6 from its entries in full), and
    /// the least RESFree within budget is exact: every RESFree from it on is within budget at
    /// the node's capacity and base price, and none below it. At the history's end and later
    /// (overruns, passed deadlines, jobs near their deadline), on nodes of every size and price,
    /// for tight and loose windows and budgets.
    #[test]
    fn the_bytes_bound_resfree_and_the_budget_bar_is_exact(
        cpus in proptest::collection::vec(0u8..4, 6),
        ops in proptest::collection::vec(op(), 0..60),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0],
        estimate in prop_oneof![4 => secs(1.0, 300.0), 1 => Just(0.0)],
        deadline in prop_oneof![secs(1.0, 600.0), secs(600.0, 100_000.0)],
        budget in 0i64..100_000,
        probe in proptest::collection::vec(prop_oneof![0.0f64..1.0, 0.0f64..1e4, 0.0f64..1e7], 8),
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        let lp = LibraPlus::new(PricingParams::default());
        let clock = c.bound_clock(now);
        for n in 0..c.node_count() {
            let (_, res_max, res_free) = load_and_res_free(&c, n, estimate, deadline, now);
            let hot = c.node_hot(n);
            if let Some(upper) = LibraPlus::res_free_upper_bound(&hot, estimate, deadline, clock, now) {
                prop_assert!(upper >= res_free, "node {}: bound {} below RESFree {}", n, upper, res_free);
            }
            let spec = &c.node(n).spec;
            let bar = lp.least_res_free_within(spec.cpus, spec.price_base, estimate, deadline, Money(budget));
            let bar = bar.expect("default pricing is monotonic");
            let within = |x: f64| {
                let rate = libraplus_rate(&lp.pricing, spec.price_base, putil(res_max, x, spec.price_base));
                cost_at(estimate, rate).is_some_and(|m| m <= Money(budget))
            };
            if bar.is_finite() {
                prop_assert!(within(bar));
                prop_assert!(!within(bar.next_down()));
            } else if bar > 0.0 {
                prop_assert!(!within(f64::MAX));
            } else {
                prop_assert!(within(f64::MIN));
            }
            for &x in probe.iter().chain([res_free, res_free.next_up(), res_free.next_down()].iter()) {
                prop_assert_eq!(within(x), x >= bar, "RESFree {} against the bar {}", x, bar);
            }
        }
    }

    /// `Cluster::node_sums` (the load and eq. 6's committed work that `libra+$` reads a node
    /// for, in blocks of four on a node whose jobs are all still: the server's nodes) is the
    /// entry-by-entry sum over the entries in full, bit for bit, and `None` exactly when the
    /// full load refuses, whichever way the processor takes (AVX2 or portable). Two nodes with
    /// up to 48 jobs between them, most reported at rate 0 (some past their estimate or
    /// deadline, some above their cap on a small node, so that blocks mix the common case and
    /// the full computation) and a few at a rate (the node then reads its entries in full).
    #[test]
    fn node_sums_in_blocks_are_the_entries_summed_to_the_bit(
        cpus in proptest::collection::vec(0u8..4, 2),
        ops in proptest::collection::vec(still_op(), 0..160),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0, 1e3f64..1e6],
        window in secs(1.0, 100_000.0),
        load0 in prop_oneof![Just(0.0), Just(-0.0)],
        extra in 0.0f64..2.0,
        limit in prop_oneof![Just(f64::INFINITY), 0.0f64..8.0],
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        for n in 0..c.node_count() {
            let (mut load, mut committed) = (load0, 0.0);
            for e in c.node_entries(n) {
                let (req, rem) = (e.share(now), e.remaining_estimate(now));
                load += req;
                committed += if rem > 0.0 && e.deadline_abs > now { rem.min(req * window) } else { req * window };
            }
            let refuse = |load: f64| load + extra > limit;
            let expect = (!refuse(load)).then_some((load.to_bits(), committed.to_bits()));
            let term = |e: &crate::cluster::EntryShare| LibraPlus::committed(e, window, now);
            for got in c.node_sums_each_way(n, now, load0, term, refuse) {
                prop_assert_eq!(got.map(|(l, w)| (l.to_bits(), w.to_bits())), expect);
            }
        }
    }

    /// Each job's share and term kept once a pass (`KeptPass::node_sums`, computed on the
    /// first node a job is read on and taken from there on the others it spans) give every
    /// node `node_sums`'s answer, bit for bit: nodes read in any order and more than once, jobs
    /// of one to three nodes reported at a rate (the nodes that keep values) or at none, passes
    /// at one instant with different windows (each started: nothing of the other's is taken),
    /// a limit that stops some reads early (so that a job read on one node is not always kept),
    /// and passes at two instants with the same window (nothing of the first's is taken).
    #[test]
    fn kept_shares_give_each_node_its_own_sums_to_the_bit(
        cpus in proptest::collection::vec(0u8..4, 6),
        ops in proptest::collection::vec(op(), 0..80),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0],
        windows in proptest::collection::vec(secs(1.0, 100_000.0), 1..4),
        order in proptest::collection::vec(0usize..6, 0..16),
        limit in prop_oneof![Just(f64::INFINITY), 0.0f64..4.0],
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        let bits = |r: Option<(f64, f64)>| r.map(|(l, w)| (l.to_bits(), w.to_bits()));
        let refuse = |load: f64| load > limit;
        let mut kept = KeptShares::default();
        for &window in &windows {
            for at in [now, now + 7.0] {
                let term = |e: &crate::cluster::EntryShare| LibraPlus::committed(e, window, at);
                let mut pass = kept.pass(&c, at, term);
                for n in order.iter().copied().chain(0..c.node_count()) {
                    let got = pass.node_sums(n, 0.0, refuse);
                    prop_assert_eq!(bits(got), bits(c.node_sums(n, at, 0.0, term, refuse)), "node {} at {}", n, at);
                }
            }
        }
    }

    /// A job's share from its slot (`Cluster::share_in`, what job control asks once per job) is
    /// the share each of its nodes computes for it (`node_job_shares`), bit for bit, at the
    /// history's end and later (overruns, passed deadlines, caps); a slot asked for another
    /// job answers `None`.
    #[test]
    fn a_jobs_share_from_its_slot_is_each_of_its_nodes_share_to_the_bit(
        cpus in proptest::collection::vec(0u8..4, 6),
        ops in proptest::collection::vec(op(), 0..80),
        later in prop_oneof![Just(0.0), 0.0f64..1000.0, 1e3f64..1e6],
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        for n in 0..c.node_count() {
            for (job, share) in c.node_job_shares(n, now) {
                let slot = c.slot_of(job).expect("a job on a node has a slot");
                prop_assert_eq!(c.share_in(slot, job, now).map(f64::to_bits), Some(share.to_bits()));
                prop_assert_eq!(c.share_in(slot, job + 1000, now), None);
            }
        }
    }

    /// `libra+$` judging nodes of many still jobs from their totals (`LibraPlus::unread`,
    /// `Chooser::finish_with_unread`) decides as the direct computation: the same nodes in the
    /// same order, the same cost, the same reason. Jobs piled on two nodes of four to ten, for
    /// windows shorter and longer than the jobs' deadlines, budgets below, around and above the
    /// cost, and one to three nodes a job; judged from one job on (the test setting) and from
    /// 256 (the production one).
    #[test]
    fn nodes_judged_from_their_totals_decide_as_the_direct_computation(
        cpus in proptest::collection::vec(0u8..4, 4..10),
        ops in proptest::collection::vec(piled_op(), 0..400),
        later in prop_oneof![3 => Just(0.0), 1 => 0.0f64..1000.0],
        estimate in prop_oneof![4 => secs(1.0, 300.0), 1 => Just(0.0)],
        deadline in prop_oneof![secs(1.0, 600.0), secs(6000.0, 100_000.0)],
        budget in prop_oneof![0i64..100_000, 0i64..2_000],
        procs in 1u32..4,
        clean in any::<bool>(),
    ) {
        // Half the histories clean: no job at a rate and none past its estimate, so that the
        // piled nodes give bounds (any one such job, and the node is read).
        let ops: Vec<Op> = ops
            .into_iter()
            .map(|op| match op {
                Op::Progress { job, cpu, .. } if clean => Op::Progress { job, cpu: cpu.min(0.05), rate: Rate::Absolute(0.0) },
                op => op,
            })
            .collect();
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        let spec = JobSpec::simple(estimate, deadline, Money(budget)).with_procs(procs);
        let lp = LibraPlus::new(PricingParams::default());
        let direct = libraplus_direct(&lp, &spec, &c, now);
        prop_assert_eq!(&lp.clone().judging_every_cluster().decide_only(&spec, None, &c, now), &direct);
        prop_assert_eq!(&lp.decide_only(&spec, None, &c, now), &direct);
        prop_assert_eq!(&bare(lp.decide(&spec, &c, now)), &direct);
    }

    /// What `LibraPlus::unread` claims of a node from its totals holds of the node read in
    /// full (`unread_claims_hold`), on the piled nodes of a history.
    #[test]
    fn the_totals_bound_what_reading_the_node_gives(
        cpus in proptest::collection::vec(0u8..4, 2),
        ops in proptest::collection::vec(piled_op(), 0..400),
        later in prop_oneof![3 => Just(0.0), 1 => 0.0f64..1000.0],
        estimate in prop_oneof![4 => secs(1.0, 300.0), 1 => Just(0.0)],
        deadline in prop_oneof![secs(1.0, 600.0), secs(6000.0, 100_000.0)],
    ) {
        // Every report at rate 0 and within the estimate, so that the nodes give bounds.
        let ops: Vec<Op> = ops
            .into_iter()
            .map(|op| match op {
                Op::Progress { job, cpu, .. } => Op::Progress { job, cpu: cpu.min(0.05), rate: Rate::Absolute(0.0) },
                op => op,
            })
            .collect();
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        let share = new_job_share(estimate, deadline);
        for n in 0..c.node_count() {
            unread_claims_hold(&c, n, estimate, deadline, share, now)?;
        }
    }

    /// The same on a node whose jobs share one deadline, where the bound on its load is tight:
    /// for the job's own share and for one that leaves the node within a hair of full; and for
    /// jobs of months (each one's work left then on the totals' grid, their float sum rounding).
    #[test]
    fn the_totals_bound_what_reading_the_node_gives_when_the_deadlines_meet(
        cpus in 0u8..4,
        jobs in proptest::collection::vec((0.1f64..20.0, 0.0f64..0.1), 1..300),
        last in 400u32..5000,
        later in 0u32..300,
        estimate in prop_oneof![4 => secs(1.0, 300.0), 1 => Just(0.0)],
        window in 1.0f64..4.0,
        long in any::<bool>(),
        squeeze in prop_oneof![Just(None), (-1e-6f64..1e-6).prop_map(Some)],
    ) {
        // Whole seconds, so that the deadline is its own `f32` (`NodeHot::first_deadline`) and
        // the bound on the load is as tight as the sums are: the jobs' time left is one float.
        let (last, later) = (f64::from(last), f64::from(later));
        let scale = if long { 65_536.37 } else { 1.0 };
        let mut c = Cluster::new();
        c.add_node(node(0, [0.5, 1.0, 2.0, 4.0][usize::from(cpus)], 1.0));
        for (job, &(e, cpu)) in jobs.iter().enumerate() {
            let spec = JobSpec::simple(e * scale, last * scale, Money(0));
            let _ = c.commit_spec(job as u64, &spec, 0.0, &[0], 0.0);
            let _ = c.set_progress(job as u64, cpu.min(e) * scale, 0.0, 1.0);
        }
        let now = (1.0 + later) * scale;
        let (estimate, deadline) = (estimate * scale, last * scale * window);
        let load = LibraPlus::load_and_res_free(&c, 0, estimate, deadline, now).0;
        let share = match squeeze {
            None => new_job_share(estimate, deadline),
            Some(q) => ((c.node(0).spec.cpus + SHARE_EPS - load) + load * q).max(0.0),
        };
        unread_claims_hold(&c, 0, estimate, deadline, share, now)?;
    }

    /// The early-exit load is `node_load + extra` bit for bit when within the limit (and below
    /// the bar), and `None` exactly when the full sum is above the limit (or at the bar).
    #[test]
    fn node_load_within_is_node_load(
        cpus in proptest::collection::vec(0u8..4, 6),
        ops in proptest::collection::vec(op(), 0..60),
        later in 0.0f64..1000.0,
        extra in 0.0f64..2.0,
        limit in 0.0f64..5.0,
        bar in 0.0f64..5.0,
    ) {
        let (c, end) = build(&cpus, &ops);
        let now = end + later;
        for n in 0..c.node_count() {
            let full = c.node_load(n, now) + extra;
            let expect = (full <= limit).then_some(full.to_bits());
            prop_assert_eq!(c.node_load_plus_within(n, now, extra, limit).map(f64::to_bits), expect);
            let expect = (full <= limit && full < bar).then_some(full.to_bits());
            prop_assert_eq!(c.node_load_plus_below(n, now, extra, limit, bar).map(f64::to_bits), expect);
        }
    }
}

/// What `LibraPlus::unread` claims of node `n` for a job of `estimate`, window `deadline` and
/// `share` holds of the node read in full: the job passes the deadline check there, its RESFree
/// (eq. 6) is within the bounds, and its cost between the costs at the bounds.
fn unread_claims_hold(
    c: &Cluster,
    n: usize,
    estimate: f64,
    deadline: f64,
    share: f64,
    now: f64,
) -> Result<(), TestCaseError> {
    let lp = LibraPlus::new(PricingParams::default());
    let spec = JobSpec::simple(estimate, deadline, Money(0));
    let Some(u) = lp.unread(&spec, share, deadline, n, c, now) else { return Ok(()) };
    let (load, res_max, res_free) = load_and_res_free(c, n, estimate, deadline, now);
    let nspec = &c.node(n).spec;
    prop_assert!(load + share <= nspec.cpus + SHARE_EPS, "load {} + {} over {}", load, share, nspec.cpus);
    prop_assert!(u.res_free_down <= res_free && res_free <= u.res_free_up, "{} not in {:?}", res_free, u);
    let rate = libraplus_rate(&lp.pricing, nspec.price_base, putil(res_max, res_free, nspec.price_base));
    let cost = cost_at(estimate, rate);
    let order = |m: Option<Money>| m.map_or(i64::MAX, |m| m.0);
    prop_assert!(
        order(u.cost_at_up) <= order(cost) && order(cost) <= order(u.cost_at_down),
        "{:?} not within {:?}",
        cost,
        u
    );
    Ok(())
}

/// Best fit piling jobs on one node of a large cluster, as the server's benchmark does: each
/// arrival is decided from the node's totals without reading its jobs, and as the direct
/// computation decides it, until a window shorter than the jobs' deadlines makes it read them.
#[test]
fn a_node_of_many_jobs_is_decided_from_its_totals() {
    let mut c = Cluster::new();
    for i in 0..200 {
        c.add_node(node(i, 1.0, 1.0));
    }
    let lp = LibraPlus::new(PricingParams::default());
    let spec = JobSpec::simple(1.0, 1e6, Money::from_credits(100));
    let mut now = 0.0;
    let before = super::libraplus::UNREAD.with(|u| u.get());
    for job in 0..600u64 {
        now += 0.25;
        let d = lp.decide(&spec, &c, now);
        assert_eq!(d, libraplus_direct(&lp, &spec, &c, now), "arrival {job}");
        let Decision::Accept { nodes, .. } = d else { panic!("arrival {job}: {d:?}") };
        assert_eq!(nodes, vec![0], "best fit piles every job on the first node");
        c.commit_spec(job, &spec, now, &nodes, now).unwrap();
    }
    let (settled, read) = super::libraplus::UNREAD.with(|u| u.get());
    // From the 257th job on, node 0 is judged from its totals, and they settle every arrival.
    assert_eq!((settled - before.0, read - before.1), (600 - 256, 0));
    // A window that ends before the node's jobs' deadlines: eq. (6) counts part of their work,
    // which the totals do not give, so the node is read.
    let short = JobSpec::simple(1.0, 1e5, Money::from_credits(100));
    assert_eq!(lp.decide(&short, &c, now), libraplus_direct(&lp, &short, &c, now));
    assert_eq!(super::libraplus::UNREAD.with(|u| u.get()), (settled, read));
}
