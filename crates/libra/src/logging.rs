//! Logging: text for people or JSON lines for log collectors (`--log-format json`), at a level
//! the server can change while it runs (SIGHUP). `RUST_LOG`, when set, wins over the level.

use libra_server::config::LogFormat;
use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

static LEVEL: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();
static FLAG_FORMAT: OnceLock<Option<LogFormat>> = OnceLock::new();

/// The `--log-format` given on the command line, if any (it beats a configuration file's).
pub fn set_flag_format(f: Option<LogFormat>) {
    let _ = FLAG_FORMAT.set(f);
}

pub fn flag_format() -> Option<LogFormat> {
    FLAG_FORMAT.get().copied().flatten()
}

fn filter(level: &str) -> Result<EnvFilter, String> {
    match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(v).map_err(|e| format!("RUST_LOG: {e}")),
        _ => EnvFilter::try_new(level)
            .map_err(|e| format!("'{level}' is not a log level: give error, warn, info, debug, trace or a filter such as info,libra_server=debug ({e})")),
    }
}

/// Checks a level without applying it.
pub fn check_level(level: &str) -> Result<(), String> {
    EnvFilter::try_new(level).map(|_| ()).map_err(|e| {
        format!("log_level: '{level}' is not a log level: give error, warn, info, debug, trace or a filter such as info,libra_server=debug ({e})")
    })
}

/// Starts logging to standard error (once; later calls do nothing).
pub fn init(level: &str, format: LogFormat) -> Result<(), String> {
    if LEVEL.get().is_some() {
        return Ok(());
    }
    let (filter, handle) = reload::Layer::new(filter(level)?);
    let fmt = match format {
        // Fields (the job's id on every line about a job) are keys of their own.
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
        // Colour only for a person at a terminal: a log file, a pipe or the journal gets the
        // bare text, which grep and log collectors read as written.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colour_on_stderr())
            .with_writer(std::io::stderr)
            .boxed(),
    };
    if tracing_subscriber::registry().with(filter).with(fmt).try_init().is_ok() {
        let _ = LEVEL.set(handle);
    }
    Ok(())
}

/// Whether standard error is a terminal that wants colour (`NO_COLOR` set to anything turns
/// it off, as <https://no-color.org> asks).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Changes the level of a running process (no effect where `RUST_LOG` is set).
pub fn set_level(level: &str) -> Result<(), String> {
    let f = filter(level)?;
    match LEVEL.get() {
        Some(h) => h.reload(f).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}
