//! A program's own seccomp filters (seccomp(2), prctl(2) PR_SET_SECCOMP):
//! read from the program when it installs one, kept in that call's logged
//! event, and run by a replay at each syscall entry of the threads the
//! filter applies to.
//!
//! A call a filter refuses (SECCOMP_RET_ERRNO) never reaches weft's own
//! filter, which the kernel runs beside it and which loses to it: the
//! call is in no log. A replay, which does not install the program's
//! filter (it would judge the replay's own calls too), runs it instead
//! and answers such a call with its errno.

use crate::tracee::Memory;
use serde::{Deserialize, Serialize};

/// SECCOMP_FILTER_FLAG_TSYNC: the filter applies to every thread of the
/// process, not only the caller.
pub const FLAG_TSYNC: u64 = 1;
/// SECCOMP_FILTER_FLAG_NEW_LISTENER: the filter's USER_NOTIF actions go
/// to a supervisor through a descriptor, which a replay cannot play.
const FLAG_NEW_LISTENER: u64 = 8;
/// The classic BPF return value that lets a call through.
const RET_ALLOW: u32 = 0x7fff_0000;
/// The action part of a return value (SECCOMP_RET_ACTION_FULL).
const RET_ACTION: u32 = 0xffff_0000;
/// SECCOMP_RET_ERRNO: the call fails with the errno in the data part.
const RET_ERRNO: u32 = 0x0005_0000;
/// SECCOMP_RET_TRAP: the call is not made, and the thread gets SIGSYS.
const RET_TRAP: u32 = 0x0003_0000;
/// SECCOMP_RET_KILL_THREAD.
const RET_KILL_THREAD: u32 = 0;
/// The most instructions a filter may have (BPF_MAXINSNS).
const MAX_INSNS: usize = 4096;
/// AUDIT_ARCH_X86_64, seccomp_data's `arch` for an x86-64 syscall.
const ARCH_X86_64: u32 = 0xc000_003e;
/// The size of `struct seccomp_data` (bytes): nr, arch, instruction
/// pointer, six arguments.
const DATA_LEN: u32 = 64;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump when true (instructions to skip).
    pub jt: u8,
    /// Jump when false.
    pub jf: u8,
    /// The constant.
    pub k: u32,
}

/// A filter the program installed: its flags (seccomp(2)) and program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Filter {
    /// The SECCOMP_FILTER_FLAG_* flags it was installed with.
    pub flags: u64,
    /// Its classic BPF program.
    pub program: Vec<Insn>,
}

impl Filter {
    /// Whether a replay reproduces what the filter does: every action but
    /// USER_NOTIF, whose supervisor is another program.
    pub fn replayed(&self) -> bool {
        self.flags & FLAG_NEW_LISTENER == 0
    }
}

/// The filter syscall `nr` with `args` installed, if it is a seccomp
/// install that succeeded (`result` 0, or a listener's descriptor):
/// SECCOMP_SET_MODE_FILTER (its
/// `struct sock_fprog` read from `mem`) or strict mode (read, write, exit
/// and rt_sigreturn only, as a filter). `None` for any other call, or
/// when the program cannot be read.
pub fn installed(nr: i64, args: &[u64; 6], result: i64, mem: &Memory) -> Option<Filter> {
    // A filter with a listener returns its descriptor.
    if result < 0 {
        return None;
    }
    let (strict, flags) = install_mode(nr, args)?;
    let program = if strict { strict_program() } else { read_program(args[2], mem)? };
    Some(Filter { flags, program })
}

/// Whether syscall `nr` with `args` installs a seccomp filter or strict
/// mode (seccomp(2) SECCOMP_SET_MODE_FILTER or STRICT, prctl(2)
/// PR_SET_SECCOMP).
pub fn is_install(nr: i64, args: &[u64; 6]) -> bool {
    install_mode(nr, args).is_some()
}

/// For a seccomp install: whether it is strict mode, and its flags.
fn install_mode(nr: i64, args: &[u64; 6]) -> Option<(bool, u64)> {
    const SECCOMP_SET_MODE_STRICT: u64 = 0;
    const SECCOMP_SET_MODE_FILTER: u64 = 1;
    const SECCOMP_MODE_STRICT: u64 = 1;
    const SECCOMP_MODE_FILTER: u64 = 2;
    match (nr, args[0], args[1]) {
        (libc::SYS_seccomp, SECCOMP_SET_MODE_STRICT, _) => Some((true, 0)),
        (libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags) => Some((false, flags)),
        (libc::SYS_prctl, op, SECCOMP_MODE_STRICT) if op == libc::PR_SET_SECCOMP as u64 => Some((true, 0)),
        (libc::SYS_prctl, op, SECCOMP_MODE_FILTER) if op == libc::PR_SET_SECCOMP as u64 => Some((false, 0)),
        _ => None,
    }
}

