//! The cluster as the policies see it: nodes with their capacity, and the jobs committed to each
//! (estimate, deadline, progress). The simulator and the server each keep one and update it;
//! the policies only read it. No clock: every query takes `now`.

use crate::job::JobSpec;
use crate::load_line::{job_line, JobLine, NodeLine, NodeLines, NodeLinesSlice, BASE_SPAN, MAX_STALE_STEPS};
use crate::share::{required_share, ControlledJob};
use crate::still::{Still, StillBounds, StillJobs};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub type NodeIdx = usize;

/// Shares are compared with capacity with this slack, so that a job whose share fills a node
/// exactly is not refused over a rounding error.
pub const SHARE_EPS: f64 = 1e-9;

/// What a node offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub name: String,
    /// CPU capacity in processors (0.5 = half a core). A job's task uses at most its
    /// `cpus_per_task` of them.
    pub cpus: f64,
    #[serde(default)]
    pub mem_mb: u64,
    #[serde(default)]
    pub disk_mb: u64,
    /// PBase_j: base price per CPU-second.
    pub price_base: f64,
}

impl NodeSpec {
    /// A one-processor node with no memory or disk limits to speak of.
    pub fn uniprocessor(name: impl Into<String>, price_base: f64) -> Self {
        NodeSpec { name: name.into(), cpus: 1.0, mem_mb: u64::MAX / 4, disk_mb: u64::MAX / 4, price_base }
    }

    /// The most a job whose task may use `cpus_per_task` CPUs at once can get on this node:
    /// that many CPUs, or the whole node if it has fewer.
    pub fn job_cap(&self, cpus_per_task: u32) -> f64 {
        job_cap(self.cpus, cpus_per_task)
    }
}

/// `NodeSpec::job_cap` of a node of `cpus`.
#[inline]
fn job_cap(cpus: f64, cpus_per_task: u32) -> f64 {
    cpus.min(f64::from(cpus_per_task.max(1)))
}

/// What admission reads of a node before the node itself: its capacity and base price, how
/// many jobs it has, the lower bound on its load (`load_line`) and the earliest deadline among
/// its jobs. On 10,000 nodes most nodes an arrival meets are refused by these bytes or are
/// idle, and reading them instead of each node's own struct is most of what a pass over the
/// nodes costs. The cluster keeps each field side by side for every node, in an array of its
/// own (`HotNodes`), and hands out a node's as this copy (`Cluster::node_hot`) or a word's
/// (`HotWord`).
#[derive(Debug, Clone, Copy)]
pub struct NodeHot {
    line: NodeLine,
    cpus: f64,
    price_base: f64,
    jobs: u32,
    /// At most the absolute deadline of every job on the node (+inf on an idle node): the
    /// least of them, each rounded down to an `f32` (`f32_at_most`), 4 bytes a node in the pass.
    /// Kept at commit and release; a deadline never moves.
    first_deadline: f32,
}

/// Every node's `NodeHot`, one array per field, so that a pass over the nodes reads only the
/// fields it asks of them, side by side, four or eight nodes to a vector (`policy::Simd`).
/// Kept as one struct per node (48 bytes, the nodes' fields interleaved), the pass over 10,000
/// nodes read all 48 bytes of each and spent most of its instructions taking them apart. The
/// load polynomials alone are 24 bytes a node, and a progress update writes those alone.
#[derive(Debug, Clone, Default)]
struct HotNodes {
    lines: NodeLines,
    cpus: Vec<f64>,
    price_base: Vec<f64>,
    jobs: Vec<u32>,
    first_deadline: Vec<f32>,
}

impl HotNodes {
    fn push(&mut self, spec: &NodeSpec) {
        let hot = NodeHot::of(spec);
        self.lines.push(hot.line);
        self.cpus.push(hot.cpus);
        self.price_base.push(hot.price_base);
        self.jobs.push(hot.jobs);
        self.first_deadline.push(hot.first_deadline);
    }

    #[inline(always)]
    fn get(&self, i: NodeIdx) -> NodeHot {
        NodeHot {
            line: self.lines.get(i),
            cpus: self.cpus[i],
            price_base: self.price_base[i],
            jobs: self.jobs[i],
            first_deadline: self.first_deadline[i],
        }
    }

    /// Nodes `lo..hi`.
    #[inline]
    fn word(&self, lo: usize, hi: usize) -> HotWord<'_> {
        HotWord {
            lines: self.lines.slice(lo, hi),
            cpus: &self.cpus[lo..hi],
            price_base: &self.price_base[lo..hi],
            jobs: &self.jobs[lo..hi],
            first_deadline: &self.first_deadline[lo..hi],
        }
    }
}

/// The `NodeHot`s of the nodes of one idle word (`Cluster::hot_word`), read field by field from
/// the cluster's arrays.
#[derive(Debug, Clone, Copy)]
pub struct HotWord<'a> {
    lines: NodeLinesSlice<'a>,
    cpus: &'a [f64],
    price_base: &'a [f64],
    jobs: &'a [u32],
    first_deadline: &'a [f32],
}

impl<'a> HotWord<'a> {
    /// Each node's `NodeHot`, in index order. The arrays are zipped rather than indexed, so
    /// that a screen over them compiles to one load a vector per field it reads (the fields
    /// it does not read are not loaded at all).
    #[inline(always)]
    pub fn iter(&self) -> impl Iterator<Item = NodeHot> + 'a {
        self.lines.iter().zip(self.cpus).zip(self.price_base).zip(self.jobs).zip(self.first_deadline).map(
            |((((line, &cpus), &price_base), &jobs), &first_deadline)| NodeHot {
                line,
                cpus,
                price_base,
                jobs,
                first_deadline,
            },
        )
    }
}

/// The greatest `f32` at most `x`; -inf for NaN (a bound that proves nothing).
fn f32_at_most(x: f64) -> f32 {
    let f = x as f32;
    if x.is_nan() {
        f32::NEG_INFINITY
    } else if f64::from(f) > x {
        // The next f32 below `f` (`f32::next_down`, newer than the supported Rust). `f` is
        // neither NaN nor -inf (it is above a number); a zero goes to the least negative f32.
        let bits = f.to_bits();
        f32::from_bits(if f == 0.0 {
            0x8000_0001
        } else if f > 0.0 {
            bits - 1
        } else {
            bits + 1
        })
    } else {
        f
    }
}

impl NodeHot {
    fn of(spec: &NodeSpec) -> Self {
        NodeHot {
            line: NodeLine::default(),
            cpus: spec.cpus,
            price_base: spec.price_base,
            jobs: 0,
            first_deadline: f32::INFINITY,
        }
    }

    /// `NodeSpec::cpus`.
    #[inline]
    pub fn cpus(&self) -> f64 {
        self.cpus
    }

    /// `NodeSpec::price_base`.
    #[inline]
    pub fn price_base(&self) -> f64 {
        self.price_base
    }

    /// `NodeSpec::job_cap`, bit for bit.
    #[inline]
    pub fn job_cap(&self, cpus_per_task: u32) -> f64 {
        job_cap(self.cpus, cpus_per_task)
    }

    /// `Cluster::load_lower_bound` of this node, given `Cluster::bound_clock(now)`.
    #[inline]
    pub fn load_lower_bound(&self, now: f64) -> f64 {
        self.line.lower_bound(now, self.jobs as usize)
    }

    /// At most the absolute deadline of every job on the node (+inf when it has none, -inf when
    /// it cannot say).
    #[inline]
    pub fn first_deadline(&self) -> f64 {
        f64::from(self.first_deadline)
    }
}

/// A node and its jobs. Laid out by hand (`repr(C)`), a line of 64 bytes to a node's start:
/// what admission reads of every node that passes its screen (the slots, `moving`,
/// `cap_floor`, the capacity and base price, the memory and disk in use) is in its first two
/// lines, which a pass asks for ahead (`Cluster::prefetch_node`). In the order the compiler
/// chose, the slots sat in the fourth line, which the pass did not ask for: the read of their
/// address to ask for the entries stalled, and was a third of the busy nodes' pass (perf).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Node {
    /// The slots of the node's jobs: the order of its entries. A job's entry (`Entries`, by
    /// slot) is one record however many nodes it spans, so a progress update writes it once,
    /// not once per node: a parallel job of 128 nodes used to cost 128 scattered writes at every
    /// update, a third of the simulator's time on 10,000 nodes.
    slots: Vec<usize>,
    /// How many of the node's jobs are not `is_still` (a progress rate assumed, as the
    /// simulator's jobs and the server's jobs waiting on dependencies have).
    moving: usize,
    /// At most the `cap` of every job on the node (+inf when it has none): a share at or below
    /// it needs no clamp, so the job's `terms` need not be read. Lowered at each commit, raised
    /// only when the node empties (a floor that is too low costs a read, never a wrong share).
    cap_floor: f64,
    pub spec: NodeSpec,
    mem_used: u64,
    disk_used: u64,
    /// The most jobs the node runs at once (an executor's own limit, such as Slurm's
    /// OverSubscribe=FORCE:N; usize::MAX: none).
    pub max_jobs: usize,
    pub up: bool,
    /// Whether the node takes new jobs. A drained node (`false`) keeps its commitments, so the
    /// promises made on it are kept, but its capacity leaves admission and dispatch at once.
    pub accepting: bool,
    /// Each entry's deadline as `NodeHot::first_deadline` keeps it (`f32_at_most`), parallel to
    /// `slots`: when the job with the earliest leaves, the next earliest is found here, in a
    /// line or two, rather than in every job's entry.
    deadlines: Vec<f32>,
    /// While `moving` is 0, each job's `Still` in the order of `slots`, with their totals
    /// (empty otherwise): all admission reads of a node whose jobs have only measured progress
    /// (the server's).
    still: StillJobs,
}

