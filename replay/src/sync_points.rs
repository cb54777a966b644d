//! Synchronization points: software breakpoints (int3) on libc's pthread
//! entry points, so the scheduler sees lock acquisitions and releases that
//! never reach the kernel (uncontended futexes). Seed 000 Fig. 8 places a
//! preemption test *before* each acquire and *after* each release; the
//! "after" is a one-shot breakpoint on the caller's return address, tied to
//! the thread and its stack pointer.
//!
//! Each point names the synchronization object it concerns (the mutex a
//! lock or a condition wait takes, the object a release frees), so that a
//! preemption can reorder two threads' critical sections on one lock.
//!
//! In a process whose in-process runtime is on, every pthread call the
//! runtime interposes already stops at its marker (weft_runtime.c): the
//! breakpoints on those functions are *parked* (their int3s removed), and
//! the marker stands for the point the breakpoint gave ([`marker_point`]).
//! A lock or an unlock costs 2 ptrace stops (the marker's syscall entry
//! and exit) instead of 4 or 5.

use anyhow::{Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use weft_record::event::SyncOp;
use weft_record::tracee::Memory;

/// The pthread functions with a synchronization point: a preemption test
/// before each acquire or wait, after each release or signal; and whether
/// the in-process runtime interposes the function (all but pthread_join).
const FUNCTIONS: &[(&str, Function, Interposed)] = &[
    ("pthread_mutex_lock", Function::Acquire, Interposed::Yes),
    ("pthread_mutex_trylock", Function::Acquire, Interposed::Yes),
    ("pthread_mutex_timedlock", Function::Acquire, Interposed::Yes),
    ("pthread_rwlock_rdlock", Function::Acquire, Interposed::Yes),
    ("pthread_rwlock_wrlock", Function::Acquire, Interposed::Yes),
    ("pthread_rwlock_tryrdlock", Function::Acquire, Interposed::Yes),
    ("pthread_rwlock_trywrlock", Function::Acquire, Interposed::Yes),
    ("pthread_spin_lock", Function::Acquire, Interposed::Yes),
    ("pthread_cond_wait", Function::CondWait, Interposed::Yes),
    ("pthread_cond_timedwait", Function::CondWait, Interposed::Yes),
    ("pthread_barrier_wait", Function::Acquire, Interposed::Yes),
    ("pthread_join", Function::Acquire, Interposed::No),
    ("sem_wait", Function::Acquire, Interposed::Yes),
    ("sem_timedwait", Function::Acquire, Interposed::Yes),
    ("sem_trywait", Function::Acquire, Interposed::Yes),
    ("pthread_mutex_unlock", Function::Release, Interposed::Yes),
    ("pthread_rwlock_unlock", Function::Release, Interposed::Yes),
    ("pthread_spin_unlock", Function::Release, Interposed::Yes),
    ("pthread_cond_signal", Function::Release, Interposed::Yes),
    ("pthread_cond_broadcast", Function::Release, Interposed::Yes),
    ("sem_post", Function::Release, Interposed::Yes),
];

/// Whether the in-process runtime interposes a pthread function, so that
/// its breakpoint is parked while the runtime is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interposed {
    Yes,
    No,
}

const INT3: u8 = 0xcc;
/// The CET landing pad glibc's functions start with; a no-op here.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// How to get a thread past one of our breakpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOver {
    /// The instruction is a no-op of this many bytes: move the pc.
    Skip(u64),
    /// Put this original byte back and single-step the instruction.
    Step(u8),
}

/// A synchronization point: what the thread is about to do or has done,
/// and to which object (a pthread object's address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Before an acquire or wait; the object is the lock it takes (a
    /// condition wait's mutex), or the semaphore, barrier or thread.
    Acquire(u64),
    /// After a release or signal of this object.
    Released(u64),
    /// After a futex wake that released waiters on this word, one whose
    /// calls are soft (`LogIndex::is_soft_word`): a lock's release that
    /// the log does not order.
    Woke(u64),
    /// After a logged event, in a log with the synchronization order
    /// (in-process recording): the log's next thread takes over by
    /// default (`Session::sync_point`).
    Matched,
}

