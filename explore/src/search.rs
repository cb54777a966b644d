//! The incremental, demand-driven search (seed 000 §4): replay; when the
//! replay fails, explore sub-schedules in the window of the inconsistent
//! event; admit the first preemption that gets the replay past it; go on
//! from the new failure until the replay is valid or nothing helps.
//!
//! weft has no checkpoints yet, so every attempt replays from the start.
//! Replays are deterministic, so an attempt reaches the window in exactly
//! the state the failed replay had.

use crate::coarse;
use crate::window::ThreadEvents;
use anyhow::Result;
use std::time::Duration;
use weft_record::Trace;
use weft_replay::{replay, Outcome, Preemption, ReplayOptions, Report, Schedule};

/// Synchronization records a failed replay keeps for its window: the
/// search tries preemptions backward from the failure, and an attempt
/// budget stops it long before it could use more.
const SYNC_TRACE_LEN: usize = 4096;

/// How to search.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// The first replay's options; its schedule is where the search
    /// starts (preemptions in it are kept).
    pub replay: ReplayOptions,
    /// At most this many replays in all, the first included.
    pub max_attempts: usize,
    /// The livelock timeout of the attempts after the first: a preemption
    /// can make a thread spin for a thread that one core never runs.
    pub attempt_timeout: Duration,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self { replay: ReplayOptions::default(), max_attempts: 500, attempt_timeout: Duration::from_secs(10) }
    }
}

/// The result of a search.
#[derive(Debug)]
pub struct Exploration {
    /// The last replay: valid, or the failure no single preemption in its
    /// window could get past.
    pub report: Report,
    /// The schedule of that replay: the starting one plus the admitted
    /// preemptions.
    pub schedule: Schedule,
    /// Replays run, the first included.
    pub attempts: usize,
}

/// Replays `trace` and, while the replay fails, explores (seed 000 §4.2)
/// for a schedule that gets further. Progress goes to stderr. Output the
/// program wrote is echoed once, by the first replay that gets to it.
/// Errors are weft's own (a replay could not run), not replay failures.
pub fn search(trace: &Trace, opts: &ExploreOptions) -> Result<Exploration> {
    let index = ThreadEvents::new(&trace.events);
    let mut search = Search { trace, opts, schedule: opts.replay.schedule.clone(), echo_from: 0, attempts: 0 };
    let mut report = search.attempt(search.schedule.clone())?;
    while let Outcome::Invalid(failure) = &report.outcome {
        let Some(alpha_x) = failure.event() else { break };
        if search.attempts >= opts.max_attempts {
            break;
        }
        match search.explore(&index, alpha_x, failure.kind(), &report)? {
            Some((p, next)) => {
                search.schedule = search.schedule.with(p);
                eprintln!("weft: preemption sync<{},{}> gets past event {alpha_x}", p.sync, p.to);
                report = next;
            }
            None => break,
        }
    }
    Ok(Exploration { report, schedule: search.schedule, attempts: search.attempts })
}

struct Search<'a> {
    trace: &'a Trace,
    opts: &'a ExploreOptions,
    schedule: Schedule,
    /// Output events before this index were echoed by an earlier attempt.
    echo_from: usize,
    attempts: usize,
}

impl Search<'_> {
    /// Explores the window of the failure at `alpha_x`, widening it while
    /// it holds no solution: the first preemption that gets past it.
    fn explore(
        &mut self,
        index: &ThreadEvents,
        alpha_x: usize,
        kind: &str,
        failed: &Report,
    ) -> Result<Option<(Preemption, Report)>> {
        let after = self.schedule.preemptions().last().map_or(0, |p| p.sync);
        let events = &self.trace.events;
        for widen in 0.. {
            let Some(tries) = coarse::candidates(events, index, alpha_x, widen, &failed.sync_trace, after) else {
                break;
            };
            if tries.is_empty() {
                continue;
            }
            let which = if widen == 0 { "its window".to_string() } else { format!("the window widened {widen}x") };
            eprintln!(
                "weft: replay failed at event {alpha_x} ({kind}); exploring {} preemptions in {which} (seed 000 §4.2)",
                tries.len()
            );
            if let Some(found) = self.first_past(alpha_x, tries)? {
                return Ok(Some(found));
            }
            if self.attempts >= self.opts.max_attempts {
                eprintln!("weft: exploration stopped after {} replays (the limit)", self.attempts);
                break;
            }
        }
        Ok(None)
    }

    /// Algorithm 1, lines 5-10: the first preemption whose replay gets
    /// past `alpha_x`, with that replay's report.
    fn first_past(&mut self, alpha_x: usize, tries: Vec<Preemption>) -> Result<Option<(Preemption, Report)>> {
        for (k, p) in tries.into_iter().enumerate() {
            if self.attempts >= self.opts.max_attempts {
                return Ok(None);
            }
            let report = self.attempt(self.schedule.with(p))?;
            tracing::debug!(try_index = k, sync = p.sync, to = p.to, reached = reached(&report.outcome), "attempt");
            if reached(&report.outcome) > alpha_x {
                return Ok(Some((p, report)));
            }
        }
        Ok(None)
    }

    /// One replay under `schedule`.
    fn attempt(&mut self, schedule: Schedule) -> Result<Report> {
        let base = &self.opts.replay;
        let livelock_timeout = match self.attempts {
            0 => base.livelock_timeout,
            _ => base.livelock_timeout.min(self.opts.attempt_timeout),
        };
        let opts = ReplayOptions {
            schedule,
            livelock_timeout,
            echo_from: self.echo_from,
            sync_trace_len: SYNC_TRACE_LEN,
            ..base.clone()
        };
        self.attempts += 1;
        let report = replay(self.trace, &opts)?;
        self.echo_from = self.echo_from.max(reached(&report.outcome));
        Ok(report)
    }
}

/// How far a replay got: the index of the first event it could not match
/// (everything before it was matched, and its output echoed).
fn reached(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::Valid { .. } => usize::MAX,
        Outcome::Invalid(f) => f.event().unwrap_or(usize::MAX),
    }
}
