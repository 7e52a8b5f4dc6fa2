//! Pricing functions. Prices are decimal (credits per CPU-second); a job's cost is turned into
//! `Money` by rounding up to the cent, and compared with the budget as `Money`.
//!
//! Every policy prices by a rate per CPU-second (`Policy::price`) and charges `cost_at` that
//! rate, so what `libra quote` shows is what admission charges.

use crate::money::Money;
use serde::{Deserialize, Serialize};

/// The coefficients of every pricing function, in one place so an administrator can change
/// them at run time and an experiment can sweep them.
/// A partial table (a configuration file's `[pricing]` with only `alpha`) takes the defaults
/// for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct PricingParams {
    /// Libra+$ static factor α (Table I: 1.0).
    pub alpha: f64,
    /// Libra+$ dynamic factor β (Table I: 0.1).
    pub beta: f64,
    /// Libra's runtime coefficient (the Libra paper's α; the Libra+$ paper calls it γ and sets it to 1).
    pub libra_gamma: f64,
    /// Libra's deadline-incentive coefficient (the Libra paper's β; the Libra+$ paper's δ = 1).
    pub libra_delta: f64,
}

impl Default for PricingParams {
    fn default() -> Self {
        PricingParams { alpha: 1.0, beta: 0.1, libra_gamma: 1.0, libra_delta: 1.0 }
    }
}

/// Which cost function a policy charges with (the issue 6 policies can pick any of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PricingKind {
    /// `E * PBase`: the backfilling baselines.
    Flat,
    /// `gamma * E + delta * E / D`: the Libra paper.
    Libra,
    /// `E * (alpha * PBase + beta * PUtil)`: Libra+$.
    LibraPlus,
}

/// Libra's cost: `alpha*E + beta*E/D` (coefficients `libra_gamma`, `libra_delta`). The second
/// term rewards a relaxed deadline. `D <= 0` is treated as an infinitely urgent job.
pub fn libra_cost(p: &PricingParams, estimate: f64, deadline: f64) -> f64 {
    let urgency = if estimate <= 0.0 {
        0.0
    } else if deadline > 0.0 {
        estimate / deadline
    } else {
        f64::INFINITY
    };
    p.libra_gamma * estimate + p.libra_delta * urgency
}

/// Libra's cost as a rate per CPU-second: `alpha + beta / D` (coefficients `libra_gamma`,
/// `libra_delta`), so that `E` times it is `libra_cost`. The same on every node. `D <= 0`: an
/// infinitely urgent job, priced out.
pub fn libra_rate(p: &PricingParams, deadline: f64) -> f64 {
    if deadline > 0.0 {
        p.libra_gamma + p.libra_delta / deadline
    } else {
        f64::INFINITY
    }
}

/// What a job of `estimate` CPU-seconds costs at `rate` per CPU-second, rounded up to the cent
/// (Algorithm 1's `RE_i * P_ij`). A job of no work costs nothing; an unbounded rate has no cost.
pub fn cost_at(estimate: f64, rate: f64) -> Option<Money> {
    if estimate <= 0.0 {
        Some(Money::ZERO)
    } else {
        Money::from_credits_f64_ceil(estimate * rate)
    }
}

/// The baselines' flat cost: `E * PBase_j`.
pub fn flat_cost(estimate: f64, price_base: f64) -> f64 {
    estimate.max(0.0) * price_base
}

/// Libra+$ utilisation price, eq. (4): `PUtil_ij = RESMax_j / RESFree_ij * PBase_j`.
/// `RESFree <= 0` means the node is full over the window: the price is infinite.
pub fn putil(res_max: f64, res_free: f64, price_base: f64) -> f64 {
    if res_free <= 0.0 {
        return f64::INFINITY;
    }
    if res_max <= 0.0 {
        // A zero-length window (zero estimate and deadline): no utilisation to price.
        return price_base;
    }
    res_max / res_free * price_base
}

/// Libra+$ pricing rate, eq. (3): `P_ij = alpha * PBase_j + beta * PUtil_ij`.
pub fn libraplus_rate(p: &PricingParams, price_base: f64, putil: f64) -> f64 {
    p.alpha * price_base + p.beta * putil
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Libra+$ paper's worked example (section V.B): PBase $1 per unit, 100 free units per
    /// hour of deadline, other jobs using 90 units, the job needing 10.
    #[test]
    fn paper_putil_example() {
        assert!((putil(200.0, 200.0 - 90.0 - 10.0, 1.0) - 2.0).abs() < 1e-12);
        assert!((putil(500.0, 500.0 - 90.0 - 10.0, 1.0) - 1.25).abs() < 1e-12);
    }

    #[test]
    fn libra_cost_rewards_relaxed_deadlines() {
        let p = PricingParams { libra_gamma: 2.0, libra_delta: 100.0, ..Default::default() };
        // 2*100 + 100*100/200 = 250; with twice the deadline: 200 + 25 = 225.
        assert!((libra_cost(&p, 100.0, 200.0) - 250.0).abs() < 1e-9);
        assert!((libra_cost(&p, 100.0, 400.0) - 225.0).abs() < 1e-9);
        assert_eq!(libra_cost(&p, 0.0, 0.0), 0.0);
        assert!(libra_cost(&p, 1.0, 0.0).is_infinite());
    }

    #[test]
    fn libra_rate_times_the_estimate_is_libra_cost() {
        let p = PricingParams { libra_gamma: 2.0, libra_delta: 100.0, ..Default::default() };
        assert!((100.0 * libra_rate(&p, 200.0) - libra_cost(&p, 100.0, 200.0)).abs() < 1e-9);
        assert_eq!(cost_at(100.0, libra_rate(&p, 400.0)), Some(Money::from_credits(225)));
        assert_eq!(cost_at(0.0, f64::INFINITY), Some(Money::ZERO));
        assert_eq!(cost_at(1.0, libra_rate(&p, 0.0)), None);
        assert_eq!(cost_at(3.0, 0.125), Some(Money(38)));
    }

    #[test]
    fn rate_combines_static_and_dynamic() {
        let p = PricingParams { alpha: 1.0, beta: 0.5, ..Default::default() };
        assert!((libraplus_rate(&p, 2.0, 4.0) - 4.0).abs() < 1e-12);
        assert!(putil(10.0, 0.0, 1.0).is_infinite());
        assert!((flat_cost(30.0, 2.0) - 60.0).abs() < 1e-12);
    }
}
