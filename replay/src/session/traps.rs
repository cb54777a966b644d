//! The debugger's traps in a replay: software breakpoints (int3s shared
//! with the synchronization points, see `sync_points.rs`) and hardware
//! watchpoints in the x86 debug registers of every replayed thread.
//!
//! Debug registers (Intel SDM vol. 3, §18.2): DR0-DR3 hold the watched
//! addresses; DR7 enables each (L0-L3, bits 0, 2, 4, 6) with its R/W
//! condition (bits 16+4n: 01 write, 11 read or write) and length (bits
//! 18+4n: 00 one byte, 01 two, 11 four, 10 eight); DR6 says which one
//! trapped (B0-B3) or that a single step did (BS, bit 14). The trap comes
//! after the accessing instruction. ptrace reaches them through
//! PTRACE_POKEUSER at `offsetof(struct user, u_debugreg)`; they are per
//! thread and not inherited by clone or fork, so a new thread and every
//! thread of a resumed checkpoint get them again.
//!
//! In a log with lock words (`log_index.rs`), the last registers watch
//! them for writes, in every replay of the trace alike (the schedule's
//! synchronization counts depend on it): a write that leaves a word 0 is
//! a release, a synchronization point. The debugger then has the others.

use super::{Halt, Session};
use crate::debug::{WatchKind, Watchpoint};
use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::unistd::Pid;

/// `offsetof(struct user, u_debugreg)` on x86-64 (sys/user.h).
const DEBUGREG_OFFSET: usize = 848;
/// DR6's bits for DR0-DR3 having trapped.
pub(super) const DR6_HITS: u64 = 0xf;
/// DR6's single-step bit.
pub(super) const DR6_STEP: u64 = 1 << 14;

/// The debug registers weft programs: up to four watchpoints, the
/// debugger's, and the lock words watched in the registers left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Watchpoints {
    slots: [Option<Watchpoint>; 4],
    /// Lock words (4 bytes each) to watch for writes, most contended first.
    locks: Vec<u64>,
}

/// Which watched address a thread wrote or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WatchHit {
    /// The debugger's watchpoint in this debug register.
    Debugger(usize),
    /// A lock word, written.
    Lock(u64),
}

impl WatchHit {
    /// The debugger's register, when the hit is the debugger's.
    pub(super) fn debugger_slot(self) -> Option<usize> {
        match self {
            WatchHit::Debugger(slot) => Some(slot),
            WatchHit::Lock(_) => None,
        }
    }
}

impl Watchpoints {
    /// Adds `w`. Errors: no free debug register, a length other than 1,
    /// 2, 4 or 8, or an address not aligned to its length.
    pub(crate) fn add(&mut self, w: Watchpoint) -> Result<()> {
        if !matches!(w.len, 1 | 2 | 4 | 8) || !w.addr.is_multiple_of(u64::from(w.len)) {
            bail!("a hardware watchpoint covers 1, 2, 4 or 8 bytes aligned to its length ({} bytes at {:#x})", w.len, w.addr);
        }
        if self.slots.contains(&Some(w)) {
            return Ok(());
        }
        let ours = self.debugger_slots();
        let Some(free) = self.slots[..ours].iter_mut().find(|s| s.is_none()) else {
            bail!("all {ours} hardware watchpoints (x86 debug registers the replay leaves to the debugger) are in use");
        };
        *free = Some(w);
        Ok(())
    }

    /// Removes `w`; false when it was not set.
    pub(crate) fn remove(&mut self, w: Watchpoint) -> bool {
        let found = self.slots.iter_mut().find(|s| **s == Some(w));
        found.map(|s| *s = None).is_some()
    }

    /// The watchpoint in debug register `slot`.
    pub(crate) fn get(&self, slot: usize) -> Option<Watchpoint> {
        self.slots.get(slot).copied().flatten()
    }

