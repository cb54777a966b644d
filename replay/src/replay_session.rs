//! [`ReplaySession`]: the interactive replay session (see `debug.rs` for
//! its vocabulary). It drives one replayed process (the engine in
//! `session/`), keeps the [`Timeline`] of checkpoints it takes as the user
//! moves forwards, knows where it is as a [`Mark`], and moves backwards by
//! restoring a checkpoint and replaying forwards (`reverse.rs`).

use crate::debug::{Registers, Resume, SessionOptions, Stop, UserCheckpoint, Watchpoint, When};
use crate::epoch::{Epoch, Epochs};
use crate::failure::Failure;
use crate::loader::{self, Library};
use crate::lessons::Restarts;
use crate::log_index::LogIndex;
use crate::mark::{Leg, Mark, TrapSet};
use crate::session::{Goal, Halt, Session, Watchpoints};
use crate::timeline::{Saved, Timeline};
use crate::{Outcome, ReplayOptions};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use weft_record::{End, Tid, Trace};

/// An interactive replay of one trace. Created at the start of the
/// recording: the first thread stopped at the program's first
/// instruction (the dynamic loader's entry).
pub struct ReplaySession<'a> {
    pub(crate) trace: &'a Trace,
    opts: ReplayOptions,
    pub(crate) sopts: SessionOptions,
    log: Arc<LogIndex>,
    pub(crate) live: Session<'a>,
    pub(crate) timeline: Timeline,
    /// Where the live process is.
    pub(crate) mark: Mark,
    breakpoints: BTreeSet<u64>,
    watchpoints: Watchpoints,
    /// The traps as a leg of a mark counts them.
    pub(crate) traps: Arc<TrapSet>,
    /// Each watchpoint's bytes at its last hit, for the next hit's old value.
    values: HashMap<Watchpoint, Vec<u8>>,
    /// The live process is at the end of the replay (the recorded end,
    /// or a divergence): going forwards repeats this stop.
    end: Option<Stop>,
    /// What the user changed (registers, memory) since the live process
    /// left the recorded run.
    changed: Option<String>,
    known_failure: Option<Failure>,
    user_checkpoints: Vec<(UserCheckpoint, Saved)>,
    /// The trace's epochs and the starts found so far.
    epochs: Epochs,
    /// The furthest event the replay has shown output for.
    furthest: u64,
    /// Its starts over with lessons it learned
    /// ([`ReplaySession::relearned`]).
    restarts: Restarts,
    exe: PathBuf,
}

impl<'a> ReplaySession<'a> {
    /// Starts the recorded program under `opts`, stopped at its first
    /// instruction. Errors: the program cannot be started (missing
    /// executable copy, ptrace refused).
    pub fn start(trace: &'a Trace, sopts: SessionOptions) -> Result<Self> {
        let opts = ReplayOptions {
            schedule: sopts.schedule.clone(),
            livelock_timeout: sopts.livelock_timeout,
            echo_from: if sopts.echo { 0 } else { usize::MAX },
            lessons: sopts.lessons.clone(),
            ..Default::default()
        };
        let log = Arc::new(LogIndex::new(trace));
        let mut live = Session::launch(trace, &opts, log.clone(), None)?;
        // The lock words the live session watches, no watchpoint yet.
        let watchpoints = live.watchpoints().clone();
        live.set_interactive();
        Ok(Self {
            exe: crate::session::executable(trace)?,
            trace,
            timeline: Timeline::new(sopts.max_checkpoints),
            opts,
            sopts,
            log,
            live,
            mark: Mark::segment_start(0, trace.meta.pid, 0),
            breakpoints: BTreeSet::new(),
            watchpoints,
            traps: Arc::default(),
            values: HashMap::new(),
            end: None,
            changed: None,
            known_failure: None,
            user_checkpoints: Vec::new(),
            epochs: Epochs::new(trace),
            furthest: 0,
            restarts: Restarts::default(),
        })
    }

