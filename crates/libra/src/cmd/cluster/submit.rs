//! `libra submit`: a job's estimate, deadline and budget, from flags or from `#LIBRA` lines in a
//! job script (as sbatch reads `#SBATCH`). The answer is immediate: accepted with the node(s),
//! the share and the cost held, or rejected with the reason and a suggestion.

use super::common::{fmt_dur, fmt_time, money, now, parse_deadline, parse_duration, print_json, Conn};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser};
use libra_api::{JobInfo, JobState, SubmitRequest};
use libra_core::job::{JobDetails, QosConstraints, QosOptimisation, ResourceRequirements};
use libra_core::{JobSpec, Money};
use std::path::Path;

/// The job's specification (flags, or `#LIBRA` lines in a script; flags win).
#[derive(Debug, Clone, Default, Args)]
pub struct JobOpts {
    /// Runtime estimate: CPU time on one dedicated CPU (90s, 10m, 2h).
    #[arg(long, short = 'e')]
    pub estimate: Option<String>,
    /// Deadline: relative (1h) or absolute UTC (2026-11-22T21:00:00Z, @UNIXSECONDS).
    #[arg(long, short = 'd')]
    pub deadline: Option<String>,
    /// Budget in credits (500, 12.50): the most you will be charged.
    #[arg(long, short = 'b')]
    pub budget: Option<String>,
    /// Processors (nodes), each running the command with the same share.
    #[arg(long, short = 'n')]
    pub procs: Option<u32>,
    /// Memory per node: 512M, 2G, or MB.
    #[arg(long)]
    pub mem: Option<String>,
    /// A name for the job.
    #[arg(long, short = 'J')]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub opts: JobOpts,
    #[command(flatten)]
    pub conn: Conn,
    /// A job script with `#LIBRA --estimate 10m` lines, or (after `--`) a command and its
    /// arguments: `libra submit -e 10m -d 1h -b 500 -- ./simulate --steps 100`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Parser)]
#[command(name = "#LIBRA", no_binary_name = true)]
struct ScriptLine {
    #[command(flatten)]
    opts: JobOpts,
}

impl JobOpts {
    /// Fields missing here are taken from `other`.
    fn or(self, other: JobOpts) -> JobOpts {
        JobOpts {
            estimate: self.estimate.or(other.estimate),
            deadline: self.deadline.or(other.deadline),
            budget: self.budget.or(other.budget),
            procs: self.procs.or(other.procs),
            mem: self.mem.or(other.mem),
            name: self.name.or(other.name),
        }
    }

    pub fn spec(&self, now: f64) -> Result<JobSpec> {
        let estimate = self
            .estimate
            .as_deref()
            .ok_or_else(|| anyhow!("--estimate: give the runtime estimate (90s, 10m, 2h)"))?;
        let estimate = parse_duration(estimate).map_err(|e| anyhow!("--estimate: {e}"))?;
        let deadline = self
            .deadline
            .as_deref()
            .ok_or_else(|| anyhow!("--deadline: give a deadline (1h, or 2026-11-22T21:00:00Z)"))?;
        let deadline = parse_deadline(deadline, now).map_err(|e| anyhow!("--deadline: {e}"))?;
        let budget = self
            .budget
            .as_deref()
            .ok_or_else(|| anyhow!("--budget: give the most you will pay, in credits (500, 12.50)"))?;
        let budget: Money = budget.parse().map_err(|e| anyhow!("--budget: {e}"))?;
        let mem_mb = match self.mem.as_deref() {
            None => 0,
            Some(m) => parse_mem(m).ok_or_else(|| {
                anyhow!("--mem: '{m}' is not accepted: give e.g. 512M, 2G or a number of MB")
            })?,
        };
        Ok(JobSpec {
            details: JobDetails { estimate, length_mi: None },
            resources: ResourceRequirements {
                procs: self.procs.unwrap_or(1),
                mem_mb,
                disk_mb: 0,
                cpus_per_task: 1,
            },
            qos: QosConstraints { deadline, budget },
            optimise: QosOptimisation::Cost,
        })
    }
}

fn parse_mem(s: &str) -> Option<u64> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mult) = match t.chars().last()? {
        'G' => (&t[..t.len() - 1], 1024.0),
        'M' => (&t[..t.len() - 1], 1.0),
        'K' => (&t[..t.len() - 1], 1.0 / 1024.0),
        _ => (t.as_str(), 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult).ceil() as u64)
}

