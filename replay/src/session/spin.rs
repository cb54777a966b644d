//! Spin handoffs. On one core, the thread whose event is the log's next
//! may spin on a word that another thread releases with a plain store (a
//! test-and-set or ticket spin lock, a flag). Neither thread meets a
//! scheduling point on the way: the spinner is set aside once its slice
//! ends ([`super::Thread::spun`]), and the thread run for its sake goes on
//! past its release to its own next event, often taking the lock again
//! before it gets there. The spinner then never sees the word free: a
//! livelock, which in the recording both cores' timing avoided.
//!
//! So when the spinner is set aside (also while another thread waits at
//! its next event for its turn, the lock's likely holder), it is stepped
//! once around its loop and each instruction decoded (capstone). A spin
//! comes back to where it was with its registers unchanged; the words its
//! loop reads off the thread's stack become its process's spin words,
//! each with the value the spinner saw there, those of an atomic
//! read-modify-write (an `xchg`, a `lock`ed instruction) first.
//!
//! A replay learns spin words but does not act on them: the order in
//! which threads run on past a release is a race the log does not hold,
//! and running the releasing thread on to its next event is right as
//! often (a ticket lock's holder takes its next ticket right after its
//! release). When a spinner has nobody left to hand over to, the replay
//! stops and starts over from the program's start with the words it
//! learned ([`crate::Replayer`], [`crate::ReplaySession`]). In a replay
//! that starts with spin words, a thread that runs while another thread's
//! event is due ([`Session::parkable`]) watches them for writes in the
//! free debug registers; a write that leaves one other than the spinner
//! saw it (a release) parks the writer right after it, and the log's next
//! thread runs again. Writes that leave them as the spinner saw them
//! (taking the lock again) pass.

use super::traps::{self, DR6_HITS};
use super::{At, Session};
use anyhow::{anyhow, bail, Result};
use capstone::arch::x86::{ArchMode, X86OperandType};
use capstone::arch::{BuildsCapstone, DetailsArchInsn};
use capstone::{Capstone, Insn};
use serde::{Deserialize, Serialize};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{waitpid, WaitStatus};
use std::collections::BTreeMap;
use weft_record::tracee::Regs;
use weft_record::Tid;

/// Instructions a spinner is stepped through at most to come back to
/// where it was set aside: one turn of a spin loop is a few instructions
/// (a `pause`, a load or an exchange, a compare, a branch).
const MAX_STEPS: usize = 64;

/// Bytes around a thread's stack pointer taken as its own stack: a word
/// there is its own, which no other thread releases.
const STACK_REACH: u64 = 64 << 10;

/// What replays of a trace learned of its spin loops: for each process
/// (its recorded pid), the words a thread of it was seen spinning on. A
/// replay starts with what earlier replays of the trace learned
/// ([`crate::Lessons::spin_words`]) and reports what it knows at its
/// end ([`crate::Report::lessons`]): the addresses are the same in
/// every replay (ASLR is off, the log holds the mappings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpinWords(BTreeMap<Tid, Vec<SpinWord>>);

impl SpinWords {
    /// The words of process `pid` (recorded).
    pub(super) fn of(&self, pid: Tid) -> &[SpinWord] {
        self.0.get(&pid).map_or(&[], Vec::as_slice)
    }

    /// Whether every word is 1, 2, 4 or 8 bytes within one aligned 8-byte
    /// word, as learned, with a value that fits (a file can say anything,
    /// [`crate::Lessons::load`]).
    pub(crate) fn sound(&self) -> bool {
        self.0.values().flatten().all(|w| matches!(w.len, 1 | 2 | 4 | 8) && w.addr % 8 + w.len as u64 <= 8 && (w.len == 8 || w.seen >> (8 * w.len) == 0))
    }

    /// These, with the words of `other`'s processes that have none here.
    pub(crate) fn absorb(&mut self, other: &SpinWords) {
        for (pid, words) in &other.0 {
            self.0.entry(*pid).or_insert_with(|| words.clone());
        }
    }

    /// These, with process `pid`'s words replaced by `words` (when any).
    pub(super) fn set(&mut self, pid: Tid, words: &[SpinWord]) {
        if !words.is_empty() {
            self.0.insert(pid, words.to_vec());
        }
    }
}

/// A word a thread of a process was seen spinning on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpinWord {
    /// Its address.
    addr: u64,
    /// Its size in bytes (1, 2, 4 or 8), within one aligned 8-byte word.
    len: usize,
    /// The value the spinner saw in it, zero-extended.
    seen: u64,
}

