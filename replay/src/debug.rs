//! The vocabulary of the interactive replay session, the one door through
//! which the gdb server (`stub/`), autopilot, the coming TUI and scripts
//! debug a recording, forwards and backwards. rr's ReplaySession +
//! ReplayTimeline are the model: the session owns one replayed process
//! (the engine in `session/`), a timeline of checkpoints taken as the user
//! moves forwards (`timeline.rs`), the user's breakpoints and watchpoints,
//! and answers with a [`Stop`] that says why it stopped.
//!
//! Going backwards restores the latest checkpoint before the target and
//! replays forwards from it (never from the program's start unless nothing
//! is earlier). Every stop has a [`Mark`], a position exact to the
//! instruction; going to a mark twice lands on the same registers and
//! memory.

pub use crate::mark::Mark;
pub use crate::epoch::Epoch;
use crate::failure::Failure;
use std::time::Duration;
use weft_record::Tid;

/// How the interactive session replays.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The schedule to replay under (the saved one, or the one a search
    /// found): it must make the replay valid, or the session stops at the
    /// first unmatched event.
    pub schedule: crate::Schedule,
    /// How long the replay may run without matching a logged event
    /// before it stops with a livelock (time stopped for the debugger
    /// does not count).
    pub livelock_timeout: Duration,
    /// Replay time between two checkpoints the timeline takes as the user
    /// moves forwards.
    pub checkpoint_interval: Duration,
    /// Checkpoints kept at most (each holds the pages written since the
    /// one before, copy-on-write); the thinning keeps older ones sparser.
    /// 0: none (going backwards then replays from the start).
    pub max_checkpoints: usize,
    /// Echo the program's recorded stdout/stderr writes as the replay
    /// passes them the first time.
    pub echo: bool,
    /// [`Resume::Continue`] stops when a thread is created or exits
    /// ([`Stop::ThreadCreated`], [`Stop::ThreadExited`]); a step always
    /// stops when its thread exits.
    pub stop_at_thread_events: bool,
    /// What earlier replays of the trace learned, acted on from the start
    /// ([`crate::Lessons`]; `weft replay` keeps them in the trace).
    pub lessons: crate::Lessons,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            schedule: crate::Schedule::default(),
            livelock_timeout: Duration::from_secs(120),
            checkpoint_interval: Duration::from_millis(25),
            max_checkpoints: 256,
            echo: false,
            stop_at_thread_events: false,
            lessons: crate::Lessons::default(),
        }
    }
}

/// What a watchpoint catches (x86 debug registers: DR7's R/W bits; x86 has
/// no read-only watchpoint, so `Read` traps on any access, as gdb's rwatch
/// on x86 does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Writes (gdb's `watch`).
    Write,
    /// Reads (gdb's `rwatch`; any access traps).
    Read,
    /// Reads and writes (gdb's `awatch`).
    Access,
}

/// A hardware watchpoint: `len` bytes (1, 2, 4 or 8, aligned to `len`)
/// at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Watchpoint {
    /// First byte watched.
    pub addr: u64,
    /// Bytes watched: 1, 2, 4 or 8.
    pub len: u8,
    /// What traps.
    pub kind: WatchKind,
}

/// How to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Run forwards until a breakpoint, watchpoint, signal or the end.
    Continue,
    /// Execute one instruction of this thread (other threads may run
    /// before it, in the recorded schedule; their stops come first).
    Step(Tid),
    /// Step this thread while its pc stays in `start..end` (gdb's range
    /// stepping, `vCont;r`: how `next` and `step` cross a source line),
    /// stopping as [`Resume::Step`] would once it leaves, or earlier at
    /// any other stop.
    RangeStep {
        /// The thread.
        tid: Tid,
        /// The range's first address.
        start: u64,
        /// The first address past the range.
        end: u64,
    },
    /// Run backwards to the last breakpoint or watchpoint hit before the
    /// current position, or to the start of the recording.
    ReverseContinue,
    /// Go back exactly one instruction of this thread.
    ReverseStep(Tid),
}

