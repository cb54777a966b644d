//! The dynamic loader's state in a replayed process: `r_debug`, the
//! `link_map` chain, program headers, TLS blocks; glibc x86-64. Read the
//! way gdbserver reads it, from the loader's own data in tracee memory,
//! for [`ReplaySession::libraries`](crate::ReplaySession::libraries) and
//! [`ReplaySession::tls_address`](crate::ReplaySession::tls_address).
//!
//! Libraries: the executable's program headers (auxv `AT_PHDR`,
//! `AT_PHNUM`) give its `PT_DYNAMIC`, relocated by `AT_PHDR` minus
//! `PT_PHDR`'s `p_vaddr`; the loader stores the address of its
//! `struct r_debug` in the `DT_DEBUG` entry there (`<link.h>`), and
//! `r_debug.r_map` heads the `struct link_map` chain, the executable
//! first.
//!
//! Thread-local variables, as glibc finds them on x86-64 (TLS variant II,
//! `sysdeps/x86_64/nptl/tls.h`): the thread pointer is the thread's
//! `fs_base`; the `tcbhead_t` there holds at offset 8 the `dtv` pointer,
//! which points one entry into the thread's dynamic thread vector (so
//! `dtv[-1].counter` is its length); entry `k` is a 16-byte `dtv_t` whose
//! first word is module `k`'s TLS block. glibc numbers the modules that
//! have a `PT_TLS` segment 1, 2, ... in load order, which is the order of
//! the `link_map` chain, the executable first.

/// Reads tracee memory: fills the start of the buffer with the bytes at
/// the address and returns how many it could read (0: unmapped), as
/// [`ReplaySession::read_memory`](crate::ReplaySession::read_memory).
pub type ReadMemory<'a> = &'a dyn Fn(u64, &mut [u8]) -> usize;

/// auxv keys (`<elf.h>`).
const AT_PHDR: u64 = 3;
const AT_PHNUM: u64 = 5;
/// Program header types and the size of an `Elf64_Phdr`.
const PT_DYNAMIC: u32 = 2;
const PT_PHDR: u32 = 6;
/// `PT_TLS`: the program header of a module's TLS template.
const PT_TLS: u32 = 7;
const PHDR_SIZE: u64 = 56;
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
/// The offset of `dtv` in glibc's `tcbhead_t`.
const TCB_DTV: u64 = 8;
/// The size of a `dtv_t`.
const DTV_ENTRY: u64 = 16;
/// glibc's `TLS_DTV_UNALLOCATED`: a block not allocated yet (dynamic TLS
/// of a module the thread has not touched).
const DTV_UNALLOCATED: u64 = u64::MAX;
/// `Elf64_Ehdr` fields: `e_phoff` (8 bytes), `e_phentsize` and `e_phnum`
/// (2 bytes each), and the header's size.
const E_PHOFF: usize = 32;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
const EHDR_SIZE: usize = 64;
/// `\x7fELF`, then `ELFCLASS64`.
const ELF64_MAGIC: &[u8] = b"\x7fELF\x02";

/// One `struct link_map` of the loader's list (`<link.h>`): a loaded
/// module, the executable, a shared library or the vDSO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// `l_name`: the path the loader opened, without its NUL (at most
    /// 4096 bytes); empty for the executable, and for the vDSO where
    /// glibc does not name it after its soname.
    pub name: Vec<u8>,
    /// The address of the `struct link_map` itself (gdb's `lm`, and what
    /// [`tls_address`] takes).
    pub lm: u64,
    /// `l_addr`: the load bias, the difference between the module's
    /// addresses in memory and in its ELF file (0 for a non-PIE
    /// executable).
    pub l_addr: u64,
    /// `l_ld`: the address of its dynamic section in memory.
    pub l_ld: u64,
}

/// The fields of an `Elf64_Phdr` weft uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProgramHeader {
    /// `p_type`.
    kind: u32,
    /// `p_vaddr`, before relocation.
    vaddr: u64,
    /// `p_memsz`, in bytes.
    memsz: u64,
}

