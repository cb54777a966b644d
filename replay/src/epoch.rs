//! Epochs (seed 003 §2.2): intervals of the recording that can be
//! re-executed identically from their start, each starting at a
//! checkpoint. Until the trace carries epoch boundaries at irrevocable
//! syscalls (in-process recording), the boundaries are the timeline's own
//! checkpoint points; this file is the one place that defines them.

use crate::mark::Mark;
use weft_record::Tid;

/// One epoch.
#[derive(Debug, Clone)]
pub struct Epoch {
    /// Its index, from 0 at the start of the recording.
    pub index: usize,
    /// Where it starts.
    pub start: Mark,
    /// The first log event in it, and the first after it (`end` is the
    /// next epoch's first; for the last known epoch, the furthest the
    /// replay has been).
    pub events: std::ops::Range<u64>,
    /// The recorded tids of the threads alive in it.
    pub threads: Vec<Tid>,
    /// The syscall (or event) that closed it: the log event at its end,
    /// as `weft dump` names it; `None` for the last known epoch.
    pub closed_by: Option<String>,
}
