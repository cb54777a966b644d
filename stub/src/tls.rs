//! Thread-local variables: the answer to gdb's
//! `qGetTLSAddr:thread-id,offset,lm` (GDB RSP, "General Query Packets"),
//! computed the way glibc finds them on x86-64 (TLS variant II,
//! `sysdeps/x86_64/nptl/tls.h`). The thread pointer is the thread's
//! `fs_base`; the `tcbhead_t` there holds at offset 8 the `dtv` pointer,
//! which points one entry into the thread's dynamic thread vector (so
//! `dtv[-1].counter` is its length); entry `k` is a 16-byte `dtv_t`
//! whose first word is module `k`'s TLS block. glibc numbers the modules
//! that have a `PT_TLS` segment 1, 2, ... in load order, which is the
//! order of the loader's `link_map` list ([`svr4`]), the executable first.

use crate::svr4::{self, ReadMemory};
use weft_record::Tid;

/// `PT_TLS`: the program header of a module's TLS template.
const PT_TLS: u32 = 7;
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

/// A parsed `qGetTLSAddr` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The thread (recorded tid) whose variable gdb asks for.
    pub tid: Tid,
    /// The variable's offset in its module's TLS block, in bytes.
    pub offset: u64,
    /// The module's `struct link_map` address; 0 names the executable.
    pub lm: u64,
}

impl Request {
    /// Parses the packet's arguments, `thread-id,offset,lm` (all hex; the
    /// thread id plain or multiprocess `pPID.TID`; GDB RSP, "Packets",
    /// thread-id syntax). `None`: malformed, or a thread id that names no
    /// single thread (`0`, `-1`).
    pub fn parse(args: &[u8]) -> Option<Request> {
        let args = std::str::from_utf8(args).ok()?;
        let mut fields = args.split(',');
        let (thread, offset, lm) = (fields.next()?, fields.next()?, fields.next()?);
        if fields.next().is_some() {
            return None;
        }
        let tid = match thread.strip_prefix('p') {
            Some(multi) => multi.split_once('.')?.1,
            None => thread,
        };
        let tid = Tid::try_from(hex(tid)?).ok().filter(|t| *t > 0)?;
        Some(Request { tid, offset: hex(offset)?, lm: hex(lm)? })
    }
}

