//! A replay session: re-executes a recorded program on one core, with
//! exactly one tracee thread running user code at any moment, and validates
//! it against the log (seed 000 §3.2, Fig. 8, Definition 1).
//!
//! Every tracee thread sits in a ptrace stop except the one the scheduler
//! resumes, and that one is resumed with PTRACE_SYSCALL, so it stops again
//! at its next syscall: no thread ever blocks in the kernel. Control moves
//! only at scheduling points: logged events (seed 000's *pevnt* tests),
//! futex calls (*psync* tests; futex is emulated in [`crate::futex`]),
//! thread start and exit.

mod async_signal;

use crate::checkpoint::{self, AltStack, Checkpoints, Template, ThreadImage};
use crate::remote;
use crate::digest::{self, Digest};
use crate::failure::Failure;
use crate::futex::{self, Queues, Wait};
use crate::position::Position;
use crate::schedule::Schedule;
use crate::sync_points::{Hit, Op, StepOver, SyncPoints};
use crate::sync_trace::{Switchable, SyncRecord, SyncTrace};
use crate::watchdog::Watchdog;
use anyhow::{anyhow, bail, Context, Result};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal as NixSignal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weft_record::event::{signal_name, End, Event, EventKind, MemWrite, Syscall};
use weft_record::syscalls::{self, Class};
use weft_record::tracee::{self, clone_flags, Launch, Memory, Regs};
use weft_record::{Tid, Trace};

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Preemptions beyond the log order (empty: seed 000's initial replay).
    pub schedule: Schedule,
    /// Compute a digest line at every scheduling point ([`Report::digest`]).
    pub digest: bool,
    /// How long a thread may run without a scheduling point before the
    /// replay stops it and reports a livelock.
    pub livelock_timeout: Duration,
    /// Output events with a lower index are not echoed to our stdout and
    /// stderr: an earlier replay of the same trace already showed them
    /// (exploration replays the same prefix many times).
    pub echo_from: usize,
    /// How many of the most recent synchronization records an invalid
    /// replay returns (0: none).
    pub sync_trace_len: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            schedule: Schedule::default(),
            digest: false,
            livelock_timeout: Duration::from_secs(120),
            echo_from: 0,
            sync_trace_len: 0,
        }
    }
}

/// The result of a replay.
#[derive(Debug)]
pub enum Outcome {
    /// Every logged event was met, in order, and the program ended as
    /// recorded.
    Valid {
        /// How the program ended.
        end: End,
        /// Events matched, the end included.
        events: u64,
    },
    /// The replay is not valid; why.
    Invalid(Failure),
}

/// What a replay returns: its outcome and what it observed on the way.
#[derive(Debug)]
pub struct Report {
    /// Valid, or the failure that stopped it.
    pub outcome: Outcome,
    /// The last synchronization records, oldest first (at most
    /// [`ReplayOptions::sync_trace_len`]).
    pub sync_trace: Vec<SyncRecord>,
    /// With [`ReplayOptions::digest`]: one line per scheduling point, then
    /// the digest of them all.
    pub digest: Vec<String>,
    /// Where the replay stopped, as a hash of the log position, how it
    /// stopped, and every thread's registers and scheduling state. Two
    /// replays of a trace with equal fingerprints stopped in the same state
    /// (memory is not hashed; registers stand for it), so exploration
    /// need not search on from both.
    pub fingerprint: u64,
    /// The synchronization count of the checkpoint this replay resumed
    /// from (`None`: it started the program).
    pub resumed_at: Option<u64>,
}

/// Where a stopped thread is, as far as the scheduler is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    /// Stopped where PTRACE_SYSCALL resumes it: free to run.
    Ready,
    /// Free to run; resuming delivers this signal.
    Deliver(NixSignal),
    /// At the entry of a syscall that is a scheduling point, not yet handled.
    Entry(Entry),
    /// At a signal-delivery-stop, not yet handled.
    Fault(NixSignal),
    /// At a synchronization point (a pthread breakpoint), not yet handled.
    Sync(Op),
    /// Blocked in an emulated futex wait, at its syscall-entry stop.
    Blocked(Wait),
    /// Released from a futex wait; the syscall returns this value.
    Woken(i64),
    /// Gone.
    Exited,
}

/// A syscall entry as observed in the replay.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    nr: i64,
    args: [u64; 6],
    label: u64,
}

/// A signal the replay delivered.
#[derive(Debug, Clone, Copy, Default)]
struct Delivery {
    /// The recorded tid of the thread it went to.
    rec: Tid,
    /// The pc at delivery.
    pc: u64,
    /// Whether it was delivered at the recorded instruction: false for an
    /// asynchronous signal delivered at a scheduling point instead.
    exact: bool,
}

/// What the replay did at an event point.
enum Observed {
    Syscall(Entry),
    Signal(NixSignal, u64),
    Rdtsc { pc: u64, len: u8, rdtscp: bool },
}

#[derive(Clone)]
struct Thread {
    /// Recorded tid.
    rec: Tid,
    /// Replay tid.
    tid: Pid,
    at: At,
    /// Registers at the current stop.
    regs: Regs,
    /// CLONE_CHILD_CLEARTID / set_tid_address address (0 if none).
    clear_child_tid: u64,
    /// Scheduling points since the last matched event.
    steps: u64,
    /// Its logged (timed) futex wait was woken by another thread.
    woken: bool,
    /// Index of the last log event it matched.
    last_event: Option<usize>,
    /// At an acquire entry breakpoint, with a sync trace kept: the
    /// caller's address (the return address on its stack), read once.
    caller: Option<u64>,
    /// The switch that last gave it the core ([`State::switches`]).
    last_ran: u64,
    /// Its alternate signal stack, for checkpoints.
    altstack: Option<AltStack>,
    /// The stack a sigaltstack call it is in sets, until the call returns.
    altstack_call: Option<Option<AltStack>>,
}

impl Thread {
    /// A thread that has just started (or the program's first), ready to
    /// run, with no alternate signal stack (clone(2) clears it).
    fn new(rec: Tid, tid: Pid, regs: Regs, clear_child_tid: u64) -> Self {
        Thread {
            rec,
            tid,
            at: At::Ready,
            regs,
            clear_child_tid,
            steps: 0,
            woken: false,
            last_event: None,
            caller: None,
            last_ran: 0,
            altstack: None,
            altstack_call: None,
        }
    }
}

/// A preemption's grant: how weft reads seed 000's `sync<n,t>`. The
/// thread t switched to runs its next synchronized block before the
/// default order applies again; switching to t only to have the log order
/// switch back at its next lock entry could not reorder any critical
/// section. When the preempted thread was about to take a lock, t runs
/// until it releases that lock (t's critical section on it goes first);
/// otherwise t runs through its next acquire. A preemption to the thread
/// that is already running (t is the thread at n) grants it the same,
/// instead of yielding to the log's next thread or taking turns: it
/// finishes its critical section, or goes on to its next lock, before
/// another thread starts a long computation (one such step, not all its
/// work until it blocks, which would run it far ahead of the others). A
/// grant also ends when t blocks or waits for its turn in the log.
#[derive(Debug, Clone, Copy)]
struct Grant {
    thread: usize,
    until: Until,
}

/// Where a [`Grant`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// At the granted thread's point after releasing this lock.
    Released(u64),
    /// At its point after its next acquire's entry.
    Acquire,
    /// It has passed that entry: at its next point.
    Acquired,
}

