//! Seed 003's five classes of system calls (iReplayer §2.2.3), which say
//! what a call does to the world outside the process, and so whether an
//! epoch can be re-executed across it: *repeatable* calls return the same
//! result every time in the same process; *recordable* ones return results
//! that differ on re-execution, so their results are logged and given back;
//! *revocable* ones change state that re-issuing them reproduces once the
//! epoch's start is restored (file positions); *deferrable* ones change
//! state for good but can wait until the epoch ends; *irrevocable* ones
//! change state that can be neither rolled back nor deferred, and close the
//! epoch (`crate::epochs`).
//!
//! The class is the call's, decided from its number and arguments alone
//! (what the kernel was asked, not what it did), argument-dependent where
//! the seed says so (fcntl, lseek) and where the arguments decide between a
//! query and a change. Every syscall of the generated table is in exactly
//! one list below (a test checks it); one the table does not know (newer
//! than its kernel) is irrevocable, the class that assumes nothing.

use crate::event::is_new_process;
use crate::syscalls::table::SYSCALLS;
use libc as c;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// A syscall's class (seed 003 §2.2.3), from the least to the most
/// disruptive for re-executing an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CallClass {
    /// Returns the same result every time in the same process and changes
    /// nothing (getpid).
    Repeatable,
    /// Returns results a re-execution would not get again (the time,
    /// socket reads and writes, new descriptors): logged, and given back.
    Recordable,
    /// Changes state that re-issuing the call reproduces once the epoch's
    /// start (memory, file positions) is restored: file reads and writes.
    Revocable,
    /// Changes state for good, but can wait until the epoch ends: close,
    /// munmap.
    Deferrable,
    /// Changes state that can be neither rolled back nor deferred: execve,
    /// fork. Closes the epoch.
    Irrevocable,
}

impl CallClass {
    /// The class's name in lower case, as `weft dump` prints it.
    pub fn name(self) -> &'static str {
        match self {
            CallClass::Repeatable => "repeatable",
            CallClass::Recordable => "recordable",
            CallClass::Revocable => "revocable",
            CallClass::Deferrable => "deferrable",
            CallClass::Irrevocable => "irrevocable",
        }
    }
}

impl std::fmt::Display for CallClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The class of a call to syscall `nr` with argument registers `args`.
pub fn call_class(nr: i64, args: &[u64; 6]) -> CallClass {
    use CallClass::*;
    match nr {
        c::SYS_fcntl => fcntl_class(args[1]),
        c::SYS_lseek => lseek_class(args[1], args[2]),
        // A thread shares everything with its creator: what the trace
        // records of it is its order; a process is a new world.
        c::SYS_clone if is_new_process(args[0]) => Irrevocable,
        c::SYS_clone => Recordable,
        // A new limit changes the process's own state; none only reads it.
        c::SYS_prlimit64 if args[2] != 0 => Revocable,
        // 0xffffffff queries the personality without changing it.
        c::SYS_personality if args[0] == 0xffff_ffff => Repeatable,
        c::SYS_shmctl | c::SYS_msgctl if args[1] == c::IPC_RMID as u64 => Irrevocable,
        c::SYS_semctl if args[2] == c::IPC_RMID as u64 => Irrevocable,
        c::SYS_syslog => syslog_class(args[0]),
        _ => by_number(nr),
    }
}

/// fcntl(2) by command: queries of the descriptor's own flags are
/// repeatable (seed: F_GETOWN), commands that make a descriptor or whose
/// answer depends on other processes (locks, leases) are recordable (seed:
/// F_DUPFD), and the rest set state of the open file that re-issuing them
/// sets again.
fn fcntl_class(cmd: u64) -> CallClass {
    // Linux's include/uapi/asm-generic/fcntl.h and linux/fcntl.h, which
    // the libc crate lacks.
    const F_GETSIG: i32 = 11;
    const F_GETOWN_EX: i32 = 16;
    const F_GET_SEALS: i32 = 1034;
    let cmd = cmd as i32;
    match cmd {
        c::F_GETFD | c::F_GETFL | c::F_GETOWN | F_GETSIG | F_GETOWN_EX | c::F_GETPIPE_SZ | F_GET_SEALS => {
            CallClass::Repeatable
        }
        c::F_DUPFD | c::F_DUPFD_CLOEXEC | c::F_GETLK | c::F_SETLK | c::F_SETLKW | c::F_OFD_GETLK | c::F_OFD_SETLK
        | c::F_OFD_SETLKW | c::F_GETLEASE | c::F_SETLEASE => CallClass::Recordable,
        _ => CallClass::Revocable,
    }
}

