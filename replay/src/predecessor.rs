//! The instruction that ends at a code address, so that going back one
//! instruction from a trap need not single-step a whole segment.
//!
//! x86-64 code cannot be decoded backwards: any of the 15 bytes before an
//! address may start an instruction that ends there. A function's start
//! is an instruction boundary, though, so the function that holds the
//! address (an ELF symbol, `object`, of the module loaded there) is
//! decoded forwards from its start (capstone) until an instruction ends at
//! the address. That instruction is a candidate only: the thread may have
//! jumped to the address from elsewhere, and the caller checks that
//! stepping it reaches the trap. The modules come from the loader's list
//! (loader.rs), not /proc/PID/maps: a replay's code is anonymous memory
//! filled from the trace.

use capstone::arch::x86::ArchMode;
use capstone::arch::BuildsCapstone;
use capstone::Capstone;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::path::PathBuf;

/// The most bytes of a function decoded (a longer one is not searched).
const FUNCTION_MAX: u64 = 1 << 20;

/// An ELF module of the replayed process.
pub(crate) struct Module {
    /// The file it was loaded from (the trace's copy when it has one).
    pub path: PathBuf,
    /// Its load bias: run-time address minus address in the file (bytes).
    pub bias: u64,
}

/// The start of the instruction that ends at `addr`, in the function of
/// one of `modules` that holds `addr`, its code read through `read`
/// (which returns how many bytes it read, weft's breakpoints hidden).
/// `None` when the address is in no named function (or one longer than
/// [`FUNCTION_MAX`]), or decoding from the function's start steps over
/// `addr`.
pub(crate) fn instruction_ending_at(modules: &[Module], addr: u64, read: impl Fn(u64, &mut [u8]) -> usize) -> Option<u64> {
    let start = modules.iter().find_map(|m| function_start(m, addr))?;
    let len = addr.checked_sub(start).filter(|&n| n > 0 && n <= FUNCTION_MAX)?;
    let mut code = vec![0; len as usize];
    if read(start, &mut code) != code.len() {
        return None;
    }
    let cs = Capstone::new().x86().mode(ArchMode::Mode64).build().ok()?;
    let insns = cs.disasm_all(&code, start).ok()?;
    let last = insns.iter().last()?;
    (last.address() + last.len() as u64 == addr).then(|| last.address())
}

/// The run-time start of the function symbol of `module` that holds
/// run-time address `addr`; `None` when the module's file is unreadable,
/// not ELF, does not load `addr`, or names no function there.
fn function_start(module: &Module, addr: u64) -> Option<u64> {
    let data = std::fs::read(&module.path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let vaddr = addr.wrapping_sub(module.bias);
    file.segments().find(|s| (s.address()..s.address() + s.size()).contains(&vaddr))?;
    let holds = |s: &object::Symbol<'_, '_>| s.kind() == SymbolKind::Text && s.address() <= vaddr && vaddr < s.address() + s.size();
    let symbol = file.symbols().chain(file.dynamic_symbols()).find(holds)?;
    Some(symbol.address().wrapping_add(module.bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address right after a 7-byte `lea reg, [rip]` in a function of
    /// its own.
    #[inline(never)]
    fn after_lea() -> u64 {
        let after: u64;
        // SAFETY: loads an address into a register, nothing else.
        unsafe { std::arch::asm!("lea {0}, [rip]", out(reg) after) };
        std::hint::black_box(after)
    }

    /// This test binary as a module: its load bias from dladdr(3).
    fn this_binary() -> Module {
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr fills `info` for an address of our own code.
        assert_ne!(unsafe { libc::dladdr(after_lea as *const libc::c_void, &mut info) }, 0);
        let path = std::fs::read_link("/proc/self/exe").unwrap();
        let data = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let first = file.segments().map(|s| s.address()).min().unwrap() & !0xfff;
        Module { path, bias: (info.dli_fbase as u64).wrapping_sub(first) }
    }

    #[test]
    fn the_instruction_before_an_address_is_found_in_this_test_binary() {
        let end = after_lea();
        let read = |a: u64, buf: &mut [u8]| {
            // SAFETY: our own code, mapped and readable.
            unsafe { std::ptr::copy_nonoverlapping(a as *const u8, buf.as_mut_ptr(), buf.len()) };
            buf.len()
        };
        let modules = [this_binary()];
        assert_eq!(instruction_ending_at(&modules, end, read), Some(end - 7));
        assert_eq!(instruction_ending_at(&modules, 8, read), None);
        assert_eq!(instruction_ending_at(&[], end, read), None);
    }
}
