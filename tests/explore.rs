//! Schedule exploration (seed 000 §4): a recording whose interleaving the
//! log does not capture replays invalid in log order; `weft replay -a`
//! finds the preemption that makes it valid, prints the output once, and
//! saves the schedule so the next replay needs no search. Such a log is a
//! ptrace-only one (`--no-inprocess`): the in-process runtime logs the
//! lock order (seed 003 §3.2), and the same program then replays valid at
//! the first attempt.

mod common;
use common::*;

/// Records lockorder (with weft record's `flags`) until the run took the
/// common multi-core order (the adder first: x=4); a rare run that did not
/// is recorded again.
fn record_adder_first_with(name: &str, flags: &[&str]) -> std::path::PathBuf {
    record_until(name, flags, &[program("lockorder").to_str().unwrap()], b"x=4\n")
}

/// A ptrace-only recording of lockorder: its log misses the lock order.
fn record_adder_first(name: &str) -> std::path::PathBuf {
    record_adder_first_with(name, &["--no-inprocess"])
}

/// With the in-process runtime, the log holds the order in which the
/// threads took the lock: the replay is valid in log order, no search.
#[test]
fn the_runtime_logs_the_lock_order() {
    let trace = record_adder_first_with("lockorder-inprocess", &[]);
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    assert!(String::from_utf8_lossy(&dump.stdout).contains("sync MutexLock"), "the lock order is in the log");
    let plain = replay(&trace, &["--no-explore"]);
    assert_eq!(plain.status.code(), Some(0), "{}", err(&plain));
    assert!(err(&plain).contains("replay valid"), "{}", err(&plain));
    assert_eq!(plain.stdout, b"x=4\n");
}

#[test]
fn exploration_finds_the_lock_order_the_log_missed() {
    let trace = record_adder_first("lockorder");
    let plain = replay(&trace, &["--no-explore"]);
    assert_eq!(plain.status.code(), Some(2), "{}", err(&plain));
    assert!(err(&plain).contains("unmatched event") && err(&plain).contains("writing different bytes: \"x="), "{}", err(&plain));
    assert!(!err(&plain).contains("exploring"), "--no-explore explores nothing: {}", err(&plain));
    assert!(!trace.join("schedule").exists());

    let explored = replay(&trace, &[]);
    assert_eq!(explored.status.code(), Some(0), "{}", err(&explored));
    assert_eq!(explored.stdout, b"x=4\n", "the output appears once, as recorded");
    assert!(err(&explored).contains("exploring") && err(&explored).contains("gets past event"), "{}", err(&explored));
    let saved = std::fs::read_to_string(trace.join("schedule")).unwrap();
    assert!(saved.lines().any(|l| l.contains(':') && !l.starts_with('#')), "{saved}");

    let again = replay(&trace, &["--digest"]);
    assert_eq!(again.status.code(), Some(0), "{}", err(&again));
    assert_eq!(again.stdout, b"x=4\n");
    assert!(!err(&again).contains("exploring"), "the saved schedule needs no search: {}", err(&again));
    let digest = |o: &std::process::Output| err(o).lines().filter(|l| l.starts_with("weft: digest")).map(String::from).collect::<Vec<_>>();
    assert_eq!(digest(&again), digest(&replay(&trace, &["--digest"])), "same schedule, same digest");
}

/// A saved schedule that no longer makes the replay valid (here the log
/// order, which misses the lock order) is replayed first, showing the
/// output up to its failure; the search that follows shows only what
/// comes after. Before, the greeting printed before the failure appeared
/// twice.
#[test]
fn a_failing_saved_schedule_then_a_search_show_the_output_once() {
    let prog = program("lockorder");
    let trace = record_until("lockorder-greet", &["--no-inprocess"], &[prog.to_str().unwrap(), "hello"], b"hello\nx=4\n");
    std::fs::write(trace.join("schedule"), "# the log order\n").unwrap();
    let rep = replay(&trace, &[]);
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert!(err(&rep).contains("does not make the replay valid") && err(&rep).contains("gets past event"), "{}", err(&rep));
    assert_eq!(String::from_utf8_lossy(&rep.stdout), "hello\nx=4\n", "{}", err(&rep));
}