/// Why the session stopped. `tid` is always a recorded thread id.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// A thread hit a breakpoint; it stands at the breakpoint's address.
    Breakpoint {
        /// The thread.
        tid: Tid,
        /// The breakpoint's address, the thread's pc.
        pc: u64,
    },
    /// A thread accessed a watchpoint; forwards it stopped after the
    /// accessing instruction, backwards before it.
    Watchpoint {
        /// The thread.
        tid: Tid,
        /// The watchpoint.
        watch: Watchpoint,
        /// The watched bytes at the hit before (or when it was set).
        old: Vec<u8>,
        /// The watched bytes after the access.
        new: Vec<u8>,
    },
    /// A [`Resume::Step`], [`Resume::RangeStep`] or [`Resume::ReverseStep`]
    /// finished, or a `goto` arrived.
    Step {
        /// The thread stepped (the current one after a goto).
        tid: Tid,
    },
    /// A thread is about to receive a recorded signal.
    Signal {
        /// The thread.
        tid: Tid,
        /// The signal number (Linux numbering).
        signo: i32,
        /// The recorded `siginfo_t`, as the kernel laid it out.
        siginfo: Vec<u8>,
    },
    /// A thread was created ([`SessionOptions::stop_at_thread_events`]).
    ThreadCreated {
        /// The new thread.
        tid: Tid,
        /// The thread that created it.
        parent: Tid,
    },
    /// A thread exited; the process goes on.
    ThreadExited {
        /// The thread.
        tid: Tid,
    },
    /// The end of the recording: the program exits (its exit_group is
    /// reached, not run).
    Exited {
        /// The exit status.
        code: i32,
    },
    /// The end of the recording: a signal killed the program; the thread
    /// stands at the recorded faulting instruction.
    Killed {
        /// The thread.
        tid: Tid,
        /// The fatal signal (Linux numbering).
        signo: i32,
    },
    /// Going backwards reached the start of the recording.
    StartOfRecording {
        /// The first thread.
        tid: Tid,
    },
    /// The replay cannot go further: it diverged from the recording at
    /// this failure (everything before it is the recorded run).
    Diverged {
        /// The thread that diverged.
        tid: Tid,
        /// How.
        failure: Failure,
    },
    /// The client asked to stop ([`ReplaySession::resume`](crate::ReplaySession::resume)'s `interrupt`);
    /// a move backwards that was interrupted returns to where it started.
    Interrupted {
        /// The current thread.
        tid: Tid,
    },
}

impl Stop {
    /// The thread the stop is in.
    pub fn tid(&self) -> Tid {
        match self {
            Stop::Breakpoint { tid, .. }
            | Stop::Watchpoint { tid, .. }
            | Stop::Step { tid }
            | Stop::Signal { tid, .. }
            | Stop::ThreadCreated { tid, .. }
            | Stop::ThreadExited { tid }
            | Stop::Killed { tid, .. }
            | Stop::StartOfRecording { tid }
            | Stop::Diverged { tid, .. }
            | Stop::Interrupted { tid } => *tid,
            Stop::Exited { .. } => 0,
        }
    }
}

/// A thread's registers: the general ones (`fs_base` and `gs_base`
/// included) and the x87/SSE state.
#[derive(Clone, Copy)]
pub struct Registers {
    /// General registers, as ptrace's PTRACE_GETREGS.
    pub regs: libc::user_regs_struct,
    /// x87 and SSE registers, as PTRACE_GETFPREGS (FXSAVE layout).
    pub fpregs: libc::user_fpregs_struct,
}

/// Where the session is, for `monitor when`.
#[derive(Debug, Clone)]
pub struct When {
    /// The exact position.
    pub mark: Mark,
    /// Events in the trace, the end included.
    pub events: u64,
    /// The epoch the position is in.
    pub epoch: usize,
}

/// One checkpoint the user made (`monitor checkpoint`).
#[derive(Debug, Clone)]
pub struct UserCheckpoint {
    /// Its number, for `monitor restart N`.
    pub id: usize,
    /// Where it is.
    pub mark: Mark,
}
