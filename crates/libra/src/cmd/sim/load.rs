//! Workload and pricing options shared by `sim run` and `sim experiment`.

use clap::Args;
use libra_core::PricingParams;
use libra_sim::swf::{ReadMode, SwfError, SwfReader, SwfRecord};
use libra_sim::workload::libraplus::{LibraPlusModel, ModelError};
use std::path::{Path, PathBuf};

/// Where the SDSC SP2 trace sits when Libra is checked out beside the shared material.
pub const DEFAULT_TRACE: &str = "../shared/traces/SDSC-SP2-1998-4.2-cln.swf.gz";

/// The Libra+$ workload model (Table I defaults).
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Share of high-urgency jobs, 0 to 1.
    #[arg(long, default_value_t = 0.2, help_heading = "Workload model (Libra+$ Table I)")]
    pub high_urgency: f64,
    /// Deadline high:low ratio of means.
    #[arg(long, default_value_t = 4.0, help_heading = "Workload model (Libra+$ Table I)")]
    pub deadline_ratio: f64,
    /// Mean deadline factor D/R of the low class.
    #[arg(long, default_value_t = 2.0, help_heading = "Workload model (Libra+$ Table I)")]
    pub deadline_low_mean: f64,
    /// Budget high:low ratio of means.
    #[arg(long, default_value_t = 4.0, help_heading = "Workload model (Libra+$ Table I)")]
    pub budget_ratio: f64,
    /// Mean budget factor B/f(R) of the low class.
    #[arg(long, default_value_t = 2.0, help_heading = "Workload model (Libra+$ Table I)")]
    pub budget_low_mean: f64,
    /// Arrival delay factor: scales the trace's inter-arrival times (lower = heavier load).
    #[arg(long, default_value_t = 0.5, help_heading = "Workload model (Libra+$ Table I)")]
    pub delay_factor: f64,
    /// Runtime under-estimate, 0 to 0.99: estimate = runtime * (1 - inaccuracy).
    #[arg(long, default_value_t = 0.0, help_heading = "Workload model (Libra+$ Table I)")]
    pub inaccuracy: f64,
    /// Use only the last N jobs of the trace (the paper: 5000); 0 = the whole trace.
    #[arg(long, default_value_t = 5000, help_heading = "Workload model (Libra+$ Table I)")]
    pub last: usize,
    /// Random seed for the QoS model.
    #[arg(long, default_value_t = 1, help_heading = "Workload model (Libra+$ Table I)")]
    pub seed: u64,
    /// Skip malformed trace lines (each is reported) instead of stopping at the first.
    #[arg(long, help_heading = "Workload model (Libra+$ Table I)")]
    pub lenient: bool,
}

impl ModelArgs {
    pub fn model(&self) -> LibraPlusModel {
        LibraPlusModel {
            high_urgency_share: self.high_urgency,
            deadline_ratio: self.deadline_ratio,
            deadline_low_mean: self.deadline_low_mean,
            budget_ratio: self.budget_ratio,
            budget_low_mean: self.budget_low_mean,
            arrival_delay_factor: self.delay_factor,
            inaccuracy: self.inaccuracy,
            last_n: (self.last > 0).then_some(self.last),
            seed: self.seed,
        }
    }

    /// `model`, its parameters checked before any trace is read, each error naming the flag the
    /// user gave (the model's own error names its field, as a file of parameters would).
    pub fn checked_model(&self) -> anyhow::Result<LibraPlusModel> {
        let model = self.model();
        match model.validate() {
            Ok(()) => Ok(model),
            Err(ModelError::Parameter { field, value, accepted }) => {
                let flag = match field {
                    "high_urgency_share" => "--high-urgency",
                    "deadline_ratio" => "--deadline-ratio",
                    "deadline_low_mean" => "--deadline-low-mean",
                    "budget_ratio" => "--budget-ratio",
                    "budget_low_mean" => "--budget-low-mean",
                    "arrival_delay_factor" => "--delay-factor",
                    "inaccuracy" => "--inaccuracy",
                    other => other,
                };
                anyhow::bail!("{flag}: {} is not accepted: {accepted}", libra_core::Shown(value))
            }
            Err(e) => Err(e.into()),
        }
    }

    pub fn mode(&self) -> ReadMode {
        if self.lenient {
            ReadMode::Lenient
        } else {
            ReadMode::Strict
        }
    }
}

