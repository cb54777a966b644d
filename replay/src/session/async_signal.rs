//! Asynchronous signals: a signal sent from outside the program (a
//! terminal's ^C, `kill` from a shell, a timer) is logged with its siginfo
//! and, when it arrived while the thread was blocked in a syscall, with
//! that syscall and the kernel's restart code.
//!
//! Without performance counters a replay cannot stop a thread at the exact
//! instruction a signal hit (DESIGN.md, known traps), so it delivers the
//! signal at a scheduling point, when the signal is the log's next event:
//!
//! * one that interrupted a syscall is delivered exactly there: the
//!   replayed call is skipped, returns the recorded restart code, and the
//!   signal arrives before the thread leaves the kernel, so the kernel
//!   restarts the call or makes it fail with EINTR by the handler's
//!   SA_RESTART, as it did in the recording (signal(7)); sigsuspend, whose
//!   own mask the kernel must restore, runs for real and gets the signal;
//! * any other is delivered at the thread's next scheduling point: before
//!   the syscall it is entering (the call is rewound and runs again after
//!   the handler), at a pthread breakpoint, or before a faulting or rdtsc
//!   instruction, which traps again after the handler.
//!
//! A signal the program sent itself (kill, tgkill) is sent in the replay
//! too; a thread stopped for it is matched like a fault, and one that is
//! still pending is not sent twice.

use super::{At, Delivery, Entry, Session, Step};
use crate::failure::Failure;
use crate::remote;
use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal as NixSignal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use weft_record::event::{EventKind, Interrupted, Signal};
use weft_record::tracee;

