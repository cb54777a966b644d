//! Checkpoints: frozen copies of a replayed process that later replays
//! resume from instead of starting the program again. Exploration replays
//! one prefix many times with preemptions only near its end (seed 000
//! §4.1's window), so each attempt need only run from the last checkpoint
//! before its first preemption.
//!
//! A checkpoint is taken at a synchronization point, where every thread
//! is in a ptrace stop. weft makes the current thread fork (a remote
//! syscall); the child, a one-thread copy of the address space, is the
//! [`Template`] and never runs. Every thread's registers, extended state
//! and signal mask are kept as [`ThreadImage`]s. To resume, the template
//! forks again, and the copy's first thread clones one thread per image
//! (as rr rebuilds a checkpointed task group); each gets its image back.
//! Kernel state that belongs to the process is inherited by fork (file
//! descriptors, signal handlers, CPU affinity, personality, the rdtsc
//! setting); the per-thread state that matters is restored here. Thread
//! ids differ, but the program only ever sees recorded ones (gettid is
//! emulated and clone's tid words are rewritten), and futexes, the one
//! kernel object that would hold thread state, are emulated by weft.
//!
//! Both copies are created with CLONE_PARENT, so they are weft's children
//! and weft reaps them.

use crate::remote;
use crate::schedule::{Preemption, Reversal, Schedule};
use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use std::time::Duration;
use weft_record::tracee::{self, Regs};

/// The regset of the x87/SSE/AVX state (`NT_X86_XSTATE`, linux/elf.h).
const NT_X86_XSTATE: libc::c_uint = 0x202;
/// Bytes below the stack pointer that the x86-64 ABI lets functions use.
const RED_ZONE: u64 = 128;
/// Room for any XSAVE area (AVX-512 needs under 3 KiB).
const XSTATE_MAX: usize = 16 << 10;
/// A fork whose child is weft's (the process's parent is weft).
const FORK_FLAGS: u64 = (libc::CLONE_PARENT | libc::SIGCHLD) as u64;
/// A thread in the calling thread's process, as pthread_create makes one.
const THREAD_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM) as u64;

/// One thread of a checkpoint: what a new thread needs to continue as it.
#[derive(Debug, Clone)]
pub struct ThreadImage {
    /// General registers at the stop.
    regs: Regs,
    /// At a syscall-entry stop (a resumed thread is put back into one).
    entry: bool,
    /// The XSAVE area (x87, SSE, AVX).
    xstate: Vec<u8>,
    /// The blocked-signal mask.
    sigmask: u64,
    /// The alternate signal stack.
    altstack: Option<AltStack>,
}

/// A thread's alternate signal stack, as sigaltstack(2) set it (`stack_t`).
/// The kernel gives no tracer access to it, so the replayer follows each
/// thread's successful sigaltstack calls; a new thread has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AltStack {
    /// `ss_sp`: the stack's lowest address.
    pub sp: u64,
    /// `ss_flags` (SS_AUTODISARM or 0).
    pub flags: u32,
    /// `ss_size`, in bytes.
    pub size: u64,
}

impl ThreadImage {
    /// Reads the state of thread `tid`, whose general registers are
    /// `regs`; `entry` says it is at a syscall-entry stop; `altstack` is
    /// its alternate signal stack. Errors: ptrace failures.
    pub fn read(tid: Pid, regs: Regs, entry: bool, altstack: Option<AltStack>) -> Result<Self> {
        let mut xstate = vec![0u8; XSTATE_MAX];
        let mut iov = libc::iovec { iov_base: xstate.as_mut_ptr().cast(), iov_len: xstate.len() };
        // SAFETY: the kernel writes at most iov_len bytes to the buffer.
        Errno::result(unsafe { libc::ptrace(libc::PTRACE_GETREGSET, tid.as_raw(), NT_X86_XSTATE, &mut iov) })
            .context("PTRACE_GETREGSET NT_X86_XSTATE")?;
        xstate.truncate(iov.iov_len);
        Ok(Self { regs, entry, xstate, sigmask: tracee::sigmask(tid)?, altstack })
    }

