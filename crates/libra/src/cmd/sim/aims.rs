//! `libra sim bench --aims`: issue 14's simulator aims, measured side by side and judged. Each
//! run is a fresh `libra sim bench-one` process (its own peak memory); within a round the
//! policies run in turn, so that a ratio compares runs that saw the same machine; the verdicts
//! are on medians over the rounds. This machine class is shared and noisy: the rounds, the
//! range and the engine-alone floor (`--replay`) are what make one figure readable.

use super::bench::BenchRow;
use serde::Serialize;

/// The full real trace under `libra+$` in under this many seconds.
pub const TRACE_AIM_S: f64 = 0.3;
/// `libra+$` and `libra` within this factor of `edf-bf`'s wall time on the synthetic trace.
pub const WITHIN_AIM: f64 = 3.0;
/// The million-job case in under this many seconds ...
pub const MILLION_AIM_S: f64 = 60.0;
/// ... and this much peak memory.
pub const MILLION_AIM_MIB: f64 = 2048.0;
/// The sizes the issue states its aims at.
pub const ISSUE_JOBS: usize = 100_000;
pub const ISSUE_NODES: usize = 10_000;
pub const ISSUE_MILLION: usize = 1_000_000;

/// The time-shared policies the aims are about, and the baseline they are held against.
pub const POLICIES: [&str; 2] = ["libra+$", "libra"];
pub const BASELINE: &str = "edf-bf";

/// One kind of case, run once per round for each of its policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Case {
    /// The real trace, whole (`bench-one --trace`).
    Trace { path: String, name: String },
    /// The synthetic trace (`bench-one --synthetic-jobs`), `rounds` times.
    Within { jobs: usize, nodes: usize },
    /// The million-job case, `rounds` times (once by default: minutes per policy).
    Million { jobs: usize, nodes: usize, rounds: usize },
}

impl Case {
    /// The policies of the case, in the order each round runs them.
    pub fn policies(&self) -> Vec<&'static str> {
        match self {
            Case::Trace { .. } => vec![POLICIES[0], POLICIES[1], BASELINE],
            Case::Within { .. } | Case::Million { .. } => vec![BASELINE, POLICIES[0], POLICIES[1]],
        }
    }

    /// `bench-one`'s arguments for `policy`: the time-shared policies are timed again with their
    /// decisions replayed (`--replay`, the engine's own work) except in the million-job case,
    /// where that would double minutes; there the decisions' digest is kept instead.
    pub fn args(&self, policy: &str) -> Vec<String> {
        let mut a = vec!["--policy".to_string(), policy.to_string()];
        match self {
            Case::Trace { path, .. } => a.extend(["--trace".to_string(), path.clone()]),
            Case::Within { jobs, nodes } | Case::Million { jobs, nodes, .. } => a.extend([
                "--synthetic-jobs".to_string(),
                jobs.to_string(),
                "--nodes".to_string(),
                nodes.to_string(),
            ]),
        }
        match self {
            Case::Million { .. } => a.push("--digest".into()),
            _ if policy != BASELINE => a.push("--replay".into()),
            _ => {}
        }
        a
    }

    /// The rounds of the case: `rounds`, or the million-job case's own.
    pub fn rounds(&self, rounds: usize) -> usize {
        match self {
            Case::Million { rounds, .. } => *rounds,
            _ => rounds,
        }
    }
}

