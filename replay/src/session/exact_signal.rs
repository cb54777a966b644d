//! Exact delivery of an asynchronous signal that hit user code, without
//! performance counters: the way a debugger without instruction counts
//! finds a moment again, by the thread's state.
//!
//! The recording logs, with such a signal, the thread's general registers
//! where it hit and the 512 bytes of stack at rsp
//! ([`weft_record::event::HitState`]). When that signal is the log's next
//! event, its thread runs with an execution breakpoint in a free x86 debug
//! register (Intel SDM vol. 3, §18.2: R/W 00, length 00, it traps before
//! the instruction executes and leaves memory untouched) at the recorded
//! pc. At each hit the registers are compared (all but `orig_rax` and the
//! segment registers; eflags only in its arithmetic flags) and, when they
//! match, the stack bytes; on a match the signal is delivered right there.
//! Hits that do not match continue. A loop that counts in its stack frame
//! until the signal (a benchmark's iterations) is not stopped at every
//! iteration: when two hits differ from the recorded state only in the
//! same stack word, one apart, that word is the loop's counter, and
//! the thread runs without the breakpoint, in watchdog slices that read
//! the counter, until it is a few milliseconds of running short of the
//! recorded value ([`Skip`]). From there a write watchpoint on the
//! counter traps once per iteration (the breakpoint's pc may run many
//! times in one: a helper the loop calls from several places) until the
//! counter is one short of the recorded value; the breakpoint then finds
//! the hit. A loop that counts in a register, or in a stack word while
//! registers change too (a callee saved the caller's counter), is found
//! by a word of the hit's state ([`state_words`]) one further than at the
//! latest hit in the recorded frame (or one less, or some bytes further: a
//! loop that counts down, a pointer that walks an array); that word holds
//! the counter only at the loop's pc, so each slice (in wall time, ending
//! to some microseconds) ends with the breakpoint back for one hit that
//! reads it, and the slices shrink until the recorded value is less than
//! [`CLOSE_WALL`] of running away; the breakpoint then finds the hit. The
//! thread passes its pthread synchronization points meanwhile (they are
//! not logged events), but not a logged syscall, a fault or an rdtsc: the
//! signal came before those in the recording, so reaching one first means
//! this replay cannot find the moment, and the signal is delivered there,
//! as inexact (`async_signal.rs`). So is it, at the next hit, when the replay has
//! gone nine tenths of the livelock timeout without matching an event
//! ([`SEARCH_SHARE`]): a loop whose state never repeats the recorded one
//! would otherwise run until the watchdog calls it a livelock, while the
//! inexact delivery may still let the replay go on.

use super::traps;
use super::{At, Session};
use anyhow::Result;
use crate::watchdog::cpu_time;
use crate::watchdog::Slice;
use std::time::Duration;
use nix::sys::ptrace;
use nix::unistd::Pid;
use weft_record::event::{signal_name, HitState, Signal};
use weft_record::tracee::{self, Regs};

/// The arithmetic flags of eflags (CF, PF, AF, ZF, SF, OF): the ones a
/// program's computation sets; the others (RF, TF, ...) are the kernel's
/// and debugger's.
const ARITHMETIC_FLAGS: u64 = 0x8d5;
/// Indices in `user_regs_struct` order of the registers compared at a hit:
/// r15 to rdi (0-14), rip (16), eflags (18, masked) and rsp (19).
const COMPARED: [usize; 18] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 18, 19];
/// Index of eflags in `user_regs_struct` order.
const EFLAGS: usize = 18;
/// Index of rsp in `user_regs_struct` order.
const RSP: usize = 19;
/// The registers that may hold a loop counter, the first words of a
/// hit's state ([`state_words`]): r15 to rdi in `user_regs_struct` order.
const REGISTER_WORDS: usize = 15;
/// The share of the livelock timeout a search may take, in tenths: it
/// ends at a hit well before the watchdog, which looks every 250 ms,
/// would stop the thread.
const SEARCH_SHARE: u32 = 9;

/// The first slice a thread runs for without the breakpoint once its
/// loop counter is known, to measure the loop's rate: at most some
/// millions of iterations, fewer than [`MIN_SKIP`].
const FIRST_SLICE: Duration = Duration::from_millis(1);
/// The least CPU time over which a probed counter's rate is measured: a
/// shorter run (the thread waited for its core, or ran a few iterations
/// between two stops, whose own cost the kernel counts in its CPU time)
/// says little of the loop's rate, and a rate measured too low would size
/// a slice that runs past the count.
const MEASURED: Duration = Duration::from_micros(500);
/// The probed counters that stopped counting after which a hunt still
/// looks for another.
const MAX_FAILED: usize = 3;
/// The steps by which a probed counter may move from one iteration to the
/// next: a count, or a pointer to elements of up to 16 bytes.
const STRIDES: [u64; 5] = [1, 2, 4, 8, 16];
/// A probed counter's breakpoint stays once the recorded value is less
/// than this much running away: a quarter of it is the shortest slice,
/// which a stop (the watchdog's nap, to some microseconds, and a SIGSTOP)
/// overruns by far less than the three quarters left.
const CLOSE_WALL: Duration = Duration::from_micros(300);
/// The breakpoint goes back when the counter is less than this much
/// running time short of the recorded value, at the loop's measured rate:
/// a slice may run a little longer than asked (the watchdog looks every
/// millisecond, and its stop takes effect at the thread's next tick).
const CLOSE: Duration = Duration::from_millis(20);
/// The fewest hits left (counted from the counter: steps to go times the
/// hits between two steps) for which the thread runs without the
/// breakpoint: below, the hits cost less than half a minute (some 30 us of
/// ptrace stops each), and a first slice would risk passing the count.
const MIN_SKIP: u64 = 1_000_000;

