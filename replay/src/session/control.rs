//! The ptrace control of one tracee thread: resuming it to its next
//! scheduling point, stepping it over weft's breakpoints, completing or
//! skipping the syscall it is entering, and reaping the process at its end.
//! Every tracee thread sits in a ptrace stop except the one resumed here.

use super::protect::Fault;
use super::spin::SpinCheck;
use super::traps::{Trapped, WatchHit};
use super::{Advance, At, Entry, Halt, ProcessEnd, Session, Step};
use crate::checkpoint::AltStack;
use crate::remote;
use crate::sync_points::{Hit, Op, StepOver};
use crate::watchdog::Slice;
use anyhow::{anyhow, bail, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{self, waitpid, Resume, WaitStatus};
use weft_record::{runtime, seccomp};
use weft_record::syscalls::{self, Class};
use nix::unistd::Pid;
use weft_record::tracee::{self, Regs};

/// Slices the log's next thread may run through, each twice as long as
/// the one before, while it computes ([`SpinCheck::Computes`]) before it
/// is set aside as a spinner would be: 200 ms, then 400 and 800 more of
/// its CPU time. A loop the check cannot tell from a computation (one
/// longer than its steps, one that counts) is still set aside, later.
const COMPUTE_SLICES: u32 = 2;

/// eflags' resume flag (RF, bit 16).
const RESUME_FLAG: u64 = 1 << 16;

/// What the program's seccomp filters made of a syscall
/// ([`Session::run_filters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filtered {
    /// The call goes on as without them.
    Passed,
    /// It was not made: it failed with their errno, or was skipped for
    /// an action the replay does not take. The thread is past it.
    Refused,
    /// It was skipped for a SIGSYS, which the log holds next.
    Trapped,
}

/// What stepping over a taken int3 did.
pub(super) enum Over {
    /// There was nothing to step over.
    Nothing,
    /// The instruction under the int3 ran; a watchpoint it accessed.
    Ran(Option<usize>),
    /// The instruction is a `syscall`: the thread is at its entry stop.
    AtEntry(WaitStatus),
    /// A pending signal stopped the thread before the instruction ran.
    Signalled(WaitStatus),
}

