//! A replay session: re-executes a recorded program on one core, with
//! exactly one tracee thread running user code at any moment, and validates
//! it against the log (seed 000 §3.2, Fig. 8, Definition 1).
//!
//! Every tracee thread sits in a ptrace stop except the one the scheduler
//! resumes, and that one is resumed with PTRACE_SYSCALL, so it stops again
//! at its next syscall: no thread ever blocks in the kernel. Control moves
//! only at scheduling points: logged events (seed 000's *pevnt* tests),
//! futex calls (*psync* tests; futex is emulated in [`crate::futex`]),
//! thread start and exit, and yield points (sched_yield, a futex wait
//! that returns at once), where a spinning thread lets another run.

mod async_signal;
mod control;
mod emulate;
mod exact_signal;
mod scheduler;
mod inspect;
mod protect;
mod remap;
mod snapshot;
mod spin;
pub use spin::SpinWords;
mod step;
mod stuck;
mod traps;
mod vfork;

pub(crate) use scheduler::{Goal, Halt};
pub(crate) use snapshot::Snapshot;
pub(crate) use traps::Watchpoints;

use crate::access::AccessTracing;
use crate::word_alias::WordAliases;
use crate::checkpoint::{AltStack, Checkpoints};
use crate::digest::Digest;
use crate::exec_alias::ExecAlias;
use crate::failure::Failure;
use crate::lessons::Lessons;
use crate::fds::Fds;
use crate::futex::{Queues, Wait};
use crate::log_index::LogIndex;
use crate::schedule::Schedule;
use crate::sync_points::{Op, SyncPoints};
use crate::sync_trace::{SyncRecord, SyncTrace};
use crate::watchdog::Watchdog;
use anyhow::{anyhow, bail, Context, Result};
use nix::sys::ptrace;
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weft_record::event::End;
use weft_record::seccomp;
use weft_record::tracee::{self, Launch, Memory, Regs};
use weft_record::{Tid, Trace};

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Preemptions beyond the log order (empty: seed 000's initial replay).
    pub schedule: Schedule,
    /// Compute a digest line at every scheduling point ([`Report::digest`]).
    pub digest: bool,
    /// How long the replay may go without matching a logged event before
    /// it stops and reports a livelock (time paused for a debugger does
    /// not count).
    pub livelock_timeout: Duration,
    /// Output events with a lower index are not echoed to our stdout and
    /// stderr: an earlier replay of the same trace already showed them
    /// (exploration replays the same prefix many times).
    pub echo_from: usize,
    /// How many of the most recent synchronization records an invalid
    /// replay returns (0: none).
    pub sync_trace_len: usize,
    /// Trace memory accesses by page protection from a synchronization
    /// count on ([`Report::accesses`]; fine-grained exploration).
    pub trace_accesses: Option<AccessTracing>,
    /// What earlier replays of the trace learned ([`Lessons`]: spin
    /// words, wakes whose logged waker goes first, words whose wakes wait
    /// for waiters), acted on from the start; the [`crate::Replayer`]
    /// passes them on.
    pub lessons: Lessons,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            schedule: Schedule::default(),
            digest: false,
            livelock_timeout: Duration::from_secs(120),
            echo_from: 0,
            sync_trace_len: 0,
            trace_accesses: None,
            lessons: Lessons::default(),
        }
    }
}

/// The result of a replay.
#[derive(Debug, Clone, PartialEq)]
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
    /// When the recording ended by SIGKILL from outside (a hung program,
    /// killed), what each thread was stuck on where the replay ended it
    /// the same way: one line per live thread, the lock it is blocked on,
    /// its holder, its source line. Empty otherwise.
    pub stuck: Vec<String>,
    /// With [`ReplayOptions::trace_accesses`]: the accesses traced, in
    /// the order they were made.
    pub accesses: Vec<crate::access::Access>,
    /// What is known at the end: [`ReplayOptions::lessons`], and, when the
    /// replay failed, what it learned.
    pub lessons: Lessons,
    /// The log index below which every event's output is on weft's stdout
    /// and stderr already ([`ReplayOptions::echo_from`]): where this
    /// replay failed, or an earlier run it started over from
    /// ([`crate::Replayer::replay`]) when that got further; `usize::MAX`
    /// once valid. The next attempt echoes from there, so that no line is
    /// printed twice.
    pub echoed_before: usize,
}

