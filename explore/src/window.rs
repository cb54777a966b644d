//! The exploration window of an inconsistent event (seed 000 §4.1).
//!
//! A replay that fails at event α_x of thread tt was valid up to α_p, tt's
//! previous event; what went wrong happened between α_p and α_x, and could
//! have been caused by any thread running in parallel with that stretch.
//! For each thread t the window is ⟨immPrec(α_p, t), immSucc(α_x, t)⟩: from
//! t's last event before α_p to its first event after α_x. A replay stops
//! at α_x, so the end bound holds by itself; the window is therefore the
//! start bound of each thread.

use std::collections::HashMap;
use weft_record::{Event, Tid};
use weft_replay::SyncRecord;

/// Each recorded thread's event indices, ascending.
#[derive(Debug, Default)]
pub struct ThreadEvents(HashMap<Tid, Vec<usize>>);

impl ThreadEvents {
    /// Indexes a log by thread.
    pub fn new(events: &[Event]) -> Self {
        let mut map: HashMap<Tid, Vec<usize>> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            map.entry(e.tid).or_default().push(i);
        }
        Self(map)
    }

    /// immPrec: the index of `tid`'s last event before index `before`.
    pub fn prec(&self, tid: Tid, before: usize) -> Option<usize> {
        let list = self.0.get(&tid)?;
        let k = list.partition_point(|&e| e < before);
        k.checked_sub(1).map(|k| list[k])
    }

    /// The index of `tid`'s first event at or after index `from`.
    pub fn first_from(&self, tid: Tid, from: usize) -> Option<usize> {
        let list = self.0.get(&tid)?;
        list.get(list.partition_point(|&e| e < from)).copied()
    }

    fn threads(&self) -> impl Iterator<Item = Tid> + '_ {
        self.0.keys().copied()
    }
}

/// The window of one inconsistent event: where each thread's part of it
/// starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Per thread, the index of the event after which its part starts
    /// (`None`: from the thread's beginning).
    starts: HashMap<Tid, Option<usize>>,
}

impl Window {
    /// The window of the event at index `alpha_x` in `events`, widened
    /// `widen` times, to explore the preceding windows when the current
    /// one holds no solution (seed 000 §4.3, last paragraph). Widened w
    /// times, α_p is 2^w events back in α_x's thread rather than one: the
    /// decisive operation may lie hundreds of events back (sort's first
    /// lock), and doubling reaches it in a few widenings; each widening
    /// still adds only the operations the previous one did not hold.
    pub fn of(events: &[Event], index: &ThreadEvents, alpha_x: usize, widen: usize) -> Self {
        let mut alpha_p = Some(alpha_x);
        if let Some(tt) = events.get(alpha_x).map(|e| e.tid) {
            let back = 1usize.checked_shl(widen as u32).unwrap_or(usize::MAX);
            for _ in 0..back {
                alpha_p = alpha_p.and_then(|p| index.prec(tt, p));
                if alpha_p.is_none() {
                    break;
                }
            }
        }
        let starts = index.threads().map(|t| (t, alpha_p.and_then(|p| index.prec(t, p)))).collect();
        Self { starts }
    }

    /// Whether a synchronization operation lies in the window: its thread
    /// had passed the start of its part (a thread the log never names is
    /// taken whole).
    pub fn contains(&self, sync: &SyncRecord) -> bool {
        match self.starts.get(&sync.tid) {
            Some(Some(start)) => sync.last_event.is_some_and(|last| last >= *start),
            Some(None) | None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_record::EventKind;

    /// Seed 000 Fig. 9: syscalls #1..#8 over threads T1, T2, T3, with the
    /// inconsistent event #7 in T3 (0-based here: index = number - 1).
    fn fig9() -> Vec<Event> {
        let owners = [2, 1, 1, 3, 1, 1, 3, 2];
        owners.iter().map(|&tid| Event { tid, label: 0, kind: EventKind::Rdtsc { tsc: 0, aux: None, len: 2 } }).collect()
    }

    fn sync(tid: Tid, last_event: Option<usize>) -> SyncRecord {
        SyncRecord { n: 1, tid, label: 0, next_event: 0, last_event, then: tid, switchable: vec![] }
    }

    #[test]
    fn figure_9_window() {
        let events = fig9();
        let index = ThreadEvents::new(&events);
        assert_eq!(index.prec(3, 6), Some(3), "immPrec(α7, T3) = α4");
        let w = Window::of(&events, &index, 6, 0);
        // T2's part starts at α1 (index 0), so its operations after α1 are
        // in, even though α2 of T1 comes later in the log.
        assert!(w.contains(&sync(2, Some(0))));
        // T1's part starts at its last event before α4, which is α3.
        assert!(!w.contains(&sync(1, Some(1))));
        assert!(w.contains(&sync(1, Some(2))));
        assert!(w.contains(&sync(1, Some(4))));
        // T3 from α4's predecessor in T3: none, so from its beginning.
        assert!(w.contains(&sync(3, None)));
        assert_eq!(index.first_from(1, 5), Some(5));
        // Widened once, α_p is T3's event before α4: none, so every thread
        // is taken from its beginning.
        let wider = Window::of(&events, &index, 6, 1);
        assert!(wider.contains(&sync(1, Some(1))) && wider.contains(&sync(1, None)));
        assert_ne!(w, wider);
        assert_eq!(wider, Window::of(&events, &index, 6, 2), "nothing left to widen");
        assert_eq!(index.first_from(2, 1), Some(7));
    }
}
