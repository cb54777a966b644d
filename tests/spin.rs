//! Spins, priority-inheritance locks and hangs: a thread that spins on
//! sched_yield lets the thread it waits for run, and so do threads that
//! hand a turn through memory alone, or spin between rounds of logged
//! calls; a replay that cannot
//! progress ends with a livelock diagnosis within `--livelock-timeout`
//! (one that computes, within 4 of them);
//! PI mutexes replay; and a deadlocked program killed while recording
//! replays to that end and says where each thread was stuck.

mod common;
use common::*;
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A spinner on sched_yield that the log runs first: before yield points
/// the replay spun for ever on one core.
#[test]
fn sched_yield_spin_lets_the_other_thread_run() {
    let prog = program("yieldspin");
    let trace = trace_dir("yieldspin");
    let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "spinning\ndone\n", "{}", err(&rec));
    let start = Instant::now();
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "10"]);
    assert_replays_as_recorded("yieldspin", &rec, &rep);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
}

/// A worker computes for about a second with no syscall (its registers
/// change around its loop), its print the log's next event: with a
/// livelock timeout of 1 s the replay is valid, the limit starting again
/// for a thread that computes (up to 3 times). Before, it was a livelock.
#[test]
fn a_computation_longer_than_the_livelock_timeout_is_no_livelock() {
    let prog = program("longcompute");
    let trace = trace_dir("longcompute");
    let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "computed 8b13895683d10301\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "1"]);
    assert_replays_as_recorded("longcompute", &rec, &rep);
}

/// A thread whose own event is the log's next spins on a flag that
/// another thread clears after its last logged call, with no call in
/// between (Redis's main thread and its I/O threads): after 200 ms it is
/// set aside and the other thread runs on, which then spins until the
/// first goes on; each is set aside in turn. Before, the replay reported
/// a livelock at the first round.
#[test]
fn a_spinner_whose_event_is_next_lets_the_thread_it_waits_for_run() {
    let prog = program("pendingspin");
    let trace = trace_dir("pendingspin");
    let rec = record(&trace, &[prog.to_str().unwrap(), "5"], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "mwmwmwmwmw\ndone 5\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "10"]);
    assert_replays_as_recorded("pendingspin", &rec, &rep);
}

/// The same with a batch of 12 logged writes per round, 200 rounds: the
/// parks come farther apart in the log than threads taking turns, yet
/// each is a spin (Redis's I/O threads write a batch of replies per
/// round). Before, each park waited out a full 200 ms slice: about 65 s
/// for this replay, 1,000 events a minute for Redis with `--io-threads
/// 2`; now about 3 s. The bound is a hang guard, ten times the usual time.
#[test]
fn a_spinner_between_rounds_of_many_events_is_set_aside_quickly() {
    let prog = program("pendingspin");
    let trace = trace_dir("pendingspin-batch");
    let rec = record(&trace, &[prog.to_str().unwrap(), "200", "12"], Stdio::null());
    let round = format!("m{}", "w".repeat(12));
    assert_eq!(String::from_utf8_lossy(&rec.stdout), format!("{}\ndone 200\n", round.repeat(200)), "{}", err(&rec));
    let start = Instant::now();
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "60"]);
    assert_replays_as_recorded("pendingspin-batch", &rec, &rep);
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
}

/// Two threads hand a turn back and forth 1,000 times through one atomic
/// word, spinning with `pause` (tests/c/handoff.c): nothing is logged
/// between their starts and their returns. The replay sets each spinner
/// aside in turn, each slice half the one before (down to 1 ms) while no
/// event is matched. Before, the thread the log runs first spun alone
/// until the livelock timeout: the other, set aside, was never run again
/// (and one handoff per 200 ms slice would have taken 400 s).
#[test]
fn threads_handing_a_turn_through_memory_alone_replay() {
    let prog = program("handoff");
    let trace = trace_dir("handoff");
    let rec = record(&trace, &[prog.to_str().unwrap(), "1000"], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "sums 499500 999000\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "60"]);
    assert_replays_as_recorded("handoff", &rec, &rep);
}

/// Two threads take turns through a spin lock of their own, a
/// test-and-set one and one that spins on a plain load first, each making
/// logged calls while it holds it (tests/c/spinlocks.c). On one core the
/// thread that released the lock ran on and took it again before the
/// other, whose call the log has next, could see it free: a livelock, in 2
/// of 3 recordings of each kind with the build before. The spinner is now
/// stepped around its loop to find its lock word, and a thread run for
/// its sake stops right after it releases the word (spin.rs). Both
/// recorders: the replay is the same for both.
#[test]
fn spin_locks_around_logged_calls_replay_in_log_order() {
    let prog = program("spinlocks");
    for (kind, recorder) in [("tas", None), ("ttas", None), ("tas", Some("--no-inprocess"))] {
        for n in 0..2 {
            let name = format!("spinlocks-{kind}-{n}{}", recorder.unwrap_or(""));
            let trace = trace_dir(&name);
            let flags: Vec<&str> = recorder.into_iter().collect();
            let rec = record_with(&trace, &flags, &[prog.to_str().unwrap(), kind], Stdio::null());
            let out = String::from_utf8_lossy(&rec.stdout).into_owned();
            assert!(out.ends_with("total 1200\n"), "{name}: {}", err(&rec));
            // Lines "THREAD ROUND": the lock changed hands at each new
            // thread (about 800 times on an idle machine). Twice is enough
            // for a handoff the log orders against the releasing thread.
            let holders: Vec<&str> = out.lines().filter_map(|l| l.split(' ').next()).filter(|t| t.parse::<u32>().is_ok()).collect();
            let handoffs = holders.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(handoffs >= 2, "{name}: the lock changed hands {handoffs} times only");
            let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "30"]);
            assert_replays_as_recorded(&name, &rec, &rep);
        }
    }
}

