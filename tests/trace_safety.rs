//! Traces are safe to keep (issue 11, point 7): private whatever the umask,
//! never linked to a file of root's or of another user's, read without
//! trusting their bytes, and the commands around them behave as Unix tools.

mod common;
use common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use weft_record::event::{EventKind, MappedFile};
use weft_record::Trace;

/// Byte ranges of the frames of an events file (after its 12-byte header):
/// a frame is a 13-byte header whose first word is the payload length.
fn frames(events: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut at = 12;
    let mut out = vec![];
    while at < events.len() {
        let len = u32::from_le_bytes(events[at..at + 4].try_into().unwrap()) as usize;
        out.push(at..at + 13 + len);
        at += 13 + len;
    }
    out
}

/// A frame holding `payload`, flagged zstd-compressed, with right checksums.
fn zstd_frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
    frame.push(1);
    frame.extend(crc32fast::hash(payload).to_le_bytes());
    frame.extend(crc32fast::hash(&frame).to_le_bytes());
    frame.extend(payload);
    frame
}

/// Records `exitcode` (exit status 3) into a fresh trace named `name`.
fn record_exitcode(name: &str) -> PathBuf {
    let trace = trace_dir(name);
    let rec = record(&trace, &[program("exitcode").to_str().unwrap()], Stdio::null());
    assert_eq!(rec.status.code(), Some(3), "{}", err(&rec));
    trace
}

/// Every file the trace copied: those mapped at exec and by mmap.
fn mapped_files(trace: &Trace) -> Vec<MappedFile> {
    let mut files = trace.meta.exec_files.clone();
    for e in &trace.events {
        if let EventKind::Syscall(s) = &e.kind {
            files.extend(s.file.as_deref().cloned());
        }
    }
    files
}

/// The trace's copy of the file whose path ends with `suffix`.
fn copy_of(trace: &Trace, suffix: &str) -> (MappedFile, PathBuf) {
    let f = mapped_files(trace)
        .into_iter()
        .find(|f| f.path.ends_with(suffix.as_bytes()))
        .unwrap_or_else(|| panic!("no copy of *{suffix}"));
    let path = trace.file_path(&f.copy);
    (f, path)
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `cat` of a 0640 file, recorded under umask 000 and under umask 777:
/// directories are 0700, the events file 0600, and no copy is readable by
/// anyone but the user.
#[test]
fn a_trace_is_private_whatever_the_umask() {
    let input = scratch().join("secret.txt");
    std::fs::write(&input, "a secret line\n".repeat(10_000)).unwrap();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o640)).unwrap();
    for umask in [0o000, 0o777] {
        let trace = trace_dir(&format!("umask-{umask:o}"));
        let mut cmd = weft();
        cmd.arg("record").arg("-o").arg(&trace).arg("--").arg("cat").arg(&input).stdout(Stdio::null());
        // SAFETY: umask(2) is async-signal-safe and cannot fail.
        unsafe { cmd.pre_exec(move || { libc::umask(umask); Ok(()) }) };
        let rec = cmd.output().unwrap();
        assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
        let mut cmd = weft();
        cmd.args(["replay", "-a"]).arg(&trace).stdout(Stdio::null());
        // SAFETY: as above.
        unsafe { cmd.pre_exec(move || { libc::umask(umask); Ok(()) }) };
        let rep = cmd.output().unwrap();
        assert_eq!(rep.status.code(), Some(0), "{}", err(&rep));
        assert_eq!(mode(&trace.join("schedule")), 0o600, "the schedule a replay saves");
        assert_eq!(mode(&trace), 0o700, "umask {umask:o}");
        assert_eq!(mode(&trace.join("files")), 0o700);
        assert_eq!(mode(&trace.join("events")), 0o600);
        assert_eq!(mode(&scratch().join("xdg/weft/store")), 0o700);
        let copies: Vec<_> = std::fs::read_dir(trace.join("files")).unwrap().map(|f| f.unwrap().path()).collect();
        assert!(copies.iter().any(|c| c.to_string_lossy().ends_with("-secret.txt")), "{copies:?}");
        for c in copies {
            assert_eq!(mode(&c) & 0o077, 0, "{} is {:o}", c.display(), mode(&c));
        }
    }
}