/// lseek(2): asking for the position (0 bytes from the current one) is
/// repeatable; repositioning is irrevocable, as the seed has it: a write
/// after it can change bytes that reads before it saw, so those reads
/// cannot be re-issued.
fn lseek_class(offset: u64, whence: u64) -> CallClass {
    if whence == c::SEEK_CUR as u64 && offset == 0 {
        CallClass::Repeatable
    } else {
        CallClass::Irrevocable
    }
}

/// syslog(2): reading the kernel's log or its size is recordable (others
/// write to it); clearing it or changing the console level is irrevocable.
fn syslog_class(action: u64) -> CallClass {
    // SYSLOG_ACTION_READ, _READ_ALL, _SIZE_UNREAD, _SIZE_BUFFER.
    if [2, 3, 9, 10].contains(&action) {
        CallClass::Recordable
    } else {
        CallClass::Irrevocable
    }
}

/// The class of syscall `nr` when its arguments do not matter: its list's,
/// or repeatable for an entry the kernel does not implement (it always
/// fails with ENOSYS), or irrevocable for a number the table lacks.
fn by_number(nr: i64) -> CallClass {
    static TABLE: OnceLock<Vec<CallClass>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let len = SYSCALLS.iter().map(|s| s.nr as usize + 1).max().unwrap_or(0);
        let mut t = vec![CallClass::Irrevocable; len];
        for s in SYSCALLS {
            t[s.nr as usize] = if s.implemented { listed(s.name).unwrap_or(CallClass::Irrevocable) } else { CallClass::Repeatable };
        }
        t
    });
    usize::try_from(nr).ok().and_then(|i| table.get(i)).copied().unwrap_or(CallClass::Irrevocable)
}

/// The class of the list that names syscall `name`, if one does.
fn listed(name: &str) -> Option<CallClass> {
    LISTS.iter().find(|(_, names)| names.contains(&name)).map(|(class, _)| *class)
}

/// Every implemented syscall of the table, by class. Those classified by
/// their arguments ([`call_class`]) are listed under their class when the
/// arguments do not decide otherwise.
const LISTS: [(CallClass, &[&str]); 5] = [
    (CallClass::Repeatable, REPEATABLE),
    (CallClass::Recordable, RECORDABLE),
    (CallClass::Revocable, REVOCABLE),
    (CallClass::Deferrable, DEFERRABLE),
    (CallClass::Irrevocable, IRREVOCABLE),
];

/// Questions about the process itself, whose answers only the process
/// changes (ids, limits, scheduling parameters, its working directory),
/// and calls with no effect a re-execution could see: sched_yield,
/// membarrier, kcmp, rseq (refused with ENOSYS when recording and
/// replaying), uretprobe (the kernel's own return-probe trampoline).
const REPEATABLE: &[&str] = &[
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "getpgrp", "getpgid", "getsid", "capget", "getrlimit", "prlimit64", "getpriority", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
    "sched_getattr", "sched_getaffinity", "get_robust_list", "get_mempolicy", "ioprio_get", "getcwd",
    "uname", "sysfs", "clock_getres", "lsm_get_self_attr", "lsm_list_modules", "sched_yield",
    "membarrier", "kcmp", "rseq", "uretprobe",
];

