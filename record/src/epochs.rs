//! Epochs (seed 003 §2.1, §2.2.3): the trace cut into intervals at the
//! events whose effects cannot be rolled back or deferred, so that each
//! interval could be re-executed from its start. An epoch ends after an
//! event that closes one ([`closes_epoch`]): a successful irrevocable
//! syscall, a process spawn (fork, vfork, clone without CLONE_THREAD), an
//! exec, or the End. The epochs follow from the events and their recorded
//! classes ([`crate::event::Syscall::class`]), so the trace holds its
//! boundaries without a record of its own; `weft dump`, the gdb server's
//! `monitor epochs` and the replayer all cut it here.

use crate::event::{is_new_process, Event, EventKind};
use crate::syscalls::{self, CallClass};
use crate::Trace;
use std::ops::Range;

/// One epoch of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    /// Its index, from 0 at the start of the recording.
    pub index: usize,
    /// Its events, by index: from its first to the one that closed it,
    /// that one included.
    pub events: Range<usize>,
    /// The event that closed it; `None` when the trace stops first (a
    /// killed recorder leaves no End).
    pub closed_by: Option<Closing>,
}

/// The event that closed an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closing {
    /// Its index.
    pub event: usize,
    /// Its class ([`event_class`]): irrevocable, or `None` for the End.
    pub class: Option<CallClass>,
}

/// The class of the call an event records: a syscall's own; a spawn's as
/// [`syscalls::call_class`] classes clone (a process is irrevocable, a
/// thread recordable); an exec is irrevocable; a synchronization is
/// recordable (seed 003 §3.2 logs which thread acquired first, and a
/// re-execution is given that order). Signals, rdtsc and the End record no
/// call: `None`.
pub fn event_class(kind: &EventKind) -> Option<CallClass> {
    match kind {
        EventKind::Syscall(s) => Some(s.class),
        EventKind::Spawn { flags, .. } if is_new_process(*flags) => Some(CallClass::Irrevocable),
        EventKind::Spawn { .. } => Some(CallClass::Recordable),
        EventKind::Exec(_) => Some(CallClass::Irrevocable),
        EventKind::Sync(_) => Some(CallClass::Recordable),
        EventKind::Signal(_) | EventKind::Rdtsc { .. } | EventKind::End(_) => None,
    }
}

/// Whether an epoch ends after `kind`: an irrevocable call that did
/// something (a failed one, -4095..-1, changed nothing), or the End.
pub fn closes_epoch(kind: &EventKind) -> bool {
    match kind {
        EventKind::End(_) => true,
        EventKind::Syscall(s) if (-4095..0).contains(&s.result) => false,
        _ => event_class(kind) == Some(CallClass::Irrevocable),
    }
}

/// The epochs of `events`, in order; none for no events.
pub fn epochs(events: &[Event]) -> Vec<Epoch> {
    let mut list = Vec::new();
    let mut start = 0;
    for (i, e) in events.iter().enumerate() {
        if closes_epoch(&e.kind) {
            let closed_by = Some(Closing { event: i, class: event_class(&e.kind) });
            list.push(Epoch { index: list.len(), events: start..i + 1, closed_by });
            start = i + 1;
        }
    }
    if start < events.len() {
        list.push(Epoch { index: list.len(), events: start..events.len(), closed_by: None });
    }
    list
}

/// The index of the epoch of `epochs` that holds event `event`; past the
/// last event, the last epoch (0 when there is none).
pub fn epoch_of(epochs: &[Epoch], event: usize) -> usize {
    epochs.partition_point(|e| e.events.end <= event).min(epochs.len().saturating_sub(1))
}

impl Trace {
    /// The trace's epochs ([`epochs`]).
    pub fn epochs(&self) -> Vec<Epoch> {
        epochs(&self.events)
    }
}

impl Epoch {
    /// One line describing it, as `weft dump` heads its events with:
    /// `epoch 3: events #120..#245, closed by #245 execve (irrevocable)`.
    /// `events` are the trace's events.
    pub fn summary(&self, events: &[Event]) -> String {
        let last = self.events.end.saturating_sub(1);
        let range = format!("epoch {}: events #{}..#{last}", self.index, self.events.start);
        match self.closed_by {
            Some(c) => {
                let class = c.class.map_or(String::new(), |k| format!(" ({k})"));
                format!("{range}, closed by #{} {}{class}", c.event, short_name(&events[c.event].kind))
            }
            None => format!("{range}, open (the trace stops here)"),
        }
    }
}

