//! What a job costs its owner when it ends: the money rules of the running cluster.
//!
//! A user pays for the CPU their job used, pro rata to the price quoted at admission (the quote
//! is the price of the estimate: `quoted / (estimate x procs)` per CPU-second), and never more
//! than the budget. A job that ends early pays less than the quote; one that overruns its
//! estimate pays more, up to its budget, and is stopped when its budget is used up. Only a
//! promise the cluster broke through its own fault is free: a deadline missed by a job that did
//! not overrun its estimate, a job lost with its node or never started by its deadline, a job an
//! administrator cancelled.
//!
//! The simulator keeps the papers' metrics (a job that misses its deadline earns the cluster
//! nothing); these rules are the running cluster's ledger.

use crate::Money;
use serde::{Deserialize, Serialize};

/// CPU measured above the estimate by less than this fraction is measurement noise (the
/// kernel's accounting, a shell around the command), not an overrun.
pub const OVERRUN_TOLERANCE: f64 = 0.02;

/// What a job was quoted and what it used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// The price quoted at admission for the whole estimate (every node).
    pub quoted: Money,
    pub budget: Money,
    /// CPU-seconds per node the estimate promised.
    pub estimate: f64,
    pub procs: u32,
    /// CPU-seconds used, summed over the job's nodes.
    pub cpu_seconds: f64,
}

impl Usage {
    /// CPU-seconds the quote covers (every node).
    pub fn quoted_cpu(&self) -> f64 {
        self.estimate.max(0.0) * f64::from(self.procs.max(1))
    }

    /// The CPU used at the quoted rate, rounded down to the cent, never above the budget.
    pub fn owed(&self) -> Money {
        let cpu = if self.cpu_seconds.is_finite() { self.cpu_seconds.max(0.0) } else { 0.0 };
        let quoted_cpu = self.quoted_cpu();
        let budget = self.budget.0.max(0);
        if quoted_cpu <= 0.0 {
            return Money(self.quoted.0.clamp(0, budget));
        }
        let exact = self.quoted.0.max(0) as f64 * (cpu / quoted_cpu);
        let mut cents = if exact >= budget as f64 { budget } else { exact.floor() as i64 };
        // CPU a little above the estimate is the measurement's noise, not the user's work: within
        // the tolerance the quote is the most they pay.
        if !self.overran() {
            cents = cents.min(self.quoted.0.max(0));
        }
        Money(cents.clamp(0, budget))
    }

    /// Used more CPU than its estimate (beyond measurement noise).
    pub fn overran(&self) -> bool {
        self.cpu_seconds > self.quoted_cpu() * (1.0 + OVERRUN_TOLERANCE)
    }

    /// What should be on hold for a running job: what it owes now plus a tenth of its quote
    /// ahead (so the hold is not topped up at every report), never above the budget, never below
    /// the quote.
    pub fn hold_needed(&self) -> Money {
        let ahead = Money((self.quoted.0 / 10).max(1));
        let want = self.owed().saturating_add(ahead).max(self.quoted);
        Money(want.0.min(self.budget.0.max(0)))
    }

    /// The budget is used up: the job owes all of it.
    pub fn budget_exhausted(&self) -> bool {
        self.owed() >= self.budget && self.cpu_seconds > 0.0 && self.overran()
    }
}

/// How a job ended, as far as money is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    /// Every part ran and exited. `success`: every part exited 0. `late`: the last part ended
    /// after the deadline. `timed_out`: a node stopped it at its time limit.
    Exited { success: bool, late: bool, timed_out: bool },
    /// A node lost it, or went down with it.
    Lost,
    /// Its deadline passed before a node started it.
    NeverStarted,
    /// Cancelled by its owner, or by an administrator.
    Cancelled { by_owner: bool },
    /// Stopped because its CPU used up its budget, or the owner's credit could not cover more.
    OutOfCredit,
    /// The cluster withdrew it before it started (a queued job whose price at dispatch is above
    /// its budget).
    Withdrawn,
}

/// The final state a settlement gives a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Completed,
    Deadline,
    Failed,
    Cancelled,
    Timeout,
}

