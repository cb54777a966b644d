//! Epochs (seed 003 §2.2.3) in real recordings: tests/c/processes.c forks,
//! vforks and execs, so its trace is cut into several epochs, each closed
//! by a fork or an exec (or another irrevocable call, or the end); `weft
//! dump` heads each epoch's events with a line saying so and gives every
//! syscall its class, and `weft dump --json` gives every event its epoch.
//! The gdb server's `monitor epochs`, `monitor epoch N` and `monitor epoch
//! back` list and visit the same epochs.

mod common;
use common::gdb::*;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Records processes.c (built with -O0) into a fresh trace named `name`.
/// Returns (trace, executable).
fn processes_trace(name: &str) -> (PathBuf, PathBuf) {
    let exe = debug_program("processes");
    let trace = trace_dir(name);
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    (trace, exe)
}

/// `weft dump --json` of `trace`: the meta line, then one object per event.
fn dump_json(trace: &Path) -> (Value, Vec<Value>) {
    let out = weft().args(["dump", "--json"]).arg(trace).output().unwrap();
    assert!(out.status.success(), "{}", err(&out));
    let mut lines = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<Value>>();
    let meta = lines.remove(0);
    (meta, lines)
}

/// The first event of each epoch, from the dump's `epoch` fields (which
/// must count up by one from 0, in event order).
fn epoch_starts(events: &[Value]) -> Vec<u64> {
    let mut starts = Vec::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["index"].as_u64(), Some(i as u64));
        let epoch = e["epoch"].as_u64().unwrap_or_else(|| panic!("no epoch: {e}")) as usize;
        if epoch == starts.len() {
            starts.push(i as u64);
        }
        assert_eq!(epoch + 1, starts.len(), "epochs count up by one: {e}");
    }
    starts
}

#[test]
fn forks_and_execs_close_epochs_in_the_dump() {
    let (trace, _) = processes_trace("epochs-dump");
    let (meta, events) = dump_json(&trace);
    let starts = epoch_starts(&events);
    assert!(starts.len() > 1, "{starts:?}");
    assert_eq!(meta["meta"]["epochs"].as_u64(), Some(starts.len() as u64));
    // Each epoch but the last ends with an irrevocable event; the last
    // with the end.
    let closing: Vec<&Value> = starts[1..].iter().map(|&s| &events[s as usize - 1]).collect();
    for e in &closing {
        assert_eq!(e["class"], "irrevocable", "{e}");
    }
    assert_eq!(events.last().unwrap()["kind"], "end");
    let forks = closing.iter().filter(|e| e["kind"] == "spawn").count();
    let execs = closing.iter().filter(|e| e["kind"] == "exec").count();
    // processes.c: six fork/vfork calls in the first process, one in a
    // child, and three execs (true, echo, itself).
    assert!(forks >= 7 && execs == 3, "{forks} forks and {execs} execs close epochs");
    // Every process spawn and exec closes one; no thread spawn does.
    for (i, e) in events.iter().enumerate() {
        let process = e["kind"] == "exec" || (e["kind"] == "spawn" && e["flags"].as_u64().unwrap() & libc::CLONE_THREAD as u64 == 0);
        assert_eq!(starts.contains(&(i as u64 + 1)), process || e["class"] == "irrevocable" && e["result"].as_i64() >= Some(0), "{e}");
        if e["kind"] == "syscall" {
            assert!(e["class"].is_string(), "every syscall has its class: {e}");
        }
    }

    let out = weft().arg("dump").arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("── epoch ")).collect();
    assert_eq!(heads.len(), starts.len(), "{text}");
    assert!(heads[0].starts_with("── epoch 0: events #0..#"), "{text}");
    assert!(heads.iter().any(|h| h.contains(" fork of process ") && h.ends_with("(irrevocable)")), "{text}");
    assert!(heads.iter().any(|h| h.contains(" exec /usr/bin/echo (irrevocable)")), "{text}");
    assert!(heads.last().unwrap().contains("closed by") && heads.last().unwrap().contains("the end (exited with status 0)"), "{text}");
    // A head comes right before its epoch's first event.
    for (k, &s) in starts.iter().enumerate() {
        let at = text.find(&format!("── epoch {k}: events #{s}..")).unwrap_or_else(|| panic!("epoch {k} at #{s}:\n{text}"));
        let next = text[at..].lines().nth(1).unwrap();
        assert!(next.starts_with(&format!("#{s} ")), "{next}");
    }
    assert!(text.contains("wait4(") && text.contains("[recordable]"), "{text}");
}

/// `monitor epochs` lists the dump's epochs; `monitor epoch N` goes to
/// the start of epoch N (its first event is the next); `monitor epoch
/// back` goes to the start of the current epoch, then of the one before.
#[test]
fn monitor_visits_the_recorded_epochs() {
    let (trace, exe) = processes_trace("epochs-monitor");
    let (_, events) = dump_json(&trace);
    let starts = epoch_starts(&events);
    let n = starts.len() - 2;
    let goto = format!("monitor epoch {n}");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "@epochs",
            "monitor epochs",
            "break status_of",
            "continue",
            "continue",
            "@when2",
            "monitor when",
            "monitor epoch back",
            "@when3",
            "monitor when",
            "monitor epoch back",
            "@when4",
            "monitor when",
            "@goto",
            goto.as_str(),
            "@when1",
            "monitor when",
        ],
    );
    let listed = t.section("epochs");
    assert_eq!(listed.lines().filter(|l| l.contains(" epoch ") && l.contains("threads")).count(), starts.len(), "{}", t.text);
    assert!(listed.contains("=> epoch 0: events #0.."), "{}", t.text);
    let when = |s: &str| {
        let section = t.section(s);
        let epoch = section.split("epoch ").nth(1).and_then(|w| w.split_whitespace().next()).and_then(|w| w.parse::<usize>().ok());
        (event_number(section), epoch.unwrap_or_else(|| panic!("no epoch in {s}:\n{}", t.text)))
    };
    assert_eq!(when("when1"), (starts[n], n), "{}", t.text);
    // The second stop at status_of (true's): after the first fork.
    let (event2, k) = when("when2");
    assert!(event2 > starts[1] && k >= 1, "{}", t.text);
    assert!(starts[k] <= event2 && starts.get(k + 1).is_none_or(|&s| event2 < s), "{}", t.text);
    let (event3, k3) = when("when3");
    assert_eq!((event3, k3), (starts[k], k), "back to the start of the current epoch:\n{}", t.text);
    assert_eq!(when("when4"), (starts[k - 1], k - 1), "then of the one before:\n{}", t.text);
}
