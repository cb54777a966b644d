//! The syscall surface (weft issue 11): syscalls whose out-buffers come
//! from the generated table replay with what they wrote, dumps name every
//! syscall, and a NULL path argument (Rust's statx probe) replays.

mod common;
use common::*;
use std::process::Stdio;

/// Records tests/c/syscalls.c, which prints what each call wrote, and
/// checks that the replay is valid and prints the same.
#[test]
fn out_buffers_of_table_syscalls_replay() {
    let prog = program("syscalls");
    let (rec, rep) = record_and_replay("syscalls", &[prog.to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    for line in [
        "uname: 0 Linux ", "sysinfo: 0 ", "getrlimit: 0 ", "prlimit64: 0 ", "sched_getaffinity: 0 cpus=",
        "sched_getparam: 0 ", "getcpu: 0 ", "capget: 0 ", "adjtimex: ", "clock_adjtime: ",
        "xattr: set=0 size=11 get=11 'pid ", "readlink: ", "statx NULL: ", "statx: 0 ", "FIONREAD: 0 avail=5",
        "TCGETS pipe: -1", "TIOCGWINSZ: 0 33x77", "rseq: -1 errno=38",
    ] {
        assert!(out.lines().any(|l| l.starts_with(line)), "no line {line:?} in\n{out}");
    }
    for o in [&rec, &rep] {
        assert!(!err(o).contains("not supported") && !err(o).contains("unsupported"), "{}", err(o));
    }
}

/// `weft dump` names each syscall, those weft has no special handling for
/// included.
#[test]
fn dump_names_every_syscall() {
    let prog = program("syscalls");
    let trace = trace_dir("syscalls-dump");
    let rec = record(&trace, &[prog.to_str().unwrap()], Stdio::null());
    assert!(err(&rec).contains("weft: recorded"), "{}", err(&rec));
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    for name in ["capget(", "adjtimex(", "clock_adjtime(", "lgetxattr(", "fgetxattr(", "listxattr(", "sched_getparam(", "getcpu(", "statx("] {
        assert!(text.contains(name), "no {name} in the dump:\n{text}");
    }
    assert!(!text.contains("syscall_"), "{text}");
}

/// A Rust program that looks up a missing path probes statx with a NULL
/// path; the replay reads that NULL as no path, as the recorder logged it.
#[test]
fn rust_statx_probe_with_a_null_path_replays() {
    let prog = rust_program("statx_probe");
    let (rec, _) = record_and_replay("statx_probe", &[prog.to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    assert!(out.starts_with("missing: entity not found\nexe: "), "{out}");
}

/// FS_IOC_FIEMAP (tests/c/fiemap.c, on the repository's Cargo.toml): the
/// kernel writes the extents after the header the request number sizes.
/// The build before logged the header alone, so the replay printed
/// zeroed extents (dpkg -S, which sorts files by their first extent,
/// failed 3 recordings of 3).
#[test]
fn fiemap_extents_replay() {
    let prog = program("fiemap");
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let (rec, _) = record_and_replay("fiemap", &[prog.to_str().unwrap(), file], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    assert!(out.lines().skip(1).any(|l| l.starts_with("logical 0 physical ") && !l.contains(" length 0 ")), "{out}");
}

/// A seccomp filter of the program's traps getppid (SECCOMP_RET_TRAP)
/// and a SIGSYS handler catches it: the call never reaches weft's filter
/// (the program's wins), so the replay runs the program's filter, skips
/// the call as the kernel did and delivers the recorded SIGSYS, whose
/// siginfo (the call's number, the filter's data) the handler prints.
/// No warning: the filter is replayed, not unsupported.
#[test]
fn seccomp_trap_replays_its_sigsys() {
    let prog = program("seccomptrap");
    let (rec, rep) = record_and_replay("seccomptrap", &[prog.to_str().unwrap()], Stdio::null());
    let out = String::from_utf8_lossy(&rec.stdout);
    let nr = libc::SYS_getppid;
    assert!(out.contains(&format!("getppid {nr} trapped 3 nr {nr} data 7")), "{out}");
    assert!(!err(&rec).contains("not supported") && !err(&rep).contains("unsupported"), "{}{}", err(&rec), err(&rep));
}

/// Runs `weft ARGS` with its stdout in the file `out`, and returns its
/// stderr.
fn weft_to_file(args: &[&std::ffi::OsStr], out: &std::path::Path) -> String {
    let file = std::fs::File::create(out).unwrap();
    let run = weft().args(args).stdout(file).stderr(Stdio::piped()).output().unwrap();
    err(&run)
}

/// Bytes a program sends to its stdout from a file inside the kernel
/// (sendfile, copy_file_range: coreutils' `cat` onto a file) never pass
/// through its memory; the replay prints them all the same, from the
/// trace's copy of the file. Bytes spliced from a pipe are gone: both
/// record and replay say so.
#[test]
fn bytes_sent_to_stdout_from_a_file_replay() {
    let prog = program("sendout");
    let input = scratch().join("sendout-input.txt");
    let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&input, &text).unwrap();
    let trace = trace_dir("sendout");
    let (recorded, replayed) = (scratch().join("sendout-recorded.out"), scratch().join("sendout-replayed.out"));
    let rec = weft_to_file(&["record".as_ref(), "-o".as_ref(), trace.as_os_str(), prog.as_os_str(), input.as_os_str()], &recorded);
    let size = text.len();
    for call in ["sendfile at the position", "sendfile at an offset", "copy_file_range"] {
        assert!(rec.contains(&format!("{call}: {size} of {size}")), "{rec}");
    }
    assert_eq!(std::fs::read_to_string(&recorded).unwrap(), text.repeat(3), "{rec}");
    let rep = weft_to_file(&["replay".as_ref(), "-a".as_ref(), "--no-explore".as_ref(), trace.as_os_str()], &replayed);
    assert!(rep.contains("replay valid"), "{rep}");
    assert_eq!(std::fs::read(&replayed).unwrap(), std::fs::read(&recorded).unwrap(), "{rep}");

    let trace = trace_dir("sendout-splice");
    let rec = weft_to_file(&["record".as_ref(), "-o".as_ref(), trace.as_os_str(), prog.as_os_str(), input.as_os_str(), "splice".as_ref()], &recorded);
    assert!(rec.contains("splice: 8") && rec.contains("the trace does not hold them"), "{rec}");
    let rep = weft_to_file(&["replay".as_ref(), "-a".as_ref(), "--no-explore".as_ref(), trace.as_os_str()], &replayed);
    assert!(rep.contains("replay valid") && rep.contains("splice sent 8 bytes to the recording's stdout that the trace does not hold"), "{rep}");
    assert_eq!(std::fs::read_to_string(&replayed).unwrap(), text.repeat(3), "{rep}");
}
