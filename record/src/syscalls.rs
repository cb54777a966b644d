//! The syscall table: for every x86-64 syscall, whether the recorder logs it,
//! how the replayer treats it, which argument values validate a replay, and
//! where its out-buffers are (the memory a replay must write back).
//!
//! Seed 000 §3.1 logs "most system calls"; weft logs every syscall whose
//! result depends on the outside world (inputs), every syscall that is
//! observable from outside (outputs, validated by a hash of their bytes), and
//! the thread lifecycle. Memory management, signal masks and futex are not
//! logged: the replayer executes them (futex is emulated by its scheduler).
//!
//! The syscalls themselves, their names and the pointers their kernel
//! prototypes may write through come from a table generated from the
//! kernel's sources ([`table`], by `record/gen/syscall_table.py`); where
//! their out-buffers are is [`out_buffers`]'s subject. What a call does to
//! the world outside the process, seed 003's classes that cut a trace into
//! epochs, is [`call_class`]'s.

mod epoch_class;
mod ioctl;
mod out_buffers;
pub mod table;

pub use epoch_class::{call_class, CallClass};
pub use out_buffers::{call_describable, out_buffers, type_size, ERESTART_RESTARTBLOCK, RESTART_CODES};

use libc as c;
use out_buffers::iovecs;

/// How a syscall is handled by the recorder (is it logged?) and the replayer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Not logged; the replayer executes it as the program asked
    /// (brk, anonymous mmap, munmap, mprotect, signal masks, ...).
    Execute,
    /// Not logged; the replayer emulates it with its own wait queues.
    Futex,
    /// clone/clone3/fork/vfork: not trapped by the filter; the recorder
    /// logs the spawn at PTRACE_EVENT_CLONE (FORK, VFORK), and the replayer
    /// executes it as that event.
    Clone,
    /// Fails with ENOSYS when recording (a seccomp filter) and when
    /// replaying: rseq, whose restartable sequences glibc then does without
    /// (rr does the same; DESIGN.md, known traps).
    Refused,
    /// Logged with its result and out-buffers; the replayer skips the real
    /// syscall and writes the logged result and buffers back.
    Input,
    /// Logged with fd, length and a hash of the bytes written; the replayer
    /// skips it, checks the hash and copies stdout/stderr writes to its own.
    Output,
    /// Logged; the replayer executes it and then writes back the logged
    /// result (set_tid_address returns a tid that differs in replay).
    ExecuteLogged,
    /// A file-backed mmap: logged with the mapped file; the replayer maps
    /// anonymous memory at the logged address and fills it from the trace's
    /// copy of the file.
    MmapFile,
    /// mremap: logged, with the bytes of the part a file mapping grew by
    /// ([`crate::mapping::grown`]); the replayer executes it, where it
    /// must return the recorded address, and fills that part from the log
    /// (the replay's mapping is anonymous memory, which grows by zeros).
    Remap,
    /// A signal sent with kill/tkill/tgkill: the replayer executes it, with
    /// tids translated, when it targets the tracee itself.
    Kill,
    /// execve/execveat: executed by the replayer. A successful call is
    /// logged as an exec event at PTRACE_EVENT_EXEC (the new image's files
    /// and AT_RANDOM), a failed one as a syscall with its result.
    Exec,
    /// `exit`: a thread exit event.
    ThreadExit,
    /// `exit_group`: the program's exit event.
    ExitGroup,
    /// Logged with its result only: weft does not know its out-buffers, so a
    /// replay that depends on them may diverge. Warned about at record time.
    Unsupported,
}