    /// The watchpoints set.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Watchpoint> + '_ {
        self.slots.iter().flatten().copied()
    }

    /// No watchpoint of the debugger's, and `words`, lock words, watched.
    pub(crate) fn for_locks(words: &[u64]) -> Self {
        Watchpoints { slots: [None; 4], locks: words.to_vec() }
    }

    /// No watchpoint of the debugger's, the same lock words.
    pub(crate) fn cleared(&self) -> Watchpoints {
        Watchpoints::for_locks(&self.locks)
    }

    /// How many debug registers the debugger has: those the lock words
    /// leave.
    fn debugger_slots(&self) -> usize {
        4 - self.locks.len()
    }

    /// Whether any debug register is programmed.
    pub(crate) fn armed(&self) -> bool {
        self.iter().next().is_some() || !self.locks.is_empty()
    }

    /// The registers the lock words take, the last ones, with their words.
    fn lock_slots(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (self.debugger_slots()..4).zip(self.locks.iter().copied())
    }

    /// DR7 for these watchpoints.
    fn dr7(&self) -> u64 {
        let mut dr7 = 0;
        for (n, w) in self.slots.iter().enumerate() {
            let Some(w) = w else { continue };
            let rw: u64 = match w.kind {
                WatchKind::Write => 0b01,
                WatchKind::Read | WatchKind::Access => 0b11,
            };
            let len: u64 = match w.len {
                1 => 0b00,
                2 => 0b01,
                8 => 0b10,
                _ => 0b11,
            };
            dr7 |= 1 << (2 * n) | rw << (16 + 4 * n) | len << (18 + 4 * n);
        }
        for (n, _) in self.lock_slots() {
            // Writes of 4 bytes.
            dr7 |= 1 << (2 * n) | 0b01 << (16 + 4 * n) | 0b11 << (18 + 4 * n);
        }
        dr7
    }

    /// A debug register no watchpoint uses.
    pub(super) fn free_slot(&self) -> Option<usize> {
        self.free_slots().next()
    }

    /// The debug registers no watchpoint uses.
    pub(super) fn free_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots[..self.debugger_slots()].iter().enumerate().filter(|(_, w)| w.is_none()).map(|(n, _)| n)
    }

    /// Programs thread `tid`'s debug registers. Errors: ptrace refused.
    pub(crate) fn apply(&self, tid: Pid) -> Result<()> {
        self.program(tid, &[], 0)
    }

    /// Programs thread `tid`'s debug registers with these watchpoints and
    /// an execution breakpoint at `addr` in `slot`, a free one (R/W 00,
    /// length 00: it traps before the instruction executes, and the kernel
    /// sets RF so that resuming executes it). Errors: ptrace refused.
    pub(super) fn apply_with_breakpoint(&self, tid: Pid, slot: usize, addr: u64) -> Result<()> {
        self.program(tid, &[(slot, addr)], 0)
    }

    /// Programs thread `tid`'s debug registers with these watchpoints and
    /// one on writes of the 8-byte-aligned word at `addr` in `slot`, a free
    /// one (R/W 01, length 10: it traps after the writing instruction).
    /// Errors: ptrace refused.
    pub(super) fn apply_with_write_watch(&self, tid: Pid, slot: usize, addr: u64) -> Result<()> {
        self.apply_with_write_watches(tid, &[(slot, addr)])
    }

    /// Programs thread `tid`'s debug registers with these watchpoints and
    /// one on writes of each 8-byte-aligned word of `own` (slot, address),
    /// in free registers. Errors: ptrace refused.
    pub(super) fn apply_with_write_watches(&self, tid: Pid, own: &[(usize, u64)]) -> Result<()> {
        let dr7 = own.iter().fold(0, |dr7, &(slot, _)| dr7 | 0b01 << (16 + 4 * slot) | 0b10 << (18 + 4 * slot));
        self.program(tid, own, dr7)
    }

    /// `own`: registers of the replay's own (slot, address), enabled with
    /// `own_dr7`'s R/W and length bits (none: execution breakpoints).
    fn program(&self, tid: Pid, own: &[(usize, u64)], own_dr7: u64) -> Result<()> {
        // DR7 off first: the kernel checks each enabled address as it is set.
        poke(tid, 7, 0)?;
        let locks: Vec<(usize, u64)> = self.lock_slots().collect();
        for (n, w) in self.slots.iter().enumerate() {
            let lock = locks.iter().find(|&&(slot, _)| slot == n).map(|&(_, word)| word);
            let own = own.iter().find(|&&(slot, _)| slot == n).map(|&(_, addr)| addr);
            let addr = match (w, own, lock) {
                (Some(w), _, _) => w.addr,
                (None, Some(addr), _) => addr,
                (None, _, Some(word)) => word,
                _ => 0,
            };
            poke(tid, n, addr)?;
        }
        poke(tid, 7, self.dr7() | own.iter().fold(0, |dr7, &(slot, _)| dr7 | 1 << (2 * slot)) | own_dr7)
    }
}