/// Reads the `struct sock_fprog` at `at` (a u16 length, then a pointer to
/// that many 8-byte instructions).
fn read_program(at: u64, mem: &Memory) -> Option<Vec<Insn>> {
    let len = usize::from(u16::from_le_bytes(mem.read(at, 2).ok()?.try_into().ok()?));
    if len == 0 || len > MAX_INSNS {
        return None;
    }
    let bytes = mem.read(mem.read_u64(at + 8).ok()?, len * 8).ok()?;
    Some(
        bytes
            .chunks_exact(8)
            .map(|b| Insn { code: u16::from_le_bytes([b[0], b[1]]), jt: b[2], jf: b[3], k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]) })
            .collect(),
    )
}

/// Strict mode as a filter: read, write, exit and rt_sigreturn pass,
/// anything else kills the thread (seccomp(2), SECCOMP_SET_MODE_STRICT).
fn strict_program() -> Vec<Insn> {
    let allowed = [libc::SYS_read, libc::SYS_write, libc::SYS_exit, libc::SYS_rt_sigreturn];
    let n = allowed.len();
    let mut program = vec![Insn { code: LD_W_ABS, jt: 0, jf: 0, k: 0 }];
    program.extend(allowed.iter().enumerate().map(|(i, &nr)| Insn { code: JMP_JEQ_K, jt: (n - i) as u8, jf: 0, k: nr as u32 }));
    program.push(Insn { code: RET_K, jt: 0, jf: 0, k: RET_KILL_THREAD });
    program.push(Insn { code: RET_K, jt: 0, jf: 0, k: RET_ALLOW });
    program
}

/// What a filter sees of a syscall (`struct seccomp_data`).
#[derive(Debug, Clone, Copy)]
pub struct Data {
    /// The syscall number.
    pub nr: i64,
    /// The address after the `syscall` instruction.
    pub ip: u64,
    /// The six arguments.
    pub args: [u64; 6],
}

