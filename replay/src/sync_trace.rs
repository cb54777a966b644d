//! The synchronization trace: one record per synchronization operation a
//! replay performed, the input of coarse-grained exploration (seed 000 §4.2,
//! Algorithm 1: `SyncTrace T ::= <n, l, a>*`). A replay keeps only the
//! most recent records, because exploration only looks at the window just
//! before a failure (§4.1).

use std::collections::VecDeque;
use weft_record::Tid;

/// One synchronization operation of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRecord {
    /// Its synchronization count n (from 1 over the whole replay): the `n`
    /// of a [`crate::Preemption`] placed here.
    pub n: u64,
    /// The recorded tid of the thread that performed it.
    pub tid: Tid,
    /// Its program point ℓ: the call site of the pthread function (its
    /// return address) or, for a futex call, the pc after the `syscall`.
    pub label: u64,
    /// α: the index of the first log event not yet matched when it happened.
    pub next_event: usize,
    /// The index of the last event this thread had matched, if any: which
    /// part of the thread's execution it belongs to, for the window.
    pub last_event: Option<usize>,
    /// The thread the default replay ran next (the performer itself when
    /// it went on).
    pub then: Tid,
    /// The other threads that could have been switched to here: the
    /// candidate targets of a preemption.
    pub switchable: Vec<Switchable>,
}

/// A thread a preemption could switch to, and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switchable {
    /// Its recorded tid.
    pub tid: Tid,
    /// The program point it is about to execute, as [`SyncRecord::label`]
    /// (its pc when it is not at a synchronization operation). Seed 000 §5
    /// names a thread by this label, so that a cached fix applies to
    /// whichever worker thread is there next time.
    pub label: u64,
}

/// The last `capacity` synchronization records of a replay, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncTrace {
    capacity: usize,
    records: VecDeque<SyncRecord>,
}

impl SyncTrace {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity, records: VecDeque::with_capacity(capacity.min(4096)) }
    }

    /// Whether records are kept at all (building one costs a scan of the
    /// threads, so a replay that keeps none skips it).
    pub(crate) fn wanted(&self) -> bool {
        self.capacity > 0
    }

    /// How many records it keeps.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn push(&mut self, record: SyncRecord) {
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    pub(crate) fn into_vec(self) -> Vec<SyncRecord> {
        self.records.into()
    }
}
