//! Guessing passwords is slow and cheap to refuse: after a few wrong passwords for one account
//! from one address (or many from one address, whatever the accounts) each further attempt
//! waits out a doubling backoff and is refused at once with 429 and Retry-After; at most a few
//! password hashes are computed at a time (Argon2 is slow and takes memory on purpose, so a
//! flood of logins would otherwise take the whole machine), the rest answered 429 at once; and
//! an unknown user costs the same hash as a known one, so timings do not tell which names exist.
//!
//! A user's own logins from another address are not locked out by an attacker's failures.
//! One peer's password checks run one at a time (the next waits its turn, up to [`PEER_WAIT`]),
//! so that no one peer, however many connections it opens, takes more than one of the few
//! hashing threads: a user logging in over and over with their own password (which never backs
//! off) would otherwise keep every thread busy and everyone else's logins answered 429.
//! "Address" is a peer as the connection limits count it ([`Peer`]): an IPv6 host by its /64,
//! and a user of this machine by their Unix account, whatever loopback address they bind (or
//! every one of sixteen million addresses would get its own free guesses).

use crate::peer::Peer;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong passwords for one account from one address before backoff starts.
pub const FREE_ACCOUNT_FAILURES: u32 = 5;
/// Wrong passwords from one address, over all accounts, before backoff starts.
pub const FREE_ADDRESS_FAILURES: u32 = 20;
/// The longest backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Entries not touched for this long are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// The most entries kept (an attacker with many addresses cannot grow the map without bound).
const MAX_ENTRIES: usize = 100_000;
/// The longest a login waits for its peer's previous one to be checked (each takes tens of
/// milliseconds: a hundred users of one login node logging in at once all get their turn).
pub const PEER_WAIT: Duration = Duration::from_secs(5);

type HashJob = Box<dyn FnOnce(&mut crate::auth::HashMemory) + Send>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Account(String, Peer),
    Address(Peer),
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    /// No attempt before this instant.
    until: Instant,
    last: Instant,
}

pub struct LoginGuard {
    hashing: tokio::sync::Semaphore,
    /// The threads that compute password hashes, as many as may run at once. Argon2 takes
    /// about 19 MiB per hash, and the allocator keeps what a thread used for that thread's next
    /// use: hashing on whatever thread of the blocking pool is free would leave ~19 MiB behind
    /// on each of many threads (hundreds of MB after a flood of logins); on a few threads of
    /// its own, memory stays at a few hashes' worth.
    pool: std::sync::mpsc::SyncSender<HashJob>,
    failures: Mutex<HashMap<Key, Failures>>,
    /// Each peer's turn to have a password checked: one at a time per peer (`turn`). An entry
    /// is removed once no one holds or waits for it.
    turns: Mutex<HashMap<Peer, std::sync::Arc<tokio::sync::Semaphore>>>,
    /// A hash of a password nobody has: what an unknown user's attempt is checked against.
    pub decoy: String,
}

