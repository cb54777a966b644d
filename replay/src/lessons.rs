//! What replays of a trace learn that its log does not say, handed from
//! each replay to the next. A replay starts with what earlier replays of
//! the trace learned ([`crate::ReplayOptions::lessons`]) and reports what
//! it knows at its end ([`crate::Report::lessons`]); one that ran from the
//! program's start and failed after it learned something starts over with
//! it ([`crate::Replayer::replay`], [`crate::ReplaySession`]). Log indices
//! and addresses are the same in every replay of a trace (ASLR is off,
//! the log holds the mappings). `weft replay` keeps them in the trace
//! directory (docs/trace-format.md, `lessons`), so that later replays and
//! debugging sessions start with them.

use crate::session::SpinWords;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The lessons of a trace's replays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Lessons {
    /// Where threads spin on memory that another thread releases without
    /// a logged call (spin.rs).
    pub spin_words: SpinWords,
    /// Log indices of futex wakes that the thread the log gives them to
    /// must reach before any other thread of its process finishes ahead of
    /// it: a thread run to its return before such a wake (as the last of
    /// a scope's threads wakes the waiter, the others finished first)
    /// woke the waiter itself, in the logged waker's place (a producer's
    /// send that found the consumer parked). Scheduler, `finisher_before`.
    pub wakers_first: BTreeSet<usize>,
    /// Futex words (the log's addresses) whose wakes come once the other
    /// threads of the waker's process have run on from their last events
    /// (into their waits): a replay's waker found nobody waiting and made
    /// no wake where the log has one, or a thread started its wait after
    /// the word had changed. A program may count its waiters and
    /// skip the futex call when it counts none (libstdc++'s
    /// `atomic::notify_all`, whose waiters count themselves as they start
    /// to spin); on several cores the waiters were spinning while the
    /// waker ran, on one they are still at their last events. Scheduler,
    /// `settler_before`.
    pub waiters_first: BTreeSet<u64>,
    /// Log indices of events after which their thread runs on to its next
    /// scheduling point before another thread runs, instead of waiting
    /// there until its next event is due (after a spawn, the new thread
    /// runs first). What a thread does between two events is unordered by
    /// the log, and a replay does it as late as the log allows; a replay
    /// that then diverged where another thread read data without the lock
    /// that orders it (sort's merge tree reads how far its children
    /// merged) starts over with the thread that waited there longest run
    /// on, as the recording ran it: seed 003 §3.5.2's re-execution in the
    /// recorded order, with the diverging point's threads timed otherwise.
    /// Scheduler, `learn_run_on`.
    pub run_on_after: BTreeSet<usize>,
    /// Whether every thread runs on after each of its events
    /// ([`RunOnAll`]). Named apart from the two booleans that held it
    /// before, which a lessons file of an earlier weft may have: ignored.
    #[serde(rename = "run_on_all_threads")]
    pub run_on_all: RunOnAll,
}

/// Whether every thread runs on after each of its events, to its next
/// scheduling point, as on cores of its own: learned when a run-on lesson
/// for one event ([`Lessons::run_on_after`]) got a replay no further.
/// Threads that take work from a shared atomic counter between their
/// events (a pool's `fetch_add` on the next item's index) took it on the
/// recording's cores as soon as they finished their last item; run as
/// late as the log allows, each takes the item another thread took
/// first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOnAll {
    /// Not learned: threads run on only after the events of
    /// [`Lessons::run_on_after`].
    #[default]
    Unlearned,
    /// Learned: kept only while it gets the replay further
    /// (`RunOnTrial`); the search then starts from it.
    Learned,
    /// It got a replay no further, or a search that acted on it found no
    /// schedule ([`crate::Replayer::refuse_run_on_all`]): it is not
    /// learned again.
    Refused,
}

impl RunOnAll {
    /// Whether replays act on it.
    pub fn learned(self) -> bool {
        self == Self::Learned
    }

    /// Learns it, unless it was refused.
    fn learn(&mut self) {
        if *self == Self::Unlearned {
            *self = Self::Learned;
        }
    }
}

/// What weft says as a replay starts over because it learned spin words.
const SPIN_NOTE: &str =
    "weft: a thread spins on memory another thread releases without a logged call; replaying from the start, handing the core over at each release";

