//! Checkpoints (replay/src/checkpoint.rs): a replay that resumes from a
//! checkpoint is exactly the replay that would have run from the start:
//! the same outcome, digest lines and fingerprint, for programs whose
//! threads are blocked in futex waits, at a barrier, in a timed wait, or
//! gone (main's pthread_exit) when the checkpoint is taken, or with an
//! alternate signal stack.

mod common;
use common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use weft_record::Trace;
use weft_replay::{CheckpointPolicy, Preemption, ReplayOptions, Replayer, Report, Schedule};

/// A checkpoint at every synchronization point, the last 1024 kept.
const EVERY_POINT: CheckpointPolicy = CheckpointPolicy { interval: Duration::ZERO, max: 1024, min_available: 0 };

fn opts(schedule: Schedule) -> ReplayOptions {
    ReplayOptions { schedule, digest: true, sync_trace_len: 4096, ..Default::default() }
}

fn same(a: &Report, b: &Report, what: &str) {
    assert_eq!(format!("{:?}", a.outcome), format!("{:?}", b.outcome), "{what}: outcome");
    let differs = a.digest.iter().zip(&b.digest).position(|(x, y)| x != y);
    assert!(
        differs.is_none() && a.digest.len() == b.digest.len(),
        "{what}: digests differ first at line {differs:?}: {:?} vs {:?}",
        differs.map(|k| &a.digest[k]),
        differs.map(|k| &b.digest[k])
    );
    assert_eq!(a.fingerprint, b.fingerprint, "{what}: fingerprint");
    assert_eq!(a.sync_trace, b.sync_trace, "{what}: sync trace");
}

/// Records tests/c/NAME.c, then replays it from the start and from
/// checkpoints, with the log order and, if `preempt`, with a late
/// preemption. A preemption needs a recording without the synchronization
/// order (`--no-inprocess`): with it, every other thread waits for its
/// place in the log, and no point has a thread to switch to.
fn resumes_exactly(name: &str, preempt: bool) {
    let dir = trace_dir(&format!("checkpoint-{name}"));
    let flags: &[&str] = if preempt { &["--no-inprocess"] } else { &[] };
    let rec = record_with(&dir, flags, &[program(name).to_str().unwrap()], Stdio::null());
    assert!(rec.status.code().is_some(), "{}", err(&rec));
    let trace = Trace::open(&dir).unwrap();

    let fresh = weft_replay::replay(&trace, &opts(Schedule::default())).unwrap();
    assert!(matches!(fresh.outcome, weft_replay::Outcome::Valid { .. }), "{:?}", fresh.outcome);
    let mut replayer = Replayer::with_checkpoints(&trace, EVERY_POINT);
    let first = replayer.replay(&opts(Schedule::default())).unwrap();
    assert_eq!(first.resumed_at, None);
    assert!(replayer.checkpoints() > 0, "{name}: no checkpoint was taken");
    same(&fresh, &first, name);
    let again = replayer.replay(&opts(Schedule::default())).unwrap();
    assert!(again.resumed_at.is_some(), "{name}: the same schedule resumes from a checkpoint");
    same(&fresh, &again, &format!("{name} resumed at {:?}", again.resumed_at));

    if !preempt {
        return;
    }
    // A late preemption, to a thread that could run there: the replayer
    // resumes before it.
    let late = fresh.sync_trace.iter().rev().skip(4).find(|r| !r.switchable.is_empty()).expect("a switchable point");
    let schedule = Schedule::new(vec![Preemption { sync: late.n, to: late.switchable[0].tid }]);
    let fresh = weft_replay::replay(&trace, &opts(schedule.clone())).unwrap();
    let resumed = replayer.replay(&opts(schedule)).unwrap();
    assert!(resumed.resumed_at.is_some_and(|n| n < late.n), "{name}: resumed at {:?}, preemption at {}", resumed.resumed_at, late.n);
    same(&fresh, &resumed, &format!("{name} with sync<{},{}>", late.n, late.switchable[0].tid));
}

/// A race reversal (seed 000 §4.3) holds a thread before an access and
/// counts accesses to a protected page: a replay resumed from a
/// checkpoint taken after the protection started (the fork keeps it, the
/// replay's state its counts) is the replay from the start.
#[test]
fn a_race_reversal_resumes_exactly() {
    let dir = record_racyflag("checkpoint-racyflag");
    let search = replay(&dir, &[]);
    assert_eq!(search.status.code(), Some(0), "{}", err(&search));
    let schedule = Schedule::load(&dir.join("schedule")).unwrap();
    assert!(!schedule.reversals().is_empty(), "{schedule}");
    let trace = Trace::open(&dir).unwrap();
    let found = weft_replay::replay(&trace, &opts(schedule.clone())).unwrap();
    assert!(matches!(found.outcome, weft_replay::Outcome::Valid { .. }), "{:?}", found.outcome);
    // Checkpoints are taken up to a schedule's last decision: a late
    // preemption to the thread already running (it goes on) keeps them
    // coming past the reversal's start.
    let last = found.sync_trace.last().expect("synchronization records");
    let late = Preemption { sync: last.n, to: last.tid };
    let schedule = Schedule::new(vec![late]).with_reversals(schedule.reversals().to_vec());
    let fresh = weft_replay::replay(&trace, &opts(schedule.clone())).unwrap();
    let mut replayer = Replayer::with_checkpoints(&trace, EVERY_POINT);
    same(&fresh, &replayer.replay(&opts(schedule.clone())).unwrap(), "racyflag with its reversal");
    let from = schedule.reversals()[0].from;
    let again = replayer.replay(&opts(schedule.clone())).unwrap();
    assert!(again.resumed_at.is_some_and(|n| n > from), "resumed at {:?}, the reversal starts at {from}", again.resumed_at);
    same(&fresh, &again, &format!("racyflag with {schedule} resumed at {:?}", again.resumed_at));
}