/// An event's short name, as an epoch's summary names the closing one:
/// the syscall, the fork, the exec'd file, the end, the signal.
fn short_name(kind: &EventKind) -> String {
    match kind {
        EventKind::Syscall(s) => syscalls::name(s.nr),
        EventKind::Spawn { child, .. } => format!("fork of process {child}"),
        EventKind::Exec(x) => {
            let exe = x.files.first().map(|f| String::from_utf8_lossy(&f.path).into_owned()).unwrap_or_default();
            format!("exec {exe}")
        }
        EventKind::End(end) => format!("the end ({end})"),
        EventKind::Signal(sig) => crate::event::signal_name(sig.signo),
        EventKind::Rdtsc { .. } => "rdtsc".to_string(),
        EventKind::Sync(sync) => format!("sync {:?}", sync.op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{End, Exec, Sync, SyncOp, Syscall};
    use libc as c;

    fn event(kind: EventKind) -> Event {
        Event { tid: 100, label: 0x1000, kind }
    }

    fn call(nr: i64, args: [u64; 6], result: i64) -> Event {
        event(EventKind::Syscall(Syscall::bare(nr, args, result)))
    }

    /// read, fork, a thread, a failed execve, lseek(SEEK_SET), exec, a
    /// mutex, exit_group, the end.
    fn synthetic() -> Vec<Event> {
        vec![
            call(c::SYS_read, [3, 0x5000, 10, 0, 0, 0], 10),
            event(EventKind::Spawn { child: 101, flags: c::SIGCHLD as u64 }),
            event(EventKind::Spawn { child: 102, flags: (c::CLONE_VM | c::CLONE_THREAD | c::CLONE_SIGHAND) as u64 }),
            call(c::SYS_execve, [0x6000, 0, 0, 0, 0, 0], -(c::ENOENT as i64)),
            call(c::SYS_lseek, [3, 0, c::SEEK_SET as u64, 0, 0, 0], 0),
            call(c::SYS_clock_gettime, [1, 0x7000, 0, 0, 0, 0], 0),
            event(EventKind::Exec(Exec { argv: vec![b"true".to_vec()], files: vec![], at_random: [0; 16] })),
            event(EventKind::Sync(Sync { op: SyncOp::MutexLock, var: 0x8000, result: 0 })),
            call(c::SYS_exit_group, [0; 6], 0),
            event(EventKind::End(End::Exited(0))),
        ]
    }

    #[test]
    fn epochs_end_after_irrevocable_events() {
        let events = synthetic();
        let got = epochs(&events);
        let closings: Vec<_> = got.iter().map(|e| (e.events.clone(), e.closed_by)).collect();
        let irrevocable = |event| Some(Closing { event, class: Some(CallClass::Irrevocable) });
        assert_eq!(
            closings,
            vec![
                (0..2, irrevocable(1)),
                (2..5, irrevocable(4)),
                (5..7, irrevocable(6)),
                (7..10, Some(Closing { event: 9, class: None })),
            ]
        );
        assert_eq!(got.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(got[1].summary(&events), "epoch 1: events #2..#4, closed by #4 lseek (irrevocable)");
        assert_eq!(got[3].summary(&events), "epoch 3: events #7..#9, closed by #9 the end (exited with status 0)");
    }

    #[test]
    fn a_trace_cut_short_ends_in_an_open_epoch() {
        let events = &synthetic()[..6];
        let got = epochs(events);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].events, 5..6);
        assert_eq!(got[2].closed_by, None);
        assert_eq!(got[2].summary(events), "epoch 2: events #5..#5, open (the trace stops here)");
        assert!(epochs(&[]).is_empty());
    }

    #[test]
    fn the_epoch_of_an_event() {
        let got = epochs(&synthetic());
        let of: Vec<usize> = (0..12).map(|i| epoch_of(&got, i)).collect();
        assert_eq!(of, [0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3]);
        assert_eq!(epoch_of(&[], 5), 0);
    }
}