/// What a breakpoint hit means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// A synchronization point.
    Sync(Op),
    /// A release function's entry: its return breakpoint is now set; run on.
    Entered,
    /// Another thread's return breakpoint: not a point for this thread.
    Passing,
}

/// Where the point of a parked breakpoint falls for a runtime marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerPoint {
    /// Before the marker: the real call came first (a release; a
    /// condition wait's release, whose real unlock follows with no program
    /// code in between).
    Before(Op),
    /// After the marker: the real call follows (an acquire granted at its
    /// place, a barrier's arrival).
    After(Op),
}

/// The point a parked breakpoint gave for the pthread call behind a replay
/// marker of `op` on `var` whose recorded result is `result`: a release's
/// `Released` where the release is done, an acquire's `Acquire` where the
/// real call starts. `None` for a call the replay does not make (a busy
/// trylock, a timeout: answered as recorded) and for the runtime's futex
/// calls, which have no libc function.
pub fn marker_point(op: SyncOp, var: u64, result: i64) -> Option<MarkerPoint> {
    use SyncOp::*;
    match op {
        MutexUnlock | RwlockUnlock | SpinUnlock | CondSignal | CondBroadcast | SemPost | CondRelease | OnceDone => {
            Some(MarkerPoint::Before(Op::Released(var)))
        }
        MutexLock | MutexTrylock | RwlockRead | RwlockWrite | SpinLock | SemWait if result == 0 => {
            Some(MarkerPoint::After(Op::Acquire(var)))
        }
        // The thread that runs a one-time initialization takes it.
        Once if result == 1 => Some(MarkerPoint::After(Op::Acquire(var))),
        // A condition wait takes its mutex back even when it timed out.
        CondAcquire | BarrierArrive => Some(MarkerPoint::After(Op::Acquire(var))),
        _ => None,
    }
}

/// The kind of pthread function an entry breakpoint is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    /// An acquire or wait of its first argument.
    Acquire,
    /// A condition wait: it takes back its second argument, the mutex.
    CondWait,
    /// A release or signal of its first argument.
    Release,
}

/// A thread inside a release function, to stop at its return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Return {
    thread: usize,
    /// The stack pointer after the return.
    rsp: u64,
    /// The object released.
    object: u64,
}

/// The breakpoints of one replay.
#[derive(Clone, Default)]
pub struct SyncPoints {
    /// Entry breakpoints: address → the function's kind.
    entries: HashMap<u64, Function>,
    /// The entries of functions the runtime interposes, by address.
    interposed: HashSet<u64>,
    /// Entries parked while the process's runtime is on: no int3.
    parked: HashMap<u64, Function>,
    /// The process's runtime is on (between [`SyncPoints::park`] and
    /// [`SyncPoints::unpark`]).
    runtime_on: bool,
    /// Return breakpoints: address → the threads to stop there.
    returns: HashMap<u64, Vec<Return>>,
    /// Original byte under every int3 we placed, and whether the
    /// instruction there is `endbr64` (a no-op a thread may skip).
    original: HashMap<u64, (u8, bool)>,
    /// The debugger's breakpoints: their int3s share `original` with the
    /// synchronization points, so that neither removes the other's.
    user: HashSet<u64>,
}

impl SyncPoints {
    /// Whether libc's breakpoints are in (armed or parked).
    pub fn installed(&self) -> bool {
        !self.entries.is_empty() || !self.parked.is_empty()
    }