impl Data {
    /// The 32-bit word at byte `offset` (4-aligned, below 64).
    fn word(&self, offset: u32) -> Option<u32> {
        let low = |v: u64| v as u32;
        let high = |v: u64| (v >> 32) as u32;
        Some(match offset {
            0 => self.nr as u32,
            4 => ARCH_X86_64,
            8 => low(self.ip),
            12 => high(self.ip),
            16..=63 if offset.is_multiple_of(4) => {
                let arg = self.args[(offset as usize - 16) / 8];
                if offset.is_multiple_of(8) { low(arg) } else { high(arg) }
            }
            _ => return None,
        })
    }
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JMP_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Runs `program` on `data` as the kernel's classic BPF does for seccomp
/// (the instructions seccomp_check_filter admits) and returns its return
/// value. A program the kernel would have refused (a load outside
/// seccomp_data, a jump past the end, a division by zero, no return) kills
/// the thread: the kernel validated the program at its install, so only a
/// damaged trace can hold one.
pub fn run(program: &[Insn], data: &Data) -> u32 {
    run_checked(program, data).unwrap_or(RET_KILL_THREAD)
}

fn run_checked(program: &[Insn], data: &Data) -> Option<u32> {
    let (mut a, mut x, mut mem) = (0u32, 0u32, [0u32; 16]);
    let mut pc = 0usize;
    loop {
        let insn = program.get(pc)?;
        pc += 1;
        let (code, k) = (u32::from(insn.code), insn.k);
        let src = if code & libc::BPF_X != 0 { x } else { k };
        match code & 0x07 {
            libc::BPF_LD | libc::BPF_LDX => {
                let value = match code & 0xe0 {
                    libc::BPF_ABS => data.word(k)?,
                    libc::BPF_LEN => DATA_LEN,
                    libc::BPF_IMM => k,
                    libc::BPF_MEM => *mem.get(k as usize)?,
                    _ => return None,
                };
                if code & 0x07 == libc::BPF_LD { a = value } else { x = value }
            }
            libc::BPF_ST => *mem.get_mut(k as usize)? = a,
            libc::BPF_STX => *mem.get_mut(k as usize)? = x,
            libc::BPF_ALU => {
                a = match code & 0xf0 {
                    libc::BPF_ADD => a.wrapping_add(src),
                    libc::BPF_SUB => a.wrapping_sub(src),
                    libc::BPF_MUL => a.wrapping_mul(src),
                    libc::BPF_DIV => a.checked_div(src)?,
                    libc::BPF_MOD => a.checked_rem(src)?,
                    libc::BPF_AND => a & src,
                    libc::BPF_OR => a | src,
                    libc::BPF_XOR => a ^ src,
                    libc::BPF_LSH => a.checked_shl(src).unwrap_or(0),
                    libc::BPF_RSH => a.checked_shr(src).unwrap_or(0),
                    libc::BPF_NEG => a.wrapping_neg(),
                    _ => return None,
                }
            }
            libc::BPF_JMP => {
                let taken = match code & 0xf0 {
                    libc::BPF_JA => {
                        pc = pc.checked_add(k as usize)?;
                        continue;
                    }
                    libc::BPF_JEQ => a == src,
                    libc::BPF_JGT => a > src,
                    libc::BPF_JGE => a >= src,
                    libc::BPF_JSET => a & src != 0,
                    _ => return None,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            libc::BPF_RET => return Some(if code & 0x18 == libc::BPF_A { a } else { k }),
            libc::BPF_MISC => match code & 0xf8 {
                libc::BPF_TAX => x = a,
                libc::BPF_TXA => a = x,
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The return value that decides a syscall under `filters` (newest
/// last): each filter runs, and the action of highest precedence wins
/// (KILL_PROCESS, KILL_THREAD, TRAP, ERRNO, USER_NOTIF, TRACE, LOG,
/// ALLOW: the lowest action as a signed number, seccomp(2)); among equal
/// actions, the newest filter's. ALLOW when there is none.
pub fn decide<'a>(filters: impl DoubleEndedIterator<Item = &'a Filter>, data: &Data) -> u32 {
    let action = |ret: u32| (ret & RET_ACTION) as i32;
    filters.rev().map(|f| run(&f.program, data)).fold(RET_ALLOW, |best, ret| if action(ret) < action(best) { ret } else { best })
}

/// The errno a return value makes the call fail with, if it is
/// SECCOMP_RET_ERRNO (its data, at most 4095 as the kernel caps it).
pub fn errno(ret: u32) -> Option<i64> {
    (ret & RET_ACTION == RET_ERRNO).then_some(i64::from((ret & 0xffff).min(4095)))
}

/// Whether return value `ret` traps the call: it is not made, and the
/// thread gets SIGSYS (SECCOMP_RET_TRAP).
pub fn traps(ret: u32) -> bool {
    ret & RET_ACTION == RET_TRAP
}

/// Whether return value `ret` lets the call go on as it would without
/// the filter (ALLOW, LOG, and TRACE, which only a tracer of the program's
/// own would have seen).
pub fn lets_through(ret: u32) -> bool {
    matches!(ret & RET_ACTION, 0x7fff_0000 | 0x7ffc_0000 | 0x7ff0_0000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(code: u32, jt: u8, jf: u8, k: u32) -> Insn {
        Insn { code: code as u16, jt, jf, k }
    }

    /// Refuses getppid with EPERM unless its first argument's low word is
    /// 7; lets everything else through.
    fn program() -> Vec<Insn> {
        vec![
            ins(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 4),
            ins(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, ARCH_X86_64),
            ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_KILL_THREAD),
            ins(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
            ins(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 3, libc::SYS_getppid as u32),
            ins(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 16),
            ins(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, 7),
            ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
            ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_ALLOW),
        ]
    }

    fn data(nr: i64, arg0: u64) -> Data {
        Data { nr, ip: 0x401000, args: [arg0, 0, 0, 0, 0, 0] }
    }

    #[test]
    fn a_filter_refuses_and_lets_through() {
        let p = program();
        assert_eq!(errno(run(&p, &data(libc::SYS_getppid, 0))), Some(libc::EPERM as i64));
        assert!(lets_through(run(&p, &data(libc::SYS_getppid, 7))));
        assert!(lets_through(run(&p, &data(libc::SYS_getpid, 0))));
    }

    #[test]
    fn the_action_of_highest_precedence_wins() {
        let allow_all = Filter { flags: 0, program: vec![ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_ALLOW)] };
        let refuse = Filter { flags: 0, program: program() };
        let d = data(libc::SYS_getppid, 0);
        assert_eq!(errno(decide([&allow_all, &refuse].into_iter(), &d)), Some(libc::EPERM as i64));
        assert_eq!(errno(decide([&refuse, &allow_all].into_iter(), &d)), Some(libc::EPERM as i64));
        assert!(lets_through(decide(std::iter::empty(), &d)));
    }

    #[test]
    fn strict_mode_allows_four_calls() {
        let p = strict_program();
        assert!(lets_through(run(&p, &data(libc::SYS_write, 0))));
        assert!(lets_through(run(&p, &data(libc::SYS_rt_sigreturn, 0))));
        assert_eq!(run(&p, &data(libc::SYS_getpid, 0)), RET_KILL_THREAD);
    }

    #[test]
    fn a_malformed_program_kills_rather_than_panics() {
        let jump_out = vec![ins(libc::BPF_JMP | libc::BPF_JA, 0, 0, 100)];
        let bad_load = vec![ins(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 66), ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_ALLOW)];
        let div0 = vec![ins(libc::BPF_ALU | libc::BPF_DIV | libc::BPF_K, 0, 0, 0), ins(libc::BPF_RET | libc::BPF_K, 0, 0, RET_ALLOW)];
        for p in [jump_out, bad_load, div0, vec![]] {
            assert_eq!(run(&p, &data(0, 0)), RET_KILL_THREAD);
        }
    }
}