/// Where a loop keeps the counter a hunt skips hits by.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Counter {
    /// A stack word: its address (the recorded rsp plus its offset). It
    /// is read wherever a slice stopped the thread; once close, a write
    /// watchpoint on it stops the thread (`watching`).
    Stack { addr: u64, watching: bool },
    /// A word of the hit's state (its index in [`state_words`]: a general
    /// register or a stack word), which holds the counter at the loop's pc
    /// only: each slice ends with the breakpoint back for one hit that
    /// reads it (`probing`; hits in other frames than the recorded one,
    /// `frame`, its rsp, are passed). A counter that goes `down` is kept
    /// as its complement (`!value`), which goes up. Slices are in wall
    /// time, sized by the fastest `rate` (counts a second of the thread's
    /// CPU time) measured over [`MEASURED`] or more; `at` is the thread's
    /// CPU time when the current measure began, and `base` the counter's
    /// value then. The thread is stopped at a
    /// probe, so its CPU time is exact there (/proc/TID/schedstat is
    /// updated as a thread leaves its CPU, else at the scheduler's tick);
    /// a CPU-time rate holds on a machine where other programs share the
    /// thread's core, and a wall-time slice of that length runs the thread
    /// for at most as much CPU time, so no slice runs past the count.
    Probed { word: usize, down: bool, frame: u64, probing: bool, at: Duration, base: u64, rate: f64 },
}

/// A loop counter: the stack word or register differed from the recorded
/// state at two hits, with values one apart (for a stack word, nothing
/// else differed). The thread runs without the breakpoint while the
/// counter is far from `target`.
#[derive(Debug, Clone)]
struct Skip {
    counter: Counter,
    /// Its recorded value.
    target: u64,
    /// Its value, and the thread's CPU time, when the skip began: the
    /// loop's rate. CPU time, not wall time: a thread that shared its
    /// core while its rate was measured (another replay, a test beside
    /// it) would seem slower than it can run, and a slice sized by that
    /// rate ran it far past the recorded count.
    start: (u64, Duration),
    /// Its value at the latest slice's end.
    last: u64,
    /// How long the next slice runs.
    slice: Duration,
}

impl Skip {
    /// Whether the hunt's breakpoint is in its debug register: while a
    /// counter is probed.
    fn breakpoint(&self) -> bool {
        matches!(self.counter, Counter::Probed { probing: true, .. })
    }
}

/// A search for the moment an asynchronous signal hit: its execution
/// breakpoint, armed in one thread, and how the search ended.
#[derive(Debug, Clone)]
pub(super) struct Hunt {
    /// The thread (replay tid) whose debug register holds the breakpoint.
    tid: Pid,
    /// The log event (the signal) it searches for.
    event: usize,
    /// The debug register of the breakpoint (0-3).
    slot: usize,
    /// Breakpoint hits so far.
    hits: u64,
    /// Set when the search ended at a hit: whether the state matched.
    found: Option<bool>,
    /// The hit closest to the recorded state so far (the fewest
    /// differences): its number (from 1) and what differed, for the
    /// warning when none matches.
    closest: Option<(u64, Mismatch)>,
    /// The latest hit that differed only in one stack word: the word's
    /// offset from rsp, its value there, and the hit's number.
    single: Option<(usize, u64, u64)>,
    /// How each state word moved over the hits in the recorded frame (rsp
    /// as recorded), while the hunt may still find a counter.
    previous: Option<Vec<Track>>,
    /// Set while the thread runs without the breakpoint.
    skip: Option<Skip>,
    /// A skip took place: the hunt skips once, then searches hit by hit
    /// (unless its probed counter stopped counting).
    skipped: bool,
    /// The state words that were probed as counters and stopped counting.
    failed: Vec<usize>,
    /// The counter passed its recorded value while skipping: the recorded
    /// state cannot come, and the search ends at the next hit.
    passed: bool,
}