fn backoff(count: u32, free: u32) -> Duration {
    if count < free {
        return Duration::ZERO;
    }
    let secs = 1u64 << (count - free).min(16);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

impl LoginGuard {
    /// `hashers`: how many password hashes may be computed at once.
    pub fn new(hashers: usize) -> LoginGuard {
        let hashers = hashers.max(1);
        let (pool, jobs) = std::sync::mpsc::sync_channel::<HashJob>(1024);
        let jobs = std::sync::Arc::new(Mutex::new(jobs));
        for i in 0..hashers {
            let jobs = jobs.clone();
            let spawned = std::thread::Builder::new().name(format!("password-hash-{i}")).spawn(move || {
                let mut mem = crate::auth::HashMemory::default();
                loop {
                    let job = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(&mut mem),
                        Err(_) => return,
                    }
                }
            });
            if let Err(e) = spawned {
                tracing::error!("cannot start a password hashing thread: {e}");
            }
        }
        let decoy = crate::auth::hash_password(&crate::auth::new_token()).unwrap_or_default();
        LoginGuard {
            hashing: tokio::sync::Semaphore::new(hashers),
            pool,
            failures: Mutex::default(),
            turns: Mutex::default(),
            decoy,
        }
    }

    /// Runs `f` (a password hash or check) on the hashing threads. The caller should hold a
    /// permit (`try_hash`) or be an administrator's rare request: the queue is bounded.
    pub async fn hash<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut crate::auth::HashMemory) -> T + Send + 'static,
    ) -> Result<T, crate::ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: HashJob = Box::new(move |mem| {
            let _ = tx.send(f(mem));
        });
        match self.pool.try_send(job) {
            Ok(()) => {}
            Err(std::sync::mpsc::TrySendError::Full(_)) => {
                return Err(crate::ApiError::TooMany(
                    "the server is checking too many passwords at once; try again in a second".into(),
                    1,
                ))
            }
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
                return Err(crate::ApiError::Internal("no password hashing thread is running".into()))
            }
        }
        rx.await.map_err(|_| crate::ApiError::Internal("a password hash was lost".into()))
    }

    /// Refused (with how long to wait) while the account from this address, or the address
    /// itself, is backing off.
    pub fn check(&self, user: &str, addr: Peer, now: Instant) -> Result<(), Duration> {
        let f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let wait = [Key::Account(user.to_string(), addr), Key::Address(addr)]
            .iter()
            .filter_map(|k| f.get(k))
            .map(|x| x.until.saturating_duration_since(now))
            .max()
            .unwrap_or(Duration::ZERO);
        if wait.is_zero() {
            Ok(())
        } else {
            Err(wait)
        }
    }

    /// `peer`'s turn to have a password checked, once its previous check is done; `None` when
    /// that takes longer than `wait`. Held until the check ends.
    pub async fn turn(&self, peer: Peer, wait: Duration) -> Option<Turn<'_>> {
        let sem = self
            .turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(peer)
            .or_insert_with(|| std::sync::Arc::new(tokio::sync::Semaphore::new(1)))
            .clone();
        let permit = tokio::time::timeout(wait, sem.acquire_owned()).await.ok().and_then(Result::ok);
        match permit {
            Some(permit) => Some(Turn { guard: self, peer, permit: Some(permit) }),
            None => {
                self.forget_turn_if_unused(peer);
                None
            }
        }
    }

    fn forget_turn_if_unused(&self, peer: Peer) {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        // Clones are made only under this lock, so a count of one (the map's own) cannot rise.
        if turns.get(&peer).is_some_and(|s| std::sync::Arc::strong_count(s) == 1) {
            turns.remove(&peer);
        }
    }

    /// Peers holding or waiting for a turn now.
    pub fn peers_in_turn(&self) -> usize {
        self.turns.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A permit to hash one password, if one is free now.
    pub fn try_hash(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.hashing.try_acquire().ok()
    }

    pub fn failed(&self, user: &str, addr: Peer, now: Instant) {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if f.len() >= MAX_ENTRIES {
            f.retain(|_, x| now.duration_since(x.last) < FORGET_AFTER);
            if f.len() >= MAX_ENTRIES {
                f.clear();
            }
        }
        for (key, free) in [
            (Key::Account(user.to_string(), addr), FREE_ACCOUNT_FAILURES),
            (Key::Address(addr), FREE_ADDRESS_FAILURES),
        ] {
            let e = f.entry(key).or_insert(Failures { count: 0, until: now, last: now });
            if now.duration_since(e.last) > FORGET_AFTER {
                e.count = 0;
            }
            e.count += 1;
            e.last = now;
            e.until = now + backoff(e.count, free);
        }
    }

    /// The right password: this account's failures from this address are forgiven.
    pub fn succeeded(&self, user: &str, addr: Peer) {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        f.remove(&Key::Account(user.to_string(), addr));
    }
}

