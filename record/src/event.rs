//! The events of a trace: seed 000's log entries (§3.1, Fig. 5) made
//! concrete for Linux. Each event has a global index (its position in the
//! trace), the recorded tid of the thread that caused it, and a label, the
//! user-space program point where it happened.

use crate::cpu::Cpu;
use crate::syscalls::{call_class, CallClass};
use serde::{Deserialize, Serialize};

/// A thread id as the kernel gave it during recording. Replay tids differ;
/// the replayer maps between the two.
pub type Tid = i32;

/// What the recorder knew before the program ran: enough to start the same
/// process again. The first record of every trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// The program's argv, as bytes.
    pub argv: Vec<Vec<u8>>,
    /// The program's environment, `NAME=value` bytes.
    pub env: Vec<Vec<u8>>,
    /// The working directory it ran in.
    pub cwd: Vec<u8>,
    /// The path passed to execve, as given (it is on the initial stack, as
    /// AT_EXECFN, so a replay passes the very same string).
    pub exec_path: Vec<u8>,
    /// Absolute path of the executable that was exec'd.
    pub exe: Vec<u8>,
    /// The 16 bytes the kernel put at `AT_RANDOM` (stack protector and
    /// pointer guard seeds).
    pub at_random: [u8; 16],
    /// The recorded process id (the main thread's tid).
    pub pid: Tid,
    /// The files the kernel mapped at exec, with the trace's copies: the
    /// executable first, then the dynamic loader.
    pub exec_files: Vec<MappedFile>,
    /// The CPU it was recorded on (cpuid is not trapped).
    pub cpu: Cpu,
}

/// A file the program mapped, and the trace's copy of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MappedFile {
    /// The path the program mapped.
    pub path: Vec<u8>,
    /// Name of the copy under the trace's `files/` directory.
    pub copy: String,
    /// Size of the file when it was recorded, in bytes.
    pub size: u64,
    /// xxh3-64 of the copy's bytes, checked when a replay reads the copy.
    pub hash: u64,
}

/// One logged event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// Recorded tid of the thread the event belongs to.
    pub tid: Tid,
    /// The label: the user-space program point of the event (the address
    /// after the `syscall` instruction, or the faulting/trapping pc).
    pub label: u64,
    /// What happened.
    pub kind: EventKind,
}

/// The kinds of logged events.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum EventKind {
    /// A logged syscall, with its result and effects.
    Syscall(Syscall),
    /// A thread spawned another with clone/clone3 (seed 000's SPAWN), or a
    /// process with fork, vfork or clone without CLONE_THREAD
    /// ([`is_new_process`]).
    Spawn {
        /// The new thread's recorded tid (a new process's pid).
        child: Tid,
        /// The clone flags.
        flags: u64,
    },
    /// A signal was delivered to the thread.
    Signal(Signal),
    /// rdtsc or rdtscp trapped (PR_SET_TSC, PR_TSC_SIGSEGV) and was emulated.
    Rdtsc {
        /// The time stamp counter value returned (edx:eax).
        tsc: u64,
        /// For rdtscp, the TSC_AUX value returned in ecx.
        aux: Option<u32>,
        /// Length of the instruction in bytes (2 or 3).
        len: u8,
    },
    /// A process of the tree replaced its image with execve (the call
    /// succeeded; a failed execve is a [`EventKind::Syscall`]).
    Exec(Exec),
    /// A synchronization operation, logged in-process by the runtime
    /// (seed 003 §3.2): its place in the global order fixes the order in
    /// which threads acquired each synchronization variable.
    Sync(Sync),
    /// The program ended. Always the last event of a complete trace.
    End(End),
}

/// A synchronization operation logged by the in-process runtime
/// ([`crate::runtime`]): acquires are placed after the operation, releases
/// before it, so the log's order is one the threads' synchronization allows.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sync {
    /// What the thread did.
    pub op: SyncOp,
    /// The synchronization variable's address in the recording.
    pub var: u64,
    /// The operation's result: 0 or an error number for the pthread and
    /// semaphore calls (EBUSY for a failed trylock), 1 for the barrier's
    /// serial thread; a futex wait's result (0 or a negative errno), and
    /// for [`SyncOp::FutexWaitStart`] the value the wait expects in the
    /// word (futex(2)'s `val`).
    pub result: i64,
}

