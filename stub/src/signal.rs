//! Linux signal numbers to the remote protocol's. Stop replies carry
//! gdb's own target-independent numbering (GDB RSP, "Stop Reply Packets":
//! "the signal numbers are defined by gdb/signals.def", as gdbserver's
//! `gdb_signal_from_host` maps them): it agrees with Linux up to SIGTERM
//! and differs after (SIGUSR1 is 10 on Linux, 30 for gdb).

use gdbstub::common::Signal;

/// The protocol's number for Linux x86-64 signal `signo`
/// ([`Signal::UNKNOWN`] for one gdb has no name for).
pub fn from_linux(signo: i32) -> Signal {
    match signo {
        1..=6 | 8 | 9 | 11 | 13..=15 => Signal(signo as u8),
        libc::SIGBUS => Signal::SIGBUS,
        libc::SIGUSR1 => Signal::SIGUSR1,
        libc::SIGUSR2 => Signal::SIGUSR2,
        libc::SIGCHLD => Signal::SIGCHLD,
        libc::SIGCONT => Signal::SIGCONT,
        libc::SIGSTOP => Signal::SIGSTOP,
        libc::SIGTSTP => Signal::SIGTSTP,
        libc::SIGTTIN => Signal::SIGTTIN,
        libc::SIGTTOU => Signal::SIGTTOU,
        libc::SIGURG => Signal::SIGURG,
        libc::SIGXCPU => Signal::SIGXCPU,
        libc::SIGXFSZ => Signal::SIGXFSZ,
        libc::SIGVTALRM => Signal::SIGVTALRM,
        libc::SIGPROF => Signal::SIGPROF,
        libc::SIGWINCH => Signal::SIGWINCH,
        libc::SIGIO => Signal::SIGIO,
        libc::SIGPWR => Signal::SIGPWR,
        libc::SIGSYS => Signal::SIGSYS,
        // gdb's real-time block: 32 stands apart, 33-63 are 45-75, 64 is 78.
        32 => Signal::SIG32,
        33..=63 => Signal(signo as u8 + 12),
        64 => Signal::SIG64,
        _ => Signal::UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_linux_to_gdb_numbers() {
        assert_eq!(from_linux(libc::SIGSEGV), Signal::SIGSEGV);
        assert_eq!(from_linux(libc::SIGINT), Signal::SIGINT);
        assert_eq!(from_linux(libc::SIGUSR1), Signal::SIGUSR1);
        assert_eq!(from_linux(libc::SIGBUS), Signal::SIGBUS);
        assert_eq!(from_linux(libc::SIGCHLD), Signal::SIGCHLD);
        assert_eq!(from_linux(34), Signal::SIG34);
        assert_eq!(from_linux(63), Signal::SIG63);
        assert_eq!(from_linux(libc::SIGSTKFLT), Signal::UNKNOWN);
    }
}
