//! The [`Replayer`]: replays one trace again and again, as exploration
//! does, and resumes each replay from the best checkpoint it holds
//! (`checkpoint.rs`) instead of starting the program over.

use crate::checkpoint::{Checkpoints, Policy};
use crate::log_index::LogIndex;
use crate::lessons::{Lessons, Restarts};
use crate::session::{Outcome, ReplayOptions, Report, Session, Snapshot};
use anyhow::Result;
use nix::unistd::Pid;
use std::sync::Arc;
use weft_record::Trace;

/// Replays `trace` on one core and validates it against the log, starting
/// the program from scratch. Errors are weft's own problems (the program
/// cannot be started, ptrace fails); an invalid replay is an
/// [`Outcome::Invalid`](crate::Outcome::Invalid).
pub fn replay(trace: &Trace, opts: &ReplayOptions) -> Result<Report> {
    Replayer::new(trace).replay(opts)
}

/// Replays one trace, again and again (exploration), optionally keeping
/// checkpoints so that a replay whose schedule shares a prefix with an
/// earlier one resumes where that prefix ends instead of starting over.
/// Resuming is exact: a replay gives the same [`Report`], digest included,
/// whether it resumed or not.
pub struct Replayer<'a> {
    trace: &'a Trace,
    log: Arc<LogIndex>,
    checkpoints: Option<Checkpoints<Snapshot>>,
    /// What its replays learned, handed to every later one.
    lessons: Lessons,
}

impl<'a> Replayer<'a> {
    /// A replayer that takes no checkpoints.
    pub fn new(trace: &'a Trace) -> Self {
        Self { trace, log: Arc::new(LogIndex::new(trace)), checkpoints: None, lessons: Lessons::default() }
    }

    /// A replayer that takes checkpoints as `policy` says.
    pub fn with_checkpoints(trace: &'a Trace, policy: Policy) -> Self {
        Self { checkpoints: Some(Checkpoints::new(policy)), ..Self::new(trace) }
    }

    /// Whether its replays act on [`Lessons::run_on_all`]: a search from
    /// it gets half the replays, the one after [`Self::refuse_run_on_all`]
    /// the rest.
    pub fn runs_all_on(&self) -> bool {
        self.lessons.run_on_all.learned()
    }

    /// Drops [`Lessons::run_on_all`] from what its replays act on, for good
    /// ([`RunOnAll::Refused`](crate::RunOnAll::Refused)), with the
    /// checkpoints taken under it; false when its replays did not act on it.
    pub fn refuse_run_on_all(&mut self) -> bool {
        if !self.lessons.run_on_all.learned() {
            return false;
        }
        self.lessons.run_on_all = crate::RunOnAll::Refused;
        self.checkpoints.as_mut().map(Checkpoints::clear);
        true
    }

    /// How many checkpoints it holds.
    pub fn checkpoints(&self) -> usize {
        self.checkpoints.as_ref().map_or(0, Checkpoints::len)
    }

    /// Replays the trace under `opts`, from the latest checkpoint whose
    /// schedule decisions `opts.schedule` shares, else from the start,
    /// with the [`Lessons`] its earlier replays learned and those `opts`
    /// brings (kept from earlier runs of weft). A replay that fails after
    /// it learned new ones (a thread spun on a lock that the thread
    /// holding it had released and taken again before the spin was seen;
    /// a thread run ahead of a logged wake made it; a waker found nobody
    /// waiting; a thread diverged while others waited at their last
    /// events) starts over from the program's start with them, at most
    /// 4 times ([`Restarts`]; run-on lessons that got the replay no
    /// further are dropped); output already echoed is not echoed again.
    /// New lessons drop the checkpoints, which were taken without them.
    /// Errors as [`replay`].
    pub fn replay(&mut self, opts: &ReplayOptions) -> Result<Report> {
        self.lessons.absorb(&opts.lessons);
        let mut opts = ReplayOptions { lessons: self.lessons.clone(), ..opts.clone() };
        let mut restarts = Restarts::default();
        loop {
            let mut report = self.replay_once(&opts, restarts.started_over())?;
            let Outcome::Invalid(failure) = &report.outcome else { return Ok(report) };
            let failed_at = failure.event().unwrap_or(0);
            let again = restarts.again(&mut opts.lessons, &mut report.lessons, failed_at, true);
            if report.lessons != self.lessons {
                self.checkpoints.as_mut().map(Checkpoints::clear);
                self.lessons = report.lessons.clone();
            }
            if !again {
                return Ok(report);
            }
            opts.echo_from = opts.echo_from.max(failed_at);
            opts.lessons = report.lessons;
        }
    }

    /// One replay under `opts`: from the program's start when `fresh`,
    /// else from the best checkpoint for it.
    fn replay_once(&mut self, opts: &ReplayOptions, fresh: bool) -> Result<Report> {
        let resumed = self.checkpoints.as_mut().filter(|_| !fresh).and_then(|store| resume(store, opts));
        let store = self.checkpoints.as_mut();
        match resumed {
            Some((snapshot, tids)) => Session::resumed(self.trace, opts, self.log.clone(), store, snapshot, tids)?.replay(),
            None => Session::launch(self.trace, opts, self.log.clone(), store)?.replay(),
        }
    }
}

/// A new process from the best checkpoint for `opts`, and the snapshot to
/// go on with; `None` when there is none (a checkpoint that cannot be
/// resumed is dropped, with a warning).
fn resume(store: &mut Checkpoints<Snapshot>, opts: &ReplayOptions) -> Option<(Snapshot, Vec<Option<Pid>>)> {
    loop {
        let k = store.best(&opts.schedule, |s| s.fits(opts))?;
        let checkpoint = store.get(k);
        match checkpoint.state.spawn(&checkpoint.template) {
            Ok(tids) => {
                tracing::debug!(sync = checkpoint.sync_count, "resumed from a checkpoint");
                return Some((checkpoint.state.clone(), tids));
            }
            Err(e) => {
                eprintln!("weft: warning: cannot resume a checkpoint ({e:#}); dropping it");
                store.remove(k);
            }
        }
    }
}