impl Session<'_> {
    /// Whether `s`, the log's next event, due to thread `i`, is still being
    /// searched for: it has a recorded state, the thread stands where it
    /// has not yet passed a logged event (at a synchronization point, or
    /// free to run), a debug register is free, and no hit has ended it.
    pub(super) fn hunting(&self, i: usize, s: &Signal) -> bool {
        let before = matches!(self.state.threads[i].at, At::Ready | At::Deliver(_) | At::Sync(_));
        s.state.is_some() && before && self.watchpoints.free_slot().is_some() && self.hunt_found(i).is_none()
    }

    /// How the search for the log's next event in thread `i` ended at a
    /// breakpoint hit: whether the state matched; `None` while it goes on.
    pub(super) fn hunt_found(&self, i: usize) -> Option<bool> {
        self.hunt.as_ref().filter(|h| self.is_current(h, i)).and_then(|h| h.found)
    }

    /// Arms the execution breakpoint in thread `i` when the log's next
    /// event is a signal to it with a recorded state (about to resume it).
    /// A search for an event already matched otherwise (a signal the
    /// program sent itself, matched at its delivery stop) is disarmed.
    /// Errors: ptrace refused the debug registers.
    pub(super) fn arm_hunt(&mut self, i: usize) -> Result<()> {
        if self.hunt.as_ref().is_some_and(|h| h.event != self.state.pos) {
            self.disarm_hunt();
        }
        let Some(s) = self.async_signal_due(i) else { return Ok(()) };
        if !self.hunting(i, s) || self.hunt.as_ref().is_some_and(|h| self.is_current(h, i)) {
            return Ok(());
        }
        self.disarm_hunt();
        let Some(slot) = self.watchpoints.free_slot() else { return Ok(()) };
        let tid = self.state.threads[i].tid;
        let label = self.trace.events[self.state.pos].label;
        self.watchpoints.apply_with_breakpoint(tid, slot, label)?;
        self.hunt = Some(Hunt { tid, event: self.state.pos, slot, hits: 0, found: None, closest: None, single: None, previous: None, skip: None, skipped: false, failed: Vec::new(), passed: false });
        Ok(())
    }

    /// Gives the debug registers of the hunt's thread back to the
    /// debugger's watchpoints, and forgets the hunt.
    pub(super) fn disarm_hunt(&mut self) {
        if let Some(h) = self.hunt.take() {
            tracing::debug!(event = h.event, hits = h.hits, found = ?h.found, "signal search over");
            // A thread that is gone has no debug registers to restore.
            let _ = self.watchpoints.apply(h.tid);
        }
    }

    /// Thread `i` stopped with SIGTRAP: `None` when not at the hunt's
    /// breakpoint, else whether the search ends at this hit
    /// ([`Session::hunt_hit`]). Errors: ptrace.
    pub(super) fn hunt_stop(&mut self, i: usize) -> Result<Option<bool>> {
        if self.counter_written(i)? {
            return Ok(Some(false));
        }
        Ok(self.hunt_trapped(i)?.map(|regs| self.hunt_hit(i, regs)))
    }

    /// Thread `i` stopped with SIGTRAP: whether the hunt's watchpoint on
    /// its loop counter trapped ([`Skip::watching`]). The breakpoint goes
    /// back once the counter is one short of its recorded value (or
    /// beyond, when it no longer counts towards it). Errors: ptrace, an
    /// unreadable counter.
    fn counter_written(&mut self, i: usize) -> Result<bool> {
        let watched = self.hunt.as_ref().filter(|h| self.is_current(h, i)).and_then(|h| Some((h.tid, h.slot, h.skip.clone()?)));
        let Some((tid, slot, skip)) = watched else { return Ok(false) };
        let Counter::Stack { addr, watching: true } = skip.counter else { return Ok(false) };
        if !traps::hit(tid, slot)? {
            return Ok(false);
        }
        let value = self.mem(i).read_u64(addr)?;
        let Some(h) = self.hunt.as_mut() else { return Ok(false) };
        if value >= skip.last && value.saturating_add(1) < skip.target {
            h.skip = Some(Skip { last: value, ..skip });
            return Ok(true);
        }
        self.end_skip(value >= skip.target)?;
        Ok(true)
    }

    /// Thread `i` stopped with SIGTRAP: its registers if it was at the
    /// hunt's breakpoint (DR6 says so, or the machine lost what DR6 said,
    /// [`traps::unexplained_debug_trap`]; and the pc is the breakpoint's:
    /// not an int3 that trapped past it). Errors: ptrace.
    fn hunt_trapped(&self, i: usize) -> Result<Option<Regs>> {
        let Some(h) = self.hunt.as_ref().filter(|h| self.is_current(h, i) && h.found.is_none() && h.armed()) else { return Ok(None) };
        let watchpoints = traps::DR6_HITS & !(1 << h.slot);
        if !traps::hit(h.tid, h.slot)? && !traps::unexplained_debug_trap(h.tid, watchpoints)? {
            return Ok(None);
        }
        let regs = ptrace::getregs(h.tid)?;
        Ok((regs.rip == self.trace.events[h.event].label).then_some(regs))
    }

    /// Thread `i` hit the hunt's breakpoint with registers `regs`: whether
    /// the search ends here, with the thread free to run at the hit (a
    /// scheduling point, where the signal is delivered). It ends when the
    /// thread's state matches the recorded one, or, inexact, once the
    /// replay has gone [`Session::search_limit`] without progress.
    fn hunt_hit(&mut self, i: usize, regs: Regs) -> bool {
        let Some(recorded) = self.async_signal_due(i).and_then(|s| s.state.as_ref()) else { return false };
        let counting = self.hunt.as_ref().is_some_and(|h| !h.skipped || h.skip.is_some());
        let in_frame = counting && recorded.regs.get(RSP) == Some(&regs.rsp);
        // One read of the stack serves the comparison and the counter.
        let read = || self.mem(i).read(regs.rsp, recorded.stack.len()).ok();
        let stack = in_frame.then(read).flatten();
        let differing = differences(recorded, &regs, || stack.clone().or_else(read));
        let words = stack.map(|stack| (state_words(&recorded.regs, &recorded.stack), state_words(&tracee::regs_words(&regs), &stack)));
        let matched = differing.is_none();
        let expired = self.watchdog.idle() >= self.search_limit();
        let Some(h) = self.hunt.as_mut() else { return false };
        h.hits += 1;
        tracing::trace!(event = h.event, hit = h.hits, ?differing, "signal search hit");
        let probing = h.skip.is_some();
        let counter = if probing { None } else { h.counter(&differing, words.as_ref(), regs.rsp) };
        if h.closest.as_ref().is_none_or(|(_, c)| differing.closer_than(c)) {
            h.closest = Some((h.hits, differing));
        }
        if !matched && !expired && !h.passed {
            if probing {
                self.probe(words.map(|(_, here)| here));
            } else if let Some(skip) = counter {
                h.skip = Some(skip);
                // The thread runs on without the breakpoint; a thread that
                // is gone is the next stop's to report.
                let _ = self.watchpoints.apply(h.tid);
            }
            return false;
        }
        h.found = Some(matched);
        if !matched {
            let signo = self.async_signal_due(i).map_or(0, |s| s.signo);
            let (hits, passed, (nearest, differing)) =
                self.hunt.as_ref().map_or_else(Default::default, |h| (h.hits, h.passed, h.closest.clone().unwrap_or_default()));
            let why = if passed { "passed: its loop counter ran past the recorded value".to_string() } else { format!("not found in {} s", self.search_limit().as_secs()) };
            eprintln!(
                "weft: warning: event {}: the state {} hit in the recording was {why} ({hits} hits; the closest, hit {nearest}, differed in {}); delivered at a hit",
                self.state.pos,
                signal_name(signo),
                differing.describe(),
            );
        }
        let t = &mut self.state.threads[i];
        t.regs = regs;
        t.at = At::Ready;
        true
    }

    /// How long the replay may go without progress before a search ends
    /// at its next hit: [`SEARCH_SHARE`] tenths of the livelock timeout.
    fn search_limit(&self) -> std::time::Duration {
        self.opts.livelock_timeout * SEARCH_SHARE / 10
    }

    /// How long thread `i` may run before the watchdog stops it for the
    /// hunt: a slice while it skips hits, else `None`.
    pub(super) fn skip_slice(&self, i: usize) -> Option<Slice> {
        let skip = self.hunt.as_ref().filter(|h| self.is_current(h, i)).and_then(|h| h.skip.as_ref())?;
        match skip.counter {
            Counter::Stack { watching: false, .. } => Some(Slice::cpu(skip.slice)),
            Counter::Probed { probing: false, .. } => Some(Slice::wall(skip.slice)),
            _ => None,
        }
    }

    /// Thread `i`, skipping hits, was stopped at the end of its slice:
    /// reads its counter and sets the next slice; when the counter is
    /// close to the recorded value, watches it (an 8-byte-aligned one), or
    /// puts the breakpoint back (also when it is past, or no longer
    /// counting towards, the recorded value). Errors: ptrace, an
    /// unreadable counter.
    pub(super) fn skip_sample(&mut self, i: usize) -> Result<()> {
        let Some(counter) = self.hunt.as_ref().filter(|h| self.is_current(h, i)).and_then(|h| h.skip.as_ref()).map(|s| s.counter) else {
            return Ok(());
        };
        let addr = match counter {
            Counter::Stack { addr, .. } => addr,
            Counter::Probed { .. } => return self.probe_next(),
        };
        let value = self.mem(i).read_u64(addr)?;
        let Some(h) = self.hunt.as_mut() else { return Ok(()) };
        let Some(skip) = h.skip.as_mut() else { return Ok(()) };
        let counting = value >= skip.last && value < skip.target;
        // Zero when unreadable: the loop's rate then seems boundless, and
        // the breakpoint goes back at once (slower, never past the count).
        let ran = cpu_time(h.tid).unwrap_or_default().saturating_sub(skip.start.1);
        let rate = (value - skip.start.0.min(value)) as f64 / ran.as_secs_f64().max(1e-6);
        let left = Duration::from_secs_f64((skip.target.saturating_sub(value)) as f64 / rate.max(1.0));
        if counting && left >= CLOSE {
            skip.last = value;
            skip.slice = left / 4;
            return Ok(());
        }
        if counting && value.saturating_add(1) < skip.target && addr % 8 == 0 {
            skip.last = value;
            skip.counter = Counter::Stack { addr, watching: true };
            return self.watchpoints.apply_with_write_watch(h.tid, h.slot, addr);
        }
        let passed = value >= skip.target;
        self.end_skip(passed)
    }

    /// A slice of a probed counter's skip ended: the breakpoint goes
    /// back for the hit that reads the counter ([`Session::probe`]).
    /// Errors: ptrace.
    fn probe_next(&mut self) -> Result<()> {
        let Some(h) = self.hunt.as_mut() else { return Ok(()) };
        let Some(Counter::Probed { probing, .. }) = h.skip.as_mut().map(|s| &mut s.counter) else { return Ok(()) };
        *probing = true;
        let (tid, slot, label) = (h.tid, h.slot, self.trace.events[h.event].label);
        self.watchpoints.apply_with_breakpoint(tid, slot, label)
    }

    /// A hit that did not match while the hunt probes its counter, with
    /// its state words when in the recorded frame (else `None`: the probe
    /// goes on). It reads the counter:
    /// while it counts towards the recorded value and is at least
    /// [`CLOSE_WALL`] of running away, the thread runs on without the
    /// breakpoint for a quarter of that; else the skip ends and the
    /// breakpoint stays (the search ends at the next hit when the counter
    /// counted past its recorded value).
    fn probe(&mut self, words: Option<Vec<u64>>) {
        let Some(h) = self.hunt.as_mut() else { return };
        let Some(skip) = h.skip.as_mut() else { return };
        let Counter::Probed { word, down, frame, at, base, rate, .. } = skip.counter else { return };
        let Some(value) = words.as_ref().and_then(|w| w.get(word)).map(|&v| oriented(v, down)) else { return };
        // Zero when unreadable: the rate then seems boundless, and the
        // breakpoint stays (slower, never past the count).
        let now = cpu_time(h.tid).unwrap_or_default();
        let ran = now.saturating_sub(at);
        let measured = ran >= MEASURED;
        let rate = if measured { rate.max(value.saturating_sub(base) as f64 / ran.as_secs_f64()) } else { rate };
        let (at, base) = if measured { (now, value) } else { (at, base) };
        // No rate yet: another first slice.
        let left = if rate > 0.0 { Duration::try_from_secs_f64(skip.target.saturating_sub(value) as f64 / rate).unwrap_or(Duration::MAX) } else { Duration::MAX };
        tracing::trace!(value, ?left, rate, ?ran, "counter probed");
        if value >= skip.last && value < skip.target && left >= CLOSE_WALL {
            skip.last = value;
            skip.slice = if rate > 0.0 { left / 4 } else { FIRST_SLICE };
            skip.counter = Counter::Probed { word, down, frame, probing: false, at, base, rate };
            // The thread runs on without the breakpoint; a thread that is
            // gone is the next stop's to report.
            let _ = self.watchpoints.apply(h.tid);
            return;
        }
        tracing::debug!(event = h.event, hits = h.hits, value, target = skip.target, "probed counter close");
        if value < skip.last && h.failed.len() < MAX_FAILED {
            // No counter after all (a word of a hash that moved steadily
            // for a few hits): the hunt may find another.
            h.failed.push(word);
            h.skipped = false;
        }
        // At the recorded value the hit may still come (the pc runs more
        // than once an iteration, or the counter is an outer loop's); a
        // value that no longer counts says nothing.
        h.passed = value >= skip.last && value > skip.target;
        h.skip = None;
    }

    /// Ends the hunt's skip: the breakpoint goes back in its register, and
    /// the search ends at its next hit when the counter `passed` its
    /// recorded value. Errors: ptrace.
    fn end_skip(&mut self, passed: bool) -> Result<()> {
        let Some(h) = self.hunt.as_mut() else { return Ok(()) };
        h.passed = passed;
        h.skip = None;
        let (tid, slot, label) = (h.tid, h.slot, self.trace.events[h.event].label);
        self.watchpoints.apply_with_breakpoint(tid, slot, label)
    }

    /// Whether thread `i`'s execution breakpoint (a search's) is at `pc`.
    pub(super) fn hunt_at(&self, i: usize, pc: u64) -> bool {
        self.hunt.as_ref().is_some_and(|h| h.tid == self.state.threads[i].tid && h.armed() && self.trace.events[h.event].label == pc)
    }

    /// Whether hunt `h` searches for the log's next event in thread `i`.
    fn is_current(&self, h: &Hunt, i: usize) -> bool {
        h.tid == self.state.threads[i].tid && h.event == self.state.pos
    }
}

