//! Asynchronous signals that hit user code are replayed at the instruction
//! they hit: benchmarks that count loop iterations until a timer signal
//! print the recorded count again, and the replay is valid.

mod common;
use common::*;
use std::process::Stdio;

/// A timer signal ends a pure-computation loop that takes a mutex each
/// iteration: the replay delivers it at the recorded instruction (not at
/// the first mutex, where the loop would print another count), and the
/// dump shows it as a signal that hit user code.
#[test]
fn timer_signal_ends_a_counting_loop_at_the_recorded_iteration() {
    let prog = program("countalarm");
    let (rec, _) = record_and_replay("countalarm", &[prog.to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    let count: u64 = out.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(count > 1, "the loop ran {count} times before the signal: {out}");
}

/// A timer signal ends a loop whose counter no stack word alone shows
/// (tests/c/timedloop.c): `up` keeps it and its state in registers (some
/// 150 million iterations in 300 ms), `down` too, counting down; in
/// `call` it is a stack word that a callee saved, beside registers that
/// change at each hit, and the signal's pc runs four times an iteration.
/// The search finds the counter as a word of the hit's state that moves
/// steadily towards its recorded value from hit to hit in the recorded
/// frame, runs the loop without the breakpoint in shrinking wall-time
/// slices, each ended by one hit that reads the word, and finds the
/// recorded state in the last few hundred microseconds' hits. Each of 3
/// recordings of each (the signal hits another instruction each time)
/// replays valid in log order, printing the recorded count. Before, the
/// search stopped at every hit (some 25,000 a second), gave up after
/// 108 s, and the replay diverged at the count's print.
#[test]
fn timer_signal_ends_a_loop_counting_outside_the_stack_at_the_recorded_iteration() {
    let prog = program("timedloop");
    for mode in ["up", "down", "call"] {
        for run in 0..3 {
            let trace = trace_dir(&format!("timedloop-{mode}-{run}"));
            let rec = record(&trace, &[prog.to_str().unwrap(), mode], Stdio::null());
            assert!(err(&rec).contains("weft: recorded"), "record failed: {}", err(&rec));
            let out = String::from_utf8_lossy(&rec.stdout);
            let ran = !out.contains(": 0,") && !out.contains(&format!(": {},", u64::MAX));
            assert!(out.contains(", x = ") && ran, "{mode} {run}: the loop did not run: {out}");
            let rep = replay(&trace, &["--no-explore"]);
            assert!(err(&rep).contains("replay valid"), "{mode} {run}: {}", err(&rep));
            assert!(!err(&rep).contains("delivered at a hit"), "{mode} {run}: {}", err(&rep));
            assert_eq!(rep.stdout, rec.stdout, "{mode} {run}: the replay printed another count");
        }
    }
}

/// A thread's pthread_kill reaches a worker that counts in a register
/// (tests/c/killworker.c): the signal is the worker's first logged event,
/// and the killer's tgkill runs in the replay too, before the worker has
/// run (one thread at a time), so the kernel has it pending at the
/// worker's first instruction. The replay passes that delivery stop
/// without the signal, searches for the recorded state, and sends it
/// again there: each of 3 recordings replays valid in log order, printing
/// the recorded count. Before, the signal was delivered at that first
/// stop, and the worker printed a count of 0.
#[test]
fn a_signal_another_thread_sends_early_in_the_replay_waits_for_the_recorded_state() {
    let prog = program("killworker");
    for run in 0..3 {
        let trace = trace_dir(&format!("killworker-{run}"));
        let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
        assert!(err(&rec).contains("weft: recorded"), "record failed: {}", err(&rec));
        let out = String::from_utf8_lossy(&rec.stdout);
        assert!(out.contains(" iterations, x = ") && !out.starts_with("0 "), "{run}: {out}");
        let rep = replay(&trace, &["--no-explore"]);
        assert!(err(&rep).contains("replay valid"), "{run}: {}", err(&rep));
        assert!(!err(&rep).contains("delivered at a hit"), "{run}: {}", err(&rep));
        assert_eq!(rep.stdout, rec.stdout, "{run}: the replay printed another count");
    }
}

/// `openssl speed` forks two children that each count SHA-256 hashes of
/// 16-byte buffers for a second, until SIGALRM; the replay is valid and
/// the parent prints the recorded counts again. One buffer size keeps the
/// test to two signals. Each child's loop runs millions of times before
/// its signal; the search finds the loop's counter in the stack frame and
/// runs without stopping until it is close, then stops at each write of
/// the counter (stopping at every breakpoint hit, at some 30 us a stop,
/// took longer than the search may). Recorded with the in-process runtime,
/// whose rwlock markers are each child's last events before its loop
/// (forked_counting_loops_after_a_release_replay). The children's lines
/// starting with `+` go to the parent through pipes in the recording but
/// reach the replay's stdout (process trees replay pipes between processes
/// as logged input), so they are left out of the comparison.
#[test]
fn openssl_speed_multi() {
    let openssl = debian_program("openssl", "openssl");
    let argv = [openssl.to_str().unwrap(), "speed", "-multi", "2", "-seconds", "1", "-bytes", "16", "sha256"];
    let trace = trace_dir("openssl-speed");
    let rec = record(&trace, &argv, Stdio::null());
    assert!(err(&rec).contains("weft: recorded"), "record failed: {}", err(&rec));
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "900"]);
    assert_eq!(rep.status.code(), Some(0), "replay of openssl speed invalid: {}", err(&rep));
    assert!(err(&rep).contains("replay valid"), "{}", err(&rep));
    let parent = |out: &[u8]| String::from_utf8_lossy(out).lines().filter(|l| !l.starts_with('+')).collect::<Vec<_>>().join("\n");
    let recorded = parent(&rec.stdout);
    assert!(recorded.contains("Got: +F:6:sha256:"), "{recorded}");
    assert_eq!(parent(&rep.stdout), recorded, "replayed counts differ from the recorded run");
}

