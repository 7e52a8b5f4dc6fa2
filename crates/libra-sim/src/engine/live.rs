//! The running jobs of a time-shared run, by job index, in a dense table whose records are
//! reused. A record per job of the workload (`Vec<Option<Active>>`) was written whole before the
//! first event (8 MiB for the SDSC trace, a page fault every 30 jobs) and scattered the few
//! hundred running jobs across it; here only an index per job is kept, the records of the
//! running jobs sit together, and a finished job's record (its vectors' memory included) is
//! the next arrival's.

/// A record the table keeps: cleared for reuse rather than dropped.
pub(super) trait Reusable: Default {
    /// Empties the record, keeping whatever memory it holds.
    fn clear(&mut self);
}

#[derive(Debug)]
pub(super) struct Live<T> {
    /// Where each job's record is in `records`, or `NONE`.
    at: Vec<u32>,
    records: Vec<T>,
    /// Records of `records` that no job holds.
    free: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl<T: Reusable> Live<T> {
    /// A table for jobs `0..jobs`, none running. Jobs past `u32::MAX - 1` running at once
    /// cannot be told apart from `NONE`: a workload that large is refused before a run
    /// (`SyntheticConfig` and the trace reader stop far below it).
    pub fn with_jobs(jobs: usize) -> Self {
        Live { at: vec![NONE; jobs], records: Vec::new(), free: Vec::new() }
    }

    pub fn get(&self, job: usize) -> Option<&T> {
        match self.at[job] {
            NONE => None,
            r => Some(&self.records[r as usize]),
        }
    }

    pub fn get_mut(&mut self, job: usize) -> Option<&mut T> {
        match self.at[job] {
            NONE => None,
            r => Some(&mut self.records[r as usize]),
        }
    }

    /// A cleared record for `job`, which must not be running.
    pub fn insert(&mut self, job: usize) -> &mut T {
        debug_assert_eq!(self.at[job], NONE, "job {job} is already running");
        let r = match self.free.pop() {
            Some(r) => r,
            None => {
                self.records.push(T::default());
                u32::try_from(self.records.len() - 1).expect("fewer than 2^32 - 1 running jobs")
            }
        };
        self.at[job] = r;
        &mut self.records[r as usize]
    }

    /// Ends `job`'s record, if it has one: cleared, its memory kept for the next `insert`.
    pub fn remove(&mut self, job: usize) {
        let r = std::mem::replace(&mut self.at[job], NONE);
        if r != NONE {
            self.records[r as usize].clear();
            self.free.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Live, Reusable};
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Default, Clone, PartialEq)]
    struct Rec(Vec<u64>);

    impl Reusable for Rec {
        fn clear(&mut self) {
            self.0.clear();
        }
    }

    proptest! {
        /// The table answers as a map from job to record would, whatever the order of starts
        /// and ends, and a record handed out again starts empty.
        #[test]
        fn live_is_a_map(ops in proptest::collection::vec((any::<bool>(), 0usize..12, any::<u64>()), 1..200)) {
            let mut live: Live<Rec> = Live::with_jobs(12);
            let mut map: HashMap<usize, Rec> = HashMap::new();
            for (start, job, v) in ops {
                if start && !map.contains_key(&job) {
                    let r = live.insert(job);
                    prop_assert!(r.0.is_empty(), "a reused record comes cleared");
                    r.0.push(v);
                    map.insert(job, Rec(vec![v]));
                } else if start {
                    live.get_mut(job).unwrap().0.push(v);
                    map.get_mut(&job).unwrap().0.push(v);
                } else {
                    live.remove(job);
                    map.remove(&job);
                }
                for j in 0..12 {
                    prop_assert_eq!(live.get(j), map.get(&j));
                }
            }
            prop_assert!(live.records.len() <= 12, "records are reused: {}", live.records.len());
        }
    }
}
