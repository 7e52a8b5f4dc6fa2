//! `libra sbatch`: a Slurm batch script submitted to Libra as it is. Its `#SBATCH` lines (and
//! the same options on the command line) are read with Slurm's meanings, `#LIBRA` lines with
//! Libra's; the job then goes through exactly `libra submit`'s path (request, idempotent
//! submission, the immediate answer).
//!
//! Precedence, as sbatch: the command line over the script; in the script a `#LIBRA` line over
//! an `#SBATCH` line (it is the Libra-specific statement of the two).

use super::common::{now, Conn};
use super::submit::{self, JobOpts};
use crate::output::{emit, Said};
use anyhow::{anyhow, bail, Context, Result};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, Parser};
use libra_api::{ArrayRequest, JobState};
use std::path::Path;

/// The sbatch options Libra reads, with Slurm's meanings (a bare `-t 30` is 30 minutes).
#[derive(Debug, Clone, Default, Args)]
pub struct SbatchOpts {
    /// Libra: runtime estimate, CPU time per node on one dedicated CPU (90s, 10m, 2h). Without
    /// it the time limit (-t) is used as the estimate (and said so); with neither the job is
    /// refused.
    #[arg(long)]
    pub estimate: Option<String>,
    /// Libra (and Slurm's --deadline): when the job must be done, relative (1h) or absolute UTC
    /// (2026-11-22T21:00:00Z). Required.
    #[arg(long)]
    pub deadline: Option<String>,
    /// Libra: the most you will be charged, in credits (500, 12.50). With --array, per task.
    /// Required.
    #[arg(long)]
    pub budget: Option<String>,
    /// Job name (default: the script's file name, as sbatch).
    #[arg(long = "job-name", short = 'J')]
    pub job_name: Option<String>,
    /// CPUs per task: the job may use up to this many CPUs at once.
    #[arg(long = "cpus-per-task", short = 'c')]
    pub cpus_per_task: Option<u32>,
    /// Memory per node, in MB or with a unit (512M, 2G), as sbatch.
    #[arg(long)]
    pub mem: Option<String>,
    /// Memory per CPU (512M, 2G): the job's memory per node is this times --cpus-per-task.
    #[arg(long = "mem-per-cpu")]
    pub mem_per_cpu: Option<String>,
    /// Time limit, in Slurm's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (or
    /// 90s, 2h); the job is stopped (TIMEOUT) when it has run this long.
    #[arg(long, short = 't')]
    pub time: Option<String>,
    /// Standard output file: %j job id, %x name, %A/%a array job and task, %N node, %%.
    #[arg(long, short = 'o')]
    pub output: Option<String>,
    /// Standard error file (default: the standard output file).
    #[arg(long, short = 'e')]
    pub error: Option<String>,
    /// Working directory of the job (default: where you submit from).
    #[arg(long, short = 'D')]
    pub chdir: Option<String>,
    /// A job array: 0-99, 0-99:2, 1,3,5-7 (each task a job of its own; see `libra submit --help`).
    #[arg(long, short = 'a')]
    pub array: Option<String>,
    /// The job's environment: ALL (default), NONE, or a comma list of NAME and NAME=VALUE.
    #[arg(long)]
    pub export: Option<String>,
    /// Number of nodes: only 1 (a batch script runs once; Libra's multi-node jobs run the command
    /// on every node: `#LIBRA --procs N`).
    #[arg(long, short = 'N')]
    pub nodes: Option<String>,
    /// Number of tasks: only 1 (see --nodes).
    #[arg(long, short = 'n')]
    pub ntasks: Option<String>,
    /// Tasks per node: only 1 (see --nodes).
    #[arg(long = "ntasks-per-node")]
    pub ntasks_per_node: Option<String>,
    /// Ignored with a warning: the job's environment is yours at submission (--export=ALL).
    #[arg(long = "get-user-env", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub get_user_env: Option<String>,
    /// Ignored with a warning: Libra enforces CPU shares, not CPU placement.
    #[arg(long)]
    pub hint: Option<String>,
    /// Ignored with a warning: Libra keeps no job comment.
    #[arg(long)]
    pub comment: Option<String>,
    /// Ignored with a warning: Libra places jobs on any node by price.
    #[arg(long, short = 'p')]
    pub partition: Option<String>,
    /// The account (project) to charge, as sbatch -A (see `libra submit --help`).
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// Wait for other jobs: afterok:JOB[:JOB...] and afterany:JOB[:JOB...], joined by ',', as
    /// sbatch -d (see `libra submit --help` for how Libra decides such a job).
    #[arg(long, short = 'd')]
    pub dependency: Option<String>,
    /// Ignored with a warning: the deadline and budget are Libra's quality of service.
    #[arg(long, short = 'q')]
    pub qos: Option<String>,
    /// Ignored with a warning: Libra sends no mail.
    #[arg(long = "mail-type")]
    pub mail_type: Option<String>,
    /// Ignored with a warning: Libra sends no mail.
    #[arg(long = "mail-user")]
    pub mail_user: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_long_help = SBATCH_HELP)]
