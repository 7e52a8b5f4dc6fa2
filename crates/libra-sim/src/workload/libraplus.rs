//! The Libra+$ workload model (Yeo and Buyya, section VII.B and Table I) over an SWF trace: each
//! job is high or low urgency; its deadline and budget are drawn as factors of its runtime from
//! normal distributions whose means depend on the class; arrivals are compressed or stretched by
//! the arrival delay factor; estimates may under-state the runtime.

use super::SimJob;
use crate::swf::{ReadMode, SwfError, SwfReader, SwfRecord};
use libra_core::Money;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::Path;

/// Standard deviation of every deadline and budget factor, as a fraction of its mean.
///
/// A choice: the paper says the factors are "normally distributed" but gives no spread. A
/// quarter of the mean keeps almost every draw positive (a non-positive draw lies four standard
/// deviations out, about 3 in 100,000, and is redrawn) while still mixing tight and loose jobs
/// within each class.
pub const SD_OVER_MEAN: f64 = 0.25;

/// PBase: the static price, in credits per CPU-second, used in the budget's base `f(R) = R *
/// PBase` (the minimum a user would quote for a job of runtime R).
pub const PBASE_CREDITS_PER_CPU_SECOND: f64 = 1.0;

/// Table I of the Libra+$ paper, plus the subset and the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LibraPlusModel {
    /// Share of high-urgency jobs, 0..=1 (Table I: 20%).
    pub high_urgency_share: f64,
    /// Mean of the high-value deadline factor over the low-value one (Table I: 4).
    pub deadline_ratio: f64,
    /// Mean D/R of the low-value deadline factor (Table I: 2).
    pub deadline_low_mean: f64,
    /// Mean of the high-value budget factor over the low-value one (Table I: 4).
    pub budget_ratio: f64,
    /// Mean B/f(R) of the low-value budget factor (Table I: 2).
    pub budget_low_mean: f64,
    /// Scales the trace's inter-arrival times; below 1 packs arrivals closer (Table I: 0.5).
    pub arrival_delay_factor: f64,
    /// Runtime under-estimate: estimate = R * (1 - inaccuracy), 0 <= inaccuracy < 1 (Table I: 0).
    pub inaccuracy: f64,
    /// Take only the last N records of the trace (the paper: the last 5000 of SDSC SP2).
    pub last_n: Option<usize>,
    pub seed: u64,
}