/// An explicit schedule replaces the saved one, and a bad one is refused
/// with the line that is wrong.
#[test]
fn explicit_and_malformed_schedules() {
    let trace = record_adder_first("lockorder-schedules");
    let bad = replay(&trace, &["--preempt", "x:1"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(err(&bad).contains("bad preemption \"x:1\""), "{}", err(&bad));
    std::fs::write(trace.join("schedule"), "3:oops\n").unwrap();
    let bad = replay(&trace, &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(err(&bad).contains("schedule") && err(&bad).contains("oops"), "{}", err(&bad));
}

/// With no valid schedule (the search is not allowed), the debugger still
/// serves the replay up to its first unmatched event and says so, at
/// connect and in `monitor when`; everything before it can be debugged.
#[test]
fn without_a_valid_schedule_the_debugger_serves_up_to_the_divergence() {
    let trace = record_adder_first("lockorder-gdb");
    let out = weft()
        .args(["replay", "--no-explore"])
        .arg(&trace)
        .args(["--", "-batch", "-nx", "-ex", "continue", "-ex", "echo @@when\\n", "-ex", "monitor when"])
        .output()
        .expect("run weft replay");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), err(&out));
    assert!(text.contains("no valid schedule"), "said at connect:\n{text}");
    let when = &text[text.find("@@when").expect("monitor when ran")..];
    assert!(when.contains("diverges") && when.contains("unmatched event"), "monitor when says where:\n{text}");
    assert!(!trace.join("schedule").exists(), "an invalid schedule is not saved");
}

/// A search that finds no valid schedule keeps the one that got furthest
/// (with its lessons and its failure) in TRACE/furthest; the debugger then
/// starts under it at once, without running the same search again, and
/// stops where it diverges. tests/c/lostupdates.c loses updates on two
/// cores, which no one-core schedule reproduces.
#[test]
fn a_failed_search_keeps_its_furthest_schedule_for_the_debugger() {
    let prog = program("lostupdates");
    let trace = (0..5)
        .find_map(|n| {
            let trace = trace_dir(&format!("lostupdates-{n}"));
            let rec = record(&trace, &[prog.to_str().unwrap()], std::process::Stdio::null());
            assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
            (rec.stdout != b"total 40000000 of 40000000\n").then_some(trace)
        })
        .expect("five recordings lost no update");
    let rep = replay(&trace, &["--max-attempts", "3"]);
    assert_eq!(rep.status.code(), Some(2), "{}", err(&rep));
    assert!(err(&rep).contains("for `weft replay` to debug under"), "{}", err(&rep));
    for file in ["schedule", "lessons", "failure"] {
        assert!(trace.join("furthest").join(file).exists(), "furthest/{file} kept");
    }
    assert!(!trace.join("schedule").exists(), "an invalid schedule is not saved as the schedule");
    let out = weft().arg("replay").arg(&trace).args(["--", "-batch", "-nx", "-ex", "continue"]).output().expect("run weft replay");
    let text = err(&out);
    assert!(text.contains("debugging under the one that got furthest") && text.contains("which failed: unmatched event"), "{text}");
    assert!(!text.contains("searching for one first"), "no second search:\n{text}");
    assert!(text.contains("the replay diverged"), "stops at the divergence:\n{text}");
    // A search that gets less far leaves an earlier, further one alone.
    std::fs::write(trace.join("furthest/reached"), "1000000\n").unwrap();
    let rep = replay(&trace, &["--max-attempts", "2"]);
    assert!(err(&rep).contains("an earlier search got further"), "{}", err(&rep));
    assert_eq!(std::fs::read_to_string(trace.join("furthest/reached")).unwrap(), "1000000\n");
    // A session's own failed search keeps its furthest too.
    std::fs::remove_dir_all(trace.join("furthest")).unwrap();
    let gdb = |extra: &[&str]| weft().arg("replay").args(extra).arg(&trace).args(["--", "-batch", "-nx", "-ex", "continue"]).output().expect("run weft replay");
    let out = gdb(&["--max-attempts", "3"]);
    assert!(err(&out).contains("searching for one first") && trace.join("furthest/schedule").exists(), "{}", err(&out));
    let out = gdb(&[]);
    assert!(!err(&out).contains("searching for one first") && err(&out).contains("got furthest"), "{}", err(&out));
    // Damaged, it is ignored with a warning, and the session searches.
    std::fs::write(trace.join("furthest/lessons"), "{").unwrap();
    let out = gdb(&["--max-attempts", "2"]);
    assert!(err(&out).contains("ignoring the schedule kept as the furthest") && err(&out).contains("searching for one first"), "{}", err(&out));
}

/// Fine-grained exploration (seed 000 §4.3): racyflag's checker must
/// read main's store to x between that store and main's load of y, where
/// main makes no call and takes no lock. No preemption at a
/// synchronization point gets past the failure; the search traces the
/// window's accesses by page protection, reverses the race on x, and
/// saves the reversal in the schedule, which the next replay follows.
#[test]
fn a_race_reversal_replays_what_no_preemption_can() {
    let trace = record_racyflag("racyflag");
    let plain = replay(&trace, &["--no-explore"]);
    assert_eq!(plain.status.code(), Some(2), "one core runs main's store and load together: {}", err(&plain));

    let explored = replay(&trace, &[]);
    assert_eq!(explored.status.code(), Some(0), "{}", err(&explored));
    assert_eq!(explored.stdout, b"checker done\nmain saw y\n", "the output appears once, as recorded");
    let log = err(&explored);
    assert!(log.contains("race reversals (seed 000 §4.3)") && log.contains("race reversal race<"), "{log}");
    let saved = std::fs::read_to_string(trace.join("schedule")).unwrap();
    assert!(saved.lines().any(|l| l.starts_with("race ")), "{saved}");

    let again = replay(&trace, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", err(&again));
    assert_eq!(again.stdout, b"checker done\nmain saw y\n");
    assert!(!err(&again).contains("exploring"), "the saved reversal needs no search: {}", err(&again));
}
