//! The in-process recording runtime (seed 003): the preload library that
//! `weft record` injects, and the contract it shares with the recorder and
//! the replayer. The library is built from record/runtime/weft_runtime.c
//! by build.rs and embedded in weft; [`install`] writes it under weft's
//! data directory, where LD_PRELOAD names it. Every constant here mirrors
//! record/runtime/weft_runtime.h.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The runtime library's bytes.
pub static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libweft_runtime.so"));

/// Version of the runtime's contract (`WEFT_RT_VERSION`).
pub const VERSION: u64 = 1;
/// The runtime's code page (`WEFT_PAGE`): three `syscall; ret` sites.
pub const PAGE: u64 = 0x6fff_0000_0000;
/// The size of the code page (bytes).
pub const PAGE_SIZE: u64 = 4096;
/// The runtime's own unlogged calls (`WEFT_SITE_PRIVATE`).
pub const SITE_PRIVATE: u64 = PAGE;
/// Buffered syscalls and replay markers (`WEFT_SITE_BUFFERED`).
pub const SITE_BUFFERED: u64 = PAGE + 0x10;
/// The runtime's requests (`WEFT_SITE_CTL`).
pub const SITE_CTL: u64 = PAGE + 0x20;
/// Length of a `syscall` instruction (bytes): a stop's rip is the site
/// plus this.
pub const SYSCALL_LEN: u64 = 2;
/// The pc of a thread stopped at a runtime request (after the CTL site's
/// `syscall`).
pub const CTL_LABEL: u64 = SITE_CTL + SYSCALL_LEN;
/// The label of every event the runtime logs: the pc after the BUFFERED
/// site's `syscall`.
pub const BUFFERED_LABEL: u64 = SITE_BUFFERED + SYSCALL_LEN;
/// Where the shared buffers are mapped in the program (`WEFT_SHARED`).
pub const SHARED: u64 = 0x6fff_0001_0000;
/// The end of the runtime's memory (its code page, then the buffers).
pub const END: u64 = SHARED + SHARED_SIZE as u64;

/// The syscalls the runtime makes and logs itself (its `buffered()`
/// callers in weft_runtime.c): a record of any other number is malformed.
pub const BUFFERED_SYSCALLS: [i64; 16] = [
    libc::SYS_clock_gettime,
    libc::SYS_gettimeofday,
    libc::SYS_time,
    libc::SYS_newfstatat,
    libc::SYS_fstat,
    libc::SYS_statx,
    libc::SYS_poll,
    libc::SYS_read,
    libc::SYS_pread64,
    libc::SYS_getdents64,
    libc::SYS_getrandom,
    libc::SYS_openat,
    libc::SYS_close,
    libc::SYS_write,
    libc::SYS_gettid,
    libc::SYS_getpid,
];

/// Whether syscall `nr` with arguments `args` changes the runtime's own
/// memory (munmap, mprotect, or an anonymous mmap of a range that
/// overlaps it, wherever the range starts): the filter traps those, and
/// the process's runtime is turned off.
pub fn touches_runtime(nr: i64, args: &[u64; 6]) -> bool {
    let (start, len) = (args[0], args[1]);
    matches!(nr, libc::SYS_munmap | libc::SYS_mprotect | libc::SYS_mmap) && start < END && start.saturating_add(len) > PAGE
}

/// The longest range (bytes) the filter lets through unseen below the
/// runtime's memory: a range that starts at least this far below it and
/// is at most this long cannot reach it (the filter compares arguments,
/// it cannot add them). 16 TiB: the executable, its heap and the
/// mappings the kernel picks lie far from both edges.
pub const BELOW_REACH: u64 = 1 << 44;

/// Whether syscall `nr` with `args` turns a process's runtime off once
/// the runtime said hello (the recorder logs it, then writes the
/// process's `disabled` flag): [`touches_runtime`], or a seccomp filter of
/// the program's own (seccomp(2) SECCOMP_SET_MODE_FILTER or STRICT,
/// prctl(2) PR_SET_SECCOMP), which may refuse the runtime's requests to
/// weft. (A SIGSYS handler of the program's does not: the runtime
/// interposes on functions, it takes no SIGSYS.)
pub fn turns_off(nr: i64, args: &[u64; 6]) -> bool {
    off_reason(nr, args).is_some()
}

/// Why syscall `nr` with `args` turns the runtime off, if it does
/// ([`turns_off`]), for the recorder's warning.
pub fn off_reason(nr: i64, args: &[u64; 6]) -> Option<&'static str> {
    if touches_runtime(nr, args) {
        Some("changes the in-process runtime's memory")
    } else if crate::seccomp::is_install(nr, args) {
        Some("installs a seccomp filter of its own")
    } else {
        None
    }
}

