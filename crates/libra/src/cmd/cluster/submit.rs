//! `libra submit`: a job's estimate, deadline and budget, from flags or from `#LIBRA` lines in a
//! job script (as sbatch reads `#SBATCH`). The answer is immediate: accepted with the node(s),
//! the share and the cost held, or rejected with the reason and a suggestion.

use super::common::{fmt_dur, fmt_time, money, now, parse_deadline, parse_duration, Conn};
use crate::output::{emit, table, Said, Text};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser};
use libra_api::{ArrayRequest, ArrayResponse, JobInfo, JobState, SubmitRequest};
use libra_core::job::{JobDetails, QosConstraints, QosOptimisation, ResourceRequirements};
use libra_core::{JobSpec, Money};
use std::path::Path;

/// The job's specification (flags, or `#LIBRA` lines in a script; flags win).
#[derive(Debug, Clone, Default, Args)]
pub struct JobOpts {
    /// Runtime estimate: CPU time per node on one dedicated CPU (90s, 10m, 2h). A job with
    /// `-c N` may use it on up to N CPUs at once.
    #[arg(long)]
    pub estimate: Option<String>,
    /// Deadline: relative (1h) or absolute UTC (2026-11-22T21:00:00Z, @UNIXSECONDS).
    #[arg(long, short = 'd')]
    pub deadline: Option<String>,
    /// Budget in credits (500, 12.50): the most you will be charged. With `--array`, per task.
    #[arg(long, short = 'b')]
    pub budget: Option<String>,
    /// Nodes: the command runs on each of N nodes at once (ranks 0..N-1 in LIBRA_PROCID), each
    /// with the same share; the job progresses at the pace of its slowest node.
    #[arg(long = "procs", short = 'n', visible_alias = "nodes")]
    pub procs: Option<u32>,
    /// CPUs per node the job may use at once (its share can then be up to N CPUs).
    #[arg(long, short = 'c')]
    pub cpus_per_task: Option<u32>,
    /// Hard wall-clock limit (like sbatch --time): the node stops the job (SIGTERM, then SIGKILL
    /// 3 s later) when it has run this long; it ends TIMEOUT and pays for the CPU it used.
    #[arg(long, short = 't', visible_alias = "time")]
    pub time_limit: Option<String>,
    /// Run the job in DIR (default: the directory you submit from).
    #[arg(long, short = 'D')]
    pub chdir: Option<String>,
    /// Standard output file, in the working directory: %j job id, %x name, %N node, %t rank
    /// (default: libra-%j.out).
    #[arg(long, short = 'o')]
    pub output: Option<String>,
    /// Standard error file (default: the standard output file).
    #[arg(long, short = 'e')]
    pub error: Option<String>,
    /// The job's environment: ALL (the default: your whole environment now), NONE (only the
    /// LIBRA_* variables and a minimal PATH and HOME), or a comma list of NAME (its value now)
    /// and NAME=VALUE, after ALL or alone.
    #[arg(long)]
    pub export: Option<String>,
    /// Memory per node: 512M, 2G, or MB.
    #[arg(long)]
    pub mem: Option<String>,
    /// A name for the job.
    #[arg(long, short = 'J')]
    pub name: Option<String>,
    /// Wait for other jobs of yours (like sbatch --dependency): afterok:JOB[:JOB...] starts
    /// after each JOB completed successfully, and is cancelled (free, its hold released) if one
    /// fails, is cancelled or was refused; afterany:JOB[:JOB...] starts after each JOB ended in
    /// any way; several joined by ',' must all hold (afterok:5:7,afterany:9). JOB is a job id,
    /// an array id (every task) or ARRAY_TASK (12_3). The rule: the job is admitted now, for the
    /// window between its dependencies' latest promised finish (their deadlines, or their end
    /// if they have ended) and its own deadline: it is priced for that window, and holds the
    /// share estimate / (deadline - latest promised finish) on its nodes from now on, unused
    /// while it waits, so it never waits for room. A deadline that leaves less than the estimate
    /// after that finish is refused with the earliest deadline that could be accepted.
    #[arg(long, value_name = "TYPE:JOB[:JOB...][,...]")]
    pub dependency: Option<String>,
    /// The account (project) to charge, like sbatch -A: the job's cost is held against its
    /// credit and your limit in it (`libra balance` lists your accounts). Default: your default
    /// account (your personal account, named after you, unless an administrator set another).
    #[arg(long, short = 'A')]
    pub account: Option<String>,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub opts: JobOpts,
    /// Submit a job array (like sbatch --array): the same job once per task id, given as a
    /// range 0-99, a range with a step 0-99:2, or a list 1,3,5-7 (at most 10000 tasks). Each task
    /// is a job of its own, with LIBRA_ARRAY_JOB_ID (the array's id: its first task's job id)
    /// and LIBRA_ARRAY_TASK_ID in its environment and %A / %a in -o/-e patterns; --budget and
    /// --deadline are each task's. One answer for all: every task accepted, or none kept (the
    /// refused tasks are named, with a deadline and per-task budget that would take them all).
    /// `libra status ID_7` / `libra cancel ID_7` address a task, `ID` the whole array. A %N
    /// limit (at most N running at once) is refused unless N covers every task: Libra admits
    /// every task to run at once, with its own deadline promise.
    #[arg(long, value_name = "SPEC")]
    pub array: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
    /// A job script with `#LIBRA --estimate 10m` lines (run by the shell of its `#!` line) and
    /// its arguments (`libra submit job.sh 7 --fast`, as sbatch takes them), or (after `--`) a
    /// program and its arguments, run as they are: `libra submit --estimate 10m -d 1h -b 500 --
    /// ./simulate --steps 100`. Libra's options go before either.
    #[arg(trailing_var_arg = true, required = true)]
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
    pub(crate) fn or(self, other: JobOpts) -> JobOpts {
        JobOpts {
            estimate: self.estimate.or(other.estimate),
            deadline: self.deadline.or(other.deadline),
            budget: self.budget.or(other.budget),
            procs: self.procs.or(other.procs),
            cpus_per_task: self.cpus_per_task.or(other.cpus_per_task),
            time_limit: self.time_limit.or(other.time_limit),
            chdir: self.chdir.or(other.chdir),
            output: self.output.or(other.output),
            error: self.error.or(other.error),
            export: self.export.or(other.export),
            mem: self.mem.or(other.mem),
            name: self.name.or(other.name),
            dependency: self.dependency.or(other.dependency),
            account: self.account.or(other.account),
        }
    }

