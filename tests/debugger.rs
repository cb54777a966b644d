//! The debugger, end to end: the real gdb (`gdb -batch -nx`) and lldb-22
//! against `weft replay -s PORT TRACE` (and the scripted form `weft
//! replay TRACE -- GDB_ARGS`) on recordings of tests/c/counter.c,
//! tests/c/crash.c, tests/c/longloop.c and pbzip2, asserting on what the
//! debuggers print.
//!
//! counter.c: 3 workers (arguments 0, 1, 2; tls_id 100, 101, 102) each
//! call work_step() 20 times under a mutex; the k-th call of work_step(),
//! in whichever thread, finds `counter == k - 1` on entry.
//! crash.c: corrupt() (in the thread `corrupter`) stores 0x10 into `head`;
//! then use_head(), called from worker(), faults reading head->value.
//!
//! Every debugger session is killed after `SESSION_TIMEOUT` (a hang fails
//! the test); every server is killed with its process group when the test
//! ends.

mod common;
use common::gdb::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Records counter.c (built with -O0) into a fresh trace named `name`.
/// Returns (trace, executable).
fn counter_trace(name: &str) -> (PathBuf, PathBuf) {
    let exe = debug_program("counter");
    let trace = trace_dir(name);
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "counter=60 stats=20,20,20\n");
    (trace, exe)
}

/// Records crash.c (built with -O0). Returns (trace, executable, the pc
/// of the fault that `weft record` reported).
fn crash_trace(name: &str) -> (PathBuf, PathBuf, String) {
    let exe = debug_program("crash");
    let trace = trace_dir(name);
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(128 + 11), "{}", err(&rec));
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "sum=42\n");
    let e = err(&rec);
    let pc = e
        .split("at pc ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `at pc` in weft record's report: {e}"))
        .to_string();
    (trace, exe, pc)
}

/// Records longloop.c (built with -O0) into a fresh trace named `name`.
/// Returns (trace, executable).
fn longloop_trace(name: &str) -> (PathBuf, PathBuf) {
    let exe = debug_program("longloop");
    let trace = trace_dir(name);
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "result 42 counter 20000000\n", "{}", err(&rec));
    (trace, exe)
}

/// The recorded pid (the main thread's tid) and every recorded thread id
/// (sorted): the pid and every spawned thread, from `weft dump --json`.
fn recorded_tids(trace: &Path) -> (u32, Vec<u32>) {
    let dump = weft().args(["dump", "--json"]).arg(trace).output().unwrap();
    assert!(dump.status.success(), "{}", err(&dump));
    let mut tids = Vec::new();
    for line in String::from_utf8_lossy(&dump.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(pid) = v["meta"]["pid"].as_u64() {
            tids.push(pid as u32);
        }
        if v["kind"] == "spawn" {
            tids.push(v["child"].as_u64().unwrap() as u32);
        }
    }
    let pid = tids[0];
    tids.sort();
    (pid, tids)
}

/// The index of the last `spawn` event in the trace.
fn last_spawn_event(trace: &Path) -> u64 {
    let dump = weft().args(["dump", "--json"]).arg(trace).output().unwrap();
    String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "spawn")
        .map(|v| v["index"].as_u64().unwrap())
        .max()
        .expect("a spawn event")
}

/// Asserts that `section` shows a stop at the breakpoint on work_step
/// and returns the printed `id` argument.
fn work_step_stop(section: &str, transcript: &Transcript) -> i64 {
    assert!(section.contains("Breakpoint 1, work_step (id="), "no stop at work_step:\n{}", transcript.text);
    let id = section.split("work_step (id=").nth(1).unwrap();
    id.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// Parses a printed integer (`$3 = 101`).
fn int(section: &str) -> i64 {
    let v = printed(section);
    v.parse().unwrap_or_else(|_| panic!("not an integer: {v:?} in:\n{section}"))
}

// ---------------------------------------------------------------- gdb

#[test]
fn breakpoint_in_a_worker_thread() {
    let (trace, exe) = counter_trace("dbg-break");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["break work_step", "@stop", "continue", "bt", "@threads", "info threads"]);
    let stop = t.section("stop");
    work_step_stop(stop, &t);
    assert!(stop.contains("#0  work_step (id="), "{}", t.text);
    assert!(stop.contains(" in worker (arg="), "work_step is called from worker:\n{}", t.text);
    // Every recorded thread, under its recorded tid; the current one is a
    // worker stopped in work_step.
    let rows = info_threads(t.section("threads"));
    let mut tids: Vec<u32> = rows.iter().map(|r| r.2).collect();
    tids.sort();
    let (pid, recorded) = recorded_tids(&trace);
    assert_eq!(recorded.len(), 4, "main and 3 workers were recorded");
    assert_eq!(tids, recorded, "info threads shows the recorded threads:\n{}", t.text);
    let current: Vec<_> = rows.iter().filter(|r| r.0).collect();
    assert_eq!(current.len(), 1, "{}", t.text);
    assert!(current[0].3.contains("work_step"), "{}", t.text);
    assert_ne!(current[0].2, pid, "the stop is in a worker, not main:\n{}", t.text);
}

/// The program's output appears on the server's stdout as the session
/// first passes it, as in rr: not while weft searches for a schedule
/// before gdb connects (the build before printed it there, and never in
/// the session when a schedule was saved), and not again after going back.
#[test]
fn the_program_output_appears_once_as_the_session_passes_it() {
    let (trace, exe) = counter_trace("dbg-echo");
    let server = Server::start(&trace);
    let out = "counter=60 stats=20,20,20\n";
    let t = server.gdb(&exe, &["break work_step", "@stop", "continue"]);
    work_step_stop(t.section("stop"), &t);
    assert_eq!(server.stdout_text(), "", "nothing printed before work_step:\n{}", server.stderr_text());
    let t = server.gdb(&exe, &["@end", "continue"]);
    // The end of the recording: gdb stops at the exit, as with rr.
    assert!(t.section("end").contains("No more reverse-execution history"), "{}", t.text);
    assert_eq!(server.stdout_text(), out);
    let t = server.gdb(&exe, &["@back", "reverse-continue", "@end", "continue"]);
    assert!(t.section("back").contains("No more reverse-execution history"), "{}", t.text);
    assert_eq!(server.stdout_text(), out, "printed once");
}

