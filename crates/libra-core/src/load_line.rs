//! A lower bound on a node's load (the float sum of its jobs' Algorithm 2 shares, in entry
//! order, as admission computes it) that admission reads in a few bytes per node, so that a node
//! it proves full is refused without reading its jobs.
//!
//! Each job contributes a polynomial `a + b*tau + c*tau^2` in `tau = t - base` (the cluster's
//! `base`, an instant at or before every query; `Cluster::bound_clock`), valid from its last
//! progress update `t0` on; a node holds the sum of its jobs' polynomials, kept exactly
//! (fixed-point integers: adding and removing a job's leaves no rounding behind), so commit,
//! release and set_progress update it in O(1) per node. With `R0 = E - cpu(t0)`, `L0 = D - t0`,
//! `s0 = R0 / L0`, `tau' = t - t0`, the job progressing at rate `r` from `t0`:
//!
//! - **Faster than its share (`r >= s0`, `s0` within the cap): the quadratic.** While work and
//!   time are left the share is `(R0 - r*tau') / (L0 - tau')`, and `1 / (L0 - tau') >=
//!   1 / L0 + tau' / L0^2` (`1 / (1 - x) >= 1 + x`), so the share is at least
//!   `q(tau') = (R0 - r*tau') * (1 / L0 + tau' / L0^2)`: the same value and the same slope at
//!   `t0`, where the chord `s0 - (r / L0) * tau'` (the bound before the thirty-fifth pass) falls
//!   at `r / L0` from the start. Once the estimate is used up (`tau' >= R0 / r`) `q <= 0`,
//!   and past the deadline (`tau' >= L0 >= R0 / r`) too, while the share is then the admitted
//!   one (>= 0). `q` falls from `s0 <= cap`, so the cap's clamp never cuts under it. In the
//!   simulator every job is here: admission keeps a node's weights within its capacity, so
//!   each job runs at least at its share (measured: no job below it).
//! - **The same, with `s0` above the cap: the chord from the cap**, `min(s0, cap) - (r / L0) *
//!   tau'` (the share is the least of the cap and a concave curve above the chord); also where
//!   the quadratic's coefficients leave the grid's range (a deadline a few seconds ahead).
//! - **Not progressing (`r == 0`, the server between reports): a constant.** The remaining work
//!   is the same float at every later instant and the time left only shrinks, so the computed
//!   share never falls until the deadline, and then it is the admitted share: the constant is
//!   the least of the two, exactly (no rounding margin needed).
//! - **Overrun or past its deadline at `t0`: the admitted share**, exactly, for ever (the
//!   remaining work only falls and the time left only shrinks).
//! - **Anything else** (0 < r < s0, non-finite values, negative inputs, an update too far
//!   from the base to subtract it exactly): 0.
//!
//! Float rounding (u = 2^-53, every operation within a relative u). The CPU-seconds the record
//! gives at `t` are within `(k + 1) * 3.01u * cpu(t)` of the real `cpu(t0) + r * tau'` after `k
//! <= MAX_STALE_STEPS` kept steps, so the computed numerator is at least the real `R0 - r*tau'`
//! less `13.1u * E` (while it is positive; else the share is >= 0 and so is the bound, below),
//! and the computed quotient at least that numerator over the real time left, times `1 - 2u`.
//! So the share is at least `P(tau') = (R0 - r*tau' - 13.1u*E) * (1/L0 + tau'/L0^2)` less
//! `2u * E / L0` (where `P >= 0`; where it is negative the share's `>= 0` covers it). `P` is
//! `q` with its constant lowered by `13.1u*E/L0` and its linear coefficient by `13.1u*E/L0^2`.
//! The coefficients computed from the rounded `R0`, `L0`, `s0` are within `4u` of the real ones
//! relative to `s0`, `r/L0` and `E/L0^2`: each is lowered by `64u` times those (the
//! quadratic's, negative, made `1 + 64u` times steeper), and since `tau' >= 0` a polynomial
//! whose every coefficient is lower is lower. Re-centred at the base (`tau = tau' + tau0`,
//! `tau0 = t0 - base` exact by Sterbenz's lemma or no line), each coefficient is lowered by `8u`
//! times the terms that make it, and rounded down onto the grid: `tau >= 0` at every query, so
//! that too only lowers. The node's sum is exact; reading it as floats at `tau` loses at most
//! `5u * (|a| + |b*tau| + |c*tau^2|)` (lowered by `8u` of that); and the entry-order float sum
//! of `k` shares is at least the real sum times `1 - (k-1)u`, covered by `2^-40` when `k <=
//! MAX_JOBS` (beyond that the bound is not used). `Cluster::load_lower_bound` returns at most
//! that float sum, and adding the job's share rounds monotonically: a bound plus the share
//! above the capacity proves the exact check refuses the node.