/// The class of syscall `nr`.
pub fn class(nr: i64) -> Class {
    match nr {
        c::SYS_brk | c::SYS_munmap | c::SYS_mprotect | c::SYS_madvise
        | c::SYS_mlock | c::SYS_munlock | c::SYS_mlockall | c::SYS_munlockall | c::SYS_msync
        | c::SYS_sched_yield | c::SYS_rt_sigprocmask | c::SYS_rt_sigaction
        | c::SYS_rt_sigreturn | c::SYS_sigaltstack | c::SYS_set_robust_list
        | c::SYS_get_robust_list | c::SYS_arch_prctl | c::SYS_membarrier => Class::Execute,
        c::SYS_clone | c::SYS_clone3 | c::SYS_fork | c::SYS_vfork => Class::Clone,
        c::SYS_execve | c::SYS_execveat => Class::Exec,
        c::SYS_rseq => Class::Refused,
        // Anonymous mmaps are executed; the seccomp filter only traps the
        // file-backed ones, so a logged mmap is always MmapFile.
        c::SYS_mmap => Class::MmapFile,
        c::SYS_mremap => Class::Remap,
        c::SYS_futex => Class::Futex,
        c::SYS_set_tid_address => Class::ExecuteLogged,
        c::SYS_kill | c::SYS_tkill | c::SYS_tgkill => Class::Kill,
        c::SYS_exit => Class::ThreadExit,
        c::SYS_exit_group => Class::ExitGroup,
        c::SYS_write | c::SYS_writev | c::SYS_pwrite64 | c::SYS_pwritev | c::SYS_sendto
        | c::SYS_sendmsg => Class::Output,
        n if is_input(n) => Class::Input,
        _ => Class::Unsupported,
    }
}

/// For a call that moves bytes between two descriptors inside the kernel
/// (copy_file_range(2), sendfile(2), splice(2), tee(2)): its source
/// descriptor, its destination, and the address of the source offset it
/// updates (0 when it uses and advances the source's file position, as a
/// NULL offset does; tee has none). `None` for every other call.
pub fn sent_fds(nr: i64, args: &[u64; 6]) -> Option<(i32, i32, u64)> {
    let fd = |a: u64| a as i32;
    match nr {
        c::SYS_copy_file_range | c::SYS_splice => Some((fd(args[0]), fd(args[2]), args[1])),
        c::SYS_sendfile => Some((fd(args[1]), fd(args[0]), args[2])),
        c::SYS_tee => Some((fd(args[0]), fd(args[1]), 0)),
        _ => None,
    }
}

/// The class of a call to `nr` with `args`: like [`class`], except that an
/// anonymous mmap, which the recording filter lets through, is executed,
/// and that an ioctl request or bpf command whose writes weft cannot
/// describe ([`call_describable`]) is unsupported.
pub fn classify(nr: i64, args: &[u64; 6]) -> Class {
    match class(nr) {
        Class::MmapFile if args[3] & c::MAP_ANONYMOUS as u64 != 0 => Class::Execute,
        Class::Input if !call_describable(nr, args) => Class::Unsupported,
        class => class,
    }
}

/// Syscalls whose out-buffers may be describable but whose effects a
/// replay cannot reproduce by writing memory back: shared or foreign memory (SysV shm, aio and io_uring rings,
/// other processes' memory, userfaultfd), the process's own address space
/// and CPU state (LDT, I/O privilege, page migration and protection keys,
/// shadow stacks, sealing), ptrace, seccomp and personality, and
/// restart_syscall, which resumes a call the recorder logged elsewhere.
/// They are logged with their result only and warned about (unless they
/// failed, which changed nothing). NUMA memory policies (mbind,
/// set_mempolicy) are not among them: they only place pages, which a
/// program cannot tell but through get_mempolicy, whose answer is logged.
const NOT_REPLAYABLE: &[&str] = &[
    "shmat", "shmdt", "io_setup", "io_destroy",
    "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "process_vm_readv", "process_vm_writev",
    "process_madvise", "ptrace", "userfaultfd", "modify_ldt", "iopl", "ioperm",
    "remap_file_pages", "migrate_pages",
    "move_pages", "mlock2", "pkey_mprotect", "pkey_alloc", "pkey_free", "memfd_secret",
    "map_shadow_stack", "mseal", "seccomp", "personality", "vmsplice", "restart_syscall",
];

/// Whether syscall `nr` is in the generated table, describable, and
/// replayable by writing its out-buffers back.
fn is_input(nr: i64) -> bool {
    table::SYSCALLS
        .iter()
        .find(|s| s.nr == nr)
        .is_some_and(|s| !NOT_REPLAYABLE.contains(&s.name) && out_buffers::describable(nr))
}