/// `next` over a line that is a whole loop (tests/c/lineloop.c, 5,000
/// rounds): gdb range-steps it (`vCont;r`, which the stub offers), so the
/// session steps the line itself instead of taking a packet per
/// instruction (4 times faster on a 20,000-round loop: 6 s against 24 s
/// with the build before, which offered no range stepping), and stops at
/// the next line with the loop done.
#[test]
fn next_over_a_loop_on_one_line_range_steps() {
    let exe = debug_program("lineloop");
    let trace = trace_dir("dbg-lineloop");
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "result 10000\n", "{}", err(&rec));
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &["break 9", "continue", "set debug remote 1", "@next", "next", "set debug remote 0", "@after", "p counter", "info line *$pc"],
    );
    assert!(t.section("next").contains("vCont;r"), "gdb range-steps the line:\n{}", t.text);
    let after = t.section("after");
    assert!(after.contains("= 5000") && after.contains("Line 10 of"), "{}", t.text);
}

#[test]
fn info_threads_lists_every_worker() {
    let (trace, exe) = counter_trace("dbg-threads");
    let server = Server::start(&trace);
    // At the first work_step every worker has passed the barrier's start,
    // so each one's stack has worker() with its own argument.
    let t = server.gdb(&exe, &["break work_step", "continue", "@threads", "info threads", "@bt", "thread apply all bt"]);
    assert_eq!(info_threads(t.section("threads")).len(), 4, "main and 3 workers:\n{}", t.text);
    let bt = t.section("bt");
    for arg in ["arg=0x0", "arg=0x1", "arg=0x2"] {
        assert_eq!(bt.matches(&format!("worker ({arg})")).count(), 1, "one worker with {arg}:\n{}", t.text);
    }
    assert!(bt.contains("in main ()"), "main's thread too:\n{}", t.text);
}

#[test]
fn hardware_watchpoint_catches_each_write() {
    let (trace, exe) = counter_trace("dbg-watch");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &["@watch", "watch counter", "@hit1", "continue", "@hit2", "continue", "@hit3", "continue"],
    );
    assert!(t.section("watch").contains("Hardware watchpoint 1: counter"), "{}", t.text);
    for (hit, old) in [("hit1", 0), ("hit2", 1), ("hit3", 2)] {
        let s = t.section(hit);
        assert!(s.contains("Hardware watchpoint 1: counter"), "{hit}:\n{}", t.text);
        assert!(
            s.contains(&format!("Old value = {old}\nNew value = {}\n", old + 1)),
            "{hit}: write {old} -> {}:\n{}",
            old + 1,
            t.text
        );
        assert!(s.contains("work_step (id="), "{hit} is in work_step:\n{}", t.text);
    }
}

/// After three forward hits (0->1, 1->2, 2->3), reverse-continue stops at
/// the write that made the value 3, as gdb shows it backwards ("Old value
/// = 3", "New value = 2"), then at the one before; continuing forward
/// again meets the same write as the second forward hit.
#[test]
fn reverse_continue_to_the_previous_write() {
    let (trace, exe) = counter_trace("dbg-revwatch");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "watch counter",
            "continue",
            "continue",
            "continue",
            "@back1",
            "reverse-continue",
            "@value1",
            "print counter",
            "@back2",
            "reverse-continue",
            "@value2",
            "print counter",
            "@forward",
            "continue",
        ],
    );
    let b1 = t.section("back1");
    assert!(b1.contains("Hardware watchpoint 1: counter"), "{}", t.text);
    assert!(b1.contains("Old value = 3\nNew value = 2\n"), "{}", t.text);
    assert!(b1.contains("work_step"), "{}", t.text);
    assert_eq!(int(t.section("value1")), 2, "{}", t.text);
    assert!(t.section("back2").contains("Old value = 2\nNew value = 1\n"), "{}", t.text);
    assert_eq!(int(t.section("value2")), 1, "{}", t.text);
    assert!(t.section("forward").contains("Old value = 1\nNew value = 2\n"), "{}", t.text);
}

/// At the first work_step, `stepi 2` runs `mov counter,%rax; add $1,%rax`:
/// rax = 1. reverse-stepi undoes the add (rax = 0, pc one instruction
/// back); stepi redoes it: the same pc and registers as before.
#[test]
fn reverse_stepi_then_stepi_returns_to_the_same_state() {
    let (trace, exe) = counter_trace("dbg-revstepi");
    let server = Server::start(&trace);
    let regs = ["p/x $pc", "info registers rip rsp rax", "p $rax"];
    let mut cmds = vec!["break work_step", "continue", "stepi 2", "@before"];
    cmds.extend(regs);
    cmds.extend(["@stepping", "reverse-stepi", "@back"]);
    cmds.extend(regs);
    cmds.extend(["@stepping", "stepi", "@again"]);
    cmds.extend(regs);
    cmds.push("@end");
    let t = server.gdb(&exe, &cmds);
    let (before, back, again) = (t.section("before"), t.section("back"), t.section("again"));
    assert!(before.contains("rip") && before.contains("rsp") && before.contains("rax"), "{}", t.text);
    assert_eq!(without_history_numbers(before), without_history_numbers(again), "{}", t.text);
    assert_eq!(int(before), 1, "rax after the add:\n{}", t.text);
    assert_eq!(int(back), 0, "rax before the add:\n{}", t.text);
    let pc = |s: &str| -> u64 {
        let v = s.lines().find(|l| l.starts_with('$')).unwrap().split(" = ").nth(1).unwrap().trim().to_string();
        u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
    };
    assert_eq!(pc(before) - pc(back), 4, "`add $0x1,%rax` is 4 bytes:\n{}", t.text);
}

