//! A lower bound on a node's load (the float sum of its jobs' Algorithm 2 shares, in entry
//! order, as admission computes it) that admission reads in a few bytes per node, so that a node
//! it proves full is refused without reading its jobs.
//!
//! Each job contributes a line `a - g * t` in absolute time, valid from its last progress update
//! `t0` on; a node holds the sum of its jobs' lines, kept exactly (fixed-point integers: adding
//! and removing a job's line leaves no rounding behind), so commit, release and set_progress
//! update it in O(1) per node. The lines, with `R0 = E - cpu(t0)`, `L0 = D - t0`,
//! `s0 = R0 / L0`, the job progressing at rate `r` from `t0`:
//!
//! - **Faster than its share (`r >= s0`): the chord.** While work is left, the share is
//!   `(R0 - r*tau) / (L0 - tau) >= (R0 - r*tau) / L0 = s0 - (r / L0) * tau` (a smaller
//!   denominator, a numerator >= 0). Once the estimate is used up the share falls back to the
//!   admitted one (>= 0) while the line is <= 0; past the deadline `tau >= L0` so the line is
//!   `<= s0 - r <= 0`. In the simulator every job is here: admission keeps a node's weights
//!   within its capacity, so each job runs at least at its share (measured: no job below it).
//! - **Not progressing (`r == 0`, the server between reports): a constant.** The remaining work
//!   is the same float at every later instant and the time left only shrinks, so the computed
//!   share never falls until the deadline, and then it is the admitted share: the line is the
//!   least of the two, exactly (no rounding margin needed).
//! - **Overrun or past its deadline at `t0`: the admitted share**, exactly, for ever (the
//!   remaining work only falls and the time left only shrinks).
//! - **Anything else** (0 < r < s0, non-finite values, negative inputs): 0.
//!
//! Float rounding (u = 2^-53, every operation within a relative u). Chord case: the computed
//! share at `t >= t0` is at least the real chord minus `6.02u*s0 + 3.01u*E/L0` (the computed
//! `cpu` is within `3.01u*cpu` of `cpu(t0) + r*tau`; dividing by the computed time left, which
//! is at most `L0*(1+u)`, loses `3.01u` relatively; the computed `s0` is within `3.01u` of the
//! real one), so each chord is lowered by `16u * (raw0 + E / L0)`, its slope rounded up and its
//! intercept down onto the fixed-point grid with a margin for the products. The node's sum is
//! exact; reading it as floats at `t` loses at most `3u * (|a| + g*t)` (lowered by `8u` of
//! that); and the entry-order float sum of `k` shares is at least the real sum times
//! `1 - (k-1)u`, covered by `2^-40` when `k <= MAX_JOBS` (beyond that the bound is not used).
//! `Cluster::load_lower_bound` returns at most that float sum, and adding the job's share
//! rounds monotonically: a bound plus the share above the capacity proves the exact check
//! refuses the node.

/// Fixed-point units: intercepts in 2^-30, slopes in 2^-56 per second. A job's line is used
/// only while its intercept is below 2^24 and its slope below 1/4 per second (else the job
/// contributes 0), and the bound only on nodes of at most `MAX_JOBS` jobs, so the true sums fit
/// in i64 (256 * 2^54 and 256 * 2^54 units); they are kept with wrapping additions, exact modulo
/// 2^64, so they are right whenever the true sum fits, whatever came before.
const A_UNIT: f64 = 1_073_741_824.0; // 2^30
const G_UNIT: f64 = 72_057_594_037_927_936.0; // 2^56
const A_MAX: f64 = 16_777_216.0; // 2^24
const G_MAX: f64 = 0.25;

