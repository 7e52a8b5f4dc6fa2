//! Durations, deadlines and times for every command: one parser of durations, one of deadlines,
//! one way of printing a time. Calendar work is jiff's, so that an impossible date or time is
//! refused instead of rolled over, and an offset in a timestamp is honoured.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;
const TIME_FORMS: &str =
    "2026-11-22T21:00:00Z, 2026-11-22T21:00:00+05:00, 2026-11-22 21:00 (UTC) or @UNIXSECONDS";

pub use libra_api::duration::{parse_duration, parse_positive_duration};
pub use libra_api::unix_now as now;

/// A deadline: relative (`1h`, `90s`: from `now`) or absolute: RFC 3339 with `Z` or an offset
/// (`2026-11-22T21:00:00+05:00`), a civil `2026-11-22 21:00[:SS]` or `2026-11-22T21:00[:SS]`
/// taken as UTC, or `@UNIXSECONDS`. Returns seconds after `now`, which must be more than zero.
pub fn parse_deadline(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    let at = if let Some(secs) = t.strip_prefix('@') {
        secs.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("'{s}': give @ followed by Unix seconds, e.g. @1800000000"))?
    } else if looks_like_a_date(t) {
        parse_time(t)
            .map_err(|e| format!("'{s}' is not a valid date and time ({e}): give e.g. {TIME_FORMS}"))?
    } else {
        return match parse_duration(t) {
            Ok(d) if d > 0.0 => Ok(d),
            Ok(_) => Err(format!("'{s}' is now: give a deadline later than that")),
            Err(e) if t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.') && !t.contains(':') => {
                Err(format!("{e}; or give a time: {TIME_FORMS}"))
            }
            Err(_) if t.contains(':') => Err(format!(
                "'{s}' is not accepted: a time of day needs its date, e.g. {TIME_FORMS}; or give a duration from now (90s, 10m, 2h, 1h30m)"
            )),
            Err(_) => Err(format!(
                "'{s}' is not accepted: give a duration from now (90s, 10m, 2h, 1h30m) or a time: {TIME_FORMS}"
            )),
        };
    };
    if at <= now {
        return Err(format!("'{s}' ({} UTC) is in the past", fmt_time(at)));
    }
    Ok(at - now)
}

/// A clap value parser for deadlines: seconds from the moment the arguments are read.
pub fn deadline_from_now(s: &str) -> Result<f64, String> {
    parse_deadline(s, now())
}

/// A point in time to filter by (sacct's `--starttime`): `now`, `now-2h`, a duration meaning
/// that long ago (`2h`, `1d`), a date (`2026-11-22`, midnight UTC), or any absolute time
/// `parse_deadline` takes. Returns Unix seconds.
pub fn parse_instant(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    let ago = |d: &str| parse_duration(d).map(|d| now - d);
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if let Some(d) = t.strip_prefix("now-").or_else(|| t.strip_prefix("NOW-")) {
        return ago(d);
    }
    if let Some(secs) = t.strip_prefix('@') {
        return secs
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("'{s}': give @ followed by Unix seconds, e.g. @1800000000"));
    }
    if looks_like_a_date(t) {
        if let Ok(d) = t.parse::<jiff::civil::Date>() {
            return d
                .at(0, 0, 0, 0)
                .to_zoned_datetime(TimeZone::UTC)
                .map(|z| z.timestamp().as_second() as f64)
                .map_err(|e| format!("'{s}': {e}"));
        }
        return parse_time(t).map_err(|e| {
            format!("'{s}' is not a valid date and time ({e}): give e.g. 2026-11-22, {TIME_FORMS}")
        });
    }
    ago(t).map_err(|e| format!("{e}; or now, now-2h, a date (2026-11-22) or a time: {TIME_FORMS}"))
}

/// `YYYY-...`: meant as a calendar date, so its errors are about the date.
fn looks_like_a_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 5 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

/// Unix seconds of an absolute time: with `Z` or an offset, that instant; without, UTC.
fn parse_time(t: &str) -> Result<f64, jiff::Error> {
    let ts = match t.parse::<Timestamp>() {
        Ok(ts) => ts,
        // Only a time that carries no offset is civil; one with an offset that failed to parse
        // must not be read again without it (its offset would be silently dropped).
        Err(e) if has_offset(t) => return Err(e),
        Err(_) => t.parse::<DateTime>()?.to_zoned_datetime(TimeZone::UTC)?.timestamp(),
    };
    Ok(ts.as_duration().as_secs_f64())
}

