//! Libra+$ (Yeo and Buyya), Algorithm 1: resource check, deadline check (the proportional-share
//! test), best fit by RESFree ascending, budget check with the price
//! `P_ij = alpha*PBase_j + beta*PUtil_ij`; the job's cost is the highest among its nodes. The node
//! order of line 17 is the placement (`placement`): best fit by default, as in the paper.

use super::placement::{least_budget, Candidate, Chooser, Placement, Unread};
use super::stripes::{Split, StripeChunks};
use super::suggest::earliest_deadline;
use super::{new_job_share, nodes_with_resources, Ahead, Decision, Policy, RejectReason, Simd, Suggestion};
use crate::cluster::{
    Cluster, EntryShare, HotWord, KeptPass, KeptShares, NodeHot, NodeIdx, NodeSpec, SHARE_EPS,
};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{cost_at, libraplus_rate, putil, PricingParams};
use rayon::prelude::*;

#[derive(Debug, Clone)]
pub struct LibraPlus {
    pub pricing: PricingParams,
    pub placement: Placement,
    /// `JUDGE_FROM_NODES`, or 0 in tests, so that small clusters take that path too.
    judge_from_nodes: usize,
    /// How busy nodes are read in stripes side by side (`Split::DEFAULT`, or every cluster and
    /// three stripes in tests).
    split: Split,
    /// `UNREAD_FROM_JOBS`, or 1 in tests: nodes of at least this many jobs are judged from
    /// their totals first (`unread`).
    unread_from: usize,
}

impl LibraPlus {
    /// Libra+$ as published: best fit.
    pub fn new(pricing: PricingParams) -> Self {
        Self::with_placement(pricing, Placement::BestFit)
    }

    /// This policy judging busy nodes by their bytes on a cluster of any size (`admit`).
    #[cfg(test)]
    pub(crate) fn judging_every_cluster(self) -> Self {
        LibraPlus { judge_from_nodes: 0, split: Split::EVERY_CLUSTER, unread_from: 1, ..self }
    }

    pub fn with_placement(pricing: PricingParams, placement: Placement) -> Self {
        LibraPlus {
            pricing,
            placement,
            judge_from_nodes: JUDGE_FROM_NODES,
            split: Split::DEFAULT,
            unread_from: UNREAD_FROM_JOBS,
        }
    }

    /// Eq. (3) on a node whose processor time over the job's window is `res_max`, `res_free`
    /// of it free with the job.
    fn rate(&self, node: &NodeSpec, res_max: f64, res_free: f64) -> f64 {
        self.rate_at(node.price_base, res_max, res_free)
    }

    fn rate_at(&self, price_base: f64, res_max: f64, res_free: f64) -> f64 {
        libraplus_rate(&self.pricing, price_base, putil(res_max, res_free, price_base))
    }