/// How many progress updates in a row may leave a job's line as it was, when each only advances
/// the record along its own rate: the same rate, to the bit, and the CPU-seconds the record
/// itself gives at the new instant, to the bit (`Cluster::set_progress`; the simulator's update of
/// a job whose rate did not change, 85% of its updates on 10,000 nodes). The line stays a lower
/// bound on the share computed from the new record, at every instant from the update on:
///
/// - **A constant line, or 0**: the record at rate 0 keeps its CPU-seconds, so its shares are the
///   same floats; an overrun or passed deadline stays so, since the CPU-seconds never fall
///   (rounding is monotonic) and the clock never goes back.
/// - **A chord**, made from the record `(cpu0, t0, r)`: after `k` such steps the record is
///   `(cpu_k, t_k, r)`, each `cpu_i` the float `cpu_{i-1} + r * (t_i - t_{i-1})`, within
///   `3.01u * cpu_i` of the real sum. So the CPU-seconds the record gives at `t >= t_k` are
///   within `(k + 1) * 3.01u * cpu(t)` of the real `cpu0 + r * (t - t0)`, where one step had
///   `3.01u * cpu(t)`. The chord's argument (the module comment) runs as before with that
///   error: the computed share is at least the real chord minus `6.02u*s0 + (k+1)*3.01u*E/L0`
///   (dividing by a time left at most `L0` keeps the error over `L0`, and `cpu <= E` while work
///   is left; past it, or past the deadline, the share is >= 0 and the chord below the error).
///   The chord is lowered by `16u * (raw0 + E/L0)`: with `k <= 3`, `4 * 3.01u = 12.04u` is
///   within the `16u` on `E/L0`, and `6.02u * s0` within the `16u` on `raw0 >= s0`.
///
/// A kept line says nothing before the update that kept it: `Cluster::bound_clock` gives no
/// bound at an instant before the latest update of any line, kept or made.
pub const MAX_STALE_STEPS: u8 = 3;

/// Jobs per node past which the bound is not used (the sums' range, and the float sum's
/// rounding, `(k-1)u`, within the `2^-40` margin).
pub const MAX_JOBS: usize = 256;

const U: f64 = f64::EPSILON / 2.0;

/// One job's line `a - g*t` (in the fixed-point units), valid from its last update on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLine {
    pub a: i64,
    pub g: i64,
}

/// A constant line at or below `v` (v finite, in [0, cap]).
fn constant(v: f64) -> JobLine {
    if !(0.0..A_MAX).contains(&v) {
        return JobLine::default();
    }
    JobLine { a: (v * A_UNIT).floor() as i64, g: 0 }
}

/// The line of a job with estimate `e`, absolute deadline `d`, admitted share `admitted` and
/// cap `cap`, that has done `cpu` CPU-seconds at `t0` and progresses at `rate` from then on
/// (the inputs of `share::required_share`, as a node entry holds them).
pub fn job_line(e: f64, d: f64, admitted: f64, cap: f64, cpu: f64, t0: f64, rate: f64) -> JobLine {
    let finite = [e, d, admitted, cap, cpu, t0, rate].iter().all(|x| x.is_finite());
    if !finite || rate < 0.0 || cpu < 0.0 || t0 < 0.0 || e <= 0.0 || cap < 0.0 {
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
    // The chord, lowered by the rounding margin, with its slope rounded up onto the grid
    // (t >= t0, so a steeper line is lower) and its intercept down.
    let margin = 16.0 * U * (raw0 + e / left0);
    let g = (rate / left0 * (1.0 + 8.0 * U) * G_UNIT).ceil();
    if !(0.0..G_MAX * G_UNIT).contains(&g) {
        return JobLine::default();
    }
    let g_real = g / G_UNIT; // exact: a power-of-two scaling
    let at_zero = (s0 - margin) + g_real * t0;
    let lowered = at_zero - 8.0 * U * (s0 + margin + g_real * t0);
    if !(-A_MAX..A_MAX).contains(&lowered) {
        return JobLine::default();
    }
    JobLine { a: (lowered * A_UNIT).floor() as i64, g: g as i64 }
}

/// A node's sum of its jobs' lines (exact): what admission reads per node, 16 bytes.
///
/// Each line holds from its job's last update on, so the sum holds from the latest of them on.
/// That instant is kept by the cluster for all nodes at once (`Cluster::bound_clock`, the
/// latest update of any node): a pass over 10,000 nodes then reads 16 bytes a node here, not
/// 24, and one comparison an arrival rather than one a node. No node's bound is given before
/// its own latest update, since no node's is given before the cluster's.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeLine {
    a: i64,
    g: i64,
}

