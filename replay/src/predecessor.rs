//! The instruction that ends at a code address, so that going back one
//! instruction from a trap need not single-step a whole segment.
//!
//! x86-64 code cannot be decoded backwards: any of the 15 bytes before an
//! address may start an instruction that ends there. A function's start
//! is an instruction boundary, though, so the function that holds the
//! address (its ELF symbol, `object`, in the file /proc/PID/maps says is
//! mapped there) is decoded forwards from its start (capstone) until an
//! instruction ends at the address. That instruction is a candidate only:
//! the thread may have jumped to the address from elsewhere, and the
//! caller checks that stepping it reaches the trap.

use anyhow::{anyhow, Result};
use capstone::arch::x86::ArchMode;
use capstone::arch::BuildsCapstone;
use capstone::Capstone;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// The most bytes of a function decoded (a longer one is not searched).
const FUNCTION_MAX: u64 = 1 << 20;

/// The start of the instruction that ends at `addr` in the function that
/// holds `addr` in the address space of task `tid`, its code read through
/// `read` (which returns how many bytes it read, weft's breakpoints
/// hidden). `None` when the address is in no named function of a mapped
/// file (or a longer one than [`FUNCTION_MAX`]), or decoding from the
/// function's start steps over `addr`.
pub(crate) fn instruction_ending_at(tid: i32, addr: u64, read: impl Fn(u64, &mut [u8]) -> usize) -> Option<u64> {
    let start = function_start(tid, addr).ok()??;
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

/// The run-time start of the function symbol that holds `addr`, from the
/// ELF file mapped there in task `tid` (/proc/TID/maps, proc(5)).
/// `Ok(None)`: anonymous memory, or no symbol holds it. Errors: /proc or
/// the file unreadable, not ELF.
fn function_start(tid: i32, addr: u64) -> Result<Option<u64>> {
    let maps = std::fs::read_to_string(format!("/proc/{tid}/maps"))?;
    let Some((map_start, offset, path)) = maps.lines().find_map(|l| mapping_of(l, addr)) else { return Ok(None) };
    let data = std::fs::read(path)?;
    let file = object::File::parse(&*data)?;
    let file_offset = offset + (addr - map_start);
    let segment = file
        .segments()
        .find(|s| {
            let (at, size) = s.file_range();
            (at..at + size).contains(&file_offset)
        })
        .ok_or_else(|| anyhow!("{path}: no segment holds offset {file_offset:#x}"))?;
    let vaddr = segment.address() + (file_offset - segment.file_range().0);
    let bias = addr.wrapping_sub(vaddr);
    let holds = |s: &object::Symbol<'_, '_>| s.kind() == SymbolKind::Text && s.address() <= vaddr && vaddr < s.address() + s.size();
    Ok(file.symbols().chain(file.dynamic_symbols()).find(holds).map(|s| s.address().wrapping_add(bias)))
}

/// The start, file offset and path of a /proc/PID/maps line's mapping, if
/// it is of a file and holds `addr`.
fn mapping_of(line: &str, addr: u64) -> Option<(u64, u64, &str)> {
    let mut f = line.splitn(6, ' ');
    let (range, _perms, offset) = (f.next()?, f.next()?, f.next()?);
    let path = f.nth(2)?.trim_start();
    let (s, e) = range.split_once('-')?;
    let hex = |x: &str| u64::from_str_radix(x, 16).ok();
    let (start, end) = (hex(s)?, hex(e)?);
    ((start..end).contains(&addr) && path.starts_with('/')).then_some((start, hex(offset)?, path))
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

    #[test]
    fn the_instruction_before_an_address_is_found_in_this_test_binary() {
        let end = after_lea();
        let me = std::process::id() as i32;
        let read = |a: u64, buf: &mut [u8]| {
            // SAFETY: our own code, mapped and readable.
            unsafe { std::ptr::copy_nonoverlapping(a as *const u8, buf.as_mut_ptr(), buf.len()) };
            buf.len()
        };
        assert_eq!(instruction_ending_at(me, end, read), Some(end - 7));
        assert_eq!(instruction_ending_at(me, 8, read), None);
    }

    #[test]
    fn a_maps_line_gives_its_start_offset_and_file() {
        let line = "7ffff7dd0000-7ffff7df0000 r-xp 00028000 08:01 13                         /lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(mapping_of(line, 0x7ffff7dd0010), Some((0x7ffff7dd0000, 0x28000, "/lib/x86_64-linux-gnu/libc.so.6")));
        assert_eq!(mapping_of(line, 0x7ffff7df0000), None);
        assert_eq!(mapping_of("7ffff7ff0000-7ffff7ff1000 rw-p 00000000 00:00 0 ", 0x7ffff7ff0000), None);
    }
}
