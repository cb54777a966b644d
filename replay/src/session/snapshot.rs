//! Snapshots of a replay for checkpoints (`checkpoint.rs` keeps the
//! frozen process): the replayer's [`State`](super::State), every thread's
//! [`ThreadImage`], and where the scheduler's loop stands. Exploration
//! takes them at synchronization points, the debugger's timeline at
//! segment starts, and the user's `checkpoint` at any stop where no
//! thread is at a signal delivery.

use super::{At, Session, State};
use crate::checkpoint::{self, Checkpoints, Template, ThreadImage};
use crate::remote;
use crate::sync_points::Op;
use crate::ReplayOptions;
use anyhow::Result;
use nix::unistd::Pid;
use std::sync::Arc;
use std::time::Instant;
use weft_record::Trace;

/// A replay frozen with a checkpoint's [`Template`]: its state, every
/// thread's image, the thread the scheduler runs, and the synchronization
/// point of that thread still to handle (exploration's checkpoints are
/// taken just before one).
#[derive(Clone)]
pub(crate) struct Snapshot {
    state: State,
    images: Vec<Option<ThreadImage>>,
    cur: usize,
    pending: Option<Option<Op>>,
}

impl Snapshot {
    /// Whether a replay with `opts` can resume from it: it keeps the same
    /// digest and sync trace (the schedule is the checkpoint's business).
    /// A replay that traces accesses resumes only from before the tracing
    /// starts (race reversals are the checkpoint's business, as
    /// preemptions are). Lessons are not compared: the [`crate::Replayer`]
    /// drops its checkpoints when its replays learn something.
    pub(crate) fn fits(&self, opts: &ReplayOptions) -> bool {
        self.state.digest.is_some() == opts.digest
            && self.state.sync_trace.capacity() == opts.sync_trace_len
            && opts.trace_accesses.is_none_or(|t| self.state.sync_count < t.from)
    }

    /// A new process from `template` with this snapshot's threads.
    /// Errors as [`Template::spawn`].
    pub(crate) fn spawn(&self, template: &Template) -> Result<Vec<Option<Pid>>> {
        template.spawn(&self.images, self.cur)
    }

}

impl<'a> Session<'a> {
    /// Goes on from snapshot `s` in the process whose threads are `tids`
    /// (from [`Snapshot::spawn`]).
    pub(crate) fn resumed(
        trace: &'a Trace,
        opts: &ReplayOptions,
        log: Arc<crate::log_index::LogIndex>,
        checkpoints: Option<&'a mut Checkpoints<Snapshot>>,
        s: Snapshot,
        tids: Vec<Option<Pid>>,
    ) -> Result<Self> {
        let mut state = s.state;
        state.protect.adopt(opts.trace_accesses, opts.schedule.reversals());
        // The pending point was counted before the snapshot; it is handled
        // (and counted) again.
        state.points -= u64::from(s.pending.is_some());
        for (t, tid) in state.threads.iter_mut().zip(&tids) {
            if let Some(tid) = tid {
                t.tid = *tid;
            }
            // The copy's threads stop outside any syscall, or at an
            // ordinary entry (ThreadImage::apply).
            t.exit_due = false;
        }
        // A snapshot holds one live process, the current thread's.
        let pid = state.threads[s.cur].tid;
        let p = &mut state.procs[state.threads[s.cur].proc];
        p.pid = pid;
        p.mem = Arc::new(weft_record::tracee::Memory::open(pid)?);
        for p in state.procs.iter_mut().filter(|p| p.spin.is_empty()) {
            p.spin = opts.lessons.spin_words.of(p.rec).to_vec();
        }
        state.lessons.absorb(&opts.lessons);
        let mut session = Self::new(trace, opts, log, checkpoints, state);
        session.resumed = true;
        session.cur = s.cur;
        session.pending = s.pending;
        session.arm_lock_watches()?;
        Ok(session)
    }