    /// Where and how the job runs: the working directory (absolute), the environment, the
    /// output files and the time limit.
    fn place(&self, req: &mut SubmitRequest) -> Result<()> {
        let here = std::env::current_dir().context("finding the current directory")?;
        let dir = match self.chdir.as_deref() {
            Some(d) => here.join(d),
            None => here,
        };
        if !dir.is_dir() {
            bail!("--chdir: {} is not a directory", dir.display());
        }
        req.workdir = Some(dir.display().to_string());
        req.env = export(self.export.as_deref().unwrap_or("ALL"), std::env::vars())?;
        req.stdout = self.output.clone();
        req.stderr = self.error.clone();
        req.time_limit = match self.time_limit.as_deref() {
            None => None,
            Some(t) => Some(parse_duration(t).ok().filter(|v| *v > 0.0).ok_or_else(|| {
                anyhow!("--time-limit: '{t}' is not accepted: give a wall-clock duration greater than 0 (90s, 10m, 2h)")
            })?),
        };
        Ok(())
    }

    /// `--dependency`, parsed (none when not given).
    pub fn dependencies(&self) -> Result<Vec<libra_core::dependency::Dependency>> {
        match self.dependency.as_deref() {
            Some(d) => libra_core::dependency::parse(d).map_err(|e| anyhow!("--{e}")),
            None => Ok(Vec::new()),
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
            Some(m) => parse_mem(m).map_err(|e| anyhow!("--mem: {e}"))?,
        };
        let spec = JobSpec {
            details: JobDetails { estimate, length_mi: None },
            resources: ResourceRequirements {
                procs: self.procs.unwrap_or(1),
                cpus_per_task: self.cpus_per_task.unwrap_or(1),
                mem_mb,
                disk_mb: 0,
            },
            qos: QosConstraints { deadline, budget },
            optimise: QosOptimisation::Cost,
        };
        // The server checks the same; checked here too, a bad value is named at once (by its
        // flag), with no server needed and nothing sent.
        spec.validate()
            .map_err(|e| anyhow!("--{}", e.to_string().replacen("cpus_per_task", "cpus-per-task", 1)))?;
        Ok(spec)
    }
}

