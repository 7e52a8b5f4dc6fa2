//! `libra-risk`: `libra-edf` that admits against a padded estimate. It learns, online from the
//! jobs that complete, how far each user's estimates fall short (the ratio of actual runtime to
//! estimate) and reserves `estimate * factor`, where the factor is the 90th percentile of that
//! user's recent ratios (or of everyone's, until the user has a history).
//!
//! `libra-risk` charges what it reserves: the Libra+$ price over the window with the padded work
//! committed, applied to the padded work (quoted per CPU-second of the user's estimate, scaled
//! by the factor), so a job pays for the capacity it holds and its budget is checked against
//! that. `libra-risk-est`, the first version, prices the same window but applies the price to
//! the user's own estimate: the padding is the cluster's insurance, not the user's bill; it
//! admits more jobs for their budget and earns less per job.
//!
//! The idea follows Tsafrir, Etsion and Feitelson ("Backfilling using system-generated
//! predictions rather than user runtime estimates", IEEE TPDS 18(6), 2007), who predict a job's
//! runtime from the same user's recent jobs; here the prediction pads an admission test rather
//! than orders a backfilling queue.

use super::edf::LibraEdf;
use super::{Decision, Placement, Policy};
use crate::cluster::{Cluster, NodeIdx};
use crate::job::JobSpec;
use crate::money::Money;
use crate::pricing::{PricingKind, PricingParams};
use crate::share::JobControl;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Ratios remembered per user and for everyone.
const USER_HISTORY: usize = 32;
const GLOBAL_HISTORY: usize = 256;
/// Observations needed before a history is trusted.
const MIN_SAMPLES: usize = 3;
/// The quantile of past ratios the padding covers.
const QUANTILE: f64 = 0.9;
/// No estimate is padded beyond this factor.
const MAX_FACTOR: f64 = 10.0;

#[derive(Debug, Default)]
struct History {
    users: HashMap<u64, VecDeque<f64>>,
    all: VecDeque<f64>,
}

fn push(q: &mut VecDeque<f64>, v: f64, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(v);
}

fn quantile(q: &VecDeque<f64>) -> f64 {
    let mut v: Vec<f64> = q.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * QUANTILE).ceil() as usize;
    v[i.min(v.len() - 1)]
}

#[derive(Debug)]
pub struct LibraRisk {
    inner: LibraEdf,
    /// Charges the padded work (`libra-risk`) or the user's estimate (`libra-risk-est`).
    charge_reserved: bool,
    history: Mutex<History>,
}

impl LibraRisk {
    /// `libra-risk`: best fit, as Algorithm 1, charging the padded work.
    pub fn new(pricing: PricingParams) -> Self {
        Self::with_placement(pricing, Placement::BestFit)
    }

    /// `libra-risk` with a placement.
    pub fn with_placement(pricing: PricingParams, placement: Placement) -> Self {
        Self::charging(pricing, placement, true)
    }

    /// `libra-risk` (`charge_reserved`) or `libra-risk-est` (the price applied to the user's
    /// estimate).
    pub fn charging(pricing: PricingParams, placement: Placement, charge_reserved: bool) -> Self {
        let mut inner = LibraEdf::with_placement(pricing, PricingKind::LibraPlus, placement);
        inner.charge_reserved = charge_reserved;
        LibraRisk { inner, charge_reserved, history: Mutex::new(History::default()) }
    }

    /// The factor the user's next estimate is padded by (1 = no padding).
    pub fn factor(&self, user: Option<u64>) -> f64 {
        let Ok(h) = self.history.lock() else { return 1.0 };
        let own = user.and_then(|u| h.users.get(&u)).filter(|q| q.len() >= MIN_SAMPLES);
        let f = match own {
            Some(q) => quantile(q),
            None if h.all.len() >= MIN_SAMPLES => quantile(&h.all),
            None => 1.0,
        };
        f.clamp(1.0, MAX_FACTOR)
    }
}