impl<'a> Session<'a> {
    /// The log's next event, if it is an asynchronous signal to thread `i`.
    pub(super) fn async_signal_due(&self, i: usize) -> Option<&'a Signal> {
        let trace: &'a weft_record::Trace = self.trace;
        let e = trace.events.get(self.state.pos)?;
        match &e.kind {
            EventKind::Signal(s) if !s.synchronous && e.tid == self.state.threads[i].rec => Some(s),
            _ => None,
        }
    }

    /// Delivers `s`, the log's next event, to thread `i` at the scheduling
    /// point it is stopped at, if this is where it goes; `None` when the
    /// thread must first run on (to the syscall the signal interrupted).
    /// Errors: ptrace failures, or the thread not stopping for the signal.
    pub(super) fn deliver_async(&mut self, i: usize, s: &Signal) -> Result<Option<Step>> {
        let label = self.trace.events[self.state.pos].label;
        let at = self.state.threads[i].at;
        let entry = match at {
            // Sent by the program itself (kill, tgkill, executed in the
            // replay too): a thread at its delivery stop matches it as usual.
            At::Fault(f) if f as i32 == s.signo => return Ok(None),
            At::Entry(e) => Some(e),
            At::Blocked(_) => {
                let regs = self.state.threads[i].regs;
                Some(Entry { nr: regs.orig_rax as i64, args: tracee::syscall_args(&regs), label: regs.rip })
            }
            At::Sync(_) | At::Fault(_) => None,
            _ => return Ok(None),
        };
        // Sent by the program itself and still pending: not sent again.
        let sent = self.pending(i, s.signo)?;
        let exact = match (entry, s.interrupted) {
            (Some(e), Some(x)) if e.nr == x.nr && e.label == label => {
                if e.nr == libc::SYS_rt_sigsuspend {
                    self.suspend(i, s, sent)?;
                    return self.delivered(i, s, true, true);
                }
                self.interrupt(i, e, Some(x))?;
                true
            }
            (Some(e), None) => {
                self.interrupt(i, e, None)?;
                false
            }
            (None, None) => false,
            (Some(e), Some(_)) if matches!(at, At::Blocked(_)) => {
                let me = self.state.threads[i].rec;
                let observed = format!("tid {me} @{:#x}  blocked in futex wait", e.label);
                let expected = self.trace.events[self.state.pos].to_string();
                return Ok(Some(Step::Fail(Failure::Unmatched { at: self.position(i), label: e.label, expected, observed })));
            }
            // Not yet at the syscall the signal interrupted: run on to it.
            _ => return Ok(None),
        };
        self.delivered(i, s, exact, sent)
    }

    /// Whether signal `signo` is pending for thread `i` or its process
    /// (`SigPnd` and `ShdPnd` in /proc/PID/task/TID/status, proc(5)).
    fn pending(&self, i: usize, signo: i32) -> Result<bool> {
        let path = format!("/proc/{}/task/{}/status", self.pid, self.state.threads[i].tid);
        let status = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
        let bit = 1u64 << (signo - 1);
        Ok(status.lines().any(|line| {
            let mask = line.strip_prefix("SigPnd:").or_else(|| line.strip_prefix("ShdPnd:"));
            mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).is_some_and(|m| m & bit != 0)
        }))
    }

    /// Brings thread `i` to the delivery stop of `s` (sending it unless
    /// `sent`) and counts the event as matched.
    fn delivered(&mut self, i: usize, s: &Signal, exact: bool, sent: bool) -> Result<Option<Step>> {
        self.raise(i, s, sent)?;
        let t = &mut self.state.threads[i];
        self.state.last_delivery = Some(Delivery { rec: t.rec, pc: t.regs.rip, exact });
        t.last_event = Some(self.state.pos);
        t.steps = 0;
        self.state.pos += 1;
        Ok(Some(Step::Stay))
    }

    /// Skips the syscall thread `i` is entering (or blocked in), `e`, and
    /// leaves it at the exit stop as a signal leaves it: with the recorded
    /// restart code (`interrupted`), or rewound to run the call again after
    /// the handler.
    fn interrupt(&mut self, i: usize, e: Entry, interrupted: Option<Interrupted>) -> Result<()> {
        if matches!(self.state.threads[i].at, At::Blocked(_)) {
            // The wait is abandoned, as a signal makes futex(2) return.
            self.state.futexes.cancel(i);
        }
        let entry = self.state.threads[i].regs;
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = u64::MAX;
        ptrace::setregs(t.tid, t.regs)?;
        let mut regs = self.execute(i)?;
        match interrupted {
            Some(x) => {
                regs.rax = x.result as u64;
                regs.orig_rax = x.nr as u64;
            }
            None => {
                regs = entry;
                regs.rip -= remote::SYSCALL_INSN.len() as u64;
                regs.rax = e.nr as u64;
                regs.orig_rax = u64::MAX;
            }
        }
        let t = &mut self.state.threads[i];
        t.regs = regs;
        Ok(ptrace::setregs(t.tid, regs)?)
    }

    /// sigsuspend waits with a mask of its own, which the kernel sets and
    /// restores around the delivery (the handler's frame saves the mask
    /// from before the call): thread `i` runs the call for real and gets
    /// `s` in it (unless it is pending already), to the call's exit stop.
    fn suspend(&mut self, i: usize, s: &Signal, sent: bool) -> Result<()> {
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        if !sent {
            self.send(i, s.signo)?;
        }
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) => {}
            other => bail!("thread {tid} did not leave sigsuspend for signal {}: {other:?}", s.signo),
        }
        self.state.threads[i].regs = ptrace::getregs(tid)?;
        Ok(())
    }

    /// Sends signal `signo` to thread `i` (tgkill).
    fn send(&self, i: usize, signo: i32) -> Result<()> {
        let tid = self.state.threads[i].tid;
        // SAFETY: tgkill takes three integers.
        Errno::result(unsafe { libc::syscall(libc::SYS_tgkill, self.pid.as_raw(), tid.as_raw(), signo) })
            .context("tgkill")?;
        Ok(())
    }

    /// Sends `s` to thread `i` (unless `sent`) and resumes it to the
    /// signal's delivery stop (any signal it was stopped for is dropped: a
    /// fault traps again after the handler), with the recorded siginfo;
    /// resuming then delivers it. A signal the thread blocks here (a call
    /// that unblocked it while waiting, ppoll or pselect6 with a mask, was
    /// skipped) is unblocked for the delivery, and the handler returns
    /// with it unblocked: the kernel would requeue a signal blocked again at
    /// its delivery stop. A warning says so.
    fn raise(&mut self, i: usize, s: &Signal, sent: bool) -> Result<()> {
        let sig = NixSignal::try_from(s.signo).with_context(|| format!("logged signal number {}", s.signo))?;
        let tid = self.state.threads[i].tid;
        // (After sigsuspend, PTRACE_GETSIGMASK reports the mask it restores,
        // and PTRACE_SETSIGMASK would cancel that restore.)
        let mask = if sent { 0 } else { tracee::sigmask(tid)? };
        let bit = 1u64 << (s.signo - 1);
        if mask & bit != 0 {
            eprintln!(
                "weft: warning: event {}: {} is blocked in thread {} where the replay delivers it; it is unblocked from here on",
                self.state.pos,
                sig.as_str(),
                self.state.threads[i].rec
            );
            tracee::set_sigmask(tid, mask & !bit)?;
        }
        if !sent {
            self.send(i, s.signo)?;
        }
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, got) if got == sig => {}
            other => bail!("thread {tid} did not stop for {}: {other:?}", sig.as_str()),
        }
        tracee::set_siginfo_bytes(tid, &s.siginfo)?;
        let t = &mut self.state.threads[i];
        t.regs = ptrace::getregs(tid)?;
        t.at = At::Deliver(sig);
        Ok(())
    }
}