/// A hex number as the protocol writes it (no `0x`, at most 64 bits).
fn hex(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The address of the variable `request` names, for a thread whose thread
/// pointer (`fs_base`) is `thread_pointer`, in a process with auxiliary
/// vector `auxv` (raw `/proc/PID/auxv`). `None` when the module has no
/// TLS, is not in the loader's list, or the thread's DTV has no block for
/// it (yet), or any of it is unreadable.
pub fn address(request: &Request, thread_pointer: u64, auxv: &[u8], read: ReadMemory) -> Option<u64> {
    let module = module_id(request.lm, auxv, read)?;
    let dtv = svr4::read_u64(read, thread_pointer.checked_add(TCB_DTV)?)?;
    let slots = svr4::read_u64(read, dtv.checked_sub(DTV_ENTRY)?)?;
    if module > slots {
        return None;
    }
    let block = svr4::read_u64(read, dtv.checked_add(module.checked_mul(DTV_ENTRY)?)?)?;
    if block == 0 || block == DTV_UNALLOCATED {
        return None;
    }
    block.checked_add(request.offset)
}

/// glibc's TLS module id of the module whose `link_map` is at `lm` (0:
/// the executable): its position among the modules with `PT_TLS`,
/// counted from 1 along the loader's list. `None`: it has no `PT_TLS`,
/// is not listed, or a module before it cannot be read.
fn module_id(lm: u64, auxv: &[u8], read: ReadMemory) -> Option<u64> {
    if lm == 0 {
        // The executable comes first: module 1 when it has TLS at all
        // (also in a static executable, which has no list).
        return has_tls(&svr4::executable_headers(auxv, read)?).then_some(1);
    }
    let mut id = 0;
    for (i, map) in svr4::link_map_chain(auxv, read).iter().enumerate() {
        let headers = if i == 0 { svr4::executable_headers(auxv, read) } else { library_headers(map.l_addr, read) };
        let tls = has_tls(&headers?);
        id += u64::from(tls);
        if map.lm == lm {
            return tls.then_some(id);
        }
    }
    None
}

/// Whether a module with these program headers has a TLS segment.
fn has_tls(headers: &[svr4::ProgramHeader]) -> bool {
    headers.iter().any(|h| h.kind == PT_TLS)
}

/// A shared object's program headers, read through its ELF header at its
/// load bias `l_addr` (a shared object's lowest `PT_LOAD` is at
/// `p_vaddr` 0 and maps the ELF header). `None`: no 64-bit ELF header
/// there, or unreadable.
fn library_headers(l_addr: u64, read: ReadMemory) -> Option<Vec<svr4::ProgramHeader>> {
    let mut ehdr = [0u8; EHDR_SIZE];
    if read(l_addr, &mut ehdr) != EHDR_SIZE || !ehdr.starts_with(ELF64_MAGIC) {
        return None;
    }
    let half = |at: usize| u64::from(u16::from_le_bytes([ehdr[at], ehdr[at + 1]]));
    if half(E_PHENTSIZE) != svr4::PHDR_SIZE {
        return None;
    }
    let phoff = u64::from_le_bytes(ehdr[E_PHOFF..E_PHOFF + 8].try_into().ok()?);
    svr4::program_headers(l_addr.checked_add(phoff)?, half(E_PHNUM), read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svr4::tests::{phdr, Fake};

    const BIAS: u64 = 0x5555_5555_4000;
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
    fn library(mem: &mut Fake, base: u64, tls: bool) {
        let mut headers = vec![phdr(1, 0, 0x1000), phdr(2, 0x3000, 0x100)];
        if tls {
            headers.push(phdr(PT_TLS, 0x2000, 0x10));
        }
        mem.put(base, &[ehdr(headers.len() as u16), headers.concat()].concat());
    }

    /// A PIE (with TLS if `exe_tls`) and its four libraries, and one
    /// thread whose DTV has `slots` entries: block `0x5000_0000 +
    /// 0x1000 k` for module k, the last one unallocated.
    fn process(exe_tls: bool, slots: u64) -> (Vec<u8>, Fake) {
        let mut mem = Fake::default();
        let mut headers = vec![phdr(6, 0x40, 0xa8), phdr(1, 0, 0x1000), phdr(2, 0x3000, 0x40)];
        if exe_tls {
            headers.push(phdr(PT_TLS, 0x2000, 0x8));
        }
        mem.put(BIAS + 0x40, &headers.concat());
        mem.words(BIAS + 0x3000, &[21, R_DEBUG, 0, 0]);
        let auxv = [3, BIAS + 0x40, 5, headers.len() as u64, 0, 0].iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.words(R_DEBUG, &[1, LM[0]]);
        let bases = [BIAS, VDSO, LIBC, PLAIN, LIBTLS];
        for (i, lm) in LM.iter().enumerate() {
            let next = LM.get(i + 1).copied().unwrap_or(0);
            mem.words(*lm, &[bases[i], 0, 0, next, 0]);
        }
        library(&mut mem, VDSO, false);
        library(&mut mem, LIBC, true);
        library(&mut mem, PLAIN, false);
        library(&mut mem, LIBTLS, true);
        mem.words(TP, &[TP, DTV]);
        // dtv[-1] holds the length, dtv[0] the generation.
        let mut dtv = vec![slots, 0, 1, 0];
        dtv.extend((1..=slots).flat_map(|k| [if k == slots { DTV_UNALLOCATED } else { 0x5000_0000 + 0x1000 * k }, 0]));
        mem.words(DTV - DTV_ENTRY, &dtv);
        (auxv, mem)
    }

    fn at(lm: u64, offset: u64, exe_tls: bool, slots: u64) -> Option<u64> {
        let (auxv, mem) = process(exe_tls, slots);
        address(&Request { tid: 7, offset, lm }, TP, &auxv, &|a, b| mem.read(a, b))
    }

    #[test]
    fn parses_requests() {
        assert_eq!(Request::parse(b"1f2a,10,7ffff7fc1000"), Some(Request { tid: 0x1f2a, offset: 0x10, lm: 0x7fff_f7fc_1000 }));
        assert_eq!(Request::parse(b"p1f2a.1f2b,0,0"), Some(Request { tid: 0x1f2b, offset: 0, lm: 0 }));
        for bad in [&b""[..], b"1,2", b"1,2,3,4", b"0,1,1", b"-1,1,1", b"p1,1,1", b"x,1,1", b"1,,1", b"1,2,zz", b"1,0x2,3"] {
            assert_eq!(Request::parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(Request::parse(b"1,2,10000000000000000"), None);
        assert_eq!(Request::parse(b"100000000,2,3"), None);
        assert_eq!(Request::parse(b"1,\xff,3"), None);
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
        let (auxv, mut mem) = process(true, 4);
        let read = |a, b: &mut [u8]| mem.read(a, b);
        assert_eq!(address(&Request { tid: 7, offset: 0, lm: LM[2] }, 0x10, &auxv, &read), None);
        assert_eq!(address(&Request { tid: 7, offset: 0, lm: LM[2] }, u64::MAX, &auxv, &read), None);
        mem.put(VDSO, b"junk");
        assert_eq!(address(&Request { tid: 7, offset: 0, lm: LM[2] }, TP, &auxv, &|a, b| mem.read(a, b)), None);
    }
}
