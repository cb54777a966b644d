//! Syscall emulation and event matching: seed 000's *pevnt* test and its
//! checks (chkEvt, chkWrt), then carrying out a matched event by its class
//! (inputs from the log, outputs checked and echoed, file mmaps filled from
//! the trace's copies, clone, exit, kill, emulated futexes).

use super::{At, Delivery, Entry, Halt, Observed, ProcessEnd, Session, Step, Thread};
use crate::failure::Failure;
use crate::fds::Stream;
use crate::futex;
use crate::sync_points::{self, MarkerPoint, Op};
use anyhow::{bail, Result};
use nix::sys::ptrace;
use nix::sys::wait::WaitPidFlag;
use weft_record::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use weft_record::event::{self, End, Event, EventKind, Exec, MemWrite, SyncOp, Syscall};
use weft_record::{runtime, seccomp};
use weft_record::syscalls::{self, Class};
use weft_record::tracee::{self, clone_flags, Memory};
use weft_record::Tid;

/// How many of a thread's logged events [`Session::delivered_at_its_place`]
/// looks through for a signal's delivery: it is usually among the next
/// few, and a signal never delivered (consumed by sigwait, or sent to a
/// thread that exited) must not cost a scan of the rest of the log.
const SIGNAL_LOOKAHEAD: usize = 1024;

/// How many bytes of a mismatched write an unmatched-event message shows.
const SHOWN_OUTPUT: usize = 80;

