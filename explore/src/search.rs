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
//! A failure nothing gets past is remembered by its replay's fingerprint
//! (where every thread stopped): another preemption that leads to the same
//! state is no way forward either, so it is not admitted. Two preemptions
//! a few operations apart often lead to one state.
//!
//! Before the window's candidates, each failure tries what the failure
//! cache (§5, `cache.rs`) learnt from earlier failures that looked alike.
//!
//! When no single preemption gets past a failure, pairs are tried (m = 2,
//! §4.2's recursive version): a first preemption that reached the failure
//! in a new state is admitted tentatively, latest first, and a second is
//! sought in the operations just after it. pbzip2 needs this: one consumer
//! must take the last block (the first preemption) and the reader must
//! then mark the input done before that consumer compresses it (the
//! second), so that the other consumer exits where the log says.
//!
//! When no preemption, single or paired, in any widening of a failure's
//! window gets past it, the window's accesses are traced and its races
//! reversed (fine-grained exploration, §4.3, `fine.rs`); a reversal is
//! admitted like a preemption.
//!
//! Attempts run on one [`Replayer`] with checkpoints: an attempt resumes
//! from the latest checkpoint taken under the same preemptions before its
//! own first difference, usually just before the window. Replays are
//! deterministic, so it reaches the window in exactly the state the failed
//! replay had.

use crate::cache::{FailureCache, Key};
use crate::coarse;
use crate::fine;
use crate::window::{ThreadEvents, Window};
use anyhow::Result;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;
use weft_record::Trace;
use weft_replay::{AccessTracing, CheckpointPolicy, Outcome, Preemption, ReplayOptions, Replayer, Report, Reversal, Schedule, SyncRecord};

/// Synchronization records a failed replay keeps for its window.
const SYNC_TRACE_LEN: usize = 4096;
/// Windows (the first, widened once, ...) whose single preemptions are all
/// tried before pairs: further widenings come after the pairs so far.
const PAIRS_AFTER_WIDENING: usize = 2;
/// Operations after a tentative first preemption where a second is tried.
const SECOND_REACH: usize = 12;

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
    /// Checkpoints for attempts to resume from (`None`: every attempt
    /// starts the program again).
    pub checkpoints: Option<CheckpointPolicy>,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            replay: ReplayOptions::default(),
            max_attempts: 1000,
            attempt_timeout: Duration::from_secs(10),
            checkpoints: Some(CheckpointPolicy::default()),
        }
    }
}

/// One decision a search adds to a schedule: a coarse-grained preemption
/// (§4.2) or a race reversal (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Choice {
    Preempt(Preemption),
    Reverse(Reversal),
}

impl Choice {
    /// The synchronization count from which the choice changes the replay.
    fn sync(&self) -> u64 {
        match self {
            Choice::Preempt(p) => p.sync,
            Choice::Reverse(r) => r.from,
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Preempt(p) => write!(f, "preemption sync<{},{}>", p.sync, p.to),
            Choice::Reverse(r) => write!(f, "race reversal {r}"),
        }
    }
}

/// The schedule of `choices`.
fn schedule_of(choices: &[Choice]) -> Schedule {
    let preemptions = choices.iter().filter_map(|c| match c {
        Choice::Preempt(p) => Some(*p),
        Choice::Reverse(_) => None,
    });
    let reversals = choices.iter().filter_map(|c| match c {
        Choice::Reverse(r) => Some(*r),
        Choice::Preempt(_) => None,
    });
    Schedule::new(preemptions.collect()).with_reversals(reversals.collect())
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
    /// Failures passed by a preemption the failure cache suggested.
    pub cache_hits: usize,
    /// Replays that resumed from a checkpoint.
    pub resumed: usize,
}