/// Reads `#LIBRA` lines (before the first command line) from a job script.
fn script_opts(text: &str, path: &Path) -> Result<JobOpts> {
    let mut opts = JobOpts::default();
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.trim().strip_prefix("#LIBRA") else { continue };
        let line_opts = ScriptLine::try_parse_from(rest.split_whitespace()).map_err(|e| {
            anyhow!("{}:{}: {}", path.display(), i + 1, e.to_string().lines().next().unwrap_or(""))
        })?;
        opts = line_opts.opts.or(opts);
    }
    Ok(opts)
}

/// The command the node runs; `libra` itself is resolved to this binary so that test jobs like
/// `libra burn` work without `libra` on the node's PATH.
pub fn resolve_command(mut cmd: Vec<String>) -> Vec<String> {
    if cmd.first().map(String::as_str) == Some("libra") {
        if let Ok(exe) = std::env::current_exe() {
            cmd[0] = exe.display().to_string();
        }
    }
    cmd
}

pub fn build_request(opts: JobOpts, command: Vec<String>, now: f64) -> Result<SubmitRequest> {
    let (opts, command) = match command.as_slice() {
        [one] if Path::new(one).is_file() => {
            let path = Path::new(one);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading job script {}", path.display()))?;
            let from_script = script_opts(&text, path)?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (opts.or(from_script), vec!["sh".into(), "-c".into(), text, name])
        }
        _ => (opts, resolve_command(command)),
    };
    let spec = opts.spec(now)?;
    Ok(SubmitRequest { spec, command, name: opts.name })
}

pub fn print_decision(job: &JobInfo) {
    if job.state == JobState::Rejected {
        println!("job {} REJECTED: {}", job.id, job.reason.as_deref().unwrap_or("no reason given"));
        match &job.suggestion {
            Some(s) => println!(
                "suggestion: a deadline of {} ({}) and a budget of {} would be accepted now:\n  libra submit --estimate {}s --deadline {}s --budget {} ...",
                fmt_dur(s.deadline),
                fmt_time(job.submit_time + s.deadline),
                s.budget,
                job.estimate,
                s.deadline.ceil(),
                s.budget
            ),
            None => println!("no deadline or budget would be accepted now (not enough nodes have room)"),
        }
    } else {
        println!(
            "job {} accepted on {}: share {:.3} CPU, {} on hold (budget {}), due {}",
            job.id,
            job.nodes.join(","),
            job.share,
            money(job.cost),
            money(job.budget),
            fmt_time(job.deadline_at)
        );
    }
}

pub fn run(a: SubmitArgs) -> Result<()> {
    let req = build_request(a.opts, a.command, now())?;
    let client = a.conn.client()?;
    let job = client.submit(&req)?;
    if a.conn.json {
        print_json(&job)?;
    } else {
        print_decision(&job);
    }
    if job.state == JobState::Rejected {
        bail!("job {} was rejected", job.id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_fill_what_flags_leave_open() {
        let dir = std::env::temp_dir().join(format!("libra-submit-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("job.sh");
        std::fs::write(
            &p,
            "#!/bin/sh\n#LIBRA --estimate 10m --deadline 1h\n#LIBRA --budget 500 -n 2\necho hi\n",
        )
        .unwrap();
        let flags = JobOpts { budget: Some("20".into()), ..Default::default() };
        let req = build_request(flags, vec![p.display().to_string()], 1000.0).unwrap();
        assert_eq!(req.spec.estimate(), 600.0);
        assert_eq!(req.spec.deadline(), 3600.0);
        assert_eq!(req.spec.budget(), Money::from_credits(20));
        assert_eq!(req.spec.procs(), 2);
        assert_eq!(req.command[0], "sh");
        std::fs::write(&p, "#LIBRA --estimat 10m\n").unwrap();
        let err =
            build_request(JobOpts::default(), vec![p.display().to_string()], 0.0).unwrap_err().to_string();
        assert!(err.contains("job.sh:1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_and_bad_fields_are_named() {
        let o = JobOpts { estimate: Some("10m".into()), deadline: Some("1h".into()), ..Default::default() };
        assert!(o.spec(0.0).unwrap_err().to_string().starts_with("--budget"));
        let o = JobOpts { budget: Some("x".into()), ..o };
        assert!(o.spec(0.0).unwrap_err().to_string().starts_with("--budget"));
        assert_eq!(parse_mem("2G"), Some(2048));
        assert_eq!(parse_mem("512"), Some(512));
        assert_eq!(parse_mem("lots"), None);
    }
}
