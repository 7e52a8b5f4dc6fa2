//! Space-shared nodes: one job per node, a waiting queue, and a scheduling pass of the policy
//! after every arrival and completion. A started job runs for its actual runtime (which may
//! exceed its estimate: the backfilling reservations only know the estimate).

use super::events::EventQueue;
use super::{blank_record, spec_of, Arrived, ClusterConfig, JobRecord, Verdict};
use crate::workload::SimJob;
use libra_core::policy::{Decision, Dispatch, Policy, Queued};
use libra_core::Cluster;

pub(super) fn run(
    jobs: &[SimJob],
    policy: &dyn Policy,
    cfg: ClusterConfig,
    arrived: &mut Arrived<'_>,
) -> (Vec<JobRecord>, u64) {
    let mut records: Vec<JobRecord> = jobs.iter().map(blank_record).collect();
    let mut cluster = Cluster::homogeneous(cfg.nodes, cfg.price_base);
    let mut queue: Vec<Queued> = Vec::new();
    let mut events = EventQueue::default();
    let mut next_arrival = 0usize;
    let mut count = 0u64;
    loop {
        let completion = events.peek_time();
        let arrival = jobs.get(next_arrival).map(|j| j.submit);
        let (now, is_completion) = match (completion, arrival) {
            (None, None) => break,
            (Some(c), Some(a)) if c <= a => (c, true),
            (Some(c), None) => (c, true),
            (_, Some(a)) => (a, false),
        };
        count += 1;
        if is_completion {
            // Every completion at this instant, then one scheduling pass.
            while events.peek_time() == Some(now) {
                let Some(ev) = events.pop() else { break };
                records[ev.job].outcome.finish = Some(now);
                cluster.release(ev.job as u64);
            }
        } else {
            let i = next_arrival;
            next_arrival += 1;
            let job = &jobs[i];
            match policy.decide(&spec_of(job), &cluster, now) {
                Decision::Queue => queue.push(Queued {
                    job: i as u64,
                    submit: job.submit,
                    estimate: job.estimate,
                    procs: job.procs.max(1),
                    deadline_abs: job.submit + job.deadline,
                }),
                Decision::Reject { reason, .. } => records[i].verdict = Verdict::Rejected(reason),
                Decision::Accept { .. } => {
                    // A space-shared policy starts jobs from the queue only; an immediate accept
                    // is a policy of the other model.
                    records[i].verdict = Verdict::Rejected(libra_core::RejectReason::Resources);
                }
            }
            arrived.at(next_arrival);
            // Arrivals at the same instant are scheduled together, as one batch.
            if jobs.get(next_arrival).is_some_and(|j| j.submit == now) && events.peek_time() != Some(now) {
                continue;
            }
        }
        if queue.is_empty() {
            continue;
        }
        let actions = policy.dispatch(&queue, &cluster, now);
        if actions.is_empty() {
            continue;
        }
        let mut gone = Vec::with_capacity(actions.len());
        for action in actions {
            match action {
                Dispatch::Start { job, nodes, cost } => {
                    let i = job as usize;
                    let j = &jobs[i];
                    if cluster.commit(job, j.estimate, j.submit + j.deadline, &nodes, now).is_err() {
                        continue;
                    }
                    let rec = &mut records[i];
                    rec.verdict = Verdict::Accepted;
                    rec.outcome.accepted = true;
                    rec.outcome.start = Some(now);
                    rec.outcome.cost = cost;
                    rec.nodes = nodes;
                    events.push(now + j.runtime.max(0.0), i);
                    gone.push(job);
                }
                Dispatch::Drop { job } => {
                    records[job as usize].verdict = Verdict::Dropped;
                    gone.push(job);
                }
            }
        }
        gone.sort_unstable();
        queue.retain(|q| gone.binary_search(&q.job).is_err());
    }
    (records, count)
}