/// Pricing coefficients.
#[derive(Debug, Clone, Args)]
pub struct PricingArgs {
    /// Libra+$ static pricing factor alpha.
    #[arg(long, default_value_t = 1.0, help_heading = "Pricing")]
    pub alpha: f64,
    /// Libra+$ dynamic pricing factor beta.
    #[arg(long, default_value_t = 0.1, help_heading = "Pricing")]
    pub beta: f64,
    /// Libra's cost coefficient of the estimate (gamma * E + delta * E / D).
    #[arg(long, default_value_t = 1.0, help_heading = "Pricing")]
    pub libra_gamma: f64,
    /// Libra's cost coefficient of the urgency E / D.
    #[arg(long, default_value_t = 1.0, help_heading = "Pricing")]
    pub libra_delta: f64,
    /// Base price PBase per CPU-second on every node.
    #[arg(long, default_value_t = 1.0, help_heading = "Pricing")]
    pub price_base: f64,
}

impl PricingArgs {
    pub fn params(&self) -> PricingParams {
        PricingParams {
            alpha: self.alpha,
            beta: self.beta,
            libra_gamma: self.libra_gamma,
            libra_delta: self.libra_delta,
        }
    }
}

/// Reads a whole trace, reporting skipped lines on stderr.
pub fn read_trace(path: &Path, mode: ReadMode) -> anyhow::Result<(Vec<SwfRecord>, Option<i64>)> {
    // A file that cannot be opened is named by the error itself; anything else is placed in it.
    let mut reader = SwfReader::open(path, mode).map_err(|e| match e {
        e @ SwfError::Open { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(format!("in trace {}", path.display())),
    })?;
    let max_nodes = reader.header().max_nodes().or(reader.header().max_procs());
    let mut records = Vec::new();
    for r in reader.by_ref() {
        // Only a strict read stops on a line: say how to read on past such lines.
        records.push(r.map_err(|e| {
            anyhow::anyhow!("in trace {}: {e} (--lenient skips malformed lines, naming each)", path.display())
        })?);
    }
    for e in reader.skipped().iter().take(20) {
        eprintln!("warning: {}: skipped {e}", path.display());
    }
    if reader.skipped_count() > 20 {
        eprintln!("warning: {}: {} malformed lines skipped in all", path.display(), reader.skipped_count());
    }
    Ok((records, max_nodes))
}

/// The trace to use: the given path, or the SDSC SP2 trace beside the checkout.
pub fn trace_path(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p),
        None => {
            let cwd = std::env::current_dir().ok();
            let exe = std::env::current_exe().ok();
            default_trace(cwd.as_deref(), exe.as_deref()).ok_or_else(|| {
                anyhow::anyhow!(
                    "no --trace given and {DEFAULT_TRACE} was found neither from here nor from any directory above, nor beside the checkout of this binary; pass --trace FILE (an SWF file, plain or .gz)"
                )
            })
        }
    }
}

/// `DEFAULT_TRACE` from the working directory `cwd` or any directory above it (a command run in
/// a subdirectory of the checkout), else from the directories above the binary `exe`
/// (`CHECKOUT/target/release/libra` run from anywhere): the first that exists.
fn default_trace(cwd: Option<&Path>, exe: Option<&Path>) -> Option<PathBuf> {
    let starts = cwd.into_iter().chain(exe.and_then(Path::parent));
    starts.flat_map(Path::ancestors).map(|d| d.join(DEFAULT_TRACE)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared trace beside a checkout is found from the checkout, from a directory inside
    /// it, and from the checkout's binary run elsewhere. (Where it is not found depends on the
    /// machine: any directory above a temporary one may hold a `shared` of its own.)
    #[test]
    fn the_default_trace_is_found_from_inside_the_checkout_and_from_its_binary() {
        let root = tempfile::tempdir().unwrap();
        let checkout = root.path().join("libra");
        let trace = checkout.join(DEFAULT_TRACE);
        std::fs::create_dir_all(trace.parent().unwrap()).unwrap();
        std::fs::write(&trace, "; an SWF header\n").unwrap();
        let deep = checkout.join("crates").join("libra");
        let exe = checkout.join("target").join("release").join("libra");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        let found = |cwd: Option<&Path>, exe: Option<&Path>| {
            default_trace(cwd, exe).map(|p| p.canonicalize().unwrap())
        };
        let want = Some(trace.canonicalize().unwrap());
        assert_eq!(found(Some(&checkout), None), want);
        assert_eq!(found(Some(&deep), None), want);
        // The binary's checkout when the working directory leads nowhere.
        assert_eq!(found(None, Some(&exe)), want);
    }
}
