//! A synthetic trace for benchmarks: any number of jobs on any number of nodes, shaped loosely
//! like SDSC SP2 (power-of-two job sizes, runtimes spread over four orders of magnitude), with
//! Poisson arrivals at the rate that offers a chosen load, and deadlines and budgets from the
//! Libra+$ urgency model.

use super::libraplus::{LibraPlusModel, ModelError, QosSampler};
use super::SimJob;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyntheticConfig {
    pub jobs: usize,
    pub nodes: u32,
    /// Offered load: mean demanded processor-seconds per second over the node count.
    pub offered_load: f64,
    /// Runtimes are log-uniform in [min_runtime, max_runtime] seconds.
    pub min_runtime: f64,
    pub max_runtime: f64,
    /// Largest job size; sizes are powers of two up to it, each exponent equally likely.
    /// `None`: the largest power of two not above nodes / 64 (at least 1).
    pub max_procs: Option<u32>,
    /// Users are drawn uniformly from 1..=users.
    pub users: u32,
    /// Urgency classes, deadline and budget factors and inaccuracy; its `last_n` and
    /// `arrival_delay_factor` play no part here (the load sets the arrival rate).
    pub qos: LibraPlusModel,
    pub seed: u64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig {
            jobs: 1_000_000,
            nodes: 10_000,
            offered_load: 0.8,
            min_runtime: 10.0,
            max_runtime: 36.0 * 3600.0,
            max_procs: None,
            users: 500,
            qos: LibraPlusModel::default(),
            seed: 1,
        }
    }
}

impl SyntheticConfig {
    fn max_exponent(&self) -> u32 {
        let cap = self.max_procs.unwrap_or(self.nodes / 64).clamp(1, self.nodes.max(1));
        31 - cap.leading_zeros()
    }

    /// Mean processors per job.
    pub fn mean_procs(&self) -> f64 {
        let k = self.max_exponent();
        ((1u64 << (k + 1)) - 1) as f64 / (k + 1) as f64
    }

    /// Mean runtime of the log-uniform distribution.
    pub fn mean_runtime(&self) -> f64 {
        let (a, b) = (self.min_runtime, self.max_runtime);
        if b > a {
            (b - a) / (b / a).ln()
        } else {
            a
        }
    }

    /// Mean arrivals per second that offer `offered_load` of the cluster.
    pub fn arrival_rate(&self) -> f64 {
        self.offered_load * f64::from(self.nodes) / (self.mean_procs() * self.mean_runtime())
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |field, value: f64, accepted| Err(ModelError::Parameter { field, value, accepted });
        if self.nodes == 0 {
            return bad("nodes", 0.0, "at least 1 node");
        }
        if !(self.offered_load > 0.0 && self.offered_load <= 100.0) {
            return bad("offered_load", self.offered_load, "above 0, at most 100");
        }
        if !(self.min_runtime > 0.0 && self.min_runtime.is_finite()) {
            return bad("min_runtime", self.min_runtime, "seconds above 0");
        }
        if !(self.max_runtime >= self.min_runtime && self.max_runtime <= 1e9) {
            return bad("max_runtime", self.max_runtime, "seconds from min_runtime up to 1e9");
        }
        if self.users == 0 {
            return bad("users", 0.0, "at least 1 user");
        }
        self.qos.validate()
    }

    /// Generates the jobs, sorted by submit time, ids 1..=n.
    pub fn generate(&self) -> Result<Vec<SimJob>, ModelError> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let gap = Exp::new(self.arrival_rate()).map_err(|_| ModelError::Parameter {
            field: "offered_load",
            value: self.offered_load,
            accepted: "a load that gives a positive, finite arrival rate",
        })?;
        let (ln_min, ln_max) = (self.min_runtime.ln(), self.max_runtime.ln());
        let kmax = self.max_exponent();
        let mut qos = QosSampler::new(&self.qos, self.seed);
        let keep = 1.0 - self.qos.inaccuracy;
        let mut t = 0.0;
        let mut jobs = Vec::with_capacity(self.jobs);
        for i in 0..self.jobs {
            t += gap.sample(&mut rng);
            let runtime = if ln_max > ln_min {
                rng.random_range(ln_min..ln_max).exp().round().max(1.0)
            } else {
                self.min_runtime
            };
            let procs = 1u32 << rng.random_range(0..=kmax);
            let user = rng.random_range(1..=self.users);
            let id = i as u64 + 1;
            let q = qos.draw(id, runtime)?;
            jobs.push(SimJob {
                id,
                // Whole seconds, as in a real trace; the sum stays increasing.
                submit: t.floor(),
                runtime,
                estimate: runtime * keep,
                procs,
                deadline: q.deadline,
                budget: q.budget,
                user,
                urgent: q.urgent,
            });
        }
        Ok(jobs)
    }
}