impl Session<'_> {
    /// A *pevnt* test then a check (seed 000 Fig. 8): run the event if it
    /// is the log's next and belongs to this thread, else switch to the
    /// thread the log names.
    pub(super) fn event_point(&mut self, i: usize, observed: Observed) -> Result<Step> {
        let Some(expected) = self.trace.events.get(self.state.pos) else {
            return Ok(Step::Fail(self.incomplete()));
        };
        if let Some(rec) = self.killed_at_end() {
            // Killed from outside, the recording left every thread where
            // it was stuck: one that waits at a point runs on to there.
            if let Some(j) = (0..self.state.threads.len()).find(|&j| j != i && self.free(j)) {
                return Ok(Step::Switch(Some(j)));
            }
            return Ok(Step::End(self.kill_as_recorded(rec)?));
        }
        self.state.threads[i].runs_on = None;
        let me = self.state.threads[i].rec;
        if expected.tid != me && !matches!(expected.kind, EventKind::End(_)) {
            // A wait the log does not hold is made now, not at the
            // thread's turn: it is no event, and the thread that left it
            // waiting (a receiver whose sender has not run) is behind.
            if let Some(step) = self.unlogged_wait(i, &observed)? {
                return Ok(step);
            }
            return Ok(Step::Switch(None));
        }
        // Another thread's fatal signal ends the recording: this thread,
        // with no event left, waits at its point while that one dies.
        if matches!(expected.kind, EventKind::End(End::Killed { tid, .. }) if tid != me && self.state.by_rec.contains_key(&tid))
            && self.next_event_of(me) == usize::MAX
            && matches!(observed, Observed::Syscall(_))
        {
            return Ok(Step::Switch(None));
        }
        if let (EventKind::End(_), Some(end)) = (&expected.kind, self.state.root_end) {
            // The first process ended the recording; the processes left
            // were killed there.
            self.kill_all();
            self.drain()?;
            return Ok(Step::End(end));
        }
        if let Some(why) = self.mismatch(i, &observed, expected) {
            if let Some(step) = self.unlogged_wait(i, &observed)? {
                return Ok(step);
            }
            let label = self.label_of(&observed);
            let observed = format!("tid {me} @{label:#x}  {why}");
            return Ok(Step::Fail(Failure::Unmatched { at: self.position(i), label, expected: expected.to_string(), observed }));
        }
        if let Some(j) = self.writer_before_changed_word(i, expected) {
            return Ok(Step::Switch(Some(j)));
        }
        self.state.threads[i].last_event = Some(self.state.pos);
        self.next_event();
        self.state.threads[i].steps = 0;
        self.state.threads[i].marked = false;
        if let Some(point) = self.point_after_marker(i, expected) {
            self.state.threads[i].next_point = Some(point);
        }
        let step = self.apply(i, observed, expected)?;
        // What a thread does between two of its events, unordered by the
        // log, is done as late as the log allows: a lock word taken
        // without a call (log_index.rs), or data another thread reads
        // without the lock that orders it (sort's merge tree). A
        // synchronization point, so that exploration can let the thread
        // run on instead.
        // A release's point came before its marker, where the real release
        // was done (sync_points.rs: a barrier's last arrival decides which
        // thread is its serial one), and the log's next event was still the
        // thread's own, this marker. When the next is another thread's, a
        // marker the runtime makes after the real call (its RELEASE
        // functions; a condition wait's release and a barrier's arrival
        // come before theirs) is a point too: without it the thread ran on
        // past its release, and a loop that makes no call (openssl speed's
        // hashing until SIGALRM) kept the core from the thread the log
        // waits for.
        let handover = match &expected.kind {
            // The thread was blocked in a syscall from here until a signal
            // interrupted it: it goes there now, where a kill finds it as
            // it found it in the recording (pthread_cancel signals only a
            // thread waiting in a cancellation point).
            _ if self.blocked_until_signal(i) => false,
            EventKind::Sync(s) if s.op == SyncOp::BarrierArrive => self.barrier_arrives_last(i, s.var),
            // What follows a start routine's return is libc's teardown,
            // which the recording ran at once: glibc's count of live
            // threads, decremented there, decides which thread's exit is
            // the process's exit_group. Unless the thread's exit is that
            // exit_group and other threads' events come first: then their
            // teardowns ran before its own, and it waits for its turn.
            EventKind::Sync(s) if s.op == SyncOp::ThreadReturn => {
                let ends_process = matches!(self.next_logged(i).map(|e| &e.kind), Some(EventKind::Syscall(c)) if c.nr == libc::SYS_exit_group);
                ends_process && self.next_owner().is_some_and(|j| j != i)
            }
            EventKind::Sync(s) if s.op == SyncOp::FutexWake => match self.wakes_next_waiter(i, s.var) {
                Some(woken) => {
                    self.state.threads[i].runs_on = Some(super::RunOn::Waker { woken });
                    false
                }
                None => true,
            },
            EventKind::Sync(s) if s.op.is_release() => s.op != SyncOp::CondRelease && self.next_owner().is_some_and(|j| j != i),
            _ => true,
        };
        // The thread's next event is a signal that hit its user code, and
        // another thread's event comes first: it stays here until the
        // signal is due, and its search then starts from here. Run on to
        // its next point, it could pass the place (raisekill.c: back from
        // one handler to the entry of another, where the next signal hit,
        // and on into a buffered call).
        if matches!(step, Step::Stay) && self.next_owner() != Some(i) && self.signal_hits_next(i) {
            return Ok(Step::Switch(None));
        }
        // The log's next event is the thread's own (its exit_group, its
        // park): who goes before it goes now, as when another thread
        // hands over to it.
        if matches!(step, Step::Stay) && self.next_owner() == Some(i) {
            if let Some(t) = self.before_owner(i) {
                return Ok(Step::Switch(Some(t)));
            }
        }
        let waits = matches!(&expected.kind, EventKind::Sync(s) if matches!(s.op, SyncOp::LockWait | SyncOp::SyscallWait));
        let matched = self.state.pos - 1;
        if self.sync_logged && handover && matches!(step, Step::Stay) && (self.state.threads[i].at == At::Ready || waits) {
            if self.state.lessons.run_on_all.learned() {
                // Running on, it still passes a point: a preemption can
                // take the core there.
                self.state.threads[i].runs_on = Some(super::RunOn::OwnCore);
            } else if self.state.lessons.run_on_after.contains(&matched) {
                return Ok(step);
            } else {
                self.state.threads[i].waits_after = Some(matched);
            }
            return self.sync_point(i, Some(Op::Matched));
        }
        Ok(step)
    }

    /// The thread to run before thread `i`'s futex wait `expected`, which
    /// the recording saw fail with EAGAIN: the word no longer held the
    /// value the wait expected, so another thread had stored to it, an
    /// atomic store no log holds (a mailbox's post, a latch's count).
    /// While the word still holds that value, another thread runs (it
    /// parks at its next event, its store made or not), and `i` stays at
    /// its wait: one whose next event is a wait on the word for another
    /// value, which saw the word changed (a latch's next arrival, which
    /// made the change), else the thread furthest behind
    /// ([`Session::furthest_behind`]). `None` once the word changed, or
    /// when no other thread can run code (the wait is then matched as it
    /// stands).
    fn writer_before_changed_word(&self, i: usize, expected: &Event) -> Option<usize> {
        let (word, value) = self.eagain_wait(i, expected)?;
        if !self.word_holds(i, word, value) {
            return None;
        }
        let saw_change = |t: usize| {
            matches!(self.next_logged(t).map(|e| &e.kind), Some(EventKind::Sync(s)) if s.op == SyncOp::FutexWaitStart && s.var == word && s.result as u32 != value)
        };
        (0..self.state.threads.len())
            .filter(|&t| t != i && self.switchable(t) && saw_change(t))
            .min_by_key(|&t| self.next_event_of(self.state.threads[t].rec))
            .or_else(|| self.furthest_behind(i))
    }

    /// Thread `i` starts a runtime futex wait that the log does not hold
    /// next: in the recording it found the word changed and did not wait,
    /// because another thread's store (atomic, unlogged) came earlier
    /// there than the replay has run it (a mailbox's post, seen right
    /// after a timed wait expired). A futex wait may return EAGAIN
    /// whenever the word has changed (futex(2)), and callers check the
    /// word again: while it holds the value the wait expects, the thread
    /// furthest behind runs ([`Session::furthest_behind`]), and `i` stays at its
    /// wait; once it changed, the wait is made for real (emulated, it
    /// returns EAGAIN) and its return marker is answered as no event.
    /// `None` when `observed` is no such wait, or no other thread can run
    /// code: the mismatch stands.
    fn unlogged_wait(&mut self, i: usize, observed: &Observed) -> Result<Option<Step>> {
        let Observed::Syscall(e) = observed else { return Ok(None) };
        if !self.unlogged_wait_start(i, e) {
            return Ok(None);
        }
        if self.wait_word_changed(i, e) {
            self.state.threads[i].unlogged_wait = Some(e.args[1]);
            self.finish_syscall(i, 1)?;
            return Ok(Some(Step::Stay));
        }
        Ok(self.furthest_behind(i).map(|j| Step::Switch(Some(j))))
    }

    /// The thread other than `i` that can run code and whose last matched
    /// event lies furthest back in the log. In the recording it ran on
    /// alongside the others since then, so it is the one whose unlogged
    /// work (a producer's sends into a channel) the one-core replay has
    /// left furthest behind: the likeliest to make the store that a wait
    /// the recording never made waits for. (The thread whose next event
    /// comes first is usually the one that ran last, and letting it run
    /// on takes its unlogged work too early: a receiver's unregistering,
    /// before the send that should find it registered.) A thread with no
    /// event yet counts from its spawn, after its parent, which went on at
    /// once while it started; among equals, the one that ran longest ago
    /// goes first, so that a spinner that hands the core straight back
    /// does not keep it from the others.
    fn furthest_behind(&self, i: usize) -> Option<usize> {
        let threads = &self.state.threads;
        let behind = |j: usize| {
            let t = &threads[j];
            (t.last_event.unwrap_or(t.spawned_at), t.last_event.is_none(), t.last_ran, j)
        };
        (0..threads.len()).filter(|&j| j != i && self.switchable(j)).min_by_key(|&j| behind(j))
    }

    /// The word and expected value of `expected`, thread `i`'s next event,
    /// when it is a futex wait that failed with EAGAIN: a runtime wait
    /// (its value is in the thread's previous event, the wait's start) or
    /// a logged futex syscall.
    fn eagain_wait(&self, i: usize, expected: &Event) -> Option<(u64, u32)> {
        let eagain = -(libc::EAGAIN as i64);
        match &expected.kind {
            EventKind::Sync(s) if s.op == SyncOp::FutexWait && s.result == eagain => {
                match &self.trace.events.get(self.state.threads[i].last_event?)?.kind {
                    EventKind::Sync(start) if start.op == SyncOp::FutexWaitStart && start.var == s.var => {
                        Some((s.var, start.result as u32))
                    }
                    _ => None,
                }
            }
            EventKind::Syscall(s) if s.nr == libc::SYS_futex && s.result == eagain && futex::is_wait(s.args[1]) => {
                Some((s.args[0], s.args[2] as u32))
            }
            _ => None,
        }
    }

    /// The index of the wait that thread `i`'s futex wake on `var`, just
    /// matched, ended, when that wait's return is the log's next event of
    /// another thread, and `var` is a flag word (a parked receiver's
    /// parker; not a condition variable's counter, whose woken waiter
    /// takes the mutex next, nor a lock word). The waker then
    /// runs on to its next event before the woken thread
    /// ([`Session::runs_on`]): in the recording the woken thread took tens
    /// of microseconds to be scheduled, while the waker went on with its
    /// unlogged work (a sender's next items). Handed over at once, the
    /// woken thread found that work not done: a receiver drained the
    /// channel and parked again before the sends the recording made
    /// first, the sender then woke it where the recording did not, and a
    /// later sender found no one to wake. `None` too when the waker's next
    /// event wakes `var` again: the woken thread had parked again before
    /// it, so the waker was not that far ahead.
    fn wakes_next_waiter(&self, i: usize, var: u64) -> Option<usize> {
        let wait_on_var = |e: &Event, op: SyncOp| matches!(&e.kind, EventKind::Sync(s) if s.op == op && s.var == var);
        if !self.log.is_flag_word(var) || self.next_logged(i).is_some_and(|e| wait_on_var(e, SyncOp::FutexWake)) {
            return None;
        }
        let rec = self.state.threads[i].rec;
        let woken = self.state.pos + self.trace.events[self.state.pos..].iter().position(|e| e.tid != rec)?;
        wait_on_var(&self.trace.events[woken], SyncOp::FutexWait).then_some(woken)
    }

    /// Whether thread `i`, whose arrival at barrier `var` was just
    /// matched, is to wait before its real call for the arrivals of other
    /// threads that the log places after its own. The runtime logs an
    /// arrival before the real call, and another thread could reach the
    /// real barrier first; the last to reach it is the round's serial
    /// thread (pthread_barrier_wait(3)), as the thread's next leave of
    /// `var` records. So a serial thread with arrivals still to come hands
    /// the core over at its marker; the others go on into the barrier,
    /// in log order. (A replay that went on in log order made the wrong
    /// thread serial in 2 recordings of 6 of 2,000 three-thread rounds.)
    fn barrier_arrives_last(&self, i: usize, var: u64) -> bool {
        let me = self.state.threads[i].rec;
        let on_var = |e: usize, op: SyncOp| matches!(&self.trace.events[e].kind, EventKind::Sync(s) if s.op == op && s.var == var);
        let from = self.state.pos;
        let Some(&leave) = self.events_ahead(me).iter().find(|&&e| on_var(e, SyncOp::BarrierLeave)) else {
            return false;
        };
        // Any other arrival before its leave: one of the next round
        // (logged before the thread's leave of this one, which only this
        // thread's real arrival lets it make) leaves the others blocked in
        // the barrier, and the scheduler gives this thread the core back
        // (a thread that left the previous round late arrives again, in
        // this round, after its leave: filtering arrivals that follow
        // their thread's leave made the wrong thread serial).
        let serial = matches!(&self.trace.events[leave].kind, EventKind::Sync(s) if s.result == 1);
        serial && (from..leave).any(|e| self.trace.events[e].tid != me && on_var(e, SyncOp::BarrierArrive))
    }

    /// The point a parked breakpoint gives before runtime marker `e` of
    /// thread `i` (sync_points.rs), if any and not yet taken at this
    /// marker: taking it marks the thread.
    pub(super) fn take_point_before_marker(&mut self, i: usize, e: &Entry) -> Option<Op> {
        if e.nr != runtime::NR_SYNC || self.state.threads[i].marked {
            return None;
        }
        let op = SyncOp::from_code(e.args[0] as i64)?;
        match sync_points::marker_point(op, e.args[1], 0)? {
            MarkerPoint::Before(point) if self.parked(i) => {
                self.state.threads[i].marked = true;
                Some(point)
            }
            _ => None,
        }
    }

    /// The point a parked breakpoint gives after logged event `matched`,
    /// thread `i`'s runtime marker, if any.
    fn point_after_marker(&self, i: usize, matched: &Event) -> Option<Op> {
        let EventKind::Sync(s) = &matched.kind else { return None };
        match sync_points::marker_point(s.op, s.var, s.result)? {
            MarkerPoint::After(point) if self.parked(i) => Some(point),
            _ => None,
        }
    }

    /// Whether thread `i`'s process has libc's breakpoints parked.
    fn parked(&self, i: usize) -> bool {
        self.state.procs[self.state.threads[i].proc].sync.parked()
    }

    /// Moves to the log's next event that the replay matches, past soft
    /// ones (log_index.rs).
    pub(super) fn next_event(&mut self) {
        self.state.pos += 1;
        while self.trace.events.get(self.state.pos).is_some_and(|e| self.log.is_soft(e)) {
            self.state.pos += 1;
        }
    }

    pub(super) fn label_of(&self, observed: &Observed) -> u64 {
        match observed {
            Observed::Syscall(e) => e.label,
            Observed::Signal(_, pc) | Observed::Rdtsc { pc, .. } => *pc,
        }
    }

    /// Seed 000's checks (chkEvt, chkWrt): `None` when `observed` matches
    /// the event, else a description of what the replay did.
    pub(super) fn mismatch(&self, i: usize, observed: &Observed, expected: &Event) -> Option<String> {
        let label = self.label_of(observed);
        let describe = || match observed {
            // The runtime's marker, as the log shows a synchronization.
            Observed::Syscall(e) if e.nr == weft_record::runtime::NR_SYNC => match event::SyncOp::from_code(e.args[0] as i64) {
                Some(op) => format!("sync {op:?} {:#x}", e.args[1]),
                None => format!("runtime marker {}", e.args[0]),
            },
            Observed::Syscall(e) => {
                let args: Vec<String> = e.args.iter().map(|a| format!("{a:#x}")).collect();
                format!("{}({})", syscalls::name(e.nr), args.join(", "))
            }
            Observed::Signal(sig, _) => format!("signal {}", event::signal_name(*sig)),
            Observed::Rdtsc { .. } => "rdtsc".to_string(),
        };
        // An asynchronous signal reaches a replayed thread where it next
        // stops, not at the recorded instruction (DESIGN.md, known traps):
        // one the program sent itself may surface at any instruction.
        let anywhere = matches!((observed, &expected.kind), (Observed::Signal(..), EventKind::Signal(s)) if !s.synchronous);
        if expected.label != label && !anywhere {
            return Some(describe());
        }
        match (observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { flags, .. }) => {
                let same = syscalls::class(e.nr) == Class::Clone
                    && clone_flags(self.mem(i), &self.state.threads[i].regs) == *flags;
                (!same).then(describe)
            }
            (Observed::Syscall(e), EventKind::Exec(_)) => (syscalls::class(e.nr) != Class::Exec).then(describe),
            (Observed::Syscall(e), EventKind::Syscall(s)) => {
                if e.nr != s.nr || syscalls::key_args(e.nr).iter().any(|&k| e.args[k] != s.args[k]) {
                    return Some(describe());
                }
                if let Some(k) = syscalls::path_arg(e.nr) {
                    let path = syscalls::read_path(e.args[k], |a| self.mem(i).read_cstr(a));
                    if path != s.path {
                        let shown = path.as_deref().map_or("NULL".into(), String::from_utf8_lossy);
                        return Some(format!("{} with path {:?}", describe(), shown));
                    }
                }
                if let Some(want) = s.output_hash {
                    let mut rd = |a: u64| self.mem(i).read_u64(a).ok();
                    let ranges = syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd);
                    if self.mem(i).hash_ranges(&ranges) != want {
                        // The log holds the recorded bytes' hash only: what
                        // the replay would write shows how it differs.
                        let bytes = self.mem(i).read_ranges(&ranges).unwrap_or_default();
                        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN_OUTPUT)]);
                        let more = if bytes.len() > SHOWN_OUTPUT { "..." } else { "" };
                        return Some(format!("{} writing different bytes: {shown:?}{more}", describe()));
                    }
                }
                None
            }
            // A blocking call's start is matched at the call's entry,
            // where the thread then stays until the call's own event.
            (Observed::Syscall(e), EventKind::Sync(s)) if s.op == SyncOp::SyscallWait => (e.nr != s.var as i64).then(describe),
            (Observed::Syscall(e), EventKind::Sync(s)) => {
                // A contended acquire's wait is matched at the acquire's
                // own marker: the runtime cannot know, in a replay, that
                // the recording waited (weft_runtime.c's TRY_FIRST).
                let same = e.nr == runtime::NR_SYNC
                    && if s.op == SyncOp::LockWait {
                        e.args[0] as i64 == s.result
                    } else {
                        e.args[0] == s.op as u64 && (!s.op.result_matters() || e.args[2] as i64 == s.result)
                    };
                (!same).then(|| match SyncOp::from_code(e.args[0] as i64) {
                    Some(op) if e.nr == runtime::NR_SYNC => format!("sync {op:?} {:#x} = {}", e.args[1], e.args[2] as i64),
                    _ => describe(),
                })
            }
            (Observed::Signal(sig, _), EventKind::Signal(s)) => (*sig != s.signo).then(describe),
            (Observed::Rdtsc { rdtscp, .. }, EventKind::Rdtsc { aux, .. }) => {
                (*rdtscp != aux.is_some()).then(describe)
            }
            _ => Some(describe()),
        }
    }

    /// Whether signal `signo`, matched for thread `i`, is the one that
    /// ended the recording: the end is this signal in this thread, and the
    /// thread has no event before it.
    pub(super) fn fatal(&self, i: usize, signo: i32) -> bool {
        let rec = self.state.threads[i].rec;
        let ends = matches!(self.trace.events.last().map(|e| &e.kind), Some(EventKind::End(End::Killed { signo: s, tid, .. })) if *s == signo && *tid == rec);
        ends && self.next_event_of(rec) == usize::MAX
    }

    /// Whether thread `i` holds back the fatal signal it is about to
    /// receive: other threads' events come before the end in the log (on
    /// other cores they ran while the kernel killed the process), and the
    /// next one's thread can run.
    pub(super) fn holds_fatal_signal(&self, i: usize) -> bool {
        let At::Deliver(sig) = self.state.threads[i].at else { return false };
        let before_end = !matches!(self.trace.events.get(self.state.pos).map(|e| &e.kind), Some(EventKind::End(_)) | None);
        before_end && self.fatal(i, sig) && self.next_owner().is_some_and(|j| j != i && self.runnable(j))
    }

    /// The thread a recording ended by SIGKILL names, when that end is the
    /// log's next event. SIGKILL has no delivery stop, so no signal event
    /// precedes it: sent from outside (`kill -9`, often to a program that
    /// hung), it ends the replay once every logged event is met, at the
    /// first scheduling point after the last one, or where the replay finds
    /// every thread blocked or one spinning, as the recorded run was.
    pub(super) fn killed_at_end(&self) -> Option<Tid> {
        match self.trace.events.get(self.state.pos)?.kind {
            EventKind::End(End::Killed { signo: libc::SIGKILL, tid, .. }) => Some(tid),
            _ => None,
        }
    }

    /// Kills the replayed tree as the recording ended (SIGKILL in thread
    /// `rec`) and returns how its first process ended.
    pub(super) fn kill_as_recorded(&mut self, rec: Tid) -> Result<ProcessEnd> {
        self.note_stuck();
        self.kill_all();
        self.state.last_delivery = Some(Delivery { rec, pc: 0, exact: false });
        self.drain()
    }

    /// Carries out a matched event.
    pub(super) fn apply(&mut self, i: usize, observed: Observed, expected: &Event) -> Result<Step> {
        match (&observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { child, .. }) => {
                self.spawn(i, e, *child)?;
                // A thread that blocked in a syscall at once, until a signal
                // interrupted it, goes there now ([`Self::blocked_until_signal`]).
                match self.state.by_rec.get(child).copied() {
                    Some(j) if self.blocked_until_signal(j) => Ok(Step::Switch(Some(j))),
                    Some(j) if self.vfork_holds(i, j) => Ok(Step::Switch(None)),
                    // The recording started it at once, on a core of its
                    // own ([`crate::Lessons::run_on_after`]).
                    Some(j) if self.state.lessons.runs_on_after(self.state.pos - 1) => Ok(Step::Switch(Some(j))),
                    _ => Ok(Step::Stay),
                }
            }
            (Observed::Syscall(e), EventKind::Syscall(s)) => self.syscall(i, e, s),
            (Observed::Syscall(e), EventKind::Exec(x)) => self.exec(i, e, x),
            // The thread's code before its contended acquire is done: it
            // stays at the acquire's marker until the acquisition's place.
            (Observed::Syscall(_), EventKind::Sync(s)) if s.op == SyncOp::LockWait => Ok(Step::Stay),
            // The thread has entered its blocking call: it stays at the
            // entry, unanswered, until the call's place.
            (Observed::Syscall(_), EventKind::Sync(s)) if s.op == SyncOp::SyscallWait => Ok(Step::Stay),
            // A synchronization marker, matched in the log's order (seed
            // 003 §3.2): the runtime learns the recorded outcome.
            (Observed::Syscall(_), EventKind::Sync(s)) => {
                let reply = match s.op {
                    // weft_runtime.c's syscall(): the wait is ordered by
                    // the log, and returns with the recorded errno.
                    SyncOp::FutexWaitStart => 0,
                    SyncOp::FutexWait => -s.result,
                    _ => s.result,
                };
                self.finish_syscall(i, reply)?;
                Ok(Step::Stay)
            }
            (Observed::Signal(sig, pc), EventKind::Signal(s)) => {
                if !s.synchronous {
                    tracee::set_siginfo_bytes(self.state.threads[i].tid, &s.siginfo)?;
                    self.send_together(i, s)?;
                }
                let t = &mut self.state.threads[i];
                t.at = At::Deliver(*sig);
                self.state.last_delivery = Some(Delivery { rec: t.rec, pc: *pc, exact: *pc == expected.label });
                if self.interactive && t.proc == 0 {
                    let fatal = self.fatal(i, s.signo);
                    self.halt = Some(Halt::Signal { signo: s.signo, siginfo: s.siginfo.clone(), fatal });
                }
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
    pub(super) fn syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        let p = self.state.threads[i].proc;
        if self.turns_runtime_off(p, e.nr, &e.args) {
            // As the recorder did before the call.
            self.runtime_off(p)?;
        }
        if let Some(filter) = &s.seccomp {
            self.install_filter(i, filter);
        }
        match syscalls::classify(e.nr, &e.args) {
            Class::Input if matches!(e.nr, libc::SYS_chdir | libc::SYS_fchdir) => self.change_dir(i, e, s)?,
            Class::Input | Class::Unsupported | Class::Exec => {
                if s.unsupported && self.state.warned.insert(e.nr) {
                    eprintln!(
                        "weft: warning: event {}: {} is unsupported; replaying its result only",
                        self.state.pos - 1,
                        syscalls::name(e.nr)
                    );
                }
                self.finish_syscall(i, s.result)?;
                let p = self.state.threads[i].proc;
                self.state.procs[p].fds.update(s.nr, &s.args, s.result);
                // (Logged with its result only: by an older build, for a
                // call that weft has learnt to describe since.)
                if !s.unsupported {
                    if let Some(failure) = self.write_out_buffers(i, e, s.result, &s.writes)? {
                        return Ok(Step::Fail(failure));
                    }
                }
                self.echo_sent(i, s)?;
            }
            Class::Output => {
                self.finish_syscall(i, s.result)?;
                self.echo_output(i, e, s)?;
            }
            Class::MmapFile => return self.mmap_file(i, e, s),
            Class::Remap => return self.remap(i, e, s),
            // A change of the runtime's memory, logged because it turned
            // the runtime off. (A seccomp filter of the program's, also
            // logged, is not installed, as any unsupported call: it would
            // judge the replay's own calls too.)
            Class::Execute if runtime::touches_runtime(e.nr, &e.args) => {
                self.execute(i)?;
                self.set_result(i, s.result)?;
            }
            Class::ExecuteLogged => {
                self.state.threads[i].clear_child_tid = e.args[0];
                self.execute(i)?;
                self.set_result(i, s.result)?;
            }
            Class::Kill => self.kill_syscall(i, e, s)?,
            Class::ThreadExit => return self.thread_exit(i),
            Class::ExitGroup
                if self.interactive
                    && self.state.procs.iter().filter(|p| p.live).count() == 1
                    && self.end_past_thread_exits(self.state.pos).is_some() =>
            {
                // The recorded end: the process stays, at its exit_group.
                self.halt = Some(Halt::Exiting(e.args[0] as i32));
            }
            Class::ExitGroup => {
                self.vfork_done(self.state.threads[i].proc)?;
                let tid = self.state.threads[i].tid;
                ptrace::syscall(tid, None)?;
                return self.process_ended(self.state.threads[i].proc);
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
    pub(super) fn write_out_buffers(&mut self, i: usize, e: &Entry, result: i64, writes: &[MemWrite]) -> Result<Option<Failure>> {
        let mem = self.mem(i);
        let mut rd = |a: u64| mem.read_u64(a).ok();
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
            mem.write(*addr, &self.trace.contents(&w.data)?)?;
        }
        Ok(None)
    }

    /// The program's writes to the recording's stdout and stderr appear on
    /// ours, through whichever descriptor of its process refers to them
    /// ([`crate::fds::Fds`]).
    pub(super) fn echo_output(&self, i: usize, e: &Entry, s: &Syscall) -> Result<()> {
        if self.state.pos <= self.opts.echo_from || !matches!(e.nr, libc::SYS_write | libc::SYS_writev) {
            return Ok(());
        }
        let Some(stream) = self.state.procs[self.state.threads[i].proc].fds.stream(s.args[0]) else { return Ok(()) };
        let mem = self.mem(i);
        let mut rd = |a: u64| mem.read_u64(a).ok();
        let bytes = mem.read_ranges(&syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd))?;
        print(stream, &bytes);
        Ok(())
    }

    /// What a call moved to the recording's stdout or stderr from another
    /// descriptor inside the kernel (copy_file_range, sendfile, splice,
    /// tee: coreutils' `cat` onto a file) appears on weft's, as a write's
    /// does ([`Session::echo_output`]), from the trace's copy of the
    /// source ([`Syscall::sent`]). Bytes the trace does not hold (moved
    /// from a pipe) are warned about once. Errors: the trace's copy is
    /// missing or changed.
    fn echo_sent(&mut self, i: usize, s: &Syscall) -> Result<()> {
        let Some((_, to, _)) = syscalls::sent_fds(s.nr, &s.args) else { return Ok(()) };
        let stream = self.state.procs[self.state.threads[i].proc].fds.stream(to as u64);
        let Some(stream) = stream.filter(|_| self.state.pos > self.opts.echo_from && s.result > 0) else { return Ok(()) };
        match &s.sent {
            Some(data) => print(stream, &self.trace.contents(data)?),
            None if self.state.warned.insert(s.nr) => eprintln!(
                "weft: warning: event {}: {} sent {} bytes to the recording's {} that the trace does not hold (from a pipe); this replay does not print them",
                self.state.pos - 1,
                syscalls::name(s.nr),
                s.result,
                if stream == Stream::Stdout { "stdout" } else { "stderr" }
            ),
            None => {}
        }
        Ok(())
    }

    /// A file-backed mmap: anonymous memory at the recorded address, filled
    /// from the trace's copy of the file or from the bytes the log holds
    /// (a shared mapping, a device: weft_record::mapping). The program's
    /// writes through it reach no file, and its later reads of the file
    /// are logged inputs. A writable shared mapping is shared anonymous
    /// memory when the log forks a process later, which the fork children
    /// share as they shared the file's pages in the recording (Python's
    /// multiprocessing keeps its semaphores there, and reads their values
    /// without a call that the log orders); a process that has one takes
    /// no checkpoints (snapshot.rs), which would share it too. With no
    /// fork to come, nothing else sees the pages and the mapping is
    /// private ([`Session::shared_mapping`]).
    pub(super) fn mmap_file(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        if s.result < 0 {
            self.finish_syscall(i, s.result)?;
            return Ok(Step::Stay);
        }
        let addr = s.result as u64;
        let fixed = if e.args[3] & libc::MAP_FIXED as u64 != 0 { libc::MAP_FIXED } else { libc::MAP_FIXED_NOREPLACE };
        let shared = e.args[2] & libc::PROT_WRITE as u64 != 0 && self.shared_mapping(e.args[3]);
        let sharing = if shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
        let anonymous = (sharing | libc::MAP_ANONYMOUS | fixed) as u64;
        let got = self.execute_changed(i, e, |r| [r.rdi, r.r10, r.r8, r.r9] = [addr, anonymous, u64::MAX, 0])?.rax as i64;
        if got != s.result {
            let what = s.file.as_ref().map_or("a shared or device mapping".into(), |f| String::from_utf8_lossy(&f.path).into_owned());
            let at = self.position(i);
            return Ok(Step::Fail(Failure::Unmatched {
                at,
                label: e.label,
                expected: format!("mmap of {what} at {addr:#x}"),
                observed: format!("the address range is not free in the replay (mmap returned {got})"),
            }));
        }
        let p = self.state.threads[i].proc;
        let Some(file) = &s.file else {
            let proc = &mut self.state.procs[p];
            for w in &s.writes {
                proc.mem.write(w.addr, &self.trace.contents(&w.data)?)?;
            }
            proc.sync.remapped(&proc.mem, addr, addr + e.args[1]);
            if p == 0 {
                self.insert_pending_breakpoints();
            }
            return Ok(Step::Stay);
        };
        let path = self.trace.file_path(&file.copy);
        let data = self.trace.copy_bytes(file)?;
        let start = (e.args[5] as usize).min(data.len());
        let end = (start + e.args[1] as usize).min(data.len());
        let proc = &mut self.state.procs[p];
        proc.mem.write(addr, &data[start..end])?;
        proc.sync.remapped(&proc.mem, addr, addr + e.args[1]);
        let is_libc = Path::new(OsStr::from_bytes(&file.path))
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"libc.so"));
        if is_libc && e.args[2] & libc::PROT_EXEC as u64 != 0 && !proc.sync.installed() {
            proc.sync.install_libc(&proc.mem, &path, addr, e.args[5])?;
        }
        if p == 0 {
            self.insert_pending_breakpoints();
        }
        Ok(Step::Stay)
    }

    /// kill/tkill/tgkill: executed, with recorded ids translated, when the
    /// program signals its own process, or sends SIGKILL to another process
    /// of the tree (which no delivery stop logs); emulated otherwise: the
    /// recorded signal event of the receiving thread delivers the signal
    /// where the recording had it (async_signal.rs). So is a signal to
    /// another thread of the process whose logged delivery interrupted a
    /// syscall or comes after other events of that thread
    /// ([`Self::delivered_at_its_place`]): sent at the kill, it would
    /// reach that thread wherever it next resumed, often before the call
    /// (a thread woken from a blocking read by pthread_kill, which then
    /// restarted the read instead of failing with EINTR). A kill of its
    /// own process goes to the thread the log shows taking the signal, as
    /// a tgkill ([`Self::receiver_of`]). Process groups and processes
    /// outside the tree are not signalled at all.
    pub(super) fn kill_syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<()> {
        let me = self.state.threads[i].proc;
        let signo = e.args[match e.nr {
            libc::SYS_tgkill => 2,
            _ => 1,
        }] as i32;
        // A signal to the whole process goes to the thread that took it in
        // the recording: sent to the process, the kernel would give it to
        // whichever thread runs, in a replay most often the sender.
        // The sender takes it as the kill returns only if the log says so;
        // later, its logged delivery gives it (async_signal.rs).
        let own = e.nr == libc::SYS_kill && e.args[0] as i32 == self.state.procs[me].rec;
        let receiver = own.then(|| self.receiver_of(me, signo)).flatten();
        if receiver == Some(self.state.threads[i].rec) && !self.takes_at_return(i, signo) {
            return self.finish_syscall(i, s.result);
        }
        let reaches = |p: usize| p == me || signo == libc::SIGKILL;
        let procs = &self.state.procs;
        let proc_of = |id: u64| procs.iter().enumerate().find(|(k, p)| p.live && p.rec == id as i32 && reaches(*k)).map(|(_, p)| p.pid);
        let thread_of = |id: u64| {
            let t = &self.state.threads[*self.state.by_rec.get(&(id as i32))?];
            let deferred = t.rec != self.state.threads[i].rec && self.delivered_at_its_place(t.rec, signo);
            (reaches(t.proc) && !deferred && !self.state.sent_early.contains(&(t.rec, signo))).then_some(t.tid)
        };
        let ids = match e.nr {
            libc::SYS_tgkill => proc_of(e.args[0]).zip(thread_of(e.args[1])).map(|(p, t)| (p, Some(t))),
            libc::SYS_tkill => thread_of(e.args[0]).map(|t| (t, None)),
            libc::SYS_kill if receiver.is_some() => proc_of(e.args[0]).zip(receiver.and_then(|r| thread_of(r as u64))).map(|(p, t)| (p, Some(t))),
            libc::SYS_kill if e.args[0] as i32 > 0 => proc_of(e.args[0]).map(|p| (p, None)),
            _ => None,
        };
        let Some((first, second)) = ids else {
            return self.finish_syscall(i, s.result);
        };
        let killed = self.state.procs.iter().position(|p| p.live && (p.pid == first || Some(p.pid) == second));
        if let Some(p) = killed.filter(|&p| p != me && signo == libc::SIGKILL && self.logs_more(p)) {
            self.state.kill_pending.push(p);
            return self.finish_syscall(i, s.result);
        }
        let nr = e.nr;
        self.execute_changed(i, e, |r| {
            r.rdi = first.as_raw() as u64;
            if let Some(tid) = second {
                if nr == libc::SYS_kill {
                    (r.orig_rax, r.rdx) = (libc::SYS_tgkill as u64, signo as u64);
                }
                r.rsi = tid.as_raw() as u64;
            }
        })?;
        self.state.threads[i].regs.orig_rax = e.nr as u64;
        self.set_result(i, s.result)?;
        // Another process killed: reaped now, before anything asks its
        // threads for their state.
        if let Some(p) = killed.filter(|&p| p != me && signo == libc::SIGKILL) {
            self.reap(p)?;
        }
        Ok(())
    }

    /// Whether a thread of process `p` has logged events ahead.
    fn logs_more(&self, p: usize) -> bool {
        self.state.threads.iter().any(|t| t.proc == p && t.at != At::Exited && !self.events_ahead(t.rec).is_empty())
    }

    /// Kills (SIGKILL) and reaps each process of
    /// [`State::kill_pending`](super::State) whose threads have no logged
    /// event left: where the recording's SIGKILL took it. Errors: reaping.
    pub(super) fn kill_finished(&mut self) -> Result<()> {
        while let Some(k) = self.state.kill_pending.iter().position(|&p| !self.logs_more(p)) {
            let p = self.state.kill_pending.swap_remove(k);
            if self.state.procs[p].live {
                let _ = nix::sys::signal::kill(self.state.procs[p].pid, nix::sys::signal::Signal::SIGKILL);
                self.reap(p)?;
            }
        }
        Ok(())
    }

    /// The recorded thread of process `p` that the log shows taking the
    /// next `signo` (within [`SIGNAL_LOOKAHEAD`] events).
    fn receiver_of(&self, p: usize, signo: i32) -> Option<Tid> {
        let in_p = |tid: Tid| self.thread_index(tid).is_some_and(|j| self.state.threads[j].proc == p);
        self.trace.events[self.state.pos..].iter().take(SIGNAL_LOOKAHEAD).find_map(|ev| match &ev.kind {
            EventKind::Signal(s) if s.signo == signo && in_p(ev.tid) => Some(ev.tid),
            _ => None,
        })
    }

    /// Whether thread `i`'s logged event after its current one (a kill)
    /// is the delivery of `signo`: the kernel gave it the signal as its
    /// kill returned.
    fn takes_at_return(&self, i: usize, signo: i32) -> bool {
        let next = self.events_ahead(self.state.threads[i].rec).iter().find(|&&k| k > self.state.pos).copied();
        next.is_some_and(|k| matches!(&self.trace.events[k].kind, EventKind::Signal(s) if s.signo == signo))
    }

    /// Whether thread `i`'s next logged event is a signal that interrupted
    /// a syscall: in the recording the thread blocked in that syscall
    /// right after its last event.
    pub(super) fn blocked_until_signal(&self, i: usize) -> bool {
        self.next_logged(i).is_some_and(|e| matches!(&e.kind, EventKind::Signal(s) if s.interrupted.is_some()))
    }

    /// Whether thread `i`'s next logged event is an asynchronous signal
    /// logged with the state where it hit (searched for, `exact_signal.rs`).
    fn signal_hits_next(&self, i: usize) -> bool {
        self.next_logged(i).is_some_and(|e| matches!(&e.kind, EventKind::Signal(s) if !s.synchronous && s.state.is_some()))
    }

    /// Whether the log's next delivery of `signo` to thread `rec` (within
    /// its next [`SIGNAL_LOOKAHEAD`] events) is made at its own place in
    /// the log rather than sent at the kill: one that interrupted a
    /// syscall, where the replay delivers it exactly, or one that comes
    /// after other events of the thread. Sent at the kill, that one would
    /// reach the thread wherever it next resumed, before those events
    /// (sig2.c: inside the runtime after a buffered call's marker, where
    /// its handler's own calls were not buffered as in the recording).
    /// One that hit user code as the thread's next event is sent at the
    /// kill: finding its instruction again can take the search for its
    /// state the whole livelock timeout in a thread that loops.
    fn delivered_at_its_place(&self, rec: Tid, signo: i32) -> bool {
        let ahead = self.events_ahead(rec).iter().take(SIGNAL_LOOKAHEAD);
        let mut deliveries = ahead.enumerate().filter_map(|(n, &k)| match &self.trace.events[k].kind {
            EventKind::Signal(s) if s.signo == signo => Some(n > 0 || s.interrupted.is_some()),
            _ => None,
        });
        deliveries.next() == Some(true)
    }

    /// chdir/fchdir: the replayed process moves to the directory the
    /// recorded one did, for real, so that the kernel resolves the
    /// relative paths of a later execve (and of the dynamic loader) as it
    /// did. chdir runs as called; fchdir, whose descriptor is emulated, is
    /// replaced by a chdir to the directory the recorder logged. The call
    /// returns the recorded result either way.
    pub(super) fn change_dir(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<()> {
        if s.result < 0 || e.nr == libc::SYS_fchdir {
            self.finish_syscall(i, s.result)?;
            if let Some(dir) = s.path.as_ref().filter(|_| s.result == 0) {
                self.remote_chdir(i, dir)?;
            }
            return Ok(());
        }
        self.execute(i)?;
        self.set_result(i, s.result)
    }

    /// Makes thread `i` (at a syscall-exit stop) chdir to `dir`, with the
    /// path written below its stack's red zone and put back after.
    fn remote_chdir(&mut self, i: usize, dir: &[u8]) -> Result<()> {
        let Some(insn) = self.state.syscall_insn else { return Ok(()) };
        self.settle(i)?;
        let regs = self.state.threads[i].regs;
        let mut path = dir.to_vec();
        path.push(0);
        let at = (regs.rsp - 128 - path.len() as u64) & !15;
        let mem = self.mem(i);
        let saved = mem.read(at, path.len())?;
        mem.write(at, &path)?;
        let done = crate::remote::syscall(self.state.threads[i].tid, &regs, insn, libc::SYS_chdir, &[at]);
        self.mem(i).write(at, &saved)?;
        done.map(|_| ())
    }

    /// A successful execve, logged as exec event `x`: runs it, gives the
    /// new image the recorded AT_RANDOM and no vDSO (as the recorder did),
    /// and checks that the kernel loaded the files the recording did.
    pub(super) fn exec(&mut self, i: usize, e: &Entry, x: &Exec) -> Result<Step> {
        let (tid, p) = (self.state.threads[i].tid, self.state.threads[i].proc);
        let leader = self.state.procs[p].pid;
        self.vfork_done(p)?;
        ptrace::syscall(tid, None)?;
        self.reap_for_exec(p, tid);
        // The exec stop comes under the process's pid, which a non-leader
        // thread takes over (ptrace(2), "execve(2) under ptrace").
        loop {
            match waitpid(leader, Some(WaitPidFlag::__WALL))? {
                WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXEC) => break,
                WaitStatus::PtraceSyscall(_) => {
                    let errno = -(ptrace::getregs(tid)?.rax as i64);
                    return Ok(Step::Fail(Failure::Unmatched {
                        at: self.position(i),
                        label: e.label,
                        expected: format!("exec of {}", String::from_utf8_lossy(&x.files[0].path)),
                        observed: format!("execve failed in the replay: {}", nix::errno::Errno::from_raw(errno as i32)),
                    }));
                }
                _ => {}
            }
        }
        self.took_over(i, p);
        let mem = Memory::open(leader)?;
        let regs = ptrace::getregs(leader)?;
        let random = tracee::patch_auxv(&mem, regs.rsp)?;
        mem.write(random, &x.at_random)?;
        if let Some(changed) = self.changed_file(leader, x) {
            bail!("{changed} changed since the recording; weft cannot replay its exec at event {}", self.state.pos - 1);
        }
        let old = std::mem::take(&mut self.state.procs[p].sync);
        self.state.procs[p].mem = std::sync::Arc::new(mem);
        // The new image's runtime says hello again (until then, its own
        // set-up maps the runtime's memory).
        let proc = &mut self.state.procs[p];
        (proc.runtime_control, proc.runtime_off_at, proc.runtime_disabled) = (None, None, false);
        if p == 0 {
            self.pending_breakpoints.extend(old.user());
        }
        let t = &mut self.state.threads[i];
        t.regs = regs;
        t.at = At::Ready;
        t.clear_child_tid = 0;
        t.altstack = None;
        Ok(Step::Stay)
    }

    /// Thread `tid` of process `p` is in an execve: the process's other
    /// threads stop at their exit, are let go and, but for the leader
    /// (whose pid the exec'ing thread takes), reaped.
    fn reap_for_exec(&mut self, p: usize, tid: Pid) {
        let leader = self.state.procs[p].pid;
        let others: Vec<Pid> = self.state.threads.iter().filter(|t| t.proc == p && t.tid != tid && t.at != At::Exited).map(|t| t.tid).collect();
        for other in others {
            loop {
                match waitpid(other, Some(WaitPidFlag::__WALL)) {
                    Ok(WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT)) if other == leader => {
                        let _ = ptrace::cont(other, None);
                        break;
                    }
                    Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => break,
                    Ok(_) => {
                        let _ = ptrace::cont(other, None);
                    }
                }
            }
        }
    }

    /// After an exec by thread `i` of process `p`, it is the process's
    /// only thread, under the process's pid; the recording logged its
    /// later events under the leader's recorded tid too.
    fn took_over(&mut self, i: usize, p: usize) {
        let leader = self.state.procs[p].pid;
        for t in self.state.threads.iter_mut().filter(|t| t.proc == p) {
            t.at = At::Exited;
        }
        if self.state.threads[i].tid == leader {
            return;
        }
        let rec = self.state.procs[p].rec;
        self.state.threads[i].tid = leader;
        self.state.threads[i].rec = rec;
        self.state.by_rec.insert(rec, i);
    }

    /// The first file of exec `x` (executable, dynamic loader) whose
    /// contents, as process `pid` now maps them, differ from the trace's
    /// copy (or whose copy fails its size and hash check), by path.
    fn changed_file(&self, pid: Pid, x: &Exec) -> Option<String> {
        let exe = std::fs::read(format!("/proc/{pid}/exe")).ok();
        x.files.iter().enumerate().find_map(|(k, f)| {
            let copy = self.trace.copy_bytes(f).ok();
            let now = if k == 0 { exe.clone() } else { std::fs::read(OsStr::from_bytes(&f.path)).ok() };
            (copy.is_none() || copy != now).then(|| String::from_utf8_lossy(&f.path).into_owned())
        })
    }

    /// A thread's `exit`: clear its CLONE_CHILD_CLEARTID word and wake its
    /// joiners (the kernel's futex wake reaches no emulated waiter), then
    /// let it go. The last thread of a process ends the process.
    pub(super) fn thread_exit(&mut self, i: usize) -> Result<Step> {
        let ctid = self.state.threads[i].clear_child_tid;
        if ctid != 0 {
            self.mem(i).write(ctid, &0u32.to_le_bytes())?;
            let key = self.futex_key(i, ctid);
            for w in self.state.futexes.wake(key, u32::MAX, u32::MAX) {
                self.release(w);
            }
        }
        let (tid, p) = (self.state.threads[i].tid, self.state.threads[i].proc);
        if self.thread_halts && p == 0 {
            self.halt = Some(Halt::ThreadExited(self.state.threads[i].rec));
        }
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT) => {
                let _ = ptrace::cont(tid, None);
                // Reaped now: a process's leader is not reported before
                // its other threads are. The leader itself is reaped with
                // its process.
                if tid != self.state.procs[p].pid {
                    while !matches!(waitpid(tid, Some(WaitPidFlag::__WALL)), Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_)) {}
                }
            }
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {}
            other => bail!("thread {tid} did not exit: {other:?}"),
        }
        self.state.threads[i].at = At::Exited;
        if self.state.threads.iter().all(|t| t.proc != p || t.at == At::Exited) {
            return self.process_ended(p);
        }
        Ok(Step::Switch(None))
    }

    /// Process `p` is ending (an exit_group, its last thread's exit, a
    /// fatal signal): reaps it. The replay ends with the last process;
    /// until then the others go on.
    pub(super) fn process_ended(&mut self, p: usize) -> Result<Step> {
        let end = self.reap(p)?;
        let ends_recording = matches!(self.trace.events.get(self.state.pos).map(|e| &e.kind), Some(EventKind::End(_)));
        if self.state.procs.iter().any(|p| p.live) && !(self.state.root_end.is_some() && ends_recording) {
            return Ok(Step::Switch(None));
        }
        // The first process's end ended the recording: the processes left
        // were killed there.
        self.kill_all();
        self.drain()?;
        self.ended = true;
        Ok(Step::End(self.state.root_end.unwrap_or(end)))
    }

    /// Executes a clone the log says spawned `rec_child`, and gives the
    /// program the recorded tid everywhere the kernel put the new one. A
    /// new process (fork, vfork, clone without CLONE_THREAD) gets its own
    /// entry in the tree; a vfork runs as a fork ([`Session::quiet_spawn`]),
    /// whose child's writes reach the parent when it execs or exits
    /// (vfork.rs).
    pub(super) fn spawn(&mut self, i: usize, e: &Entry, rec_child: Tid) -> Result<()> {
        let mem = self.mem(i);
        let flags = clone_flags(mem, &self.state.threads[i].regs);
        let (ptid, ctid) = match e.nr {
            libc::SYS_clone3 => (mem.read_u64(e.args[0] + 24)?, mem.read_u64(e.args[0] + 16)?),
            libc::SYS_clone => (e.args[2], e.args[3]),
            _ => (0, 0),
        };
        let process = event::is_new_process(flags);
        let exit_signal = if process { self.quiet_spawn(i, e, flags)? } else { 0 };
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        let child = match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK) => {
                Pid::from_raw(ptrace::getevent(tid)? as i32)
            }
            other => bail!("clone did not create a thread or process: {other:?}"),
        };
        self.execute(i)?;
        match waitpid(child, Some(WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, libc::SIGSTOP) => {}
            other => bail!("new thread {child} did not stop: {other:?}"),
        }
        let parent = self.state.threads[i].proc;
        if runtime::spawn_turns_off(flags) && self.runtime_on(parent) {
            // A thread sharing its creator's TLS would share its runtime
            // slot: the recorder turned the runtime off here (inprocess.rs).
            self.runtime_off(parent)?;
        }
        let proc = if process { self.add_process(parent, rec_child, child)? } else { parent };
        if process && flags & libc::CLONE_VFORK as u64 != 0 {
            self.vfork_started(proc, parent);
        } else if process && flags & libc::CLONE_VM as u64 != 0 {
            self.state.procs[proc].shares_vm = true;
            self.state.procs[parent].shares_vm = true;
        }
        if process {
            self.restore_spawn_args(tid, parent, e, flags, exit_signal)?;
            self.restore_spawn_args(child, proc, e, flags, exit_signal)?;
            self.state.threads[i].regs = ptrace::getregs(tid)?;
        }
        self.set_result(i, rec_child as i64)?;
        let flags = flags as i32;
        let rec = (rec_child as u32).to_le_bytes();
        if flags & libc::CLONE_PARENT_SETTID != 0 {
            self.state.procs[parent].mem.write(ptid, &rec)?;
        }
        if flags & libc::CLONE_CHILD_SETTID != 0 {
            self.state.procs[proc].mem.write(ctid, &rec)?;
        }
        self.state.by_rec.insert(rec_child, self.state.threads.len());
        let clear_child_tid = if flags & libc::CLONE_CHILD_CLEARTID != 0 { ctid } else { 0 };
        let mut thread = Thread::new(rec_child, proc, child, ptrace::getregs(child)?, clear_child_tid);
        thread.filters = self.state.threads[i].filters.clone();
        thread.spawned_at = self.state.pos;
        // None of its code has run: the spawn is its last event.
        thread.waits_after = Some(self.state.pos - 1);
        self.state.threads.push(thread);
        if proc == 0 && self.watchpoints.armed() {
            self.watchpoints.apply(child)?;
        }
        if self.thread_halts && proc == 0 {
            self.halt = Some(Halt::ThreadCreated { tid: rec_child, parent: self.state.threads[i].rec });
        }
        Ok(())
    }

    /// Thread `i` installed the program's seccomp filter `filter` (not
    /// installed in the replay, whose own calls it would judge): it
    /// applies to the thread, or to every thread of its process with
    /// SECCOMP_FILTER_FLAG_TSYNC, from their next syscall on
    /// ([`Session::filtered`]).
    fn install_filter(&mut self, i: usize, filter: &seccomp::Filter) {
        let (filter, p) = (Arc::new(filter.clone()), self.state.threads[i].proc);
        let tsync = filter.flags & seccomp::FLAG_TSYNC != 0;
        for (j, t) in self.state.threads.iter_mut().enumerate() {
            if j == i || (tsync && t.proc == p && t.at != At::Exited) {
                t.filters.push(Arc::clone(&filter));
            }
        }
    }

    /// Whether thread `i`'s next logged event, asynchronous signals aside
    /// (they are delivered before the call), is a spawn from the clone,
    /// fork or vfork `e` it is entering. A spawning call that failed when
    /// recorded (bad flags, a resource limit) made no PTRACE_EVENT, so no
    /// event: it has none.
    pub(super) fn spawn_due(&self, i: usize, e: &Entry) -> bool {
        let next = self
            .events_ahead(self.state.threads[i].rec)
            .iter()
            .map(|&k| &self.trace.events[k])
            .find(|ev| !matches!(&ev.kind, EventKind::Signal(s) if !s.synchronous) && !self.log.is_soft(ev));
        next.is_some_and(|ev| ev.label == e.label && matches!(ev.kind, EventKind::Spawn { .. }))
    }

    /// A spawning call with no spawn logged: it failed when recorded, and
    /// runs (and fails the same way: its arguments are the program's) in
    /// the replay too. One that succeeds here diverges (the replay took
    /// another way to it: glibc's malloc picked another arena, say), a
    /// failure the search can try other schedules for.
    pub(super) fn failed_spawn(&mut self, i: usize, e: Entry) -> Result<Step> {
        let created = self.execute_unless_spawned(i)?.is_none_or(|regs| regs.rax as i64 >= 0);
        if created {
            let observed = format!("{} created a task, where the log has no spawn", syscalls::name(e.nr));
            let expected = self.next_logged(i).map_or("no event".into(), |ev| ev.to_string());
            return Ok(Step::Fail(Failure::Unmatched { at: self.position(i), label: e.label, expected, observed }));
        }
        Ok(Step::Stay)
    }

    /// A new process of the tree, forked from process `parent`: a copy of
    /// its memory, so of its synchronization points too, but not of the
    /// debugger's breakpoints, which belong to the first process (the one
    /// the debugger shows).
    fn add_process(&mut self, parent: usize, rec: Tid, pid: Pid) -> Result<usize> {
        let mut sync = self.state.procs[parent].sync.clone();
        let mem = Memory::open(pid)?;
        for addr in sync.user().collect::<Vec<_>>() {
            sync.clear_user(&mem, addr)?;
        }
        let fds = self.state.procs[parent].fds.clone();
        let super::Proc { runtime_control, runtime_off_at, runtime_disabled, .. } = self.state.procs[parent];
        let mem = std::sync::Arc::new(mem);
        let proc = super::Proc { rec, pid, mem, sync, fds, live: true, runtime_control, runtime_off_at, runtime_disabled, shares_vm: false, wipe_on_fork: false, vfork_parent: None, spin: self.opts.lessons.spin_words.of(rec).to_vec() };
        self.state.procs.push(proc);
        Ok(self.state.procs.len() - 1)
    }

    /// Thread `i`, at the entry of a syscall that makes a new process,
    /// is made to make it quietly: a sibling of the caller
    /// (CLONE_PARENT), so that the process weft replays has no real
    /// children and gets no real SIGCHLD (the replay delivers the SIGCHLDs
    /// the recording logged, where it logged them; a real one would arrive
    /// whenever the replayed child happened to end, and stay pending in a
    /// parent that blocks it), while wait4 and getppid are emulated
    /// anyway; and a vfork as a fork, since the kernel would hold a vfork's
    /// parent in the syscall until the child execs or exits, and a replay
    /// runs one thread at a time. The child gets a copy of the parent's
    /// memory instead of sharing it; what it writes reaches a parent with
    /// one thread when it execs or exits (vfork.rs). Returns clone3's original
    /// `exit_signal`, for [`Session::restore_spawn_args`], which undoes
    /// the change in both processes.
    fn quiet_spawn(&mut self, i: usize, e: &Entry, flags: u64) -> Result<u64> {
        let vm = if flags & libc::CLONE_VFORK as u64 != 0 { (libc::CLONE_VM | libc::CLONE_VFORK) as u64 } else { 0 };
        let quiet = flags & !(vm | CSIGNAL) | libc::CLONE_PARENT as u64;
        let t = &mut self.state.threads[i];
        match e.nr {
            libc::SYS_clone3 => {
                let mem = &self.state.procs[t.proc].mem;
                let exit_signal = mem.read_u64(e.args[0] + CLONE3_EXIT_SIGNAL)?;
                mem.write(e.args[0], &quiet.to_le_bytes())?;
                mem.write(e.args[0] + CLONE3_EXIT_SIGNAL, &0u64.to_le_bytes())?;
                return Ok(exit_signal);
            }
            libc::SYS_clone => t.regs.rdi = quiet,
            // fork and vfork: a clone with no new stack.
            _ => {
                t.regs.orig_rax = libc::SYS_clone as u64;
                [t.regs.rdi, t.regs.rsi] = [quiet, 0];
            }
        }
        ptrace::setregs(t.tid, t.regs)?;
        Ok(0)
    }

    /// Gives thread `tid` of process `p`, parent or child of a spawn
    /// [`Session::quiet_spawn`] changed, the program's own arguments back
    /// (the kernel preserves argument registers); `exit_signal` is
    /// clone3's.
    fn restore_spawn_args(&self, tid: Pid, p: usize, e: &Entry, flags: u64, exit_signal: u64) -> Result<()> {
        if e.nr == libc::SYS_clone3 {
            let mem = &self.state.procs[p].mem;
            mem.write(e.args[0], &flags.to_le_bytes())?;
            return mem.write(e.args[0] + CLONE3_EXIT_SIGNAL, &exit_signal.to_le_bytes());
        }
        let mut regs = ptrace::getregs(tid)?;
        [regs.rdi, regs.rsi] = [e.args[0], e.args[1]];
        Ok(ptrace::setregs(tid, regs)?)
    }

    /// The key of the futex word at `addr` of thread `i`'s process in the
    /// emulated wait queues: the address, with the process's index in the
    /// bits above user space (x86-64 user addresses have 47 bits), so that
    /// equal addresses of two processes are two futexes.
    pub(super) fn futex_key(&self, i: usize, addr: u64) -> u64 {
        addr | (self.state.threads[i].proc as u64) << FUTEX_PROC_SHIFT
    }

    /// An emulated futex call; wakes and completed waits are *psync*
    /// points (seed 000 Fig. 8, P-SYNC-PRMPT / P-SYNC-NOPRMPT).
    pub(super) fn futex(&mut self, i: usize, e: Entry) -> Result<Step> {
        if syscalls::is_logged_futex(&e.args) {
            return self.logged_futex_wait(i, e);
        }
        let mem = self.state.procs[self.state.threads[i].proc].mem.clone();
        let mut args = self.futex_args(i, &e.args);
        if self.log.is_lock_word(e.args[0]) && !futex::is_wait(e.args[1]) {
            // Which waiter a lock word's wake released is not in the log:
            // all go, and the scheduler hands the lock to the log's next
            // thread (a woken waiter that loses waits again; the count a
            // wake returns is not a lock's business).
            args[2] = i32::MAX as u64;
        }
        match self.state.futexes.call(i, self.state.threads[i].rec as u32, &args, &mut MemWords(&mem)) {
            futex::Action::Block(wait) => {
                self.state.threads[i].at = At::Blocked(wait);
                Ok(Step::Switch(None))
            }
            futex::Action::Return(result, woken) => {
                // A wake that released waiters on a word whose calls are
                // soft (a lock's) hands the lock over as its release did
                // (log_index.rs).
                let handover = !woken.is_empty() && self.log.is_soft_word(e.args[0]);
                for w in woken {
                    self.release(w);
                }
                self.finish_syscall(i, result)?;
                self.sync_point(i, handover.then_some(Op::Woke(e.args[0])))
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
    pub(super) fn logged_futex_wait(&mut self, i: usize, e: Entry) -> Result<Step> {
        let recorded = self.next_logged(i).and_then(|ev| match &ev.kind {
            EventKind::Syscall(s) if s.nr == libc::SYS_futex => Some(s.result),
            _ => None,
        });
        let must_change = recorded == Some(0) || recorded == Some(-libc::EAGAIN as i64);
        if must_change && !self.state.threads[i].woken {
            let mem = self.state.procs[self.state.threads[i].proc].mem.clone();
            let args = self.futex_args(i, &e.args);
            if let futex::Action::Block(wait) = self.state.futexes.call(i, self.state.threads[i].rec as u32, &args, &mut MemWords(&mem)) {
                self.state.threads[i].at = At::Blocked(wait);
                return Ok(Step::Switch(None));
            }
        }
        self.event_point(i, Observed::Syscall(e))
    }

    /// Futex call arguments with the words' addresses (uaddr, and uaddr2
    /// for requeues and FUTEX_WAKE_OP) turned into [`Session::futex_key`]s.
    fn futex_args(&self, i: usize, args: &[u64; 6]) -> [u64; 6] {
        let mut a = *args;
        a[0] = self.futex_key(i, a[0]);
        if a[4] != 0 {
            a[4] = self.futex_key(i, a[4]);
        }
        a
    }

    /// A wake released thread `w` from its futex wait.
    pub(super) fn release(&mut self, w: usize) {
        let t = &mut self.state.threads[w];
        t.at = match t.at {
            At::Blocked(wait) if wait.timed => {
                t.woken = true;
                At::Entry(Entry { nr: libc::SYS_futex, args: tracee::syscall_args(&t.regs), label: t.regs.rip })
            }
            _ => At::Woken(0),
        };
    }
}

/// The exit signal's bits in clone(2) flags.
const CSIGNAL: u64 = 0xff;
/// Offset of `exit_signal` in clone3's `struct clone_args` (bytes).
const CLONE3_EXIT_SIGNAL: u64 = 32;

/// Where [`Session::futex_key`] puts the process index.
const FUTEX_PROC_SHIFT: u32 = 48;

/// The address of the futex word behind futex key `key`
/// ([`Session::futex_key`]).
pub(super) fn futex_address(key: u64) -> u64 {
    key & ((1 << FUTEX_PROC_SHIFT) - 1)
}

/// Futex words in one process's memory, addressed by futex key.
struct MemWords<'a>(&'a Memory);

impl futex::Words for MemWords<'_> {
    fn read_u32(&mut self, key: u64) -> Option<u32> {
        self.0.read_u32(futex_address(key)).ok()
    }
    fn write_u32(&mut self, key: u64, value: u32) -> Option<()> {
        self.0.write(futex_address(key), &value.to_le_bytes()).ok()
    }
}

/// Prints `bytes` on weft's own `stream`. A closed stdout (EPIPE) must not
/// end the replay.
fn print(stream: Stream, bytes: &[u8]) {
    let _ = match stream {
        Stream::Stdout => std::io::stdout().lock().write_all(bytes).and_then(|_| std::io::stdout().flush()),
        Stream::Stderr => std::io::stderr().lock().write_all(bytes),
    };
}
