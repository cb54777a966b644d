//! [`Mark`]: a moment of a replay, exact to the instruction, without
//! performance counters (rr's ReplayTimeline::Mark is the model; rr counts
//! retired branches, which this machine cannot).
//!
//! The replay runs one thread at a time, from scheduling point to
//! scheduling point; the run of one thread between two points is a
//! *segment*, numbered by the points handled before it. Within a segment
//! only that thread executes, deterministically, so a moment in it is
//! named by how to get there from the segment's start: a list of [`Leg`]s,
//! each either "run to the n-th hit of these breakpoints and watchpoints"
//! (cheap for long stretches: one ptrace stop per hit) or "execute m
//! single instructions" (exact, for short ones). Going to a mark restores
//! the latest checkpoint at or before its segment, replays to the
//! segment's start, then walks the legs: it lands on the same registers
//! and memory every time.

use crate::debug::Watchpoint;
use std::sync::Arc;
use weft_record::Tid;

/// A set of debugger traps, as a leg of a [`Mark`] counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TrapSet {
    /// Breakpoint addresses, ascending.
    pub breakpoints: Vec<u64>,
    /// Watchpoints.
    pub watchpoints: Vec<Watchpoint>,
}

impl TrapSet {
    /// Whether it holds no trap.
    pub fn is_empty(&self) -> bool {
        self.breakpoints.is_empty() && self.watchpoints.is_empty()
    }
}

/// One stretch of a segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Leg {
    /// Run to the `n`-th hit (n ≥ 1) of any trap of the set.
    Traps(Arc<TrapSet>, u64),
    /// Execute this many instructions, one single step each.
    Steps(u64),
}

/// A moment of a replay, exact to the instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mark {
    /// Index of the next log event to be matched.
    pub event: u64,
    /// The recorded tid of the thread this moment is in.
    pub tid: Tid,
    /// The segment: scheduling points handled before it.
    pub point: u64,
    /// How to get from the segment's start to the moment.
    pub path: Vec<Leg>,
}

impl Mark {
    /// The start of segment `point` of thread `tid`, before event `event`.
    pub fn segment_start(event: u64, tid: Tid, point: u64) -> Self {
        Self { event, tid, point, path: Vec::new() }
    }

    /// Whether it is a segment's start.
    pub fn at_segment_start(&self) -> bool {
        self.path.is_empty()
    }

    /// Whether it comes before `other`, when that can be told without
    /// replaying: an earlier segment, or the start of the same one.
    pub fn surely_before(&self, other: &Mark) -> bool {
        self.point < other.point || (self.point == other.point && self.path.is_empty() && !other.path.is_empty())
    }

    /// Appends a leg, merging it with the last one when they count the
    /// same thing.
    pub fn push(&mut self, leg: Leg) {
        match (self.path.last_mut(), leg) {
            (Some(Leg::Steps(m)), Leg::Steps(k)) => *m += k,
            (Some(Leg::Traps(set, n)), Leg::Traps(other, k)) if *set == other => *n += k,
            (_, leg) => self.path.push(leg),
        }
    }

    /// Instructions single-stepped after the last trap leg.
    pub fn trailing_steps(&self) -> u64 {
        match self.path.last() {
            Some(Leg::Steps(m)) => *m,
            _ => 0,
        }
    }
}

impl std::fmt::Display for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {}, thread {}, segment {}", self.event, self.tid, self.point)?;
        for leg in &self.path {
            match leg {
                Leg::Traps(_, n) => write!(f, " +{n} trap hit{}", if *n == 1 { "" } else { "s" })?,
                Leg::Steps(m) => write!(f, " +{m} instruction{}", if *m == 1 { "" } else { "s" })?,
            }
        }
        Ok(())
    }
}