impl Hunt {
    /// The thread (replay tid) whose debug register holds the breakpoint.
    pub(super) fn tid(&self) -> Pid {
        self.tid
    }

    /// Whether the breakpoint is in its debug register: no skip, or one
    /// that probes its register counter.
    fn armed(&self) -> bool {
        self.skip.as_ref().is_none_or(Skip::breakpoint)
    }

    /// After a hit with stack pointer `rsp` that differed by `d` from the
    /// recorded state: the loop counter to skip hits by, when this hit and
    /// the latest such one before (other hits of the same pc, in other
    /// calls, may come between) differed only in the same stack word, by
    /// one iteration, or, in the recorded frame (`words`: the recorded
    /// state words and this hit's), a state word is one further than at
    /// the latest hit there; and the recorded value is at least
    /// [`MIN_SKIP`] ahead. A hunt skips once.
    fn counter(&mut self, d: &Mismatch, words: Option<&(Vec<u64>, Vec<u64>)>, rsp: u64) -> Option<Skip> {
        let found = self.stack_counter(d, rsp).or_else(|| words.and_then(|(recorded, here)| self.probed_counter(recorded, here, rsp)));
        let (counter, target, here, hits_left) = found?;
        let far = hits_left > MIN_SKIP;
        (far && !std::mem::replace(&mut self.skipped, true)).then(|| Skip {
            counter,
            target,
            start: (here, cpu_time(self.tid).unwrap_or_default()),
            last: here,
            slice: FIRST_SLICE,
        })
    }

