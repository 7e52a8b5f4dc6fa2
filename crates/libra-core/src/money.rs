//! Money as an integer count of the smallest unit (a cent: 1/100 of a credit). Prices may be
//! decimal (`f64` per CPU-second); amounts that are held, charged or compared with a budget are
//! always `Money`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Cents per credit.
pub const CENTS_PER_CREDIT: i64 = 100;

/// An amount of money in cents. Signed so that ledger deltas can be expressed; balances and
/// budgets are validated to be non-negative where they enter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct Money(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error(
        "'{0}' is not an amount: expected a number of credits with at most two decimals, e.g. 500 or 12.50"
    )]
    Syntax(String),
    #[error("'{0}' is too large: at most {max} credits are accepted", max = i64::MAX / CENTS_PER_CREDIT / 1000)]
    TooLarge(String),
}

impl Money {
    pub const ZERO: Money = Money(0);

    pub const fn from_cents(c: i64) -> Self {
        Money(c)
    }

    pub const fn cents(self) -> i64 {
        self.0
    }

    pub fn from_credits(credits: i64) -> Self {
        Money(credits.saturating_mul(CENTS_PER_CREDIT))
    }

    /// Rounds a computed (decimal) cost up to the next cent: the cluster never undercharges by
    /// rounding, and the budget check is done on the rounded amount, so the charge can never
    /// exceed the budget either. Non-finite or negative inputs map to `None`.
    pub fn from_credits_f64_ceil(credits: f64) -> Option<Self> {
        if !credits.is_finite() || credits < 0.0 {
            return None;
        }
        let x = credits * CENTS_PER_CREDIT as f64 - 1e-9;
        // Above 2^62 cents the amount is refused; below, `x` is in (-1, 2^62] and its ceiling
        // is found in integers: truncation, plus one when that fell below `x`. `f64::ceil` is a
        // call into libm on baseline x86-64 (no SSE4.1), and every priced node of every
        // arrival comes here; this is the same integer (`ceil_cents_is_libm_ceil`).
        if x > LARGEST_CENTS {
            return None;
        }
        let t = x as i64;
        Some(Money((t + i64::from((t as f64) < x)).max(0)))
    }

    /// `from_credits_f64_ceil` as first written, with `f64::ceil`: the reference its integer
    /// ceiling is checked against.
    #[cfg(test)]
    fn from_credits_f64_ceil_libm(credits: f64) -> Option<Self> {
        if !credits.is_finite() || credits < 0.0 {
            return None;
        }
        let cents = (credits * CENTS_PER_CREDIT as f64 - 1e-9).ceil().max(0.0);
        if cents > (i64::MAX / 2) as f64 {
            return None;
        }
        Some(Money(cents as i64))
    }

    /// Exact conversion for display and ratios (never for ledger arithmetic).
    pub fn as_credits_f64(self) -> f64 {
        self.0 as f64 / CENTS_PER_CREDIT as f64
    }

    pub fn checked_add(self, o: Money) -> Option<Money> {
        self.0.checked_add(o.0).map(Money)
    }

    pub fn checked_sub(self, o: Money) -> Option<Money> {
        self.0.checked_sub(o.0).map(Money)
    }

    pub fn saturating_add(self, o: Money) -> Money {
        Money(self.0.saturating_add(o.0))
    }

    pub fn is_negative(self) -> bool {
        self.0 < 0
    }
}

impl std::ops::Add for Money {
    type Output = Money;
    fn add(self, o: Money) -> Money {
        Money(self.0 + o.0)
    }
}

impl std::ops::Sub for Money {
    type Output = Money;
    fn sub(self, o: Money) -> Money {
        Money(self.0 - o.0)
    }
}

impl std::iter::Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let a = self.0.unsigned_abs();
        let per = CENTS_PER_CREDIT as u64;
        write!(f, "{sign}{}.{:02}", a / per, a % per)
    }
}

impl FromStr for Money {
    type Err = MoneyError;

    /// Parses `500`, `12.5`, `12.50`, `-3.25`. More than two decimals is an error rather than a
    /// silent rounding.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (neg, body) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let (int, frac) = match body.split_once('.') {
            Some((i, f)) => (i, f),
            None => (body, ""),
        };
        let digits = |x: &str| x.chars().all(|c| c.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) || frac.len() > 2 {
            return Err(MoneyError::Syntax(s.to_string()));
        }
        let whole: i64 =
            if int.is_empty() { 0 } else { int.parse().map_err(|_| MoneyError::TooLarge(s.to_string()))? };
        let mut cents_frac: i64 =
            if frac.is_empty() { 0 } else { frac.parse().map_err(|_| MoneyError::Syntax(s.to_string()))? };
        if frac.len() == 1 {
            cents_frac *= 10;
        }
        let v = whole
            .checked_mul(CENTS_PER_CREDIT)
            .and_then(|w| w.checked_add(cents_frac))
            .filter(|v| *v <= i64::MAX / 1000)
            .ok_or_else(|| MoneyError::TooLarge(s.to_string()))?;
        Ok(Money(if neg { -v } else { v }))
    }
}

/// The largest amount of cents a computed cost may round to: 2^62 (`i64::MAX / 2`, as a float).
const LARGEST_CENTS: f64 = (i64::MAX / 2) as f64;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// The integer ceiling gives the cents `f64::ceil` gives, for any credits: any bit
        /// pattern (so every magnitude, NaN and infinities), whole cents and their neighbours a
        /// few ulps either side, and amounts about the 2^62-cent limit.
        #[test]
        fn ceil_cents_is_libm_ceil(
            bits in any::<u64>(),
            cents in 0i64..1_000_000_000_000,
            ulps in -4i64..=4,
            near_limit in -2048.0f64..2048.0,
        ) {
            let near = |x: f64| f64::from_bits((x.to_bits() as i64 + ulps).max(0) as u64);
            for credits in [
                f64::from_bits(bits),
                cents as f64 / 100.0,
                near(cents as f64 / 100.0),
                near((cents as f64 + 1e-9) / 100.0),
                (LARGEST_CENTS + near_limit * 1024.0) / 100.0,
                near(LARGEST_CENTS / 100.0),
            ] {
                prop_assert_eq!(
                    Money::from_credits_f64_ceil(credits),
                    Money::from_credits_f64_ceil_libm(credits),
                    "credits {:e}", credits
                );
            }
        }
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!("500".parse::<Money>().unwrap(), Money(50_000));
        assert_eq!("12.5".parse::<Money>().unwrap(), Money(1_250));
        assert_eq!("0.07".parse::<Money>().unwrap(), Money(7));
        assert_eq!("-3.25".parse::<Money>().unwrap(), Money(-325));
        assert_eq!(Money(1_250).to_string(), "12.50");
        assert_eq!(Money(-5).to_string(), "-0.05");
        assert!("1.234".parse::<Money>().is_err());
        assert!("abc".parse::<Money>().is_err());
        assert!("".parse::<Money>().is_err());
        assert!("99999999999999999999".parse::<Money>().is_err());
    }

    #[test]
    fn ceil_never_undercharges() {
        assert_eq!(Money::from_credits_f64_ceil(1.001), Some(Money(101)));
        assert_eq!(Money::from_credits_f64_ceil(1.0), Some(Money(100)));
        assert_eq!(Money::from_credits_f64_ceil(-1.0), None);
        assert_eq!(Money::from_credits_f64_ceil(f64::NAN), None);
    }
}