/// Whether a clone with `flags` turns its process's runtime off: a clone
/// that shares its creator's memory (CLONE_VM: a thread, or a process
/// made with raw clone) without a TLS of its own (no CLONE_SETTLS) would
/// share its creator's buffer slot, and the two would write one record
/// over the other. A vfork child is not one: its parent waits for its
/// exec or exit.
pub fn spawn_turns_off(flags: u64) -> bool {
    let has = |flag: i32| flags & flag as u64 != 0;
    let vfork_child = has(libc::CLONE_VFORK) && !has(libc::CLONE_THREAD);
    has(libc::CLONE_VM) && !has(libc::CLONE_SETTLS) && !vfork_child
}

/// The shared buffers' header (bytes): the global sequence counter first,
/// then the runtimes' write locks (`WEFT_WRITE_LOCKS_AT` in
/// weft_runtime.h), which the recorder leaves alone.
pub const HEADER_SIZE: usize = 4096;
/// One thread's slot (bytes).
pub const SLOT_SIZE: usize = 256 << 10;
/// The number of slots: threads beyond it take the ptrace path.
pub const SLOTS: usize = 512;
/// The shared buffers' size (bytes).
pub const SHARED_SIZE: usize = HEADER_SIZE + SLOTS * SLOT_SIZE;
/// Offset of a slot's `quiet` flag (u32): set while the thread is in a
/// timed synchronization call whose futex waits the recorder leaves out.
pub const SLOT_QUIET: usize = 24;
/// Offset of a slot's `logging` flag (u32): set while the thread writes
/// the record of a call whose outcome is known.
pub const SLOT_LOGGING: usize = 28;
/// Offset of a slot's `phase_at` (u64): the address, in the thread's
/// TLS, of its phase (u32), which is [`PHASE_BEFORE`] from a runtime
/// function's entry until its first call.
pub const SLOT_PHASE_AT: usize = 32;
/// Offset of a slot's `reserved` (u64): the place plus one that the
/// recorder took for the record of a buffered call that had returned when
/// a signal stopped the thread, before the thread took one itself (0:
/// none). The runtime uses it for that record.
pub const SLOT_RESERVED: usize = 40;
/// How many bytes before a thread's phase its `depth` (i32: above 0
/// inside a runtime function) lies in the runtime's TLS (`struct thread`).
pub const DEPTH_BEFORE_PHASE: u64 = 4;
/// A thread's phase in a runtime function before its first call
/// (`WEFT_PHASE_BEFORE`).
pub const PHASE_BEFORE: u32 = 1;
/// The instruction with which a runtime function's stub sets the phase to
/// [`PHASE_BEFORE`] (`movl $1, %fs:12(%r11)`), after loading r11 with
/// `movq weft_thread_self@gottpoff(%rip), %r11` (`4c 8b 1d` and a 32-bit
/// displacement): a thread at either has entered the function, though its
/// phase does not say so yet.
const SET_PHASE_BEFORE: [u8; 9] = [0x64, 0x41, 0xc7, 0x43, 0x0c, 0x01, 0, 0, 0];

/// Whether `code`, the bytes at a thread's pc, are a runtime stub's first
/// two instructions (see [`SET_PHASE_BEFORE`]).
pub fn at_stub_entry(code: &[u8]) -> bool {
    code.starts_with(&SET_PHASE_BEFORE) || (code.starts_with(&[0x4c, 0x8b, 0x1d]) && code.get(7..16) == Some(&SET_PHASE_BEFORE[..]))
}
/// Where a slot's records start (bytes into the slot).
pub const SLOT_DATA: usize = 64;
/// The runtime's request syscall (`WEFT_NR_CTL`).
pub const NR_CTL: i64 = 0x5746;
/// The replay's synchronization marker syscall (`WEFT_NR_SYNC`): op,
/// variable, result.
pub const NR_SYNC: i64 = 0x5747;
/// CTL request: hello (version, &reply, &control) → mode.
pub const CTL_HELLO: u64 = 1;
/// CTL request: a slot for the calling thread (the address of its phase,
/// [`SLOT_PHASE_AT`]) → its index, or -1.
pub const CTL_REGISTER: u64 = 2;
/// CTL request: drain the full slot given.
pub const CTL_FLUSH: u64 = 3;
/// HELLO's answer in a recording.
pub const MODE_RECORD: i64 = 1;
/// HELLO's answer in a replay.
pub const MODE_REPLAY: i64 = 2;
/// Size of the record header (`struct weft_record`, bytes).
pub const RECORD_HEADER: usize = 88;
/// Record kind: a buffered syscall.
pub const REC_SYSCALL: u16 = 1;
/// Record kind: a synchronization operation.
pub const REC_SYNC: u16 = 2;
/// `path_len` of a record without a path.
pub const NO_PATH: u32 = u32::MAX;
/// Offset of `generation` in `struct weft_control` (bytes).
pub const CONTROL_GENERATION: u64 = 4;

