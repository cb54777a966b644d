//! Why a replay is not valid (seed 000 §2.2: the two symptoms, *unmatch*
//! and *deadlock*), plus the ways a replay can fail to finish at all.

use crate::position::Position;

/// A replay failure, with enough context to act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// An unmatched event: the replay reached an event that is not the next
    /// one in the log (Definition 1 violated).
    Unmatched {
        /// Where.
        at: Position,
        /// The program point of what the replay did instead.
        label: u64,
        /// The log's next event.
        expected: String,
        /// What the replay did instead.
        observed: String,
    },
    /// No thread can run, but the log has events left.
    Deadlock {
        /// Where.
        at: Position,
        /// Where the thread of the log's next event is stuck (0 when that
        /// thread does not exist yet).
        label: u64,
        /// The log's next event.
        expected: String,
        /// Every thread and its state.
        threads: Vec<String>,
    },
    /// The replay matched no logged event for the livelock timeout, or
    /// saw a thread spin with no other thread able to take over: a
    /// thread spins waiting for another one, which one core cannot run
    /// (with no syscall in its loop), or which cannot run before it (its
    /// next event comes later in the log).
    Livelock {
        /// Where.
        at: Position,
        /// The pc of the thread that ran when the replay stopped.
        pc: u64,
        /// Seconds without progress (the timeout, or less when the spin
        /// was seen first), rounded up.
        seconds: u64,
        /// Every thread and what it was doing: where it spins, or what it
        /// waits for.
        threads: Vec<String>,
    },
    /// The program ended differently from the recording.
    WrongEnd {
        /// Index of the log event the replay had reached.
        event: u64,
        /// How the recording ended.
        expected: String,
        /// How the replay ended.
        observed: String,
    },
    /// The trace is damaged or incomplete: the replay matched every event
    /// that could be read, then stopped.
    IncompleteTrace {
        /// Events matched.
        matched: u64,
        /// What is wrong with the trace.
        why: String,
    },
}

impl Failure {
    /// The index of the inconsistent event: the first log event the replay
    /// could not match (seed 000 §4's α_x). `None` for a damaged trace,
    /// which no schedule can fix.
    pub fn event(&self) -> Option<usize> {
        match self {
            Failure::Unmatched { at, .. } | Failure::Deadlock { at, .. } | Failure::Livelock { at, .. } => {
                Some(at.event as usize)
            }
            Failure::WrongEnd { event, .. } => Some(*event as usize),
            Failure::IncompleteTrace { .. } => None,
        }
    }

    /// The log events whose output a replay that failed so has shown:
    /// those before its inconsistent event (all, `usize::MAX`, for a
    /// damaged trace, which no later replay gets further in). A replay
    /// after it shows output from there on, not twice.
    pub fn echoed_before(&self) -> usize {
        self.event().unwrap_or(usize::MAX)
    }

    /// The program point where the replay went wrong: what an unmatched
    /// event observed, where the log's next thread is stuck in a deadlock,
    /// or where a livelocked thread spins. Seed 000 §5 keys its failure
    /// caches on it. `None` for the other failures.
    pub fn label(&self) -> Option<u64> {
        match self {
            Failure::Unmatched { label, .. } | Failure::Deadlock { label, .. } => Some(*label),
            Failure::Livelock { pc, .. } => Some(*pc),
            Failure::WrongEnd { .. } | Failure::IncompleteTrace { .. } => None,
        }
    }

    /// A short name for the kind of failure ("unmatched event", "deadlock", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Unmatched { .. } => "unmatched event",
            Failure::Deadlock { .. } => "deadlock",
            Failure::Livelock { .. } => "livelock",
            Failure::WrongEnd { .. } => "wrong end",
            Failure::IncompleteTrace { .. } => "incomplete trace",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unmatched { at, expected, observed, .. } => {
                write!(f, "unmatched event at {at}\n  expected: {expected}\n  observed: {observed}")
            }
            Failure::Deadlock { at, expected, threads, .. } => {
                write!(f, "deadlock at {at}: no thread can run\n  expected next: {expected}")?;
                for t in threads {
                    write!(f, "\n  {t}")?;
                }
                Ok(())
            }
            Failure::Livelock { at, pc, seconds, threads } => {
                write!(
                    f,
                    "livelock at {at}: no logged event matched in {seconds} s (pc {pc:#x}); a thread probably spins waiting for another one"
                )?;
                for t in threads {
                    write!(f, "\n  {t}")?;
                }
                Ok(())
            }
            Failure::WrongEnd { expected, observed, .. } => {
                write!(f, "the program ended differently\n  recorded: {expected}\n  replayed: {observed}")
            }
            Failure::IncompleteTrace { matched, why } => {
                write!(f, "the trace is incomplete: {matched} events matched, then: {why}")
            }
        }
    }
}
