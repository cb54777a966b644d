//! Shared helpers for the end-to-end tests: build the C programs in
//! tests/c with the system cc, and run the real `weft` binary.

#![allow(dead_code)]

pub mod gdb;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The weft binary under test.
pub fn weft() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
    c.env("XDG_DATA_HOME", scratch().join("xdg"));
    c
}

/// A scratch directory shared by the tests of one binary.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir")).path()
}

/// Compiles tests/c/NAME.c (once) with -O1 and returns the binary's path.
pub fn program(name: &str) -> PathBuf {
    build("cc", &["-O1", "-g", "-pthread"], &format!("tests/c/{name}.c"), name)
}

/// Compiles tests/c/NAME.c (once) for the debugger tests, with -O0 so that
/// every variable and line is where the source says, and returns the
/// binary's path.
pub fn debug_program(name: &str) -> PathBuf {
    build("cc", &["-O0", "-g", "-pthread"], &format!("tests/c/{name}.c"), &format!("{name}-O0"))
}

/// Compiles tests/rust/NAME.rs (once) with `rustc -O` ($RUSTC if set) and
/// returns the binary's path.
pub fn rust_program(name: &str) -> PathBuf {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    build(&rustc, &["-O"], &format!("tests/rust/{name}.rs"), &format!("rust-{name}"))
}

/// Compiles `src` (relative to the repository) once with `compiler` and
/// `flags` into the scratch directory's `bin/BIN`, and returns its path.
pub fn build(compiler: &str, flags: &[&str], src: &str, bin: &str) -> PathBuf {
    let out = scratch().join("bin").join(bin);
    if !out.exists() {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
        // Tests run in threads of one process: each compiles to its own file.
        static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = out.with_extension(format!("tmp{n}"));
        let st = Command::new(compiler).args(flags).arg("-o").arg(&tmp).arg(&src).status().expect("run the compiler");
        assert!(st.success(), "{compiler} failed for {}", src.display());
        // The first build in wins: replacing it would delete the file
        // under a program already running it (one that execs
        // /proc/self/exe then finds it deleted).
        match std::fs::hard_link(&tmp, &out) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{}: {e}", out.display()),
            _ => std::fs::remove_file(&tmp).unwrap(),
        }
    }
    out
}

/// A fresh, not yet existing trace directory path.
pub fn trace_dir(name: &str) -> PathBuf {
    let d = scratch().join("traces").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.parent().unwrap()).unwrap();
    d
}

/// Runs `weft record -o TRACE -- argv...` with `stdin` as its stdin.
pub fn record(trace: &Path, argv: &[&str], stdin: Stdio) -> Output {
    record_with(trace, &[], argv, stdin)
}

/// Runs `weft record -o TRACE FLAGS... -- argv...` with `stdin` as its stdin.
pub fn record_with(trace: &Path, flags: &[&str], argv: &[&str], stdin: Stdio) -> Output {
    weft()
        .arg("record")
        .arg("-o")
        .arg(trace)
        .args(flags)
        .arg("--")
        .args(argv)
        .stdin(stdin)
        .output()
        .expect("run weft record")
}

/// Records `argv` (with weft record's `flags`) into trace directories
/// NAME-0, NAME-1, ... until a run prints `stdout`, at most five times,
/// and returns that trace. A test that needs the interleaving most
/// two-core runs take records a rare other one again. Panics when all
/// five took another, or a recording failed.
pub fn record_until(name: &str, flags: &[&str], argv: &[&str], stdout: &[u8]) -> PathBuf {
    for attempt in 0..5 {
        let trace = trace_dir(&format!("{name}-{attempt}"));
        let rec = record_with(&trace, flags, argv, Stdio::null());
        assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
        if rec.stdout == stdout {
            return trace;
        }
    }
    panic!("five recordings of {argv:?} all printed other than {:?}", String::from_utf8_lossy(stdout));
}

/// Records tests/c/racyflag.c until main saw the checker's store (the
/// race that only a race reversal replays, seed 000 §4.3).
pub fn record_racyflag(name: &str) -> PathBuf {
    record_until(name, &[], &[program("racyflag").to_str().unwrap()], b"checker done\nmain saw y\n")
}

/// Runs `weft replay -a [extra...] TRACE`.
pub fn replay(trace: &Path, extra: &[&str]) -> Output {
    weft().args(["replay", "-a"]).args(extra).arg(trace).output().expect("run weft replay")
}

/// stderr as text.
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Records `argv`, replays it, and checks that the replay is valid and
/// prints exactly what the recorded run printed. Returns both outputs.
pub fn record_and_replay(name: &str, argv: &[&str], stdin: Stdio) -> (Output, Output) {
    let trace = trace_dir(name);
    let rec = record(&trace, argv, stdin);
    assert!(err(&rec).contains("weft: recorded"), "record failed: {}", err(&rec));
    let rep = replay(&trace, &[]);
    assert_replays_as_recorded(name, &rec, &rep);
    (rec, rep)
}