/// Fixed-point units: constants in 2^-30, linear coefficients in 2^-46 per second, quadratic
/// ones in 2^-62 per second squared, so that each rounds a bound by at most 2^-30 at one
/// `BASE_SPAN` from the base. A job's polynomial is used only while its coefficients are below
/// 2^24, 2^8 and 2^-8 (else the chord, else 0), and the bound only on nodes of at most
/// `MAX_JOBS` jobs, so the true sums fit in i64 (256 * 2^54 units each); they are kept with
/// wrapping additions, exact modulo 2^64, so they are right whenever the true sum fits,
/// whatever came before.
const A_UNIT: f64 = 1_073_741_824.0; // 2^30
const B_UNIT: f64 = 70_368_744_177_664.0; // 2^46
const C_UNIT: f64 = 4_611_686_018_427_387_904.0; // 2^62
const A_MAX: f64 = 16_777_216.0; // 2^24
const B_MAX: f64 = 256.0; // 2^8
const C_MAX: f64 = 1.0 / 256.0; // 2^-8

/// How far (seconds) the clock may run past the base before the cluster moves the base to now
/// and makes every job's polynomial again from its record (`Cluster::rebase_bounds_if_due`):
/// 2^16 s, about 18 hours, so that the grid's rounding stays within 2^-30 of a share.
pub const BASE_SPAN: f64 = 65_536.0;

/// How many progress updates in a row may leave a job's polynomial as it was, when each only
/// advances the record along its own rate: the same rate, to the bit, and the CPU-seconds the
/// record itself gives at the new instant, to the bit (`Cluster::set_progress`; the simulator's
/// update of a job whose rate did not change, 85% of its updates on 10,000 nodes). The
/// polynomial stays a lower bound on the share computed from the new record, at every instant
/// from the update on:
///
/// - **A constant, or 0**: the record at rate 0 keeps its CPU-seconds, so its shares are the
///   same floats; an overrun or passed deadline stays so, since the CPU-seconds never fall
///   (rounding is monotonic) and the clock never goes back.
/// - **A quadratic or chord**, made from the record `(cpu0, t0, r)`: after `k` such steps the
///   record is `(cpu_k, t_k, r)`, each `cpu_i` the float `cpu_{i-1} + r * (t_i - t_{i-1})`,
///   within `3.01u * cpu_i` of the real sum. So the CPU-seconds the record gives at `t >= t_k`
///   are within `(k + 1) * 3.01u * cpu(t)` of the real `cpu0 + r * (t - t0)`: with `k <= 3`,
///   `12.04u * E`, within the `13.1u * E` the module comment allows for.
///
/// A kept line says nothing before the update that kept it: `Cluster::bound_clock` gives no
/// bound at an instant before the latest update of any line, kept or made.
pub const MAX_STALE_STEPS: u8 = 3;

/// Jobs per node past which the bound is not used (the sums' range, and the float sum's
/// rounding, `(k-1)u`, within the `2^-40` margin).
pub const MAX_JOBS: usize = 256;

const U: f64 = f64::EPSILON / 2.0;

/// One job's polynomial `a + b*tau + c*tau^2` (in the fixed-point units), `tau` from the
/// cluster's base, valid from its last update on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLine {
    pub a: i64,
    pub b: i64,
    pub c: i64,
}

