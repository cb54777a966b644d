//! What a session [`Stop`] means: to gdb, as a stop reply (GDB RSP, "Stop
//! Reply Packets"), and to the user, as a line of text.

use crate::signal;
use gdbstub::common::Signal;
use gdbstub::stub::MultiThreadStopReason;
use gdbstub::target::ext::base::reverse_exec::ReplayLogPosition;
use gdbstub::target::ext::breakpoints::WatchKind as GdbWatchKind;
use std::num::NonZeroUsize;
use weft_record::event::signal_name;
use weft_record::Tid;
use weft_replay::{Stop, WatchKind};

/// A recorded tid as the protocol's thread id (recorded tids are
/// positive; a 0 would be an invalid id, so it is sent as thread 1).
pub fn gdb_tid(tid: Tid) -> NonZeroUsize {
    NonZeroUsize::new(tid.max(1) as usize).expect("at least 1")
}

/// The thread a stop reply names (`T` packets' `thread:`), if it names
/// one.
pub fn thread_of(reason: &MultiThreadStopReason<u64>) -> Option<i32> {
    use MultiThreadStopReason as R;
    match reason {
        R::SignalWithThread { tid, .. } | R::SwBreak(tid) | R::HwBreak(tid) | R::Watch { tid, .. } => Some(tid.get() as i32),
        R::ReplayLog { tid, .. } => tid.map(|t| t.get() as i32),
        _ => None,
    }
}

/// The stop reply for `stop`, reported in thread `tid` (the stop's own
/// thread when it is alive, else one that is: gdb must be able to select
/// it). `again`: the stop is the recording's end right after it was
/// reported, i.e. gdb went forwards from there, so the process now ends
/// (`X` or `W` packet) instead of stopping again.
///
/// - A breakpoint is `T05 swbreak:` (gdb then does not back up the pc:
///   the session stops before the int3 executes).
/// - A watchpoint is `T05 watch:ADDR` / `rwatch:` / `awatch:`.
/// - A finished step, thread start/exit, a divergence: `T05` in the
///   thread (gdb decides from the pc whether a step is done).
/// - A recorded signal or the fatal one: `T<sig>` in the thread, with
///   gdb's signal number, so gdb shows the fault where it happened.
/// - The program's exit: `T05 replaylog:end` in the thread at its
///   exit_group, which gdb reports as "No more reverse-execution
///   history" and from which it can still go back (rr stops there too,
///   with SIGKILL); going forwards again, `W<code>`. After the fatal
///   signal, `X<sig>`.
/// - Going back past the start: `T05 replaylog:begin`, which gdb reports
///   as "No more reverse-execution history".
/// - An interrupt (gdb's ^C): `T02` (SIGINT).
pub fn reason(stop: &Stop, tid: Tid, again: bool) -> MultiThreadStopReason<u64> {
    let tid = gdb_tid(tid);
    let with_signal = |signo: i32| MultiThreadStopReason::SignalWithThread { tid, signal: signal::from_linux(signo) };
    match stop {
        Stop::Breakpoint { .. } => MultiThreadStopReason::SwBreak(tid),
        Stop::Watchpoint { watch, .. } => MultiThreadStopReason::Watch {
            tid,
            kind: match watch.kind {
                WatchKind::Write => GdbWatchKind::Write,
                WatchKind::Read => GdbWatchKind::Read,
                WatchKind::Access => GdbWatchKind::ReadWrite,
            },
            addr: watch.addr,
        },
        Stop::Step { .. } | Stop::ThreadCreated { .. } | Stop::ThreadExited { .. } | Stop::Diverged { .. } => {
            with_signal(libc::SIGTRAP)
        }
        Stop::Signal { signo, .. } => with_signal(*signo),
        Stop::Killed { signo, .. } if again => MultiThreadStopReason::Terminated(signal::from_linux(*signo)),
        Stop::Killed { signo, .. } => with_signal(*signo),
        Stop::Exited { code } if again => MultiThreadStopReason::Exited(*code as u8),
        Stop::Exited { .. } => MultiThreadStopReason::ReplayLog { tid: Some(tid), pos: ReplayLogPosition::End },
        Stop::StartOfRecording { .. } => MultiThreadStopReason::ReplayLog { tid: Some(tid), pos: ReplayLogPosition::Begin },
        Stop::Interrupted { .. } => MultiThreadStopReason::SignalWithThread { tid, signal: Signal::SIGINT },
    }
}