/// The most memory per node a job may ask for, in MB (a pebibyte): anything above is a typo.
const MEM_MAX_MB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Memory per node in MB from `512M`, `2G`, `1T`, `4096K` or a number of MB.
pub(crate) fn parse_mem(s: &str) -> Result<u64, String> {
    const FORMS: &str = "give e.g. 512M, 2G, 1T or a number of MB";
    let t = s.trim().to_ascii_uppercase();
    let (num, mult) = match t.chars().last() {
        Some('T') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('G') => (&t[..t.len() - 1], 1024.0),
        Some('M') => (&t[..t.len() - 1], 1.0),
        Some('K') => (&t[..t.len() - 1], 1.0 / 1024.0),
        _ => (t.as_str(), 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("'{s}' is not an amount of memory: {FORMS}"))?;
    let mb = v * mult;
    if !mb.is_finite() || mb <= 0.0 {
        return Err(format!("'{s}' is not accepted: memory per node must be more than zero; {FORMS}"));
    }
    if mb > MEM_MAX_MB {
        return Err(format!("'{s}' is more than any node has (at most 1024T per node): {FORMS}"));
    }
    Ok(mb.ceil() as u64)
}

/// The environment `--export` asks for: ALL (everything in `vars`), NONE (nothing: the node adds
/// only Libra's variables and a minimal PATH and HOME), or a list of NAME (taken from `vars`)
/// and NAME=VALUE, optionally after ALL.
pub fn export(
    spec: &str,
    vars: impl Iterator<Item = (String, String)>,
) -> Result<Option<std::collections::BTreeMap<String, String>>> {
    let vars: std::collections::BTreeMap<String, String> = vars.collect();
    let mut out = std::collections::BTreeMap::new();
    let items: Vec<&str> = spec.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
    match items.as_slice() {
        [] => bail!("--export: give ALL, NONE, or a comma list of NAME and NAME=VALUE"),
        ["NONE"] => return Ok(None),
        _ => {}
    }
    for (i, item) in items.iter().enumerate() {
        match (*item, item.split_once('=')) {
            ("ALL", _) if i == 0 => out.extend(vars.clone()),
            ("ALL" | "NONE", _) => bail!("--export: {item} may only stand first (and NONE alone)"),
            (_, Some((name, value))) if valid_var(name) => {
                out.insert(name.to_string(), value.to_string());
            }
            (name, None) if valid_var(name) => {
                if let Some(v) = vars.get(name) {
                    out.insert(name.to_string(), v.clone());
                }
            }
            _ => bail!("--export: '{item}' is not a variable name or NAME=VALUE"),
        }
    }
    Ok(Some(out))
}

fn valid_var(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads the `#LIBRA` lines of a job script as sbatch reads `#SBATCH`: only in the header, before
/// the first command (the shebang, comments and blank lines may come before and between them),
/// and split into words as the shell would, so `#LIBRA -J "my job"` names the job `my job`.
pub(crate) fn script_opts(text: &str, path: &Path) -> Result<JobOpts> {
    let mut opts = JobOpts::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        // `#LIBRAX ...` is a comment like any other.
        let Some(rest) =
            line.strip_prefix("#LIBRA").filter(|r| r.is_empty() || r.starts_with(char::is_whitespace))
        else {
            continue;
        };
        let at = || format!("{}:{}", path.display(), i + 1);
        let words = shlex::split(rest).ok_or_else(|| {
            anyhow!("{}: unbalanced quotes or a trailing backslash in the #LIBRA line", at())
        })?;
        let line_opts = ScriptLine::try_parse_from(words)
            .map_err(|e| anyhow!("{}: {}", at(), e.to_string().lines().next().unwrap_or("")))?;
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

/// The shells whose `#!` line a job script may name: each takes the script's text with `-c`.
const SHELLS: [&str; 5] = ["sh", "bash", "dash", "zsh", "ksh"];

/// The command that runs a job script: the shell of its `#!` line with that line's options (`sh`
/// when it has none), then `-c TEXT NAME ARGS...`, so the script sees NAME as `$0` and its
/// arguments as `$1`... The text is the one read at submission (as sbatch keeps a copy): editing
/// the file afterwards does not change the job. Running the text with the shell it names matters:
/// `sh` is dash on Debian, and a `#!/bin/bash` script with arrays or `[[` fails there. Only shells
/// take a text with `-c` alike; for another interpreter the error says what to do instead
/// (`instead`, given the interpreter's name: it differs between `libra submit` and `libra sbatch`).
pub(crate) fn script_command(
    text: &str,
    path: &Path,
    args: &[String],
    instead: impl Fn(&str) -> String,
) -> Result<Vec<String>> {
    if text.len() > libra_api::MAX_ARG_BYTES {
        bail!(
            "{}: {} bytes; a job script goes to its shell as one argument, and a program is given at \
             most {} bytes in one (Linux's MAX_ARG_STRLEN): move the long part (data, a here-document) \
             into a file the script reads",
            path.display(),
            text.len(),
            libra_api::MAX_ARG_BYTES
        );
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (prog, flags): (String, Vec<String>) = match text.lines().next().and_then(|l| l.strip_prefix("#!")) {
        None => ("sh".into(), Vec::new()),
        Some(line) => {
            let words: Vec<&str> = line.split_whitespace().collect();
            // `#!/usr/bin/env bash`, and `#!/usr/bin/env -S bash -e`.
            let words = match words.as_slice() {
                [env, rest @ ..] if env.ends_with("/env") => {
                    rest.strip_prefix(&["-S"]).unwrap_or(rest).to_vec()
                }
                _ => words,
            };
            let Some((prog, flags)) = words.split_first() else {
                bail!("{}:1: #! names no program", path.display())
            };
            let base = prog.rsplit('/').next().unwrap_or(prog);
            if !SHELLS.contains(&base) {
                bail!(
                    "{}: #!{}: a job script runs with its shell ({}); {}",
                    path.display(),
                    line.trim(),
                    SHELLS.join(", "),
                    instead(base)
                );
            }
            // The kernel would hand the rest of the line to the shell; only options make sense
            // there, and a word that is not one would be taken for a file to run instead.
            if let Some(w) = flags.iter().find(|w| !(w.starts_with('-') || w.starts_with('+'))) {
                bail!(
                    "{}:1: #!{}: '{w}' is not an option of {base}; only options may follow the shell",
                    path.display(),
                    line.trim()
                );
            }
            (prog.to_string(), flags.iter().map(|w| w.to_string()).collect())
        }
    };
    let mut command = vec![prog];
    command.extend(flags);
    command.extend(["-c".to_string(), text.to_string(), name]);
    command.extend(args.iter().cloned());
    Ok(command)
}

/// Whether the file may be executed by whoever runs this (`access(2)` with X_OK).
fn executable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Whether a program name without a `/` is found on this PATH (the job's under the default
/// `--export=ALL`), as the node will look for it.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| d.join(name).is_file() && executable(&d.join(name)))
    })
}

/// A lone argument after `--` that is a file here: a program, run as it is. What would only fail
/// on the node (exit status 126 or 127) is said now, with both ways to run it.
fn check_lone_program(one: &str) -> Result<()> {
    let path = Path::new(one);
    if !one.contains('/') {
        if !on_path(one) {
            bail!(
                "{one}: a program after `--` is looked for on PATH, not in this directory; \
                 give ./{one} to run this file, or drop `--` to submit it as a job script \
                 (its #LIBRA lines read): libra submit [OPTIONS] {one}"
            );
        }
        return Ok(());
    }
    if !executable(path) {
        bail!(
            "{one}: not executable, so it cannot run as a program (after `--`); chmod +x it, or \
             drop `--` to submit it as a job script (its #LIBRA lines read): libra submit [OPTIONS] {one}"
        );
    }
    // A script's options are read only when it is submitted as one; say so rather than lose
    // them quietly.
    // Its head only: the program may be large.
    let mut head = Vec::new();
    let read = std::fs::File::open(path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 * 1024), &mut head));
    if read.is_ok() && String::from_utf8_lossy(&head).lines().any(|l| l.trim_start().starts_with("#LIBRA ")) {
        eprintln!(
            "libra submit: warning: {one} runs as a program (after `--`): its #LIBRA lines are not \
             read; drop `--` to submit it as a job script"
        );
    }
    Ok(())
}