    /// A stack word one further than at the latest hit that differed in
    /// that word alone, when this hit differed in it alone: the counter,
    /// its recorded value, its value here and the hits left (iterations to
    /// go times the hits since that latest one: the pc may run many times
    /// an iteration).
    fn stack_counter(&mut self, d: &Mismatch, rsp: u64) -> Option<(Counter, u64, u64, u64)> {
        let [(offset, recorded, here)] = d.stack[..] else { return None };
        let previous = self.single.replace((offset, here, self.hits));
        let every = previous.filter(|&(o, v, _)| d.registers.is_empty() && o == offset && v == here.wrapping_sub(1)).map(|(_, _, hit)| self.hits - hit)?;
        let hits_left = recorded.saturating_sub(here).saturating_mul(every);
        Some((Counter::Stack { addr: rsp + offset as u64, watching: false }, recorded, here, hits_left))
    }

    /// A state word of this hit in the recorded frame (`here`, with stack
    /// pointer `frame`) that moved by one of [`STRIDES`] since the latest
    /// hit there, as it did when it last moved (a word that moves by one
    /// now and then, a bit of a hash, is no counter), towards its recorded
    /// value (in `recorded`), which is a whole number of strides away: the
    /// counter, its recorded value and its value here (complemented when
    /// it goes down), and about how many hits are left (strides to go
    /// times the hits between its last two moves: an outer loop's counter
    /// moves once an inner loop).
    fn probed_counter(&mut self, recorded: &[u64], here: &[u64], frame: u64) -> Option<(Counter, u64, u64, u64)> {
        let hit = self.hits;
        let tracks = self.previous.take().filter(|t| t.len() == here.len() && here.len() == recorded.len());
        let fresh = || here.iter().map(|&value| Track { value, moved: 0, at: hit, every: 0 }).collect();
        let (tracks, before): (Vec<Track>, Option<Vec<Track>>) = match tracks {
            Some(old) => (old.iter().zip(here).map(|(t, &value)| t.next(value, hit)).collect(), Some(old)),
            None => (fresh(), None),
        };
        self.previous = Some(tracks.clone());
        let before = before?;
        let counts = |k: usize, down: bool| {
            let (now, old) = (&tracks[k], &before[k]);
            let (to, target) = (oriented(here[k], down), oriented(recorded[k], down));
            let stride = if down { now.moved.wrapping_neg() } else { now.moved };
            let steady = now.at == hit && old.moved == now.moved && now.every > 0;
            let whole = steady && STRIDES.contains(&stride) && to < target && (target - to) % stride == 0;
            whole.then(|| (k, down, ((target - to) / stride).saturating_mul(now.every)))
        };
        let (word, down, hits_left) = (0..here.len()).filter(|k| !self.failed.contains(k)).find_map(|k| counts(k, false).or_else(|| counts(k, true)))?;
        let at = cpu_time(self.tid).unwrap_or_default();
        let counter = Counter::Probed { word, down, frame, probing: false, at, base: oriented(here[word], down), rate: 0.0 };
        Some((counter, oriented(recorded[word], down), oriented(here[word], down), hits_left))
    }
}

