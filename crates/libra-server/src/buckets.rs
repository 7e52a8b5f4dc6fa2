//! Per-user token buckets: what one user may do at a rate on average and a burst at once
//! (submissions and job changes, quotes, the jobs of hosted sweeps' plans). Each user's bucket is
//! created full at their first use, so a user who has not been seen owes nothing.

use std::collections::HashMap;

/// Past this many users' buckets, the full ones are forgotten (a full bucket and no bucket are
/// the same), so that many users cannot grow the map without bound.
const FORGET_FULL_PAST: usize = 100_000;

#[derive(Debug)]
pub struct Buckets {
    /// Tokens a bucket gains per second ...
    rate: f64,
    /// ... up to this many.
    burst: f64,
    /// Per user id: tokens, and when they were counted.
    users: HashMap<i64, (f64, f64)>,
}

impl Buckets {
    pub fn new(rate: f64, burst: f64) -> Self {
        Buckets { rate, burst, users: HashMap::new() }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Takes `n` tokens from `user`'s bucket at `now`; when it holds fewer, takes none and
    /// says how many it holds and the whole seconds (at least 1) until it holds `n`.
    pub fn take(&mut self, user: i64, n: f64, now: f64) -> Result<(), Short> {
        let (rate, burst) = (self.rate, self.burst);
        if self.users.len() > FORGET_FULL_PAST {
            self.users.retain(|_, (tokens, last)| *tokens + (now - *last) * rate < burst);
        }
        let (tokens, last) = self.users.entry(user).or_insert((burst, now));
        *tokens = (*tokens + (now - *last).max(0.0) * rate).min(burst);
        *last = now;
        if *tokens >= n {
            *tokens -= n;
            return Ok(());
        }
        Err(Short { held: *tokens, wait: ((n - *tokens) / rate).ceil().max(1.0) as u64 })
    }

    /// Takes `n` more tokens from `user`'s bucket at `now` for something already done whose
    /// cost was known only after (a read that grew with what it read): the bucket may go into
    /// debt, down to minus its size, and what comes next waits until it is paid.
    pub fn charge(&mut self, user: i64, n: f64, now: f64) {
        let (rate, burst) = (self.rate, self.burst);
        let (tokens, last) = self.users.entry(user).or_insert((burst, now));
        *tokens = ((*tokens + (now - *last).max(0.0) * rate).min(burst) - n).max(-burst);
        *last = now;
    }

    /// Puts back `n` tokens taken from `user`'s bucket for something that was not done.
    pub fn give_back(&mut self, user: i64, n: f64, now: f64) {
        let (rate, burst) = (self.rate, self.burst);
        if let Some((tokens, last)) = self.users.get_mut(&user) {
            *tokens = (*tokens + (now - *last).max(0.0) * rate + n).min(burst);
            *last = now;
        }
    }
}

/// A bucket that held too few tokens (`Buckets::take`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Short {
    /// The tokens it held.
    pub held: f64,
    /// Whole seconds until it holds what was asked.
    pub wait: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_starts_full_refills_at_its_rate_and_gives_back_what_was_not_used() {
        let mut b = Buckets::new(2.0, 10.0);
        b.take(1, 10.0, 0.0).unwrap();
        assert_eq!(b.take(1, 1.0, 0.0), Err(Short { held: 0.0, wait: 1 }));
        // Another user's bucket is their own.
        b.take(2, 10.0, 0.0).unwrap();
        // 2 a second: 6 after 3 s, never more than 10.
        assert_eq!(b.take(1, 7.0, 3.0), Err(Short { held: 6.0, wait: 1 }));
        b.take(1, 6.0, 3.0).unwrap();
        assert_eq!(b.take(1, 10.0, 100.0), Ok(()));
        assert_eq!(b.take(1, 4.0, 100.0), Err(Short { held: 0.0, wait: 2 }));
        b.give_back(1, 3.0, 100.0);
        b.take(1, 3.0, 100.0).unwrap();
        // A clock that steps back adds nothing.
        assert!(b.take(1, 1.0, 50.0).is_err());
    }

    #[test]
    fn a_charge_after_the_fact_may_leave_a_debt_that_later_takes_wait_for() {
        let mut b = Buckets::new(10.0, 100.0);
        b.take(1, 1.0, 0.0).unwrap();
        b.charge(1, 149.0, 0.0);
        // 99 - 149 = -50: five seconds at 10 a second to pay, then one more for a token.
        assert_eq!(b.take(1, 1.0, 0.0), Err(Short { held: -50.0, wait: 6 }));
        assert!(b.take(1, 1.0, 5.0).is_err());
        b.take(1, 1.0, 5.2).unwrap();
        // Never more than one bucket's worth of debt.
        b.charge(1, 1e9, 10.0);
        assert_eq!(b.take(1, 1.0, 10.0), Err(Short { held: -100.0, wait: 11 }));
    }

    #[test]
    fn full_buckets_are_forgotten_past_many_users() {
        let mut b = Buckets::new(1.0, 1.0);
        for user in 0..=FORGET_FULL_PAST as i64 + 1 {
            b.take(user, 1.0, 0.0).unwrap();
        }
        // An hour on every bucket is full again: forgetting them all changes no answer.
        b.take(-1, 1.0, 3600.0).unwrap();
        assert_eq!(b.users.len(), 1);
        assert!(b.take(-1, 1.0, 3600.0).is_err(), "the one bucket used is remembered");
    }
}
