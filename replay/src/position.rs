//! Time in a replay. A position is where a replay is: the index of the next
//! log event to match, the thread running, and how many scheduling points
//! that thread has passed since the last matched event. Without performance
//! counters this is weft's finest deterministic clock; the debugger, the UI
//! and exploration all name moments with it.

use weft_record::Tid;

/// A moment of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Index of the next log event to be matched (events before it are done).
    pub event: u64,
    /// Recorded tid of the thread at this moment.
    pub tid: Tid,
    /// Scheduling points that thread has passed since event `event - 1`.
    pub steps: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {}, thread {}, step {}", self.event, self.tid, self.steps)
    }
}