/// The synchronization operations the runtime logs, with the codes of
/// record/runtime/weft_runtime.h (`WEFT_SYNC_*`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[repr(u8)]
pub enum SyncOp {
    /// pthread_mutex_lock returned.
    MutexLock = 1,
    /// pthread_mutex_trylock, timedlock or clocklock returned (the result
    /// says whether it took the mutex).
    MutexTrylock = 2,
    /// pthread_mutex_unlock is called.
    MutexUnlock = 3,
    /// A read lock of an rwlock returned.
    RwlockRead = 4,
    /// A write lock of an rwlock returned.
    RwlockWrite = 5,
    /// pthread_rwlock_unlock is called.
    RwlockUnlock = 6,
    /// A condition wait is called: it releases the mutex.
    CondRelease = 7,
    /// A condition wait returned: it holds the mutex again.
    CondAcquire = 8,
    /// pthread_cond_signal is called.
    CondSignal = 9,
    /// pthread_cond_broadcast is called.
    CondBroadcast = 10,
    /// sem_wait, trywait, timedwait or clockwait returned.
    SemWait = 11,
    /// sem_post is called.
    SemPost = 12,
    /// pthread_barrier_wait is called.
    BarrierArrive = 13,
    /// pthread_barrier_wait returned.
    BarrierLeave = 14,
    /// pthread_spin_lock or trylock returned.
    SpinLock = 15,
    /// pthread_spin_unlock is called.
    SpinUnlock = 16,
    /// A futex wait made through syscall(3) returned.
    FutexWait = 17,
    /// A futex wake made through syscall(3) is called.
    FutexWake = 18,
    /// A futex wait made through syscall(3) is called: whether it found
    /// the word changed depends on the wakes before it.
    FutexWaitStart = 19,
    /// A blocking acquire (pthread_mutex_lock, an rwlock's rdlock or
    /// wrlock, sem_wait, pthread_spin_lock) found its variable taken and
    /// is about to wait: the thread's code before the call is done here,
    /// not at its acquisition, which follows as an event of its own. The
    /// result is the acquire's own op code. Logged only when contended
    /// (the runtime tries the call's non-blocking form first), so that
    /// what a thread did before it blocked runs, in a replay, no later
    /// than the log says (sort's merge threads store into their parent's
    /// bounds, then wait for its lock while the parent merges).
    LockWait = 20,
    /// A thread's start routine returned (its variable is the routine's
    /// address): the program's own code in the thread is done here; libc's
    /// thread teardown and the exit follow.
    ThreadReturn = 21,
    /// A syscall that may block ([`crate::syscalls::may_block`]; its
    /// variable is the syscall number) was entered: the thread's code
    /// before the call is done here, not at the call's return, which
    /// follows as an event of its own. The recorder's, at the call's entry
    /// stop, not the runtime's (version 13): a thread that parks in
    /// epoll_wait (tokio's I/O driver) frees what it held before the wait,
    /// where the log's other threads see it.
    SyscallWait = 22,
    /// A one-time initialization's call (pthread_once, call_once, a
    /// function-local static's `__cxa_guard_acquire`; its variable is the
    /// once control or the guard): result 1 for the thread that runs the
    /// initialization, logged as it starts; 0 for one that found it done
    /// or waited for it, logged as its call returns (version 17).
    Once = 23,
    /// A one-time initialization is done (its routine returned, or the
    /// guard was released or aborted).
    OnceDone = 24,
    /// A libgomp call that hands out work returned (a dynamic, guided or
    /// runtime-scheduled loop's start or next chunk, a section; its
    /// variable is the runtime's token for all of them): a replay makes
    /// the calls in the log's order, so each thread takes the recorded
    /// work (version 17).
    WorkShare = 25,
}

impl SyncOp {
    /// The operation with runtime code `code`, if any ([`SyncOp::SyscallWait`]
    /// is the recorder's, never the runtime's).
    pub fn from_code(code: i64) -> Option<Self> {
        use SyncOp::*;
        const ALL: [SyncOp; 24] = [
            MutexLock, MutexTrylock, MutexUnlock, RwlockRead, RwlockWrite, RwlockUnlock, CondRelease, CondAcquire,
            CondSignal, CondBroadcast, SemWait, SemPost, BarrierArrive, BarrierLeave, SpinLock, SpinUnlock, FutexWait,
            FutexWake, FutexWaitStart, LockWait, ThreadReturn, Once, OnceDone, WorkShare,
        ];
        ALL.into_iter().find(|op| *op as i64 == code)
    }

