//! Job dependencies (`--dependency afterok:5:7,afterany:9`, as sbatch writes them) and the
//! admission rule for a job that must wait for others.
//!
//! The rule, kept simple and honest: a dependent job is admitted at submission, as if it had to
//! run between the latest PROMISED finish of its dependencies and its own deadline. It needs the
//! share `estimate / (deadline - latest promised finish)`, and that share is reserved on its
//! nodes from the moment it is accepted until its deadline. While it waits, the reservation is
//! unused (the rule over-reserves), but whenever the dependencies end by their promises, the job
//! finds its share waiting for it: it never under-promises. A promised finish is a dependency's
//! deadline, or its actual end when it has already ended.

use crate::job::JobSpec;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The most dependencies one job may name (after arrays are expanded to their tasks).
pub const MAX_DEPENDENCIES: usize = 10_000;

/// What `--dependency` accepts, for help texts and every refusal.
pub const DEPENDENCY_HELP: &str =
    "give afterok:JOB[:JOB...] (start after each JOB completed successfully) or \
     afterany:JOB[:JOB...] (start after each JOB ended in any way), several joined by ',' (all must hold); \
     JOB is a job id, an array id (all its tasks) or ARRAY_TASK (one task, e.g. 12_3)";

/// How a job depends on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DepKind {
    /// Start only after the dependency completed successfully; if it fails, is cancelled or
    /// refused, the dependent job is cancelled (its hold released).
    AfterOk,
    /// Start after the dependency ended, however it ended.
    AfterAny,
}

impl DepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::AfterOk => "afterok",
            DepKind::AfterAny => "afterany",
        }
    }

    pub fn parse(s: &str) -> Option<DepKind> {
        match s {
            "afterok" => Some(DepKind::AfterOk),
            "afterany" => Some(DepKind::AfterAny),
            _ => None,
        }
    }
}

/// One dependency: a job, or one task of an array (`task`), or a whole array (its id, which is
/// its first task's job id, with no task: the server expands it to every task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dependency {
    pub kind: DepKind,
    pub job: u64,
    /// A task of the array `job` (`12_3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<u32>,
}

impl Dependency {
    /// The job as the user named it: `12` or `12_3`.
    pub fn target(&self) -> String {
        match self.task {
            Some(t) => format!("{}_{t}", self.job),
            None => self.job.to_string(),
        }
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.target())
    }
}

/// A list written back as sbatch would: `afterok:5:7,afterany:9` (consecutive dependencies of
/// one kind share their prefix).
pub fn format_list(deps: &[Dependency]) -> String {
    let mut out = String::new();
    let mut last: Option<DepKind> = None;
    for d in deps {
        if last == Some(d.kind) {
            out.push(':');
        } else {
            if last.is_some() {
                out.push(',');
            }
            out.push_str(d.kind.as_str());
            out.push(':');
        }
        out.push_str(&d.target());
        last = Some(d.kind);
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dependency: '{given}' is not accepted: {why}; {DEPENDENCY_HELP}")]
pub struct ParseError {
    pub given: String,
    pub why: String,
}

/// Parses `afterok:5:7,afterany:9_2`. Each job is named once.
pub fn parse(s: &str) -> Result<Vec<Dependency>, ParseError> {
    let bad = |why: String| ParseError { given: s.to_string(), why };
    let mut out: Vec<Dependency> = Vec::new();
    if s.trim().is_empty() {
        return Err(bad("it is empty".into()));
    }
    if s.contains('?') {
        return Err(bad("'?' (any one of) is not supported: every dependency must hold".into()));
    }
    for item in s.split(',') {
        let mut parts = item.trim().split(':');
        let kind_word = parts.next().unwrap_or("");
        let kind = DepKind::parse(kind_word)
            .ok_or_else(|| bad(format!("'{kind_word}' is not a dependency type (afterok or afterany)")))?;
        let mut any = false;
        for target in parts {
            any = true;
            let t = target.trim();
            let (job, task) = match t.split_once('_') {
                Some((j, k)) => (j, Some(k)),
                None => (t, None),
            };
            let job: u64 =
                job.parse().ok().filter(|&j| j > 0).ok_or_else(|| bad(format!("'{t}' is not a job id")))?;
            let task = task
                .map(|k| k.parse::<u32>().map_err(|_| bad(format!("'{t}': '{k}' is not a task id"))))
                .transpose()?;
            let d = Dependency { kind, job, task };
            if out.iter().any(|o| o.job == d.job && o.task == d.task) {
                return Err(bad(format!("job {} is named twice", d.target())));
            }
            out.push(d);
        }
        if !any {
            return Err(bad(format!("'{}' names no job", item.trim())));
        }
    }
    if out.len() > MAX_DEPENDENCIES {
        return Err(bad(format!("{} jobs; at most {MAX_DEPENDENCIES} are accepted", out.len())));
    }
    Ok(out)
}

/// How a dependency stands now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DepStatus {
    /// Not ended yet; promised to finish by this instant (its deadline).
    Open { promised_finish: f64 },
    /// Ended at `end`, successfully or not (a refused job ended, unsuccessfully, when it was
    /// refused).
    Ended { end: f64, success: bool },
}

/// What a dependency means for the job that waits on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Wait,
    Met,
    /// The job can never start: an `afterok` dependency failed or will never run.
    Broken,
}

