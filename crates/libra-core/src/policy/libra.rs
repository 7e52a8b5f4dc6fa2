//! The Libra policy (Sherwani et al.): the budget is checked against `alpha*E + beta*E/D`; each
//! node accepts if the shares it owes its jobs plus the new job's `E/D` fit its capacity; the job
//! goes to the least loaded accepting node(s) (the paper's rule; another placement may be
//! chosen, `placement`).

use super::placement::{Candidate, Chooser, Placement};
use super::suggest::earliest_deadline;
use super::{new_job_share, nodes_with_resources, Ahead, Decision, Policy, RejectReason, Simd, Suggestion};
use crate::cluster::{Cluster, HotWord, NodeHot, NodeIdx, SHARE_EPS};
use crate::job::JobSpec;
use crate::money::Money;
use crate::policy::LibraPlus;
use crate::pricing::{cost_at, libra_rate, PricingParams};

#[derive(Debug, Clone)]
pub struct Libra {
    pub pricing: PricingParams,
    pub placement: Placement,
}

impl Libra {
    /// Libra as published: least loaded.
    pub fn new(pricing: PricingParams) -> Self {
        Self::with_placement(pricing, Placement::LeastLoaded)
    }

    pub fn with_placement(pricing: PricingParams, placement: Placement) -> Self {
        Libra { pricing, placement }
    }

    /// `alpha*E + beta*E/D`, as `E` times the rate per CPU-second `alpha + beta/D`: the same
    /// on every node.
    fn cost(&self, estimate: f64, deadline: f64) -> Option<Money> {
        cost_at(estimate, libra_rate(&self.pricing, deadline))
    }

    fn suggestion(&self, spec: &JobSpec, cluster: &Cluster, res: &[usize], now: f64) -> Option<Suggestion> {
        let d = earliest_deadline(
            cluster,
            res,
            spec.procs() as usize,
            spec.estimate(),
            spec.cpus_per_task(),
            spec.deadline(),
            now,
        )?;
        Some(Suggestion { deadline: d, budget: self.cost(spec.estimate(), d)? })
    }

    /// Whether node `j` can still meet all its deadlines with the job (the share test), and
    /// what the placements order it by if so.
    fn accepting_node(
        &self,
        spec: &JobSpec,
        cost: Option<Money>,
        j: NodeIdx,
        cluster: &Cluster,
        now: f64,
        bar: f64,
    ) -> Option<Candidate> {
        let (e, d) = (spec.estimate(), spec.deadline());
        let share = new_job_share(e, d);
        let hot = cluster.node_hot(j);
        let clock = cluster.bound_clock(now);
        if refused_by_capacity(&hot, share, spec.cpus_per_task(), clock) {
            return None;
        }
        // The same bound against `bar`, without reading the node's jobs.
        if hot.load_lower_bound(clock) + share >= bar {
            return None;
        }
        // `node_load + share`, or None when above the capacity or at least `bar` (stopping as
        // soon as the partial load proves it).
        let load = cluster.node_load_plus_below(j, now, share, hot.cpus() + SHARE_EPS, bar)?;
        // Only best fit reads RESFree; the paper's Libra never computes it.
        let res_free = match self.placement {
            Placement::BestFit => LibraPlus::res_free(cluster, j, e, d, now).1,
            _ => 0.0,
        };
        Some(Candidate { node: j, res_free, load, rate: libra_rate(&self.pricing, d), cost })
    }