/// Calls whose results a re-execution would not get again, which weft logs
/// and gives back (seed: gettimeofday, socket reads and writes; F_DUPFD):
/// the time and timers, randomness, waits (which thread or event comes
/// first; restart_syscall resumes an interrupted sleep), sockets and IPC
/// with other processes, every call that makes a
/// descriptor or an id (seed §2.2.3: a re-execution may not get the same
/// number), thread creation, the address space's layout as the kernel
/// chooses it, answers from the file system that other processes share
/// (stat family, xattrs, links), devices (ioctl) and data moved through
/// pipes and sockets (sendfile, splice).
const RECORDABLE: &[&str] = &[
    // time and timers
    "clock_gettime", "gettimeofday", "time", "times", "getrusage", "sysinfo", "getitimer", "setitimer",
    "alarm", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timerfd_create",
    "timerfd_settime", "timerfd_gettime", "nanosleep", "clock_nanosleep", "getcpu", "getrandom",
    // waits
    "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "wait4", "waitid",
    "rt_sigtimedwait", "rt_sigsuspend", "rt_sigpending", "pause", "futex", "futex_waitv", "futex_wait",
    "futex_wake", "futex_requeue", "io_getevents", "io_pgetevents", "restart_syscall",
    // sockets
    "socket", "socketpair", "connect", "accept", "accept4", "bind", "listen", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt",
    // descriptors and ids
    "dup", "dup2", "dup3", "pipe", "pipe2", "eventfd", "eventfd2", "signalfd", "signalfd4", "epoll_create",
    "epoll_create1", "epoll_ctl", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init",
    "fanotify_mark", "memfd_create", "memfd_secret", "userfaultfd", "pidfd_open", "pidfd_getfd",
    "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup", "io_submit",
    "io_cancel", "landlock_create_ruleset", "landlock_add_rule", "open_tree", "fsopen", "fspick", "fsmount",
    // System V and POSIX IPC
    "shmget", "shmat", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv",
    "msgctl", "mq_open", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    // threads and the address space
    "clone", "mmap", "mremap", "brk", "mincore", "map_shadow_stack", "process_vm_readv",
    // the shared file system
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "ustat", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
    "flistxattr", "name_to_handle_at", "cachestat", "statmount", "listmount", "flock",
    // devices, pipes and sockets as data paths
    "ioctl", "sendfile", "splice", "tee", "vmsplice", "syslog",
];

/// Calls that change state which re-issuing them reproduces once the
/// epoch's start is restored (seed: file-related reads and writes, after
/// the file positions are reset): file I/O, opening files, the metadata of
/// files, and the process's own kernel state (signal dispositions and
/// masks, scheduling, memory protection and policy, limits, its working
/// directory), which the call sets again to the same value.
const REVOCABLE: &[&str] = &[
    // file I/O
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2",
    "getdents", "getdents64", "fallocate", "copy_file_range", "readahead", "fadvise64", "fcntl",
    // opening files
    "open", "openat", "openat2", "creat", "open_by_handle_at",
    // file metadata
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr",
    // the process's own kernel state
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "set_robust_list", "set_tid_address",
    "arch_prctl", "prctl", "umask", "setrlimit", "setpriority", "sched_setparam",
    "sched_setscheduler", "sched_setattr", "sched_setaffinity", "ioprio_set", "chdir", "fchdir", "setpgid",
    "personality", "set_mempolicy", "set_mempolicy_home_node", "mbind", "migrate_pages", "move_pages",
    "madvise", "mprotect", "pkey_mprotect", "pkey_alloc", "pkey_free", "mlock", "mlock2", "munlock",
    "mlockall", "munlockall", "remap_file_pages", "modify_ldt", "iopl", "ioperm",
];

/// Calls that change state for good but can wait until the epoch ends
/// (seed: munmap and close, which iReplayer delays to the next epoch; it
/// also keeps exiting threads alive until then, and ends the last epoch at
/// the program's termination): releasing descriptors, mappings, timers and
/// contexts, ending a thread or a process, and flushing to storage, which
/// changes nothing the program reads.
const DEFERRABLE: &[&str] = &[
    "close", "close_range", "munmap", "shmdt", "timer_delete", "io_destroy", "inotify_rm_watch", "exit",
    "exit_group", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "msync",
];

/// Calls whose effects can be neither rolled back nor deferred (seed:
/// execve, fork; lseek that repositions): a new program or process,
/// signals and memory writes reaching other processes, debugging them,
/// names removed, moved or made in the file system and data cut off
/// (which earlier reads saw), identities and privileges given up,
/// sandboxes and namespaces entered, sealed memory, and changes to the
/// whole system (mounts, clock, modules, keys, bpf, power).
const IRREVOCABLE: &[&str] = &[
    "execve", "execveat", "fork", "vfork", "clone3", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "pidfd_send_signal", "process_vm_writev", "process_madvise", "process_mrelease",
    "ptrace", "lseek",
    // the file system's names and data
    "unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
    "symlinkat", "mkdir", "mkdirat", "mknod", "mknodat", "truncate", "ftruncate", "mq_unlink",
    // identity, privileges, sandboxes
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
    "setgroups", "capset", "setsid", "seccomp", "unshare", "setns", "chroot", "pivot_root",
    "landlock_restrict_self", "mseal", "lsm_set_self_attr",
    // the whole system
    "mount", "umount2", "move_mount", "mount_setattr", "fsconfig", "swapon", "swapoff", "reboot",
    "sethostname", "setdomainname", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "acct", "quotactl",
    "quotactl_fd", "vhangup", "bpf", "keyctl", "add_key", "request_key", "_sysctl",
];