pub struct SbatchArgs {
    #[command(flatten)]
    pub opts: SbatchOpts,
    /// Print only the job id (or the array id), as `sbatch --parsable`.
    #[arg(long)]
    pub parsable: bool,
    /// Run this command line (with sh) instead of a script, as `sbatch --wrap`.
    #[arg(long)]
    pub wrap: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
    /// The batch script, then its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "SCRIPT [ARGS]")]
    pub script: Vec<String>,
}

const SBATCH_HELP: &str = "\
Reads the script's #SBATCH lines (before its first command) with Slurm's meanings and its
#LIBRA lines with `libra submit`'s; the command line wins over the script, a #LIBRA line over
an #SBATCH line. Libra needs a deadline and a budget (--deadline/--budget or `#LIBRA -d 1h -b 50`).

Honoured: -J, -c, --mem, --mem-per-cpu (times -c), -t, -o/-e (%j %x %A %a %N), -D, -a/--array,
--export, -A/--account, -d/--dependency (afterok, afterany), -N 1, -n 1, --ntasks-per-node=1.
Warned and ignored: --comment, -p/--partition, -q/--qos, --mail-type, --mail-user,
--get-user-env, --hint.
Refused, with the Libra way: every other option (e.g. --begin, --nodelist, --gres).

Examples:
  libra sbatch --deadline 2h --budget 50 job.sh
  libra sbatch --parsable --deadline 1h --budget 5 --wrap 'hostname'
  #SBATCH -J sim -c 2 -t 30 -o sim-%j.out   (in job.sh; -t 30 is 30 minutes, the estimate then)";

#[derive(Parser)]
#[command(name = "#SBATCH", no_binary_name = true)]
struct SbatchLine {
    #[command(flatten)]
    opts: SbatchOpts,
}

/// What to do instead, for sbatch options Libra has no counterpart for.
fn libra_way(option: &str) -> &'static str {
    match option.trim_start_matches('-') {
        "b" | "begin" => "Libra starts an admitted job at once; submit it later instead",
        "w" | "nodelist" | "x" | "exclude" | "C" | "constraint" | "F" | "nodefile" => {
            "Libra chooses the node by price; it cannot be pinned or excluded"
        }
        "exclusive" | "s" | "oversubscribe" => {
            "Libra time-shares nodes and enforces each job's CPU share; give -c N for more CPUs"
        }
        "mem-per-gpu" => "give the memory per node with --mem",
        "G" | "gpus" | "gres" | "gpus-per-node" | "gpus-per-task" => "Libra schedules CPUs only",
        "H" | "hold" => "submit, then `libra hold ID`",
        "W" | "wait" => "poll `libra status ID` (or `libra output ID`)",
        "ntasks-per-core" | "ntasks-per-socket" => {
            "a batch script runs once; for the command on several nodes use `#LIBRA --procs N`"
        }
        _ => "see `libra sbatch --help` for the options Libra reads, and #LIBRA lines for Libra's own",
    }
}

