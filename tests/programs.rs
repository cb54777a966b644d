//! Record and replay the C programs in tests/c: each replay must be valid
//! (every logged event met, same end) and print what the recorded run did.

mod common;
use common::*;
use std::process::Stdio;

fn simple(name: &str) -> (std::process::Output, std::process::Output) {
    let prog = program(name);
    record_and_replay(name, &[prog.to_str().unwrap()], Stdio::null())
}

#[test]
fn mutex_condvar_producer_consumer() {
    let (rec, _) = simple("prodcons");
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "sum=500500\n");
}

#[test]
fn barrier() {
    let (rec, _) = simple("barrier");
    assert!(String::from_utf8_lossy(&rec.stdout).contains("round 4 total=30"));
}

#[test]
fn thread_that_segfaults() {
    let (rec, rep) = simple("segv");
    assert_eq!(rec.status.code(), Some(128 + 11), "weft record exits like the program");
    assert!(err(&rep).contains("killed by SIGSEGV in thread"), "{}", err(&rep));
}

#[test]
fn abort_from_main() {
    let (rec, rep) = simple("abort");
    assert_eq!(rec.status.code(), Some(128 + 6));
    assert!(err(&rep).contains("killed by SIGABRT"), "{}", err(&rep));
}

#[test]
fn exit_status_is_the_programs() {
    let (rec, rep) = simple("exitcode");
    assert_eq!(rec.status.code(), Some(3));
    assert!(err(&rep).contains("exited with status 3"), "{}", err(&rep));
}

#[test]
fn reading_a_file() {
    let prog = program("readfile");
    let (rec, _) = record_and_replay("readfile", &[prog.to_str().unwrap(), "/etc/passwd"], Stdio::null());
    assert!(String::from_utf8_lossy(&rec.stdout).starts_with("bytes="));
}

#[test]
fn reading_stdin() {
    let input = scratch().join("stdin.txt");
    std::fs::write(&input, "one\ntwo\nthree\n").unwrap();
    let prog = program("stdin");
    let (rec, _) = record_and_replay(
        "stdin",
        &[prog.to_str().unwrap()],
        Stdio::from(std::fs::File::open(&input).unwrap()),
    );
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "lines=3 bytes=14\n");
}

#[test]
fn pipe_between_threads() {
    simple("pipe");
}

#[test]
fn loopback_socket() {
    let (rec, _) = simple("socket");
    assert!(String::from_utf8_lossy(&rec.stdout).contains("received=70"));
}

#[test]
fn time_calls_replay_recorded_values() {
    simple("time");
}

#[test]
fn getrandom_replays_recorded_bytes() {
    simple("getrandom");
}

#[test]
fn rdtsc_is_trapped_and_replayed() {
    simple("rdtsc");
    let dump = weft().args(["dump"]).arg(scratch().join("traces/rdtsc")).output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("rdtsc = ") && text.contains("rdtscp = "), "{text}");
}

#[test]
fn timed_condvar_wait() {
    let (rec, _) = simple("timedwait");
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "timedout=1\nworker done\n");
}