impl Policy for LibraRisk {
    fn name(&self) -> &'static str {
        if self.charge_reserved {
            "libra-risk"
        } else {
            "libra-risk-est"
        }
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.decide_as(spec, None, cluster, now)
    }

    fn decide_as(&self, spec: &JobSpec, user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.inner.decide_with(spec, self.reserved_estimate(spec, user), cluster, now)
    }

    fn decide_only(&self, spec: &JobSpec, user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        self.inner.admit(spec, self.reserved_estimate(spec, user), cluster, now, false)
    }

    fn reserved_estimate(&self, spec: &JobSpec, user: Option<u64>) -> f64 {
        spec.estimate() * self.factor(user)
    }

    fn observe(&self, user: Option<u64>, estimate: f64, runtime: f64) {
        if estimate <= 0.0 || !runtime.is_finite() || runtime < 0.0 {
            return;
        }
        let ratio = runtime / estimate;
        if let Ok(mut h) = self.history.lock() {
            push(&mut h.all, ratio, GLOBAL_HISTORY);
            if let Some(u) = user {
                push(h.users.entry(u).or_default(), ratio, USER_HISTORY);
            }
        }
    }

    /// The price over the window with the padded work reserved, per CPU-second of the user's
    /// estimate: scaled by the padding factor under `libra-risk`, so that `estimate x price` is
    /// the padded work's cost.
    fn price(
        &self,
        spec: &JobSpec,
        user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        self.inner.price_with(spec, self.reserved_estimate(spec, user), cluster, node, now)
    }

    fn least_budget(&self, spec: &JobSpec, user: Option<u64>, cluster: &Cluster, now: f64) -> Option<Money> {
        self.inner.least_budget_with(spec, self.reserved_estimate(spec, user), cluster, now)
    }

    fn placement(&self) -> Option<Placement> {
        self.inner.placement()
    }

    fn job_control(&self) -> JobControl {
        JobControl::Edf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_each_users_shortfall() {
        let r = LibraRisk::new(PricingParams::default());
        assert_eq!(r.factor(Some(1)), 1.0);
        for _ in 0..5 {
            r.observe(Some(1), 100.0, 150.0);
        }
        assert!((r.factor(Some(1)) - 1.5).abs() < 1e-12);
        // A user with no history gets everyone's.
        assert!((r.factor(Some(2)) - 1.5).abs() < 1e-12);
        for _ in 0..5 {
            r.observe(Some(2), 100.0, 90.0);
        }
        // Over-estimates are never padded below the estimate.
        assert_eq!(r.factor(Some(2)), 1.0);
        let spec = JobSpec::simple(10.0, 100.0, crate::Money::from_credits(100));
        assert!((r.reserved_estimate(&spec, Some(1)) - 15.0).abs() < 1e-9);
    }

    fn taught(charge_reserved: bool) -> LibraRisk {
        let r = LibraRisk::charging(PricingParams::default(), Placement::BestFit, charge_reserved);
        for _ in 0..5 {
            r.observe(Some(1), 100.0, 150.0);
        }
        r
    }

    #[test]
    fn libra_risk_charges_the_padded_work_and_libra_risk_est_the_estimate() {
        use crate::pricing::cost_at;
        let mut c = Cluster::new();
        c.add_node(crate::cluster::NodeSpec::uniprocessor("n0", 1.0));
        c.commit(9, 30.0, 100.0, &[0], 0.0).unwrap();
        let spec = JobSpec::simple(20.0, 100.0, Money::from_credits(1000));
        let (risk, est) = (taught(true), taught(false));
        assert_eq!((risk.name(), est.name()), ("libra-risk", "libra-risk-est"));
        let (p_risk, p_est) =
            (risk.price(&spec, Some(1), &c, 0, 0.0).unwrap(), est.price(&spec, Some(1), &c, 0, 0.0).unwrap());
        // Both price the same window with 30 CPU-seconds reserved; libra-risk bills the 30.
        assert!((p_risk - 1.5 * p_est).abs() < 1e-9, "{p_risk} vs {p_est}");
        let cost = |d: Decision| match d {
            Decision::Accept { cost, .. } => cost,
            other => panic!("{other:?}"),
        };
        let (c_risk, c_est) =
            (cost(risk.decide_as(&spec, Some(1), &c, 0.0)), cost(est.decide_as(&spec, Some(1), &c, 0.0)));
        assert_eq!(Some(c_risk), cost_at(20.0, p_risk));
        assert_eq!(Some(c_risk), cost_at(30.0, p_est));
        assert!(c_risk > c_est);
        // The budget is checked against what is charged: a budget between the two admits the
        // job under libra-risk-est only, and the least budget quoted is the charge.
        let between = Money(c_est.cents() + (c_risk.cents() - c_est.cents()) / 2);
        let tight = JobSpec::simple(20.0, 100.0, between);
        assert!(est.decide_as(&tight, Some(1), &c, 0.0).is_accept());
        assert!(!risk.decide_as(&tight, Some(1), &c, 0.0).is_accept());
        assert_eq!(risk.least_budget(&spec, Some(1), &c, 0.0), Some(c_risk));
        // With nothing learnt (factor 1) the two are the same policy.
        let fresh = LibraRisk::new(PricingParams::default());
        assert_eq!(
            fresh.price(&spec, Some(1), &c, 0, 0.0),
            LibraRisk::charging(PricingParams::default(), Placement::BestFit, false).price(
                &spec,
                Some(1),
                &c,
                0,
                0.0
            )
        );
    }
}