/// `dashdash`: whether `--` came before the command, which makes a lone argument a program to
/// run rather than a job script.
pub fn build_request(opts: JobOpts, command: Vec<String>, dashdash: bool, now: f64) -> Result<SubmitRequest> {
    // Without `--`, a first word that is a file is a job script, and the words after it its
    // arguments (as `sbatch job.sh ARGS`); a program given that way with arguments (a binary,
    // not text) is run as it is, as before.
    let script_with_args = |one: &str| !dashdash && is_text_file(Path::new(one));
    let (opts, command) = match command.as_slice() {
        [one, args @ ..] if (args.is_empty() && !dashdash && Path::new(one).is_file()) || script_with_args(one) => {
            let path = Path::new(one);
            let text = std::fs::read_to_string(path).with_context(|| {
                format!(
                    "reading job script {}; to run a program instead, give it after `--`: \
                     libra submit [OPTIONS] -- {one}",
                    path.display()
                )
            })?;
            let from_script = script_opts(&text, path)?;
            let instead = |_: &str| {
                format!(
                    "to run it with its own interpreter, make it executable and give it after `--`: \
                     libra submit [OPTIONS] -- {} (its #LIBRA lines are then not read: give them as flags)",
                    if one.contains('/') { one.to_string() } else { format!("./{one}") }
                )
            };
            (opts.or(from_script), script_command(&text, path, args, instead)?)
        }
        // Sent on, it would only fail on the node with exit status 127.
        [one] if !dashdash => bail!(
            "job script {one}: {}; to run a program instead, give it after `--`: libra submit [OPTIONS] -- {one} [ARGS]",
            if Path::new(one).exists() { "not a file" } else { "no such file" }
        ),
        [one] if Path::new(one).is_file() => {
            check_lone_program(one)?;
            (opts, resolve_command(command))
        }
        _ => {
            // Only a warning: the node may have what this machine lacks.
            if let Some(prog) = command.first().filter(|p| !p.contains('/') && *p != "libra" && !on_path(p)) {
                eprintln!(
                    "libra submit: warning: {prog} is not on your PATH here; the job will fail (exit status \
                     127) unless the node finds it on the job's PATH"
                );
            }
            (opts, resolve_command(command))
        }
    };
    let spec = opts.spec(now)?;
    let mut req = SubmitRequest {
        name: opts.name.clone(),
        account: opts.account.clone(),
        ..SubmitRequest::new(spec, command)
    };
    req.dependencies = opts.dependencies()?;
    opts.place(&mut req)?;
    Ok(req)
}