/// Where a stopped thread is, as far as the scheduler is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    /// Stopped where PTRACE_SYSCALL resumes it: free to run.
    Ready,
    /// Free to run; resuming delivers this signal.
    Deliver(i32),
    /// At the entry of a syscall that is a scheduling point, not yet handled.
    Entry(Entry),
    /// At a signal-delivery-stop, not yet handled.
    Fault(i32),
    /// At a synchronization point (a pthread breakpoint), not yet handled.
    Sync(Op),
    /// Blocked in an emulated futex wait, at its syscall-entry stop.
    Blocked(Wait),
    /// Released from a futex wait; the syscall returns this value.
    Woken(i64),
    /// Set aside: it ran on past its slice ([`TurnSlice`]) without a
    /// scheduling point while the log's next event belonged to another
    /// thread that could run (a thread that spins until its process is
    /// killed, as the recorded one was, or one that computes for long
    /// after its last event), or, its own event next, while another
    /// thread of its process could run or was set aside ([`Thread::spun`]).
    /// It runs again when its own event is the log's next, when the
    /// spinner it was set aside for is set aside in turn, or when no
    /// other thread can, so it cannot hold the others up on one core.
    Parked,
    /// Gone.
    Exited,
}

/// How long a thread may run without a scheduling point, while another
/// thread's event is due, before it is parked ([`At::Parked`]).
const PARK_AFTER: Duration = Duration::from_millis(200);
/// The shortest slice [`TurnSlice`] comes down to.
const PARK_AFTER_MIN: Duration = Duration::from_millis(1);
/// How many logged events a park may come after the one before and still
/// halve the slice ([`TurnSlice`]).
const TURN_EVENTS: usize = 8;

/// The slice a thread that may be parked runs for. Threads that hand a
/// turn to each other through memory alone, with no syscall in their
/// spin (a `pause` loop on an atomic word), reach no scheduling point:
/// on one core each takes its turn only as the other's slice ends, one
/// slice per handoff. So a park that comes within [`TURN_EVENTS`] logged
/// events of the one before (threads taking turns, each turn a few calls
/// at most) halves the next slice, down to [`PARK_AFTER_MIN`]; farther
/// apart, the slice is [`PARK_AFTER`] again, so that a thread computing
/// for long after its last event is not cut up. Within [`SPIN_EVENTS`]
/// logged events of a spin the check found in the log's next thread
/// ([`Session::check_spin`]), parks halve it however far apart, unless a
/// check found a computation since: a thread that hands work to another
/// and spins until it is done (Redis's main thread and its I/O threads)
/// parks once per round of many events. The bound keeps a spin early in
/// a run from cutting up the computations of its later phases.
#[derive(Debug, Clone, Copy)]
struct TurnSlice {
    /// The log position at the last park.
    pos: usize,
    slice: Duration,
    /// The log position at the last spin the check found, unless it found
    /// a computation after it.
    spin: Option<usize>,
}

/// How many logged events after a spin found a far park still halves
/// the slice ([`TurnSlice`]): a round of a server's batch of replies.
const SPIN_EVENTS: usize = 1024;

impl TurnSlice {
    fn new() -> Self {
        TurnSlice { pos: usize::MAX, slice: PARK_AFTER, spin: None }
    }

    /// The slice for a run that starts at log position `pos`.
    fn at(&self, pos: usize) -> Duration {
        let near = |since: usize, within: usize| pos >= since && pos - since <= within;
        if near(self.pos, TURN_EVENTS) || self.spin.is_some_and(|at| near(at, SPIN_EVENTS)) {
            self.slice
        } else {
            PARK_AFTER
        }
    }

    /// A thread was parked at log position `pos`.
    fn parked(&mut self, pos: usize) {
        self.slice = (self.at(pos) / 2).max(PARK_AFTER_MIN);
        self.pos = pos;
    }