/// What a replay learns of a program's spin locks is kept in the trace
/// (`lessons`, lessons.rs): the next replay starts with it and does not
/// start over, and a gdb session that stops at a breakpoint before the
/// spin, where a replay cannot start over, hands the core over at each
/// release from the start. Without the file, that session parks the
/// spinner and stops there (the failure this keeps away).
#[test]
fn spin_words_a_replay_learned_are_kept_for_the_debugger() {
    const NOTE: &str = "replaying from the start, handing the core over";
    let prog = program("spinlocks");
    // A recording whose replay in log order learns spin words (most do:
    // spin_locks_around_logged_calls_replay_in_log_order).
    let trace = (0..4)
        .map(|n| {
            let trace = trace_dir(&format!("spinlessons-{n}"));
            let rec = record(&trace, &[prog.to_str().unwrap(), "tas"], Stdio::null());
            let first = replay(&trace, &["--no-explore", "--livelock-timeout", "30"]);
            assert_replays_as_recorded("spinlessons", &rec, &first);
            (trace, err(&first).contains(NOTE))
        })
        .find_map(|(trace, learned)| learned.then_some(trace))
        .expect("no replay of 4 recordings learned spin words");
    let kept = std::fs::read_to_string(trace.join("lessons")).expect("the replay kept its lessons");
    assert!(kept.contains("\"spin_words\"") && kept.contains("\"seen\""), "{kept}");
    let again = replay(&trace, &["--no-explore", "--livelock-timeout", "30"]);
    assert!(err(&again).contains("replay valid") && !err(&again).contains(NOTE), "{}", err(&again));
    let session = || {
        let out = weft()
            .args(["replay", "--no-explore", "--livelock-timeout", "20"])
            .arg(&trace)
            .args(["--", "-batch", "-nx", "-ex", "break worker", "-ex", "continue", "-ex", "continue", "-ex", "delete", "-ex", "continue"])
            .output()
            .expect("run weft replay");
        format!("{}{}", String::from_utf8_lossy(&out.stdout), err(&out))
    };
    let text = session();
    assert!(text.contains("No more reverse-execution history") && text.contains("_exit"), "ran to the end:\n{text}");
    assert!(!text.contains("parked") && !text.contains("livelock"), "{text}");
    std::fs::remove_file(trace.join("lessons")).unwrap();
    let text = session();
    assert!(text.contains("parked"), "without the lessons the session stops at the spin:\n{text}");
}

/// A spin on nanosleep(0): every call is a logged event, so the replay
/// progresses or meets an unmatched event; it never hangs or livelocks.
#[test]
fn nanosleep_spin_never_hangs() {
    let prog = program("nanospin");
    let trace = trace_dir("nanospin");
    let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "b\ndone\n", "{}", err(&rec));
    let start = Instant::now();
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "5"]);
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    let text = err(&rep);
    assert!(text.contains("replay valid") || text.contains("unmatched event"), "{text}");
    assert!(!text.contains("livelock"), "{text}");
}