/// openssl speed's shape in a program of ours (tests/c/forkspin.c): each
/// of two forked children releases a mutex, its last event, and counts
/// in its stack frame, calling a hash from two places per iteration,
/// until its SIGALRM. The replay is valid and prints the recorded counts
/// (the two children print to one pipe at about the same moment: in
/// either order).
/// It failed in two ways before: the second child, its release matched,
/// ran on beside the first one's search, far past its count (no point
/// after a release marker handed the core over); and the search, once
/// its counter was close, stopped at every run of the hash's code (more
/// than a hundred per iteration) and gave up.
#[test]
fn forked_counting_loops_after_a_release_replay() {
    let prog = program("forkspin");
    let trace = trace_dir("forkspin");
    let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
    assert!(err(&rec).contains("weft: recorded"), "record failed: {}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert!(err(&rep).contains("replay valid"), "{}", err(&rep));
    let out = String::from_utf8_lossy(&rec.stdout);
    assert_eq!(out.lines().filter(|l| l.contains(" iterations, digest ")).count(), 2, "{out}");
    assert_eq!(sorted_lines(&String::from_utf8_lossy(&rep.stdout)), sorted_lines(&out), "replayed counts differ from the recorded run");
}

/// Two signals sent back to back at a child blocked in nanosleep reach it
/// together: ignored, both interrupt the one sleep; handled, the second
/// arrives at the first one's handler entry, so the child has counted two
/// when it prints. The replay gives the second with the first, as the
/// kernel did (before, it came after the first handler had run: the child
/// printed 1, 3 recordings of 3; and the ignored pair failed at the
/// second, whose sleep had written nothing more). A loaded machine may
/// take the parent off its core between its two kills, and the child then
/// handles the first alone: every recording must replay as recorded, and
/// up to 5 more are made until the ignored pair was recorded once and the
/// handled pair twice as they are meant.
#[test]
fn two_signals_that_arrive_together_replay_together() {
    let prog = program("twosignals");
    for (how, want, times) in [("ignored", "child: nanosleep 0, caught 0\n", 1), ("handled", "child: nanosleep -1, caught 2\n", 2)] {
        let mut seen = 0;
        for run in 0..times + 5 {
            let name = format!("twosignals-{how}-{run}");
            let (rec, _) = record_and_replay(&name, &[prog.to_str().unwrap(), how], Stdio::null());
            seen += String::from_utf8_lossy(&rec.stdout).starts_with(want) as usize;
            if seen == times {
                break;
            }
        }
        assert_eq!(seen, times, "{how}: the signals never reached the child together");
    }
}
