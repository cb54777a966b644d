//! The recording's seccomp program (seccomp(2)): which syscalls run at
//! full speed, which stop for the tracer (SECCOMP_RET_TRACE), and which
//! fail. The runtime's own syscall sites pass first; prepended prefixes
//! are hand-written classic BPF, the rest is seccompiler's. Its jumps are
//! relative, so a prefix keeps them valid.

use crate::runtime;
use crate::syscalls::{self, Class};
use anyhow::{anyhow, Result};
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;

/// Syscalls of the given classes, by number.
fn syscalls_of(classes: &[Class]) -> Vec<i64> {
    (0..500).filter(|&nr| classes.contains(&syscalls::class(nr))).collect()
}

/// The recording filter, one program: the runtime's own syscall sites
/// pass ([`allow_sites`]), [`Class::Refused`] syscalls fail with ENOSYS
/// ([`refuse`]), and every logged syscall traps to the
/// tracer (SECCOMP_RET_TRACE), letting through the executed classes,
/// anonymous mmaps and untimed futex calls. One program, not one per
/// rule: the kernel runs every installed filter on every syscall, the
/// buffered ones included, and a second filter cost 3.5% of the
/// syscall-heavy benchmark's recording time.
pub fn recording() -> Result<BpfProgram> {
    let arch = std::env::consts::ARCH.try_into().map_err(|e| anyhow!("{e:?}"))?;
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> =
        syscalls_of(&[Class::Execute, Class::Clone]).into_iter().map(|nr| (nr, vec![])).collect();
    let cond = |arg, len, op, value| SeccompCondition::new(arg, len, op, value).map_err(|e| anyhow!("{e:?}"));
    let anonymous = || cond(3, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(libc::MAP_ANONYMOUS as u64), libc::MAP_ANONYMOUS as u64);
    // Calls that would change the runtime's memory are trapped
    // (runtime::touches_runtime): allowed above it, or far enough below
    // it with a length that cannot reach it (runtime::BELOW_REACH); the
    // tracer resumes the others that do not reach it.
    let outside = |extra: Option<SeccompCondition>| -> Result<Vec<SeccompRule>> {
        let below = [
            cond(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Lt, runtime::PAGE - runtime::BELOW_REACH)?,
            cond(1, SeccompCmpArgLen::Qword, SeccompCmpOp::Le, runtime::BELOW_REACH)?,
        ];
        let above = [cond(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Ge, runtime::END)?];
        [below.to_vec(), above.to_vec()]
            .into_iter()
            .map(|c| SeccompRule::new(extra.iter().cloned().chain(c).collect()).map_err(|e| anyhow!("{e:?}")))
            .collect()
    };
    allow.insert(libc::SYS_mmap, outside(Some(anonymous()?))?);
    allow.insert(libc::SYS_munmap, outside(None)?);
    allow.insert(libc::SYS_mprotect, outside(None)?);
    allow.insert(libc::SYS_futex, untimed_futex_rules()?);
    let trace = SeccompFilter::new(allow, SeccompAction::Trace(0), SeccompAction::Allow, arch)
        .map_err(|e| anyhow!("{e:?}"))?;
    let trace = refuse(&syscalls_of(&[Class::Refused]), trace.try_into().map_err(|e| anyhow!("{e:?}"))?)?;
    Ok(allow_sites(trace))
}

/// `program` preceded by instructions that fail the x86-64 syscalls
/// `refused` with ENOSYS (seccomp(2): seccomp_data's nr at byte 0, arch at
/// byte 4). Jumps are relative, so `program`'s own still hold. Errors:
/// more refused syscalls than a BPF jump can skip.
fn refuse(refused: &[i64], program: BpfProgram) -> Result<BpfProgram> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let n = refused.len();
    if n > 250 {
        return Err(anyhow!("{n} refused syscalls: too many for one filter"));
    }
    // Another architecture's calls go straight to `program`, which has
    // its own check.
    let mut out = vec![ins(LD_W_ABS, 0, 0, 4), ins(JEQ_K, 0, n + 3, AUDIT_ARCH_X86_64), ins(LD_W_ABS, 0, 0, 0)];
    // The i-th compare jumps to the RET below the last one on a match.
    out.extend(refused.iter().enumerate().map(|(i, &nr)| ins(JEQ_K, n - i, 0, nr as u32)));
    out.push(ins(JA, 0, 0, 1));
    out.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    out.extend(program);
    Ok(out)
}

/// The instructions that let the runtime's PRIVATE and BUFFERED sites
/// through, before `program` (seccomp_data: the instruction pointer's low
/// half at byte 8, high half at 12).
fn allow_sites(program: BpfProgram) -> BpfProgram {
    let low = |site: u64| (site + runtime::SYSCALL_LEN) as u32;
    let mut out = vec![
        ins(LD_W_ABS, 0, 0, 12),
        ins(JEQ_K, 0, 4, (runtime::PAGE >> 32) as u32),
        ins(LD_W_ABS, 0, 0, 8),
        ins(JEQ_K, 1, 0, low(runtime::SITE_PRIVATE)),
        ins(JEQ_K, 0, 1, low(runtime::SITE_BUFFERED)),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    out.extend(program);
    out
}

const LD_W_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ_K: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JA: u32 = libc::BPF_JMP | libc::BPF_JA;
const RET_K: u32 = libc::BPF_RET | libc::BPF_K;

/// One classic BPF instruction: `code`, the jumps taken when its test is
/// true (`jt`) and false (`jf`, both at most 255), and its constant.
fn ins(code: u32, jt: usize, jf: usize, k: u32) -> sock_filter {
    sock_filter { code: code as u16, jt: jt as u8, jf: jf as u8, k }
}

/// futex calls the filter lets through: every one without a timeout, and
/// every operation that is not a wait ([`syscalls::is_logged_futex`]).
fn untimed_futex_rules() -> Result<Vec<SeccompRule>> {
    let cond = |arg, len, op, value| SeccompCondition::new(arg, len, op, value).map_err(|e| anyhow!("{e:?}"));
    let rule = |c| SeccompRule::new(vec![c]).map_err(|e| anyhow!("{e:?}"));
    let mut rules = vec![rule(cond(3, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, 0)?)?];
    for op in (0..=13).filter(|op| !syscalls::FUTEX_WAIT_OPS.contains(op)) {
        let masked = SeccompCmpOp::MaskedEq(syscalls::FUTEX_CMD_MASK);
        rules.push(rule(cond(1, SeccompCmpArgLen::Dword, masked, op)?)?);
    }
    Ok(rules)
}
