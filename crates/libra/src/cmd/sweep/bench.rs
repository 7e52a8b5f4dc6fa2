//! `libra sweep bench`

use crate::output::{emit, table, Said, Text};
use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// How many `true` jobs (1 to 10,000,000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub jobs: u64,
    /// Local slots (and xargs -P), 1 to 100,000 as a local resource's.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub slots: u32,
    /// Interleaved rounds of xargs and the engine (fair to both on a machine whose load drifts),
    /// 1 to 100.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Skip the xargs comparison.
    #[arg(long)]
    pub no_xargs: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Where the scratch directory (database, job directories) goes: the system's temporary
    /// directory by default. Point it at a disk file system to measure what jobs cost there
    /// (`df -T DIR` tells; a tmpfs hides it). Removed at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let parent = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    if !parent.is_dir() {
        anyhow::bail!(
            "--dir: {} is not a directory (the scratch directory goes inside it)",
            parent.display()
        );
    }
    let scratch = parent.join(format!("libra-sweep-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let report = libra_broker::bench::run(&scratch, a.jobs, a.slots, a.rounds, !a.no_xargs);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = report?;
    crate::cmd::quiet_on_closed_stdout();
    let mut t = table(&["runner", "jobs", "seconds", "jobs/s", "slot-ms per job", "CPU ms per job"]);
    for r in std::iter::once(&report.engine).chain(report.xargs.iter()) {
        t.add_row(vec![
            r.name.clone(),
            r.jobs.to_string(),
            format!("{:.2}", r.seconds),
            format!("{:.0}", r.jobs_per_sec),
            format!("{:.3}", r.per_job_ms),
            format!("{:.3}", r.cpu_ms_per_job),
        ]);
    }
    let text = Text::new().line(t).line_if(report.xargs.as_ref().zip(report.ratio).map(|(x, ratio)| {
        format!(
            "{} interleaved rounds · engine/xargs rate: {:.0}% · engine overhead per job beyond xargs: {:.3} ms of slot time · database {:.1} MiB for {} jobs",
            report.rounds,
            ratio * 100.0,
            report.engine.per_job_ms - x.per_job_ms,
            report.db_bytes as f64 / 1048576.0,
            report.done
        )
    }));
    emit(&Said::new(&report, text), a.json)
}
