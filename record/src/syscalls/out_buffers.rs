//! Where a syscall's out-buffers are: the user memory the kernel wrote,
//! which the recorder logs and the replayer writes back.
//!
//! The generated table ([`super::table`]) names, for every syscall, the
//! arguments its kernel prototype declares as non-const `__user` pointers.
//! A pointer to a fixed-size type is sized by [`type_size`]; a buffer or an
//! array whose length depends on the call (a byte count, a result, an
//! element count) has a rule written by hand in [`call_rule`], from the
//! syscall's man page (section 2). A syscall whose pointers neither covers
//! is not describable: it stays [`super::Class::Unsupported`].

use super::ioctl;
use super::table::SYSCALLS;
use libc as c;

/// Reads a word of tracee memory, `None` when unreadable.
pub type ReadU64<'a> = dyn FnMut(u64) -> Option<u64> + 'a;

/// The ranges found so far, as `(address, length in bytes)`. Zero-length
/// ranges are kept so that a replay, whose lengths may differ before the
/// call, pairs its ranges with the logged ones by index; NULL pointers are
/// skipped (the kernel writes nothing there).
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    fn add(&mut self, addr: u64, len: u64) {
        if addr != 0 {
            self.0.push((addr, len));
        }
    }
}

/// A hand-written size rule: given the entry arguments, the (non-negative)
/// result and tracee memory, adds the syscall's out-buffers in order.
pub type CallRule = fn(&[u64; 6], u64, &mut ReadU64, &mut Ranges);

/// The kernel's internal results of a syscall a signal interrupted, to be
/// restarted or turned into EINTR on delivery (include/linux/errno.h):
/// ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK.
pub const RESTART_CODES: [i64; 4] = [-512, -513, -514, ERESTART_RESTARTBLOCK];

/// The code of a call a signal interrupted that the kernel resumes
/// through restart_syscall (nanosleep, poll, a futex wait with a timeout:
/// include/linux/errno.h).
pub const ERESTART_RESTARTBLOCK: i64 = -516;

/// Whether the out-buffers of syscall `nr` can be described: by a hand
/// rule, or because every pointer it may write through has a fixed-size
/// type. Syscalls the table does not know are not describable.
pub fn describable(nr: i64) -> bool {
    call_rule(nr).is_some() || typed_sizes(nr).is_some()
}

/// The memory the kernel wrote for a completed syscall, as `(address,
/// length in bytes)` ranges, in a fixed order for each syscall. `args` are
/// the entry arguments, `result` the return value; `read_u64` reads a word
/// of tracee memory (for lengths the kernel stores in the tracee, like
/// `*addrlen`). Errors, and syscalls that are not [`describable`], return
/// no ranges.
pub fn out_buffers(nr: i64, args: &[u64; 6], result: i64, read_u64: &mut ReadU64) -> Vec<(u64, u64)> {
    if RESTART_CODES.contains(&result) {
        return interrupted_out_buffers(nr, args);
    }
    if result < 0 {
        return Vec::new();
    }
    let mut out = Ranges(Vec::new());
    if let Some(rule) = call_rule(nr) {
        rule(args, result as u64, read_u64, &mut out);
    } else if let Some(sizes) = typed_sizes(nr) {
        for &(i, len) in sizes {
            out.add(args[i], len);
        }
    }
    out.0
}

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

/// The `(argument, size)` of each pointer the table says syscall `nr` may
/// write through, when every one has a fixed-size type; `None` otherwise.
/// Worked out once per syscall number: the recorder asks for every
/// buffered record, and the table's names take a search to resolve.
fn typed_sizes(nr: i64) -> Option<&'static [(usize, u64)]> {
    /// Per syscall number: (argument, size) of each out-pointer, if all are typed.
    type Sizes = Vec<Option<Vec<(usize, u64)>>>;
    static BY_NR: std::sync::OnceLock<Sizes> = std::sync::OnceLock::new();
    let by_nr = BY_NR.get_or_init(|| {
        let max = SYSCALLS.iter().map(|s| s.nr).max().unwrap_or(0);
        (0..=max).map(resolve_typed_sizes).collect()
    });
    by_nr.get(usize::try_from(nr).ok()?)?.as_deref()
}

