//! weft's recorder and the trace format it writes.
//!
//! Data flow: [`recorder::record`] launches the program with
//! [`tracee::launch`] (ASLR off, rdtsc trapping, a seccomp filter,
//! [`filter`], that traps only the syscalls in [`syscalls`] that must be
//! logged), runs it on all cores, and appends [`event::Event`]s to a [`trace::TraceWriter`]. The
//! replayer reads them back with [`trace::Trace::open`]. Start with
//! `event.rs` (what is logged) and `recorder.rs` (how). The in-process
//! runtime ([`runtime`], [`inprocess`]) logs most events inside the
//! program; its records go into the trace as their bytes and are decoded
//! when it is read ([`buffered`]). A program's own seccomp filters are
//! kept for the replay to run ([`seccomp`]).
//!
//! The design follows seed 000 §3.1 (log only syscalls, signals and spawns,
//! in one global order) and DESIGN.md's recording section.

pub mod buffered;
pub mod cpu;
pub mod dirs;
pub mod epochs;
pub mod event;
pub mod filter;
mod handoff;
pub mod inprocess;
pub mod mapping;
pub mod preload;
pub mod recorder;
pub mod runtime;
pub mod runtime_exit;
pub mod seccomp;
pub mod store;
pub mod syscalls;
pub mod trace;
pub mod tracee;
pub mod tree;
pub mod wait;

pub use event::{End, Event, EventKind, Meta, Tid};
pub use recorder::{record, RecordOptions, Recording};
pub use trace::{Trace, TraceError};