    /// How many nodes accept the job, and the best `procs` of them in the placement's order
    /// within the budget (`choose`), in one pass with no vector as long as the cluster.
    ///
    /// With `prune` (the decision alone, not the count), least loaded stops reading a node's
    /// jobs once it cannot be chosen: nodes come in index order, so once `procs` are kept every
    /// later node has a higher index than all of them and, its order being (load, load, node),
    /// enters only with a load strictly below the worst kept. Its partial load never exceeds
    /// its full load (shares are finite and >= +0), so a partial load plus the job's share at or
    /// above that bar rules it out. The count is then too low, and is not returned.
    fn accepting(
        &self,
        spec: &JobSpec,
        cluster: &Cluster,
        now: f64,
        prune: bool,
    ) -> (usize, Option<(Vec<NodeIdx>, Money)>) {
        let cost = self.cost(spec.estimate(), spec.deadline());
        let (mem, disk) = (spec.resources.mem_mb, spec.resources.disk_mb);
        let mut chooser =
            Chooser::new(spec.procs() as usize, spec.budget(), self.placement, Placement::LeastLoaded);
        let mut count = 0usize;
        let share = new_job_share(spec.estimate(), spec.deadline());
        let cpt = spec.cpus_per_task();
        let least_loaded = prune && self.placement == Placement::LeastLoaded;
        if least_loaded {
            if let Some(choice) = self.least_loaded_among_idle(spec, cost, cluster, now, share) {
                return (count, choice);
            }
        }
        let bar = |chooser: &Chooser| match chooser.worst_load() {
            Some(load) if least_loaded => load,
            _ => f64::INFINITY,
        };
        // Nodes come in index order. The share test's refusals that the node's side-by-side
        // bytes decide (capacity, and the bound against `bar`) come first, so a node they
        // refuse is not read at all; a node refused for want of resources or by the bound is
        // not counted either way, so the order of those checks changes nothing. The rest wait
        // in `ahead`, a few at a time, while their structs and then their entries are asked
        // for: they are far apart in memory. Each is checked again against the bar of its turn.
        let mut ahead = Ahead::default();
        // Every node has room for the job, known once (`Cluster::every_node_has_room`): then
        // no node is asked.
        let room = cluster.every_node_has_room(mem, disk);
        let visit = |j: NodeIdx, chooser: &mut Chooser, count: &mut usize| {
            let bar = bar(chooser);
            // No node's load with the job is below the job's share alone (shares are >= +0 and
            // the float sum rounds monotonically), so once the worst kept is at that bar every
            // later node is ruled out above: stop here.
            if bar <= share {
                return false;
            }
            if room || cluster.node(j).has_resources(mem, disk) {
                if let Some(c) = self.accepting_node(spec, cost, j, cluster, now, bar) {
                    *count += 1;
                    chooser.push(c);
                }
            }
            true
        };
        let (clock, simd) = (cluster.bound_clock(now), Simd::detect());
        'nodes: {
            // The nodes of each idle word (64) are screened together, with no branch per node,
            // against the bar as the word begins: most nodes are refused here, and a branch
            // per node on which of them mispredicted at every few. The bar only falls, so
            // a node refused against it is refused against the bar of its turn, and the few
            // that pass are checked again against that bar: the same nodes join `ahead`, in
            // the same order, as when each was checked alone.
            for w in 0..cluster.node_count().div_ceil(64) {
                let word_bar = bar(&chooser);
                // Once the worst kept is at the job's share alone, no later node can enter
                // (`visit`): the rest of the words need no screen.
                if word_bar <= share {
                    break 'nodes;
                }
                let mut pass = screen_word_fastest(simd, cluster.hot_word(w), share, cpt, clock, word_bar);
                while pass != 0 {
                    let j = w * 64 + pass.trailing_zeros() as usize;
                    pass &= pass - 1;
                    if refused_by_bound(&cluster.node_hot(j), share, cpt, clock, bar(&chooser)) {
                        continue;
                    }
                    if let Some(first) = ahead.push(j, cluster) {
                        if !visit(first, &mut chooser, &mut count) {
                            break 'nodes;
                        }
                    }
                }
            }
            while let Some(j) = ahead.pop() {
                if !visit(j, &mut chooser, &mut count) {
                    break;
                }
            }
        }
        (count, chooser.finish())
    }
}

impl Libra {
    /// Least loaded's choice when the first idle nodes settle it, found without the pass over
    /// every node; `None` when they do not (the caller then makes the pass).
    ///
    /// No node's load with the job is below the job's share alone (shares are >= +0, the
    /// load's sum starts at -0.0, and float addition rounds monotonically), and an idle node's
    /// is exactly the share. So once `procs` idle nodes accept the job, the worst kept is the
    /// share, and a node can still enter only at exactly the share with an index below the
    /// last of them. The idle nodes are taken in index order until `procs` accept (each
    /// checked as the pass checks it); then only the busy nodes below the last one taken are
    /// checked, against the bar just above the share (`next_above`: the order breaks the tie by
    /// index, and these nodes come after higher ones here, so a tie must enter). Every node
    /// left out is refused or has `procs` better kept, so the choice is the pass's, bit for bit
    /// (`policy::scale`'s proptests, against the direct computation).
    fn least_loaded_among_idle(
        &self,
        spec: &JobSpec,
        cost: Option<Money>,
        cluster: &Cluster,
        now: f64,
        share: f64,
    ) -> Option<Option<(Vec<NodeIdx>, Money)>> {
        let procs = spec.procs() as usize;
        let (mem, disk) = (spec.resources.mem_mb, spec.resources.disk_mb);
        let mut chooser = Chooser::new(procs, spec.budget(), Placement::LeastLoaded, Placement::LeastLoaded);
        let words = cluster.idle_words();
        let room = cluster.every_node_has_room(mem, disk);
        let at_share = |chooser: &Chooser| chooser.worst_load().is_some_and(|w| w <= share);
        let mut last = None;
        'idle: for (w, &word) in words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let j = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if room || cluster.node(j).has_resources(mem, disk) {
                    if let Some(c) = self.accepting_node(spec, cost, j, cluster, now, f64::INFINITY) {
                        chooser.push(c);
                    }
                }
                if at_share(&chooser) {
                    last = Some(j);
                    break 'idle;
                }
            }
        }
        let last = last?;
        let bar = next_above(share);
        let (cpt, clock, simd) = (spec.cpus_per_task(), cluster.bound_clock(now), Simd::detect());
        for (w, &idle) in words.iter().enumerate().take(last / 64 + 1) {
            // The busy nodes of the word below `last`, screened by their bytes first.
            let below = if w == last / 64 { (1u64 << (last % 64)) - 1 } else { u64::MAX };
            let mut pass = screen_word_fastest(simd, cluster.hot_word(w), share, cpt, clock, bar);
            pass &= !idle & below;
            while pass != 0 {
                let j = w * 64 + pass.trailing_zeros() as usize;
                pass &= pass - 1;
                if room || cluster.node(j).has_resources(mem, disk) {
                    if let Some(c) = self.accepting_node(spec, cost, j, cluster, now, bar) {
                        chooser.push(c);
                    }
                }
            }
        }
        debug_assert!(at_share(&chooser), "a tie enters only in place of a worse-indexed idle node");
        Some(chooser.finish())
    }
}

