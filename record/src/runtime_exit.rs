//! Where an asynchronous signal that hit the in-process runtime's code is
//! delivered, when the thread was outside the runtime's own accounting.
//!
//! A handler's calls are buffered unless the thread is inside a runtime
//! function (its `depth` is 1, weft_runtime.c `enter`). A replay delivers a
//! signal that hit the runtime's code inside the function (where its call
//! starts or ends), so there the handler's calls go through ptrace. A
//! signal that hit the function's entry stub before `enter`, or its return
//! stub after `leave`, found `depth` 0 in the recording: its handler's
//! calls were buffered, and the replay met them through ptrace (a timer
//! signal with `clock_gettime` in its handler, 5 recordings in 5). So such
//! a thread is first single-stepped, to where it is inside the function
//! or back in the program's code, and the signal goes there: the handler
//! then runs alike in the recording and its replay.

use crate::tracee::{Memory, Regs};
use crate::wait::{self, Resume, WaitStatus};
use anyhow::{bail, Result};
use nix::sys::ptrace;
use nix::unistd::Pid;

/// The most instructions stepped (the return stub zeroes 512 bytes of
/// stack with `rep stosb`, a step per byte).
const MAX_STEPS: usize = 4096;

/// The `syscall` instruction: stepping stops before one (a syscall under
/// single-step would stop at the filter, not at the step's trap).
const SYSCALL: [u8; 2] = [0x0f, 0x05];

/// Steps thread `pid` (stopped for an asynchronous signal, with registers
/// `regs`, of process `tgid`) while its runtime `depth` (an i32 at address
/// `depth_at`) is 0 and its pc is in the runtime's code (`in_runtime`),
/// stopping before a syscall or after [`MAX_STEPS`]. Returns its registers
/// where it stopped, `None` when it took no step. A signal that arrives
/// meanwhile (a 1 ms timer's next one) is held back, and sent again
/// (tgkill) once the thread stands where the first goes: it is taken
/// after that one. Errors: ptrace's, or the thread ended while stepped.
pub fn step_into_account(pid: Pid, tgid: Pid, regs: &Regs, depth_at: u64, mem: &Memory, in_runtime: impl Fn(u64) -> bool) -> Result<Option<Regs>> {
    let mut at: Option<Regs> = None;
    let mut held = Vec::new();
    for _ in 0..MAX_STEPS {
        let regs = at.as_ref().unwrap_or(regs);
        let outside = mem.read(depth_at, 4).is_ok_and(|d| d[..] == 0i32.to_le_bytes());
        if !outside || !in_runtime(regs.rip) || mem.read(regs.rip, 2).map_or(true, |code| code[..] == SYSCALL) {
            break;
        }
        wait::resume(Resume::Step, pid, None)?;
        match wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, libc::SIGTRAP) => at = Some(ptrace::getregs(pid)?),
            // Delivered before the step: the step is made again.
            WaitStatus::Stopped(_, other) => held.push(other),
            status => bail!("thread {pid} ended ({status:?}) while weft stepped it out of the in-process runtime"),
        }
    }
    for signo in held {
        // SAFETY: tgkill takes plain numbers.
        unsafe { libc::syscall(libc::SYS_tgkill, tgid.as_raw(), pid.as_raw(), signo) };
    }
    Ok(at)
}
