//! weft's replayer: re-executes a recorded program on one core,
//! deterministically, and validates the run against the log.
//!
//! Data flow: a [`weft_record::Trace`] and a [`Schedule`] go into
//! [`replay`], which starts the program again with the recorded argv, env,
//! AT_RANDOM and ASLR setting, then runs `session.rs`'s loop: one thread
//! at a time, switching only at scheduling points, emulating inputs and
//! futexes, and checking each event against the log (seed 000 §3.2,
//! Definition 1). Start with `session.rs`; `futex.rs` is the emulated wait
//! queues, `schedule.rs` the preemptions exploration adds, `sync_trace.rs`
//! what a failed replay tells exploration, and `position.rs` the notion of
//! time the debugger and UI will share. A [`Replayer`] replays one trace
//! many times and keeps checkpoints (`checkpoint.rs`, forked copies of the
//! process made with `remote.rs`'s injected syscalls) to resume from.

mod checkpoint;
pub mod debug;
mod digest;
pub mod epoch;
pub mod failure;
pub mod futex;
pub mod mark;
pub mod position;
mod remote;
mod replay_session;
mod reverse;
mod replayer;
pub mod schedule;
mod session;
mod sync_points;
mod timeline;
pub mod sync_trace;
mod watchdog;

pub use failure::Failure;
pub use position::Position;
pub use schedule::{Preemption, Schedule};
pub use checkpoint::Policy as CheckpointPolicy;
pub use replayer::{replay, Replayer};
pub use replay_session::ReplaySession;
pub use debug::{Registers, Resume, SessionOptions, Stop, Watchpoint, WatchKind, When};
pub use session::{Outcome, ReplayOptions, Report};
pub use sync_trace::{Switchable, SyncRecord};