    /// The least RESFree at which the job's cost on a node of `cpus` and `price_base` is within
    /// `budget`, for a window of `deadline` (+inf when none is): below it every RESFree costs
    /// more. `None` when the price is not known to rise as RESFree falls (a negative `alpha`,
    /// `beta` or base price). Found by bisection over the floats in order, exact: eq. (3)'s
    /// PUtil never falls as RESFree falls (a quotient of numbers >= 0, each operation rounding
    /// monotonically; +inf at or below 0), and with `alpha`, `beta` and the base price >= 0 the
    /// rate and cost follow it (`Money::from_credits_f64_ceil` is monotonic, `None` only above
    /// its range). So being within budget is false below one float and true from it on (or the
    /// same for every RESFree: -inf when within, +inf when not).
    pub(super) fn least_res_free_within(
        &self,
        cpus: f64,
        price_base: f64,
        estimate: f64,
        deadline: f64,
        budget: Money,
    ) -> Option<f64> {
        let p = &self.pricing;
        if !((p.alpha >= 0.0) & (p.beta >= 0.0) & (price_base >= 0.0)) {
            return None;
        }
        let res_max = cpus * deadline.max(0.0);
        let within = |res_free: f64| {
            cost_at(estimate, self.rate_at(price_base, res_max, res_free)).is_some_and(|c| c <= budget)
        };
        // At or below 0 RESFree has no price (PUtil is +inf), so being within budget is the
        // same there as at +0: when it is, every RESFree is.
        if within(0.0) {
            return Some(f64::NEG_INFINITY);
        }
        if !within(f64::INFINITY) {
            return Some(f64::INFINITY);
        }
        // Search (+0, +inf] by bit pattern, which orders the floats >= +0: `lo` is not within,
        // `hi` is. The bracket starts around where eq. (3) solved in real numbers puts the
        // boundary, widened by doubling steps until it holds, so that an arrival costs a dozen
        // prices rather than the 63 of a bisection of every float. The guess only saves time:
        // each end of the bracket is checked.
        let (mut lo, mut hi) = (0.0f64.to_bits(), f64::INFINITY.to_bits());
        let rate = budget.as_credits_f64() / estimate;
        let guess = res_max * price_base * p.beta / (rate - p.alpha * price_base);
        if guess > 0.0 && guess < f64::INFINITY {
            let g = guess.to_bits();
            let mut step = 1u64;
            if within(guess) {
                hi = g;
                while let Some(at) = hi.checked_sub(step).filter(|&at| at > lo) {
                    if !within(f64::from_bits(at)) {
                        lo = at;
                        break;
                    }
                    hi = at;
                    step *= 2;
                }
            } else {
                lo = g;
                while let Some(at) = lo.checked_add(step).filter(|&at| at < hi) {
                    if within(f64::from_bits(at)) {
                        hi = at;
                        break;
                    }
                    lo = at;
                    step *= 2;
                }
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if within(f64::from_bits(mid)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(f64::from_bits(hi))
    }

    /// A value at least node `hot`'s RESFree (eq. 6) for a job of `estimate` and window
    /// `deadline`, from the node's side-by-side bytes alone (its load bound and earliest
    /// deadline); `None` when they say nothing. `clock` is `Cluster::bound_clock(now)`'s.
    ///
    /// Why it holds. Eq. (6)'s committed work is at least `load * min(D, first - now)`, `load`
    /// the node's float sum of shares and `first` its earliest deadline: a job `k` with work
    /// and time left counts `min(rem_k, s_k * D)`, and its share `s_k` is at most
    /// `rem_k / left_k` (times `1 + u`: Algorithm 2's quotient, or the cap below it), so it
    /// counts at least `s_k * min(left_k, D)` (times `1 - 2u`); any other job counts `s_k * D`.
    /// The float sums of at most `MAX_JOBS` terms (beyond that the load bound is 0) are within
    /// `2^-40` of the real ones, and the products and the difference here within a few `u`:
    /// the factor `1 - 2^-30` covers them all. So the committed work below is at most eq. (6)'s,
    /// and the RESFree computed from it (the same operations, each rounding monotonically) at
    /// least the node's.
    #[inline]
    pub(super) fn res_free_upper_bound(
        hot: &NodeHot,
        estimate: f64,
        deadline: f64,
        clock: f64,
        now: f64,
    ) -> Option<f64> {
        let load = hot.load_lower_bound(clock);
        let left = hot.first_deadline() - now;
        // Each `>` is false on NaN: then nothing is proven.
        if !(deadline.is_finite() & (deadline > 0.0) & (load > 0.0) & (left > 0.0)) {
            return None;
        }
        let committed = load * left.min(deadline) * (1.0 - 1.0 / 1_073_741_824.0); // 1 - 2^-30
        let res_max = hot.cpus() * deadline.max(0.0);
        Some(res_max - committed - estimate.max(0.0))
    }

    /// Eq. (6): `RESFree_ij = RESMax_j - sum_k RE_k - RE_i` over the window `[now, now + D]`,
    /// where `RESMax_j` is the node's processor time in the window and `RE_k` is what job `k`
    /// still needs from the node inside the window at its required share (a job that has
    /// overrun its estimate holds its admitted share through the whole window).
    pub fn res_free(cluster: &Cluster, j: NodeIdx, estimate: f64, deadline: f64, now: f64) -> (f64, f64) {
        let (_, res_max, res_free) = Self::load_and_res_free(cluster, j, estimate, deadline, now);
        (res_max, res_free)
    }

    /// One pass over a node's jobs: its load (sum of required shares) and eq. (6).
    pub(crate) fn load_and_res_free(
        cluster: &Cluster,
        j: NodeIdx,
        estimate: f64,
        deadline: f64,
        now: f64,
    ) -> (f64, f64, f64) {
        let res_max = cluster.node(j).spec.cpus * deadline.max(0.0);
        let committed = |e: &EntryShare| Self::committed(e, deadline, now);
        let (load, committed) = cluster.node_sums(j, now, 0.0, committed, |_| false).unwrap_or((0.0, 0.0));
        (load, res_max, res_max - committed - estimate.max(0.0))
    }

    /// What job `e` still needs from its node within a window of `deadline` from `now` (eq. 6's
    /// `RE_k`): its work left at its share, or its share through the whole window once it has
    /// overrun its estimate or passed its deadline.
    #[inline(always)]
    pub(super) fn committed(e: &EntryShare, deadline: f64, now: f64) -> f64 {
        let (req, rem) = (e.share, e.remaining);
        if rem > 0.0 && e.deadline_abs > now {
            rem.min(req * deadline)
        } else {
            req * deadline
        }
    }

    /// `load_and_res_free` for the deadline check: `None` when the node's load plus `share` is
    /// above its capacity (with `SHARE_EPS`), found as soon as the partial load proves it (see
    /// `Cluster::node_load_plus_within` for why a partial sum decides: every share is finite and
    /// at least +0, so the float sum never falls as terms are added). When `Some`, the values
    /// are bit for bit `load_and_res_free`'s (same terms, same order). A pass over many nodes
    /// reads them through its `KeptPass` instead, with the same two steps (`refusal`,
    /// `with_res_free`): each job's terms computed once (the same bits).
    fn load_and_res_free_within(
        cluster: &Cluster,
        j: NodeIdx,
        estimate: f64,
        deadline: f64,
        now: f64,
        share: f64,
    ) -> Option<(f64, f64, f64)> {
        let cpus = cluster.node(j).spec.cpus;
        let committed = |e: &EntryShare| Self::committed(e, deadline, now);
        let sums = cluster.node_sums(j, now, 0.0, committed, Self::refusal(cpus, share))?;
        Some(Self::with_res_free(cpus, deadline, estimate, sums))
    }

    /// The deadline check's refusal of a node of `cpus` CPUs, asked of its load: the job's
    /// `share` does not fit beside it.
    #[inline(always)]
    fn refusal(cpus: f64, share: f64) -> impl Fn(f64) -> bool {
        let limit = cpus + SHARE_EPS;
        move |load: f64| load + share > limit
    }

    /// A node's load, RESMax and RESFree (eq. 6) from its load and committed work (`committed`
    /// summed over its jobs).
    #[inline(always)]
    fn with_res_free(
        cpus: f64,
        deadline: f64,
        estimate: f64,
        (load, committed): (f64, f64),
    ) -> (f64, f64, f64) {
        let res_max = cpus * deadline.max(0.0);
        (load, res_max, res_max - committed - estimate.max(0.0))
    }

    /// Node `j` judged from its totals (`Cluster::still_bounds`) rather than its jobs, under
    /// best fit: `Some` when they prove that the node passes the deadline check (lines 9-16),
    /// with bounds on its RESFree (eq. 6) and its cost at each; `None` when they do not, and
    /// the node must be read (`priced_node`). `share` and `deadline` are the job's; the node's
    /// first two refusals (`priced_node`'s) have been checked.
    ///
    /// Why it holds, with every job on the node still and its work left `r_k > 0` (u = 2^-53;
    /// `S` the real sum of the `r_k`, between the totals' two bounds; `n <= 2^24` jobs):
    ///
    /// - `now` is below the earliest deadline, so each job's time left is a float `l_k >= lf`,
    ///   `lf` the float `first - now` (subtraction rounds monotonically). Its share is the
    ///   quotient `q_k = r_k / l_k` (rounded) unless above the node's cap floor, and `q_k` is
    ///   at most the rounded `r_max / lf`: checked at most the floor, so every share is `q_k`.
    /// - The node's float load, the entry-order sum of the `q_k` from +0, is at most
    ///   `(1 + u)^n * S / lf`; the rounded `S_up / lf` times `1 + 2^-26` is above that. So the
    ///   load plus the job's share is at most that bound plus the share (rounding is
    ///   monotonic), and the node passes the check when the bound does.
    /// - The window reaches past the latest deadline by `2^-48` of its length: then each
    ///   `q_k * D`, rounded, is at least `r_k * D / ((last - now)(1 + u)) * (1 - u)^2 > r_k`,
    ///   so each job's term of eq. (6) is its `r_k` exactly (`committed`), and the committed
    ///   work, the float sum of the `r_k` from +0, is within `(1 +- u)^n` of `S`: between
    ///   `S_down * (1 - 2^-26)` and `S_up * (1 + 2^-26)`, rounded.
    /// - RESFree is `RESMax - committed - E`, each rounding monotonic, so it lies between the
    ///   same expression at those two bounds; and with `alpha`, `beta` and the base price >= 0
    ///   the cost never rises as RESFree rises (`least_res_free_within`).
    ///
    /// The chooser decides from the bounds only when they settle the choice and the cost
    /// (`Chooser::finish_with_unread`); otherwise the node is read after all.
    pub(super) fn unread(
        &self,
        spec: &JobSpec,
        share: f64,
        deadline: f64,
        j: NodeIdx,
        cluster: &Cluster,
        now: f64,
    ) -> Option<Unread> {
        const MARGIN: f64 = 1.0 / 67_108_864.0; // 2^-26
        const REACH: f64 = 1.0 / 281_474_976_710_656.0; // 2^-48
        let b = cluster.still_bounds(j)?;
        let nspec = &cluster.node(j).spec;
        let p = &self.pricing;
        let priced_monotonic = (p.alpha >= 0.0) & (p.beta >= 0.0) & (nspec.price_base >= 0.0);
        let first = cluster.node_hot(j).first_deadline();
        // Each `<` and `<=` is false on NaN: then nothing is proven.
        if !(priced_monotonic
            & (b.jobs <= 1 << 24)
            & now.is_finite()
            & (now < first)
            & deadline.is_finite()
            & ((b.deadline_max - now) * (1.0 + REACH) <= deadline))
        {
            return None;
        }
        let lf = first - now;
        let within_cap = b.remaining_max / lf <= cluster.node_cap_floor(j);
        let load_up = (b.remaining_sum_up / lf) * (1.0 + MARGIN);
        if !(within_cap & (load_up + share <= nspec.cpus + SHARE_EPS)) {
            return None;
        }
        let res_max = nspec.cpus * deadline.max(0.0);
        let estimate = spec.estimate();
        let committed_down = b.remaining_sum_down * (1.0 - MARGIN);
        let committed_up = b.remaining_sum_up * (1.0 + MARGIN);
        let res_free_down = res_max - committed_up - estimate.max(0.0);
        let res_free_up = res_max - committed_down - estimate.max(0.0);
        let cost = |res_free: f64| cost_at(estimate, self.rate(nspec, res_max, res_free));
        Some(Unread {
            node: j,
            res_free_down,
            res_free_up,
            cost_at_down: cost(res_free_down),
            cost_at_up: cost(res_free_up),
        })
    }

    /// The deadline check and price of node `j` (the body of `priced_nodes`): `None` when the
    /// node cannot take the job by its deadline.
    fn priced_node(
        &self,
        spec: &JobSpec,
        share: f64,
        deadline: f64,
        j: NodeIdx,
        cluster: &Cluster,
        now: f64,
    ) -> Option<Candidate> {
        let nspec = &cluster.node(j).spec;
        if share > nspec.job_cap(spec.cpus_per_task()) + SHARE_EPS {
            return None;
        }
        // A node whose load is provably above what the job leaves room for is refused without
        // reading its jobs (`Cluster::load_lower_bound`: at most the sum computed below).
        if cluster.load_lower_bound(j, now) + share > nspec.cpus + SHARE_EPS {
            return None;
        }
        self.priced_screened_node(spec, share, deadline, j, cluster, now)
    }

    /// `priced_node` of a node whose first two refusals were made already, as `Pass::screen`
    /// makes them (the same comparisons on the same values): the rest of the deadline check,
    /// and the price.
    fn priced_screened_node(
        &self,
        spec: &JobSpec,
        share: f64,
        deadline: f64,
        j: NodeIdx,
        cluster: &Cluster,
        now: f64,
    ) -> Option<Candidate> {
        let spec_estimate = spec.estimate();
        let sums = Self::load_and_res_free_within(cluster, j, spec_estimate, deadline, now, share)?;
        Some(self.candidate(&cluster.node(j).spec, j, spec_estimate, share, sums))
    }

    /// Node `j` priced (eq. 3 and the cost) from what its deadline check found: its load
    /// without the job, its RESMax and its RESFree with it (`load_and_res_free_within`).
    #[inline]
    fn candidate(
        &self,
        nspec: &NodeSpec,
        j: NodeIdx,
        estimate: f64,
        share: f64,
        (load, res_max, res_free): (f64, f64, f64),
    ) -> Candidate {
        let rate = self.rate(nspec, res_max, res_free);
        Candidate { node: j, res_free, load: load + share, rate, cost: cost_at(estimate, rate) }
    }

    /// The deadline check (lines 9-16) and the price of every node that passes (unsorted). The
    /// job's share `E / D` must fit within what one of its tasks may use on the node.
    fn priced_nodes(
        &self,
        spec: &JobSpec,
        deadline: f64,
        res: &[NodeIdx],
        cluster: &Cluster,
        now: f64,
    ) -> Vec<Candidate> {
        let spec_estimate = spec.estimate();
        let share = new_job_share(spec_estimate, deadline);
        res.iter().filter_map(|&j| self.priced_node(spec, share, deadline, j, cluster, now)).collect()
    }

    fn suggestion(&self, spec: &JobSpec, cluster: &Cluster, res: &[NodeIdx], now: f64) -> Option<Suggestion> {
        let procs = spec.procs() as usize;
        let first = earliest_deadline(
            cluster,
            res,
            procs,
            spec.estimate(),
            spec.cpus_per_task(),
            spec.deadline(),
            now,
        )?;
        // At the earliest deadline the job may fill a node exactly: no free resource is left,
        // PUtil is unbounded and no budget buys it. A little later leaves some free, and a price.
        let mut d = first;
        for step in 0..12 {
            let priced = self.priced_nodes(spec, d, res, cluster, now);
            if let Some(budget) = least_budget(&priced, procs) {
                return Some(Suggestion { deadline: d, budget });
            }
            d = (first * (1.0 + 0.01 * f64::from(1u32 << step))).ceil().max(d + 1.0);
        }
        None
    }
}

impl Policy for LibraPlus {
    fn name(&self) -> &'static str {
        "libra+$"
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
        cluster: &Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        let (_, res_max, res_free) =
            Self::load_and_res_free(cluster, node, spec.estimate(), spec.deadline(), now);
        Some(self.rate(&cluster.node(node).spec, res_max, res_free)).filter(|r| r.is_finite())
    }

    fn least_budget(&self, spec: &JobSpec, _user: Option<u64>, cluster: &Cluster, now: f64) -> Option<Money> {
        let res = nodes_with_resources(spec, cluster);
        least_budget(&self.priced_nodes(spec, spec.deadline(), &res, cluster, now), spec.procs() as usize)
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement)
    }
}

impl LibraPlus {
    /// Algorithm 1, with a suggestion for a rejected job if `suggest`. One pass over the nodes,
    /// with no vector as long as the cluster: the resource check, the deadline check and price of
    /// each node, and the best `procs` within budget kept as they come (`Chooser`, the same
    /// choice as `choose` over every priced node). Only a rejected job's suggestion, when asked
    /// for, collects the nodes again.
    fn admit(&self, spec: &JobSpec, cluster: &Cluster, now: f64, suggest: bool) -> Decision {
        let procs = spec.procs() as usize;
        let spec_estimate = spec.estimate();
        let deadline = spec.deadline();
        let share = new_job_share(spec_estimate, deadline);
        let (mem, disk) = (spec.resources.mem_mb, spec.resources.disk_mb);
        let mut chooser = Chooser::new(procs, spec.budget(), self.placement, Placement::BestFit);
        let pass = Pass {
            policy: self,
            spec,
            cluster,
            now,
            share,
            clock: cluster.bound_clock(now),
            judge: cluster.node_count() >= self.judge_from_nodes,
            simd: Simd::detect(),
        };
        let mut priced = 0usize;
        let mut idle = IdleKinds::default();
        let words = cluster.idle_words();
        // The idle nodes first, in index order (`IdleKinds` relies on it), until every kind the
        // cluster has is exhausted. The chooser's choice does not depend on the order it is
        // offered nodes in, and the busy nodes read below skip more once these are counted.
        'idle: for (w, &word) in words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                if idle.all_exhausted(cluster.node_kinds()) {
                    break 'idle;
                }
                let j = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let hot = cluster.node_hot(j);
                let bound = hot.load_lower_bound(pass.clock);
                let key = [hot.cpus().to_bits(), hot.price_base().to_bits(), bound.to_bits()];
                // `Some(true)`: priced already, and no more of the kind can be chosen or need
                // counting.
                let known = idle.find(key).map(|k| k.exhausted(procs));
                if known == Some(true) {
                    continue;
                }
                if pass.refused(&hot, bound) {
                    // So is every idle node of its kind: the same values, the same comparisons.
                    if known.is_none() {
                        idle.add(key, None, procs);
                    }
                    continue;
                }
                // Lines 1-8: the resources.
                if !cluster.node(j).has_resources(mem, disk) {
                    continue;
                }
                if known.is_some() {
                    if let Some(c) = idle.offer(key, procs) {
                        priced += 1;
                        chooser.push(Candidate { node: j, ..c });
                    }
                } else {
                    let c = self.priced_node(spec, share, deadline, j, cluster, now);
                    idle.add(key, c, procs);
                    if let Some(c) = c {
                        priced += 1;
                        chooser.push(c);
                    }
                }
            }
        }
        // Then the busy nodes, in stripes read side by side when the cluster is large enough to
        // be worth a second thread (`Pass::busy`). Each stripe keeps its own best `procs` and
        // count, started from the idle nodes' count: a node one stripe keeps out has `procs`
        // better ones in that stripe alone, so the union of what the stripes keep holds the
        // `procs` best of all, and the sum of the counts is the count of all.
        let stripes = self.split.stripes(words.len());
        let chunks = self.split.chunks(words.len());
        let mut unread = Vec::new();
        if stripes <= 1 {
            // One chunk of every word: the screen of all, then the reads.
            priced += pass.busy(chunks.stripe(0), &mut chooser, priced, &mut unread);
        } else {
            let idle_priced = priced;
            let parts: Vec<(Chooser, usize, Vec<Unread>)> = (0..stripes)
                .into_par_iter()
                .map(|i| {
                    let mut c = Chooser::new(procs, spec.budget(), self.placement, Placement::BestFit);
                    let mut u = Vec::new();
                    let n = pass.busy(chunks.stripe(i), &mut c, idle_priced, &mut u);
                    (c, n, u)
                })
                .collect();
            for (c, n, u) in parts {
                chooser.merge(c);
                priced += n;
                unread.extend(u);
            }
        }
        if procs == 0 || priced < procs {
            // Refused. Lines 1-8 first: too few nodes with the resources (counted up to what
            // decides it). Every priced node has them, so with `procs` priced this cannot be.
            let with_resources =
                cluster.nodes().filter(|(_, n)| n.has_resources(mem, disk)).take(procs).count();
            if procs == 0 || with_resources < procs {
                return Decision::Reject { reason: RejectReason::Resources, suggestion: None };
            }
            return Decision::Reject {
                reason: RejectReason::Deadline,
                suggestion: suggest
                    .then(|| self.suggestion(spec, cluster, &nodes_with_resources(spec, cluster), now))
                    .flatten(),
            };
        }
        // Lines 17-29: in the placement's order (RESFree ascending, best fit, in the paper), the
        // first PROC nodes within budget; the cost is the highest among them. The nodes judged
        // from their totals count when their bounds settle it, and are read when not.
        let chosen = chooser.finish_with_unread(&unread);
        #[cfg(test)]
        if !unread.is_empty() {
            UNREAD.with(|u| {
                let (settled, read) = u.get();
                u.set(if chosen.is_ok() { (settled + 1, read) } else { (settled, read + 1) });
            });
        }
        let chosen = chosen.unwrap_or_else(|mut chooser| {
            for u in &unread {
                if let Some(c) = self.priced_node(spec, share, deadline, u.node, cluster, now) {
                    chooser.push(c);
                }
            }
            chooser.finish()
        });
        match chosen {
            Some((nodes, cost)) => Decision::Accept { nodes, share, cost },
            // Lines 30-31. The deadline is fine: suggest the budget that would do at it.
            None => Decision::Reject {
                reason: RejectReason::Budget,
                suggestion: suggest
                    .then(|| {
                        let res = nodes_with_resources(spec, cluster);
                        least_budget(&self.priced_nodes(spec, deadline, &res, cluster, now), procs)
                    })
                    .flatten()
                    .map(|budget| Suggestion { deadline, budget }),
            },
        }
    }
}

