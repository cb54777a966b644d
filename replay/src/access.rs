//! Page-protection tracing of memory accesses (seed 000 §6, "Intercepting
//! Shared Variable Accesses"): what a replay asked to trace accesses
//! reports, for fine-grained exploration (§4.3) to find the races of a
//! window in. The mechanism is `session/protect.rs`.

use weft_record::Tid;

/// Trace accesses from synchronization count `from` on: every writable
/// page of the first process that is not a thread's stack or TLS block,
/// nor the in-process runtime's, is protected, and each access to one
/// stops the thread, is logged, and is stepped over with the page open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessTracing {
    /// The synchronization count at which protection starts (the window's
    /// start).
    pub from: u64,
    /// At most this many accesses are logged; then every page is opened
    /// again and the replay goes on untraced (each access costs several
    /// ptrace stops).
    pub budget: usize,
}

/// One traced access: a fault on a protected page, stepped over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The recorded tid of the thread that made it.
    pub tid: Tid,
    /// The page's address (bytes, a multiple of 4096).
    pub page: u64,
    /// Which of the thread's accesses to the page it is, from 1, counted
    /// since protection started: what a [`crate::schedule::Reversal`]
    /// names it by.
    pub nth: u64,
    /// The faulting address.
    pub addr: u64,
    /// The instruction's address.
    pub pc: u64,
    /// The instruction wrote the page (it faulted again with the page
    /// readable).
    pub write: bool,
    /// The synchronization count when it was made.
    pub sync: u64,
    /// The index of the next log event to match when it was made.
    pub event: usize,
}

impl Access {
    /// Whether `self` and `other` race (seed 000 §4.3, footnote 1): the
    /// same variable, from different threads, at least one a write. The
    /// variable is the aligned 8-byte word of the faulting address (a
    /// fault names the address, not the access's size).
    pub fn races_with(&self, other: &Access) -> bool {
        self.tid != other.tid && self.addr & !7 == other.addr & !7 && (self.write || other.write)
    }
}