impl SpinWord {
    /// The aligned 8-byte word the debug register watches.
    fn watched(&self) -> u64 {
        self.addr & !7
    }
}

/// What stepping a set-aside thread around its loop found
/// ([`Session::check_spin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpinCheck {
    /// It was not stepped (see [`Session::check_spin`]), or its step
    /// ended where no spin can be told from a computation (a watched word
    /// written, code that does not decode).
    Unchecked,
    /// No spin: its registers changed around its loop, or it did not come
    /// back within [`MAX_STEPS`] instructions, or it is about to make a
    /// syscall or reach a breakpoint. It computes, and reaches its next
    /// scheduling point by itself.
    Computes,
    /// A spin on words its process already had, or on none that can be
    /// watched.
    Known,
    /// A spin on words the replay did not start with: a replay from the
    /// start with them would hand the core over at their release.
    Learned,
}

/// One turn of a thread's loop, as [`Session::spin_loop`] stepped it.
enum Loop {
    /// See [`SpinCheck::Computes`].
    Computes,
    /// See [`SpinCheck::Unchecked`].
    Unknown,
    /// A spin, and the shared words it reads.
    Spins(Vec<SpinWord>),
}

impl Session<'_> {
    /// The spin words known now: those the replay started with and those
    /// it learned.
    pub(super) fn spin_words(&self) -> SpinWords {
        let mut words = self.opts.lessons.spin_words.clone();
        for p in &self.state.procs {
            words.set(p.rec, &p.spin);
        }
        words
    }

    /// Thread `i` was set aside while its own event is the log's next:
    /// steps it once around its loop to tell a spin from a computation
    /// ([`SpinCheck`]). A spin comes back to where it was with every
    /// register as it was (a loop that computes changes one); the words
    /// it reads off its own stack and outside TLS become its process's
    /// [`SpinWord`]s. Nothing is stepped when the debugger has
    /// watchpoints (their hits would be ambiguous), when the thread is the
    /// signal search's, or while memory is closed for access tracing (a
    /// step could fault). Errors: ptrace; a stop other than the step's.
    pub(super) fn check_spin(&mut self, i: usize) -> Result<SpinCheck> {
        let tid = self.state.threads[i].tid;
        let hunting = self.hunt.as_ref().is_some_and(|h| h.tid() == tid);
        if self.watchpoints.iter().next().is_some() || hunting || self.state.protect.closed_any() {
            return Ok(SpinCheck::Unchecked);
        }
        let words = match self.spin_loop(i)? {
            Loop::Computes => return Ok(SpinCheck::Computes),
            Loop::Unknown => return Ok(SpinCheck::Unchecked),
            Loop::Spins(words) if words.is_empty() => return Ok(SpinCheck::Known),
            Loop::Spins(words) => words,
        };
        let proc = &mut self.state.procs[self.state.threads[i].proc];
        if proc.spin != words {
            tracing::debug!(thread = self.state.threads[i].rec, ?words, "spin words");
            proc.spin = words;
        }
        Ok(if proc.spin != self.opts.lessons.spin_words.of(proc.rec) { SpinCheck::Learned } else { SpinCheck::Known })
    }

    /// Steps thread `i` once around the loop it is in, collecting the
    /// words the loop reads, those of a read-modify-write first, each kind
    /// by address. Errors as [`Session::check_spin`].
    fn spin_loop(&mut self, i: usize) -> Result<Loop> {
        let cs = Capstone::new().x86().mode(ArchMode::Mode64).detail(true).build().map_err(|e| anyhow!("capstone: {e}"))?;
        let start = self.state.threads[i].regs;
        let mut regs = start;
        // (read-modify-write, word).
        let mut found: Vec<(bool, SpinWord)> = Vec::new();
        for n in 0..=MAX_STEPS {
            if n > 0 && regs.rip == start.rip {
                break;
            }
            if n == MAX_STEPS {
                return Ok(Loop::Computes);
            }
            let code = self.mem(i).read(regs.rip, 16)?;
            let insns = cs.disasm_count(&code, regs.rip, 1).map_err(|e| anyhow!("capstone: {e}"))?;
            let Some(insn) = insns.iter().next() else { return Ok(Loop::Unknown) };
            if leaves_loop(insn.bytes()) {
                return Ok(Loop::Computes);
            }
            let rmw = insn.mnemonic().is_some_and(|m| m.starts_with("lock") || m == "xchg");
            for word in self.shared_operands(i, &cs, insn, &regs)? {
                if !found.iter().any(|(_, w)| w.addr == word.addr) {
                    found.push((rmw, word));
                }
            }
            let Some(next) = self.step_one(i)? else { return Ok(Loop::Unknown) };
            regs = next;
        }
        if !same_registers(&start, &regs) {
            return Ok(Loop::Computes);
        }
        // By address within each kind, not in the loop's order: that
        // depends on where in its loop the thread was stopped, and the
        // same spin seen twice must give the same words.
        found.sort_by_key(|&(rmw, w)| (!rmw, w.addr));
        Ok(Loop::Spins(found.into_iter().map(|(_, w)| w).collect()))
    }

    /// Executes one instruction of thread `i` (stopped, not at a syscall
    /// or breakpoint): its registers after it, or `None` when it wrote a
    /// word a debug register watches (a lock word). Errors: ptrace;
    /// another stop than the step's.
    fn step_one(&mut self, i: usize) -> Result<Option<Regs>> {
        let tid = self.state.threads[i].tid;
        ptrace::step(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, libc::SIGTRAP) => {}
            other => bail!("thread {tid} stopped with {other:?} while stepped around its spin loop"),
        }
        let hit = traps::take_dr6(tid)? & DR6_HITS != 0;
        let regs = ptrace::getregs(tid)?;
        self.state.threads[i].regs = regs;
        Ok((!hit).then_some(regs))
    }

    /// The memory operands of `insn` (decoded at thread `i`'s pc, `regs`
    /// its registers) that lie off the thread's stack and outside
    /// thread-local storage, fit an aligned 8-byte word, and can be read:
    /// with the values they hold now.
    fn shared_operands(&self, i: usize, cs: &Capstone, insn: &Insn, regs: &Regs) -> Result<Vec<SpinWord>> {
        let detail = cs.insn_detail(insn).map_err(|e| anyhow!("capstone: {e}"))?;
        let arch = detail.arch_detail();
        let Some(x86) = arch.x86() else { return Ok(Vec::new()) };
        let name = |r| if r == capstone::RegId::INVALID_REG { None } else { cs.reg_name(r) };
        let next = insn.address() + insn.len() as u64;
        let mut words = Vec::new();
        for op in x86.operands() {
            let X86OperandType::Mem(m) = op.op_type else { continue };
            if name(m.segment()).is_some() {
                continue;
            }
            let base = match name(m.base()) {
                None => Some(0),
                Some(r) if r == "rip" => Some(next),
                Some(r) => reg_value(&r, regs),
            };
            let index = match name(m.index()) {
                None => Some(0),
                Some(r) => reg_value(&r, regs),
            };
            let (Some(base), Some(index)) = (base, index) else { continue };
            let addr = base.wrapping_add(index.wrapping_mul(m.scale() as u64)).wrapping_add(m.disp() as u64);
            let len = op.size as usize;
            if !matches!(len, 1 | 2 | 4 | 8) || (addr & 7) as usize + len > 8 || addr.abs_diff(regs.rsp) < STACK_REACH {
                continue;
            }
            if let Ok(seen) = self.read_spin_value(i, addr, len) {
                words.push(SpinWord { addr, len, seen });
            }
        }
        Ok(words)
    }

    /// The `len`-byte value at `addr` in thread `i`'s memory, zero-extended.
    fn read_spin_value(&self, i: usize, addr: u64, len: usize) -> Result<u64> {
        let bytes = self.mem(i).read(addr, len)?;
        let mut value = [0u8; 8];
        value[..len].copy_from_slice(&bytes);
        Ok(u64::from_le_bytes(value))
    }

    /// Before thread `i` runs: its free debug registers watch its
    /// process's spin words when it runs while another thread's event is
    /// due, and nothing of the kind otherwise. Errors: ptrace.
    pub(super) fn arm_spin_watch(&mut self, i: usize) -> Result<()> {
        let t = &self.state.threads[i];
        let tid = t.tid;
        let words = self.opts.lessons.spin_words.of(self.state.procs[t.proc].rec);
        let hunting = self.hunt.as_ref().is_some_and(|h| h.tid() == tid);
        let mut watched: Vec<u64> = Vec::new();
        if !words.is_empty() && !hunting && self.parkable(i) {
            for w in words {
                if !watched.contains(&w.watched()) {
                    watched.push(w.watched());
                }
            }
        }
        let own: Vec<(usize, u64)> = self.watchpoints.free_slots().zip(watched).collect();
        let mask = own.iter().fold(0u8, |m, &(slot, _)| m | 1 << slot);
        if own.is_empty() && t.spin_watch == 0 {
            return Ok(());
        }
        self.watchpoints.apply_with_write_watches(tid, &own)?;
        self.state.threads[i].spin_watch = mask;
        Ok(())
    }

    /// Thread `i` stopped with SIGTRAP: `None` when its spin watch did not
    /// trap, else whether the write released a spin word (the thread is
    /// parked right after it, [`At::Parked`]) or left them all as the
    /// spinner saw them (the thread goes on). Errors: ptrace.
    pub(super) fn spin_watch_stop(&mut self, i: usize) -> Result<Option<bool>> {
        let t = &self.state.threads[i];
        let (tid, proc) = (t.tid, t.proc);
        // Registers the debugger or the signal search took since are theirs.
        let hunting = self.hunt.as_ref().is_some_and(|h| h.tid() == tid);
        let free = self.watchpoints.free_slots().fold(0u8, |m, slot| m | 1 << slot);
        let mask = if hunting { 0 } else { t.spin_watch & free };
        if mask == 0 || traps::peek_dr6(tid)? & u64::from(mask) == 0 {
            return Ok(None);
        }
        traps::take_dr6(tid)?;
        let mut released = false;
        for w in self.opts.lessons.spin_words.of(self.state.procs[proc].rec) {
            released |= self.read_spin_value(i, w.addr, w.len)? != w.seen;
        }
        if released {
            let t = &mut self.state.threads[i];
            t.regs = ptrace::getregs(tid)?;
            t.at = At::Parked;
            t.spun = false;
        }
        Ok(Some(released))
    }
}