    /// The trace being replayed.
    pub fn trace(&self) -> &'a Trace {
        self.trace
    }

    /// The executable the replay runs (the recorded path, or the trace's
    /// copy when the file changed since): what gdb loads symbols from.
    pub fn exe_path(&self) -> &std::path::Path {
        &self.exe
    }

    /// The kernel's id of the task that replays live thread `tid` (what
    /// `/proc/PID` names for it): a debugger's reads of the recorded
    /// process's `/proc` files are answered from it, as rr does. `None`
    /// when `tid` is not live.
    pub fn task_id(&self, tid: Tid) -> Option<i32> {
        self.live.task_id(tid)
    }

    /// The trace's copy of `path`, a file the recording mapped (an
    /// executable, a loader, a library or any other mapped file; the
    /// first copy when it changed during the recording), for a debugger
    /// to read the recorded bytes even when the file changed since.
    /// `None` for a file the recording did not map. Errors: the copy is
    /// missing or differs from the recorded bytes ([`Trace::copy_bytes`]).
    pub fn recorded_copy(&self, path: &[u8]) -> Option<Result<PathBuf>> {
        let file = self.trace.mapped_files().find(|f| f.path == path)?;
        Some(self.trace.copy_bytes(file).map(|_| self.trace.file_path(&file.copy)).map_err(Into::into))
    }

    /// The recorded tids of the threads alive now, in creation order.
    pub fn threads(&self) -> Vec<Tid> {
        self.live.live_threads()
    }

    /// The thread of the last stop (the first thread at the start).
    pub fn current_tid(&self) -> Tid {
        self.live.current()
    }

    /// Thread `tid`'s registers. Errors: no such live thread.
    pub fn registers(&self, tid: Tid) -> Result<Registers> {
        let (regs, fpregs) = self.live.registers(tid)?;
        Ok(Registers { regs, fpregs })
    }

    /// Sets thread `tid`'s registers. The replay after it is marked
    /// diverged until the user goes back to before the change. Errors: no
    /// such live thread.
    pub fn set_registers(&mut self, tid: Tid, regs: &Registers) -> Result<()> {
        self.live.set_registers(tid, &regs.regs, &regs.fpregs)?;
        self.changed.get_or_insert_with(|| format!("the registers of thread {tid} were changed at {}", self.mark));
        Ok(())
    }

    /// Reads up to `buf.len()` bytes of the process's memory at `addr`
    /// into `buf`, as the program sees it (weft's own breakpoint bytes are
    /// hidden). Returns how many bytes could be read (fewer at an unmapped
    /// page; 0 when `addr` is unmapped).
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> usize {
        self.live.read_memory(addr, buf)
    }

    /// Writes `data` at `addr`; the replay after it is marked diverged
    /// until the user goes back to before the change. Errors: unmapped.
    pub fn write_memory(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.live.write_memory(addr, data)?;
        self.changed.get_or_insert_with(|| format!("memory at {addr:#x} was written at {}", self.mark));
        Ok(())
    }

    /// The process's auxiliary vector (`/proc/PID/auxv` bytes). Errors:
    /// /proc unreadable.
    pub fn auxv(&self) -> Result<Vec<u8>> {
        self.live.auxv()
    }

    /// The loaded modules, from the dynamic loader's `link_map` chain in
    /// the process's memory ([`loader::libraries`]): the executable first,
    /// then the shared libraries and the vDSO in load order. Empty before
    /// the loader has set up its list (at the program's first
    /// instructions) and for a static executable. Errors: the auxv is
    /// unreadable.
    pub fn libraries(&self) -> Result<Vec<Library>> {
        let auxv = self.auxv()?;
        Ok(loader::libraries(&auxv, &|addr, buf| self.read_memory(addr, buf)))
    }

    /// Where the executable's `DT_DEBUG` value is, which holds the
    /// loader's `struct r_debug` address ([`loader::debug_slot`]); `None`
    /// for an executable without one. Errors: the auxv is unreadable.
    pub fn debug_slot(&self) -> Result<Option<u64>> {
        let auxv = self.auxv()?;
        Ok(loader::debug_slot(&auxv, &|addr, buf| self.read_memory(addr, buf)))
    }

    /// The address of thread `tid`'s instance of the thread-local variable
    /// at `offset` bytes into the TLS block of the module whose
    /// `struct link_map` is at `lm` (0: the executable), found through
    /// the thread's `fs_base` and glibc's DTV ([`loader::tls_address`]).
    /// `None`: the module has no TLS or is not loaded, the thread has no
    /// block for it yet, or the loader's data is unreadable. Errors: no
    /// such live thread, or the auxv is unreadable.
    pub fn tls_address(&self, tid: Tid, lm: u64, offset: u64) -> Result<Option<u64>> {
        let thread_pointer = self.registers(tid)?.regs.fs_base;
        let auxv = self.auxv()?;
        Ok(loader::tls_address(lm, offset, thread_pointer, &auxv, &|addr, buf| self.read_memory(addr, buf)))
    }

    /// Sets a software breakpoint at `addr`. Errors: unmapped address.
    pub fn add_breakpoint(&mut self, addr: u64) -> Result<()> {
        self.live.add_breakpoint(addr).with_context(|| format!("cannot set a breakpoint at {addr:#x}"))?;
        self.breakpoints.insert(addr);
        self.traps_changed();
        Ok(())
    }

    /// Removes the breakpoint at `addr` (no error if there is none).
    /// Errors: the int3 could not be removed.
    pub fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        self.live.remove_breakpoint(addr)?;
        self.breakpoints.remove(&addr);
        self.traps_changed();
        Ok(())
    }

    /// Sets a hardware watchpoint in every replayed thread. Errors: all 4
    /// debug registers in use, a length other than 1, 2, 4, 8, or an
    /// address not aligned to its length.
    pub fn add_watchpoint(&mut self, watch: Watchpoint) -> Result<()> {
        let mut w = self.watchpoints.clone();
        w.add(watch)?;
        self.live.set_watchpoints(&w)?;
        self.watchpoints = w;
        let mut now = vec![0; usize::from(watch.len)];
        self.read_memory(watch.addr, &mut now);
        self.values.insert(watch, now);
        self.traps_changed();
        Ok(())
    }

    /// Removes a watchpoint (no error if it is not set). Errors: ptrace.
    pub fn remove_watchpoint(&mut self, watch: Watchpoint) -> Result<()> {
        if self.watchpoints.remove(watch) {
            self.live.set_watchpoints(&self.watchpoints)?;
            self.values.remove(&watch);
            self.traps_changed();
        }
        Ok(())
    }

    fn traps_changed(&mut self) {
        self.traps = Arc::new(TrapSet { breakpoints: self.breakpoints.iter().copied().collect(), watchpoints: self.watchpoints.iter().collect() });
    }

    /// Resumes as `how` says until a stop. `interrupt` is polled at every
    /// segment start the replay passes, at least every
    /// [`SessionOptions::checkpoint_interval`] of replay time; when it
    /// returns true the session stops with [`Stop::Interrupted`]. Errors:
    /// weft's own failures (ptrace); a replay that diverges is a
    /// [`Stop::Diverged`].
    pub fn resume(&mut self, how: Resume, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        match how {
            Resume::Continue => self.forward(None, interrupt),
            Resume::Step(tid) => self.forward(Some(tid), interrupt),
            Resume::RangeStep { tid, start, end } => self.range_step(tid, start..end, interrupt),
            Resume::ReverseContinue => self.reverse_continue(interrupt),
            Resume::ReverseStep(tid) => self.reverse_step(tid, interrupt),
        }
    }

    /// Runs forwards (one instruction of `step`'s thread, or until a
    /// trap), taking checkpoints on the way.
    fn forward(&mut self, step: Option<Tid>, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        if let Some(end) = &self.end {
            return Ok(end.clone());
        }
        // A thread that is not live here (gdb's selection from another
        // point of the recording) ended as far as gdb can tell.
        let step = match step.map(|t| (t, self.live.thread_index(t))) {
            Some((tid, None)) => return Ok(Stop::ThreadExited { tid }),
            other => other.and_then(|(_, i)| i),
        };
        loop {
            // Without checkpoints (autopilot) there is no reason to pause.
            let pause_at = (self.sopts.max_checkpoints > 0).then(|| Instant::now() + self.sopts.checkpoint_interval);
            let thread_events = step.is_some() || self.sopts.stop_at_thread_events;
            let from_start = self.mark.point == 0 && self.mark.at_segment_start();
            match self.run(&Goal { step, pause_at, traps: true, thread_events, ..Goal::default() })? {
                Halt::Finished(Outcome::Invalid(f)) if from_start && self.relearned(f.event().unwrap_or(0))? => {}
                Halt::Segment => {
                    self.maybe_checkpoint()?;
                    if interrupt() {
                        return Ok(Stop::Interrupted { tid: self.live.current() });
                    }
                }
                halt => return Ok(self.stop_for(halt)),
            }
        }
    }

    /// Steps thread `tid` until its pc leaves `range` or another stop
    /// comes, polling `interrupt` between steps. The steps are the ones
    /// [`Resume::Step`] makes, without the round trip to gdb each one
    /// cost (gdb single-steps a line whose loop stays on it otherwise:
    /// minutes for a million rounds).
    fn range_step(&mut self, tid: Tid, range: std::ops::Range<u64>, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        loop {
            let stop = self.forward(Some(tid), interrupt)?;
            // The engine keeps the stopped thread's pc: no ptrace call per step.
            let inside = matches!(stop, Stop::Step { tid: t } if t == tid) && range.contains(&self.live.pc(tid)?);
            if !inside {
                return Ok(stop);
            }
            if interrupt() {
                return Ok(Stop::Interrupted { tid });
            }
        }
    }

    /// After a run from the program's start that diverged: when the live
    /// replay learned something it did not start with ([`crate::Lessons`]:
    /// where a thread spins, a wake whose logged waker goes first, a word
    /// whose wakes wait for the waiters, threads to run on past events),
    /// starts over from the start with it ([`Restarts`]: at most a few
    /// times, and not after run-on lessons that got it no further than
    /// log index `failed_at`, which are then dropped); true
    /// when it did. Only from the start: the stops of the debugger's marks
    /// are counted under the lessons a replay had, so the timeline's
    /// checkpoints go too. Not after the user changed registers or memory:
    /// the divergence may be theirs.
    fn relearned(&mut self, failed_at: usize) -> Result<bool> {
        let mut lessons = self.live.lessons();
        if !self.restarts.again(&mut self.opts.lessons, &mut lessons, failed_at, self.changed.is_none()) {
            return Ok(false);
        }
        self.opts.lessons = lessons;
        self.timeline = Timeline::new(self.sopts.max_checkpoints);
        self.restore(Origin::Start)?;
        Ok(true)
    }

    /// Runs the engine to `goal` and moves the mark along.
    pub(crate) fn run(&mut self, goal: &Goal) -> Result<Halt> {
        let halt = self.live.run_to(goal)?;
        let (point, tid) = (self.live.points(), self.live.current());
        if point != self.mark.point || tid != self.mark.tid || halt == Halt::Segment {
            self.mark = Mark::segment_start(0, tid, point);
        }
        self.mark.event = self.live.event();
        self.furthest = self.furthest.max(self.mark.event);
        match halt {
            Halt::Breakpoint | Halt::Watch(_) => self.mark.push(Leg::Traps(self.traps.clone(), 1)),
            Halt::Stepped(true) => self.mark.push(Leg::Steps(1)),
            _ => {}
        }
        Ok(halt)
    }

    /// The [`Stop`] for a halt of the engine.
    pub(crate) fn stop_for(&mut self, halt: Halt) -> Stop {
        let tid = self.live.current();
        let stop = match halt {
            Halt::Breakpoint => {
                let pc = self.live.pc(tid).unwrap_or(0);
                Stop::Breakpoint { tid, pc }
            }
            Halt::Watch(slot) => watch_hit(&self.live, tid, slot, &mut self.values),
            Halt::Stepped(_) | Halt::Segment => Stop::Step { tid },
            Halt::Signal { signo, fatal: true, .. } => Stop::Killed { tid, signo },
            Halt::Signal { signo, siginfo, .. } => Stop::Signal { tid, signo, siginfo },
            Halt::Exiting(code) => Stop::Exited { code },
            Halt::ThreadCreated { tid, parent } => Stop::ThreadCreated { tid, parent },
            Halt::ThreadExited(tid) => Stop::ThreadExited { tid },
            Halt::Finished(Outcome::Valid { end: End::Exited(code), .. }) => Stop::Exited { code },
            Halt::Finished(Outcome::Valid { end: End::Killed { signo, tid, .. }, .. }) => Stop::Killed { tid, signo },
            Halt::Finished(Outcome::Invalid(failure)) => Stop::Diverged { tid, failure },
        };
        if matches!(stop, Stop::Killed { .. } | Stop::Exited { .. } | Stop::Diverged { .. }) {
            self.end = Some(stop.clone());
        }
        stop
    }

    /// Takes a timeline checkpoint at the segment start the live process
    /// is at, unless one is there or the process left the recorded run.
    pub(crate) fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.changed.is_some() || !self.timeline.wants(self.mark.point) {
            return Ok(());
        }
        if let Some((template, snapshot)) = self.live.fork_here()? {
            self.timeline.add(Saved { mark: self.mark.clone(), template, snapshot });
        }
        Ok(())
    }

    /// Makes a process rebuilt from `origin` the live process, with the
    /// user's breakpoints and watchpoints. Errors: the process could not
    /// be rebuilt.
    pub(crate) fn restore(&mut self, origin: Origin) -> Result<()> {
        let saved = match origin {
            Origin::Start => None,
            Origin::Timeline(k) => Some(self.timeline.get(k)),
            Origin::User(k) => Some(&self.user_checkpoints[k].1),
        };
        let mark = saved.map_or_else(|| Mark::segment_start(0, self.trace.meta.pid, 0), |s| s.mark.clone());
        let mut live = match saved {
            Some(s) => {
                let tids = s.snapshot.spawn(&s.template)?;
                Session::resumed(self.trace, &self.opts, self.log.clone(), None, s.snapshot.clone(), tids)?
            }
            None => Session::launch(self.trace, &self.opts, self.log.clone(), None)?,
        };
        live.set_interactive();
        live.set_echo_from(if self.sopts.echo { self.furthest as usize } else { usize::MAX });
        live.set_watchpoints(&self.watchpoints)?;
        live.set_breakpoints(&self.breakpoints)?;
        let mut old = std::mem::replace(&mut self.live, live);
        old.end();
        self.mark = mark;
        self.end = None;
        self.changed = None;
        Ok(())
    }

    /// Goes to `target`: restores the latest checkpoint before it (unless
    /// the live process is already on the way there) and replays forwards.
    /// Errors: `target` is past the end of the replay, or not reachable.
    pub(crate) fn seek(&mut self, target: &Mark) -> Result<()> {
        if *target == self.mark && self.changed.is_none() {
            return Ok(());
        }
        let saved = self.timeline.latest_before(target, true);
        let ahead = self.end.is_none()
            && self.changed.is_none()
            && self.mark.surely_before(target)
            && saved.is_none_or(|k| self.timeline.get(k).mark.point <= self.mark.point);
        if !ahead {
            self.restore(saved.map_or(Origin::Start, Origin::Timeline))?;
        }
        self.run_to_segment(target.point)?;
        if self.mark.point != target.point {
            bail!("segment {} has no start in this replay", target.point);
        }
        for leg in &target.path {
            self.walk(leg)?;
        }
        self.mark = target.clone();
        Ok(())
    }

    /// Replays to the first segment start at or after `point`, passing
    /// traps silently. Errors: the replay ends before it.
    pub(crate) fn run_to_segment(&mut self, point: u64) -> Result<()> {
        self.to(Goal { point: Some(point), ..Goal::default() }, |m| m.point >= point, &mut |_| {})
    }

    /// Replays to the first segment start where `reached` holds of the
    /// mark (`goal` says the same to the engine), passing traps silently
    /// and taking checkpoints on the way; `progress` is told the mark at
    /// each one. Errors: the replay ends first.
    fn to(&mut self, goal: Goal, reached: impl Fn(&Mark) -> bool, progress: &mut dyn FnMut(&Mark)) -> Result<()> {
        while !(reached(&self.mark) && self.mark.at_segment_start()) {
            let pause_at = Some(Instant::now() + self.sopts.checkpoint_interval);
            match self.run(&Goal { pause_at, ..goal })? {
                Halt::Segment if !reached(&self.mark) => {
                    self.maybe_checkpoint()?;
                    progress(&self.mark);
                }
                Halt::Segment | Halt::Signal { fatal: false, .. } => {}
                halt => {
                    let stop = self.stop_for(halt);
                    bail!("the replay ends first ({stop:?})");
                }
            }
        }
        Ok(())
    }

    /// Walks one leg of a mark from where the live process is.
    fn walk(&mut self, leg: &Leg) -> Result<()> {
        let point = self.mark.point;
        match leg {
            Leg::Traps(set, n) => {
                self.with_traps(set, |s| {
                    for _ in 0..*n {
                        let halt = s.run(&Goal { traps: true, ..Goal::default() })?;
                        if !matches!(halt, Halt::Breakpoint | Halt::Watch(_)) || s.mark.point != point {
                            bail!("a position in segment {point} is not reached again ({halt:?})");
                        }
                    }
                    Ok(())
                })
            }
            Leg::Steps(m) => {
                let watches: Vec<Watchpoint> = self.watchpoints.iter().collect();
                self.walk_steps(self.mark.tid, point, *m, &watches, |_, _, _| {})
            }
        }
    }

    /// Single-steps thread `tid` `m` times within segment `point`, with
    /// no breakpoint set (a step must execute an instruction, not an int3)
    /// and `watches` set; `each` sees every step's number (from 1) and
    /// halt (a watchpoint hit is a step too). Errors: a step leaves the
    /// segment (the position is not reached again).
    pub(crate) fn walk_steps(
        &mut self,
        tid: Tid,
        point: u64,
        m: u64,
        watches: &[Watchpoint],
        mut each: impl FnMut(&mut Self, u64, &Halt),
    ) -> Result<()> {
        let step = Some(self.live.thread_index(tid).ok_or_else(|| anyhow!("no thread {tid}"))?);
        let set = TrapSet { breakpoints: Vec::new(), watchpoints: watches.to_vec() };
        self.with_traps(&set, |s| {
            for j in 1..=m {
                let halt = s.run(&Goal { step, traps: true, ..Goal::default() })?;
                if !matches!(halt, Halt::Stepped(true) | Halt::Watch(_)) || s.mark.point != point {
                    bail!("a position in segment {point} is not reached again ({halt:?})");
                }
                each(s, j, &halt);
            }
            Ok(())
        })
    }

    /// Runs `f` with the live process's traps set to `set`, then puts the
    /// user's back.
    pub(crate) fn with_traps<T>(&mut self, set: &TrapSet, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let mut w = self.watchpoints.cleared();
        for &watch in &set.watchpoints {
            w.add(watch)?;
        }
        self.live.set_watchpoints(&w)?;
        self.live.set_breakpoints(&set.breakpoints.iter().copied().collect())?;
        let result = f(self);
        self.live.set_watchpoints(&self.watchpoints)?;
        self.live.set_breakpoints(&self.breakpoints)?;
        result
    }

    /// What the session's replays act on ([`crate::Lessons`]): those it
    /// started with and those it learned and started over with.
    pub fn lessons(&self) -> &crate::Lessons {
        &self.opts.lessons
    }

    /// When the replay ended a recording killed from outside (SIGKILL),
    /// what each thread was stuck on there ([`Report::stuck`](crate::Report::stuck)).
    pub fn stuck(&self) -> &[String] {
        self.live.stuck()
    }

    /// Where the session is.
    pub fn when(&self) -> When {
        When { mark: self.mark.clone(), events: self.trace.events.len() as u64, epoch: self.epochs.index_of(&self.mark) }
    }

    /// Goes (forwards or backwards) to the start of the first segment at
    /// which log event `event` is the next to happen; `progress` is told
    /// where the replay is every [`SessionOptions::checkpoint_interval`] of
    /// replay time on the way (a far goto takes seconds). Errors: `event`
    /// past the end of the trace, or the replay ends before it.
    pub fn goto_event(&mut self, event: u64, progress: &mut dyn FnMut(&Mark)) -> Result<Stop> {
        let events = self.trace.events.len() as u64;
        if event >= events {
            bail!("event {event} is past the end of the recording (it has {events} events, 0 to {})", events.saturating_sub(1));
        }
        // Many segments share a next event (synchronization points match
        // none): start strictly before `event`, then stop at the first.
        let saved = self.timeline.marks().iter().rev().find(|m| m.event < event).cloned();
        let here = (self.mark.event < event && self.end.is_none() && self.changed.is_none()).then(|| self.mark.clone());
        let start = match (saved, here) {
            (Some(s), Some(h)) if h.point >= s.point => h,
            (Some(s), _) => s,
            (None, Some(h)) => h,
            (None, None) => Mark::segment_start(0, self.trace.meta.pid, 0),
        };
        self.seek(&start)?;
        self.to(Goal { event: Some(event), ..Goal::default() }, |m| m.event >= event, progress)?;
        Ok(Stop::Step { tid: self.live.current() })
    }

    /// The recorded epochs, in order (see `epoch.rs`).
    pub fn epochs(&self) -> Vec<Epoch> {
        self.epochs.list(self.trace)
    }

    /// Goes (forwards or backwards) to the start of epoch `n`: the start
    /// of the first segment at which its first event is the next to
    /// happen. Errors: no such epoch, or the replay ends before it.
    pub fn goto_epoch(&mut self, n: usize) -> Result<Stop> {
        let first = self.epochs.first_event(n)?;
        match self.epochs.start(n).cloned() {
            Some(start) => self.seek(&start)?,
            None => {
                self.goto_event(first, &mut |_| {})?;
                self.epochs.found(n, self.mark.clone());
            }
        }
        Ok(if n == 0 { Stop::StartOfRecording { tid: self.live.current() } } else { Stop::Step { tid: self.live.current() } })
    }

    /// Goes back to the start of the current epoch, or to the start of the
    /// previous one when already there. Errors: rebuilding the process.
    pub fn epoch_back(&mut self) -> Result<Stop> {
        let here = self.mark.clone();
        let k = self.epochs.index_of(&here);
        let stop = self.goto_epoch(k)?;
        // Only going there tells whether `here` was the start.
        if self.mark == here && k > 0 {
            return self.goto_epoch(k - 1);
        }
        Ok(stop)
    }

    /// Makes a checkpoint here (rr's `checkpoint`). Errors: the process
    /// cannot be checkpointed at this stop (a thread at a signal delivery,
    /// shared writable memory, before the program's first syscall), or
    /// the user changed it.
    pub fn checkpoint(&mut self) -> Result<UserCheckpoint> {
        if let Some(why) = &self.changed {
            bail!("no checkpoint of a process that left the recorded run: {why}");
        }
        let Some((template, snapshot)) = self.live.fork_here()? else {
            bail!("the process cannot be checkpointed at this stop (a thread at a signal delivery, shared writable memory, or before its first syscall)");
        };
        let id = self.user_checkpoints.last().map_or(1, |(c, _)| c.id + 1);
        let c = UserCheckpoint { id, mark: self.mark.clone() };
        self.user_checkpoints.push((c.clone(), Saved { mark: self.mark.clone(), template, snapshot }));
        Ok(c)
    }

    /// The user's checkpoints.
    pub fn checkpoints(&self) -> Vec<UserCheckpoint> {
        self.user_checkpoints.iter().map(|(c, _)| c.clone()).collect()
    }

    /// Goes to checkpoint `id` (rr's `restart N`). Errors: no such id.
    pub fn restart(&mut self, id: usize) -> Result<Stop> {
        let k = self.user_checkpoints.iter().position(|(c, _)| c.id == id).ok_or_else(|| anyhow!("no checkpoint {id}"))?;
        self.restore(Origin::User(k))?;
        Ok(Stop::Step { tid: self.live.current() })
    }

    /// Why the replay is not the recorded run here, if it is not: the
    /// user changed registers or memory, or the replay reached the first
    /// event the schedule does not match.
    pub fn divergence(&self) -> Option<String> {
        if let Some(why) = &self.changed {
            return Some(format!("{why}; the replay from there on is not the recorded run (go back to before it)"));
        }
        match &self.end {
            Some(Stop::Diverged { failure, .. }) => Some(format!("the replay diverges from the recording here: {failure}")),
            _ => self.known_failure.as_ref().map(|f| format!("the replay diverges from the recording later: {f}")),
        }
    }

    /// Says that a replay under this session's schedule fails with
    /// `failure` (a search found no valid schedule): shown by
    /// [`ReplaySession::divergence`].
    pub fn set_known_failure(&mut self, failure: Failure) {
        self.known_failure = Some(failure);
    }

    /// The failure a replay of this trace under its schedule meets, when
    /// known.
    pub fn known_failure(&self) -> Option<&Failure> {
        self.known_failure.as_ref()
    }

    /// Checkpoints the timeline holds.
    pub fn checkpoint_count(&self) -> usize {
        self.timeline.len()
    }

    /// Memory held by the timeline's checkpoints, in bytes (pages the
    /// checkpoint processes own privately, from /proc/PID/smaps_rollup).
    pub fn checkpoint_memory(&self) -> u64 {
        self.timeline.memory()
    }
}

/// The stop for thread `tid`'s access to the watchpoint in debug register
/// `slot` of `live`: its bytes now, and as they were at its last hit
/// (`values`, updated; the bytes now when there was none).
pub(crate) fn watch_hit(live: &Session<'_>, tid: Tid, slot: usize, values: &mut HashMap<Watchpoint, Vec<u8>>) -> Stop {
    let Some(watch) = live.watchpoints().get(slot) else { return Stop::Step { tid } };
    let mut new = vec![0; usize::from(watch.len)];
    live.read_memory(watch.addr, &mut new);
    let old = values.insert(watch, new.clone()).unwrap_or_else(|| new.clone());
    Stop::Watchpoint { tid, watch, old, new }
}

/// Where a restored live process comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin {
    /// A new launch of the program.
    Start,
    /// The timeline's checkpoint of this index.
    Timeline(usize),
    /// The user's checkpoint of this index.
    User(usize),
}

impl Drop for ReplaySession<'_> {
    fn drop(&mut self) {
        self.live.end();
    }
}