#[test]
fn prodcons_resumes_exactly() {
    resumes_exactly("prodcons", true);
}

#[test]
fn barrier_resumes_exactly() {
    resumes_exactly("barrier", true);
}

#[test]
fn timedwait_resumes_exactly() {
    resumes_exactly("timedwait", false);
}

#[test]
fn mainexit_resumes_exactly() {
    resumes_exactly("mainexit", true);
}

/// A thread's sigaltstack, which only the replayer knows, comes back with
/// a resumed checkpoint: the signal after it runs on the alternate stack.
#[test]
fn altstack_resumes_exactly() {
    resumes_exactly("altstack", false);
}

/// A shared writable mapping (anonymous, or of a file: the JVM's perf
/// data) that no fork to come can share is private memory in the replay,
/// so the process takes checkpoints, and a replay resumed from one under
/// a preemption mid-count ends as a fresh one. Before, the mapping was
/// shared, and no process that had one took a checkpoint: every replay of
/// a search, and every move back in the debugger, started from the
/// beginning.
#[test]
fn shared_memory_with_no_fork_to_come_resumes_exactly() {
    for kind in ["anonymous", "file"] {
        let name = format!("sharedmap-{kind}");
        let dir = trace_dir(&format!("checkpoint-{name}"));
        let rec = record_with(&dir, &["--no-inprocess"], &[program("sharedmap").to_str().unwrap(), kind], Stdio::null());
        assert_eq!(rec.stdout, b"total=200\n", "{}", err(&rec));
        let trace = Trace::open(&dir).unwrap();
        let mut replayer = Replayer::with_checkpoints(&trace, EVERY_POINT);
        let first = replayer.replay(&opts(Schedule::default())).unwrap();
        assert!(matches!(first.outcome, weft_replay::Outcome::Valid { .. }), "{name}: {:?}", first.outcome);
        assert!(replayer.checkpoints() > 0, "{name}: no checkpoint was taken");
        resumed_mid_count_as_fresh(&dir, &name);
    }
}

/// A process with a shared writable mapping that a fork child shares later
/// is never checkpointed: a fork would share those pages with the
/// checkpoint instead of copying them. A checkpoint taken mid-count would
/// hold the finished total in its shared page, and the resumed replay
/// would count on from it. The child's addition reaches the parent
/// through the page.
#[test]
fn shared_memory_before_a_fork_is_not_checkpointed() {
    let dir = trace_dir("checkpoint-sharedmap-fork");
    let rec = record_with(&dir, &["--no-inprocess"], &[program("sharedmap").to_str().unwrap(), "fork"], Stdio::null());
    assert_eq!(rec.stdout, b"total=1200\n", "{}", err(&rec));
    resumed_mid_count_as_fresh(&dir, "sharedmap-fork");
}

/// Memory that madvise keeps out of forks is in a checkpoint all the
/// same (MADV_DONTFORK: V8 marks its heap so, and node's resumed replays
/// crashed), and a process with wipe-on-fork memory takes no checkpoint
/// while its own fork child still finds the page zeroed.
#[test]
fn memory_kept_out_of_forks_resumes_exactly() {
    for (advice, child) in [("dontfork", ""), ("wipeonfork", "child sees 0\n")] {
        let dir = trace_dir(&format!("checkpoint-{advice}"));
        let rec = record_with(&dir, &["--no-inprocess"], &[program("forkadvice").to_str().unwrap(), advice], Stdio::null());
        assert_eq!(String::from_utf8_lossy(&rec.stdout), format!("total=200\n{child}"), "{}", err(&rec));
        resumed_mid_count_as_fresh(&dir, advice);
    }
}

/// After a valid replay of the trace in `dir` with checkpoints, a
/// preemption in the middle of the counting makes the next replay resume
/// from the latest checkpoint before it: it must end as a fresh replay
/// under that preemption does.
fn resumed_mid_count_as_fresh(dir: &Path, name: &str) {
    let trace = Trace::open(dir).unwrap();
    let mut replayer = Replayer::with_checkpoints(&trace, EVERY_POINT);
    let first = replayer.replay(&opts(Schedule::default())).unwrap();
    assert!(matches!(first.outcome, weft_replay::Outcome::Valid { .. }), "{name}: {:?}", first.outcome);
    let switchable: Vec<_> = first.sync_trace.iter().filter(|r| !r.switchable.is_empty()).collect();
    let mid = switchable.get(switchable.len() / 2).expect("a switchable point");
    let schedule = Schedule::new(vec![Preemption { sync: mid.n, to: mid.switchable[0].tid }]);
    let fresh = weft_replay::replay(&trace, &opts(schedule.clone())).unwrap();
    let resumed = replayer.replay(&opts(schedule)).unwrap();
    same(&fresh, &resumed, &format!("{name}: sync<{},{}>", mid.n, mid.switchable[0].tid));
}
