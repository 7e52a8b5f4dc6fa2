//! What the cluster commands share: how to reach the server and who the caller is, durations
//! and times, and printing (a table for people, JSON for programs).

use anyhow::{bail, Context, Result};
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use libra_api::Client;
use libra_core::Money;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// How to reach the server; by default the last `libra login`.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// Server URL, e.g. http://127.0.0.1:7878 (default: the one from `libra login`).
    #[arg(long, env = "LIBRA_SERVER", global = true)]
    pub server: Option<String>,
    /// API token (default: the one saved by `libra login`).
    #[arg(long, env = "LIBRA_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// What `libra login` saves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    pub server: String,
    pub user: String,
    pub token: String,
}

pub fn config_dir() -> Result<PathBuf> {
    if let Ok(d) = std::env::var("LIBRA_CONFIG_DIR") {
        return Ok(PathBuf::from(d));
    }
    Ok(dirs::config_dir()
        .context("no configuration directory for this user (set LIBRA_CONFIG_DIR)")?
        .join("libra"))
}

pub fn data_dir() -> Result<PathBuf> {
    if let Ok(d) = std::env::var("LIBRA_DATA_DIR") {
        return Ok(PathBuf::from(d));
    }
    Ok(dirs::data_dir().context("no data directory for this user (set LIBRA_DATA_DIR)")?.join("libra"))
}

pub fn login_path() -> Result<PathBuf> {
    Ok(config_dir()?.join("login.json"))
}

pub fn saved_login() -> Option<Login> {
    let text = std::fs::read_to_string(login_path().ok()?).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn save_login(l: &Login) -> Result<()> {
    let path = login_path()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(l)?)
        .with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
    Ok(())
}

impl Conn {
    pub fn server_url(&self) -> Result<String> {
        match (&self.server, saved_login()) {
            (Some(s), _) => Ok(s.clone()),
            (None, Some(l)) => Ok(l.server),
            (None, None) => {
                bail!("no server: run `libra login --server URL --user NAME` first, or give --server")
            }
        }
    }

    /// A client with the caller's token.
    pub fn client(&self) -> Result<Client> {
        let server = self.server_url()?;
        let token = match &self.token {
            Some(t) => t.clone(),
            None => match saved_login() {
                Some(l) if self.server.is_none() || self.server.as_deref() == Some(l.server.as_str()) => {
                    l.token
                }
                _ => bail!("not logged in to {server}: run `libra login --server {server} --user NAME`"),
            },
        };
        Ok(Client::new(&server, Some(token)))
    }
}

/// Parses `90s`, `10m`, `2h`, `1d`, `1h30m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let bad = || format!("'{s}' is not a duration: use e.g. 90s, 10m, 2h, 1d, 1h30m or a number of seconds");
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(bad()) };
    }
    let (mut total, mut num, mut any) = (0.0, String::new(), false);
    for c in t.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86400.0,
            _ => return Err(bad()),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        total += v * unit;
        num.clear();
        any = true;
    }
    if !num.is_empty() || !any {
        return Err(bad());
    }
    Ok(total)
}

pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Days since 1970-01-01 for a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A deadline: relative (`1h`, `90s`) or absolute (`2026-11-22T21:00:00Z`, `2026-11-22 21:00`
/// in UTC, or `@UNIXSECONDS`). Returns seconds after `now`.
pub fn parse_deadline(s: &str, now: f64) -> Result<f64, String> {
    if let Ok(d) = parse_duration(s) {
        return Ok(d);
    }
    let abs = if let Some(u) = s.strip_prefix('@') {
        u.parse::<f64>().map_err(|_| format!("'{s}': give @ followed by Unix seconds"))?
    } else {
        let t = s.trim().trim_end_matches('Z').replace('T', " ");
        let (date, time) = t.split_once(' ').unwrap_or((t.as_str(), "00:00"));
        let dp: Vec<i64> = date.split('-').filter_map(|x| x.parse().ok()).collect();
        let tp: Vec<i64> = time.split(':').filter_map(|x| x.parse().ok()).collect();
        if dp.len() != 3 || !(2..=3).contains(&tp.len()) {
            return Err(format!(
                "deadline: '{s}' is not accepted: give a duration (90s, 10m, 2h) or a UTC time (2026-11-22T21:00:00Z, @1700000000)"
            ));
        }
        (days_from_civil(dp[0], dp[1], dp[2]) * 86400
            + tp[0] * 3600
            + tp[1] * 60
            + tp.get(2).copied().unwrap_or(0)) as f64
    };
    if abs <= now {
        return Err(format!("deadline: '{s}' is in the past"));
    }
    Ok(abs - now)
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn fmt_time(t: f64) -> String {
    let s = t.floor() as i64;
    let (y, m, d) = civil_from_days(s.div_euclid(86400));
    let r = s.rem_euclid(86400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", r / 3600, r / 60 % 60, r % 60)
}

pub fn fmt_opt_time(t: Option<f64>) -> String {
    t.map(fmt_time).unwrap_or_else(|| "-".into())
}

/// Seconds as a short duration: `1h02m`, `3m20s`, `45.2s`.
pub fn fmt_dur(s: f64) -> String {
    if !s.is_finite() {
        return "-".into();
    }
    let n = s.round() as i64;
    if s < 60.0 {
        format!("{s:.1}s")
    } else if n < 3600 {
        format!("{}m{:02}s", n / 60, n % 60)
    } else {
        format!("{}h{:02}m", n / 3600, n / 60 % 60)
    }
}

pub fn money(m: Money) -> String {
    m.to_string()
}

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().copied());
    t
}

pub fn print_json<T: Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Reads a password from `--password`, `LIBRA_PASSWORD`, or a line of standard input.
pub fn read_password(given: Option<String>, prompt: &str) -> Result<String> {
    if let Some(p) = given.or_else(|| std::env::var("LIBRA_PASSWORD").ok()) {
        return Ok(p);
    }
    eprint!("{prompt}");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(90.0));
        assert_eq!(parse_duration("10m"), Ok(600.0));
        assert_eq!(parse_duration("2h"), Ok(7200.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("42"), Ok(42.0));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("-3").is_err());
    }

    #[test]
    fn deadlines_relative_and_absolute() {
        let now = 1_800_000_000.0;
        assert_eq!(parse_deadline("1h", now), Ok(3600.0));
        assert_eq!(parse_deadline("@1800000100", now), Ok(100.0));
        let iso = fmt_time(now + 7200.0).replace(' ', "T") + "Z";
        assert_eq!(parse_deadline(&iso, now), Ok(7200.0));
        assert!(parse_deadline("@1", now).unwrap_err().contains("past"));
        assert!(parse_deadline("tomorrow", now).unwrap_err().starts_with("deadline:"));
    }

    #[test]
    fn time_formatting() {
        assert_eq!(fmt_time(0.0), "1970-01-01 00:00:00");
        assert_eq!(fmt_time(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(fmt_dur(200.0), "3m20s");
        assert_eq!(fmt_dur(3720.0), "1h02m");
    }
}
