//! The syscall table: for every x86-64 syscall, whether the recorder logs it,
//! how the replayer treats it, which argument values validate a replay, and
//! where its out-buffers are (the memory a replay must write back).
//!
//! Seed 000 §3.1 logs "most system calls"; weft logs every syscall whose
//! result depends on the outside world (inputs), every syscall that is
//! observable from outside (outputs, validated by a hash of their bytes), and
//! the thread lifecycle. Memory management, signal masks and futex are not
//! logged: the replayer executes them (futex is emulated by its scheduler).
//! Out-buffer layouts come from the syscalls' man pages (section 2).

use libc as c;

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
        c::SYS_brk | c::SYS_munmap | c::SYS_mprotect | c::SYS_mremap | c::SYS_madvise
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
        c::SYS_futex => Class::Futex,
        c::SYS_set_tid_address => Class::ExecuteLogged,
        c::SYS_kill | c::SYS_tkill | c::SYS_tgkill => Class::Kill,
        c::SYS_exit => Class::ThreadExit,
        c::SYS_exit_group => Class::ExitGroup,
        c::SYS_write | c::SYS_writev | c::SYS_pwrite64 | c::SYS_pwritev | c::SYS_sendto
        | c::SYS_sendmsg => Class::Output,
        n if is_known_input(n) => Class::Input,
        _ => Class::Unsupported,
    }
}

/// The class of a call to `nr` with `args`: like [`class`], except that an
/// anonymous mmap, which the recording filter lets through, is executed.
pub fn classify(nr: i64, args: &[u64; 6]) -> Class {
    if nr == c::SYS_mmap && args[3] & c::MAP_ANONYMOUS as u64 != 0 {
        Class::Execute
    } else {
        class(nr)
    }
}

/// futex(2) operation numbers (linux/futex.h): FUTEX_WAIT, FUTEX_WAIT_BITSET.
pub const FUTEX_WAIT_OPS: [u64; 2] = [0, 9];
/// Mask of the futex operation number (without PRIVATE and CLOCK_REALTIME).
pub const FUTEX_CMD_MASK: u64 = 0x7f;

/// Whether a futex call is logged: a wait with a timeout. Whether such a
/// wait timed out depends on timing, which a replay cannot reproduce, so
/// its result is logged; untimed futex calls are not (DESIGN.md).
pub fn is_logged_futex(args: &[u64; 6]) -> bool {
    FUTEX_WAIT_OPS.contains(&(args[1] & FUTEX_CMD_MASK)) && args[3] != 0
}