/// What weft says as a replay starts over because a finisher took a wake.
const WAKE_NOTE: &str =
    "weft: a thread run to its end ahead of a logged wake woke the waiter in the logged waker's place; replaying from the start, with that waker first";

/// What weft says as a replay starts over because it diverged after a
/// read that other threads' unlogged work may decide.
const RUN_ON_NOTE: &str =
    "weft: a thread diverged from the log while other threads waited at their last events; replaying from the start in the same order, with the one that waited longest run on past its event, as on several cores";

/// What weft says as a replay starts over to run every thread on.
const RUN_ON_ALL_NOTE: &str =
    "weft: threads keep diverging from the log where others waited at their last events; replaying from the start in the same order, with every thread run on past each of its events to its next point, as on several cores";

/// What weft says as a replay starts over because a waker found no waiter.
const WAITERS_NOTE: &str =
    "weft: a thread found nobody waiting where the log has its wake; replaying from the start, with the other threads settled into their waits before each wake of that word";

impl Lessons {
    /// The lessons kept in file `path` (JSON); none when there is no such
    /// file. A field the file lacks is empty, one it has that weft does not
    /// know is ignored. Errors: the file cannot be read, or is not lessons
    /// (damaged: not JSON of this shape, or a spin word that is not 1, 2,
    /// 4 or 8 aligned bytes).
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let damaged = || format!("{}: not a weft lessons file", path.display());
        let lessons: Self = serde_json::from_slice(&bytes).with_context(damaged)?;
        anyhow::ensure!(lessons.spin_words.sound(), "{}: a spin word is not 1, 2, 4 or 8 aligned bytes", damaged());
        Ok(lessons)
    }

    /// Writes these to `path` (JSON), replacing it whole: written to a
    /// temporary file beside it, private to the user as the trace's files
    /// are (0600), then renamed. Errors: the write failed.
    pub fn save(&self, path: &Path) -> Result<()> {
        // Its own name: two weft processes may save the same trace's.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let json = serde_json::to_vec_pretty(self)?;
        let written = weft_record::store::write_private_file(&tmp, &json).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.with_context(|| format!("cannot write {}", path.display()))
    }

    /// Adds what `other` knows and these do not: its spin words for
    /// processes these have none for, and its wakes.
    pub fn absorb(&mut self, other: &Lessons) {
        self.spin_words.absorb(&other.spin_words);
        self.wakers_first.extend(&other.wakers_first);
        self.waiters_first.extend(&other.waiters_first);
        self.run_on_after.extend(&other.run_on_after);
        // Refused outranks learned, learned unlearned.
        self.run_on_all = self.run_on_all.max(other.run_on_all);
    }

    /// Whether the thread of the event at log index `k` runs on past it
    /// ([`Self::run_on_after`], [`Self::run_on_all`]).
    pub(crate) fn runs_on_after(&self, k: usize) -> bool {
        self.run_on_all.learned() || self.run_on_after.contains(&k)
    }

    /// What to say as a replay that started with `before` starts over
    /// with these: the first kind of lesson it added.
    pub(crate) fn restart_note(&self, before: &Lessons) -> &'static str {
        if self.spin_words != before.spin_words {
            SPIN_NOTE
        } else if self.wakers_first != before.wakers_first {
            WAKE_NOTE
        } else if self.waiters_first != before.waiters_first {
            WAITERS_NOTE
        } else if self.run_on_all.learned() && !before.run_on_all.learned() {
            RUN_ON_ALL_NOTE
        } else {
            RUN_ON_NOTE
        }
    }
}

/// Times a replay starts over at most because it learned something: one
/// per spin loop, misjudged wake or race the program reaches.
pub(crate) const MAX_RESTARTS: usize = 4;

/// The starts over of one replay with what it learned
/// ([`crate::Replayer::replay`], `ReplaySession::relearned`): at most
/// [`MAX_RESTARTS`], each said on stderr, the latest one's run-on lessons
/// on trial ([`RunOnTrial`]).
#[derive(Debug, Default)]
pub(crate) struct Restarts {
    count: usize,
    trial: Option<RunOnTrial>,
}

