//! Remote syscalls: making a stopped tracee thread execute a syscall of
//! weft's choosing (rr's AutoRemoteSyscalls). Checkpoints use it to fork a
//! tracee and to create threads in the copy.
//!
//! The thread is pointed at a `syscall` instruction already in the
//! tracee (no code is written), run through the syscall's entry and exit
//! stops with PTRACE_SYSCALL, and given its registers back.

use anyhow::{bail, Result};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use weft_record::tracee::{self, Regs};

/// The bytes of x86-64's `syscall` instruction.
pub const SYSCALL_INSN: [u8; 2] = [0x0f, 0x05];

/// What a remote syscall returned.
#[derive(Debug, Clone, Copy)]
pub struct Returned {
    /// The syscall's result (a negative errno on failure).
    pub result: i64,
    /// The process or thread a fork or clone created, stopped at its first
    /// stop (SIGSTOP) and traced by us.
    pub child: Option<Pid>,
}

/// Runs syscall `nr` with `args` in thread `tid`, which must be in a ptrace
/// stop other than a syscall-entry stop, with registers `regs`; `insn` is
/// the address of a `syscall` instruction in its address space. Afterwards
/// the thread is at a syscall-exit stop with `regs` restored. A fork or
/// clone reports its child (PTRACE_O_TRACEFORK / TRACECLONE must be set).
/// Errors: ptrace failures, or a stop other than those a syscall makes.
pub fn syscall(tid: Pid, regs: &Regs, insn: u64, nr: i64, args: &[u64]) -> Result<Returned> {
    let mut call = *regs;
    call.rip = insn;
    call.rax = nr as u64;
    // Not in a syscall: no restart logic may rewrite the pc on resume.
    call.orig_rax = u64::MAX;
    let mut a = [0u64; 6];
    a[..args.len()].copy_from_slice(args);
    [call.rdi, call.rsi, call.rdx, call.r10, call.r8, call.r9] = a;
    ptrace::setregs(tid, call)?;
    let mut child = None;
    loop {
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) if tracee::syscall_stop_kind(tid) == tracee::SYSCALL_INFO_EXIT => break,
            WaitStatus::PtraceSyscall(_) => {}
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_CLONE) => {
                let pid = Pid::from_raw(ptrace::getevent(tid)? as i32);
                match waitpid(pid, Some(WaitPidFlag::__WALL))? {
                    WaitStatus::Stopped(_, libc::SIGSTOP) => child = Some(pid),
                    other => bail!("the new task {pid} did not stop: {other:?}"),
                }
            }
            other => bail!("thread {tid} stopped unexpectedly in a remote {nr}: {other:?}"),
        }
    }
    let result = ptrace::getregs(tid)?.rax as i64;
    ptrace::setregs(tid, *regs)?;
    Ok(Returned { result, child })
}
