//! Fine-grained exploration of one replay failure (seed 000 §4.3): when no
//! coarse-grained preemption gets past it, the window's memory accesses
//! are traced by page protection (§6, `weft_replay::AccessTracing`), its
//! races found (a pair of accesses to one variable from different
//! threads, at least one a write), and each reversed in turn, the races
//! nearest the failure first: the first access's thread is disabled right
//! before it and enabled right after the second access
//! (`weft_replay::Reversal`).

use crate::window::Window;
use weft_replay::{Access, Reversal, SyncRecord};

/// Accesses one tracing replay logs at most (each costs about ten ptrace
/// stops and remote syscalls).
pub const TRACE_BUDGET: usize = 20_000;
/// Races reversed per failure at most: the nearest to it.
const MAX_REVERSALS: usize = 64;

/// The synchronization count at which tracing starts for a failure whose
/// window is `window`: the window's first operation in `sync_trace`
/// after `after` (the schedule is final up to there), else the last
/// operation before the failure, else the start of the replay.
pub fn trace_from(window: &Window, sync_trace: &[SyncRecord], after: u64) -> u64 {
    let open = sync_trace.iter().filter(|s| s.n > after);
    let first = open.clone().filter(|s| window.contains(s)).map(|s| s.n).min();
    first.or_else(|| open.map(|s| s.n).max()).unwrap_or(after + 1)
}

/// The reversals to try for the races among `accesses` (in the order
/// they were made, traced from synchronization count `from`): for each
/// access a, and each other thread, that thread's first later access
/// that races with a; nearest the failure first (by the later access,
/// then the earlier one, latest first).
pub fn reversals(accesses: &[Access], from: u64) -> Vec<Reversal> {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (ia, a) in accesses.iter().enumerate() {
        let mut threads_seen = Vec::new();
        for (ib, b) in accesses.iter().enumerate().skip(ia + 1) {
            if threads_seen.contains(&b.tid) || !a.races_with(b) {
                continue;
            }
            threads_seen.push(b.tid);
            pairs.push((ia, ib));
        }
    }
    pairs.sort_by_key(|&(ia, ib)| std::cmp::Reverse((ib, ia)));
    let reverse = |(ia, ib): (usize, usize)| {
        let (a, b) = (&accesses[ia], &accesses[ib]);
        Reversal { from, page: a.page, held: a.tid, held_nth: a.nth, runner: b.tid, runner_nth: b.nth }
    };
    pairs.into_iter().take(MAX_REVERSALS).map(reverse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(tid: i32, addr: u64, nth: u64, write: bool) -> Access {
        Access { tid, page: addr & !4095, nth, addr, pc: 0, write, sync: 0, event: 0 }
    }

    /// Seed 000 Fig. 2's shape: thread 2 reads a flag thread 1 writes
    /// later; thread 1 then reads a variable. The read-write pair on the
    /// flag is a race, reversed by holding thread 2 before its read until
    /// thread 1's write; reads alone and other words are not races.
    #[test]
    fn races_are_reversed_nearest_first() {
        let x = 0x5000;
        let y = 0x5008;
        let trace = [
            access(2, x, 1, false), // T2 reads x
            access(2, y, 2, false), // T2 reads y
            access(1, x, 1, true),  // T1 writes x: races with T2's read
            access(1, y, 2, false), // T1 reads y: no write, no race
            access(2, x, 3, true),  // T2 writes x: races with T1's write
        ];
        let got = reversals(&trace, 7);
        let expect = |held, held_nth, runner, runner_nth| Reversal { from: 7, page: 0x5000, held, held_nth, runner, runner_nth };
        assert_eq!(got, [expect(1, 1, 2, 3), expect(2, 1, 1, 1)]);
        assert!(!trace[1].races_with(&trace[3]), "two reads");
        assert!(trace[0].races_with(&access(1, x + 4, 1, true)), "one word, another byte of it");
    }
}