#[test]
fn step_next_finish_and_their_reverses() {
    let (trace, exe) = counter_trace("dbg-step");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break work_step",
            "continue",
            "@next",
            "next",
            "print counter",
            "@reverse-next",
            "reverse-next",
            "print counter",
            "@reverse-finish",
            "reverse-finish",
            "@step",
            "step",
            "@finish",
            "finish",
            "@reverse-step",
            "reverse-step",
        ],
    );
    let next = t.section("next");
    assert!(next.contains("stats[id] += 1;"), "next goes to the line after counter++:\n{}", t.text);
    assert_eq!(int(next), 1, "{}", t.text);
    let rnext = t.section("reverse-next");
    assert!(rnext.contains("counter++;"), "{}", t.text);
    assert_eq!(int(rnext), 0, "{}", t.text);
    let rfinish = t.section("reverse-finish");
    // (gdb -batch does not print "Run back to call of": no tty.)
    assert!(rfinish.contains(" in worker (arg="), "{}", t.text);
    assert!(rfinish.contains("work_step(id, i);"), "stops at the call in worker:\n{}", t.text);
    assert!(t.section("step").contains("work_step (id="), "step enters the same call again:\n{}", t.text);
    let finish = t.section("finish");
    assert!(finish.contains("worker (arg="), "{}", t.text);
    assert!(finish.contains("pthread_mutex_unlock(&lock);"), "back in worker after the call:\n{}", t.text);
    assert!(t.section("reverse-step").contains("work_step (id="), "back into work_step's last line:\n{}", t.text);
}

/// calls.c: main calls add() on three lines. A `next` over a call steps
/// into it before it runs to the return: going back, gdb reverse-steps
/// into the call's end, sets a breakpoint at add's entry and continues
/// back, which must stop at that call's entry, reached by a single step,
/// and not at an earlier one.
#[test]
fn reverse_next_and_reverse_continue_find_a_call_entered_by_stepping() {
    let exe = debug_program("calls");
    let trace = trace_dir("dbg-calls");
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "a=4 total=6\n", "{}", err(&rec));
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break main",
            "continue",
            "next",
            "next",
            "next",
            "@reverse-next",
            "reverse-next",
            "print a",
            "break add",
            "step",
            "next",
            "@reverse-continue",
            "reverse-continue",
            "print x",
        ],
    );
    let rnext = t.section("reverse-next");
    assert!(rnext.contains("second call"), "reverse-next from the third call's line goes to the second's:\n{}", t.text);
    assert_eq!(int(rnext), 2, "{}", t.text);
    let rcont = t.section("reverse-continue");
    assert!(rcont.contains("Breakpoint 2, add (x=2)"), "back to the entry of the call stepped into:\n{}", t.text);
    assert_eq!(int(rcont), 2, "{}", t.text);
}

/// The replay starts at the exec stop, before _start's first
/// instruction: there is nothing to go back to, which gdb hears as the
/// end of its history (the connection stays), and the first stepi
/// executes that instruction.
#[test]
fn at_the_start_reverse_is_no_more_history_and_stepi_moves() {
    let (trace, exe) = counter_trace("dbg-start");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "@start",
            "p/x $pc",
            "@reverse-stepi",
            "reverse-stepi",
            "@reverse-continue",
            "reverse-continue",
            "@stepi",
            "stepi",
            "p/x $pc",
            "@when",
            "monitor when",
        ],
    );
    for back in ["reverse-stepi", "reverse-continue"] {
        assert!(t.section(back).contains("No more reverse-execution history."), "{back}:\n{}", t.text);
    }
    assert_ne!(printed(t.section("start")), printed(t.section("stepi")), "the first stepi moves the pc:\n{}", t.text);
    assert!(t.section("when").contains("segment 0 +1 instruction "), "{}", t.text);
    assert!(!t.text.contains("Remote connection closed"), "{}", t.text);
}

/// With another thread selected than the one at the breakpoint, gdb steps
/// that one off it, then sends `Hc0` and `bs` for its selected thread:
/// reverse-stepi moves the selected thread.
#[test]
fn reverse_stepi_moves_the_selected_thread() {
    let (trace, exe) = counter_trace("dbg-select");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &["break work_step", "continue", "thread 1", "@before", "p/x $pc", "@reverse-stepi", "reverse-stepi", "p $_thread", "@pc", "p/x $pc"],
    );
    let back = t.section("reverse-stepi");
    assert!(!back.contains("received signal"), "{}", t.text);
    assert_eq!(printed(back), "1", "the selected thread stays selected:\n{}", t.text);
    assert_ne!(printed(t.section("before")), printed(t.section("pc")), "main went back an instruction:\n{}", t.text);
}

/// A stop selects the thread it is in: after `thread 1` and a continue
/// that stops in a worker, gdb sends no `Hg` for that worker (the stop
/// reply named it), and reverse-stepi then moves the worker, not main.
#[test]
fn reverse_stepi_after_a_stop_moves_the_thread_that_stopped() {
    let (trace, exe) = counter_trace("dbg-select-stop");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break work_step",
            "continue",
            "thread 1",
            "continue",
            "continue",
            "reverse-continue",
            "@stopped",
            "p $_thread",
            "@reverse-stepi",
            "reverse-stepi",
            "p $_thread",
            "@frame",
            "bt 1",
        ],
    );
    let (stopped, back) = (t.section("stopped"), t.section("reverse-stepi"));
    assert_ne!(printed(stopped), "1", "reverse-continue stops in a worker:\n{}", t.text);
    assert!(!back.contains("received signal"), "{}", t.text);
    assert_eq!(printed(back), printed(stopped), "the worker that stopped stays selected:\n{}", t.text);
    assert!(t.section("frame").contains("counter.c:21"), "the worker went back into work_step's prologue:\n{}", t.text);
}

