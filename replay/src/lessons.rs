//! What replays of a trace learn that its log does not say, handed from
//! each replay to the next. A replay starts with what earlier replays of
//! the trace learned ([`crate::ReplayOptions::lessons`]) and reports what
//! it knows at its end ([`crate::Report::lessons`]); one that ran from the
//! program's start and failed after it learned something starts over with
//! it ([`crate::Replayer::replay`], [`crate::ReplaySession`]). Log indices
//! and addresses are the same in every replay of a trace (ASLR is off,
//! the log holds the mappings).

use crate::session::SpinWords;
use std::collections::BTreeSet;

/// The lessons of a trace's replays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lessons {
    /// Where threads spin on memory that another thread releases without
    /// a logged call (spin.rs).
    pub spin_words: SpinWords,
    /// Log indices of futex wakes that the thread the log gives them to
    /// must reach before any other thread of its process finishes ahead of
    /// it: a thread run to its return before such a wake (as the last of
    /// a scope's threads wakes the waiter, the others finished first)
    /// woke the waiter itself, in the logged waker's place (a producer's
    /// send that found the consumer parked). Scheduler, `finisher_before`.
    pub wakers_first: BTreeSet<usize>,
}

/// What weft says as a replay starts over because it learned spin words.
const SPIN_NOTE: &str =
    "weft: a thread spins on memory another thread releases without a logged call; replaying from the start, handing the core over at each release";

/// What weft says as a replay starts over because a finisher took a wake.
const WAKE_NOTE: &str =
    "weft: a thread run to its end ahead of a logged wake woke the waiter in the logged waker's place; replaying from the start, with that waker first";

impl Lessons {
    /// What to say as a replay that started with `before` starts over
    /// with these: the first kind of lesson it added.
    pub(crate) fn restart_note(&self, before: &Lessons) -> &'static str {
        if self.spin_words != before.spin_words {
            SPIN_NOTE
        } else {
            WAKE_NOTE
        }
    }
}
