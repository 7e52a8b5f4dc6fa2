//! Group commit for submissions. Each submission is one promise and must be durable before it
//! is answered, and a durable commit costs an fsync; taken one at a time under the state's lock,
//! fsyncs cap how many clients can submit per second. So a submission joins a queue, and the
//! first one to find no batch under way drains the queue on a blocking thread: each drained
//! batch is decided in order against the view and stored with one commit
//! (`Inner::submit_batch`), then every waiting submission gets its own answer.

use crate::app::{now, App};
use crate::error::ApiError;
use axum::http::HeaderMap;
use libra_api::{JobInfo, JobState, SubmitRequest};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The most submissions decided under one hold of the state's lock: node agents' syncs and
/// other requests wait for it, so a burst is taken in slices.
const MAX_BATCH: usize = 256;

/// Submissions waiting for the next batch.
#[derive(Default)]
pub struct SubmitQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    waiting: Vec<Waiting>,
    /// A drainer is running: it will take whatever is queued before it stops.
    draining: bool,
}

struct Waiting {
    headers: HeaderMap,
    req: SubmitRequest,
    /// The client's `Idempotency-Key`: a retry with the same key gets the same job.
    key: Option<String>,
    reply: oneshot::Sender<Result<JobInfo, ApiError>>,
}

/// Clears `draining` however the drainer ends, so a panic cannot leave later submissions
/// waiting for a drainer that is gone (their senders drop and they get an error instead).
struct DrainGuard<'a>(&'a SubmitQueue);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut s = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
            s.draining = false;
            s.waiting.clear();
        }
    }
}

impl App {
    /// Submits as the caller the headers name, in the next batch.
    pub async fn submit_grouped(
        self: &Arc<Self>,
        headers: HeaderMap,
        req: SubmitRequest,
        key: Option<String>,
    ) -> Result<JobInfo, ApiError> {
        let (reply, answer) = oneshot::channel();
        let arrived = std::time::Instant::now();
        let start = {
            let mut s = self.submissions.state.lock().unwrap_or_else(|p| p.into_inner());
            s.waiting.push(Waiting { headers, req, key, reply });
            !std::mem::replace(&mut s.draining, true)
        };
        if start {
            let app = Arc::clone(self);
            tokio::task::spawn_blocking(move || app.drain_submissions());
        }
        let answer = answer
            .await
            .map_err(|_| ApiError::Internal("the submission was lost before it was decided".into()))
            .and_then(|a| a);
        self.metrics.admission(&answer, arrived.elapsed().as_secs_f64());
        answer
    }

    fn drain_submissions(&self) {
        let _guard = DrainGuard(&self.submissions);
        loop {
            let batch = {
                let mut s = self.submissions.state.lock().unwrap_or_else(|p| p.into_inner());
                if s.waiting.is_empty() {
                    s.draining = false;
                    return;
                }
                let n = s.waiting.len().min(MAX_BATCH);
                s.waiting.drain(..n).collect::<Vec<_>>()
            };
            let mut answers: Vec<Option<Result<JobInfo, ApiError>>> = Vec::with_capacity(batch.len());
            let mut started = false;
            {
                let mut g = self.lock();
                let t = now();
                // Each caller's submission rate is checked here, where the caller is known.
                let mut callers: Vec<Result<crate::auth::Caller, ApiError>> = Vec::with_capacity(batch.len());
                for w in &batch {
                    let c = g.caller(&w.headers);
                    callers.push(c.and_then(|c| g.take_submission(&c, t).map(|()| c)));
                }
                let items: Vec<_> = batch
                    .iter()
                    .zip(&callers)
                    .filter_map(|(w, c)| c.as_ref().ok().map(|c| (c, &w.req, w.key.as_deref())))
                    .collect();
                let mut decided = g.submit_batch(&items, t).into_iter();
                for c in &callers {
                    answers.push(Some(match c {
                        Ok(_) => {
                            decided.next().unwrap_or_else(|| Err(ApiError::Internal("no answer".into())))
                        }
                        Err(e) => Err(e.clone()),
                    }));
                }
                // Queued jobs (space-shared policies) may start at once.
                let queued = |a: &Option<Result<JobInfo, ApiError>>| matches!(a, Some(Ok(j)) if j.state == JobState::Pending && j.nodes.is_empty());
                if answers.iter().any(queued) {
                    if let Err(e) = g.dispatch_queue(t) {
                        tracing::warn!("dispatch after submissions: {e}");
                    }
                    for (a, c) in answers.iter_mut().zip(&callers) {
                        if let (true, Ok(c), Some(Ok(j))) = (queued(a), c, a.as_ref()) {
                            let id = j.id;
                            *a = Some(g.owned_job(c, id));
                        }
                    }
                }
                started |= answers.iter().any(|a| matches!(a, Some(Ok(j)) if j.state == JobState::Pending || j.state == JobState::Running));
            }
            if started {
                self.changed();
            }
            for (w, a) in batch.into_iter().zip(answers) {
                let _ = w.reply.send(a.unwrap_or_else(|| Err(ApiError::Internal("no answer".into()))));
            }
        }
    }
}