/// A watchpoint's store after a loop of 20,000,000 rounds with no syscall
/// (one segment of the replay): reverse-continue goes back to the moment
/// before the store without single-stepping the loop, well within the
/// session's timeout (single steps took minutes for 300,000 rounds).
#[test]
fn reverse_continue_to_a_store_after_a_long_loop() {
    let (trace, exe) = longloop_trace("dbg-longloop");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["watch result", "continue", "@back", "reverse-continue", "@value", "print result", "@counter", "print counter"]);
    let back = t.section("back");
    assert!(back.contains("Old value = 42\nNew value = 0\n"), "{}", t.text);
    assert!(back.contains("worker") && back.contains("longloop.c:14"), "{}", t.text);
    assert_eq!(int(t.section("value")), 0, "{}", t.text);
    assert_eq!(int(t.section("counter")), 20_000_000, "the loop is done before the store:\n{}", t.text);
}

/// reverse-stepi from right after getppid's `syscall` (a segment's start:
/// the syscall is a logged event) goes back to the `syscall` instruction,
/// found at the speed of traps, not by single-stepping the thread's
/// previous segment, which holds the 20,000,000-round loop.
#[test]
fn reverse_stepi_over_a_syscall_after_a_long_loop() {
    let (trace, exe) = longloop_trace("dbg-longloop-syscall");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["break getppid", "continue", "@after", "stepi 2", "x/i $pc", "@back", "reverse-stepi", "x/i $pc"]);
    assert!(t.section("after").contains("ret"), "two instructions into getppid is after its syscall:\n{}", t.text);
    let back = t.section("back");
    assert!(back.contains("getppid") && back.contains("syscall"), "{}", t.text);
    assert!(!back.contains("received signal"), "{}", t.text);
}

/// A resume the replay cannot carry out is a stop, not a dropped client:
/// a step of a thread that is not live here (gdb's selection from another
/// point of the recording) ends in that thread, and a reverse step with
/// nothing before is the start of the history (`replaylog:begin`).
#[test]
fn a_step_of_a_missing_thread_and_a_reverse_step_at_the_start_are_stops() {
    let (trace, exe) = counter_trace("dbg-missing");
    let mut server = Server::start(&trace);
    {
        let mut c = Rsp::connect(server.port).expect("connect");
        let step = c.ask("vCont;s:p1.7ffffff0").expect("a stop reply");
        assert!(step.starts_with("T05") && step.contains("7ffffff0;"), "{step}\n{}", server.stderr_text());
        assert_eq!(c.ask("Hcp1.0").expect("reply"), "OK");
        let back = c.ask("bs").expect("a stop reply");
        assert!(back.contains("replaylog:begin"), "{back}\n{}", server.stderr_text());
        assert!(c.ask("qfThreadInfo").expect("reply").starts_with('m'), "{}", server.stderr_text());
    }
    assert!(server.alive(), "{}", server.stderr_text());
    assert!(!server.stderr_text().contains("dropped"), "{}", server.stderr_text());
    assert_usable(&server, &exe);
}

/// gdb's `hbreak` (a `Z1` packet) stops as `break` does, forwards and
/// backwards.
#[test]
fn hbreak_stops_forwards_and_backwards() {
    let (trace, exe) = counter_trace("dbg-hbreak");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["@hbreak", "hbreak work_step", "@first", "continue", "print counter", "continue", "@back", "reverse-continue", "print counter"]);
    assert!(t.section("hbreak").contains("Hardware assisted breakpoint 1 at"), "{}", t.text);
    for (section, counter) in [("first", 0), ("back", 0)] {
        assert!(t.section(section).contains("Breakpoint 1, work_step (id="), "{section}:\n{}", t.text);
        assert_eq!(int(t.section(section)), counter, "{section}:\n{}", t.text);
    }
}

/// tls_id is 100 + the worker's argument in each worker, 0 in main.
#[test]
fn thread_local_variable_prints_each_threads_value() {
    let (trace, exe) = counter_trace("dbg-tls");
    let server = Server::start(&trace);
    let mut cmds = vec!["break work_step"];
    for hit in ["@hit1", "@hit2", "@hit3", "@hit4"] {
        cmds.extend([hit, "continue", "print tls_id"]);
    }
    cmds.extend(["@main", "thread 1", "print tls_id"]);
    let t = server.gdb(&exe, &cmds);
    for hit in ["hit1", "hit2", "hit3", "hit4"] {
        let s = t.section(hit);
        let id = work_step_stop(s, &t);
        assert_eq!(int(s), 100 + id, "{hit}: tls_id of worker {id}:\n{}", t.text);
    }
    assert_eq!(int(t.section("main")), 0, "main's tls_id:\n{}", t.text);
}

#[test]
fn continue_to_the_end_reports_the_recorded_sigsegv() {
    let (trace, exe, fault_pc) = crash_trace("dbg-crash");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["@continue", "continue", "@bt", "bt", "@pc", "p/x $pc", "@head", "print head"]);
    let c = t.section("continue");
    assert!(c.contains("received signal SIGSEGV"), "{}", t.text);
    assert!(c.contains("use_head ()"), "{}", t.text);
    let bt = t.section("bt");
    assert!(bt.lines().next().unwrap_or("").starts_with("#0  ") && bt.lines().next().unwrap().contains("use_head ()"), "{}", t.text);
    assert!(bt.contains(" in worker (arg="), "{}", t.text);
    assert_eq!(printed(t.section("pc")), fault_pc, "the stop is at the recorded faulting instruction:\n{}", t.text);
    assert_eq!(printed(t.section("head")), "(struct node *) 0x10", "{}", t.text);
}

#[test]
fn monitor_epoch_back_and_when() {
    let (trace, exe) = counter_trace("dbg-epoch");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "@help",
            "monitor help",
            "break work_step",
            "continue",
            "continue",
            "continue",
            "@when1",
            "monitor when",
            "@epochs",
            "monitor epochs",
            "@back",
            "monitor epoch back",
            "monitor epoch back",
            "@when2",
            "monitor when",
        ],
    );
    let help = t.section("help");
    for cmd in ["when", "goto", "events", "epochs", "epoch back", "checkpoint", "restart"] {
        assert!(help.contains(cmd), "monitor help mentions {cmd}:\n{}", t.text);
    }
    let n1 = event_number(t.section("when1"));
    let n2 = event_number(t.section("when2"));
    // The third work_step comes after every thread was spawned.
    assert!(n1 >= last_spawn_event(&trace), "when: {n1}:\n{}", t.text);
    assert!(n2 <= n1, "two epochs back is not later: {n2} > {n1}:\n{}", t.text);
    assert!(!t.section("epochs").trim().is_empty(), "{}", t.text);
    let back = t.section("back").to_lowercase();
    assert!(!back.contains("error") && !back.contains("unknown"), "{}", t.text);
}

