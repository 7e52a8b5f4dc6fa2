use super::*;
use libra_core::metrics::DEADLINE_EPS;
use libra_core::policy::Decision;
use libra_core::policy::{Backfill, BackfillOrder, Fifo, Libra, LibraEdf};
use libra_core::pricing::PricingKind;
use libra_core::PricingParams;
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn job(id: u64, submit: f64, runtime: f64, deadline: f64, procs: u32) -> SimJob {
    SimJob {
        id,
        submit,
        runtime,
        estimate: runtime,
        procs,
        deadline,
        budget: Money::from_credits(1_000_000),
        user: 1,
        urgent: false,
    }
}

fn one_node() -> ClusterConfig {
    ClusterConfig { nodes: 1, price_base: 1.0 }
}

#[test]
fn proportional_share_by_hand() {
    // Both need half the node; J2 finishes at 100 s, then J1 has the node to itself.
    let jobs = vec![job(1, 0.0, 100.0, 200.0, 1), job(2, 0.0, 50.0, 100.0, 1)];
    let r = simulate(&jobs, &Libra::new(PricingParams::default()), one_node());
    assert_eq!(r.records[1].outcome.finish, Some(100.0));
    assert!((r.records[0].outcome.finish.unwrap() - 150.0).abs() < 1e-9);
    assert_eq!(r.metrics.qos_satisfied, 2);
}

#[test]
fn work_conserving_and_job_control() {
    // J1 alone runs at full speed, so by t=50 it needs only 50/150 of the node; J2 then needs 0.6:
    // accepted only because job control uses the progress made.
    let jobs = vec![job(1, 0.0, 100.0, 200.0, 1), job(2, 50.0, 60.0, 100.0, 1)];
    let r = simulate(&jobs, &Libra::new(PricingParams::default()), one_node());
    assert!(r.records.iter().all(|x| x.verdict == Verdict::Accepted), "{r:?}");
    for x in &r.records {
        assert!(x.outcome.met_deadline());
    }
}

#[test]
fn rejects_when_the_node_is_full() {
    let jobs = vec![job(1, 0.0, 80.0, 100.0, 1), job(2, 0.0, 30.0, 100.0, 1)];
    let r = simulate(&jobs, &Libra::new(PricingParams::default()), one_node());
    assert_eq!(r.records[1].verdict, Verdict::Rejected(libra_core::RejectReason::Deadline));
}

#[test]
fn fifo_runs_in_order_and_misses_deadlines() {
    let jobs = vec![job(1, 0.0, 100.0, 100.0, 1), job(2, 1.0, 10.0, 50.0, 1)];
    let r = simulate(&jobs, &Fifo, one_node());
    assert_eq!(r.records[1].outcome.start, Some(100.0));
    assert_eq!(r.records[1].outcome.finish, Some(110.0));
    assert!(!r.records[1].outcome.met_deadline());
    assert_eq!(r.metrics.completed_in_time, 1);
}

#[test]
fn edf_backfill_drops_hopeless_jobs() {
    let jobs = vec![job(1, 0.0, 100.0, 100.0, 1), job(2, 1.0, 10.0, 50.0, 1), job(3, 2.0, 10.0, 500.0, 1)];
    let r = simulate(&jobs, &Backfill::new(BackfillOrder::Edf), one_node());
    assert_eq!(r.records[1].verdict, Verdict::Dropped);
    assert_eq!(r.records[2].outcome.start, Some(100.0));
    assert_eq!(r.metrics.qos_satisfied, 2);
}

#[test]
fn parallel_job_runs_at_its_slowest_node() {
    // Node 0 is shared half and half; the 2-node job gets 0.5 there and so 0.5 overall.
    let jobs = vec![job(1, 0.0, 100.0, 200.0, 1), job(2, 0.0, 50.0, 100.0, 2)];
    let r =
        simulate(&jobs, &Libra::new(PricingParams::default()), ClusterConfig { nodes: 2, price_base: 1.0 });
    assert_eq!(r.records[0].nodes, vec![0]);
    let f2 = r.records[1].outcome.finish.unwrap();
    assert!((f2 - 100.0).abs() < 1e-9, "{f2}");
}