/// The recorded wait returned EAGAIN (the other thread had stored), and
/// the replay, in log order, reaches the wait before that store: the
/// waiter must wait for the store, not return at once and wait again.
#[test]
fn timed_futex_wait_that_found_the_word_changed() {
    let trace = trace_dir("futexagain");
    let rec = record(&trace, &[program("futexagain").to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "first wait: word already changed; waits: 1\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_replays_as_recorded("futexagain", &rec, &rep);
}

#[test]
fn pthread_exit_from_main_while_workers_run() {
    simple("mainexit");
}

/// A thread's exit logged after its process's exit_group (recorders
/// before dc72df0 logged one the thread entered before the exit_group
/// took effect) is ended by that exit_group: the replay is valid, through
/// the interactive path (`--no-explore`) and the batch one (`--digest`)
/// alike. The trace is mainexit's with its last thread exit moved there.
#[test]
fn a_thread_exit_logged_after_the_exit_group_is_ended_by_it() {
    exit_moved_after_the_exit_group("exit-after-group", |events, group, _| {
        events[..group].iter().rposition(|e| is_syscall(e, libc::SYS_exit))
    });
}

/// The same with main's exit (its pthread_exit) moved after the
/// exit_group: main entered it before, so glibc's count of live threads
/// had dropped by main's share when the last worker found itself last.
/// The replay runs main to that exit before the exit_group's owner
/// decrements; it did not (CI failed once in about 40 runs of the test
/// above, on a recording where the exit moved was main's). A recording
/// where main finished last (it made the exit_group itself) is taken
/// again.
#[test]
fn main_exit_logged_after_the_exit_group_is_ended_by_it() {
    exit_moved_after_the_exit_group("main-exit-after-group", |events, group, main| {
        events[..group].iter().position(|e| e.tid == main && is_syscall(e, libc::SYS_exit))
    });
}

fn is_syscall(e: &weft_record::Event, nr: i64) -> bool {
    matches!(&e.kind, weft_record::event::EventKind::Syscall(s) if s.nr == nr)
}

/// Records mainexit (at most twelve times, until `pick` finds a thread
/// exit, given the events, the exit_group's index and main's tid; five
/// found none once in CI),
/// moves that exit right after the exit_group, and asserts the edited
/// trace replays valid both ways.
fn exit_moved_after_the_exit_group(name: &str, pick: impl Fn(&[weft_record::Event], usize, weft_record::Tid) -> Option<usize>) {
    for attempt in 0..12 {
        let recorded = trace_dir(&format!("{name}-rec-{attempt}"));
        let rec = record(&recorded, &[program("mainexit").to_str().unwrap()], Stdio::null());
        assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
        let trace = weft_record::Trace::open(&recorded).unwrap();
        let mut events = trace.events;
        let group = events.iter().rposition(|e| is_syscall(e, libc::SYS_exit_group)).expect("an exit_group");
        let Some(exit) = pick(&events, group, trace.meta.pid) else { continue };
        let moved = events.remove(exit);
        events.insert(group, moved);
        let edited = edited_trace(&recorded, name, events);
        for flags in [&["--no-explore"][..], &["--digest"]] {
            let rep = replay(&edited, flags);
            assert_eq!(rep.status.code(), Some(0), "{flags:?}: {}", err(&rep));
            assert!(err(&rep).contains("replay valid"), "{flags:?}: {}", err(&rep));
        }
        return;
    }
    panic!("twelve recordings without the thread exit to move");
}

/// A signal one thread sends another blocked in a read (pthread_kill) is
/// delivered in that read in the replay, as recorded: with SA_RESTART the
/// read goes on, without it the read fails with EINTR. Sent at the kill,
/// it reached the receiver before its read and the read restarted: the
/// replay printed other EINTR counts (without the runtime) or failed at
/// the receiver's next event (with it). Both recorders, 3 recordings each.
#[test]
fn a_signal_from_another_thread_interrupts_a_blocking_read_as_recorded() {
    record_and_replay_both_ways("killread", 3, |out, _| out.contains("SA_RESTART: eintr=0 got=1"));
}

/// Threads that send their own process a signal (`kill(getpid(), ...)`,
/// tests/c/killself.c): the replay sends each as a tgkill to the thread
/// the log shows taking it next (or, when that is the sender and the log
/// has it take the signal later, leaves it to that logged delivery).
/// Sent to the process, the kernel gave it to the sender, which runs,
/// where the recording had the main thread take it in its wait: 6
/// recordings of 6 failed in log order before. A signal whose delivery
/// the log places after other events of the receiver is delivered there,
/// not sent at the kill: sent there, it reached the receiver at its next
/// resume, before those events (with `--no-inprocess`, 3 recordings of 6
/// failed in log order with that; 0 of 18 without). Each recorder, four
/// recordings, at least three valid in log order (one of 3 failed once
/// in a CI run before the change above).
#[test]
fn a_signal_a_thread_sends_its_own_process_reaches_the_recorded_thread() {
    for (mode, flags) in [("inprocess", &[][..]), ("ptrace", &["--no-inprocess"])] {
        let valid = valid_in_log_order("killself", mode, flags, 4, |out| out.lines().filter(|l| *l == "sent").count() == 60);
        assert!(valid >= 3, "{mode}: {valid} of 4 recordings valid in log order");
    }
}

/// Records C program `prog` (tests/c) `runs` times with recorder `flags`
/// (traces named after `mode`), asserts `check` on each recording's
/// stdout, and replays each with `--no-explore`: returns how many were
/// valid in log order, each printing what its recording printed.
fn valid_in_log_order(prog: &str, mode: &str, flags: &[&str], runs: usize, check: impl Fn(&str) -> bool) -> usize {
    let path = program(prog);
    let mut valid = 0;
    for n in 0..runs {
        let name = format!("{prog}-{mode}-{n}");
        let trace = trace_dir(&name);
        let rec = record_with(&trace, flags, &[path.to_str().unwrap()], Stdio::null());
        assert!(check(&String::from_utf8_lossy(&rec.stdout)), "{name}: {}", err(&rec));
        let rep = replay(&trace, &["--no-explore"]);
        if err(&rep).contains("replay valid") {
            assert_replays_as_recorded(&name, &rec, &rep);
            valid += 1;
        } else {
            eprintln!("{name}: invalid in log order:\n{}", err(&rep));
        }
    }
    valid
}

/// Threads that raise SIGUSR1 and kill their own process with SIGUSR2,
/// whose handler prints with getpid and gettid, which the runtime buffers
/// (tests/c/raisekill.c). What the replay now does as the recording did:
/// - a second signal the kernel gave at the entry of the first one's
///   handler is made pending with the first, before the thread runs on;
/// - a kill whose signal the log delivers after other events of its
///   thread is delivered there, not where the thread next resumed;
/// - a thread whose next event is a signal that hit its code waits where
///   its last event left it, and the search for the place starts there;
/// - a signal at a thread's first runtime call, before its slot request,
///   runs its handler inside the call (its calls not buffered);
/// - a write whose lock was free or taken leaves the same stack.
/// The build before failed in log order in 6 recordings of 6; this one in
/// about 1 of 20 (stack garbage a lazy binding left differs at a signal
/// that hit a write). Five recordings, at least four valid in log order.
#[test]
fn threads_raising_and_killing_their_own_process_replay_in_log_order() {
    let valid = valid_in_log_order("raisekill", "inprocess", &[], 5, |out| out.lines().filter(|l| l.starts_with("thread ")).count() == 80);
    assert!(valid >= 4, "{valid} of 5 recordings valid in log order");
}

/// A signal that interrupted pselect or ppoll, which let it through with
/// their own mask while the program blocks it (as GNU make waits for
/// SIGCHLD), is delivered under that mask in the replay, and the
/// program's mask is as recorded afterwards. The replay used to unblock
/// the signal for good, with a warning, and fail at the next wait. Both
/// recorders.
#[test]
fn a_signal_in_a_wait_with_its_own_mask_replays() {
    for rep in record_and_replay_both_ways("maskwait", 1, |out, _| out.contains("ppoll -1 errno 4 blocked 1")) {
        assert!(!err(&rep).contains("warning"), "{}", err(&rep));
    }
}

/// A poll and a sleep that a signal without a handler interrupts (SIGCHLD
/// reaches a traced program's threads) are resumed by the kernel through
/// restart_syscall, which is logged as the call it resumes: the poll's
/// revents are logged and written back. restart_syscall was an
/// unsupported call before, with a warning, and the replay failed at the
/// poll's output. Both recorders, no warning.
#[test]
fn calls_resumed_through_restart_syscall_replay() {
    record_and_replay_both_ways("restartpoll", 1, |out, err| out.contains("poll 1 revents 0x1") && !err.contains("warning"));
}

/// A thread that creates a thread where the log has no spawn (a replay
/// that took another way there: glibc's malloc reused an arena where the
/// recording made one) is an unmatched event the search can work on, not
/// an internal error ("did not complete its syscall"). The trace is
/// lockwait's with its one spawn, and that thread's events, taken out.
#[test]
fn a_spawn_the_log_does_not_have_is_an_unmatched_event() {
    let recorded = trace_dir("nospawn-rec");
    let rec = record(&recorded, &[program("lockwait").to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    let mut events = weft_record::Trace::open(&recorded).unwrap().events;
    let spawn = events.iter().position(|e| matches!(e.kind, weft_record::EventKind::Spawn { .. })).expect("a spawn");
    let weft_record::EventKind::Spawn { child, .. } = events.remove(spawn).kind else { unreachable!() };
    events.retain(|e| e.tid != child);
    let edited = edited_trace(&recorded, "nospawn", events);
    let rep = replay(&edited, &["--no-explore"]);
    assert!(err(&rep).contains("created a task, where the log has no spawn"), "{}", err(&rep));
    assert!(!err(&rep).contains("weft: error"), "{}", err(&rep));
}

#[test]
fn seed_000_figure_1_passing_form() {
    let (rec, _) = simple("fig1");
    assert!(String::from_utf8_lossy(&rec.stdout).contains("req_cnt=40 buf_len=1020"));
}

#[test]
fn digest_is_identical_across_replays() {
    let trace = trace_dir("digest");
    record(&trace, &[program("prodcons").to_str().unwrap()], Stdio::null());
    let digest = |o: &std::process::Output| -> Vec<String> {
        err(o).lines().filter(|l| l.starts_with("weft-digest") || l.starts_with("weft: digest")).map(String::from).collect()
    };
    let a = replay(&trace, &["--digest"]);
    let b = replay(&trace, &["--digest"]);
    assert_eq!(a.status.code(), Some(0), "{}", err(&a));
    let (da, db) = (digest(&a), digest(&b));
    assert!(da.len() > 10, "too few digest lines: {da:?}");
    assert_eq!(da, db);
}

#[test]
fn unknown_syscall_is_logged_as_unsupported_with_warnings() {
    let trace = trace_dir("unsupported");
    let rec = record(&trace, &[program("unsupported").to_str().unwrap()], Stdio::null());
    assert!(err(&rec).contains("warning: syscall personality is not supported"), "{}", err(&rec));
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    assert!(String::from_utf8_lossy(&dump.stdout).contains("UNSUPPORTED"));
    let rep = replay(&trace, &[]);
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert!(err(&rep).contains("personality is unsupported; replaying its result only"), "{}", err(&rep));
    assert_eq!(rep.stdout, rec.stdout);
}

/// Timer signals, taken by one thread: in a read without SA_RESTART (EINTR),
/// in a read with SA_RESTART (restarted), in a condition wait, and while the
/// thread spins through a mutex (delivered at a synchronization point), in
/// sigsuspend, and in nanosleep, whose time left the replay must write back
/// (the output prints it to the nanosecond).
#[test]
fn timer_signals_interrupt_syscalls_and_spins() {
    let trace = trace_dir("alarm");
    let rec = record(&trace, &[program("alarm").to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    let expected = "read: -1 (Interrupted system call), hits 1\nread again: 1 'x', hits 2\ncondition met, hits 3\nspun until hit 4\nsuspended until hit 5, SIGALRM blocked again: yes\nnanosleep: -1 (Interrupted system call), hits 6, 1.";
    assert!(out.starts_with(expected) && out.ends_with(" s left\njoined\n"), "{out}{}", err(&rec));
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    // The condition wait's: in its futex wait, shown at the in-process
    // runtime's marker for the wait (where a replay delivers it).
    assert!(dump.contains("(interrupted weft_sync = -512)"), "no signal in the condition wait:\n{dump}");
    for kind in [
        "(interrupted read = -512)",
        "(asynchronous)",
        "(interrupted rt_sigsuspend = -514)",
        "(interrupted clock_nanosleep = -516)",
    ] {
        assert!(dump.contains(kind), "no signal logged as {kind}:\n{dump}");
    }
    let rep = replay(&trace, &["--no-explore"]);
    assert_replays_as_recorded("alarm", &rec, &rep);
}

/// A timer signal with its default action kills the program in a read; the
/// replay delivers it in that read and ends the same way, at the same pc.
#[test]
fn fatal_timer_signal_in_a_blocking_read() {
    let trace = trace_dir("alarm-fatal");
    let rec = record(&trace, &[program("alarm").to_str().unwrap(), "fatal"], Stdio::null());
    assert_eq!(rec.status.code(), Some(128 + 14), "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert!(err(&rep).contains("the program was killed by SIGALRM in thread"), "{}", err(&rep));
}

/// Starts `weft record` of tests/c/NAME.c in a process group of its own,
/// as a shell starts a job, reads the "ready PID" line the program prints,
/// and waits until its main thread is blocked in syscall `main_nr` and no
/// thread runs. Returns the recorder, its stdout reader, the line, and
/// the program's pid.
fn record_until_blocked(
    trace: &std::path::Path,
    name: &str,
    main_nr: u32,
) -> (std::process::Child, std::io::BufReader<std::process::ChildStdout>, String, i32) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut child = weft()
        .args(["record", "-o"])
        .arg(trace)
        .arg("--")
        .arg(program(name))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("run weft record");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid = line.strip_prefix("ready ").and_then(|p| p.trim().parse::<i32>().ok()).expect("ready PID");
    // /proc/PID/task/TID/syscall: the number and arguments of the syscall
    // a thread is blocked in, or "running" (proc(5)).
    let syscall = |tid: &str| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).unwrap_or_default();
    let blocked = || {
        let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        syscall(&pid.to_string()).starts_with(&format!("{main_nr} "))
            && tasks.iter().all(|t| !syscall(t).starts_with("running"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !blocked() {
        assert!(std::time::Instant::now() < deadline, "{name} (pid {pid}) never blocked in syscall {main_nr}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    (child, stdout, line, pid)
}

/// ^C while recording reaches the program (its handler runs, its read fails
/// with EINTR) and not weft, which records to the end; the replay delivers
/// SIGINT in that read.
#[test]
fn ctrl_c_while_recording() {
    let trace = trace_dir("sigint");
    let (child, mut stdout, line, _) = record_until_blocked(&trace, "sigint", 0);
    // What a terminal does on ^C: SIGINT to the whole process group.
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let rec = child.wait_with_output().unwrap();
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    assert_eq!(rest, "read: -1 (Interrupted system call), SIGINT taken: yes\n");
    let rep = replay(&trace, &["--no-explore"]);
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert_eq!(String::from_utf8_lossy(&rep.stdout), format!("{line}{rest}"));
}

/// `kill -9` of the program while recording: the trace ends with SIGKILL,
/// which has no delivery stop; the replay matches every event and ends the
/// same way.
#[test]
fn sigkill_from_outside() {
    kill_9_replays_to_that_end("sigkill", "sigint", 0);
}

/// Records tests/c/NAME.c until its main thread blocks in syscall
/// `main_nr`, kills it with SIGKILL, and checks that weft exits 137 and the
/// replay ends the same way.
fn kill_9_replays_to_that_end(trace_name: &str, name: &str, main_nr: u32) {
    let trace = trace_dir(trace_name);
    let (child, _stdout, _, pid) = record_until_blocked(&trace, name, main_nr);
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let rec = child.wait_with_output().unwrap();
    assert_eq!(rec.status.code(), Some(128 + 9), "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert!(err(&rep).contains("the program was killed by SIGKILL in thread"), "{}", err(&rep));
}

/// A program that hung (every thread in a futex wait for ever) and was
/// killed with `kill -9` while recording: the replay, whose threads block
/// where the recorded ones did, ends the same way instead of reporting a
/// deadlock.
#[test]
fn hung_program_killed_while_recording() {
    kill_9_replays_to_that_end("hang", "hang", libc::SYS_futex as u32);
}

/// A signal one thread sends another that blocks it is delivered where the
/// receiver unblocks it, after synchronization points at which it was
/// already the log's next event.
#[test]
fn signal_to_a_thread_that_blocks_it() {
    let trace = trace_dir("sigmask");
    let rec = record(&trace, &[program("sigmask").to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "handled before unblocking: no, after: yes\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_replays_as_recorded("sigmask", &rec, &rep);
}

/// Real-time signals that programs get without asking: pthread_cancel's
/// (signal 32), the one glibc sends every thread when a threaded process
/// calls setuid or setgid (33), and SIGRTMIN+1 from a timer. The recorder
/// used to stop with "EINVAL" at the first one (nix's wait status has no
/// real-time signals); each is now an event, named as gdb names it.
#[test]
fn real_time_signals_record_and_replay() {
    let trace = trace_dir("rtsignals");
    let rec = record(&trace, &[program("rtsignals").to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    assert_eq!(out, "cleanup reader\nreader canceled\nexiter 7\nticks 5\n", "{}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_replays_as_recorded("rtsignals", &rec, &rep);
    let dump = weft().args(["dump", trace.to_str().unwrap()]).output().unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    for name in ["signal SIG32", "signal SIG33", "signal SIG35"] {
        assert!(dump.contains(name), "{name} in:\n{dump}");
    }
}
