//! Node choice (issue 9): which of the nodes that can take a job (resources, deadline, budget)
//! it goes to. Admission does not depend on it: a job is accepted under one placement exactly
//! when it is under another; only its nodes, and so what it is charged, change.
//!
//! - `best-fit`: Libra+$'s Algorithm 1 (line 17): RESFree ascending (eq. 6), the node left with
//!   the least free processor time over the job's window, so that nodes fill up and more jobs
//!   can be accepted later. The default of `libra+$` and the EDF policies.
//! - `least-loaded`: the least sum of required shares (with the job's). The Libra paper's rule
//!   and the default of `libra`.
//! - `cheapest`: the lowest price per CPU-second for this job (`Policy::price`), so a user never
//!   pays more than another accepting node would have charged. Ties go by the policy's default
//!   order (under `libra`, whose price is the same on every node, it is least loaded).
//!
//! A parallel job takes the first `procs` nodes in that order among those within its budget, and
//! pays the highest of their costs (Algorithm 1, lines 22-24). Under `cheapest` those are the
//! `procs` cheapest, so its cost is the least any set of accepting nodes would charge.
//!
//! Every order ends on the node index, so runs are reproducible.

use crate::cluster::NodeIdx;
use crate::money::Money;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    BestFit,
    LeastLoaded,
    Cheapest,
}

impl Placement {
    pub const ALL: [Placement; 3] = [Placement::BestFit, Placement::LeastLoaded, Placement::Cheapest];

    pub fn as_str(self) -> &'static str {
        match self {
            Placement::BestFit => "best-fit",
            Placement::LeastLoaded => "least-loaded",
            Placement::Cheapest => "cheapest",
        }
    }

    /// Every placement's name, for messages and help.
    pub fn names() -> Vec<&'static str> {
        Placement::ALL.iter().map(|p| p.as_str()).collect()
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("placement: '{0}' is not a placement; accepted: best-fit, least-loaded, cheapest")]
pub struct PlacementError(pub String);

impl FromStr for Placement {
    type Err = PlacementError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Placement::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| PlacementError(s.to_string()))
    }
}

/// A node that passed a policy's deadline check, with what each placement orders by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    pub node: NodeIdx,
    /// RESFree (eq. 6) for the job's window; only read under best fit.
    pub res_free: f64,
    /// The shares the node would owe with the job; only read under least loaded.
    pub load: f64,
    /// The job's price per CPU-second here.
    pub rate: f64,
    /// The job's cost here (`None`: no budget buys it).
    pub cost: Option<Money>,
}

/// A node that passed the deadline check, its RESFree known only within bounds (`LibraPlus`'s
/// nodes read from their totals), with its cost at each bound: the cost never rises as RESFree
/// rises, so the exact cost is between them (`None`: no budget buys it, above every cost).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unread {
    pub node: NodeIdx,
    pub res_free_down: f64,
    pub res_free_up: f64,
    /// The cost at `res_free_down` (the highest) and at `res_free_up` (the lowest).
    pub cost_at_down: Option<Money>,
    pub cost_at_up: Option<Money>,
}

fn by(p: Placement, a: &Candidate, b: &Candidate) -> Ordering {
    key(p, a).total_cmp(&key(p, b))
}

/// The order `choose` takes nodes in: the placement's key, ties by the default's, then the node
/// index. A strict total order over distinct nodes, so the first `procs` are one set whatever
/// the order the candidates come in.
fn rank(placement: Placement, default: Placement, a: &Candidate, b: &Candidate) -> Ordering {
    by(placement, a, b).then_with(|| by(default, a, b)).then(a.node.cmp(&b.node))
}

/// `choose` fed one candidate at a time: it keeps only the best `procs` within budget (a heap of
/// at most `procs` entries), so a policy can pass over thousands of nodes without collecting
/// them. `finish` answers what `choose` would over every candidate pushed (each node once).
pub(crate) struct Chooser {
    procs: usize,
    budget: Money,
    placement: Placement,
    default: Placement,
    heap: BinaryHeap<Ranked>,
}

/// A candidate within budget, with `rank`'s order as integers: the heap's top is the worst one
/// kept. A saturated pass replaces the worst kept hundreds of times an arrival, each a few
/// comparisons down the heap, so the order is computed once per candidate, not per comparison.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Ranked {
    /// The placement's key, the default's, as `f64::total_cmp` orders them; then the node.
    key: (i64, i64, NodeIdx),
    cost: Money,
    /// The candidate's `load` (least loaded's bar).
    load: u64,
}

