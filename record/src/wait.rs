//! Tracee stops and resumptions with any signal number.
//!
//! nix's `WaitStatus` and ptrace resume calls name signals with its
//! `Signal` enum, which has no real-time signals: `waitpid` fails with
//! EINVAL on a stop for one. Programs get them without asking for them:
//! `pthread_cancel` sends signal 32 (glibc's SIGCANCEL), a threaded
//! program's `setuid` makes glibc send signal 33 (SIGSETXID) to each of
//! its threads, and `timer_create` may use SIGRTMIN. So weft decodes the
//! status itself (wait(2)'s macros) and resumes with raw ptrace(2)
//! requests; the rest of nix's ptrace API is used as is.

use nix::errno::Errno;
use nix::sys::wait::WaitPidFlag;
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// A wait status, as nix's `WaitStatus` with signals as numbers
/// (signal(7)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    /// The process exited with this status.
    Exited(Pid, i32),
    /// A signal killed it; true when it dumped core.
    Signaled(Pid, i32, bool),
    /// A signal-delivery stop or group-stop for this signal.
    Stopped(Pid, i32),
    /// A PTRACE_EVENT stop: the stopping signal (SIGTRAP) and the event.
    PtraceEvent(Pid, i32, i32),
    /// A syscall stop (PTRACE_O_TRACESYSGOOD's SIGTRAP | 0x80).
    PtraceSyscall(Pid),
    /// Resumed by SIGCONT.
    Continued(Pid),
    /// WNOHANG, and no child changed state.
    StillAlive,
}

impl WaitStatus {
    /// The process or thread it is about, if any.
    pub fn pid(self) -> Option<Pid> {
        match self {
            WaitStatus::Exited(pid, _)
            | WaitStatus::Signaled(pid, ..)
            | WaitStatus::Stopped(pid, _)
            | WaitStatus::PtraceEvent(pid, ..)
            | WaitStatus::PtraceSyscall(pid)
            | WaitStatus::Continued(pid) => Some(pid),
            WaitStatus::StillAlive => None,
        }
    }

    /// Decodes the status `status` that waitpid(2) returned for `pid`.
    fn from_raw(pid: Pid, status: i32) -> Self {
        if libc::WIFEXITED(status) {
            WaitStatus::Exited(pid, libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            WaitStatus::Signaled(pid, libc::WTERMSIG(status), libc::WCOREDUMP(status))
        } else if libc::WIFSTOPPED(status) {
            let sig = libc::WSTOPSIG(status);
            match status >> 16 {
                0 if sig == libc::SIGTRAP | 0x80 => WaitStatus::PtraceSyscall(pid),
                0 => WaitStatus::Stopped(pid, sig),
                event => WaitStatus::PtraceEvent(pid, sig, event),
            }
        } else {
            WaitStatus::Continued(pid)
        }
    }
}

/// waitpid(2) for `pid` (any child when `None`) with `flags`.
/// Errors: waitpid's (ECHILD, EINTR).
pub fn waitpid<P: Into<Option<Pid>>>(pid: P, flags: Option<WaitPidFlag>) -> nix::Result<WaitStatus> {
    let mut status = 0;
    let pid = pid.into().map_or(-1, Pid::as_raw);
    let flags = flags.map_or(0, |f| f.bits());
    // SAFETY: waitpid writes one int through a valid pointer.
    let res = unsafe { libc::waitpid(pid, &mut status, flags) };
    match Errno::result(res)? {
        0 => Ok(WaitStatus::StillAlive),
        child => Ok(WaitStatus::from_raw(Pid::from_raw(child), status)),
    }
}

/// How long [`StopWaiter`] polls for the next stop before it sleeps in
/// waitpid.
pub const SPIN: Duration = Duration::from_micros(50);

/// Waits for any child's next state change (waitpid(-1, __WALL)), polling
/// first while the changes come densely and a CPU is free for it.
///
/// A tracer asleep in waitpid is woken by an inter-processor interrupt
/// when its tracee stops on another CPU, and on a VM a halted vCPU takes
/// tens of microseconds to wake: a program reading the TSC in a loop
/// (each rdtsc a ptrace stop) recorded at 67 µs per rdtsc with the
/// recorder asleep between stops, 36 µs with it polling. Polling is
/// tried only after a change that came within [`SPIN`] of the wait's
/// start, and only when the caller says the tracees leave a CPU free: a
/// poll takes a CPU the tracees may need, which slowed the syscall-heavy
/// benchmark's two threads by 5%, and changed the interleavings that
/// recordings of a three-thread pool captured (tests/c/atomicpool.c: 7
/// of 10 replayed valid against 9 of 10 without polling). A poll that
/// finds nothing makes the waiter sleep through the next waits, twice as
/// many after each poll in vain in a row, up to [`MAX_BACKOFF`].
#[derive(Debug, Default)]
pub struct StopWaiter {
    /// The last change came within [`SPIN`].
    dense: bool,
    /// Waits left to sleep through before the next poll.
    skip: u32,
    /// Waits slept through after the last poll in vain.
    backoff: u32,
}

/// The most waits [`StopWaiter`] sleeps through after polls in vain.
pub const MAX_BACKOFF: u32 = 256;

impl StopWaiter {
    /// The next change of any child, polled for first when `cpu_free`
    /// and the changes come densely. Errors: waitpid's (ECHILD, EINTR).
    pub fn wait(&mut self, cpu_free: bool) -> nix::Result<WaitStatus> {
        if self.skip > 0 {
            self.skip -= 1;
        } else if self.dense && cpu_free {
            if let Some(status) = self.poll()? {
                self.backoff = 0;
                return Ok(status);
            }
            self.backoff = (self.backoff * 2).clamp(1, MAX_BACKOFF);
            self.skip = self.backoff;
        }
        let start = Instant::now();
        let status = waitpid(None, Some(WaitPidFlag::__WALL));
        self.dense = start.elapsed() < SPIN;
        status
    }