/// Recorded as root (or as anyone: libc is root's), no copy is a hard link
/// to the file the program mapped, and two recordings share one store copy.
#[test]
fn copies_of_others_files_are_never_links_and_traces_share_them() {
    let (a, b) = (record_exitcode("store-a"), record_exitcode("store-b"));
    let (ta, tb) = (Trace::open(&a).unwrap(), Trace::open(&b).unwrap());
    for f in mapped_files(&ta) {
        let original = std::fs::metadata(std::str::from_utf8(&f.path).unwrap()).unwrap();
        let copy = std::fs::metadata(ta.file_path(&f.copy)).unwrap();
        // SAFETY: geteuid(2) cannot fail.
        if original.uid() == 0 || original.uid() != unsafe { libc::geteuid() } {
            assert_ne!((copy.dev(), copy.ino()), (original.dev(), original.ino()), "{:?} is linked", f.path);
        }
        assert_eq!(copy.permissions().mode() & 0o222, 0, "copies are read-only");
    }
    let (libc_a, path_a) = copy_of(&ta, "libc.so.6");
    let (_, path_b) = copy_of(&tb, "libc.so.6");
    let entry = scratch().join(format!("xdg/weft/store/{:016x}", libc_a.hash));
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(ino(&path_a), ino(&entry), "trace a links the store entry");
    assert_eq!(ino(&path_b), ino(&entry), "trace b links the same entry");
    assert_ne!(ino(&entry), ino(Path::new(std::str::from_utf8(&libc_a.path).unwrap())));
}

/// Runs `cmd` with stdout discarded and returns its exit code, stderr,
/// and peak resident set size in KiB (wait4(2)'s rusage of that child).
#[allow(clippy::zombie_processes)] // reaped by wait4(2), for its rusage
fn run_measured(mut cmd: Command, name: &str) -> (i32, String, i64) {
    let log = scratch().join(format!("{name}.stderr"));
    let child = cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 on our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WEXITSTATUS(status), std::fs::read_to_string(&log).unwrap(), usage.ru_maxrss)
}

/// A 2 GiB zstd bomb in a frame whose checksums are right is refused from
/// its header, without allocating what it claims.
#[test]
fn a_zstd_bomb_is_refused_without_a_huge_allocation() {
    let trace = record_exitcode("bomb");
    let events = trace.join("events");
    let whole = std::fs::read(&events).unwrap();
    let meta = frames(&whole)[0].clone();
    let size: u64 = 2 << 30;
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    enc.set_pledged_src_size(Some(size)).unwrap();
    enc.include_contentsize(true).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..size >> 20 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 200 << 10, "a small frame: {} bytes", bomb.len());
    let mut bytes = whole[..meta.end].to_vec();
    bytes.extend(zstd_frame(&bomb));
    std::fs::write(&events, &bytes).unwrap();
    for sub in ["dump", "replay"] {
        let mut cmd = weft();
        cmd.arg(sub);
        if sub == "replay" {
            cmd.arg("-a");
        }
        cmd.arg(&trace);
        let (code, stderr, rss_kib) = run_measured(cmd, &format!("bomb-{sub}"));
        assert_ne!(code, 0, "{stderr}");
        assert!(stderr.contains(&format!("offset {}", meta.end)), "{stderr}");
        assert!(stderr.contains("declares 2147483648 bytes, more than the format's maximum"), "{stderr}");
        assert!(rss_kib < 256 << 10, "weft {sub} peaked at {rss_kib} KiB");
    }
}

/// Anything after the End event, garbage or a well-formed frame, is an
/// error with the offset where it starts.
#[test]
fn data_after_the_end_is_an_error() {
    let trace = record_exitcode("after-end");
    let events = trace.join("events");
    let whole = std::fs::read(&events).unwrap();
    let last = frames(&whole).last().unwrap().clone();
    for tail in [b"garbage".to_vec(), whole[last].to_vec()] {
        let mut bytes = whole.clone();
        bytes.extend(&tail);
        std::fs::write(&events, &bytes).unwrap();
        let want = format!("corrupt record at offset {}: {} bytes after the End event", whole.len(), tail.len());
        let dump = weft().arg("dump").arg(&trace).output().unwrap();
        assert_eq!(dump.status.code(), Some(1));
        assert!(err(&dump).contains(&want), "{}", err(&dump));
        let rep = replay(&trace, &[]);
        assert_eq!(rep.status.code(), Some(1));
        assert!(err(&rep).contains(&want), "{}", err(&rep));
    }
}