/// Whether `path` is a file whose head is text (UTF-8, no NUL): a script, not a program.
fn is_text_file(path: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else { return false };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(4096);
    if file.take(4096).read_to_end(&mut head).is_err() {
        return false;
    }
    // A cut in the middle of a character at the end of the head is still text.
    let valid = match std::str::from_utf8(&head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid && !head.contains(&0)
}

/// Submits with an idempotency key of this invocation's own, retrying when the connection fails
/// (the server may be restarting, or the answer was lost on the way): a retry that reaches a
/// server which already took the job gets that job back, never a second one.
pub fn submit_retrying(client: &libra_api::Client, req: &SubmitRequest) -> Result<JobInfo> {
    crate::cmd::retry::keyed(|key| client.submit_with_key(req, key))
}

/// As `submit_retrying`, for an array: a retry gets the array the first attempt made.
pub fn submit_array_retrying(client: &libra_api::Client, req: &ArrayRequest) -> Result<ArrayResponse> {
    crate::cmd::retry::keyed(|key| client.submit_array_with_key(req, key))
}

/// What `libra submit` says of its job: `argv`, the command line the job was submitted with, is
/// repeated in a rejection's suggestion.
pub fn decision_text(job: &JobInfo, argv: &[String]) -> Text {
    if job.state == JobState::Rejected {
        let text = Text::new().line(format!(
            "job {} REJECTED: {}",
            job.id,
            job.reason.as_deref().unwrap_or("no reason given")
        ));
        return text.line(match &job.suggestion {
            Some(s) => format!(
                "suggestion: a deadline of {} ({}) and a budget of {} would be accepted now:\n  {}",
                fmt_dur(s.deadline),
                fmt_time(job.submit_time + s.deadline),
                s.budget,
                resubmit_command(argv, &format!("{}s", s.deadline.ceil()), &s.budget.to_string())
            ),
            None => "no deadline or budget would be accepted now (not enough nodes have room)".into(),
        });
    }
    Text::new()
        .line(format!(
            "job {} accepted on {}: share {:.3} CPU, {} on hold (budget {}){}, due {}",
            job.id,
            job.nodes.join(","),
            job.share,
            money(job.cost),
            money(job.budget),
            job.account.as_deref().map(|a| format!(" against account {a}")).unwrap_or_default(),
            fmt_time(job.deadline_at)
        ))
        .line_if(job.waiting.then(|| {
            format!(
                "it waits on {}: no node starts it before they end (`libra status {}` shows where it stands)",
                libra_core::dependency::format_list(&job.dependencies),
                job.id
            )
        }))
        // On a server whose executor is Slurm: the id `squeue` and `scontrol` know the job by.
        .line_if(job.slurm_job_id.map(|id| format!("Slurm job {id}")))
}

/// An array's one answer: each task's node, share and hold, or the refused tasks and what would
/// take them all (the user's own command line with only the deadline and budget replaced).
pub fn array_text(a: &ArrayResponse, n: usize, submitted: f64, argv: &[String]) -> Text {
    if a.accepted {
        let held = a.tasks.iter().fold(Money::ZERO, |m, j| m + j.cost);
        let mut t = table(&["TASK", "JOB", "NODES", "SHARE", "HELD", "DUE"]);
        for j in &a.tasks {
            t.add_row(vec![
                libra_api::job_label(j),
                j.id.to_string(),
                j.nodes.join(","),
                format!("{:.3}", j.share),
                money(j.cost),
                fmt_time(j.deadline_at),
            ]);
        }
        return Text::new()
            .line(format!(
                "array {} accepted: {} tasks, {} on hold in all",
                a.array_id.map(|i| i.to_string()).unwrap_or_default(),
                a.tasks.len(),
                money(held)
            ))
            .line(t);
    }
    let mut text = Text::new().line(format!(
        "array REFUSED: {} of {n} tasks would not be accepted, so none was kept",
        a.refused.len()
    ));
    for r in a.refused.iter().take(20) {
        text = text.line(format!("  task {}: {}", r.task, r.reason));
    }
    if a.refused.len() > 20 {
        text = text.line(format!("  ... and {} more", a.refused.len() - 20));
    }
    text.line(match &a.suggestion {
        Some(s) => format!(
            "suggestion: a deadline of {} ({}) and a budget of {} per task ({} for all {n}) would take every task now:\n  {}",
            fmt_dur(s.deadline),
            fmt_time(submitted + s.deadline),
            s.budget,
            Money(s.budget.0.saturating_mul(n as i64)),
            resubmit_command(argv, &format!("{}s", s.deadline.ceil()), &s.budget.to_string())
        ),
        None => "no deadline or budget would take every task now (not enough room, or not enough credit)".into(),
    })
}

/// The user's own `libra submit` command line with only the deadline and the budget replaced
/// (or added, when they came from `#LIBRA` lines), quoted for the shell, so that copying it
/// resubmits the same job. Every spelling of the old values goes: `-d 1h`, `-d1h`,
/// `--deadline 1h`, `--deadline=1h`; the job's own command after `--` (or the script) is kept
/// as it was, whatever flags it has.
pub fn resubmit_command(argv: &[String], deadline: &str, budget: &str) -> String {
    let tree = crate::command_tree();
    // `libra sbatch` answers through here too: its own line is repeated, with its own flags.
    let at = argv.iter().position(|a| a == "submit" || a == "sbatch");
    let Some((at, submit)) = at.and_then(|at| Some(at).zip(tree.find_subcommand(&argv[at]))) else {
        return format!("libra submit --deadline {deadline} --budget {budget} ...");
    };
    let find = |id: &str| submit.get_arguments().find(|a| a.get_id() == id);
    let (d, b) = (find("deadline"), find("budget"));
    let replaced =
        |a: Option<&clap::Arg>| [d, b].iter().flatten().any(|r| a.is_some_and(|a| a.get_id() == r.get_id()));
    let takes_value = |a: Option<&clap::Arg>| a.is_some_and(|a| a.get_action().takes_values());

    let mut words: Vec<String> = argv[..=at].to_vec();
    let mut rest = argv[at + 1..].iter();
    let mut tail: Vec<String> = Vec::new();
    while let Some(w) = rest.next() {
        if w == "--" || !w.starts_with('-') || w == "-" {
            // The job's own command or script: from here on, nothing is ours to change.
            tail.push(w.clone());
            tail.extend(rest.cloned());
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let arg = submit
                .get_arguments()
                .find(|a| a.get_long_and_visible_aliases().is_some_and(|l| l.contains(&name)));
            let value = if takes_value(arg) && inline.is_none() { rest.next() } else { None };
            if !replaced(arg) {
                words.push(w.clone());
                words.extend(value.cloned());
            }
            continue;
        }
        // A cluster of short flags: `-n2`, `-d1h`, `-J name`; the first one that takes a value
        // takes the rest of the word, or the next word.
        let flags: Vec<char> = w[1..].chars().collect();
        let mut kept = String::from("-");
        for (k, c) in flags.iter().enumerate() {
            let arg = submit
                .get_arguments()
                .find(|a| a.get_short_and_visible_aliases().is_some_and(|s| s.contains(c)));
            if !takes_value(arg) {
                kept.push(*c);
                continue;
            }
            let inline: String = flags[k + 1..].iter().collect();
            let value = if inline.is_empty() { rest.next().cloned() } else { Some(inline) };
            if replaced(arg) {
                if kept.len() > 1 {
                    words.push(std::mem::take(&mut kept));
                }
            } else {
                kept.push(*c);
                words.push(std::mem::take(&mut kept));
                words.extend(value);
            }
            kept.clear();
            break;
        }
        if kept.len() > 1 {
            words.push(kept);
        }
    }
    words.extend(["--deadline".into(), deadline.into(), "--budget".into(), budget.into()]);
    words.extend(tail);
    words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
}

/// A word as the shell reads it back: as it is when that is safe (`--mem=2G` too, which shlex
/// would quote whole), quoted by shlex otherwise.
fn shell_word(w: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "+-./:@_=,%".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        return w.into();
    }
    shlex::try_quote(w).unwrap_or_else(|_| w.into())
}