#[cfg(test)]
impl LibraPlus {
    /// Whether the screen by each vector code this processor runs (`Pass::screen_fastest` at
    /// each of `Simd::available`) gives every word of `cluster` the same bits as the portable
    /// one, for `spec` at `now`.
    pub(super) fn screens_agree(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> bool {
        Simd::available().into_iter().all(|simd| {
            let pass = Pass {
                policy: self,
                spec,
                cluster,
                now,
                share: new_job_share(spec.estimate(), spec.deadline()),
                clock: cluster.bound_clock(now),
                judge: true,
                simd,
            };
            (0..cluster.idle_words().len()).all(|w| {
                let hot = cluster.hot_word(w);
                pass.screen(hot) == pass.screen_fastest(hot)
            })
        })
    }
}

/// One arrival's pass over the busy nodes of a stripe (`Pass::busy`): what every stripe shares.
struct Pass<'a> {
    policy: &'a LibraPlus,
    spec: &'a JobSpec,
    cluster: &'a Cluster,
    now: f64,
    /// The job's share on a node (`new_job_share`).
    share: f64,
    /// `Cluster::bound_clock(now)`.
    clock: f64,
    /// Whether busy nodes are judged out of budget by their bytes (`JUDGE_FROM_NODES`).
    judge: bool,
    /// The widest vector code the processor runs (`screen_fastest`).
    simd: Simd,
}