/// How one state word moved over the hits of a hunt in the recorded frame.
#[derive(Debug, Clone, Copy)]
struct Track {
    /// Its value at the latest hit.
    value: u64,
    /// By how much (wrapping) it moved when it last moved (0: never seen).
    moved: u64,
    /// The hit at which it last moved (or was first seen).
    at: u64,
    /// Hits between its last two moves (0: not known).
    every: u64,
}

impl Track {
    /// The word's track once it is `value` at hit `hit`.
    fn next(&self, value: u64, hit: u64) -> Track {
        if value == self.value {
            return Track { value, ..*self };
        }
        let seen = self.moved != 0;
        Track { value, moved: value.wrapping_sub(self.value), at: hit, every: if seen { hit - self.at } else { 0 } }
    }
}
/// Names of the registers in `user_regs_struct` order.
const REG_NAMES: [&str; 27] = [
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs",
    "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs",
];

/// What keeps a breakpoint hit from the recorded state: the compared
/// registers that differ, and, when none does, the 8-byte words of the
/// stack that differ; each as `name (recorded 0x.., here 0x..)`.
#[derive(Debug, Clone, Default, PartialEq)]
struct Mismatch {
    registers: Vec<String>,
    /// Differing stack words: offset from rsp in bytes, the recorded
    /// value and the value here.
    stack: Vec<(usize, u64, u64)>,
    /// The stack could not be read.
    unreadable: bool,
}

impl Mismatch {
    /// Whether the state matches.
    fn is_none(&self) -> bool {
        self.registers.is_empty() && self.stack.is_empty() && !self.unreadable
    }

    /// Whether this hit is closer to the recorded state than `other`:
    /// fewer registers differ, or as many and fewer stack words.
    fn closer_than(&self, other: &Mismatch) -> bool {
        let size = |m: &Mismatch| (m.registers.len(), m.stack.len() + m.unreadable as usize);
        size(self) < size(other)
    }

    /// The differences, comma-separated.
    fn describe(&self) -> String {
        let words = self.stack.iter().map(|(k, r, h)| format!("stack at rsp+{k:#x} (recorded {r:#x}, here {h:#x})"));
        let unreadable = self.unreadable.then(|| "stack (unreadable)".to_string());
        self.registers.iter().cloned().chain(words).chain(unreadable).collect::<Vec<_>>().join(", ")
    }
}

/// `value` as a counter that goes up: complemented when it goes `down`.
fn oriented(value: u64, down: bool) -> u64 {
    if down { !value } else { value }
}

