//! Between the session's registers (ptrace's `user_regs_struct` and the
//! FXSAVE image of `user_fpregs_struct`) and gdb's register file
//! ([`LinuxRegs`]). The x87 fields follow gdb's own FXSAVE conversion
//! (gdb/i387-tdep.c, `i387_supply_fxsave`/`i387_collect_fxsave`): `ftag`
//! is the full 2-bit-per-register tag word rebuilt from FXSAVE's abridged
//! one, `fiseg`/`foseg` are the 16 bits above the 32-bit `fioff`/`fooff`,
//! and `fop` is the 11-bit opcode.

use crate::arch::LinuxRegs;
use gdbstub_arch::x86::reg::{X86SegmentRegs, X87FpuInternalRegs, F80};
use weft_replay::Registers;

/// Tag of an empty x87 register.
const TAG_EMPTY: u32 = 3;

/// gdb's view of `r`.
pub fn to_gdb(r: &Registers) -> LinuxRegs {
    let g = &r.regs;
    let f = &r.fpregs;
    let mut out = LinuxRegs { orig_rax: g.orig_rax, fs_base: g.fs_base, gs_base: g.gs_base, ..Default::default() };
    let c = &mut out.core;
    c.regs = [g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11, g.r12, g.r13, g.r14, g.r15];
    c.rip = g.rip;
    c.eflags = g.eflags as u32;
    c.segments = X86SegmentRegs {
        cs: g.cs as u32,
        ss: g.ss as u32,
        ds: g.ds as u32,
        es: g.es as u32,
        fs: g.fs as u32,
        gs: g.gs as u32,
    };
    for (i, st) in c.st.iter_mut().enumerate() {
        *st = st_bytes(f, i);
    }
    c.fpu = X87FpuInternalRegs {
        fctrl: f.cwd as u32,
        fstat: f.swd as u32,
        ftag: full_tag(f),
        fiseg: (f.rip >> 32) as u32 & 0xffff,
        fioff: f.rip as u32,
        foseg: (f.rdp >> 32) as u32 & 0xffff,
        fooff: f.rdp as u32,
        fop: f.fop as u32 & 0x7ff,
    };
    for (i, xmm) in c.xmm.iter_mut().enumerate() {
        let words = &f.xmm_space[4 * i..4 * i + 4];
        *xmm = words.iter().rev().fold(0u128, |acc, w| acc << 32 | *w as u128);
    }
    c.mxcsr = f.mxcsr;
    out
}

/// Writes gdb's register file `from` into `r`, keeping what gdb does not
/// see (`mxcr_mask`, the top bits of the x87 pointers).
pub fn apply_gdb(from: &LinuxRegs, r: &mut Registers) {
    let c = &from.core;
    let g = &mut r.regs;
    [g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11, g.r12, g.r13, g.r14, g.r15] = c.regs;
    g.rip = c.rip;
    g.eflags = c.eflags as u64;
    let s = &c.segments;
    (g.cs, g.ss, g.ds, g.es, g.fs, g.gs) = (s.cs as u64, s.ss as u64, s.ds as u64, s.es as u64, s.fs as u64, s.gs as u64);
    (g.orig_rax, g.fs_base, g.gs_base) = (from.orig_rax, from.fs_base, from.gs_base);
    let f = &mut r.fpregs;
    for (i, st) in c.st.iter().enumerate() {
        for (j, word) in f.st_space[4 * i..4 * i + 3].iter_mut().enumerate() {
            let mut b = [0u8; 4];
            let bytes = &st[4 * j..(4 * j + 4).min(10)];
            b[..bytes.len()].copy_from_slice(bytes);
            *word = u32::from_le_bytes(b);
        }
    }
    let fpu = &c.fpu;
    f.cwd = fpu.fctrl as u16;
    f.swd = fpu.fstat as u16;
    f.ftw = (0..8).filter(|i| (fpu.ftag >> (2 * i)) & 3 != TAG_EMPTY).fold(0, |acc, i| acc | 1 << i);
    f.fop = (fpu.fop & 0x7ff) as u16;
    f.rip = (f.rip & !0xffff_ffff_ffff) | ((fpu.fiseg as u64 & 0xffff) << 32) | fpu.fioff as u64;
    f.rdp = (f.rdp & !0xffff_ffff_ffff) | ((fpu.foseg as u64 & 0xffff) << 32) | fpu.fooff as u64;
    for (i, xmm) in c.xmm.iter().enumerate() {
        for (j, word) in f.xmm_space[4 * i..4 * i + 4].iter_mut().enumerate() {
            *word = (xmm >> (32 * j)) as u32;
        }
    }
    f.mxcsr = c.mxcsr;
}

