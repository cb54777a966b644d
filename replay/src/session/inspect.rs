//! What the interactive session reads and writes of a stopped replay:
//! its threads, their registers, the process's memory (with weft's int3s
//! hidden) and auxv, and where the scheduler's loop stands.

use super::{At, Session};
use anyhow::{anyhow, Context, Result};
use nix::sys::ptrace;
use std::os::unix::fs::FileExt;
use weft_record::runtime;
use weft_record::Tid;

impl Session<'_> {
    /// Makes the replay stop before the recorded end and at recorded
    /// signals ([`super::Halt`]), for a debugger.
    pub(crate) fn set_interactive(&mut self) {
        self.interactive = true;
    }

    /// Output events below index `event` are not echoed again.
    pub(crate) fn set_echo_from(&mut self, event: usize) {
        self.opts.echo_from = event;
    }

    /// Scheduling points handled so far (the current segment's index).
    pub(crate) fn points(&self) -> u64 {
        self.state.points
    }

    /// Index of the next log event to match.
    pub(crate) fn event(&self) -> u64 {
        self.state.pos as u64
    }

    /// The recorded tid of the scheduler's current thread.
    pub(crate) fn current(&self) -> Tid {
        self.state.threads[self.cur].rec
    }

    /// The index of live recorded thread `rec`.
    pub(crate) fn thread_index(&self, rec: Tid) -> Option<usize> {
        self.state.by_rec.get(&rec).copied().filter(|&i| self.state.threads[i].at != At::Exited)
    }

    /// The recorded tids of the live threads of the first process (the
    /// one the debugger shows, as rr's does), in creation order.
    pub(crate) fn live_threads(&self) -> Vec<Tid> {
        self.state.threads.iter().filter(|t| t.proc == 0 && t.at != At::Exited).map(|t| t.rec).collect()
    }

    /// The kernel's id of the task that replays live recorded thread
    /// `rec`; `None` when there is no such live thread.
    pub(crate) fn task_id(&self, rec: Tid) -> Option<i32> {
        self.live(rec).ok().map(|t| t.tid.as_raw())
    }

    fn live(&self, rec: Tid) -> Result<&super::Thread> {
        let i = self.thread_index(rec).ok_or_else(|| anyhow!("no live thread {rec}"))?;
        Ok(&self.state.threads[i])
    }

    /// Thread `rec`'s pc at its current stop (no ptrace call: the engine
    /// keeps every stopped thread's registers). Errors: no such live thread.
    pub(crate) fn pc(&self, rec: Tid) -> Result<u64> {
        Ok(self.live(rec)?.regs.rip)
    }

    /// Thread `rec`'s general and x87/SSE registers. Errors: no such live
    /// thread, ptrace.
    pub(crate) fn registers(&self, rec: Tid) -> Result<(libc::user_regs_struct, libc::user_fpregs_struct)> {
        let t = self.live(rec)?;
        let mut fp: libc::user_fpregs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: PTRACE_GETFPREGS fills a user_fpregs_struct.
        let r = unsafe { libc::ptrace(libc::PTRACE_GETFPREGS, t.tid.as_raw(), 0, &mut fp as *mut _) };
        nix::errno::Errno::result(r).context("PTRACE_GETFPREGS")?;
        Ok((self.shown_regs(rec, t), fp))
    }

    /// The registers a debugger is shown for thread `t`: its own, except
    /// for a thread other than the current one that stands in the runtime's
    /// code page (at the `ret` after one of its `syscall` sites, waiting
    /// for its turn in the log), which is shown as if that `ret` had run:
    /// the page has no unwind information, so a backtrace from it would
    /// end there, while from its caller (the runtime's library, then the
    /// program) it reaches the program's frames.
    fn shown_regs(&self, rec: Tid, t: &super::Thread) -> libc::user_regs_struct {
        let mut regs = t.regs;
        let site = regs.rip.wrapping_sub(runtime::SYSCALL_LEN);
        let at_site = [runtime::SITE_PRIVATE, runtime::SITE_BUFFERED, runtime::SITE_CTL].contains(&site);
        let mem = &self.state.procs[t.proc].mem;
        let at_ret = mem.read(regs.rip, 1).ok().as_deref() == Some(&[0xc3][..]);
        if rec != self.state.threads[self.cur].rec && at_site && at_ret {
            if let Ok(ret) = mem.read_u64(regs.rsp) {
                regs.rip = ret;
                regs.rsp += 8;
            }
        }
        regs
    }

    /// Sets thread `rec`'s registers. Errors: no such live thread, ptrace.
    pub(crate) fn set_registers(&mut self, rec: Tid, regs: &libc::user_regs_struct, fp: &libc::user_fpregs_struct) -> Result<()> {
        let i = self.thread_index(rec).ok_or_else(|| anyhow!("no live thread {rec}"))?;
        let t = &mut self.state.threads[i];
        ptrace::setregs(t.tid, *regs)?;
        // SAFETY: PTRACE_SETFPREGS reads a user_fpregs_struct.
        let r = unsafe { libc::ptrace(libc::PTRACE_SETFPREGS, t.tid.as_raw(), 0, fp as *const _) };
        nix::errno::Errno::result(r).context("PTRACE_SETFPREGS")?;
        t.regs = *regs;
        // Its pc may have moved off a breakpoint it stopped at.
        t.taken = None;
        t.reported = None;
        Ok(())
    }

    /// Reads memory at `addr` into `buf` as the program sees it; returns
    /// the bytes read (fewer at an unmapped page).
    pub(crate) fn read_memory(&self, addr: u64, buf: &mut [u8]) -> usize {
        let mut done = 0;
        while done < buf.len() {
            // Page by page, so that a read ending in an unmapped page
            // returns what precedes it.
            let at = addr + done as u64;
            let page_end = ((at | 0xfff) + 1).min(addr + buf.len() as u64);
            let want = (page_end - at) as usize;
            match self.root().mem.read(at, want) {
                Ok(bytes) => buf[done..done + want].copy_from_slice(&bytes),
                Err(_) => break,
            }
            done += want;
        }
        self.root().sync.shadow(addr, &mut buf[..done]);
        done
    }

    /// Writes `data` at `addr` (through /proc/PID/mem, as ptrace pokes
    /// would). Errors: unmapped.
    pub(crate) fn write_memory(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.root().mem.write(addr, data)
    }

    /// The process's auxiliary vector. Errors: /proc unreadable.
    pub(crate) fn auxv(&self) -> Result<Vec<u8>> {
        let f = std::fs::File::open(format!("/proc/{}/auxv", self.live(self.current())?.tid))?;
        let mut buf = vec![0u8; 4096];
        let n = f.read_at(&mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Ends the replayed process (no tracee is left behind).
    pub(crate) fn end(&mut self) {
        if !self.ended {
            self.kill();
        }
    }
}

impl Drop for Session<'_> {
    /// A session dropped before its process ended (an error on the way)
    /// leaves no stopped tracee behind.
    fn drop(&mut self) {
        self.end();
    }
}