/// Writes the runtime library into `dir` (once per content: the name
/// carries its hash) and returns its path. Errors: creating or writing the
/// file.
pub fn install(dir: &Path) -> Result<PathBuf> {
    crate::store::make_private_dir(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join(format!("libweft_runtime-{:016x}.so", xxhash_rust::xxh3::xxh3_64(LIBRARY)));
    if std::fs::read(&path).ok().as_deref() != Some(LIBRARY) {
        let tmp = dir.join(format!(".runtime-{}", std::process::id()));
        std::fs::write(&tmp, LIBRARY).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call the runtime buffers is one a replay answers from the log
    /// (the class the ptrace recorder logs it under too): an input, or
    /// write, whose bytes a replay checks and prints.
    #[test]
    fn buffered_calls_are_inputs_or_write() {
        use crate::syscalls::{class, name, Class};
        let buffered = [
            libc::SYS_openat, libc::SYS_close, libc::SYS_newfstatat, libc::SYS_fstat, libc::SYS_statx, libc::SYS_read,
            libc::SYS_pread64, libc::SYS_getdents64, libc::SYS_getrandom, libc::SYS_poll, libc::SYS_clock_gettime,
            libc::SYS_gettimeofday, libc::SYS_time, libc::SYS_gettid, libc::SYS_getpid,
        ];
        for nr in buffered {
            assert_eq!(class(nr), Class::Input, "{}", name(nr));
        }
        assert_eq!(class(libc::SYS_write), Class::Output);
        assert_eq!(BUFFERED_SYSCALLS.len(), buffered.len() + 1);
    }

    /// The header's layout, as the C compiler sees it.
    #[test]
    fn contract_matches_the_c_header() {
        let h = include_str!("../runtime/weft_runtime.h");
        let define = |name: &str| {
            let line = h.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap_or_else(|| panic!("{name}"));
            line.split_whitespace().nth(2).unwrap().trim_end_matches("UL").to_string()
        };
        assert_eq!(define("WEFT_PAGE"), format!("{PAGE:#x}"));
        assert_eq!(define("WEFT_SHARED"), format!("{SHARED:#x}"));
        assert_eq!(define("WEFT_NR_CTL"), format!("{NR_CTL:#x}"));
        assert_eq!(define("WEFT_NR_SYNC"), format!("{NR_SYNC:#x}"));
        assert_eq!(define("WEFT_SLOT_DATA"), SLOT_DATA.to_string());
        assert_eq!(define("WEFT_SLOTS"), SLOTS.to_string());
        assert_eq!(define("WEFT_RT_VERSION"), VERSION.to_string());
        assert_eq!(define("WEFT_PHASE_BEFORE"), PHASE_BEFORE.to_string());
        assert!(h.contains("#define WEFT_SLOT_SIZE (256UL << 10)") && SLOT_SIZE == 256 << 10);
        // The write locks (u32 each) lie past the counter, inside the header.
        let locks_at: usize = define("WEFT_WRITE_LOCKS_AT").parse().unwrap();
        let locks: usize = define("WEFT_WRITE_LOCKS").parse().unwrap();
        assert!(locks_at >= 8 && locks_at + 4 * locks <= HEADER_SIZE);
        assert!(LIBRARY.starts_with(b"\x7fELF"));
    }

    #[test]
    fn a_stubs_entry_is_recognized_by_its_code() {
        let stub = [0x4c, 0x8b, 0x1d, 0x81, 0x8c, 0, 0, 0x64, 0x41, 0xc7, 0x43, 0x0c, 0x01, 0, 0, 0, 0x48];
        assert!(at_stub_entry(&stub));
        assert!(at_stub_entry(&stub[7..]));
        let mut after = stub;
        after[12] = 0x02;
        assert!(!at_stub_entry(&after), "the return's phase store is not an entry");
        assert!(!at_stub_entry(&stub[3..]));
    }
}
