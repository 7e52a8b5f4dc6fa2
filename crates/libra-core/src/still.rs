//! The jobs of a node whose every job is still (no progress rate assumed: the server's nodes
//! between reports), as admission reads them, with running totals that let `libra+$` bound the
//! node's load and eq. (6) without reading them (`LibraPlus::unread`).
//!
//! A still job's work left is one float at every instant, so the node keeps their sum exactly,
//! in fixed point: each job's work left rounded down and up onto a grid of 2^-32 seconds, the
//! two sums kept as integers. Adding and removing a job adds and subtracts the same integers, so
//! nothing drifts however long the server runs. The largest work left and the latest deadline
//! are kept as upper bounds: raised as jobs come, lowered only when the entries are rebuilt.

/// A job's entry as admission reads it while every job on its node is still: its work left
/// (`estimate - cpu_at(now)`, the same at every finite `now`) and its deadline. 16 bytes: a
/// node best fit piles 100,000 jobs onto is 1.6 MB to read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Still {
    pub remaining: f64,
    pub deadline_abs: f64,
}

/// The grid of the sums: 2^32 units a second.
const UNIT: f64 = 4_294_967_296.0;
/// The work left (seconds) below which a job is on the grid: up to 2^88 units, so that the
/// sums of up to 2^32 jobs fit in an `i128`.
const REMAINING_MAX: f64 = 72_057_594_037_927_936.0; // 2^56

/// Running totals of a node's still jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Totals {
    /// The sums of each job's work left in units, rounded down and rounded up.
    down: i128,
    up: i128,
    /// Jobs whose work left is not on the grid (none left, NaN, or 2^56 s and more): while
    /// there is one, the node gives no bounds.
    off_grid: usize,
    /// At least every job's work left.
    remaining_max: f64,
    /// At least every job's deadline.
    deadline_max: f64,
}

impl Totals {
    const EMPTY: Totals =
        Totals { down: 0, up: 0, off_grid: 0, remaining_max: 0.0, deadline_max: f64::NEG_INFINITY };

    /// `remaining` in units, rounded down and up; `None` off the grid. Scaling by a power of
    /// two is exact here (no overflow below `REMAINING_MAX`), and so are `floor`, `ceil` and the
    /// conversion of an integer-valued float below 2^127.
    fn units(remaining: f64) -> Option<(i128, i128)> {
        (remaining > 0.0 && remaining < REMAINING_MAX).then(|| {
            let x = remaining * UNIT;
            (x.floor() as i128, x.ceil() as i128)
        })
    }

    fn add(&mut self, q: &Still) {
        match Self::units(q.remaining) {
            Some((d, u)) => {
                self.down += d;
                self.up += u;
            }
            None => self.off_grid += 1,
        }
        // `max` passes over a NaN: such a job is off the grid (a NaN work left) or has no
        // first deadline to bound (a NaN deadline makes the node's `first_deadline` -inf).
        self.remaining_max = self.remaining_max.max(q.remaining);
        self.deadline_max = self.deadline_max.max(q.deadline_abs);
    }

    /// Takes out a job added before (its bounds stay: still bounds).
    fn remove(&mut self, q: &Still) {
        match Self::units(q.remaining) {
            Some((d, u)) => {
                self.down -= d;
                self.up -= u;
            }
            None => self.off_grid -= 1,
        }
    }
}

/// What the totals prove about a node's still jobs (`StillJobs::bounds`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StillBounds {
    /// How many jobs.
    pub jobs: usize,
    /// At most and at least the real sum of the jobs' work left (each > 0).
    pub remaining_sum_down: f64,
    pub remaining_sum_up: f64,
    /// At least every job's work left.
    pub remaining_max: f64,
    /// At least every job's deadline.
    pub deadline_max: f64,
}

/// The still entries of a node in entry order, and their totals.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StillJobs {
    jobs: Vec<Still>,
    totals: Totals,
}

impl Default for StillJobs {
    fn default() -> Self {
        StillJobs { jobs: Vec::new(), totals: Totals::EMPTY }
    }
}

impl StillJobs {
    #[inline(always)]
    pub fn as_slice(&self) -> &[Still] {
        &self.jobs
    }

    pub fn push(&mut self, q: Still) {
        self.totals.add(&q);
        self.jobs.push(q);
    }

    pub fn clear(&mut self) {
        self.jobs.clear();
        self.totals = Totals::EMPTY;
    }

    /// Replaces the `k`th entry (nothing when there is none).
    pub fn set(&mut self, k: usize, q: Still) {
        if let Some(old) = self.jobs.get_mut(k) {
            self.totals.remove(old);
            self.totals.add(&q);
            *old = q;
        }
    }

