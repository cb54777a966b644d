//! The debugger's timeline (rr's ReplayTimeline): checkpoints taken at
//! segment starts as the user moves forwards, spaced by replay time, so
//! that going backwards restores the latest one before the target and
//! replays forwards from it.
//!
//! Memory bound: at most `max` checkpoints; past it, every other one of
//! the older half is dropped (older history gets sparser, as in rr), and
//! none is taken while the machine has less than [`MIN_AVAILABLE`] bytes
//! available. Each holds, copy-on-write, the pages the replay wrote since
//! the one before.

use crate::checkpoint::{available_memory, Template};
use crate::mark::Mark;
use crate::session::Snapshot;

/// No checkpoint is taken while the machine has less memory available
/// than this, in bytes (/proc/meminfo MemAvailable).
pub const MIN_AVAILABLE: u64 = 1 << 30;

/// A checkpoint: where it is, the frozen process and the replayer's state.
pub(crate) struct Saved {
    /// Where it is.
    pub mark: Mark,
    /// The frozen process.
    pub template: Template,
    /// The replayer's state there.
    pub snapshot: Snapshot,
}

/// The checkpoints, in replay order, and the marks they were taken at.
pub(crate) struct Timeline {
    saved: Vec<Saved>,
    max: usize,
    /// Every segment start a checkpoint was taken at, ascending, kept when
    /// the checkpoint itself is thinned out: known segment starts to go
    /// to an event from.
    marks: Vec<Mark>,
}

impl Timeline {
    /// An empty timeline keeping at most `max` checkpoints.
    pub fn new(max: usize) -> Self {
        Self { saved: Vec::new(), max, marks: Vec::new() }
    }

    /// Whether a checkpoint may be taken at the start of segment `point`:
    /// none is there yet, and memory allows.
    pub fn wants(&self, point: u64) -> bool {
        self.max > 0 && !self.saved.iter().any(|s| s.mark.point == point) && available_memory().is_none_or(|m| m >= MIN_AVAILABLE)
    }

    /// Keeps `saved`, thinning the older half when over the bound.
    pub fn add(&mut self, saved: Saved) {
        let k = self.saved.partition_point(|s| s.mark.point < saved.mark.point);
        let b = self.marks.partition_point(|m| m.point < saved.mark.point);
        if self.marks.get(b).is_none_or(|m| m.point != saved.mark.point) {
            self.marks.insert(b, saved.mark.clone());
        }
        self.saved.insert(k, saved);
        if self.saved.len() > self.max.max(2) {
            let half = self.saved.len() / 2;
            let mut k = 0;
            self.saved.retain(|_| {
                k += 1;
                k > half || k % 2 == 1
            });
        }
    }

    /// The index of the latest checkpoint surely before `target` (or at
    /// it, when `at`).
    pub fn latest_before(&self, target: &Mark, at: bool) -> Option<usize> {
        self.saved.iter().rposition(|s| s.mark.surely_before(target) || (at && s.mark == *target))
    }

    /// Checkpoint `k`.
    pub fn get(&self, k: usize) -> &Saved {
        &self.saved[k]
    }

    /// The segment starts checkpoints were taken at so far, ascending.
    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    /// How many checkpoints are kept.
    pub fn len(&self) -> usize {
        self.saved.len()
    }

    /// Memory the checkpoint processes hold privately, in bytes.
    pub fn memory(&self) -> u64 {
        self.saved.iter().map(|s| s.template.private_bytes()).sum()
    }
}