    /// The spin check found the log's next thread spinning at log
    /// position `pos`.
    fn spins(&mut self, pos: usize) {
        self.spin = Some(pos);
    }

    /// The spin check found the log's next thread computing: parks far
    /// apart give the full slice again.
    fn computes(&mut self) {
        self.spin = None;
    }
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

/// Why a thread runs on past its synchronization points
/// ([`Session::runs_on`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunOn {
    /// It woke the thread whose wait returns at this index of the log
    /// ([`Session::wakes_next_waiter`]).
    Waker { woken: usize },
    /// It has no event left but, at most, a thread exit the log places
    /// after the exit_group of another thread that ends its process
    /// ([`Session::ender_before`]).
    Ender,
    /// It runs on past its event, to its next one, as on a core of its
    /// own ([`crate::Lessons::run_on_all`]).
    OwnCore,
}

/// What the replay did at an event point.
enum Observed {
    Syscall(Entry),
    Signal(i32, u64),
    Rdtsc { pc: u64, len: u8, rdtscp: bool },
}

/// A process of the replayed tree (DESIGN.md, "Process trees"): the
/// first one, and every one a recorded fork, vfork or non-thread clone
/// made. Its threads run one at a time like all others.
#[derive(Clone)]
struct Proc {
    /// Recorded pid.
    rec: Tid,
    /// Replay pid.
    pid: Pid,
    /// Its memory (shared by the snapshots taken while it lives).
    mem: Arc<Memory>,
    /// Its pthread synchronization points, and (in the first process) the
    /// debugger's breakpoints.
    sync: SyncPoints,
    /// Its descriptors that refer to the recording's stdout and stderr
    /// (a forked child starts with a copy of its parent's).
    fds: Fds,
    /// It has not ended.
    live: bool,
    /// The address of its in-process runtime's control block, once the
    /// runtime said hello (weft_runtime.h).
    runtime_control: Option<u64>,
    /// Where in the log its runtime went off, once the replay is past it
    /// (a forked child's went off with its parent's).
    runtime_off_at: Option<usize>,
    /// The value last written to its runtime's `disabled` flag.
    runtime_disabled: bool,
    /// It shares its address space with another process of the tree
    /// (clone(2) with CLONE_VM and no CLONE_THREAD): that one may have
    /// written the flag since, so [`Proc::runtime_disabled`] is no guide.
    shares_vm: bool,
    /// It called madvise(MADV_WIPEONFORK): a checkpoint's fork would hold
    /// zeros where it holds data, so none is taken ([`Session::madvise`]).
    wipe_on_fork: bool,
    /// While it is a vfork child that has not exec'd or exited yet: its
    /// parent, whose memory its writes reach (vfork.rs).
    vfork_parent: Option<usize>,
    /// The words a thread of it was last seen spinning on (spin.rs).
    spin: Vec<spin::SpinWord>,
}