    /// Gives thread `tid` (stopped, not at a syscall entry) this image:
    /// a thread at a syscall entry re-executes its `syscall` instruction
    /// to stop at the same entry again. `insn` is the address of a
    /// `syscall` instruction, for a remote sigaltstack; `forked` says the
    /// thread is the process's first, which inherited the forking thread's
    /// alternate stack (a cloned one has none, which is right unless the
    /// image has one).
    fn apply(&self, tid: Pid, insn: u64, forked: bool) -> Result<()> {
        if forked || self.altstack.is_some() {
            self.apply_altstack(tid, insn)?;
        }
        let mut iov = libc::iovec { iov_base: self.xstate.as_ptr() as *mut _, iov_len: self.xstate.len() };
        // SAFETY: the kernel reads iov_len bytes from the buffer.
        Errno::result(unsafe { libc::ptrace(libc::PTRACE_SETREGSET, tid.as_raw(), NT_X86_XSTATE, &mut iov) })
            .context("PTRACE_SETREGSET NT_X86_XSTATE")?;
        tracee::set_sigmask(tid, self.sigmask)?;
        let mut regs = self.regs;
        regs.orig_rax = u64::MAX;
        if !self.entry {
            return Ok(ptrace::setregs(tid, regs)?);
        }
        regs.rip -= remote::SYSCALL_INSN.len() as u64;
        regs.rax = self.regs.orig_rax;
        ptrace::setregs(tid, regs)?;
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) if ptrace::getregs(tid)?.orig_rax == self.regs.orig_rax => Ok(()),
            other => bail!("thread {tid} did not return to its syscall entry: {other:?}"),
        }
    }

    /// Sets thread `tid`'s alternate signal stack to the image's, or none,
    /// with a remote sigaltstack whose `stack_t` is written below the red
    /// zone.
    fn apply_altstack(&self, tid: Pid, insn: u64) -> Result<()> {
        let regs = ptrace::getregs(tid)?;
        let ss = match self.altstack {
            Some(a) => [a.sp, u64::from(a.flags), a.size],
            None => [0, libc::SS_DISABLE as u64, 0],
        };
        let at = (regs.rsp - RED_ZONE - 24) & !15;
        for (k, word) in ss.into_iter().enumerate() {
            ptrace::write(tid, (at + 8 * k as u64) as ptrace::AddressType, word as libc::c_long)?;
        }
        // The kernel refuses (EPERM) to change the stack of a thread whose
        // stack pointer is on it, as the forking thread's may be (inside a
        // handler): the call is made with a stack pointer off any stack,
        // and the image's registers are set afterwards.
        let off_stack = Regs { rsp: 0, ..regs };
        let set = remote::syscall(tid, &off_stack, insn, libc::SYS_sigaltstack, &[at, 0])?;
        if set.result != 0 {
            bail!("sigaltstack in a resumed thread failed: {}", Errno::from_raw(-set.result as i32));
        }
        Ok(())
    }
}

/// A frozen one-thread copy of a replayed process's address space.
#[derive(Debug)]
pub struct Template {
    pid: Pid,
    /// Its thread's registers, put back after every remote syscall.
    regs: Regs,
    /// Address of a `syscall` instruction.
    insn: u64,
}

impl Template {
    /// Forks the process of thread `tid`, which is in a ptrace stop other
    /// than a syscall entry, with registers `regs`; `insn` is the address
    /// of a `syscall` instruction. The thread is left at a syscall-exit
    /// stop with its registers. `None` when the kernel refused the fork
    /// (no memory, too many processes). Errors: ptrace failed.
    pub fn fork(tid: Pid, regs: &Regs, insn: u64) -> Result<Option<Self>> {
        let forked = remote::syscall(tid, regs, insn, libc::SYS_clone, &[FORK_FLAGS, 0, 0, 0, 0])?;
        let Some(pid) = forked.child else {
            tracing::debug!(errno = -forked.result, "fork for a checkpoint refused");
            return Ok(None);
        };
        let regs = ptrace::getregs(pid)?;
        Ok(Some(Self { pid, regs, insn }))
    }