    /// Whether the breakpoints on the functions the runtime interposes are
    /// parked: the runtime's markers stand for them ([`marker_point`]).
    pub fn parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// The process's runtime is on: parks the breakpoints of the functions
    /// it interposes (an int3 another breakpoint shares stays). Errors:
    /// writing the process's memory.
    pub fn park(&mut self, mem: &Memory) -> Result<()> {
        self.runtime_on = true;
        for addr in self.interposed.clone() {
            let Some(function) = self.entries.remove(&addr) else { continue };
            self.parked.insert(addr, function);
            if !self.user.contains(&addr) && !self.returns.contains_key(&addr) {
                self.disarm(mem, addr)?;
            }
        }
        Ok(())
    }

    /// The process's runtime went off: its calls take libc's functions
    /// unmarked, so their breakpoints are set again. Errors: writing the
    /// process's memory.
    pub fn unpark(&mut self, mem: &Memory) -> Result<()> {
        self.runtime_on = false;
        for (addr, function) in std::mem::take(&mut self.parked) {
            self.entries.insert(addr, function);
            self.arm(mem, addr)?;
        }
        Ok(())
    }

    /// Sets entry breakpoints on libc's pthread functions, given that the
    /// file `copy` (libc) is mapped at `addr` from file offset `offset`.
    pub fn install_libc(&mut self, mem: &Memory, copy: &Path, addr: u64, offset: u64) -> Result<()> {
        let data = std::fs::read(copy).with_context(|| format!("read {}", copy.display()))?;
        let elf = object::File::parse(&*data).with_context(|| format!("parse {}", copy.display()))?;
        let Some(base) = elf.segments().find_map(|s| {
            let (file_off, _) = s.file_range();
            (file_off & !0xfff == offset).then(|| addr + (file_off - offset) - s.address())
        }) else {
            return Ok(());
        };
        for sym in elf.dynamic_symbols() {
            let Ok(name) = sym.name() else { continue };
            let Some(&(_, function, interposed)) = FUNCTIONS.iter().find(|(f, ..)| *f == name) else { continue };
            if sym.address() != 0 {
                let at = base + sym.address();
                if interposed == Interposed::Yes {
                    self.interposed.insert(at);
                    if self.runtime_on {
                        self.parked.insert(at, function);
                        continue;
                    }
                }
                self.entries.insert(at, function);
                self.arm(mem, at)?;
            }
        }
        Ok(())
    }

    /// Classifies an int3 hit at `regs.rip - 1` by thread `thread`; `None`
    /// if it is not one of ours.
    pub fn hit(&mut self, mem: &Memory, thread: usize, regs: &libc::user_regs_struct) -> Result<Option<Hit>> {
        let (addr, rsp) = (regs.rip.wrapping_sub(1), regs.rsp);
        match self.entries.get(&addr) {
            Some(Function::Acquire) => return Ok(Some(Hit::Sync(Op::Acquire(regs.rdi)))),
            Some(Function::CondWait) => return Ok(Some(Hit::Sync(Op::Acquire(regs.rsi)))),
            Some(Function::Release) => {
                let ret = mem.read_u64(rsp)?;
                // Hit again after a signal handler that ran at the entry:
                // the same call, already waited for.
                let waiting = self.returns.entry(ret).or_default();
                if !waiting.iter().any(|w| (w.thread, w.rsp) == (thread, rsp + 8)) {
                    waiting.push(Return { thread, rsp: rsp + 8, object: regs.rdi });
                }
                self.arm(mem, ret)?;
                return Ok(Some(Hit::Entered));
            }
            None => {}
        }
        let Some(waiting) = self.returns.get_mut(&addr) else { return Ok(None) };
        let Some(k) = waiting.iter().position(|w| (w.thread, w.rsp) == (thread, rsp)) else {
            return Ok(Some(Hit::Passing));
        };
        let object = waiting.swap_remove(k).object;
        if waiting.is_empty() {
            self.returns.remove(&addr);
            if !self.entries.contains_key(&addr) && !self.user.contains(&addr) {
                self.disarm(mem, addr)?;
            }
        }
        Ok(Some(Hit::Sync(Op::Released(object))))
    }