/// `x` as an integer that orders as `f64::total_cmp` orders floats (its own definition: the
/// sign bit flips the rest of a negative number's bits).
fn total_order_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

fn key(p: Placement, c: &Candidate) -> f64 {
    match p {
        Placement::BestFit => c.res_free,
        Placement::LeastLoaded => c.load,
        Placement::Cheapest => c.rate,
    }
}

impl Chooser {
    pub(crate) fn new(procs: usize, budget: Money, placement: Placement, default: Placement) -> Self {
        // A parallel job asks for at most as many nodes as there are; the cap only keeps an
        // absurd `procs` from reserving memory up front.
        let heap = BinaryHeap::with_capacity(procs.min(4096) + 1);
        Chooser { procs, budget, placement, default, heap }
    }

    pub(crate) fn push(&mut self, cand: Candidate) {
        let Some(cost) = cand.cost.filter(|m| *m <= self.budget) else { return };
        if self.procs == 0 {
            return;
        }
        let r = Ranked {
            key: (
                total_order_key(key(self.placement, &cand)),
                total_order_key(key(self.default, &cand)),
                cand.node,
            ),
            cost,
            load: cand.load.to_bits(),
        };
        self.keep(r);
    }

    /// Keeps `r` if it is among the best `procs` so far (`procs` > 0).
    fn keep(&mut self, r: Ranked) {
        if self.heap.len() < self.procs {
            self.heap.push(r);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if r < *worst {
                *worst = r;
            }
        }
    }

    /// Whether `push` would leave out a candidate at `node` with this RESFree and load
    /// (`Candidate::res_free`, `Candidate::load`), whatever its price and cost: no node is wanted,
    /// or `procs` are kept and each comes before it in the order. `false` when the order needs
    /// the price (under `cheapest`). A pass asks this before pricing a node: `push` would
    /// change nothing, within budget or not.
    #[inline]
    pub(crate) fn leaves_out(&self, res_free: f64, load: f64, node: NodeIdx) -> bool {
        if self.placement == Placement::Cheapest || self.default == Placement::Cheapest {
            return false;
        }
        if self.procs == 0 {
            return true;
        }
        // Neither order reads the rate or the cost: `key` gives the keys `push` would.
        let c = Candidate { node, res_free, load, rate: f64::NAN, cost: None };
        let (k0, k1) = (key(self.placement, &c), key(self.default, &c));
        self.heap.len() == self.procs
            && self
                .heap
                .peek()
                .is_some_and(|worst| (total_order_key(k0), total_order_key(k1), node) > worst.key)
    }

    /// Adds what `other` (the same job's chooser, offered other nodes) keeps: a candidate it
    /// left out had `procs` better ones there, so it cannot be among the best of both.
    pub(crate) fn merge(&mut self, other: Chooser) {
        for r in other.heap {
            self.keep(r);
        }
    }

    /// Once `procs` candidates are kept, the load of the worst of them: a later one enters
    /// only if it comes before it in the order.
    pub(crate) fn worst_load(&self) -> Option<f64> {
        (self.procs > 0 && self.heap.len() == self.procs)
            .then(|| self.heap.peek().map(|r| f64::from_bits(r.load)))
            .flatten()
    }