    /// A new process from the template, with one thread per image
    /// (`None` for a thread that has exited). The thread of image `leader`
    /// is the process's first thread. Returns the new tids, in the order
    /// of `images`, every thread stopped with its image applied. Errors:
    /// fork, clone or ptrace failed (nothing is left running).
    pub fn spawn(&self, images: &[Option<ThreadImage>], leader: usize) -> Result<Vec<Option<Pid>>> {
        let forked = remote::syscall(self.pid, &self.regs, self.insn, libc::SYS_clone, &[FORK_FLAGS, 0, 0, 0, 0])?;
        let Some(first) = forked.child else {
            bail!("fork from a checkpoint failed: {}", Errno::from_raw(-forked.result as i32));
        };
        let mut tids: Vec<Option<Pid>> = vec![None; images.len()];
        tids[leader] = Some(first);
        if let Err(e) = self.populate(first, images, &mut tids) {
            let others = tids.iter().flatten().copied().filter(|&t| t != first);
            discard(&[first].into_iter().chain(others).collect::<Vec<_>>());
            return Err(e);
        }
        Ok(tids)
    }

    /// Clones a thread in `first` for every other image, then applies them all.
    fn populate(&self, first: Pid, images: &[Option<ThreadImage>], tids: &mut [Option<Pid>]) -> Result<()> {
        ptrace::setoptions(first, tracee::ptrace_options())?;
        let regs = ptrace::getregs(first)?;
        for (j, image) in images.iter().enumerate() {
            if image.is_none() || tids[j].is_some() {
                continue;
            }
            let cloned = remote::syscall(first, &regs, self.insn, libc::SYS_clone, &[THREAD_FLAGS, 0, 0, 0, 0])?;
            let Some(tid) = cloned.child else {
                bail!("clone in a resumed checkpoint failed: {}", Errno::from_raw(-cloned.result as i32));
            };
            tids[j] = Some(tid);
        }
        for (image, tid) in images.iter().zip(tids.iter()) {
            if let (Some(image), Some(tid)) = (image, tid) {
                image.apply(*tid, self.insn, *tid == first)?;
            }
        }
        Ok(())
    }
}

impl Template {
    /// Memory only this frozen copy holds, in bytes: the pages the replay
    /// has written since it was taken (Private_Clean + Private_Dirty in
    /// /proc/PID/smaps_rollup); 0 when unreadable.
    pub fn private_bytes(&self) -> u64 {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", self.pid)) else { return 0 };
        let kib = |key: &str| -> u64 {
            text.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
        };
        (kib("Private_Clean:") + kib("Private_Dirty:")) << 10
    }
}

impl Drop for Template {
    fn drop(&mut self) {
        discard(&[self.pid]);
    }
}

/// Kills the process of `tids` (its threads, leader first) and reaps them.
fn discard(tids: &[Pid]) {
    let Some(&leader) = tids.first() else { return };
    let _ = kill(leader, Signal::SIGKILL);
    for &tid in tids.iter().skip(1).chain([&leader]) {
        loop {
            match waitpid(tid, Some(WaitPidFlag::__WALL)) {
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => break,
                Ok(_) => {
                    let _ = ptrace::cont(tid, None);
                }
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
    }
}

/// When to take checkpoints and how many to keep. A replay takes one
/// every `interval` of replay time, and one just before each preemption of
/// its schedule: exploration tries many preemptions in one window, and
/// each attempt then resumes right before its own.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Replay time between two periodic checkpoints of one replay.
    pub interval: Duration,
    /// Checkpoints kept at most; the least recently used goes first.
    pub max: usize,
    /// No checkpoint is taken while the machine has less memory available
    /// than this (bytes, /proc/meminfo MemAvailable): every checkpoint
    /// holds the pages the replay has written since.
    pub min_available: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Self { interval: Duration::from_secs(1), max: 32, min_available: 2 << 30 }
    }
}