/// CPU-seconds done at `now` by a job that had done `cpu_done` at `as_of` and progresses at
/// `rate` since. The one formula every reader of a job's progress uses, so that admission, job
/// control and the fast paths get the same bits.
#[inline]
fn cpu_at(cpu_done: f64, rate: f64, as_of: f64, now: f64) -> f64 {
    cpu_done + rate * (now - as_of).max(0.0)
}

/// The part of a job's entry that every share computation reads: its progress and the window it
/// must finish in, 40 bytes. Admission reads it for every job on every node it considers; the
/// rest of the entry (`EntryTerms`) only off the common case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryProgress {
    pub estimate: f64,
    pub deadline_abs: f64,
    pub cpu_done: f64,
    pub as_of: f64,
    pub rate: f64,
}

impl EntryProgress {
    #[inline]
    pub fn cpu_at(&self, now: f64) -> f64 {
        cpu_at(self.cpu_done, self.rate, self.as_of, now)
    }

    #[inline]
    pub fn remaining_estimate(&self, now: f64) -> f64 {
        (self.estimate - self.cpu_at(now)).max(0.0)
    }
}

/// Whether a job's work left is the same at every instant: at rate +-0 (from a finite `as_of`),
/// `cpu_at(now)` adds to `cpu_done` a product of the rate and a finite `d >= +0`, a zero of the
/// rate's sign whatever `now` (a finite one) is.
fn is_still(p: &EntryProgress) -> bool {
    p.rate == 0.0 && p.as_of.is_finite()
}

impl Still {
    fn of(p: &EntryProgress) -> Self {
        // `rate * 0.0` is the zero `rate * d` gives for any finite d >= +0 (`is_still`); only
        // a `now - as_of` of -0.0 (a clock at -0.0) could flip it, and then only the sign of
        // a zero `remaining`, which no share or sum below tells apart (`Node::shares_at`).
        Still { remaining: p.estimate - (p.cpu_done + p.rate * 0.0), deadline_abs: p.deadline_abs }
    }
}

/// One job's share on a node at an instant, with what eq. (6) needs beside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryShare {
    /// `NodeEntry::share(now)`, bit for bit.
    pub share: f64,
    /// `NodeEntry::remaining_estimate(now)` (up to the sign of a zero: compare with `> 0.0`).
    pub remaining: f64,
    pub deadline_abs: f64,
}

/// The shares of a node's jobs at an instant, in entry order (`Cluster::node_shares`).
pub struct Shares<'a> {
    node: &'a Node,
    entries: Entries<'a>,
    k: usize,
    now: f64,
    /// Read the node's `still` entries (every job still, `now` finite) rather than `progress`.
    still: bool,
}

impl Iterator for Shares<'_> {
    type Item = EntryShare;

    // Always inlined: admission runs this once per job on every node it reads, and a call per
    // job (returning the entry through memory) cost as much as the arithmetic.
    #[inline(always)]
    fn next(&mut self) -> Option<EntryShare> {
        let (node, entries, k, now) = (self.node, self.entries, self.k, self.now);
        if k >= node.slots.len() {
            return None;
        }
        self.k += 1;
        Some(if self.still {
            node.still_share(entries, k, now)
        } else {
            let p = entries.progress(node.slots[k]);
            EntryShare {
                share: node.share(entries, k, now),
                remaining: p.remaining_estimate(now),
                deadline_abs: p.deadline_abs,
            }
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.node.slots.len() - self.k;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Shares<'_> {}

/// The rest of a job's entry: needed for a share only when the job has overrun or is
/// past its deadline (`admitted_share`) or its share may be above what it can use (`cap`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct EntryTerms {
    job: u64,
    procs: u32,
    admitted_share: f64,
    cap: f64,
}

/// What a node knows about one of its jobs to compute its share (its `EntryProgress` and
/// `EntryTerms` together).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeEntry {
    pub job: u64,
    /// Nodes the job spans (a parallel job cannot be scheduled node by node).
    pub procs: u32,
    pub estimate: f64,
    pub deadline_abs: f64,
    pub admitted_share: f64,
    pub cpu_done: f64,
    pub as_of: f64,
    pub rate: f64,
    /// The most the job can get (its commitment's `cap`).
    pub cap: f64,
}

impl NodeEntry {
    pub fn cpu_at(&self, now: f64) -> f64 {
        cpu_at(self.cpu_done, self.rate, self.as_of, now)
    }

    pub fn remaining_estimate(&self, now: f64) -> f64 {
        (self.estimate - self.cpu_at(now)).max(0.0)
    }

    /// Algorithm 2 at `now`, capped at `cap`.
    pub fn required_share(&self, now: f64, cap: f64) -> f64 {
        required_share(self.estimate, self.cpu_at(now), self.deadline_abs, now, self.admitted_share, cap)
    }

    /// Algorithm 2 at `now`, capped at the job's own cap.
    pub fn share(&self, now: f64) -> f64 {
        self.required_share(now, self.cap)
    }

    /// The job as job control sees it, with the progress the model assumes at `now`.
    pub fn controlled(&self, now: f64) -> ControlledJob {
        ControlledJob {
            job: self.job,
            estimate: self.estimate,
            cpu: self.cpu_at(now),
            deadline_abs: self.deadline_abs,
            admitted: self.admitted_share,
            procs: self.procs,
            cap: self.cap,
            suspended: false,
        }
    }
}

/// Each job's share and one term of it at one instant, kept by the job's slot for one pass of
/// admission over many nodes (`KeptShares::pass`). A parallel job's entry is one record
/// however many nodes it spans, and so is its share at `now`; reading it again on each of its
/// nodes was most of what admission computed: on the SDSC trace under `libra+$`, 393 jobs read
/// per arrival, of 52 distinct ones. Kept between passes (one per thread), so that a pass
/// allocates nothing: a pass number tells this pass's values from older ones.
#[derive(Debug, Default)]
pub struct KeptShares {
    /// The last pass's number (0: none started; a slot's `pass` of 0 is never a pass's).
    pass: u64,
    kept: Vec<Kept>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Kept {
    pass: u64,
    share: f64,
    term: f64,
}

impl KeptShares {
    /// Starts a pass over `cluster` at `now` with `term`: nothing kept before counts. The pass
    /// borrows the cluster, so the cluster cannot change while it lasts, and it reads at its one
    /// instant with its one term: what makes a value kept on one node the one the next would
    /// compute holds by construction, not by a check at every read.
    pub fn pass<'a, T>(&'a mut self, cluster: &'a Cluster, now: f64, term: T) -> KeptPass<'a, T>
    where
        T: Fn(&EntryShare) -> f64,
    {
        self.pass += 1;
        if self.kept.len() < cluster.progress.len() {
            self.kept.resize(cluster.progress.len(), Kept::default());
        }
        KeptPass { cluster, now, finite: now.is_finite(), term, pass: self.pass, kept: &mut self.kept }
    }
}

/// One pass of reads of a cluster's nodes at one instant with one term (`KeptShares::pass`).
pub struct KeptPass<'a, T> {
    cluster: &'a Cluster,
    now: f64,
    /// `now.is_finite()`: a node of still jobs is read by `node_sums` at a finite instant.
    finite: bool,
    term: T,
    pass: u64,
    /// At least one value per slot of the cluster's.
    kept: &'a mut [Kept],
}

impl<T: Fn(&EntryShare) -> f64> KeptPass<'_, T> {
    /// `Cluster::node_sums` of node `i` at the pass's instant with its term, bit for bit: each
    /// job's share and term are computed once, on the first node the pass reads it on, and kept
    /// by its slot for the other nodes it spans. A job's entry and cap are its own, whatever the
    /// node (`Node::share` gives `NodeEntry::share` bit for bit on each), so the values kept are
    /// the ones each node would compute, added in the same order. A node whose jobs are all
    /// still is read as `node_sums` reads it (16 bytes a job, nothing to keep).
    #[inline]
    pub fn node_sums<R>(&mut self, i: NodeIdx, load0: f64, refuse: R) -> Option<(f64, f64)>
    where
        R: Fn(f64) -> bool,
    {
        let (cluster, now) = (self.cluster, self.now);
        let node = &cluster.nodes[i];
        if node.moving == 0 && self.finite {
            return cluster.node_sums(i, now, load0, &self.term, refuse);
        }
        let (entries, pass) = (cluster.entries(), self.pass);
        let (mut load, mut other) = (load0, 0.0);
        for (k, &slot) in node.slots.iter().enumerate() {
            let m = &mut self.kept[slot];
            if m.pass != pass {
                let p = entries.progress(slot);
                let e = EntryShare {
                    share: node.share(entries, k, now),
                    remaining: p.remaining_estimate(now),
                    deadline_abs: p.deadline_abs,
                };
                *m = Kept { pass, share: e.share, term: (self.term)(&e) };
            }
            load += m.share;
            other += m.term;
        }
        // Asked once, of the whole sum: the same answer as asking as the sum grows (the
        // partial loads never fall; see `Cluster::node_sums`), and with most terms kept,
        // reading a refused node to its end costs less than the test at every job did.
        (!refuse(load)).then_some((load, other))
    }
}

