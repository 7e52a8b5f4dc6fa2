//! The user-level job submission specification of Libra+$ (section IV): a job is a list of
//! segments, here the four basic ones: details, resource requirements, QoS constraints and QoS
//! optimisation. Validation returns a typed error that names the field and the accepted range.

use crate::{Money, Shown};
use serde::{Deserialize, Serialize};

/// The longest estimate or deadline accepted: one year. Anything longer is a typo, not a job.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// The most processors one job may ask for.
pub const MAX_PROCS: u32 = 1_000_000;
/// The largest budget accepted, in credits (guards against overflowing sums in the ledger).
pub const MAX_BUDGET_CREDITS: i64 = 1_000_000_000_000;
/// The most CPUs one task (the job's part on one node) may use at once.
pub const MAX_CPUS_PER_TASK: u32 = 1024;

/// A budget a job may have, at submission and at every change of its terms (`libra update`):
/// from 0 to `MAX_BUDGET_CREDITS`.
pub fn check_budget(budget: Money) -> Result<(), SpecError> {
    if budget.is_negative() || budget > Money::from_credits(MAX_BUDGET_CREDITS) {
        return Err(SpecError::Budget(budget));
    }
    Ok(())
}

/// JobDetails: what the cluster should know about the job itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobDetails {
    /// Runtime estimate RE in CPU-seconds on one dedicated processor.
    pub estimate: f64,
    /// Optional length in million instructions (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_mi: Option<f64>,
}

/// ResourceRequirements: what a node must offer to run the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResourceRequirements {
    /// Processors (nodes) the job runs on at once; each gets the same share.
    pub procs: u32,
    /// Memory per processor, MiB (0 = no requirement).
    #[serde(default)]
    pub mem_mb: u64,
    /// Local disk per processor, MiB (0 = no requirement).
    #[serde(default)]
    pub disk_mb: u64,
    /// CPUs the job's task on each node may use at once (`-c`/`--cpus-per-task`): its share on
    /// a node is at most this many CPUs (and at most the node's). Specifications stored or
    /// traced before the field existed read as 1, what they were admitted with.
    #[serde(default = "one_cpu")]
    pub cpus_per_task: u32,
}

fn one_cpu() -> u32 {
    1
}

/// QoSConstraints: what must hold for the user to be satisfied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QosConstraints {
    /// Deadline D, seconds after submission.
    pub deadline: f64,
    /// Budget B: the most the user will pay. Named `budget_cents` in JSON, as every amount is, so
    /// nobody reads cents as credits; `budget` is still read, from clients and stores written
    /// before the rename.
    #[serde(rename = "budget_cents", alias = "budget")]
    pub budget: Money,
}

/// QoSOptimisation: what the user would like minimised within the constraints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum QosOptimisation {
    /// Finish as early as possible within the budget.
    FinishTime,
    /// Pay as little as possible within the deadline.
    #[default]
    Cost,
}

/// A job's submission specification: `job_i([JobDetails][ResourceRequirements][QoSConstraints][QoSOptimization])`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSpec {
    pub details: JobDetails,
    pub resources: ResourceRequirements,
    pub qos: QosConstraints,
    #[serde(default)]
    pub optimise: QosOptimisation,
}

/// A field of the specification that failed validation, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("estimate: {} is not accepted: give a runtime estimate in seconds, greater than 0 and at most {MAX_SECONDS} (one year)", Shown(*.0))]
    Estimate(f64),
    #[error("deadline: {} is not accepted: give a deadline in seconds after submission, greater than 0 and at most {MAX_SECONDS} (one year)", Shown(*.0))]
    Deadline(f64),
    #[error("deadline: {deadline} s is shorter than {least} s, the estimate {estimate} s on {cpus} CPU(s) at once: no scheduler can finish the job in time; give a deadline of at least {least} s (or more CPUs per task)")]
    DeadlineBeforeEstimate { deadline: f64, estimate: f64, cpus: u32, least: f64 },
    #[error(
        "budget: {0} is not accepted: give a budget of at least 0 and at most {MAX_BUDGET_CREDITS} credits"
    )]
    Budget(Money),
    #[error("procs: {0} is not accepted: give between 1 and {MAX_PROCS} processors")]
    Procs(u32),
    #[error("length_mi: {} is not accepted: give a positive number of million instructions", Shown(*.0))]
    Length(f64),
    #[error("cpus_per_task: {0} is not accepted: give between 1 and {MAX_CPUS_PER_TASK} CPUs per task")]
    CpusPerTask(u32),
}

impl JobSpec {
    /// A sequential job with the given estimate, relative deadline and budget.
    pub fn simple(estimate: f64, deadline: f64, budget: Money) -> Self {
        JobSpec {
            details: JobDetails { estimate, length_mi: None },
            resources: ResourceRequirements { procs: 1, mem_mb: 0, disk_mb: 0, cpus_per_task: 1 },
            qos: QosConstraints { deadline, budget },
            optimise: QosOptimisation::Cost,
        }
    }

    pub fn with_procs(mut self, procs: u32) -> Self {
        self.resources.procs = procs;
        self
    }

    pub fn with_cpus_per_task(mut self, cpus: u32) -> Self {
        self.resources.cpus_per_task = cpus;
        self
    }