/// Replays `trace` and, while the replay fails, explores (seed 000 §4.2)
/// for a schedule that gets further. Progress goes to stderr. Output the
/// program wrote is echoed once, by the first replay that gets to it
/// (from `opts.replay.echo_from` on: `usize::MAX` for a silent search).
/// Errors are weft's own (a replay could not run), not replay failures.
pub fn search(trace: &Trace, opts: &ExploreOptions) -> Result<Exploration> {
    let replayer = match opts.checkpoints {
        Some(policy) if opts.max_attempts > 1 => Replayer::with_checkpoints(trace, policy),
        _ => Replayer::new(trace),
    };
    let mut search = Search {
        trace,
        opts,
        replayer,
        resumed: 0,
        index: ThreadEvents::new(&trace.events),
        cache: FailureCache::default(),
        cache_hits: 0,
        dead: HashMap::new(),
        echo_from: opts.replay.echo_from,
        attempts: 0,
    };
    let schedule = &opts.replay.schedule;
    let preempts = schedule.preemptions().iter().copied().map(Choice::Preempt);
    let base: Vec<Choice> = preempts.chain(schedule.reversals().iter().copied().map(Choice::Reverse)).collect();
    let mut best = search.from_base(&base, None)?;
    // Every thread run on (a lesson the replays learned) moves many
    // threads' work earlier at once; a search from it can miss what one
    // from the log's own timing finds (a Rust pool: 2 of 10 recordings),
    // which gets the replays it left, half of them at least.
    if !matches!(best.report.outcome, Outcome::Valid { .. }) && search.attempts < opts.max_attempts && search.replayer.refuse_run_on_all() {
        eprintln!("weft: no schedule found with every thread run on; searching again with threads run as late as the log allows");
        search.cache = FailureCache::default();
        search.dead.clear();
        best = search.from_base(&base, Some(best))?;
    }
    Ok(Exploration {
        report: best.report,
        schedule: schedule_of(&best.schedule),
        attempts: search.attempts,
        cache_hits: search.cache_hits,
        resumed: search.resumed,
    })
}

/// The replay that got furthest, and its schedule.
struct Best {
    report: Report,
    schedule: Vec<Choice>,
}

/// A failure being explored: its inconsistent event, its replay's sync
/// trace, and the candidates not yet tried.
struct Failed {
    alpha_x: usize,
    /// [`Report::fingerprint`] of the replay that failed.
    fingerprint: u64,
    kind: &'static str,
    key: Option<Key>,
    sync_trace: Vec<SyncRecord>,
    /// The synchronization count of the last preemption already admitted.
    after: u64,
    widen: usize,
    queue: VecDeque<Choice>,
    exhausted: bool,
    /// Candidates already replayed.
    tried: HashSet<Choice>,
    /// How many candidates the failure cache put first in the queue.
    suggested: usize,
    /// This failure is explored for the second preemption of a pair: it
    /// neither widens its window nor starts pairs of its own.
    second: bool,
    /// Candidates that reached the failure in a new state: first
    /// preemptions of pairs, once no single preemption gets past.
    movers: Vec<Mover>,
    /// Fingerprints of the states the movers reached.
    seen: HashSet<u64>,
    /// Its window's races were queued (fine-grained exploration).
    traced: bool,
}

/// A preemption that did not get past a failure but reached it in another
/// state: the first of a pair (m = 2).
struct Mover {
    p: Preemption,
    fingerprint: u64,
    /// Its replay's synchronization records after `p`, at most
    /// [`SECOND_REACH`]: where the second preemption is tried.
    following: Vec<SyncRecord>,
}

impl Failed {
    /// A failure at `alpha_x` of the replay with `fingerprint`, to explore
    /// in its window from nothing tried yet.
    fn new(alpha_x: usize, fingerprint: u64, kind: &'static str, sync_trace: Vec<SyncRecord>, after: u64) -> Self {
        Self {
            alpha_x,
            fingerprint,
            kind,
            key: None,
            sync_trace,
            after,
            widen: 0,
            queue: VecDeque::new(),
            exhausted: false,
            tried: HashSet::new(),
            suggested: 0,
            second: false,
            movers: Vec::new(),
            seen: HashSet::new(),
            traced: false,
        }
    }