/// Every live job's entry, by slot (`Cluster::progress` and `Cluster::terms`; a freed slot's
/// entry is stale until the slot is reused, and no node lists it).
#[derive(Clone, Copy)]
struct Entries<'a> {
    progress: &'a [EntryProgress],
    terms: &'a [EntryTerms],
}

impl<'a> Entries<'a> {
    #[inline(always)]
    fn progress(self, slot: usize) -> &'a EntryProgress {
        &self.progress[slot]
    }

    #[inline(always)]
    fn terms(self, slot: usize) -> &'a EntryTerms {
        &self.terms[slot]
    }
}

impl Node {
    /// Algorithm 2's share of the node's `k`th job at `now`: `NodeEntry::share` bit for bit,
    /// reading the job's `terms` only off the common case. In that case (work left, deadline
    /// ahead, quotient at most `cap_floor`) `required_share` takes the same quotient of the
    /// same differences, and its clamp to `[0, cap]` leaves it alone: the quotient of two
    /// positive numbers is at least +0, and it is at most `cap_floor <= cap`. Anything else
    /// (NaN included) goes through `required_share` itself with the job's terms.
    #[inline]
    fn share(&self, entries: Entries<'_>, k: usize, now: f64) -> f64 {
        let slot = self.slots[k];
        let p = entries.progress(slot);
        let cpu = p.cpu_at(now);
        let remaining = p.estimate - cpu;
        let left = p.deadline_abs - now;
        if remaining > 0.0 && left > 0.0 {
            let s = remaining / left;
            if s <= self.cap_floor {
                return s;
            }
        }
        let t = entries.terms(slot);
        required_share(p.estimate, cpu, p.deadline_abs, now, t.admitted_share, t.cap)
    }

    /// `share`, kept out of line for the callers that have already tried its common case.
    #[cold]
    #[inline(never)]
    fn share_off_the_common_case(&self, entries: Entries<'_>, k: usize, now: f64) -> f64 {
        self.share(entries, k, now)
    }

    /// Adds the job in `slot` (entry `p`, cap `cap`) at the end.
    fn push_entry(&mut self, slot: usize, p: &EntryProgress, cap: f64) {
        if !is_still(p) {
            self.moving += 1;
            self.still.clear();
        } else if self.moving == 0 {
            self.still.push(Still::of(p));
        }
        self.slots.push(slot);
        self.deadlines.push(f32_at_most(p.deadline_abs));
        self.cap_floor = self.cap_floor.min(cap);
    }

    /// The `k`th entry's progress has changed from one that `was` still to `p`: the kept count
    /// of moving jobs and the `still` entries follow. Nothing to do while the job moves.
    fn entry_progress_changed(&mut self, entries: Entries<'_>, k: usize, was: bool, p: &EntryProgress) {
        match (was, is_still(p)) {
            (true, true) if self.moving == 0 => {
                self.still.set(k, Still::of(p));
            }
            (true, false) => {
                self.moving += 1;
                self.still.clear();
            }
            (false, true) => {
                self.moving -= 1;
                self.rebuild_still(entries);
            }
            _ => {}
        }
    }

    /// Removes the `k`th entry; the last takes its place.
    fn remove_entry(&mut self, entries: Entries<'_>, k: usize) {
        let p = *entries.progress(self.slots[k]);
        self.slots.swap_remove(k);
        self.deadlines.swap_remove(k);
        if !is_still(&p) {
            self.moving -= 1;
            self.rebuild_still(entries);
        } else if self.moving == 0 {
            self.still.swap_remove(k);
        }
        if self.slots.is_empty() {
            self.cap_floor = f64::INFINITY;
        }
    }

    /// `still` from the entries, once no job on the node is moving (a no-op before).
    fn rebuild_still(&mut self, entries: Entries<'_>) {
        if self.moving == 0 {
            self.still.rebuild(self.slots.iter().map(|&s| Still::of(entries.progress(s))));
        }
    }

    /// The `k`th job's `EntryShare` at a finite `now`, read from `still` (every job still). As
    /// `Node::share`'s common case, with `remaining` read instead of computed (the same bits,
    /// `Still::of`); anything else through the full computation.
    #[inline(always)]
    fn still_share(&self, entries: Entries<'_>, k: usize, now: f64) -> EntryShare {
        let q = &self.still.as_slice()[k];
        let left = q.deadline_abs - now;
        let quick = if q.remaining > 0.0 && left > 0.0 {
            let s = q.remaining / left;
            (s <= self.cap_floor).then_some(s)
        } else {
            None
        };
        let share = match quick {
            Some(s) => s,
            None => self.share_off_the_common_case(entries, k, now),
        };
        EntryShare { share, remaining: q.remaining.max(0.0), deadline_abs: q.deadline_abs }
    }

    /// `Cluster::node_sums` on a node whose every job is still, at a finite `now`: the jobs in
    /// blocks of `BLOCK`. A block whose every job is in `still_share`'s common case has its
    /// quotients taken side by side (independent divisions, which the processor overlaps and
    /// the compiler may pack into vectors), then added to the two sums one by one in entry
    /// order, as the entry-by-entry loop adds them: the same floats, the same bits. `refuse` is
    /// asked once a block rather than once a job, which decides the same (`node_sums`).
    #[inline(always)]
    fn still_sums<T, R>(
        &self,
        entries: Entries<'_>,
        now: f64,
        load0: f64,
        term: &T,
        refuse: &R,
    ) -> Option<(f64, f64)>
    where
        T: Fn(&EntryShare) -> f64,
        R: Fn(f64) -> bool,
    {
        const BLOCK: usize = 4;
        let (mut load, mut other) = (load0, 0.0);
        let blocks = self.still.as_slice().chunks_exact(BLOCK);
        let rest = blocks.len() * BLOCK;
        for (b, q) in blocks.enumerate() {
            let mut s = [0.0f64; BLOCK];
            let mut quick = true;
            for l in 0..BLOCK {
                let left = q[l].deadline_abs - now;
                s[l] = q[l].remaining / left;
                quick &= (q[l].remaining > 0.0) & (left > 0.0) & (s[l] <= self.cap_floor);
            }
            if quick {
                for l in 0..BLOCK {
                    // `remaining > 0` here, so it is its own `max(0.0)`, as `still_share` gives.
                    let e = EntryShare {
                        share: s[l],
                        remaining: q[l].remaining,
                        deadline_abs: q[l].deadline_abs,
                    };
                    load += e.share;
                    other += term(&e);
                }
            } else {
                for k in b * BLOCK..(b + 1) * BLOCK {
                    let e = self.still_share(entries, k, now);
                    load += e.share;
                    other += term(&e);
                }
            }
            if refuse(load) {
                return None;
            }
        }
        for k in rest..self.still.as_slice().len() {
            let e = self.still_share(entries, k, now);
            load += e.share;
            other += term(&e);
            if refuse(load) {
                return None;
            }
        }
        // A node with no jobs has asked nothing yet.
        (!refuse(load)).then_some((load, other))
    }

    /// `still_sums` compiled for AVX2: the same operations on each job in the same order (Rust
    /// never fuses a multiply and an add unless told), so the same bits.
    ///
    /// # Safety
    /// Only on a processor with AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn still_sums_avx2<T, R>(
        &self,
        entries: Entries<'_>,
        now: f64,
        load0: f64,
        term: &T,
        refuse: &R,
    ) -> Option<(f64, f64)>
    where
        T: Fn(&EntryShare) -> f64,
        R: Fn(f64) -> bool,
    {
        self.still_sums(entries, now, load0, term, refuse)
    }

    /// The node's jobs' shares at `now`, in entry order.
    #[inline]
    fn shares_at<'a>(&'a self, entries: Entries<'a>, now: f64) -> Shares<'a> {
        Shares { node: self, entries, k: 0, now, still: self.moving == 0 && now.is_finite() }
    }

    /// The node's `k`th entry in full.
    fn entry(&self, entries: Entries<'_>, k: usize) -> NodeEntry {
        let slot = self.slots[k];
        let (p, t) = (entries.progress(slot), entries.terms(slot));
        NodeEntry {
            job: t.job,
            procs: t.procs,
            estimate: p.estimate,
            deadline_abs: p.deadline_abs,
            admitted_share: t.admitted_share,
            cpu_done: p.cpu_done,
            as_of: p.as_of,
            rate: p.rate,
            cap: t.cap,
        }
    }

    pub fn job_count(&self) -> usize {
        self.slots.len()
    }

    pub fn is_idle(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether the node is up, takes new jobs, and has the memory and disk a job asks for, next
    /// to what is already committed.
    pub fn has_resources(&self, mem_mb: u64, disk_mb: u64) -> bool {
        self.is_open()
            && self.slots.len() < self.max_jobs
            && self.spec.mem_mb.saturating_sub(self.mem_used) >= mem_mb
            && self.spec.disk_mb.saturating_sub(self.disk_used) >= disk_mb
    }

    /// Up, taking new jobs, and with CPUs: what `has_resources` asks before the node's room.
    #[inline]
    fn is_open(&self) -> bool {
        self.up && self.accepting && self.spec.cpus > 0.0
    }
}

