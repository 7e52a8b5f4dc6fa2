//! A run's decisions made again: the engine with admission left out.
//!
//! `Replay` answers each arrival with the decision an earlier run recorded for that job (in
//! arrival order) and leaves everything else (job control, reserved estimates, learning) to the
//! policy it wraps. A run through it does the engine's own work for that schedule: events,
//! commitments, job control and progress. `libra sim bench-one --replay` times one, which says
//! how much of a run no change to admission can save (REPRODUCING.md, "Scale").

use super::{JobRecord, Verdict};
use libra_core::policy::{Decision, Policy};
use libra_core::share::JobControl;
use libra_core::{Cluster, JobSpec, NodeIdx};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Replay<'a> {
    inner: &'a dyn Policy,
    records: &'a [JobRecord],
    next: AtomicUsize,
}

impl<'a> Replay<'a> {
    /// `records` are a run's of the same jobs, in job order, under `inner` or a policy with
    /// its job control; only a time-shared policy decides at arrival, so only its records can
    /// be replayed (`inner.space_shared()` is false).
    pub fn new(inner: &'a dyn Policy, records: &'a [JobRecord]) -> Self {
        Replay { inner, records, next: AtomicUsize::new(0) }
    }
}

impl Policy for Replay<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn decide(&self, spec: &JobSpec, cluster: &Cluster, now: f64) -> Decision {
        self.decide_only(spec, None, cluster, now)
    }

    /// The recorded decision of the next arrival; past the records' end, the policy's own.
    fn decide_only(&self, spec: &JobSpec, user: Option<u64>, cluster: &Cluster, now: f64) -> Decision {
        let Some(r) = self.records.get(self.next.fetch_add(1, Ordering::Relaxed)) else {
            return self.inner.decide_only(spec, user, cluster, now);
        };
        match &r.verdict {
            // The share is not read by the engine: the job control sets every weight.
            Verdict::Accepted => {
                Decision::Accept { nodes: r.nodes.clone(), share: 0.0, cost: r.outcome.cost }
            }
            Verdict::Rejected(reason) => Decision::Reject { reason: *reason, suggestion: None },
            Verdict::Dropped => Decision::Queue,
        }
    }

    fn space_shared(&self) -> bool {
        self.inner.space_shared()
    }

    fn reserved_estimate(&self, spec: &JobSpec, user: Option<u64>) -> f64 {
        self.inner.reserved_estimate(spec, user)
    }

    fn observe(&self, user: Option<u64>, estimate: f64, runtime: f64) {
        self.inner.observe(user, estimate, runtime)
    }

    fn job_control(&self) -> JobControl {
        self.inner.job_control()
    }

    fn placement(&self) -> Option<libra_core::policy::Placement> {
        self.inner.placement()
    }

    fn price(
        &self,
        spec: &JobSpec,
        user: Option<u64>,
        cluster: &Cluster,
        node: NodeIdx,
        now: f64,
    ) -> Option<f64> {
        self.inner.price(spec, user, cluster, node, now)
    }
}
