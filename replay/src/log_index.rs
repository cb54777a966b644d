//! What a replay derives from the log once per trace: each thread's
//! events, and the lock words of runtimes that lock without libc.
//!
//! A lock word is a futex word whose every logged wait expected the value
//! 2, the "locked, with waiters" state of the mutex in Drepper's "Futexes
//! Are Tricky" that Rust's std `Mutex` implements. Taking or releasing
//! such a lock uncontended is one atomic instruction no library can
//! interpose, so whether a thread found the word taken, and so whether it
//! made a futex call at all, depends on timing a one-core replay does not
//! reproduce. The futex calls on a lock word are therefore *soft* events:
//! the replay neither expects nor checks them (the calls themselves are
//! emulated, `futex.rs`). What orders the critical sections instead is a
//! write watchpoint on the word (`session/traps.rs`): each release is a
//! synchronization point where the log's next thread takes over (seed
//! 000 Fig. 8's preemption test after a release). The futex calls on every
//! other word (a condition variable's counter) stay events. The calls on
//! a word the log has no operation on are soft too: a lock that was never
//! contended in the recording, and only the replay's timing made so. So
//! are the wakes of a word the log never waits on: a `Mutex` whose
//! waiter won it by spinning (it marked the word contended and took it
//! without a wait) wakes nobody at its unlock, a call that timing alone
//! decides, and a wake with no waiter orders nothing.

use std::collections::{HashMap, HashSet};
use weft_record::event::{EventKind, Sync, SyncOp};
use weft_record::runtime;
use weft_record::{Event, Tid, Trace};

/// The value a waiter on a lock word expects: locked, with waiters.
const CONTENDED: i64 = 2;
/// Lock words watched at most: x86 has four debug registers, and the
/// other two stay for the debugger's watchpoints and the exact-signal
/// search.
pub(crate) const MAX_WATCHED: usize = 2;

/// The per-trace index of the log.
#[derive(Debug, Default)]
pub(crate) struct LogIndex {
    /// Each recorded thread's event indices, ascending, soft events left
    /// out.
    thread_events: HashMap<Tid, Vec<usize>>,
    /// Each recorded thread's soft events' indices, ascending.
    thread_soft_events: HashMap<Tid, Vec<usize>>,
    lock_words: HashSet<u64>,
    /// Flag words ([`flag_words`]).
    flag_words: HashSet<u64>,
    /// Futex words the log wakes and never waits on.
    wake_only: HashSet<u64>,
    /// The synchronization objects the log orders: every logged
    /// operation's.
    sync_vars: HashSet<u64>,
    /// The lock words with the most soft events, most first, at most
    /// [`MAX_WATCHED`].
    watched: Vec<u64>,
    /// The events that turned a process's in-process runtime off, with
    /// their threads, ascending ([`turns_runtime_off`]).
    runtime_off: Vec<(usize, Tid)>,
    /// The index of the log's last fork (a new process), if any.
    last_fork: Option<usize>,
}

impl LogIndex {
    /// Indexes `trace`'s events.
    pub(crate) fn new(trace: &Trace) -> Self {
        let lock_words = lock_words(&trace.events);
        let wake_only = wake_only_words(&trace.events);
        let mut index = Self { lock_words, flag_words: flag_words(&trace.events), wake_only, ..Self::default() };
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for (i, e) in trace.events.iter().enumerate() {
            match &e.kind {
                // Its variable is a syscall number, not an object's address.
                EventKind::Sync(Sync { op: SyncOp::SyscallWait, .. }) => {}
                EventKind::Sync(Sync { var, .. }) => {
                    index.sync_vars.insert(*var);
                }
                _ => {}
            }
            if turns_runtime_off(e) {
                index.runtime_off.push((i, e.tid));
            }
            if matches!(e.kind, EventKind::Spawn { flags, .. } if weft_record::event::is_new_process(flags)) {
                index.last_fork = Some(i);
            }
            match index.soft_word(e) {
                Some(word) => {
                    if index.lock_words.contains(&word) {
                        *counts.entry(word).or_default() += 1;
                    }
                    index.thread_soft_events.entry(e.tid).or_default().push(i);
                }
                None => index.thread_events.entry(e.tid).or_default().push(i),
            }
        }
        let mut by_count: Vec<(u64, usize)> = counts.into_iter().collect();
        by_count.sort_by_key(|&(word, n)| (std::cmp::Reverse(n), word));
        index.watched = by_count.into_iter().take(MAX_WATCHED).map(|(word, _)| word).collect();
        index
    }