#[derive(Clone)]
struct Thread {
    /// Recorded tid.
    rec: Tid,
    /// Its process, an index into [`State::procs`].
    proc: usize,
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
    /// The log's position when it was spawned (after its spawn event; 0
    /// for the program's first thread).
    spawned_at: usize,
    /// At an acquire entry breakpoint, with a sync trace kept: the
    /// caller's address (the return address on its stack), read once.
    caller: Option<u64>,
    /// The switch that last gave it the core ([`State::switches`]).
    last_ran: u64,
    /// Its alternate signal stack, for checkpoints.
    altstack: Option<AltStack>,
    /// The stack a sigaltstack call it is in sets, until the call returns.
    altstack_call: Option<Option<AltStack>>,
    /// The syscall a signal interrupted with ERESTART_RESTARTBLOCK, which
    /// the kernel resumes through restart_syscall after the handler (or
    /// at once, for a signal without one): that call is what the thread's
    /// restart_syscall is matched as (the recorder logs it so).
    restart_block: Option<i64>,
    /// The int3 at its pc stopped it (a synchronization point's or the
    /// debugger's): resuming steps over the original instruction. A
    /// thread that single-stepped onto an int3 executes it instead.
    taken: Option<u64>,
    /// It stopped at a debugger breakpoint that shares its int3 with a
    /// synchronization point: executing the int3 again is that point.
    reported: Option<u64>,
    /// The point a parked breakpoint would give next, after the runtime
    /// marker it matched (`sync_points::marker_point`): handled before
    /// the thread runs on.
    next_point: Option<Op>,
    /// At a runtime marker, the point before it is done.
    marked: bool,
    /// Why it keeps the core through its synchronization points up to
    /// its next syscall or futex call, if it does ([`Session::runs_on`]).
    runs_on: Option<RunOn>,
    /// The futex word of a runtime wait the log does not hold, which the
    /// replay lets return EAGAIN once another thread changed the word
    /// ([`Session::unlogged_wait`]): its return marker is not an event.
    unlogged_wait: Option<u64>,
    /// The log index of the wake before which it was last picked to run
    /// on into its wait ([`Session::settler_before`]): once per wake.
    settled_before: Option<usize>,
    /// The log index of the event it was handed over at, the other thread
    /// taking the core right after it matched: its code from there on has
    /// not run yet ([`Session::learn_run_on`]).
    waits_after: Option<usize>,
    /// Sits at the entry stop of a syscall the replay skipped (orig_rax
    /// -1, rax its result), its exit stop not taken: the thread's next run
    /// to its next syscall skips that stop (PTRACE_SYSEMU,
    /// [`Session::advance`]); anything else takes it first
    /// ([`Session::settle`]). Each skipped call cost two stops, and most
    /// of a replay's time is the context switches of its stops.
    exit_due: bool,
    /// The program's own seccomp filters that apply to it, oldest first
    /// (inherited from the thread that made it, as clone(2) does).
    filters: Vec<Arc<seccomp::Filter>>,
    /// It was set aside while its own event was the log's next: it ran on
    /// past its slice without a scheduling point, spinning on memory
    /// another thread of its process changes without a logged call (a
    /// counter Redis's I/O threads clear). Before it runs again, such a
    /// thread runs to its next point ([`Session::pick`]).
    spun: bool,
    /// The debug registers (a bit per register) that watch its process's
    /// spin words for its writes (spin.rs).
    spin_watch: u8,
}

