//! Going backwards: reverse-continue and reverse-step, by replaying
//! forwards from checkpoints (rr's ReplayTimeline does the same with
//! marks). Without performance counters a moment is a [`Mark`]: a
//! segment and the legs that reach it (see `mark.rs`).
//!
//! * reverse-continue scans the interval from the latest checkpoint
//!   before the current mark up to it, with the user's traps set, and goes
//!   to the last hit; with none there, the interval before, and so on to
//!   the start of the recording. Each interval is at most one checkpoint
//!   spacing of replay time, replayed twice (scan, then seek).
//! * reverse-step goes to the moment one instruction earlier in the
//!   thread: drop a trailing single step; after a trap, single-step from
//!   the trap before it (or the segment's start) to the current one, or,
//!   closer, from the last hit of the instruction that ends at the trap's
//!   pc (a breakpoint there, whose hits are counted: predecessor.rs); at a
//!   segment's start, single-step the thread's previous segment to its end.
//!   A watchpoint's hit found going backwards is gone back over the same
//!   way, to the moment before the access.

use crate::debug::{Stop, Watchpoint};
use crate::mark::{Leg, Mark, TrapSet};
use crate::predecessor;
use crate::remote;
use crate::replay_session::{watch_hit, Origin, ReplaySession};
use crate::session::{Goal, Halt};
use anyhow::{anyhow, bail, Result};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use weft_record::Tid;

/// A hit of the user's traps found by a scan, and the stop it makes.
struct Hit {
    mark: Mark,
    stop: Stop,
}

