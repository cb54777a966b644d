//! Caching replay failures (seed 000 §5): the same failure tends to recur
//! (pbzip2's writer finds the next block not yet compressed, block after
//! block), so the preemption that got past one occurrence is tried first at
//! the next, before the window's other candidates.
//!
//! The paper keeps two caches, one per kind of failure; here they are one
//! map keyed by [`Key`]: an unmatched event by the labels of the expected
//! and the observed event (⟨α_c, α_x⟩), a deadlock by the label where the
//! thread of the log's next event is stuck. A [`Fix`] names its threads by
//! labels, never tids (⟨ℓ0, n, ℓ1⟩): preempt the thread about to execute
//! synchronization ℓ0, n operations before the failure, and switch to the
//! thread about to execute ℓ1; the next occurrence may involve other
//! worker threads at the same code.

use crate::coarse;
use crate::window::ThreadEvents;
use std::collections::HashMap;
use weft_record::{Event, Tid};
use weft_replay::{Failure, Preemption, SyncRecord};

/// Fixes kept per key, the most recently successful first.
const FIXES_PER_KEY: usize = 4;
/// Operations tried per fix: those labelled ℓ0 nearest to n.
const TRIES_PER_FIX: usize = 3;

/// What a failure looks like regardless of its threads and occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    kind: &'static str,
    /// The label of the log's event the replay could not match.
    expected: u64,
    /// [`Failure::label`]: where the replay went instead, or got stuck.
    observed: u64,
}

impl Key {
    /// The key of `failure` against the log `events`; `None` for failures
    /// without a program point (a wrong end, a damaged trace).
    pub fn of(failure: &Failure, events: &[Event]) -> Option<Key> {
        let expected = events.get(failure.event()?).map_or(0, |e| e.label);
        Some(Key { kind: failure.kind(), expected, observed: failure.label()? })
    }
}

/// One remembered fix, ⟨ℓ0, n, ℓ1⟩ of seed 000 §5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fix {
    /// The label of the synchronization operation preempted at.
    at: u64,
    /// How many operations of the failed replay came after it.
    back: usize,
    /// The label of the thread switched to.
    to: u64,
}

/// The failure cache of one search.
#[derive(Debug, Default)]
pub struct FailureCache {
    fixes: HashMap<Key, Vec<Fix>>,
}

impl FailureCache {
    /// Remembers that preemption `p` got past a failure keyed `key`;
    /// `sync_trace` is the failed replay's (oldest first, ending at the
    /// failure).
    pub fn learn(&mut self, key: Key, p: Preemption, sync_trace: &[SyncRecord]) {
        let Some(k) = sync_trace.iter().rposition(|s| s.n == p.sync) else { return };
        let Some(to) = label_of(&sync_trace[k], p.to) else { return };
        let fix = Fix { at: sync_trace[k].label, back: sync_trace.len() - 1 - k, to };
        tracing::debug!(?key, ?fix, "learnt");
        let list = self.fixes.entry(key).or_default();
        list.retain(|f| *f != fix);
        list.insert(0, fix);
        list.truncate(FIXES_PER_KEY);
    }

    /// The preemptions the cache suggests for a failure keyed `key`, best
    /// first: for each fix, the operations labelled ℓ0 after the final
    /// part of the schedule (`after`) and nearest to n back from the
    /// failure, at which a thread stands at ℓ1 that the default replay
    /// would not pick.
    pub fn suggest(
        &self,
        key: &Key,
        index: &ThreadEvents,
        sync_trace: &[SyncRecord],
        after: u64,
    ) -> Vec<Preemption> {
        let mut out: Vec<Preemption> = Vec::new();
        for fix in self.fixes.get(key).into_iter().flatten() {
            let mut near: Vec<(usize, Preemption)> = sync_trace
                .iter()
                .enumerate()
                .filter(|(_, s)| s.n > after && s.label == fix.at)
                .filter_map(|(k, s)| {
                    let to = coarse::targets(index, s).into_iter().find(|&t| label_of(s, t) == Some(fix.to))?;
                    Some(((sync_trace.len() - 1 - k).abs_diff(fix.back), Preemption { sync: s.n, to }))
                })
                .collect();
            near.sort_by_key(|&(d, p)| (d, p.sync));
            for (_, p) in near.into_iter().take(TRIES_PER_FIX) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// The label of thread `tid` at synchronization `s`: its own operation's
/// if it performed it, else where it stood.
fn label_of(s: &SyncRecord, tid: Tid) -> Option<u64> {
    if s.tid == tid {
        return Some(s.label);
    }
    s.switchable.iter().find(|w| w.tid == tid).map(|w| w.label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_record::EventKind;
    use weft_replay::Switchable;

    fn sync(n: u64, tid: Tid, label: u64, next_event: usize, switchable: &[(Tid, u64)]) -> SyncRecord {
        let switchable = switchable.iter().map(|&(tid, label)| Switchable { tid, label }).collect();
        SyncRecord { n, tid, label, next_event, last_event: None, then: tid, switchable }
    }

    /// A fix learnt with one pair of worker threads applies to another
    /// pair at the same code, at the same distance from the failure.
    #[test]
    fn fix_names_threads_by_label() {
        let events: Vec<Event> = [1, 2, 3, 4, 1]
            .iter()
            .map(|&tid| Event { tid, label: 0x40, kind: EventKind::Rdtsc { tsc: 0, aux: None, len: 2 } })
            .collect();
        let index = ThreadEvents::new(&events);
        let key = Key { kind: "unmatched event", expected: 0x10, observed: 0x20 };
        let first = [sync(7, 1, 0xa, 4, &[(2, 0xb)]), sync(8, 1, 0xc, 4, &[(2, 0xd)])];
        let mut cache = FailureCache::default();
        cache.learn(key, Preemption { sync: 7, to: 2 }, &first);
        // Next time threads 3 and 4 are at the same labels, one operation
        // further from the failure; another key suggests nothing.
        let next = [
            sync(40, 3, 0xa, 4, &[(4, 0xb)]),
            sync(41, 3, 0xa, 4, &[(4, 0xe)]),
            sync(42, 4, 0xc, 4, &[(3, 0xd)]),
            sync(43, 4, 0xc, 4, &[(3, 0xd)]),
        ];
        assert_eq!(cache.suggest(&key, &index, &next, 0), [Preemption { sync: 40, to: 4 }]);
        assert_eq!(cache.suggest(&key, &index, &next, 40), []);
        let other = Key { observed: 0x21, ..key };
        assert_eq!(cache.suggest(&other, &index, &next, 0), []);
    }
}