/// A job committed to one or more nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Commitment {
    pub job: u64,
    pub estimate: f64,
    pub deadline_abs: f64,
    /// When the commitment was made (the job started or was admitted).
    pub start: f64,
    /// The share the job was admitted with; what it holds once it overruns its estimate.
    pub admitted_share: f64,
    /// CPU-seconds done as of `as_of` (the slowest node's, for a parallel job).
    pub cpu_done: f64,
    pub as_of: f64,
    /// Assumed progress rate since `as_of` (CPU-seconds per second). The simulator knows it; the
    /// server reports 0 between measurements, which over-states the requirement (safe side).
    pub rate: f64,
    pub nodes: Vec<NodeIdx>,
    pub mem_mb: u64,
    pub disk_mb: u64,
    /// CPUs the job's task may use at once on each node.
    pub cpus_per_task: u32,
    /// The most the job can get on its most limited node: `min(cpus_per_task, node cpus)` over
    /// its nodes (a parallel job advances at the pace of its slowest part, so more would idle).
    pub cap: f64,
    /// Where this job's entry sits in each node's `entries` (parallel to `nodes`), so progress
    /// updates need no search.
    entry_pos: Vec<usize>,
    /// Its contribution to its nodes' load lower bound, as last added (`load_line`).
    line: JobLine,
    /// How many progress updates in a row have only advanced the record along its own rate
    /// since `line` was computed (`load_line::MAX_STALE_STEPS`: why the line may stay).
    stale_steps: u8,
}

impl Commitment {
    pub fn cpu_at(&self, now: f64) -> f64 {
        cpu_at(self.cpu_done, self.rate, self.as_of, now)
    }

    pub fn remaining_estimate(&self, now: f64) -> f64 {
        (self.estimate - self.cpu_at(now)).max(0.0)
    }

    /// Algorithm 2 at `now`, capped at `cap`.
    pub fn required_share(&self, now: f64, cap: f64) -> f64 {
        required_share(self.estimate, self.cpu_at(now), self.deadline_abs, now, self.admitted_share, cap)
    }

    /// When a space-shared node expects this job to end: its start plus its estimate, or now if
    /// it has overrun.
    pub fn expected_end(&self, now: f64) -> f64 {
        (self.start + self.estimate).max(now)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error("job {0} is already committed")]
    Duplicate(u64),
    #[error("node {0} does not exist")]
    NoSuchNode(NodeIdx),
    #[error("job {0} is not committed")]
    NoSuchJob(u64),
    #[error("job {0}: a commitment needs at least one node")]
    NoNodes(u64),
}

/// Where a job's commitment is kept in a `Cluster` (`Cluster::slot_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSlot(usize);

/// Nodes and their commitments.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: Vec<Node>,
    slots: Vec<Option<Commitment>>,
    /// Each slot's entry (parallel to `slots`): what admission and job control read of a job,
    /// side by side for every job in the cluster (`Entries`).
    progress: Vec<EntryProgress>,
    terms: Vec<EntryTerms>,
    free_slots: Vec<usize>,
    index: HashMap<u64, usize>,
    /// See `Node::max_jobs`: given to every node, present and future.
    max_jobs_per_node: Option<usize>,
    /// How many nodes are down, drained or of no CPU (`Node::is_open` false): see
    /// `every_node_open`.
    closed: usize,
    /// Each node's `NodeHot` (its lower bound on its load among them), side by side so that
    /// admission reads a few bytes per node before it reads the node.
    hot: HotNodes,
    /// Bit `i % 64` of word `i / 64` is set when node `i` has no jobs: a pass can take the
    /// busy nodes and the idle ones apart, each in index order, without reading either.
    idle_bits: Vec<u64>,
    /// The distinct (capacity, base price) pairs among the nodes, to the bit, with how many
    /// nodes have each.
    kinds: Vec<((u64, u64), usize)>,
    /// The latest instant at which any job's line was added, made again or kept through a
    /// progress update (`commit`, `set_progress`). Each node's line is a lower bound from the
    /// latest update of its own jobs' lines on, so every node's is from this one on, and no
    /// bound is given at an earlier instant (`bound_clock`). A simulator's clock never goes
    /// back; +0 at first, which only turns the bounds off at negative instants.
    bounds_from: f64,
    /// The instant the jobs' polynomials count their time from (`load_line`): at or before
    /// `bounds_from`, so every bound is read at a `tau >= 0`; moved to the instant of an update
    /// more than `BASE_SPAN` after it (`rebase_bounds_if_due`). +0 at first.
    bound_base: f64,
}