/// A clap error about one option, as the user should read it (`where` is "job.sh:3: #SBATCH"
/// or "libra sbatch").
fn option_error(e: clap::Error, at: &str) -> anyhow::Error {
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match (e.kind(), arg) {
        (ErrorKind::UnknownArgument, Some(arg)) => {
            let name = arg.split('=').next().unwrap_or(&arg).to_string();
            anyhow!("{at} {name}: not an sbatch option Libra honours; {}", libra_way(&name))
        }
        _ => anyhow!("{at}: {}", e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ")),
    }
}

/// The `#SBATCH` lines of a script, read as sbatch reads them: only in the header (before the
/// first command), split into words as the shell would.
fn sbatch_lines(text: &str, path: &Path) -> Result<SbatchOpts> {
    let mut opts = SbatchOpts::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        let Some(rest) =
            line.strip_prefix("#SBATCH").filter(|r| r.is_empty() || r.starts_with(char::is_whitespace))
        else {
            continue;
        };
        let at = format!("{}:{}: #SBATCH", path.display(), i + 1);
        // sbatch stops reading a line at a `#` that starts a comment.
        let rest = rest.split(" #").next().unwrap_or(rest);
        let words =
            shlex::split(rest).ok_or_else(|| anyhow!("{at}: unbalanced quotes or a trailing backslash"))?;
        let line_opts = SbatchLine::try_parse_from(words).map_err(|e| option_error(e, &at))?;
        opts = line_opts.opts.or(opts);
    }
    Ok(opts)
}

impl SbatchOpts {
    /// Fields missing here are taken from `other`.
    fn or(self, o: SbatchOpts) -> SbatchOpts {
        SbatchOpts {
            estimate: self.estimate.or(o.estimate),
            deadline: self.deadline.or(o.deadline),
            budget: self.budget.or(o.budget),
            job_name: self.job_name.or(o.job_name),
            cpus_per_task: self.cpus_per_task.or(o.cpus_per_task),
            mem: self.mem.or(o.mem),
            mem_per_cpu: self.mem_per_cpu.or(o.mem_per_cpu),
            time: self.time.or(o.time),
            output: self.output.or(o.output),
            error: self.error.or(o.error),
            chdir: self.chdir.or(o.chdir),
            array: self.array.or(o.array),
            export: self.export.or(o.export),
            nodes: self.nodes.or(o.nodes),
            ntasks: self.ntasks.or(o.ntasks),
            ntasks_per_node: self.ntasks_per_node.or(o.ntasks_per_node),
            get_user_env: self.get_user_env.or(o.get_user_env),
            hint: self.hint.or(o.hint),
            comment: self.comment.or(o.comment),
            partition: self.partition.or(o.partition),
            account: self.account.or(o.account),
            dependency: self.dependency.or(o.dependency),
            qos: self.qos.or(o.qos),
            mail_type: self.mail_type.or(o.mail_type),
            mail_user: self.mail_user.or(o.mail_user),
        }
    }

    /// Libra's options for these (Slurm's time limit in seconds), and the warnings for what is
    /// ignored.
    fn to_libra(&self) -> Result<(JobOpts, Vec<String>)> {
        for (flag, v) in [
            ("--nodes", &self.nodes),
            ("--ntasks", &self.ntasks),
            ("--ntasks-per-node", &self.ntasks_per_node),
        ] {
            if let Some(v) = v {
                if !matches!(v.trim(), "1" | "1-1") {
                    bail!(
                        "{flag}={v}: only 1 is accepted: a batch script runs once; Libra's multi-node jobs run \
                         their command on every node at once (`#LIBRA --procs N`, see `libra submit --help`)"
                    );
                }
            }
        }
        let time_limit = match self.time.as_deref() {
            None => None,
            Some(t) => slurm_time(t).map_err(|e| anyhow!("--time: {e}"))?.map(|s| format!("{s}s")),
        };
        let mut warnings = Vec::new();
        for (flag, v, why) in [
            ("--comment", &self.comment, "Libra keeps no job comment"),
            ("--partition", &self.partition, "Libra places every job on a node by price"),
            ("--qos", &self.qos, "the deadline and the budget are Libra's quality of service"),
            ("--mail-type", &self.mail_type, "Libra sends no mail"),
            ("--mail-user", &self.mail_user, "Libra sends no mail"),
            (
                "--get-user-env",
                &self.get_user_env,
                "the job's environment is yours at submission (--export=ALL)",
            ),
            ("--hint", &self.hint, "Libra enforces each job's CPU share, not where it runs on the node"),
        ] {
            match v.as_deref() {
                Some("") => warnings.push(format!("{flag} ignored: {why}")),
                Some(v) => warnings.push(format!("{flag}={v} ignored: {why}")),
                None => {}
            }
        }
        let opts = JobOpts {
            estimate: self.estimate.clone(),
            deadline: self.deadline.clone(),
            budget: self.budget.clone(),
            procs: None,
            cpus_per_task: self.cpus_per_task,
            time_limit,
            chdir: self.chdir.clone(),
            output: self.output.clone(),
            error: self.error.clone(),
            export: self.export.clone(),
            mem: self.mem_per_node()?,
            name: self.job_name.clone(),
            dependency: self.dependency.clone(),
            account: self.account.clone(),
        };
        Ok((opts, warnings))
    }
}

