//! The multi-core recorder (seed 000 §3.1): runs the program under ptrace
//! with every thread free on every core, and logs in one global order the
//! events a replay needs: logged syscalls (caught by the seccomp filter, so
//! all other syscalls run at full speed), thread spawns and exits, signals,
//! rdtsc, and the end.
//!
//! The global order is the order in which the tracer observes events. An
//! input syscall is logged when it completes; a spawn is logged at the
//! PTRACE_EVENT_CLONE (FORK, VFORK) stop, before the new thread may run, so
//! that every thread's first event follows its spawn.
//!
//! Whole process trees are recorded (DESIGN.md, "Process trees"): every
//! fork, vfork and non-thread clone is followed, each process has its own
//! memory, and each successful execve is an exec event with the new
//! image's files and AT_RANDOM. The recording ends when the last process
//! of the tree has; its end event is the first process's status.

use crate::cpu::Cpu;
use crate::inprocess::{InProcess, Pending};
use crate::event::{self, Contents, End, Event, EventKind, Exec, FileSlice, HitState, Interrupted, MemWrite, Meta, Signal, Syscall, Tid};
use crate::mapping::{self, Source};
use crate::runtime_exit;
use crate::seccomp;
use crate::syscalls::{self, Class};
use crate::trace::TraceWriter;
use crate::tracee::{self, Launch, Memory, Regs};
use anyhow::{anyhow, bail, Context, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal as NixSignal;
use crate::wait::{self, Resume, StopWaiter, WaitStatus};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Reads from a regular file of at least this many bytes are logged as a
/// slice of the trace's hard link to the file rather than as bytes: the
/// recorder then neither compresses nor writes them (the bulk of a
/// compressor's input).
const FILE_SLICE_MIN: usize = 64 << 10;

/// What to record, and where.
pub struct RecordOptions {
    /// The program, resolved to a path.
    pub program: PathBuf,
    /// argv, including argv[0] as the user typed it.
    pub argv: Vec<OsString>,
    /// The new trace directory.
    pub trace_dir: PathBuf,
    /// Record until every process of the tree has exited. Otherwise the
    /// first process's end ends the recording: the processes left (a
    /// daemon, say) are killed, as `rr record` does without `-w`.
    pub wait_all: bool,
    /// Inject the in-process runtime ([`crate::runtime`]): buffered
    /// syscalls and the synchronization order are logged in the program
    /// itself. Off (`--no-inprocess`): every event is logged at a ptrace stop.
    pub inprocess: bool,
}

/// How a recording went.
#[derive(Debug)]
pub struct Recording {
    /// How the program ended.
    pub end: End,
    /// Number of events logged, the end included.
    pub events: u64,
}

/// The file an output syscall writes: its device and inode, or, when
/// /proc cannot say, its process and descriptor.
type Written = (u64, u64);

/// The file thread `pid` of process `tgid` writes through descriptor
/// `fd` (the inode behind /proc/PID/fd/FD: a pipe's, a terminal's, a
/// regular file's).
fn written(pid: Pid, tgid: Pid, fd: u64) -> Written {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(format!("/proc/{pid}/fd/{fd}")) {
        Ok(m) => (m.dev(), m.ino()),
        Err(_) => (1 << 63 | tgid.as_raw() as u64, fd),
    }
}

/// A syscall seen at entry, waiting for its exit.
struct Entry {
    nr: i64,
    args: [u64; 6],
    label: u64,
    path: Option<Vec<u8>>,
    /// For an output syscall, the file it writes ([`written`]).
    output: Option<Written>,
    /// Its place in the global order, when taken at entry: a signal sent
    /// to the tree comes before its delivery, which another thread's stop
    /// may report first.
    seq: Option<u64>,
}

/// The last delivery of a signal, in case it turns out fatal.
struct Delivery {
    tid: Tid,
    pc: u64,
    addr: u64,
    regs: Vec<u64>,
}

/// The recorder's state for one session.
struct Recorder {
    trace: TraceWriter,
    /// The memory of each live process of the tree, by pid.
    mems: HashMap<Pid, Memory>,
    /// The process of each live thread (its thread-group id).
    tgids: HashMap<Pid, Pid>,
    /// The first process: its end is the recording's.
    root: Pid,
    /// [`RecordOptions::wait_all`].
    wait_all: bool,
    /// Threads of the program and the syscall each is in, if any.
    threads: HashMap<Pid, Option<Entry>>,
    /// New threads whose spawn is logged but whose first stop is not seen.
    spawned: HashSet<Pid>,
    /// New threads stopped before their spawn was logged: held until it is.
    early: HashSet<Pid>,
    /// The last delivery of each signal, by process and signal number.
    deliveries: HashMap<(Pid, i32), Delivery>,
    /// Output syscalls in flight, by the file they write ([`written`]): at
    /// most one per file, so that the log orders writes to one file as the
    /// kernel performed them, from the threads of one process and from
    /// several processes alike (a child that flushes the stdout buffer it
    /// inherited while its parent prints).
    writing: HashMap<Written, Pid>,
    /// Output syscalls held at entry until their file is free, oldest first.
    held: Vec<(Written, Pid)>,
    warned: HashSet<i64>,
    /// Set-ID programs already warned about ([`Recorder::warn_setid`]).
    warned_paths: HashSet<PathBuf>,
    events: u64,
    end: Option<End>,
    /// What a syscall a signal interrupted wrote, by thread, until the
    /// signal's delivery stop logs it.
    interrupted: HashMap<Pid, Vec<MemWrite>>,
    /// The syscall a signal interrupted with ERESTART_RESTARTBLOCK, by
    /// thread: the kernel resumes it through restart_syscall, which is
    /// logged as that call (its out-buffers are that call's).
    restart_blocks: HashMap<Pid, i64>,
    /// The in-process runtime's buffers and the global order, when on.
    inprocess: Option<InProcess>,
    /// Without the runtime: asynchronous signals whose delivery stop came
    /// while another thread was inside a kill-class syscall, which may
    /// have sent them, by that thread; each target waits at its stop
    /// until the kill is logged ([`Recorder::hold_after_kill`]).
    after_kill: HashMap<Pid, Vec<(Pid, i32)>>,
    /// Processes whose exit_group is logged, until their leader is reaped.
    exiting: HashSet<Pid>,
}

/// Reads what the trace's header needs from the program `pid`, stopped at
/// its exec (its memory, auxv, AT_RANDOM bytes, mapped files), copies its
/// files and writes the header with environment `env`. Returns the
/// program's memory. Errors: /proc or ptrace refused, a copy failed.
fn start(opts: &RecordOptions, pid: Pid, env: Vec<Vec<u8>>, trace: &mut TraceWriter) -> Result<Memory> {
    let mem = Memory::open(pid)?;
    let regs = ptrace::getregs(pid)?;
    let random_addr = tracee::patch_auxv(&mem, regs.rsp)?;
    let at_random: [u8; 16] = mem.read(random_addr, 16)?.try_into().map_err(|_| anyhow!("AT_RANDOM"))?;
    let exe = std::fs::canonicalize(&opts.program)?;
    let mut exec_files = vec![trace.copy_file(&exe)?];
    for path in tracee::mapped_files(pid)? {
        if Path::new(&path) != exe {
            exec_files.push(trace.copy_file(Path::new(&path))?);
        }
    }
    let meta = Meta {
        argv: opts.argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
        env,
        cwd: std::env::current_dir()?.into_os_string().into_vec(),
        exec_path: opts.program.as_os_str().as_bytes().to_vec(),
        exe: exe.into_os_string().into_vec(),
        at_random,
        pid: pid.as_raw(),
        exec_files,
        cpu: Cpu::current(),
    };
    trace.write_meta(&meta)?;
    Ok(mem)
}

/// Records the program into `opts.trace_dir`. Errors when the program cannot
/// be started or the trace cannot be written; the program's own failures
/// are part of the recording ([`Recording::end`]). Sets the calling
/// process's SIGINT disposition to SIG_IGN, for good, so that ^C reaches
/// only the program (processes it starts later inherit that).
pub fn record(opts: &RecordOptions) -> Result<Recording> {
    let cstr = |b: &[u8]| CString::new(b).context("argument contains a NUL byte");
    let inprocess = if opts.inprocess { Some(InProcess::new()?) } else { None };
    let preload = inprocess.as_ref().map(InProcess::library).transpose()?;
    let env: Vec<Vec<u8>> = crate::preload::environment(std::env::vars_os(), preload.as_deref(), &opts.program);
    let launch = Launch {
        exe: cstr(opts.program.as_os_str().as_bytes())?,
        argv: opts.argv.iter().map(|a| cstr(a.as_bytes())).collect::<Result<_>>()?,
        env: env.iter().map(|e| cstr(e)).collect::<Result<_>>()?,
        cwd: None,
        filters: vec![crate::filter::recording()?],
        one_cpu: false,
        null_stdin: false,
    };
    let mut trace = TraceWriter::create(&opts.trace_dir)?;
    let pid = match tracee::launch(&launch) {
        Ok(pid) => pid,
        Err(e) => {
            trace.discard();
            return Err(e);
        }
    };
    // A terminal's ^C goes to the whole foreground process group: the
    // program gets it (and it is logged) while weft records on until the
    // program ends, as rr does. The program was forked already, so it keeps
    // its own disposition.
    // SAFETY: SIG_IGN runs no handler code.
    unsafe { nix::sys::signal::signal(NixSignal::SIGINT, nix::sys::signal::SigHandler::SigIgn) }?;
    // A failure before the trace has its header (too few descriptors left
    // to open the program's memory) leaves no trace that is none.
    let mem = match start(opts, pid, env, &mut trace) {
        Ok(mem) => mem,
        Err(e) => {
            trace.discard();
            return Err(e);
        }
    };
    let mut rec = Recorder {
        trace,
        mems: HashMap::from([(pid, mem)]),
        tgids: HashMap::from([(pid, pid)]),
        root: pid,
        wait_all: opts.wait_all,
        threads: HashMap::from([(pid, None)]),
        spawned: HashSet::new(),
        early: HashSet::new(),
        deliveries: HashMap::new(),
        writing: HashMap::new(),
        held: Vec::new(),
        warned: HashSet::new(),
        warned_paths: HashSet::new(),
        events: 0,
        end: None,
        interrupted: HashMap::new(),
        restart_blocks: HashMap::new(),
        inprocess,
        after_kill: HashMap::new(),
        exiting: HashSet::new(),
    };
    ptrace::cont(pid, None)?;
    rec.run()?;
    let end = rec.end.take().ok_or_else(|| anyhow!("the program vanished without an exit status"))?;
    if let Some(ip) = rec.inprocess.as_mut() {
        ip.warn_if_unused();
    }
    rec.log(0, 0, EventKind::End(end.clone()))?;
    rec.write_ready(true)?;
    rec.trace.finish()?;
    Ok(Recording { end, events: rec.events })
}

impl Recorder {
    /// Handles the tracees' stops until the first process has ended and
    /// every tracee is reaped. Not until waitpid finds no child at all:
    /// weft may have children it does not trace, which its own stdout or
    /// stderr may keep waiting (`weft record prog 2> >(tee log)`: bash
    /// forks the `tee` and then execs weft in the same process, which
    /// makes the `tee` weft's child, and it waits for the end of weft's
    /// stderr).
    fn run(&mut self) -> Result<()> {
        let mut waiter = StopWaiter::default();
        // Fewer tracee threads than CPUs (stopped, blocked or running)
        // leave one for the recorder to poll on.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        while self.end.is_none() || !self.threads.is_empty() {
            let status = match waiter.wait(self.threads.len() < cpus) {
                Ok(s) => s,
                Err(Errno::ECHILD) => return Ok(()),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            self.handle(status)?;
        }
        Ok(())
    }

    fn handle(&mut self, status: WaitStatus) -> Result<()> {
        match status {
            WaitStatus::PtraceEvent(pid, _, libc::PTRACE_EVENT_SECCOMP) => self.on_seccomp(pid),
            WaitStatus::PtraceSyscall(pid) => self.on_syscall_exit(pid),
            WaitStatus::PtraceEvent(pid, _, libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK) => {
                self.on_spawn(pid)
            }
            WaitStatus::PtraceEvent(pid, _, libc::PTRACE_EVENT_EXEC) => self.on_exec(pid),
            WaitStatus::PtraceEvent(pid, _, _) => resume(pid, None),
            WaitStatus::Stopped(pid, sig) => self.on_signal(pid, sig),
            WaitStatus::Exited(pid, code) => {
                self.gone(pid);
                if pid == self.root {
                    self.end = Some(End::Exited(code));
                    self.end_tree();
                }
                Ok(())
            }
            WaitStatus::Signaled(pid, signo, _) => {
                self.gone(pid);
                if pid == self.root {
                    let d = self.deliveries.remove(&(pid, signo));
                    self.end = Some(End::Killed {
                        signo,
                        tid: d.as_ref().map_or(pid.as_raw(), |d| d.tid),
                        pc: d.as_ref().map_or(0, |d| d.pc),
                        addr: d.as_ref().map_or(0, |d| d.addr),
                        regs: d.map(|d| d.regs).unwrap_or_default(),
                    });
                    self.end_tree();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The first process has ended: unless told to wait for the whole
    /// tree, the processes left are killed (their last events are logged
    /// already), and the recording ends once they are reaped.
    fn end_tree(&mut self) {
        if !self.wait_all {
            for &pid in self.mems.keys() {
                let _ = nix::sys::signal::kill(pid, NixSignal::SIGKILL);
            }
        }
    }

    /// Thread `pid` is gone; a process's leader takes its memory along.
    fn gone(&mut self, pid: Pid) {
        if let Some(ip) = self.inprocess.as_mut() {
            ip.thread_gone(pid.as_raw());
        }
        if let Err(e) = self.release_after_kill(pid) {
            eprintln!("weft: error: a signal held for thread {pid}'s kill: {e}");
        }
        self.threads.remove(&pid);
        self.exiting.remove(&pid);
        self.tgids.remove(&pid);
        self.mems.remove(&pid);
    }

    /// The process (thread-group id) of thread `pid`.
    fn tgid(&self, pid: Pid) -> Pid {
        self.tgids.get(&pid).copied().unwrap_or(pid)
    }

    /// The memory of thread `pid`'s process.
    fn mem(&self, pid: Pid) -> Result<&Memory> {
        self.mems.get(&self.tgid(pid)).ok_or_else(|| anyhow!("thread {pid} belongs to no recorded process"))
    }

    fn on_seccomp(&mut self, pid: Pid) -> Result<()> {
        let Ok(regs) = ptrace::getregs(pid) else { return Ok(()) };
        let mut nr = regs.orig_rax as i64;
        if nr == libc::SYS_restart_syscall {
            // The call it resumes, with the same arguments (the kernel
            // only rewound the pc and set rax).
            nr = self.restart_blocks.remove(&pid).unwrap_or(nr);
        }
        let args = tracee::syscall_args(&regs);
        let label = regs.rip;
        if nr == crate::runtime::NR_CTL {
            return self.on_runtime_request(pid, regs);
        }
        if nr == libc::SYS_futex && self.inprocess.as_ref().is_some_and(|ip| ip.quiet(pid.as_raw())) {
            return resume(pid, None);
        }
        let off = crate::runtime::turns_off(nr, &args) && self.inprocess.as_ref().is_some_and(|ip| ip.is_on(self.tgid(pid)));
        if !off && syscalls::classify(nr, &args) == Class::Execute {
            // A change of the runtime's memory by the runtime's own
            // set-up, or after it went off: not logged.
            return resume(pid, None);
        }
        match syscalls::class(nr) {
            // A thread's exit that reaches us after its process's
            // exit_group was entered before that took effect, and did
            // nothing: logged, it would follow the exit_group, which a
            // replay cannot reproduce (the exit_group kills the thread).
            Class::ThreadExit if self.exiting.contains(&self.tgid(pid)) => resume(pid, None),
            class @ (Class::ThreadExit | Class::ExitGroup) => {
                let syscall = EventKind::Syscall(Syscall::bare(nr, args, 0));
                let tgid = self.tgid(pid);
                match (class, self.inprocess.as_mut()) {
                    (Class::ExitGroup, Some(ip)) => {
                        let fellows: Vec<Tid> = self.tgids.iter().filter(|&(t, g)| *g == tgid && *t != pid).map(|(t, _)| t.as_raw()).collect();
                        ip.log_process_end(Event { tid: pid.as_raw(), label, kind: syscall }, &fellows);
                        self.write_ready(false)?;
                    }
                    _ => self.log(pid.as_raw(), label, syscall)?,
                }
                if class == Class::ExitGroup {
                    self.exiting.insert(tgid);
                }
                self.trace.flush()?;
                resume(pid, None)
            }
            class => {
                let path = syscalls::path_arg(nr).and_then(|i| syscalls::read_path(args[i], |a| self.mem(pid)?.read_cstr(a)));
                let seq = match (class, self.inprocess.as_ref()) {
                    (Class::Kill, Some(ip)) => Some(ip.reserve()),
                    _ if off => Some(self.turn_runtime_off(pid, nr, &args)?),
                    _ => None,
                };
                if !off && syscalls::may_block(nr, &args) {
                    self.log_wait(pid, nr, label)?;
                }
                let output = (class == Class::Output).then(|| written(pid, self.tgid(pid), args[0]));
                self.threads.insert(pid, Some(Entry { nr, args, label, path, seq, output }));
                if let Some(file) = output {
                    if self.writing.contains_key(&file) {
                        self.held.push((file, pid));
                        return Ok(());
                    }
                    self.writing.insert(file, pid);
                }
                ptrace::syscall(pid, None).or_else(ignore_esrch)
            }
        }
    }

    /// Thread `pid` is at syscall `nr`, which turns its process's runtime
    /// off ([`crate::runtime::turns_off`]): the call's place in the global
    /// order, taken before the runtime's `disabled` flag is written, so
    /// that every call another thread makes through ptrace because it saw
    /// the flag comes after it in the log. Errors: writing the flag.
    fn turn_runtime_off(&mut self, pid: Pid, nr: i64, args: &[u64; 6]) -> Result<u64> {
        let tgid = self.tgid(pid);
        let (Some(ip), Some(mem)) = (self.inprocess.as_mut(), self.mems.get(&tgid)) else { bail!("no in-process recording") };
        let seq = ip.reserve();
        ip.turn_off(tgid, mem, crate::runtime::off_reason(nr, args).unwrap_or_default())?;
        Ok(seq)
    }

    /// An output syscall to `file` finished: let the next held one go.
    fn release_file(&mut self, file: Written) -> Result<()> {
        self.writing.remove(&file);
        if let Some(k) = self.held.iter().position(|&(f, _)| f == file) {
            let (_, pid) = self.held.remove(k);
            self.writing.insert(file, pid);
            ptrace::syscall(pid, None).or_else(ignore_esrch)?;
        }
        Ok(())
    }

    fn on_syscall_exit(&mut self, pid: Pid) -> Result<()> {
        let Some(entry) = self.threads.get_mut(&pid).and_then(Option::take) else {
            return resume(pid, None);
        };
        if let Some(file) = entry.output {
            self.release_file(file)?;
        }
        let Ok(regs) = ptrace::getregs(pid) else { return Ok(()) };
        let result = regs.rax as i64;
        // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK:
        // a signal interrupted the call and the kernel will restart it (a new
        // seccomp stop) or turn it into EINTR: what it wrote so far goes
        // with the signal's event.
        if syscalls::RESTART_CODES.contains(&result) {
            let writes = self.complete(pid, &entry, result)?.writes;
            self.interrupted.insert(pid, writes);
            if result == syscalls::ERESTART_RESTARTBLOCK {
                self.restart_blocks.insert(pid, entry.nr);
            }
            return resume(pid, None);
        }
        let syscall = self.complete(pid, &entry, result)?;
        match (entry.seq, self.inprocess.as_mut()) {
            (Some(seq), Some(ip)) => {
                ip.log_at(seq, Event { tid: pid.as_raw(), label: entry.label, kind: EventKind::Syscall(syscall) });
                self.write_ready(false)?;
            }
            _ => self.log_syscall(pid, entry.label, syscall)?,
        }
        self.release_after_kill(pid)?;
        resume(pid, None)
    }

    /// Logs the start of thread `pid`'s syscall `nr` at `label`, which may
    /// block (`SyncOp::SyscallWait`), when the process records with the
    /// runtime: the log then orders what the thread did before the call
    /// with the other threads' events, not at the call's return, which
    /// may come much later. Logged at once, so that a call that blocks
    /// for minutes holds no place of the order back.
    fn log_wait(&mut self, pid: Pid, nr: i64, label: u64) -> Result<()> {
        if !self.inprocess.as_ref().is_some_and(|ip| ip.is_on(self.tgid(pid))) {
            return Ok(());
        }
        let wait = event::Sync { op: event::SyncOp::SyscallWait, var: nr as u64, result: 0 };
        self.log(pid.as_raw(), label, EventKind::Sync(wait))
    }

    /// Whether asynchronous signal `signo`, at thread `pid`'s delivery
    /// stop, is held there until a kill in flight is logged: without the
    /// runtime, a kill is logged at its exit, and the target's stop can be
    /// reported first, which would log the signal before what sent it (a
    /// replay then hunts for the signal's hit before it can be sent). The
    /// runtime's global order places a kill at its entry instead.
    fn hold_after_kill(&mut self, pid: Pid, signo: i32) -> bool {
        if self.inprocess.is_some() {
            return false;
        }
        let killing = |(&t, e): (&Pid, &Option<Entry>)| t != pid && e.as_ref().is_some_and(|e| syscalls::class(e.nr) == Class::Kill);
        let Some(sender) = self.threads.iter().find(|&entry| killing(entry)).map(|(&t, _)| t) else { return false };
        self.after_kill.entry(sender).or_default().push((pid, signo));
        true
    }

    /// Thread `sender`'s kill is logged, or it is gone: the deliveries
    /// held for it go on.
    fn release_after_kill(&mut self, sender: Pid) -> Result<()> {
        for (pid, signo) in self.after_kill.remove(&sender).unwrap_or_default() {
            self.on_signal(pid, signo)?;
        }
        Ok(())
    }

    /// Builds the log record of a completed syscall.
    fn complete(&mut self, pid: Pid, e: &Entry, result: i64) -> Result<Syscall> {
        let mut s = Syscall::bare(e.nr, e.args, result);
        s.path = e.path.clone();
        if e.nr == libc::SYS_fchdir && result == 0 {
            // Where it went: a replay's descriptor is emulated, so it
            // changes to this directory by path (emulate.rs, change_dir).
            s.path = std::fs::read_link(format!("/proc/{pid}/cwd")).ok().map(|p| p.into_os_string().into_vec());
        }
        let mem = self.mem(pid)?;
        let filter = seccomp::installed(e.nr, &e.args, result, mem);
        let mut read_u64 = |a: u64| mem.read_u64(a).ok();
        match syscalls::classify(e.nr, &e.args) {
            Class::Input => {
                let ranges = syscalls::out_buffers(e.nr, &e.args, result, &mut read_u64);
                for (addr, len) in ranges {
                    // An unreadable range is kept, empty, to keep the order.
                    let bytes = self.mem(pid)?.read(addr, len as usize).unwrap_or_default();
                    let data = match self.file_slice(pid, e, &bytes) {
                        Some(slice) => Contents::File(slice),
                        None => Contents::Bytes(bytes),
                    };
                    s.writes.push(MemWrite { addr, data });
                }
            }
            Class::Output => {
                let ranges = syscalls::output_ranges(e.nr, &e.args, result, &mut read_u64);
                s.output_hash = Some(mem.hash_ranges(&ranges));
            }
            Class::MmapFile if result >= 0 => self.mapped(pid, &mut s)?,
            Class::Remap if result >= 0 => {
                if let Some(bytes) = mapping::grown(pid, self.mem(pid)?, &e.args, result as u64) {
                    s.writes.push(MemWrite { addr: result as u64 + e.args[1], data: Contents::Bytes(bytes) });
                }
            }
            // A filter of the program's, which a replay runs.
            Class::Unsupported if filter.as_ref().is_some_and(seccomp::Filter::replayed) => {}
            // A call that failed changed nothing: its result is all there
            // is to replay (node's pkey_alloc, on a CPU without protection
            // keys, fails with EINVAL).
            Class::Unsupported if (-4095..0).contains(&result) => {}
            Class::Unsupported => {
                s.unsupported = true;
                let msg = format!(
                    "syscall {} is not supported; logged with its result only, a replay that depends on its effects may diverge",
                    syscalls::call_name(e.nr, &e.args)
                );
                self.warn_once(e.nr, &msg);
            }
            _ => {}
        }
        s.seccomp = filter.map(Box::new);
        if result > 0 {
            s.sent = self.sent(pid, e, result as u64);
        }
        Ok(s)
    }

    /// For a call that moved `len` bytes between descriptors in the kernel
    /// onto weft's own standard output or error (which the program
    /// inherited): the slice of the trace's copy of the source file that
    /// holds them ([`Syscall::sent`]). `None` when the destination is
    /// anything else, or the source is no regular file, which is warned
    /// about once: a replay cannot print those bytes.
    fn sent(&mut self, pid: Pid, e: &Entry, len: u64) -> Option<Contents> {
        let (src, dst, offset_at) = syscalls::sent_fds(e.nr, &e.args)?;
        let node = |path: String| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let to = node(format!("/proc/{pid}/fd/{dst}"))?;
        if ![1, 2].iter().any(|own| node(format!("/proc/self/fd/{own}")) == Some(to)) {
            return None;
        }
        let slice = self.source_slice(pid, src, offset_at, len);
        if slice.is_none() {
            let msg = format!(
                "{} sent {len} bytes to the program's stdout or stderr from a descriptor that is no regular file; the trace does not hold them, and a replay will not print them",
                syscalls::name(e.nr)
            );
            self.warn_once(e.nr, &msg);
        }
        slice.map(Contents::File)
    }

    /// The `len` bytes a call just moved from descriptor `fd` of thread
    /// `pid`, a regular file, as a slice of the trace's copy of it: they
    /// start `len` bytes before the offset at `offset_at`, which the call
    /// advanced, or before the file position when `offset_at` is 0.
    fn source_slice(&mut self, pid: Pid, fd: i32, offset_at: u64, len: u64) -> Option<FileSlice> {
        let (path, named) = file_behind(pid, fd)?;
        let end = match offset_at {
            0 => file_position(pid, fd)?,
            at => self.mem(pid).ok()?.read_u64(at).ok()?,
        };
        let offset = end.checked_sub(len)?;
        let hash = hash_range(&path, offset, len)?;
        let file = self.trace.link_file(&path, &named).ok().flatten()?;
        Some(FileSlice { file, offset, len, hash })
    }

    /// For a large read or pread64 from a regular file: the slice of the
    /// trace's copy of it ([`TraceWriter::link_file`]) holding `bytes`,
    /// which the program just read. `None` otherwise (the bytes go into the
    /// log): small reads, pipes and sockets, deleted or renamed files, the
    /// user's own files on another filesystem.
    fn file_slice(&mut self, pid: Pid, e: &Entry, bytes: &[u8]) -> Option<FileSlice> {
        if bytes.len() < FILE_SLICE_MIN || !matches!(e.nr, libc::SYS_read | libc::SYS_pread64) {
            return None;
        }
        let (path, named) = file_behind(pid, e.args[0] as i32)?;
        let offset = match e.nr {
            libc::SYS_pread64 => e.args[3],
            _ => file_position(pid, e.args[0] as i32)?.checked_sub(bytes.len() as u64)?,
        };
        let file = self.trace.link_file(&path, &named).ok().flatten()?;
        Some(FileSlice { file, offset, len: bytes.len() as u64, hash: xxhash_rust::xxh3::xxh3_64(bytes) })
    }

    /// Logs the contents of the mapping `s`, a successful mmap by thread
    /// `pid`, as [`mapping::source`] says: a copy of the file in the trace,
    /// or bytes at the mapping's start.
    fn mapped(&mut self, pid: Pid, s: &mut Syscall) -> Result<()> {
        let addr = s.result as u64;
        match mapping::source(pid, self.mem(pid)?, &s.args, addr)? {
            Source::File { from, name } => {
                let mut file = self.trace.copy_file(&from)?;
                file.path = name.into_os_string().into_vec();
                s.file = Some(Box::new(file));
            }
            Source::Bytes(bytes) => s.writes.push(MemWrite { addr, data: Contents::Bytes(bytes) }),
        }
        Ok(())
    }

    /// A PTRACE_EVENT_CLONE, FORK or VFORK stop: logs the spawn of a
    /// thread or a process, before the child may run.
    fn on_spawn(&mut self, pid: Pid) -> Result<()> {
        let child = Pid::from_raw(ptrace::getevent(pid)? as i32);
        let regs = ptrace::getregs(pid)?;
        let flags = tracee::clone_flags(self.mem(pid)?, &regs);
        self.log(pid.as_raw(), regs.rip, EventKind::Spawn { child: child.as_raw(), flags })?;
        if let Some(ip) = self.inprocess.as_mut() {
            let parent = self.tgids.get(&pid).copied().unwrap_or(pid);
            let mem = self.mems.get(&parent).ok_or_else(|| anyhow!("thread {pid} belongs to no recorded process"))?;
            ip.spawned(parent, child, flags, mem)?;
        }
        if event::is_new_process(flags) {
            self.mems.insert(child, Memory::open(child)?);
            self.tgids.insert(child, child);
        } else {
            self.tgids.insert(child, self.tgid(pid));
        }
        self.threads.insert(child, None);
        if self.early.remove(&child) {
            resume(child, None)?;
        } else {
            self.spawned.insert(child);
        }
        resume(pid, None)
    }

    /// A PTRACE_EVENT_EXEC stop: thread `pid` (the process's pid from now
    /// on) runs a new image. Hides its vDSO, copies its files, and logs the
    /// exec with its AT_RANDOM bytes.
    fn on_exec(&mut self, pid: Pid) -> Result<()> {
        let former = Pid::from_raw(ptrace::getevent(pid)? as i32);
        let label = self.threads.get_mut(&former).and_then(Option::take).map_or(0, |e| e.label);
        if former != pid {
            // A non-leader thread exec'd: it takes the leader's pid.
            self.gone(former);
            self.threads.insert(pid, None);
        }
        if let Some(ip) = self.inprocess.as_mut() {
            ip.exec(pid);
        }
        let mem = Memory::open(pid)?;
        let regs = ptrace::getregs(pid)?;
        let random = tracee::patch_auxv(&mem, regs.rsp)?;
        let at_random = mem.read(random, 16)?.try_into().map_err(|_| anyhow!("AT_RANDOM"))?;
        self.mems.insert(pid, mem);
        self.tgids.insert(pid, pid);
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
        self.warn_setid(&exe);
        let mut files = vec![self.trace.copy_file(&exe)?];
        for path in tracee::mapped_files(pid)? {
            if Path::new(&path) != exe {
                files.push(self.trace.copy_file(Path::new(&path))?);
            }
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv = cmdline.split(|&b| b == 0).map(<[u8]>::to_vec).collect::<Vec<_>>();
        let argv = argv[..argv.len().saturating_sub(1)].to_vec();
        self.log(former.as_raw(), label, EventKind::Exec(Exec { argv, files, at_random }))?;
        resume(pid, None)
    }

    fn on_signal(&mut self, pid: Pid, signo: i32) -> Result<()> {
        if signo == libc::SIGSTOP {
            // A new thread's or child process's first stop.
            if self.spawned.remove(&pid) {
                return resume(pid, None);
            }
            if !self.threads.contains_key(&pid) {
                self.early.insert(pid);
                return Ok(());
            }
        }
        let regs = ptrace::getregs(pid)?;
        if signo == libc::SIGSEGV {
            if let Some((len, is_rdtscp)) = tracee::rdtsc_at(self.mem(pid)?, regs.rip) {
                return self.emulate_rdtsc(pid, regs, len, is_rdtscp);
            }
        }
        // A group-stop (a stopping signal taking effect) has no siginfo
        // (ptrace(2), "Group-stop"): the thread is let go, and the stop
        // is not an event.
        let Ok(siginfo) = tracee::siginfo_bytes(pid) else { return resume(pid, None) };
        let code = i32::from_le_bytes(siginfo[8..12].try_into()?);
        let addr = u64::from_le_bytes(siginfo[16..24].try_into()?);
        let synchronous = code > 0
            && matches!(signo, libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGTRAP);
        if !synchronous && self.hold_after_kill(pid, signo) {
            return Ok(());
        }
        let addr = if synchronous { addr } else { 0 };
        let writes = self.interrupted.remove(&pid).unwrap_or_default();
        // A restart_syscall interrupted again is the call it resumes.
        let call = match regs.orig_rax as i64 {
            libc::SYS_restart_syscall => self.restart_blocks.get(&pid).map_or(regs.orig_rax, |&nr| nr as u64),
            _ => regs.orig_rax,
        };
        let mut interrupted = if synchronous { None } else { Interrupted::at(call, regs.rax, writes) };
        let asynchronous = !synchronous && interrupted.is_none();
        let tgid = self.tgid(pid);
        let regs = if asynchronous { self.step_into_account(pid, tgid, regs, &siginfo)? } else { regs };
        let mut label = regs.rip;
        if let (Some(x), Some(ip)) = (interrupted.as_mut(), self.inprocess.as_ref()) {
            if x.nr == libc::SYS_futex && ip.quiet(pid.as_raw()) {
                // It interrupted the real wait of a synchronization call,
                // which a replay does not make: it goes to the call's
                // marker there (weft_runtime.c, sync_marker).
                x.nr = crate::runtime::NR_SYNC;
                label = crate::runtime::BUFFERED_LABEL;
            }
        }
        let state = if synchronous || interrupted.is_some() { None } else { self.hit_state(pid, &regs)? };
        self.deliveries.insert(
            (self.tgid(pid), signo),
            Delivery { tid: pid.as_raw(), pc: regs.rip, addr, regs: tracee::regs_words(&regs) },
        );
        // In the runtime's code, which a replay does not run the same way:
        // delivered where the runtime call ends, or, when the thread was
        // still before the call (in the function's start), where it
        // starts: at the thread's next syscall, made again after the
        // handler (label SITE_BUFFERED).
        let in_runtime = asynchronous && self.inprocess.as_ref().is_some_and(|ip| ip.in_runtime(tgid, regs.rip));
        let state = if in_runtime { None } else { state };
        let label = match (in_runtime, self.inprocess.as_ref(), self.mems.get(&tgid)) {
            (true, Some(ip), Some(mem)) if ip.before_call(pid.as_raw(), regs.rip, mem) => crate::runtime::SITE_BUFFERED,
            (true, ..) => crate::runtime::BUFFERED_LABEL,
            _ => label,
        };
        let event = Event { tid: pid.as_raw(), label, kind: EventKind::Signal(Signal { signo, code, addr, siginfo, synchronous, interrupted, state }) };
        // A signal that hit the runtime after a call and before it took its
        // place comes after that call.
        match self.inprocess.as_mut() {
            Some(ip) if asynchronous && ip.returned_unplaced(pid.as_raw(), regs.rip, regs.rax as i64) => ip.place_after_call(event),
            _ => self.log(event.tid, event.label, event.kind)?,
        }
        self.trace.flush()?;
        resume(pid, Some(signo))
    }

    /// Moves the delivery of an asynchronous signal (its 128-byte
    /// `siginfo`) that hit thread `pid` of process `tgid` in the runtime's
    /// code while outside a runtime function's accounting (see
    /// [`runtime_exit`]): the thread's registers where it now stops, which
    /// carries the signal, with its siginfo. Errors: ptrace's.
    fn step_into_account(&self, pid: Pid, tgid: Pid, regs: Regs, siginfo: &[u8]) -> Result<Regs> {
        let Some(ip) = self.inprocess.as_ref().filter(|ip| ip.in_runtime(tgid, regs.rip)) else { return Ok(regs) };
        let Some(depth_at) = ip.depth_at(pid.as_raw()) else { return Ok(regs) };
        match runtime_exit::step_into_account(pid, tgid, &regs, depth_at, self.mem(pid)?, |pc| ip.in_runtime(tgid, pc))? {
            Some(moved) => {
                // The step's trap stop carries the signal from here on.
                tracee::set_siginfo_bytes(pid, siginfo)?;
                Ok(moved)
            }
            None => Ok(regs),
        }
    }

    /// Thread `pid`'s state at the delivery stop of an asynchronous signal
    /// that hit user code, with registers `regs`; `None` when the stack at
    /// rsp cannot be read.
    fn hit_state(&self, pid: Pid, regs: &Regs) -> Result<Option<HitState>> {
        let stack = self.mem(pid)?.read(regs.rsp, event::STACK_LEN).ok();
        Ok(stack.map(|stack| HitState { regs: tracee::regs_words(regs), stack }))
    }

    /// rdtsc/rdtscp faulted (PR_TSC_SIGSEGV): execute it here, give the
    /// tracee the result, step over the instruction, and log the value.
    fn emulate_rdtsc(&mut self, pid: Pid, mut regs: Regs, len: u8, is_rdtscp: bool) -> Result<()> {
        let mut aux = 0u32;
        // SAFETY: rdtsc/rdtscp are unprivileged for the tracer.
        let tsc = unsafe {
            if is_rdtscp {
                core::arch::x86_64::__rdtscp(&mut aux)
            } else {
                core::arch::x86_64::_rdtsc()
            }
        };
        let label = regs.rip;
        regs.rax = tsc & 0xffff_ffff;
        regs.rdx = tsc >> 32;
        if is_rdtscp {
            regs.rcx = aux as u64;
        }
        regs.rip += len as u64;
        ptrace::setregs(pid, regs)?;
        // Inside a synchronization call's real wait (an adaptive mutex's
        // spin reads the TSC), which a replay does not make: not logged.
        if !self.inprocess.as_ref().is_some_and(|ip| ip.quiet(pid.as_raw())) {
            let aux = is_rdtscp.then_some(aux);
            self.log(pid.as_raw(), label, EventKind::Rdtsc { tsc, aux, len })?;
        }
        resume(pid, None)
    }

    fn log_syscall(&mut self, pid: Pid, label: u64, s: Syscall) -> Result<()> {
        self.log(pid.as_raw(), label, EventKind::Syscall(s))
    }

    /// Logs an event seen at a ptrace stop: it takes the next number of
    /// the global order, and is written once every event before it is in
    /// (buffered records reach the recorder late: they are drained here).
    fn log(&mut self, tid: Tid, label: u64, kind: EventKind) -> Result<()> {
        let event = Event { tid, label, kind };
        match self.inprocess.as_mut() {
            Some(ip) => ip.log(event),
            None => {
                self.trace.write_event(event)?;
                self.events += 1;
                return Ok(());
            }
        }
        self.write_ready(false)
    }

    /// Writes the events whose turn has come (all of them, when `all`).
    fn write_ready(&mut self, all: bool) -> Result<()> {
        let Some(ip) = self.inprocess.as_mut() else { return Ok(()) };
        let entries = ip.ready(all);
        self.events += entries.len() as u64;
        self.trace.write_entries(entries.iter().map(Pending::logged))?;
        ip.recycle(entries);
        Ok(())
    }

    /// A request from the in-process runtime (a WEFT_NR_CTL syscall, which
    /// the filter traps): answered and skipped, never logged. Without the
    /// runtime on, it fails as the unknown syscall it is.
    fn on_runtime_request(&mut self, pid: Pid, mut regs: Regs) -> Result<()> {
        let tgid = self.tgid(pid);
        let answer = match (self.inprocess.as_mut(), self.mems.get(&tgid)) {
            (Some(ip), Some(mem)) => ip.request(pid, tgid, &regs, mem)?,
            _ => -libc::ENOSYS as i64,
        };
        regs.orig_rax = u64::MAX;
        regs.rax = answer as u64;
        ptrace::setregs(pid, regs).or_else(ignore_esrch)?;
        resume(pid, None)?;
        if let Some(ip) = self.inprocess.as_mut() {
            ip.flushed(pid.as_raw());
        }
        self.write_ready(false)
    }

    /// A set-user-ID or set-group-ID program runs without its privileges
    /// under weft: the tracee has no_new_privs (the seccomp filter needs
    /// it), so execve(2) ignores those bits, as under any tracer. Said
    /// once per program.
    fn warn_setid(&mut self, exe: &Path) {
        let Ok(meta) = std::fs::metadata(exe) else { return };
        let setid = meta.mode() & (libc::S_ISUID | libc::S_ISGID) != 0;
        // SAFETY: geteuid has no preconditions.
        if setid && meta.uid() != unsafe { libc::geteuid() } && self.warned_paths.insert(exe.to_path_buf()) {
            eprintln!("weft: warning: {} is set-user-ID or set-group-ID; it runs (and is recorded) without those privileges", exe.display());
        }
    }

    fn warn_once(&mut self, key: i64, msg: &str) {
        if self.warned.insert(key) {
            eprintln!("weft: warning: {msg}");
        }
    }
}

/// Resumes a stopped thread without syscall stops (the filter decides which
/// syscalls stop). A thread that died meanwhile is not an error.
fn resume(pid: Pid, sig: Option<i32>) -> Result<()> {
    wait::resume(Resume::Cont, pid, sig).or_else(ignore_esrch)
}

fn ignore_esrch(e: Errno) -> Result<()> {
    if e == Errno::ESRCH {
        Ok(())
    } else {
        Err(e.into())
    }
}

/// The path and metadata of the regular file descriptor `fd` of thread
/// `pid` refers to, when that path still names it (not deleted or
/// renamed since it was opened).
fn file_behind(pid: Pid, fd: i32) -> Option<(std::path::PathBuf, std::fs::Metadata)> {
    let fd = format!("/proc/{pid}/fd/{fd}");
    let opened = std::fs::metadata(&fd).ok().filter(|m| m.is_file())?;
    let path = std::fs::read_link(&fd).ok()?;
    let named = std::fs::metadata(&path).ok()?;
    ((named.dev(), named.ino()) == (opened.dev(), opened.ino())).then_some((path, named))
}

/// The bytes [`hash_range`] reads at a time.
const HASH_PIECE: usize = 1 << 16;

/// The xxh3-64 of `len` bytes of the file at `path` from `offset`,
/// read in pieces; `None` when the file holds fewer.
fn hash_range(path: &std::path::Path, offset: u64, len: u64) -> Option<u64> {
    use std::io::{Read, Seek};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(std::io::SeekFrom::Start(offset)).ok()?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; HASH_PIECE];
    let mut left = len;
    while left > 0 {
        let n = file.read(&mut buf[..left.min(HASH_PIECE as u64) as usize]).ok()?;
        if n == 0 {
            return None;
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Some(hasher.digest())
}

/// The file position of fd `fd` of thread `pid` (bytes), from
/// `/proc/PID/fdinfo/FD` (proc(5)).
fn file_position(pid: Pid, fd: i32) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    info.lines().find_map(|l| l.strip_prefix("pos:")).and_then(|p| p.trim().parse().ok())
}