impl Pass<'_> {
    /// `priced_node`'s first two refusals, from the node's side-by-side bytes (`bound` its load
    /// bound). Every comparison is made (`|`, not `||`), so that the screen of a word's nodes
    /// compiles without a branch per node (one on which of them mispredicted at every few).
    #[inline]
    fn refused(&self, hot: &NodeHot, bound: f64) -> bool {
        (self.share > hot.job_cap(self.spec.cpus_per_task()) + SHARE_EPS)
            | (bound + self.share > hot.cpus() + SHARE_EPS)
    }

    /// Bit `b` set when node `b` of `hot` (a word's nodes) is not `refused` by its bytes.
    #[inline(always)]
    fn screen(&self, hot: HotWord<'_>) -> u64 {
        let mut pass = 0u64;
        for (b, hot) in hot.iter().enumerate() {
            pass |= u64::from(!self.refused(&hot, hot.load_lower_bound(self.clock))) << b;
        }
        pass
    }

    /// `screen` compiled for AVX2: four nodes per vector instead of two. The same operations
    /// on each node in the same order (Rust never fuses a multiply and an add unless told), so
    /// the same bits.
    ///
    /// # Safety
    /// Only on a processor with AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn screen_avx2(&self, hot: HotWord<'_>) -> u64 {
        self.screen(hot)
    }

    /// `screen` compiled for AVX-512 (`Simd::Avx512`): the same bits again.
    ///
    /// # Safety
    /// Only on a processor with AVX-512 F, DQ and VL.
    #[rustversion::since(1.89)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl")]
    unsafe fn screen_avx512(&self, hot: HotWord<'_>) -> u64 {
        self.screen(hot)
    }

    /// Before Rust 1.89 there is no AVX-512 to compile for, and `Simd::detect` never finds it.
    ///
    /// # Safety
    /// As the AVX2 screen's.
    #[rustversion::before(1.89)]
    #[cfg(target_arch = "x86_64")]
    unsafe fn screen_avx512(&self, hot: HotWord<'_>) -> u64 {
        // SAFETY: the caller's promise covers AVX2, which AVX-512 implies.
        unsafe { self.screen_avx2(hot) }
    }

    /// `screen` by the fastest code this processor runs (`Pass::simd`).
    #[inline]
    fn screen_fastest(&self, hot: HotWord<'_>) -> u64 {
        #[cfg(target_arch = "x86_64")]
        match self.simd {
            // SAFETY: `Simd::detect` gives each level only when the processor has it.
            Simd::Avx512 => return unsafe { self.screen_avx512(hot) },
            Simd::Avx2 => return unsafe { self.screen_avx2(hot) },
            Simd::Portable => {}
        }
        self.screen(hot)
    }

    /// `LibraPlus::unread` for node `j`, after `priced_node`'s first two refusals (as it makes
    /// them). Out of line: most nodes are not asked, and the pass over them stays small.
    #[inline(never)]
    fn unread(&self, j: NodeIdx) -> Option<Unread> {
        let (spec, cluster, now, share) = (self.spec, self.cluster, self.now, self.share);
        let nspec = &cluster.node(j).spec;
        let refused = share > nspec.job_cap(spec.cpus_per_task()) + SHARE_EPS
            || cluster.load_lower_bound(j, now) + share > nspec.cpus + SHARE_EPS;
        if refused {
            return None;
        }
        self.policy.unread(spec, share, spec.deadline(), j, cluster, now)
    }

    /// Lines 9-16 and the price of every busy node of the chunks this stripe takes, offered to
    /// `chooser`; returns how many were priced. `priced` is the count so far (of the nodes
    /// offered elsewhere), only for knowing when `procs` are priced.
    fn busy(
        &self,
        chunks: StripeChunks<'_>,
        chooser: &mut Chooser,
        priced: usize,
        unread: &mut Vec<Unread>,
    ) -> usize {
        SCRATCH.with_borrow_mut(|scratch| {
            let BusyScratch { kept, busy } = scratch;
            let (deadline, now) = (self.spec.deadline(), self.now);
            let mut kept =
                kept.pass(self.cluster, now, |e: &EntryShare| LibraPlus::committed(e, deadline, now));
            self.busy_kept(chunks, chooser, priced, unread, &mut kept, busy)
        })
    }

    /// `busy`, with this thread's `KeptShares` in a pass at `now` with eq. (6)'s term for the
    /// job's deadline (`committed`), and its list of nodes to read (`busy`, emptied at each
    /// chunk).
    fn busy_kept(
        &self,
        chunks: StripeChunks<'_>,
        chooser: &mut Chooser,
        priced: usize,
        unread: &mut Vec<Unread>,
        kept: &mut KeptPass<'_, impl Fn(&EntryShare) -> f64>,
        busy: &mut Vec<(NodeIdx, bool)>,
    ) -> usize {
        let (spec, cluster, now, share) = (self.spec, self.cluster, self.now, self.share);
        let procs = spec.procs() as usize;
        let (estimate, deadline, budget) = (spec.estimate(), spec.deadline(), spec.budget());
        let (mem, disk) = (spec.resources.mem_mb, spec.resources.disk_mb);
        let words = cluster.idle_words();
        let mut bars = BudgetBars::default();
        // A chunk's busy nodes the side-by-side bytes leave in, read in a second loop: far
        // apart in memory, so that loop asks for each node and its entries a few ahead. With
        // each, whether those bytes prove its price above the budget (see below). Lines 9-16
        // where those bytes decide (`priced_node`'s first two refusals, the same comparisons):
        // most nodes of a large cluster end here, and the node itself is not read. Lines 1-8 are
        // only counted when the job is refused (`admit`), since a node that passes the deadline
        // check has passed them. The list is the thread's, kept from one arrival to the next:
        // grown afresh at each, its reallocations were about a twelfth of the pass on the SDSC
        // trace (perf).
        // Once `procs` nodes are priced, how many more are no longer matters (only fewer
        // refuses the job), and a node whose RESFree is provably below the least within budget
        // cannot be chosen: it is not read, nor asked for. The judgement made in the screen
        // is applied as the node would join the nodes waiting to be read (`Ahead`), against
        // the count of that moment (the count only grows). The nodes waiting to be read carry
        // over from one chunk to the next.
        let mut count = 0usize;
        let mut ahead = Ahead::default();
        let unread_from = match self.policy.placement {
            Placement::BestFit => self.policy.unread_from,
            _ => usize::MAX,
        };
        // A job that asks no memory and no disk has room on every node while every node is
        // open (`Cluster::every_node_has_room`): then no node is asked.
        let room = cluster.every_node_has_room(mem, disk);
        let mut read = |j: NodeIdx, count: &mut usize, kept: &mut KeptPass<'_, _>| {
            let node = cluster.node(j);
            if !room && !node.has_resources(mem, disk) {
                return;
            }
            // A node of many jobs whose totals prove it passes the deadline check: counted,
            // and judged by the bounds they give once every other node is in the chooser.
            if node.job_count() >= unread_from {
                if let Some(u) = self.unread(j) {
                    *count += 1;
                    unread.push(u);
                    return;
                }
            }
            // Every node here passed the screen (`screen_fastest`): its first two refusals.
            let cpus = node.spec.cpus;
            let Some(sums) = kept.node_sums(j, 0.0, LibraPlus::refusal(cpus, share)) else {
                return;
            };
            let sums = LibraPlus::with_res_free(cpus, deadline, estimate, sums);
            *count += 1;
            // Once the chooser holds `procs` nodes each before this one in its order, the node
            // is left out whatever its cost, so it is not priced (`Chooser::leaves_out`): 3.6%
            // of the instructions of 20,000 synthetic jobs on 10,000 nodes, 0.2% of the SDSC
            // trace's.
            let (load, _, res_free) = sums;
            if chooser.leaves_out(res_free, load + share, j) {
                return;
            }
            chooser.push(self.policy.candidate(&node.spec, j, estimate, share, sums));
        };
        for chunk in chunks {
            busy.clear();
            for (w, &word) in words.iter().enumerate().take(chunk.end).skip(chunk.start) {
                if word == u64::MAX {
                    continue;
                }
                // Bits past the last node are clear in `word` but never set in `pass`.
                let pass = self.screen_fastest(cluster.hot_word(w));
                let mut bits = !word & pass;
                while bits != 0 {
                    let j = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let hot = cluster.node_hot(j);
                    let over = self.judge
                        && LibraPlus::res_free_upper_bound(&hot, estimate, deadline, self.clock, now)
                            .is_some_and(|free| {
                                free < bars.get(&hot, || {
                                    self.policy.least_res_free_within(
                                        hot.cpus(),
                                        hot.price_base(),
                                        estimate,
                                        deadline,
                                        budget,
                                    )
                                })
                            });
                    busy.push((j, over));
                }
            }
            for &(j, over) in busy.iter() {
                if over && priced + count >= procs {
                    continue;
                }
                if let Some(first) = ahead.push(j, cluster) {
                    read(first, &mut count, kept);
                }
            }
        }
        while let Some(first) = ahead.pop() {
            read(first, &mut count, kept);
        }
        count
    }
}

