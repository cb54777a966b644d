//! Epochs in a replay: the trace's recorded epochs (seed 003; cut after
//! irrevocable syscalls, process spawns, execs and the end:
//! [`weft_record::epochs`]), and where the replay found each one's start.
//! An epoch starts at the start of the first segment at which its first
//! event is the next to happen; the replay learns that [`Mark`] the first
//! time it goes there. This file is the one place that defines them; the
//! stub and the UI only list and visit them.

use crate::mark::Mark;
use anyhow::{bail, Result};
use std::collections::{BTreeSet, HashMap};
use weft_record::epochs::{self as recorded, epoch_of};
use weft_record::{EventKind, Tid, Trace};

/// One epoch, as the debugger lists it.
#[derive(Debug, Clone)]
pub struct Epoch {
    /// The recorded epoch: its index, events and closing event.
    pub recorded: recorded::Epoch,
    /// The recorded tids of the threads with events in it.
    pub threads: Vec<Tid>,
}

/// A trace's recorded epochs and the marks of the starts the replay has
/// found.
pub(crate) struct Epochs {
    list: Vec<recorded::Epoch>,
    starts: HashMap<usize, Mark>,
}

impl Epochs {
    /// The epochs of `trace`; epoch 0 starts where the recording does.
    pub fn new(trace: &Trace) -> Self {
        let origin = Mark::segment_start(0, trace.meta.pid, 0);
        Self { list: trace.epochs(), starts: HashMap::from([(0, origin)]) }
    }

    /// Every epoch of `trace` (the one these were made from), in order.
    pub fn list(&self, trace: &Trace) -> Vec<Epoch> {
        // The End is no thread's.
        let threads = |e: &recorded::Epoch| -> BTreeSet<Tid> {
            trace.events[e.events.clone()].iter().filter(|e| !matches!(e.kind, EventKind::End(_))).map(|e| e.tid).collect()
        };
        self.list.iter().map(|e| Epoch { recorded: e.clone(), threads: threads(e).into_iter().collect() }).collect()
    }

    /// The index of the epoch `mark` is in: the one holding the next event
    /// to be matched.
    pub fn index_of(&self, mark: &Mark) -> usize {
        epoch_of(&self.list, mark.event as usize)
    }

    /// The first event of epoch `n`. Errors: no such epoch.
    pub fn first_event(&self, n: usize) -> Result<u64> {
        match self.list.get(n) {
            Some(e) => Ok(e.events.start as u64),
            None => bail!("no epoch {n}: the trace has {} epochs, 0 to {}", self.list.len(), self.list.len().saturating_sub(1)),
        }
    }

    /// Where epoch `n` starts, once the replay has been there.
    pub fn start(&self, n: usize) -> Option<&Mark> {
        self.starts.get(&n)
    }

    /// Says that epoch `n` starts at `mark`.
    pub fn found(&mut self, n: usize, mark: Mark) {
        self.starts.insert(n, mark);
    }
}