    /// A snapshot of this replay with thread `cur` about to handle
    /// `pending`; `None` when a thread is in a state a checkpoint cannot
    /// rebuild (a signal stop), when `cur` has an unblocked signal pending
    /// (it would stop the fork that `cur` is made to call), when memory is
    /// shared writable (a fork would not copy it) or wiped on fork, or
    /// when more than one
    /// process of the tree lives (a checkpoint is the fork of one
    /// process). Errors: /proc or ptrace.
    fn snapshot(&self, cur: usize, pending: Option<Option<Op>>) -> Result<Option<Snapshot>> {
        if self.state.procs.iter().filter(|p| p.live).count() > 1 {
            return Ok(None);
        }
        if self.pending_signals(cur)? & !weft_record::tracee::sigmask(self.state.threads[cur].tid)? != 0 {
            return Ok(None);
        }
        // The leader may have exited; the current thread is alive.
        let proc = &self.state.procs[self.state.threads[cur].proc];
        if proc.wipe_on_fork || checkpoint::has_shared_writable(self.state.threads[cur].tid) {
            return Ok(None);
        }
        let mut images = Vec::with_capacity(self.state.threads.len());
        for t in &self.state.threads {
            let entry = match t.at {
                At::Exited => {
                    images.push(None);
                    continue;
                }
                At::Ready | At::Parked => false,
                At::Entry(_) | At::Blocked(_) | At::Woken(_) => true,
                At::Deliver(_) | At::Fault(_) | At::Sync(_) => return Ok(None),
            };
            images.push(Some(ThreadImage::read(t.tid, t.regs, entry, t.altstack)?));
        }
        Ok(Some(Snapshot { state: self.state.clone(), images, cur, pending }))
    }

    /// Forks the process into a frozen [`Template`] and snapshots the
    /// replay as it stands (the loop's current thread and pending point),
    /// for the debugger's timeline. `None` where no checkpoint can be made
    /// (a thread at a signal stop, shared writable memory, no `syscall`
    /// instruction seen yet, the kernel refused the fork). Errors: ptrace.
    pub(crate) fn fork_here(&mut self) -> Result<Option<(Template, Snapshot)>> {
        self.fork_at(self.cur, self.pending)
    }

    fn fork_at(&mut self, cur: usize, pending: Option<Option<Op>>) -> Result<Option<(Template, Snapshot)>> {
        if !self.can_fork_from(cur) {
            return Ok(None);
        }
        let Some(insn) = self.state.syscall_insn.filter(|&a| self.mem(cur).read(a, 2).is_ok_and(|b| b == remote::SYSCALL_INSN)) else {
            return Ok(None);
        };
        // The fork is a syscall of weft's, made from a stop outside one.
        self.settle(cur)?;
        let Some(snapshot) = self.snapshot(cur, pending)? else { return Ok(None) };
        let t = &self.state.threads[cur];
        let Some(template) = Template::fork(t.tid, &t.regs, insn)? else { return Ok(None) };
        Ok(Some((template, snapshot)))
    }

    /// Whether thread `cur` can make the fork of a checkpoint: not from a
    /// syscall-entry stop (the point before a runtime marker), where the
    /// kernel would run the pending call with the fork's registers
    /// (remote.rs).
    fn can_fork_from(&self, cur: usize) -> bool {
        !matches!(self.state.threads[cur].at, At::Entry(_))
    }

    /// Exploration: takes a checkpoint at thread `i`'s synchronization
    /// point `op` when the schedule preempts at this operation (or a race
    /// reversal's protection starts there), or when the policy's
    /// interval has passed since the last one and the schedule has a
    /// preemption or reversal still to come. Past its last preemption a
    /// replay is an exploration attempt that will most likely be
    /// discarded; should it be admitted, the next attempts take
    /// checkpoints on their way.
    pub(super) fn checkpoint(&mut self, i: usize, op: Option<Op>) -> Result<()> {
        let Some(interval) = self.checkpoints.as_ref().map(|c| c.policy().interval) else { return Ok(()) };
        // A replay that traces accesses keeps no checkpoint from where it
        // starts: every page is protected in it, for it alone.
        let tracing = self.opts.trace_accesses.is_some_and(|t| self.state.sync_count + 1 >= t.from);
        if !self.can_fork_from(i) || tracing {
            return Ok(());
        }
        let (last, at) = self.since_checkpoint;
        let preempts = self.opts.schedule.decides_at(self.state.sync_count + 1);
        let to_come = self.opts.schedule.last_decision().is_none_or(|n| n > self.state.sync_count);
        if at == self.state.sync_count || !(preempts || (to_come && last.elapsed() >= interval)) {
            return Ok(());
        }
        self.since_checkpoint = (Instant::now(), self.state.sync_count);
        if !self.checkpoints.as_mut().is_some_and(|c| c.make_room()) {
            return Ok(());
        }
        // Resumed, the replay handles this point again, uncounted.
        let Some((template, snapshot)) = self.fork_at(i, Some(op))? else { return Ok(()) };
        tracing::debug!(sync = self.state.sync_count, event = self.state.pos, "checkpoint");
        if let Some(store) = self.checkpoints.as_mut() {
            store.add(template, snapshot, self.state.sync_count, &self.opts.schedule);
        }
        Ok(())
    }
}