/// The least float above `x` for `x` >= 0 and finite (`f64::next_up`, newer than the supported
/// Rust); `x` itself otherwise. A bar of it refuses exactly what is above `x`.
fn next_above(x: f64) -> f64 {
    if x == 0.0 {
        f64::from_bits(1)
    } else if x.is_finite() && x > 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// The share test's first two refusals, from the node's side-by-side bytes alone: the job's
/// share above what one of its tasks may use there, or the node's load bound
/// (`Cluster::load_lower_bound`: at most the sum admission computes, and adding `share` rounds
/// monotonically) plus the share above its capacity. `clock` is `Cluster::bound_clock`'s.
fn refused_by_capacity(hot: &NodeHot, share: f64, cpus_per_task: u32, clock: f64) -> bool {
    share > hot.job_cap(cpus_per_task) + SHARE_EPS
        || hot.load_lower_bound(clock) + share > hot.cpus() + SHARE_EPS
}

/// `refused_by_capacity`, or the bound plus the share at least `bar` (least loaded's bar: see
/// `Libra::accepting`), every comparison made (`|`, not `||`) so that it compiles without a
/// branch.
#[inline(always)]
fn refused_by_bound(hot: &NodeHot, share: f64, cpus_per_task: u32, clock: f64, bar: f64) -> bool {
    let with = hot.load_lower_bound(clock) + share;
    (share > hot.job_cap(cpus_per_task) + SHARE_EPS) | (with > hot.cpus() + SHARE_EPS) | (with >= bar)
}

/// Bit `b` set when node `b` of `hots` (a word's nodes) is not `refused_by_bound` against `bar`.
#[inline(always)]
fn screen_word(hots: HotWord<'_>, share: f64, cpus_per_task: u32, clock: f64, bar: f64) -> u64 {
    let mut pass = 0u64;
    for (b, hot) in hots.iter().enumerate() {
        pass |= u64::from(!refused_by_bound(&hot, share, cpus_per_task, clock, bar)) << b;
    }
    pass
}

/// `screen_word` compiled for AVX2: four nodes per vector instead of two (9% fewer
/// instructions in a saturated run of 120,000 jobs on 10,000 nodes). The same operations on
/// each node in the same order (Rust never fuses a multiply and an add unless told), so the
/// same bits.
///
/// # Safety
/// Only on a processor with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn screen_word_avx2(hots: HotWord<'_>, share: f64, cpus_per_task: u32, clock: f64, bar: f64) -> u64 {
    screen_word(hots, share, cpus_per_task, clock, bar)
}

/// `screen_word` compiled for AVX-512 (`Simd::Avx512`): the same bits again.
///
/// # Safety
/// Only on a processor with AVX-512 F, DQ and VL.
#[rustversion::since(1.89)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
unsafe fn screen_word_avx512(hots: HotWord<'_>, share: f64, cpus_per_task: u32, clock: f64, bar: f64) -> u64 {
    screen_word(hots, share, cpus_per_task, clock, bar)
}

