//! The [`Replayer`]: replays one trace again and again, as exploration
//! does, and resumes each replay from the best checkpoint it holds
//! (`checkpoint.rs`) instead of starting the program over.

use crate::checkpoint::{Checkpoints, Policy};
use crate::log_index::LogIndex;
use crate::session::{ReplayOptions, Report, Session, Snapshot};
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
}

impl<'a> Replayer<'a> {
    /// A replayer that takes no checkpoints.
    pub fn new(trace: &'a Trace) -> Self {
        Self { trace, log: Arc::new(LogIndex::new(trace)), checkpoints: None }
    }

    /// A replayer that takes checkpoints as `policy` says.
    pub fn with_checkpoints(trace: &'a Trace, policy: Policy) -> Self {
        Self { checkpoints: Some(Checkpoints::new(policy)), ..Self::new(trace) }
    }

    /// How many checkpoints it holds.
    pub fn checkpoints(&self) -> usize {
        self.checkpoints.as_ref().map_or(0, Checkpoints::len)
    }

    /// Replays the trace under `opts`, from the latest checkpoint whose
    /// schedule decisions `opts.schedule` shares, else from the start.
    /// Errors as [`replay`].
    pub fn replay(&mut self, opts: &ReplayOptions) -> Result<Report> {
        let resumed = self.checkpoints.as_mut().and_then(|store| resume(store, opts));
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