pub fn verdict(kind: DepKind, status: DepStatus) -> Verdict {
    match (kind, status) {
        (_, DepStatus::Open { .. }) => Verdict::Wait,
        (DepKind::AfterOk, DepStatus::Ended { success: true, .. }) => Verdict::Met,
        (DepKind::AfterOk, _) => Verdict::Broken,
        (DepKind::AfterAny, DepStatus::Ended { .. }) => Verdict::Met,
    }
}

/// When the job may start at the latest by its dependencies' promises: the latest promised
/// finish among them, seconds after `now` (0 when all have ended).
pub fn latest_finish(statuses: &[DepStatus], now: f64) -> f64 {
    statuses
        .iter()
        .map(|s| match *s {
            DepStatus::Open { promised_finish } => promised_finish - now,
            DepStatus::Ended { end, .. } => end - now,
        })
        .fold(0.0, f64::max)
}

/// What admission decides a dependent job on: the job as if submitted to run in the window
/// between the latest promised finish (`wait` seconds from now) and its deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Seconds from now until the latest promised finish.
    pub wait: f64,
    /// The specification admission decides: the same job with the deadline `deadline - wait`.
    /// Its share, `estimate / (deadline - wait)`, is what the job holds from now on.
    pub window: JobSpec,
}

/// The deadline is too close: after the latest promised finish there is less time left than
/// the estimate takes on the CPUs the job may use.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("deadline: {deadline} s leaves {left} s after its dependencies' latest promised finish ({wait} s from now), less than the {least} s the job needs; the earliest deadline that could be accepted is {earliest} s")]
pub struct TooLate {
    pub deadline: f64,
    pub wait: f64,
    pub left: f64,
    pub least: f64,
    /// Seconds after submission: `wait + least`.
    pub earliest: f64,
}

/// The plan for `spec` whose dependencies promise to end `wait` seconds from now.
pub fn plan(spec: &JobSpec, wait: f64) -> Result<Plan, TooLate> {
    let wait = wait.max(0.0);
    let least = spec.estimate() / f64::from(spec.cpus_per_task().max(1));
    let left = spec.deadline() - wait;
    if !(left >= least && left > 0.0) {
        return Err(TooLate {
            deadline: spec.deadline(),
            wait,
            left,
            least,
            earliest: (wait + least).ceil(),
        });
    }
    let mut window = spec.clone();
    window.qos.deadline = left;
    Ok(Plan { wait, window })
}