/// Syscalls whose effects the replayer can reproduce from the log: their
/// out-buffers are described by [`out_buffers`] (or they have none).
fn is_known_input(nr: i64) -> bool {
    matches!(
        nr,
        c::SYS_read | c::SYS_pread64 | c::SYS_readv | c::SYS_preadv | c::SYS_preadv2
            | c::SYS_recvfrom | c::SYS_recvmsg | c::SYS_getrandom | c::SYS_clock_gettime
            | c::SYS_clock_getres | c::SYS_gettimeofday | c::SYS_time | c::SYS_getdents64
            | c::SYS_stat | c::SYS_fstat | c::SYS_lstat | c::SYS_newfstatat | c::SYS_statx
            | c::SYS_statfs | c::SYS_fstatfs | c::SYS_poll | c::SYS_ppoll | c::SYS_select
            | c::SYS_pselect6 | c::SYS_epoll_wait | c::SYS_epoll_pwait | c::SYS_accept
            | c::SYS_accept4 | c::SYS_getpid | c::SYS_gettid | c::SYS_getppid
            | c::SYS_getsockname | c::SYS_getpeername | c::SYS_getsockopt | c::SYS_socketpair
            | c::SYS_pipe | c::SYS_pipe2 | c::SYS_uname | c::SYS_sysinfo | c::SYS_times
            | c::SYS_getrusage | c::SYS_readlink | c::SYS_readlinkat | c::SYS_getcwd
            | c::SYS_nanosleep | c::SYS_clock_nanosleep | c::SYS_wait4 | c::SYS_waitid | c::SYS_getresuid
            | c::SYS_getresgid | c::SYS_getgroups | c::SYS_sched_getaffinity
            | c::SYS_prlimit64 | c::SYS_getrlimit | c::SYS_getcpu | c::SYS_ioctl | c::SYS_fcntl
            | c::SYS_getitimer | c::SYS_prctl | c::SYS_rt_sigtimedwait
            // No out-buffers: the result is all a replay needs.
            | c::SYS_open | c::SYS_openat | c::SYS_close | c::SYS_lseek | c::SYS_dup
            | c::SYS_dup2 | c::SYS_dup3 | c::SYS_socket | c::SYS_bind | c::SYS_listen
            | c::SYS_connect | c::SYS_shutdown | c::SYS_setsockopt | c::SYS_unlink
            | c::SYS_unlinkat | c::SYS_mkdir | c::SYS_mkdirat | c::SYS_rmdir | c::SYS_rename
            | c::SYS_renameat | c::SYS_renameat2 | c::SYS_chmod | c::SYS_fchmod
            | c::SYS_fchmodat | c::SYS_chown | c::SYS_fchown | c::SYS_lchown | c::SYS_fchownat
            | c::SYS_ftruncate | c::SYS_truncate | c::SYS_fsync | c::SYS_fdatasync
            | c::SYS_fadvise64 | c::SYS_fallocate | c::SYS_access | c::SYS_faccessat
            | c::SYS_faccessat2 | c::SYS_chdir | c::SYS_fchdir | c::SYS_umask | c::SYS_getuid
            | c::SYS_geteuid | c::SYS_getgid | c::SYS_getegid | c::SYS_getpgrp | c::SYS_getsid
            | c::SYS_setsid | c::SYS_setpgid | c::SYS_sched_setaffinity | c::SYS_setpriority
            | c::SYS_getpriority | c::SYS_eventfd2 | c::SYS_epoll_create1 | c::SYS_epoll_ctl
            | c::SYS_flock | c::SYS_sync | c::SYS_utimensat | c::SYS_symlink | c::SYS_symlinkat
            | c::SYS_link | c::SYS_linkat | c::SYS_sched_getscheduler | c::SYS_alarm
            | c::SYS_setitimer | c::SYS_copy_file_range | c::SYS_sendfile | c::SYS_splice
            | c::SYS_memfd_create | c::SYS_sched_setscheduler | c::SYS_close_range
            | c::SYS_inotify_init1 | c::SYS_inotify_add_watch | c::SYS_inotify_rm_watch
            // They return only when a signal interrupts them (EINTR).
            | c::SYS_pause | c::SYS_rt_sigsuspend
    )
}

/// The kernel's internal results of a syscall a signal interrupted, to be
/// restarted or turned into EINTR on delivery (include/linux/errno.h):
/// ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK.
pub const RESTART_CODES: [i64; 4] = [-512, -513, -514, -516];

/// What an interrupted call wrote before returning a restart code: the
/// time left, for the sleeps and waits that report it (nanosleep(2),
/// clock_nanosleep(2) when relative, select(2), pselect6 and ppoll).
fn interrupted_out_buffers(nr: i64, a: &[u64; 6]) -> Vec<(u64, u64)> {
    let range = match nr {
        c::SYS_nanosleep => a[1],
        c::SYS_clock_nanosleep if a[1] & c::TIMER_ABSTIME as u64 == 0 => a[3],
        c::SYS_select | c::SYS_pselect6 => a[4],
        c::SYS_ppoll => a[2],
        _ => 0,
    };
    // struct timespec and struct timeval are both 16 bytes.
    if range == 0 { Vec::new() } else { vec![(range, 16)] }
}