/// A constant at or below `v` (v finite, in [0, cap]).
fn constant(v: f64) -> JobLine {
    if !(0.0..A_MAX).contains(&v) {
        return JobLine::default();
    }
    JobLine { a: (v * A_UNIT).floor() as i64, b: 0, c: 0 }
}

/// The polynomial `k0 + k1*tau' + k2*tau'^2` in `tau' = tau - tau0` (each coefficient already
/// lowered for the share's rounding) re-centred at the base, each coefficient lowered by the
/// rounding of re-centring and rounded down onto the grid; `None` outside the grid's range.
fn centred(k0: f64, k1: f64, k2: f64, tau0: f64) -> Option<JobLine> {
    let (t, t2) = (tau0.abs(), tau0 * tau0);
    let a = (k0 - k1 * tau0 + k2 * t2) - 8.0 * U * (k0.abs() + k1.abs() * t + k2.abs() * t2);
    let b = (k1 - 2.0 * k2 * tau0) - 8.0 * U * (k1.abs() + 2.0 * k2.abs() * t);
    let c = k2;
    let fits = (-A_MAX..A_MAX).contains(&a) && (-B_MAX..B_MAX).contains(&b) && (-C_MAX..C_MAX).contains(&c);
    fits.then(|| JobLine {
        a: (a * A_UNIT).floor() as i64,
        b: (b * B_UNIT).floor() as i64,
        c: (c * C_UNIT).floor() as i64,
    })
}

/// The polynomial of a job with estimate `e`, absolute deadline `d`, admitted share
/// `admitted` and cap `cap`, that has done `cpu` CPU-seconds at `t0` and progresses at `rate`
/// from then on (the inputs of `share::required_share`, as a node entry holds them), in
/// `tau = t - base`.
#[allow(clippy::too_many_arguments)]
pub fn job_line(e: f64, d: f64, admitted: f64, cap: f64, cpu: f64, t0: f64, rate: f64, base: f64) -> JobLine {
    let finite = [e, d, admitted, cap, cpu, t0, rate, base].iter().all(|x| x.is_finite());
    if !finite || rate < 0.0 || cpu < 0.0 || t0 < 0.0 || e <= 0.0 || cap < 0.0 || base < 0.0 {
        return JobLine::default();
    }
    let fallback = admitted.clamp(0.0, cap);
    let (rem0, left0) = (e - cpu, d - t0);
    if rem0 <= 0.0 || left0 <= 0.0 {
        return constant(fallback);
    }
    let raw0 = rem0 / left0;
    let s0 = raw0.min(cap);
    if rate == 0.0 {
        return constant(s0.min(fallback));
    }
    if rate < raw0 {
        return JobLine::default();
    }
    // The update's instant from the base, exactly (Sterbenz: within a factor 2 of it).
    if !(base == 0.0 || (t0 >= 0.5 * base && t0 <= 2.0 * base)) {
        return JobLine::default();
    }
    let tau0 = t0 - base;
    let m = 64.0 * U;
    let over = e / left0; // >= raw0
    let slope = rate / left0;
    let quadratic = (raw0 <= cap)
        .then(|| {
            let k0 = raw0 - m * over;
            let k1 = (raw0 - rate) / left0 - m * (slope + over / left0);
            let k2 = -(slope / left0) * (1.0 + m);
            centred(k0, k1, k2, tau0)
        })
        .flatten();
    quadratic
        .or_else(|| centred(s0 - m * over, -slope * (1.0 + m) - m * over / left0, 0.0, tau0))
        .unwrap_or_default()
}

/// A node's sum of its jobs' polynomials (exact): what admission reads per node, 24 bytes.
///
/// Each polynomial holds from its job's last update on, so the sum holds from the latest of
/// them on. That instant is kept by the cluster for all nodes at once (`Cluster::bound_clock`,
/// the latest update of any node): a pass over 10,000 nodes then reads 24 bytes a node here,
/// and one comparison an arrival rather than one a node. No node's bound is given before its
/// own latest update, since no node's is given before the cluster's.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeLine {
    a: i64,
    b: i64,
    c: i64,
}

