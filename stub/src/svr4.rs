//! The loaded shared libraries, as the `qXfer:libraries-svr4:read` XML
//! document (GDB RSP, "Library List Format for SVR4 Targets"), built the
//! way gdbserver builds it: from the dynamic linker's own list in the
//! tracee's memory. The executable's program headers (auxv `AT_PHDR`,
//! `AT_PHNUM`) give its `PT_DYNAMIC`, relocated by `AT_PHDR` minus
//! `PT_PHDR`'s `p_vaddr`; the loader stores the address of its
//! `struct r_debug` in the `DT_DEBUG` entry there, and `r_debug.r_map`
//! heads the `struct link_map` chain. The chain's first entry is the
//! executable (`main-lm`); gdb gets the others as libraries.

use std::fmt::Write;

/// Reads tracee memory: fills the start of the buffer with the bytes at
/// the address and returns how many it could read (0: unmapped).
pub type ReadMemory<'a> = &'a dyn Fn(u64, &mut [u8]) -> usize;

/// auxv keys (`<elf.h>`).
const AT_PHDR: u64 = 3;
const AT_PHNUM: u64 = 5;
/// Program header types and the size of an `Elf64_Phdr`.
const PT_DYNAMIC: u32 = 2;
const PT_PHDR: u32 = 6;
pub(crate) const PHDR_SIZE: u64 = 56;
/// Dynamic section tags.
const DT_NULL: u64 = 0;
const DT_DEBUG: u64 = 21;
/// Offsets in `struct r_debug` and `struct link_map` (glibc, LP64).
const R_MAP: u64 = 8;
const L_ADDR: u64 = 0;
const L_NAME: u64 = 8;
const L_LD: u64 = 16;
const L_NEXT: u64 = 24;
/// Bounds on what a corrupt tracee can make us walk.
const MAX_LIBRARIES: usize = 4096;
const MAX_DYNAMIC: u64 = 4096;
const PATH_MAX: usize = 4096;
/// The most program headers an ELF file can list without extended
/// numbering (`PN_XNUM`).
const MAX_PHNUM: u64 = 0xffff;

/// One `struct link_map` of the loader's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkMap {
    /// Its own address.
    pub(crate) lm: u64,
    /// The load bias.
    pub(crate) l_addr: u64,
    /// The path the loader opened (empty for the executable and the vDSO).
    name: Vec<u8>,
    /// Its dynamic section.
    l_ld: u64,
}

/// The fields of an `Elf64_Phdr` weft uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgramHeader {
    /// `p_type`.
    pub(crate) kind: u32,
    /// `p_vaddr`, before relocation.
    vaddr: u64,
    /// `p_memsz`, in bytes.
    memsz: u64,
}

/// The library list document for a process with auxiliary vector `auxv`
/// (the raw `/proc/PID/auxv` bytes). Before the loader has filled
/// `DT_DEBUG` (at the program's first instructions), or for a static
/// executable, the list is empty.
pub fn library_list(auxv: &[u8], read: ReadMemory) -> String {
    let maps = link_map_chain(auxv, read);
    let mut xml = String::from("<library-list-svr4 version=\"1.0\"");
    if let Some(main) = maps.first() {
        let _ = write!(xml, " main-lm=\"{:#x}\"", main.lm);
    }
    xml.push('>');
    for m in maps.iter().skip(1).filter(|m| !m.name.is_empty()) {
        let _ = write!(
            xml,
            "<library name=\"{}\" lm=\"{:#x}\" l_addr=\"{:#x}\" l_ld=\"{:#x}\" lmid=\"0x0\"/>",
            escape(&String::from_utf8_lossy(&m.name)),
            m.lm,
            m.l_addr,
            m.l_ld
        );
    }
    xml.push_str("</library-list-svr4>");
    xml
}

/// The loader's `link_map` chain, in its order (the executable first);
/// empty before the loader has filled `DT_DEBUG`, or for a static
/// executable. `auxv` is the raw `/proc/PID/auxv`.
pub(crate) fn link_map_chain(auxv: &[u8], read: ReadMemory) -> Vec<LinkMap> {
    r_debug(auxv, read).map(|r| link_maps(r, read)).unwrap_or_default()
}

/// The value of auxv entry `key` (`AT_*`) in the raw auxiliary vector.
fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    auxv.chunks_exact(16)
        .map(|e| (u64::from_le_bytes(e[..8].try_into().unwrap()), u64::from_le_bytes(e[8..].try_into().unwrap())))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// The executable's program headers, found through auxv `AT_PHDR` and