/// Thread `tid`'s DR6, left as it is. Errors: ptrace.
pub(super) fn peek_dr6(tid: Pid) -> Result<u64> {
    peek(tid, 6)
}

/// Reads and clears thread `tid`'s DR6: the debug registers that trapped
/// (bit n for DRn) and whether a single step did ([`DR6_STEP`]).
pub(super) fn take_dr6(tid: Pid) -> Result<u64> {
    let dr6 = peek(tid, 6)?;
    if dr6 & (DR6_HITS | DR6_STEP) != 0 {
        poke(tid, 6, 0)?;
    }
    Ok(dr6)
}

/// After a single step of thread `tid`: whether a debug register
/// trapped in it too (DR6 left for that trap's handling); else DR6's
/// step bit is cleared. Errors: ptrace.
pub(super) fn stepped_onto_watch(tid: Pid) -> Result<bool> {
    if peek(tid, 6)? & DR6_HITS != 0 {
        return Ok(true);
    }
    take_dr6(tid)?;
    Ok(false)
}

/// Whether thread `tid`'s debug register `slot` trapped (DR6). The bit
/// is not cleared: the kernel clears the DR6 it reports at each debug
/// exception in user mode (since Linux 5.11), and a hit stops here once
/// per loop iteration, so a syscall less counts.
pub(super) fn hit(tid: Pid, slot: usize) -> Result<bool> {
    Ok(peek(tid, 6)? & (1 << slot) != 0)
}

/// Whether thread `tid`'s SIGTRAP came from a debug exception whose DR6
/// named no cause: Linux takes such a #DB for an ICEBP (`int1`) and
/// reports it with si_code TRAP_BRKPT and an empty DR6 (arch/x86/kernel/
/// traps.c, exc_debug_user). Seen under KVM on AMD about once in a million
/// hits of an execution breakpoint: the hit's DR6 bit was lost. An int3
/// reports SI_KERNEL instead, and a single step sets DR6's BS.
/// Errors: ptrace.
pub(super) fn cause_lost(tid: Pid) -> Result<bool> {
    if peek(tid, 6)? & (DR6_HITS | DR6_STEP) != 0 {
        return Ok(false);
    }
    Ok(trap_code(tid)? == libc::TRAP_BRKPT)
}

/// Whether thread `tid`, resumed without single-stepping, stopped with a
/// SIGTRAP from a debug exception that names none of the debug registers
/// in `others` (a bit set per register): the execution breakpoint's own
/// hit, its DR6 bit lost ([`cause_lost`]), with DR6 possibly still saying
/// BS from an earlier single step (the same machines also lose the kernel's
/// clearing of DR6). An int3 or a sent signal has another si_code.
/// Errors: ptrace.
pub(super) fn unexplained_debug_trap(tid: Pid, others: u64) -> Result<bool> {
    if peek(tid, 6)? & others != 0 {
        return Ok(false);
    }
    Ok(matches!(trap_code(tid)?, libc::TRAP_BRKPT | libc::TRAP_TRACE | libc::TRAP_HWBKPT))
}

fn trap_code(tid: Pid) -> Result<i32> {
    let info = nix::sys::ptrace::getsiginfo(tid).with_context(|| format!("read the siginfo of thread {tid}"))?;
    Ok(info.si_code)
}

/// The first debug register DR6 says trapped.
pub(super) fn trapped_slot(dr6: u64) -> Option<usize> {
    (0..4).find(|n| dr6 & (1 << n) != 0)
}

