//! The incremental, demand-driven search (seed 000 §4): replay; when the
//! replay fails, explore sub-schedules in the window of the inconsistent
//! event; admit the first preemption that gets the replay past it; go on
//! from the new failure until the replay is valid.
//!
//! An admitted preemption is tentative, as in the paper's recursive
//! version of Algorithm 1: when no preemption gets past a later failure,
//! the search takes the last admitted one back and tries the next
//! candidate for the failure it had passed (depth-first, within a budget
//! of replays).
//!
//! weft has no checkpoints yet, so every attempt replays from the start.
//! Replays are deterministic, so an attempt reaches the window in exactly
//! the state the failed replay had.

use crate::coarse;
use crate::window::ThreadEvents;
use anyhow::Result;
use std::collections::VecDeque;
use std::time::Duration;
use weft_record::Trace;
use weft_replay::{replay, Outcome, Preemption, ReplayOptions, Report, Schedule};

/// Synchronization records a failed replay keeps for its window.
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
    /// A valid replay, or else the replay that got furthest (its sync trace
    /// went to the search).
    pub report: Report,
    /// The schedule of that replay.
    pub schedule: Schedule,
    /// Replays run, the first included.
    pub attempts: usize,
}

/// Replays `trace` and, while the replay fails, explores (seed 000 §4.2)
/// for a schedule that gets further. Progress goes to stderr. Output the
/// program wrote is echoed once, by the first replay that gets to it.
/// Errors are weft's own (a replay could not run), not replay failures.
pub fn search(trace: &Trace, opts: &ExploreOptions) -> Result<Exploration> {
    let mut search = Search { trace, opts, index: ThreadEvents::new(&trace.events), echo_from: 0, attempts: 0 };
    let base = opts.replay.schedule.preemptions().to_vec();
    let mut best = search.attempt(&base)?;
    let mut best_schedule = base.clone();
    let mut stack: Vec<Failed> = Vec::new();
    let mut admitted: Vec<Preemption> = Vec::new();
    stack.extend(Failed::of(&mut best, &base));
    while let Some(top) = stack.last_mut() {
        if search.attempts >= opts.max_attempts {
            eprintln!("weft: exploration stopped after {} replays (the limit)", search.attempts);
            break;
        }
        let Some(p) = top.next_candidate(&search.index, trace) else {
            let stuck = top.alpha_x;
            stack.pop();
            if let Some(p) = admitted.pop() {
                eprintln!("weft: nothing gets past event {stuck}; taking back sync<{},{}>", p.sync, p.to);
            }
            continue;
        };
        let alpha_x = top.alpha_x;
        let schedule: Vec<Preemption> = base.iter().chain(&admitted).copied().chain([p]).collect();
        let mut attempt = search.attempt(&schedule)?;
        if reached(&attempt.outcome) <= alpha_x {
            continue;
        }
        eprintln!("weft: preemption sync<{},{}> gets past event {alpha_x}", p.sync, p.to);
        admitted.push(p);
        let next = Failed::of(&mut attempt, &schedule);
        if reached(&attempt.outcome) > reached(&best.outcome) {
            (best, best_schedule) = (attempt, schedule);
        }
        match next {
            Some(f) => stack.push(f),
            None => break,
        }
    }
    Ok(Exploration { report: best, schedule: Schedule::new(best_schedule), attempts: search.attempts })
}

/// A failure being explored: its inconsistent event, its replay's sync
/// trace, and the candidates not yet tried.
struct Failed {
    alpha_x: usize,
    kind: &'static str,
    sync_trace: Vec<weft_replay::SyncRecord>,
    /// The synchronization count of the last preemption already admitted.
    after: u64,
    widen: usize,
    queue: VecDeque<Preemption>,
    exhausted: bool,
}

impl Failed {
    /// The failure `report` describes, to explore under `schedule`; its
    /// sync trace moves here. `None` when the replay was valid or failed in
    /// a way no schedule can fix.
    fn of(report: &mut Report, schedule: &[Preemption]) -> Option<Self> {
        let Outcome::Invalid(failure) = &report.outcome else { return None };
        Some(Failed {
            alpha_x: failure.event()?,
            kind: failure.kind(),
            sync_trace: std::mem::take(&mut report.sync_trace),
            after: schedule.iter().map(|p| p.sync).max().unwrap_or(0),
            widen: 0,
            queue: VecDeque::new(),
            exhausted: false,
        })
    }

    /// The next preemption to try, widening the window when the current
    /// one is used up (seed 000 §4.3, last paragraph); `None` when there is
    /// nothing left.
    fn next_candidate(&mut self, index: &ThreadEvents, trace: &Trace) -> Option<Preemption> {
        while self.queue.is_empty() && !self.exhausted {
            let found = coarse::candidates(&trace.events, index, self.alpha_x, self.widen, &self.sync_trace, self.after);
            match found {
                None => self.exhausted = true,
                Some(tries) if !tries.is_empty() => {
                    let which = match self.widen {
                        0 => "its window".to_string(),
                        w => format!("the window widened {w}x"),
                    };
                    eprintln!(
                        "weft: replay failed at event {} ({}); exploring {} preemptions in {which} (seed 000 §4.2)",
                        self.alpha_x,
                        self.kind,
                        tries.len()
                    );
                    self.queue = tries.into();
                }
                Some(_) => {}
            }
            self.widen += 1;
        }
        self.queue.pop_front()
    }
}

struct Search<'a> {
    trace: &'a Trace,
    opts: &'a ExploreOptions,
    index: ThreadEvents,
    /// Output events before this index were echoed by an earlier attempt.
    echo_from: usize,
    attempts: usize,
}

impl Search<'_> {
    /// One replay under `preemptions`.
    fn attempt(&mut self, preemptions: &[Preemption]) -> Result<Report> {
        let base = &self.opts.replay;
        let livelock_timeout = match self.attempts {
            0 => base.livelock_timeout,
            _ => base.livelock_timeout.min(self.opts.attempt_timeout),
        };
        let opts = ReplayOptions {
            schedule: Schedule::new(preemptions.to_vec()),
            livelock_timeout,
            echo_from: self.echo_from,
            sync_trace_len: SYNC_TRACE_LEN,
            ..base.clone()
        };
        self.attempts += 1;
        let report = replay(self.trace, &opts)?;
        tracing::debug!(attempt = self.attempts, ?preemptions, reached = reached(&report.outcome), "replayed");
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