/// Going to a position twice lands on the same registers and memory: the
/// same event reached from before (forwards) and from after (backwards,
/// through a checkpoint) shows the same registers of every thread.
#[test]
fn goto_the_same_event_twice_gives_the_same_state() {
    let (trace, exe) = counter_trace("dbg-goto-twice");
    // Just after the last spawn: the workers have their work before them.
    let target = last_spawn_event(&trace) + 1;
    let state = ["maint flush register-cache", "maint flush dcache", "thread apply all info registers rip rsp rax rbx", "print counter"];
    let server = Server::start(&trace);
    let goto = format!("monitor goto {target}");
    let mut cmds = vec![goto.as_str(), "@first"];
    cmds.extend(state);
    cmds.extend(["@moving", "break work_step", "continue", "continue", "delete", goto.as_str(), "@second"]);
    cmds.extend(state);
    cmds.push("@end");
    let t = server.gdb(&exe, &cmds);
    let (first, second) = (t.section("first"), t.section("second"));
    assert!(first.contains("rip") && first.contains("$1 = "), "{}", t.text);
    assert!(t.section("moving").contains("Breakpoint 1, work_step"), "the replay moved on in between:\n{}", t.text);
    // gdb announces the threads it first sees in the first section.
    let state = |s: &str| without_history_numbers(s).lines().filter(|l| !l.starts_with("[New Thread")).collect::<Vec<_>>().join("\n");
    assert_eq!(state(first), state(second), "{}", t.text);
}

/// Writing memory is allowed, but the replay after it is not the recorded
/// run: `monitor when` says so until the user goes back to before it.
#[test]
fn writing_memory_marks_the_replay_diverged_until_going_back() {
    let (trace, exe) = counter_trace("dbg-write");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break work_step",
            "continue",
            "set var counter = 99",
            "@changed",
            "monitor when",
            "reverse-stepi",
            "@back",
            "monitor when",
            "print counter",
            "@end",
        ],
    );
    let changed = t.section("changed");
    assert!(changed.contains("memory at") && changed.contains("not the recorded run"), "{}", t.text);
    let back = t.section("back");
    assert!(!back.contains("not the recorded run"), "{}", t.text);
    assert_eq!(int(back), 0, "going back restores the recorded value:\n{}", t.text);
}

/// rr's `checkpoint` and `restart N`: back at the checkpoint's pc and
/// variables after running on.
#[test]
fn checkpoint_and_restart() {
    let (trace, exe) = counter_trace("dbg-restart");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break work_step",
            "continue",
            "continue",
            "@made",
            "monitor checkpoint",
            "print counter",
            "continue",
            "continue",
            "@on",
            "print counter",
            "@restart",
            "monitor restart 1",
            "maint flush register-cache",
            "maint flush dcache",
            "print counter",
            "@end",
        ],
    );
    assert!(t.section("made").contains("checkpoint 1 at"), "{}", t.text);
    assert_eq!(int(t.section("made")), 1, "{}", t.text);
    assert_eq!(int(t.section("on")), 3, "{}", t.text);
    assert_eq!(int(t.section("restart")), 1, "restart 1 is back at the checkpoint:\n{}", t.text);
}

/// The scripted form: `weft replay TRACE -- -batch -x script.gdb` starts
/// gdb attached to the replay. The script goes to the crash, watches the
/// corrupted global and runs back to the write that corrupted it.
#[test]
fn scripted_session_walks_back_from_the_crash_to_the_bad_write() {
    let (trace, _exe, _) = crash_trace("dbg-walkback");
    let script = gdb_script(&[
        "set pagination off",
        "continue",
        "@crash",
        "bt",
        "@watch",
        "watch -l head",
        "@write",
        "reverse-continue",
        "@where",
        "bt",
        "print head",
    ]);
    let mut c = weft();
    c.args(["replay"]).arg(&trace).args(["--", "-nx", "-batch", "-x"]).arg(&script).env("DEBUGINFOD_URLS", "");
    let t = run_with_timeout(&mut c, SESSION_TIMEOUT);
    assert!(t.status.is_some(), "timed out:\n{}", t.text);
    let crash = t.section("crash");
    assert!(crash.contains("use_head") && crash.contains(" in worker (arg="), "{}", t.text);
    assert!(t.text[..t.text.find("@@crash").unwrap()].contains("SIGSEGV"), "{}", t.text);
    assert!(t.section("watch").contains("atchpoint 1: -location head"), "{}", t.text);
    let write = t.section("write");
    assert!(write.contains("Old value = (struct node *) 0x10\n"), "{}", t.text);
    assert!(write.contains("New value = (struct node *) 0x") && write.contains("<nodes+16>"), "{}", t.text);
    assert!(write.contains("corrupt ()"), "{}", t.text);
    let wh = t.section("where");
    assert!(wh.lines().next().unwrap_or("").contains("corrupt ()"), "the stop is in corrupt:\n{}", t.text);
    assert!(wh.contains(" in corrupter (arg="), "{}", t.text);
    assert!(printed(wh).ends_with("<nodes+16>"), "head before the write is &nodes[1]:\n{}", t.text);
}

