//! The event queue: a binary heap of (time, kind, sequence). Times are finite `f64` seconds;
//! ordering uses `total_cmp`, and a NaN time is refused at the door so it can never reorder
//! the heap silently.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Event {
    pub time: f64,
    /// Completions (0) before arrivals (1) at the same instant: freed capacity is visible to
    /// the job that arrives at that instant.
    pub kind: u8,
    pub seq: u64,
    /// Index of the job in the workload.
    pub job: usize,
    /// The job's version when the event was scheduled; stale events are skipped.
    pub version: u64,
}

impl Eq for Event {}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest event first.
        other.time.total_cmp(&self.time).then(other.kind.cmp(&self.kind)).then(other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: f64, kind: u8, job: usize, version: u64) {
        debug_assert!(!time.is_nan(), "event time must be a number");
        let time = if time.is_nan() { f64::INFINITY } else { time };
        self.seq += 1;
        self.heap.push(Event { time, kind, seq: self.seq, job, version });
    }

    pub fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.time)
    }

    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }
}