impl NodeLine {
    /// A job's polynomial joins the node's (the caller keeps the instant it holds from).
    pub fn add(&mut self, l: JobLine) {
        self.a = self.a.wrapping_add(l.a);
        self.b = self.b.wrapping_add(l.b);
        self.c = self.c.wrapping_add(l.c);
    }

    /// A job's polynomial changed (its progress was set; the caller keeps the instant).
    pub fn replace(&mut self, old: JobLine, new: JobLine) {
        self.a = self.a.wrapping_add(new.a.wrapping_sub(old.a));
        self.b = self.b.wrapping_add(new.b.wrapping_sub(old.b));
        self.c = self.c.wrapping_add(new.c.wrapping_sub(old.c));
    }

    pub fn remove(&mut self, l: JobLine) {
        self.a = self.a.wrapping_sub(l.a);
        self.b = self.b.wrapping_sub(l.b);
        self.c = self.c.wrapping_sub(l.c);
    }

    /// The node has no jobs left: its sum is exactly 0 and holds at any time.
    pub fn clear(&mut self) {
        *self = NodeLine::default();
    }

    /// At most the float sum of the node's `jobs` shares at `tau` from the cluster's base (see
    /// the module comment), for a `tau >= 0` at or after the latest update of its jobs'
    /// polynomials (`Cluster::bound_clock` gives NaN otherwise); 0 when it cannot say.
    ///
    /// The value is computed whatever the case and then chosen, with no branch: a pass over
    /// 10,000 nodes reads this for each, and branches on the cases it cannot say mispredicted.
    #[inline(always)]
    pub fn lower_bound(&self, tau: f64, jobs: usize) -> f64 {
        let usable = !tau.is_nan() & (jobs <= MAX_JOBS);
        let a = self.a as f64 / A_UNIT;
        let p = self.b as f64 / B_UNIT * tau;
        let q = self.c as f64 / C_UNIT * tau * tau;
        let v = (a + p) + q;
        let lo = v - 8.0 * U * ((a.abs() + p.abs()) + q.abs());
        let lo = lo * (1.0 - 1.0 / 1_099_511_627_776.0); // 1 - 2^-40
        if usable {
            lo
        } else {
            0.0
        }
    }
}

/// Every node's `NodeLine`, one array per coefficient, so that a screen over a word's nodes
/// loads each coefficient of four or eight nodes in one vector (as one 24-byte struct per
/// node, the screen took them apart element by element).
#[derive(Debug, Clone, Default)]
pub struct NodeLines {
    a: Vec<i64>,
    b: Vec<i64>,
    c: Vec<i64>,
}

impl NodeLines {
    pub fn push(&mut self, l: NodeLine) {
        self.a.push(l.a);
        self.b.push(l.b);
        self.c.push(l.c);
    }

    pub fn len(&self) -> usize {
        self.a.len()
    }

    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    #[inline(always)]
    pub fn get(&self, i: usize) -> NodeLine {
        NodeLine { a: self.a[i], b: self.b[i], c: self.c[i] }
    }

    fn with(&mut self, i: usize, f: impl FnOnce(&mut NodeLine)) {
        let mut l = self.get(i);
        f(&mut l);
        (self.a[i], self.b[i], self.c[i]) = (l.a, l.b, l.c);
    }

    /// `NodeLine::add` on node `i`'s.
    pub fn add(&mut self, i: usize, l: JobLine) {
        self.with(i, |n| n.add(l));
    }

    /// `NodeLine::replace` on node `i`'s.
    pub fn replace(&mut self, i: usize, old: JobLine, new: JobLine) {
        self.with(i, |n| n.replace(old, new));
    }

    /// `NodeLine::remove` on node `i`'s.
    pub fn remove(&mut self, i: usize, l: JobLine) {
        self.with(i, |n| n.remove(l));
    }

    /// `NodeLine::clear` on node `i`'s.
    pub fn clear(&mut self, i: usize) {
        self.with(i, NodeLine::clear);
    }

    /// Every node's cleared.
    pub fn clear_all(&mut self) {
        for v in [&mut self.a, &mut self.b, &mut self.c] {
            v.iter_mut().for_each(|x| *x = 0);
        }
    }

