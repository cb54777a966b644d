//! Single-stepping one thread for the debugger (gdb's `stepi`), on top of
//! the scheduler: the step executes exactly one instruction of the thread.
//! An instruction that is a scheduling point (a `syscall`, the int3 of a
//! pthread synchronization point) goes through the scheduler, which may
//! run other threads first, as the recorded schedule says; the step is
//! done when the thread is next free to run. PTRACE_SINGLESTEP is never
//! used on a `syscall`: the kernel would run it without the replayer's
//! syscall-entry stop.

use super::protect::Fault;
use super::traps::Trapped;
use super::{Advance, Halt, Session};
use crate::remote;
use anyhow::{bail, Result};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{self, waitpid, Resume, WaitStatus};

impl Session<'_> {
    /// Executes one instruction of thread `i` (free to run), or goes
    /// through the scheduling point that instruction is.
    pub(super) fn single_step(&mut self, i: usize) -> Result<Advance> {
        let pc = self.state.threads[i].regs.rip;
        let sync = &self.state.procs[self.state.threads[i].proc].sync;
        let taken = self.state.threads[i].taken == Some(pc) && sync.step_over(pc).is_some();
        if self.state.stepping.take() == Some(i) && !taken {
            return Ok(Advance::Halt(Halt::Stepped(false)));
        }
        let mut code = self.mem(i).read(pc, 2).unwrap_or_default();
        sync.shadow(pc, &mut code);
        if code == remote::SYSCALL_INSN || sync.is_sync(pc) || taken {
            // Ends at the syscall's exit, after the instruction under a
            // taken int3, or at the scheduling point either one is.
            self.state.stepping = Some(i);
            let advanced = self.advance(i, true, true)?;
            if matches!(advanced, Advance::Halt(_)) {
                self.state.stepping = None;
            }
            return Ok(advanced);
        }
        self.switch_runtime_for(i)?;
        let (tid, sig) = self.take_for_resume(i);
        self.state.threads[i].taken = None;
        self.settle(i)?;
        wait::resume(Resume::Step, tid, sig)?;
        match step_status(tid, pc)? {
            WaitStatus::Stopped(_, libc::SIGTRAP) => {
                self.state.threads[i].regs = ptrace::getregs(tid)?;
                match self.debugger_trap(i, true, Some(pc))? {
                    Trapped::Halt(halt) => Ok(Advance::Halt(halt)),
                    _ => Ok(Advance::Halt(Halt::Stepped(true))),
                }
            }
            WaitStatus::Stopped(_, libc::SIGSEGV) if !matches!(self.protected_fault(i)?, Fault::NotOurs) => {
                // A traced access (page protection): stepped over, or the
                // thread held by a race reversal; the step is done when it
                // next runs.
                self.state.stepping = Some(i);
                self.state.threads[i].at = super::At::Ready;
                Ok(Advance::Point)
            }
            WaitStatus::Stopped(_, sig) => {
                // A fault: its scheduling point (the logged signal) comes
                // first; the step ends in the handler, or at the end.
                self.state.stepping = Some(i);
                self.faulted(i, sig)
            }
            WaitStatus::PtraceEvent(..) | WaitStatus::Exited(..) | WaitStatus::Signaled(..) => self.ended(i),
            other => bail!("unexpected stop of thread {tid} in a single step: {other:?}"),
        }
    }
}

/// The stop that ends a single step of thread `tid` from `pc`. A thread
/// resumed from a stop inside a syscall (the exec stop a replay starts
/// at) reports the step on its way out of the kernel, before any
/// instruction ran (x86's `user_single_step_report`: SIGTRAP with
/// TRAP_BRKPT, not the debug exception's TRAP_TRACE), so it is stepped
/// once more. Errors: ptrace.
fn step_status(tid: nix::unistd::Pid, pc: u64) -> Result<WaitStatus> {
    let status = waitpid(tid, Some(WaitPidFlag::__WALL))?;
    let trap = matches!(status, WaitStatus::Stopped(_, libc::SIGTRAP));
    if trap && ptrace::getregs(tid)?.rip == pc && ptrace::getsiginfo(tid)?.si_code == libc::TRAP_BRKPT {
        wait::resume(Resume::Step, tid, None)?;
        return Ok(waitpid(tid, Some(WaitPidFlag::__WALL))?);
    }
    Ok(status)
}
