//! The command line as a user meets it: bad input, dump, ls, the default
//! trace location, traces cut short, and files changed after recording.

mod common;
use common::*;
use std::process::Stdio;

#[test]
fn missing_program_is_a_clear_error() {
    let out = weft().args(["record", "--", "/no/such/program"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(err(&out).contains("/no/such/program: no such file"), "{}", err(&out));
    let out = weft().args(["record", "no-such-command-weft"]).output().unwrap();
    assert!(err(&out).contains("command not found"), "{}", err(&out));
}

/// A child of weft's that weft does not trace ends the recording no later
/// than the program: `exec weft record ... 2> >(cat)` in bash makes the
/// `cat`, which reads weft's stderr until it closes, weft's child.
/// weft waited for every child, the `cat` for weft: a hang.
#[test]
fn an_untraced_child_does_not_keep_the_recording_waiting() {
    let trace = trace_dir("untraced-child");
    let script = format!("exec {} record -o {} -- /bin/echo done 2> >(cat >/dev/null)", env!("CARGO_BIN_EXE_weft"), trace.display());
    let mut child = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("XDG_DATA_HOME", scratch().join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the recording still waited after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let rep = replay(&trace, &["--no-explore"]);
    assert!(err(&rep).contains("replay valid"), "{}", err(&rep));
}

/// `-o` names a new or empty directory: an existing file, a directory
/// with files in it (the user's, or an earlier trace) is refused, its mode
/// and contents untouched, and the error says why once.
#[test]
fn record_into_a_path_that_is_taken_is_refused_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let file = scratch().join("taken-file.txt");
    std::fs::write(&file, "mine\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dir = scratch().join("taken-dir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes"), "mine\n").unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (path, mode) in [(&file, 0o644), (&dir, 0o755)] {
        let rec = weft().arg("record").arg("-o").arg(path).args(["--", "/bin/true"]).output().unwrap();
        assert_ne!(rec.status.code(), Some(0));
        let e = err(&rec);
        assert_eq!(e.matches("exists and is not an empty directory").count(), 1, "{e}");
        assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, mode, "{e}");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing added to the user's directory");
    let empty = scratch().join("empty-dir");
    std::fs::create_dir_all(&empty).unwrap();
    let rec = weft().arg("record").arg("-o").arg(&empty).args(["--", "/bin/true"]).output().unwrap();
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
}

/// A file the kernel will not execute, though weft finds it executable:
/// a script with no `#!` line, a truncated ELF, a missing interpreter.
/// A clear error, and no trace left behind.
#[test]
fn a_program_whose_exec_fails_is_a_clear_error_and_no_trace() {
    use std::os::unix::fs::PermissionsExt;
    let truncated = std::fs::read("/bin/true").unwrap()[..100].to_vec();
    let cases: [(&str, &[u8], &str); 3] = [
        ("noshebang.sh", b"echo hi\n", "a script needs a `#!` line"),
        ("truncated-elf", &truncated, "not an executable format"),
        ("nointerp.sh", b"#!/no/such/interpreter\necho hi\n", "the interpreter its `#!` line or ELF header names does not exist"),
    ];
    for (name, bytes, why) in cases {
        let prog = scratch().join(name);
        std::fs::write(&prog, bytes).unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let trace = trace_dir(&format!("exec-fails-{name}"));
        let rec = weft().arg("record").arg("-o").arg(&trace).arg("--").arg(&prog).output().unwrap();
        assert_ne!(rec.status.code(), Some(0));
        assert!(err(&rec).contains("cannot execute") && err(&rec).contains(why), "{name}: {}", err(&rec));
        assert!(!trace.exists(), "{name}: a trace was left at {}", trace.display());
    }
}

#[test]
fn a_directory_that_is_not_a_trace() {
    let dir = scratch().join("not-a-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let out = replay(&dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(err(&out).contains("not a weft trace"), "{}", err(&out));
    std::fs::write(dir.join("events"), b"garbage garbage").unwrap();
    let out = weft().arg("dump").arg(&dir).output().unwrap();
    assert!(err(&out).contains("bad magic"), "{}", err(&out));
}

/// A trace cut at every few bytes reads up to its last complete record,
/// then says where it stops; replay reports it as incomplete, never panics.
#[test]
fn truncated_and_corrupt_traces() {
    let trace = trace_dir("cut");
    let rec = record(&trace, &[program("pipe").to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    let events = trace.join("events");
    let whole = std::fs::read(&events).unwrap();
    // Frame ends (header: u32 payload length, then 9 more bytes): the meta
    // frame, then frames of events, the recorder flushing at each exit.
    let mut ends = vec![];
    let mut at = 12;
    while at + 13 <= whole.len() {
        at += 13 + u32::from_le_bytes(whole[at..at + 4].try_into().unwrap()) as usize;
        ends.push(at);
    }
    assert!(ends.len() >= 3, "the meta frame and at least two frames of events: {ends:?}");
    let last_start = ends[ends.len() - 2];
    let mut cut_frames = 0;
    for cut in [last_start, last_start + 1, whole.len() - 1] {
        std::fs::write(&events, &whole[..cut]).unwrap();
        let dump = weft().arg("dump").arg(&trace).output().unwrap();
        assert!(String::from_utf8_lossy(&dump.stdout).contains("#0 "), "prefix still readable");
        let rep = replay(&trace, &[]);
        assert_eq!(rep.status.code(), Some(2), "{}", err(&rep));
        assert!(err(&rep).contains("incomplete"), "{}", err(&rep));
        assert_eq!(dump.status.code(), Some(1), "{}", err(&dump));
        if !err(&dump).contains("truncated at offset") {
            assert!(err(&dump).contains("incomplete trace: no End event"), "a cut between frames: {}", err(&dump));
            assert!(err(&rep).contains("no end event"), "a cut between frames: {}", err(&rep));
            continue;
        }
        cut_frames += 1;
        assert!(err(&rep).contains("truncated"), "{}", err(&rep));
    }
    assert_eq!(cut_frames, 2, "cuts inside the last frame are truncations");
    // Any flipped byte after the file header, in a frame header or a
    // payload, is corruption with an offset, never a truncation.
    let n = whole.len();
    for at in [12, 13, 16, 17, 21, 24, n / 3, n / 2, n - 1] {
        let mut bad = whole.clone();
        bad[at] ^= 0x55;
        std::fs::write(&events, &bad).unwrap();
        let dump = weft().arg("dump").arg(&trace).output().unwrap();
        assert!(err(&dump).contains("corrupt record at offset"), "byte {at}: {}", err(&dump));
    }
}

/// SIGKILL the recorder mid-run: the trace reads cleanly up to its last
/// complete record.
#[test]
fn killed_recorder_leaves_a_readable_trace() {
    let trace = trace_dir("killed");
    let mut child = weft()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "while :; do date; done"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    let dump = weft().args(["dump", "--json"]).arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.lines().count() > 5, "{text}");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every dumped line is JSON");
    }
    let rep = replay(&trace, &[]);
    assert_ne!(rep.status.code(), Some(0));
    assert!(!err(&rep).contains("panicked"), "{}", err(&rep));
}

#[test]
fn default_location_latest_trace_and_ls() {
    let prog = program("exitcode");
    let rec = weft().args(["record"]).arg(&prog).output().unwrap();
    assert_eq!(rec.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "hello\n", "stdout is the program's alone");
    let dir = scratch().join("xdg/weft/exitcode-0");
    assert!(dir.join("events").is_file(), "{}", err(&rec));
    assert!(err(&rec).contains(dir.to_str().unwrap()), "trace dir printed on stderr");
    assert_eq!(std::fs::canonicalize(scratch().join("xdg/weft/latest-trace")).unwrap(), dir);
    let rep = weft().args(["replay", "-a"]).output().unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
    assert_eq!(String::from_utf8_lossy(&rep.stdout), "hello\n");
    let ls = weft().arg("ls").output().unwrap();
    assert!(String::from_utf8_lossy(&ls.stdout).contains("exitcode-0"));
    let dump = weft().arg("dump").output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("exit_group(0x3") && text.contains("end: exited with status 3"), "{text}");
}

/// Large reads of a regular file stay in the trace's copy of it (a hard
/// link to the user's own file, a store copy of root's or another user's),
/// not in the log; the replay reads them back from there, and when the
/// copy changed since the recording it says so instead of replaying wrong
/// bytes.
#[test]
fn large_file_reads_replay_from_the_copy_and_detect_changes() {
    let input = scratch().join("linked-input.txt");
    std::fs::write(&input, "weft reads this file in large chunks\n".repeat(20_000)).unwrap();
    let trace = trace_dir("linked");
    let rec = record(&trace, &["cat", input.to_str().unwrap()], Stdio::null());
    let rep = replay(&trace, &[]);
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    assert_replays_as_recorded("cat", &rec, &rep);
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    let from = format!("[from {} at 0]", input.display());
    assert!(String::from_utf8_lossy(&dump.stdout).contains(&from), "the read is a slice of the link");
    // Same length, same inode, other bytes (the input itself, for a link).
    let copy = std::fs::read_dir(trace.join("files"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-linked-input.txt"))
        .expect("the input's copy");
    let mut changed = std::fs::read(&copy).unwrap();
    changed[100] ^= 0x20;
    let mut perms = std::fs::metadata(&copy).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&copy, perms).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    std::io::Write::write_all(&mut file, &changed).unwrap();
    let out = replay(&trace, &[]);
    assert_ne!(out.status.code(), Some(0));
    assert!(err(&out).contains("changed since the recording"), "{}", err(&out));
}

/// cpuid is not trapped, so a trace keeps the CPU it was recorded on, and a
/// replay on another CPU says so (and still replays when nothing differs).
#[test]
fn replay_on_another_cpu_warns() {
    let dir = trace_dir("cpu-here");
    let rec = record(&dir, &[program("exitcode").to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(3), "{}", err(&rec));
    let here = replay(&dir, &[]);
    assert!(!err(&here).contains("another CPU"), "{}", err(&here));

    // The same trace, as if recorded on another CPU.
    let trace = weft_record::Trace::open(&dir).unwrap();
    let moved = trace_dir("cpu-elsewhere");
    let mut w = weft_record::trace::TraceWriter::create(&moved).unwrap();
    let mut meta = trace.meta.clone();
    meta.cpu.model = "Another CPU".into();
    meta.cpu.signature[0] ^= 1;
    w.write_meta(&meta).unwrap();
    for e in &trace.events {
        w.write_event(e.clone()).unwrap();
    }
    w.finish().unwrap();
    for f in std::fs::read_dir(dir.join("files")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), moved.join("files").join(f.file_name())).unwrap();
    }
    let elsewhere = replay(&moved, &[]);
    assert_eq!(elsewhere.status.code(), Some(0), "{}", err(&elsewhere));
    assert!(err(&elsewhere).contains("warning: recorded on another CPU (Another CPU"), "{}", err(&elsewhere));
}