/// The memory the kernel wrote for a completed syscall, as `(address, length
/// in bytes)` ranges, in a fixed order for each syscall. `args` are the entry arguments, `result` the return
/// value; `read_u64` reads a word of tracee memory (for lengths the kernel
/// stores in the tracee, like `*addrlen`). Errors return no ranges.
pub fn out_buffers(
    nr: i64,
    args: &[u64; 6],
    result: i64,
    read_u64: &mut dyn FnMut(u64) -> Option<u64>,
) -> Vec<(u64, u64)> {
    if RESTART_CODES.contains(&result) {
        return interrupted_out_buffers(nr, args);
    }
    if result < 0 {
        return Vec::new();
    }
    let r = result as u64;
    let a = args;
    let mut out = Vec::new();
    // Zero-length ranges are kept so that a replay, whose lengths may
    // differ before the call, pairs its ranges with the logged ones by index.
    let mut add = |addr: u64, len: u64| {
        if addr != 0 {
            out.push((addr, len));
        }
    };
    let mut deref_u32 = |addr: u64| -> u64 {
        if addr == 0 {
            0
        } else {
            read_u64(addr).map(|v| v & 0xffff_ffff).unwrap_or(0)
        }
    };
    match nr {
        c::SYS_read | c::SYS_pread64 | c::SYS_getdents64 | c::SYS_readlink => add(a[1], r),
        c::SYS_getrandom | c::SYS_getcwd => add(a[0], r),
        c::SYS_readlinkat => add(a[2], r),
        c::SYS_sched_getaffinity => add(a[2], r),
        c::SYS_readv | c::SYS_preadv | c::SYS_preadv2 => {
            for (base, len) in iovecs(a[1], a[2], r, read_u64) {
                add(base, len);
            }
        }
        c::SYS_recvfrom => {
            add(a[1], r);
            let n = deref_u32(a[5]);
            add(a[4], n);
            add(a[5], 4);
        }
        c::SYS_recvmsg => {
            // struct msghdr: name@0, namelen@8, iov@16, iovlen@24,
            // control@32, controllen@40, flags@48 (recvmsg(2)).
            let m = a[1];
            let word = |off: u64, rd: &mut dyn FnMut(u64) -> Option<u64>| rd(m + off).unwrap_or(0);
            let name = word(0, read_u64);
            let namelen = word(8, read_u64) & 0xffff_ffff;
            let iov = word(16, read_u64);
            let iovlen = word(24, read_u64);
            let control = word(32, read_u64);
            let controllen = word(40, read_u64);
            add(m, 56);
            add(name, namelen);
            add(control, controllen);
            for (base, len) in iovecs(iov, iovlen, r, read_u64) {
                add(base, len);
            }
        }
        c::SYS_clock_gettime | c::SYS_clock_getres | c::SYS_nanosleep => add(a[1], 16),
        c::SYS_clock_nanosleep => add(a[3], 16),
        c::SYS_gettimeofday => {
            add(a[0], 16);
            add(a[1], 8);
        }
        c::SYS_time => add(a[0], 8),
        c::SYS_stat | c::SYS_fstat | c::SYS_lstat => add(a[1], 144),
        c::SYS_newfstatat => add(a[2], 144),
        c::SYS_statx => add(a[4], 256),
        c::SYS_statfs | c::SYS_fstatfs => add(a[1], 120),
        c::SYS_poll | c::SYS_ppoll => add(a[0], a[1] * 8),
        c::SYS_select | c::SYS_pselect6 => {
            let set = a[0].div_ceil(64) * 8;
            add(a[1], set);
            add(a[2], set);
            add(a[3], set);
            add(a[4], 16);
        }
        c::SYS_epoll_wait | c::SYS_epoll_pwait => add(a[1], r * 12),
        c::SYS_accept | c::SYS_accept4 | c::SYS_getsockname | c::SYS_getpeername => {
            let n = deref_u32(a[2]);
            add(a[1], n);
            add(a[2], 4);
        }
        c::SYS_getsockopt => {
            let n = deref_u32(a[4]);
            add(a[3], n);
            add(a[4], 4);
        }
        c::SYS_socketpair => add(a[3], 8),
        c::SYS_pipe | c::SYS_pipe2 => add(a[0], 8),
        c::SYS_uname => add(a[0], 390),
        c::SYS_sysinfo => add(a[0], 112),
        c::SYS_times => add(a[0], 32),
        c::SYS_getrusage => add(a[1], 144),
        // siginfo_t (128 bytes) and struct rusage (144 bytes): waitid(2).
        c::SYS_waitid => {
            add(a[2], 128);
            add(a[4], 144);
        }
        c::SYS_wait4 => {
            add(a[1], 4);
            add(a[3], 144);
        }
        c::SYS_getresuid | c::SYS_getresgid => {
            add(a[0], 4);
            add(a[1], 4);
            add(a[2], 4);
        }
        c::SYS_getgroups => add(a[1], r * 4),
        c::SYS_prlimit64 => add(a[3], 16),
        c::SYS_getrlimit | c::SYS_getitimer => add(a[1], 16),
        c::SYS_getcpu => {
            add(a[0], 4);
            add(a[1], 4);
        }
        c::SYS_rt_sigtimedwait => add(a[1], 128),
        c::SYS_prctl if a[0] == c::PR_GET_NAME as u64 => add(a[1], 16),
        c::SYS_fcntl if a[1] == c::F_GETLK as u64 => add(a[2], 32),
        c::SYS_ioctl => {
            // ioctl request numbers encode direction and size (asm-generic/ioctl.h);
            // the old tty requests do not, so they are listed.
            let req = a[1] as u32;
            let len = match req as u64 {
                0x5401 => 60,           // TCGETS: struct termios
                0x5413 => 8,            // TIOCGWINSZ: struct winsize
                0x541B | 0x540F => 4,   // FIONREAD, TIOCGPGRP
                _ if (req >> 30) & 2 != 0 => ((req >> 16) & 0x3fff) as u64,
                _ => 0,
            };
            add(a[2], len);
        }
        _ => {}
    }
    out
}