    pub fn estimate(&self) -> f64 {
        self.details.estimate
    }

    pub fn deadline(&self) -> f64 {
        self.qos.deadline
    }

    pub fn budget(&self) -> Money {
        self.qos.budget
    }

    pub fn procs(&self) -> u32 {
        self.resources.procs
    }

    pub fn cpus_per_task(&self) -> u32 {
        self.resources.cpus_per_task
    }

    /// Checks a user's submission. Trace replays bypass this (a trace may hold zero-length jobs),
    /// so policies must also cope with degenerate values without panicking.
    pub fn validate(&self) -> Result<(), SpecError> {
        let e = self.details.estimate;
        if !e.is_finite() || e <= 0.0 || e > MAX_SECONDS {
            return Err(SpecError::Estimate(e));
        }
        let d = self.qos.deadline;
        if !d.is_finite() || d <= 0.0 || d > MAX_SECONDS {
            return Err(SpecError::Deadline(d));
        }
        // A job may use `cpus_per_task` CPUs at once: its estimate takes that much less time.
        let cpus = self.resources.cpus_per_task.max(1);
        let least = e / f64::from(cpus);
        if d < least {
            return Err(SpecError::DeadlineBeforeEstimate { deadline: d, estimate: e, cpus, least });
        }
        check_budget(self.qos.budget)?;
        let p = self.resources.procs;
        if p == 0 || p > MAX_PROCS {
            return Err(SpecError::Procs(p));
        }
        let c = self.resources.cpus_per_task;
        if c == 0 || c > MAX_CPUS_PER_TASK {
            return Err(SpecError::CpusPerTask(c));
        }
        if let Some(l) = self.details.length_mi {
            if !l.is_finite() || l <= 0.0 {
                return Err(SpecError::Length(l));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_spec_passes() {
        assert_eq!(JobSpec::simple(600.0, 3600.0, Money::from_credits(500)).validate(), Ok(()));
    }

    #[test]
    fn each_bad_field_is_named() {
        let ok = JobSpec::simple(600.0, 3600.0, Money::from_credits(500));
        let mut s = ok.clone();
        s.details.estimate = -1.0;
        assert!(s.validate().unwrap_err().to_string().starts_with("estimate:"));
        let mut s = ok.clone();
        s.qos.deadline = f64::NAN;
        assert!(s.validate().unwrap_err().to_string().starts_with("deadline:"));
        let mut s = ok.clone();
        s.qos.deadline = 60.0;
        assert!(matches!(s.validate(), Err(SpecError::DeadlineBeforeEstimate { .. })));
        // With two CPUs at once, half the estimate is enough time.
        s.resources.cpus_per_task = 2;
        s.qos.deadline = s.estimate() / 2.0;
        assert_eq!(s.validate(), Ok(()));
        let mut s = ok.clone();
        s.qos.budget = Money(-1);
        assert!(s.validate().unwrap_err().to_string().starts_with("budget:"));
        let mut s = ok.clone();
        s.resources.procs = 0;
        assert!(s.validate().unwrap_err().to_string().starts_with("procs:"));
        for bad in [0, MAX_CPUS_PER_TASK + 1] {
            let mut s = ok.clone();
            s.resources.cpus_per_task = bad;
            let e = s.validate().unwrap_err();
            assert_eq!(e, SpecError::CpusPerTask(bad));
            assert!(e.to_string().starts_with("cpus_per_task:") && e.to_string().contains("1024"), "{e}");
        }
        let mut s = ok.clone();
        s.resources.cpus_per_task = MAX_CPUS_PER_TASK;
        assert_eq!(s.validate(), Ok(()));
        let mut s = ok;
        s.details.estimate = 1e12;
        assert!(matches!(s.validate(), Err(SpecError::Estimate(_))));
    }

    /// A specification written before `cpus_per_task` existed (a stored job, a job list) reads
    /// as one CPU per task.
    #[test]
    fn old_specs_read_as_one_cpu_per_task() {
        let old =
            r#"{"details":{"estimate":10.0},"resources":{"procs":2},"qos":{"deadline":100.0,"budget":500}}"#;
        let s: JobSpec = serde_json::from_str(old).unwrap();
        assert_eq!(s.cpus_per_task(), 1);
        assert_eq!(s.procs(), 2);
        let s = JobSpec::simple(1.0, 10.0, Money(1)).with_cpus_per_task(4);
        let back: JobSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.cpus_per_task(), 4);
    }

    #[test]
    fn spec_round_trips_through_json() {
        let s = JobSpec::simple(1.5, 10.0, Money(123)).with_procs(4);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<JobSpec>(&j).unwrap(), s);
    }

    #[test]
    fn budget_is_written_in_cents_by_name_and_read_under_its_old_name_too() {
        let q = QosConstraints { deadline: 60.0, budget: Money(1250) };
        let v = serde_json::to_value(q).unwrap();
        assert_eq!(v, serde_json::json!({"deadline": 60.0, "budget_cents": 1250}));
        // A client from before the rename still submits.
        let old: QosConstraints = serde_json::from_str(r#"{"deadline": 60.0, "budget": 1250}"#).unwrap();
        assert_eq!(old.budget, Money(1250));
    }
}
