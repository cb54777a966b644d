//! The scheduler's choices: the loop that runs one thread at a time from
//! scheduling point to scheduling point, seed 000's default order (the
//! log's next thread; while it cannot run, the free threads take turns),
//! the preemptions a schedule adds (Algorithm 1's `sync<n,t>`, read as a
//! [`Grant`]), and the checks at the end of a replay.

use super::{Advance, At, Grant, Observed, Outcome, ProcessEnd, RunOn, Session, Step, Thread, Until};
use crate::digest;
use crate::failure::Failure;
use crate::futex;
use crate::position::Position;
use crate::sync_points::Op;
use crate::sync_trace::{Switchable, SyncRecord};
use anyhow::Result;
use std::time::Instant;
use weft_record::event::{signal_name, End, EventKind};
use weft_record::syscalls;
use weft_record::tracee;
use weft_record::Tid;

/// Yield points a thread spins through, at most, before the futex wait
/// its next event starts ([`Session::spins_before_its_wait`]): more than
/// the bounded spins of the libraries measured, far fewer than a spin
/// that only another thread's store ends.
const SPINS_BEFORE_WAIT: u64 = 64;

/// Scheduling points a thread that runs on ([`Session::runs_on`]) keeps
/// the core through, at most: a run-on is a stretch of unlogged work (a
/// producer's last sends, a thread's teardown), not a loop that only the
/// process's end stopped in the recording.
const RUN_ON_POINTS: u64 = 10_000;

/// What an interactive replay runs until (`run` runs to the end).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Goal {
    /// Stop at the first segment start at or after this scheduling point.
    pub point: Option<u64>,
    /// Stop at the first segment start at which this log event (or a
    /// later one) is the next to match.
    pub event: Option<u64>,
    /// Stop at the first segment start after this instant.
    pub pause_at: Option<Instant>,
    /// Execute one instruction of this thread (an index), then stop.
    pub step: Option<usize>,
    /// Stop at the debugger's breakpoints and watchpoints (else they are
    /// passed silently).
    pub traps: bool,
    /// Stop when a thread is created or exits.
    pub thread_events: bool,
}

/// Why an interactive replay stopped; the thread is the loop's current one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Halt {
    /// At the start of a segment, as the [`Goal`] asked.
    Segment,
    /// At a debugger breakpoint (the thread's pc is its address).
    Breakpoint,
    /// After an access to the watchpoint in this debug register.
    Watch(usize),
    /// The [`Goal::step`] is done; false when its instruction was a
    /// scheduling point and the thread has not run since (the loop stands
    /// at the start of the thread's next segment).
    Stepped(bool),
    /// The thread is about to receive a recorded signal (its event is
    /// matched).
    Signal {
        /// The signal number.
        signo: i32,
        /// The recorded `siginfo_t`.
        siginfo: Vec<u8>,
        /// It is the signal that ended the recording.
        fatal: bool,
    },
    /// At the recorded exit: the exit_group is matched, not executed.
    Exiting(i32),
    /// Thread `parent` created thread `tid` (recorded tids).
    ThreadCreated { tid: Tid, parent: Tid },
    /// Thread `tid` exited; the process goes on.
    ThreadExited(Tid),
    /// The replay is over: ended as recorded, or invalid.
    Finished(Outcome),
}