    /// Removes the `k`th entry; the last takes its place.
    pub fn swap_remove(&mut self, k: usize) {
        let q = self.jobs.swap_remove(k);
        self.totals.remove(&q);
        if self.jobs.is_empty() {
            self.totals = Totals::EMPTY;
        }
    }

    /// The entries anew (the totals exact again, the bounds tight).
    pub fn rebuild(&mut self, jobs: impl Iterator<Item = Still>) {
        self.clear();
        for q in jobs {
            self.push(q);
        }
    }

    /// The totals' bounds, when every job's work left is on the grid and there is a job.
    pub fn bounds(&self) -> Option<StillBounds> {
        let t = &self.totals;
        if self.jobs.is_empty() || t.off_grid > 0 {
            return None;
        }
        Some(StillBounds {
            jobs: self.jobs.len(),
            remaining_sum_down: at_most(t.down) / UNIT,
            remaining_sum_up: at_least(t.up) / UNIT,
            remaining_max: t.remaining_max,
            deadline_max: t.deadline_max,
        })
    }

    /// Whether the totals are those of the entries as they are now, and the bounds hold them
    /// (tests).
    #[cfg(test)]
    pub fn totals_hold(&self) -> bool {
        let mut fresh = StillJobs::default();
        fresh.rebuild(self.jobs.iter().copied());
        let (t, f) = (&self.totals, &fresh.totals);
        (t.down, t.up, t.off_grid) == (f.down, f.up, f.off_grid)
            && self.jobs.iter().all(|q| {
                q.remaining.is_nan() || q.remaining <= t.remaining_max && q.deadline_abs <= t.deadline_max
            })
    }
}

/// The greatest float at most `n` (>= 0). `as f64` rounds to nearest, and a float converts back
/// to an `i128` exactly below 2^127.
fn at_most(n: i128) -> f64 {
    let f = n as f64;
    if f as i128 > n {
        // f > n >= 0: a positive float, whose next below is one bit pattern down.
        f64::from_bits(f.to_bits() - 1)
    } else {
        f
    }
}

/// The least float at least `n` (>= 0).
fn at_least(n: i128) -> f64 {
    let f = n as f64;
    if (f as i128) < n {
        f64::from_bits(f.to_bits() + 1)
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The bounds hold the real sum of the work left whatever jobs came and went, and the
        /// integer sums are those of the jobs left (nothing drifts).
        #[test]
        fn the_sums_hold_the_work_left_of_the_jobs_there(
            ops in proptest::collection::vec((0usize..3, prop_oneof![1e-12f64..1e-3, 0.0f64..1e7, Just(0.0), Just(-1.0)], 0.0f64..1e9), 0..80),
        ) {
            let mut s = StillJobs::default();
            for (op, remaining, deadline_abs) in ops {
                let q = Still { remaining, deadline_abs };
                match op {
                    0 => s.push(q),
                    1 if !s.jobs.is_empty() => s.swap_remove(deadline_abs as usize % s.jobs.len()),
                    _ if !s.jobs.is_empty() => s.set(deadline_abs as usize % s.jobs.len(), q),
                    _ => {}
                }
                prop_assert!(s.totals_hold());
                match s.bounds() {
                    Some(b) => {
                        // The real sum, exactly: every work left is a multiple of 2^-1074, and
                        // the sum of a few of them in units of 2^-1074 is a big integer; here
                        // the sum of the floats in `f64` within a relative 2^-40 is enough to
                        // tell a bound that is off by a unit of the grid or more.
                        let sum: f64 = s.jobs.iter().map(|q| q.remaining).sum();
                        prop_assert!(b.remaining_sum_down <= sum * (1.0 + 1e-12));
                        prop_assert!(b.remaining_sum_up >= sum * (1.0 - 1e-12));
                        prop_assert!(b.remaining_sum_up - b.remaining_sum_down <= s.jobs.len() as f64 / UNIT * 1.001 + sum * 1e-15);
                        prop_assert!(s.jobs.iter().all(|q| q.remaining > 0.0));
                    }
                    None => prop_assert!(s.jobs.is_empty() || !s.jobs.iter().all(|q| q.remaining > 0.0)),
                }
            }
        }
    }

    #[test]
    fn conversions_round_the_way_they_say() {
        let big = (1i128 << 80) + 1;
        assert!(at_most(big) as i128 <= big && at_least(big) as i128 >= big);
        assert!(at_most(big) < at_least(big));
        assert_eq!(at_most(12), 12.0);
        assert_eq!(at_least(12), 12.0);
    }
}
