//! Coarse-grained exploration of one replay failure (seed 000 §4.2,
//! Algorithm 1 with m = 1): try a single preemption at each
//! synchronization operation of the window, switching to each other thread
//! in the order of its first event in the rest of the log; keep the first
//! that lets the replay get past the inconsistent event.
//!
//! Order of the operations: the paper goes backward from the failure. In
//! real programs the decisive operation is as often at the window's start
//! (which thread took which piece of work) as at its end, so weft takes
//! them from both ends alternately: the latest, the earliest, the second
//! latest, and so on. Every operation is still tried.

use crate::window::{ThreadEvents, Window};
use weft_record::{Event, Tid};
use weft_replay::{Preemption, SyncRecord};

/// The preemptions Algorithm 1 tries for a failure at `alpha_x`, in the
/// order it tries them, within the window widened `widen` times and not
/// already in the window widened `widen - 1` times; `None` when the
/// narrower window already held every operation of the sync trace.
/// `sync_trace` is the failed replay's (oldest first); `after` is the
/// synchronization count of the schedule's last admitted preemption,
/// before which the schedule is final.
pub fn candidates(
    events: &[Event],
    index: &ThreadEvents,
    alpha_x: usize,
    widen: usize,
    sync_trace: &[SyncRecord],
    after: u64,
) -> Option<Vec<Preemption>> {
    let window = Window::of(events, index, alpha_x, widen);
    let tried = widen.checked_sub(1).map(|w| Window::of(events, index, alpha_x, w));
    if tried.as_ref() == Some(&window) {
        // Widening changed nothing (α_x past the log's end, a deadlock
        // once every event was matched, has no thread to widen along).
        return None;
    }
    let open = |s: &&SyncRecord| s.n > after && !tried.as_ref().is_some_and(|t| t.contains(s));
    if !sync_trace.iter().any(|s| open(&s)) {
        return None;
    }
    let new: Vec<&SyncRecord> = sync_trace.iter().filter(|s| open(s) && window.contains(s)).collect();
    let mut out = Vec::new();
    for sync in from_both_ends(&new) {
        for to in targets(index, sync) {
            out.push(Preemption { sync: sync.n, to });
        }
    }
    Some(out)
}

/// The second preemptions tried after a tentative first one (seed 000
/// §4.2, the recursive version of Algorithm 1 for m = 2): at each of the
/// operations `following` it, nearest first. The first preemption's grant
/// ends in these operations, and the thread it leaves off at is typically
/// the one that must go on (or wait) for the replay to get past.
pub fn after_first(index: &ThreadEvents, following: &[SyncRecord]) -> Vec<Preemption> {
    following.iter().flat_map(|sync| targets(index, sync).into_iter().map(|to| Preemption { sync: sync.n, to })).collect()
}

/// `items` (oldest first) as latest, earliest, second latest, second
/// earliest, ...
fn from_both_ends<T: Copy>(items: &[T]) -> Vec<T> {
    let (mut lo, mut hi) = (0, items.len());
    let mut out = Vec::with_capacity(items.len());
    while lo < hi {
        hi -= 1;
        out.push(items[hi]);
        if lo < hi {
            out.push(items[lo]);
            lo += 1;
        }
    }
    out
}

/// Lines 3-5 of Algorithm 1: the threads to switch to at `sync`, sorted by
/// their first event in the log from α on (a thread that appears later is
/// less likely to be part of the interleaving). The thread the default
/// replay ran there is left out: trying it changes nothing.
pub(crate) fn targets(index: &ThreadEvents, sync: &SyncRecord) -> Vec<Tid> {
    let mut threads: Vec<Tid> =
        sync.switchable.iter().map(|w| w.tid).chain([sync.tid]).filter(|&t| t != sync.then).collect();
    threads.sort_by_key(|&t| (index.first_from(t, sync.next_event).unwrap_or(usize::MAX), t));
    threads
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_record::EventKind;

    /// The owners of the Fig. 9 log's events.
    const OWNERS: [Tid; 8] = [2, 1, 1, 3, 1, 1, 3, 2];

    fn log(owners: &[Tid]) -> Vec<Event> {
        owners.iter().map(|&tid| Event { tid, label: 0, kind: EventKind::Rdtsc { tsc: 0, aux: None, len: 2 } }).collect()
    }

    fn sync(n: u64, tid: Tid, next_event: usize, last_event: Option<usize>, switchable: &[Tid]) -> SyncRecord {
        // The default goes on with the log's next thread when it can.
        let owner = OWNERS[next_event];
        let then = if switchable.contains(&owner) { owner } else { tid };
        let switchable = switchable.iter().map(|&tid| weft_replay::Switchable { tid, label: 0 }).collect();
        SyncRecord { n, tid, label: 0, next_event, last_event, then, switchable }
    }

    /// The example after Algorithm 1 (Fig. 9): at a synchronization of T3,
    /// the default goes on with the log's next thread; the others are tried
    /// by their first event in the rest of the log (#6 of T1, #8 of T2).
    #[test]
    fn backward_order_and_thread_order() {
        let events = log(&OWNERS);
        let index = ThreadEvents::new(&events);
        let trace = [
            sync(1, 2, 1, Some(0), &[1, 3]),
            sync(2, 3, 4, Some(3), &[1, 2]),
            sync(3, 3, 5, Some(3), &[1, 2]),
        ];
        let c = candidates(&events, &index, 6, 0, &trace, 0).unwrap();
        let got: Vec<(u64, Tid)> = c.iter().map(|p| (p.sync, p.to)).collect();
        // Latest first. At n=3 the next event (#6) is T1's, so the default
        // goes to T1; the others are T3 itself (#7) then T2 (#8).
        assert_eq!(&got[..2], &[(3, 3), (3, 2)]);
        // Then the earliest: n=1 is T2's, in its window from α1 on; the
        // next event #2 is T1's.
        assert_eq!(&got[2..4], &[(1, 3), (1, 2)]);
        // At n=2 the next event (#5) is T1's again.
        assert_eq!(&got[4..], &[(2, 3), (2, 2)]);
        // Operations at or before the last admitted preemption are final.
        assert_eq!(candidates(&events, &index, 6, 0, &trace, 2).unwrap().len(), 2);
        assert_eq!(from_both_ends(&[1, 2, 3, 4, 5]), [5, 1, 4, 2, 3]);
        // The first window already holds every operation: nothing to widen.
        assert_eq!(candidates(&events, &index, 6, 1, &trace, 0), None);
        // A failure past the log's end (a deadlock once every event was
        // matched) cannot widen: its window is the same at every width,
        // and the search of it ends instead of widening forever.
        let early = [sync(1, 2, 1, Some(0), &[1, 3])];
        assert!(candidates(&events, &index, 8, 0, &early, 0).is_some());
        assert_eq!(candidates(&events, &index, 8, 1, &early, 0), None);
    }

    /// Second preemptions go at the operations after the first, nearest
    /// first, each to every thread the default did not run there.
    #[test]
    fn pairs_try_the_nearest_operations_first() {
        let events = log(&OWNERS);
        let index = ThreadEvents::new(&events);
        let following = [sync(5, 3, 4, Some(3), &[1, 2]), sync(6, 1, 5, Some(4), &[3])];
        let got: Vec<(u64, Tid)> = after_first(&index, &following).iter().map(|p| (p.sync, p.to)).collect();
        // At n=5 the default goes to T1 (event #5 is T1's): T3, then T2.
        // At n=6 T1 goes on itself (#6 is T1's): only T3 is new.
        assert_eq!(got, [(5, 3), (5, 2), (6, 3)]);
    }
}