/// futex(2) operation numbers (linux/futex.h): FUTEX_WAIT, FUTEX_WAIT_BITSET.
pub const FUTEX_WAIT_OPS: [u64; 2] = [0, 9];
/// Mask of the futex operation number (without PRIVATE and CLOCK_REALTIME).
pub const FUTEX_CMD_MASK: u64 = 0x7f;

/// Whether syscall `nr` with `args` may wait for another thread or
/// process for an unbounded time: a read or receive (a pipe's, a
/// socket's), an accept or connect, a wait with a timeout that is not
/// zero (poll, select, epoll_wait), wait4/waitid without WNOHANG, a
/// sleep, a signal wait, a System V message or semaphore wait, a blocking
/// flock or F_SETLKW. The recorder places such a call's start in the
/// global order (a `SyncOp::SyscallWait`), so that a replay runs what the
/// thread did before it there, and not at the call's return. futex waits have places
/// of their own (the runtime's), and output calls are left out: a full
/// pipe is the rare case.
pub fn may_block(nr: i64, args: &[u64; 6]) -> bool {
    const NB: u64 = libc::WNOHANG as u64;
    match nr {
        libc::SYS_read | libc::SYS_readv | libc::SYS_recvfrom | libc::SYS_recvmsg | libc::SYS_recvmmsg => true,
        libc::SYS_accept | libc::SYS_accept4 | libc::SYS_connect => true,
        libc::SYS_poll | libc::SYS_epoll_wait | libc::SYS_epoll_pwait => args[if nr == libc::SYS_poll { 2 } else { 3 }] as i32 != 0,
        libc::SYS_ppoll | libc::SYS_select | libc::SYS_pselect6 | libc::SYS_epoll_pwait2 => true,
        libc::SYS_wait4 => args[2] & NB == 0,
        libc::SYS_waitid => args[3] & NB == 0,
        libc::SYS_nanosleep | libc::SYS_clock_nanosleep | libc::SYS_pause | libc::SYS_rt_sigsuspend => true,
        libc::SYS_rt_sigtimedwait | libc::SYS_msgrcv | libc::SYS_semop | libc::SYS_semtimedop => true,
        libc::SYS_flock => args[1] & libc::LOCK_NB as u64 == 0,
        libc::SYS_fcntl => args[1] == libc::F_SETLKW as u64 || args[1] == libc::F_OFD_SETLKW as u64,
        _ => false,
    }
}

/// Whether a futex call is logged: a wait with a timeout. Whether such a
/// wait timed out depends on timing, which a replay cannot reproduce, so
/// its result is logged; untimed futex calls are not (DESIGN.md).
pub fn is_logged_futex(args: &[u64; 6]) -> bool {
    FUTEX_WAIT_OPS.contains(&(args[1] & FUTEX_CMD_MASK)) && args[3] != 0
}

/// The gathered byte ranges an output syscall sent, given its result: what
/// the output hash covers.
pub fn output_ranges(
    nr: i64,
    args: &[u64; 6],
    result: i64,
    read_u64: &mut dyn FnMut(u64) -> Option<u64>,
) -> Vec<(u64, u64)> {
    if result <= 0 {
        return Vec::new();
    }
    let r = result as u64;
    match nr {
        c::SYS_write | c::SYS_pwrite64 | c::SYS_sendto => vec![(args[1], r)],
        c::SYS_writev | c::SYS_pwritev => iovecs(args[1], args[2], r, read_u64),
        c::SYS_sendmsg => {
            let iov = read_u64(args[1] + 16).unwrap_or(0);
            let iovlen = read_u64(args[1] + 24).unwrap_or(0);
            iovecs(iov, iovlen, r, read_u64)
        }
        _ => Vec::new(),
    }
}