    /// Nodes `lo..hi`.
    #[inline]
    pub fn slice(&self, lo: usize, hi: usize) -> NodeLinesSlice<'_> {
        NodeLinesSlice { a: &self.a[lo..hi], b: &self.b[lo..hi], c: &self.c[lo..hi] }
    }
}

/// Some nodes' `NodeLine`s (`NodeLines::slice`).
#[derive(Debug, Clone, Copy)]
pub struct NodeLinesSlice<'a> {
    a: &'a [i64],
    b: &'a [i64],
    c: &'a [i64],
}

impl<'a> NodeLinesSlice<'a> {
    /// Each node's, in index order, zipped rather than indexed (see `Cluster::hot_word`).
    #[inline(always)]
    pub fn iter(&self) -> impl Iterator<Item = NodeLine> + 'a {
        self.a.iter().zip(self.b).zip(self.c).map(|((&a, &b), &c)| NodeLine { a, b, c })
    }
}

#[cfg(test)]
mod tests {
    use super::MAX_STALE_STEPS;
    use crate::cluster::Cluster;
    use crate::history::{build, node, secs, Op, Rate};
    use proptest::prelude::*;

    /// Progress at a rate relative to the job's share at that instant (0, below, at, just
    /// above, above it) or at an absolute rate.
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..12, proptest::collection::vec(0usize..3, 1..3), secs(1.0, 400.0), secs(20.0, 800.0), 1u32..3)
                .prop_map(|(job, nodes, estimate, deadline, cpt)| Op::Commit { job, nodes, estimate, deadline, cpt }),
            3 => (0u64..12, secs(0.0, 500.0), prop_oneof![
                    3 => prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(1.0 + 1e-15), Just(1.5), Just(40.0)].prop_map(Rate::OfShare),
                    1 => (0.0f64..2.0).prop_map(Rate::Absolute),
                 ])
                .prop_map(|(job, cpu, rate)| Op::Progress { job, cpu, rate }),
            1 => (0u64..12).prop_map(|job| Op::Release { job }),
            2 => secs(0.0, 300.0).prop_map(|secs| Op::Wait { secs }),
            3 => (0u64..12).prop_map(|job| Op::Advance { job }),
        ]
    }

    /// Three nodes of 0.5, 1 and 4 CPUs (with cpus_per_task 1 or 2, caps below and at the
    /// node).
    fn nodes() -> Vec<crate::cluster::NodeSpec> {
        [0.5, 1.0, 4.0].into_iter().enumerate().map(|(i, cpus)| node(i, cpus, 1.0)).collect()
    }

    /// Instants where a share changes branch or is most delicate: each job's deadline and the
    /// instant its estimate runs out at its rate, with the floats either side.
    fn delicate(c: &Cluster, now: f64) -> Vec<f64> {
        let mut out = Vec::new();
        for j in c.commitments() {
            let mut ts = vec![j.deadline_abs];
            if j.rate > 0.0 {
                ts.push(j.as_of + (j.estimate - j.cpu_done) / j.rate);
            }
            for t in ts {
                for x in [t.next_down(), t, t.next_up()] {
                    if x >= now && x.is_finite() {
                        out.push(x);
                    }
                }
            }
        }
        out
    }

    /// The bound is at most the load on every node of `c`, at `end`, at `end` plus each of
    /// `later`, and at every instant where a share changes branch.
    fn bound_at_most_load(c: &Cluster, end: f64, later: &[f64]) -> Result<(), TestCaseError> {
        let mut instants: Vec<f64> = later.iter().map(|l| end + l).collect();
        instants.extend(delicate(c, end));
        for t in instants {
            for n in 0..c.node_count() {
                let (bound, load) = (c.load_lower_bound(n, t), c.node_load(n, t));
                prop_assert!(bound <= load, "node {} at {}: bound {} above load {}", n, t, bound, load);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The bound never exceeds the entry-order float sum of the shares, at the history's
        /// end, later, and at every instant where a share changes branch, on clocks near 0 and
        /// far from it (where the base moves at the first update).
        #[test]
        fn load_lower_bound_is_at_most_node_load(
            ops in proptest::collection::vec(op(), 0..50),
            t0 in prop_oneof![Just(0.0), Just(3.0e7), Just(1.7e9)],
            later in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..2000.0], 4),
        ) {
            let (c, end) = build(&nodes(), &ops, t0);
            bound_at_most_load(&c, end, &later)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// A job's line kept through updates that only advance its record at its own rate
        /// (`MAX_STALE_STEPS`), in steps from a millionth of a second to hundreds, up to its
        /// deadline and past it, stays at or below the node's load at every step, between steps
        /// and at the instants where the share changes branch; on clocks near 0 and far from it.
        #[test]
        fn a_kept_line_stays_below_the_load(
            estimate in prop_oneof![Just(1.0), 1.0f64..5000.0],
            slack in prop_oneof![Just(1.0), 1.0f64..3.0, 1.0f64..1.000001],
            ahead in prop_oneof![Just(1.0), Just(1.0 + 1e-15), 1.0f64..1.5, Just(20.0)],
            t0 in prop_oneof![Just(0.0), Just(3.0e7), Just(1.7e9)],
            steps in proptest::collection::vec(prop_oneof![1e-6f64..1e-3, 0.0f64..10.0, 0.0f64..500.0], 1..40),
            other in proptest::option::of((1.0f64..500.0, 1.0f64..2.0)),
        ) {
            let mut c = Cluster::homogeneous(1, 1.0);
            let deadline = estimate * slack;
            c.commit(1, estimate, t0 + deadline, &[0], t0).unwrap();
            // Another job on the node, updated as any other, so that the node's line is a sum.
            if let Some((e, s)) = other {
                c.commit(2, e, t0 + e * s, &[0], t0).unwrap();
                let r = c.required_share(2, t0).unwrap();
                c.set_progress(2, 0.0, r * 1.1, t0).unwrap();
            }
            let rate = c.required_share(1, t0).unwrap() * ahead;
            c.set_progress(1, 0.0, rate, t0).unwrap();
            let mut now = t0;
            for step in steps {
                let before = now;
                now += step;
                let cpu = c.commitment(1).unwrap().cpu_at(now);
                c.set_progress(1, cpu, rate, now).unwrap();
                let mut instants = vec![now, now + 0.5 * step, now + step, now + 1e-6];
                instants.extend(delicate(&c, now));
                for t in instants {
                    let (bound, load) = (c.load_lower_bound(0, t), c.node_load(0, t));
                    prop_assert!(bound <= load, "at {} (step from {}): bound {} above load {}", t, before, bound, load);
                }
                // Nothing is said before the latest update.
                if before < now {
                    prop_assert_eq!(c.load_lower_bound(0, before), 0.0);
                }
            }
        }
    }

    /// Histories hours long, with waits that carry the clock past `BASE_SPAN` from the base
    /// (so the base moves and every job's polynomial is made again, some jobs live across it)
    /// and jobs of hours: the bound stays at most the load on every node, at the end, later and
    /// where a share changes branch.
    fn long_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..12, proptest::collection::vec(0usize..3, 1..3), secs(1.0, 50_000.0), secs(20.0, 150_000.0), 1u32..3)
                .prop_map(|(job, nodes, estimate, deadline, cpt)| Op::Commit { job, nodes, estimate, deadline, cpt }),
            3 => (0u64..12, secs(0.0, 20_000.0), prop_oneof![
                    3 => prop_oneof![Just(0.0), Just(1.0), Just(1.0 + 1e-15), Just(1.5), Just(40.0)].prop_map(Rate::OfShare),
                    1 => (0.0f64..2.0).prop_map(Rate::Absolute),
                 ])
                .prop_map(|(job, cpu, rate)| Op::Progress { job, cpu, rate }),
            1 => (0u64..12).prop_map(|job| Op::Release { job }),
            2 => prop_oneof![secs(0.0, 300.0), 10_000.0f64..70_000.0].prop_map(|secs| Op::Wait { secs }),
            3 => (0u64..12).prop_map(|job| Op::Advance { job }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn bounds_hold_across_moves_of_the_base(
            ops in proptest::collection::vec(long_op(), 0..40),
            t0 in prop_oneof![Just(0.0), Just(3.0e7), Just(1.7e9)],
            later in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..2000.0, 0.0f64..200_000.0], 4),
        ) {
            let (c, end) = build(&nodes(), &ops, t0);
            bound_at_most_load(&c, end, &later)?;
        }
    }

    /// When the clock passes `BASE_SPAN` from the base, the next update makes every job's
    /// polynomial again from its record: on a node that update did not touch, the bound is
    /// then as tight as one made fresh (within 10^-8 of the share, where the polynomial made
    /// 18 hours earlier is 0.017 below it), and a node's sum holds each of its jobs once.
    #[test]
    fn moving_the_base_makes_every_polynomial_again() {
        use super::BASE_SPAN;
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(1, 150_000.0, 300_000.0, &[0], 0.0).unwrap();
        c.commit(2, 20_000.0, 400_000.0, &[1], 0.0).unwrap();
        // Job 1 runs at twice its share (0.5), job 2 at its share (0.05).
        c.set_progress(1, 0.0, 1.0, 0.0).unwrap();
        c.set_progress(2, 0.0, 0.05, 0.0).unwrap();
        // The polynomial made at 0 s, as it stands before the move and at `t` below.
        let made_at_0 = |t: f64| (150_000.0 - t) * (1.0 / 300_000.0 + t / 9.0e10);
        let before = BASE_SPAN - 10.0;
        assert!((c.load_lower_bound(0, before) - made_at_0(before)).abs() < 1e-8);
        // An update of job 2 alone, past the span: the base moves, job 1 is made again too.
        let t = BASE_SPAN + 100.0;
        let cpu2 = c.commitment(2).unwrap().cpu_at(t);
        c.set_progress(2, cpu2, 0.05, t).unwrap();
        let (bound, load) = (c.load_lower_bound(0, t), c.node_load(0, t));
        assert!(bound <= load && load - bound < 1e-8, "{bound} vs {load}");
        assert!(bound > made_at_0(t) + 0.01, "made again at {t}: {bound}; made at 0: {}", made_at_0(t));
        let (bound, load) = (c.load_lower_bound(1, t), c.node_load(1, t));
        assert!(bound <= load && load - bound < 1e-8, "{bound} vs {load}");
        // Nothing is said before the move, and a release takes the job's part back out.
        assert_eq!(c.load_lower_bound(0, t - 1.0), 0.0);
        c.release(1);
        assert_eq!(c.load_lower_bound(0, t + 5.0), 0.0);
        assert!(c.load_lower_bound(1, t + 5.0) > 0.04);
    }

    /// A line is kept through `MAX_STALE_STEPS` updates that only advance the record, then made
    /// again from the record; any other update makes it again at once.
    #[test]
    fn a_line_is_kept_a_few_steps_then_made_again() {
        let mut c = Cluster::homogeneous(1, 1.0);
        c.commit(1, 900.0, 1000.0, &[0], 0.0).unwrap();
        c.set_progress(1, 0.0, 1.0, 0.0).unwrap();
        let at = 500.0;
        let first = c.load_lower_bound(0, at);
        let advance = |c: &mut Cluster, now: f64| {
            let cpu = c.commitment(1).unwrap().cpu_at(now);
            c.set_progress(1, cpu, 1.0, now).unwrap();
        };
        for k in 1..=MAX_STALE_STEPS {
            advance(&mut c, f64::from(k) * 10.0);
            assert_eq!(c.load_lower_bound(0, at).to_bits(), first.to_bits(), "step {k}: the line was kept");
        }
        // One more: the chord is made from the record at 40 s, higher than the one from 0 s.
        advance(&mut c, 40.0);
        let made = c.load_lower_bound(0, at);
        assert!(made > first, "{made} vs {first}");
        // A record moved off its own rate (a measurement) makes the line again at once.
        advance(&mut c, 50.0);
        let kept = c.load_lower_bound(0, at);
        assert_eq!(kept.to_bits(), made.to_bits());
        c.set_progress(1, 49.0, 1.0, 60.0).unwrap();
        assert_ne!(c.load_lower_bound(0, at).to_bits(), kept.to_bits());
    }

    /// The bound is useful: a job ahead of its share keeps most of its share on the bound for a
    /// while, a job at rate 0 its share exactly, and a release takes its part back out.
    #[test]
    fn load_lower_bound_proves_a_full_node() {
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(1, 900.0, 1000.0, &[0], 0.0).unwrap();
        // Rate 0: the admitted share, 0.9, less the grid's floor (2^-30) at most.
        assert!((c.load_lower_bound(0, 10.0) - 0.9).abs() < 1e-8);
        // Ahead of its share (1 > 800 / 900): the quadratic from 0.888..., (800 - tau) * (1 / 900
        // + tau / 900^2), 50 s on; within 0.003 of the share (750 / 850), where the chord of
        // earlier passes (0.888... down at 1/900 per second) was 0.049 below it.
        c.set_progress(1, 100.0, 1.0, 100.0).unwrap();
        let b = c.load_lower_bound(0, 150.0);
        let quadratic = 750.0 * (1.0 / 900.0 + 50.0 / (900.0 * 900.0));
        let chord = 800.0 / 900.0 - 50.0 / 900.0;
        assert!(b <= c.node_load(0, 150.0) && (b - quadratic).abs() < 1e-8, "{b} vs {quadratic}");
        assert!(b > chord + 0.04, "{b} vs the chord {chord}");
        // At the deadline and past it: at most 0 (the share is the admitted one, 0.9).
        assert!(c.load_lower_bound(0, 1000.0) <= 0.0 && c.load_lower_bound(0, 5000.0) <= 0.0);
        let chord = quadratic;
        // A second job: the sum of both lines.
        c.commit(2, 50.0, 650.0, &[0, 1], 150.0).unwrap();
        let b2 = c.load_lower_bound(0, 150.0);
        assert!((b2 - (chord + 0.1)).abs() < 1e-8, "{b2}");
        assert!((c.load_lower_bound(1, 150.0) - 0.1).abs() < 1e-8);
        // Before the latest update the bound says nothing.
        assert_eq!(c.load_lower_bound(0, 149.0), 0.0);
        c.release(2);
        assert!((c.load_lower_bound(0, 150.0) - chord).abs() < 1e-8);
        assert_eq!(c.load_lower_bound(1, 150.0), 0.0);
        c.release(1);
        assert_eq!(c.load_lower_bound(0, 150.0), 0.0);
    }

    /// Where the bound cannot say (no instant, an instant before the latest update of any
    /// node's lines, more jobs than the margin covers) it is 0, though it is computed and chosen
    /// without a branch; at the edges (the latest update's instant, `MAX_JOBS` jobs) it is the
    /// line.
    #[test]
    fn the_bound_is_0_where_it_cannot_say() {
        use super::{job_line, NodeLine, MAX_JOBS};
        let mut line = NodeLine::default();
        line.add(job_line(900.0, 1000.0, 0.9, 1.0, 100.0, 100.0, 1.0, 0.0));
        let at = line.lower_bound(150.0, 1);
        assert!(at > 0.8, "{at}");
        assert_eq!(line.lower_bound(100.0, MAX_JOBS).to_bits(), line.lower_bound(100.0, 1).to_bits());
        assert!(line.lower_bound(100.0, 1) > at);
        assert_eq!(line.lower_bound(f64::NAN, 1).to_bits(), 0.0f64.to_bits());
        assert_eq!(line.lower_bound(150.0, MAX_JOBS + 1).to_bits(), 0.0f64.to_bits());
        // Before the latest update, on the node updated or on any other: the cluster's clock
        // for the bounds is NaN there.
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(1, 900.0, 1000.0, &[0], 0.0).unwrap();
        c.set_progress(1, 100.0, 1.0, 100.0).unwrap();
        assert!(c.load_lower_bound(0, 100.0) > 0.8);
        for (node, t) in [(0, 99.0), (1, 99.0), (0, f64::NEG_INFINITY), (0, f64::NAN)] {
            assert_eq!(c.load_lower_bound(node, t).to_bits(), 0.0f64.to_bits(), "node {node} at {t}");
        }
    }
}