/// `AT_PHNUM`; `None` when auxv lacks them or they are unreadable.
pub(crate) fn executable_headers(auxv: &[u8], read: ReadMemory) -> Option<Vec<ProgramHeader>> {
    program_headers(auxv_value(auxv, AT_PHDR)?, auxv_value(auxv, AT_PHNUM)?, read)
}

/// The `count` program headers at `at` in tracee memory; `None` when one
/// is unreadable or `count` exceeds what ELF allows.
pub(crate) fn program_headers(at: u64, count: u64, read: ReadMemory) -> Option<Vec<ProgramHeader>> {
    if count > MAX_PHNUM {
        return None;
    }
    (0..count)
        .map(|i| {
            let mut h = [0u8; PHDR_SIZE as usize];
            (read(at.wrapping_add(i * PHDR_SIZE), &mut h) == h.len()).then(|| {
                let word = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
                ProgramHeader { kind: u32::from_le_bytes(h[..4].try_into().unwrap()), vaddr: word(16), memsz: word(40) }
            })
        })
        .collect()
}

/// The address of the loader's `struct r_debug`, when it has set it.
fn r_debug(auxv: &[u8], read: ReadMemory) -> Option<u64> {
    let phdr = auxv_value(auxv, AT_PHDR)?;
    let headers = executable_headers(auxv, read)?;
    // Without PT_PHDR the bias is unknown; such executables (static ones)
    // have no DT_DEBUG either.
    let bias = phdr.wrapping_sub(headers.iter().find(|h| h.kind == PT_PHDR)?.vaddr);
    let dyn_header = headers.iter().find(|h| h.kind == PT_DYNAMIC)?;
    let (dynamic, memsz) = (bias.wrapping_add(dyn_header.vaddr), dyn_header.memsz);
    (0..(memsz / 16).min(MAX_DYNAMIC))
        .map_while(|i| {
            let (tag, val) = (read_u64(read, dynamic.wrapping_add(16 * i))?, read_u64(read, dynamic.wrapping_add(16 * i + 8))?);
            (tag != DT_NULL).then_some((tag, val))
        })
        .find(|(tag, _)| *tag == DT_DEBUG)
        .map(|(_, val)| val)
        .filter(|r| *r != 0)
}

/// The `link_map` chain from `r_debug.r_map`, in the loader's order.
fn link_maps(r_debug: u64, read: ReadMemory) -> Vec<LinkMap> {
    let mut maps = Vec::new();
    let mut lm = read_u64(read, r_debug.wrapping_add(R_MAP)).unwrap_or(0);
    while lm != 0 && maps.len() < MAX_LIBRARIES {
        let field = |off| read_u64(read, lm.wrapping_add(off));
        let (Some(l_addr), Some(name_at), Some(l_ld), Some(next)) = (field(L_ADDR), field(L_NAME), field(L_LD), field(L_NEXT))
        else {
            break;
        };
        maps.push(LinkMap { lm, l_addr, name: read_c_string(read, name_at), l_ld });
        lm = next;
    }
    maps
}

/// A little-endian word of tracee memory, if all 8 bytes are readable.
pub(crate) fn read_u64(read: ReadMemory, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    (read(addr, &mut b) == 8).then(|| u64::from_le_bytes(b))
}

/// The NUL-terminated string at `addr` (at most `PATH_MAX` bytes; empty
/// when unreadable).
fn read_c_string(read: ReadMemory, addr: u64) -> Vec<u8> {
    let mut buf = vec![0u8; PATH_MAX];
    let n = if addr == 0 { 0 } else { read(addr, &mut buf) };
    buf.truncate(n);
    if let Some(nul) = buf.iter().position(|b| *b == 0) {
        buf.truncate(nul);
    }
    buf
}