impl Restarts {
    /// Whether the replay has started over.
    pub(crate) fn started_over(&self) -> bool {
        self.count > 0
    }

    /// A replay that acted on `acting` diverged at log index `failed_at`,
    /// knowing `known`. Both lose the latest restart's run-on lessons when
    /// that got it no further. Then, when `known` adds to `acting`, starts
    /// are left and the caller `allows` it: says so on stderr, puts the
    /// new run-on lessons on trial, and returns true (the replay starts
    /// over with `known`).
    pub(crate) fn again(&mut self, acting: &mut Lessons, known: &mut Lessons, failed_at: usize, allowed: bool) -> bool {
        if let Some(t) = self.trial.take() {
            // One thread run on got it no further: every thread, once
            // (a trial of every thread run on was refused by the judging).
            if t.judge(failed_at, &mut [&mut *known, &mut *acting]) {
                known.run_on_all.learn();
            }
        }
        if known == acting || self.count >= MAX_RESTARTS || !allowed {
            return false;
        }
        self.count += 1;
        eprintln!("{}", known.restart_note(acting));
        self.trial = RunOnTrial::of(acting, known, failed_at);
        true
    }
}

/// A restart that added run-on lessons ([`Lessons::run_on_after`]): where
/// the replay before it diverged, and the run-on lessons it had. When the
/// replay after it diverges no further, running those threads on did not
/// help: the divergence is no race on their unlogged code, and the new
/// run-on lessons are dropped, so that they neither start more
/// re-executions nor reach a search or the trace's lessons file.
#[derive(Debug, Clone)]
struct RunOnTrial {
    failed_at: usize,
    before: BTreeSet<usize>,
    /// [`Lessons::run_on_all`] before and after the restart.
    before_all: RunOnAll,
    after_all: RunOnAll,
}

impl RunOnTrial {
    /// The trial of a restart from `before` to `after` after a replay that
    /// diverged at log index `failed_at`; `None` when the restart adds no
    /// run-on lesson.
    fn of(before: &Lessons, after: &Lessons, failed_at: usize) -> Option<Self> {
        let added = after.run_on_after != before.run_on_after || after.run_on_all != before.run_on_all;
        added.then(|| RunOnTrial {
            failed_at,
            before: before.run_on_after.clone(),
            before_all: before.run_on_all,
            after_all: after.run_on_all,
        })
    }