    /// How a thread stopped at `addr` gets past our int3 there, if any.
    pub fn step_over(&self, addr: u64) -> Option<StepOver> {
        self.original.get(&addr).map(|&(byte, endbr)| if endbr { StepOver::Skip(4) } else { StepOver::Step(byte) })
    }

    /// Sets a debugger breakpoint at `addr`. Errors: `addr` is not mapped.
    pub fn set_user(&mut self, mem: &Memory, addr: u64) -> Result<()> {
        self.arm(mem, addr)?;
        self.user.insert(addr);
        Ok(())
    }

    /// Removes the debugger breakpoint at `addr`; the int3 stays while a
    /// synchronization point needs it.
    pub fn clear_user(&mut self, mem: &Memory, addr: u64) -> Result<()> {
        if self.user.remove(&addr) && !self.entries.contains_key(&addr) && !self.returns.contains_key(&addr) {
            self.disarm(mem, addr)?;
        }
        Ok(())
    }

    /// Whether a debugger breakpoint is set at `addr`.
    pub fn is_user(&self, addr: u64) -> bool {
        self.user.contains(&addr)
    }

    /// The debugger breakpoints set.
    pub fn user(&self) -> impl Iterator<Item = u64> + '_ {
        self.user.iter().copied()
    }

    /// Whether `addr` is a synchronization point's int3 (entry or return).
    pub fn is_sync(&self, addr: u64) -> bool {
        self.entries.contains_key(&addr) || self.returns.contains_key(&addr)
    }

    /// Puts the original bytes back over every int3 in `buf`, which holds
    /// tracee memory read at `addr`: what the program's code really is.
    pub fn shadow(&self, addr: u64, buf: &mut [u8]) {
        let end = addr.saturating_add(buf.len() as u64);
        for (&at, &(byte, _)) in &self.original {
            if at >= addr && at < end {
                buf[(at - addr) as usize] = byte;
            }
        }
    }

    /// `[start, end)` was mapped anew (a file mmap over it): the int3s
    /// there are gone; sets them again over the new code.
    pub fn remapped(&mut self, mem: &Memory, start: u64, end: u64) {
        let inside: Vec<u64> = self.original.keys().copied().filter(|a| (start..end).contains(a)).collect();
        for addr in inside {
            self.original.remove(&addr);
            if self.arm(mem, addr).is_err() {
                tracing::warn!(addr, "cannot set a breakpoint again after a remap");
            }
        }
    }

    fn arm(&mut self, mem: &Memory, addr: u64) -> Result<()> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.original.entry(addr) {
            let code = mem.read(addr, 4)?;
            mem.write(addr, &[INT3])?;
            slot.insert((code[0], code == ENDBR64));
        }
        Ok(())
    }

    fn disarm(&mut self, mem: &Memory, addr: u64) -> Result<()> {
        if let Some((byte, _)) = self.original.remove(&addr) {
            mem.write(addr, &[byte])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker stands for the point where libc's breakpoint saw the real
    /// call: after a release, before an acquire the replay makes.
    #[test]
    fn markers_stand_for_the_points_of_the_real_calls() {
        let point = |op, result| marker_point(op, 0x10, result);
        assert_eq!(point(SyncOp::MutexUnlock, 0), Some(MarkerPoint::Before(Op::Released(0x10))));
        assert_eq!(point(SyncOp::CondRelease, 0), Some(MarkerPoint::Before(Op::Released(0x10))));
        assert_eq!(point(SyncOp::MutexLock, 0), Some(MarkerPoint::After(Op::Acquire(0x10))));
        assert_eq!(point(SyncOp::MutexTrylock, libc::EBUSY as i64), None, "a busy trylock is answered, not made");
        assert_eq!(point(SyncOp::CondAcquire, libc::ETIMEDOUT as i64), Some(MarkerPoint::After(Op::Acquire(0x10))));
        assert_eq!(point(SyncOp::BarrierLeave, 1), None);
        assert_eq!(point(SyncOp::FutexWake, 1), None);
    }
}