    /// The first change within [`SPIN`], if any.
    fn poll(&self) -> nix::Result<Option<WaitStatus>> {
        let start = Instant::now();
        while start.elapsed() < SPIN {
            match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG))? {
                WaitStatus::StillAlive => std::hint::spin_loop(),
                status => return Ok(Some(status)),
            }
        }
        Ok(None)
    }
}

/// How a stopped tracee is resumed (ptrace(2)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// PTRACE_CONT: no syscall stops.
    Cont,
    /// PTRACE_SYSCALL: stop at the next syscall entry or exit.
    Syscall,
    /// PTRACE_SINGLESTEP: one instruction.
    Step,
}

/// Resumes `pid` as `how`, delivering signal `sig` (any number) when
/// given. Errors: ptrace's (ESRCH: the tracee is gone or not stopped).
pub fn resume(how: Resume, pid: Pid, sig: Option<i32>) -> nix::Result<()> {
    let request = match how {
        Resume::Cont => libc::PTRACE_CONT,
        Resume::Syscall => libc::PTRACE_SYSCALL,
        Resume::Step => libc::PTRACE_SINGLESTEP,
    };
    let data = sig.unwrap_or(0) as libc::c_long;
    // SAFETY: a resume request reads no memory of ours; data is a number.
    let res = unsafe { libc::ptrace(request, pid.as_raw(), 0 as libc::c_long, data) };
    Errno::result(res).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_decode_with_real_time_signals() {
        let pid = Pid::from_raw(7);
        assert_eq!(WaitStatus::from_raw(pid, 0x2000 | 0x7f), WaitStatus::Stopped(pid, 32), "stopped by signal 32");
        assert_eq!(WaitStatus::from_raw(pid, 33), WaitStatus::Signaled(pid, 33, false), "killed by signal 33");
        assert_eq!(WaitStatus::from_raw(pid, 3 << 8), WaitStatus::Exited(pid, 3));
        assert_eq!(WaitStatus::from_raw(pid, (0x85 << 8) | 0x7f), WaitStatus::PtraceSyscall(pid));
        let seccomp = (libc::PTRACE_EVENT_SECCOMP << 16) | (libc::SIGTRAP << 8) | 0x7f;
        assert_eq!(WaitStatus::from_raw(pid, seccomp), WaitStatus::PtraceEvent(pid, libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP));
    }
}
