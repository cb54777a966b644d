//! The interactive session's API (`weft_replay::ReplaySession`), as the
//! gdb server, the coming TUI and scripts use it, on a recording of
//! tests/c/counter.c (three workers, 20 locked increments each).

mod common;
use common::*;
use std::process::Stdio;
use weft_replay::{ReplaySession, Resume, SessionOptions, Stop};

fn counter_trace(name: &str) -> weft_record::Trace {
    let exe = debug_program("counter");
    let dir = trace_dir(name);
    let rec = record(&dir, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    weft_record::Trace::open(&dir).expect("open the trace")
}

/// With `stop_at_thread_events`, continuing stops at each worker's
/// creation (by main) and exit, under recorded tids, then at the exit.
#[test]
fn thread_events_stop_a_continue() {
    let trace = counter_trace("session-threads");
    let opts = SessionOptions { stop_at_thread_events: true, ..Default::default() };
    let mut session = ReplaySession::start(&trace, opts).expect("start");
    let main = trace.meta.pid;
    let (mut created, mut exited) = (Vec::new(), Vec::new());
    let code = loop {
        match session.resume(Resume::Continue, &mut || false).expect("resume") {
            Stop::ThreadCreated { tid, parent } => {
                assert_eq!(parent, main, "main creates the workers");
                assert!(session.threads().contains(&tid), "{tid} is listed once created");
                created.push(tid);
            }
            Stop::ThreadExited { tid } => {
                assert!(!session.threads().contains(&tid), "{tid} is not listed once it exited");
                exited.push(tid);
            }
            Stop::Exited { code } => break code,
            other => panic!("unexpected stop {other:?}"),
        }
    };
    assert_eq!(code, 0);
    let recorded: std::collections::BTreeSet<_> = trace.events.iter().map(|e| e.tid).filter(|&t| t != main && t != 0).collect();
    assert_eq!(created.iter().copied().collect::<std::collections::BTreeSet<_>>(), recorded, "every worker, under its recorded tid");
    exited.sort();
    created.sort();
    assert_eq!(exited, created, "every worker exits");
    // The end is the end: going on repeats it.
    assert_eq!(session.resume(Resume::Continue, &mut || false).expect("resume"), Stop::Exited { code: 0 });
}

/// The libraries come from the loader's link_map chain: none before the
/// loader ran, libc once the program runs; and going to an event again,
/// from after it, gives every thread the same registers.
#[test]
fn libraries_and_an_exact_return_to_an_event() {
    let trace = counter_trace("session-goto");
    let mut session = ReplaySession::start(&trace, SessionOptions::default()).expect("start");
    assert!(session.libraries().expect("libraries").is_empty(), "nothing is loaded at the first instruction");
    // The first thread spawn: libc is linked by then.
    let target = trace.events.iter().position(|e| matches!(e.kind, weft_record::EventKind::Spawn { .. })).expect("a spawn") as u64;
    session.goto_event(target, &mut |_| {}).expect("goto");
    let names: Vec<String> = session.libraries().expect("libraries").iter().map(|l| String::from_utf8_lossy(&l.name).into_owned()).collect();
    assert!(names.iter().any(|n| n.contains("libc.so")), "libc is mapped: {names:?}");
    let state = |s: &ReplaySession<'_>| -> Vec<(i32, u64, u64, u64)> {
        s.threads().iter().map(|&t| {
            let r = s.registers(t).expect("registers").regs;
            (t, r.rip, r.rsp, r.rax)
        }).collect()
    };
    let (before, when) = (state(&session), session.when().mark);
    assert_eq!(when.event, target);
    session.resume(Resume::Continue, &mut || false).expect("to the end");
    session.goto_event(target, &mut |_| {}).expect("goto again");
    assert_eq!(session.when().mark, when, "the same position");
    assert_eq!(state(&session), before, "the same registers in every thread");
}