    /// Whether a replay's marker for it carries the result to compare: the
    /// barrier's, marked after the call, and a futex wait's start, which
    /// carries the value the wait expects. Acquires and condition waits
    /// are marked before the call and answered with the recorded result;
    /// releases have none.
    pub fn result_matters(self) -> bool {
        matches!(self, SyncOp::BarrierLeave | SyncOp::FutexWaitStart)
    }

    /// Whether it is a release whose replay marker comes before the call:
    /// its effect (the mutex free, the waiter woken, the barrier reached)
    /// follows the place in the log. (A futex wake's replay marker follows
    /// the emulated call, weft_runtime.c.)
    pub fn is_release(self) -> bool {
        use SyncOp::*;
        matches!(self, MutexUnlock | RwlockUnlock | CondRelease | CondSignal | CondBroadcast | SemPost | BarrierArrive | SpinUnlock | OnceDone)
    }
}

/// A successful execve in a recorded process: what the kernel loaded, so a
/// replay can check it loads the same and give it the same auxv.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exec {
    /// The new program's argv (`/proc/PID/cmdline` at the exec stop).
    pub argv: Vec<Vec<u8>>,
    /// The files the kernel mapped: the executable first, then the dynamic
    /// loader, with the trace's copies.
    pub files: Vec<MappedFile>,
    /// The 16 bytes at `AT_RANDOM` in the new image.
    pub at_random: [u8; 16],
}

/// Whether clone `flags` (clone(2)) make a new process rather than a
/// thread of the caller's: no CLONE_THREAD (fork, vfork, and clone
/// without it).
pub fn is_new_process(flags: u64) -> bool {
    flags & libc::CLONE_THREAD as u64 == 0
}

/// A logged syscall.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Syscall {
    /// The syscall number (x86-64).
    pub nr: i64,
    /// The six argument registers at entry.
    pub args: [u64; 6],
    /// The return value (a negative errno on failure).
    pub result: i64,
    /// The path argument, for syscalls that take one.
    #[serde(with = "serde_bytes")]
    pub path: Option<Vec<u8>>,
    /// Memory the kernel wrote (out-buffers), to write back in replay.
    pub writes: Vec<MemWrite>,
    /// For output syscalls, the xxh3 hash of the bytes written.
    pub output_hash: Option<u64>,
    /// For file-backed mmaps, the mapped file.
    pub file: Option<Box<MappedFile>>,
    /// Set when weft does not know this syscall's effects.
    pub unsupported: bool,
    /// What the call does to the world outside the process (seed 003
    /// §2.2.3), from `nr` and `args`: an irrevocable one closes an epoch
    /// ([`crate::epochs`]).
    pub class: CallClass,
    /// For a seccomp filter the program installed: the filter, which a
    /// replay runs at each syscall entry of the threads it applies to
    /// ([`crate::seccomp`]).
    pub seccomp: Option<Box<crate::seccomp::Filter>>,
    /// For a call that moved bytes between descriptors in the kernel
    /// (copy_file_range, sendfile, splice, tee) onto the recording's
    /// standard output or error: those bytes, as a slice of the trace's
    /// copy of their source file, which a replay prints as the recording
    /// did (version 14). `None` for every other call, and when the source
    /// was no regular file (a pipe's bytes are gone once moved).
    pub sent: Option<Contents>,
}

/// A range of tracee memory and its contents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemWrite {
    /// Start address in the tracee.
    pub addr: u64,
    /// The bytes, or where they are.
    pub data: Contents,
}

/// What a syscall wrote into tracee memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Contents {
    /// The bytes themselves, in the log.
    // serde_bytes: one copy instead of a call per byte; the encoding is
    // the same (a length, then the bytes).
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Bytes a large read took from a regular file: they stay in the
    /// trace's hard link to that file, not in the log, which spares the
    /// recorder compressing and writing them. The hash tells a replay
    /// whether the file changed since (a hard link shares its contents).
    File(FileSlice),
}

/// A byte range of a file hard-linked into the trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileSlice {
    /// The file and its link under `files/`.
    pub file: MappedFile,
    /// Where the range starts in the file (bytes).
    pub offset: u64,
    /// Its length (bytes).
    pub len: u64,
    /// xxh3 of the bytes the program read.
    pub hash: u64,
}