impl NodeLine {
    /// A job's line joins the node's (the caller keeps the instant it holds from).
    pub fn add(&mut self, l: JobLine) {
        self.a = self.a.wrapping_add(l.a);
        self.g = self.g.wrapping_add(l.g);
    }

    /// A job's line changed (its progress was set; the caller keeps the instant).
    pub fn replace(&mut self, old: JobLine, new: JobLine) {
        self.a = self.a.wrapping_add(new.a.wrapping_sub(old.a));
        self.g = self.g.wrapping_add(new.g.wrapping_sub(old.g));
    }

    pub fn remove(&mut self, l: JobLine) {
        self.a = self.a.wrapping_sub(l.a);
        self.g = self.g.wrapping_sub(l.g);
    }

    /// The node has no jobs left: its sum is exactly 0 and holds at any time.
    pub fn clear(&mut self) {
        *self = NodeLine::default();
    }

    /// At most the float sum of the node's `jobs` shares at `now` (see the module comment),
    /// for a `now` at or after the latest update of its jobs' lines (`Cluster::bound_clock`
    /// gives NaN before it); 0 when it cannot say.
    ///
    /// The value is computed whatever the case and then chosen, with no branch: a pass over
    /// 10,000 nodes reads this for each, and branches on the cases it cannot say mispredicted.
    #[inline(always)]
    pub fn lower_bound(&self, now: f64, jobs: usize) -> f64 {
        let usable = !now.is_nan() & (jobs <= MAX_JOBS);
        let a = self.a as f64 / A_UNIT;
        let p = self.g as f64 / G_UNIT * now;
        let v = a - p;
        let lo = v - 8.0 * U * (a.abs() + p.abs());
        let lo = lo * (1.0 - 1.0 / 1_099_511_627_776.0); // 1 - 2^-40
        if usable {
            lo
        } else {
            0.0
        }
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The bound never exceeds the entry-order float sum of the shares, at the history's
        /// end, later, and at every instant where a share changes branch, on clocks near 0 and
        /// far from it (where intercepts `g * t0` are large).
        #[test]
        fn load_lower_bound_is_at_most_node_load(
            ops in proptest::collection::vec(op(), 0..50),
            t0 in prop_oneof![Just(0.0), Just(3.0e7), Just(1.7e9)],
            later in proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..2000.0], 4),
        ) {
            let (c, end) = build(&nodes(), &ops, t0);
            let mut instants: Vec<f64> = later.iter().map(|l| end + l).collect();
            instants.extend(delicate(&c, end));
            for t in instants {
                for n in 0..c.node_count() {
                    let bound = c.load_lower_bound(n, t);
                    let load = c.node_load(n, t);
                    prop_assert!(bound <= load, "node {} at {}: bound {} above load {}", n, t, bound, load);
                }
            }
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
        // Ahead of its share (1 > 800 / 900): the chord from 0.888... down at 1/900 per second.
        c.set_progress(1, 100.0, 1.0, 100.0).unwrap();
        let b = c.load_lower_bound(0, 150.0);
        let chord = 800.0 / 900.0 - 50.0 / 900.0;
        assert!(b <= c.node_load(0, 150.0) && (b - chord).abs() < 1e-8, "{b} vs {chord}");
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
        line.add(job_line(900.0, 1000.0, 0.9, 1.0, 100.0, 100.0, 1.0));
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