/// Idle nodes by kind, for one pass of `admit`. On a node with no jobs, the deadline check and
/// price (`priced_node`) read nothing but the node's capacity, its base price and its load
/// bound: no load, no committed work. So every idle node of the same three (to the bit) gets
/// the same candidate, its own index aside, and the pass prices one of each kind. Those
/// candidates tie on every key, so the chooser orders them by index: once `procs` of a kind
/// have been offered, each a node of lower index, a later one cannot come before the worst
/// kept (the `procs` best of what was offered are at least as good as those). Nor need it be
/// counted: `procs` priced nodes are enough for the job not to be refused for want of them. A
/// kind whose first node fails the deadline check fails it on every node. On 10,000 nodes most
/// of the nodes an arrival would price are idle.
///
/// An idle node's load line is the empty one, whose bound is +0 at every instant admission
/// meets (`NodeLine::lower_bound`), so the kinds idle nodes can have are the cluster's
/// (capacity, base price) pairs (`Cluster::node_kinds`). Once that many kinds with a bound of
/// +0 are exhausted, no later idle node can be chosen or need counting, and the pass stops
/// reading them. Should a bound ever not be +0, its kind is simply not counted and the pass
/// reads on: slower, never different.
#[derive(Default)]
struct IdleKinds {
    kinds: [Option<IdleKind>; IdleKinds::KINDS],
    /// How many of `kinds` with a bound of +0 are exhausted.
    exhausted: usize,
}