/// What to do after handling a scheduling point.
enum Step {
    /// Keep running the current thread.
    Stay,
    /// Switch: to this thread, or to whichever the scheduler picks.
    Switch(Option<usize>),
    /// The replay is invalid.
    Fail(Failure),
    /// The process ended with this status.
    End(ProcessEnd),
}

/// How the replayed process ended.
#[derive(Debug, Clone, Copy)]
enum ProcessEnd {
    Exited(i32),
    Killed(i32),
}

/// How a resumed thread came back.
enum Advance {
    /// It is at a scheduling point (its `at` says which).
    Point,
    /// The process ended.
    End(ProcessEnd),
    /// The watchdog stopped it.
    Livelock(u64),
}

pub(crate) struct Session<'a> {
    trace: &'a Trace,
    opts: &'a ReplayOptions,
    pid: Pid,
    mem: Memory,
    /// Each recorded thread's event indices, ascending.
    thread_events: &'a HashMap<Tid, Vec<usize>>,
    watchdog: Watchdog,
    /// Where checkpoints go (`None`: none are taken).
    checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
    /// When the last checkpoint was taken or resumed from, and at which
    /// synchronization count.
    since_checkpoint: (Instant, u64),
    /// Where a resumed replay starts: the thread and its synchronization
    /// operation, not yet counted (`None`: at the program's start).
    resume: Option<(usize, Option<Op>)>,
    state: State,
}

/// What a replay has done and decided so far: everything about it that
/// changes as it runs, which a checkpoint keeps to resume it.
#[derive(Clone)]
struct State {
    threads: Vec<Thread>,
    by_rec: HashMap<Tid, usize>,
    /// Index of the next log event to match.
    pos: usize,
    /// Synchronization operations so far (seed 000's sync_cnt).
    sync_count: u64,
    /// The thread a preemption switched to, until it has run its next
    /// synchronized block.
    granted: Option<Grant>,
    futexes: Queues,
    sync: SyncPoints,
    digest: Option<Digest>,
    warned: HashSet<i64>,
    /// The last signal delivered, to check a fatal end.
    last_delivery: Option<Delivery>,
    sync_trace: SyncTrace,
    /// Address of a `syscall` instruction in the tracee (remote syscalls
    /// for checkpoints), once a thread has stopped at one.
    syscall_insn: Option<u64>,
    /// Switches so far.
    switches: u64,
}

/// A replay at a synchronization point, kept with a checkpoint's
/// [`Template`] to resume the replay there: its [`State`], every thread's
/// [`ThreadImage`], and the point (thread `cur` at operation `op`, not yet
/// counted).
#[derive(Clone)]
pub(crate) struct Snapshot {
    state: State,
    images: Vec<Option<ThreadImage>>,
    cur: usize,
    op: Option<Op>,
}

impl Snapshot {
    /// Whether a replay with `opts` can resume from it: it keeps the same
    /// digest and sync trace (the schedule is the checkpoint's business).
    pub(crate) fn fits(&self, opts: &ReplayOptions) -> bool {
        self.state.digest.is_some() == opts.digest && self.state.sync_trace.capacity() == opts.sync_trace_len
    }

    /// A new process from `template` with this snapshot's threads.
    /// Errors as [`Template::spawn`].
    pub(crate) fn spawn(&self, template: &Template) -> Result<Vec<Option<Pid>>> {
        template.spawn(&self.images, self.cur)
    }
}

impl<'a> Session<'a> {
    /// Starts the program as recorded: argv, env, cwd, AT_RANDOM, ASLR off.
    pub(crate) fn launch(
        trace: &'a Trace,
        opts: &'a ReplayOptions,
        thread_events: &'a HashMap<Tid, Vec<usize>>,
        checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
    ) -> Result<Self> {
        let meta = &trace.meta;
        let exe = executable(trace)?;
        let cstr = |b: &[u8]| CString::new(b).context("NUL byte in recorded argv or env");
        let cwd = Path::new(OsStr::from_bytes(&meta.cwd));
        let launch = Launch {
            exe: cstr(exe.as_os_str().as_encoded_bytes())?,
            argv: meta.argv.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
            env: meta.env.iter().map(|e| cstr(e)).collect::<Result<_>>()?,
            cwd: cwd.is_dir().then(|| cstr(&meta.cwd)).transpose()?,
            filters: vec![],
            one_cpu: true,
            null_stdin: true,
        };
        let pid = tracee::launch(&launch)?;
        let mem = Memory::open(pid)?;
        let regs = ptrace::getregs(pid)?;
        let random = tracee::patch_auxv(&mem, regs.rsp)?;
        mem.write(random, &meta.at_random)?;
        let main = Thread::new(meta.pid, pid, regs, 0);
        Ok(Session {
            trace,
            opts,
            pid,
            mem,
            thread_events,
            watchdog: Watchdog::start(opts.livelock_timeout),
            checkpoints,
            since_checkpoint: (Instant::now(), 0),
            resume: None,
            state: State {
                threads: vec![main],
                by_rec: HashMap::from([(meta.pid, 0)]),
                pos: 0,
                sync_count: 0,
                granted: None,
                futexes: Queues::default(),
                sync: SyncPoints::default(),
                digest: opts.digest.then(Digest::default),
                warned: HashSet::new(),
                last_delivery: None,
                sync_trace: SyncTrace::new(opts.sync_trace_len),
                syscall_insn: None,
                switches: 0,
            },
        })
    }

    /// Goes on from a checkpoint's snapshot in the process whose threads
    /// are `tids`.
    pub(crate) fn resumed(
        trace: &'a Trace,
        opts: &'a ReplayOptions,
        thread_events: &'a HashMap<Tid, Vec<usize>>,
        checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
        s: Snapshot,
        tids: Vec<Option<Pid>>,
    ) -> Result<Self> {
        let mut state = s.state;
        for (t, tid) in state.threads.iter_mut().zip(&tids) {
            if let Some(tid) = tid {
                t.tid = *tid;
            }
        }
        let pid = state.threads[s.cur].tid;
        Ok(Session {
            trace,
            opts,
            pid,
            mem: Memory::open(pid)?,
            thread_events,
            watchdog: Watchdog::start(opts.livelock_timeout),
            checkpoints,
            since_checkpoint: (Instant::now(), state.sync_count),
            resume: Some((s.cur, s.op)),
            state,
        })
    }

    /// Runs the replay to its end and reports.
    pub(crate) fn replay(mut self) -> Result<Report> {
        let resumed_at = self.resume.map(|_| self.state.sync_count);
        let outcome = self.run();
        let fingerprint = outcome.as_ref().map_or(0, |o| self.fingerprint(o));
        if !matches!(outcome, Ok(Outcome::Valid { .. })) {
            self.kill();
        }
        Ok(Report {
            fingerprint,
            outcome: outcome?,
            sync_trace: std::mem::take(&mut self.state.sync_trace).into_vec(),
            digest: self.state.digest.take().map(Digest::into_lines).unwrap_or_default(),
            resumed_at,
        })
    }