/// ST(`i`)'s 80 bits (FXSAVE keeps each in a 16-byte slot).
fn st_bytes(f: &libc::user_fpregs_struct, i: usize) -> F80 {
    let mut slot = [0u8; 16];
    for (j, w) in f.st_space[4 * i..4 * i + 4].iter().enumerate() {
        slot[4 * j..4 * j + 4].copy_from_slice(&w.to_le_bytes());
    }
    slot[..10].try_into().expect("10 bytes")
}

/// The x87 tag word (2 bits per physical register: 0 valid, 1 zero,
/// 2 special, 3 empty) from FXSAVE's abridged one (1 bit: not empty), by
/// classifying the register's value as gdb's `i387_tag` does.
fn full_tag(f: &libc::user_fpregs_struct) -> u32 {
    let top = (f.swd as usize >> 11) & 7;
    (0..8).fold(0, |tag, physical| {
        let t = if f.ftw & (1 << physical) == 0 { TAG_EMPTY } else { classify(&st_bytes(f, (physical + 8 - top) % 8)) };
        tag | t << (2 * physical)
    })
}

/// An 80-bit value's tag: valid, zero or special (NaN, infinity,
/// denormal, unnormal).
fn classify(raw: &F80) -> u32 {
    let exponent = u16::from_le_bytes([raw[8], raw[9]]) & 0x7fff;
    let integer = raw[7] & 0x80 != 0;
    let fraction_zero = raw[..7].iter().all(|b| *b == 0) && raw[7] & 0x7f == 0;
    match exponent {
        0x7fff => 2,
        0 if fraction_zero && !integer => 1,
        0 => 2,
        _ if integer => 0,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed() -> Registers {
        // SAFETY: both are plain C structs of integers.
        unsafe { std::mem::zeroed() }
    }

    #[test]
    fn round_trips_through_gdb() {
        let mut r = zeroed();
        r.regs.rax = 1;
        r.regs.r15 = 15;
        r.regs.rip = 0x401000;
        r.regs.fs_base = 0x7fff_f7d8_a740;
        r.regs.orig_rax = u64::MAX;
        r.regs.cs = 0x33;
        r.fpregs.cwd = 0x37f;
        r.fpregs.mxcsr = 0x1f80;
        r.fpregs.mxcr_mask = 0xffff;
        r.fpregs.xmm_space[4] = 0xdead_beef;
        r.fpregs.xmm_space[7] = 0x8000_0000;
        // ST(0) = 1.0 (exponent 0x3fff, integer bit set), in use.
        r.fpregs.st_space[1] = 0x8000_0000;
        r.fpregs.st_space[2] = 0x3fff;
        r.fpregs.ftw = 1 << 7;
        r.fpregs.swd = 7 << 11;
        let g = to_gdb(&r);
        assert_eq!(g.core.regs[0], 1);
        assert_eq!(g.core.regs[15], 15);
        assert_eq!(g.core.xmm[1], 0x8000_0000_0000_0000_0000_0000_dead_beef);
        // Physical register 7 is ST(0) when TOP is 7: valid; the rest empty.
        assert_eq!(g.core.fpu.ftag, 0x3fff);
        assert_eq!(g.core.st[0][9], 0x3f);
        let mut back = zeroed();
        back.fpregs.mxcr_mask = 0xffff;
        apply_gdb(&g, &mut back);
        assert_eq!(to_gdb(&back), g);
        assert_eq!(back.fpregs.ftw, r.fpregs.ftw);
        assert_eq!(back.fpregs.st_space[..4], r.fpregs.st_space[..4]);
        assert_eq!(back.regs.fs_base, r.regs.fs_base);
    }

    #[test]
    fn classifies_like_gdb() {
        let mut zero = [0u8; 10];
        assert_eq!(classify(&zero), 1);
        zero[9] = 0x7f;
        zero[8] = 0xff;
        assert_eq!(classify(&zero), 2, "infinity/NaN");
        let denormal = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(classify(&denormal), 2);
    }
}