/// One checkpoint: the template process, the replayer's state `S` there,
/// and the schedule decisions it embodies.
pub struct Checkpoint<S> {
    /// The replayer's state at the checkpoint.
    pub state: S,
    /// The frozen process.
    pub template: Template,
    /// Synchronization operations done before it.
    pub sync_count: u64,
    /// The preemptions at or before `sync_count` of the schedule it was
    /// taken under, and its race reversals that had started: a schedule
    /// with the same ones there can resume from it.
    prefix: Prefix,
    last_used: u64,
}

/// The checkpoints of one trace's replays.
pub struct Checkpoints<S> {
    policy: Policy,
    list: Vec<Checkpoint<S>>,
    clock: u64,
}

impl<S> Checkpoints<S> {
    /// No checkpoints yet.
    pub fn new(policy: Policy) -> Self {
        Self { policy, list: Vec::new(), clock: 0 }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Drops them all: they were taken under what replays knew then
    /// ([`crate::Lessons`]), which decided how they scheduled.
    pub fn clear(&mut self) {
        self.list.clear();
    }

    /// Whether a replay under `schedule` that is `fits` with a state can
    /// start from a checkpoint: the latest one whose decisions it shares.
    /// Returns its index for [`Checkpoints::get`].
    pub fn best(&mut self, schedule: &Schedule, fits: impl Fn(&S) -> bool) -> Option<usize> {
        let k = (0..self.list.len())
            .filter(|&k| fits(&self.list[k].state) && prefix(schedule, self.list[k].sync_count) == self.list[k].prefix)
            .max_by_key(|&k| self.list[k].sync_count)?;
        self.clock += 1;
        self.list[k].last_used = self.clock;
        Some(k)
    }

    /// Checkpoint `k`.
    pub fn get(&self, k: usize) -> &Checkpoint<S> {
        &self.list[k]
    }

    /// Drops checkpoint `k` (it could not be resumed).
    pub fn remove(&mut self, k: usize) {
        self.list.swap_remove(k);
    }

    /// Makes room for one more checkpoint, dropping the least recently
    /// used; false when memory is short even with none kept.
    pub fn make_room(&mut self) -> bool {
        while !self.list.is_empty() && (self.list.len() >= self.policy.max || !self.memory_to_spare()) {
            let lru = (0..self.list.len()).min_by_key(|&k| self.list[k].last_used).unwrap_or(0);
            self.list.swap_remove(lru);
        }
        self.policy.max > 0 && self.memory_to_spare()
    }

    /// Keeps a checkpoint taken at `sync_count` under `schedule`.
    pub fn add(&mut self, template: Template, state: S, sync_count: u64, schedule: &Schedule) {
        self.clock += 1;
        let prefix = prefix(schedule, sync_count);
        self.list.push(Checkpoint { state, template, sync_count, prefix, last_used: self.clock });
    }

    fn memory_to_spare(&self) -> bool {
        available_memory().is_none_or(|m| m >= self.policy.min_available)
    }
}

/// Whether the process of thread `tid` has a writable shared mapping: a
/// fork shares it instead of copying it, so a resumed replay would write
/// into the checkpoint (/proc/TID/maps, permissions `rw-s`).
pub fn has_shared_writable(tid: Pid) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{tid}/maps")) else { return true };
    maps.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|p| p.as_bytes().get(1) == Some(&b'w') && p.ends_with('s')))
}

/// The decisions of a schedule up to a synchronization count.
type Prefix = (Vec<Preemption>, Vec<Reversal>);

/// The preemptions of `schedule` at or before synchronization count `n`,
/// and its race reversals whose protection started by then.
fn prefix(schedule: &Schedule, n: u64) -> Prefix {
    let preemptions = schedule.preemptions().iter().copied().take_while(|p| p.sync <= n).collect();
    (preemptions, schedule.reversals().iter().copied().take_while(|r| r.from <= n).collect())
}

/// MemAvailable from /proc/meminfo, in bytes.
pub(crate) fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}
