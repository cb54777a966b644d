//! The gdbstub architecture weft speaks: x86-64 Linux as gdb's own
//! `amd64-linux` target description lays it out, so that gdb sees
//! `orig_rax`, `fs_base` and `gs_base` (it needs `fs_base` to find a
//! thread's TLS block, hence thread-local variables). gdbstub_arch's
//! `X86_64_SSE` stops at `mxcsr`; this file extends its register struct
//! with the three Linux registers and serves the matching `target.xml`
//! (GDB manual, "Target Descriptions", "i386 Features": the
//! `org.gnu.gdb.i386.linux` and `org.gnu.gdb.i386.segments` features).

use gdbstub::arch::{Arch, RegId, Registers};
use gdbstub_arch::x86::reg::id::X86_64CoreRegId;
use gdbstub_arch::x86::reg::X86_64CoreRegs;
use std::num::NonZeroUsize;

/// x86-64 GNU/Linux: gdb's `amd64-linux` register set without AVX.
pub enum LinuxX86_64 {}

impl Arch for LinuxX86_64 {
    type Usize = u64;
    type Registers = LinuxRegs;
    type RegId = LinuxRegId;
    /// The Z0 packet's `kind`: the breakpoint instruction's length in
    /// bytes (1 for int3 on x86; GDB RSP, "Architecture-Specific Protocol
    /// Details", "x86 Breakpoint Kinds").
    type BreakpointKind = usize;

    /// The whole description in one document (gdbstub answers
    /// `qXfer:features:read` for the `target.xml` annex only, so gdb's
    /// `xi:include`s are inlined).
    fn target_description_xml() -> Option<&'static str> {
        Some(include_str!("target.xml"))
    }
}

/// Bytes the `g` packet spends on gdbstub_arch's core and SSE registers
/// (register numbers 0 to 56).
const CORE_LEN: usize = 0x218;

/// One thread's registers in the order of the `g` packet (GDB RSP,
/// "Packets", `g`): core and SSE (gdb registers 0-56), then `orig_rax`
/// (57), `fs_base` (58) and `gs_base` (59), each 8 bytes little-endian.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LinuxRegs {
    /// General, segment, x87 and SSE registers.
    pub core: X86_64CoreRegs,
    /// The syscall number at a syscall stop (-1 elsewhere), which gdb
    /// writes back to restart or cancel an interrupted syscall.
    pub orig_rax: u64,
    /// The FS segment base: the thread pointer glibc's TLS hangs off.
    pub fs_base: u64,
    /// The GS segment base.
    pub gs_base: u64,
}

impl Registers for LinuxRegs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.core.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        self.core.gdb_serialize(&mut write_byte);
        for reg in [self.orig_rax, self.fs_base, self.gs_base] {
            reg.to_le_bytes().into_iter().for_each(|b| write_byte(Some(b)));
        }
    }

    /// Errors when the packet is not exactly the 60 registers' 584 bytes.
    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        if bytes.len() != CORE_LEN + 3 * 8 {
            return Err(());
        }
        self.core.gdb_deserialize(&bytes[..CORE_LEN])?;
        let word = |i: usize| {
            let at = CORE_LEN + 8 * i;
            u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
        };
        self.orig_rax = word(0);
        self.fs_base = word(1);
        self.gs_base = word(2);
        Ok(())
    }
}

/// A register number of the description above (gdb numbers them in
/// document order; GDB manual, "Target Description Format", "Registers").
#[derive(Debug, Clone, Copy)]
pub enum LinuxRegId {
    /// Registers 0-56, as gdbstub_arch numbers them.
    Core(X86_64CoreRegId),
    /// Register 57.
    OrigRax,
    /// Register 58.
    FsBase,
    /// Register 59.
    GsBase,
}

impl RegId for LinuxRegId {
    fn from_raw_id(id: usize) -> Option<(Self, Option<NonZeroUsize>)> {
        let linux = match id {
            57 => LinuxRegId::OrigRax,
            58 => LinuxRegId::FsBase,
            59 => LinuxRegId::GsBase,
            _ => return X86_64CoreRegId::from_raw_id(id).map(|(r, size)| (LinuxRegId::Core(r), size)),
        };
        Some((linux, NonZeroUsize::new(8)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sizes_agree() {
        let mut regs = LinuxRegs { orig_rax: u64::MAX, fs_base: 0x7fff_f7d8_a740, gs_base: 3, ..Default::default() };
        regs.core.rip = 0x401000;
        let mut bytes = Vec::new();
        regs.gdb_serialize(|b| bytes.push(b.expect("every register is available")));
        let sizes: usize = (0..).map_while(LinuxRegId::from_raw_id).map(|(_, s)| s.unwrap().get()).sum();
        assert_eq!(bytes.len(), sizes);
        assert_eq!(bytes.len(), 0x230);
        let mut back = LinuxRegs::default();
        back.gdb_deserialize(&bytes).unwrap();
        assert_eq!(back, regs);
        assert!(back.gdb_deserialize(&bytes[..CORE_LEN]).is_err());
    }

    #[test]
    fn description_numbers_sixty_registers() {
        let xml = LinuxX86_64::target_description_xml().unwrap();
        assert_eq!(xml.matches("<reg ").count(), 60);
        let fs = xml.find("\"fs_base\"").unwrap();
        assert!(xml.find("\"orig_rax\"").unwrap() < fs && fs < xml.find("\"gs_base\"").unwrap());
    }
}