/// A hit's state as 8-byte words: the general registers that may hold a
/// counter ([`REGISTER_WORDS`]; `regs` in `user_regs_struct` order), then
/// the words of the `stack` bytes from rsp.
fn state_words(regs: &[u64], stack: &[u8]) -> Vec<u64> {
    regs.iter().take(REGISTER_WORDS).copied().chain(stack.chunks(8).map(le_word)).collect()
}

/// The little-endian word of up to 8 bytes.
fn le_word(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0u64, |acc, &b| acc << 8 | b as u64)
}

/// What keeps a thread with registers `regs` from the recorded state: the
/// compared registers that differ, and, when they all equal, the words of
/// its stack (read by `stack`, only then; `None`: unreadable) that differ.
fn differences(recorded: &HitState, regs: &Regs, stack: impl FnOnce() -> Option<Vec<u8>>) -> Mismatch {
    let now = tracee::regs_words(regs);
    if recorded.regs.len() != now.len() {
        return Mismatch { registers: vec!["registers".into()], ..Default::default() };
    }
    let flags = |w: &[u64], k: usize| if k == EFLAGS { w[k] & ARITHMETIC_FLAGS } else { w[k] };
    let registers: Vec<_> = COMPARED
        .iter()
        .filter(|&&k| flags(&recorded.regs, k) != flags(&now, k))
        .map(|&k| format!("{} (recorded {:#x}, here {:#x})", REG_NAMES[k], flags(&recorded.regs, k), flags(&now, k)))
        .collect();
    if !registers.is_empty() {
        return Mismatch { registers, ..Default::default() };
    }
    let Some(bytes) = stack().filter(|b| b.len() == recorded.stack.len()) else {
        return Mismatch { registers, unreadable: true, ..Default::default() };
    };
    let stack = recorded
        .stack
        .chunks(8)
        .zip(bytes.chunks(8))
        .enumerate()
        .filter(|(_, (r, h))| r != h)
        .map(|(k, (r, h))| (k * 8, le_word(r), le_word(h)))
        .collect();
    Mismatch { registers, stack, unreadable: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs() -> Regs {
        // SAFETY: user_regs_struct is plain integers; all zeros is valid.
        let mut r: Regs = unsafe { std::mem::zeroed() };
        r.rip = 0x401000;
        r.rsp = 0x7ffe0000;
        r.rbx = 42;
        r.eflags = 0x246;
        r
    }

    #[test]
    fn a_lone_stack_word_one_further_at_each_hit_is_a_counter_to_skip_by() {
        let mut h = hunt();
        let counting = |here: u64| Mismatch { stack: vec![(0xb0, 5_000_000, here)], ..Default::default() };
        let hit = |h: &mut Hunt, d: Mismatch| {
            h.hits += 1;
            h.counter(&d, None, 0x7ffe0000).map(|s| (s.counter, s.target, s.last))
        };
        let at = |addr| Counter::Stack { addr, watching: false };
        assert_eq!(hit(&mut h, counting(1)), None, "one hit is no count");
        assert_eq!(hit(&mut h, counting(3)), None, "two apart is no count");
        assert_eq!(hit(&mut h, counting(4)), Some((at(0x7ffe00b0), 5_000_000, 4)));
        assert_eq!(hit(&mut h, counting(5)), None, "a hunt skips once");
        let mut h = Hunt { skipped: false, single: None, ..h };
        let two_words = Mismatch { stack: vec![(0xb0, 5_000_000, 7), (0xb8, 1, 2)], ..Default::default() };
        assert_eq!(hit(&mut h, counting(6)), None);
        assert_eq!(hit(&mut h, two_words.clone()), None, "another word differs too");
        assert_eq!(h.single, Some((0xb0, 6, 5)), "a hit that differs more is another call's");
        assert_eq!(hit(&mut h, counting(4_500_000)), None);
        assert_eq!(hit(&mut h, counting(4_500_001)), None, "too close to the recorded count to skip");
        let mut h = Hunt { skipped: false, single: None, ..h };
        assert_eq!(hit(&mut h, counting(4_700_000)), None);
        for _ in 0..4 {
            assert_eq!(hit(&mut h, two_words.clone()), None);
        }
        assert_eq!(hit(&mut h, counting(4_700_001)), Some((at(0x7ffe00b0), 5_000_000, 4_700_001)), "five hits an iteration: some 1.5 million hits left");
    }

    #[test]
    fn a_state_word_that_moves_steadily_towards_its_recorded_value_is_a_counter() {
        let mut recorded = regs();
        recorded.rcx = 9_000_000;
        let mut stack = vec![0u8; 512];
        stack[0x18..0x20].copy_from_slice(&7_000_000u64.to_le_bytes());
        let recorded = state_words(&tracee::regs_words(&recorded), &stack);
        let differs = Mismatch { registers: vec!["rcx".into(), "rax".into()], ..Default::default() };
        let hit = |h: &mut Hunt, rcx: u64, rax: u64, spilled: u64| {
            h.hits += 1;
            let mut now = regs();
            (now.rcx, now.rax) = (rcx, rax);
            let mut stack = vec![0u8; 512];
            stack[0x18..0x20].copy_from_slice(&spilled.to_le_bytes());
            let words = (recorded.clone(), state_words(&tracee::regs_words(&now), &stack));
            h.counter(&differs, Some(&words), now.rsp).and_then(|s| match s.counter {
                Counter::Probed { word, down: false, frame: 0x7ffe0000, probing: false, .. } => Some((word, s.target, s.last)),
                Counter::Probed { word, down: true, frame: 0x7ffe0000, probing: false, .. } => Some((word, !s.target, !s.last)),
                _ => None,
            })
        };
        let mut h = hunt();
        assert_eq!(hit(&mut h, 10, 0x1234, 0), None, "one hit is no count");
        assert_eq!(hit(&mut h, 11, 0x1235, 0), None, "one move is no count");
        assert_eq!(hit(&mut h, 12, 0x5678, 0), Some((11, 9_000_000, 12)), "rcx counts, rax does not");
        assert_eq!(hit(&mut h, 13, 0x4321, 0), None, "a hunt skips once");
        let mut h = hunt();
        for (k, spilled) in [40, 40, 40, 41, 41, 41].into_iter().enumerate() {
            assert_eq!(hit(&mut h, 5, k as u64, spilled), None);
        }
        assert_eq!(hit(&mut h, 5, 0x9abc, 42), Some((REGISTER_WORDS + 3, 7_000_000, 42)), "a counter saved on the stack, once in three hits");
        let mut h = hunt();
        for rcx in [8_500_000, 8_500_001] {
            assert_eq!(hit(&mut h, rcx, 0, 0), None);
        }
        assert_eq!(hit(&mut h, 8_500_002, 0, 0), None, "too close to the recorded count to skip");
        // An outer loop's counter, 1,000 short, moves once in 2,000 hits:
        // some 2 million hits are left.
        let mut h = hunt();
        let outer = |k: u64| 6_999_000 + k / 2_000;
        for k in 0..4_000 {
            assert_eq!(hit(&mut h, 5, 0, outer(k)), None);
        }
        assert_eq!(hit(&mut h, 5, 0, outer(4_000)), Some((REGISTER_WORDS + 3, 7_000_000, 6_999_002)), "an outer loop's counter");
        let mut h = hunt();
        let outer = |k: u64| 6_999_900 + k / 2_000;
        for k in 0..4_000 {
            assert_eq!(hit(&mut h, 5, 0, outer(k)), None);
        }
        assert_eq!(hit(&mut h, 5, 0, outer(4_000)), None, "an outer loop's counter some 200,000 hits short");
        let mut h = hunt();
        for rcx in [9_000_002, 9_000_003] {
            assert_eq!(hit(&mut h, rcx, 0, 0), None);
        }
        assert_eq!(hit(&mut h, 9_000_004, 0, 0), None, "past the recorded count");
        let mut h = hunt();
        for spilled in [9_000_000, 8_999_999] {
            assert_eq!(hit(&mut h, 5, 0, spilled), None);
        }
        assert_eq!(hit(&mut h, 5, 0, 8_999_998), Some((REGISTER_WORDS + 3, 7_000_000, 8_999_998)), "counting down");
        let mut h = hunt();
        for rcx in [8, 16] {
            assert_eq!(hit(&mut h, rcx, 0, 0), None);
        }
        assert_eq!(hit(&mut h, 24, 0, 0), Some((11, 9_000_000, 24)), "a pointer to 8-byte elements");
        let mut h = hunt();
        for rcx in [3, 11] {
            assert_eq!(hit(&mut h, rcx, 0, 0), None);
        }
        assert_eq!(hit(&mut h, 19, 0, 0), None, "not a whole number of strides from the recorded value");
        let mut h = hunt();
        for rcx in [3, 4, 3] {
            assert_eq!(hit(&mut h, rcx, 0, 0), None, "one up, one down: no counter");
        }
    }

    fn hunt() -> Hunt {
        Hunt { tid: Pid::from_raw(1), event: 0, slot: 0, hits: 0, found: None, closest: None, single: None, previous: None, skip: None, skipped: false, failed: Vec::new(), passed: false }
    }

    #[test]
    fn matches_registers_and_stack_ignoring_kernel_state() {
        let stack = vec![7u8; 512];
        let recorded = HitState { regs: tracee::regs_words(&regs()), stack: stack.clone() };
        let mut now = regs();
        now.orig_rax = 13;
        now.eflags |= 1 << 16; // RF, set by the kernel at a breakpoint hit
        assert!(differences(&recorded, &now, || Some(stack.clone())).is_none());
        now.rbx = 43;
        now.rsp += 8;
        let two_registers = differences(&recorded, &now, || Some(stack.clone()));
        assert_eq!(two_registers.describe(), "rbx (recorded 0x2a, here 0x2b), rsp (recorded 0x7ffe0000, here 0x7ffe0008)");
        let mut other = stack.clone();
        other[17] = 8;
        let one_word = differences(&recorded, &regs(), || Some(other));
        assert_eq!(one_word.describe(), "stack at rsp+0x10 (recorded 0x707070707070707, here 0x707070707070807)");
        assert!(one_word.closer_than(&two_registers));
        assert_eq!(differences(&recorded, &regs(), || None).describe(), "stack (unreadable)");
        let mut zf = regs();
        zf.eflags &= !0x40;
        let flag = differences(&recorded, &zf, || Some(stack.clone()));
        assert_eq!(flag.describe(), "eflags (recorded 0x44, here 0x4)");
        assert!(flag.closer_than(&two_registers) && !one_word.closer_than(&one_word));
    }
}