/// `stop` in words, for `monitor` output and weft's stderr.
pub fn describe(stop: &Stop) -> String {
    match stop {
        Stop::Breakpoint { tid, pc } => format!("thread {tid} hit the breakpoint at {pc:#x}"),
        Stop::Watchpoint { tid, watch, old, new } => {
            format!("thread {tid} hit the watchpoint at {:#x} ({old:02x?} -> {new:02x?})", watch.addr)
        }
        Stop::Step { tid } => format!("thread {tid} stepped"),
        Stop::Signal { tid, signo, .. } => format!("thread {tid} is about to receive {}", signal_name(*signo)),
        Stop::ThreadCreated { tid, parent } => format!("thread {parent} created thread {tid}"),
        Stop::ThreadExited { tid } => format!("thread {tid} exited"),
        Stop::Exited { code } => format!("the program exited with status {code}"),
        Stop::Killed { tid, signo } => format!("{} killed the program in thread {tid}", signal_name(*signo)),
        Stop::StartOfRecording { tid } => format!("the start of the recording (thread {tid})"),
        Stop::Diverged { tid, failure } => format!("the replay diverged in thread {tid}: {failure}"),
        Stop::Interrupted { tid } => format!("interrupted in thread {tid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_replay::Watchpoint;

    #[test]
    fn maps_stops_to_replies() {
        let t = gdb_tid(7);
        assert_eq!(reason(&Stop::Breakpoint { tid: 7, pc: 1 }, 7, false), MultiThreadStopReason::SwBreak(t));
        let watch = Watchpoint { addr: 0x1000, len: 4, kind: WatchKind::Access };
        assert_eq!(
            reason(&Stop::Watchpoint { tid: 7, watch, old: vec![], new: vec![] }, 7, false),
            MultiThreadStopReason::Watch { tid: t, kind: GdbWatchKind::ReadWrite, addr: 0x1000 }
        );
        let usr1 = Stop::Signal { tid: 7, signo: libc::SIGUSR1, siginfo: vec![] };
        assert_eq!(reason(&usr1, 7, false), MultiThreadStopReason::SignalWithThread { tid: t, signal: Signal::SIGUSR1 });
        let segv = Stop::Killed { tid: 7, signo: libc::SIGSEGV };
        assert_eq!(reason(&segv, 7, false), MultiThreadStopReason::SignalWithThread { tid: t, signal: Signal::SIGSEGV });
        assert_eq!(reason(&segv, 7, true), MultiThreadStopReason::Terminated(Signal::SIGSEGV));
        let end = MultiThreadStopReason::ReplayLog { tid: Some(NonZeroUsize::new(1).unwrap()), pos: ReplayLogPosition::End };
        assert_eq!(reason(&Stop::Exited { code: 3 }, 1, false), end);
        assert_eq!(reason(&Stop::Exited { code: 3 }, 1, true), MultiThreadStopReason::Exited(3));
        assert_eq!(
            reason(&Stop::StartOfRecording { tid: 7 }, 7, false),
            MultiThreadStopReason::ReplayLog { tid: Some(t), pos: ReplayLogPosition::Begin }
        );
        assert_eq!(reason(&Stop::ThreadExited { tid: 9 }, 7, false), MultiThreadStopReason::SignalWithThread { tid: t, signal: Signal::SIGTRAP });
    }
}