    /// `finish` as if each of `unread` had been pushed as well with its exact RESFree, when
    /// that choice and cost are the same whatever the RESFree within each one's bounds; else
    /// the chooser back, for the caller to read those nodes and push them.
    ///
    /// Best fit only (its key and its default's are RESFree). An unread node is surely within
    /// budget when its cost at its least RESFree (the highest) is, surely not when its cost at
    /// its greatest RESFree (the lowest) is not, and undecided otherwise. Those within are
    /// ranked by their bounds, which must each hold no key the chooser kept and no other's
    /// bounds: then every RESFree within them ranks every node as one value in them does (the
    /// bounds are > 0, so `total_order_key` orders them as numbers). The nodes the chooser
    /// left out had `procs` better ones among those it kept, so they are out of the first
    /// `procs` of all. An unread node among the first `procs` must have one cost at both ends.
    pub(crate) fn finish_with_unread(
        self,
        unread: &[Unread],
    ) -> Result<Option<(Vec<NodeIdx>, Money)>, Chooser> {
        if unread.is_empty() {
            return Ok(self.finish());
        }
        if self.placement != Placement::BestFit || self.default != Placement::BestFit || self.procs == 0 {
            return Err(self);
        }
        // (least key, greatest key, node, cost when it is one at both ends)
        let mut spans: Vec<(i64, i64, NodeIdx, Option<Money>)> = Vec::new();
        for u in unread {
            if !(u.res_free_down > 0.0 && u.res_free_down <= u.res_free_up) {
                return Err(self);
            }
            let within = u.cost_at_down.is_some_and(|c| c <= self.budget);
            let beyond = u.cost_at_up.is_none_or(|c| c > self.budget);
            if within {
                let cost = u.cost_at_down.filter(|_| u.cost_at_down == u.cost_at_up);
                spans.push((total_order_key(u.res_free_down), total_order_key(u.res_free_up), u.node, cost));
            } else if !beyond {
                return Err(self);
            }
        }
        spans.sort_unstable_by_key(|s| s.0);
        let apart = spans.windows(2).all(|w| w[0].1 < w[1].0)
            && spans.iter().all(|s| self.heap.iter().all(|r| r.key.0 < s.0 || r.key.0 > s.1));
        if !apart {
            return Err(self);
        }
        let mut all: Vec<(i64, NodeIdx, Option<Money>)> =
            self.heap.iter().map(|r| (r.key.0, r.key.2, Some(r.cost))).collect();
        all.extend(spans.iter().map(|s| (s.0, s.2, s.3)));
        all.sort_unstable_by_key(|a| (a.0, a.1));
        if all.len() < self.procs {
            return Ok(None);
        }
        all.truncate(self.procs);
        let Some(costs) = all.iter().map(|a| a.2).collect::<Option<Vec<Money>>>() else {
            return Err(self);
        };
        let cost = costs.into_iter().max().unwrap_or(Money::ZERO);
        Ok(Some((all.into_iter().map(|a| a.1).collect(), cost)))
    }

    /// The first `procs` nodes in order and the highest of their costs, as `choose`.
    pub(crate) fn finish(self) -> Option<(Vec<NodeIdx>, Money)> {
        if self.procs == 0 || self.heap.len() < self.procs {
            return None;
        }
        let kept = self.heap.into_sorted_vec();
        let cost = kept.iter().map(|r| r.cost).max().unwrap_or(Money::ZERO);
        // A fresh vector of the nodes alone: `into_iter().map().collect()` would reuse the
        // heap's memory, several times the size, and callers keep the nodes for the job's life.
        let nodes = kept.iter().map(|r| r.key.2).collect();
        Some((nodes, cost))
    }
}

/// Algorithm 1, lines 17-29, in the order `placement` gives (ties by `default`, then node): the
/// first `procs` nodes within `budget`, and the cost, the highest among them. `None` when fewer
/// than `procs` nodes are within budget.
pub(crate) fn choose(
    cands: &[Candidate],
    procs: usize,
    budget: Money,
    placement: Placement,
    default: Placement,
) -> Option<(Vec<NodeIdx>, Money)> {
    let mut within: Vec<(&Candidate, Money)> =
        cands.iter().filter_map(|c| c.cost.filter(|m| *m <= budget).map(|m| (c, m))).collect();
    if procs == 0 || within.len() < procs {
        return None;
    }
    let order = |a: &(&Candidate, Money), b: &(&Candidate, Money)| rank(placement, default, a.0, b.0);
    // The first `procs` in that order are the `procs` least: found by selection, not a full sort.
    if within.len() > procs {
        within.select_nth_unstable_by(procs - 1, order);
        within.truncate(procs);
    }
    within.sort_by(order);
    let cost = within.iter().map(|w| w.1).max().unwrap_or(Money::ZERO);
    Some((within.into_iter().map(|w| w.0.node).collect(), cost))
}

