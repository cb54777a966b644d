//! The replay digest (`weft replay -a --digest`): a running xxh3 over every
//! scheduling decision and every thread's registers at every scheduling
//! point. Two replays of one trace must produce the same digest; any
//! difference is nondeterminism in the replayer.

use weft_record::tracee::{regs_words, Regs};
use weft_record::Tid;
use xxhash_rust::xxh3::Xxh3;

/// The running digest and its lines.
#[derive(Clone, Default)]
pub struct Digest {
    total: Xxh3,
    lines: Vec<String>,
}

impl Digest {
    /// Adds a scheduling point: the next event index, the thread chosen,
    /// and each thread's recorded tid and registers; and its line,
    /// `weft-digest <point> event <index> thread <tid> <hash>`.
    pub fn add<'a>(&mut self, event: u64, chosen: Tid, threads: impl Iterator<Item = (Tid, &'a Regs)>) {
        let h = hash_point(event, &chosen.to_le_bytes(), threads.map(|(tid, regs)| (tid, regs, &[][..])));
        self.total.update(&h.to_le_bytes());
        self.lines.push(format!("weft-digest {} event {event} thread {chosen} {h:016x}", self.lines.len() + 1));
    }

    /// The lines, then `weft: digest <hash of all points> (<n> scheduling points)`.
    pub fn into_lines(mut self) -> Vec<String> {
        let summary = format!("weft: digest {:016x} ({} scheduling points)", self.total.digest(), self.lines.len());
        self.lines.push(summary);
        self.lines
    }
}

/// The xxh3 of a point: the next event index, `extra` bytes, and each
/// thread's recorded tid, registers and `state` bytes.
pub(crate) fn hash_point<'a>(
    event: u64,
    extra: &[u8],
    threads: impl Iterator<Item = (Tid, &'a Regs, &'a [u8])>,
) -> u64 {
    let mut point = Xxh3::new();
    point.update(&event.to_le_bytes());
    point.update(extra);
    for (tid, regs, state) in threads {
        point.update(&tid.to_le_bytes());
        for w in regs_words(regs) {
            point.update(&w.to_le_bytes());
        }
        point.update(state);
    }
    point.digest()
}