impl Default for LibraPlusModel {
    fn default() -> Self {
        LibraPlusModel {
            high_urgency_share: 0.20,
            deadline_ratio: 4.0,
            deadline_low_mean: 2.0,
            budget_ratio: 4.0,
            budget_low_mean: 2.0,
            arrival_delay_factor: 0.5,
            inaccuracy: 0.0,
            last_n: Some(5000),
            seed: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{field} is {value}: {accepted}")]
    Parameter { field: &'static str, value: f64, accepted: &'static str },
    #[error("job {job}: {what}")]
    Job { job: u64, what: String },
    #[error(transparent)]
    Swf(#[from] SwfError),
}

impl LibraPlusModel {
    /// Checks every parameter; the error names the field and the accepted range.
    pub fn validate(&self) -> Result<(), ModelError> {
        let check = |field, value: f64, ok: bool, accepted| {
            if ok && value.is_finite() {
                Ok(())
            } else {
                Err(ModelError::Parameter { field, value, accepted })
            }
        };
        let h = self.high_urgency_share;
        check("high_urgency_share", h, (0.0..=1.0).contains(&h), "a share from 0 to 1")?;
        for (field, v) in [
            ("deadline_ratio", self.deadline_ratio),
            ("deadline_low_mean", self.deadline_low_mean),
            ("budget_ratio", self.budget_ratio),
            ("budget_low_mean", self.budget_low_mean),
            ("arrival_delay_factor", self.arrival_delay_factor),
        ] {
            check(field, v, v > 0.0 && v <= 1e6, "a number above 0 (at most 1e6)")?;
        }
        let i = self.inaccuracy;
        check(
            "inaccuracy",
            i,
            (0.0..1.0).contains(&i),
            "from 0 up to (not including) 1: estimate = runtime * (1 - inaccuracy)",
        )?;
        Ok(())
    }

    /// Mean deadline factor D/R of a class: urgent jobs get the low (tight) mean.
    pub fn deadline_mean(&self, urgent: bool) -> f64 {
        if urgent {
            self.deadline_low_mean
        } else {
            self.deadline_low_mean * self.deadline_ratio
        }
    }

    /// Mean budget factor B/f(R) of a class: urgent jobs get the high (generous) mean.
    pub fn budget_mean(&self, urgent: bool) -> f64 {
        if urgent {
            self.budget_low_mean * self.budget_ratio
        } else {
            self.budget_low_mean
        }
    }
}

/// Draws class, deadline and budget per job. Each quantity has its own random stream, so that
/// in a sweep over one parameter the others' draws stay the same job for job (common random
/// numbers): raising the high-urgency share only moves jobs from low to high urgency.
pub(crate) struct QosSampler<'a> {
    model: &'a LibraPlusModel,
    urgency: ChaCha8Rng,
    deadline: ChaCha8Rng,
    budget: ChaCha8Rng,
}

/// What the sampler drew for one job.
pub(crate) struct Qos {
    pub urgent: bool,
    pub deadline: f64,
    pub budget: Money,
}

impl<'a> QosSampler<'a> {
    pub(crate) fn new(model: &'a LibraPlusModel, seed: u64) -> Self {
        let stream = |s| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            r.set_stream(s);
            r
        };
        QosSampler { model, urgency: stream(1), deadline: stream(2), budget: stream(3) }
    }

    fn factor(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
        loop {
            let z: f64 = StandardNormal.sample(rng);
            let f = mean + SD_OVER_MEAN * mean * z;
            if f > 0.0 {
                return f;
            }
        }
    }

    pub(crate) fn draw(&mut self, job: u64, runtime: f64) -> Result<Qos, ModelError> {
        let urgent = self.urgency.random::<f64>() < self.model.high_urgency_share;
        let d = Self::factor(&mut self.deadline, self.model.deadline_mean(urgent));
        let b = Self::factor(&mut self.budget, self.model.budget_mean(urgent));
        let budget =
            Money::from_credits_f64_ceil(b * runtime * PBASE_CREDITS_PER_CPU_SECOND).ok_or_else(|| {
                ModelError::Job { job, what: format!("runtime {runtime} s gives a budget too large to hold") }
            })?;
        Ok(Qos { urgent, deadline: d * runtime, budget })
    }
}

/// Applies the model to trace records (in trace order). With `last_n`, only the last N records
/// are used; submit times count from the first record used.
pub fn generate(records: &[SwfRecord], model: &LibraPlusModel) -> Result<Vec<SimJob>, ModelError> {
    model.validate()?;
    let used = match model.last_n {
        Some(n) if n < records.len() => &records[records.len() - n..],
        _ => records,
    };
    let Some(first) = used.first() else {
        return Ok(Vec::new());
    };
    let first_submit = first.submit;
    let mut sampler = QosSampler::new(model, model.seed);
    let mut jobs = Vec::with_capacity(used.len());
    for r in used {
        let id = u64::try_from(r.job).unwrap_or(0);
        // Cancelled jobs have run time -1: they count as 0, as in the paper's mean of 8671 s.
        let runtime = r.run_time_or_zero() as f64;
        let qos = sampler.draw(id, runtime)?;
        jobs.push(SimJob {
            id,
            submit: (r.submit - first_submit) as f64 * model.arrival_delay_factor,
            runtime,
            estimate: runtime * (1.0 - model.inaccuracy),
            procs: u32::try_from(r.procs()).unwrap_or(u32::MAX),
            deadline: qos.deadline,
            budget: qos.budget,
            user: r.known_user().and_then(|u| u32::try_from(u).ok()).unwrap_or(0),
            urgent: qos.urgent,
        });
    }
    // Already in submit order for a well-formed trace; a stable sort keeps ties in trace order.
    jobs.sort_by(|a, b| a.submit.total_cmp(&b.submit));
    Ok(jobs)
}

/// Streams an SWF file (plain or gzipped) and applies the model, holding only the last N
/// records in memory when `last_n` is set.
pub fn from_trace(
    path: impl AsRef<Path>,
    mode: ReadMode,
    model: &LibraPlusModel,
) -> Result<Vec<SimJob>, ModelError> {
    model.validate()?;
    let mut reader = SwfReader::open(path, mode)?;
    let keep = model.last_n.unwrap_or(usize::MAX);
    let mut window: VecDeque<SwfRecord> = VecDeque::with_capacity(keep.min(1 << 16));
    for r in reader.by_ref() {
        if keep == 0 {
            break;
        }
        if window.len() == keep {
            window.pop_front();
        }
        window.push_back(r?);
    }
    if reader.skipped_count() > 0 {
        let first: Vec<u64> = reader.skipped().iter().take(5).map(|e| e.line).collect();
        tracing::warn!(
            skipped = reader.skipped_count(),
            "lenient SWF read skipped malformed lines (first at lines {first:?})"
        );
    }
    generate(window.make_contiguous(), model)
}