/// The least budget with which `procs` of `cands` are within budget: the `procs`-th lowest cost.
/// The same under every placement, since admission does not depend on it.
pub(crate) fn least_budget(cands: &[Candidate], procs: usize) -> Option<Money> {
    let mut costs: Vec<Money> = cands.iter().filter_map(|c| c.cost).collect();
    if procs == 0 || costs.len() < procs {
        return None;
    }
    costs.sort();
    Some(costs[procs - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The streaming chooser picks the same nodes, in the same order, at the same cost as
        /// `choose` over all candidates, under every placement, ties included (keys drawn
        /// from a few values so that equal keys are common).
        #[test]
        fn chooser_is_choose(
            keys in proptest::collection::vec((0u8..4, 0u8..4, 0u8..4, proptest::option::of(0i64..6)), 0..40),
            procs in 0usize..6,
            budget in 0i64..7,
            p in 0usize..3,
            d in 0usize..3,
        ) {
            let cands: Vec<Candidate> = keys
                .iter()
                .enumerate()
                .map(|(node, &(f, l, r, c))| Candidate {
                    node,
                    res_free: f64::from(f) - 1.0,
                    load: f64::from(l) / 2.0,
                    rate: f64::from(r),
                    cost: c.map(Money),
                })
                .collect();
            let (p, d) = (Placement::ALL[p], Placement::ALL[d]);
            let mut ch = Chooser::new(procs, Money(budget), p, d);
            // Fed in reverse, to show the input order does not matter.
            for c in cands.iter().rev() {
                ch.push(*c);
            }
            proptest::prop_assert_eq!(ch.finish(), choose(&cands, procs, Money(budget), p, d));
            // Asked before each push, as a pass asks before pricing a node: a candidate it
            // leaves out is not pushed, and the choice is the same.
            let mut asked = Chooser::new(procs, Money(budget), p, d);
            let mut left_out = 0;
            for c in &cands {
                if asked.leaves_out(c.res_free, c.load, c.node) {
                    left_out += 1;
                } else {
                    asked.push(*c);
                }
            }
            proptest::prop_assert!(p == Placement::Cheapest || d == Placement::Cheapest || procs > 0 || left_out == cands.len());
            proptest::prop_assert_eq!(asked.finish(), choose(&cands, procs, Money(budget), p, d));
            // Split among three choosers by a drawn part per candidate, then merged (as the
            // stripes of `libra+$`'s admission are): the same choice.
            let mut parts: Vec<Chooser> = (0..3).map(|_| Chooser::new(procs, Money(budget), p, d)).collect();
            for (c, &(f, l, r, _)) in cands.iter().zip(&keys) {
                parts[usize::from(f ^ l ^ r) % 3].push(*c);
            }
            let mut merged = Chooser::new(procs, Money(budget), p, d);
            for part in parts {
                merged.merge(part);
            }
            proptest::prop_assert_eq!(merged.finish(), choose(&cands, procs, Money(budget), p, d));
        }
    }

    /// The nodes a choice gives are held for the job's life (the simulator's record, the
    /// server's job), so they come in memory of their own size, not the chooser's heap's.
    #[test]
    fn a_choice_holds_no_more_memory_than_its_nodes() {
        let procs = 64;
        let mut ch = Chooser::new(procs, Money(1_000), Placement::BestFit, Placement::BestFit);
        for node in 0..100 {
            let res_free = f64::from(node as u32 % 7);
            ch.push(Candidate { node, res_free, load: 0.0, rate: 0.0, cost: Some(Money(1)) });
        }
        let (nodes, _) = ch.finish().expect("64 of 100 nodes within budget");
        assert_eq!(nodes.len(), procs);
        assert_eq!(nodes.capacity(), procs, "the nodes' vector is only as large as they are");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// When the chooser settles a choice with nodes known only within bounds
        /// (`finish_with_unread`), it is `choose`'s over every candidate with each of those
        /// nodes at any RESFree within its bounds and a cost between its costs at the bounds
        /// (tried at both ends and a point between, each with its own cost). Keys and bounds
        /// drawn from a few values, so that a bound often meets a key or another bound; costs
        /// around the budget, so that some are undecided.
        #[test]
        fn a_choice_settled_by_bounds_is_choose_at_any_value_within_them(
            exact in proptest::collection::vec((1u8..12, proptest::option::of(0i64..8)), 0..12),
            unread in proptest::collection::vec((1u8..12, 0u8..4, 0i64..8, 0i64..3, 0u8..4), 0..4),
            procs in 1usize..5,
            budget in 0i64..8,
        ) {
            let cands: Vec<Candidate> = exact
                .iter()
                .enumerate()
                .map(|(node, &(f, c))| Candidate { node, res_free: f64::from(f), load: 0.0, rate: 0.0, cost: c.map(Money) })
                .collect();
            let first = cands.len();
            // Bounds [f, f + w], the cost `hi` at the lower bound falling by `drop` to the upper.
            let unread: Vec<Unread> = unread
                .iter()
                .enumerate()
                .map(|(i, &(f, w, hi, drop, none))| Unread {
                    node: first + i,
                    res_free_down: f64::from(f),
                    res_free_up: f64::from(f) + f64::from(w),
                    cost_at_down: (none != 0).then_some(Money(hi)),
                    cost_at_up: (none != 0 || drop == 0).then_some(Money(hi - drop)),
                })
                .collect();
            let mut ch = Chooser::new(procs, Money(budget), Placement::BestFit, Placement::BestFit);
            for c in &cands {
                ch.push(*c);
            }
            let Ok(settled) = ch.finish_with_unread(&unread) else { return Ok(()) };
            // Each unread node at a point of its bounds (the lower, the upper, or a quarter
            // in), with a cost between its two costs that falls as RESFree rises.
            for t in [0.0, 1.0, 0.25] {
                let mut all = cands.clone();
                for u in &unread {
                    let res_free = u.res_free_down + t * (u.res_free_up - u.res_free_down);
                    let cost = match (u.cost_at_down, u.cost_at_up) {
                        (Some(d), Some(up)) => Some(Money(d.0 - ((d.0 - up.0) as f64 * t).round() as i64)),
                        (None, up) if t == 1.0 => up,
                        _ => None,
                    };
                    all.push(Candidate { node: u.node, res_free, load: 0.0, rate: 0.0, cost });
                }
                proptest::prop_assert_eq!(&settled, &choose(&all, procs, Money(budget), Placement::BestFit, Placement::BestFit));
            }
        }
    }

    #[test]
    fn names_round_trip_and_a_bad_one_lists_the_accepted() {
        for p in Placement::ALL {
            assert_eq!(p.as_str().parse::<Placement>(), Ok(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
        }
        let e = "worst-fit".parse::<Placement>().unwrap_err().to_string();
        assert!(e.starts_with("placement:") && e.contains("best-fit, least-loaded, cheapest"), "{e}");
    }

    #[test]
    fn each_placement_orders_by_its_own_key() {
        let c = |node, res_free, load, rate, cents| Candidate {
            node,
            res_free,
            load,
            rate,
            cost: Some(Money(cents)),
        };
        // Node 0: fullest and dearest; node 1: least loaded; node 2: cheapest.
        let cands = [c(0, 10.0, 0.9, 3.0, 300), c(1, 50.0, 0.1, 2.0, 200), c(2, 40.0, 0.2, 1.0, 100)];
        let pick = |p, procs, budget| choose(&cands, procs, Money(budget), p, Placement::BestFit);
        assert_eq!(pick(Placement::BestFit, 1, 1000), Some((vec![0], Money(300))));
        assert_eq!(pick(Placement::LeastLoaded, 1, 1000), Some((vec![1], Money(200))));
        assert_eq!(pick(Placement::Cheapest, 1, 1000), Some((vec![2], Money(100))));
        // Two nodes: the highest cost of the two is charged; cheapest pays the least possible.
        assert_eq!(pick(Placement::BestFit, 2, 1000), Some((vec![0, 2], Money(300))));
        assert_eq!(pick(Placement::Cheapest, 2, 1000), Some((vec![2, 1], Money(200))));
        assert_eq!(least_budget(&cands, 2), Some(Money(200)));
        // Best fit within budget skips the nodes above it.
        assert_eq!(pick(Placement::BestFit, 1, 250), Some((vec![2], Money(100))));
        assert_eq!(pick(Placement::BestFit, 3, 250), None);
        // Equal prices: the default order decides.
        let flat = [c(0, 10.0, 0.9, 1.0, 100), c(1, 50.0, 0.1, 1.0, 100)];
        let cheapest = |default| choose(&flat, 1, Money(100), Placement::Cheapest, default).unwrap().0;
        assert_eq!(cheapest(Placement::BestFit), vec![0]);
        assert_eq!(cheapest(Placement::LeastLoaded), vec![1]);
    }
}