impl SbatchOpts {
    /// The memory per node: --mem, or --mem-per-cpu times the CPUs per task (as Slurm counts
    /// it); the two together are refused, as sbatch refuses them.
    fn mem_per_node(&self) -> Result<Option<String>> {
        match (&self.mem, &self.mem_per_cpu) {
            (Some(_), Some(_)) => bail!("--mem and --mem-per-cpu: give one of them, as sbatch takes"),
            (m, None) => Ok(m.clone()),
            (None, Some(per)) => {
                let mb = submit::parse_mem(per).map_err(|e| anyhow!("--mem-per-cpu: {e}"))?;
                let cpus = u64::from(self.cpus_per_task.unwrap_or(1).max(1));
                Ok(Some(format!("{}M", mb.saturating_mul(cpus))))
            }
        }
    }
}

/// Slurm's time limit in seconds: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; None for
/// UNLIMITED or INFINITE. A value with a unit (90s, 2h) is read as Libra reads durations.
pub fn slurm_time(s: &str) -> Result<Option<u64>, String> {
    const FORMS: &str = "give minutes (30), MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or 90s, 2h";
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let bad = || format!("'{s}' is not a time limit: {FORMS}");
    if t.ends_with(|c: char| c.is_ascii_alphabetic()) {
        let v = crate::cmd::time::parse_duration(t).map_err(|e| format!("{e}; or {FORMS}"))?;
        return (v >= 1.0).then_some(Some(v.ceil() as u64)).ok_or_else(bad);
    }
    let num = |p: &str| -> Result<u64, String> {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) || p.len() > 9 {
            return Err(bad());
        }
        p.parse().map_err(|_| bad())
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts = rest.split(':').map(num).collect::<Result<Vec<u64>, String>>()?;
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => m * 60,
        (None, [m, s]) => m * 60 + s,
        (None, [h, m, s]) => h * 3600 + m * 60 + s,
        (Some(d), [h]) => d * 86400 + h * 3600,
        (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
        (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
        _ => return Err(bad()),
    };
    if secs == 0 {
        return Err(format!("'{s}' is no time at all: a time limit is more than zero; {FORMS}"));
    }
    Ok(Some(secs))
}

pub fn run(a: SbatchArgs) -> Result<()> {
    let submitted = now();
    // The job's command and the options its script holds.
    let (command, from_sbatch, from_libra, default_name) = match (&a.wrap, a.script.as_slice()) {
        (Some(_), [_, ..]) => bail!("--wrap: give either --wrap 'COMMAND' or a script, not both"),
        (Some(w), []) => (
            vec!["sh".into(), "-c".into(), w.clone()],
            SbatchOpts::default(),
            JobOpts::default(),
            "wrap".into(),
        ),
        (None, []) => bail!("give a batch script (libra sbatch [OPTIONS] job.sh [ARGS]) or --wrap 'COMMAND'"),
        // After the options Libra knows, an unknown one lands here (the script and its arguments
        // may hold anything): name it rather than look for a script file of that name.
        (None, [opt, ..]) if opt.starts_with('-') && opt.len() > 1 => {
            let name = opt.split('=').next().unwrap_or(opt);
            bail!("libra sbatch {name}: not an sbatch option Libra honours; {}", libra_way(name))
        }
        (None, [script, args @ ..]) => {
            let path = Path::new(script);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading batch script {}", path.display()))?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let instead = |prog: &str| {
                format!("run another program from one, or with --wrap '{prog} {}'", path.display())
            };
            let command = submit::script_command(&text, path, args, instead)?;
            (command, sbatch_lines(&text, path)?, submit::script_opts(&text, path)?, name)
        }
    };
    let merged = a.opts.clone().or(from_sbatch);
    let array = merged.array.clone();
    let (slurm_opts, warnings) = merged.to_libra()?;
    // Command line over #LIBRA over #SBATCH: the command line's Libra fields come first.
    let (cli_opts, _) = a.opts.to_libra()?;
    let mut opts = cli_opts.or(from_libra).or(slurm_opts);
    opts.name = opts.name.or(Some(default_name));
    for w in &warnings {
        eprintln!("libra sbatch: warning: {w}");
    }
    let missing: Vec<&str> = [("--deadline", &opts.deadline), ("--budget", &opts.budget)]
        .into_iter()
        .filter(|(_, v)| v.is_none())
        .map(|(f, _)| f)
        .collect();
    if !missing.is_empty() {
        bail!(
            "{}: Libra admits a job only with a deadline and a budget (the most you will pay, in credits): \
             give them on the command line (--deadline 2h --budget 50) or in the script (#LIBRA -d 2h -b 50)",
            missing.join(" and ")
        );
    }
    if opts.estimate.is_none() {
        match &opts.time_limit {
            Some(t) => {
                eprintln!(
                    "libra sbatch: no --estimate: the time limit ({t}) is used as the runtime estimate; \
                     give `#LIBRA --estimate` for a tighter one (usually cheaper)"
                );
                opts.estimate = Some(t.clone());
            }
            None => bail!(
                "--estimate: give the runtime estimate (--estimate 10m, or `#LIBRA --estimate 10m`), or a time \
                 limit (-t / #SBATCH --time), which is then used as the estimate"
            ),
        }
    }
    let parsed_array = array.as_deref().map(libra_api::parse_array).transpose().map_err(|e| anyhow!(e))?;
    let mut req = submit::build_request(opts, command, true, submitted)?;
    // The script was written for Slurm: it may read SLURM_JOB_ID and the like.
    req.slurm_env = true;
    let client = a.conn.client()?;
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    if let (Some(spec), Some(parsed)) = (array, parsed_array) {
        let answer = submit::submit_array_retrying(&client, &ArrayRequest { array: spec, job: req })?;
        if a.parsable && answer.accepted && !a.conn.json {
            println!("{}", answer.array_id.unwrap_or_default());
        } else {
            let text = submit::array_text(&answer, parsed.tasks.len(), submitted, &argv);
            emit(&Said::new(&answer, text), a.conn.json)?;
        }
        if !answer.accepted {
            bail!("the array was refused: no task was kept");
        }
        return Ok(());
    }
    let job = submit::submit_retrying(&client, &req)?;
    if a.parsable && !a.conn.json {
        // Standard output is what a script captures (`jid=$(libra sbatch --parsable ...)`): only
        // an accepted job's id goes there; a rejection's reason goes to standard error.
        match job.state {
            JobState::Rejected => eprintln!(
                "job {} REJECTED: {}{}",
                job.id,
                job.reason.as_deref().unwrap_or("no reason given"),
                job.suggestion
                    .as_ref()
                    .map(|s| format!(
                        " (accepted now with --deadline {}s --budget {})",
                        s.deadline.ceil(),
                        s.budget
                    ))
                    .unwrap_or_default()
            ),
            _ => println!("{}", job.id),
        }
    } else {
        emit(&Said::new(&job, submit::decision_text(&job, &argv)), a.conn.json)?;
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
    fn slurm_time_limits_are_read_in_slurms_forms() {
        assert_eq!(slurm_time("30"), Ok(Some(1800)));
        assert_eq!(slurm_time("1:30"), Ok(Some(90)));
        assert_eq!(slurm_time("01:00:05"), Ok(Some(3605)));
        assert_eq!(slurm_time("2-3"), Ok(Some(2 * 86400 + 3 * 3600)));
        assert_eq!(slurm_time("1-0:10"), Ok(Some(86400 + 600)));
        assert_eq!(slurm_time("1-00:00:01"), Ok(Some(86401)));
        assert_eq!(slurm_time("90s"), Ok(Some(90)));
        assert_eq!(slurm_time("2h"), Ok(Some(7200)));
        assert_eq!(slurm_time("UNLIMITED"), Ok(None));
        for bad in ["", "0", "0:00", "1:2:3:4", "x", "-5", "1-", "1.5", "a-1"] {
            let e = slurm_time(bad).expect_err(bad);
            assert!(e.contains("MM:SS") || e.contains("more than zero"), "{bad}: {e}");
        }
    }

    #[test]
    fn sbatch_lines_are_read_with_slurms_meanings_and_unknown_ones_named() {
        let p = Path::new("job.sh");
        let o = sbatch_lines(
            "#!/bin/bash\n#SBATCH -J sim -c 2 # two CPUs\n#SBATCH --time=30 -o out-%j.txt\n#SBATCH -p big\necho\n#SBATCH -c 9\n",
            p,
        )
        .unwrap();
        assert_eq!((o.job_name.as_deref(), o.cpus_per_task), (Some("sim"), Some(2)));
        assert_eq!((o.time.as_deref(), o.output.as_deref()), (Some("30"), Some("out-%j.txt")));
        let (libra, warnings) = o.to_libra().unwrap();
        assert_eq!(libra.time_limit.as_deref(), Some("1800s"));
        assert!(warnings.iter().any(|w| w.starts_with("--partition=big ignored")), "{warnings:?}");
        let o = sbatch_lines("#!/bin/sh\n#SBATCH --dependency=afterok:12 -A physics\n", p).unwrap();
        let (libra, _) = o.to_libra().unwrap();
        assert_eq!(libra.dependency.as_deref(), Some("afterok:12"));
        assert_eq!(libra.account.as_deref(), Some("physics"));
        let e = sbatch_lines("#!/bin/sh\n#SBATCH --begin=now+1h\n", p).unwrap_err().to_string();
        assert!(e.starts_with("job.sh:2: #SBATCH --begin: not an sbatch option Libra honours"), "{e}");
        assert!(e.contains("submit it later"), "{e}");
        let e = sbatch_lines("#SBATCH --frobnicate\n", p).unwrap_err().to_string();
        assert!(e.contains("--frobnicate") && e.contains("libra sbatch --help"), "{e}");
        let o = SbatchOpts { nodes: Some("2".into()), ..Default::default() };
        let e = o.to_libra().unwrap_err().to_string();
        assert!(e.starts_with("--nodes=2: only 1") && e.contains("--procs"), "{e}");
    }

    #[test]
    fn memory_per_cpu_is_counted_per_node_and_harmless_hints_are_only_warned_of() {
        let p = Path::new("job.sh");
        let o = sbatch_lines(
            "#SBATCH --mem-per-cpu=2G -c 4 --ntasks-per-node=1\n#SBATCH --hint=nomultithread\n",
            p,
        )
        .unwrap();
        let (libra, warnings) = o.to_libra().unwrap();
        assert_eq!(libra.mem.as_deref(), Some("8192M"));
        assert!(warnings.iter().any(|w| w.starts_with("--hint=nomultithread ignored")), "{warnings:?}");
        let (libra, _) = sbatch_lines("#SBATCH --mem-per-cpu=100\n", p).unwrap().to_libra().unwrap();
        assert_eq!(libra.mem.as_deref(), Some("100M"), "one CPU by default");
        let o = sbatch_lines("#SBATCH --get-user-env\n", p).unwrap();
        assert!(o.to_libra().unwrap().1.iter().any(|w| w.starts_with("--get-user-env")));
        let e = sbatch_lines("#SBATCH --mem=1G --mem-per-cpu=1G\n", p).unwrap().to_libra().unwrap_err();
        assert!(e.to_string().starts_with("--mem and --mem-per-cpu"), "{e}");
        let e = sbatch_lines("#SBATCH --mem-per-cpu=lots\n", p).unwrap().to_libra().unwrap_err();
        assert!(e.to_string().starts_with("--mem-per-cpu: 'lots' is not an amount"), "{e}");
        let e = sbatch_lines("#SBATCH --ntasks-per-node=4\n", p).unwrap().to_libra().unwrap_err();
        assert!(e.to_string().starts_with("--ntasks-per-node=4: only 1"), "{e}");
    }

    #[test]
    fn only_shell_scripts_are_run() {
        let p = Path::new("j");
        let way = |prog: &str| format!("or with --wrap '{prog} j'");
        let cmd = |text: &str| submit::script_command(text, p, &["a1".into()], way);
        assert_eq!(cmd("echo hi\n").unwrap(), ["sh", "-c", "echo hi\n", "j", "a1"]);
        assert_eq!(
            cmd("#!/bin/bash -l\n").unwrap(),
            ["/bin/bash", "-l", "-c", "#!/bin/bash -l\n", "j", "a1"]
        );
        assert_eq!(cmd("#!/usr/bin/env zsh\n").unwrap()[..2], ["zsh", "-c"]);
        let e = cmd("#!/usr/bin/python3\n").unwrap_err().to_string();
        assert!(e.contains("runs with its shell") && e.contains("--wrap 'python3 j'"), "{e}");
    }
}