/// Whether the part after the date ends in `Z` or a `+HH:MM` / `-HH:MM` offset.
fn has_offset(t: &str) -> bool {
    let time = t.get(10..).unwrap_or("");
    time.ends_with(['Z', 'z']) || time.contains(['+', '-'])
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS` UTC (`-` for a time no calendar holds).
pub fn fmt_time(t: f64) -> String {
    if !t.is_finite() {
        return "-".into();
    }
    match Timestamp::from_second(t.floor() as i64) {
        Ok(ts) => ts.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => "-".into(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_for_filters_are_absolute_or_that_long_ago() {
        let now = 1_800_000_000.0;
        assert_eq!(parse_instant("now", now), Ok(now));
        assert_eq!(parse_instant("now-2h", now), Ok(now - 7200.0));
        assert_eq!(parse_instant("1d", now), Ok(now - 86_400.0));
        assert_eq!(parse_instant("@1700000000", now), Ok(1_700_000_000.0));
        assert_eq!(parse_instant("2026-11-22", now), Ok(1_795_305_600.0));
        assert_eq!(parse_instant("2026-11-22T01:00:00Z", now), Ok(1_795_309_200.0));
        assert!(parse_instant("2026-13-01", now).unwrap_err().contains("not a valid date"));
        assert!(parse_instant("yesterday", now).unwrap_err().contains("now-2h"));
    }

    const NOW: f64 = 1_800_000_000.0; // 2027-01-15 08:00:00 UTC

    #[test]
    fn deadlines_relative_and_absolute() {
        assert_eq!(parse_deadline("1h", NOW), Ok(3600.0));
        assert_eq!(parse_deadline("1h30m", NOW), Ok(5400.0));
        assert_eq!(parse_deadline("@1800000100", NOW), Ok(100.0));
        assert_eq!(parse_deadline("2027-01-15T10:00:00Z", NOW), Ok(7200.0));
        assert_eq!(parse_deadline("2027-01-15 10:00:00Z", NOW), Ok(7200.0));
        // Civil times are UTC, with or without seconds, with a space or a T.
        assert_eq!(parse_deadline("2027-01-15 10:00", NOW), Ok(7200.0));
        assert_eq!(parse_deadline("2027-01-15T10:00", NOW), Ok(7200.0));
        assert_eq!(parse_deadline("2027-01-15T10:00:30", NOW), Ok(7230.0));
        let iso = fmt_time(NOW + 7200.0).replace(' ', "T") + "Z";
        assert_eq!(parse_deadline(&iso, NOW), Ok(7200.0));
    }

    #[test]
    fn offsets_are_honoured() {
        // 15:00 at +05:00 is 10:00 UTC; at -02:30 it is 17:30 UTC.
        assert_eq!(parse_deadline("2027-01-15T15:00:00+05:00", NOW), Ok(7200.0));
        assert_eq!(parse_deadline("2027-01-15T15:00:00-02:30", NOW), Ok(9.5 * 3600.0));
        let e = parse_deadline("2027-01-15T12:00:00+05:00", NOW).unwrap_err();
        assert!(e.contains("in the past") && e.contains("07:00:00"), "{e}");
    }

    #[test]
    fn impossible_dates_and_times_are_invalid_not_rolled_over() {
        for s in
            ["2026-13-45T99:00:00Z", "2027-01-15 16:99", "2027-01-15T25:00:00", "2026-02-30", "2027-02-29"]
        {
            let e = parse_deadline(s, 0.0).expect_err(s);
            assert!(e.contains("not a valid date and time"), "{s}: {e}");
        }
        let e = parse_deadline("16:99", 0.0).unwrap_err();
        assert!(e.contains("not accepted") && e.contains("needs its date"), "{e}");
        let e = parse_deadline("2027-01-15T10:00:00+99:00", 0.0).unwrap_err();
        assert!(e.contains("not a valid date and time"), "{e}");
    }

    #[test]
    fn the_past_and_nonsense_are_refused_and_say_why() {
        assert!(parse_deadline("@1", NOW).unwrap_err().contains("in the past"));
        assert!(parse_deadline("2027-01-15 07:59:59", NOW).unwrap_err().contains("in the past"));
        assert!(parse_deadline("0", NOW).unwrap_err().contains("is now"));
        let e = parse_deadline("-1h", NOW).unwrap_err();
        assert!(e.contains("negative") && e.contains("@UNIXSECONDS"), "{e}");
        assert!(parse_deadline("1mo", NOW).unwrap_err().contains("months and years have no fixed length"));
        assert!(parse_deadline("5x", NOW).unwrap_err().contains("not a duration"));
        assert!(parse_deadline("tomorrow", NOW).unwrap_err().contains("not accepted"));
        assert!(parse_deadline("@soon", NOW).unwrap_err().contains("Unix seconds"));
        assert!(parse_deadline("@NaN", NOW).is_err());
    }

    #[test]
    fn time_formatting() {
        assert_eq!(fmt_time(0.0), "1970-01-01 00:00:00");
        assert_eq!(fmt_time(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(fmt_time(NOW + 0.9), "2027-01-15 08:00:00");
        assert_eq!(fmt_time(f64::NAN), "-");
        assert_eq!(fmt_time(1e30), "-");
        assert_eq!(fmt_dur(200.0), "3m20s");
        assert_eq!(fmt_dur(3720.0), "1h02m");
    }
}