impl Contents {
    /// The number of bytes.
    pub fn len(&self) -> usize {
        match self {
            Contents::Bytes(b) => b.len(),
            Contents::File(f) => f.len as usize,
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A delivered signal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Signal {
    /// The signal number.
    pub signo: i32,
    /// `si_code` from the siginfo.
    pub code: i32,
    /// The fault address (`si_addr`) for faults, else 0.
    pub addr: u64,
    /// The raw 128-byte siginfo_t.
    #[serde(with = "serde_bytes")]
    pub siginfo: Vec<u8>,
    /// True when the kernel raised it for the instruction at the label
    /// (a fault), false when it was sent (kill, tgkill, timers).
    pub synchronous: bool,
    /// The syscall the signal interrupted, when it arrived while the thread
    /// was blocked in one (the label is then that syscall's).
    pub interrupted: Option<Interrupted>,
    /// For an asynchronous signal that hit user code (not a fault, not in
    /// a syscall): the thread's state where it hit, which lets a replay
    /// find that instruction again without performance counters.
    pub state: Option<HitState>,
}

/// What a thread looked like at the instruction an asynchronous signal
/// hit: the state a replay matches at each execution of the label to find
/// the same moment (the way a debugger without instruction counters
/// recognises a loop iteration: by its registers and stack).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HitState {
    /// The general registers at the signal-delivery stop, in
    /// `user_regs_struct` order ([`crate::tracee::regs_words`]).
    pub regs: Vec<u64>,
    /// The [`STACK_LEN`] bytes at rsp (the current stack frame, where a
    /// loop counter kept in memory lives), kept whole rather than hashed
    /// so that a replay that cannot find the state can say which words
    /// differ.
    #[serde(with = "serde_bytes")]
    pub stack: Vec<u8>,
}

/// How many bytes at rsp [`HitState::stack`] holds.
pub const STACK_LEN: usize = 512;

/// A syscall a signal interrupted: the kernel left one of its internal
/// restart codes in rax, and on delivery either restarts the call or makes
/// it return EINTR, by the handler's SA_RESTART flag (signal(7),
/// "Interruption of system calls and library functions by signal handlers").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Interrupted {
    /// The syscall number (`orig_rax` at the delivery stop).
    pub nr: i64,
    /// `rax` at the delivery stop: -ERESTARTSYS (-512), -ERESTARTNOINTR
    /// (-513), -ERESTARTNOHAND (-514) or -ERESTART_RESTARTBLOCK (-516).
    pub result: i64,
    /// What the call wrote before it was interrupted (a sleep's time left),
    /// in [`crate::syscalls::out_buffers`] order.
    pub writes: Vec<MemWrite>,
}

impl Interrupted {
    /// The syscall a thread at a signal-delivery stop, with these two
    /// registers, was blocked in, if any: `orig_rax` holds a syscall number
    /// and `rax` a restart code (kernel-internal, include/linux/errno.h).
    /// `writes` is what the call wrote before.
    pub fn at(orig_rax: u64, rax: u64, writes: Vec<MemWrite>) -> Option<Self> {
        let (nr, result) = (orig_rax as i64, rax as i64);
        (nr >= 0 && crate::syscalls::RESTART_CODES.contains(&result)).then_some(Self { nr, result, writes })
    }
}

/// How the program ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum End {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Killed {
        /// The fatal signal.
        signo: i32,
        /// The thread that received it.
        tid: Tid,
        /// The pc at delivery.
        pc: u64,
        /// The fault address, or 0.
        addr: u64,
        /// The general registers at delivery, in `user_regs_struct` order.
        regs: Vec<u64>,
    },
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Exited(code) => write!(f, "exited with status {code}"),
            End::Killed { signo, tid, pc, addr, .. } => {
                write!(f, "killed by {} in thread {tid}", signal_name(*signo))?;
                // SIGKILL has no delivery stop, hence no pc; only faults have an address.
                if *pc != 0 {
                    write!(f, " at pc {pc:#x}")?;
                }
                if *addr != 0 {
                    write!(f, " (fault address {addr:#x})")?;
                }
                Ok(())
            }
        }
    }
}