impl Thread {
    /// A thread that has just started (or the program's first), ready to
    /// run, with no alternate signal stack (clone(2) clears it).
    fn new(rec: Tid, proc: usize, tid: Pid, regs: Regs, clear_child_tid: u64) -> Self {
        Thread {
            rec,
            proc,
            tid,
            at: At::Ready,
            regs,
            clear_child_tid,
            steps: 0,
            woken: false,
            last_event: None,
            spawned_at: 0,
            caller: None,
            last_ran: 0,
            altstack: None,
            altstack_call: None,
            restart_block: None,
            taken: None,
            reported: None,
            next_point: None,
            marked: false,
            runs_on: None,
            unlogged_wait: None,
            settled_before: None,
            waits_after: None,
            exit_due: false,
            filters: Vec::new(),
            spun: false,
            spin_watch: 0,
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
    /// It stopped for the debugger.
    Halt(Halt),
}

pub(crate) struct Session<'a> {
    trace: &'a Trace,
    opts: ReplayOptions,
    /// Each recorded thread's events and the lock words.
    log: Arc<LogIndex>,
    watchdog: Watchdog,
    /// Where checkpoints go (`None`: none are taken).
    checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
    /// When the last checkpoint was taken or resumed from, and at which
    /// synchronization count.
    since_checkpoint: (Instant, u64),
    /// Whether the replay resumed from a checkpoint.
    resumed: bool,
    /// The thread the scheduler runs.
    cur: usize,
    /// A synchronization point of `cur` still to handle: where a replay
    /// resumed from an exploration checkpoint starts (its operation, not
    /// yet counted).
    pending: Option<Option<Op>>,
    /// The debugger's watchpoints, in every thread's debug registers.
    watchpoints: Watchpoints,
    /// The search for the instruction an asynchronous signal hit, while
    /// its breakpoint is armed (`exact_signal.rs`).
    hunt: Option<exact_signal::Hunt>,
    /// Debugger breakpoints whose address is not mapped yet (a library
    /// the replay has not loaded at this point): set after each file mmap.
    pending_breakpoints: std::collections::BTreeSet<u64>,
    /// Interactive: stop before the recorded end (the exit_group, the
    /// fatal signal) instead of ending the process, and at signals.
    interactive: bool,
    /// The trace holds the synchronization order (in-process recording,
    /// seed 003 §3.2): a thread at a synchronization point runs on to its
    /// next logged event, whose place in the log says when it may go.
    sync_logged: bool,
    /// What an interactive replay stops for after the scheduling point
    /// just handled (a recorded signal, the end).
    halt: Option<Halt>,
    /// The current [`Goal`] stops at thread creations and exits.
    thread_halts: bool,
    /// Thread creations and exits to report, one at each segment start.
    deferred: std::collections::VecDeque<Halt>,
    /// The process has been reaped ([`Session::drain`]).
    ended: bool,
    /// [`Report::stuck`].
    stuck: Vec<String>,
    state: State,
}

/// What a replay has done and decided so far: everything about it that
/// changes as it runs, which a checkpoint keeps to resume it.
#[derive(Clone)]
struct State {
    /// The processes of the tree, the first one first.
    procs: Vec<Proc>,
    /// How the first process ended, once it has while others live on.
    root_end: Option<ProcessEnd>,
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
    digest: Option<Digest>,
    warned: HashSet<i64>,
    /// A seccomp filter's action the replay does not take was warned
    /// about ([`Session::refused_by_filter`]).
    filter_warned: bool,
    /// The last signal delivered, to check a fatal end.
    last_delivery: Option<Delivery>,
    /// Signals (recorded tid, signo) made pending early, with the one
    /// before them that the kernel gave together with them
    /// (async_signal.rs, `send_together`): the kill that sent one in the
    /// recording, later in the log, is not made again.
    sent_early: HashSet<(Tid, i32)>,
    /// Processes (indices) another one sent SIGKILL to while their threads
    /// still had logged events ahead: kill(2) returns before the signal
    /// kills, and the recording logged their calls after it (a shell or
    /// GNU parallel killing a child that is still starting up). Each is
    /// killed once its threads have none left ([`Session::kill_finished`]).
    kill_pending: Vec<usize>,
    sync_trace: SyncTrace,
    /// Address of a `syscall` instruction in the tracee (remote syscalls
    /// for checkpoints), once a thread has stopped at one.
    syscall_insn: Option<u64>,
    /// Switches so far.
    switches: u64,
    /// Scheduling points handled so far: the index of the current
    /// segment (the run of one thread between two scheduling points).
    points: u64,
    /// Thread `cur` has run part of the current segment (a debugger stop
    /// within it), so the loop is not at the segment's start.
    mid_segment: bool,
    /// The single step a debugger asked for went through a scheduling
    /// point (a syscall, a pthread breakpoint): it is done when its
    /// thread next runs.
    stepping: Option<usize>,
    /// Futex words the replay allocated elsewhere than the recording did.
    aliases: WordAliases,
    /// Page protection: access tracing and race reversals (a forked
    /// checkpoint keeps the pages' protection, and this its meaning).
    protect: protect::Protect,
    /// How long the next thread that may be parked runs before it is.
    turn_slice: TurnSlice,
    /// The lessons the replay started with and those it learned
    /// (scheduler.rs: `wake_taken`, `learn_waiters_first`, `learn_run_on`);
    /// the spin words learned are their processes' ([`Proc::spin`]).
    lessons: Lessons,
}

impl<'a> Session<'a> {
    /// Starts the program as recorded: argv, env, cwd, AT_RANDOM, ASLR off.
    pub(crate) fn launch(
        trace: &'a Trace,
        opts: &ReplayOptions,
        log: Arc<LogIndex>,
        checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
    ) -> Result<Self> {
        let meta = &trace.meta;
        let exe = executable(trace)?;
        let alias = exec_alias(&exe, &meta.exec_path);
        let run = alias.as_ref().map_or(exe.as_path(), ExecAlias::path);
        let cstr = |b: &[u8]| CString::new(b).context("NUL byte in recorded argv or env");
        let cwd = Path::new(OsStr::from_bytes(&meta.cwd));
        let launch = Launch {
            exe: cstr(run.as_os_str().as_encoded_bytes())?,
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
        if alias.is_some() {
            // The recorded bytes over the alias's: the stack as recorded.
            mem.write(tracee::execfn(&mem, regs.rsp)?, &meta.exec_path)?;
        }
        let main = Thread::new(meta.pid, 0, pid, regs, 0);
        let root = Proc { rec: meta.pid, pid, mem: Arc::new(mem), sync: SyncPoints::default(), fds: Fds::default(), live: true, runtime_control: None, runtime_off_at: None, runtime_disabled: false, shares_vm: false, wipe_on_fork: false, vfork_parent: None, spin: opts.lessons.spin_words.of(meta.pid).to_vec() };
        let state = State {
            procs: vec![root],
            root_end: None,
            threads: vec![main],
            by_rec: HashMap::from([(meta.pid, 0)]),
            pos: 0,
            sync_count: 0,
            granted: None,
            futexes: Queues::default(),
            digest: opts.digest.then(Digest::default),
            warned: HashSet::new(),
            filter_warned: false,
            last_delivery: None,
            sent_early: HashSet::new(),
            kill_pending: Vec::new(),
            sync_trace: SyncTrace::new(opts.sync_trace_len),
            syscall_insn: None,
            switches: 0,
            points: 0,
            mid_segment: false,
            stepping: None,
            aliases: WordAliases::default(),
            protect: protect::Protect::new(opts.trace_accesses, opts.schedule.reversals()),
            turn_slice: TurnSlice::new(),
            lessons: opts.lessons.clone(),
        };
        let mut session = Self::new(trace, opts, log, checkpoints, state);
        session.arm_lock_watches()?;
        Ok(session)
    }

    /// A session over the process `pid` in `state`.
    fn new(
        trace: &'a Trace,
        opts: &ReplayOptions,
        log: Arc<LogIndex>,
        checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
        state: State,
    ) -> Self {
        let watchpoints = Watchpoints::for_locks(log.watched());
        Session {
            trace,
            opts: opts.clone(),
            log,
            watchdog: Watchdog::start(opts.livelock_timeout),
            checkpoints,
            since_checkpoint: (Instant::now(), state.sync_count),
            resumed: false,
            cur: 0,
            pending: None,
            watchpoints,
            hunt: None,
            pending_breakpoints: Default::default(),
            interactive: false,
            sync_logged: trace.events.iter().any(|e| matches!(e.kind, weft_record::EventKind::Sync(_))),
            halt: None,
            thread_halts: false,
            deferred: std::collections::VecDeque::new(),
            ended: false,
            stuck: Vec::new(),
            state,
        }
    }

    /// The memory of thread `i`'s process.
    fn mem(&self, i: usize) -> &Memory {
        &self.state.procs[self.state.threads[i].proc].mem
    }

    /// The first process: the one the debugger shows.
    fn root(&self) -> &Proc {
        &self.state.procs[0]
    }

    /// What is known now: the lessons the replay started with and those it
    /// learned.
    pub(crate) fn lessons(&self) -> Lessons {
        Lessons { spin_words: self.spin_words(), ..self.state.lessons.clone() }
    }

    /// Runs the replay to its end and reports.
    pub(crate) fn replay(mut self) -> Result<Report> {
        let resumed_at = self.resumed.then_some(self.state.sync_count);
        let outcome = self.run();
        let fingerprint = outcome.as_ref().map_or(0, |o| self.fingerprint(o));
        if !matches!(outcome, Ok(Outcome::Valid { .. })) {
            self.kill();
        }
        // A valid replay's new lessons did not matter: it needed none.
        let lessons = if matches!(outcome, Ok(Outcome::Valid { .. })) { self.opts.lessons.clone() } else { self.lessons() };
        let echoed_before = match &outcome {
            Ok(Outcome::Invalid(f)) => f.echoed_before().max(self.opts.echo_from),
            _ => usize::MAX,
        };
        Ok(Report {
            lessons,
            echoed_before,
            fingerprint,
            outcome: outcome?,
            sync_trace: std::mem::take(&mut self.state.sync_trace).into_vec(),
            digest: self.state.digest.take().map(Digest::into_lines).unwrap_or_default(),
            resumed_at,
            stuck: std::mem::take(&mut self.stuck),
            accesses: self.state.protect.take_accesses(),
        })
    }
}

/// When the replay runs `exe` instead of the recorded `exec_path`: a path
/// to it of the recorded length ([`ExecAlias`]), so that the initial stack
/// is laid out as recorded. `None` when `exe` is the recorded path, or (with
/// a warning) when no alias of that length can be made.
fn exec_alias(exe: &Path, exec_path: &[u8]) -> Option<ExecAlias> {
    if exe.as_os_str().as_bytes() == exec_path {
        return None;
    }
    ExecAlias::new(exe, exec_path.len())
        .map_err(|e| eprintln!("weft: warning: {e:#}; the program's initial stack differs from the recording's"))
        .ok()
}

/// The executable to run: the recorded path when its contents are
/// unchanged (so the initial stack is laid out exactly as recorded),
/// else the trace's copy. The dynamic loader must be unchanged.
pub(crate) fn executable(trace: &Trace) -> Result<PathBuf> {
    let meta = &trace.meta;
    let same = |original: &Path, copy: &[u8]| std::fs::read(original).is_ok_and(|a| a == copy);
    let exe_file = meta.exec_files.first().ok_or_else(|| anyhow!("trace has no executable copy"))?;
    let copy = trace.file_path(&exe_file.copy);
    let exe_bytes = trace.copy_bytes(exe_file)?;
    for f in &meta.exec_files[1..] {
        let path = Path::new(OsStr::from_bytes(&f.path));
        if !same(path, &trace.copy_bytes(f)?) {
            bail!("{} changed since the recording; weft cannot replay with a different dynamic loader", path.display());
        }
    }
    let original = Path::new(OsStr::from_bytes(&meta.exe));
    if same(original, &exe_bytes) {
        Ok(PathBuf::from(OsStr::from_bytes(&meta.exec_path)))
    } else {
        let how = if original.exists() { "changed" } else { "was deleted" };
        eprintln!("weft: warning: {} {how} since the recording; replaying the trace's copy", original.display());
        Ok(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parks a few events apart halve the slice, down to the floor; one
    /// far from the last gives the full slice again.
    #[test]
    fn turn_slices_shrink_while_threads_take_turns() {
        let mut t = TurnSlice::new();
        assert_eq!(t.at(0), PARK_AFTER);
        t.parked(10);
        assert_eq!(t.at(10), PARK_AFTER / 2);
        t.parked(10 + TURN_EVENTS);
        assert_eq!(t.at(10 + TURN_EVENTS), PARK_AFTER / 4);
        for _ in 0..20 {
            t.parked(20);
        }
        assert_eq!(t.at(21), PARK_AFTER_MIN);
        assert_eq!(t.at(21 + TURN_EVENTS), PARK_AFTER);
        t.parked(100);
        assert_eq!(t.at(100), PARK_AFTER / 2);
    }

    /// Within SPIN_EVENTS of a spin found, parks halve the slice however
    /// far apart, a spinner's and those of the threads run for its sake
    /// alike; farther on, or once a computation is found, far parks get
    /// the full slice again.
    #[test]
    fn turn_slices_shrink_while_a_thread_spins_between_rounds() {
        let mut t = TurnSlice::new();
        for round in 1..=20 {
            t.spins(round * 100);
            t.parked(round * 100 + 50);
        }
        assert_eq!(t.at(2000 + SPIN_EVENTS), PARK_AFTER_MIN);
        assert_eq!(t.at(2001 + SPIN_EVENTS), PARK_AFTER);
        t.computes();
        assert_eq!(t.at(2100), PARK_AFTER);
        assert_eq!(t.at(2050 + TURN_EVENTS), PARK_AFTER_MIN);
    }
}
