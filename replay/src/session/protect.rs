//! Page protection in a replay (seed 000 §6, "Intercepting Shared
//! Variable Accesses"): tracing the accesses of a window for fine-grained
//! exploration, and carrying out a schedule's race reversals (§4.3).
//!
//! Protected pages are PROT_NONE in the first process; an access faults
//! (SIGSEGV, SEGV_ACCERR), and the faulting thread is then either held
//! (a reversal's first access: it is disabled before the access) or
//! stepped over the access: the page is opened (readable first, writable
//! if the instruction faults again, which is how a write is told from a
//! read), the thread single-steps, and the page is closed again. One core
//! runs one thread at a time, so opening a page for one instruction lets
//! no other thread's access through. The mprotect calls are remote
//! syscalls (`remote.rs`) made by the thread at hand; work that comes up
//! where no thread can make one waits for the next resume.
//!
//! The kernel's own accesses to a protected page (a syscall the replay
//! executes with a buffer there) fail with EFAULT instead; validation
//! catches what that changes. A checkpoint's fork keeps the pages'
//! protection, and its state ([`Protect`] is part of the replay's) what
//! they mean; a replay that traces accesses takes no checkpoint once
//! its tracing is due. Only the first process's pages are protected: a
//! child it forks in the window inherits them and takes their faults as
//! its own (a limit).

use super::{Session, Step};
use crate::access::{Access, AccessTracing};
use crate::remote;
use crate::schedule::Reversal;
use anyhow::{bail, Result};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use std::collections::{BTreeMap, HashMap};
use weft_record::wait::{self, waitpid, Resume, WaitStatus};
use weft_record::Tid;

/// A page's size (bytes).
const PAGE: u64 = 4096;
/// siginfo's si_code for a fault on a mapped page its protection refused
/// (sigaction(2); the libc crate has no constant for it).
const SEGV_ACCERR: i32 = 2;
/// Single steps over one access at most: a string instruction between
/// two protected pages faults on each before it completes.
const STEPS_PER_ACCESS: usize = 4;

/// Where a reversal stands in this replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its protection has not started.
    Before,
    /// Accesses to its page are counted.
    Counting,
    /// Its held thread is disabled before its access.
    Holding,
    /// Carried out, or dropped.
    Done,
}

/// One reversal of the schedule, as it goes.
#[derive(Debug, Clone)]
struct Live {
    r: Reversal,
    phase: Phase,
    held_count: u64,
    runner_count: u64,
}

impl Live {
    /// Whether its protection starts at synchronization count `sync`.
    fn starts(&self, sync: u64) -> bool {
        self.phase == Phase::Before && self.r.from <= sync
    }
}

/// What the protection did with a thread's SIGSEGV.
pub(super) enum Fault {
    /// Not a protected page's: the program's own fault.
    NotOurs,
    /// Handled; the thread runs on.
    Passed,
    /// Handled; a watchpoint also trapped in the step: the stop goes on
    /// to the debug trap's handling.
    Carry(WaitStatus),
    /// The thread stops here (held, or a runner done with its access):
    /// a scheduling point, where the replay switches.
    Switch,
}

/// The page protection of one replay.
#[derive(Debug, Default, Clone)]
pub(super) struct Protect {
    tracing: Option<AccessTracing>,
    /// Tracing has started (and, once the budget is spent, ended).
    traced: bool,
    accesses: Vec<Access>,
    counts: HashMap<(Tid, u64), u64>,
    reversals: Vec<Live>,
    /// Protected ranges: start → (end, the original protection).
    ranges: BTreeMap<u64, (u64, i32)>,
    /// mprotect calls (start, length, protection) still to make.
    pending: Vec<(u64, u64, i32)>,
    /// The thread a reversal holds (an index), and the one to switch to.
    held: Option<usize>,
    switch_to: Option<usize>,
    /// A held thread's access, counted when it was held: its fault again
    /// at that pc when it resumes is not counted for the reversals again.
    refault: Option<(usize, u64)>,
    /// Pages of reversals just over, to open.
    finished: Vec<u64>,
}