    /// A snapshot of this replay at thread `cur`'s synchronization point
    /// `op`, for a checkpoint; `None` when a thread is in a state a
    /// checkpoint cannot rebuild (a signal stop), or when memory is shared
    /// writable (a fork would not copy it).
    fn snapshot(&self, cur: usize, op: Option<Op>) -> Result<Option<Snapshot>> {
        // The leader may have exited; the current thread is alive.
        if checkpoint::has_shared_writable(self.state.threads[cur].tid) {
            return Ok(None);
        }
        let mut images = Vec::with_capacity(self.state.threads.len());
        for t in &self.state.threads {
            let entry = match t.at {
                At::Exited => {
                    images.push(None);
                    continue;
                }
                At::Ready => false,
                At::Entry(_) | At::Blocked(_) | At::Woken(_) => true,
                At::Deliver(_) | At::Fault(_) | At::Sync(_) => return Ok(None),
            };
            images.push(Some(ThreadImage::read(t.tid, t.regs, entry, t.altstack)?));
        }
        Ok(Some(Snapshot { state: self.state.clone(), images, cur, op }))
    }

    /// Takes a checkpoint at thread `i`'s synchronization point `op` when
    /// the schedule preempts at this operation, or when the policy's
    /// interval has passed since the last one and the schedule has a
    /// preemption still to come. Past its last preemption a replay is an
    /// exploration attempt that will most likely be discarded; should it be
    /// admitted, the next attempts take checkpoints on their way.
    fn checkpoint(&mut self, i: usize, op: Option<Op>) -> Result<()> {
        let Some(interval) = self.checkpoints.as_ref().map(|c| c.policy().interval) else { return Ok(()) };
        let (last, at) = self.since_checkpoint;
        let preempts = self.opts.schedule.preemption_at(self.state.sync_count + 1).is_some();
        let to_come = self.opts.schedule.preemptions().last().is_none_or(|p| p.sync > self.state.sync_count);
        if at == self.state.sync_count || !(preempts || (to_come && last.elapsed() >= interval)) {
            return Ok(());
        }
        self.since_checkpoint = (Instant::now(), self.state.sync_count);
        let Some(insn) = self.state.syscall_insn.filter(|&a| self.mem.read(a, 2).is_ok_and(|b| b == remote::SYSCALL_INSN)) else {
            return Ok(());
        };
        if !self.checkpoints.as_mut().is_some_and(|c| c.make_room()) {
            return Ok(());
        }
        let Some(snapshot) = self.snapshot(i, op)? else { return Ok(()) };
        let Some(template) = Template::fork(self.state.threads[i].tid, &self.state.threads[i].regs, insn)? else { return Ok(()) };
        tracing::debug!(sync = self.state.sync_count, event = self.state.pos, "checkpoint");
        if let Some(store) = self.checkpoints.as_mut() {
            store.add(template, snapshot, self.state.sync_count, &self.opts.schedule);
        }
        Ok(())
    }
}