fn resolve_typed_sizes(nr: i64) -> Option<Vec<(usize, u64)>> {
    let info = SYSCALLS.iter().find(|s| s.nr == nr)?;
    if info.implemented && !info.declared {
        return None;
    }
    info.out.iter().map(|&(i, ty)| Some((i, type_size(ty)?))).collect()
}

/// The size in bytes on x86-64 of a pointee type named in the kernel's
/// prototypes, for the types that are one fixed-size object. Byte buffers
/// (`char`, `void`) and scalars that may be arrays (`int`, `u32`,
/// `unsigned long`, `gid_t`) have no size here: their length depends on
/// the call. Sizes are those of the uapi structs (checked against libc's
/// in the tests where libc has them).
pub fn type_size(ty: &str) -> Option<u64> {
    let size = match ty {
        _ if ty.ends_with('*') => 8,
        "loff_t" | "size_t" | "__kernel_old_time_t" | "aio_context_t" => 8,
        "timer_t" | "struct sched_param" => 4,
        "struct __user_cap_header_struct" | "struct timezone" => 8,
        "struct stat" => 144,
        "struct statfs" => 120,
        "struct statx" => 256,
        "struct __kernel_timespec" | "struct __kernel_old_timeval" => 16,
        "struct __kernel_itimerspec" | "struct __kernel_old_itimerval" => 32,
        "struct rlimit" | "struct rlimit64" | "struct utimbuf" => 16,
        "struct rusage" => 144,
        "struct new_utsname" => 390,
        "struct sysinfo" => 112,
        "struct tms" | "struct ustat" => 32,
        "struct __kernel_timex" => 208,
        "struct siginfo" | "siginfo_t" => 128,
        "struct mq_attr" | "struct sigevent" => 64,
        "struct shmid_ds" => 112,
        "struct msqid_ds" => 120,
        "struct cachestat" => 40,
        "struct cachestat_range" => 16,
        _ => return None,
    };
    Some(size)
}

