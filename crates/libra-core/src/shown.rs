//! A float in a message as people write it: `1e308`, not the 309 digits `{}` gives, so that an
//! error about an absurd value stays one readable line.

use std::fmt;

/// Displays as `{}` does for the magnitudes people type (1e-4 up to 1e16, and 0, infinities,
/// NaN), in exponent form (`{:e}`) beyond them.
#[derive(Debug, Clone, Copy)]
pub struct Shown(pub f64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0.abs();
        if a == 0.0 || !a.is_finite() || (1e-4..1e16).contains(&a) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Shown;

    #[test]
    fn absurd_magnitudes_are_shown_with_an_exponent_and_the_rest_as_typed() {
        let s = |x: f64| Shown(x).to_string();
        assert_eq!(s(1e308), "1e308");
        assert_eq!(s(-2.5e20), "-2.5e20");
        assert_eq!(s(1e-7), "1e-7");
        assert_eq!(s(-1.0), "-1");
        assert_eq!(s(0.5), "0.5");
        assert_eq!(s(86401.0), "86401");
        assert_eq!(s(0.0), "0");
        assert_eq!(s(f64::INFINITY), "inf");
        assert_eq!(s(f64::NAN), "NaN");
    }
}