    /// The replay after the restart diverged at log index `failed_at`:
    /// when that is no further, each of `lessons` loses the trial's run-on
    /// lessons (and any it learned since), and true is returned. Every
    /// thread run on that got no further is refused for good: later
    /// replays of the trace do not try it again.
    fn judge(&self, failed_at: usize, lessons: &mut [&mut Lessons]) -> bool {
        let dropped = failed_at <= self.failed_at;
        if dropped {
            for l in lessons.iter_mut() {
                l.run_on_after = self.before.clone();
                l.run_on_all = match (self.before_all, self.after_all) {
                    (RunOnAll::Unlearned, RunOnAll::Learned) => RunOnAll::Refused,
                    (before, _) => before,
                };
            }
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lessons_survive_a_save_and_a_damaged_file_is_an_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("weft-lessons-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lessons");
        assert_eq!(Lessons::load(&path).unwrap(), Lessons::default(), "no file: nothing learned");
        let mut lessons = Lessons { wakers_first: BTreeSet::from([72, 198]), ..Default::default() };
        lessons.save(&path).unwrap();
        assert_eq!(Lessons::load(&path).unwrap(), lessons);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        lessons.absorb(&Lessons { wakers_first: BTreeSet::from([5]), run_on_after: BTreeSet::from([9]), ..Default::default() });
        assert_eq!(lessons.wakers_first, BTreeSet::from([5, 72, 198]));
        assert_eq!(lessons.run_on_after, BTreeSet::from([9]));
        std::fs::write(&path, b"{\"wakers_first\": [1,").unwrap();
        assert!(Lessons::load(&path).unwrap_err().to_string().contains("not a weft lessons file"));
        // Well-formed JSON, but a word no spin could be learned on.
        std::fs::write(&path, br#"{"spin_words": {"5": [{"addr": 8, "len": 9, "seen": 0}]}}"#).unwrap();
        assert!(format!("{:#}", Lessons::load(&path).unwrap_err()).contains("not 1, 2, 4 or 8 aligned bytes"));
        std::fs::write(&path, br#"{"spin_words": {"5": [{"addr": 12, "len": 4, "seen": 1}]}}"#).unwrap();
        assert!(Lessons::load(&path).is_ok(), "a word as spin.rs learns one");
        // An earlier weft's booleans are ignored; the tri-state is read.
        std::fs::write(&path, br#"{"run_on_all": true, "run_on_all_refused": false}"#).unwrap();
        assert_eq!(Lessons::load(&path).unwrap(), Lessons::default());
        std::fs::write(&path, br#"{"run_on_all_threads": "refused"}"#).unwrap();
        assert_eq!(Lessons::load(&path).unwrap().run_on_all, RunOnAll::Refused);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn run_on_lessons_that_get_a_replay_no_further_are_dropped() {
        let before = Lessons { run_on_after: BTreeSet::from([3]), ..Default::default() };
        let after = Lessons { run_on_after: BTreeSet::from([3, 40]), ..Default::default() };
        assert!(RunOnTrial::of(&before, &before, 50).is_none(), "no run-on lesson added");
        let trial = RunOnTrial::of(&before, &after, 50).unwrap();
        let mut later = Lessons { run_on_after: BTreeSet::from([3, 40, 77]), ..Default::default() };
        trial.judge(51, &mut [&mut later]);
        assert_eq!(later.run_on_after, BTreeSet::from([3, 40, 77]), "further: kept");
        trial.judge(50, &mut [&mut later]);
        assert_eq!(later.run_on_after, BTreeSet::from([3]), "no further: dropped");
    }

    #[test]
    fn a_run_on_lesson_that_gets_no_further_gives_way_to_every_thread_run_on_once() {
        let mut restarts = Restarts::default();
        let mut acting = Lessons::default();
        let mut known = Lessons { run_on_after: BTreeSet::from([40]), ..Default::default() };
        assert!(restarts.again(&mut acting, &mut known, 43, true), "a new run-on lesson restarts");
        assert!(!known.runs_on_after(41));
        // The restart with event 40's thread run on diverged at 43 again.
        let mut acting = known.clone();
        assert!(restarts.again(&mut acting, &mut known, 43, true), "every thread run on, next");
        assert!(known.run_on_all.learned() && known.run_on_after.is_empty() && known.runs_on_after(41));
        // That got it to 57: kept, and nothing new to restart with.
        let mut acting = known.clone();
        assert!(!restarts.again(&mut acting, &mut known, 57, true));
        assert!(known.run_on_all.learned(), "further: kept for the search");
        // Had it got no further, it would have been dropped, not tried again.
        let mut restarts = Restarts::default();
        let (mut acting, mut known) = (Lessons::default(), Lessons { run_on_all: RunOnAll::Learned, ..Default::default() });
        assert!(restarts.again(&mut acting, &mut known, 43, true));
        let mut acting = known.clone();
        assert!(!restarts.again(&mut acting, &mut known, 43, true));
        assert_eq!((known.run_on_all, acting.run_on_all), (RunOnAll::Refused, RunOnAll::Refused), "not tried again by a later replay");
        // Refused (a search under it found nothing): not learned again,
        // nor taken from a lessons file.
        let refused = Lessons { run_on_all: RunOnAll::Refused, ..Default::default() };
        let mut restarts = Restarts::default();
        let (mut acting, mut known) = (refused.clone(), Lessons { run_on_after: BTreeSet::from([40]), ..refused.clone() });
        assert!(restarts.again(&mut acting, &mut known, 43, true));
        let mut acting = known.clone();
        assert!(!restarts.again(&mut acting, &mut known, 43, true));
        assert_eq!(known.run_on_all, RunOnAll::Refused);
        let mut kept = refused;
        kept.absorb(&Lessons { run_on_all: RunOnAll::Learned, ..Default::default() });
        assert_eq!(kept.run_on_all, RunOnAll::Refused);
    }
}