/// The `(base, length)` pieces of an iovec array of `count` entries at `iov`
/// that hold the first `total` bytes transferred.
fn iovecs(
    iov: u64,
    count: u64,
    total: u64,
    read_u64: &mut dyn FnMut(u64) -> Option<u64>,
) -> Vec<(u64, u64)> {
    let mut left = total;
    let mut pieces = Vec::new();
    for i in 0..count.min(1024) {
        if left == 0 {
            break;
        }
        let (Some(base), Some(len)) = (read_u64(iov + 16 * i), read_u64(iov + 16 * i + 8)) else {
            break;
        };
        let n = len.min(left);
        pieces.push((base, n));
        left -= n;
    }
    pieces
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
        c::SYS_exit | c::SYS_exit_group => &[0],
        c::SYS_kill => &[1],
        c::SYS_tgkill => &[2],
        c::SYS_tkill => &[1],
        c::SYS_poll | c::SYS_epoll_wait => &[1],
        _ => &[],
    }
}

/// Index of an argument that is a NUL-terminated path: its bytes are logged
/// and a replay must pass the same path.
pub fn path_arg(nr: i64) -> Option<usize> {
    match nr {
        c::SYS_open | c::SYS_stat | c::SYS_lstat | c::SYS_access | c::SYS_readlink
        | c::SYS_unlink | c::SYS_mkdir | c::SYS_rmdir | c::SYS_chdir | c::SYS_statfs
        | c::SYS_truncate | c::SYS_chmod => Some(0),
        c::SYS_openat | c::SYS_newfstatat | c::SYS_statx | c::SYS_faccessat
        | c::SYS_faccessat2 | c::SYS_readlinkat | c::SYS_unlinkat | c::SYS_mkdirat => Some(1),
        _ => None,
    }
}