/// What the job is charged, in what final state, and why, in words for `libra history`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    pub outcome: Outcome,
    pub charge: Money,
    /// True when the cluster waived the charge because it broke its promise.
    pub free: bool,
    pub note: String,
}

/// How a waived settlement's note begins (`libra history` shows it): a charge made later, for
/// CPU a node reports after the job was settled, is never made on a job the cluster let off.
pub const FREE_NOTE: &str = "free: ";

fn used(u: &Usage) -> String {
    format!("{:.1} of {:.1} CPU-s", u.cpu_seconds.max(0.0), u.quoted_cpu())
}

/// The money rules (module docs). The charge is never negative and never above the budget.
pub fn settle(u: &Usage, ending: Ending) -> Settlement {
    let pay = |outcome, why: String| Settlement { outcome, charge: u.owed(), free: false, note: why };
    let waive = |outcome, why: &str| Settlement {
        outcome,
        charge: Money::ZERO,
        free: true,
        note: format!("{FREE_NOTE}{why}"),
    };
    match ending {
        Ending::Exited { timed_out: true, .. } => {
            pay(Outcome::Timeout, format!("stopped at its time limit; charged for {} used", used(u)))
        }
        Ending::Exited { success: true, late: false, .. } => {
            pay(Outcome::Completed, format!("charged for {} used", used(u)))
        }
        Ending::Exited { success, late: true, .. } if !u.overran() => {
            let outcome = if success { Outcome::Deadline } else { Outcome::Failed };
            waive(outcome, "the cluster missed the deadline it promised (the job stayed within its estimate)")
        }
        Ending::Exited { success: true, late: true, .. } => pay(
            Outcome::Deadline,
            format!("ended after its deadline having overrun its estimate; charged for {} used", used(u)),
        ),
        Ending::Exited { success: false, .. } => {
            pay(Outcome::Failed, format!("failed; charged for {} used", used(u)))
        }
        Ending::Lost => waive(Outcome::Failed, "lost with its node"),
        Ending::NeverStarted => waive(Outcome::Deadline, "no node started it by its deadline"),
        Ending::Cancelled { by_owner: true } => {
            pay(Outcome::Cancelled, format!("cancelled; charged for {} used", used(u)))
        }
        Ending::Cancelled { by_owner: false } => waive(Outcome::Cancelled, "cancelled by an administrator"),
        Ending::Withdrawn => waive(Outcome::Cancelled, "the cluster withdrew it before it started"),
        Ending::OutOfCredit => pay(
            Outcome::Failed,
            format!("stopped when its budget or credit ran out; charged for {} used", used(u)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn u(quoted: i64, budget: i64, estimate: f64, procs: u32, cpu: f64) -> Usage {
        Usage { quoted: Money(quoted), budget: Money(budget), estimate, procs, cpu_seconds: cpu }
    }

    #[test]
    fn pays_pro_rata_to_the_quote() {
        // Quoted 10.00 for 10 CPU-s: 1.00 per CPU-s.
        assert_eq!(u(1000, 5000, 10.0, 1, 4.0).owed(), Money(400));
        assert_eq!(u(1000, 5000, 10.0, 1, 10.0).owed(), Money(1000));
        // An overrun pays more, up to the budget.
        assert_eq!(u(1000, 5000, 10.0, 1, 12.0).owed(), Money(1200));
        assert_eq!(u(1000, 1100, 10.0, 1, 12.0).owed(), Money(1100));
        // Two nodes: the quote covers 20 CPU-s.
        assert_eq!(u(1000, 5000, 10.0, 2, 10.0).owed(), Money(500));
        // Rounded down: the user is never charged a fraction of a cent they did not use.
        assert_eq!(u(100, 5000, 3.0, 1, 1.0).owed(), Money(33));
        // Measurement noise (within OVERRUN_TOLERANCE above the estimate) costs nothing over
        // the quote; past it, the overrun is paid from the first cent.
        assert_eq!(u(114, 5000, 1.0, 1, 1.0087).owed(), Money(114));
        assert_eq!(u(1000, 5000, 10.0, 1, 10.19).owed(), Money(1000));
        assert_eq!(u(1000, 5000, 10.0, 1, 10.3).owed(), Money(1030));
    }

    #[test]
    fn the_trial_cases() {
        // -e 2s -d 20s used 12 CPU-seconds and ended after its deadline: today 0.00.
        let s = settle(
            &u(200, 5000, 2.0, 1, 12.0),
            Ending::Exited { success: true, late: true, timed_out: false },
        );
        assert_eq!((s.outcome, s.charge, s.free), (Outcome::Deadline, Money(1200), false));
        // Exited non-zero after working: pays for what it used.
        let s = settle(
            &u(1000, 5000, 10.0, 1, 6.0),
            Ending::Exited { success: false, late: false, timed_out: false },
        );
        assert_eq!((s.outcome, s.charge), (Outcome::Failed, Money(600)));
        // Ended early: pays for what it used, not the whole quote.
        let s = settle(
            &u(1000, 5000, 10.0, 1, 5.0),
            Ending::Exited { success: true, late: false, timed_out: false },
        );
        assert_eq!((s.outcome, s.charge), (Outcome::Completed, Money(500)));
        // Late through the cluster's fault (within its estimate): free, and says so.
        let s = settle(
            &u(1000, 5000, 10.0, 1, 9.0),
            Ending::Exited { success: true, late: true, timed_out: false },
        );
        assert_eq!((s.outcome, s.charge, s.free), (Outcome::Deadline, Money::ZERO, true));
        assert!(s.note.starts_with("free:"), "{}", s.note);
        let s = settle(
            &u(1000, 5000, 10.0, 1, 3.0),
            Ending::Exited { success: true, late: false, timed_out: true },
        );
        assert_eq!((s.outcome, s.charge), (Outcome::Timeout, Money(300)));
    }

    #[test]
    fn the_clusters_faults_are_free() {
        let x = u(1000, 5000, 10.0, 1, 7.0);
        for e in
            [Ending::Lost, Ending::NeverStarted, Ending::Cancelled { by_owner: false }, Ending::Withdrawn]
        {
            let s = settle(&x, e);
            assert_eq!((s.charge, s.free), (Money::ZERO, true), "{e:?}");
        }
        assert_eq!(settle(&x, Ending::Cancelled { by_owner: true }).charge, Money(700));
    }

    #[test]
    fn holds_cover_what_is_owed_ahead_within_the_budget() {
        assert_eq!(u(1000, 5000, 10.0, 1, 0.0).hold_needed(), Money(1000));
        assert_eq!(u(1000, 5000, 10.0, 1, 12.0).hold_needed(), Money(1300));
        assert_eq!(u(1000, 1250, 10.0, 1, 12.0).hold_needed(), Money(1250));
        assert!(!u(1000, 1250, 10.0, 1, 12.0).budget_exhausted());
        assert!(u(1000, 1250, 10.0, 1, 12.5).budget_exhausted());
        // A budget equal to the quote is exhausted only by an overrun.
        assert!(!u(1000, 1000, 10.0, 1, 10.0).budget_exhausted());
    }

    proptest! {
        #[test]
        fn never_negative_never_above_the_budget(
            quoted in 0i64..1_000_000, extra in 0i64..1_000_000, estimate in 0.0f64..1e5,
            procs in 1u32..64, cpu in -10.0f64..1e7, success: bool, late: bool, timed_out: bool,
            which in 0usize..7,
        ) {
            let x = u(quoted, quoted + extra, estimate, procs, cpu);
            let ending = match which {
                0 => Ending::Exited { success, late, timed_out },
                1 => Ending::Lost,
                2 => Ending::NeverStarted,
                3 => Ending::Cancelled { by_owner: success },
                4 => Ending::OutOfCredit,
                5 => Ending::Withdrawn,
                _ => Ending::Exited { success: true, late: false, timed_out: false },
            };
            let s = settle(&x, ending);
            prop_assert!(s.charge >= Money::ZERO && s.charge <= x.budget);
            prop_assert!(!s.free || s.charge == Money::ZERO);
            prop_assert!(x.hold_needed() <= x.budget && x.hold_needed() >= x.owed().min(x.budget));
            // Pro rata: within the estimate, never above the quote.
            if cpu <= x.quoted_cpu() {
                prop_assert!(x.owed() <= x.quoted);
            }
        }
    }
}