/// A trace whose recorder was killed between two frames has no End event:
/// dump prints what there is, says so, and exits 1; ls calls it incomplete.
#[test]
fn a_trace_without_an_end_says_so() {
    let trace = record_exitcode("no-end");
    let events = trace.join("events");
    let whole = std::fs::read(&events).unwrap();
    let last = frames(&whole).last().unwrap().clone();
    std::fs::write(&events, &whole[..last.start]).unwrap();
    let dump = weft().arg("dump").arg(&trace).output().unwrap();
    assert_eq!(dump.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&dump.stdout).contains("exit_group(0x3"), "events still printed");
    assert!(err(&dump).contains("no-end/events: incomplete trace: no End event after"), "{}", err(&dump));
    let dump = weft().args(["dump", "--json"]).arg(&trace).output().unwrap();
    assert_eq!(dump.status.code(), Some(1));
    assert!(err(&dump).contains("incomplete trace"), "{}", err(&dump));
}

/// A pipe whose read end is already closed.
fn widowed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills two new descriptors that we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are open and ours alone.
    drop(unsafe { OwnedFd::from_raw_fd(fds[0]) });
    unsafe { OwnedFd::from_raw_fd(fds[1]) }
}

/// `weft dump | head` and `weft ls | head`: when the reader is gone, weft
/// ends quietly with status 0, whether stderr is a file or the same closed
/// pipe.
#[test]
fn dump_and_ls_into_a_closed_pipe_end_quietly() {
    let xdg = scratch().join("xdg-epipe");
    let weft_here = || {
        let mut c = weft();
        c.env("XDG_DATA_HOME", &xdg);
        c
    };
    let rec = weft_here().arg("record").arg(program("exitcode")).output().unwrap();
    assert_eq!(rec.status.code(), Some(3), "{}", err(&rec));
    for args in [&["dump"][..], &["dump", "--json"], &["ls"]] {
        let out = weft_here().args(args).stdout(Stdio::from(widowed_pipe())).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", err(&out));
        assert_eq!(err(&out), "", "{args:?}");
        let pipe = widowed_pipe();
        let both = pipe.try_clone().unwrap();
        let status = weft_here().args(args).stdout(Stdio::from(pipe)).stderr(Stdio::from(both)).status().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?} with stderr on the pipe too");
    }
}

/// A directory where the `latest-trace` link belongs: recording still
/// returns the program's exit status and names the path; commands that
/// need the latest trace refuse it, naming the path.
#[test]
fn a_latest_trace_directory_is_an_error_naming_it() {
    let xdg = scratch().join("xdg-latest");
    let latest = xdg.join("weft/latest-trace");
    std::fs::create_dir_all(&latest).unwrap();
    let weft_here = || {
        let mut c = weft();
        c.env("XDG_DATA_HOME", &xdg);
        c
    };
    let rec = weft_here().arg("record").arg(program("exitcode")).output().unwrap();
    assert_eq!(rec.status.code(), Some(3), "{}", err(&rec));
    assert_eq!(String::from_utf8_lossy(&rec.stdout), "hello\n");
    let named = format!("{} is not a symbolic link to a trace", latest.display());
    assert!(err(&rec).contains("weft: recorded") && err(&rec).contains(&named), "{}", err(&rec));
    assert!(latest.is_dir(), "left alone");
    for args in [&["dump"][..], &["replay", "-a"]] {
        let out = weft_here().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(err(&out).contains(&named), "{args:?}: {}", err(&out));
    }
}

/// A copy in `files/` edited after the recording (the executable's or a
/// library's) makes the replay stop with a message naming the copy and the
/// file it stands for, not replay other code.
#[test]
fn a_tampered_copy_fails_the_replay_naming_it() {
    for (name, suffix) in [("tamper-exe", "/exitcode"), ("tamper-libc", "libc.so.6")] {
        let trace = record_exitcode(name);
        let (file, copy) = copy_of(&Trace::open(&trace).unwrap(), suffix);
        // A new file under the copy's name: the store entry stays intact.
        let mut bytes = std::fs::read(&copy).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        std::fs::remove_file(&copy).unwrap();
        std::fs::write(&copy, &bytes).unwrap();
        let rep = replay(&trace, &[]);
        assert_ne!(rep.status.code(), Some(0), "{}", err(&rep));
        let want = format!(
            "{}: changed since the recording: its bytes differ from the recorded {}",
            copy.display(),
            String::from_utf8_lossy(&file.path)
        );
        assert!(err(&rep).contains(&want), "{}", err(&rep));
    }
}