/// Records C program `name` (tests/c) `runs` times with each recorder,
/// the in-process runtime and `--no-inprocess`, asserts `check` on each
/// recording (its stdout and stderr), and replays each in log order
/// (`--no-explore`), valid and printing what the recording printed.
/// Returns the replays' outputs.
pub fn record_and_replay_both_ways(name: &str, runs: usize, check: impl Fn(&str, &str) -> bool) -> Vec<Output> {
    let prog = program(name);
    let mut replays = Vec::new();
    for (mode, flags) in [("inprocess", &[][..]), ("ptrace", &["--no-inprocess"])] {
        for run in 0..runs {
            let trace_name = format!("{name}-{mode}-{run}");
            let trace = trace_dir(&trace_name);
            let rec = record_with(&trace, flags, &[prog.to_str().unwrap()], Stdio::null());
            let out = String::from_utf8_lossy(&rec.stdout);
            assert!(check(&out, &err(&rec)), "{trace_name}: {out}{}", err(&rec));
            let rep = replay(&trace, &["--no-explore"]);
            assert_replays_as_recorded(&trace_name, &rec, &rep);
            replays.push(rep);
        }
    }
    replays
}

/// A copy of the trace at `recorded`, named `name`, whose events are
/// `events` (a test's edit of the recorded ones); its files are copied as
/// they are.
pub fn edited_trace(recorded: &Path, name: &str, events: Vec<weft_record::Event>) -> PathBuf {
    let trace = weft_record::Trace::open(recorded).unwrap();
    let edited = trace_dir(name);
    let mut w = weft_record::trace::TraceWriter::create(&edited).unwrap();
    w.write_meta(&trace.meta).unwrap();
    for e in events {
        w.write_event(e).unwrap();
    }
    w.finish().unwrap();
    let copied = Command::new("cp").arg("-a").arg(recorded.join("files/.")).arg(edited.join("files")).status().unwrap();
    assert!(copied.success());
    edited
}

/// Records `argv` into a fresh trace `name` and replays it with
/// `--no-explore` (the log order alone): asserts that the recording exited
/// 0 and that the replay is valid, so that it needs no exploration, and
/// prints the recorded output. Returns the recording's output and trace.
pub fn record_valid_in_log_order(name: &str, argv: &[&str]) -> (Output, PathBuf) {
    let trace = trace_dir(name);
    let rec = record(&trace, argv, Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "record {name}: {}", err(&rec));
    let rep = replay(&trace, &["--no-explore"]);
    assert_replays_as_recorded(name, &rec, &rep);
    (rec, trace)
}

/// Asserts that replay `rep` of recording `rec` was valid and printed the
/// recorded stdout.
pub fn assert_replays_as_recorded(name: &str, rec: &Output, rep: &Output) {
    assert_eq!(rep.status.code(), Some(0), "replay of {name} invalid: {}", err(rep));
    assert!(err(rep).contains("replay valid"), "{}", err(rep));
    assert_eq!(
        String::from_utf8_lossy(&rep.stdout),
        String::from_utf8_lossy(&rec.stdout),
        "replayed stdout differs from the recorded run"
    );
}

/// Makes sure a Debian program is installed (installing its package with
/// apt-get when it is missing) and returns its path.
pub fn debian_program(bin: &str, package: &str) -> PathBuf {
    let path = PathBuf::from("/usr/bin").join(bin);
    if !path.exists() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "-qq", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            let _ = Command::new("apt-get").arg("update").status();
            let st = Command::new("apt-get").args(["install", "-y", "-qq", package]).status().expect("apt-get");
            assert!(st.success(), "cannot install {package}");
        }
    }
    path
}

/// A file of `mb` megabytes of compressible text (deterministic).
pub fn text_file(name: &str, mb: usize) -> PathBuf {
    let path = scratch().join(name);
    if !path.exists() {
        let mut s = String::with_capacity(mb << 20);
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"];
        while s.len() < mb << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(words[(x % 10) as usize]);
            s.push(if x.is_multiple_of(7) { '\n' } else { ' ' });
            s.push_str(&format!("{}", x % 1000));
            s.push('\n');
        }
        std::fs::write(&path, s).unwrap();
    }
    path
}

/// Records `argv` and checks that its replay (`weft replay -a` with
/// `replay_args`) is valid and prints the recorded output; returns the
/// trace, which keeps the schedule found (`TRACE/schedule`) for later
/// replays. A recording whose search ends in "no schedule found" (its
/// interleaving is beyond the search), and only such a recording, is
/// taken again, up to `recordings` in all; the test says so.
pub fn record_until_a_schedule_is_found(name: &str, argv: &[&str], replay_args: &[&str], recordings: usize) -> PathBuf {
    for attempt in 0..recordings {
        let trace = trace_dir(&format!("{name}-{attempt}"));
        let rec = record(&trace, argv, Stdio::null());
        assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
        let rep = replay(&trace, replay_args);
        if attempt + 1 < recordings && err(&rep).contains("no schedule found") {
            eprintln!("{name} recording {attempt}: the search found no schedule; recording again");
            continue;
        }
        assert_replays_as_recorded(name, &rec, &rep);
        assert!(rec.stdout.len() > 1000, "the program produced its output");
        return trace;
    }
    unreachable!()
}

/// How many exploration replays a valid replay's search made: `weft
/// replay` saves a schedule "found in N replays", the first being the log
/// order. None when it printed no such line.
pub fn exploration_replays(rep: &Output) -> Option<usize> {
    let text = err(rep);
    let n: usize = text.split(" found in ").nth(1)?.split(' ').next()?.parse().ok()?;
    Some(n - 1)
}

/// Lines of `text`, sorted: processes that print to one pipe interleave
/// as the run had them, which a test need not pin down (the recorder
/// orders writes to one descriptor within a process, not across
/// processes, which could deadlock on a full pipe).
pub fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    lines
}