/// The syscall's name, for messages and `weft dump`.
pub fn name(nr: i64) -> String {
    NAMES
        .iter()
        .find(|(n, _)| *n == nr)
        .map(|(_, s)| s.trim_start_matches("SYS_").to_string())
        .unwrap_or_else(|| format!("syscall_{nr}"))
}

macro_rules! names {
    ($($id:ident),* $(,)?) => {
        const NAMES: &[(i64, &str)] = &[$((c::$id, stringify!($id))),*];
    };
}

names!(
    SYS_read, SYS_write, SYS_open, SYS_close, SYS_stat, SYS_fstat, SYS_lstat, SYS_poll,
    SYS_lseek, SYS_mmap, SYS_mprotect, SYS_munmap, SYS_brk, SYS_rt_sigaction,
    SYS_rt_sigprocmask, SYS_ioctl, SYS_pread64, SYS_pwrite64, SYS_readv, SYS_writev,
    SYS_access, SYS_pipe, SYS_select, SYS_sched_yield, SYS_mremap, SYS_madvise, SYS_dup,
    SYS_dup2, SYS_nanosleep, SYS_getpid, SYS_socket, SYS_connect, SYS_accept, SYS_sendto,
    SYS_recvfrom, SYS_sendmsg, SYS_recvmsg, SYS_shutdown, SYS_bind, SYS_listen,
    SYS_getsockname, SYS_getpeername, SYS_socketpair, SYS_setsockopt, SYS_getsockopt,
    SYS_clone, SYS_fork, SYS_vfork, SYS_execve, SYS_exit, SYS_wait4, SYS_kill, SYS_uname,
    SYS_fcntl, SYS_flock, SYS_fsync, SYS_ftruncate, SYS_getdents64, SYS_getcwd, SYS_chdir,
    SYS_rename, SYS_mkdir, SYS_rmdir, SYS_unlink, SYS_readlink, SYS_umask, SYS_gettimeofday,
    SYS_getrlimit, SYS_getrusage, SYS_sysinfo, SYS_times, SYS_getuid, SYS_getgid,
    SYS_geteuid, SYS_getegid, SYS_getppid, SYS_prctl, SYS_arch_prctl, SYS_gettid, SYS_time,
    SYS_futex, SYS_sched_setaffinity, SYS_sched_getaffinity, SYS_set_tid_address,
    SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep, SYS_exit_group,
    SYS_epoll_wait, SYS_epoll_ctl, SYS_tgkill, SYS_tkill, SYS_openat, SYS_mkdirat,
    SYS_newfstatat, SYS_unlinkat, SYS_readlinkat, SYS_faccessat, SYS_pselect6, SYS_ppoll,
    SYS_set_robust_list, SYS_epoll_pwait, SYS_accept4, SYS_eventfd2, SYS_epoll_create1,
    SYS_dup3, SYS_pipe2, SYS_preadv, SYS_pwritev, SYS_prlimit64, SYS_getcpu, SYS_getrandom,
    SYS_memfd_create, SYS_statx, SYS_rseq, SYS_clone3, SYS_close_range, SYS_faccessat2,
    SYS_sigaltstack, SYS_rt_sigreturn, SYS_fadvise64, SYS_membarrier, SYS_statfs,
    SYS_fstatfs, SYS_getresuid, SYS_getresgid, SYS_sendfile, SYS_splice, SYS_getgroups,
    SYS_sched_getparam, SYS_sched_setparam, SYS_sched_getscheduler, SYS_mincore, SYS_io_uring_setup,
    SYS_setitimer, SYS_getitimer, SYS_alarm, SYS_rt_sigtimedwait, SYS_restart_syscall,
    SYS_pause, SYS_rt_sigsuspend,
);

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(name(99999), "syscall_99999");
    }
}