/// What a waiting job holds on its nodes: `reserved` CPU-seconds of work (the policy's, for the
/// window) at the window's share, kept from now (`since`) to the job's deadline (`deadline_abs`).
/// Returns the work to commit and the rate at which the model should see it progress, so that
/// the share it holds stays constant while it waits (no progress would make Algorithm 2's share
/// grow as the deadline nears).
pub fn waiting_commitment(reserved: f64, window_deadline: f64, since: f64, deadline_abs: f64) -> (f64, f64) {
    let share = if window_deadline > 0.0 { reserved / window_deadline } else { 0.0 };
    (share * (deadline_abs - since).max(0.0), share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::required_share;
    use crate::Money;
    use proptest::prelude::*;

    #[test]
    fn parses_as_sbatch_writes_them() {
        let d = parse("afterok:5:7,afterany:9_3").unwrap();
        assert_eq!(
            d,
            vec![
                Dependency { kind: DepKind::AfterOk, job: 5, task: None },
                Dependency { kind: DepKind::AfterOk, job: 7, task: None },
                Dependency { kind: DepKind::AfterAny, job: 9, task: Some(3) },
            ]
        );
        assert_eq!(format_list(&d), "afterok:5:7,afterany:9_3");
        assert_eq!(d[2].to_string(), "afterany:9_3");
        for bad in [
            "",
            "afterok",
            "afterok:",
            "after:5",
            "afternotok:5",
            "afterok:x",
            "afterok:0",
            "afterok:5?afterany:6",
            "afterok:5:5",
            "afterok:5_x",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("dependency: ") && e.contains("afterok:JOB"), "{bad}: {e}");
        }
    }

    #[test]
    fn verdicts() {
        let open = DepStatus::Open { promised_finish: 10.0 };
        let ok = DepStatus::Ended { end: 1.0, success: true };
        let failed = DepStatus::Ended { end: 1.0, success: false };
        assert_eq!(verdict(DepKind::AfterOk, open), Verdict::Wait);
        assert_eq!(verdict(DepKind::AfterOk, ok), Verdict::Met);
        assert_eq!(verdict(DepKind::AfterOk, failed), Verdict::Broken);
        assert_eq!(verdict(DepKind::AfterAny, failed), Verdict::Met);
        assert_eq!(verdict(DepKind::AfterAny, open), Verdict::Wait);
        assert_eq!(latest_finish(&[open, ok], 4.0), 6.0);
        assert_eq!(latest_finish(&[ok], 4.0), 0.0);
    }

    #[test]
    fn a_deadline_too_close_is_refused_with_the_earliest_that_fits() {
        let spec = JobSpec::simple(60.0, 100.0, Money::from_credits(10));
        let e = plan(&spec, 50.0).unwrap_err();
        assert_eq!(e.earliest, 110.0);
        let mut later = spec.clone();
        later.qos.deadline = e.earliest;
        let p = plan(&later, 50.0).unwrap();
        assert_eq!(p.window.deadline(), 60.0);
        assert_eq!(plan(&spec, 0.0).unwrap().window, spec);
    }

    proptest! {
        /// The rule never under-promises: whenever the dependencies end by their promise (at
        /// any `t` up to the wait), the share the job then needs to finish by its deadline is
        /// at most the share it has held since submission; while it waits, the share the model
        /// sees it hold is that share, constant.
        #[test]
        fn the_share_held_covers_any_start_by_the_promise(
            estimate in 1.0f64..10_000.0,
            cpus in 1u32..8,
            wait in 0.0f64..100_000.0,
            slack in 0.0f64..100_000.0,
            frac in 0.0f64..=1.0,
        ) {
            let least = estimate / f64::from(cpus);
            let deadline = wait + least + slack;
            let spec = JobSpec::simple(estimate, deadline, Money::ZERO).with_cpus_per_task(cpus);
            let p = plan(&spec, wait).unwrap();
            prop_assert!(p.window.validate().is_ok());
            let now = 1000.0;
            let held = p.window.estimate() / p.window.deadline();
            let start = now + wait * frac;
            let needed = required_share(estimate, 0.0, now + deadline, start, f64::INFINITY, f64::INFINITY);
            prop_assert!(needed <= held * (1.0 + 1e-9), "needed {needed} > held {held}");
            let (work, rate) = waiting_commitment(p.window.estimate(), p.window.deadline(), now, now + deadline);
            prop_assert!((rate - held).abs() <= 1e-12 * held.max(1.0));
            // Progressing at `rate`, the commitment's Algorithm 2 share stays `held`.
            let t = now + wait * frac;
            let s = required_share(work, rate * (t - now), now + deadline, t, 0.0, f64::INFINITY);
            prop_assert!((s - held).abs() <= 1e-6 * held.max(1.0), "{s} vs {held}");
        }

        /// Refused exactly when the window after the promise is shorter than the job, and the
        /// earliest deadline suggested is then accepted.
        #[test]
        fn refused_only_when_too_short_and_the_suggestion_fits(
            estimate in 1.0f64..10_000.0,
            wait in 0.0f64..100_000.0,
            deadline in 1.0f64..200_000.0,
        ) {
            let spec = JobSpec::simple(estimate, deadline, Money::ZERO);
            match plan(&spec, wait) {
                Ok(p) => prop_assert!(deadline - wait >= estimate && p.window.deadline() == deadline - wait),
                Err(e) => {
                    prop_assert!(deadline - wait < estimate);
                    let mut s = spec.clone();
                    s.qos.deadline = e.earliest;
                    prop_assert!(plan(&s, wait).is_ok());
                }
            }
        }
    }
}