    /// The next preemption to try, widening the window when the current
    /// one is used up (seed 000 §4.3, last paragraph); `None` when there is
    /// nothing left, or when pairs are due (the first windows are used up
    /// and there are movers): widening resumes after them.
    fn next_candidate(&mut self, index: &ThreadEvents, trace: &Trace) -> Option<Choice> {
        loop {
            if self.queue.is_empty() && self.widen >= PAIRS_AFTER_WIDENING && !self.movers.is_empty() {
                return None;
            }
            self.refill(index, trace);
            let p = self.queue.pop_front()?;
            if self.tried.insert(p) {
                return Some(p);
            }
        }
    }

    /// Whether the window's races are due: every coarse candidate, single
    /// or paired, in every widening of the window is used up. Not for a
    /// pair's second preemption. (Seed 000 §4.3 explores both layers in
    /// one window before the preceding ones; tried in that order, races
    /// first in the unwidened window, the search needed more replays on
    /// real channel programs: 521 against 328 for the same four found,
    /// each reversal replay being slower too.)
    fn fine_due(&self) -> bool {
        !self.traced && !self.second
    }

    /// Keeps `p` as a first preemption of a pair if its replay, `report`,
    /// reached this failure in a state not seen before.
    fn note_mover(&mut self, p: Preemption, report: &Report, dead: &HashMap<u64, u64>) {
        let fresh = reached(&report.outcome) == self.alpha_x
            && !self.second
            && report.fingerprint != self.fingerprint
            && !dead.contains_key(&report.fingerprint)
            && self.seen.insert(report.fingerprint);
        if fresh {
            let following = report.sync_trace.iter().filter(|s| s.n > p.sync).take(SECOND_REACH).cloned().collect();
            self.movers.push(Mover { p, fingerprint: report.fingerprint, following });
        }
    }

    /// The failure to explore for the second preemption of a pair, with
    /// the latest mover admitted first; `None` when none is left.
    fn next_pair(&mut self, index: &ThreadEvents) -> Option<(Preemption, Failed)> {
        let latest = (0..self.movers.len()).max_by_key(|&k| self.movers[k].p.sync)?;
        let m = self.movers.swap_remove(latest);
        let failed = Failed {
            queue: coarse::after_first(index, &m.following).into_iter().map(Choice::Preempt).collect(),
            exhausted: true,
            second: true,
            ..Failed::new(self.alpha_x, m.fingerprint, self.kind, m.following, m.p.sync)
        };
        Some((m.p, failed))
    }

    /// Fills the empty queue from the window, widened as needed.
    fn refill(&mut self, index: &ThreadEvents, trace: &Trace) {
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
                    self.queue = tries.into_iter().map(Choice::Preempt).collect();
                }
                Some(_) => {}
            }
            self.widen += 1;
        }
    }
}

struct Search<'a> {
    trace: &'a Trace,
    opts: &'a ExploreOptions,
    index: ThreadEvents,
    cache: FailureCache,
    /// Failures passed by a preemption the cache suggested.
    cache_hits: usize,
    /// Failures nothing got past: fingerprint → the `after` they were
    /// explored with. A preemption that leads to one again, with no more
    /// of the schedule open to change, is no way forward.
    dead: HashMap<u64, u64>,
    /// Output events before this index were echoed by an earlier attempt.
    echo_from: usize,
    attempts: usize,
    /// Runs the attempts, keeping checkpoints between them.
    replayer: Replayer<'a>,
    /// Attempts that resumed from a checkpoint.
    resumed: usize,
}