/// A spinner waiting for a word another process wrote while recording:
/// in the replay nobody writes it. The replay ends after the livelock
/// timeout (not 120 s, not never) and names the spinning thread and line.
#[test]
fn a_spin_that_cannot_progress_ends_with_a_livelock_diagnosis() {
    let flag = scratch().join("flagspin-word");
    std::fs::write(&flag, [0u8; 4096]).unwrap();
    let trace = trace_dir("flagspin");
    let (child, mut stdout, pid) = record_until_ready(&trace, "flagspin", &[flag.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(200));
    // In place: rewriting the file would truncate it under the program's
    // mapping for a moment (SIGBUS if it reads then).
    std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&flag).unwrap(), &[1], 0).unwrap();
    let mut seen = String::new();
    stdout.read_line(&mut seen).unwrap();
    let rec = child.wait_with_output().unwrap();
    assert_eq!((seen.as_str(), rec.status.code()), ("seen\n", Some(0)), "pid {pid}: {}", err(&rec));

    let start = Instant::now();
    let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "3"]);
    let took = start.elapsed();
    let text = err(&rep);
    assert_eq!(rep.status.code(), Some(2), "{text}");
    assert!(text.contains("livelock") && text.contains("no logged event matched in 3 s"), "{text}");
    let line = source_line("flagspin", "sched_yield();");
    assert!(text.contains(" spins at pc ") && text.contains(&format!("flagspin.c:{line}")), "{text}");
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(30), "took {took:?}");
}

/// A mutex with PTHREAD_PRIO_INHERIT under contention: its
/// FUTEX_LOCK_PI / FUTEX_UNLOCK_PI calls are emulated like other futexes.
#[test]
fn priority_inheritance_mutex_replays() {
    let prog = program("pimutex");
    let (rec, _) = record_and_replay("pimutex", &[prog.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "total 4000\n");
}

/// Two threads deadlocked on two mutexes, killed with SIGKILL while
/// recording: the replay ends the same way and says which lock each
/// thread is blocked on, who holds it, and at which line.
#[test]
fn deadlock_killed_while_recording_is_shown() {
    let trace = trace_dir("deadlock");
    let (child, _stdout, pid) = record_until_ready(&trace, "deadlock", &[]);
    wait_until_all_in_futex(pid);
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let rec = child.wait_with_output().unwrap();
    assert_eq!(rec.status.code(), Some(128 + 9), "{}", err(&rec));

    let rep = replay(&trace, &["--no-explore"]);
    let text = err(&rep);
    assert_eq!(rep.status.code(), Some(0), "{text}");
    assert!(text.contains("the program was killed by SIGKILL in thread"), "{text}");
    let blocked = |var: &str, waiter: &str| {
        let line = source_line("deadlock", &format!("/* {waiter} waits here */"));
        let re = text.lines().find(|l| l.contains(&format!("blocked on mutex `{var}` (0x")) && l.ends_with(&format!("at deadlock.c:{line}")));
        let l = re.unwrap_or_else(|| panic!("no line for {var} at deadlock.c:{line}:\n{text}"));
        let holder = l.split("held by thread ").nth(1).and_then(|r| r.split(',').next()).expect("a holder").to_string();
        let me = l.trim().strip_prefix("thread ").and_then(|r| r.split(' ').next()).expect("a thread").to_string();
        (me, holder)
    };
    let (a, b_holder) = blocked("lock_b", "a");
    let (b, a_holder) = blocked("lock_a", "b");
    assert_eq!((b_holder, a_holder), (b.clone(), a.clone()), "each holds what the other wants:\n{text}");
    assert!(text.contains(&format!("waits for thread {a} to exit")), "main joins a:\n{text}");
}

/// Starts `weft record` of tests/c/NAME.c with `args`, reads the
/// "ready PID" line it prints; returns the recorder, its stdout, the pid.
fn record_until_ready(trace: &std::path::Path, name: &str, args: &[&str]) -> (Child, std::io::BufReader<std::process::ChildStdout>, i32) {
    let mut child = weft()
        .args(["record", "-o"])
        .arg(trace)
        .arg("--")
        .arg(program(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft record");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid = line.strip_prefix("ready ").and_then(|p| p.trim().parse::<i32>().ok()).expect("ready PID");
    (child, stdout, pid)
}

/// Waits until every thread of `pid` is blocked in futex(2)
/// (/proc/PID/task/TID/syscall, proc(5)), for at most a minute.
fn wait_until_all_in_futex(pid: i32) {
    let futex = format!("{} ", libc::SYS_futex);
    let all_blocked = || {
        let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.flatten().collect()).unwrap_or_default();
        tasks.len() == 3
            && tasks.iter().all(|t| std::fs::read_to_string(t.path().join("syscall")).is_ok_and(|s| s.starts_with(&futex)))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all_blocked() {
        assert!(Instant::now() < deadline, "{pid} never deadlocked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The 1-based line of tests/c/NAME.c that contains `text`.
fn source_line(name: &str, text: &str) -> usize {
    let src = std::fs::read_to_string(format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"))).unwrap();
    1 + src.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text} not in {name}.c"))
}
