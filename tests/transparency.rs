//! The program behaves under weft as it does without it (weft issue 11):
//! the signal dispositions it starts with, the output a replay shows, the
//! initial stack of a rebuilt executable, mappings of deleted files and
//! devices, and signals that arrive while weft steps over a breakpoint.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// The program finds every signal at its default disposition and none
/// blocked, although the test harness (a Rust program) ignores SIGPIPE and
/// weft runs here with SIGINT ignored and SIGTERM blocked; the replay
/// starts it the same way.
#[test]
fn signals_start_at_their_defaults() {
    let trace = trace_dir("dispositions");
    let mut cmd = weft();
    cmd.arg("record").arg("-o").arg(&trace).arg("--").arg(program("dispositions"));
    // SAFETY: only sigaction and sigprocmask between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let rec = cmd.output().unwrap();
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    let out = String::from_utf8_lossy(&rec.stdout);
    assert_eq!(out, "SIGINT default, SIGPIPE default, SIGTERM default, 0 blocked\n");
    let rep = replay(&trace, &[]);
    assert_replays_as_recorded("dispositions", &rec, &rep);
}

/// `weft record -- yes | head -1`: yes dies of SIGPIPE, as without weft
/// (a shell reports 141), not of "Broken pipe" with status 1; the replay
/// ends the same way.
#[test]
fn a_closed_pipe_kills_with_sigpipe() {
    let trace = trace_dir("yes");
    let mut child = weft()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "y\n");
    let rec = child.wait_with_output().unwrap();
    assert_eq!(rec.status.code(), Some(141), "{}", err(&rec));
    assert!(err(&rec).contains("killed by SIGPIPE"), "{}", err(&rec));
    assert!(!err(&rec).contains("Broken pipe"), "{}", err(&rec));
    let rep = weft().args(["replay", "-a"]).arg(&trace).stdout(Stdio::null()).output().unwrap();
    assert!(err(&rep).contains("replay valid"), "{}", err(&rep));
    assert!(err(&rep).contains("the program was killed by SIGPIPE"), "{}", err(&rep));
}

/// Writes through `dup(1)`, `dup2(1, 7)`, `fcntl(1, F_DUPFD_CLOEXEC)`,
/// `dup(2)` and a forked child's inherited duplicate appear in the replay
/// on the stream they went to; writes to a descriptor 1 reopened onto
/// /dev/null do not.
#[test]
fn output_through_duplicated_descriptors_is_shown() {
    let (rec, rep) = record_and_replay("dupout", &[program("dupout").to_str().unwrap()], Stdio::null());
    let stdout = String::from_utf8_lossy(&rec.stdout);
    assert_eq!(
        stdout,
        "one\ntwo (dup)\nthree (dup2)\nfour (a thread, through F_DUPFD_CLOEXEC)\nfrom a child (the dup it inherited)\nfive (the dup still is stdout)\n"
    );
    assert!(err(&rep).starts_with("to stderr (dup of 2)\n"), "{}", err(&rep));
}

/// SIGUSR1 sent by one thread to another that locks and unlocks a mutex
/// in a loop: the replay finds it pending as it steps the thread over a
/// pthread breakpoint, and delivers it as recorded (it was a replay error,
/// "did not step over a breakpoint"). Recorded through ptrace alone: the
/// worker loops until a flag that main sets without a lock (a data race),
/// so with the runtime logging each lock, the number of turns it takes
/// after main sets the flag is in the log, and only a search for that data
/// race (fine-grained exploration, seed 000 §4.3, which weft does not do)
/// could replay it. Now and then (1 recording in 6 on 2026-11-28, with
/// this build and the one before) the search for a signal's hit state
/// does not find it: the worker reached the hit's pc with r10 and r11 as
/// a syscall leaves them, which the recording did not, and the signal,
/// delivered at a hit, can leave the replay to a livelock. So the replays
/// run with a 30 s livelock timeout (a search gives up after 27 s), and
/// two recordings of three must replay.
#[test]
fn a_signal_pending_at_a_breakpoint_is_delivered() {
    let mut valid = 0;
    for run in 0..3 {
        let name = format!("stepsig{run}");
        let trace = trace_dir(&name);
        let rec = record_with(&trace, &["--no-inprocess"], &[program("stepsig").to_str().unwrap()], Stdio::null());
        assert_eq!(String::from_utf8_lossy(&rec.stdout), "worker answered 50 signals\n");
        // In log order: a failed attempt can hunt for a signal's hit for
        // many seconds, and a search would make a thousand of them.
        let rep = replay(&trace, &["--no-explore", "--livelock-timeout", "30"]);
        if !err(&rep).contains("replay valid") {
            eprintln!("{name}: {}", err(&rep));
            continue;
        }
        assert_replays_as_recorded(&name, &rec, &rep);
        valid += 1;
    }
    assert!(valid >= 2, "{valid} recordings of 3 replayed");
}

/// A program that prints stack addresses replays valid, with the recorded
/// output, after its executable was deleted or rebuilt: the replay runs the
/// trace's copy with the recorded initial stack.
#[test]
fn a_deleted_or_rebuilt_executable_replays_with_the_recorded_stack() {
    for (name, change) in [("deleted", "rm"), ("rebuilt", "rebuild")] {
        let exe = scratch().join(format!("stackaddr-{name}"));
        std::fs::copy(program("stackaddr"), &exe).unwrap();
        let trace = trace_dir(&format!("stackaddr-{name}"));
        let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
        assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
        assert!(String::from_utf8_lossy(&rec.stdout).starts_with("local 0x7fff"), "{}", String::from_utf8_lossy(&rec.stdout));
        std::fs::remove_file(&exe).unwrap();
        if change == "rebuild" {
            std::fs::copy(program("dispositions"), &exe).unwrap();
        }
        let rep = replay(&trace, &[]);
        assert_replays_as_recorded(name, &rec, &rep);
        let what = if change == "rm" { "was deleted since the recording" } else { "changed since the recording" };
        assert!(err(&rep).contains(what), "{}", err(&rep));
    }
}

/// Mappings recorded and replayed, never a record-time error: a file
/// deleted before it is mapped, a memfd, /dev/zero private and shared, a
/// file changed through a shared mapping and mapped again, a file mapping
/// grown with mremap, and a large realloc; and a file mmap leaves the
/// program's argument registers as the kernel did (a replay that left its
/// own there kept a signal's recorded state from being found).
#[test]
fn deleted_device_shared_and_grown_mappings_replay() {
    let dir = scratch().join("mappings");
    std::fs::create_dir_all(&dir).unwrap();
    let argv = [program("mappings").to_str().unwrap().to_string(), dir.to_str().unwrap().to_string()];
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (rec, _) = record_and_replay("mappings", &argv, Stdio::null());
    assert_eq!(
        String::from_utf8_lossy(&rec.stdout),
        "deleted file: gone from the directory\n\
         after a raw mmap: argument registers kept\n\
         memfd: in a memfd\n\
         /dev/zero: 0 0 private zero page, shared zero page\n\
         shared before: AAAA written by write(2)\n\
         read back: BBBB written by write(2)\n\
         mapped again: BBBB written by write(2)\n\
         grown: page 1 of the file, page 2 of the file\n\
         realloc: kept by realloc\n"
    );
}
