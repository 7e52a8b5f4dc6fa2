//! The space-shared engine's completion queue: a binary heap of (time, sequence). Times are
//! finite `f64` seconds; ordering uses `total_cmp`, and a NaN time is refused at the door so it
//! can never reorder the heap silently.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Event {
    pub time: f64,
    pub seq: u64,
    /// Index of the job in the workload.
    pub job: usize,
}

impl Eq for Event {}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest event first.
        other.time.total_cmp(&self.time).then(other.seq.cmp(&self.seq))
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
    pub fn push(&mut self, time: f64, job: usize) {
        debug_assert!(!time.is_nan(), "event time must be a number");
        let time = if time.is_nan() { f64::INFINITY } else { time };
        self.seq += 1;
        self.heap.push(Event { time, seq: self.seq, job });
    }

    pub fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.time)
    }

    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }
}

/// A binary heap with one entry per job, whose time can be moved in place: the time-shared
/// engine reschedules a job's completion at every rate change, and an indexed heap keeps that at
/// O(log n) without leaving stale entries behind. Ties go to the lower job index.
#[derive(Debug, Default)]
pub(crate) struct IndexedHeap {
    heap: Vec<(f64, usize)>,
    /// Position of each job in `heap`, or `NONE`.
    pos: Vec<usize>,
}

const NONE: usize = usize::MAX;

impl IndexedHeap {
    pub fn with_jobs(n: usize) -> Self {
        IndexedHeap { heap: Vec::new(), pos: vec![NONE; n] }
    }

    fn less(a: (f64, usize), b: (f64, usize)) -> bool {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).is_lt()
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i].1] = i;
        self.pos[self.heap[j].1] = j;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if Self::less(self.heap[i], self.heap[p]) {
                self.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && Self::less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < self.heap.len() && Self::less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }

    /// Schedules (or moves) `job` to `time`.
    pub fn set(&mut self, job: usize, time: f64) {
        let time = if time.is_nan() { f64::INFINITY } else { time };
        match self.pos[job] {
            NONE => {
                self.heap.push((time, job));
                let i = self.heap.len() - 1;
                self.pos[job] = i;
                self.up(i);
            }
            i => {
                let old = self.heap[i].0;
                self.heap[i].0 = time;
                if time < old {
                    self.up(i);
                } else {
                    self.down(i);
                }
            }
        }
    }

    pub fn remove(&mut self, job: usize) {
        let i = self.pos[job];
        if i == NONE {
            return;
        }
        let last = self.heap.len() - 1;
        self.swap(i, last);
        self.heap.pop();
        self.pos[job] = NONE;
        if i < self.heap.len() {
            self.up(i);
            self.down(i);
        }
    }

    pub fn peek(&self) -> Option<(f64, usize)> {
        self.heap.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_heap_orders_and_moves() {
        let mut h = IndexedHeap::with_jobs(5);
        h.set(0, 5.0);
        h.set(1, 3.0);
        h.set(2, 4.0);
        h.set(3, 3.0);
        assert_eq!(h.peek(), Some((3.0, 1)));
        h.set(1, 10.0);
        assert_eq!(h.peek(), Some((3.0, 3)));
        h.remove(3);
        assert_eq!(h.peek(), Some((4.0, 2)));
        h.set(0, 1.0);
        assert_eq!(h.peek(), Some((1.0, 0)));
        let mut order = Vec::new();
        while let Some((_, j)) = h.peek() {
            order.push(j);
            h.remove(j);
        }
        assert_eq!(order, vec![0, 2, 1]);
    }
}