    /// The events that turned a process's runtime off, with their
    /// threads, ascending.
    pub(crate) fn runtime_off(&self) -> &[(usize, Tid)] {
        &self.runtime_off
    }

    /// Whether the log forks a process at or after index `pos`: memory
    /// mapped shared before that may be shared with a child.
    pub(crate) fn forks_from(&self, pos: usize) -> bool {
        self.last_fork.is_some_and(|f| f >= pos)
    }

    /// Thread `rec`'s events that the replay matches, ascending.
    pub(crate) fn events_of(&self, rec: Tid) -> Option<&[usize]> {
        self.thread_events.get(&rec).map(Vec::as_slice)
    }

    /// Thread `rec`'s soft events ([`LogIndex::is_soft`]), ascending.
    pub(crate) fn soft_events_of(&self, rec: Tid) -> &[usize] {
        self.thread_soft_events.get(&rec).map_or(&[], Vec::as_slice)
    }

    /// Whether `e` is a soft event: a futex call on a lock word.
    pub(crate) fn is_soft(&self, e: &Event) -> bool {
        self.soft_word(e).is_some()
    }

    /// Whether the replay's synchronization marker `op` on `var` (the
    /// runtime's, weft_runtime.h) is a soft one, not to be matched: a
    /// futex call on a lock word, or on a word the log never saw (a lock
    /// that only the replay's timing made contended).
    pub(crate) fn is_soft_marker(&self, op: i64, var: u64) -> bool {
        SyncOp::from_code(op).is_some_and(is_futex_call) && self.is_soft_word(var)
    }

    /// Whether the futex calls on `addr` are soft: it is a lock word, a
    /// word the log only wakes, or a word the log has no operation on.
    pub(crate) fn is_soft_word(&self, addr: u64) -> bool {
        self.lock_words.contains(&addr) || self.wake_only.contains(&addr) || !self.sync_vars.contains(&addr)
    }

    /// Whether the log orders the synchronization object at `addr`: a
    /// logged operation's object, a lock word's included. (libc's and
    /// ld.so's internal locks are not.)
    pub(crate) fn is_ordered(&self, addr: u64) -> bool {
        self.sync_vars.contains(&addr)
    }

    /// Whether `addr` is a flag word: every logged wait on it expects one
    /// value, and not a lock word's ([`flag_words`]).
    pub(crate) fn is_flag_word(&self, addr: u64) -> bool {
        self.flag_words.contains(&addr)
    }

    /// Whether `addr` is a lock word.
    pub(crate) fn is_lock_word(&self, addr: u64) -> bool {
        self.lock_words.contains(&addr)
    }

    /// The lock words to watch, most contended first.
    pub(crate) fn watched(&self) -> &[u64] {
        &self.watched
    }

    fn soft_word(&self, e: &Event) -> Option<u64> {
        match &e.kind {
            EventKind::Sync(Sync { op, var, .. })
                if is_futex_call(*op) && (self.lock_words.contains(var) || self.wake_only.contains(var)) =>
            {
                Some(*var)
            }
            _ => None,
        }
    }
}

/// Whether `op` is one of the runtime's futex calls through syscall(3).
fn is_futex_call(op: SyncOp) -> bool {
    matches!(op, SyncOp::FutexWaitStart | SyncOp::FutexWait | SyncOp::FutexWake)
}