/// One aim for one policy, judged.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AimRow {
    /// What is aimed at, with the sizes measured.
    pub aim: String,
    pub policy: String,
    /// Whether the sizes are the issue's (the verdict is about the issue's aim only then).
    pub issue_sizes: bool,
    /// Wall seconds of each round's run.
    pub runs_s: Vec<f64>,
    pub median_s: f64,
    /// Each round's run over `edf-bf`'s run of the same round (the synthetic 10^5 aim).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub against_edf_bf: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_against_edf_bf: Option<f64>,
    /// Each round's run again with its own decisions replayed: the engine's own work, which no
    /// admission can save.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replay_s: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_median_s: Option<f64>,
    pub peak_rss_mib: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions_sha256: Option<String>,
    /// Whether every round's run made the same decisions (the million-job case, where each run
    /// gives its digest): `false` is a bug in the simulator, and the aim is then not met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions_same: Option<bool>,
    /// The aim's bar, in words ("-" for a row shown for comparison only).
    pub target: String,
    /// Whether the aim is met (`None`: a row shown for comparison, with no aim of its own).
    pub met: Option<bool>,
}

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The aims judged from the runs: `runs[r]` holds round `r`'s rows of `case`, one per policy.
pub fn judge(case: &Case, runs: &[Vec<BenchRow>]) -> Vec<AimRow> {
    let of = |policy: &str| -> Vec<&BenchRow> {
        runs.iter().filter_map(|round| round.iter().find(|r| r.policy == policy)).collect()
    };
    let sims = |rows: &[&BenchRow]| rows.iter().map(|r| r.sim_s).collect::<Vec<_>>();
    let peak = |rows: &[&BenchRow]| rows.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max);
    let replays = |rows: &[&BenchRow]| rows.iter().filter_map(|r| r.replay_s).collect::<Vec<_>>();
    let row = |policy: &str, rows: &[&BenchRow], aim: String, issue_sizes: bool, target: String| {
        let runs_s = sims(rows);
        let replay_s = replays(rows);
        AimRow {
            aim,
            policy: policy.to_string(),
            issue_sizes,
            median_s: median(&runs_s),
            runs_s,
            against_edf_bf: Vec::new(),
            median_against_edf_bf: None,
            replay_median_s: (!replay_s.is_empty()).then(|| median(&replay_s)),
            replay_s,
            peak_rss_mib: peak(rows),
            decisions_sha256: rows.last().and_then(|r| r.decisions_sha256.clone()),
            decisions_same: None,
            target,
            met: None,
        }
    };
    // A policy shown beside the aims for scale, with no aim of its own (when it ran).
    let comparison = |policy: &str, aim: String| {
        let rows = of(policy);
        (!rows.is_empty()).then(|| row(policy, &rows, aim, false, "-".into()))
    };
    match case {
        Case::Trace { name, .. } => {
            let rows = of(POLICIES[0]);
            let mut r = row(
                POLICIES[0],
                &rows,
                format!("{name}, every job, under libra+$"),
                name.starts_with("SDSC-SP2"),
                format!("median under {TRACE_AIM_S} s"),
            );
            r.met = Some(r.median_s < TRACE_AIM_S);
            // The other policies of the case, for scale: no aim of their own here.
            let mut out = vec![r];
            out.extend(
                [POLICIES[1], BASELINE]
                    .into_iter()
                    .filter_map(|p| comparison(p, format!("{name}, every job (for comparison)"))),
            );
            out
        }
        Case::Within { jobs, nodes } => {
            let issue = *jobs == ISSUE_JOBS && *nodes == ISSUE_NODES;
            let mut out = Vec::new();
            for p in POLICIES {
                // Each round's ratio, from the runs of the same round only.
                let against: Vec<f64> = runs
                    .iter()
                    .filter_map(|round| {
                        let b = round.iter().find(|r| r.policy == BASELINE)?;
                        let x = round.iter().find(|r| r.policy == p)?;
                        Some(x.sim_s / b.sim_s)
                    })
                    .collect();
                let mut r = row(
                    p,
                    &of(p),
                    format!("{jobs} synthetic jobs on {nodes} nodes, within {WITHIN_AIM}x of edf-bf"),
                    issue,
                    format!("median of the rounds' ratios at most {WITHIN_AIM}"),
                );
                let m = median(&against);
                r.met = Some(m <= WITHIN_AIM);
                r.median_against_edf_bf = Some(m);
                r.against_edf_bf = against;
                out.push(r);
            }
            out.extend(comparison(
                BASELINE,
                format!("{jobs} synthetic jobs on {nodes} nodes (the baseline)"),
            ));
            out
        }
        Case::Million { jobs, nodes, .. } => {
            let issue = *jobs == ISSUE_MILLION && *nodes == ISSUE_NODES;
            let mut out = Vec::new();
            for p in POLICIES {
                let rows = of(p);
                let mut r = row(
                    p,
                    &rows,
                    format!("{jobs} synthetic jobs on {nodes} nodes"),
                    issue,
                    format!("median under {MILLION_AIM_S} s, every run under {MILLION_AIM_MIB} MiB"),
                );
                // The runs of one binary on one workload: the same decisions, or a bug.
                let same = rows.windows(2).all(|w| w[0].decisions_sha256 == w[1].decisions_sha256);
                r.decisions_same = Some(same);
                r.met = Some(
                    !r.runs_s.is_empty()
                        && r.median_s < MILLION_AIM_S
                        && r.peak_rss_mib < MILLION_AIM_MIB
                        && same,
                );
                out.push(r);
            }
            out.extend(comparison(
                BASELINE,
                format!("{jobs} synthetic jobs on {nodes} nodes (the baseline)"),
            ));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(policy: &str, sim_s: f64, replay_s: Option<f64>) -> BenchRow {
        BenchRow {
            case: "c".into(),
            policy: policy.into(),
            jobs: 1,
            nodes: 1,
            events: 1,
            load_s: 0.0,
            sim_s,
            cpu_s: sim_s,
            jobs_per_s: 1.0,
            peak_rss_mib: 10.0 + sim_s,
            decisions_sha256: None,
            replay_s,
            replay_same: replay_s.map(|_| true),
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    /// The ratio is taken within a round: a slow round for every policy (a busy machine) moves
    /// no ratio, and the verdict is on the median of the rounds' ratios.
    #[test]
    fn the_within_aim_compares_runs_of_the_same_round() {
        let case = Case::Within { jobs: ISSUE_JOBS, nodes: ISSUE_NODES };
        let rounds = vec![
            vec![
                bench("edf-bf", 1.0, None),
                bench("libra+$", 2.0, Some(0.5)),
                bench("libra", 4.0, Some(1.0)),
            ],
            vec![
                bench("edf-bf", 10.0, None),
                bench("libra+$", 25.0, Some(5.0)),
                bench("libra", 20.0, Some(2.0)),
            ],
            vec![
                bench("edf-bf", 2.0, None),
                bench("libra+$", 7.0, Some(0.7)),
                bench("libra", 5.0, Some(3.0)),
            ],
        ];
        let rows = judge(&case, &rounds);
        let plus = rows.iter().find(|r| r.policy == "libra+$").unwrap();
        assert_eq!(plus.against_edf_bf, vec![2.0, 2.5, 3.5]);
        assert_eq!(plus.median_against_edf_bf, Some(2.5));
        assert!(plus.met == Some(true) && plus.issue_sizes);
        assert_eq!(plus.runs_s, vec![2.0, 25.0, 7.0]);
        assert_eq!(plus.median_s, 7.0);
        assert_eq!(plus.replay_median_s, Some(0.7));
        assert_eq!(plus.peak_rss_mib, 35.0);
        let libra = rows.iter().find(|r| r.policy == "libra").unwrap();
        assert_eq!(libra.against_edf_bf, vec![4.0, 2.0, 2.5]);
        assert_eq!(libra.met, Some(true), "median 2.5");
        // One more slow round for libra tips its median over the bar.
        let mut more = rounds.clone();
        more.push(vec![bench("edf-bf", 1.0, None), bench("libra+$", 1.0, None), bench("libra", 3.5, None)]);
        more.push(vec![bench("edf-bf", 1.0, None), bench("libra+$", 1.0, None), bench("libra", 3.2, None)]);
        let libra = judge(&case, &more).into_iter().find(|r| r.policy == "libra").unwrap();
        assert_eq!(libra.median_against_edf_bf, Some(3.2));
        assert_eq!(libra.met, Some(false));
        assert_eq!(judge(&case, &more).iter().find(|r| r.policy == "edf-bf").unwrap().met, None);
        // Other sizes are measured and judged, and say they are not the issue's.
        let small = judge(&Case::Within { jobs: 500, nodes: 50 }, &rounds);
        assert!(small.iter().all(|r| !r.issue_sizes));
    }

    #[test]
    fn the_trace_and_million_aims_hold_their_bars() {
        let case = Case::Trace { path: "t".into(), name: "SDSC-SP2-1998-4.2-cln.swf.gz".into() };
        let round = |s: f64| {
            vec![bench("libra+$", s, Some(0.1)), bench("libra", 0.5, Some(0.1)), bench("edf-bf", 0.2, None)]
        };
        let rows = judge(&case, &[round(0.25), round(0.35), round(0.29)]);
        assert_eq!(rows[0].policy, "libra+$");
        assert_eq!(rows[0].median_s, 0.29);
        assert!(rows[0].met == Some(true) && rows[0].issue_sizes);
        assert!(rows[1..].iter().all(|r| r.met.is_none()), "libra and edf-bf are shown for comparison");
        let rows = judge(&case, &[round(0.25), round(0.35), round(0.31)]);
        assert_eq!(rows[0].met, Some(false));

        let case = Case::Million { jobs: ISSUE_MILLION, nodes: ISSUE_NODES, rounds: 1 };
        let rows = judge(
            &case,
            &[vec![bench("edf-bf", 10.0, None), bench("libra+$", 59.0, None), bench("libra", 61.0, None)]],
        );
        let get = |p: &str| rows.iter().find(|r| r.policy == p).unwrap().met;
        assert_eq!(get("libra+$"), Some(true));
        assert_eq!(get("libra"), Some(false));
        let mut fat = bench("libra+$", 30.0, None);
        fat.peak_rss_mib = 2100.0;
        let rows = judge(&case, &[vec![fat]]);
        assert_eq!(rows.iter().find(|r| r.policy == "libra+$").unwrap().met, Some(false), "over 2 GiB");
        assert_eq!(rows.iter().find(|r| r.policy == "libra").unwrap().met, Some(false), "not run is not met");

        // Over several rounds, the median is judged (one slow run of three does not fail it),
        // memory in every run, and every run must have made the same decisions.
        let case = Case::Million { jobs: ISSUE_MILLION, nodes: ISSUE_NODES, rounds: 3 };
        let digest = |mut b: BenchRow, d: &str| {
            b.decisions_sha256 = Some(d.into());
            b
        };
        let round = |plus: f64, d: &str| {
            vec![
                digest(bench("edf-bf", 6.0, None), "e"),
                digest(bench("libra+$", plus, None), d),
                digest(bench("libra", 50.0, None), "l"),
            ]
        };
        let rows = judge(&case, &[round(58.0, "p"), round(79.0, "p"), round(59.0, "p")]);
        let plus = rows.iter().find(|r| r.policy == "libra+$").unwrap();
        assert_eq!((plus.median_s, plus.met, plus.decisions_same), (59.0, Some(true), Some(true)));
        let rows = judge(&case, &[round(58.0, "p"), round(61.0, "p"), round(62.0, "p")]);
        assert_eq!(rows.iter().find(|r| r.policy == "libra+$").unwrap().met, Some(false), "median 61 s");
        let rows = judge(&case, &[round(58.0, "p"), round(57.0, "q"), round(59.0, "p")]);
        let plus = rows.iter().find(|r| r.policy == "libra+$").unwrap();
        assert_eq!((plus.met, plus.decisions_same), (Some(false), Some(false)), "other decisions in one run");
        assert_eq!(rows.iter().find(|r| r.policy == "libra").unwrap().met, Some(true));
    }

    #[test]
    fn each_case_runs_its_policies_with_the_engine_alone_timed() {
        let c = Case::Within { jobs: 7, nodes: 3 };
        assert_eq!(c.policies(), vec!["edf-bf", "libra+$", "libra"]);
        assert_eq!(
            c.args("libra+$"),
            ["--policy", "libra+$", "--synthetic-jobs", "7", "--nodes", "3", "--replay"]
        );
        assert_eq!(c.args("edf-bf"), ["--policy", "edf-bf", "--synthetic-jobs", "7", "--nodes", "3"]);
        let m = Case::Million { jobs: 7, nodes: 3, rounds: 1 };
        assert_eq!(
            m.args("libra"),
            ["--policy", "libra", "--synthetic-jobs", "7", "--nodes", "3", "--digest"]
        );
        assert_eq!(m.rounds(5), 1);
        assert_eq!(Case::Million { jobs: 7, nodes: 3, rounds: 3 }.rounds(5), 3);
        assert_eq!(c.rounds(5), 5);
    }
}