impl Session<'_> {
    /// The scheduler's loop, from the program's start or from a
    /// checkpoint's point, to the end.
    pub(super) fn run(&mut self) -> Result<Outcome> {
        match self.run_to(&Goal::default())? {
            Halt::Finished(outcome) => Ok(outcome),
            other => anyhow::bail!("internal error: a replay to the end stopped at {other:?}"),
        }
    }

    /// Runs the scheduler's loop until `goal` or the end. The watchdog
    /// counts the time it runs.
    pub(crate) fn run_to(&mut self, goal: &Goal) -> Result<Halt> {
        self.watchdog.resume();
        let halt = self.run_loop(goal);
        self.watchdog.pause();
        halt
    }

    /// The loop of [`Session::run_to`].
    fn run_loop(&mut self, goal: &Goal) -> Result<Halt> {
        self.thread_halts = goal.thread_events;
        if !goal.thread_events {
            self.deferred.clear();
        }
        // A single step cut short (another thread's trap, a pause) is
        // over unless this goal goes on with it.
        if goal.step != self.state.stepping {
            self.state.stepping = None;
        }
        loop {
            self.watchdog.progress(self.state.pos);
            if !self.state.kill_pending.is_empty() {
                self.kill_finished()?;
            }
            let cur = self.cur;
            let step = match self.pending.take() {
                Some(op) => self.point_handled(|s| s.sync_point(cur, op))?,
                None => {
                    if matches!(self.state.threads[cur].at, At::Ready | At::Deliver(_)) && !self.holds_fatal_signal(cur) {
                        if let Some(halt) = self.segment(goal)? {
                            return Ok(halt);
                        }
                    }
                    self.state.threads[cur].steps += 1;
                    self.point_handled(|s| s.step(cur))?
                }
            };
            if let Some(halt) = self.after(step)? {
                self.halt = None;
                return Ok(halt);
            }
            match self.halt.take() {
                // Reported where a position can name the moment: at the
                // next segment start.
                Some(halt @ (Halt::ThreadCreated { .. } | Halt::ThreadExited(_))) => self.deferred.push_back(halt),
                Some(halt) => return Ok(halt),
                None => {}
            }
        }
    }

    /// Runs the current thread's segment (it is free to run) until its
    /// next scheduling point, unless `goal` stops first; `Some` is a halt.
    fn segment(&mut self, goal: &Goal) -> Result<Option<Halt>> {
        let cur = self.cur;
        if self.after_runtime_call(cur) || self.state.protect.holds(cur) || self.state.protect.switch_due() {
            // The signal is delivered here, at this scheduling point.
            return Ok(None);
        }
        if !self.state.mid_segment {
            if let Some(halt) = self.deferred.pop_front() {
                return Ok(Some(halt));
            }
            let at_point = goal.point.is_some_and(|p| self.state.points >= p);
            let at_event = goal.event.is_some_and(|e| self.state.pos as u64 >= e);
            if at_point || at_event || goal.pause_at.is_some_and(|t| Instant::now() >= t) {
                return Ok(Some(Halt::Segment));
            }
        }
        if self.state.threads[cur].at == At::Ready {
            if let Some(op) = self.state.threads[cur].next_point.take() {
                // A parked breakpoint's point after a runtime marker: only
                // the runtime's code lies between them.
                self.state.threads[cur].at = At::Sync(op);
                return Ok(None);
            }
        }
        let advanced = if goal.step == Some(cur) { self.single_step(cur)? } else { self.advance(cur, goal.traps, false)? };
        match advanced {
            Advance::Point => Ok(None),
            Advance::Halt(halt) => {
                self.state.mid_segment = true;
                Ok(Some(halt))
            }
            Advance::End(end) => self.finish(end).map(|o| Some(Halt::Finished(o))),
            Advance::Livelock(pc) => {
                if let Some(rec) = self.killed_at_end() {
                    let end = self.kill_as_recorded(rec)?;
                    return self.finish(end).map(|o| Some(Halt::Finished(o)));
                }
                Ok(Some(Halt::Finished(Outcome::Invalid(self.livelock(cur, pc)))))
            }
        }
    }

    /// Handles one scheduling point with `f`: the segment ends here.
    fn point_handled(&mut self, f: impl FnOnce(&mut Self) -> Result<Step>) -> Result<Step> {
        self.state.points += 1;
        self.state.mid_segment = false;
        f(self)
    }

    /// Carries out the scheduler's decision; `Some` when the replay is over.
    fn after(&mut self, step: Step) -> Result<Option<Halt>> {
        let cur = self.cur;
        let outcome = match step {
            Step::Stay => {
                self.note(cur);
                return Ok(None);
            }
            Step::Switch(to) => match to.map(Ok).unwrap_or_else(|| self.pick()) {
                Ok(next) => {
                    tracing::trace!(event = self.state.pos, from = self.state.threads[cur].rec, to = self.state.threads[next].rec, "switch");
                    if self.state.granted.map(|g| g.thread) != Some(next) {
                        self.state.granted = None;
                    }
                    self.state.switches += 1;
                    self.state.threads[next].last_ran = self.state.switches;
                    self.cur = next;
                    self.note(next);
                    return Ok(None);
                }
                Err(failure) => match self.killed_at_end() {
                    Some(rec) => {
                        let end = self.kill_as_recorded(rec)?;
                        self.finish(end)?
                    }
                    None => Outcome::Invalid(failure),
                },
            },
            Step::Fail(failure) => {
                self.learn_waiters_first(&failure);
                self.learn_run_on(&failure);
                Outcome::Invalid(failure)
            }
            Step::End(end) => self.finish(end)?,
        };
        Ok(Some(Halt::Finished(outcome)))
    }

    /// Handles the scheduling point thread `i` is at.
    pub(super) fn step(&mut self, i: usize) -> Result<Step> {
        if let Some(step) = self.reversal_switch(i) {
            return Ok(step);
        }
        if let Some(s) = self.async_signal_due(i) {
            if let Some(step) = self.deliver_async(i, s)? {
                return Ok(step);
            }
        }
        if let At::Entry(e) = self.state.threads[i].at {
            if e.nr == weft_record::runtime::NR_SYNC {
                tracing::trace!(tid = self.state.threads[i].rec, op = e.args[0], word = %format_args!("{:#x}", e.args[1]), value = e.args[2] as u32, "runtime marker");
                self.bind_moved_word(i, &e);
            }
            if let Some(op) = self.take_point_before_marker(i, &e) {
                // The release a parked breakpoint saw return, before its
                // marker; the marker is handled when the thread runs next.
                return self.sync_point(i, Some(op));
            }
        }
        match self.state.threads[i].at {
            At::Entry(e) if e.nr == libc::SYS_sched_yield => {
                self.execute(i)?;
                self.yielded(i)
            }
            At::Entry(e) if e.nr == libc::SYS_futex => match self.futex(i, e)? {
                // A wait that found its word changed may be a spinner's
                // (it yields), unless it is a wait the log does not hold,
                // made once its word changed: that one runs on.
                Step::Stay
                    if futex::is_wait(e.args[1])
                        && self.state.threads[i].regs.rax as i64 == -libc::EAGAIN as i64
                        && self.state.threads[i].unlogged_wait.is_none() =>
                {
                    self.yielded(i)
                }
                step => Ok(step),
            },
            At::Entry(e) if e.nr == weft_record::runtime::NR_SYNC && self.unlogged_wait_returns(i, &e) => {
                self.state.threads[i].unlogged_wait = None;
                self.finish_syscall(i, 0)?;
                Ok(Step::Stay)
            }
            At::Entry(e) if e.nr == weft_record::runtime::NR_SYNC && self.soft_marker(i, &e) => {
                // A futex call on a lock word: not an event, and a wait
                // really waits (log_index.rs, weft_runtime.c's syscall()).
                let start = e.args[0] as i64 == weft_record::event::SyncOp::FutexWaitStart as i64;
                self.finish_syscall(i, i64::from(start))?;
                Ok(Step::Stay)
            }
            At::Entry(e) if e.nr == weft_record::runtime::NR_SYNC && self.unlogged_wake(i, &e) => {
                self.wake_taken(i, &e);
                // A run-on ends at the thread's next futex call.
                self.state.threads[i].runs_on = None;
                self.finish_syscall(i, 0)?;
                Ok(Step::Stay)
            }
            At::Entry(e) if syscalls::class(e.nr) == syscalls::Class::Clone && !self.spawn_due(i, &e) => self.failed_spawn(i, e),
            At::Entry(e) => self.event_point(i, Observed::Syscall(e)),
            At::Fault(sig) if self.held_back(i, sig) => {
                // Sent by the program (executed in the replay too), it
                // reached the thread before its place in the log: it is
                // dropped here and sent again at that place.
                self.state.threads[i].at = At::Ready;
                Ok(Step::Stay)
            }
            At::Fault(sig) => {
                let pc = self.state.threads[i].regs.rip;
                let observed = match tracee::rdtsc_at(self.mem(i), pc) {
                    Some((len, rdtscp)) if sig == libc::SIGSEGV => Observed::Rdtsc { pc, len, rdtscp },
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
            At::Blocked(_) | At::Exited | At::Parked => Ok(Step::Switch(None)),
            At::Deliver(_) if self.holds_fatal_signal(i) => Ok(Step::Switch(None)),
            At::Ready if self.waits_for_runtime_signal(i) => Ok(Step::Switch(None)),
            At::Ready | At::Deliver(_) => Ok(Step::Stay),
        }
    }

    /// Whether signal `sig`, at thread `i`'s delivery stop, arrived before
    /// its place: it is not one the kernel raises for an instruction, the
    /// thread has events before it in the log, and a later one of the
    /// thread's is that signal. Only with the synchronization order logged,
    /// where the thread's events between sending and delivering are known.
    fn held_back(&self, i: usize, sig: i32) -> bool {
        use libc::{SIGBUS, SIGFPE, SIGILL, SIGKILL, SIGSEGV, SIGSTOP, SIGTRAP};
        if !self.sync_logged || matches!(sig, SIGSEGV | SIGBUS | SIGFPE | SIGILL | SIGTRAP | SIGKILL | SIGSTOP) {
            return false;
        }
        let rec = self.state.threads[i].rec;
        let mine = || self.trace.events[self.state.pos..].iter().filter(|e| e.tid == rec);
        let is_sig = |e: &weft_record::Event| matches!(&e.kind, weft_record::EventKind::Signal(s) if s.signo == sig && !s.synchronous);
        mine().next().is_some_and(|e| !is_sig(e)) && mine().any(is_sig)
    }

    /// A yield point: thread `i` called sched_yield, or a futex wait that
    /// returned at once (the word had changed), and would run on. It may
    /// spin waiting for another thread, so another thread runs now: the
    /// log's next thread if it can run and is not `i`, else the other
    /// thread that can run code and was switched to longest ago (round
    /// robin, so a spinner cannot starve the thread it waits for); a
    /// thread to settle before the log's next wake goes before the log's
    /// next thread ([`Session::settler_before`]). The
    /// choice is a function of the replay's state: replays stay
    /// deterministic. Not a synchronization point: schedules' counts are
    /// unchanged. Ends the replay when the watchdog's limit passed without
    /// progress (a livelock), or, when the recording was killed from
    /// outside and only its end is left, once no other thread can run.
    pub(super) fn yielded(&mut self, i: usize) -> Result<Step> {
        let (rec, pc) = (self.state.threads[i].rec, self.state.threads[i].regs.rip);
        let livelock = self.watchdog.spun(rec, pc, self.state.pos);
        if !livelock && self.spins_before_its_wait(i) {
            return Ok(Step::Stay);
        }
        // Before a wake that waits for waiters, the other settlers first.
        let owner = self.next_owner().filter(|&j| j != i && self.runnable(j));
        let other = owner.map(|j| self.settler_before(j).filter(|&t| t != i).unwrap_or(j)).or_else(|| {
            let threads = &self.state.threads;
            (0..threads.len()).filter(|&j| j != i && self.switchable(j)).min_by_key(|&j| (threads[j].last_ran, j))
        });
        if let Some(rec) = self.killed_at_end().filter(|_| livelock || other.is_none()) {
            return Ok(Step::End(self.kill_as_recorded(rec)?));
        }
        Ok(match other {
            _ if livelock => Step::Fail(self.livelock(i, pc)),
            Some(j) => Step::Switch(Some(j)),
            None => Step::Stay,
        })
    }

    /// Whether runtime marker `e` of thread `i` is soft (log_index.rs), its
    /// word taken at the log's address (`word_alias.rs`).
    fn soft_marker(&self, i: usize, e: &super::Entry) -> bool {
        let word = self.state.aliases.log_word(self.state.threads[i].proc, e.args[1]);
        self.log.is_soft_marker(e.args[0] as i64, word)
    }

    /// Binds the word of thread `i`'s runtime marker `e` to the log's
    /// address when the marker is a wait's start on a word no logged
    /// operation names, and its value matches the thread's next event, a
    /// wait's start on a word the log orders: that event, on a word the
    /// replay allocated elsewhere (`word_alias.rs`). Its marker is then
    /// matched as an event, not taken as a soft one.
    fn bind_moved_word(&mut self, i: usize, e: &super::Entry) {
        use weft_record::event::{Sync, SyncOp};
        let (proc, word) = (self.state.threads[i].proc, e.args[1]);
        if e.args[0] as i64 != SyncOp::FutexWaitStart as i64 || self.log.is_ordered(word) {
            return;
        }
        if let Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result })) = self.next_logged(i).map(|ev| &ev.kind) {
            if *result as u32 == e.args[2] as u32 && !self.log.is_soft_word(*var) && !self.state.aliases.bound(proc, word, *var) {
                tracing::debug!(replay = %format_args!("{word:#x}"), log = %format_args!("{var:#x}"), "futex word moved");
                self.state.aliases.bind(proc, word, *var);
            }
        }
    }

    /// Whether the futex word the log names `word`, in thread `i`'s
    /// process, holds `value` now (read at the replay's address of it,
    /// `word_alias.rs`; an unreadable word holds nothing).
    pub(super) fn word_holds(&self, i: usize, word: u64, value: u32) -> bool {
        let at = self.state.aliases.replay_word(self.state.threads[i].proc, word);
        self.mem(i).read_u32(at).ok() == Some(value)
    }

    /// Whether runtime marker `e` of thread `i` is a futex wake that the
    /// log does not hold next for the thread: in the recording the thread
    /// found no waiter registered and made no call; in the replay the
    /// unlogged atomics (a channel's queue, a parker's state) ran in
    /// another order and a waiter registered, whose wait the log does not
    /// hold either ([`Session::unlogged_wait`]: a receiver that parked
    /// before the sends the recording made first). The runtime made the
    /// real (emulated) call before this marker, so the marker orders
    /// nothing and is answered as no event; every logged event is still
    /// matched (a replay whose path really diverged fails there).
    fn unlogged_wake(&self, i: usize, e: &super::Entry) -> bool {
        use weft_record::event::{Sync, SyncOp};
        if e.args[0] as i64 != SyncOp::FutexWake as i64 {
            return false;
        }
        let word = self.state.aliases.log_word(self.state.threads[i].proc, e.args[1]);
        !matches!(self.next_logged(i).map(|ev| &ev.kind), Some(EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. })) if *var == word)
    }

    /// Unlogged wake `e` of thread `i` ([`Session::unlogged_wake`]) woke
    /// the word whose wake by another thread is the log's next event: `i`
    /// ran ahead of that wake ([`Session::finisher_before`]) and woke the
    /// waiter in the logged waker's place (a producer run to its return
    /// whose first send found the consumer parked: the logged waker's
    /// send then finds nobody to wake). Learned: at this wake, the logged
    /// waker goes first ([`crate::Lessons::wakers_first`]), which a replay
    /// from the start acts on. `tests/rust/producers.rs`: 8 of 10
    /// recordings valid in log order without it, all 10 with. Only for a
    /// thread whose next event is its return (one the rule runs ahead),
    /// and only in a replay in the log's order ([`Session::in_log_order`]).
    fn wake_taken(&mut self, i: usize, e: &super::Entry) {
        use weft_record::event::{Sync, SyncOp};
        let finishing = matches!(self.next_logged(i).map(|ev| &ev.kind), Some(EventKind::Sync(Sync { op: SyncOp::ThreadReturn, .. })));
        if !self.in_log_order() || !finishing {
            return;
        }
        let word = self.state.aliases.log_word(self.state.threads[i].proc, e.args[1]);
        let Some(next) = self.trace.events.get(self.state.pos) else { return };
        if next.tid != self.state.threads[i].rec && matches!(&next.kind, EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. }) if *var == word) {
            self.state.lessons.wakers_first.insert(self.state.pos);
        }
    }

    /// The replay fails with `failure` where the log's next event, its
    /// own thread's, is a futex call that thread did not make (it did
    /// something else):
    /// - a wake: the thread found nobody waiting (the program counts its
    ///   waiters, unlogged) and made no call;
    /// - a wait's start: the thread came to its wait after the word had
    ///   changed (on several cores it was spinning there already), and
    ///   waited for another value, or not at all.
    ///
    /// Learned either way: the word's wakes come once the other threads
    /// ran on into their waits ([`crate::Lessons::waiters_first`],
    /// [`Session::settler_before`]), which a replay from the start acts
    /// on. Not for a lock word, not when a thread run ahead of this wake
    /// took it ([`Session::wake_taken`]), and only in a replay in the
    /// log's order ([`Session::in_log_order`]).
    fn learn_waiters_first(&mut self, failure: &Failure) {
        use weft_record::event::{Sync, SyncOp};
        let Failure::Unmatched { at, .. } = failure else { return };
        let Some(expected) = self.trace.events.get(self.state.pos) else { return };
        if let EventKind::Sync(Sync { op: SyncOp::FutexWake | SyncOp::FutexWaitStart, var, .. }) = &expected.kind {
            let own = expected.tid == at.tid && at.event as usize == self.state.pos;
            if own && self.in_log_order() && !self.state.lessons.wakers_first.contains(&self.state.pos) && !self.log.is_lock_word(*var) {
                self.state.lessons.waiters_first.insert(*var);
            }
        }
    }

    /// The replay fails with `failure` where thread `i`'s own event, the
    /// log's next, is not what `i` did: it decided from data that another
    /// thread's unlogged code may write (sort's merge tree: a parent's
    /// bounds, which a child's thread moves under the child's lock only).
    /// The threads of its process that were handed over at their last
    /// events, or not run since their spawn (`Thread::waits_after`), have
    /// not run that code yet, and the recording may have run it there, on
    /// their own cores. Learned: after the earliest of those events, its
    /// thread runs on to its next point (a spawned thread runs before its
    /// creator goes on; [`crate::Lessons::run_on_after`]), which a replay
    /// from the start acts on, in the same order of events (seed 003
    /// §3.5.2). One thread per divergence: running every waiting thread
    /// on would run some earlier than the recording did (a latch's later
    /// arrivals). Only in a replay in the log's order
    /// ([`Session::in_log_order`]).
    fn learn_run_on(&mut self, failure: &Failure) {
        let Failure::Unmatched { at, .. } = failure else { return };
        let own = self.trace.events.get(self.state.pos).is_some_and(|e| e.tid == at.tid) && at.event as usize == self.state.pos;
        let Some(&i) = self.state.by_rec.get(&at.tid) else { return };
        if !own || !self.sync_logged || !self.in_log_order() {
            return;
        }
        if let Some(k) = self.others_of_process(i).filter_map(|t| self.state.threads[t].waits_after).min() {
            self.state.lessons.run_on_after.insert(k);
        }
    }

    /// Whether this replay follows the log's order alone: its schedule
    /// has no preemption or race reversal. Only such a replay learns
    /// which thread goes first ([`crate::Lessons`]): one that a schedule
    /// ran out of that order fails at wakes for that reason.
    fn in_log_order(&self) -> bool {
        self.opts.schedule.preemptions().is_empty() && self.opts.schedule.reversals().is_empty()
    }

    /// A thread to run before thread `j`, the log's next thread, wakes a
    /// futex word of [`crate::Lessons::waiters_first`]: another thread of
    /// its process not yet run on before this wake. It runs on into its
    /// wait, where the program counts it as waiting (or to its next
    /// event), and the waker then finds it there, as on several cores
    /// (`tests/cpp/atomic_wait.cpp`). First those whose next event is a
    /// wait's start expecting the value the word holds now: they spun
    /// through their whole wait before the waker changed the word, and
    /// run after the change they would not wait at all; then the one
    /// whose next event comes first. Not at a wake whose logged waker goes
    /// first ([`crate::Lessons::wakers_first`]).
    fn settler_before(&mut self, j: usize) -> Option<usize> {
        use weft_record::event::{Sync, SyncOp};
        let pos = self.state.pos;
        match self.trace.events.get(pos).map(|ev| &ev.kind) {
            Some(EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. }))
                if self.state.lessons.waiters_first.contains(var) && !self.state.lessons.wakers_first.contains(&pos) => {}
            _ => return None,
        }
        let waits_now = |t: usize| match self.next_logged(t).map(|e| &e.kind) {
            Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result })) => self.word_holds(t, *var, *result as u32),
            _ => false,
        };
        let t = self
            .fellows(j)
            .filter(|&t| self.state.threads[t].settled_before != Some(pos))
            .min_by_key(|&t| (!waits_now(t), self.next_event_of(self.state.threads[t].rec)))?;
        self.state.threads[t].settled_before = Some(pos);
        Some(t)
    }

    /// Whether thread `j` is at the start of a wait that the log does not
    /// hold ([`Session::unlogged_wait`]) and its word has changed: another
    /// thread made the store it waited for, and it goes first, ahead of
    /// the log's next thread. In the recording it never waited; the
    /// replay left it behind, and running it now, while it can still
    /// act before the log's next event (a send that finds a receiver
    /// registered), is closest to the recording.
    fn unlogged_wait_over(&self, j: usize) -> bool {
        let At::Entry(e) = self.state.threads[j].at else { return false };
        self.unlogged_wait_start(j, &e) && self.wait_word_changed(j, &e)
    }

    /// Whether syscall entry `e` of thread `i` is a runtime futex wait's
    /// start that the log does not hold next for the thread (nor as a
    /// soft event): [`Session::unlogged_wait`] decides when it returns.
    /// A wait whose thread's next event waits on the same word for another
    /// value is no such wait: the word's values diverged (a consumer that
    /// finds a condition variable's counter far ahead of the log's), and
    /// the mismatch stands, where the search can take it up; made as an
    /// unlogged wait, it let the threads run on to the program's end
    /// without matching an event.
    pub(super) fn unlogged_wait_start(&self, i: usize, e: &super::Entry) -> bool {
        use weft_record::event::{Sync, SyncOp};
        if e.nr != weft_record::runtime::NR_SYNC || e.args[0] as i64 != SyncOp::FutexWaitStart as i64 || self.soft_marker(i, e) {
            return false;
        }
        let word = self.state.aliases.log_word(self.state.threads[i].proc, e.args[1]);
        match self.next_logged(i) {
            Some(ev) if matches!(&ev.kind, EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, .. }) if *var == word) => false,
            Some(own) => self.mismatch(i, &Observed::Syscall(*e), own).is_some(),
            None => true,
        }
    }

    /// Whether the word of thread `i`'s runtime wait start `e` (at the
    /// replay's address) no longer holds the value the wait expects.
    pub(super) fn wait_word_changed(&self, i: usize, e: &super::Entry) -> bool {
        self.mem(i).read_u32(e.args[1]).ok() != Some(e.args[2] as u32)
    }

    /// Whether runtime marker `e` of thread `i` is the return of its wait
    /// that the log does not hold ([`Session::unlogged_wait`]).
    fn unlogged_wait_returns(&self, i: usize, e: &super::Entry) -> bool {
        e.args[0] as i64 == weft_record::event::SyncOp::FutexWait as i64
            && self.state.threads[i].unlogged_wait == Some(e.args[1])
    }

    /// Whether thread `i`, at a yield point, goes on spinning instead: its
    /// next event is a futex wait's start expecting the value its word
    /// holds now, and it has yielded fewer than [`SPINS_BEFORE_WAIT`]
    /// times since its last event. Such a thread spins a bounded while
    /// before it waits (libstdc++'s atomic waits yield a dozen times,
    /// crossbeam's backoff a few): the recording saw it start its wait
    /// with the word unchanged, so the threads that change it had not run
    /// that far yet, and a turn given to them here (a barrier's other
    /// arrivals) would make it wait for the next value, or not at all.
    fn spins_before_its_wait(&self, i: usize) -> bool {
        use weft_record::event::{Sync, SyncOp};
        let t = &self.state.threads[i];
        if t.steps >= SPINS_BEFORE_WAIT {
            return false;
        }
        match self.next_logged(i).map(|e| &e.kind) {
            Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result })) => {
                self.word_holds(i, *var, *result as u32)
            }
            _ => false,
        }
    }

    /// A synchronization point: preempt as the schedule says, else switch
    /// to the thread of the log's next event when it can run, else let
    /// the free threads take turns ([`Session::rotate`]).
    ///
    /// A thread preempted to runs under a [`Grant`] (its points are
    /// no-ops until the grant ends). `op` is the pthread operation thread
    /// `i` is at (`None` at a futex wake). A checkpoint may be taken
    /// first. Errors: taking the checkpoint failed.
    pub(super) fn sync_point(&mut self, i: usize, op: Option<Op>) -> Result<Step> {
        self.checkpoint(i, op)?;
        self.state.sync_count += 1;
        let granted = self.grant_holds(i, op);
        // Killed from outside, the recording left every thread where it
        // was stuck: each runs on to there.
        let handover = self.sync_logged
            && (matches!(op, Some(Op::Matched | Op::Woke(_))) || matches!(op, Some(Op::Released(var)) if self.log.is_ordered(var)))
            && self.killed_at_end().is_none();
        let default = match self.next_owner() {
            // A thread that blocked in a syscall until a signal interrupted
            // it runs on until it blocks there: another thread's unlogged
            // work (pthread_cancel's flag, which a cancellation point tests
            // on entry) must not come first.
            _ if !granted && self.blocked_until_signal(i) => i,
            _ if !granted && self.runs_on(i, op) => i,
            // With the order logged, after an event or a release (a
            // lock word's too), the log's next thread takes over: each thread's
            // unordered work runs as late as the log allows, so what
            // another thread reads without a lock (or takes as a lock
            // word) is not yet changed. A waiter may have to read first.
            Some(j) if handover && !granted && self.runnable(j) => self.reader_before(i, j).or_else(|| self.before_owner(j)).unwrap_or(j),
            _ if granted || self.sync_logged => i,
            Some(j) if j == i => i,
            Some(j) if self.runnable(j) => self.before_owner(j).unwrap_or(j),
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
                    // Lock words are taken unseen: the grant is one run to
                    // the thread's next point.
                    _ if handover => Until::Acquired,
                    _ => Until::Acquire,
                };
                self.state.granted = Some(Grant { thread: j, until });
                if j == i { Step::Stay } else { Step::Switch(Some(j)) }
            }
            _ if default == i => Step::Stay,
            _ => Step::Switch(Some(default)),
        })
    }

    /// Whether thread `i`, which runs on ([`RunOn`]), keeps the core at
    /// its point at `op`. A waker's run ends at the release of a lock word
    /// whose wake the log holds as the thread's next event (a soft one)
    /// after the woken thread's return: it still held that lock when the
    /// woken thread ran (a channel's waker list, which the woken receiver
    /// then waited for). Any run-on ends after [`RUN_ON_POINTS`] points.
    fn runs_on(&mut self, i: usize, op: Option<Op>) -> bool {
        use weft_record::event::{Sync, SyncOp};
        let Some(run) = self.state.threads[i].runs_on else { return false };
        let next = self.next_own_event(self.state.threads[i].rec);
        let ends = self.state.threads[i].steps > RUN_ON_POINTS
            || match (run, op, self.trace.events.get(next).map(|e| &e.kind)) {
                (RunOn::Waker { woken }, Some(Op::Released(word)), Some(EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. }))) => {
                    next > woken && *var == word
                }
                _ => false,
            };
        if ends {
            self.state.threads[i].runs_on = None;
        }
        !ends
    }

    /// The thread that must read a futex word before thread `j`, the log's
    /// next thread, changes it, if any. `j`'s next event wakes the word
    /// (a condition variable's notify, which increments the word first);
    /// another thread that can run (`i` included) has as its next event
    /// a wait on that word for the value it holds now. In the recording
    /// that thread read the value under the mutex before the notify and
    /// only started its wait later (the wait's place in the log is its
    /// call, not its read). Within a stretch where the word holds one
    /// value, the notifiers have not run, so the state the waiter checks
    /// (an empty queue) is likeliest at the stretch's end: here, the last
    /// point before the change.
    fn reader_before(&self, i: usize, j: usize) -> Option<usize> {
        use weft_record::event::{Sync, SyncOp};
        let word = match self.trace.events.get(self.state.pos).map(|e| &e.kind) {
            Some(EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. })) if !self.log.is_lock_word(*var) => *var,
            _ => return None,
        };
        let waits_for_now = |t: usize| {
            match self.next_logged(t).map(|e| &e.kind) {
                Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result })) if *var == word => {
                    self.word_holds(t, word, *result as u32)
                }
                _ => false,
            }
        };
        let candidates = (0..self.state.threads.len()).filter(|&t| t != j && (t == i || self.switchable(t)));
        candidates.filter(|&t| waits_for_now(t)).min_by_key(|&t| self.next_event_of(self.state.threads[t].rec))
    }

    /// A thread to run before thread `j`, the owner of the log's next
    /// event, runs to it: one finishing before `j`'s wake or park
    /// ([`Session::finisher_before`]), one that waits on the word `j`
    /// wakes ([`Session::settler_before`]), one with no event left but its
    /// exit before `j`'s exit_group ([`Session::ender_before`]), an
    /// earlier arrival at the word `j` waits on
    /// ([`Session::earlier_arrival`]), or an elder twin of `j`'s
    /// ([`Session::elder_before`]).
    pub(super) fn before_owner(&mut self, j: usize) -> Option<usize> {
        self.finisher_before(j)
            .or_else(|| self.settler_before(j))
            .or_else(|| self.ender_before(j))
            .or_else(|| self.earlier_arrival(j))
            .or_else(|| self.elder_before(j))
            .or_else(|| self.writer_before(j))
    }

    /// A thread to run before thread `j`, the log's next thread, goes on
    /// from (or to) a read that took what writes the log places later
    /// had written: the recorder logs a write where it returns, which on
    /// two cores may be after the reader's return. An eventfd that wakes
    /// an event loop is the common case: libuv's `uv_async_send` sets the
    /// handle's pending flag, then writes; the loop reads the eventfd,
    /// then looks at the flags. So the writer of such a write, when that
    /// write is its next event, runs to it first: what it did before it
    /// (the flag) is done when the reader looks. `j`'s read is its latest
    /// among the log's next event and its last [`READER_EVENTS`]; it took
    /// as many later writes (at most 8) as its value (8 bytes: an
    /// eventfd's count, each waker's write adding 1) exceeds the writes to
    /// its descriptor logged since the read before it, less those that
    /// read took ahead of the log in turn; or, for a read of other than 8
    /// bytes, the next write when none was logged since. The tests'
    /// eventfdwake.c: 0 of 5 recordings valid in log order without this,
    /// 5 of 5 with it; node's libuv thread pool: 8 of 8, 4 of 7 before.
    /// Scans go at most [`WRITE_LOOK`] events.
    fn writer_before(&self, j: usize) -> Option<usize> {
        let (at, fd, taken) = self.last_read(j)?;
        let proc = self.state.threads[j].proc;
        let ours: Vec<Tid> = self.state.threads.iter().filter(|t| t.proc == proc).map(|t| t.rec).collect();
        let on_fd = |e: &weft_record::Event, op: fn(i64) -> bool| {
            ours.contains(&e.tid) && matches!(&e.kind, EventKind::Syscall(s) if op(s.nr) && s.args[0] == fd && s.result > 0)
        };
        // Writes logged since the read before, less those that read had
        // taken already (it too may have taken writes logged after it).
        // From the second read of it before, whose value says how many
        // writes the read between took ahead.
        let window = &self.trace.events[at.saturating_sub(WRITE_LOOK)..at];
        let from = window.iter().rposition(|e| on_fd(e, is_read)).and_then(|k| window[..k].iter().rposition(|e| on_fd(e, is_read))).unwrap_or(0);
        let (mut since, mut taken_ahead) = (0u64, 0u64);
        for e in &window[from..] {
            if on_fd(e, is_write) {
                since += 1;
            } else if on_fd(e, is_read) {
                let value = if let EventKind::Syscall(s) = &e.kind { self.read_value(s) } else { None };
                taken_ahead = value.map_or(0, |v| v.saturating_sub(since.saturating_sub(taken_ahead)));
                since = 0;
            }
        }
        let since = since.saturating_sub(taken_ahead);
        let later = match taken {
            Some(value) => value.saturating_sub(since).min(8) as usize,
            None => usize::from(since == 0),
        };
        let writes = self.trace.events[at + 1..(at + 1 + WRITE_LOOK).min(self.trace.events.len())]
            .iter()
            .enumerate()
            .take_while(|(_, e)| !on_fd(e, is_read))
            .filter(|(_, e)| on_fd(e, is_write))
            .map(|(k, e)| (at + 1 + k, e.tid))
            .take(later);
        let due: Vec<(usize, Tid)> = writes.filter(|&(k, w)| k >= self.state.pos && self.next_own_event(w) == k).collect();
        self.fellows(j).find(|&t| due.iter().any(|&(_, w)| w == self.state.threads[t].rec))
    }

    /// The value read by read `s` of 8 bytes (an eventfd's count), if it
    /// read 8 bytes.
    fn read_value(&self, s: &weft_record::event::Syscall) -> Option<u64> {
        let data = self.trace.contents(&s.writes.first().filter(|_| s.result == 8)?.data).ok()?;
        Some(u64::from_le_bytes(data.get(..8)?.try_into().ok()?))
    }

    /// Thread `j`'s latest read that returned bytes, among the log's next
    /// event (if `j`'s) and its last [`READER_EVENTS`] events: its index,
    /// its descriptor, and, for a read of 8 bytes, the value read.
    fn last_read(&self, j: usize) -> Option<(usize, u64, Option<u64>)> {
        let rec = self.state.threads[j].rec;
        let list = self.log.events_of(rec)?;
        let end = list.partition_point(|&k| k <= self.state.pos);
        list[end.saturating_sub(READER_EVENTS + 1)..end].iter().rev().find_map(|&k| match &self.trace.events[k].kind {
            EventKind::Syscall(s) if is_read(s.nr) && s.result > 0 => Some((k, s.args[0], self.read_value(s))),
            _ => None,
        })
    }

    /// A thread to run before thread `j`, the log's next thread, runs its
    /// stretch to its next event: an elder twin of `j`, that is, another
    /// thread of its process that has not run since its last event, whose
    /// events so far (at most [`TWIN_EVENTS`]) are `j`'s (the same calls
    /// at the same sites), the last logged before `j`'s. Threads a pool
    /// starts run the same code, and the one ahead took the first task off
    /// the pool's queue, whose lock the log does not see (a Rust `Mutex`,
    /// tokio's blocking pool), even where its task's first event comes
    /// later in the log (it computed first). Run as late as the log
    /// allows, its stretch would come after the younger twin's, which
    /// would take that task. `tests/rust/poolstart.rs`, 6 recordings: 5
    /// valid in log order, none without the rule. (By spawn order instead
    /// of the last events' order, 5 too, not the same 5: a thread's first
    /// calls may lag behind a younger one's and its pop still come first,
    /// or not.)
    fn elder_before(&self, j: usize) -> Option<usize> {
        let history = |t: usize| -> Option<Vec<(u64, i64)>> {
            let list = self.log.events_of(self.state.threads[t].rec)?;
            let done = &list[..list.partition_point(|&k| k < self.state.pos)];
            (done.len() <= TWIN_EVENTS).then(|| done.iter().map(|&k| site_of(&self.trace.events[k])).collect())
        };
        // Stretches that end in a syscall: one that ends in a futex call
        // or a lock may hold a lock word the other needs.
        let ends_in_syscall = |t: usize| {
            let next = self.next_own_event(self.state.threads[t].rec);
            matches!(self.trace.events.get(next).map(|e| &e.kind), Some(EventKind::Syscall(_)))
        };
        if !ends_in_syscall(j) {
            return None;
        }
        let own = history(j).filter(|h| !h.is_empty())?;
        let last = self.state.threads[j].last_event?;
        self.fellows(j)
            .filter(|&t| self.state.threads[t].steps == 0 && self.state.threads[t].last_event.is_some_and(|k| k < last))
            .filter(|&t| ends_in_syscall(t))
            .filter(|&t| history(t).as_ref() == Some(&own))
            .min_by_key(|&t| self.state.threads[t].last_event)
    }

    /// A thread to run before thread `j`, the log's next thread, starts a
    /// wait on a futex word that is no lock word: of the other threads of
    /// its process whose next event is a wait on the same word, logged
    /// before the word's next wake, the one whose value is nearest the
    /// one the word holds now, if nearer than `j`'s ([`steps_apart`]).
    /// Each thread changed the word (unlogged: an atomic decrement, a
    /// latch's arrival) and then waited for the value it left, so the
    /// nearer value was left first, though the log places its wait, made
    /// at the call and not at the change, later (C++20 `std::latch`,
    /// whose arrivals may log their waits in any order, all before the
    /// last arrival's wake). It runs to its wait, which then waits for
    /// its place in the log.
    fn earlier_arrival(&self, j: usize) -> Option<usize> {
        use weft_record::event::{Sync, SyncOp};
        let wait_of = |t: usize| {
            let at = self.next_own_event(self.state.threads[t].rec);
            match self.trace.events.get(at).map(|e| &e.kind) {
                Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, result, .. })) => Some((at, *var, *result as u32)),
                _ => None,
            }
        };
        let (_, word, value) = wait_of(j).filter(|&(_, w, _)| !self.log.is_lock_word(w))?;
        let proc = self.state.threads[j].proc;
        // Most waits have no other waiter on their word: the log is
        // scanned and the word read only when one does.
        let others: Vec<(usize, usize, u32)> =
            self.fellows(j).filter_map(|t| wait_of(t).filter(|&(_, w, _)| w == word).map(|(at, _, v)| (at, t, v))).collect();
        if others.is_empty() {
            return None;
        }
        let wake = self.next_on_word(SyncOp::FutexWake, word);
        let now = self.mem(j).read_u32(self.state.aliases.replay_word(proc, word)).ok()?;
        let own = steps_apart(now, value);
        others
            .into_iter()
            .filter(|&(at, _, v)| at < wake && steps_apart(now, v) < own)
            .min_by_key(|&(at, _, v)| (steps_apart(now, v), at))
            .map(|(_, t, _)| t)
    }

    /// A thread to run before thread `j`, the log's next thread, wakes a
    /// futex word or starts a wait on one (parks): one whose next event
    /// is the return from its start routine (`ThreadReturn`), that is,
    /// one whose last stretch is all that is left of it. That stretch
    /// holds its teardown and often its last unlogged work, which in the
    /// recording came before the wake or the wait:
    /// - before a wake: the thread that finds itself last to finish wakes
    ///   the waiter (Rust's `thread::scope`), so the others must have
    ///   finished first;
    /// - before a wait: a producer that made no wake while the consumer
    ///   was parked sent before the consumer parked (the consumer drained
    ///   its messages first); run after the wait starts, its sends would
    ///   wake the consumer where the recording did not. Before a park on a
    ///   flag word (a thread parker), one whose next event is a wait on
    ///   another word, neither a lock word nor a flag word (another
    ///   receiver's parker), counts too: a worker that sends its result and
    ///   waits at a barrier (9 recordings of such a Rust pool: 3 valid in
    ///   log order before, 4 after; the others fail later, at races of
    ///   its atomic work counter). Not before a condition variable's
    ///   wait: a thread run before a worker's wait at the barrier took
    ///   the channel's message before the worker sent it (2 of those 9
    ///   broke when that counted).
    ///
    /// Only threads of `j`'s process count. One runs up to its return (or
    /// wait), which then waits for its place in the log. A thread whose
    /// own next event is its park hands over to such a thread too
    /// (emulate.rs, after its event before the park). It counts only
    /// with nothing logged before its return (soft
    /// events, a lock word's contended wait, included), and not when it
    /// woke the word before: it is then one of the word's wakers (a
    /// producer that woke the consumer earlier), whose last stretch may
    /// wake it again where the log places another thread's wake. And the
    /// log must place its return before the wait's end (the woken wait's
    /// return, or the return of the wait that starts: a producer whose
    /// return the log places after another's wake of the parked consumer
    /// sent all before the park just as well, and run at that wake, its
    /// sends would wake the consumer in the other's place), or, for
    /// a wake, after the woken thread moved on ([`Session::moved_on`]): a
    /// return between those was a thread still at its work while the
    /// waiter woke (a producer's last sends, 36 channel recordings of
    /// 36), one after them only a slow teardown (a scoped thread's
    /// decrement came before the last thread's, 12 scope recordings of
    /// 17, 8 without this).
    fn finisher_before(&self, j: usize) -> Option<usize> {
        use weft_record::event::{Sync, SyncOp};
        let (word, wake) = match self.trace.events.get(self.state.pos).map(|ev| &ev.kind) {
            Some(EventKind::Sync(Sync { op: op @ (SyncOp::FutexWake | SyncOp::FutexWaitStart), var, .. })) if !self.log.is_lock_word(*var) => {
                (*var, *op == SyncOp::FutexWake)
            }
            _ => return None,
        };
        if wake && self.state.lessons.wakers_first.contains(&self.state.pos) {
            return None;
        }
        // Each candidate with the index of the event that ends its stretch.
        let stretch_end = |t: usize| {
            let rec = self.state.threads[t].rec;
            let at = self.next_own_event(rec);
            let finishes = match self.trace.events.get(at).map(|e| &e.kind) {
                Some(EventKind::Sync(Sync { op: SyncOp::ThreadReturn, .. })) => true,
                Some(EventKind::Sync(Sync { op: SyncOp::FutexWaitStart, var, .. })) => {
                    let elsewhere = *var != word && !self.log.is_lock_word(*var) && !self.log.is_flag_word(*var);
                    !wake && self.log.is_flag_word(word) && elsewhere
                }
                _ => false,
            };
            (finishes && !self.woke(rec, word)).then_some((t, at))
        };
        let candidates: Vec<(usize, usize)> = self.fellows(j).filter_map(stretch_end).collect();
        if candidates.is_empty() {
            return None;
        }
        let end = self.next_on_word(SyncOp::FutexWait, word);
        let moved_on = if wake { self.moved_on(end, word) } else { usize::MAX };
        candidates
            .into_iter()
            .filter(|&(_, at)| at < end || at > moved_on)
            .map(|(t, _)| t)
            .min_by_key(|&t| self.next_event_of(self.state.threads[t].rec))
    }

    /// Parked thread `j` runs again, and no longer waits for others it
    /// spun for ([`super::Thread::spun`]); a vfork parent gets its
    /// child's writes first ([`Session::vfork_release`]).
    pub(super) fn unpark(&mut self, j: usize) {
        self.state.threads[j].at = At::Ready;
        self.state.threads[j].spun = false;
        self.vfork_release(self.state.threads[j].proc);
    }

    /// The threads other than `j` of `j`'s process that can run
    /// ([`Session::free`]): who may go before `j` ([`Session::before_owner`]).
    pub(super) fn fellows(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        self.others_of_process(j).filter(|&t| self.free(t))
    }

    /// The threads other than `j` of `j`'s process that were set aside
    /// ([`At::Parked`]).
    pub(super) fn parked_fellows(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        self.others_of_process(j).filter(|&t| self.state.threads[t].at == At::Parked)
    }

    /// The threads other than `j` of `j`'s process.
    pub(super) fn others_of_process(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        let proc = self.state.threads[j].proc;
        (0..self.state.threads.len()).filter(move |&t| t != j && self.state.threads[t].proc == proc)
    }

    /// The index of the log's next `op` on futex word `word`, from its
    /// current position on; `usize::MAX` when there is none.
    fn next_on_word(&self, op: weft_record::event::SyncOp, word: u64) -> usize {
        let on_word = |ev: &weft_record::Event| matches!(&ev.kind, EventKind::Sync(s) if s.op == op && s.var == word);
        self.trace.events[self.state.pos..].iter().position(on_word).map_or(usize::MAX, |k| self.state.pos + k)
    }

    /// The index of the first event, after the wait that returns at index
    /// `end`, of the thread that made it, that is not a futex call on
    /// `word`: where the woken thread moved on from that wait (a re-park on
    /// the same word is the same wait, a receiver's loop). `usize::MAX`
    /// when there is none.
    fn moved_on(&self, end: usize, word: u64) -> usize {
        let Some(woken) = self.trace.events.get(end) else { return usize::MAX };
        let list = self.log.events_of(woken.tid).unwrap_or_default();
        let on_word = |k: usize| matches!(&self.trace.events[k].kind, EventKind::Sync(s) if s.var == word);
        list[list.partition_point(|&k| k <= end)..].iter().copied().find(|&k| !on_word(k)).unwrap_or(usize::MAX)
    }

    /// A thread to run before thread `j` ends its process with the log's
    /// next event, an exit_group: another thread of the process with no
    /// event left but a thread exit the log places after the exit_group
    /// ([`Session::end_past_thread_exits`]: one entered before the
    /// exit_group took effect). In the recording the exit_group found it
    /// somewhere after its last event, often in its teardown, past
    /// glibc's decrement of the count of live threads: the count that
    /// made `j`'s exit the process's exit_group rather than a thread's
    /// exit (a main that called pthread_exit, whose last worker to
    /// finish ends the process). It runs on ([`Session::runs_on`]) to its
    /// next syscall, which no event matches, or its exit, and waits there
    /// for the process's end.
    fn ender_before(&mut self, j: usize) -> Option<usize> {
        let next = self.trace.events.get(self.state.pos)?;
        if next.tid != self.state.threads[j].rec || !matches!(&next.kind, EventKind::Syscall(s) if s.nr == libc::SYS_exit_group) {
            return None;
        }
        let t = self.fellows(j).find(|&t| self.only_exit_left(self.state.threads[t].rec))?;
        self.state.threads[t].runs_on = Some(RunOn::Ender);
        Some(t)
    }

    /// Whether thread `rec` has no event left from the log's current
    /// position on but, at most, its thread exit.
    fn only_exit_left(&self, rec: Tid) -> bool {
        let ahead = self.events_ahead(rec);
        let exit_only = ahead.iter().all(|&k| matches!(&self.trace.events[k].kind, EventKind::Syscall(s) if s.nr == libc::SYS_exit));
        exit_only && self.next_own_event(rec) == self.next_event_of(rec)
    }

    /// Whether thread `rec` woke futex word `word` before the log's
    /// current position.
    fn woke(&self, rec: Tid, word: u64) -> bool {
        use weft_record::event::{Sync, SyncOp};
        let list = self.log.events_of(rec).unwrap_or_default();
        list[..list.partition_point(|&e| e < self.state.pos)]
            .iter()
            .rev()
            .any(|&e| matches!(&self.trace.events[e].kind, EventKind::Sync(Sync { op: SyncOp::FutexWake, var, .. }) if *var == word))
    }

    /// Whether thread `i`, at a synchronization point at `op`, runs on
    /// under a preemption's grant; ends the grant when it does not.
    pub(super) fn grant_holds(&mut self, i: usize, op: Option<Op>) -> bool {
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
    pub(super) fn preemption(&self) -> Option<usize> {
        self.opts.schedule.preemption_at(self.state.sync_count).and_then(|rec| self.state.by_rec.get(&rec).copied())
    }

    /// Adds the synchronization operation thread `i` is at to the sync
    /// trace; `then` is the thread the default replay runs next.
    pub(super) fn record_sync(&mut self, i: usize, then: usize, granted: bool) {
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
    pub(super) fn rotate(&self, i: usize) -> usize {
        let threads = &self.state.threads;
        (0..threads.len()).filter(|&j| j == i || self.free(j)).min_by_key(|&j| (threads[j].last_ran, j)).unwrap_or(i)
    }

    /// Whether thread `j` is stopped where it can simply be resumed.
    pub(super) fn free(&self, j: usize) -> bool {
        matches!(self.state.threads[j].at, At::Ready | At::Deliver(_) | At::Woken(_)) && !self.state.protect.holds(j)
    }

    /// The thread to run when the current one cannot: the owner of the
    /// log's next event if it can run (after a thread that must go
    /// before it, [`Session::before_owner`]); else the free thread whose next
    /// event comes first in the log (seed 000's deterministic next thread);
    /// else a deadlock.
    pub(super) fn pick(&mut self) -> std::result::Result<usize, Failure> {
        if let Some(j) = self.next_owner().filter(|&j| self.state.threads[j].at == At::Parked) {
            // Its turn has come; but one that spun through it waits for
            // others' unlogged work, which runs first, each to its next
            // point (or until set aside in turn).
            if let Some(k) = self.fellows(j).next().filter(|_| self.state.threads[j].spun) {
                return Ok(k);
            }
            // Or work a thread set aside before it has left: they take
            // turns, the one that ran longest ago first.
            let turn = self.parked_fellows(j).chain([j]).min_by_key(|&k| (self.state.threads[k].last_ran, k));
            let k = turn.filter(|_| self.state.threads[j].spun).unwrap_or(j);
            self.unpark(k);
            if k != j {
                return Ok(k);
            }
        }
        if let Some(j) = (0..self.state.threads.len()).find(|&j| self.unlogged_wait_over(j)) {
            return Ok(j);
        }
        if let Some(j) = self.next_owner().filter(|&j| self.runnable(j)) {
            return Ok(self.before_owner(j).unwrap_or(j));
        }
        let free = (0..self.state.threads.len())
            .filter(|&j| self.free(j))
            .min_by_key(|&j| (self.next_event_of(self.state.threads[j].rec), j));
        if let Some(j) = free {
            return Ok(j);
        }
        // Nothing else can run: a parked thread may still have unlogged
        // work (a futex wake) that the others wait for.
        if let Some(j) = self.state.threads.iter().position(|t| t.at == At::Parked) {
            self.unpark(j);
            return Ok(j);
        }
        // A race reversal's held thread, whose runner cannot go on.
        if let Some(j) = self.state.protect.release() {
            return Ok(j);
        }
        let expected = self.trace.events.get(self.state.pos).map_or("nothing (the log is exhausted)".into(), |e| e.to_string());
        let threads = self.stuck_threads();
        let label = self.next_owner().map_or(0, |j| self.site(j));
        Err(Failure::Deadlock { at: self.position(0), label, expected, threads })
    }

    pub(super) fn describe_thread(&self, t: &Thread) -> String {
        let state = match t.at {
            At::Ready | At::Deliver(_) | At::Woken(_) | At::Sync(_) => "runnable".to_string(),
            At::Entry(e) if e.nr == weft_record::runtime::NR_SYNC => match weft_record::event::SyncOp::from_code(e.args[0] as i64) {
                Some(op) => format!("waiting to make the runtime's {op:?} on {:#x} (not its turn in the log)", e.args[1]),
                None => format!("waiting to make runtime marker {} (not its turn in the log)", e.args[0]),
            },
            At::Entry(e) => format!("waiting to run {} (not its turn in the log)", syscalls::name(e.nr)),
            At::Fault(s) => format!("waiting to take {} (not its turn in the log)", signal_name(s)),
            At::Blocked(w) => format!("blocked in futex wait on {:#x}", w.uaddr),
            At::Exited => "exited".to_string(),
            At::Parked => "parked (it ran on without a scheduling point while another thread's event was due)".to_string(),
        };
        format!("thread {} (pc {:#x}): {state}", t.rec, t.regs.rip)
    }

    /// The thread the log's next event belongs to, if it exists.
    pub(super) fn next_owner(&self) -> Option<usize> {
        let e = self.trace.events.get(self.state.pos)?;
        self.state.by_rec.get(&e.tid).copied()
    }

    /// Thread `i`'s next logged event at or after the current one, if
    /// any.
    pub(super) fn next_logged(&self, i: usize) -> Option<&weft_record::Event> {
        self.trace.events.get(self.next_event_of(self.state.threads[i].rec))
    }

    /// Index of thread `rec`'s next event at or after the current one,
    /// soft events ([`LogIndex::is_soft`]) included: where the recording
    /// shows it next, matched or not.
    fn next_own_event(&self, rec: Tid) -> usize {
        let soft = self.log.soft_events_of(rec);
        let next_soft = soft.get(soft.partition_point(|&e| e < self.state.pos)).copied().unwrap_or(usize::MAX);
        next_soft.min(self.next_event_of(rec))
    }

    /// Index of thread `rec`'s next event at or after the current one.
    pub(super) fn next_event_of(&self, rec: Tid) -> usize {
        self.events_ahead(rec).first().copied().unwrap_or(usize::MAX)
    }

    /// The indices of thread `rec`'s logged events from the log's current
    /// position on, in order.
    pub(super) fn events_ahead(&self, rec: Tid) -> &[usize] {
        let list = self.log.events_of(rec).unwrap_or_default();
        &list[list.partition_point(|&e| e < self.state.pos)..]
    }

    /// Whether thread `j` can run: not gone, and not blocked unless a
    /// signal due now interrupts its wait.
    pub(super) fn runnable(&self, j: usize) -> bool {
        if self.state.protect.holds(j) {
            return false;
        }
        match self.state.threads[j].at {
            At::Exited | At::Parked => false,
            At::Blocked(_) => self.async_signal_due(j).is_some_and(|s| self.can_interrupt_wait(j, s)),
            _ => true,
        }
    }

    /// Whether switching to thread `j` would run some of its code: it is
    /// free, or about to make a futex call; a thread waiting for its turn
    /// at a logged event would only hand control back.
    pub(super) fn switchable(&self, j: usize) -> bool {
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
    pub(super) fn site(&self, i: usize) -> u64 {
        let t = &self.state.threads[i];
        t.caller.unwrap_or(t.regs.rip)
    }

    pub(super) fn position(&self, i: usize) -> Position {
        Position { event: self.state.pos as u64, tid: self.state.threads[i].rec, steps: self.state.threads[i].steps }
    }

    /// Records a scheduling decision in the digest.
    pub(super) fn note(&mut self, cur: usize) {
        let Some(d) = self.state.digest.as_mut() else { return };
        d.add(self.state.pos as u64, self.state.threads[cur].rec, self.state.threads.iter().map(|t| (t.rec, &t.regs)));
    }

    /// Compares how the replay ended with the log's end event.
    pub(super) fn finish(&mut self, end: ProcessEnd) -> Result<Outcome> {
        let observed = match end {
            ProcessEnd::Exited(code) => format!("exited with status {code}"),
            ProcessEnd::Killed(signo) => {
                let d = self.state.last_delivery.unwrap_or_default();
                format!("killed by {} in thread {} at pc {:#x}", signal_name(signo), d.rec, d.pc)
            }
        };
        if let Some(end) = self.end_past_thread_exits(self.state.pos) {
            self.state.pos = end;
        }
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

    /// The index of the log's end event when only thread exits lie
    /// between `pos` and it. Such an exit was entered before its process's
    /// exit_group took effect, so the exit_group ends that thread in a
    /// replay; recorders before trace format 12's last revision logged
    /// them. The batch check ([`Self::finish`]) and the interactive stop
    /// at the exit_group agree through this.
    pub(super) fn end_past_thread_exits(&self, pos: usize) -> Option<usize> {
        let events = self.trace.events.get(pos..)?;
        let k = events.iter().position(|e| !matches!(&e.kind, EventKind::Syscall(s) if s.nr == libc::SYS_exit))?;
        matches!(events[k].kind, EventKind::End(_)).then_some(pos + k)
    }

    /// The log ran out before the replay did: every readable event was
    /// matched, and the trace says why there are no more.
    pub(super) fn incomplete(&self) -> Failure {
        let why = self.trace.damage.as_ref().map_or("the trace has no end event".into(), |d| d.to_string());
        Failure::IncompleteTrace { matched: self.state.pos as u64, why }
    }

    /// [`Report::fingerprint`] of the replay stopping with `outcome`.
    pub(super) fn fingerprint(&self, outcome: &Outcome) -> u64 {
        let how = match outcome {
            Outcome::Valid { .. } => String::new(),
            Outcome::Invalid(f) => f.to_string(),
        };
        let states: Vec<String> = self.state.threads.iter().map(|t| format!("{:?}", t.at)).collect();
        let threads = self.state.threads.iter().zip(&states).map(|(t, s)| (t.rec, &t.regs, s.as_bytes()));
        digest::hash_point(self.state.pos as u64, how.as_bytes(), threads)
    }
}

/// How far [`Session::writer_before`] looks from a read for the read
/// before it and the writes after it, in events.
const WRITE_LOOK: usize = 65536;

/// How many of a thread's last events [`Session::last_read`] looks at.
const READER_EVENTS: usize = 8;

/// Whether syscall `nr` reads from a descriptor's stream (read(2),
/// readv(2), recvfrom(2), recvmsg(2)).
fn is_read(nr: i64) -> bool {
    [libc::SYS_read, libc::SYS_readv, libc::SYS_recvfrom, libc::SYS_recvmsg].contains(&nr)
}

/// Whether syscall `nr` writes to a descriptor's stream (write(2),
/// writev(2), sendto(2), sendmsg(2)).
fn is_write(nr: i64) -> bool {
    [libc::SYS_write, libc::SYS_writev, libc::SYS_sendto, libc::SYS_sendmsg].contains(&nr)
}

/// The most events two threads may have made to count as twins
/// ([`Session::elder_before`]): a pool's threads starting up.
const TWIN_EVENTS: usize = 16;

/// An event's site: its pc and what it was (a syscall's number, a
/// synchronization's operation as a negative number, -1 for any other
/// kind), which tell the same call in the same code.
fn site_of(e: &weft_record::Event) -> (u64, i64) {
    let what = match &e.kind {
        EventKind::Syscall(s) => s.nr,
        EventKind::Sync(s) => -2 - s.op as i64,
        _ => -1,
    };
    (e.label, what)
}

/// How many atomic increments or decrements of one separate futex word
/// values `a` and `b`, either way, wrapping as a u32 does (a latch
/// counting down from 3 and one counting up past u32::MAX alike).
fn steps_apart(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b).min(b.wrapping_sub(a))
}

#[cfg(test)]
mod tests {
    use super::steps_apart;

    #[test]
    fn steps_apart_counts_either_way_and_wraps() {
        assert_eq!(steps_apart(3, 1), 2);
        assert_eq!(steps_apart(1, 3), 2);
        assert_eq!(steps_apart(5, 5), 0);
        assert_eq!(steps_apart(0, u32::MAX), 1, "a parker's -1 is one step from 0");
        assert_eq!(steps_apart(u32::MAX - 1, 2), 4);
    }
}
