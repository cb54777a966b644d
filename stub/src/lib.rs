//! weft's gdb server: the GDB Remote Serial Protocol (GDB manual, appendix
//! "Remote Protocol") over one interactive replay
//! ([`weft_replay::ReplaySession`]), built on the `gdbstub` crate. gdb
//! debugs the recording as a live multi-threaded process, and
//! also backwards (`reverse-continue`, `reverse-stepi`).
//!
//! Data flow: [`serve`] accepts gdb's TCP connection ([`server`]) and feeds
//! gdb's bytes to gdbstub's state machine, which calls the target
//! ([`target`]): registers ([`arch`], [`regs`]), memory, threads,
//! breakpoints and watchpoints ([`watch`]) go straight to the session;
//! `qXfer` objects come from it (the library list is the loader's, which
//! the session reads from tracee memory, as XML by [`svr4`]); `monitor`
//! commands ([`monitor`]) reach the log's events, epochs and checkpoints.
//! A resume packet is run by the session until a [`weft_replay::Stop`],
//! which becomes a stop reply ([`stop`], with gdb's signal numbers,
//! [`signal`]).
//! gdbstub lacks `qGetTLSAddr` and lldb's `qShlibInfoAddr`, and closes
//! the connection at `vKill`: the server takes those packets out of the
//! stream first ([`intercept`]) and answers them itself (a thread-local
//! variable's address, parsed by [`tls`]; where the loader's `r_debug`
//! address is kept; `OK`). It also notes the threads gdb's `H` packets
//! select, for a reverse step after `Hc0`.

pub mod arch;
pub mod hostio;
pub mod intercept;
pub mod monitor;
pub mod regs;
pub mod server;
pub mod signal;
pub mod stop;
pub mod svr4;
pub mod target;
pub mod tls;
pub mod watch;

pub use server::{serve, ServeOptions};