/// The hand-written rule of syscall `nr`, when its out-buffers' sizes
/// depend on the call, or when a pointer its prototype leaves non-const is
/// only read (an empty rule).
fn call_rule(nr: i64) -> Option<CallRule> {
    let rule: CallRule = match nr {
        c::SYS_read | c::SYS_pread64 | c::SYS_getdents | c::SYS_getdents64 | c::SYS_readlink => {
            |a, r, _, out| out.add(a[1], r)
        }
        c::SYS_getrandom | c::SYS_getcwd => |a, r, _, out| out.add(a[0], r),
        c::SYS_readlinkat | c::SYS_sched_getaffinity => |a, r, _, out| out.add(a[2], r),
        // getxattr(2): the value; with size 0 the call only measures it.
        c::SYS_getxattr | c::SYS_lgetxattr | c::SYS_fgetxattr => {
            |a, r, _, out| out.add(a[2], if a[3] == 0 { 0 } else { r })
        }
        // listxattr(2): the NUL-separated names; size 0 only measures.
        c::SYS_listxattr | c::SYS_llistxattr | c::SYS_flistxattr => {
            |a, r, _, out| out.add(a[1], if a[2] == 0 { 0 } else { r })
        }
        c::SYS_readv | c::SYS_preadv | c::SYS_preadv2 => |a, r, rd, out| {
            for (base, len) in iovecs(a[1], a[2], r, rd) {
                out.add(base, len);
            }
        },
        c::SYS_recvfrom => |a, r, rd, out| {
            out.add(a[1], r);
            let n = deref_u32(a[5], rd);
            out.add(a[4], n);
            out.add(a[5], 4);
        },
        c::SYS_recvmsg => recvmsg,
        c::SYS_poll | c::SYS_ppoll => |a, _, _, out| out.add(a[0], a[1] * 8),
        c::SYS_select | c::SYS_pselect6 => |a, _, _, out| {
            let set = a[0].div_ceil(64) * 8;
            out.add(a[1], set);
            out.add(a[2], set);
            out.add(a[3], set);
            out.add(a[4], 16);
        },
        c::SYS_epoll_wait | c::SYS_epoll_pwait | c::SYS_epoll_pwait2 => {
            |a, r, _, out| out.add(a[1], r * 12)
        }
        c::SYS_accept | c::SYS_accept4 | c::SYS_getsockname | c::SYS_getpeername => |a, _, rd, out| {
            let n = deref_u32(a[2], rd);
            out.add(a[1], n);
            out.add(a[2], 4);
        },
        c::SYS_getsockopt => |a, _, rd, out| {
            let n = deref_u32(a[4], rd);
            out.add(a[3], n);
            out.add(a[4], 4);
        },
        c::SYS_socketpair => |a, _, _, out| out.add(a[3], 8),
        c::SYS_pipe | c::SYS_pipe2 => |a, _, _, out| out.add(a[0], 8),
        c::SYS_wait4 => |a, _, _, out| {
            out.add(a[1], 4);
            out.add(a[3], 144);
        },
        c::SYS_getresuid | c::SYS_getresgid => |a, _, _, out| {
            out.add(a[0], 4);
            out.add(a[1], 4);
            out.add(a[2], 4);
        },
        c::SYS_getgroups => |a, r, _, out| out.add(a[1], r * 4),
        // getcpu(2): cpu and node; the cache argument is unused since 2.6.24.
        c::SYS_getcpu => |a, _, _, out| {
            out.add(a[0], 4);
            out.add(a[1], 4);
        },
        // capget(2): the header (the kernel reports its preferred version
        // there) and one struct __user_cap_data_struct (12 bytes) for
        // version 1, two for versions 2 and 3.
        c::SYS_capget => |a, _, rd, out| {
            let version = deref_u32(a[0], rd);
            out.add(a[0], 8);
            out.add(a[1], if version == 0x1998_0330 { 12 } else { 24 });
        },
        // sched_getattr(2): at most `size` bytes of struct sched_attr.
        c::SYS_sched_getattr => |a, _, _, out| out.add(a[1], a[2]),
        // get_mempolicy(2): the mode (an int), and a node mask of
        // `maxnode` bits in whole unsigned longs (ffmpeg asks).
        c::SYS_get_mempolicy => |a, _, _, out| {
            out.add(a[0], 4);
            out.add(a[1], a[2].min(1 << 16).div_ceil(64) * 8);
        },
        c::SYS_rt_sigtimedwait => |a, _, _, out| out.add(a[1], 128),
        // rt_sigpending(2): a set of `sigsetsize` bytes (8; the kernel
        // refuses more).
        c::SYS_rt_sigpending => |a, _, _, out| out.add(a[0], a[1].min(8)),
        // prctl(2): the options that store through their second argument.
        c::SYS_prctl => |a, _, _, out| match a[0] as i32 {
            c::PR_GET_NAME => out.add(a[1], 16),
            c::PR_GET_PDEATHSIG | c::PR_GET_CHILD_SUBREAPER => out.add(a[1], 4),
            c::PR_GET_TID_ADDRESS => out.add(a[1], 8),
            _ => {}
        },
        // fcntl(2): the lock queries fill a struct flock.
        c::SYS_fcntl => |a, _, _, out| {
            if a[1] == c::F_GETLK as u64 || a[1] == c::F_OFD_GETLK as u64 {
                out.add(a[2], 32);
            }
        },
        c::SYS_ioctl => |a, _, rd, out| {
            if let Some(len) = ioctl::written(a[1]) {
                out.add(a[2], len + ioctl::written_beyond(a[1], a[2], rd));
            }
        },
        c::SYS_bpf => bpf,
        // Non-const pointers the kernel only reads (their man pages):
        // names, values, limits and addresses set, signal masks and siginfo
        // sent, epoll_ctl's event, the times given to utime and friends.
        c::SYS_setsockopt | c::SYS_sethostname | c::SYS_setdomainname | c::SYS_utime
        | c::SYS_utimes | c::SYS_futimesat | c::SYS_utimensat | c::SYS_epoll_ctl
        | c::SYS_rt_sigqueueinfo | c::SYS_rt_tgsigqueueinfo | c::SYS_pidfd_send_signal
        | c::SYS_sched_setparam | c::SYS_sched_setscheduler | c::SYS_sched_setattr
        | c::SYS_sched_setaffinity | c::SYS_setgroups | c::SYS_setrlimit | c::SYS_settimeofday
        | c::SYS_capset | c::SYS_signalfd | c::SYS_signalfd4 | c::SYS_mq_open
        | c::SYS_rt_sigsuspend | c::SYS_openat2 | c::SYS_umount2 | c::SYS_bind
        | c::SYS_connect | c::SYS_sendto => |_, _, _, _| {},
        _ => return None,
    };
    Some(rule)
}

