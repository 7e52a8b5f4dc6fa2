//! One request, twice a second, for every job a `libra` resource has on its cluster, instead of
//! one request per job. Each running job asked by itself twice a second, a sweep of 200 jobs at
//! once asked 400 times a second, past a cluster's `read_rate` (100 a second by default), and
//! its questions were refused. The cluster's listing of the user's own jobs, newest first, is
//! read a page of 1,000 at a time (one read per 1,000 jobs to the cluster) until it reaches the
//! oldest job asked after; a job the listing does not show is asked by itself.
//!
//! A thread asks while any job is watched (`Poll::watch`), and ends when none is.

use libra_api::{Client, JobInfo};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the jobs are asked after.
pub(super) const PERIOD: Duration = Duration::from_millis(500);

/// The most jobs a page of the listing holds (the cluster's reads count one per 1,000); a page
/// holds twice the jobs watched, at least 50, so that a few jobs are not asked with a thousand.
const PAGE: u32 = 1000;

pub(super) struct Poll {
    client: Client,
    state: Mutex<State>,
    /// A round of answers has come.
    fresh: Condvar,
}

#[derive(Default)]
struct State {
    /// The jobs asked after, by id.
    watched: HashMap<u64, Watched>,
    /// Rounds of questions answered so far.
    round: u64,
    /// Whether the thread that asks runs.
    asking: bool,
}

#[derive(Default)]
struct Watched {
    /// How many watch it (an attempt, a cancel settling its charge).
    by: usize,
    /// The latest answer, and the round it came in.
    latest: Option<(u64, JobInfo)>,
}

impl Poll {
    pub fn new(client: Client) -> Arc<Poll> {
        Arc::new(Poll { client, state: Mutex::default(), fresh: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Job `id` asked after from now on, until the watch is dropped.
    pub fn watch(self: &Arc<Self>, id: u64) -> Watch {
        let mut s = self.lock();
        s.watched.entry(id).or_default().by += 1;
        let seen = s.round;
        if !s.asking {
            s.asking = true;
            let poll = Arc::clone(self);
            std::thread::spawn(move || poll.ask_while_watched());
        }
        Watch { poll: Arc::clone(self), id, seen }
    }

    fn ask_while_watched(&self) {
        loop {
            std::thread::sleep(PERIOD);
            let ids: HashSet<u64> = {
                let mut s = self.lock();
                if s.watched.is_empty() {
                    s.asking = false;
                    return;
                }
                s.watched.keys().copied().collect()
            };
            let answers = self.ask(&ids);
            let mut s = self.lock();
            s.round += 1;
            let round = s.round;
            for (id, info) in answers {
                if let Some(w) = s.watched.get_mut(&id) {
                    w.latest = Some((round, info));
                }
            }
            drop(s);
            self.fresh.notify_all();
        }
    }

    /// The jobs of `ids` as the cluster says now: from the pages of its listing down to the
    /// oldest of them, then each one the listing did not show by itself. An error (the
    /// cluster unreachable, or past its rate) leaves the rest to the next round.
    fn ask(&self, ids: &HashSet<u64>) -> HashMap<u64, JobInfo> {
        let oldest = ids.iter().copied().min().unwrap_or(0);
        let size = u32::try_from(ids.len().saturating_mul(2)).unwrap_or(PAGE).clamp(50, PAGE);
        let mut found = HashMap::new();
        let mut after = None;
        loop {
            let page = match self.client.jobs_page(false, size, after) {
                Ok(page) => page,
                Err(e) => {
                    tracing::debug!("asking the Libra cluster for its jobs: {e}");
                    return found;
                }
            };
            let (full, last) = (page.len() >= size as usize, page.last().map(|j| j.id));
            found.extend(page.into_iter().filter(|j| ids.contains(&j.id)).map(|j| (j.id, j)));
            match last {
                Some(last) if full && last > oldest && found.len() < ids.len() => after = Some(last),
                _ => break,
            }
        }
        for &id in ids.iter().filter(|id| !found.contains_key(id)).collect::<Vec<_>>() {
            match self.client.job(id) {
                Ok(info) => {
                    found.insert(id, info);
                }
                Err(e) => tracing::debug!(job = id, "asking the Libra cluster for a job: {e}"),
            }
        }
        found
    }
}

/// One job asked after (`Poll::watch`).
pub(super) struct Watch {
    poll: Arc<Poll>,
    id: u64,
    /// The round of the last answer taken.
    seen: u64,
}

impl Watch {
    /// The job as the cluster said it in a round after the last answer taken, waiting up to
    /// `timeout` for one; `None` when none came in that time.
    pub fn next(&mut self, timeout: Duration) -> Option<JobInfo> {
        let until = Instant::now() + timeout;
        let mut s = self.poll.lock();
        loop {
            if let Some((round, info)) = s.watched.get(&self.id).and_then(|w| w.latest.as_ref()) {
                if *round > self.seen {
                    self.seen = *round;
                    return Some(info.clone());
                }
            }
            let left = until.checked_duration_since(Instant::now())?;
            s = self.poll.fresh.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut s = self.poll.lock();
        if let Some(w) = s.watched.get_mut(&self.id) {
            w.by -= 1;
            if w.by == 0 {
                s.watched.remove(&self.id);
            }
        }
    }
}