fn offset(reg: usize) -> usize {
    DEBUGREG_OFFSET + 8 * reg
}

fn poke(tid: Pid, reg: usize, value: u64) -> Result<()> {
    // SAFETY: PTRACE_POKEUSER writes one word of the tracee's user area.
    Errno::result(unsafe { libc::ptrace(libc::PTRACE_POKEUSER, tid.as_raw(), offset(reg), value) })
        .with_context(|| format!("set debug register {reg} of thread {tid}"))?;
    Ok(())
}

fn peek(tid: Pid, reg: usize) -> Result<u64> {
    Errno::clear();
    // SAFETY: PTRACE_PEEKUSER reads one word of the tracee's user area.
    let v = unsafe { libc::ptrace(libc::PTRACE_PEEKUSER, tid.as_raw(), offset(reg), 0) };
    if v == -1 && Errno::last() != Errno::UnknownErrno {
        return Err(Errno::last()).with_context(|| format!("read debug register {reg} of thread {tid}"));
    }
    Ok(v as u64)
}

impl Session<'_> {
    /// Sets a debugger breakpoint. Errors: `addr` is not mapped.
    pub(crate) fn add_breakpoint(&mut self, addr: u64) -> Result<()> {
        let root = &mut self.state.procs[0];
        root.sync.set_user(&root.mem, addr)
    }

    /// Removes a debugger breakpoint (none there: nothing happens).
    pub(crate) fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        self.pending_breakpoints.remove(&addr);
        let root = &mut self.state.procs[0];
        root.sync.clear_user(&root.mem, addr)
    }

    /// Makes the debugger breakpoints of this process `wanted`: a
    /// restored checkpoint has those set when it was taken. One whose
    /// address is not mapped yet is set once a file mmap maps it.
    /// Errors: writing the int3s failed.
    pub(crate) fn set_breakpoints(&mut self, wanted: &std::collections::BTreeSet<u64>) -> Result<()> {
        let root = &mut self.state.procs[0];
        let set: Vec<u64> = root.sync.user().collect();
        for addr in set.into_iter().filter(|a| !wanted.contains(a)) {
            root.sync.clear_user(&root.mem, addr)?;
        }
        self.pending_breakpoints.clear();
        for &addr in wanted {
            if !root.sync.is_user(addr) && root.sync.set_user(&root.mem, addr).is_err() {
                self.pending_breakpoints.insert(addr);
            }
        }
        Ok(())
    }

    /// Sets the pending breakpoints whose address is mapped now.
    pub(super) fn insert_pending_breakpoints(&mut self) {
        let root = &mut self.state.procs[0];
        self.pending_breakpoints.retain(|&addr| root.sync.set_user(&root.mem, addr).is_err());
    }

    /// Sets the watchpoints of every live thread to `w`. Errors: ptrace.
    pub(crate) fn set_watchpoints(&mut self, w: &Watchpoints) -> Result<()> {
        self.watchpoints = w.clone();
        // A signal search's breakpoint is armed again in a register left free.
        self.hunt = None;
        for t in self.state.threads.iter().filter(|t| t.at != super::At::Exited) {
            self.watchpoints.apply(t.tid)?;
        }
        Ok(())
    }

    /// The watchpoints set.
    pub(crate) fn watchpoints(&self) -> &Watchpoints {
        &self.watchpoints
    }
}

/// What a SIGTRAP was, as far as the debugger's traps go.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Trapped {
    /// Not the debugger's: a synchronization point's int3, or a real trap.
    No,
    /// A write to this lock word.
    Lock(u64),
    /// The debugger's, not reported (the run passes traps silently).
    Passed,
    /// The debugger's: stop.
    Halt(Halt),
}

