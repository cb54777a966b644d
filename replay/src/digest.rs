//! The replay digest (`weft replay -a --digest`): a running xxh3 over every
//! scheduling decision and every thread's registers at every scheduling
//! point. Two replays of one trace must produce the same digest; any
//! difference is nondeterminism in the replayer.

use weft_record::tracee::{regs_words, Regs};
use weft_record::Tid;
use xxhash_rust::xxh3::Xxh3;

/// The running digest.
#[derive(Default)]
pub struct Digest {
    total: Xxh3,
    points: u64,
}

impl Digest {
    /// Adds a scheduling point: the next event index, the thread chosen,
    /// and each thread's recorded tid and registers. Returns this point's
    /// own hash.
    pub fn add<'a>(&mut self, event: u64, chosen: Tid, threads: impl Iterator<Item = (Tid, &'a Regs)>) -> u64 {
        let mut point = Xxh3::new();
        point.update(&event.to_le_bytes());
        point.update(&chosen.to_le_bytes());
        for (tid, regs) in threads {
            point.update(&tid.to_le_bytes());
            for w in regs_words(regs) {
                point.update(&w.to_le_bytes());
            }
        }
        let h = point.digest();
        self.total.update(&h.to_le_bytes());
        self.points += 1;
        h
    }

    /// The digest of all points so far.
    pub fn value(&self) -> u64 {
        self.total.digest()
    }

    /// Number of scheduling points digested.
    pub fn points(&self) -> u64 {
        self.points
    }
}
