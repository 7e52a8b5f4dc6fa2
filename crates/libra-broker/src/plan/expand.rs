//! A plan's sweep: the cross product of its parameters' values, produced by index so that a
//! million jobs need no more memory than the value lists.

use super::{Domain, ParamType, Plan, PlanError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

/// More jobs than this in one plan is refused (the engine's tables stay manageable).
pub const MAX_JOBS: u64 = 100_000_000;

/// The values of every parameter; job `i` is the `i`-th combination, last parameter fastest.
#[derive(Debug, Clone, PartialEq)]
pub struct JobParams {
    pub names: Vec<String>,
    pub values: Vec<Vec<String>>,
    pub total: u64,
}

impl JobParams {
    /// Parameter name/value pairs of job `i` (0-based).
    pub fn job(&self, i: u64) -> Vec<(String, String)> {
        let mut rem = i;
        let mut out = vec![(String::new(), String::new()); self.names.len()];
        for k in (0..self.names.len()).rev() {
            let n = self.values[k].len() as u64;
            let v = &self.values[k][(rem % n) as usize];
            rem /= n;
            out[k] = (self.names[k].clone(), v.clone());
        }
        out
    }
}

fn fmt_num(v: f64, ty: ParamType) -> String {
    if ty == ParamType::Integer {
        format!("{}", v.round() as i64)
    } else {
        format!("{v}")
    }
}

/// Expands the plan. `root` is where `files` globs are matched; `seed` drives `random`.
pub fn expand(plan: &Plan, root: &Path, seed: u64) -> Result<JobParams, PlanError> {
    let mut names = Vec::new();
    let mut values = Vec::new();
    let mut total: u64 = 1;
    for (pi, p) in plan.parameters.iter().enumerate() {
        let too_many = || PlanError::at(p.line, 1, format!("at most {MAX_JOBS} jobs in a plan"));
        let vals: Vec<String> = match &p.domain {
            Domain::Default(v) => vec![v.clone()],
            Domain::Range { from, to, step, points } => {
                let n = match (step, points) {
                    (_, Some(n)) => *n,
                    (Some(s), None) => ((to - from) / s + 1e-9).floor() as u64 + 1,
                    (None, None) => {
                        let s = if to >= from { 1.0 } else { -1.0 };
                        ((to - from) / s + 1e-9).floor() as u64 + 1
                    }
                };
                if n > MAX_JOBS {
                    return Err(too_many());
                }
                (0..n)
                    .map(|k| {
                        let v = match (step, points) {
                            (_, Some(n)) if *n > 1 => from + (to - from) * k as f64 / (*n - 1) as f64,
                            (_, Some(_)) => *from,
                            (Some(s), None) => from + s * k as f64,
                            (None, None) => from + if to >= from { k as f64 } else { -(k as f64) },
                        };
                        fmt_num(v, p.ty)
                    })
                    .collect()
            }
            Domain::Random { from, to, points } => {
                if *points > MAX_JOBS {
                    return Err(too_many());
                }
                // One stream per parameter, so adding a parameter does not change the others.
                let mut rng =
                    ChaCha8Rng::seed_from_u64(seed ^ (pi as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                (0..*points)
                    .map(|_| {
                        if p.ty == ParamType::Integer {
                            let (a, b) = (from.round() as i64, to.round() as i64);
                            rng.random_range(a..=b).to_string()
                        } else if to > from {
                            fmt_num(rng.random_range(*from..*to), p.ty)
                        } else {
                            fmt_num(*from, p.ty)
                        }
                    })
                    .collect()
            }
            Domain::Select(vs) if p.ty == ParamType::Files => {
                let mut out = Vec::new();
                for pat in vs {
                    let matched = glob(root, pat);
                    if matched.is_empty() {
                        return Err(PlanError::found(
                            p.line,
                            1,
                            "a file pattern that matches at least one file",
                            pat,
                        ));
                    }
                    out.extend(matched);
                }
                out
            }
            Domain::Select(vs) => vs.clone(),
        };
        total = total.checked_mul(vals.len() as u64).filter(|&t| t <= MAX_JOBS).ok_or_else(too_many)?;
        names.push(p.name.clone());
        values.push(vals);
    }
    Ok(JobParams { names, values, total })
}

/// How many jobs the plan makes (without matching files: each files pattern counts as one).
pub fn count_jobs(params: &JobParams) -> u64 {
    params.total
}

/// Matches `*` and `?` in the last path component, relative to `root`; sorted.
fn glob(root: &Path, pattern: &str) -> Vec<String> {
    let (dir, pat) = match pattern.rsplit_once('/') {
        Some((d, p)) => (d, p),
        None => ("", pattern),
    };
    if !pat.contains(['*', '?']) {
        return if root.join(pattern).exists() { vec![pattern.to_string()] } else { Vec::new() };
    }
    let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| wildcard(pat.as_bytes(), n.as_bytes()))
        .map(|n| if dir.is_empty() { n } else { format!("{dir}/{n}") })
        .collect();
    out.sort();
    out
}

fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}
