//! One request, twice a second, for every job a `libra` resource has on its cluster, instead of
//! one request per job. Each running job asked by itself twice a second, a sweep of 200 jobs at
//! once asked 400 times a second, past a cluster's `read_rate` (100 a second by default), and
//! its questions were refused. The jobs are asked by their ids, 1,000 a request
//! (`/api/jobs?ids=`, one read per 1,000 jobs to the cluster). A cluster from before `?ids=`
//! answers with its newest jobs instead: then its listing of the user's own jobs, newest first,
//! is read down to the oldest job asked after. A job neither shows is asked by itself.
//!
//! A thread asks while any job is watched (`Poll::watch`), and ends when none is.

use libra_api::{Client, JobInfo};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the jobs are asked after.
pub(super) const PERIOD: Duration = Duration::from_millis(500);

/// The most jobs a request names, and a page of the listing holds (the cluster's reads count
/// one per 1,000); a page holds twice the jobs watched, at least 50, so that a few jobs are
/// not asked with a thousand.
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
    /// The cluster answered `?ids=` with jobs it was not asked for (a server from before it):
    /// its listing is read instead.
    no_ids: bool,
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

    /// The jobs of `ids` as the cluster says now: by their ids (or from the pages of its
    /// listing down to the oldest of them, `no_ids`), then each one not shown by itself. An
    /// error (the cluster unreachable, or past its rate) leaves the rest to the next round.
    fn ask(&self, ids: &HashSet<u64>) -> HashMap<u64, JobInfo> {
        let found = if self.lock().no_ids { self.listed(ids) } else { self.by_ids(ids) };
        let Some(mut found) = found else { return HashMap::new() };
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

    /// `ids` asked by their ids, `PAGE` a request; `None` on an error.
    fn by_ids(&self, ids: &HashSet<u64>) -> Option<HashMap<u64, JobInfo>> {
        let sorted = {
            let mut v: Vec<u64> = ids.iter().copied().collect();
            v.sort_unstable();
            v
        };
        let mut found = HashMap::new();
        for chunk in sorted.chunks(PAGE as usize) {
            let jobs = match self.client.jobs_by_ids(chunk) {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::debug!("asking the Libra cluster for its jobs: {e}");
                    return None;
                }
            };
            if jobs.iter().any(|j| !ids.contains(&j.id)) {
                // A server from before `?ids=`: its newest jobs, whatever was asked.
                self.lock().no_ids = true;
                return self.listed(ids);
            }
            found.extend(jobs.into_iter().map(|j| (j.id, j)));
        }
        Some(found)
    }

    /// `ids` found in the pages of the listing down to the oldest of them; `None` on an error.
    fn listed(&self, ids: &HashSet<u64>) -> Option<HashMap<u64, JobInfo>> {
        let oldest = ids.iter().copied().min().unwrap_or(0);
        let size = u32::try_from(ids.len().saturating_mul(2)).unwrap_or(PAGE).clamp(50, PAGE);
        let mut found = HashMap::new();
        let mut after = None;
        loop {
            let page = match self.client.jobs_page(false, size, after) {
                Ok(page) => page,
                Err(e) => {
                    tracing::debug!("asking the Libra cluster for its jobs: {e}");
                    return None;
                }
            };
            let (full, last) = (page.len() >= size as usize, page.last().map(|j| j.id));
            found.extend(page.into_iter().filter(|j| ids.contains(&j.id)).map(|j| (j.id, j)));
            match last {
                Some(last) if full && last > oldest && found.len() < ids.len() => after = Some(last),
                _ => break,
            }
        }
        Some(found)
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

#[cfg(test)]
mod tests {
    use super::*;
    use libra_api::JobState;
    use libra_core::Money;
    use std::io::{BufRead, BufReader, Write};

    fn info(id: u64) -> JobInfo {
        JobInfo {
            id,
            user: "alice".into(),
            name: None,
            state: JobState::Running,
            command: vec!["true".into()],
            estimate: 10.0,
            procs: 1,
            deadline: 60.0,
            budget: Money::from_credits(1),
            submit_time: 1.0,
            deadline_at: 61.0,
            start_time: Some(2.0),
            end_time: None,
            nodes: vec!["n0".into()],
            share: 0.5,
            cost: Money::ZERO,
            charged: Money::ZERO,
            cpu_seconds: 0.0,
            exit_code: None,
            reason: None,
            suggestion: None,
            cpus_per_task: 1,
            workdir: None,
            stdout: None,
            stderr: None,
            time_limit: None,
            settlement: None,
            array_id: None,
            array_task: None,
            dependencies: Vec::new(),
            waiting: false,
            account: None,
            slurm_job_id: None,
            parts_running: 0,
            command_cut: None,
        }
    }

    /// A cluster on loopback whose user has jobs 1 to `n`, answering the three questions the
    /// poll asks; `old`: as a server from before `?ids=` does (its newest 1,000 jobs, whatever
    /// was asked). Every request's path is kept.
    fn cluster(n: u64, old: bool) -> (Client, Arc<Mutex<Vec<String>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                        break;
                    }
                }
                log.lock().unwrap().push(path.clone());
                let query = |key: &str| {
                    path.split(['?', '&'])
                        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                };
                let newest = |before: u64, limit: u64| -> Vec<JobInfo> {
                    (1..before.min(n + 1)).rev().take(limit as usize).map(info).collect()
                };
                let body = if let Some(id) = path.strip_prefix("/api/jobs/") {
                    serde_json::to_string(&info(id.parse().unwrap())).unwrap()
                } else if let (Some(ids), false) = (query("ids"), old) {
                    let ids: Vec<u64> =
                        ids.split(',').map(|i| i.parse().unwrap()).filter(|&i| i <= n).collect();
                    serde_json::to_string(&ids.into_iter().rev().map(info).collect::<Vec<_>>()).unwrap()
                } else {
                    let limit = query("limit").map_or(1000, |l| l.parse().unwrap());
                    let before = query("after").map_or(n + 1, |a| a.parse().unwrap());
                    serde_json::to_string(&newest(before, limit)).unwrap()
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (Client::new(&url, Some("t".into())), asked)
    }

    /// Three jobs of a hundred are asked after in one request a round, by their ids.
    #[test]
    fn jobs_are_asked_by_their_ids_in_one_request() {
        let (client, asked) = cluster(100, false);
        let poll = Poll::new(client);
        let mut watches: Vec<Watch> = [5, 60, 90].iter().map(|&id| poll.watch(id)).collect();
        for (w, id) in watches.iter_mut().zip([5, 60, 90]) {
            assert_eq!(w.next(Duration::from_secs(10)).map(|j| j.id), Some(id));
        }
        let asked = asked.lock().unwrap().clone();
        assert!(asked.iter().all(|p| p.starts_with("/api/jobs?ids=")), "{asked:?}");
        assert!(asked.iter().any(|p| p == "/api/jobs?ids=5,60,90"), "{asked:?}");
    }

    /// A cluster from before `?ids=` answers with its newest jobs: the poll reads its listing
    /// instead, down to the oldest job watched, and asks by ids no more.
    #[test]
    fn a_cluster_without_ids_is_read_from_its_listing() {
        let (client, asked) = cluster(3000, true);
        let poll = Poll::new(client);
        let mut watches: Vec<Watch> = [10, 2990].iter().map(|&id| poll.watch(id)).collect();
        for _ in 0..2 {
            for (w, id) in watches.iter_mut().zip([10, 2990]) {
                assert_eq!(w.next(Duration::from_secs(30)).map(|j| j.id), Some(id));
            }
        }
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.iter().filter(|p| p.contains("ids=")).count(), 1, "{asked:?}");
        assert!(asked.iter().any(|p| p.ends_with("limit=50&after=51")), "paged down to job 10: {asked:?}");
        assert!(!asked.iter().any(|p| p.starts_with("/api/jobs/")), "none asked by itself: {asked:?}");
    }
}