impl Session<'_> {
    /// Resumes thread `i` until its next scheduling point, or until a
    /// debugger breakpoint or watchpoint when `traps` (else they are passed
    /// silently). Syscalls that are not scheduling points run (or, for
    /// rseq, fail) on the way. With `one_step`, the first instruction the
    /// thread completes ends the run: a single step of a `syscall` that is
    /// not a scheduling point, or of an int3 (a release's entry, another
    /// thread's return breakpoint) that is not one for this thread.
    pub(super) fn advance(&mut self, i: usize, traps: bool, one_step: bool) -> Result<Advance> {
        let stepped = |watch: Option<usize>| Ok(Advance::Halt(watch.map_or(Halt::Stepped(true), Halt::Watch)));
        self.arm_hunt(i)?;
        // A stop that stepping over a traced access ended in, still to handle.
        let mut carried = None;
        // Slices the log's next thread ran through computing.
        let mut computed = 0;
        loop {
            if carried.is_none() && self.state.protect.switch_due() {
                // A race reversal's runner made its access (a watchpoint
                // the debugger passed hit it too): the held thread goes on
                // before it runs any further.
                self.state.threads[i].regs = ptrace::getregs(self.state.threads[i].tid)?;
                return Ok(Advance::Point);
            }
            self.switch_runtime_for(i)?;
            let (tid, sig) = self.take_for_resume(i);
            let t = &self.state.threads[i];
            let protect = sig.is_none() && self.state.protect.due(self.state.sync_count);
            // Straight from a skipped call to the next syscall's entry: one
            // stop instead of two.
            let sysemu = t.exit_due && sig.is_none() && !one_step && t.taken.is_none() && !protect && carried.is_none();
            if !sysemu && carried.is_none() {
                self.settle(i)?;
            }
            if protect {
                self.protect_due(i)?;
            }
            let over = match carried {
                Some(status) => Over::Signalled(status),
                None if sig.is_none() => self.step_over_breakpoint(i)?,
                None => Over::Nothing,
            };
            carried = None;
            let (status, fired) = match over {
                Over::AtEntry(status) | Over::Signalled(status) => (status, false),
                Over::Ran(watch @ Some(_)) if traps => return stepped(watch),
                Over::Ran(watch) if one_step => return stepped(watch),
                Over::Ran(_) | Over::Nothing => {
                    self.arm_spin_watch(i)?;
                    let turn = self.state.turn_slice.at(self.state.pos);
                    // A signal search's slice is sized to its counter, not
                    // lengthened for a thread that computes.
                    let slice = self.skip_slice(i).or_else(|| {
                        let spin_check = self.spin_check_due(i).then_some(super::PARK_AFTER);
                        let turn = (self.parkable(i) || self.may_spin_aside(i)).then_some(turn).or(spin_check);
                        turn.map(|d| Slice::cpu(d * (1 << computed)))
                    });
                    self.watchdog.arm(tid, slice);
                    if sysemu {
                        self.state.threads[i].exit_due = false;
                        ptrace::sysemu(tid, None)?;
                    } else {
                        wait::resume(Resume::Syscall, tid, sig)?;
                    }
                    let status = waitpid(tid, Some(WaitPidFlag::__WALL));
                    let fired = self.watchdog.disarm();
                    (status?, fired)
                }
            };
            if matches!(status, WaitStatus::Stopped(_, libc::SIGTRAP)) {
                match self.spin_watch_stop(i)? {
                    Some(true) => return Ok(Advance::Point),
                    Some(false) => continue,
                    None => {}
                }
                match self.hunt_stop(i)? {
                    Some(true) => return Ok(Advance::Point),
                    Some(false) => continue,
                    None => {}
                }
            }
            match status {
                WaitStatus::PtraceSyscall(_) => {
                    let regs = ptrace::getregs(tid)?;
                    self.state.threads[i].regs = regs;
                    // A call the runtime made at its BUFFERED site is answered
                    // from the log, never made: PTRACE_SYSEMU skipping it is
                    // what the replay does anyway. Any other is entered again.
                    if sysemu && regs.rip != runtime::BUFFERED_LABEL {
                        self.rewind_to_syscall(i)?;
                        continue;
                    }
                    // PTRACE_SYSEMU reports entries only.
                    if !sysemu && tracee::syscall_stop_kind(tid) == tracee::SYSCALL_INFO_EXIT {
                        self.set_altstack(i, &regs);
                        if one_step {
                            return stepped(None);
                        }
                        // Back from a handler (rt_sigreturn) where a runtime
                        // call returns, with a signal logged there next.
                        if self.waits_for_runtime_signal(i) {
                            self.state.threads[i].at = At::Ready;
                            return Ok(Advance::Point);
                        }
                        continue;
                    }
                    self.state.syscall_insn.get_or_insert(regs.rip - remote::SYSCALL_INSN.len() as u64);
                    let nr = regs.orig_rax as i64;
                    // The program's filters ran before the recorder's, on
                    // the runtime's own requests too.
                    let filtered = self.run_filters(i, &regs)?;
                    if filtered == Filtered::Trapped {
                        return Ok(Advance::Point);
                    }
                    if filtered == Filtered::Refused || self.runtime_call(i, nr, regs.rip)? {
                        if one_step {
                            return stepped(None);
                        }
                        continue;
                    }
                    match syscalls::classify(nr, &tracee::syscall_args(&regs)) {
                        Class::Refused => {
                            self.finish_syscall(i, -libc::ENOSYS as i64)?;
                            if one_step {
                                return stepped(None);
                            }
                        }
                        Class::Execute if self.ran_changed(i, nr, &regs)? => {
                            if one_step {
                                return stepped(None);
                            }
                        }
                        // sched_yield is a yield point (scheduler.rs).
                        Class::Execute if nr != libc::SYS_sched_yield && !self.turns_runtime_off(self.state.threads[i].proc, nr, &tracee::syscall_args(&regs)) => {
                            self.read_altstack(i, &regs)
                        }
                        _ => {
                            let nr = self.restarted(i, nr);
                            let entry = Entry { nr, args: tracee::syscall_args(&regs), label: regs.rip };
                            self.state.threads[i].at = At::Entry(entry);
                            return Ok(Advance::Point);
                        }
                    }
                }
                WaitStatus::Stopped(_, libc::SIGSTOP) if fired => {
                    // Where it spins, for the diagnosis's thread list too.
                    self.state.threads[i].regs = ptrace::getregs(tid)?;
                    // The log's next thread computing for that long (a
                    // regex over a large file) is no livelock.
                    if self.next_owner() == Some(i) && self.check_spin(i)? == SpinCheck::Computes && self.watchdog.computing() {
                        continue;
                    }
                    return Ok(Advance::Livelock(self.state.threads[i].regs.rip));
                }
                WaitStatus::Stopped(_, libc::SIGSTOP) if self.skip_slice(i).is_some() && self.watchdog.sliced(tid) => {
                    self.state.threads[i].regs = ptrace::getregs(tid)?;
                    self.skip_sample(i)?;
                }
                WaitStatus::Stopped(_, libc::SIGSTOP) if self.watchdog.sliced(tid) => {
                    self.state.threads[i].regs = ptrace::getregs(tid)?;
                    let spun = self.next_owner() == Some(i);
                    let check = if spun { self.check_spin(i)? } else { SpinCheck::Unchecked };
                    // What the check found sizes the slices of later parks.
                    match check {
                        SpinCheck::Computes => self.state.turn_slice.computes(),
                        SpinCheck::Known | SpinCheck::Learned => self.state.turn_slice.spins(self.state.pos),
                        SpinCheck::Unchecked => {}
                    }
                    // The log's next thread computes: it reaches its event
                    // by itself, and another thread run now would run
                    // earlier than the log places it (a racy read's
                    // outcome would then hang on the machine's load).
                    // Unless threads are taking turns, it runs on, for a
                    // slice twice as long each time, up to a limit.
                    if check == SpinCheck::Computes && computed < COMPUTE_SLICES && self.state.turn_slice.at(self.state.pos) == super::PARK_AFTER {
                        computed += 1;
                        continue;
                    }
                    self.state.threads[i].at = At::Parked;
                    self.state.threads[i].spun = spun;
                    // Threads taking turns halve the slice; a spin check
                    // (nobody to hand over to) leaves it.
                    if !spun || self.can_hand_over(i) {
                        self.state.turn_slice.parked(self.state.pos);
                    }
                    // A spin on words the replay did not start with, and
                    // no thread to hand over to: the lock's holder ran
                    // past its release before the spin was seen. The
                    // replay starts over with them (Replayer::replay,
                    // ReplaySession::relearned).
                    if check == SpinCheck::Learned && !self.can_hand_over(i) {
                        return Ok(Advance::Livelock(self.state.threads[i].regs.rip));
                    }
                    return Ok(Advance::Point);
                }
                WaitStatus::Stopped(_, libc::SIGTRAP) => match self.debugger_trap(i, traps, None)? {
                    Trapped::Halt(halt) => return Ok(Advance::Halt(halt)),
                    Trapped::Passed => {}
                    Trapped::Lock(word) => {
                        if self.lock_released(i, word)? {
                            return Ok(Advance::Point);
                        }
                    }
                    Trapped::No if self.breakpoint(i)? => {
                        if matches!(self.state.threads[i].at, At::Sync(_)) {
                            return Ok(Advance::Point);
                        }
                    }
                    Trapped::No => return self.faulted(i, libc::SIGTRAP),
                },
                WaitStatus::Stopped(_, libc::SIGSEGV) => match self.protected_fault(i)? {
                    Fault::NotOurs => return self.faulted(i, libc::SIGSEGV),
                    Fault::Passed => {}
                    Fault::Carry(status) => carried = Some(status),
                    Fault::Switch => return Ok(Advance::Point),
                },
                WaitStatus::Stopped(_, sig) => return self.faulted(i, sig),
                // A thread only reaches its exit here when a signal kills
                // the process (exits at scheduling points are handled there).
                WaitStatus::PtraceEvent(..) | WaitStatus::Exited(..) | WaitStatus::Signaled(..) => return self.ended(i),
                other => bail!("unexpected stop of thread {tid}: {other:?}"),
            }
        }
    }

    /// Handles a syscall of the in-process runtime that is not in the log
    /// (weft_runtime.h): its PRIVATE site's calls run for real (they set up
    /// the runtime's own mappings), and its requests (WEFT_NR_CTL) are
    /// answered: this is a replay. True when the call was one of these and
    /// the thread is past it.
    fn runtime_call(&mut self, i: usize, nr: i64, rip: u64) -> Result<bool> {
        let site = rip.wrapping_sub(runtime::SYSCALL_LEN);
        if site == runtime::SITE_PRIVATE {
            self.execute(i)?;
            return Ok(true);
        }
        let (p, args) = (self.state.threads[i].proc, tracee::syscall_args(&self.state.threads[i].regs));
        if nr != runtime::NR_CTL {
            return Ok(false);
        }
        let hello = args[0] == runtime::CTL_HELLO;
        if hello {
            self.state.procs[p].runtime_control = Some(args[3]);
            let proc = &mut self.state.procs[p];
            proc.sync.park(&proc.mem)?;
        }
        self.finish_syscall(i, if hello { runtime::MODE_REPLAY } else { -libc::ENOSYS as i64 })?;
        Ok(true)
    }

    /// Runs thread `i`'s seccomp filters (the program's own,
    /// [`Thread::filters`]) on the syscall it is entering (`regs`), as the
    /// kernel ran them beside the recorder's; a call they refuse never
    /// reached the recorder. One refused with an errno fails the same way
    /// here. One they trap (SECCOMP_RET_TRAP) is skipped with its number
    /// in rax, as the kernel rolls it back, and the thread is left at a
    /// scheduling point, where the log's next event, the SIGSYS the
    /// kernel sent, is delivered. A call at the runtime's BUFFERED site is
    /// the log's to answer. The replay does not kill for a KILL action,
    /// nor hand a call to a USER_NOTIF supervisor: it skips the call and
    /// says so once. Errors: ptrace.
    fn run_filters(&mut self, i: usize, regs: &Regs) -> Result<Filtered> {
        let t = &self.state.threads[i];
        if t.filters.is_empty() || regs.rip == runtime::BUFFERED_LABEL {
            return Ok(Filtered::Passed);
        }
        let data = seccomp::Data { nr: regs.orig_rax as i64, ip: regs.rip, args: tracee::syscall_args(regs) };
        let ret = seccomp::decide(t.filters.iter().map(|f| f.as_ref()), &data);
        if let Some(errno) = seccomp::errno(ret) {
            self.finish_syscall(i, -errno)?;
            return Ok(Filtered::Refused);
        }
        if seccomp::traps(ret) {
            self.finish_syscall(i, data.nr)?;
            return Ok(Filtered::Trapped);
        }
        if seccomp::lets_through(ret) {
            return Ok(Filtered::Passed);
        }
        if !std::mem::replace(&mut self.state.filter_warned, true) {
            let call = syscalls::call_name(data.nr, &data.args);
            eprintln!("weft: warning: event {}: the program's seccomp filter returns {ret:#x} for {call}, an action the replay does not take: the call is skipped (the replay may diverge here)", self.state.pos);
        }
        // Not made, as in the recording.
        self.finish_syscall(i, -libc::ENOSYS as i64)?;
        Ok(Filtered::Refused)
    }

    /// Process `p`'s runtime goes off here, as the recorder turned it off
    /// at the same event: libc's breakpoints are set again. Which of its
    /// threads' calls still take the runtime's path is
    /// [`Session::runtime_disabled_for`]'s. Errors: writing the process's
    /// memory.
    pub(super) fn runtime_off(&mut self, p: usize) -> Result<()> {
        let pos = self.state.pos.saturating_sub(1);
        let proc = &mut self.state.procs[p];
        proc.runtime_off_at.get_or_insert(pos);
        proc.sync.unpark(&proc.mem)
    }

    /// Whether process `p`'s runtime said hello and is not off.
    pub(super) fn runtime_on(&self, p: usize) -> bool {
        self.state.procs[p].runtime_control.is_some() && self.state.procs[p].runtime_off_at.is_none()
    }

    /// Whether syscall `nr` with `args`, made in process `p`, turns its
    /// runtime off, as the recorder judged it (and so logged it, even when
    /// its class is otherwise executed unlogged): [`runtime::turns_off`],
    /// while the runtime is on.
    pub(super) fn turns_runtime_off(&self, p: usize, nr: i64, args: &[u64; 6]) -> bool {
        runtime::turns_off(nr, args) && self.runtime_on(p)
    }

    /// Whether thread `i`'s runtime is to be off for its run to its next
    /// event. The recorder turned a process's runtime off with one write
    /// of its `disabled` flag, after the event that did it
    /// (log_index.rs); each other thread saw the flag at its next call
    /// into the runtime, whenever that came. So, once the log is past that
    /// event, a thread's calls take the runtime's path exactly while its
    /// next event is one the runtime logged (its BUFFERED label): the
    /// flag is set per thread, before it runs, from the log. A replay
    /// thread may run to its next call before the replay reaches the
    /// event in the log, so that event is looked up among the log's.
    fn runtime_disabled_for(&self, i: usize) -> bool {
        let p = self.state.threads[i].proc;
        let proc = &self.state.procs[p];
        if proc.runtime_control.is_none() || (proc.runtime_off_at.is_none() && self.log.runtime_off().is_empty()) {
            return false;
        }
        let next = self.next_event_of(self.state.threads[i].rec);
        let in_this_process = |&&(_, tid): &&(usize, weft_record::Tid)| self.thread_index(tid).is_some_and(|j| self.state.threads[j].proc == p);
        let off_at = proc.runtime_off_at.or_else(|| self.log.runtime_off().iter().find(in_this_process).map(|&(at, _)| at));
        off_at.is_some_and(|at| at < next)
            && self.trace.events.get(next).is_none_or(|e| e.label != runtime::BUFFERED_LABEL)
    }

    /// Writes thread `i`'s process's runtime `disabled` flag as
    /// [`Session::runtime_disabled_for`] says, when it differs (always,
    /// in a process that shares its memory with another). Errors:
    /// writing the process's memory.
    pub(super) fn switch_runtime_for(&mut self, i: usize) -> Result<()> {
        let disabled = self.runtime_disabled_for(i);
        let proc = &mut self.state.procs[self.state.threads[i].proc];
        if let Some(control) = proc.runtime_control.filter(|_| proc.shares_vm || proc.runtime_disabled != disabled) {
            proc.mem.write(control, &(disabled as u32).to_le_bytes())?;
            proc.runtime_disabled = disabled;
        }
        Ok(())
    }

    /// Whether thread `i` may be parked ([`At::Parked`]) if it runs too
    /// long: the thread of the log's next event is another one that can
    /// run now, or one of `i`'s process that was set aside, which runs
    /// again once `i` is (on one core, a thread that computes for long
    /// after its last event, with no scheduling point on the way, would
    /// hold it up; in the recording both ran at once; and two threads of
    /// a process that spin on each other's unlogged writes, Redis's main
    /// and I/O threads, take turns).
    pub(super) fn parkable(&self, i: usize) -> bool {
        self.next_owner().is_some_and(|j| j != i && (self.runnable(j) || self.parked_fellows(i).any(|k| k == j)))
    }

    /// Whether thread `i`, whose own event is the log's next, may be set
    /// aside if it runs too long ([`super::Thread::spun`]): another
    /// thread of its process can run or was set aside, which may have
    /// unlogged work left that `i` waits for.
    fn may_spin_aside(&self, i: usize) -> bool {
        self.next_owner() == Some(i) && self.can_hand_over(i)
    }

    /// Whether thread `i`, whose own event is the log's next, is set
    /// aside after a full slice to see whether it spins (spin.rs) while
    /// no thread can take over: another thread of its process waits at
    /// its next event for its turn, and may hold what `i` spins on.
    fn spin_check_due(&self, i: usize) -> bool {
        self.next_owner() == Some(i) && self.fellow_waits_for_its_turn(i)
    }

    /// Whether another thread of `i`'s process can run, or was set aside.
    fn can_hand_over(&self, i: usize) -> bool {
        self.fellows(i).next().is_some() || self.parked_fellows(i).next().is_some()
    }

    /// Whether another thread of `i`'s process waits at its next event
    /// for its turn in the log (it may hold a lock it took again after
    /// its last event, which only a replay that knows `i`'s spin words
    /// hands over in time).
    fn fellow_waits_for_its_turn(&self, i: usize) -> bool {
        self.others_of_process(i).any(|k| matches!(self.state.threads[k].at, At::Entry(_) | At::Fault(_)))
    }

    /// Thread `i` is about to be resumed: its tid, and the signal to
    /// deliver as it resumes, if one is due; it is `Ready` from now on.
    pub(super) fn take_for_resume(&mut self, i: usize) -> (Pid, Option<i32>) {
        let t = &mut self.state.threads[i];
        let sig = match t.at {
            At::Deliver(s) => Some(s),
            _ => None,
        };
        t.at = At::Ready;
        t.caller = None;
        t.waits_after = None;
        (t.tid, sig)
    }

    /// Resumed thread `i` reported its exit or its process's: a signal
    /// killed the process (exits at scheduling points are handled there).
    /// The replay ends with the tree's last process.
    pub(super) fn ended(&mut self, i: usize) -> Result<Advance> {
        let _ = ptrace::cont(self.state.threads[i].tid, None);
        match self.process_ended(self.state.threads[i].proc)? {
            Step::End(end) => Ok(Advance::End(end)),
            _ => Ok(Advance::Point),
        }
    }

    /// Thread `i` stopped for signal `sig`: a scheduling point.
    pub(super) fn faulted(&mut self, i: usize, sig: i32) -> Result<Advance> {
        self.state.threads[i].regs = ptrace::getregs(self.state.threads[i].tid)?;
        self.state.threads[i].at = At::Fault(sig);
        Ok(Advance::Point)
    }

    /// The syscall thread `i` makes when it enters syscall `nr`: a
    /// restart_syscall is the call it resumes (the thread's `restart_block`),
    /// unless the log has the restart_syscall itself (recorded before
    /// weft logged it so).
    fn restarted(&mut self, i: usize, nr: i64) -> i64 {
        if nr != libc::SYS_restart_syscall {
            return nr;
        }
        let Some(call) = self.state.threads[i].restart_block.take() else { return nr };
        let logs_restart = self.next_logged(i).is_some_and(|e| matches!(&e.kind, weft_record::EventKind::Syscall(s) if s.nr == nr));
        if logs_restart { nr } else { call }
    }

    /// At the entry of a syscall thread `i` executes (`regs`): a
    /// sigaltstack with a new stack has it read now, before the call
    /// overwrites the buffer with the old one (both may be one buffer).
    pub(super) fn read_altstack(&mut self, i: usize, regs: &Regs) {
        if regs.orig_rax as i64 != libc::SYS_sigaltstack || regs.rdi == 0 {
            return;
        }
        let word = |k: u64| self.mem(i).read_u64(regs.rdi + 8 * k).ok();
        let (Some(sp), Some(flags), Some(size)) = (word(0), word(1), word(2)) else { return };
        let flags = flags as u32;
        let stack = (flags & libc::SS_DISABLE as u32 == 0).then_some(AltStack { sp, flags, size });
        self.state.threads[i].altstack_call = Some(stack);
    }

    /// At the entry of thread `i`'s executed syscall `nr` (`regs`): runs
    /// it here with arguments the replay changes, if it changes any
    /// ([`Session::madvise`], [`Session::mmap_private`]); returns whether
    /// it did. Errors: ptrace.
    fn ran_changed(&mut self, i: usize, nr: i64, regs: &Regs) -> Result<bool> {
        match nr {
            libc::SYS_madvise => self.madvise(i, regs),
            libc::SYS_mmap => self.mmap_private(i, regs),
            _ => Ok(false),
        }
    }

    /// At the entry of thread `i`'s madvise (`regs`): the advice that
    /// would keep memory out of a fork is changed or noted, since
    /// checkpoints are forks (madvise(2)). MADV_DONTFORK becomes
    /// MADV_DOFORK: V8 (node) marks its heap so, and a checkpoint without
    /// the heap crashes when resumed; the program's own fork children
    /// then inherit memory they could not touch in the recording (they
    /// would have faulted). MADV_WIPEONFORK runs as asked (a child may
    /// check for the zeros, as fork-safe random generators do), and the
    /// process takes no more checkpoints. Returns whether the call was
    /// run here (to its exit, with the program's rdx given back).
    /// Errors: ptrace.
    fn madvise(&mut self, i: usize, regs: &Regs) -> Result<bool> {
        match regs.rdx as i32 {
            libc::MADV_DONTFORK => {
                let entry = Entry { nr: libc::SYS_madvise, args: tracee::syscall_args(regs), label: regs.rip };
                self.execute_changed(i, &entry, |r| r.rdx = libc::MADV_DOFORK as u64)?;
                return Ok(true);
            }
            libc::MADV_WIPEONFORK => {
                let p = self.state.threads[i].proc;
                self.state.procs[p].wipe_on_fork = true;
            }
            _ => {}
        }
        Ok(false)
    }

    /// At the entry of thread `i`'s anonymous mmap (`regs`): a shared one
    /// is made private when no fork is to come ([`Session::shared_mapping`]),
    /// so that the process can still take checkpoints (forks, which would
    /// share it). Returns whether the call was run here (to its exit, with
    /// the program's r10 given back). Errors: ptrace.
    fn mmap_private(&mut self, i: usize, regs: &Regs) -> Result<bool> {
        let flags = regs.r10;
        if flags & libc::MAP_ANONYMOUS as u64 == 0 || flags & libc::MAP_SHARED as u64 == 0 || self.shared_mapping(flags) {
            return Ok(false);
        }
        let entry = Entry { nr: libc::SYS_mmap, args: tracee::syscall_args(regs), label: regs.rip };
        self.execute_changed(i, &entry, |r| r.r10 = private(flags))?;
        Ok(true)
    }

    /// Whether a mapping with mmap flags `flags`, made at the log's
    /// current position, is shared in the replay: made MAP_SHARED, and
    /// the log forks a process later, whose child may share it (mmap(2)).
    /// Otherwise no other process sees its pages, and a private mapping
    /// behaves the same for the program.
    pub(super) fn shared_mapping(&self, flags: u64) -> bool {
        flags & libc::MAP_SHARED as u64 != 0 && self.log.forks_from(self.state.pos)
    }

    /// At the exit of a syscall thread `i` executed (`regs`): a successful
    /// sigaltstack sets or disables the stack read at its entry
    /// (sigaltstack(2)), which checkpoints restore.
    pub(super) fn set_altstack(&mut self, i: usize, regs: &Regs) {
        let t = &mut self.state.threads[i];
        if let Some(stack) = t.altstack_call.take() {
            if regs.orig_rax as i64 == libc::SYS_sigaltstack && regs.rax == 0 {
                t.altstack = stack;
            }
        }
    }

    /// Thread `i` stopped with SIGTRAP: if one of our breakpoints did it,
    /// back its pc up over the int3 and say whether this is a
    /// synchronization point for it (`at` becomes Sync) or not (Ready).
    pub(super) fn breakpoint(&mut self, i: usize) -> Result<bool> {
        let t = &mut self.state.threads[i];
        let mut regs = ptrace::getregs(t.tid)?;
        let p = &mut self.state.procs[t.proc];
        let Some(hit) = p.sync.hit(&p.mem, i, &regs)? else { return Ok(false) };
        let pc = regs.rip.wrapping_sub(1);
        regs.rip = pc;
        ptrace::setregs(t.tid, regs)?;
        t.regs = regs;
        t.taken = Some(pc);
        t.at = match hit {
            Hit::Sync(op) => At::Sync(op),
            Hit::Entered | Hit::Passing => At::Ready,
        };
        if self.state.sync_trace.wanted() && matches!(hit, Hit::Sync(Op::Acquire(_))) {
            t.caller = p.mem.read_u64(regs.rsp).ok();
        }
        Ok(true)
    }

    /// A thread resuming at one of our int3s that stopped it first
    /// executes the original instruction alone (the other threads are
    /// stopped, so none can miss the breakpoint meanwhile). A `syscall`
    /// instruction is not single-stepped, which would run it without its
    /// entry stop: the thread is run to that stop instead.
    pub(super) fn step_over_breakpoint(&mut self, i: usize) -> Result<Over> {
        let (tid, pc) = (self.state.threads[i].tid, self.state.threads[i].regs.rip);
        if self.state.threads[i].taken.take() != Some(pc) {
            return Ok(Over::Nothing);
        }
        let byte = match self.state.procs[self.state.threads[i].proc].sync.step_over(pc) {
            None => return Ok(Over::Nothing),
            Some(StepOver::Skip(len)) => {
                self.state.threads[i].regs.rip += len;
                ptrace::setregs(tid, self.state.threads[i].regs)?;
                return Ok(Over::Ran(None));
            }
            Some(StepOver::Step(byte)) => byte,
        };
        if self.hunt_at(i, pc) {
            // The search's breakpoint shares the address: it trapped before
            // the int3 did (that hit was examined), so the step must not
            // trap on it again. RF suppresses instruction breakpoints for
            // one instruction (Intel SDM vol. 3, §18.3.1.1).
            self.state.threads[i].regs.eflags |= RESUME_FLAG;
            ptrace::setregs(tid, self.state.threads[i].regs)?;
        }
        let mem = self.mem(i);
        let syscall = byte == remote::SYSCALL_INSN[0] && mem.read(pc + 1, 1).is_ok_and(|b| b[0] == remote::SYSCALL_INSN[1]);
        mem.write(pc, &[byte])?;
        if syscall {
            ptrace::syscall(tid, None)?;
        } else {
            ptrace::step(tid, None)?;
        }
        let status = waitpid(tid, Some(WaitPidFlag::__WALL))?;
        self.mem(i).write(pc, &[0xcc])?;
        match status {
            WaitStatus::PtraceSyscall(_) if syscall => Ok(Over::AtEntry(status)),
            WaitStatus::Stopped(_, libc::SIGTRAP) if !syscall => {
                self.state.threads[i].regs = ptrace::getregs(tid)?;
                // A lock word written in the step is no release point: the
                // step is the scheduler's, not the program's choice.
                Ok(Over::Ran(self.watch_trapped(tid)?.and_then(WatchHit::debugger_slot)))
            }
            WaitStatus::Stopped(_, sig) if sig != libc::SIGTRAP => self.signalled_over(i, pc, status),
            other => bail!("thread {tid} did not step over a breakpoint: {other:?}"),
        }
    }

    /// Thread `i`, resumed to step over the int3 at `pc`, stopped instead
    /// for a signal that was pending (another thread's tgkill, a timer):
    /// the kernel delivers pending signals on the way back to user mode,
    /// before the instruction runs. The stop is a scheduling point like any
    /// signal stop, so the signal is matched and delivered as recorded; the
    /// instruction is stepped over when the thread next resumes without a
    /// signal, or, after a handler, when the thread comes back to the int3.
    fn signalled_over(&mut self, i: usize, pc: u64, status: WaitStatus) -> Result<Over> {
        let regs = ptrace::getregs(self.state.threads[i].tid)?;
        self.state.threads[i].regs = regs;
        if regs.rip == pc {
            self.state.threads[i].taken = Some(pc);
        }
        Ok(Over::Signalled(status))
    }

    /// Skips the syscall thread `i` is entering and makes it return
    /// `result`: both are set at the entry stop (the kernel leaves rax
    /// alone for syscall -1), and the exit stop is left due
    /// ([`Thread::exit_due`]). Errors: ptrace.
    pub(super) fn finish_syscall(&mut self, i: usize, result: i64) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = u64::MAX;
        t.regs.rax = result as u64;
        ptrace::setregs(t.tid, t.regs)?;
        t.at = At::Ready;
        t.exit_due = true;
        Ok(())
    }

    /// Takes the exit stop of the syscall thread `i` skipped, when it is
    /// due ([`Thread::exit_due`]): before the thread is stepped, given a
    /// signal, made to run a syscall of weft's, or forked. Errors: ptrace,
    /// a stop other than that exit.
    pub(super) fn settle(&mut self, i: usize) -> Result<()> {
        let t = &mut self.state.threads[i];
        if !std::mem::take(&mut t.exit_due) || matches!(t.at, At::Exited) {
            return Ok(());
        }
        let tid = t.tid;
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) => Ok(()),
            other => bail!("thread {tid} did not leave the syscall the replay skipped: {other:?}"),
        }
    }

    /// Points thread `i`, stopped at a syscall's entry under
    /// PTRACE_SYSEMU, back at its `syscall` instruction with the call's
    /// number, so that resuming it with PTRACE_SYSCALL reports the exit of
    /// the skipped call, then enters the call again as an ordinary entry
    /// (a pending signal is delivered in between, as before a call that
    /// was not made). Errors: ptrace.
    fn rewind_to_syscall(&mut self, i: usize) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.rip -= remote::SYSCALL_INSN.len() as u64;
        t.regs.rax = t.regs.orig_rax;
        t.regs.orig_rax = u64::MAX;
        Ok(ptrace::setregs(t.tid, t.regs)?)
    }

    /// Runs the syscall thread `i` is entering to its exit stop (skips it,
    /// when orig_rax is -1). A call at the runtime's BUFFERED site is
    /// never run (its entry may be PTRACE_SYSEMU's, which would skip it):
    /// an internal error. Errors: ptrace, another stop.
    pub(super) fn execute(&mut self, i: usize) -> Result<Regs> {
        let tid = self.state.threads[i].tid;
        self.execute_unless_spawned(i)?.ok_or_else(|| anyhow!("thread {tid} did not complete its syscall: it created a task"))
    }

    /// [`Self::execute`], for a call that may create a task: `None` when
    /// it did (its PTRACE_EVENT_CLONE, FORK or VFORK stop came first, and
    /// the thread is left there).
    pub(super) fn execute_unless_spawned(&mut self, i: usize) -> Result<Option<Regs>> {
        let regs = &self.state.threads[i].regs;
        if regs.rip == runtime::BUFFERED_LABEL && regs.orig_rax != u64::MAX {
            bail!("internal error: running syscall {} made at the runtime's BUFFERED site, which the log answers", regs.orig_rax as i64);
        }
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) => {}
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK) => return Ok(None),
            other => bail!("thread {tid} did not complete its syscall: {other:?}"),
        }
        let regs = ptrace::getregs(tid)?;
        self.state.threads[i].regs = regs;
        self.state.threads[i].at = At::Ready;
        Ok(Some(regs))
    }

    /// Runs the syscall thread `i` is entering (`e`) with argument
    /// registers changed by `change`, then gives the program its own back:
    /// the kernel preserves them, and a replay's (a tid, an anonymous
    /// mapping's flags) must not stay where the program, or a search for
    /// a signal's state, may look. Returns the registers at exit, rax the
    /// result. Errors: ptrace.
    pub(super) fn execute_changed(&mut self, i: usize, e: &Entry, change: impl FnOnce(&mut Regs)) -> Result<Regs> {
        let t = &mut self.state.threads[i];
        change(&mut t.regs);
        ptrace::setregs(t.tid, t.regs)?;
        let exit = self.execute(i)?;
        let t = &mut self.state.threads[i];
        [t.regs.rdi, t.regs.rsi, t.regs.rdx, t.regs.r10, t.regs.r8, t.regs.r9] = e.args;
        ptrace::setregs(t.tid, t.regs)?;
        Ok(exit)
    }

    pub(super) fn set_result(&mut self, i: usize, result: i64) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.rax = result as u64;
        ptrace::setregs(t.tid, t.regs)?;
        Ok(())
    }

    /// Lets every remaining process of the tree die and returns how the
    /// first one ended: waits until each live process's leader is reported
    /// (after all its other threads), not until no child is left, since
    /// checkpoint templates are weft's children too. Only this thread's
    /// tracees are waited for (__WNOTHREAD): other replays may run in
    /// other threads.
    pub(super) fn drain(&mut self) -> Result<ProcessEnd> {
        let mut waiting: Vec<Pid> = self.state.procs.iter().filter(|p| p.live).map(|p| p.pid).collect();
        let root = self.state.procs[0].pid;
        let mut end = self.state.root_end;
        while !waiting.is_empty() {
            let status = match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD)) {
                Ok(status) => status,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => break,
                Err(e) => return Err(e.into()),
            };
            let reaped = match status {
                WaitStatus::Exited(pid, code) => Some((pid, ProcessEnd::Exited(code))),
                WaitStatus::Signaled(pid, sig, _) => Some((pid, ProcessEnd::Killed(sig))),
                other => {
                    if let Some(pid) = other.pid() {
                        let _ = ptrace::cont(pid, None);
                    }
                    None
                }
            };
            if let Some((pid, how)) = reaped {
                waiting.retain(|&p| p != pid);
                if pid == root && self.state.procs[0].live {
                    end = Some(how);
                }
            }
        }
        for t in &mut self.state.threads {
            t.at = At::Exited;
        }
        for p in &mut self.state.procs {
            p.live = false;
        }
        self.ended = true;
        end.ok_or_else(|| anyhow!("the replayed process vanished without an exit status"))
    }

    /// Waits until every thread of process `p`, which is ending, has
    /// exited, and returns how it ended; the first process's end is kept
    /// for the replay's.
    pub(super) fn reap(&mut self, p: usize) -> Result<ProcessEnd> {
        let leader = self.state.procs[p].pid;
        let mut tids: Vec<Pid> = self.state.threads.iter().filter(|t| t.proc == p && t.at != At::Exited && t.tid != leader).map(|t| t.tid).collect();
        tids.push(leader);
        let mut end = ProcessEnd::Killed(libc::SIGKILL);
        for tid in tids {
            loop {
                match waitpid(tid, Some(WaitPidFlag::__WALL)) {
                    Ok(WaitStatus::Exited(_, code)) => {
                        end = ProcessEnd::Exited(code);
                        break;
                    }
                    Ok(WaitStatus::Signaled(_, sig, _)) => {
                        end = ProcessEnd::Killed(sig);
                        break;
                    }
                    Ok(_) => {
                        let _ = ptrace::cont(tid, None);
                    }
                    Err(Errno::EINTR) => {}
                    Err(_) => break,
                }
            }
        }
        for t in self.state.threads.iter_mut().filter(|t| t.proc == p) {
            t.at = At::Exited;
        }
        self.state.procs[p].live = false;
        if p == 0 {
            self.state.root_end = Some(end);
        }
        Ok(end)
    }

    /// Sends SIGKILL to every live process of the tree.
    pub(super) fn kill_all(&self) {
        for p in self.state.procs.iter().filter(|p| p.live) {
            let _ = nix::sys::signal::kill(p.pid, nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// Ends the replayed tree after a failure.
    pub(super) fn kill(&mut self) {
        self.kill_all();
        let _ = self.drain();
    }
}

/// mmap flags `flags` with the mapping type (MAP_SHARED,
/// MAP_SHARED_VALIDATE) made MAP_PRIVATE.
fn private(flags: u64) -> u64 {
    const MAP_TYPE: u64 = 0x0f;
    (flags & !MAP_TYPE) | libc::MAP_PRIVATE as u64
}