/// The policy as the reference model runs it beside the fast engine: its own decision at every
/// arrival, except where the fast engine put the job on other nodes that are interchangeable with
/// the policy's choice (each holds exactly the same jobs as one the policy chose). Such nodes tie
/// in exact arithmetic, and which one is a hair less loaded in floats depends on the order in
/// which the engine accumulated progress, which the two engines do differently (the reference
/// brings every job up to date at every event). Following the fast engine there keeps the two
/// schedules comparable; any other difference in nodes, and every difference in verdict, still
/// fails the comparison.
struct FollowTies<'a> {
    inner: &'a dyn Policy,
    fast: &'a [JobRecord],
    /// The index of the next arrival: the reference decides each job once, in order.
    next: AtomicUsize,
}

impl<'a> FollowTies<'a> {
    fn new(inner: &'a dyn Policy, fast: &'a [JobRecord]) -> Self {
        FollowTies { inner, fast, next: AtomicUsize::new(0) }
    }

    /// Whether `theirs` is `ours` with some nodes swapped for nodes holding the same jobs.
    fn interchangeable(cluster: &libra_core::Cluster, ours: &[NodeIdx], theirs: &[NodeIdx]) -> bool {
        let jobs_on = |n: NodeIdx| {
            let mut v: Vec<u64> = cluster.node_entries(n).map(|e| e.job).collect();
            v.sort_unstable();
            v
        };
        let mut pool: Vec<NodeIdx> = theirs.iter().copied().filter(|n| !ours.contains(n)).collect();
        for &n in ours.iter().filter(|n| !theirs.contains(n)) {
            let held = jobs_on(n);
            match pool.iter().position(|&m| jobs_on(m) == held) {
                Some(at) => {
                    pool.swap_remove(at);
                }
                None => return false,
            }
        }
        pool.is_empty() && ours.len() == theirs.len()
    }
}

impl Policy for FollowTies<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn decide(&self, spec: &libra_core::JobSpec, cluster: &libra_core::Cluster, now: f64) -> Decision {
        self.inner.decide(spec, cluster, now)
    }
    fn decide_only(
        &self,
        spec: &libra_core::JobSpec,
        user: Option<u64>,
        cluster: &libra_core::Cluster,
        now: f64,
    ) -> Decision {
        let own = self.inner.decide_only(spec, user, cluster, now);
        let Some(fast) = self.fast.get(self.next.fetch_add(1, Ordering::Relaxed)) else { return own };
        match own {
            Decision::Accept { nodes, share, .. }
                if fast.outcome.accepted
                    && nodes != fast.nodes
                    && Self::interchangeable(cluster, &nodes, &fast.nodes) =>
            {
                Decision::Accept { nodes: fast.nodes.clone(), share, cost: fast.outcome.cost }
            }
            other => other,
        }
    }
    fn reserved_estimate(&self, spec: &libra_core::JobSpec, user: Option<u64>) -> f64 {
        self.inner.reserved_estimate(spec, user)
    }
    fn observe(&self, user: Option<u64>, estimate: f64, runtime: f64) {
        self.inner.observe(user, estimate, runtime)
    }
    fn job_control(&self) -> libra_core::share::JobControl {
        self.inner.job_control()
    }
    fn price(
        &self,
        spec: &libra_core::JobSpec,
        user: Option<u64>,
        cluster: &libra_core::Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        self.inner.price(spec, user, cluster, node, now)
    }
}

#[test]
fn the_reference_follows_the_fast_engine_only_between_interchangeable_nodes() {
    let mut cluster = libra_core::Cluster::homogeneous(3, 1.0);
    cluster.commit(7, 10.0, 100.0, &[0, 1], 0.0).unwrap();
    cluster.commit(8, 10.0, 100.0, &[2], 0.0).unwrap();
    // Nodes 0 and 1 hold the same job; node 2 another.
    assert!(FollowTies::interchangeable(&cluster, &[0], &[1]));
    assert!(FollowTies::interchangeable(&cluster, &[2, 0], &[1, 2]));
    assert!(!FollowTies::interchangeable(&cluster, &[0], &[2]));
    assert!(!FollowTies::interchangeable(&cluster, &[0, 1], &[1, 2]));
}

/// One run of the fast engine and one of the reference model, each with its own instance of the
/// policy (the learning ones keep state), the reference following the fast engine's choices only
/// between interchangeable nodes.
fn both_engines(jobs: &[SimJob], name: &str, cfg: ClusterConfig) -> (SimResult, SimResult) {
    let policy = libra_core::build_policy(name, PricingParams::default()).unwrap();
    let fast = simulate(jobs, policy.as_ref(), cfg);
    let policy = libra_core::build_policy(name, PricingParams::default()).unwrap();
    let slow = simulate_reference(jobs, &FollowTies::new(policy.as_ref(), &fast.records), cfg);
    (fast, slow)
}

