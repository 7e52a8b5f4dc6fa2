//! An SWF trace replayed as it was recorded: every job, its own submit times, its own runtime
//! and the user's requested time as the estimate, and no QoS model. This is how other
//! simulators replay a trace, so the space-shared policies' figures (mean wait, bounded
//! slowdown, utilisation, makespan) can be compared with theirs.

use super::SimJob;
use crate::swf::{known, SwfRecord};
use libra_core::Money;

/// No deadline binds: far past any trace's span (about 31,700 years).
pub const NO_DEADLINE: f64 = 1e12;

/// A budget no flat price reaches, small enough that a million of them still sum in an i64.
pub const NO_BUDGET: Money = Money(1_000_000_000_000);

/// The trace's jobs with their recorded submit times (from the first job's), runtimes
/// (cancelled jobs with an unknown runtime count as 0) and requested times as estimates (the
/// runtime when the trace has no requested time).
pub fn generate(records: &[SwfRecord]) -> Vec<SimJob> {
    let Some(first) = records.first().map(|r| r.submit) else {
        return Vec::new();
    };
    let mut jobs: Vec<SimJob> = records
        .iter()
        .map(|r| {
            let runtime = r.run_time_or_zero() as f64;
            let estimate = known(r.req_time).filter(|t| *t > 0).map_or(runtime, |t| t as f64);
            SimJob {
                id: u64::try_from(r.job).unwrap_or(0),
                submit: (r.submit - first) as f64,
                runtime,
                estimate,
                procs: u32::try_from(r.procs()).unwrap_or(u32::MAX),
                deadline: NO_DEADLINE,
                budget: NO_BUDGET,
                user: r.known_user().and_then(|u| u32::try_from(u).ok()).unwrap_or(0),
                urgent: false,
            }
        })
        .collect();
    jobs.sort_by(|a, b| a.submit.total_cmp(&b.submit));
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swf::{ReadMode, SwfReader};

    #[test]
    fn keeps_the_recorded_times_and_estimates() {
        let text = "; MaxNodes: 4\n\
                    1 100 5 50 2 -1 -1 2 60 -1 1 7 1 1 1 1 -1 -1\n\
                    2 130 0 -1 1 -1 -1 1 -1 -1 5 8 1 1 1 1 -1 -1\n";
        let recs: Vec<SwfRecord> =
            SwfReader::new(text.as_bytes(), ReadMode::Strict).unwrap().map(|r| r.unwrap()).collect();
        let jobs = generate(&recs);
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0].submit, jobs[0].runtime, jobs[0].estimate, jobs[0].procs), (0.0, 50.0, 60.0, 2));
        // Unknown runtime counts as 0, unknown requested time falls back to the runtime.
        assert_eq!((jobs[1].submit, jobs[1].runtime, jobs[1].estimate), (30.0, 0.0, 0.0));
        assert_eq!(jobs[1].user, 8);
        assert_eq!(jobs[0].deadline, NO_DEADLINE);
    }
}