struct IdleKind {
    key: [u64; 3],
    /// The candidate of the first idle node of the kind (`None`: it fails the deadline check).
    cand: Option<Candidate>,
    /// How many of the kind the chooser has been offered.
    offered: usize,
}

impl IdleKind {
    /// No further node of the kind can be chosen, and none needs counting.
    fn exhausted(&self, procs: usize) -> bool {
        self.cand.is_none() || self.offered >= procs
    }
}

impl IdleKinds {
    /// Kinds remembered per pass; a node of a further kind is priced as any other.
    const KINDS: usize = 4;

    fn find(&mut self, key: [u64; 3]) -> Option<&mut IdleKind> {
        // Compared word by word: as one 24-byte comparison the compiler loaded the key it had
        // just stored in two halves, and that stall was a sixth of the pass.
        let same = |k: &&mut IdleKind| k.key[0] == key[0] && k.key[1] == key[1] && k.key[2] == key[2];
        self.kinds.iter_mut().map_while(Option::as_mut).find(same)
    }

    /// The first node of a kind, with its candidate (offered to the chooser when `Some`).
    fn add(&mut self, key: [u64; 3], cand: Option<Candidate>, procs: usize) {
        if let Some(free) = self.kinds.iter_mut().find(|k| k.is_none()) {
            let kind = IdleKind { key, cand, offered: usize::from(cand.is_some()) };
            if kind.exhausted(procs) && key[2] == 0.0f64.to_bits() {
                self.exhausted += 1;
            }
            *free = Some(kind);
        }
    }

