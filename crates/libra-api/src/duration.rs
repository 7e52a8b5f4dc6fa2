//! Lengths of time as people write them (`90s`, `10m`, `1h30m`, `30d`, or seconds), one parser
//! for the command line's flags and the configuration files' fields alike: a site that writes
//! `--node-timeout 30s` on a command line can write `node_timeout = "30s"` in its file.

use jiff::{Span, SpanTotal, Unit};

/// The forms a duration is accepted in, for error messages.
pub const DURATION_FORMS: &str = "give e.g. 90s, 10m, 2h, 1d, 1h30m or a number of seconds";

/// A length of time in seconds: `90s`, `10m`, `2h`, `1d`, `1h30m`, `2h 30m`, `1.5h`, or a plain
/// number of seconds. Zero is a duration; what must be longer checks it itself.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("an empty duration: {DURATION_FORMS}"));
    }
    if let Ok(v) = t.parse::<f64>() {
        return match v {
            v if !v.is_finite() => Err(format!("'{s}' is not a finite number of seconds: {DURATION_FORMS}")),
            v if v < 0.0 => Err(format!("'{s}' is negative: a duration is zero or more; {DURATION_FORMS}")),
            v => Ok(v),
        };
    }
    let span: Span = t.parse().map_err(|e: jiff::Error| {
        // jiff refuses a number of a unit it cannot hold (over 20,000 years of days, or one
        // past 64 bits): that is a duration, only far too long.
        let e = e.to_string();
        if e.contains("required range") || e.contains("too big") {
            format!("'{s}' is far too long a duration: {DURATION_FORMS}")
        } else {
            format!("'{s}' is not a duration: {DURATION_FORMS}")
        }
    })?;
    if span.is_negative() {
        return Err(format!("'{s}' is negative: a duration is zero or more; {DURATION_FORMS}"));
    }
    // A month or a year has no fixed number of seconds; a day here is 24 hours, as in Slurm.
    if span.get_years() != 0 || span.get_months() != 0 {
        return Err(format!("'{s}': months and years have no fixed length; give days (30d) instead"));
    }
    span.total(SpanTotal::from(Unit::Second).days_are_24_hours())
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("'{s}' is too long a duration: {DURATION_FORMS}"))
}

/// A duration that must be longer than zero (a deadline from now, an estimate, a period).
pub fn parse_positive_duration(s: &str) -> Result<f64, String> {
    match parse_duration(s)? {
        v if v > 0.0 => Ok(v),
        _ => Err(format!("'{s}' is zero: give a longer duration, e.g. 90s, 10m, 2h, 1d, 1h30m or seconds")),
    }
}

/// For serde: seconds written as a number (`30`, `2.5`) or as a duration (`"30s"`, `"30d"`).
/// `#[serde(deserialize_with = "libra_api::duration::seconds")]`; the field's own range is
/// checked where the configuration is (a negative number is left to it, to be named there).
pub fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(Seconds)
}

/// `seconds` for an optional field (absent: None).
pub fn seconds_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(Seconds).map(Some)
}

struct Seconds;

impl serde::de::Visitor<'_> for Seconds {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "seconds: a number, or a duration such as \"90s\", \"10m\", \"2h\", \"30d\"")
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<f64, E> {
        parse_duration(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_form_both_old_parsers_took() {
        for (s, secs) in [
            ("90s", 90.0),
            ("10m", 600.0),
            ("2h", 7200.0),
            ("1d", 86_400.0),
            ("1h30m", 5400.0),
            ("2h 30m", 9000.0),
            ("1.5h", 5400.0),
            ("42", 42.0),
            ("990", 990.0),
            ("0.5", 0.5),
            (" 3600 ", 3600.0),
            ("0", 0.0),
            ("1w", 7.0 * 86_400.0),
        ] {
            assert_eq!(parse_duration(s), Ok(secs), "{s}");
        }
    }

    #[test]
    fn durations_refused() {
        for s in
            ["", "  ", "-3", "-5", "-1h", "1h ago", "NaN", "inf", "ten", "soon", "5x", "1h30", "3mo", "1y"]
        {
            let e = parse_duration(s).expect_err(s);
            assert!(e.contains("90s") || e.contains("days"), "{s}: {e}");
        }
        assert!(parse_duration("-3").unwrap_err().contains("negative"));
        for s in ["100000000d", "99999999999999999999h"] {
            assert!(parse_duration(s).unwrap_err().contains("too long"), "{s}");
        }
        assert!(parse_duration("ten").unwrap_err().contains("not a duration"));
        assert!(parse_positive_duration("0").unwrap_err().contains("zero"));
        assert!(parse_positive_duration("0s").is_err());
        assert_eq!(parse_positive_duration("1m"), Ok(60.0));
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Fields {
        #[serde(deserialize_with = "seconds")]
        timeout: f64,
        #[serde(default, deserialize_with = "seconds_opt")]
        period: Option<f64>,
    }

    /// A field of seconds takes a number or a duration; anything else is refused with the forms.
    #[test]
    fn fields_of_seconds_take_numbers_and_durations() {
        let f = |j: &str| serde_json::from_str::<Fields>(j);
        assert_eq!(f(r#"{"timeout": 30}"#).unwrap(), Fields { timeout: 30.0, period: None });
        assert_eq!(
            f(r#"{"timeout": 2.5, "period": "500ms"}"#).unwrap(),
            Fields { timeout: 2.5, period: Some(0.5) }
        );
        assert_eq!(f(r#"{"timeout": "30d"}"#).unwrap().timeout, 30.0 * 86_400.0);
        let e = f(r#"{"timeout": "30 parsecs"}"#).unwrap_err().to_string();
        assert!(e.contains("not a duration") && e.contains("90s"), "{e}");
        let e = f(r#"{"timeout": true}"#).unwrap_err().to_string();
        assert!(e.contains("a number, or a duration"), "{e}");
        assert!(f(r#"{"timeout": "-1h"}"#).unwrap_err().to_string().contains("negative"));
    }
}
