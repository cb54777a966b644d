//! weft's replayer: re-executes a recorded program on one core,
//! deterministically, validates the run against the log, and lets a
//! debugger move through it forwards and backwards.
//!
//! Data flow: a [`weft_record::Trace`] and a [`Schedule`] go into the
//! engine in `session/`, which starts the program again with the recorded
//! argv, env, AT_RANDOM and ASLR setting and runs one thread at a time,
//! switching only at scheduling points, emulating inputs and futexes, and
//! checking each event against the log (seed 000 §3.2, Definition 1).
//! Two clients drive it:
//!
//! * [`Replayer`] / [`replay`] (exploration, `replayer.rs`): whole
//!   replays, again and again, resumed from checkpoints (`checkpoint.rs`,
//!   forked copies of the process made with `remote.rs`'s injected
//!   syscalls);
//! * [`ReplaySession`] (`replay_session.rs`): the interactive session the
//!   gdb server, autopilot and scripts use: stops at breakpoints,
//!   watchpoints, signals and the end; positions exact to the instruction
//!   ([`Mark`](mark::Mark), `mark.rs`); a timeline of checkpoints
//!   (`timeline.rs`) that makes going backwards (`reverse.rs`) cheap; and
//!   epochs (`epoch.rs`). Its vocabulary is in `debug.rs`.
//!
//! Start with `session.rs` (the engine's state; one concept per file
//! under `session/`: ptrace control, syscall emulation, the scheduler,
//! signals, single steps, the debugger's traps, snapshots), then
//! `replay_session.rs`. `loader.rs` reads the dynamic loader's state in
//! the replayed process (the mapped libraries, thread-local variables'
//! addresses) for the session; `symbols.rs` names addresses of the
//! executable (variables, source lines) for the diagnosis of a stuck
//! replay (`session/stuck.rs`); `watchdog.rs` ends a replay that stops
//! making progress. `futex.rs` is the emulated wait queues, `log_index.rs` what
//! the replay derives from the log once (each thread's events, lock words),
//! `schedule.rs` the preemptions and race reversals exploration adds,
//! `access.rs` what page-protection tracing reports, `sync_trace.rs` what a
//! failed replay tells exploration, and `position.rs` the coarse position
//! failures name.

pub mod access;
mod checkpoint;
pub mod debug;
mod digest;
mod exec_alias;
pub mod epoch;
pub mod failure;
pub mod fds;
pub mod futex;
mod lessons;
pub mod loader;
mod log_index;
pub mod mark;
pub mod position;
mod predecessor;
mod remote;
mod replay_session;
mod reverse;
mod replayer;
pub mod schedule;
mod session;
mod symbols;
mod sync_points;
mod timeline;
pub mod sync_trace;
mod watchdog;
mod word_alias;

pub use failure::Failure;
pub use position::Position;
pub use access::{Access, AccessTracing};
pub use schedule::{Preemption, Reversal, Schedule};
pub use checkpoint::Policy as CheckpointPolicy;
pub use replayer::{replay, Replayer};
pub use replay_session::ReplaySession;
pub use debug::{Registers, Resume, SessionOptions, Stop, Watchpoint, WatchKind, When};
pub use lessons::{Lessons, RunOnAll};
pub use session::{Outcome, ReplayOptions, Report, SpinWords};
pub use sync_trace::{Switchable, SyncRecord};