/// pbzip2 (Debian's, stripped) under gdb: a pending breakpoint on libbz2's
/// BZ2_bzBuffToBuffCompress, which pbzip2's consumer threads call once
/// per block (source = rdx). Two hits compress different blocks;
/// reverse-continue goes back to the first, in the same thread.
#[test]
fn pbzip2_breakpoint_in_a_consumer_and_reverse_continue() {
    // One recording: pbzip2's locks are in the log, and it replays in
    // log order (tests/debian.rs).
    let input = text_file("pbzip2-gdb-input.txt", 4);
    let prog = debian_program("pbzip2", "pbzip2");
    let trace = record_until_a_schedule_is_found(
        "pbzip2-gdb",
        &[prog.to_str().unwrap(), "-p2", "-c", input.to_str().unwrap()],
        &[],
        1,
    );
    let server = Server::start(&trace);
    let block = "print *(char (*)[24])$rdx";
    let t = server.gdb(
        &prog,
        &[
            "set breakpoint pending on",
            "break BZ2_bzBuffToBuffCompress",
            "@hit1",
            "continue",
            block,
            "thread",
            "@threads",
            "info threads",
            "@hit2",
            "continue",
            block,
            "@back",
            "reverse-continue",
            block,
            "thread",
        ],
    );
    let (hit1, hit2, back) = (t.section("hit1"), t.section("hit2"), t.section("back"));
    for s in [hit1, hit2, back] {
        assert!(s.contains("Breakpoint 1, ") && s.contains("BZ2_bzBuffToBuffCompress"), "{}", t.text);
    }
    assert!(info_threads(t.section("threads")).len() >= 3, "main, 2 consumers, writer:\n{}", t.text);
    assert_ne!(printed(hit1), printed(hit2), "two different blocks:\n{}", t.text);
    assert_eq!(printed(back), printed(hit1), "back at the first block:\n{}", t.text);
    let thread = |s: &str| s.lines().find(|l| l.starts_with("[Current thread is")).map(String::from);
    assert!(thread(hit1).is_some(), "{}", t.text);
    assert_eq!(thread(back), thread(hit1), "{}", t.text);
}

// ---------------------------------------------------------------- lldb

#[test]
fn lldb_breakpoint_registers_continue_and_reverse_continue() {
    let (trace, exe) = counter_trace("dbg-lldb");
    let server = Server::start(&trace);
    let t = server.lldb(
        &exe,
        &[
            "breakpoint set -n work_step",
            "continue",
            "target variable counter",
            "continue",
            "target variable counter",
            "register read rip",
            "register read",
            "process continue --reverse",
            "target variable counter",
            "register read rip",
        ],
    );
    let bp = t.lldb_output("breakpoint set -n work_step", 0);
    assert!(bp.contains("Breakpoint 1: where = ") && bp.contains("work_step"), "{}", t.text);
    for n in [0, 1] {
        let c = t.lldb_output("continue", n);
        assert!(c.contains("stop reason = breakpoint 1."), "{}", t.text);
        assert!(c.contains("work_step(id="), "{}", t.text);
    }
    assert!(t.lldb_output("target variable counter", 0).contains("(long) counter = 0"), "{}", t.text);
    assert!(t.lldb_output("target variable counter", 1).contains("(long) counter = 1"), "{}", t.text);
    let rip2 = t.lldb_output("register read rip", 0);
    assert!(rip2.contains("rip = 0x") && rip2.contains("work_step"), "{}", t.text);
    let all = t.lldb_output("register read", 0);
    for r in ["rax = 0x", "rsp = 0x", "rip = 0x", "eflags = 0x"] {
        assert!(all.contains(r), "register read shows {r}:\n{}", t.text);
    }
    let rev = t.lldb_output("process continue --reverse", 0);
    assert!(rev.contains("stop reason = breakpoint 1."), "{}", t.text);
    assert!(t.lldb_output("target variable counter", 2).contains("(long) counter = 0"), "back at the first hit:\n{}", t.text);
    assert_eq!(t.lldb_output("register read rip", 1), rip2, "the same breakpoint address:\n{}", t.text);
}

// ---------------------------------------------------------- bad input

/// A gdb session that must work on a server that went through something:
/// the breakpoint hits, in a worker whose tls_id matches its argument.
/// lldb takes the shared libraries from the loader's list (found through
/// `qShlibInfoAddr`, with the triple `qHostInfo` gives): a worker's
/// backtrace goes through libc's `start_thread`.
#[test]
fn lldb_sees_the_shared_libraries() {
    let (trace, exe) = counter_trace("dbg-lldb-libs");
    let server = Server::start(&trace);
    let t = server.lldb(&exe, &["breakpoint set -n work_step", "continue", "bt", "image list"]);
    assert!(!t.text.contains("failed to set breakpoint site"), "{}", t.text);
    let bt = t.lldb_output("bt", 0);
    assert!(bt.contains("counter-O0`worker(arg="), "{}", t.text);
    assert!(bt.contains("libc.so.6`start_thread"), "the backtrace goes through libc:\n{}", t.text);
    let images = t.lldb_output("image list", 0);
    assert!(images.contains("libc.so.6") && images.contains("ld-linux-x86-64.so.2"), "{}", t.text);
}