pub fn run(a: SubmitArgs) -> Result<()> {
    // Only the raw arguments tell whether `--` was given, and are what a suggestion repeats.
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    // `--` counts only right before the command: one among a script's arguments is theirs.
    let dashdash = argv.len() > a.command.len() && argv[argv.len() - a.command.len() - 1] == "--";
    let array = a.array.as_deref().map(libra_api::parse_array).transpose().map_err(|e| anyhow!(e))?;
    let submitted = now();
    let req = build_request(a.opts, a.command, dashdash, submitted)?;
    let client = a.conn.client()?;
    if let (Some(spec), Some(parsed)) = (a.array, array) {
        let answer = submit_array_retrying(&client, &ArrayRequest { array: spec, job: req })?;
        emit(&Said::new(&answer, array_text(&answer, parsed.tasks.len(), submitted, &argv)), a.conn.json)?;
        if !answer.accepted {
            bail!("the array was refused: no task was kept");
        }
        return Ok(());
    }
    let job = submit_retrying(&client, &req)?;
    emit(&Said::new(&job, decision_text(&job, &argv)), a.conn.json)?;
    if job.state == JobState::Rejected {
        bail!("job {} was rejected", job.id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("libra-submit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn script_lines_fill_what_flags_leave_open() {
        let dir = temp_dir("fill");
        let p = dir.join("job.sh");
        std::fs::write(
            &p,
            "#!/bin/sh\n#LIBRA --estimate 10m --deadline 1h\n#LIBRA --budget 500 -n 2\necho hi\n",
        )
        .unwrap();
        let flags = JobOpts { budget: Some("20".into()), ..Default::default() };
        let req = build_request(flags, vec![p.display().to_string()], false, 1000.0).unwrap();
        assert_eq!(req.workdir, Some(std::env::current_dir().unwrap().display().to_string()));
        assert_eq!(req.spec.estimate(), 600.0);
        assert_eq!(req.spec.deadline(), 3600.0);
        assert_eq!(req.spec.budget(), Money::from_credits(20));
        assert_eq!(req.spec.procs(), 2);
        assert_eq!(req.command[0], "/bin/sh");
        std::fs::write(&p, "#LIBRA --estimat 10m\n").unwrap();
        let err = build_request(JobOpts::default(), vec![p.display().to_string()], false, 0.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("job.sh:1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dependencies_come_from_the_flag_or_a_script_line_and_bad_ones_are_named() {
        let dir = temp_dir("deps");
        let p = dir.join("job.sh");
        std::fs::write(&p, "#!/bin/sh\n#LIBRA --estimate 1m -d 1h -b 5\n#LIBRA --dependency afterok:5:7,afterany:9_2\necho hi\n")
            .unwrap();
        let req = build_request(JobOpts::default(), vec![p.display().to_string()], false, 0.0).unwrap();
        assert_eq!(libra_core::dependency::format_list(&req.dependencies), "afterok:5:7,afterany:9_2");
        let flags = JobOpts { dependency: Some("afterany:3".into()), ..Default::default() };
        let req = build_request(flags, vec![p.display().to_string()], false, 0.0).unwrap();
        assert_eq!(libra_core::dependency::format_list(&req.dependencies), "afterany:3");
        let flags = JobOpts { dependency: Some("afternotok:3".into()), ..Default::default() };
        let e = build_request(flags, vec![p.display().to_string()], false, 0.0).unwrap_err().to_string();
        assert!(
            e.starts_with("--dependency: 'afternotok:3' is not accepted") && e.contains("afterany:JOB"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn export_captures_what_it_is_told_to() {
        let vars = || {
            [("HOME", "/home/a"), ("FOO", "1"), ("CARGO_X", "y")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
        };
        let all = export("ALL", vars()).unwrap().unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(export("NONE", vars()).unwrap(), None);
        let some = export("FOO,BAR=2,MISSING", vars()).unwrap().unwrap();
        assert_eq!(
            some.into_iter().collect::<Vec<_>>(),
            vec![("BAR".into(), "2".into()), ("FOO".into(), "1".into())]
        );
        let more = export("ALL,FOO=9", vars()).unwrap().unwrap();
        assert_eq!(more["FOO"], "9");
        for bad in ["", "NONE,FOO", "FOO,ALL", "1X", "A-B=3"] {
            let e = export(bad, vars()).unwrap_err().to_string();
            assert!(e.starts_with("--export"), "{bad}: {e}");
        }
    }

    #[test]
    fn script_lines_are_read_only_before_the_first_command() {
        let p = Path::new("job.sh");
        let text =
            "#!/bin/bash\n\n# a comment\n#LIBRA --estimate 10m\n  \n#LIBRA -d 1h # why: the data is due\n\
                    module load sim\n#LIBRA -b 999\necho '#LIBRA -n 4'\n";
        let o = script_opts(text, p).unwrap();
        assert_eq!((o.estimate.as_deref(), o.deadline.as_deref()), (Some("10m"), Some("1h")));
        assert_eq!((o.budget, o.procs), (None, None));
        // `#LIBRAX` is a comment, not an option line, and does not end the header.
        let o = script_opts("#LIBRAX --estimate 1m\n#LIBRA --estimate 2m\n", p).unwrap();
        assert_eq!(o.estimate.as_deref(), Some("2m"));
    }

    #[test]
    fn script_lines_honour_shell_quoting() {
        let p = Path::new("dir/job.sh");
        let o = script_opts("#LIBRA -J \"my job\" --mem '2 G'\n#LIBRA --estimate 1m\n", p).unwrap();
        assert_eq!(o.name.as_deref(), Some("my job"));
        assert_eq!(o.mem.as_deref(), Some("2 G"));
        let e = script_opts("#!/bin/sh\n#LIBRA -J \"my job\n", p).unwrap_err().to_string();
        assert!(e.starts_with("dir/job.sh:2:") && e.contains("quotes"), "{e}");
        let e = script_opts("\n#LIBRA -J a --nope\n", p).unwrap_err().to_string();
        assert!(e.starts_with("dir/job.sh:2:") && e.contains("--nope"), "{e}");
    }

    #[test]
    fn a_lone_argument_that_is_no_file_is_a_missing_script_unless_after_dashdash() {
        let o = JobOpts {
            estimate: Some("1m".into()),
            deadline: Some("1h".into()),
            budget: Some("5".into()),
            ..Default::default()
        };
        let missing = "no-such-dir/missing.sh".to_string();
        let e = build_request(o.clone(), vec![missing.clone()], false, 0.0).unwrap_err().to_string();
        assert!(e.contains("job script no-such-dir/missing.sh: no such file"), "{e}");
        assert!(e.contains("after `--`") && e.contains("-- no-such-dir/missing.sh"), "{e}");
        let dir = temp_dir("dir");
        let e = build_request(o.clone(), vec![dir.display().to_string()], false, 0.0).unwrap_err();
        assert!(e.to_string().contains("not a file"), "{e}");
        let req = build_request(o.clone(), vec![missing.clone()], true, 0.0).unwrap();
        assert_eq!(req.command, vec![missing]);
        let req = build_request(o, vec!["hostname".into(), "-f".into()], false, 0.0).unwrap();
        assert_eq!(req.command, ["hostname", "-f"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_script_runs_with_the_shell_its_first_line_names() {
        let o = JobOpts {
            estimate: Some("1m".into()),
            deadline: Some("1h".into()),
            budget: Some("5".into()),
            ..Default::default()
        };
        let dir = temp_dir("shebang");
        let script = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        let cases = [
            ("plain.sh", "echo hi\n", vec!["sh"]),
            ("bash.sh", "#!/bin/bash\narr=(a b)\n", vec!["/bin/bash"]),
            ("flags.sh", "#!/bin/bash -el\n", vec!["/bin/bash", "-el"]),
            ("env.sh", "#!/usr/bin/env bash\n", vec!["bash"]),
            ("envs.sh", "#!/usr/bin/env -S zsh -e\n", vec!["zsh", "-e"]),
        ];
        for (name, text, head) in cases {
            let req = build_request(o.clone(), vec![script(name, text)], false, 0.0).unwrap();
            let mut want: Vec<String> = head.iter().map(|w| w.to_string()).collect();
            want.extend(["-c".into(), text.into(), name.into()]);
            assert_eq!(req.command, want, "{name}");
        }
        let py = script("py.sh", "#!/usr/bin/env python3\n#LIBRA --estimate 1m\nprint(1)\n");
        let e = build_request(o.clone(), vec![py.clone()], false, 0.0).unwrap_err().to_string();
        assert!(e.contains("#!/usr/bin/env python3") && e.contains(&format!("-- {py}")), "{e}");
        let odd = script("odd.sh", "#!/bin/sh other.sh\n");
        let e = build_request(o.clone(), vec![odd], false, 0.0).unwrap_err().to_string();
        assert!(e.contains("'other.sh' is not an option of sh"), "{e}");
        // A binary is no script: the error shows how to run it.
        let bin = dir.join("prog");
        std::fs::write(&bin, [0x7f, b'E', b'L', b'F', 0xff, 0xfe]).unwrap();
        let e = format!(
            "{:#}",
            build_request(o.clone(), vec![bin.display().to_string()], false, 0.0).unwrap_err()
        );
        assert!(e.contains("give it after `--`") && e.contains("valid UTF-8"), "{e}");
        // Its text is one argument to its shell: one the kernel would refuse is named here, and
        // the longest it takes goes.
        let long = script("long.sh", &format!("#!/bin/sh\n# {}\n", "x".repeat(libra_api::MAX_ARG_BYTES)));
        let e = build_request(o.clone(), vec![long.clone()], false, 0.0).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{long}: 131084 bytes")) && e.contains("at most 131071"), "{e}");
        let most = script("most.sh", &"x".repeat(libra_api::MAX_ARG_BYTES));
        build_request(o.clone(), vec![most], false, 0.0).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_script_given_first_takes_the_words_after_it_as_its_arguments() {
        let o = JobOpts { budget: Some("5".into()), ..Default::default() };
        let dir = temp_dir("script-args");
        let p = dir.join("job.sh");
        let text = "#!/bin/bash\n#LIBRA --estimate 1m --deadline 1h\necho \"$@\"\n";
        std::fs::write(&p, text).unwrap();
        let job = p.display().to_string();
        // Its #LIBRA lines are read and the words after it are its $1 $2..., hyphens and all.
        let req =
            build_request(o.clone(), vec![job.clone(), "--steps".into(), "-x".into()], false, 0.0).unwrap();
        assert_eq!(req.command, ["/bin/bash", "-c", text, "job.sh", "--steps", "-x"]);
        assert_eq!(req.spec.deadline(), 3600.0);
        // After `--` the same words are a program and its arguments, run as they are.
        let req = build_request(o.clone(), vec![job.clone(), "a".into()], true, 0.0);
        assert!(req.is_err(), "no estimate without the script's lines");
        // A binary given first with arguments is a program, as before.
        let bin = dir.join("prog");
        std::fs::write(&bin, [0x7f, b'E', b'L', b'F', 0, 0xff]).unwrap();
        let flags = JobOpts { estimate: Some("1m".into()), deadline: Some("1h".into()), ..o };
        let req = build_request(flags, vec![bin.display().to_string(), "-v".into()], false, 0.0).unwrap();
        assert_eq!(req.command, [bin.display().to_string(), "-v".into()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lone_file_after_dashdash_is_a_program_run_as_it_is() {
        use std::os::unix::fs::PermissionsExt;
        let o = JobOpts {
            estimate: Some("1m".into()),
            deadline: Some("1h".into()),
            budget: Some("5".into()),
            ..Default::default()
        };
        let dir = temp_dir("lone");
        let run = dir.join("run.sh");
        std::fs::write(&run, "#!/usr/bin/env python3\n#LIBRA --estimate 9m\nprint(1)\n").unwrap();
        let run_s = run.display().to_string();
        // Not executable: it would fail on the node with 126.
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = build_request(o.clone(), vec![run_s.clone()], true, 0.0).unwrap_err().to_string();
        assert!(e.contains("not executable") && e.contains("chmod +x"), "{e}");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        let req = build_request(o.clone(), vec![run_s.clone()], true, 0.0).unwrap();
        assert_eq!(req.command, [run_s]);
        // Its #LIBRA lines are not read after `--`.
        assert_eq!(req.spec.details.estimate, 60.0);
        // A bare name is looked for on PATH, not here.
        let name = format!("libra-test-no-such-program-{}", std::process::id());
        let e = build_request(o.clone(), vec![name.clone()], true, 0.0);
        assert!(e.is_ok(), "a name that is no file here goes to the node as it is");
        let cwd_file = std::env::current_dir().unwrap().join(&name);
        std::fs::write(&cwd_file, "echo\n").unwrap();
        let e = build_request(o, vec![name.clone()], true, 0.0).unwrap_err().to_string();
        std::fs::remove_file(&cwd_file).unwrap();
        assert!(e.contains("looked for on PATH") && e.contains(&format!("./{name}")), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_and_bad_fields_are_named() {
        let o = JobOpts { estimate: Some("10m".into()), deadline: Some("1h".into()), ..Default::default() };
        assert!(o.spec(0.0).unwrap_err().to_string().starts_with("--budget"));
        let o = JobOpts { budget: Some("x".into()), ..o };
        assert!(o.spec(0.0).unwrap_err().to_string().starts_with("--budget"));
        let o = JobOpts { budget: Some("5".into()), deadline: Some("2026-02-30".into()), ..o };
        let e = o.spec(0.0).unwrap_err().to_string();
        assert!(e.starts_with("--deadline: '2026-02-30' is not a valid date"), "{e}");
        // What the server would refuse is named by its flag before anything is sent.
        let o = JobOpts { deadline: Some("1h".into()), ..o };
        for (bad, flag) in [
            (JobOpts { budget: Some("-1".into()), ..o.clone() }, "--budget: -1.00 is not accepted"),
            (JobOpts { procs: Some(0), ..o.clone() }, "--procs: 0 is not accepted"),
            (JobOpts { cpus_per_task: Some(0), ..o.clone() }, "--cpus-per-task: 0 is not accepted"),
            (
                JobOpts { estimate: Some("2h".into()), ..o.clone() },
                "--deadline: 3600 s is shorter than 7200 s",
            ),
            (
                JobOpts { estimate: Some("400d".into()), deadline: Some("500d".into()), ..o.clone() },
                "--estimate: ",
            ),
        ] {
            let e = bad.spec(0.0).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{e}");
        }
        assert!(o.spec(0.0).is_ok());
    }

    #[test]
    fn memory_is_positive_finite_and_sane() {
        assert_eq!(parse_mem("2G"), Ok(2048));
        assert_eq!(parse_mem("512"), Ok(512));
        assert_eq!(parse_mem("512m"), Ok(512));
        assert_eq!(parse_mem("1T"), Ok(1024 * 1024));
        assert_eq!(parse_mem("1536K"), Ok(2));
        for bad in ["0", "0G", "-1", "-2G", "NaN", "inf", "1e300", "2000T", "lots", "", "G"] {
            let e = parse_mem(bad).expect_err(bad);
            assert!(e.contains("512M, 2G"), "{bad}: {e}");
        }
        let o = JobOpts {
            estimate: Some("1m".into()),
            deadline: Some("1h".into()),
            budget: Some("5".into()),
            mem: Some("0".into()),
            ..Default::default()
        };
        let e = o.spec(0.0).unwrap_err().to_string();
        assert!(e.starts_with("--mem: '0'") && e.contains("more than zero"), "{e}");
    }

    fn argv(line: &str) -> Vec<String> {
        shlex::split(line).unwrap()
    }

    #[test]
    fn a_suggestion_repeats_the_command_line_with_only_deadline_and_budget_replaced() {
        let r = |line: &str| resubmit_command(&argv(line), "62s", "13.00");
        assert_eq!(
            r("libra submit --estimate 10m -d 1h -b 5 -n 2 --mem 512M -J sim -- ./sim -d 3 -b x --budget=1"),
            "libra submit --estimate 10m -n 2 --mem 512M -J sim --deadline 62s --budget 13.00 -- ./sim -d 3 -b x --budget=1"
        );
        for spelling in [
            "-d 1h -b 5",
            "-d1h -b5",
            "--deadline 1h --budget 5",
            "--deadline=1h --budget=5",
            "-b 5 --deadline=2026-11-22T21:00:00+05:00",
        ] {
            assert_eq!(
                r(&format!("libra submit --estimate 90s {spelling} -n2 -- hostname")),
                "libra submit --estimate 90s -n 2 --deadline 62s --budget 13.00 -- hostname",
                "{spelling}"
            );
        }
        // From #LIBRA lines: added before the script.
        assert_eq!(r("libra submit job.sh"), "libra submit --deadline 62s --budget 13.00 job.sh");
        assert_eq!(
            r("./target/debug/libra submit --server http://127.0.0.1:7878 -n 3 -d 1h job.sh"),
            "./target/debug/libra submit --server http://127.0.0.1:7878 -n 3 --deadline 62s --budget 13.00 job.sh"
        );
        // Quoted for the shell where needed.
        assert_eq!(
            r("libra submit -J 'my job' -d 1h -b 5 -- sh -c 'echo $HOME > out'"),
            "libra submit -J 'my job' --deadline 62s --budget 13.00 -- sh -c 'echo $HOME > out'"
        );
        assert_eq!(r("libra"), "libra submit --deadline 62s --budget 13.00 ...");
        // `libra sbatch`: its own line, its script and the script's arguments kept.
        assert_eq!(
            r("libra sbatch -J x --deadline=1h --budget 5 --parsable job.sh -d 3"),
            "libra sbatch -J x --parsable --deadline 62s --budget 13.00 job.sh -d 3"
        );
    }
}