/// The conventional name of signal `signo` ("SIGSEGV"); a real-time
/// signal is named as gdb names it ("SIG33").
pub fn signal_name(signo: i32) -> String {
    match nix::sys::signal::Signal::try_from(signo) {
        Ok(s) => s.as_str().to_string(),
        Err(_) if (32..=64).contains(&signo) => format!("SIG{signo}"),
        Err(_) => format!("signal {signo}"),
    }
}

/// Event `index` as one line of `weft dump` (and of the gdb server's
/// `monitor events`): `#INDEX  tid T @LABEL what`.
pub fn dump_line(index: usize, e: &Event) -> String {
    format!("#{index:<6} {e}")
}

impl std::fmt::Display for Event {
    /// `tid T @LABEL what`, as `weft dump` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tid {:<7} @{:#014x}  ", self.tid, self.label)?;
        match &self.kind {
            EventKind::Syscall(s) => write!(f, "{s}"),
            EventKind::Spawn { child, flags } if is_new_process(*flags) => write!(f, "fork process {child} (flags {flags:#x})"),
            EventKind::Spawn { child, flags } => write!(f, "spawn thread {child} (flags {flags:#x})"),
            EventKind::Exec(x) => {
                let argv: Vec<_> = x.argv.iter().map(|a| String::from_utf8_lossy(a)).collect();
                let exe = x.files.first().map(|f| String::from_utf8_lossy(&f.path)).unwrap_or_default();
                write!(f, "exec {exe} {argv:?}")
            }
            EventKind::Signal(s) => {
                write!(f, "signal {} code {} addr {:#x}", signal_name(s.signo), s.code, s.addr)?;
                match &s.interrupted {
                    _ if s.synchronous => write!(f, " (fault)"),
                    Some(i) => write!(f, " (interrupted {} = {})", crate::syscalls::name(i.nr), i.result),
                    None => write!(f, " (asynchronous)"),
                }
            }
            EventKind::Rdtsc { tsc, aux: Some(a), .. } => write!(f, "rdtscp = {tsc} aux {a}"),
            EventKind::Rdtsc { tsc, aux: None, .. } => write!(f, "rdtsc = {tsc}"),
            EventKind::Sync(s) if s.op == SyncOp::FutexWaitStart => write!(f, "sync {:?} {:#x} expects {}", s.op, s.var, s.result),
            EventKind::Sync(s) if s.op == SyncOp::SyscallWait => write!(f, "sync {:?} {}", s.op, crate::syscalls::name(s.var as i64)),
            EventKind::Sync(s) => write!(f, "sync {:?} {:#x} = {}", s.op, s.var, s.result),
            EventKind::End(end) => write!(f, "end: {end}"),
        }
    }
}

impl std::fmt::Display for Syscall {
    /// `name(args) = result` and what was logged with it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args: Vec<String> = self.args.iter().map(|a| format!("{a:#x}")).collect();
        write!(f, "{}({}) = {}  [{}]", crate::syscalls::name(self.nr), args.join(", "), self.result, self.class)?;
        if let Some(p) = &self.path {
            write!(f, "  path {:?}", String::from_utf8_lossy(p))?;
        }
        let n: usize = self.writes.iter().map(|w| w.data.len()).sum();
        if n > 0 {
            write!(f, "  [{n} bytes in]")?;
        }
        for w in &self.writes {
            if let Contents::File(slice) = &w.data {
                write!(f, "  [from {} at {}]", String::from_utf8_lossy(&slice.file.path), slice.offset)?;
            }
        }
        if let Some(h) = self.output_hash {
            write!(f, "  [out hash {h:016x}]")?;
        }
        if let Some(Contents::File(slice)) = &self.sent {
            write!(f, "  [sent {} bytes of {} at {}]", slice.len, String::from_utf8_lossy(&slice.file.path), slice.offset)?;
        }
        if let Some(m) = &self.file {
            write!(f, "  [maps {}]", String::from_utf8_lossy(&m.path))?;
        }
        if self.unsupported {
            write!(f, "  [UNSUPPORTED: result only]")?;
        }
        Ok(())
    }
}

impl Syscall {
    /// A syscall record with no path, buffers, hash or file, of the
    /// call's class ([`call_class`]). Every record is made here, so that
    /// every one has its class.
    pub fn bare(nr: i64, args: [u64; 6], result: i64) -> Self {
        let class = call_class(nr, &args);
        Syscall { nr, args, result, path: None, writes: vec![], output_hash: None, file: None, unsupported: false, class, seccomp: None, sent: None }
    }
}
