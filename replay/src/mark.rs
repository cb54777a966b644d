//! [`Mark`]: a moment of a replay, exact to the instruction. See
//! position.rs for the coarse (event, thread, steps) position.

use weft_record::Tid;

/// A moment of a replay, exact to the instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mark {
    /// Index of the next log event to be matched.
    pub event: u64,
    /// The thread this moment is in.
    pub tid: Tid,
}

impl std::fmt::Display for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {}, thread {}", self.event, self.tid)
    }
}