#[cfg(test)]
mod tests {
    use super::*;
    use CallClass::*;

    /// A call of `nr` with the first arguments `first` (the rest 0).
    fn class(nr: i64, first: &[u64]) -> CallClass {
        let mut args = [0; 6];
        args[..first.len()].copy_from_slice(first);
        call_class(nr, &args)
    }

    #[test]
    fn every_implemented_syscall_is_in_exactly_one_list() {
        for s in SYSCALLS.iter().filter(|s| s.implemented) {
            let n = LISTS.iter().filter(|(_, names)| names.contains(&s.name)).count();
            assert_eq!(n, 1, "{} is in {n} lists", s.name);
        }
        for (_, names) in LISTS {
            for name in names {
                assert!(SYSCALLS.iter().any(|s| s.name == *name && s.implemented), "{name} is no implemented syscall");
            }
        }
    }

    #[test]
    fn the_seeds_examples() {
        assert_eq!(class(c::SYS_getpid, &[]), Repeatable);
        assert_eq!(class(c::SYS_gettimeofday, &[]), Recordable);
        assert_eq!(class(c::SYS_recvfrom, &[]), Recordable);
        assert_eq!(class(c::SYS_sendto, &[]), Recordable);
        assert_eq!(class(c::SYS_read, &[3]), Revocable);
        assert_eq!(class(c::SYS_write, &[3]), Revocable);
        assert_eq!(class(c::SYS_munmap, &[]), Deferrable);
        assert_eq!(class(c::SYS_close, &[3]), Deferrable);
        assert_eq!(class(c::SYS_execve, &[]), Irrevocable);
        assert_eq!(class(c::SYS_fork, &[]), Irrevocable);
        assert_eq!(class(c::SYS_fcntl, &[3, c::F_GETOWN as u64]), Repeatable);
        assert_eq!(class(c::SYS_fcntl, &[3, c::F_DUPFD as u64]), Recordable);
    }

    #[test]
    fn arguments_decide_where_they_should() {
        let seek = |offset: i64, whence: i32| class(c::SYS_lseek, &[3, offset as u64, whence as u64]);
        assert_eq!(seek(0, c::SEEK_CUR), Repeatable, "asking for the position");
        assert_eq!(seek(0, c::SEEK_SET), Irrevocable);
        assert_eq!(seek(-4, c::SEEK_CUR), Irrevocable);
        assert_eq!(seek(0, c::SEEK_END), Irrevocable);
        let thread = (c::CLONE_VM | c::CLONE_FS | c::CLONE_FILES | c::CLONE_SIGHAND | c::CLONE_THREAD) as u64;
        assert_eq!(class(c::SYS_clone, &[thread]), Recordable);
        assert_eq!(class(c::SYS_clone, &[c::SIGCHLD as u64]), Irrevocable, "fork through clone");
        assert_eq!(class(c::SYS_fcntl, &[3, c::F_SETFL as u64]), Revocable);
        assert_eq!(class(c::SYS_prlimit64, &[0, 7, 0, 0x1000]), Repeatable);
        assert_eq!(class(c::SYS_prlimit64, &[0, 7, 0x1000, 0]), Revocable);
        assert_eq!(class(c::SYS_shmctl, &[1, c::IPC_RMID as u64]), Irrevocable);
        assert_eq!(class(c::SYS_shmctl, &[1, c::IPC_STAT as u64]), Recordable);
        assert_eq!(class(c::SYS_semctl, &[1, 0, c::IPC_RMID as u64]), Irrevocable);
        assert_eq!(class(c::SYS_personality, &[0xffff_ffff]), Repeatable);
        assert_eq!(class(c::SYS_personality, &[c::ADDR_NO_RANDOMIZE as u64]), Revocable);
        assert_eq!(class(c::SYS_syslog, &[10]), Recordable);
        assert_eq!(class(c::SYS_syslog, &[5]), Irrevocable, "clearing the kernel's log");
    }

    #[test]
    fn unknown_and_unimplemented_numbers() {
        assert_eq!(class(99_999, &[]), Irrevocable);
        assert_eq!(class(-1, &[]), Irrevocable);
        // create_module: in the table, but the kernel has no entry point.
        assert_eq!(class(174, &[]), Repeatable);
        assert_eq!(class(c::SYS_rseq, &[]), Repeatable);
    }
}