/// The loader's `link_map` chain in a process with auxiliary vector
/// `auxv` (the raw `/proc/PID/auxv` bytes), in the loader's order: the
/// executable first (gdb's `main-lm`), then the libraries and the vDSO
/// as loaded. Empty before the loader has filled `DT_DEBUG` (at the
/// program's first instructions), for a static executable, or when
/// auxv lacks `AT_PHDR`/`AT_PHNUM` or the headers are unreadable; the
/// list ends at the first entry that cannot be read, or after 4096.
pub fn libraries(auxv: &[u8], read: ReadMemory) -> Vec<Library> {
    r_debug(auxv, read).map(|r| link_maps(r, read)).unwrap_or_default()
}

/// The address of the thread-local variable at `offset` bytes into the
/// TLS block of the module whose `struct link_map` is at `lm` (0: the
/// executable), for the thread whose thread pointer (`fs_base`) is
/// `thread_pointer`, in a process with auxiliary vector `auxv` (raw
/// `/proc/PID/auxv`). What gdb's `qGetTLSAddr` asks (GDB RSP, "General
/// Query Packets"). `None` when the module has no `PT_TLS`, is not in
/// the loader's list, the thread's DTV has no block for it (yet: glibc
/// allocates dynamic TLS at the thread's first access), any of it is
/// unreadable, or the address overflows.
pub fn tls_address(lm: u64, offset: u64, thread_pointer: u64, auxv: &[u8], read: ReadMemory) -> Option<u64> {
    let module = module_id(lm, auxv, read)?;
    let dtv = read_u64(read, thread_pointer.checked_add(TCB_DTV)?)?;
    let slots = read_u64(read, dtv.checked_sub(DTV_ENTRY)?)?;
    if module > slots {
        return None;
    }
    let block = read_u64(read, dtv.checked_add(module.checked_mul(DTV_ENTRY)?)?)?;
    if block == 0 || block == DTV_UNALLOCATED {
        return None;
    }
    block.checked_add(offset)
}

/// glibc's TLS module id of the module whose `link_map` is at `lm` (0:
/// the executable): its position among the modules with `PT_TLS`,
/// counted from 1 along the loader's list. `None`: it has no `PT_TLS`,
/// is not listed, or a module before it cannot be read.
fn module_id(lm: u64, auxv: &[u8], read: ReadMemory) -> Option<u64> {
    if lm == 0 {
        // The executable comes first: module 1 when it has TLS at all
        // (also in a static executable, which has no list).
        return has_tls(&executable_headers(auxv, read)?).then_some(1);
    }
    let mut id = 0;
    for (i, map) in libraries(auxv, read).iter().enumerate() {
        let headers = if i == 0 { executable_headers(auxv, read) } else { library_headers(map.l_addr, read) };
        let tls = has_tls(&headers?);
        id += u64::from(tls);
        if map.lm == lm {
            return tls.then_some(id);
        }
    }
    None
}

/// Whether a module with these program headers has a TLS segment.
fn has_tls(headers: &[ProgramHeader]) -> bool {
    headers.iter().any(|h| h.kind == PT_TLS)
}