impl Protect {
    /// The protection a replay under `tracing` and `reversals` needs.
    pub(super) fn new(tracing: Option<AccessTracing>, reversals: &[Reversal]) -> Self {
        let mut protect = Self::default();
        protect.adopt(tracing, reversals);
        protect
    }

    /// The protection of a replay under `tracing` and `reversals` that
    /// resumes from a checkpoint holding this one: what had started there
    /// goes on (the checkpoint's schedule up to there is the replay's), the
    /// rest starts when its count comes.
    pub(super) fn adopt(&mut self, tracing: Option<AccessTracing>, reversals: &[Reversal]) {
        if !self.traced {
            self.tracing = tracing;
        }
        let started = |r: &Reversal| self.reversals.iter().find(|l| l.r == *r && l.phase != Phase::Before).cloned();
        let fresh = |r: &Reversal| Live { r: *r, phase: Phase::Before, held_count: 0, runner_count: 0 };
        self.reversals = reversals.iter().map(|r| started(r).unwrap_or_else(|| fresh(r))).collect();
    }

    /// The accesses traced.
    pub(super) fn take_accesses(&mut self) -> Vec<Access> {
        std::mem::take(&mut self.accesses)
    }

    /// Whether protection starts (or mprotect work waits) at
    /// synchronization count `sync`.
    pub(super) fn due(&self, sync: u64) -> bool {
        !self.pending.is_empty() || self.starts(sync)
    }

    /// Whether tracing or a reversal starts at synchronization count `sync`.
    fn starts(&self, sync: u64) -> bool {
        self.tracing_starts(sync) || self.reversals.iter().any(|l| l.starts(sync))
    }

    /// Whether tracing starts at synchronization count `sync`.
    fn tracing_starts(&self, sync: u64) -> bool {
        self.tracing.is_some_and(|t| !self.traced && t.from <= sync)
    }

    /// Starts what synchronization count `sync` reached, in a process
    /// whose writable private mappings are `maps` (start, end,
    /// protection): tracing closes every one but those holding an address
    /// of `open` (threads' stacks and TLS blocks), a reversal its page.
    fn start(&mut self, sync: u64, maps: &[(u64, u64, i32)], open: &[u64]) {
        if self.tracing_starts(sync) {
            self.traced = true;
            for &(start, end, prot) in maps.iter().filter(|&&(s, e, _)| !open.iter().any(|a| (s..e).contains(a))) {
                self.close(start, end, prot);
            }
        }
        for k in 0..self.reversals.len() {
            if !self.reversals[k].starts(sync) {
                continue;
            }
            self.reversals[k].phase = Phase::Counting;
            let page = self.reversals[k].r.page;
            if let Some(&(_, _, prot)) = maps.iter().find(|&&(s, e, _)| (s..e).contains(&page)) {
                self.close(page, page + PAGE, prot);
            }
        }
    }

    /// Whether the replay switches at the current thread's next chance: a
    /// runner made its access, and the held thread goes next, before the
    /// runner runs on (after a debugger stop for a watchpoint the access
    /// hit, too).
    pub(super) fn switch_due(&self) -> bool {
        self.switch_to.is_some()
    }

    /// Whether any memory is closed for tracing or a reversal (a thread
    /// that touches it stops with SIGSEGV).
    pub(super) fn closed_any(&self) -> bool {
        !self.ranges.is_empty() || !self.pending.is_empty()
    }

    /// Whether thread `j` is held by a reversal.
    pub(super) fn holds(&self, j: usize) -> bool {
        self.held == Some(j)
    }

    /// The protected range holding `page`: (start, end, protection).
    fn range_of(&self, page: u64) -> Option<(u64, u64, i32)> {
        let (&start, &(end, prot)) = self.ranges.range(..=page).next_back()?;
        (page < end).then_some((start, end, prot))
    }

