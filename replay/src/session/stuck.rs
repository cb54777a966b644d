//! Why a replay cannot go on, said the way a user debugs a hang: for
//! every thread, the lock or futex word it is blocked on (with the
//! variable's name when the executable has a symbol for it), the thread
//! that holds it, and the source line of its call (DWARF); or where it
//! spins. Used for deadlocks (seed 000 §2.2's second symptom), livelocks
//! (the watchdog), and recordings that ended by SIGKILL from outside,
//! which usually kill a program that hung.
//!
//! The owner of a pthread mutex is its `__owner` field (glibc's
//! `pthread_mutex_t`: the lock word at offset 0, the owner's tid at offset
//! 8); a priority-inheritance lock word holds its owner's tid itself
//! (futex(2)). Tids are the recorded ones, which the replay gives the
//! program. A thread's call site is the first return address on its stack
//! that follows a call instruction in the executable's code: libc is built
//! without frame pointers, so the stack is scanned rather than unwound.

use super::{At, Session, Thread};
use crate::failure::Failure;
use crate::futex::FUTEX_TID_MASK;
use crate::symbols::Executable;
use weft_record::Tid;

/// How many stack words the call-site scan reads at most.
const STACK_SCAN_WORDS: u64 = 2048;
/// `sizeof(pthread_cond_t)` on x86-64 glibc.
const PTHREAD_COND_SIZE: u64 = 48;
/// Offset of `__owner` in glibc's x86-64 `pthread_mutex_t`.
const MUTEX_OWNER_OFFSET: u64 = 8;

impl Session<'_> {
    /// Every live thread and what holds it up, one line each.
    pub(super) fn stuck_threads(&self) -> Vec<String> {
        let mut exes: std::collections::HashMap<usize, Option<Executable>> = Default::default();
        let spinners = self.watchdog.spinners();
        self.state
            .threads
            .iter()
            .filter(|t| t.at != At::Exited)
            .map(|t| {
                let exe = exes.entry(t.proc).or_insert_with(|| Executable::of_process(self.state.procs[t.proc].pid.as_raw()).ok());
                let what = match (t.at, spinners.iter().find(|s| s.0 == t.rec)) {
                    (At::Blocked(w), _) => self.blocked_on(t, super::emulate::futex_address(w.uaddr), w.pi.is_some(), exe.as_ref()),
                    (At::Entry(e), _) if acquire_marker(&e) => self.blocked_on(t, e.args[1], false, exe.as_ref()),
                    (_, Some(&(_, pc, n))) => format!(
                        "thread {} spins at pc {pc:#x} ({n} sched_yield or futex calls that returned at once, no logged event)",
                        t.rec
                    ),
                    _ => self.describe_thread(t),
                };
                match exe.as_ref().and_then(|e| self.call_site(t, e)) {
                    Some(line) => format!("{what}, at {line}"),
                    None => what,
                }
            })
            .collect()
    }

    /// Remembers where every thread is, before the replay kills the
    /// process as the recording ended: [`Report::stuck`](super::Report::stuck).
    pub(super) fn note_stuck(&mut self) {
        self.stuck = self.stuck_threads();
    }

    /// What [`Session::note_stuck`] remembered (empty if nothing).
    pub(crate) fn stuck(&self) -> &[String] {
        &self.stuck
    }

    /// The livelock failure: thread `i` ran (or spun) at `pc` until the
    /// watchdog's limit passed without progress, or until it was seen
    /// spinning with no thread to take over (spin.rs).
    pub(super) fn livelock(&self, i: usize, pc: u64) -> Failure {
        // A spin seen before the limit (spin.rs) stops the replay sooner.
        let seconds = self.watchdog.limit_secs().min(self.watchdog.idle().as_secs_f64().ceil() as u64);
        Failure::Livelock { at: self.position(i), pc, seconds, threads: self.stuck_threads() }
    }

    /// What thread `t`, blocked on the word at `addr` (a priority-inheritance
    /// futex if `pi`), waits for.
    fn blocked_on(&self, t: &Thread, addr: u64, pi: bool, exe: Option<&Executable>) -> String {
        let mem = &self.state.procs[t.proc].mem;
        if let Some(j) = self.state.threads.iter().find(|j| j.proc == t.proc && j.clear_child_tid == addr && j.at != At::Exited) {
            return format!("thread {} waits for thread {} to exit ({addr:#x})", t.rec, j.rec);
        }
        let word = mem.read_u32(addr).ok();
        let owner = match pi {
            true => word.map(|w| (w & FUTEX_TID_MASK) as Tid),
            false => word.filter(|&w| w != 0).and_then(|_| self.mutex_owner(mem, addr)),
        };
        let sym = exe.and_then(|e| e.symbol(addr));
        let kind = match (&owner, &sym) {
            (Some(_), _) => "mutex",
            (None, Some(s)) if s.size == PTHREAD_COND_SIZE => "condition variable",
            _ => "futex word",
        };
        let name = match sym {
            Some(s) if s.offset == 0 => format!(" `{}`", s.name),
            Some(s) => format!(" `{}`+{:#x}", s.name, s.offset),
            None => String::new(),
        };
        let held = match owner {
            Some(o) if o == t.rec => format!(" held by thread {o} (itself)"),
            Some(o) => format!(" held by thread {o}"),
            None => String::new(),
        };
        format!("thread {} blocked on {kind}{name} ({addr:#x}){held}", t.rec)
    }

    /// The recorded tid in the `__owner` field of a pthread mutex whose
    /// lock word is at `addr`, if it names a thread of the process.
    fn mutex_owner(&self, mem: &weft_record::tracee::Memory, addr: u64) -> Option<Tid> {
        let owner = mem.read_u32(addr + MUTEX_OWNER_OFFSET).ok()? as i32;
        self.state.by_rec.contains_key(&owner).then_some(owner)
    }

    /// The source line thread `t` is at in the executable: its pc's when
    /// it runs the executable's code, else its innermost call there.
    fn call_site(&self, t: &Thread, exe: &Executable) -> Option<String> {
        if exe.in_text(t.regs.rip) {
            return exe.line(t.regs.rip);
        }
        let mem = &self.state.procs[t.proc].mem;
        (0..STACK_SCAN_WORDS)
            .map_while(|k| mem.read_u64(t.regs.rsp + 8 * k).ok())
            .find(|&ret| exe.in_text(ret) && follows_call(mem, ret))
            .and_then(|ret| exe.line(ret - 1))
    }

}

/// Whether `e` is the in-process runtime's marker before an acquire (a
/// thread that waits there for a lock the recording never granted it was
/// blocked on it when the recording ended).
fn acquire_marker(e: &super::Entry) -> bool {
    use weft_record::event::SyncOp::*;
    e.nr == weft_record::runtime::NR_SYNC
        && matches!(weft_record::event::SyncOp::from_code(e.args[0] as i64), Some(MutexLock | MutexTrylock | RwlockRead | RwlockWrite | SpinLock | SemWait | Once))
}

/// Whether the bytes before `ret` end with a call instruction: `call
/// rel32` (e8), `call *disp32(%rip)` (ff 15), `call *%reg` (ff d0+r).
fn follows_call(mem: &weft_record::tracee::Memory, ret: u64) -> bool {
    let Ok(b) = mem.read(ret - 6, 6) else { return false };
    b[1] == 0xe8 || (b[0] == 0xff && b[1] == 0x15) || (b[4] == 0xff && (0xd0..=0xd7).contains(&b[5]))
}