/// Whether a thread is where it was with the same values in its general
/// registers and flags (a spin's turn leaves them so).
fn same_registers(a: &Regs, b: &Regs) -> bool {
    let general = |r: &Regs| [r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip, r.eflags];
    general(a) == general(b)
}

/// Whether an instruction (its bytes) ends a plain spin loop's step: a
/// syscall, a software interrupt or breakpoint (a synchronization
/// point's int3), whose stops the replay handles elsewhere.
fn leaves_loop(bytes: &[u8]) -> bool {
    matches!(bytes, [0x0f, 0x05, ..] | [0x0f, 0x34, ..] | [0xcc, ..] | [0xcd, ..] | [0xf1, ..])
}

/// The value of general register `name` (a 64-bit or 32-bit one) in
/// `regs`; `None` for any other.
fn reg_value(name: &str, regs: &Regs) -> Option<u64> {
    let wide = |n: &str| -> Option<u64> {
        Some(match n {
            "rax" => regs.rax,
            "rbx" => regs.rbx,
            "rcx" => regs.rcx,
            "rdx" => regs.rdx,
            "rsi" => regs.rsi,
            "rdi" => regs.rdi,
            "rbp" => regs.rbp,
            "rsp" => regs.rsp,
            "r8" => regs.r8,
            "r9" => regs.r9,
            "r10" => regs.r10,
            "r11" => regs.r11,
            "r12" => regs.r12,
            "r13" => regs.r13,
            "r14" => regs.r14,
            "r15" => regs.r15,
            _ => return None,
        })
    };
    if let Some(v) = wide(name) {
        return Some(v);
    }
    // 32-bit: eax..esp, r8d..r15d.
    let full = match name.strip_prefix('e') {
        Some(rest) => format!("r{rest}"),
        None => name.strip_suffix('d')?.to_string(),
    };
    wide(&full).map(|v| v & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_are_read_by_their_64_and_32_bit_names() {
        let regs = Regs { rax: 0x1_0000_0002, r9: 0x3_0000_0004, ..unsafe { std::mem::zeroed() } };
        assert_eq!(reg_value("rax", &regs), Some(0x1_0000_0002));
        assert_eq!(reg_value("eax", &regs), Some(2));
        assert_eq!(reg_value("r9d", &regs), Some(4));
        assert_eq!(reg_value("xmm0", &regs), None);
    }

    #[test]
    fn a_syscall_or_breakpoint_ends_a_loop() {
        assert!(leaves_loop(&[0x0f, 0x05]));
        assert!(leaves_loop(&[0xcc]));
        assert!(!leaves_loop(&[0xf3, 0x90]));
    }
}