/// Before Rust 1.89 there is no AVX-512 to compile for, and `Simd::detect` never finds it.
///
/// # Safety
/// As the AVX2 screen's.
#[rustversion::before(1.89)]
#[cfg(target_arch = "x86_64")]
unsafe fn screen_word_avx512(hots: HotWord<'_>, share: f64, cpus_per_task: u32, clock: f64, bar: f64) -> u64 {
    // SAFETY: the caller's promise covers AVX2, which AVX-512 implies.
    unsafe { screen_word_avx2(hots, share, cpus_per_task, clock, bar) }
}

/// `screen_word` by the fastest code this processor runs (`simd`: `Simd::detect()`).
#[inline(always)]
fn screen_word_fastest(
    simd: Simd,
    hots: HotWord<'_>,
    share: f64,
    cpus_per_task: u32,
    clock: f64,
    bar: f64,
) -> u64 {
    #[cfg(target_arch = "x86_64")]
    match simd {
        // SAFETY: `Simd::detect` gives each level only when the processor has it.
        Simd::Avx512 => return unsafe { screen_word_avx512(hots, share, cpus_per_task, clock, bar) },
        Simd::Avx2 => return unsafe { screen_word_avx2(hots, share, cpus_per_task, clock, bar) },
        Simd::Portable => {}
    }
    let _ = simd;
    screen_word(hots, share, cpus_per_task, clock, bar)
}

#[cfg(test)]
impl Libra {
    /// Whether the screen by each vector code this processor runs (`Simd::available`) gives
    /// every word of `cluster` the same bits as the portable one, for `spec` at `now` against
    /// `bar`.
    pub(super) fn screens_agree(spec: &JobSpec, cluster: &Cluster, now: f64, bar: f64) -> bool {
        let share = new_job_share(spec.estimate(), spec.deadline());
        let (cpt, clock) = (spec.cpus_per_task(), cluster.bound_clock(now));
        Simd::available().into_iter().all(|simd| {
            (0..cluster.idle_words().len()).all(|w| {
                let hot = cluster.hot_word(w);
                screen_word(hot, share, cpt, clock, bar)
                    == screen_word_fastest(simd, hot, share, cpt, clock, bar)
            })
        })
    }
}

impl Policy for Libra {
    fn name(&self) -> &'static str {
        "libra"
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, true)
    }

    fn decide_only(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.admit(spec, cluster, now, false)
    }

    fn price(
        &self,
        spec: &JobSpec,
        _user: Option<u64>,
        _cluster: &Cluster,
        _node: NodeIdx,
        _now: f64,
    ) -> Option<f64> {
        Some(libra_rate(&self.pricing, spec.deadline())).filter(|r| r.is_finite())
    }

    fn least_budget(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Option<Money> {
        let procs = spec.procs() as usize;
        if procs == 0 || self.accepting(spec, cluster, now, false).0 < procs {
            return None;
        }
        self.cost(spec.estimate(), spec.deadline())
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement)
    }
}

impl Libra {
    /// The decision, with a suggestion for a rejected job if `suggest`.
    fn admit(&self, spec: &JobSpec, cluster: &Cluster, now: f64, suggest: bool) -> Decision {
        let procs = spec.procs() as usize;
        let (mem, disk) = (spec.resources.mem_mb, spec.resources.disk_mb);
        // Counted only up to what decides it.
        let with_resources = cluster.nodes().filter(|(_, n)| n.has_resources(mem, disk)).take(procs).count();
        if procs == 0 || with_resources < procs {
            return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
        }
        // The node list only for a suggestion (the decision needs none).
        let res = || nodes_with_resources(spec, cluster);
        // The server first checks the budget against the minimum cost formula.
        if self.cost(spec.estimate(), spec.deadline()).is_none_or(|c| c > spec.budget()) {
            return Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res(), now)).flatten(),
            };
        }
        // Then every node is asked whether it can still meet all its deadlines with the job, and
        // the job goes to the first PROC of them in the placement's order.
        match self.accepting(spec, cluster, now, true).1 {
            Some((nodes, cost)) => {
                Decision::Accept { nodes, share: new_job_share(spec.estimate(), spec.deadline()), cost }
            }
            None => Decision::Reject {
                reason: RejectReason::Deadline,
                suggestion: suggest.then(|| self.suggestion(spec, cluster, &res(), now)).flatten(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_above;

    #[test]
    fn next_above_is_the_next_float_up() {
        for x in [0.0, -0.0, 1e-310, 0.1, 1.0, 0.75, 123.456, f64::MAX / 2.0] {
            let up = next_above(x);
            assert!(up > x, "{x}");
            // Nothing lies between: the float halfway rounds to one of them.
            let mid = x / 2.0 + up / 2.0;
            assert!(mid == x || mid == up, "{x}");
        }
        assert_eq!(next_above(f64::INFINITY), f64::INFINITY);
        assert!(next_above(f64::NAN).is_nan());
    }
}