/// gdb reads the recording's files through the server (`vFile`, gdb's
/// default `target:` sysroot): a library rebuilt after the recording
/// comes from the trace's copy, so the recorded helper's symbol resolves
/// (the rebuilt library names it otherwise), and `/proc/PID/maps` is the
/// replaying process's (gdb warned that it could not open it before).
#[test]
fn gdb_reads_the_recorded_library_after_a_rebuild() {
    let dir = scratch().join("greetlib");
    std::fs::create_dir_all(&dir).unwrap();
    let source = |name: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(name);
    let cc = |args: &[&str], src: &str, out: &Path| {
        let st = std::process::Command::new("cc").args(["-O0", "-g"]).args(args).arg(source(src)).arg("-o").arg(out).status().unwrap();
        assert!(st.success(), "cc {src}");
    };
    let lib = dir.join("libgreet.so");
    cc(&["-shared", "-fPIC", "-DHELPER=recorded_helper"], "greetlib.c", &lib);
    let exe = dir.join("greet");
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    // -l after the source, as the linker wants it.
    let st = std::process::Command::new("cc").args(["-O0", "-g"]).arg(source("greet.c")).args(["-L", dir.to_str().unwrap(), &rpath, "-lgreet", "-o"]).arg(&exe).status().unwrap();
    assert!(st.success());
    let trace = trace_dir("dbg-rebuilt-lib");
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!((rec.status.code(), String::from_utf8_lossy(&rec.stdout).as_ref()), (Some(0), "greet 42\n"), "{}", err(&rec));
    // A new file renamed over the old one (a new inode), as a linker does.
    let rebuilt = dir.join("libgreet.so.new");
    cc(&["-shared", "-fPIC", "-DHELPER=rebuilt_helper"], "greetlib.c", &rebuilt);
    std::fs::rename(&rebuilt, &lib).unwrap();
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["set breakpoint pending on", "break recorded_helper", "@hit", "continue", "@bt", "bt", "@maps", "info proc mappings"]);
    assert!(t.section("hit").contains("Breakpoint 1, recorded_helper (x=21)"), "{}", t.text);
    assert!(t.section("bt").contains("greet (x=21)"), "{}", t.text);
    assert!(t.section("maps").contains(exe.to_str().unwrap()), "{}", t.text);
    assert!(!t.text.contains("unable to open /proc file"), "{}", t.text);
}

/// Going forwards to the recorded exit stops there, at the exit_group,
/// as the end of the replay log ("No more reverse-execution history"):
/// gdb still has the process and can go back (rr stops there too). Going
/// forwards from that stop, the program exits.
#[test]
fn the_end_of_the_recording_is_a_stop_to_go_back_from() {
    let (trace, exe) = counter_trace("dbg-end");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["@end", "continue", "break work_step", "@back", "reverse-continue", "print counter", "delete", "@again", "continue", "@exit", "continue"]);
    assert!(t.section("end").contains("No more reverse-execution history"), "{}", t.text);
    assert!(t.section("back").contains("Breakpoint 1, work_step"), "{}", t.text);
    assert_eq!(int(t.section("back")), 59, "the last call finds the 59 before it:\n{}", t.text);
    assert!(t.section("again").contains("No more reverse-execution history"), "{}", t.text);
    assert!(t.section("exit").contains("exited normally"), "{}", t.text);
}

fn assert_usable(server: &Server, exe: &Path) {
    let t = server.gdb(exe, &["break work_step", "@hit", "continue", "print tls_id", "@counter", "print counter"]);
    let id = work_step_stop(t.section("hit"), &t);
    assert_eq!(int(t.section("hit")), 100 + id, "{}", t.text);
    let counter = int(t.section("counter"));
    assert!((0..60).contains(&counter), "{}", t.text);
}

#[test]
fn malformed_packets_leave_the_server_usable() {
    let (trace, exe) = counter_trace("dbg-malformed");
    let mut server = Server::start(&trace);
    {
        let mut c = Rsp::connect(server.port).expect("connect");
        // A well-formed packet the server does not know: empty reply.
        assert_eq!(c.ask("vMustReplyEmpty").expect("reply"), "", "{}", server.stderr_text());
        let _ = c.send_raw(b"$g#00"); // bad checksum
        let _ = c.send_raw(b"}}}}\x00\xff#$$##");
        let _ = c.send("m0,zzzz"); // not hex
        let _ = c.send("Z0,notanaddress,1");
        let _ = c.send("vCont;q:xyz");
        let mut huge = b"$".to_vec();
        huge.extend(vec![b'X'; 1 << 20]); // 1 MiB, no end
        let _ = c.send_raw(&huge);
        std::thread::sleep(Duration::from_millis(500));
    } // disconnects
    std::thread::sleep(Duration::from_millis(500));
    assert!(server.alive(), "weft exited after malformed packets:\n{}", server.stderr_text());
    assert_usable(&server, &exe);
}

/// gdb's `kill` is answered (`vKill` gets its `OK`): gdb says the
/// program was killed, not that the connection closed, and the next
/// client finds the replay where it was.
#[test]
fn kill_from_gdb_is_answered_and_the_replay_stays() {
    let (trace, exe) = counter_trace("dbg-kill");
    let mut server = Server::start(&trace);
    let t = server.gdb(&exe, &["break work_step", "continue", "@kill", "kill"]);
    let kill = t.section("kill");
    assert!(kill.contains("[Inferior 1 (process") && kill.contains("killed]"), "{}", t.text);
    assert!(!t.text.contains("Remote connection closed"), "{}", t.text);
    assert!(server.alive(), "{}", server.stderr_text());
    assert_usable(&server, &exe);
}

#[test]
fn a_client_disconnects_mid_session_and_a_new_one_connects() {
    let (trace, exe) = counter_trace("dbg-reconnect");
    let mut server = Server::start(&trace);
    let t = server.gdb(&exe, &["break work_step", "continue", "continue", "@first", "print counter", "disconnect"]);
    assert_eq!(int(t.section("first")), 1, "{}", t.text);
    assert!(server.alive(), "{}", server.stderr_text());
    assert_usable(&server, &exe);
}

#[test]
fn a_second_client_is_refused_while_the_first_keeps_working() {
    let (trace, exe) = counter_trace("dbg-second");
    let server = Server::start(&trace);
    let mut first = Rsp::connect(server.port).expect("connect");
    let stop = first.ask("?").expect("stop reply");
    assert!(stop.starts_with('T') || stop.starts_with('S'), "stop reply: {stop:?}");
    match Rsp::connect(server.port) {
        Err(_) => {} // refused
        Ok(mut second) => match second.ask("?") {
            Ok(reply) => assert!(reply.starts_with('E'), "the second client was answered: {reply:?}"),
            Err(e) => assert!(
                !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                "the second client was neither refused nor answered within 10 s"
            ),
        },
    }
    let regs = first.ask("g").expect("registers");
    assert!(regs.len() >= 16 * 16 && regs.bytes().all(|b| b.is_ascii_hexdigit() || b == b'x'), "g: {regs:?}");
    let threads = first.ask("qfThreadInfo").expect("threads");
    assert!(threads.starts_with('m'), "qfThreadInfo: {threads:?}");
    drop(first);
    std::thread::sleep(Duration::from_millis(300));
    assert_usable(&server, &exe);
}