/// The futex words every logged wait on which expected [`CONTENDED`]
/// (a FutexWaitStart's result is the value it expects).
fn lock_words(events: &[Event]) -> HashSet<u64> {
    words_waited_for(events, |value| value == CONTENDED)
}

/// The futex words whose every logged wait expects one value, other than
/// a lock word's: a flag that one thread parks on until another sets and
/// wakes it (Rust's thread parker, -1 while parked), not a counter (a
/// condition variable's sequence, whose waits expect ever new values).
fn flag_words(events: &[Event]) -> HashSet<u64> {
    words_waited_for(events, |value| value != CONTENDED)
}

/// The futex words whose logged waits all expect the same value, one
/// that `accept` accepts.
fn words_waited_for(events: &[Event], accept: impl Fn(i64) -> bool) -> HashSet<u64> {
    let mut expected: HashMap<u64, Option<i64>> = HashMap::new();
    for e in events {
        if let EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result }) = &e.kind {
            let seen = expected.entry(*var).or_insert(Some(*result));
            if *seen != Some(*result) {
                *seen = None;
            }
        }
    }
    expected.into_iter().filter(|&(_, value)| value.is_some_and(&accept)).map(|(word, _)| word).collect()
}

/// The futex words the log wakes and never waits on.
fn wake_only_words(events: &[Event]) -> HashSet<u64> {
    let mut waited = HashSet::new();
    let mut woken = HashSet::new();
    for e in events {
        match &e.kind {
            EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. }) => woken.insert(*var),
            EventKind::Sync(Sync { op: SyncOp::FutexWaitStart | SyncOp::FutexWait, var, .. }) => waited.insert(*var),
            _ => false,
        };
    }
    woken.difference(&waited).copied().collect()
}

/// Whether event `e` turned its process's in-process runtime off at
/// record time (inprocess.rs): a call [`runtime::turns_off`] names, or
/// the clone of a thread without a TLS of its own, which would share its
/// creator's buffer slot.
fn turns_runtime_off(e: &Event) -> bool {
    match &e.kind {
        EventKind::Syscall(s) => runtime::turns_off(s.nr, &s.args),
        EventKind::Spawn { flags, .. } => runtime::spawn_turns_off(*flags),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(tid: Tid, op: SyncOp, var: u64, result: i64) -> Event {
        Event { tid, label: 0, kind: EventKind::Sync(Sync { op, var, result }) }
    }

    #[test]
    fn words_are_told_apart_by_their_waits() {
        let events = vec![
            sync(1, SyncOp::FutexWake, 0x10, 0),
            sync(2, SyncOp::FutexWaitStart, 0x10, 2),
            sync(2, SyncOp::FutexWaitStart, 0x20, 2),
            sync(1, SyncOp::FutexWaitStart, 0x20, 7),
            sync(1, SyncOp::FutexWake, 0x20, 0),
            sync(1, SyncOp::FutexWake, 0x30, 0),
        ];
        let words = lock_words(&events);
        assert!(words.contains(&0x10));
        assert!(!words.contains(&0x20), "a condition variable's counter that once was 2");
        assert_eq!(wake_only_words(&events), HashSet::from([0x30]), "woken, never waited on");
    }

    #[test]
    fn a_flag_word_is_always_waited_for_with_one_value() {
        let parked = u32::MAX as i64;
        let events = vec![
            sync(1, SyncOp::FutexWaitStart, 0x10, parked),
            sync(2, SyncOp::FutexWake, 0x10, 0),
            sync(1, SyncOp::FutexWaitStart, 0x10, parked),
            sync(1, SyncOp::FutexWaitStart, 0x20, 0),
            sync(1, SyncOp::FutexWaitStart, 0x20, 1),
            sync(2, SyncOp::FutexWaitStart, 0x30, 2),
        ];
        assert_eq!(flag_words(&events), HashSet::from([0x10]), "a parker; not a counter (0x20) nor a lock word (0x30)");
    }
}