    /// Another node of a kind found and not exhausted: its candidate, counted as offered.
    fn offer(&mut self, key: [u64; 3], procs: usize) -> Option<Candidate> {
        let kind = self.find(key)?;
        let cand = kind.cand?;
        kind.offered += 1;
        if kind.exhausted(procs) && key[2] == 0.0f64.to_bits() {
            self.exhausted += 1;
        }
        Some(cand)
    }

    /// Whether every kind of idle node a cluster of `kinds` (capacity, base price) pairs can
    /// have is exhausted.
    fn all_exhausted(&self, kinds: usize) -> bool {
        self.exhausted >= kinds
    }
}

/// What the busy nodes' pass (`Pass::busy`) keeps on its thread from one arrival to the next.
#[derive(Default)]
struct BusyScratch {
    /// The shares of jobs that span many of the nodes read, computed once an arrival (once a
    /// stripe).
    kept: KeptShares,
    /// A chunk's nodes the screen leaves in, each with its budget judgement.
    busy: Vec<(NodeIdx, bool)>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<BusyScratch> = std::cell::RefCell::new(BusyScratch::default());
}

/// The least cluster on which `admit` judges busy nodes by their bytes before it reads them
/// (`LibraPlus::res_free_upper_bound`). On a small cluster the judgement costs about what it
/// saves: the full SDSC trace (128 nodes) ran a few percent slower with it, 10,000 nodes a few
/// percent faster. Either way the decisions are the same.
const JUDGE_FROM_NODES: usize = 1024;

