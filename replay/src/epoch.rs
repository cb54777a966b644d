//! Epochs (seed 003 §2.2): intervals of the recording that can be
//! re-executed identically from their start, each starting at a
//! checkpoint. Until the trace carries epoch boundaries at irrevocable
//! syscalls (in-process recording), the boundaries are the timeline's own
//! checkpoint points: epoch 0 starts at the recording's start, epoch k at
//! the k-th checkpoint the timeline took. This file is the one place that
//! defines them; the stub and the UI only list and visit them.

use crate::mark::Mark;
use anyhow::{bail, Result};
use std::collections::BTreeSet;
use weft_record::{Tid, Trace};

/// One epoch.
#[derive(Debug, Clone)]
pub struct Epoch {
    /// Its index, from 0 at the start of the recording.
    pub index: usize,
    /// Where it starts.
    pub start: Mark,
    /// The log events in it: from the first to the first of the next
    /// epoch (for the last known epoch, to the furthest the replay has
    /// been).
    pub events: std::ops::Range<u64>,
    /// The recorded tids of the threads with events in it.
    pub threads: Vec<Tid>,
    /// The event that closed it, as `weft dump` prints it (`#N tid ...`);
    /// `None` for the last known epoch.
    pub closed_by: Option<String>,
}

/// The epochs cut at `boundaries` (ascending segment starts), up to event
/// `furthest`.
pub(crate) fn epochs(trace: &Trace, boundaries: &[Mark], furthest: u64) -> Vec<Epoch> {
    let starts: Vec<Mark> = std::iter::once(origin(trace)).chain(boundaries.iter().filter(|m| m.point > 0).cloned()).collect();
    let mut list = Vec::with_capacity(starts.len());
    for (index, start) in starts.iter().enumerate() {
        let next = starts.get(index + 1);
        let end = next.map_or(furthest.max(start.event), |n| n.event);
        let slice = trace.events.get(start.event as usize..end as usize).unwrap_or_default();
        let threads: BTreeSet<Tid> = slice.iter().map(|e| e.tid).collect();
        let closed_by = next.and_then(|n| {
            let k = n.event.checked_sub(1)?;
            trace.events.get(k as usize).map(|e| format!("#{k} {e}"))
        });
        list.push(Epoch { index, start: start.clone(), events: start.event..end, threads: threads.into_iter().collect(), closed_by });
    }
    list
}

/// Where epoch `n` starts. Errors: no such epoch yet.
pub(crate) fn start(trace: &Trace, boundaries: &[Mark], n: usize) -> Result<Mark> {
    if n == 0 {
        return Ok(origin(trace));
    }
    match boundaries.iter().filter(|m| m.point > 0).nth(n - 1) {
        Some(m) => Ok(m.clone()),
        None => bail!("no epoch {n}: the replay has cut {} epochs so far", boundaries.iter().filter(|m| m.point > 0).count() + 1),
    }
}

/// The index of the epoch `mark` is in.
pub(crate) fn index_of(boundaries: &[Mark], mark: &Mark) -> usize {
    boundaries.iter().filter(|m| m.point > 0 && (m.surely_before(mark) || *m == mark)).count()
}

/// The start of the recording.
fn origin(trace: &Trace) -> Mark {
    Mark::segment_start(0, trace.meta.pid, 0)
}