/// A peer's turn to have a password checked (`LoginGuard::turn`), until dropped.
pub struct Turn<'a> {
    guard: &'a LoginGuard,
    peer: Peer,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.guard.forget_turn_if_unused(self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_per_account_and_address_and_success_forgives() {
        let g = LoginGuard::new(2);
        let (a, b) = (Peer::of("10.0.0.1".parse().unwrap()), Peer::of("10.0.0.2".parse().unwrap()));
        let t = Instant::now();
        for _ in 0..FREE_ACCOUNT_FAILURES - 1 {
            assert!(g.check("alice", a, t).is_ok());
            g.failed("alice", a, t);
        }
        assert!(g.check("alice", a, t).is_ok());
        g.failed("alice", a, t);
        let wait = g.check("alice", a, t).unwrap_err();
        assert_eq!(wait, Duration::from_secs(1));
        // Alice from elsewhere, and Bob from the same address, are not held back.
        assert!(g.check("alice", b, t).is_ok() && g.check("bob", a, t).is_ok());
        // It doubles with every further failure, and ends.
        g.failed("alice", a, t + wait);
        assert_eq!(g.check("alice", a, t + wait).unwrap_err(), Duration::from_secs(2));
        assert!(g.check("alice", a, t + Duration::from_secs(10)).is_ok());
        g.succeeded("alice", a);
        g.failed("alice", a, t + Duration::from_secs(10));
        assert!(g.check("alice", a, t + Duration::from_secs(10)).is_ok());
        // Spraying many accounts from one address backs the address off.
        for i in 0..FREE_ADDRESS_FAILURES {
            g.failed(&format!("u{i}"), b, t);
        }
        assert!(g.check("carol", b, t).is_err());
        assert_eq!(backoff(100, 5), MAX_BACKOFF);
    }

    /// Wrong passwords from one IPv6 /64 count as from one address (one host is usually given a
    /// whole /64, so moving within it would otherwise start the count again), and a local
    /// account's as from one peer apart from any address.
    #[test]
    fn an_ipv6_64_and_a_local_account_each_count_as_one_peer() {
        let g = LoginGuard::new(1);
        let t = Instant::now();
        for i in 0..FREE_ACCOUNT_FAILURES {
            g.failed("alice", Peer::of(format!("2001:db8:7:7::{:x}", i + 1).parse().unwrap()), t);
            g.failed("alice", Peer::Account(1003), t);
        }
        assert!(g.check("alice", Peer::of("2001:db8:7:7:ffff::1".parse().unwrap()), t).is_err());
        assert!(g.check("alice", Peer::of("2001:db8:7:8::1".parse().unwrap()), t).is_ok());
        assert!(g.check("alice", Peer::Account(1003), t).is_err());
        assert!(g.check("alice", Peer::Account(1004), t).is_ok());
        assert!(g.check("alice", Peer::of("127.0.0.1".parse().unwrap()), t).is_ok());
    }

    /// One peer's checks take turns (the next waits for the one before, and gives up after
    /// its wait), another peer's do not wait for them, and no entry is left behind.
    #[test]
    fn one_peers_checks_take_turns_and_others_do_not_wait() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let g = LoginGuard::new(2);
            let (a, b) = (Peer::Account(1003), Peer::of("10.0.0.2".parse().unwrap()));
            let first = g.turn(a, PEER_WAIT).await.expect("a free turn");
            assert!(
                g.turn(a, Duration::from_millis(50)).await.is_none(),
                "a second check of one peer at once"
            );
            let other = g.turn(b, Duration::from_millis(50)).await.expect("another peer does not wait");
            assert_eq!(g.peers_in_turn(), 2);
            // The next of `a` waits for the first and has its turn once the first ends.
            let next = async { g.turn(a, PEER_WAIT).await.is_some() };
            let end_first = async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                drop(first);
            };
            let (got, ()) = tokio::join!(next, end_first);
            assert!(got);
            drop(other);
            assert_eq!(g.peers_in_turn(), 0, "entries left behind");
        });
    }

    #[test]
    fn hashing_is_bounded() {
        let g = LoginGuard::new(2);
        let p1 = g.try_hash().unwrap();
        let _p2 = g.try_hash().unwrap();
        assert!(g.try_hash().is_none());
        drop(p1);
        assert!(g.try_hash().is_some());
    }
}