#[test]
fn a_fifth_watchpoint_is_an_error() {
    let (trace, exe) = counter_trace("dbg-fifth");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "watch counter",
            "watch stats[0]",
            "watch stats[1]",
            "watch stats[2]",
            "watch stats[3]",
            "@fifth",
            "continue",
            "@four",
            "delete 5",
            "continue",
        ],
    );
    let fifth = t.section("fifth");
    assert!(
        fifth.contains("Could not insert hardware watchpoint") || fifth.contains("too many hardware breakpoints/watchpoints"),
        "{}",
        t.text
    );
    assert!(t.section("four").contains("Old value = 0\nNew value = 1\n"), "four watchpoints work:\n{}", t.text);
}

#[test]
fn a_breakpoint_at_an_unmapped_address_cannot_be_inserted() {
    let (trace, exe) = counter_trace("dbg-unmapped");
    let server = Server::start(&trace);
    let t = server.gdb(&exe, &["break *0x10", "@continue", "continue", "@after", "delete", "break work_step", "continue"]);
    let c = t.section("continue");
    assert!(c.contains("Cannot insert breakpoint 1"), "{}", t.text);
    assert!(c.contains("Cannot access memory at address 0x10"), "{}", t.text);
    assert!(t.section("after").contains("Breakpoint 2, work_step (id="), "{}", t.text);
}

#[test]
fn monitor_goto_past_the_end_is_a_clear_error() {
    let (trace, exe) = counter_trace("dbg-goto");
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &["@goto", "monitor goto 1000000", "@when", "monitor when", "@after", "break work_step", "continue"],
    );
    let goto = t.section("goto").to_lowercase();
    assert!(!goto.trim().is_empty(), "no message:\n{}", t.text);
    assert!(!goto.contains("protocol error") && !goto.contains("remote failure"), "{}", t.text);
    assert!(
        ["past", "beyond", "out of range", "no event", "only", "last", "end", "exceed"].iter().any(|w| goto.contains(w)),
        "the message says the event is past the end:\n{}",
        t.text
    );
    assert!(event_number(t.section("when")) < 1000000, "{}", t.text);
    assert!(t.section("after").contains("Breakpoint 1, work_step (id="), "{}", t.text);
}

/// gdb killed with SIGKILL mid-session (after a checkpoint): the server
/// takes a new gdb. Then the server itself is killed with SIGKILL, and
/// no process it started (the tracee, checkpoint copies) is left.
#[test]
fn gdb_killed_then_server_killed_leaves_no_tracee() {
    let (trace, exe) = counter_trace("dbg-kill");
    let mut server = Server::start(&trace);
    let out = scratch_file("killed-gdb");
    let file = std::fs::File::create(&out).unwrap();
    let mut c = gdb_command(&exe);
    c.arg("-ex").arg(format!("target remote 127.0.0.1:{}", server.port));
    for cmd in ["break work_step", "continue", "monitor checkpoint", "@ready", "shell sleep 300"] {
        c.arg("-ex").arg(gdb_cmd(cmd));
    }
    use std::os::unix::process::CommandExt;
    let mut g = c
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + SESSION_TIMEOUT;
    while !std::fs::read_to_string(&out).unwrap_or_default().contains("@@ready") {
        assert!(Instant::now() < deadline, "gdb did not reach the breakpoint:\n{}", std::fs::read_to_string(&out).unwrap());
        assert!(g.try_wait().unwrap().is_none(), "gdb ended early:\n{}", std::fs::read_to_string(&out).unwrap());
        std::thread::sleep(Duration::from_millis(100));
    }
    unsafe { libc::kill(-(g.id() as i32), libc::SIGKILL) };
    g.wait().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("Breakpoint 1, work_step"), "{text}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.alive(), "weft exited when gdb was killed:\n{}", server.stderr_text());
    assert_usable(&server, &exe);

    let tracees = descendants(server.pid());
    assert!(!tracees.is_empty(), "the replayed program runs under weft");
    unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
    server.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<u32> = tracees.iter().copied().filter(|&p| process_lives(p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes of the killed server left: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The server starts the replay under `weft replay -s`; a bad trace path
/// is reported, not served.
#[test]
fn server_on_a_missing_trace_fails_with_a_message() {
    let port = free_port();
    let mut c = weft();
    c.args(["replay", "-s", &port.to_string()]).arg(scratch().join("no-such-trace"));
    let t = run_with_timeout(&mut c, Duration::from_secs(30));
    assert!(t.status.is_some_and(|s| !s.success()), "{}", t.text);
    assert!(t.text.contains("no-such-trace"), "{}", t.text);
}

/// A program that forks and execs: the debugger shows its first process;
/// a breakpoint there is hit after each child ended (the children run
/// their copies of the code without it), and reverse-continue goes back
/// across a fork and an exec.
#[test]
fn breakpoints_and_reverse_continue_across_forks() {
    let exe = debug_program("processes");
    let trace = trace_dir("dbg-processes");
    let rec = record(&trace, &[exe.to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    let server = Server::start(&trace);
    let t = server.gdb(
        &exe,
        &[
            "break status_of",
            "continue",
            "continue",
            "continue",
            "@third",
            "finish",
            "@back",
            "reverse-continue",
            "reverse-continue",
            "finish",
        ],
    );
    // status_of returns the child's exit status: echo's 0, then true's 0.
    assert!(t.section("third").contains("Value returned is $1 = 0"), "echo exited with 0:\n{}", t.text);
    let back = t.section("back");
    assert_eq!(back.matches("Breakpoint 1, status_of (p=").count(), 2, "{}", t.text);
    assert!(back.contains("Value returned is $2 = 0"), "true exited with 0, back across the vfork and exec:\n{}", t.text);
    assert!(!t.text.contains("New Thread"), "the children are not threads of the debugged process:\n{}", t.text);
}
