//! Job arrays (`libra submit --array SPEC`): the task ids sbatch's `--array` accepts, the
//! request that submits them, and the one answer the whole array gets.

use crate::{JobInfo, SubmitRequest};
use libra_core::Suggestion;
use serde::{Deserialize, Serialize};

/// The most tasks one array may have (Slurm's default `MaxArraySize` is 1001; Libra admits every
/// task at submission, so the bound is what one admission may decide in one transaction).
pub const MAX_ARRAY_TASKS: usize = 10_000;

/// The largest task id accepted.
pub const MAX_TASK_ID: u32 = 4_000_000;

/// What the `--array` help and every refusal of a spec say is accepted.
pub const ARRAY_SPEC_HELP: &str = "give task ids as sbatch does: a range 0-99, a range with a step 0-99:2, a list 1,3,5-7, \
     optionally %N (at most N tasks running at once); ids from 0 to 4000000, at most 10000 tasks, each id once";

/// A parsed `--array` spec: the task ids in the order given (each once), and the `%N` limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    pub tasks: Vec<u32>,
    pub limit: Option<u32>,
}

/// Parses `0-99`, `0-99:2`, `1,3,5-7`, `0-99%10`. The error names `--array`, what was wrong
/// and what is accepted.
pub fn parse_array(spec: &str) -> Result<ArraySpec, String> {
    let bad = |why: String| format!("--array: '{spec}' is not accepted: {why}; {ARRAY_SPEC_HELP}");
    let s = spec.trim();
    if s.is_empty() {
        return Err(bad("it is empty".into()));
    }
    let (list, limit) = match s.split_once('%') {
        Some((l, n)) => {
            let n: u32 =
                n.trim().parse().map_err(|_| bad(format!("the limit %{n} is not a whole number")))?;
            if n == 0 {
                return Err(bad("the limit %0 would never run a task".into()));
            }
            (l, Some(n))
        }
        None => (s, None),
    };
    let id = |t: &str| -> Result<u32, String> {
        let v: u32 = t.trim().parse().map_err(|_| bad(format!("'{t}' is not a task id")))?;
        if v > MAX_TASK_ID {
            return Err(bad(format!("task id {v} is above {MAX_TASK_ID}")));
        }
        Ok(v)
    };
    let mut tasks: Vec<u32> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for part in list.split(',') {
        if part.trim().is_empty() {
            return Err(bad("an item of the list is empty".into()));
        }
        let (range, step) = match part.split_once(':') {
            Some((r, st)) => {
                let st: u32 =
                    st.trim().parse().map_err(|_| bad(format!("the step '{st}' is not a whole number")))?;
                if st == 0 {
                    return Err(bad("a step of 0 never advances".into()));
                }
                (r, st)
            }
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None if step != 1 => return Err(bad(format!("the step in '{part}' needs a range (0-99:2)"))),
            None => {
                let v = id(range)?;
                (v, v)
            }
        };
        if hi < lo {
            return Err(bad(format!("the range {lo}-{hi} is reversed")));
        }
        let mut t = lo;
        loop {
            if !seen.insert(t) {
                return Err(bad(format!("task {t} is given twice")));
            }
            tasks.push(t);
            if tasks.len() > MAX_ARRAY_TASKS {
                return Err(bad(format!("more than {MAX_ARRAY_TASKS} tasks")));
            }
            match t.checked_add(step) {
                Some(n) if n <= hi => t = n,
                _ => break,
            }
        }
    }
    Ok(ArraySpec { tasks, limit })
}

/// `POST /api/arrays`: one job, submitted once per task id of `array` (a spec as `parse_array`
/// reads it). The budget, deadline and resources in `job.spec` are each task's.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayRequest {
    pub array: String,
    pub job: SubmitRequest,
}

/// A task the array's admission refused.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedTask {
    pub task: u32,
    pub reason: String,
    pub suggestion: Option<Suggestion>,
}

/// The one answer for a whole array: every task accepted (`tasks`, each with its node, share,
/// cost and hold; `array_id` the first task's job id), or none kept (`refused` says which task
/// was refused and why, and `suggestion` the deadline and per-task budget that would take them
/// all, if any would).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayResponse {
    pub accepted: bool,
    pub array_id: Option<u64>,
    #[serde(default)]
    pub tasks: Vec<JobInfo>,
    #[serde(default)]
    pub refused: Vec<RefusedTask>,
    #[serde(default)]
    pub suggestion: Option<Suggestion>,
}

/// `12_7` (task 7 of array 12) or `12` (a job, or a whole array): how `status` and `cancel`
/// address jobs.
pub fn parse_job_ref(s: &str) -> Result<(u64, Option<u32>), String> {
    let bad = || {
        format!(
            "job id: '{s}' is not accepted: give a job id (12), or an array task (12_7: task 7 of array 12)"
        )
    };
    match s.split_once('_') {
        Some((a, t)) => Ok((a.parse().map_err(|_| bad())?, Some(t.parse().map_err(|_| bad())?))),
        None => Ok((s.parse().map_err(|_| bad())?, None)),
    }
}

/// How a job is shown: `12` alone, `12_7` for task 7 of array 12.
pub fn job_label(j: &JobInfo) -> String {
    match (j.array_id, j.array_task) {
        (Some(a), Some(t)) => format!("{a}_{t}"),
        _ => j.id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_as_sbatch_reads_them() {
        assert_eq!(parse_array("0-3").unwrap().tasks, vec![0, 1, 2, 3]);
        assert_eq!(parse_array("0-9:4").unwrap().tasks, vec![0, 4, 8]);
        assert_eq!(parse_array("1,3,5-7").unwrap().tasks, vec![1, 3, 5, 6, 7]);
        let s = parse_array("0-99%10").unwrap();
        assert_eq!((s.tasks.len(), s.limit), (100, Some(10)));
        assert_eq!(parse_array("7").unwrap().tasks, vec![7]);
        assert_eq!(parse_array("0-9999").unwrap().tasks.len(), 10_000);
    }

    #[test]
    fn bad_specs_name_the_flag_and_what_is_wrong() {
        for (spec, why) in [
            ("", "empty"),
            ("5-1", "reversed"),
            ("0-10000", "more than 10000"),
            ("1,,2", "empty"),
            ("a-3", "not a task id"),
            ("-1", "not a task id"),
            ("0-9:0", "step of 0"),
            ("0-9%0", "%0"),
            ("0-9%x", "not a whole number"),
            ("1,1", "twice"),
            ("5:2", "needs a range"),
            ("4000001", "above"),
        ] {
            let e = parse_array(spec).unwrap_err();
            assert!(e.starts_with("--array:") && e.contains(why), "{spec}: {e}");
            assert!(e.contains("0-99:2"), "says what is accepted: {e}");
        }
    }

    #[test]
    fn job_refs() {
        assert_eq!(parse_job_ref("12_7").unwrap(), (12, Some(7)));
        assert_eq!(parse_job_ref("12").unwrap(), (12, None));
        assert!(parse_job_ref("12_").is_err() && parse_job_ref("x").is_err());
    }
}