/// Indices of the arguments that are plain values (fds, lengths, flags,
/// clock ids) and so must be equal in a valid replay; pointers are not
/// compared, only what they point to (paths, output bytes).
pub fn key_args(nr: i64) -> &'static [usize] {
    match nr {
        c::SYS_read | c::SYS_write | c::SYS_pread64 | c::SYS_pwrite64 | c::SYS_readv
        | c::SYS_writev | c::SYS_getdents64 | c::SYS_recvfrom | c::SYS_sendto | c::SYS_lseek => {
            &[0, 2]
        }
        c::SYS_close | c::SYS_fstat | c::SYS_accept | c::SYS_accept4 | c::SYS_recvmsg
        | c::SYS_sendmsg | c::SYS_dup | c::SYS_listen | c::SYS_fsync | c::SYS_ftruncate => &[0],
        c::SYS_ioctl | c::SYS_fcntl | c::SYS_dup2 | c::SYS_shutdown => &[0, 1],
        c::SYS_clock_gettime | c::SYS_clock_getres | c::SYS_getrandom => &[0],
        c::SYS_openat => &[0, 2],
        c::SYS_open => &[1],
        c::SYS_socket => &[0, 1, 2],
        c::SYS_mmap => &[1, 2, 5],
        c::SYS_mremap => &[0, 1, 2, 3],
        c::SYS_exit | c::SYS_exit_group => &[0],
        c::SYS_kill => &[1],
        c::SYS_tgkill => &[2],
        c::SYS_tkill => &[1],
        c::SYS_poll | c::SYS_epoll_wait => &[1],
        c::SYS_statx => &[0, 2, 3],
        c::SYS_newfstatat => &[0, 3],
        c::SYS_getxattr | c::SYS_lgetxattr => &[3],
        c::SYS_fgetxattr => &[0, 3],
        c::SYS_listxattr | c::SYS_llistxattr | c::SYS_readlink => &[2],
        c::SYS_flistxattr => &[0, 2],
        c::SYS_readlinkat => &[0, 3],
        _ => &[],
    }
}

/// Index of an argument that is a NUL-terminated path: its bytes are logged
/// and a replay must pass the same path. The kernel reads a NULL path as
/// no path at all (EFAULT, or for statx(2) and utimensat(2) the fd itself),
/// so a NULL pointer is logged and compared as no path: [`read_path`].
pub fn path_arg(nr: i64) -> Option<usize> {
    match nr {
        c::SYS_open | c::SYS_stat | c::SYS_lstat | c::SYS_access | c::SYS_readlink
        | c::SYS_unlink | c::SYS_mkdir | c::SYS_rmdir | c::SYS_chdir | c::SYS_statfs
        | c::SYS_truncate | c::SYS_chmod | c::SYS_creat | c::SYS_chown | c::SYS_lchown
        | c::SYS_getxattr | c::SYS_lgetxattr | c::SYS_listxattr | c::SYS_llistxattr
        | c::SYS_setxattr | c::SYS_lsetxattr | c::SYS_removexattr | c::SYS_lremovexattr => Some(0),
        c::SYS_openat | c::SYS_newfstatat | c::SYS_statx | c::SYS_faccessat
        | c::SYS_faccessat2 | c::SYS_readlinkat | c::SYS_unlinkat | c::SYS_mkdirat
        | c::SYS_utimensat | c::SYS_fchmodat | c::SYS_fchownat => Some(1),
        _ => None,
    }
}

/// The path a syscall passes at `addr`, as the kernel reads it: `None` for
/// a NULL pointer or unreadable memory, else the bytes before the NUL.
/// `read_cstr` reads a NUL-terminated string of tracee memory.
pub fn read_path<E>(addr: u64, read_cstr: impl FnOnce(u64) -> Result<Vec<u8>, E>) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    read_cstr(addr).ok()
}

/// The syscall's name (syscall_64.tbl), for messages and `weft dump`;
/// numbers beyond the generated table (syscalls newer than its kernel)
/// are named by number.
pub fn name(nr: i64) -> String {
    match nr {
        crate::runtime::NR_SYNC => return "weft_sync".into(),
        crate::runtime::NR_CTL => return "weft_ctl".into(),
        _ => {}
    }
    table::SYSCALLS
        .iter()
        .find(|s| s.nr == nr)
        .map(|s| s.name.to_string())
        .unwrap_or_else(|| format!("unknown syscall {nr}"))
}