/// The executable to run: the recorded path when its contents are
/// unchanged (so the initial stack is laid out exactly as recorded),
/// else the trace's copy. The dynamic loader must be unchanged.
fn executable(trace: &Trace) -> Result<PathBuf> {
    let meta = &trace.meta;
    let same = |original: &Path, copy: &Path| -> bool {
        match (std::fs::read(original), std::fs::read(copy)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    };
    let exe_file = meta.exec_files.first().ok_or_else(|| anyhow!("trace has no executable copy"))?;
    let copy = trace.file_path(&exe_file.copy);
    if !copy.is_file() {
        bail!("{}: missing from the trace", copy.display());
    }
    for f in &meta.exec_files[1..] {
        let path = Path::new(OsStr::from_bytes(&f.path));
        if !same(path, &trace.file_path(&f.copy)) {
            bail!("{} changed since the recording; weft cannot replay with a different dynamic loader", path.display());
        }
    }
    let original = Path::new(OsStr::from_bytes(&meta.exe));
    if same(original, &copy) {
        Ok(PathBuf::from(OsStr::from_bytes(&meta.exec_path)))
    } else {
        eprintln!("weft: warning: {} changed since the recording; replaying the trace's copy", original.display());
        Ok(copy)
    }
}

impl Session<'_> {
    /// The scheduler's loop, from the program's start or from a
    /// checkpoint's point.
    fn run(&mut self) -> Result<Outcome> {
        let mut cur = self.resume.map_or(0, |(i, _)| i);
        let mut resume = self.resume.map(|(_, op)| op);
        loop {
            let step = match resume.take() {
                Some(op) => self.sync_point(cur, op)?,
                None => {
                    if matches!(self.state.threads[cur].at, At::Ready | At::Deliver(_)) {
                        match self.advance(cur)? {
                            Advance::Point => {}
                            Advance::End(end) => return self.finish(end),
                            Advance::Livelock(pc) => {
                                if let Some(rec) = self.killed_at_end() {
                                    let end = self.kill_as_recorded(rec)?;
                                    return self.finish(end);
                                }
                                let seconds = self.opts.livelock_timeout.as_secs();
                                return Ok(Outcome::Invalid(Failure::Livelock { at: self.position(cur), pc, seconds }));
                            }
                        }
                    }
                    self.state.threads[cur].steps += 1;
                    self.step(cur)?
                }
            };
            match step {
                Step::Stay => self.note(cur),
                Step::Switch(to) => match to.map(Ok).unwrap_or_else(|| self.pick()) {
                    Ok(next) => {
                        tracing::trace!(event = self.state.pos, from = self.state.threads[cur].rec, to = self.state.threads[next].rec, "switch");
                        if self.state.granted.map(|g| g.thread) != Some(next) {
                            self.state.granted = None;
                        }
                        self.state.switches += 1;
                        self.state.threads[next].last_ran = self.state.switches;
                        cur = next;
                        self.note(cur);
                    }
                    Err(failure) => match self.killed_at_end() {
                        Some(rec) => {
                            let end = self.kill_as_recorded(rec)?;
                            return self.finish(end);
                        }
                        None => return Ok(Outcome::Invalid(failure)),
                    },
                },
                Step::Fail(failure) => return Ok(Outcome::Invalid(failure)),
                Step::End(end) => return self.finish(end),
            }
        }
    }

    /// Resumes thread `i` until its next scheduling point. Syscalls that are
    /// not scheduling points run (or, for rseq, fail) on the way.
    fn advance(&mut self, i: usize) -> Result<Advance> {
        loop {
            let (tid, sig) = (self.state.threads[i].tid, match self.state.threads[i].at {
                At::Deliver(s) => Some(s),
                _ => None,
            });
            self.state.threads[i].at = At::Ready;
            self.state.threads[i].caller = None;
            if sig.is_none() {
                self.step_over_breakpoint(i)?;
            }
            self.watchdog.arm(tid);
            ptrace::syscall(tid, sig)?;
            let status = waitpid(tid, Some(WaitPidFlag::__WALL));
            let fired = self.watchdog.disarm();
            match status? {
                WaitStatus::PtraceSyscall(_) => {
                    let regs = ptrace::getregs(tid)?;
                    self.state.threads[i].regs = regs;
                    if tracee::syscall_stop_kind(tid) == tracee::SYSCALL_INFO_EXIT {
                        self.set_altstack(i, &regs);
                        continue;
                    }
                    self.state.syscall_insn.get_or_insert(regs.rip - remote::SYSCALL_INSN.len() as u64);
                    let nr = regs.orig_rax as i64;
                    match syscalls::classify(nr, &tracee::syscall_args(&regs)) {
                        Class::Refused => self.finish_syscall(i, -libc::ENOSYS as i64)?,
                        Class::Execute => self.read_altstack(i, &regs),
                        _ => {
                            let entry = Entry { nr, args: tracee::syscall_args(&regs), label: regs.rip };
                            self.state.threads[i].at = At::Entry(entry);
                            return Ok(Advance::Point);
                        }
                    }
                }
                WaitStatus::Stopped(_, NixSignal::SIGSTOP) if fired => {
                    return Ok(Advance::Livelock(ptrace::getregs(tid)?.rip));
                }
                WaitStatus::Stopped(_, NixSignal::SIGTRAP) if self.breakpoint(i)? => {
                    if matches!(self.state.threads[i].at, At::Sync(_)) {
                        return Ok(Advance::Point);
                    }
                }
                WaitStatus::Stopped(_, sig) => {
                    self.state.threads[i].regs = ptrace::getregs(tid)?;
                    self.state.threads[i].at = At::Fault(sig);
                    return Ok(Advance::Point);
                }
                // A thread only reaches its exit here when a signal kills
                // the process (exits at scheduling points are handled there).
                WaitStatus::PtraceEvent(..) | WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {
                    let _ = ptrace::cont(tid, None);
                    return Ok(Advance::End(self.drain()?));
                }
                other => bail!("unexpected stop of thread {tid}: {other:?}"),
            }
        }
    }

    /// At the entry of a syscall thread `i` executes (`regs`): a
    /// sigaltstack with a new stack has it read now, before the call
    /// overwrites the buffer with the old one (both may be one buffer).
    fn read_altstack(&mut self, i: usize, regs: &Regs) {
        if regs.orig_rax as i64 != libc::SYS_sigaltstack || regs.rdi == 0 {
            return;
        }
        let word = |k: u64| self.mem.read_u64(regs.rdi + 8 * k).ok();
        let (Some(sp), Some(flags), Some(size)) = (word(0), word(1), word(2)) else { return };
        let flags = flags as u32;
        let stack = (flags & libc::SS_DISABLE as u32 == 0).then_some(AltStack { sp, flags, size });
        self.state.threads[i].altstack_call = Some(stack);
    }

    /// At the exit of a syscall thread `i` executed (`regs`): a successful
    /// sigaltstack sets or disables the stack read at its entry
    /// (sigaltstack(2)), which checkpoints restore.
    fn set_altstack(&mut self, i: usize, regs: &Regs) {
        let t = &mut self.state.threads[i];
        if let Some(stack) = t.altstack_call.take() {
            if regs.orig_rax as i64 == libc::SYS_sigaltstack && regs.rax == 0 {
                t.altstack = stack;
            }
        }
    }

    /// Thread `i` stopped with SIGTRAP: if one of our breakpoints did it,
    /// back its pc up over the int3 and say whether this is a
    /// synchronization point for it (`at` becomes Sync) or not (Ready).
    fn breakpoint(&mut self, i: usize) -> Result<bool> {
        let t = &mut self.state.threads[i];
        let mut regs = ptrace::getregs(t.tid)?;
        let Some(hit) = self.state.sync.hit(&self.mem, i, &regs)? else { return Ok(false) };
        let pc = regs.rip.wrapping_sub(1);
        regs.rip = pc;
        ptrace::setregs(t.tid, regs)?;
        t.regs = regs;
        t.at = match hit {
            Hit::Sync(op) => At::Sync(op),
            Hit::Entered | Hit::Passing => At::Ready,
        };
        if self.state.sync_trace.wanted() && matches!(hit, Hit::Sync(Op::Acquire(_))) {
            t.caller = self.mem.read_u64(regs.rsp).ok();
        }
        Ok(true)
    }

    /// A thread resuming at one of our int3s first executes the original
    /// instruction alone (the other threads are stopped, so none can miss
    /// the breakpoint meanwhile).
    fn step_over_breakpoint(&mut self, i: usize) -> Result<()> {
        let (tid, pc) = (self.state.threads[i].tid, self.state.threads[i].regs.rip);
        let byte = match self.state.sync.step_over(pc) {
            None => return Ok(()),
            Some(StepOver::Skip(len)) => {
                self.state.threads[i].regs.rip += len;
                return Ok(ptrace::setregs(tid, self.state.threads[i].regs)?);
            }
            Some(StepOver::Step(byte)) => byte,
        };
        self.mem.write(pc, &[byte])?;
        ptrace::step(tid, None)?;
        let status = waitpid(tid, Some(WaitPidFlag::__WALL))?;
        self.mem.write(pc, &[0xcc])?;
        match status {
            WaitStatus::Stopped(_, NixSignal::SIGTRAP) => {
                self.state.threads[i].regs = ptrace::getregs(tid)?;
                Ok(())
            }
            other => bail!("thread {tid} did not step over a breakpoint: {other:?}"),
        }
    }

    /// Handles the scheduling point thread `i` is at.
    fn step(&mut self, i: usize) -> Result<Step> {
        if let Some(s) = self.async_signal_due(i) {
            if let Some(step) = self.deliver_async(i, s)? {
                return Ok(step);
            }
        }
        match self.state.threads[i].at {
            At::Entry(e) if e.nr == libc::SYS_futex => self.futex(i, e),
            At::Entry(e) => self.event_point(i, Observed::Syscall(e)),
            At::Fault(sig) => {
                let pc = self.state.threads[i].regs.rip;
                let observed = match tracee::rdtsc_at(&self.mem, pc) {
                    Some((len, rdtscp)) if sig == NixSignal::SIGSEGV => Observed::Rdtsc { pc, len, rdtscp },
                    _ => Observed::Signal(sig, pc),
                };
                self.event_point(i, observed)
            }
            At::Woken(result) => {
                self.finish_syscall(i, result)?;
                Ok(Step::Stay)
            }
            At::Sync(op) => {
                self.state.threads[i].at = At::Ready;
                self.sync_point(i, Some(op))
            }
            At::Blocked(_) | At::Exited => Ok(Step::Switch(None)),
            At::Ready | At::Deliver(_) => Ok(Step::Stay),
        }
    }

    /// A *pevnt* test then a check (seed 000 Fig. 8): run the event if it
    /// is the log's next and belongs to this thread, else switch to the
    /// thread the log names.
    fn event_point(&mut self, i: usize, observed: Observed) -> Result<Step> {
        let Some(expected) = self.trace.events.get(self.state.pos) else {
            return Ok(Step::Fail(self.incomplete()));
        };
        if let Some(rec) = self.killed_at_end() {
            return Ok(Step::End(self.kill_as_recorded(rec)?));
        }
        let me = self.state.threads[i].rec;
        if expected.tid != me && !matches!(expected.kind, EventKind::End(_)) {
            return Ok(Step::Switch(None));
        }
        if let Some(why) = self.mismatch(i, &observed, expected) {
            let label = self.label_of(&observed);
            let observed = format!("tid {me} @{label:#x}  {why}");
            return Ok(Step::Fail(Failure::Unmatched { at: self.position(i), label, expected: expected.to_string(), observed }));
        }
        self.state.threads[i].last_event = Some(self.state.pos);
        self.state.pos += 1;
        self.state.threads[i].steps = 0;
        self.apply(i, observed, expected)
    }

    fn label_of(&self, observed: &Observed) -> u64 {
        match observed {
            Observed::Syscall(e) => e.label,
            Observed::Signal(_, pc) | Observed::Rdtsc { pc, .. } => *pc,
        }
    }

    /// Seed 000's checks (chkEvt, chkWrt): `None` when `observed` matches
    /// the event, else a description of what the replay did.
    fn mismatch(&self, i: usize, observed: &Observed, expected: &Event) -> Option<String> {
        let label = self.label_of(observed);
        let describe = || match observed {
            Observed::Syscall(e) => {
                let args: Vec<String> = e.args.iter().map(|a| format!("{a:#x}")).collect();
                format!("{}({})", syscalls::name(e.nr), args.join(", "))
            }
            Observed::Signal(sig, _) => format!("signal {}", sig.as_str()),
            Observed::Rdtsc { .. } => "rdtsc".to_string(),
        };
        if expected.label != label {
            return Some(describe());
        }
        match (observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { flags, .. }) => {
                let same = syscalls::class(e.nr) == Class::Clone
                    && clone_flags(&self.mem, &self.state.threads[i].regs) == *flags;
                (!same).then(describe)
            }
            (Observed::Syscall(e), EventKind::Syscall(s)) => {
                if e.nr != s.nr || syscalls::key_args(e.nr).iter().any(|&k| e.args[k] != s.args[k]) {
                    return Some(describe());
                }
                if let Some(k) = syscalls::path_arg(e.nr) {
                    let path = self.mem.read_cstr(e.args[k]).unwrap_or_default();
                    if Some(&path) != s.path.as_ref() {
                        return Some(format!("{} with path {:?}", describe(), String::from_utf8_lossy(&path)));
                    }
                }
                if let Some(want) = s.output_hash {
                    let mut rd = |a: u64| self.mem.read_u64(a).ok();
                    let ranges = syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd);
                    if self.mem.hash_ranges(&ranges) != want {
                        return Some(format!("{} writing different bytes", describe()));
                    }
                }
                None
            }
            (Observed::Signal(sig, _), EventKind::Signal(s)) => (*sig as i32 != s.signo).then(describe),
            (Observed::Rdtsc { rdtscp, .. }, EventKind::Rdtsc { aux, .. }) => {
                (*rdtscp != aux.is_some()).then(describe)
            }
            _ => Some(describe()),
        }
    }

    /// The thread a recording ended by SIGKILL names, when that end is the
    /// log's next event. SIGKILL has no delivery stop, so no signal event
    /// precedes it: sent from outside (`kill -9`, often to a program that
    /// hung), it ends the replay once every logged event is met, at the
    /// first scheduling point after the last one, or where the replay finds
    /// every thread blocked or one spinning, as the recorded run was.
    fn killed_at_end(&self) -> Option<Tid> {
        match self.trace.events.get(self.state.pos)?.kind {
            EventKind::End(End::Killed { signo: libc::SIGKILL, tid, .. }) => Some(tid),
            _ => None,
        }
    }

    /// Kills the replayed process as the recording ended (SIGKILL in
    /// thread `rec`) and returns how it ended.
    fn kill_as_recorded(&mut self, rec: Tid) -> Result<ProcessEnd> {
        nix::sys::signal::kill(self.pid, NixSignal::SIGKILL)?;
        self.state.last_delivery = Some(Delivery { rec, pc: 0, exact: false });
        self.drain()
    }

    /// Carries out a matched event.
    fn apply(&mut self, i: usize, observed: Observed, expected: &Event) -> Result<Step> {
        match (&observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { child, .. }) => {
                self.spawn(i, e, *child)?;
                Ok(Step::Stay)
            }
            (Observed::Syscall(e), EventKind::Syscall(s)) => self.syscall(i, e, s),
            (Observed::Signal(sig, pc), EventKind::Signal(s)) => {
                let t = &mut self.state.threads[i];
                if !s.synchronous {
                    tracee::set_siginfo_bytes(t.tid, &s.siginfo)?;
                }
                t.at = At::Deliver(*sig);
                self.state.last_delivery = Some(Delivery { rec: t.rec, pc: *pc, exact: true });
                Ok(Step::Stay)
            }
            (Observed::Rdtsc { len, .. }, EventKind::Rdtsc { tsc, aux, .. }) => {
                let t = &mut self.state.threads[i];
                t.regs.rax = tsc & 0xffff_ffff;
                t.regs.rdx = tsc >> 32;
                if let Some(a) = aux {
                    t.regs.rcx = *a as u64;
                }
                t.regs.rip += *len as u64;
                ptrace::setregs(t.tid, t.regs)?;
                t.at = At::Ready;
                Ok(Step::Stay)
            }
            _ => bail!("internal error: applying an unmatched event"),
        }
    }

    /// Carries out a matched logged syscall, by class.
    fn syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        match syscalls::class(e.nr) {
            Class::Input | Class::Unsupported => {
                if s.unsupported && self.state.warned.insert(e.nr) {
                    eprintln!(
                        "weft: warning: event {}: {} is unsupported; replaying its result only",
                        self.state.pos - 1,
                        syscalls::name(e.nr)
                    );
                }
                self.finish_syscall(i, s.result)?;
                if let Some(failure) = self.write_out_buffers(i, e, s.result, &s.writes)? {
                    return Ok(Step::Fail(failure));
                }
            }
            Class::Output => {
                self.finish_syscall(i, s.result)?;
                self.echo_output(e, s)?;
            }
            Class::MmapFile => return self.mmap_file(i, e, s),
            Class::ExecuteLogged => {
                self.state.threads[i].clear_child_tid = e.args[0];
                self.execute(i)?;
                self.set_result(i, s.result)?;
            }
            Class::Kill => self.kill_syscall(i, e, s)?,
            Class::ThreadExit => return self.thread_exit(i),
            Class::ExitGroup => {
                let tid = self.state.threads[i].tid;
                ptrace::syscall(tid, None)?;
                return Ok(Step::End(self.drain()?));
            }
            Class::Futex => {
                self.state.threads[i].woken = false;
                self.finish_syscall(i, s.result)?;
                return self.sync_point(i, None);
            }
            Class::Execute | Class::Clone | Class::Refused => bail!("internal error: {} is not a logged syscall", syscalls::name(e.nr)),
        }
        Ok(Step::Stay)
    }

    /// Writes the logged out-buffers where the replayed call points: the
    /// replay's pointers may differ from the recording's (heap arenas of
    /// threads are placed in creation order), so ranges are recomputed from
    /// the replay's arguments and paired with the logged bytes by index.
    fn write_out_buffers(&mut self, i: usize, e: &Entry, result: i64, writes: &[MemWrite]) -> Result<Option<Failure>> {
        let mut rd = |a: u64| self.mem.read_u64(a).ok();
        let ranges = syscalls::out_buffers(e.nr, &e.args, result, &mut rd);
        if ranges.len() != writes.len() {
            return Ok(Some(Failure::Unmatched {
                at: self.position(i),
                label: e.label,
                expected: format!("{} with {} out-buffers", syscalls::name(e.nr), writes.len()),
                observed: format!("{} out-buffers in the replayed call", ranges.len()),
            }));
        }
        for ((addr, _), w) in ranges.iter().zip(writes) {
            self.mem.write(*addr, &self.trace.contents(&w.data)?)?;
        }
        Ok(None)
    }

    /// The program's writes to stdout and stderr appear on ours.
    fn echo_output(&self, e: &Entry, s: &Syscall) -> Result<()> {
        if self.state.pos <= self.opts.echo_from || !matches!(e.nr, libc::SYS_write | libc::SYS_writev) || !(1..=2).contains(&s.args[0]) {
            return Ok(());
        }
        let mut rd = |a: u64| self.mem.read_u64(a).ok();
        let bytes = self.mem.read_ranges(&syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd))?;
        // A closed stdout (EPIPE) must not end the replay.
        let _ = if s.args[0] == 1 {
            std::io::stdout().lock().write_all(&bytes).and_then(|_| std::io::stdout().flush())
        } else {
            std::io::stderr().lock().write_all(&bytes)
        };
        Ok(())
    }

    /// A file-backed mmap: anonymous memory at the recorded address, filled
    /// from the trace's copy of the file.
    fn mmap_file(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        let Some(file) = s.file.as_ref().filter(|_| s.result >= 0) else {
            self.finish_syscall(i, s.result)?;
            return Ok(Step::Stay);
        };
        let addr = s.result as u64;
        let fixed = if e.args[3] & libc::MAP_FIXED as u64 != 0 { libc::MAP_FIXED } else { libc::MAP_FIXED_NOREPLACE };
        let t = &mut self.state.threads[i];
        t.regs.rdi = addr;
        t.regs.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed) as u64;
        t.regs.r8 = u64::MAX;
        t.regs.r9 = 0;
        ptrace::setregs(t.tid, t.regs)?;
        let got = self.execute(i)?.rax as i64;
        if got != s.result {
            let at = self.position(i);
            return Ok(Step::Fail(Failure::Unmatched {
                at,
                label: e.label,
                expected: format!("mmap of {} at {addr:#x}", String::from_utf8_lossy(&file.path)),
                observed: format!("the address range is not free in the replay (mmap returned {got})"),
            }));
        }
        let path = self.trace.file_path(&file.copy);
        let data = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        let start = (e.args[5] as usize).min(data.len());
        let end = (start + e.args[1] as usize).min(data.len());
        self.mem.write(addr, &data[start..end])?;
        let is_libc = Path::new(OsStr::from_bytes(&file.path))
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"libc.so"));
        if is_libc && e.args[2] & libc::PROT_EXEC as u64 != 0 && !self.state.sync.installed() {
            self.state.sync.install_libc(&self.mem, &path, addr, e.args[5])?;
        }
        Ok(Step::Stay)
    }

    /// kill/tkill/tgkill: executed, with recorded ids translated, when the
    /// program signals itself; emulated otherwise.
    fn kill_syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<()> {
        let own = |id: u64| id as i32 == self.trace.meta.pid || self.state.by_rec.contains_key(&(id as i32));
        let target = match e.nr {
            libc::SYS_tgkill if own(e.args[0]) => self.state.by_rec.get(&(e.args[1] as i32)).copied(),
            libc::SYS_tkill => self.state.by_rec.get(&(e.args[0] as i32)).copied(),
            libc::SYS_kill if e.args[0] as i32 == self.trace.meta.pid => Some(0),
            _ => None,
        };
        let Some(target) = target else {
            return self.finish_syscall(i, s.result);
        };
        let replay_tid = self.state.threads[target].tid.as_raw() as u64;
        let t = &mut self.state.threads[i];
        match e.nr {
            libc::SYS_tgkill => {
                t.regs.rdi = self.pid.as_raw() as u64;
                t.regs.rsi = replay_tid;
            }
            libc::SYS_tkill => t.regs.rdi = replay_tid,
            _ => t.regs.rdi = self.pid.as_raw() as u64,
        }
        ptrace::setregs(t.tid, t.regs)?;
        self.execute(i)?;
        // The kernel preserves argument registers: give back the recorded
        // ids, so that no replay tid stays in the program's registers.
        let t = &mut self.state.threads[i];
        [t.regs.rdi, t.regs.rsi] = [e.args[0], e.args[1]];
        self.set_result(i, s.result)
    }

    /// A thread's `exit`: clear its CLONE_CHILD_CLEARTID word and wake its
    /// joiners (the kernel's futex wake reaches no emulated waiter), then
    /// let it go.
    fn thread_exit(&mut self, i: usize) -> Result<Step> {
        let ctid = self.state.threads[i].clear_child_tid;
        if ctid != 0 {
            self.mem.write(ctid, &0u32.to_le_bytes())?;
            for w in self.state.futexes.wake(ctid, u32::MAX, u32::MAX) {
                self.release(w);
            }
        }
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT) => {
                let _ = ptrace::cont(tid, None);
            }
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {}
            other => bail!("thread {tid} did not exit: {other:?}"),
        }
        self.state.threads[i].at = At::Exited;
        if self.state.threads.iter().all(|t| t.at == At::Exited) {
            return Ok(Step::End(self.drain()?));
        }
        Ok(Step::Switch(None))
    }

    /// Executes a clone the log says spawned `rec_child`, and gives the
    /// program the recorded tid everywhere the kernel put the new one.
    fn spawn(&mut self, i: usize, e: &Entry, rec_child: Tid) -> Result<()> {
        let flags = clone_flags(&self.mem, &self.state.threads[i].regs) as i32;
        let (ptid, ctid) = if e.nr == libc::SYS_clone3 {
            (self.mem.read_u64(e.args[0] + 24)?, self.mem.read_u64(e.args[0] + 16)?)
        } else {
            (e.args[2], e.args[3])
        };
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        let child = match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_CLONE) => Pid::from_raw(ptrace::getevent(tid)? as i32),
            other => bail!("clone did not create a thread: {other:?}"),
        };
        self.execute(i)?;
        self.set_result(i, rec_child as i64)?;
        let rec = (rec_child as u32).to_le_bytes();
        if flags & libc::CLONE_PARENT_SETTID != 0 {
            self.mem.write(ptid, &rec)?;
        }
        if flags & libc::CLONE_CHILD_SETTID != 0 {
            self.mem.write(ctid, &rec)?;
        }
        match waitpid(child, Some(WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, NixSignal::SIGSTOP) => {}
            other => bail!("new thread {child} did not stop: {other:?}"),
        }
        self.state.by_rec.insert(rec_child, self.state.threads.len());
        let clear_child_tid = if flags & libc::CLONE_CHILD_CLEARTID != 0 { ctid } else { 0 };
        self.state.threads.push(Thread::new(rec_child, child, ptrace::getregs(child)?, clear_child_tid));
        Ok(())
    }

    /// An emulated futex call; wakes and completed waits are *psync*
    /// points (seed 000 Fig. 8, P-SYNC-PRMPT / P-SYNC-NOPRMPT).
    fn futex(&mut self, i: usize, e: Entry) -> Result<Step> {
        if syscalls::is_logged_futex(&e.args) {
            return self.logged_futex_wait(i, e);
        }
        let mut words = MemWords(&self.mem);
        match self.state.futexes.call(i, &e.args, &mut words) {
            futex::Action::Block(wait) => {
                self.state.threads[i].at = At::Blocked(wait);
                Ok(Step::Switch(None))
            }
            futex::Action::Return(result, woken) => {
                for w in woken {
                    self.release(w);
                }
                self.finish_syscall(i, result)?;
                self.sync_point(i, None)
            }
            futex::Action::Unsupported(op) => {
                bail!("futex operation {op} (a priority-inheritance futex) is not supported by the replayer")
            }
        }
    }

    /// A timed futex wait, whose outcome the log holds. If the recorded
    /// wait was woken, or found the word changed (EAGAIN), the thread
    /// blocks in the emulated queue while the word still holds the value it
    /// expects, until a wake releases it: in the recording another thread
    /// changed the word (a condvar signal, say) before this call returned,
    /// and the replay must let that happen too, or the caller would find
    /// nothing changed and wait again. Either way the call completes as an
    /// event, in log order, with the recorded result (a wait that finds the
    /// word already changed returns as if woken: a spurious wakeup, which
    /// callers allow).
    fn logged_futex_wait(&mut self, i: usize, e: Entry) -> Result<Step> {
        let me = self.state.threads[i].rec;
        let recorded = self.trace.events.get(self.next_event_of(me)).and_then(|ev| match &ev.kind {
            EventKind::Syscall(s) if s.nr == libc::SYS_futex => Some(s.result),
            _ => None,
        });
        let must_change = recorded == Some(0) || recorded == Some(-libc::EAGAIN as i64);
        if must_change && !self.state.threads[i].woken {
            let mut words = MemWords(&self.mem);
            if let futex::Action::Block(wait) = self.state.futexes.call(i, &e.args, &mut words) {
                self.state.threads[i].at = At::Blocked(wait);
                return Ok(Step::Switch(None));
            }
        }
        self.event_point(i, Observed::Syscall(e))
    }

    /// A wake released thread `w` from its futex wait.
    fn release(&mut self, w: usize) {
        let t = &mut self.state.threads[w];
        t.at = match t.at {
            At::Blocked(wait) if wait.timed => {
                t.woken = true;
                At::Entry(Entry { nr: libc::SYS_futex, args: tracee::syscall_args(&t.regs), label: t.regs.rip })
            }
            _ => At::Woken(0),
        };
    }

    /// A synchronization point: preempt as the schedule says, else switch
    /// to the thread of the log's next event when it can run, else let
    /// the free threads take turns ([`Session::rotate`]).
    ///
    /// A thread preempted to runs under a [`Grant`] (its points are
    /// no-ops until the grant ends). `op` is the pthread operation thread
    /// `i` is at (`None` at a futex wake). A checkpoint may be taken
    /// first. Errors: taking the checkpoint failed.
    fn sync_point(&mut self, i: usize, op: Option<Op>) -> Result<Step> {
        self.checkpoint(i, op)?;
        self.state.sync_count += 1;
        let granted = self.grant_holds(i, op);
        let default = match self.next_owner() {
            _ if granted => i,
            Some(j) if j == i => i,
            Some(j) if self.runnable(j) => j,
            _ => self.rotate(i),
        };
        self.record_sync(i, default, granted);
        tracing::trace!(n = self.state.sync_count, tid = self.state.threads[i].rec, site = %format_args!("{:#x}", self.site(i)), ?op, event = self.state.pos, granted, "synchronization");
        if granted {
            return Ok(Step::Stay);
        }
        Ok(match self.preemption() {
            Some(j) if self.runnable(j) => {
                let until = match op {
                    Some(Op::Acquire(lock)) => Until::Released(lock),
                    _ => Until::Acquire,
                };
                self.state.granted = Some(Grant { thread: j, until });
                if j == i { Step::Stay } else { Step::Switch(Some(j)) }
            }
            _ if default == i => Step::Stay,
            _ => Step::Switch(Some(default)),
        })
    }

    /// Whether thread `i`, at a synchronization point at `op`, runs on
    /// under a preemption's grant; ends the grant when it does not.
    fn grant_holds(&mut self, i: usize, op: Option<Op>) -> bool {
        let Some(grant) = self.state.granted.as_mut().filter(|g| g.thread == i) else { return false };
        let ends = match (grant.until, op) {
            (Until::Released(lock), Some(Op::Released(object))) => object == lock,
            (Until::Released(_), _) => false,
            (Until::Acquired, _) => true,
            (Until::Acquire, op) => {
                if matches!(op, Some(Op::Acquire(_))) {
                    grant.until = Until::Acquired;
                }
                false
            }
        };
        if ends {
            self.state.granted = None;
        }
        !ends
    }

    /// The thread the schedule preempts to at the current synchronization
    /// count, if any.
    fn preemption(&self) -> Option<usize> {
        self.opts.schedule.preemption_at(self.state.sync_count).and_then(|rec| self.state.by_rec.get(&rec).copied())
    }

    /// Adds the synchronization operation thread `i` is at to the sync
    /// trace; `then` is the thread the default replay runs next.
    fn record_sync(&mut self, i: usize, then: usize, granted: bool) {
        if !self.state.sync_trace.wanted() {
            return;
        }
        let switchable = (0..self.state.threads.len()).filter(|&j| !granted && j != i && self.switchable(j));
        let record = SyncRecord {
            n: self.state.sync_count,
            tid: self.state.threads[i].rec,
            label: self.site(i),
            next_event: self.state.pos,
            last_event: self.state.threads[i].last_event,
            then: self.state.threads[then].rec,
            switchable: switchable.map(|j| Switchable { tid: self.state.threads[j].rec, label: self.site(j) }).collect(),
        };
        self.state.sync_trace.push(record);
    }

    /// The thread to run at thread `i`'s synchronization point when the
    /// log's next thread cannot run: the free thread (`i` included) that
    /// was last switched to longest ago. The threads that run while the
    /// log's next thread waits take turns at their synchronization
    /// points, as they would progress side by side on several cores.
    fn rotate(&self, i: usize) -> usize {
        let threads = &self.state.threads;
        (0..threads.len()).filter(|&j| j == i || self.free(j)).min_by_key(|&j| (threads[j].last_ran, j)).unwrap_or(i)
    }

    /// Whether thread `j` is stopped where it can simply be resumed.
    fn free(&self, j: usize) -> bool {
        matches!(self.state.threads[j].at, At::Ready | At::Deliver(_) | At::Woken(_))
    }

    /// The thread to run when the current one cannot: the owner of the
    /// log's next event if it can run; else the free thread whose next
    /// event comes first in the log (seed 000's deterministic next thread);
    /// else a deadlock.
    fn pick(&mut self) -> std::result::Result<usize, Failure> {
        if let Some(j) = self.next_owner().filter(|&j| self.runnable(j)) {
            return Ok(j);
        }
        let free = (0..self.state.threads.len())
            .filter(|&j| self.free(j))
            .min_by_key(|&j| (self.next_event_of(self.state.threads[j].rec), j));
        if let Some(j) = free {
            return Ok(j);
        }
        let expected = self.trace.events.get(self.state.pos).map_or("nothing (the log is exhausted)".into(), |e| e.to_string());
        let threads = self.state.threads.iter().map(|t| self.describe_thread(t)).collect();
        let label = self.next_owner().map_or(0, |j| self.site(j));
        Err(Failure::Deadlock { at: self.position(0), label, expected, threads })
    }

    fn describe_thread(&self, t: &Thread) -> String {
        let state = match t.at {
            At::Ready | At::Deliver(_) | At::Woken(_) | At::Sync(_) => "runnable".to_string(),
            At::Entry(e) => format!("waiting to run {} (not its turn in the log)", syscalls::name(e.nr)),
            At::Fault(s) => format!("waiting to take {} (not its turn in the log)", s.as_str()),
            At::Blocked(w) => format!("blocked in futex wait on {:#x}", w.uaddr),
            At::Exited => "exited".to_string(),
        };
        format!("thread {} (pc {:#x}): {state}", t.rec, t.regs.rip)
    }

    /// The thread the log's next event belongs to, if it exists.
    fn next_owner(&self) -> Option<usize> {
        let e = self.trace.events.get(self.state.pos)?;
        self.state.by_rec.get(&e.tid).copied()
    }

    /// Index of thread `rec`'s next event at or after the current one.
    fn next_event_of(&self, rec: Tid) -> usize {
        let Some(list) = self.thread_events.get(&rec) else { return usize::MAX };
        let k = list.partition_point(|&e| e < self.state.pos);
        list.get(k).copied().unwrap_or(usize::MAX)
    }

    /// Whether thread `j` can run: not gone, and not blocked unless a
    /// signal due now interrupts its wait.
    fn runnable(&self, j: usize) -> bool {
        match self.state.threads[j].at {
            At::Exited => false,
            At::Blocked(_) => self.async_signal_due(j).is_some_and(|s| self.can_interrupt_wait(j, s)),
            _ => true,
        }
    }

    /// Whether switching to thread `j` would run some of its code: it is
    /// free, or about to make a futex call; a thread waiting for its turn
    /// at a logged event would only hand control back.
    fn switchable(&self, j: usize) -> bool {
        self.free(j)
            || match self.state.threads[j].at {
                At::Sync(_) => true,
                At::Entry(e) => e.nr == libc::SYS_futex && !syscalls::is_logged_futex(&e.args),
                _ => false,
            }
    }

    /// The program point thread `i` is about to execute: at a pthread
    /// function's entry breakpoint, its caller, which tells one lock or
    /// wait of the program from another; elsewhere its pc.
    fn site(&self, i: usize) -> u64 {
        let t = &self.state.threads[i];
        t.caller.unwrap_or(t.regs.rip)
    }

    fn position(&self, i: usize) -> Position {
        Position { event: self.state.pos as u64, tid: self.state.threads[i].rec, steps: self.state.threads[i].steps }
    }

    /// [`Report::fingerprint`] of the replay stopping with `outcome`.
    fn fingerprint(&self, outcome: &Outcome) -> u64 {
        let how = match outcome {
            Outcome::Valid { .. } => String::new(),
            Outcome::Invalid(f) => f.to_string(),
        };
        let states: Vec<String> = self.state.threads.iter().map(|t| format!("{:?}", t.at)).collect();
        let threads = self.state.threads.iter().zip(&states).map(|(t, s)| (t.rec, &t.regs, s.as_bytes()));
        digest::hash_point(self.state.pos as u64, how.as_bytes(), threads)
    }

    /// Records a scheduling decision in the digest.
    fn note(&mut self, cur: usize) {
        let Some(d) = self.state.digest.as_mut() else { return };
        d.add(self.state.pos as u64, self.state.threads[cur].rec, self.state.threads.iter().map(|t| (t.rec, &t.regs)));
    }

    /// Skips the syscall thread `i` is entering and makes it return `result`.
    fn finish_syscall(&mut self, i: usize, result: i64) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.orig_rax = u64::MAX;
        ptrace::setregs(t.tid, t.regs)?;
        self.execute(i)?;
        self.set_result(i, result)
    }

    /// Runs the syscall thread `i` is entering to its exit stop.
    fn execute(&mut self, i: usize) -> Result<Regs> {
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceSyscall(_) => {}
            other => bail!("thread {tid} did not complete its syscall: {other:?}"),
        }
        let regs = ptrace::getregs(tid)?;
        self.state.threads[i].regs = regs;
        self.state.threads[i].at = At::Ready;
        Ok(regs)
    }

    fn set_result(&mut self, i: usize, result: i64) -> Result<()> {
        let t = &mut self.state.threads[i];
        t.regs.rax = result as u64;
        ptrace::setregs(t.tid, t.regs)?;
        Ok(())
    }

    /// Lets every remaining thread die and returns how the process ended:
    /// waits until the thread-group leader is reported (after all the
    /// other threads), not until no child is left, since checkpoint
    /// templates are weft's children too. Only this thread's tracees are
    /// waited for (__WNOTHREAD): other replays may run in other threads.
    fn drain(&mut self) -> Result<ProcessEnd> {
        let mut end = None;
        while end.is_none() {
            match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == self.pid => end = Some(ProcessEnd::Exited(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == self.pid => end = Some(ProcessEnd::Killed(sig as i32)),
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => {}
                Ok(status) => {
                    if let Some(pid) = status.pid() {
                        let _ = ptrace::cont(pid, None);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(Errno::ECHILD) => break,
                Err(e) => return Err(e.into()),
            }
        }
        for t in &mut self.state.threads {
            t.at = At::Exited;
        }
        end.ok_or_else(|| anyhow!("the replayed process vanished without an exit status"))
    }

    /// Compares how the replay ended with the log's end event.
    fn finish(&mut self, end: ProcessEnd) -> Result<Outcome> {
        let observed = match end {
            ProcessEnd::Exited(code) => format!("exited with status {code}"),
            ProcessEnd::Killed(signo) => {
                let d = self.state.last_delivery.unwrap_or_default();
                format!("killed by {} in thread {} at pc {:#x}", signal_name(signo), d.rec, d.pc)
            }
        };
        let Some(expected) = self.trace.events.get(self.state.pos) else {
            return Ok(Outcome::Invalid(self.incomplete()));
        };
        let EventKind::End(recorded) = &expected.kind else {
            return Ok(Outcome::Invalid(Failure::WrongEnd {
                event: self.state.pos as u64,
                expected: format!("event #{} {expected}", self.state.pos),
                observed: format!("the program {observed}"),
            }));
        };
        let same = match (recorded, end) {
            (End::Exited(a), ProcessEnd::Exited(b)) => *a == b,
            (End::Killed { signo, tid, pc, .. }, ProcessEnd::Killed(s)) => {
                let d = self.state.last_delivery.unwrap_or_default();
                *signo == s && d.rec == *tid && (d.pc == *pc || !d.exact)
            }
            _ => false,
        };
        if !same {
            return Ok(Outcome::Invalid(Failure::WrongEnd { event: self.state.pos as u64, expected: recorded.to_string(), observed }));
        }
        Ok(Outcome::Valid { end: recorded.clone(), events: self.state.pos as u64 + 1 })
    }

    /// The log ran out before the replay did: every readable event was
    /// matched, and the trace says why there are no more.
    fn incomplete(&self) -> Failure {
        let why = self.trace.damage.as_ref().map_or("the trace has no end event".into(), |d| d.to_string());
        Failure::IncompleteTrace { matched: self.state.pos as u64, why }
    }

    /// Ends the replayed process after a failure.
    fn kill(&mut self) {
        let _ = nix::sys::signal::kill(self.pid, NixSignal::SIGKILL);
        let _ = self.drain();
    }
}

/// Futex words in tracee memory.
struct MemWords<'a>(&'a Memory);

impl futex::Words for MemWords<'_> {
    fn read_u32(&mut self, addr: u64) -> Option<u32> {
        let b = self.0.read(addr, 4).ok()?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }
    fn write_u32(&mut self, addr: u64, value: u32) -> Option<()> {
        self.0.write(addr, &value.to_le_bytes()).ok()
    }
}