impl Cluster {
    /// Limits every node (present and future) to `n` jobs at once (None: no limit).
    pub fn set_max_jobs_per_node(&mut self, n: Option<usize>) {
        self.max_jobs_per_node = n;
        for node in &mut self.nodes {
            node.max_jobs = n.unwrap_or(usize::MAX);
        }
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// `n` identical uniprocessor nodes, as in the papers' simulations.
    pub fn homogeneous(n: usize, price_base: f64) -> Self {
        let mut c = Cluster::new();
        for i in 0..n {
            c.add_node(NodeSpec::uniprocessor(format!("n{i}"), price_base));
        }
        c
    }

    pub fn add_node(&mut self, spec: NodeSpec) -> NodeIdx {
        self.nodes.push(Node {
            spec,
            up: true,
            accepting: true,
            slots: Vec::new(),
            deadlines: Vec::new(),
            max_jobs: self.max_jobs_per_node.unwrap_or(usize::MAX),
            cap_floor: f64::INFINITY,
            moving: 0,
            still: StillJobs::default(),
            mem_used: 0,
            disk_used: 0,
        });
        let i = self.nodes.len() - 1;
        if !self.nodes[i].is_open() {
            self.closed += 1;
        }
        self.hot.push(&self.nodes[i].spec);
        if i % 64 == 0 {
            self.idle_bits.push(0);
        }
        self.idle_bits[i / 64] |= 1u64 << (i % 64);
        self.count_kind(i, 1);
        i
    }

    /// Counts node `i`'s (capacity, base price) in `kinds` once more (`by` 1) or once less (-1).
    fn count_kind(&mut self, i: NodeIdx, by: isize) {
        let spec = &self.nodes[i].spec;
        let key = (spec.cpus.to_bits(), spec.price_base.to_bits());
        match self.kinds.iter().position(|(k, _)| *k == key) {
            Some(at) => {
                let n = self.kinds[at].1.saturating_add_signed(by);
                if n == 0 {
                    self.kinds.swap_remove(at);
                } else {
                    self.kinds[at].1 = n;
                }
            }
            None if by > 0 => self.kinds.push((key, by.unsigned_abs())),
            None => {}
        }
    }

    /// How many distinct (capacity, base price) pairs, to the bit, the nodes have.
    pub fn node_kinds(&self) -> usize {
        self.kinds.len()
    }

    /// The idle nodes as bits (`Cluster::idle_bits`): node `i` is idle when bit `i % 64` of
    /// word `i / 64` is set. Bits past the last node are 0.
    #[inline]
    pub fn idle_words(&self) -> &[u64] {
        &self.idle_bits
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, i: NodeIdx) -> &Node {
        &self.nodes[i]
    }

    pub fn nodes(&self) -> impl Iterator<Item = (NodeIdx, &Node)> {
        self.nodes.iter().enumerate()
    }

    pub fn set_up(&mut self, i: NodeIdx, up: bool) {
        self.change_open(i, |n| n.up = up);
    }

    /// Drains (`false`) or undrains a node: see `Node::accepting`.
    pub fn set_accepting(&mut self, i: NodeIdx, accepting: bool) {
        self.change_open(i, |n| n.accepting = accepting);
    }

    /// Changes node `i` by `f`, keeping the count of closed nodes.
    fn change_open(&mut self, i: NodeIdx, f: impl FnOnce(&mut Node)) {
        if let Some(n) = self.nodes.get_mut(i) {
            let was = n.is_open();
            f(n);
            match (was, n.is_open()) {
                (true, false) => self.closed += 1,
                (false, true) => self.closed -= 1,
                _ => {}
            }
        }
    }

    /// Whether every node has room for a job that asks no memory and no disk
    /// (`Node::has_resources(0, 0)`): no node is down, drained or of no CPU, and no node has a
    /// limit on its jobs. Then a pass over the nodes for such a job need not ask each one (the
    /// asking was 1.8% of the instructions of a simulation of the SDSC trace under `libra+$`).
    #[inline]
    pub fn every_node_open(&self) -> bool {
        self.closed == 0 && self.max_jobs_per_node.is_none()
    }

    /// Whether every node has room for a job asking `mem_mb` and `disk_mb`, known without
    /// asking any (`false` when each must be asked: `Node::has_resources`).
    #[inline]
    pub fn every_node_has_room(&self, mem_mb: u64, disk_mb: u64) -> bool {
        mem_mb == 0 && disk_mb == 0 && self.every_node_open()
    }

    pub fn set_price_base(&mut self, i: NodeIdx, price: f64) {
        if i < self.nodes.len() {
            self.count_kind(i, -1);
            self.nodes[i].spec.price_base = price;
            self.hot.price_base[i] = price;
            self.count_kind(i, 1);
        }
    }

    pub fn job_count(&self) -> usize {
        self.index.len()
    }

    /// Records an accepted job of one CPU per task on its nodes. `now` is when the commitment
    /// starts.
    pub fn commit(
        &mut self,
        job: u64,
        estimate: f64,
        deadline_abs: f64,
        nodes: &[NodeIdx],
        now: f64,
    ) -> Result<(), ClusterError> {
        self.commit_with(job, estimate, deadline_abs, nodes, now, (0, 0, 1))
    }

    /// Records an accepted job with its specification (memory and disk are reserved too).
    pub fn commit_spec(
        &mut self,
        job: u64,
        spec: &JobSpec,
        submit: f64,
        nodes: &[NodeIdx],
        now: f64,
    ) -> Result<(), ClusterError> {
        self.commit_spec_reserving(job, spec, spec.estimate(), submit, nodes, now)
    }

    /// As `commit_spec`, with the work committed on the nodes given apart from the estimate (a
    /// policy that pads estimates, `Policy::reserved_estimate`, reserves more than was asked).
    pub fn commit_spec_reserving(
        &mut self,
        job: u64,
        spec: &JobSpec,
        reserved: f64,
        submit: f64,
        nodes: &[NodeIdx],
        now: f64,
    ) -> Result<(), ClusterError> {
        let r = &spec.resources;
        self.commit_with(
            job,
            reserved,
            submit + spec.deadline(),
            nodes,
            now,
            (r.mem_mb, r.disk_mb, r.cpus_per_task),
        )
    }

    /// `resources`: memory and disk reserved per node, and CPUs per task.
    fn commit_with(
        &mut self,
        job: u64,
        estimate: f64,
        deadline_abs: f64,
        nodes: &[NodeIdx],
        now: f64,
        resources: (u64, u64, u32),
    ) -> Result<(), ClusterError> {
        let (mem_mb, disk_mb, cpus_per_task) = resources;
        if self.index.contains_key(&job) {
            return Err(ClusterError::Duplicate(job));
        }
        if nodes.is_empty() {
            // A commitment on no node would constrain nothing and never finish.
            return Err(ClusterError::NoNodes(job));
        }
        if let Some(&bad) = nodes.iter().find(|&&n| n >= self.nodes.len()) {
            return Err(ClusterError::NoSuchNode(bad));
        }
        let cap =
            nodes.iter().map(|&n| self.nodes[n].spec.job_cap(cpus_per_task)).fold(f64::INFINITY, f64::min);
        let admitted_share = required_share(estimate, 0.0, deadline_abs, now, cap, cap);
        self.rebase_bounds_if_due(now);
        let line = job_line(estimate, deadline_abs, admitted_share, cap, 0.0, now, 0.0, self.bound_base);
        let c = Commitment {
            job,
            estimate,
            deadline_abs,
            start: now,
            admitted_share,
            cpu_done: 0.0,
            as_of: now,
            rate: 0.0,
            nodes: nodes.to_vec(),
            mem_mb,
            disk_mb,
            cpus_per_task,
            cap,
            entry_pos: nodes.iter().map(|&n| self.nodes[n].slots.len()).collect(),
            line,
            stale_steps: 0,
        };
        let progress = EntryProgress { estimate, deadline_abs, cpu_done: 0.0, as_of: now, rate: 0.0 };
        let terms =
            EntryTerms { job, procs: u32::try_from(nodes.len()).unwrap_or(u32::MAX), admitted_share, cap };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(c);
                self.progress[s] = progress;
                self.terms[s] = terms;
                s
            }
            None => {
                self.slots.push(Some(c));
                self.progress.push(progress);
                self.terms.push(terms);
                self.slots.len() - 1
            }
        };
        for &n in nodes {
            let node = &mut self.nodes[n];
            node.push_entry(slot, &progress, cap);
            node.mem_used = node.mem_used.saturating_add(mem_mb);
            node.disk_used = node.disk_used.saturating_add(disk_mb);
            let hot = &mut self.hot;
            hot.lines.add(n, line);
            hot.jobs[n] = u32::try_from(node.slots.len()).unwrap_or(u32::MAX);
            hot.first_deadline[n] = hot.first_deadline[n].min(f32_at_most(deadline_abs));
            self.idle_bits[n / 64] &= !(1u64 << (n % 64));
        }
        self.bounds_from = self.bounds_from.max(now);
        self.index.insert(job, slot);
        Ok(())
    }

    /// Sets a job's progress: `cpu_done` CPU-seconds as of `now`, progressing at `rate` from now on.
    pub fn set_progress(&mut self, job: u64, cpu_done: f64, rate: f64, now: f64) -> Result<(), ClusterError> {
        let slot = *self.index.get(&job).ok_or(ClusterError::NoSuchJob(job))?;
        self.set_progress_at(slot, cpu_done, rate, now);
        Ok(())
    }

    /// Where job `job`'s commitment is kept, for `set_progress_in`.
    pub fn slot_of(&self, job: u64) -> Option<JobSlot> {
        self.index.get(&job).map(|&slot| JobSlot(slot))
    }

    /// `set_progress` for a caller that keeps the job's `slot_of`: the same update, without
    /// looking the job up by id (a cache miss or two per update, most of what a simulator's
    /// progress update of an unchanged rate costs). A slot that no longer holds `job` (released
    /// since) is looked up by id as `set_progress` does.
    pub fn set_progress_in(
        &mut self,
        slot: JobSlot,
        job: u64,
        cpu_done: f64,
        rate: f64,
        now: f64,
    ) -> Result<(), ClusterError> {
        if self.slots.get(slot.0).and_then(Option::as_ref).is_some_and(|c| c.job == job) {
            self.set_progress_at(slot.0, cpu_done, rate, now);
            Ok(())
        } else {
            self.set_progress(job, cpu_done, rate, now)
        }
    }

    fn set_progress_at(&mut self, slot: usize, cpu_done: f64, rate: f64, now: f64) {
        self.rebase_bounds_if_due(now);
        let base = self.bound_base;
        if let Some(c) = self.slots[slot].as_mut() {
            // The record only moved along its own rate (the simulator's update of a job whose
            // rate did not change, most of its updates): its line may stay as it is for a few
            // such steps (`load_line::MAX_STALE_STEPS`), and its nodes' lines are not touched.
            let advanced = rate.to_bits() == c.rate.to_bits()
                && now >= c.as_of
                && cpu_done.to_bits() == c.cpu_at(now).to_bits();
            c.cpu_done = cpu_done;
            c.rate = rate;
            c.as_of = now;
            let old = c.line;
            let keep_line = advanced && c.stale_steps < MAX_STALE_STEPS;
            // The line kept or made again holds from now on: so do the bounds of its nodes.
            self.bounds_from = self.bounds_from.max(now);
            if keep_line {
                c.stale_steps += 1;
            } else {
                c.stale_steps = 0;
                c.line =
                    job_line(c.estimate, c.deadline_abs, c.admitted_share, c.cap, cpu_done, now, rate, base);
            }
            let p = &mut self.progress[slot];
            let was = is_still(p);
            p.cpu_done = cpu_done;
            p.rate = rate;
            p.as_of = now;
            let p = *p;
            // A moving job that stays moving (every update of the simulator's) changes nothing
            // a node keeps: its nodes are not touched, bar their load lines.
            let nodes_keep_it = was || is_still(&p);
            let entries = Entries { progress: &self.progress, terms: &self.terms };
            if !nodes_keep_it && keep_line {
                return;
            }
            for (&n, &pos) in c.nodes.iter().zip(&c.entry_pos) {
                if nodes_keep_it {
                    self.nodes[n].entry_progress_changed(entries, pos, was, &p);
                }
                if !keep_line {
                    self.hot.lines.replace(n, old, c.line);
                }
            }
        }
    }

    /// Before a job's polynomial is made at `now`: when `now` is more than `BASE_SPAN` past the
    /// base, the base moves to `now` and every job's polynomial is made again from its record,
    /// each node's sum with them. A few times a simulated day, O(entries) each; a server's
    /// first update moves the base from +0 to the clock it runs on.
    #[inline(always)]
    fn rebase_bounds_if_due(&mut self, now: f64) {
        if now.is_finite() && now - self.bound_base > BASE_SPAN {
            self.rebase_bounds(now);
        }
    }

    /// `rebase_bounds_if_due`'s move of the base to `now`, out of line: the check is made at
    /// every update, the move a few times a simulated day.
    #[cold]
    #[inline(never)]
    fn rebase_bounds(&mut self, now: f64) {
        self.bound_base = now;
        self.bounds_from = self.bounds_from.max(now);
        self.hot.lines.clear_all();
        for c in self.slots.iter_mut().flatten() {
            // Made as if the record had been advanced to now along its own rate (an update
            // more than `BASE_SPAN` old could not be counted from the base exactly): that is
            // one kept step (`MAX_STALE_STEPS`), so the line may be kept through one fewer.
            let (cpu, t0, steps) =
                if c.as_of < now { (c.cpu_at(now), now, 1) } else { (c.cpu_done, c.as_of, 0) };
            c.line = job_line(c.estimate, c.deadline_abs, c.admitted_share, c.cap, cpu, t0, c.rate, now);
            c.stale_steps = steps;
            for &n in &c.nodes {
                self.hot.lines.add(n, c.line);
            }
        }
    }

    /// A measurement from a node agent: CPU-seconds done so far; no rate is assumed.
    pub fn report_progress(&mut self, job: u64, cpu_done: f64, now: f64) -> Result<(), ClusterError> {
        self.set_progress(job, cpu_done, 0.0, now)
    }

    /// Removes a job's commitment (finished, cancelled, lost) and returns it.
    pub fn release(&mut self, job: u64) -> Option<Commitment> {
        let slot = self.index.remove(&job)?;
        let c = self.slots[slot].take()?;
        let entries = Entries { progress: &self.progress, terms: &self.terms };
        for (&n, &pos) in c.nodes.iter().zip(&c.entry_pos) {
            let node = &mut self.nodes[n];
            if pos >= node.slots.len() {
                continue;
            }
            node.remove_entry(entries, pos);
            node.mem_used = node.mem_used.saturating_sub(c.mem_mb);
            node.disk_used = node.disk_used.saturating_sub(c.disk_mb);
            let hot = &mut self.hot;
            hot.jobs[n] = u32::try_from(node.slots.len()).unwrap_or(u32::MAX);
            if node.slots.is_empty() {
                hot.lines.clear(n);
                hot.first_deadline[n] = f32::INFINITY;
                self.idle_bits[n / 64] |= 1u64 << (n % 64);
            } else {
                hot.lines.remove(n, c.line);
                // Only the job that held the earliest deadline moves it.
                if f32_at_most(c.deadline_abs) <= hot.first_deadline[n] {
                    hot.first_deadline[n] = node.deadlines.iter().copied().fold(f32::INFINITY, f32::min);
                }
            }
            // The entry that moved into `pos` belongs to another job: tell it where it is now.
            if let Some(&moved) = node.slots.get(pos) {
                if let Some(m) = self.slots[moved].as_mut() {
                    if let Some(k) = m.nodes.iter().position(|&x| x == n) {
                        m.entry_pos[k] = pos;
                    }
                }
            }
        }
        self.free_slots.push(slot);
        Some(c)
    }

    pub fn commitment(&self, job: u64) -> Option<&Commitment> {
        self.index.get(&job).and_then(|&s| self.slots[s].as_ref())
    }

    /// The jobs committed to node `i`.
    pub fn node_jobs(&self, i: NodeIdx) -> impl Iterator<Item = &Commitment> {
        self.nodes[i].slots.iter().filter_map(move |&s| self.slots[s].as_ref())
    }

    /// The entries of the jobs on node `i`, in the node's order.
    pub fn node_entries(&self, i: NodeIdx) -> impl ExactSizeIterator<Item = NodeEntry> + '_ {
        let (node, entries) = (&self.nodes[i], self.entries());
        (0..node.slots.len()).map(move |k| node.entry(entries, k))
    }

    /// Each job on node `i` and its share at `now` (`NodeEntry::share`, bit for bit), in the
    /// order of `node_entries`: what job control under Algorithm 2 sets.
    pub fn node_job_shares(&self, i: NodeIdx, now: f64) -> impl ExactSizeIterator<Item = (u64, f64)> + '_ {
        let (node, entries) = (&self.nodes[i], self.entries());
        (0..node.slots.len()).map(move |k| (entries.terms(node.slots[k]).job, node.share(entries, k, now)))
    }

    /// The share of the job in `slot` at `now` (Algorithm 2 capped at the job's cap:
    /// `NodeEntry::share`, bit for bit, which is the same on every node the job spans), for a
    /// caller that keeps the job's `slot_of`; `None` when the slot no longer holds `job`. Job
    /// control asks it once per job rather than once per node (`node_job_shares`).
    pub fn share_in(&self, slot: JobSlot, job: u64, now: f64) -> Option<f64> {
        let live = self.slots.get(slot.0).and_then(Option::as_ref).is_some_and(|c| c.job == job);
        if !live {
            return None;
        }
        let (p, t) = (&self.progress[slot.0], &self.terms[slot.0]);
        Some(required_share(p.estimate, p.cpu_at(now), p.deadline_abs, now, t.admitted_share, t.cap))
    }

    /// Each job's share on node `i` at `now` (`NodeEntry::share`, bit for bit), its work left
    /// and its deadline, in the order of `node_entries`. It reads 16 bytes a job while no job
    /// on the node has a rate assumed (the server's nodes), 40 otherwise, and the rest of an
    /// entry only when the share needs it. Admission sums these through `node_sums`, which
    /// reads a node of still jobs in blocks.
    #[inline]
    pub fn node_shares(&self, i: NodeIdx, now: f64) -> Shares<'_> {
        self.nodes[i].shares_at(self.entries(), now)
    }

    #[inline(always)]
    fn entries(&self) -> Entries<'_> {
        Entries { progress: &self.progress, terms: &self.terms }
    }

    /// A hint that node `i`'s entries are about to be read. Admission reads every node's
    /// entries, each in its own allocation: on a large cluster that is one cache miss per node,
    /// taken one after the other, and most of admission's time. Asking for a node a few ahead
    /// overlaps those misses. Changes no value; a no-op off x86-64 or past the last node.
    #[inline]
    pub fn prefetch_entries(&self, i: NodeIdx) {
        #[cfg(target_arch = "x86_64")]
        if let Some(n) = self.nodes.get(i) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = n.slots.as_ptr().cast::<i8>();
            // SAFETY: a prefetch is only a hint: it never faults and reads nothing into the
            // program, whatever the address (here the start of a live or dangling-empty Vec).
            // The two lines hold the first entries, enough for most nodes.
            unsafe {
                _mm_prefetch(p, _MM_HINT_T0);
                _mm_prefetch(p.wrapping_add(64), _MM_HINT_T0);
            }
        }
    }

    /// A hint that node `i` itself (its struct) is about to be read, for a pass that visits
    /// nodes far apart. Changes no value; a no-op off x86-64 or past the last node.
    #[inline]
    pub fn prefetch_node(&self, i: NodeIdx) {
        #[cfg(target_arch = "x86_64")]
        if let Some(n) = self.nodes.get(i) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = std::ptr::from_ref(n).cast::<i8>();
            // SAFETY: a hint only (see `prefetch_entries`). The struct is four lines (`Node`):
            // the first two hold what the simulator's passes read, the third the start of the
            // still jobs the server's read.
            unsafe {
                _mm_prefetch(p, _MM_HINT_T0);
                _mm_prefetch(p.wrapping_add(64), _MM_HINT_T0);
                _mm_prefetch(p.wrapping_add(128), _MM_HINT_T0);
            }
        }
    }

    /// All commitments.
    pub fn commitments(&self) -> impl Iterator<Item = &Commitment> {
        self.slots.iter().filter_map(|s| s.as_ref())
    }

    /// At most `node_load(i, now)` as admission sums it (entry order, floats), read from a few
    /// bytes per node without reading the node's jobs (`load_line`: why it holds); 0 when it
    /// cannot say (a query before one of the node's updates). A node whose bound plus a job's
    /// share is above its capacity refuses the job, as the full sum would.
    #[inline]
    pub fn load_lower_bound(&self, i: NodeIdx, now: f64) -> f64 {
        self.hot.get(i).load_lower_bound(self.bound_clock(now))
    }

    /// Where to read `NodeHot::load_lower_bound` for a query at `now`: the time from the base,
    /// `now - bound_base`, or NaN (no bound: 0) when a line was added, made again or kept at an
    /// update after `now` (`bounds_from`). A pass over the nodes takes it once.
    #[inline]
    pub fn bound_clock(&self, now: f64) -> f64 {
        // `now - bound_base` is exact (Sterbenz) while `now` is within twice the base, or the
        // base is 0: past that (a clock that ran for ages with no update) nothing is said.
        let base = self.bound_base;
        if now >= self.bounds_from && (base == 0.0 || now <= 2.0 * base) {
            now - base
        } else {
            f64::NAN
        }
    }

    /// Node `i`'s `NodeHot`.
    #[inline]
    pub fn node_hot(&self, i: NodeIdx) -> NodeHot {
        self.hot.get(i)
    }

    /// The `NodeHot`s of the nodes of idle word `w` (`idle_words`: nodes `64 * w` on, at most
    /// 64), for a pass that screens a word's nodes at once.
    #[inline]
    pub fn hot_word(&self, w: usize) -> HotWord<'_> {
        let n = self.hot.lines.len();
        let lo = (w * 64).min(n);
        self.hot.word(lo, n.min(lo + 64))
    }

    /// Two sums over node `i`'s jobs at `now`, in entry order, as a loop over `node_shares`
    /// adds them: their shares, from `load0`, and `term` of each job's `EntryShare`, from +0.
    /// `None` when `refuse` holds of the load (checked as the partial sums grow and at the end).
    ///
    /// `refuse` must hold of every float at least one it holds of (such as `load + x > limit`:
    /// adding and comparing round monotonically). Every share is finite and at least +0
    /// (`node_load_plus_within`), so the partial loads never fall, and `refuse` holding of any
    /// of them means it holds of the whole: `None` exactly when `refuse(load)` of the full
    /// sum, however often it is asked on the way. So the answer is a full loop's, bit for bit,
    /// whether or not the jobs are read in blocks (`Node::still_sums`, the server's nodes).
    #[inline]
    pub fn node_sums<T, R>(&self, i: NodeIdx, now: f64, load0: f64, term: T, refuse: R) -> Option<(f64, f64)>
    where
        T: Fn(&EntryShare) -> f64,
        R: Fn(f64) -> bool,
    {
        let node = &self.nodes[i];
        if node.moving == 0 && now.is_finite() {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the processor has AVX2.
                return unsafe { node.still_sums_avx2(self.entries(), now, load0, &term, &refuse) };
            }
            return node.still_sums(self.entries(), now, load0, &term, &refuse);
        }
        let (mut load, mut other) = (load0, 0.0);
        for e in node.shares_at(self.entries(), now) {
            load += e.share;
            other += term(&e);
            if refuse(load) {
                return None;
            }
        }
        (!refuse(load)).then_some((load, other))
    }

    /// What the totals of node `i`'s jobs prove (`still`), when every job on it is still and
    /// every one has work left on the totals' grid; `None` otherwise.
    #[inline]
    pub fn still_bounds(&self, i: NodeIdx) -> Option<StillBounds> {
        let node = &self.nodes[i];
        if node.moving == 0 {
            node.still.bounds()
        } else {
            None
        }
    }

    /// At most the `cap` of every job on node `i` (+inf when it has none): a share at or below
    /// it is Algorithm 2's quotient unclamped.
    #[inline]
    pub fn node_cap_floor(&self, i: NodeIdx) -> f64 {
        self.nodes[i].cap_floor
    }

    /// `node_sums` by each way this processor can take: as dispatched, and on a node whose jobs
    /// are all still (at a finite `now`) by the portable blocks too, so that a test on a
    /// processor with AVX2 checks both.
    #[cfg(test)]
    pub(crate) fn node_sums_each_way<T, R>(
        &self,
        i: NodeIdx,
        now: f64,
        load0: f64,
        term: T,
        refuse: R,
    ) -> Vec<Option<(f64, f64)>>
    where
        T: Fn(&EntryShare) -> f64,
        R: Fn(f64) -> bool,
    {
        let node = &self.nodes[i];
        let mut ways = vec![self.node_sums(i, now, load0, &term, &refuse)];
        if node.moving == 0 && now.is_finite() {
            ways.push(node.still_sums(self.entries(), now, load0, &term, &refuse));
        }
        ways
    }

    /// The sum of the shares node `i` owes its jobs from now on (Algorithm 2 for each).
    pub fn node_load(&self, i: NodeIdx, now: f64) -> f64 {
        self.node_shares(i, now).map(|e| e.share).sum()
    }

    /// `node_load(i, now) + extra` when that is at most `limit`; `None` when it is above. Stops
    /// reading the node's jobs as soon as the partial load proves the answer: every share is
    /// finite and at least +0 (Algorithm 2 clamps it to `[0, cap]`, and every input is finite),
    /// and adding a value >= +0 under round-to-nearest never lowers a float sum, so once the
    /// partial sum plus `extra` is above `limit` the full sum plus `extra` is too. The sum runs
    /// in `node_load`'s order from `Sum`'s start (-0.0), so an accepted value is bit for bit
    /// `node_load(i, now) + extra`.
    pub fn node_load_plus_within(&self, i: NodeIdx, now: f64, extra: f64, limit: f64) -> Option<f64> {
        self.node_load_plus_below(i, now, extra, limit, f64::INFINITY)
    }

    /// `node_load_plus_within`, also `None` as soon as the partial load plus `extra` reaches
    /// `bar` (the full one would reach it too, by the same argument): for a caller that only
    /// wants nodes loaded less than `bar`. Below `bar`, the value is `node_load(i, now) + extra`.
    pub fn node_load_plus_below(
        &self,
        i: NodeIdx,
        now: f64,
        extra: f64,
        limit: f64,
        bar: f64,
    ) -> Option<f64> {
        let refuse = |load: f64| {
            let t = load + extra;
            t > limit || t >= bar
        };
        let (load, _) = self.node_sums(i, now, -0.0, |_| 0.0, refuse)?;
        Some(load + extra)
    }

    /// The jobs of node `i` as job control sees them at `now`, in the order of `node_entries`.
    pub fn controlled_jobs(&self, i: NodeIdx, now: f64) -> Vec<ControlledJob> {
        self.node_entries(i).map(|e| e.controlled(now)).collect()
    }

    pub fn required_share(&self, job: u64, now: f64) -> Option<f64> {
        let c = self.commitment(job)?;
        Some(c.required_share(now, c.cap))
    }

    /// Up, accepting nodes with nothing committed (space-shared allocation), in index order.
    /// Taken from the idle bits, so only the idle nodes' structs are read: the space-shared
    /// policies ask at every event, and a walk over every `Node` (three cache lines each) missed
    /// the cache once 10,000 of them no longer fitted, which doubled `edf-bf`'s time there.
    pub fn idle_nodes(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.idle_bits
            .iter()
            .enumerate()
            .flat_map(|(w, &word)| {
                std::iter::successors((word != 0).then_some(word), |b| Some(b & (b - 1)).filter(|&b| b != 0))
                    .map(move |b| w * 64 + b.trailing_zeros() as usize)
            })
            .filter(|&i| {
                let n = &self.nodes[i];
                n.up && n.accepting
            })
    }

    pub fn up_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.up).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a pass reads of every node it visits lies in the two lines it asks for ahead
    /// (`Node`, `Cluster::prefetch_node`), and each node starts a line.
    #[test]
    fn a_node_keeps_what_a_pass_reads_in_its_first_two_lines() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<Node>(), 64);
        let spec = offset_of!(Node, spec);
        let read = [
            ("slots", offset_of!(Node, slots), size_of::<Vec<usize>>()),
            ("moving", offset_of!(Node, moving), 8),
            ("cap_floor", offset_of!(Node, cap_floor), 8),
            ("spec.cpus", spec + offset_of!(NodeSpec, cpus), 8),
            ("spec.price_base", spec + offset_of!(NodeSpec, price_base), 8),
            ("spec.mem_mb", spec + offset_of!(NodeSpec, mem_mb), 8),
            ("spec.disk_mb", spec + offset_of!(NodeSpec, disk_mb), 8),
            ("mem_used", offset_of!(Node, mem_used), 8),
            ("disk_used", offset_of!(Node, disk_used), 8),
            ("up", offset_of!(Node, up), 1),
            ("accepting", offset_of!(Node, accepting), 1),
        ];
        for (field, at, len) in read {
            assert!(at + len <= 128, "{field} at bytes {at}..{}", at + len);
        }
    }

    #[test]
    fn f32_at_most_is_the_greatest_f32_not_above() {
        for x in
            [0.0, -0.0, 1.0, 0.1, 1.7e9 + 0.3, -2.5e7 - 0.1, 1e300, -1e300, f64::INFINITY, f64::NEG_INFINITY]
        {
            let f = f32_at_most(x);
            assert!(f64::from(f) <= x, "{x}: {f}");
            // The next f32 up is above x (or there is none).
            let up = f.next_up();
            assert!(
                f == f32::MAX && x > f64::from(f32::MAX) || f64::from(up) > x || f.is_infinite(),
                "{x}: {f}"
            );
        }
        assert_eq!(f32_at_most(f64::NAN), f32::NEG_INFINITY);
        assert_eq!(f32_at_most(1e300), f32::MAX);
        assert_eq!(f32_at_most(16_777_217.0), 16_777_216.0);
        assert_eq!(f32_at_most(-16_777_217.0), -16_777_218.0);
        assert_eq!(f32_at_most(-1e-300), -f32::from_bits(1));
    }

    #[test]
    fn commit_progress_release() {
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(7, 100.0, 400.0, &[0, 1], 0.0).unwrap();
        assert!((c.node_load(0, 0.0) - 0.25).abs() < 1e-12);
        assert_eq!(c.commit(7, 1.0, 2.0, &[0], 0.0), Err(ClusterError::Duplicate(7)));
        assert_eq!(c.commit(8, 1.0, 2.0, &[5], 0.0), Err(ClusterError::NoSuchNode(5)));
        // Ran at full speed for 50 s: 50 left over 350 s.
        c.set_progress(7, 50.0, 1.0, 50.0).unwrap();
        assert!((c.node_load(1, 50.0) - 50.0 / 350.0).abs() < 1e-12);
        // The assumed rate carries on: at t=100, 0 left.
        assert!(c.required_share(7, 100.0).unwrap() - 0.25 < 1e-12); // overrun: falls back to admitted share
        let gone = c.release(7).unwrap();
        assert_eq!(gone.nodes, vec![0, 1]);
        assert_eq!(c.node_load(0, 0.0), 0.0);
        assert!(c.node(0).is_idle());
        assert_eq!(c.idle_nodes().count(), 2);
        // The slot is reused.
        c.commit(9, 10.0, 20.0, &[1], 0.0).unwrap();
        assert_eq!(c.job_count(), 1);
        assert_eq!(c.idle_nodes().collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn a_slot_released_and_taken_by_another_job_updates_no_one_else() {
        let mut c = Cluster::homogeneous(2, 1.0);
        c.commit(1, 100.0, 400.0, &[0], 0.0).unwrap();
        let slot = c.slot_of(1).unwrap();
        c.release(1).unwrap();
        c.commit(2, 100.0, 400.0, &[0], 0.0).unwrap();
        assert_eq!(c.slot_of(2), Some(slot), "the slot is reused");
        // The simulator's stale handle for job 1 must not move job 2.
        assert_eq!(c.set_progress_in(slot, 1, 50.0, 1.0, 10.0), Err(ClusterError::NoSuchJob(1)));
        let two = c.commitment(2).unwrap();
        assert_eq!((two.cpu_done, two.as_of, two.rate), (0.0, 0.0, 0.0));
        c.set_progress_in(slot, 2, 5.0, 0.5, 10.0).unwrap();
        let two = c.commitment(2).unwrap();
        assert_eq!((two.cpu_done, two.as_of, two.rate), (5.0, 10.0, 0.5));
    }

    proptest::proptest! {
        /// Progress set through a kept slot (`set_progress_in`, slots kept from commit on, some
        /// stale) leaves the cluster as the same updates by id do: the same commitments, the
        /// same loads and bounds, to the bit.
        #[test]
        fn set_progress_in_is_set_progress(ops in proptest::collection::vec((0u8..3, 0u64..8, proptest::collection::vec(0usize..3, 1..3), 0.0f64..50.0), 1..120)) {
            let (mut by_id, mut by_slot) = (Cluster::homogeneous(3, 1.0), Cluster::homogeneous(3, 1.0));
            let mut slots: HashMap<u64, JobSlot> = HashMap::new();
            for (op, job, mut nodes, x) in ops {
                nodes.sort();
                nodes.dedup();
                let now = x;
                match op {
                    0 => {
                        let a = by_id.commit(job, 10.0 + x, 100.0 + x, &nodes, 0.0);
                        let b = by_slot.commit(job, 10.0 + x, 100.0 + x, &nodes, 0.0);
                        proptest::prop_assert_eq!(&a, &b);
                        if a.is_ok() {
                            slots.insert(job, by_slot.slot_of(job).unwrap());
                        }
                    }
                    1 => {
                        let rate = if x < 25.0 { 0.5 } else { 0.0 };
                        let a = by_id.set_progress(job, x / 2.0, rate, now);
                        // A job never committed has no slot: try another job's, or the first.
                        let slot = slots.get(&job).or_else(|| slots.values().next()).copied();
                        if let Some(slot) = slot {
                            let b = by_slot.set_progress_in(slot, job, x / 2.0, rate, now);
                            proptest::prop_assert_eq!(a, b);
                        }
                    }
                    _ => {
                        proptest::prop_assert_eq!(by_id.release(job).is_some(), by_slot.release(job).is_some());
                    }
                }
                for n in 0..3 {
                    for t in [now, now + 1.0] {
                        proptest::prop_assert_eq!(by_id.node_load(n, t).to_bits(), by_slot.node_load(n, t).to_bits());
                        proptest::prop_assert_eq!(by_id.load_lower_bound(n, t).to_bits(), by_slot.load_lower_bound(n, t).to_bits());
                    }
                }
                for (a, b) in by_id.commitments().zip(by_slot.commitments()) {
                    proptest::prop_assert_eq!((a.job, a.cpu_done, a.as_of, a.rate), (b.job, b.cpu_done, b.as_of, b.rate));
                }
            }
        }
    }

    proptest::proptest! {
        /// `idle_nodes` (from the idle bits) is the up, accepting nodes with nothing committed,
        /// in index order, as read from every node, on clusters across word boundaries; and
        /// `every_node_open` is what every node's own state says, as nodes go down and up, are
        /// drained, are added (some with no CPU) and get a job limit.
        #[test]
        fn idle_nodes_are_the_up_accepting_empty_nodes(
            nodes in 1usize..200,
            ops in proptest::collection::vec((0u8..7, 0u64..40, 0usize..200, 1usize..6), 1..120),
        ) {
            let mut c = Cluster::homogeneous(nodes, 1.0);
            for (op, job, at, width) in ops {
                let at = at % c.node_count();
                match op {
                    0 | 1 => {
                        let span: Vec<NodeIdx> = (at..(at + width).min(c.node_count())).collect();
                        let _ = c.commit(job, 10.0, 100.0, &span, 0.0);
                    }
                    2 => { c.release(job); }
                    3 => c.set_up(at, !c.node(at).up),
                    4 => c.set_accepting(at, !c.node(at).accepting),
                    5 => c.set_max_jobs_per_node((job % 3 != 0).then_some(width)),
                    _ => { c.add_node(crate::history::node(c.node_count(), if job % 2 == 0 { 0.0 } else { 1.0 }, 1.0)); }
                }
                // Every node open, counted as it changes, is every node open read from each.
                let open = c.max_jobs_per_node.is_none()
                    && c.nodes.iter().all(|n| n.up && n.accepting && n.spec.cpus > 0.0);
                proptest::prop_assert_eq!(c.every_node_open(), open);
                if c.every_node_open() {
                    proptest::prop_assert!(c.nodes.iter().all(|n| n.has_resources(0, 0)));
                }
                let direct: Vec<NodeIdx> = c.nodes.iter().enumerate()
                    .filter(|(_, n)| n.up && n.accepting && n.slots.is_empty())
                    .map(|(i, _)| i)
                    .collect();
                proptest::prop_assert_eq!(c.idle_nodes().collect::<Vec<_>>(), direct);
            }
        }

        /// Whatever the order of commits, progress reports and releases, each node's compact
        /// entries agree with the jobs' commitments.
        #[test]
        fn entries_follow_commitments(ops in proptest::collection::vec((0u8..3, 0u64..12, proptest::collection::vec(0usize..4, 1..4), 0.0f64..50.0), 1..200)) {
            let mut c = Cluster::homogeneous(4, 1.0);
            for (op, job, mut nodes, x) in ops {
                nodes.sort();
                nodes.dedup();
                match op {
                    0 => { let _ = c.commit(job, 10.0 + x, 100.0 + x, &nodes, 0.0); }
                    1 if x > 45.0 => c.set_price_base(nodes[0], x),
                    1 => { let _ = c.set_progress(job, x, if x < 25.0 { 0.5 } else { 0.0 }, x); }
                    _ => { c.release(job); }
                }
                for n in 0..4 {
                    for e in c.node_entries(n) {
                        let j = c.commitment(e.job).expect("entry of a live job");
                        proptest::prop_assert!(j.nodes.contains(&n));
                        proptest::prop_assert_eq!(e.cpu_done, j.cpu_done);
                        proptest::prop_assert_eq!(e.as_of, j.as_of);
                    }
                }
                for (i, node) in c.nodes.iter().enumerate() {
                    proptest::prop_assert_eq!(c.idle_bits[i / 64] >> (i % 64) & 1 == 1, node.is_idle());
                }
                let mut kinds: Vec<(u64, u64)> = c.nodes.iter().map(|n| (n.spec.cpus.to_bits(), n.spec.price_base.to_bits())).collect();
                kinds.sort_unstable();
                kinds.dedup();
                proptest::prop_assert_eq!(c.node_kinds(), kinds.len());
                let h = &c.hot;
                for len in [h.cpus.len(), h.price_base.len(), h.jobs.len(), h.first_deadline.len()] {
                    proptest::prop_assert_eq!((h.lines.len(), len), (c.nodes.len(), c.nodes.len()));
                }
                for (i, node) in c.nodes.iter().enumerate() {
                    let hot = c.node_hot(i);
                    // A word's view of the arrays gives each node's own (floats to the bit:
                    // `Debug` prints the shortest decimal that reads back to the same float).
                    let in_word = c.hot_word(i / 64).iter().nth(i % 64).map(|w| format!("{w:?}"));
                    proptest::prop_assert_eq!(in_word, Some(format!("{hot:?}")));
                    // What admission reads first is the node's own.
                    proptest::prop_assert_eq!(hot.jobs as usize, node.slots.len());
                    proptest::prop_assert_eq!(hot.cpus().to_bits(), node.spec.cpus.to_bits());
                    proptest::prop_assert_eq!(hot.price_base().to_bits(), node.spec.price_base.to_bits());
                    // The earliest deadline, exactly as the node's jobs give it now.
                    let deadlines: Vec<f32> = node.slots.iter().map(|&s| f32_at_most(c.progress[s].deadline_abs)).collect();
                    proptest::prop_assert_eq!(&node.deadlines, &deadlines);
                    let first = deadlines.iter().copied().fold(f32::INFINITY, f32::min);
                    proptest::prop_assert_eq!(hot.first_deadline.to_bits(), first.to_bits());
                    for &s in &node.slots {
                        proptest::prop_assert!(hot.first_deadline() <= c.progress[s].deadline_abs);
                    }
                    // The kept count of moving jobs, and the still entries while there are none.
                    let progress: Vec<EntryProgress> = node.slots.iter().map(|&s| c.progress[s]).collect();
                    let moving = progress.iter().filter(|p| !is_still(p)).count();
                    proptest::prop_assert_eq!(node.moving, moving);
                    let still: Vec<Still> = if moving == 0 { progress.iter().map(Still::of).collect() } else { Vec::new() };
                    proptest::prop_assert_eq!(node.still.as_slice(), &still[..]);
                    // And their totals, as if counted afresh.
                    proptest::prop_assert!(node.still.totals_hold());
                }
                for j in c.commitments() {
                    for &n in &j.nodes {
                        proptest::prop_assert_eq!(c.node_entries(n).filter(|e| e.job == j.job).count(), 1);
                    }
                }
            }
        }
    }
}
