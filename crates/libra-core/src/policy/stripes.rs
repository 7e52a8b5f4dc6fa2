//! One arrival's pass over a large cluster's nodes, read in stripes side by side on rayon's
//! threads (`libra+$`'s busy nodes). Each stripe keeps its own best `procs` (a `Chooser`): a
//! node one stripe leaves out has `procs` better ones in that stripe alone, so the union of
//! what the stripes keep holds the `procs` best of all, whichever stripe read which node. So
//! the decision is the one pass's.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// When and how a pass is split into stripes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    /// The least idle bitmap, in words of 64 nodes, that is split. Below it a stripe's work is
    /// too small for the hand-off between threads.
    from_words: usize,
    /// Words of the idle bitmap in one chunk (`Chunks`).
    chunk_words: usize,
    /// How many stripes; 0: as many as the pool has threads.
    stripes: usize,
    /// Chunks dealt to the stripes in turn (stripe `i` of `s` takes chunks `i`, `i + s`, ...)
    /// rather than taken as each stripe finishes: the same stripes whatever the threads do, so
    /// that a test knows every stripe reads nodes.
    dealt: bool,
}

impl Split {
    /// 2,048 nodes and up, in chunks of 512 nodes. On 10,000 nodes a stripe of a saturated
    /// arrival reads hundreds of busy nodes; on SDSC's 128 (two words) a whole arrival reads
    /// about 60, less than the hand-off costs. Chunks of 128 nodes were taken from a counter
    /// the two threads share 79 times an arrival on 10,000 nodes; since the load bound became
    /// a quadratic (the thirty-fifth pass) about one busy node in eight passes the screen,
    /// and chunks of 512 took 5% off 10^5 jobs (REPRODUCING.md).
    pub(crate) const DEFAULT: Split = Split { from_words: 32, chunk_words: 8, stripes: 0, dealt: false };

    /// Every cluster split, three stripes dealt one-word chunks in turn: so that tests on small
    /// clusters take the split path, with more stripes than this machine may have threads, and
    /// every stripe reads its share of the nodes however the threads are scheduled.
    #[cfg(test)]
    pub(crate) const EVERY_CLUSTER: Split = Split { from_words: 0, chunk_words: 1, stripes: 3, dealt: true };

    /// How many stripes for a cluster of `words` words of 64 nodes.
    pub(crate) fn stripes(self, words: usize) -> usize {
        if words < self.from_words {
            1
        } else if self.stripes == 0 {
            rayon::current_num_threads()
        } else {
            self.stripes
        }
    }

    /// The chunks of a pass over `words` words: all in one when it is not split.
    pub(crate) fn chunks(self, words: usize) -> Chunks {
        let stripes = self.stripes(words);
        let chunk_words = if stripes <= 1 { words } else { self.chunk_words };
        let dealt = (self.dealt && stripes > 1).then_some(stripes);
        Chunks { next: AtomicUsize::new(0), chunk_words: chunk_words.max(1), words, dealt }
    }
}

/// The idle bitmap's words in chunks, which the stripes of one arrival take in turn as each
/// finishes the last, so that a thread that starts late, or reads slower (the nodes it reads
/// were written by the other's job control), takes fewer. Which stripe reads a chunk changes
/// no decision. Each stripe is handed its chunks in index order (`Chunks::stripe`).
pub(crate) struct Chunks {
    next: AtomicUsize,
    chunk_words: usize,
    words: usize,
    /// `Split::dealt`: how many stripes the chunks are dealt to.
    dealt: Option<usize>,
}

impl Chunks {
    /// The chunks stripe `i` reads.
    pub(crate) fn stripe(&self, i: usize) -> StripeChunks<'_> {
        StripeChunks { chunks: self, i, dealt: 0 }
    }
}

/// The chunks of one stripe, in index order.
pub(crate) struct StripeChunks<'a> {
    chunks: &'a Chunks,
    /// The stripe's index, and how many chunks it has been dealt (`Split::dealt`).
    i: usize,
    dealt: usize,
}

impl Iterator for StripeChunks<'_> {
    type Item = Range<usize>;

    /// The words of the next chunk nobody has taken (or of this stripe's next dealt chunk).
    fn next(&mut self) -> Option<Range<usize>> {
        let c = self.chunks;
        let n = match c.dealt {
            Some(stripes) => {
                self.dealt += 1;
                (self.dealt - 1).checked_mul(stripes)?.checked_add(self.i)?
            }
            // Relaxed: the counter only hands out distinct chunks; the words are read-only here.
            None => c.next.fetch_add(1, Ordering::Relaxed),
        };
        let from = n.checked_mul(c.chunk_words)?;
        (from < c.words).then(|| from..(from + c.chunk_words).min(c.words))
    }
}

#[cfg(test)]
mod tests {
    use super::Split;

    /// Every word is handed out once, to whichever stripe asks first, each stripe's in index
    /// order; one chunk of all when the pass is not split; dealt chunks go to every stripe.
    #[test]
    fn chunks_cover_every_word_once_in_order() {
        for words in [0usize, 1, 2, 3, 5, 64, 157] {
            for split in [Split::DEFAULT, Split::EVERY_CLUSTER] {
                let stripes = split.stripes(words);
                let chunks = split.chunks(words);
                // The stripes ask in an uneven interleaving: stripe i asks i + 1 times a round.
                let mut mine: Vec<_> = (0..stripes).map(|i| chunks.stripe(i)).collect();
                let mut seen: Vec<Vec<usize>> = vec![Vec::new(); stripes];
                let mut taken = 0;
                loop {
                    let mut any = false;
                    for (i, it) in mine.iter_mut().enumerate() {
                        for _ in 0..=i {
                            if let Some(r) = it.next() {
                                seen[i].extend(r);
                                taken += 1;
                                any = true;
                            }
                        }
                    }
                    if !any {
                        break;
                    }
                }
                for s in &seen {
                    assert!(s.windows(2).all(|w| w[0] < w[1]), "{words} words, {split:?}: {s:?}");
                }
                let mut all: Vec<usize> = seen.concat();
                all.sort_unstable();
                assert_eq!(all, (0..words).collect::<Vec<_>>(), "{words} words, {split:?}");
                if stripes <= 1 {
                    assert!(taken <= 1, "{words} words in {taken} chunks, not split");
                } else if split.dealt && words >= stripes {
                    // Dealt: stripe i holds words i, i + s, ... (one-word chunks).
                    for (i, s) in seen.iter().enumerate() {
                        assert_eq!(s, &(i..words).step_by(stripes).collect::<Vec<_>>());
                    }
                }
            }
        }
    }
}