/// `s` as XML attribute text.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A sparse fake address space: byte runs by start address.
    #[derive(Default)]
    pub(crate) struct Fake(BTreeMap<u64, Vec<u8>>);

    impl Fake {
        pub(crate) fn put(&mut self, addr: u64, bytes: &[u8]) {
            self.0.insert(addr, bytes.to_vec());
        }
        pub(crate) fn words(&mut self, addr: u64, words: &[u64]) {
            self.put(addr, &words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<_>>());
        }
        pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
            let Some((start, run)) = self.0.range(..=addr).next_back() else { return 0 };
            let from = (addr - start) as usize;
            if from >= run.len() {
                return 0;
            }
            let n = buf.len().min(run.len() - from);
            buf[..n].copy_from_slice(&run[from..from + n]);
            n
        }
    }

    /// An `Elf64_Phdr` with the fields weft reads.
    pub(crate) fn phdr(kind: u32, vaddr: u64, memsz: u64) -> Vec<u8> {
        let mut h = vec![0u8; 56];
        h[..4].copy_from_slice(&kind.to_le_bytes());
        h[16..24].copy_from_slice(&vaddr.to_le_bytes());
        h[40..48].copy_from_slice(&memsz.to_le_bytes());
        h
    }

    const BIAS: u64 = 0x5555_5555_4000;

    /// A PIE whose headers are at BIAS + 0x40 with its dynamic section at
    /// BIAS + 0x3000; `r_debug_at` is what DT_DEBUG holds.
    fn process(r_debug_at: u64) -> (Vec<u8>, Fake) {
        let mut mem = Fake::default();
        let headers = [phdr(PT_PHDR, 0x40, 0xa8), phdr(1, 0, 0x1000), phdr(PT_DYNAMIC, 0x3000, 0x40)].concat();
        mem.put(BIAS + 0x40, &headers);
        mem.words(BIAS + 0x3000, &[1, 7, DT_DEBUG, r_debug_at, DT_NULL, 0]);
        let auxv: Vec<u8> =
            [AT_PHDR, BIAS + 0x40, AT_PHNUM, 3, 0, 0].iter().flat_map(|w| w.to_le_bytes()).collect();
        (auxv, mem)
    }

    #[test]
    fn empty_before_the_loader_sets_dt_debug() {
        let (auxv, mem) = process(0);
        assert_eq!(library_list(&auxv, &|a, b| mem.read(a, b)), "<library-list-svr4 version=\"1.0\"></library-list-svr4>");
        assert_eq!(library_list(&[], &|a, b| mem.read(a, b)), "<library-list-svr4 version=\"1.0\"></library-list-svr4>");
    }

    #[test]
    fn walks_the_link_map_chain() {
        let (auxv, mut mem) = process(0x7000_0000);
        mem.words(0x7000_0000, &[1, 0x7100_0000]);
        // The executable (empty name), libc, a name needing escapes, ld.so.
        mem.words(0x7100_0000, &[BIAS, 0x7300_0000, BIAS + 0x3000, 0x7100_0100, 0]);
        mem.words(0x7100_0100, &[0x7fff_0000_0000, 0x7300_0010, 0x7fff_0020_0000, 0x7100_0200, 0x7100_0000]);
        mem.words(0x7100_0200, &[0x10_0000, 0x7300_0040, 0x20_0000, 0, 0x7100_0100]);
        mem.put(0x7300_0000, b"\0");
        mem.put(0x7300_0010, b"/lib/x86_64-linux-gnu/libc.so.6\0");
        mem.put(0x7300_0040, b"/tmp/a&b\"<c>.so\0junk");
        let xml = library_list(&auxv, &|a, b| mem.read(a, b));
        assert_eq!(
            xml,
            "<library-list-svr4 version=\"1.0\" main-lm=\"0x71000000\">\
             <library name=\"/lib/x86_64-linux-gnu/libc.so.6\" lm=\"0x71000100\" l_addr=\"0x7fff00000000\" l_ld=\"0x7fff00200000\" lmid=\"0x0\"/>\
             <library name=\"/tmp/a&amp;b&quot;&lt;c&gt;.so\" lm=\"0x71000200\" l_addr=\"0x100000\" l_ld=\"0x200000\" lmid=\"0x0\"/>\
             </library-list-svr4>"
        );
    }

    #[test]
    fn a_broken_chain_ends_the_list() {
        let (auxv, mut mem) = process(0x7000_0000);
        mem.words(0x7000_0000, &[1, 0x7100_0000]);
        mem.words(0x7100_0000, &[BIAS, 0, BIAS + 0x3000, 0xdead_0000, 0]);
        let xml = library_list(&auxv, &|a, b| mem.read(a, b));
        assert_eq!(xml, "<library-list-svr4 version=\"1.0\" main-lm=\"0x71000000\"></library-list-svr4>");
    }
}