fn arb_workload() -> impl Strategy<Value = Vec<SimJob>> {
    proptest::collection::vec((0.0f64..100.0, 1.0f64..100.0, 1.0f64..6.0, 1u32..3), 1..40).prop_map(|v| {
        let mut t = 0.0;
        v.into_iter()
            .enumerate()
            .map(|(i, (gap, rt, f, p))| {
                t += gap;
                job(i as u64, t, rt, rt * f, p)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With exact estimates, every job Libra or Libra+$ accepts finishes by its deadline, and the
    /// fast engine agrees with the slow reference model on every finish time.
    #[test]
    fn accepted_jobs_meet_deadlines_and_engines_agree(jobs in arb_workload(), which in 0..4u8) {
        let cfg = ClusterConfig { nodes: 3, price_base: 1.0 };
        let name = ["libra", "libra+$", "libra-edf", "libra-risk"][which as usize];
        let (fast, slow) = both_engines(&jobs, name, cfg);
        for (a, b) in fast.records.iter().zip(&slow.records) {
            prop_assert_eq!(&a.verdict, &b.verdict);
            if a.outcome.accepted {
                let f = a.outcome.finish.unwrap();
                prop_assert!(f <= a.outcome.deadline_abs + DEADLINE_EPS, "job {} finished {} > {}", a.id, f, a.outcome.deadline_abs);
                prop_assert!(a.outcome.cost <= a.outcome.budget);
                let g = b.outcome.finish.unwrap();
                prop_assert!((f - g).abs() <= 1e-6 * f.max(1.0), "fast {} vs reference {}", f, g);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whenever Libra accepts a job, libra-edf (same pricing) accepts it too, on the same cluster
    /// state: the EDF test is implied by the sum-of-shares test.
    #[test]
    fn libra_edf_accepts_whatever_libra_accepts(jobs in arb_workload()) {
        let libra = Libra::new(PricingParams::default());
        let edf = LibraEdf::new(PricingParams::default(), PricingKind::Libra);
        // Drive the cluster with Libra's own decisions, asking libra-edf at every arrival.
        let r = simulate(&jobs, &libra, ClusterConfig { nodes: 3, price_base: 1.0 });
        let mut cluster = libra_core::Cluster::homogeneous(3, 1.0);
        for (job, rec) in jobs.iter().zip(&r.records) {
            let now = job.submit;
            let gone: Vec<u64> = cluster
                .commitments()
                .filter(|c| r.records[c.job as usize].outcome.finish.is_some_and(|f| f <= now))
                .map(|c| c.job)
                .collect();
            for g in gone {
                cluster.release(g);
            }
            let spec = super::spec_of(job);
            let l = libra.decide(&spec, &cluster, now);
            if l.is_accept() {
                prop_assert!(edf.decide(&spec, &cluster, now).is_accept(), "job {} refused by libra-edf", job.id);
            }
            if let Decision::Accept { nodes, .. } = &rec_decision(rec) {
                cluster.commit(job.id, job.estimate, now + job.deadline, nodes, now).unwrap();
            }
        }
    }
}

fn rec_decision(rec: &JobRecord) -> Decision {
    if rec.outcome.accepted {
        Decision::Accept { nodes: rec.nodes.clone(), share: 0.0, cost: Money::ZERO }
    } else {
        Decision::Queue
    }
}

/// Jobs of 1 to `max_procs` processors, a random share of them sequential, with exact estimates
/// and budgets from tight to ample (so that pricing refuses some).
fn arb_mixed_workload(max_procs: u32) -> impl Strategy<Value = Vec<SimJob>> {
    proptest::collection::vec(
        (0.0f64..60.0, 1.0f64..100.0, 1.0f64..6.0, 1u32..=max_procs, 0.5f64..8.0),
        1..40,
    )
    .prop_map(|v| {
        let mut t = 0.0;
        v.into_iter()
            .enumerate()
            .map(|(i, (gap, rt, f, p, b))| {
                t += gap;
                SimJob {
                    budget: Money::from_credits_f64_ceil(rt * b).unwrap(),
                    ..job(i as u64, t, rt, rt * f, p)
                }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The EDF policies with parallel jobs of up to 4 nodes among sequential ones (issue 14):
    /// with exact estimates every job accepted finishes by its deadline, parallel ones
    /// included (each advances at its slowest node's rate), and the fast engine agrees with the
    /// reference model.
    #[test]
    fn edf_policies_meet_every_deadline_with_parallel_jobs(jobs in arb_mixed_workload(4), which in 0..5usize) {
        let cfg = ClusterConfig { nodes: 5, price_base: 1.0 };
        let name = ["libra-edf", "libra-edf-libra", "libra-edf-flat", "libra-risk", "libra-risk-est"][which];
        let (fast, slow) = both_engines(&jobs, name, cfg);
        for (a, b) in fast.records.iter().zip(&slow.records) {
            prop_assert_eq!(&a.verdict, &b.verdict);
            if a.outcome.accepted {
                let f = a.outcome.finish.unwrap();
                prop_assert!(f <= a.outcome.deadline_abs + DEADLINE_EPS, "{} job {} ({} procs) finished {} > {}", name, a.id, a.nodes.len(), f, a.outcome.deadline_abs);
                prop_assert!(a.outcome.cost <= a.outcome.budget);
                let g = b.outcome.finish.unwrap();
                prop_assert!((f - g).abs() <= 1e-6 * f.max(1.0), "fast {} vs reference {}", f, g);
            }
        }
    }

    /// Why `libra-edf` cannot beat Libra+$ on a trace of parallel jobs alone: a parallel job must
    /// advance at one rate on all its nodes, and node-local job control can only keep that
    /// promise with the constant Algorithm 2 share; with no sequential job on a node the EDF
    /// test is then the sum-of-shares test, the pricing is the same, and so is every decision.
    #[test]
    fn libra_edf_is_libra_plus_when_every_job_is_parallel(jobs in arb_mixed_workload(4)) {
        let jobs: Vec<SimJob> = jobs.into_iter().map(|j| SimJob { procs: j.procs.max(2), ..j }).collect();
        let cfg = ClusterConfig { nodes: 5, price_base: 1.0 };
        let edf = simulate(&jobs, libra_core::build_policy("libra-edf", PricingParams::default()).unwrap().as_ref(), cfg);
        let plus = simulate(&jobs, libra_core::build_policy("libra+$", PricingParams::default()).unwrap().as_ref(), cfg);
        for (a, b) in edf.records.iter().zip(&plus.records) {
            prop_assert_eq!(&a.verdict, &b.verdict, "job {}", a.id);
            prop_assert_eq!(&a.nodes, &b.nodes, "job {}", a.id);
            prop_assert_eq!(a.outcome.cost, b.outcome.cost, "job {}", a.id);
            prop_assert_eq!(a.outcome.finish, b.outcome.finish, "job {}", a.id);
        }
    }
}

/// Why no admission test that takes more jobs now can be above Libra+$ in QoS on every workload
/// (issue 14's claim for `libra-edf`): what it takes now holds capacity that later jobs need.
/// Two nodes, each given a job due at t = 100 at share 0.6. A sequential job of 82 CPU-s due at
/// t = 200 fits by EDF (60 + 82 <= 200 on one node) but not by Libra's sum of shares
/// (0.6 + 0.41 > 1): `libra-edf` takes it, Libra+$ refuses it. At t = 61 three parallel jobs
/// arrive, each needing 0.32 of both nodes until t = 161. Libra+$ has two empty nodes (its
/// first jobs ran alone at full speed) and takes all three; on `libra-edf`'s busier node the
/// first job still owes 23.4 CPU-s by t = 100 and the sequential one 57.6 by t = 200, so it
/// takes one and refuses two (two would owe 23.4 + 64 by t = 161 and 145 by t = 200, more
/// than 139). It accepted a superset of Libra+$'s jobs at the one decision where they first
/// differ, and satisfies fewer jobs in the end. (It earns more here: Libra+$ prices by
/// utilisation, and the jobs it packs onto a crowded node pay the crowded price. That is the
/// source of its profit gain on KTH; on the traces its QoS and profit both fall below Libra+$'s
/// at some delays, REPRODUCING.md.)
#[test]
fn taking_more_now_can_satisfy_fewer_jobs_later() {
    let jobs = vec![
        job(0, 0.0, 60.0, 100.0, 1),
        job(1, 0.0, 60.0, 100.0, 1),
        job(2, 0.0, 82.0, 200.0, 1),
        job(3, 61.0, 32.0, 100.0, 2),
        job(4, 61.0, 32.0, 100.0, 2),
        job(5, 61.0, 32.0, 100.0, 2),
    ];
    let cfg = ClusterConfig { nodes: 2, price_base: 1.0 };
    let edf = simulate(
        &jobs,
        libra_core::build_policy("libra-edf", PricingParams::default()).unwrap().as_ref(),
        cfg,
    );
    let plus =
        simulate(&jobs, libra_core::build_policy("libra+$", PricingParams::default()).unwrap().as_ref(), cfg);
    let accepted = |r: &SimResult| -> Vec<u64> {
        r.records.iter().filter(|x| x.verdict == Verdict::Accepted).map(|x| x.id).collect()
    };
    assert_eq!(accepted(&plus), vec![0, 1, 3, 4, 5]);
    assert_eq!(accepted(&edf), vec![0, 1, 2, 3]);
    // Every job either takes meets its deadline: the difference is only in what was taken.
    for r in [&edf, &plus] {
        assert!(r.records.iter().filter(|x| x.outcome.accepted).all(|x| x.outcome.met_deadline()), "{r:?}");
    }
    assert_eq!((edf.metrics.qos_satisfied, plus.metrics.qos_satisfied), (4, 5));
    assert!(edf.metrics.qos_satisfaction < plus.metrics.qos_satisfaction);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `Replay` (`libra sim bench-one --replay`) makes a run again from its records: the same
    /// records, every field. And it follows the records rather than deciding: a job turned away
    /// in the records it replays is turned away in the run, whatever the policy would say.
    #[test]
    fn a_replayed_run_is_the_run_and_follows_its_records(jobs in arb_mixed_workload(3), which in 0..4usize) {
        let cfg = ClusterConfig { nodes: 4, price_base: 1.0 };
        let name = ["libra", "libra+$", "libra-edf", "libra-risk"][which];
        let own = libra_core::build_policy(name, PricingParams::default()).unwrap();
        let run = simulate(&jobs, own.as_ref(), cfg);
        let own = libra_core::build_policy(name, PricingParams::default()).unwrap();
        let again = simulate(&jobs, &Replay::new(own.as_ref(), &run.records), cfg);
        prop_assert_eq!(&again.records, &run.records);

        let Some(first) = run.records.iter().position(|r| r.outcome.accepted) else { return Ok(()) };
        let mut edited = run.records.clone();
        edited[first].verdict = Verdict::Rejected(libra_core::RejectReason::Budget);
        edited[first].nodes.clear();
        let own = libra_core::build_policy(name, PricingParams::default()).unwrap();
        let followed = simulate(&jobs, &Replay::new(own.as_ref(), &edited), cfg);
        prop_assert_eq!(&followed.records[first].verdict, &edited[first].verdict);
        prop_assert!(!followed.records[first].outcome.accepted);
    }
}

/// A run tells its arrivals as they come, every `PROGRESS_EVERY` and the rest at its end, under
/// both node models: the counts add up to the jobs, the calls are as many as the blocks, and
/// the outcome is the run's without the progress.
#[test]
fn a_run_tells_its_arrivals_as_they_come() {
    let n = 2 * PROGRESS_EVERY + 100;
    let jobs: Vec<SimJob> =
        (0..n).map(|i| job(i as u64, i as f64 * 5.0, 20.0, 400.0, 1 + (i % 3) as u32)).collect();
    let cfg = ClusterConfig { nodes: 8, price_base: 1.0 };
    for name in ["libra+$", "fcfs-bf"] {
        let policy = libra_core::build_policy(name, PricingParams::default()).unwrap();
        // Each call's count, in the order made (one run: one thread calls).
        let seen = std::sync::Mutex::new(Vec::new());
        let told = simulate_with_progress(&jobs, policy.as_ref(), cfg, &|k| seen.lock().unwrap().push(k));
        assert_eq!(*seen.lock().unwrap(), vec![PROGRESS_EVERY, PROGRESS_EVERY, 100], "{name}");
        let policy = libra_core::build_policy(name, PricingParams::default()).unwrap();
        let quiet = simulate(&jobs, policy.as_ref(), cfg);
        assert_eq!(told.records, quiet.records, "{name}");
        assert!(told.records.iter().any(|r| r.outcome.accepted), "{name}: nothing ran");
    }
}