impl Search<'_> {
    /// Replays under `base`, then searches from its failure; returns the
    /// replay that got furthest, or `before` when that got further.
    fn from_base(&mut self, base: &[Choice], before: Option<Best>) -> Result<Best> {
        let mut report = self.attempt(base, None)?;
        let root = self.failed(&mut report, base);
        let mut best = Best { report, schedule: base.to_vec() };
        if let Some(root) = root {
            self.depth_first(root, base, &mut best)?;
        }
        Ok(match before {
            Some(b) if reached(&b.report.outcome) > reached(&best.report.outcome) => b,
            _ => best,
        })
    }

    /// The depth-first search from failure `root`: admit the first
    /// preemption that gets past the failure on top, take it back when the
    /// failure it leads to cannot be passed. Stops at a valid replay, when
    /// nothing gets past the root, or at the replay budget; `best` is the
    /// replay that got furthest.
    fn depth_first(&mut self, root: Failed, base: &[Choice], best: &mut Best) -> Result<()> {
        let mut stack = vec![root];
        let mut admitted: Vec<Choice> = Vec::new();
        while let Some(top) = stack.last_mut() {
            let all_on = self.replayer.runs_all_on();
            if self.attempts >= if all_on { self.opts.max_attempts.div_ceil(2) } else { self.opts.max_attempts } {
                let why = if all_on { "half the limit, with every thread run on" } else { "the limit" };
                eprintln!("weft: exploration stopped after {} replays ({why})", self.attempts);
                break;
            }
            let Some(p) = top.next_candidate(&self.index, self.trace) else {
                if let Some((first, pair)) = top.next_pair(&self.index) {
                    eprintln!(
                        "weft: no single preemption gets past event {}; trying pairs after sync<{},{}> (m = 2)",
                        top.alpha_x, first.sync, first.to
                    );
                    admitted.push(Choice::Preempt(first));
                    stack.push(pair);
                    continue;
                }
                if top.fine_due() {
                    top.traced = true;
                    let schedule: Vec<Choice> = base.iter().chain(&admitted).copied().collect();
                    let reversals = self.races(top, &schedule)?;
                    top.queue = reversals.into_iter().map(Choice::Reverse).collect();
                    continue;
                }
                let (stuck, fingerprint, after) = (top.alpha_x, top.fingerprint, top.after);
                stack.pop();
                let Some(p) = admitted.pop() else { break };
                let known = self.dead.entry(fingerprint).or_insert(after);
                *known = (*known).min(after);
                eprintln!("weft: nothing gets past event {stuck}; taking back the {p}");
                continue;
            };
            let alpha_x = top.alpha_x;
            let schedule: Vec<Choice> = base.iter().chain(&admitted).copied().chain([p]).collect();
            let mut attempt = match self.attempt(&schedule, None) {
                Ok(report) => report,
                // Page protection can meet what it cannot step over.
                Err(e) if schedule.iter().any(|c| matches!(c, Choice::Reverse(_))) => {
                    tracing::debug!(%p, "race reversal failed: {e:#}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            if reached(&attempt.outcome) <= alpha_x {
                if let Choice::Preempt(p) = p {
                    top.note_mover(p, &attempt, &self.dead);
                }
                continue;
            }
            let after = last_sync(&schedule);
            if self.dead.get(&attempt.fingerprint).is_some_and(|&dead_after| after >= dead_after) {
                tracing::debug!(?p, "gets past event {alpha_x} into a state already searched");
                continue;
            }
            let top = stack.last().expect("the failure just explored");
            let cached = top.tried.len() <= top.suggested;
            let from = if cached { " (from the failure cache)" } else { "" };
            eprintln!("weft: {p} gets past event {alpha_x}{from}");
            self.cache_hits += usize::from(cached);
            if let (Some(key), Choice::Preempt(p)) = (top.key, p) {
                self.cache.learn(key, p, &top.sync_trace);
            }
            admitted.push(p);
            let next = self.failed(&mut attempt, &schedule);
            if reached(&attempt.outcome) > reached(&best.report.outcome) {
                *best = Best { report: attempt, schedule };
            }
            match next {
                Some(f) => stack.push(f),
                None => break,
            }
        }
        Ok(())
    }

    /// The failure `report` describes, to explore under `schedule`, with
    /// the failure cache's suggestions queued first; its sync trace moves
    /// here. `None` when the replay was valid or failed in a way no
    /// schedule can fix.
    fn failed(&self, report: &mut Report, schedule: &[Choice]) -> Option<Failed> {
        let Outcome::Invalid(failure) = &report.outcome else { return None };
        let alpha_x = failure.event()?;
        let key = Key::of(failure, &self.trace.events);
        let sync_trace = std::mem::take(&mut report.sync_trace);
        let after = last_sync(schedule);
        let queue: VecDeque<Choice> = match &key {
            Some(k) => self.cache.suggest(k, &self.index, &sync_trace, after).into_iter().map(Choice::Preempt).collect(),
            None => VecDeque::new(),
        };
        if !queue.is_empty() {
            eprintln!(
                "weft: replay failed at event {alpha_x} ({}); trying {} preemptions from the failure cache (seed 000 §5)",
                failure.kind(),
                queue.len()
            );
        }
        Some(Failed {
            key,
            suggested: queue.len(),
            queue,
            ..Failed::new(alpha_x, report.fingerprint, failure.kind(), sync_trace, after)
        })
    }

    /// The race reversals to try for failure `top`, which nothing coarse
    /// got past under `schedule`: a replay under it traces the window's
    /// accesses (seed 000 §4.3, §6), and its races are reversed nearest
    /// the failure first.
    fn races(&mut self, top: &Failed, schedule: &[Choice]) -> Result<Vec<Reversal>> {
        let window = Window::of(&self.trace.events, &self.index, top.alpha_x, 0);
        let from = fine::trace_from(&window, &top.sync_trace, top.after);
        let tracing = AccessTracing { from, budget: fine::TRACE_BUDGET };
        // Page protection can meet what it cannot step over (a program's
        // own protection changes): no races then, not the search's end.
        let traced = match self.attempt(schedule, Some(tracing)) {
            Ok(report) => report,
            Err(e) => {
                eprintln!("weft: warning: tracing the accesses of event {}'s window failed: {e:#}", top.alpha_x);
                return Ok(Vec::new());
            }
        };
        let reversals = fine::reversals(&traced.accesses, from);
        eprintln!(
            "weft: replay failed at event {} ({}); traced {} accesses from synchronization {from}, exploring {} race reversals (seed 000 §4.3)",
            top.alpha_x,
            top.kind,
            traced.accesses.len(),
            reversals.len()
        );
        Ok(reversals)
    }

    /// One replay under `choices`, tracing accesses as `tracing` says.
    fn attempt(&mut self, choices: &[Choice], tracing: Option<AccessTracing>) -> Result<Report> {
        let base = &self.opts.replay;
        let livelock_timeout = match self.attempts {
            0 => base.livelock_timeout,
            _ => base.livelock_timeout.min(self.opts.attempt_timeout),
        };
        let opts = ReplayOptions {
            schedule: schedule_of(choices),
            livelock_timeout,
            echo_from: self.echo_from,
            sync_trace_len: SYNC_TRACE_LEN,
            trace_accesses: tracing,
            ..base.clone()
        };
        self.attempts += 1;
        let report = self.replayer.replay(&opts)?;
        self.resumed += usize::from(report.resumed_at.is_some());
        tracing::debug!(attempt = self.attempts, ?choices, resumed_at = report.resumed_at, reached = reached(&report.outcome), outcome = ?report.outcome, "replayed");
        self.echo_from = self.echo_from.max(report.echoed_before);
        Ok(report)
    }
}

/// The synchronization count of a schedule's last preemption (0: none):
/// the schedule is final up to it.
fn last_sync(schedule: &[Choice]) -> u64 {
    schedule.iter().map(Choice::sync).max().unwrap_or(0)
}

/// How far a replay got: the index of the first event it could not match
/// (everything before it was matched, and its output echoed).
fn reached(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::Valid { .. } => usize::MAX,
        Outcome::Invalid(f) => f.event().unwrap_or(usize::MAX),
    }
}