impl Session<'_> {
    /// Classifies a SIGTRAP of thread `i`: a watchpoint (DR6), or the
    /// int3 of a debugger breakpoint (backed up over, so the pc is the
    /// breakpoint's address). `stepped_from`: the pc a single step started
    /// at (only an int3 there can have trapped). A breakpoint that shares
    /// its int3 with a synchronization point makes the thread execute the
    /// int3 again when it resumes, so that the point is handled; one of
    /// the debugger's alone is stepped over. `report`: stop for it.
    pub(super) fn debugger_trap(&mut self, i: usize, report: bool, stepped_from: Option<u64>) -> Result<Trapped> {
        // Exploration's hot path (every pthread int3) sets none.
        let sync = &self.state.procs[self.state.threads[i].proc].sync;
        if !self.watchpoints.armed() && sync.user().next().is_none() {
            return Ok(Trapped::No);
        }
        let tid = self.state.threads[i].tid;
        match self.watch_trapped(tid)? {
            Some(WatchHit::Debugger(slot)) => {
                self.state.threads[i].regs = nix::sys::ptrace::getregs(tid)?;
                return Ok(if report { Trapped::Halt(Halt::Watch(slot)) } else { Trapped::Passed });
            }
            Some(WatchHit::Lock(word)) => return Ok(Trapped::Lock(word)),
            None => {}
        }
        let mut regs = nix::sys::ptrace::getregs(tid)?;
        let addr = regs.rip.wrapping_sub(1);
        let sync = &self.state.procs[self.state.threads[i].proc].sync;
        let (is_user, is_sync) = (sync.is_user(addr), sync.is_sync(addr));
        let t = &mut self.state.threads[i];
        let again = t.reported.take() == Some(addr);
        if !is_user || again || stepped_from.is_some_and(|pc| pc != addr) {
            return Ok(Trapped::No);
        }
        regs.rip = addr;
        nix::sys::ptrace::setregs(tid, regs)?;
        t.regs = regs;
        if is_sync {
            t.reported = Some(addr);
        } else {
            t.taken = Some(addr);
        }
        Ok(if report { Trapped::Halt(Halt::Breakpoint) } else { Trapped::Passed })
    }

    /// Thread `i` wrote lock word `word` (a watchpoint trapped after the
    /// write): true when that left it 0, a release, which makes the thread
    /// stop at a synchronization point (`Op::Released`). Errors: ptrace.
    pub(super) fn lock_released(&mut self, i: usize, word: u64) -> Result<bool> {
        if self.mem(i).read_u32(word)? != 0 {
            return Ok(false);
        }
        let t = &mut self.state.threads[i];
        t.regs = nix::sys::ptrace::getregs(t.tid)?;
        t.at = super::At::Sync(crate::sync_points::Op::Released(word));
        Ok(true)
    }

    /// Programs the lock words' watchpoints into every live thread of the
    /// first process (a launch, a resumed checkpoint). Errors: ptrace.
    pub(super) fn arm_lock_watches(&mut self) -> Result<()> {
        if !self.watchpoints.armed() {
            return Ok(());
        }
        for t in self.state.threads.iter().filter(|t| t.proc == 0 && t.at != super::At::Exited) {
            self.watchpoints.apply(t.tid)?;
        }
        Ok(())
    }

    /// The watched address thread `tid` just accessed (read from DR6,
    /// which is cleared). When the machine lost what DR6 said
    /// ([`cause_lost`]), the first debugger watchpoint's, else the first
    /// lock word's: a debug exception with watchpoints set is theirs, gdb
    /// compares the values itself, and a lock word's value is read.
    pub(super) fn watch_trapped(&self, tid: Pid) -> Result<Option<WatchHit>> {
        let w = &self.watchpoints;
        let lock = |slot: usize| w.lock_slots().find(|&(n, _)| n == slot).map(|(_, word)| WatchHit::Lock(word));
        let first = (0..4).find(|&n| w.get(n).is_some()).map(WatchHit::Debugger).or_else(|| w.lock_slots().next().and_then(|(n, _)| lock(n)));
        let Some(first) = first else { return Ok(None) };
        if let Some(slot) = trapped_slot(take_dr6(tid)?) {
            return Ok(if w.get(slot).is_some() { Some(WatchHit::Debugger(slot)) } else { lock(slot) });
        }
        Ok(cause_lost(tid)?.then_some(first))
    }
}