    /// Closes `[start, end)` (its original protection `prot`).
    fn close(&mut self, start: u64, end: u64, prot: i32) {
        if self.range_of(start).is_none() {
            self.ranges.insert(start, (end, prot));
            self.pending.push((start, end - start, libc::PROT_NONE));
        }
    }

    /// Opens the protected range holding `page` for good.
    fn open_range(&mut self, page: u64) {
        if let Some((start, end, prot)) = self.range_of(page) {
            self.ranges.remove(&start);
            self.pending.push((start, end - start, prot));
        }
    }

    /// Opens `page` for good (its range split around it).
    fn open_page(&mut self, page: u64) {
        let Some((start, end, prot)) = self.range_of(page) else { return };
        self.ranges.remove(&start);
        if start < page {
            self.ranges.insert(start, (page, prot));
        }
        if page + PAGE < end {
            self.ranges.insert(page + PAGE, (end, prot));
        }
        self.pending.push((page, PAGE, prot));
    }

    /// Whether a page some reversal still counts or holds on is `page`.
    fn reversal_needs(&self, page: u64) -> bool {
        self.reversals.iter().any(|l| l.r.page == page && matches!(l.phase, Phase::Counting | Phase::Holding))
    }

    /// Whether tracing goes on.
    fn tracing_on(&self) -> bool {
        self.traced && self.tracing.is_some_and(|t| self.accesses.len() < t.budget)
    }

    /// A reversal is over: its page is opened unless still needed, once
    /// the access at hand is stepped over ([`Protect::open_finished`]).
    fn finish(&mut self, k: usize) {
        self.reversals[k].phase = Phase::Done;
        self.finished.push(self.reversals[k].r.page);
    }

    /// Opens the pages of the reversals that are over, unless needed.
    fn open_finished(&mut self) {
        for page in std::mem::take(&mut self.finished) {
            if !self.tracing_on() && !self.reversal_needs(page) {
                self.open_page(page);
            }
        }
    }

    /// Tracing's budget is spent: every page not a reversal's is opened.
    fn end_tracing(&mut self) {
        let kept: Vec<(u64, i32)> = self
            .reversals
            .iter()
            .filter(|l| self.reversal_needs(l.r.page))
            .filter_map(|l| self.range_of(l.r.page).map(|(_, _, prot)| (l.r.page, prot)))
            .collect();
        for (start, (end, prot)) in std::mem::take(&mut self.ranges) {
            self.pending.push((start, end - start, prot));
        }
        for (page, prot) in kept {
            self.close(page, page + PAGE, prot);
        }
    }

    /// Thread `i` (recorded `rec`) accesses `page`: counts it for the
    /// reversals; `Some(true)` when it is to be held here, `Some(false)`
    /// when it is a runner whose access ends a reversal (it is stepped
    /// over, then the held thread goes), `None` otherwise.
    fn count_for_reversals(&mut self, i: usize, rec: Tid, page: u64) -> Option<bool> {
        let mut outcome = None;
        for k in 0..self.reversals.len() {
            let (r, phase) = (self.reversals[k].r, self.reversals[k].phase);
            if r.page != page || !matches!(phase, Phase::Counting | Phase::Holding) {
                continue;
            }
            if rec == r.held && phase == Phase::Counting {
                self.reversals[k].held_count += 1;
                if self.reversals[k].held_count != r.held_nth {
                    continue;
                }
                // One thread is held at a time: another reversal's holding
                // drops this one.
                if self.held.is_some() {
                    self.finish(k);
                    continue;
                }
                self.reversals[k].phase = Phase::Holding;
                self.held = Some(i);
                outcome = Some(true);
            } else if rec == r.runner {
                self.reversals[k].runner_count += 1;
                if self.reversals[k].runner_count == r.runner_nth {
                    // Held before it: reversed; else the order was already so.
                    if phase == Phase::Holding {
                        self.switch_to = self.held.take();
                        outcome = Some(false);
                    }
                    self.finish(k);
                }
            }
        }
        outcome
    }