/// A shared object's program headers, read through its ELF header at its
/// load bias `l_addr` (a shared object's lowest `PT_LOAD` is at
/// `p_vaddr` 0 and maps the ELF header). `None`: no 64-bit ELF header
/// there, or unreadable.
fn library_headers(l_addr: u64, read: ReadMemory) -> Option<Vec<ProgramHeader>> {
    let mut ehdr = [0u8; EHDR_SIZE];
    if read(l_addr, &mut ehdr) != EHDR_SIZE || !ehdr.starts_with(ELF64_MAGIC) {
        return None;
    }
    let half = |at: usize| u64::from(u16::from_le_bytes([ehdr[at], ehdr[at + 1]]));
    if half(E_PHENTSIZE) != PHDR_SIZE {
        return None;
    }
    let phoff = u64::from_le_bytes(ehdr[E_PHOFF..E_PHOFF + 8].try_into().ok()?);
    program_headers(l_addr.checked_add(phoff)?, half(E_PHNUM), read)
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
fn executable_headers(auxv: &[u8], read: ReadMemory) -> Option<Vec<ProgramHeader>> {
    program_headers(auxv_value(auxv, AT_PHDR)?, auxv_value(auxv, AT_PHNUM)?, read)
}

/// The `count` program headers at `at` in tracee memory; `None` when one
/// is unreadable or `count` exceeds what ELF allows.
fn program_headers(at: u64, count: u64, read: ReadMemory) -> Option<Vec<ProgramHeader>> {
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
    read_u64(read, debug_slot(auxv, read)?).filter(|r| *r != 0)
}

/// Where the executable's `DT_DEBUG` entry keeps its value, the address of
/// the loader's `struct r_debug` once the loader has set it (0 before):
/// what lldb's `qShlibInfoAddr` asks for. `None` for an executable with no
/// `DT_DEBUG` (a static one) or unreadable headers.
pub fn debug_slot(auxv: &[u8], read: ReadMemory) -> Option<u64> {
    let phdr = auxv_value(auxv, AT_PHDR)?;
    let headers = executable_headers(auxv, read)?;
    // Without PT_PHDR the bias is unknown; such executables (static ones)
    // have no DT_DEBUG either.
    let bias = phdr.wrapping_sub(headers.iter().find(|h| h.kind == PT_PHDR)?.vaddr);
    let dyn_header = headers.iter().find(|h| h.kind == PT_DYNAMIC)?;
    let (dynamic, memsz) = (bias.wrapping_add(dyn_header.vaddr), dyn_header.memsz);
    (0..(memsz / 16).min(MAX_DYNAMIC))
        .map(|i| dynamic.wrapping_add(16 * i))
        .map_while(|entry| read_u64(read, entry).filter(|tag| *tag != DT_NULL).map(|tag| (tag, entry)))
        .find(|(tag, _)| *tag == DT_DEBUG)
        .map(|(_, entry)| entry.wrapping_add(8))
}

/// The `link_map` chain from `r_debug.r_map`, in the loader's order.
fn link_maps(r_debug: u64, read: ReadMemory) -> Vec<Library> {
    let mut maps = Vec::new();
    let mut lm = read_u64(read, r_debug.wrapping_add(R_MAP)).unwrap_or(0);
    while lm != 0 && maps.len() < MAX_LIBRARIES {
        let field = |off| read_u64(read, lm.wrapping_add(off));
        let (Some(l_addr), Some(name_at), Some(l_ld), Some(next)) = (field(L_ADDR), field(L_NAME), field(L_LD), field(L_NEXT))
        else {
            break;
        };
        maps.push(Library { name: read_c_string(read, name_at), lm, l_addr, l_ld });
        lm = next;
    }
    maps
}

/// A little-endian word of tracee memory, if all 8 bytes are readable.
fn read_u64(read: ReadMemory, addr: u64) -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A sparse fake address space: byte runs by start address.
    #[derive(Default)]
    struct Fake(BTreeMap<u64, Vec<u8>>);

    impl Fake {
        fn put(&mut self, addr: u64, bytes: &[u8]) {
            self.0.insert(addr, bytes.to_vec());
        }
        fn words(&mut self, addr: u64, words: &[u64]) {
            self.put(addr, &words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<_>>());
        }
        fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
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
    fn phdr(kind: u32, vaddr: u64, memsz: u64) -> Vec<u8> {
        let mut h = vec![0u8; 56];
        h[..4].copy_from_slice(&kind.to_le_bytes());
        h[16..24].copy_from_slice(&vaddr.to_le_bytes());
        h[40..48].copy_from_slice(&memsz.to_le_bytes());
        h
    }

    /// The raw auxv of a process whose `count` program headers are at
    /// `phdr`.
    fn auxv(phdr: u64, count: u64) -> Vec<u8> {
        [AT_PHDR, phdr, AT_PHNUM, count, 0, 0].iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    const BIAS: u64 = 0x5555_5555_4000;

    /// A PIE whose headers are at BIAS + 0x40 with its dynamic section at
    /// BIAS + 0x3000; `r_debug_at` is what DT_DEBUG holds.
    fn pie(r_debug_at: u64) -> (Vec<u8>, Fake) {
        let mut mem = Fake::default();
        let headers = [phdr(PT_PHDR, 0x40, 0xa8), phdr(1, 0, 0x1000), phdr(PT_DYNAMIC, 0x3000, 0x40)].concat();
        mem.put(BIAS + 0x40, &headers);
        mem.words(BIAS + 0x3000, &[1, 7, DT_DEBUG, r_debug_at, DT_NULL, 0]);
        (auxv(BIAS + 0x40, 3), mem)
    }

    #[test]
    fn empty_before_the_loader_sets_dt_debug() {
        let (auxv, mem) = pie(0);
        assert_eq!(libraries(&auxv, &|a, b| mem.read(a, b)), []);
        assert_eq!(libraries(&[], &|a, b| mem.read(a, b)), []);
    }

    #[test]
    fn walks_the_link_map_chain() {
        let (auxv, mut mem) = pie(0x7000_0000);
        mem.words(0x7000_0000, &[1, 0x7100_0000]);
        // The executable (empty name), libc, a name with odd bytes, the
        // vDSO (no name).
        mem.words(0x7100_0000, &[BIAS, 0x7300_0000, BIAS + 0x3000, 0x7100_0100, 0]);
        mem.words(0x7100_0100, &[0x7fff_0000_0000, 0x7300_0010, 0x7fff_0020_0000, 0x7100_0200, 0x7100_0000]);
        mem.words(0x7100_0200, &[0x10_0000, 0x7300_0040, 0x20_0000, 0x7100_0300, 0x7100_0100]);
        mem.words(0x7100_0300, &[0x7ffe_0000_0000, 0, 0x7ffe_0003_0000, 0, 0x7100_0200]);
        mem.put(0x7300_0000, b"\0");
        mem.put(0x7300_0010, b"/lib/x86_64-linux-gnu/libc.so.6\0");
        mem.put(0x7300_0040, b"/tmp/a&b\"<c>.so\0junk");
        let lib = |name: &[u8], lm, l_addr, l_ld| Library { name: name.to_vec(), lm, l_addr, l_ld };
        assert_eq!(
            libraries(&auxv, &|a, b| mem.read(a, b)),
            [
                lib(b"", 0x7100_0000, BIAS, BIAS + 0x3000),
                lib(b"/lib/x86_64-linux-gnu/libc.so.6", 0x7100_0100, 0x7fff_0000_0000, 0x7fff_0020_0000),
                lib(b"/tmp/a&b\"<c>.so", 0x7100_0200, 0x10_0000, 0x20_0000),
                lib(b"", 0x7100_0300, 0x7ffe_0000_0000, 0x7ffe_0003_0000),
            ]
        );
    }

    #[test]
    fn a_broken_chain_ends_the_list() {
        let (auxv, mut mem) = pie(0x7000_0000);
        mem.words(0x7000_0000, &[1, 0x7100_0000]);
        mem.words(0x7100_0000, &[BIAS, 0, BIAS + 0x3000, 0xdead_0000, 0]);
        let maps = libraries(&auxv, &|a, b| mem.read(a, b));
        assert_eq!(maps, [Library { name: Vec::new(), lm: 0x7100_0000, l_addr: BIAS, l_ld: BIAS + 0x3000 }]);
    }

    const R_DEBUG: u64 = 0x7000_0000;
    /// link_maps: the executable, the vDSO, libc, a library without TLS,
    /// a library with TLS.
    const LM: [u64; 5] = [0x7100_0000, 0x7100_0100, 0x7100_0200, 0x7100_0300, 0x7100_0400];
    const VDSO: u64 = 0x7fff_f000_0000;
    const LIBC: u64 = 0x7fff_0000_0000;
    const PLAIN: u64 = 0x7ffe_0000_0000;
    const LIBTLS: u64 = 0x7ffd_0000_0000;
    /// Thread pointer, DTV (as `tcbhead_t.dtv` holds it) and the blocks.
    const TP: u64 = 0x7ff0_0000_0000;
    const DTV: u64 = 0x6000_0010;

    /// A 64-bit ELF header whose program headers follow it.
    fn ehdr(phnum: u16) -> Vec<u8> {
        let mut h = vec![0u8; EHDR_SIZE];
        h[..5].copy_from_slice(ELF64_MAGIC);
        h[E_PHOFF..E_PHOFF + 8].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        h[E_PHENTSIZE..E_PHENTSIZE + 2].copy_from_slice(&56u16.to_le_bytes());
        h[E_PHNUM..E_PHNUM + 2].copy_from_slice(&phnum.to_le_bytes());
        h
    }

    /// A shared object at `base`, with or without TLS.
    fn shared_object(mem: &mut Fake, base: u64, tls: bool) {
        let mut headers = vec![phdr(1, 0, 0x1000), phdr(PT_DYNAMIC, 0x3000, 0x100)];
        if tls {
            headers.push(phdr(PT_TLS, 0x2000, 0x10));
        }
        mem.put(base, &[ehdr(headers.len() as u16), headers.concat()].concat());
    }

    /// A PIE (with TLS if `exe_tls`) and its four libraries, and one
    /// thread whose DTV has `slots` entries: block `0x5000_0000 +
    /// 0x1000 k` for module k, the last one unallocated.
    fn threaded(exe_tls: bool, slots: u64) -> (Vec<u8>, Fake) {
        let mut mem = Fake::default();
        let mut headers = vec![phdr(PT_PHDR, 0x40, 0xa8), phdr(1, 0, 0x1000), phdr(PT_DYNAMIC, 0x3000, 0x40)];
        if exe_tls {
            headers.push(phdr(PT_TLS, 0x2000, 0x8));
        }
        mem.put(BIAS + 0x40, &headers.concat());
        mem.words(BIAS + 0x3000, &[DT_DEBUG, R_DEBUG, DT_NULL, 0]);
        mem.words(R_DEBUG, &[1, LM[0]]);
        let bases = [BIAS, VDSO, LIBC, PLAIN, LIBTLS];
        for (i, lm) in LM.iter().enumerate() {
            let next = LM.get(i + 1).copied().unwrap_or(0);
            mem.words(*lm, &[bases[i], 0, 0, next, 0]);
        }
        shared_object(&mut mem, VDSO, false);
        shared_object(&mut mem, LIBC, true);
        shared_object(&mut mem, PLAIN, false);
        shared_object(&mut mem, LIBTLS, true);
        mem.words(TP, &[TP, DTV]);
        // dtv[-1] holds the length, dtv[0] the generation.
        let mut dtv = vec![slots, 0, 1, 0];
        dtv.extend((1..=slots).flat_map(|k| [if k == slots { DTV_UNALLOCATED } else { 0x5000_0000 + 0x1000 * k }, 0]));
        mem.words(DTV - DTV_ENTRY, &dtv);
        (auxv(BIAS + 0x40, headers.len() as u64), mem)
    }

    fn at(lm: u64, offset: u64, exe_tls: bool, slots: u64) -> Option<u64> {
        let (auxv, mem) = threaded(exe_tls, slots);
        tls_address(lm, offset, TP, &auxv, &|a, b| mem.read(a, b))
    }

    #[test]
    fn numbers_the_modules_with_tls_in_list_order() {
        // exe = 1, libc = 2, the TLS library = 3.
        assert_eq!(at(LM[0], 4, true, 4), Some(0x5000_1004));
        assert_eq!(at(0, 4, true, 4), Some(0x5000_1004));
        assert_eq!(at(LM[2], 0x20, true, 4), Some(0x5000_2020));
        assert_eq!(at(LM[4], 0, true, 4), Some(0x5000_3000));
        // Without TLS in the executable, libc is module 1.
        assert_eq!(at(LM[2], 0, false, 4), Some(0x5000_1000));
        assert_eq!(at(LM[4], 8, false, 4), Some(0x5000_2008));
    }

    #[test]
    fn rejects_what_it_cannot_resolve() {
        // Modules without TLS, an executable without TLS, unknown maps.
        assert_eq!(at(LM[1], 0, true, 4), None);
        assert_eq!(at(LM[3], 0, true, 4), None);
        assert_eq!(at(0, 0, false, 4), None);
        assert_eq!(at(0x1234, 0, true, 4), None);
        // A block not allocated yet, a module past the DTV's end.
        assert_eq!(at(LM[4], 0, true, 3), None);
        assert_eq!(at(LM[4], 0, true, 2), None);
        // An offset that overflows.
        assert_eq!(at(LM[2], u64::MAX, true, 4), None);
        // An unreadable thread pointer, a library whose header is gone.
        let (auxv, mut mem) = threaded(true, 4);
        let read = |a, b: &mut [u8]| mem.read(a, b);
        assert_eq!(tls_address(LM[2], 0, 0x10, &auxv, &read), None);
        assert_eq!(tls_address(LM[2], 0, u64::MAX, &auxv, &read), None);
        mem.put(VDSO, b"junk");
        assert_eq!(tls_address(LM[2], 0, TP, &auxv, &|a, b| mem.read(a, b)), None);
    }
}