#[cfg(test)]
thread_local! {
    /// Arrivals on this thread with nodes judged from their totals: how many the bounds
    /// settled, and how many read those nodes after all.
    pub(super) static UNREAD: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Jobs on a node from which `libra+$` (best fit) judges it from its totals first
/// (`LibraPlus::unread`): below, reading its jobs costs about what the bounds do.
const UNREAD_FROM_JOBS: usize = 256;

/// `least_res_free_within` per node kind (capacity, base price), found once per pass for the
/// first few kinds met; a node of a further kind is never judged out (-inf). Fixed size, so
/// that an arrival allocates nothing for it.
#[derive(Default)]
struct BudgetBars {
    kinds: [(u64, u64, f64); BudgetBars::KINDS],
    len: usize,
}

impl BudgetBars {
    const KINDS: usize = 4;

    #[inline]
    fn get(&mut self, hot: &NodeHot, find: impl FnOnce() -> Option<f64>) -> f64 {
        let key = (hot.cpus().to_bits(), hot.price_base().to_bits());
        if let Some(&(_, _, bar)) = self.kinds[..self.len].iter().find(|k| (k.0, k.1) == key) {
            return bar;
        }
        if self.len >= Self::KINDS {
            return f64::NEG_INFINITY;
        }
        let bar = find().unwrap_or(f64::NEG_INFINITY);
        self.kinds[self.len] = (key.0, key.1, bar);
        self.len += 1;
        bar
    }
}