    /// The held thread goes on, its reversal dropped: nothing else can
    /// run (the runner blocked, or ended, before its access).
    pub(super) fn release(&mut self) -> Option<usize> {
        let held = self.held.take()?;
        if let Some(k) = self.reversals.iter().position(|l| l.phase == Phase::Holding) {
            self.finish(k);
        }
        self.open_finished();
        Some(held)
    }
}

impl Session<'_> {
    /// Makes the mprotect calls that are due, and starts protection when
    /// the synchronization count reached it, with thread `i`, about to be
    /// resumed without a signal and in no syscall-entry stop. Only a
    /// thread of the first process can.
    pub(super) fn protect_due(&mut self, i: usize) -> Result<()> {
        if self.state.threads[i].proc != 0 || !self.state.protect.due(self.state.sync_count) {
            return Ok(());
        }
        let Some(insn) = self.state.syscall_insn else { return Ok(()) };
        let sync = self.state.sync_count;
        if self.state.protect.starts(sync) {
            let maps = self.writable_mappings()?;
            self.state.protect.start(sync, &maps, &self.left_open());
        }
        let tid = self.state.threads[i].tid;
        let regs = ptrace::getregs(tid)?;
        for (start, len, prot) in std::mem::take(&mut self.state.protect.pending) {
            mprotect(tid, &regs, insn, start, len, prot)?;
        }
        Ok(())
    }

    /// The writable private mappings of the first process but the
    /// in-process runtime's: (start, end, protection). Errors: /proc
    /// unreadable.
    fn writable_mappings(&self) -> Result<Vec<(u64, u64, i32)>> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.root().pid))?;
        let mut out = Vec::new();
        for line in maps.lines() {
            let mut words = line.split_whitespace();
            let (Some(range), Some(perms)) = (words.next(), words.next()) else { continue };
            let name = words.nth(3).unwrap_or("");
            let Some((start, end)) = range.split_once('-') else { continue };
            let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16)) else { continue };
            let p = perms.as_bytes();
            if p.len() < 4 || p[1] != b'w' || p[2] == b'x' || p[3] != b'p' || name.starts_with('[') && name != "[heap]" {
                continue;
            }
            let prot = if p[0] == b'r' { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_WRITE };
            out.push((start, end, prot));
        }
        let runtime = weft_record::runtime::PAGE..weft_record::runtime::END;
        out.retain(|(start, ..)| !runtime.contains(start));
        Ok(out)
    }

    /// The addresses whose mappings tracing leaves open: every live
    /// thread's stack and TLS block (each thread's own, and every access
    /// would fault).
    fn left_open(&self) -> Vec<u64> {
        let live = self.state.threads.iter().filter(|t| t.proc == 0 && t.at != super::At::Exited);
        live.flat_map(|t| [t.regs.rsp, t.regs.fs_base]).collect()
    }

    /// Handles thread `i`'s SIGSEGV, if a protected page's: the access is
    /// counted and traced, the thread held or stepped over it.
    /// Errors: ptrace.
    pub(super) fn protected_fault(&mut self, i: usize) -> Result<Fault> {
        if self.state.threads[i].proc != 0 || self.state.protect.ranges.is_empty() {
            return Ok(Fault::NotOurs);
        }
        let tid = self.state.threads[i].tid;
        let info = ptrace::getsiginfo(tid)?;
        // SAFETY: a SIGSEGV's siginfo holds a fault address.
        let addr = unsafe { info.si_addr() } as u64;
        let page = addr & !(PAGE - 1);
        if info.si_signo != libc::SIGSEGV || info.si_code != SEGV_ACCERR || self.state.protect.range_of(page).is_none() {
            return Ok(Fault::NotOurs);
        }
        let regs = ptrace::getregs(tid)?;
        self.state.threads[i].regs = regs;
        // A stack or TLS block that came into a protected range after it
        // was closed (a thread started on a cached stack): opened for good.
        for own in [regs.rsp, regs.fs_base] {
            if self.state.protect.range_of(own & !(PAGE - 1)).is_some() {
                self.state.protect.open_range(own & !(PAGE - 1));
            }
        }
        if self.state.protect.range_of(page).is_none() {
            self.protect_due(i)?;
            return Ok(Fault::Passed);
        }
        let rec = self.state.threads[i].rec;
        let again = self.state.protect.refault == Some((i, regs.rip));
        if again {
            self.state.protect.refault = None;
        }
        let decision = if again { None } else { self.state.protect.count_for_reversals(i, rec, page) };
        if decision == Some(true) {
            self.state.protect.refault = Some((i, regs.rip));
            self.state.protect.switch_to = self.state.protect.reversals.iter().find(|l| l.phase == Phase::Holding).and_then(|l| self.state.by_rec.get(&l.r.runner).copied());
            tracing::debug!(tid = rec, page, pc = regs.rip, "race reversal: held before its access");
            self.state.threads[i].at = super::At::Ready;
            return Ok(Fault::Switch);
        }
        let (write, extra, carried) = self.step_over_access(i, page)?;
        self.state.protect.open_finished();
        if self.state.protect.tracing_on() {
            self.trace_access(i, addr, write);
            // The other pages the instruction touched (a string copy's).
            for &(at, wrote) in &extra {
                self.trace_access(i, at, wrote);
            }
            if !self.state.protect.tracing_on() {
                self.state.protect.end_tracing();
            }
        }
        self.protect_due(i)?;
        if let Some(status) = carried {
            return Ok(Fault::Carry(status));
        }
        if decision == Some(false) {
            tracing::debug!(tid = rec, page, "race reversal: the runner made its access");
            self.state.threads[i].regs = ptrace::getregs(tid)?;
            self.state.threads[i].at = super::At::Ready;
            return Ok(Fault::Switch);
        }
        Ok(Fault::Passed)
    }

    /// Logs thread `i`'s access to `addr`, which it made at its pc.
    fn trace_access(&mut self, i: usize, addr: u64, write: bool) {
        let (rec, page) = (self.state.threads[i].rec, addr & !(PAGE - 1));
        let nth = self.state.protect.counts.entry((rec, page)).or_default();
        *nth += 1;
        let pc = self.state.threads[i].regs.rip;
        let access = Access { tid: rec, page, nth: *nth, addr, pc, write, sync: self.state.sync_count, event: self.state.pos };
        self.state.protect.accesses.push(access);
    }

    /// Single-steps thread `i` over its access to protected `page`: opened
    /// readable first, writable when the instruction faults again; another
    /// protected page the instruction touches is opened too. Every page
    /// opened is closed again after the step. An instruction under one of
    /// the replay's int3s (a synchronization point's) is stepped with its
    /// original byte. Returns whether it wrote `page`, where it faulted
    /// on the other protected pages it touched (and whether it wrote
    /// each), and a stop to handle further when a watchpoint trapped in
    /// the step.
    /// Errors: ptrace, or a stop other than the step's or such a fault.
    fn step_over_access(&mut self, i: usize, page: u64) -> Result<(bool, Vec<(u64, bool)>, Option<WaitStatus>)> {
        let tid = self.state.threads[i].tid;
        let Some(insn) = self.state.syscall_insn else { bail!("no syscall instruction known to open a page with") };
        // The thread's registers at its stop, for the remote mprotect
        // calls (which give them back): read again after each step.
        let mut regs = self.state.threads[i].regs;
        // Each page opened: its original protection, whether the
        // instruction wrote it (it faulted with the page readable), and
        // the address it faulted at.
        let mut opened: Vec<(u64, i32, bool, u64)> = Vec::new();
        let Some((_, _, prot)) = self.state.protect.range_of(page) else { bail!("page {page:#x} is not protected") };
        mprotect(tid, &regs, insn, page, PAGE, prot & libc::PROT_READ)?;
        opened.push((page, prot, false, page));
        // Stopped at one of our int3s and stepping the instruction under
        // it (control.rs, step_over_breakpoint): the original byte goes
        // back for the step, the int3 after it.
        let pc = self.state.threads[i].regs.rip;
        let sync = &self.state.procs[self.state.threads[i].proc].sync;
        let under_int3 = match self.state.threads[i].taken.filter(|&t| t == pc).and_then(|_| sync.step_over(pc)) {
            Some(crate::sync_points::StepOver::Step(byte)) => Some(byte),
            _ => None,
        };
        if let Some(byte) = under_int3 {
            self.mem(i).write(pc, &[byte])?;
        }
        let mut status = None;
        for _ in 0..STEPS_PER_ACCESS {
            wait::resume(Resume::Step, tid, None)?;
            let stop = waitpid(tid, Some(WaitPidFlag::__WALL))?;
            regs = ptrace::getregs(tid)?;
            if !matches!(stop, WaitStatus::Stopped(_, libc::SIGSEGV)) {
                status = Some(stop);
                break;
            }
            let info = ptrace::getsiginfo(tid)?;
            // SAFETY: a SIGSEGV's siginfo holds a fault address.
            let addr = unsafe { info.si_addr() } as u64;
            let at = addr & !(PAGE - 1);
            match opened.iter_mut().find(|o| o.0 == at) {
                Some(o) if !o.2 => {
                    o.2 = true;
                    mprotect(tid, &regs, insn, o.0, PAGE, o.1)?;
                }
                Some(_) => bail!("thread {tid} faults on page {at:#x} with it open"),
                None => match self.state.protect.range_of(at) {
                    Some((_, _, prot)) => {
                        mprotect(tid, &regs, insn, at, PAGE, prot & libc::PROT_READ)?;
                        opened.push((at, prot, false, addr));
                    }
                    None => bail!("thread {tid} faulted at {at:#x} while stepping over a traced access"),
                },
            }
        }
        if under_int3.is_some() {
            self.mem(i).write(pc, &[0xcc])?;
            if matches!(status, Some(WaitStatus::Stopped(_, libc::SIGTRAP))) {
                self.state.threads[i].taken = None;
            }
        }
        for &(p, ..) in &opened {
            if self.state.protect.range_of(p).is_some() {
                mprotect(tid, &regs, insn, p, PAGE, libc::PROT_NONE)?;
            }
        }
        let write = opened[0].2;
        let extra = opened[1..].iter().map(|o| (o.3, o.2)).collect();
        match status {
            Some(WaitStatus::Stopped(_, libc::SIGTRAP)) if !super::traps::stepped_onto_watch(tid)? => Ok((write, extra, None)),
            Some(stop @ WaitStatus::Stopped(_, libc::SIGTRAP)) => Ok((write, extra, Some(stop))),
            other => bail!("thread {tid} stopped unexpectedly stepping over a traced access: {other:?}"),
        }
    }

    /// The switch a reversal asks for at thread `i`'s scheduling point:
    /// to the runner once the held thread is disabled, back to the held
    /// thread once the runner made its access.
    /// A held thread itself only switches away.
    pub(super) fn reversal_switch(&mut self, i: usize) -> Option<Step> {
        match self.state.protect.switch_to.take() {
            Some(j) if self.runnable(j) => Some(Step::Switch(Some(j))),
            Some(_) => Some(Step::Switch(None)),
            None => self.state.protect.holds(i).then_some(Step::Switch(None)),
        }
    }
}

/// Makes thread `tid` (at a stop with registers `regs`, given back after)
/// call mprotect(2) on `len` bytes at `start` with `prot`, through the
/// `syscall` instruction at `insn`. A refusal (the program unmapped the
/// range meanwhile) is only logged: the page then simply takes no fault.
/// Errors: ptrace.
fn mprotect(tid: nix::unistd::Pid, regs: &weft_record::tracee::Regs, insn: u64, start: u64, len: u64, prot: i32) -> Result<()> {
    let done = remote::syscall(tid, regs, insn, libc::SYS_mprotect, &[start, len, prot as u64])?;
    if done.result < 0 {
        tracing::debug!(start, len, prot, result = done.result, "mprotect for access tracing failed");
    }
    Ok(())
}
