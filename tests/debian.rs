//! Real Debian programs, recorded on all cores and replayed on one.
//! pbzip2's threads meet only through pthread locks and condition
//! variables, whose order the in-process runtime logs (issue 12, seed 003
//! §3.2): every recording, ten of them, must replay valid at the first
//! attempt, with no exploration and no re-recording, and print
//! byte-identical output. xz with many blocks and sort also decide from
//! data they read outside those locks (see their tests). The programs are
//! installed with apt-get when missing.

mod common;
use common::*;
use std::process::Stdio;
use std::time::Instant;

/// Recordings of each program.
const RECORDINGS: usize = 10;

/// Records `bin args... INPUT` (INPUT: a text file of `mb` MB)
/// `recordings` times and replays each recording once in log order
/// (`--no-explore`). Fails, after trying them all, naming every recording
/// whose replay was invalid (it would have needed exploration) or printed
/// other output.
fn replay_at_the_first_attempt(recordings: usize, name: &str, bin: &str, package: &str, args: &[&str], mb: usize) {
    let prog = debian_program(bin, package);
    let input = text_file(&format!("{name}-input.txt"), mb);
    let mut argv = vec![prog.to_str().unwrap()];
    argv.extend_from_slice(args);
    argv.push(input.to_str().unwrap());
    let mut failures = vec![];
    for n in 0..recordings {
        let trace = trace_dir(&format!("{name}-{n}"));
        let start = Instant::now();
        let rec = record(&trace, &argv, Stdio::null());
        let recorded = start.elapsed();
        assert_eq!(rec.status.code(), Some(0), "{name} recording {n}: {}", err(&rec));
        assert!(rec.stdout.len() > 1000, "the program produced its output");
        let start = Instant::now();
        let rep = replay(&trace, &["--no-explore"]);
        let replayed = start.elapsed();
        let log = err(&rep);
        let valid = rep.status.code() == Some(0) && log.contains("replay valid");
        let same = rep.stdout == rec.stdout;
        eprintln!("{name} recording {n}: record {recorded:.1?}, replay {replayed:.1?}, valid in log order: {valid}, same output: {same}");
        if !valid || !same {
            let outcome = log.lines().skip_while(|l| !l.starts_with("weft: replay")).take(8).collect::<Vec<_>>().join("\n    ");
            failures.push(format!("recording {n} (same output: {same}): {outcome}"));
        }
    }
    assert!(failures.is_empty(), "{name}: {} of {recordings} recordings failed:\n{}", failures.len(), failures.join("\n"));
}

/// pbzip2's consumer threads take blocks from a queue under a mutex and
/// condition variables, and its writer waits for them the same way.
#[test]
fn pbzip2_two_threads() {
    replay_at_the_first_attempt(RECORDINGS, "pbzip2", "pbzip2", "pbzip2", &["-p2", "-c"], 64);
}

/// On 6 MB, `xz -T2` makes one block (its default block size is 24 MB at
/// level 6), so one worker does the work.
#[test]
fn xz_two_threads() {
    replay_at_the_first_attempt(1, "xz", "xz", "xz-utils", &["-T2", "-c"], 6);
}

/// With 1 MiB blocks the two workers compress side by side while the main
/// thread feeds them and writes what they finish, through xz's mutex and
/// condition variables. Measured: 9 of 10 recordings of 16 MB (and 3 of 3
/// by hand) replayed valid in log order; in the other, a worker did not
/// signal a condition variable where it had (it decided from a value read
/// outside the lock the log orders). Such a recording gets the search
/// and, if that finds nothing, is taken again, at most 4 in all.
#[test]
fn xz_two_workers_many_blocks() {
    let input = text_file("xz-blocks-input.txt", 16);
    let prog = debian_program("xz", "xz-utils");
    let argv = [prog.to_str().unwrap(), "-T2", "--block-size=1MiB", "-c", input.to_str().unwrap()];
    record_until_a_schedule_is_found("xz-blocks", &argv, &["--max-attempts", "50"], 4);
}

/// sort's two threads merge under a mutex and condition variables, whose
/// order the runtime logs; but a thread also reads its merge-tree
/// neighbours' counters without their locks (a data race), so the log order
/// is not always enough: measured, 9 of 10 recordings (and 3 of 3 by hand)
/// replayed valid in log order, and the one that did not diverged where a
/// thread decided to queue a node from such a read. Such a recording is
/// taken again (the search, seed 000 §4.2, is coarse-grained and cannot
/// reorder a racy read), at most 4 in all.
#[test]
fn sort_parallel() {
    let input = text_file("sort-input.txt", 4);
    let prog = debian_program("sort", "coreutils");
    let argv = [prog.to_str().unwrap(), "--parallel=2", "-S", "64M", input.to_str().unwrap()];
    record_until_a_schedule_is_found("sort", &argv, &["--max-attempts", "50"], 4);
}