impl ReplaySession<'_> {
    /// Goes back to the last hit of a breakpoint or watchpoint before the
    /// current mark, or to the start of the recording. Errors: rebuilding
    /// processes failed.
    pub(crate) fn reverse_continue(&mut self, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        let now = self.mark.clone();
        let found = self.last_hit_before(interrupt);
        self.interruptible(found, &now)
    }

    /// A move backwards that `interrupt` stopped goes back to `now`.
    fn interruptible(&mut self, moved: Result<Stop>, now: &Mark) -> Result<Stop> {
        match moved {
            Err(e) if e.is::<Interrupted>() => {
                self.seek(now)?;
                Ok(Stop::Interrupted { tid: self.live.current() })
            }
            other => other,
        }
    }

    fn last_hit_before(&mut self, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        let set = self.traps.clone();
        let mut hi = self.mark.clone();
        while !set.is_empty() {
            let from = self.timeline.latest_before(&hi, false);
            let from_mark = from.map(|k| self.timeline.get(k).mark.clone());
            self.restore(from.map_or(Origin::Start, Origin::Timeline))?;
            let hits = self.scan(&hi, &set, interrupt)?;
            if let Some(hit) = hits.into_iter().last() {
                // Backwards, a watchpoint stops before the access (gdb
                // then sees the value change back, as rr shows it).
                let target = match hit.stop {
                    Stop::Watchpoint { .. } => self.one_before(&hit.mark, interrupt)?,
                    _ => hit.mark,
                };
                self.seek(&target)?;
                return Ok(hit.stop);
            }
            match from_mark {
                Some(m) => hi = m,
                None => break,
            }
        }
        self.restore(Origin::Start)?;
        Ok(Stop::StartOfRecording { tid: self.live.current() })
    }

    /// Replays from the live process's mark (before `hi`) to `hi` with the
    /// traps of `set` and returns their hits before `hi`. A watchpoint hit
    /// at `hi` itself counts: backwards, the access that led to `hi` is
    /// the first one undone.
    fn scan(&mut self, hi: &Mark, set: &Arc<TrapSet>, interrupt: &mut dyn FnMut() -> bool) -> Result<Vec<Hit>> {
        let mut hits = Vec::new();
        let mut values = self.watch_values(&set.watchpoints);
        while self.mark.point < hi.point {
            let pause_at = Some(Instant::now() + self.sopts.checkpoint_interval);
            match self.run(&Goal { point: Some(hi.point), pause_at, traps: true, ..Goal::default() })? {
                Halt::Segment if self.mark.point < hi.point => {
                    self.maybe_checkpoint()?;
                    poll(interrupt)?;
                }
                Halt::Segment | Halt::Signal { fatal: false, .. } => {}
                halt @ (Halt::Breakpoint | Halt::Watch(_)) => {
                    let stop = self.hit_stop(&halt, &mut values);
                    hits.push(Hit { mark: self.mark.clone(), stop });
                }
                // The end of the replay: `hi` is there.
                _ => return Ok(hits),
            }
        }
        let mut prefix = Mark::segment_start(self.mark.event, self.mark.tid, self.mark.point);
        for (k, leg) in hi.path.iter().enumerate() {
            let last = k + 1 == hi.path.len();
            self.scan_leg(leg, last, &prefix, set, &mut values, &mut hits)?;
            prefix.push(leg.clone());
        }
        Ok(hits)
    }

    /// Walks `leg` (the last of its mark when `last`) from `prefix`, with
    /// the traps of `set` added, and adds their hits (see `scan`).
    fn scan_leg(
        &mut self,
        leg: &Leg,
        last: bool,
        prefix: &Mark,
        set: &Arc<TrapSet>,
        values: &mut HashMap<Watchpoint, Vec<u8>>,
        hits: &mut Vec<Hit>,
    ) -> Result<()> {
        let point = prefix.point;
        match leg {
            Leg::Traps(own, n) => {
                let union = union(own, set);
                self.with_traps(&union, |me| {
                    let (mut done, mut seen) = (0, 0);
                    while done < *n {
                        let halt = me.run(&Goal { traps: true, ..Goal::default() })?;
                        let (in_own, in_set) = me.classify(&halt, own, set)?;
                        if me.mark.point != point {
                            bail!("a position in segment {point} is not reached again");
                        }
                        done += u64::from(in_own);
                        let at_hi = last && in_own && done == *n;
                        if in_set && !(at_hi && halt == Halt::Breakpoint) {
                            seen += 1;
                            let mut mark = prefix.clone();
                            mark.push(Leg::Traps(set.clone(), seen));
                            mark.event = me.mark.event;
                            let stop = me.hit_stop(&halt, values);
                            hits.push(Hit { mark, stop });
                        }
                    }
                    Ok(())
                })
            }
            // A single step onto a breakpoint's address is a hit too (gdb's
            // reverse-next sets one at a callee's entry and continues back
            // from inside it), but not the step that ends at `hi` itself.
            Leg::Steps(m) => self.walk_steps(prefix.tid, point, *m, &set.watchpoints, |me, j, halt| {
                let on_breakpoint = || me.live.pc(prefix.tid).is_ok_and(|pc| set.breakpoints.contains(&pc));
                let hit = match halt {
                    Halt::Watch(_) => Some(me.hit_stop(halt, values)),
                    _ if !(last && j == *m) && on_breakpoint() => Some(me.hit_stop(&Halt::Breakpoint, values)),
                    _ => None,
                };
                if let Some(stop) = hit {
                    let mut mark = prefix.clone();
                    mark.push(Leg::Steps(j));
                    hits.push(Hit { mark, stop });
                }
            }),
        }
    }

    /// Whether a trap halt belongs to `own` and to `set`.
    fn classify(&self, halt: &Halt, own: &TrapSet, set: &TrapSet) -> Result<(bool, bool)> {
        Ok(match halt {
            Halt::Breakpoint => {
                let pc = self.live.pc(self.live.current())?;
                (own.breakpoints.contains(&pc), set.breakpoints.contains(&pc))
            }
            Halt::Watch(slot) => {
                let w = self.live.watchpoints().get(*slot);
                (w.is_some_and(|w| own.watchpoints.contains(&w)), w.is_some_and(|w| set.watchpoints.contains(&w)))
            }
            other => bail!("the replay left the segment being scanned ({other:?})"),
        })
    }

    /// The stop a hit makes; a watchpoint's old value is its value at the
    /// hit before (`values`, updated).
    fn hit_stop(&self, halt: &Halt, values: &mut HashMap<Watchpoint, Vec<u8>>) -> Stop {
        let tid = self.live.current();
        match halt {
            Halt::Watch(slot) => watch_hit(&self.live, tid, *slot, values),
            _ => Stop::Breakpoint { tid, pc: self.live.pc(tid).unwrap_or(0) },
        }
    }

    /// The watched bytes now.
    fn watch_values(&self, watches: &[Watchpoint]) -> HashMap<Watchpoint, Vec<u8>> {
        let read = |w: &Watchpoint| {
            let mut now = vec![0; usize::from(w.len)];
            self.read_memory(w.addr, &mut now);
            (*w, now)
        };
        watches.iter().map(read).collect()
    }

    /// Goes back one instruction of thread `tid`; when `tid` executed
    /// nothing before this point (or is not live here), stays and stops
    /// with [`Stop::StartOfRecording`] (gdb: "No more reverse-execution
    /// history"). Errors: rebuilding processes failed.
    pub(crate) fn reverse_step(&mut self, tid: Tid, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        let now = self.mark.clone();
        let target = if now.tid == tid && !now.path.is_empty() {
            self.one_before(&now, interrupt).map(Some)
        } else if self.live.thread_index(tid).is_none() {
            Ok(None)
        } else {
            self.end_of_previous_segment(&now, tid, interrupt)
        };
        let moved = target.and_then(|target| match target {
            Some(target) => self.seek(&target).map(|()| Stop::Step { tid }),
            None => self.seek(&now).map(|()| Stop::StartOfRecording { tid }),
        });
        self.interruptible(moved, &now)
    }

    /// The moment one instruction before `mark`, which is inside its
    /// segment (not at its start).
    fn one_before(&mut self, mark: &Mark, interrupt: &mut dyn FnMut() -> bool) -> Result<Mark> {
        if mark.trailing_steps() == 0 {
            return self.before_trap(mark, interrupt);
        }
        let mut target = mark.clone();
        match target.path.last_mut() {
            Some(Leg::Steps(m)) if *m > 1 => *m -= 1,
            _ => {
                target.path.pop();
            }
        }
        Ok(target)
    }

    /// The moment one instruction before `now`, which ends with a trap leg:
    /// single steps from the trap before it (or its segment's start), or
    /// from a [`closer_anchor`](Self::closer_anchor) after it.
    fn before_trap(&mut self, now: &Mark, interrupt: &mut dyn FnMut() -> bool) -> Result<Mark> {
        let mut anchor = now.clone();
        let Some(Leg::Traps(own, n)) = anchor.path.pop() else { bail!("internal error: {now} does not end with a trap") };
        if n > 1 {
            anchor.path.push(Leg::Traps(own.clone(), n - 1));
        }
        if let Some(closer) = self.closer_anchor(now, &anchor, &own)? {
            anchor = closer;
        }
        self.seek(&anchor)?;
        let step = Some(self.live.thread_index(now.tid).ok_or_else(|| anyhow!("no thread {}", now.tid))?);
        let steps = self.with_traps(&own, |me| {
            let mut j = 0u64;
            loop {
                match me.run(&Goal { step, traps: true, ..Goal::default() })? {
                    _ if me.mark.point != now.point => bail!("{now} is not reached again"),
                    Halt::Stepped(true) => {
                        j += 1;
                        if j.is_multiple_of(POLL_STEPS) {
                            poll(interrupt)?;
                        }
                    }
                    Halt::Watch(_) => return Ok(j),
                    Halt::Breakpoint => return Ok(j.saturating_sub(1)),
                    other => bail!("{now} is not reached again ({other:?})"),
                }
            }
        })?;
        if steps > 0 {
            anchor.push(Leg::Steps(steps));
        }
        Ok(anchor)
    }

    /// The replayed process's ELF modules (predecessor.rs): the loader's
    /// list, each read from the trace's copy of its file when it has one;
    /// the executable (which the list names by no path) from the recorded
    /// one. Empty when the list cannot be read.
    fn modules(&self) -> Vec<predecessor::Module> {
        let Ok(libraries) = self.libraries() else { return Vec::new() };
        let path_of = |name: &[u8]| match name {
            [] => self.exe_path().to_path_buf(),
            _ => self.recorded_copy(name).and_then(Result::ok).unwrap_or_else(|| PathBuf::from(OsStr::from_bytes(name))),
        };
        libraries.iter().map(|lib| predecessor::Module { path: path_of(&lib.name), bias: lib.l_addr }).collect()
    }

    /// A moment between `anchor` and `now` (which ends with a trap of `own`
    /// reached from `anchor`) from which to single-step to the trap: the
    /// last hit before the trap of a breakpoint on the instruction that
    /// ends at the trap's pc (predecessor.rs), which is most often the one
    /// executed right before it, or else a call whose callee returns there.
    /// A long segment is then not single-stepped from its start: the hits
    /// are counted at the speed of traps. `None` when there is no such
    /// instruction, or it is not hit. Errors: rebuilding processes failed.
    fn closer_anchor(&mut self, now: &Mark, anchor: &Mark, own: &Arc<TrapSet>) -> Result<Option<Mark>> {
        let tid = now.tid;
        self.seek(now)?;
        let trap_pc = self.live.pc(tid)?;
        let Some(before) = self.instruction_before(trap_pc).filter(|c| !own.breakpoints.contains(c)) else { return Ok(None) };
        self.seek(anchor)?;
        let (probe, hits) = self.hits_of(before, own, now)?;
        Ok((hits > 0).then(|| {
            let mut closer = anchor.clone();
            closer.push(Leg::Traps(probe, hits));
            closer
        }))
    }

    /// The last moment of thread `tid`'s last segment before `now` in
    /// which it executed an instruction, before that instruction's
    /// successor: single steps through that segment. `None` when it
    /// executed nothing before `now`.
    fn end_of_previous_segment(&mut self, now: &Mark, tid: Tid, interrupt: &mut dyn FnMut() -> bool) -> Result<Option<Mark>> {
        let pc_now = self.live.pc(tid)?;
        let mut hi = now.clone();
        loop {
            let from = self.timeline.latest_before(&hi, false);
            let from_mark = from.map(|k| self.timeline.get(k).mark.clone());
            self.restore(from.map_or(Origin::Start, Origin::Timeline))?;
            let mut last = None;
            while self.mark.point < hi.point {
                if self.mark.tid == tid && self.mark.at_segment_start() {
                    last = Some(self.mark.clone());
                }
                poll(interrupt)?;
                let next = self.mark.point + 1;
                if self.run_to_segment(next).is_err() {
                    break;
                }
            }
            if let Some(start) = last {
                return self.last_instruction(&start, pc_now, interrupt).map(Some);
            }
            match from_mark {
                Some(m) => hi = m,
                None => return Ok(None),
            }
        }
    }

    /// From segment start `start`, single-steps its thread to the end of
    /// the segment; the mark of the last instruction boundary inside it
    /// whose pc is not `pc_now` (a pthread breakpoint ends a segment at
    /// the same pc the next one starts at).
    fn last_instruction(&mut self, start: &Mark, pc_now: u64, interrupt: &mut dyn FnMut() -> bool) -> Result<Mark> {
        if let Some(mark) = self.last_instruction_by_breakpoint(start, pc_now)? {
            return Ok(mark);
        }
        self.seek(start)?;
        let step = Some(self.live.thread_index(start.tid).ok_or_else(|| anyhow!("no thread {}", start.tid))?);
        let mut pcs = vec![self.live.pc(start.tid)?];
        let bare = TrapSet::default();
        self.with_traps(&bare, |me| {
            loop {
                let halt = me.run(&Goal { step, ..Goal::default() })?;
                if me.mark.point != start.point || !matches!(halt, Halt::Stepped(true)) {
                    return Ok(());
                }
                pcs.push(me.live.pc(start.tid)?);
                if (pcs.len() as u64).is_multiple_of(POLL_STEPS) {
                    poll(interrupt)?;
                }
            }
        })?;
        while pcs.len() > 1 && pcs.last() == Some(&pc_now) {
            pcs.pop();
        }
        let mut mark = start.clone();
        if pcs.len() > 1 {
            mark.push(Leg::Steps(pcs.len() as u64 - 1));
        }
        Ok(mark)
    }

    /// The last instruction boundary of the segment that starts at
    /// `start`, found at the speed of traps: its thread ends the segment
    /// by executing the instruction that ends at its pc there (most often
    /// a `syscall`; predecessor.rs), so the last hit of a breakpoint on
    /// that instruction is the boundary, when one step from there ends the
    /// segment. `None` when the instruction is not found or not hit, or the
    /// step does not end the segment. Errors: rebuilding processes failed.
    fn last_instruction_by_breakpoint(&mut self, start: &Mark, pc_now: u64) -> Result<Option<Mark>> {
        let tid = start.tid;
        self.seek(start)?;
        if self.run_to_segment(start.point + 1).is_err() {
            return Ok(None);
        }
        let end_pc = self.live.pc(tid)?;
        let Some(before) = self.instruction_before(end_pc).filter(|&c| c != pc_now) else { return Ok(None) };
        self.seek(start)?;
        let (probe, hits) = self.hits_of(before, &TrapSet::default(), start)?;
        if hits == 0 {
            return Ok(None);
        }
        let mut mark = start.clone();
        mark.push(Leg::Traps(probe, hits));
        self.seek(&mark)?;
        let step = self.live.thread_index(tid);
        let ends = self.with_traps(&TrapSet::default(), |me| {
            let halt = me.run(&Goal { step, ..Goal::default() })?;
            Ok(me.mark.point != start.point || halt != Halt::Stepped(true))
        })?;
        Ok(ends.then_some(mark))
    }

    /// The instruction that ends at `pc`: a `syscall` when the two bytes
    /// before are one (a segment that ends at a syscall's entry stop ends
    /// after it, maybe in no named function: the in-process runtime's
    /// sites), else the one decoded from its function (predecessor.rs).
    fn instruction_before(&self, pc: u64) -> Option<u64> {
        let mut syscall = [0; 2];
        if self.read_memory(pc.wrapping_sub(2), &mut syscall) == 2 && syscall == remote::SYSCALL_INSN {
            return Some(pc - 2);
        }
        predecessor::instruction_ending_at(&self.modules(), pc, |a, buf| self.read_memory(a, buf))
    }

    /// From the live position, in `at`'s segment and thread, counts the
    /// hits of a breakpoint on `before` until another trap of `also`
    /// halts the thread or the segment ends. Returns the breakpoint as a
    /// trap set (for the mark of its last hit) and the count.
    fn hits_of(&mut self, before: u64, also: &TrapSet, at: &Mark) -> Result<(Arc<TrapSet>, u64)> {
        let probe = Arc::new(TrapSet { breakpoints: vec![before], watchpoints: Vec::new() });
        let hits = self.with_traps(&union(also, &probe), |me| {
            let mut hits = 0;
            while me.run(&Goal { traps: true, ..Goal::default() })? == Halt::Breakpoint
                && me.mark.point == at.point
                && me.live.pc(at.tid)? == before
            {
                hits += 1;
            }
            Ok(hits)
        })?;
        Ok((probe, hits))
    }
}

/// Single steps between two polls of the client's interrupt (about 50 ms
/// of ptrace single steps).
const POLL_STEPS: u64 = 4096;

/// A move backwards the client interrupted (gdb's ^C).
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted by the client")
    }
}

impl std::error::Error for Interrupted {}

/// Errors with [`Interrupted`] when the client asked to stop.
fn poll(interrupt: &mut dyn FnMut() -> bool) -> Result<()> {
    if interrupt() {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// The traps of both sets.
fn union(a: &TrapSet, b: &TrapSet) -> TrapSet {
    let mut breakpoints: Vec<u64> = a.breakpoints.iter().chain(&b.breakpoints).copied().collect();
    breakpoints.sort_unstable();
    breakpoints.dedup();
    let mut watchpoints = a.watchpoints.clone();
    watchpoints.extend(b.watchpoints.iter().filter(|w| !a.watchpoints.contains(w)));
    TrapSet { breakpoints, watchpoints }
}
