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
//! * one that hit user code, logged with the thread's state there, is
//!   delivered at the instruction it hit, found by matching that state
//!   (`exact_signal.rs`);
//! * any other, or one whose state the thread passes without a match, is
//!   delivered at the thread's next scheduling point (inexact): before
//!   the syscall it is entering (the call is rewound and runs again after
//!   the handler), at a pthread breakpoint, or before a faulting or rdtsc
//!   instruction, which traps again after the handler.
//!
//! A signal the program sent itself (kill, tgkill) is sent in the replay
//! too; a thread stopped for it is matched like a fault, and one that is
//! still pending is not sent twice. One a thread sent another that
//! interrupted a syscall in the recording is delivered as a signal from
//! outside is, in that syscall (emulate.rs, `kill_syscall`).

use super::{At, Delivery, Entry, Session, Step};
use crate::failure::Failure;
use crate::remote;
use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{waitpid, WaitStatus};
use weft_record::runtime;
use weft_record::event::{signal_name, EventKind, Signal};
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
        let found = self.hunt_found(i);
        if found.is_none() && self.hunting(i, s) {
            return Ok(None);
        }
        let at = self.state.threads[i].at;
        let sig = s.signo;
        if !(1..=libc::SIGRTMAX()).contains(&sig) {
            bail!("event {}: logged signal number {} is not a signal", self.state.pos, s.signo);
        }
        // Sent by another thread (its tgkill ran in the replay too) before
        // this one reached the pc the signal hit in the recording (the
        // replay runs one thread at a time): the delivery stop is passed
        // without it, which drops it, and the search runs; the signal is
        // sent again at the hit. At that pc (a raise returning) it is
        // delivered here, as usual.
        let early = self.state.threads[i].regs.rip != label;
        if at == At::Fault(sig) && early && found.is_none() && s.state.is_some() && self.watchpoints.free_slot().is_some() {
            self.state.threads[i].at = At::Ready;
            return Ok(None);
        }
        let entry = match at {
            // Sent by the program itself (kill, tgkill, executed in the
            // replay too): a thread at its delivery stop matches it as usual.
            At::Fault(f) if f == sig => return Ok(None),
            At::Entry(e) => Some(e),
            // At the instruction the signal hit (or where its search gave up).
            At::Ready if found.is_some() => None,
            // Where the runtime call it came after returns.
            At::Ready if self.after_runtime_call(i) => None,
            At::Blocked(_) => {
                let regs = self.state.threads[i].regs;
                Some(Entry { nr: regs.orig_rax as i64, args: tracee::syscall_args(&regs), label: regs.rip })
            }
            // Before a fault or an rdtsc trap, which comes back after the
            // handler; another signal the thread is stopped for would be lost.
            At::Sync(_) | At::Fault(libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL) => None,
            _ => return Ok(None),
        };
        // Sent by the program itself and still pending: not sent again; and
        // while the thread blocks it, the thread runs on to where it
        // unblocks it, and its delivery stop is matched as usual.
        let sent = self.pending(i, sig)?;
        let suspends = matches!((entry, &s.interrupted), (Some(e), Some(x)) if e.nr == x.nr && e.nr == libc::SYS_rt_sigsuspend);
        if sent && !suspends && self.blocks(i, sig)? {
            return Ok(None);
        }
        let exact = match (entry, &s.interrupted) {
            (Some(e), Some(x)) if e.nr == x.nr && e.label == label => {
                if suspends {
                    self.suspend(i, sig, sent)?;
                    return self.delivered(i, s, sig, true, false);
                }
                if let Some(mask) = self.wait_mask(i, &e) {
                    self.suspend_as(i, &e, mask, sig, sent)?;
                    if let Some(failure) = self.write_out_buffers(i, &e, x.result, &x.writes)? {
                        return Ok(Some(Step::Fail(failure)));
                    }
                    return self.delivered(i, s, sig, true, false);
                }
                self.interrupt(i, e, Some(x.result))?;
                if let Some(failure) = self.write_out_buffers(i, &e, x.result, &x.writes)? {
                    return Ok(Some(Step::Fail(failure)));
                }
                true
            }
            (Some(e), None) => {
                self.interrupt(i, e, None)?;
                false
            }
            (None, None) if found == Some(true) => {
                self.clear_resume_flag(i)?;
                true
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
        self.delivered(i, s, sig, exact, !sent)
    }

    /// Whether the log's next event is an asynchronous signal to thread
    /// `i` that the recorder placed after a runtime call (no state, the
    /// runtime's label), and the thread stands where that call returns.
    pub(super) fn after_runtime_call(&self, i: usize) -> bool {
        let t = &self.state.threads[i];
        let placed = self.async_signal_due(i).is_some() && placed_after_runtime_call(&self.trace.events[self.state.pos]);
        placed && t.at == At::Ready && t.regs.rip == runtime::BUFFERED_LABEL
    }

    /// Whether thread `i` stands where a runtime call returns, back from a
    /// handler, and its next logged event is a signal the recorder placed
    /// there ([`Self::after_runtime_call`]): it waits there for that
    /// signal's turn. The kernel gave the second signal as the first one's
    /// handler returned (a 1 ms timer at a thread whose handler's calls go
    /// through ptrace); run on, the thread took it at its next stop, out
    /// of the runtime call, where its handler's calls were buffered.
    pub(super) fn waits_for_runtime_signal(&self, i: usize) -> bool {
        self.state.threads[i].regs.rip == runtime::BUFFERED_LABEL && self.next_logged(i).is_some_and(placed_after_runtime_call)
    }

    /// Whether a due signal `s` can reach thread `i`, blocked in a futex
    /// wait: not when the program sent it and the thread blocks it (it runs
    /// on only once it unblocks it, which a blocked thread cannot do).
    pub(super) fn can_interrupt_wait(&self, i: usize, s: &Signal) -> bool {
        let sig = s.signo;
        !(self.pending(i, sig).unwrap_or(true) && self.blocks(i, sig).unwrap_or(true))
    }

    /// Whether thread `i` blocks `sig`.
    fn blocks(&self, i: usize, sig: i32) -> Result<bool> {
        Ok(tracee::sigmask(self.state.threads[i].tid)? & bit(sig) != 0)
    }

    /// Whether `sig` is pending for thread `i` or its process.
    fn pending(&self, i: usize, sig: i32) -> Result<bool> {
        Ok(self.pending_signals(i)? & bit(sig) != 0)
    }

    /// The signals pending for thread `i` or its process, a mask with bit
    /// `signo - 1` (`SigPnd` and `ShdPnd`, [`Session::signal_masks`]).
    /// Errors: the file cannot be read.
    pub(super) fn pending_signals(&self, i: usize) -> Result<u64> {
        Ok(self.signal_masks(i, &["SigPnd:", "ShdPnd:"])?.iter().fold(0, |all, m| all | m))
    }

    /// The signal masks named `keys` (bit `signo - 1`) in thread `i`'s
    /// /proc/PID/task/TID/status (proc(5)), in that order; a missing one
    /// is 0. Errors: the file cannot be read.
    fn signal_masks(&self, i: usize, keys: &[&str]) -> Result<Vec<u64>> {
        let path = format!("/proc/{}/task/{}/status", self.state.procs[self.state.threads[i].proc].pid, self.state.threads[i].tid);
        let status = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
        let mask = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).unwrap_or(0);
        Ok(keys.iter().map(|key| mask(key)).collect())
    }

    /// Brings thread `i` to the delivery stop of `s` (signal `sig`, sent by
    /// weft if `send`) and counts the event as matched.
    /// Clears the resume flag (eflags RF) that the kernel set in thread
    /// `i` at its breakpoint hit, so that the handler's frame does not keep
    /// it: after the handler, the thread goes back to that instruction
    /// with its breakpoint armed again when a second signal hit it there
    /// (two signals back to back), and RF would let it pass unseen (Intel
    /// SDM vol. 3, §18.3.1.1). Errors: ptrace's.
    fn clear_resume_flag(&mut self, i: usize) -> Result<()> {
        const RF: u64 = 1 << 16;
        let t = &mut self.state.threads[i];
        if t.regs.eflags & RF != 0 {
            t.regs.eflags &= !RF;
            ptrace::setregs(t.tid, t.regs)?;
        }
        Ok(())
    }

    fn delivered(&mut self, i: usize, s: &Signal, sig: i32, exact: bool, send: bool) -> Result<Option<Step>> {
        self.raise(i, s, sig, send)?;
        self.disarm_hunt();
        let t = &mut self.state.threads[i];
        self.state.last_delivery = Some(Delivery { rec: t.rec, pc: t.regs.rip, exact });
        t.last_event = Some(self.state.pos);
        t.steps = 0;
        self.next_event();
        self.send_together(i, s)?;
        Ok(Some(Step::Stay))
    }

    /// Thread `i` is about to take `s`, matched: the signal logged next
    /// for it, when the kernel gave it the two together ([`Self::together`]),
    /// is made pending now, and noted, so that a kill that sent it in the
    /// recording, later in the log, is not made again (emulate.rs,
    /// `kill_syscall`). Otherwise the thread would run its handler on to
    /// its next stop (sig2.c: a raise's SIGUSR1, then another thread's
    /// kill's SIGUSR2 at the handler's entry, which the replay delivered
    /// inside a buffered call of the handler instead). The note goes once
    /// that signal is matched. Errors: tgkill's.
    pub(super) fn send_together(&mut self, i: usize, s: &Signal) -> Result<()> {
        let rec = self.state.threads[i].rec;
        self.state.sent_early.remove(&(rec, s.signo));
        if let Some(next) = self.together(i, s) {
            if !self.pending(i, next.signo)? {
                self.send(i, next.signo)?;
                self.state.sent_early.insert((rec, next.signo));
            }
        }
        Ok(())
    }

    /// The signal logged next for thread `i` after `s`, which it is being
    /// given now, when the kernel gave it the two together: both were
    /// pending as the thread left the kernel, so the second came before
    /// the thread ran an instruction. Made pending now, it comes there
    /// again; found later, it would come after the first's handler ran.
    /// `kill(p, SIGTERM); kill(p, SIGCONT)`, as timeout(1) sends them, at
    /// a process blocked in a call. Two ways to tell:
    /// - the second was logged at the first one's handler entry (its
    ///   first argument the first's number, its siginfo and context just
    ///   above the stack pointer);
    /// - the first is ignored and the second interrupted the same call:
    ///   given together or after the kernel restarted the call, the same
    ///   to the program (nothing ran for the first).
    fn together(&self, i: usize, s: &Signal) -> Option<&'a Signal> {
        let trace: &'a weft_record::Trace = self.trace;
        let next = trace.events.get(self.next_event_of(self.state.threads[i].rec))?;
        let EventKind::Signal(second) = &next.kind else { return None };
        if second.synchronous {
            return None;
        }
        let at_handler = second.state.as_ref().is_some_and(|h| {
            let word = |k: usize| h.regs.get(k).copied().unwrap_or(0);
            let near = |addr: u64| (word(REG_RSP)..word(REG_RSP).saturating_add(FRAME_SPAN)).contains(&addr);
            word(REG_RDI) == s.signo as u64 && near(word(REG_RSI)) && near(word(REG_RDX))
        });
        let same_call = matches!((&s.interrupted, &second.interrupted), (Some(a), Some(b)) if a.nr == b.nr && a.result == b.result);
        (at_handler || (same_call && self.ignores(i, s.signo))).then_some(second)
    }

    /// Whether thread `i`'s process ignores `sig`: SIG_IGN (`SigIgn` in
    /// /proc/PID/task/TID/status, proc(5)), or no handler for a signal
    /// whose default action is to ignore it (signal(7)).
    fn ignores(&self, i: usize, sig: i32) -> bool {
        let Ok([ignored, caught]) = self.signal_masks(i, &["SigIgn:", "SigCgt:"]).map(|m| [m[0], m[1]]) else { return false };
        let default_ignored = matches!(sig, libc::SIGCHLD | libc::SIGCONT | libc::SIGURG | libc::SIGWINCH);
        ignored & bit(sig) != 0 || (default_ignored && caught & bit(sig) == 0)
    }

    /// Skips the syscall thread `i` is entering (or blocked in), `e`, and
    /// leaves it at the exit stop as a signal leaves it: with the recorded
    /// restart code (`restart`), or rewound to run the call again after
    /// the handler.
    fn interrupt(&mut self, i: usize, e: Entry, restart: Option<i64>) -> Result<()> {
        if matches!(self.state.threads[i].at, At::Blocked(_)) {
            // The wait is abandoned, as a signal makes futex(2) return.
            self.state.futexes.cancel(i);
        }
        let entry = self.state.threads[i].regs;
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = u64::MAX;
        ptrace::setregs(t.tid, t.regs)?;
        let mut regs = self.execute(i)?;
        match restart {
            Some(code) => {
                regs.rax = code as u64;
                regs.orig_rax = e.nr as u64;
                if code == weft_record::syscalls::ERESTART_RESTARTBLOCK {
                    self.state.threads[i].restart_block = Some(e.nr);
                }
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
    fn suspend(&mut self, i: usize, sig: i32, sent: bool) -> Result<()> {
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        if !sent {
            self.send(i, sig)?;
        }
        match self.wait(tid)? {
            WaitStatus::PtraceSyscall(_) => {}
            other => bail!("thread {tid} did not leave sigsuspend for {}: {other:?}", signal_name(sig)),
        }
        self.state.threads[i].regs = ptrace::getregs(tid)?;
        Ok(())
    }

    /// The address of the signal mask that call `e` of thread `i` waits
    /// with, if it is a wait that takes one (pselect6, ppoll, epoll_pwait,
    /// epoll_pwait2) and it does.
    fn wait_mask(&self, i: usize, e: &Entry) -> Option<u64> {
        let mask = match e.nr {
            // pselect6's last argument points to {mask, size}.
            libc::SYS_pselect6 if e.args[5] != 0 => self.mem(i).read_u64(e.args[5]).ok()?,
            libc::SYS_ppoll => e.args[3],
            libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 => e.args[4],
            _ => 0,
        };
        (mask != 0).then_some(mask)
    }

    /// A wait with a signal mask of its own that a signal interrupted, as
    /// sigsuspend (whose mask the kernel sets and restores around the
    /// delivery in the same way): thread `i`, at the entry of `e`, waits in
    /// rt_sigsuspend with that mask instead, to the signal; then its
    /// registers name the call and its arguments again. Skipping the call
    /// left the signal blocked where the replay delivered it (make blocks
    /// SIGCHLD but in pselect6), and unblocking it changed the program's
    /// mask from there on.
    fn suspend_as(&mut self, i: usize, e: &Entry, mask: u64, sig: i32, sent: bool) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = libc::SYS_rt_sigsuspend as u64;
        t.regs.rdi = mask;
        t.regs.rsi = 8;
        ptrace::setregs(t.tid, t.regs)?;
        self.suspend(i, sig, sent)?;
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = e.nr as u64;
        [t.regs.rdi, t.regs.rsi, t.regs.rdx, t.regs.r10, t.regs.r8, t.regs.r9] = e.args;
        Ok(ptrace::setregs(t.tid, t.regs)?)
    }

    /// Sends `sig` to thread `i` (tgkill).
    fn send(&self, i: usize, sig: i32) -> Result<()> {
        let (pid, tid) = (self.state.procs[self.state.threads[i].proc].pid, self.state.threads[i].tid);
        // SAFETY: tgkill takes three integers.
        Errno::result(unsafe { libc::syscall(libc::SYS_tgkill, pid.as_raw(), tid.as_raw(), sig) })
            .context("tgkill")?;
        Ok(())
    }

    /// Waits for resumed thread `tid`'s next stop, under the watchdog: a
    /// thread that runs on instead (the replay diverged) is stopped after
    /// the livelock timeout rather than waited for for ever.
    fn wait(&self, tid: nix::unistd::Pid) -> Result<WaitStatus> {
        self.watchdog.arm(tid, None);
        let status = waitpid(tid, Some(WaitPidFlag::__WALL));
        self.watchdog.disarm();
        Ok(status?)
    }

    /// Brings thread `i` to the delivery stop of `s`, signal `sig`, sending
    /// it if `send` (not when the program sent it, nor when it reached a
    /// sigsuspend that ran for real), and resumes it there with the
    /// recorded siginfo, which then
    /// delivers it. Any signal the thread was stopped for is dropped: a
    /// fault or an rdtsc trap comes back after the handler. A signal the
    /// thread blocks here that it did not block in the recording (a call
    /// that unblocked it while waiting, ppoll or pselect6 with a mask, was
    /// skipped) is unblocked for the delivery, and the handler returns with
    /// it unblocked: the kernel would requeue a signal blocked again at its
    /// delivery stop. A warning says so.
    fn raise(&mut self, i: usize, s: &Signal, sig: i32, send: bool) -> Result<()> {
        self.settle(i)?;
        let tid = self.state.threads[i].tid;
        // (After sigsuspend, PTRACE_GETSIGMASK reports the mask it restores,
        // and PTRACE_SETSIGMASK would cancel that restore.)
        if send {
            let mask = tracee::sigmask(tid)?;
            if mask & bit(sig) != 0 {
                eprintln!(
                    "weft: warning: event {}: {} is blocked in thread {} where the replay delivers it; it is unblocked from here on",
                    self.state.pos,
                    signal_name(sig),
                    self.state.threads[i].rec
                );
                tracee::set_sigmask(tid, mask & !bit(sig))?;
            }
            self.send(i, sig)?;
        }
        ptrace::syscall(tid, None)?;
        match self.wait(tid)? {
            WaitStatus::Stopped(_, got) if got == sig => {}
            other => bail!("thread {tid} did not stop for {}: {other:?}", signal_name(sig)),
        }
        tracee::set_siginfo_bytes(tid, &s.siginfo)?;
        let t = &mut self.state.threads[i];
        t.regs = ptrace::getregs(tid)?;
        t.at = At::Deliver(sig);
        Ok(())
    }
}

/// Indices of rsp, rdx, rsi and rdi in [`tracee::regs_words`]
/// (`user_regs_struct` order).
const REG_RSP: usize = 19;
const REG_RDX: usize = 12;
const REG_RSI: usize = 13;
const REG_RDI: usize = 14;
/// How far above a handler's stack pointer the kernel puts the siginfo
/// and context it passes (bytes): the signal frame, with its xsave area.
const FRAME_SPAN: u64 = 1 << 14;

/// Signal `sig`'s bit in a kernel signal mask (none for a number that is
/// not a signal's).
fn bit(sig: i32) -> u64 {
    u32::try_from(sig - 1).ok().and_then(|b| 1u64.checked_shl(b)).unwrap_or(0)
}

/// Whether `e` is an asynchronous signal the recorder placed after a
/// runtime call: the runtime's label, and no state to search for.
fn placed_after_runtime_call(e: &weft_record::Event) -> bool {
    e.label == runtime::BUFFERED_LABEL && matches!(&e.kind, EventKind::Signal(s) if !s.synchronous && s.state.is_none() && s.interrupted.is_none())
}