/// The value of the u32 at `addr` (a length the kernel reads and updates,
/// like `*addrlen`), 0 when NULL or unreadable.
fn deref_u32(addr: u64, read_u64: &mut ReadU64) -> u64 {
    if addr == 0 {
        return 0;
    }
    read_u64(addr).map(|v| v & 0xffff_ffff).unwrap_or(0)
}

/// recvmsg(2): the msghdr (the kernel updates its lengths and flags), the
/// source address, the control data and the bytes received. struct msghdr:
/// name@0, namelen@8, iov@16, iovlen@24, control@32, controllen@40,
/// flags@48.
fn recvmsg(a: &[u64; 6], r: u64, rd: &mut ReadU64, out: &mut Ranges) {
    let m = a[1];
    let mut word = |off: u64| rd(m + off).unwrap_or(0);
    let (name, namelen, iov, iovlen) = (word(0), word(8) & 0xffff_ffff, word(16), word(24));
    let (control, controllen) = (word(32), word(40));
    out.add(m, 56);
    out.add(name, namelen);
    out.add(control, controllen);
    for (base, len) in iovecs(iov, iovlen, r, rd) {
        out.add(base, len);
    }
}

/// bpf(2) commands (enum bpf_cmd, include/uapi/linux/bpf.h) that write
/// no user memory: creating, updating, deleting, pinning, attaching,
/// getting fds by id, freezing, enabling stats, detaching.
const BPF_NO_WRITE: [u64; 17] = [0, 2, 3, 6, 7, 8, 9, 13, 14, 17, 19, 22, 30, 32, 33, 34, 35];
/// BPF_OBJ_GET_INFO_BY_FD: fills an info struct about a bpf object.
const BPF_OBJ_GET_INFO_BY_FD: u64 = 15;

/// The out-buffers of a bpf(2) call. For BPF_OBJ_GET_INFO_BY_FD, union
/// bpf_attr's `info` member is { u32 bpf_fd; u32 info_len; u64 info }: the
/// kernel writes `info_len` bytes at `info`, and the length it wrote back
/// into `info_len`.
fn bpf(a: &[u64; 6], _: u64, rd: &mut ReadU64, out: &mut Ranges) {
    if a[0] == BPF_OBJ_GET_INFO_BY_FD {
        let len = deref_u32(a[1] + 4, rd);
        out.add(rd(a[1] + 8).unwrap_or(0), len);
        out.add(a[1] + 4, 4);
    }
}

/// Whether weft can describe what this particular call writes, for the
/// syscalls whose out-buffers depend on a request argument: ioctl(2)
/// requests ([`ioctl::written`]) and bpf(2) commands. Other calls of a
/// [`describable`] syscall always are.
pub fn call_describable(nr: i64, args: &[u64; 6]) -> bool {
    match nr {
        c::SYS_ioctl => ioctl::written(args[1]).is_some(),
        c::SYS_bpf => args[0] == BPF_OBJ_GET_INFO_BY_FD || BPF_NO_WRITE.contains(&args[0]),
        _ => true,
    }
}

/// The `(base, length)` pieces of an iovec array of `count` entries at `iov`
/// that hold the first `total` bytes transferred.
pub fn iovecs(iov: u64, count: u64, total: u64, read_u64: &mut ReadU64) -> Vec<(u64, u64)> {
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