/// How a call is named in a warning: its name, and for ioctl(2) and bpf(2)
/// the request or command, which decides what the call writes.
pub fn call_name(nr: i64, args: &[u64; 6]) -> String {
    match nr {
        c::SYS_ioctl => format!("ioctl request {:#x}", args[1]),
        c::SYS_bpf => format!("bpf command {}", args[0]),
        _ => name(nr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_that_may_block_are_told_by_their_arguments() {
        let with = |k: usize, v: u64| {
            let mut a = [0u64; 6];
            a[k] = v;
            a
        };
        assert!(may_block(libc::SYS_read, &[0; 6]) && may_block(libc::SYS_accept4, &[0; 6]));
        assert!(may_block(libc::SYS_epoll_wait, &with(3, u64::MAX)) && !may_block(libc::SYS_epoll_wait, &[0; 6]));
        assert!(may_block(libc::SYS_poll, &with(2, 100)) && !may_block(libc::SYS_poll, &[0; 6]));
        assert!(may_block(libc::SYS_wait4, &[0; 6]) && !may_block(libc::SYS_wait4, &with(2, libc::WNOHANG as u64)));
        assert!(!may_block(libc::SYS_flock, &with(1, (libc::LOCK_EX | libc::LOCK_NB) as u64)));
        assert!(!may_block(libc::SYS_write, &[0; 6]) && !may_block(libc::SYS_futex, &with(3, 1)));
    }

    #[test]
    fn read_out_buffer_is_the_bytes_read() {
        let args = [3, 0x1000, 4096, 0, 0, 0];
        let got = out_buffers(c::SYS_read, &args, 100, &mut |_| None);
        assert_eq!(got, vec![(0x1000, 100)]);
        assert!(out_buffers(c::SYS_read, &args, -4, &mut |_| None).is_empty());
    }

    #[test]
    fn readv_splits_over_iovecs() {
        // two iovecs of 10 and 20 bytes at 0x100 and 0x200; 15 bytes read.
        let mem = [0x100u64, 10, 0x200, 20];
        let got = out_buffers(c::SYS_readv, &[0, 0x50, 2, 0, 0, 0], 15, &mut |a| {
            mem.get(((a - 0x50) / 8) as usize).copied()
        });
        assert_eq!(got, vec![(0x100, 10), (0x200, 5)]);
    }

    #[test]
    fn classes_and_names() {
        assert_eq!(class(c::SYS_read), Class::Input);
        assert_eq!(class(c::SYS_write), Class::Output);
        assert_eq!(class(c::SYS_futex), Class::Futex);
        assert_eq!(class(c::SYS_io_uring_setup), Class::Unsupported);
        assert_eq!(name(c::SYS_clock_gettime), "clock_gettime");
        assert_eq!(name(99999), "unknown syscall 99999");
    }

    #[test]
    fn every_syscall_of_the_table_is_named_and_numbered_like_libc() {
        assert!(table::SYSCALLS.len() > 360);
        for s in table::SYSCALLS {
            assert_eq!(name(s.nr), s.name);
        }
        assert_eq!(name(c::SYS_mseal), "mseal");
        assert_eq!(name(c::SYS_newfstatat), "newfstatat");
        assert_eq!(name(c::SYS_statx), "statx");
        for n in NOT_REPLAYABLE {
            assert!(table::SYSCALLS.iter().any(|s| s.name == *n), "{n}");
        }
    }

    #[test]
    fn out_buffers_come_from_the_table() {
        for nr in [c::SYS_uname, c::SYS_sysinfo, c::SYS_adjtimex, c::SYS_clock_adjtime, c::SYS_capget,
            c::SYS_sched_getparam, c::SYS_getxattr, c::SYS_flistxattr, c::SYS_waitid, c::SYS_timer_gettime,
            c::SYS_rt_sigpending, c::SYS_get_mempolicy, c::SYS_set_mempolicy, c::SYS_mbind]
        {
            assert_eq!(class(nr), Class::Input, "{}", name(nr));
        }
        // sysinfo(2): one struct sysinfo at its argument.
        assert_eq!(out_buffers(c::SYS_sysinfo, &[0x1000, 0, 0, 0, 0, 0], 0, &mut |_| None), vec![(0x1000, 112)]);
        // clock_adjtime(2): struct __kernel_timex at the second argument.
        assert_eq!(out_buffers(c::SYS_clock_adjtime, &[0, 0x2000, 0, 0, 0, 0], 0, &mut |_| None), vec![(0x2000, 208)]);
        // getxattr(2) with size 0 only measures the value.
        assert_eq!(out_buffers(c::SYS_getxattr, &[1, 2, 0x3000, 0, 0, 0], 5, &mut |_| None), vec![(0x3000, 0)]);
        // setitimer(2) stores the old value through its third argument.
        let got = out_buffers(c::SYS_setitimer, &[0, 0x1000, 0x2000, 0, 0, 0], 0, &mut |_| None);
        assert_eq!(got, vec![(0x1000, 32), (0x2000, 32)]);
        // rt_sigpending(2): a sigset_t of `sigsetsize` bytes (signalfd
        // programs ask for it).
        assert_eq!(out_buffers(c::SYS_rt_sigpending, &[0x1000, 8, 0, 0, 0, 0], 0, &mut |_| None), vec![(0x1000, 8)]);
        // A syscall whose pointers have call-dependent sizes and no rule.
        assert_eq!(class(c::SYS_msgrcv), Class::Unsupported);
    }

    #[test]
    fn fixed_type_sizes_match_libc() {
        use std::mem::size_of;
        let sizes = [
            ("struct stat", size_of::<c::stat>()),
            ("struct statfs", size_of::<c::statfs>()),
            ("struct statx", size_of::<c::statx>()),
            ("struct new_utsname", size_of::<c::utsname>()),
            ("struct sysinfo", size_of::<c::sysinfo>()),
            ("struct rusage", size_of::<c::rusage>()),
            ("struct rlimit", size_of::<c::rlimit>()),
            ("struct rlimit64", size_of::<c::rlimit64>()),
            ("struct tms", size_of::<c::tms>()),
            ("struct __kernel_timex", size_of::<c::timex>()),
            ("struct __kernel_timespec", size_of::<c::timespec>()),
            ("struct __kernel_itimerspec", size_of::<c::itimerspec>()),
            ("struct __kernel_old_itimerval", size_of::<c::itimerval>()),
            ("struct sched_param", size_of::<c::sched_param>()),
            ("siginfo_t", size_of::<c::siginfo_t>()),
            ("struct sigevent", size_of::<c::sigevent>()),
            ("struct mq_attr", size_of::<c::mq_attr>()),
            ("struct shmid_ds", size_of::<c::shmid_ds>()),
            ("struct msqid_ds", size_of::<c::msqid_ds>()),
            ("struct utimbuf", size_of::<c::utimbuf>()),
        ];
        for (ty, size) in sizes {
            assert_eq!(type_size(ty), Some(size as u64), "{ty}");
        }
    }

    #[test]
    fn undescribed_ioctl_requests_are_unsupported() {
        let args = |req: u64| [0, req, 0x1000, 0, 0, 0];
        assert_eq!(classify(c::SYS_ioctl, &args(c::TCGETS)), Class::Input);
        assert_eq!(classify(c::SYS_ioctl, &args(0x545D)), Class::Unsupported);
        assert_eq!(out_buffers(c::SYS_ioctl, &args(c::TIOCGWINSZ), 0, &mut |_| None), vec![(0x1000, 8)]);
        assert!(out_buffers(c::SYS_ioctl, &args(0x545D), 0, &mut |_| None).is_empty());
    }

    #[test]
    fn a_null_path_is_no_path() {
        let never = |_| -> Result<Vec<u8>, ()> { panic!("a NULL path is not read") };
        assert_eq!(read_path(0, never), None);
        assert_eq!(read_path(0x10, |_| Ok::<_, ()>(b"/tmp".to_vec())), Some(b"/tmp".to_vec()));
    }
}
