//! Real Debian programs, recorded on all cores and replayed on one: each
//! replay (exploring for a schedule when the log order fails) must be
//! valid and print byte-identical output. The programs are installed with
//! apt-get when missing.

mod common;
use common::*;
use std::process::Stdio;

fn check(name: &str, bin: &str, package: &str, args: &[&str]) {
    let prog = debian_program(bin, package);
    let mut argv = vec![prog.to_str().unwrap()];
    argv.extend_from_slice(args);
    let (rec, _) = record_and_replay(name, &argv, Stdio::null());
    assert_eq!(rec.status.code(), Some(0), "{}", err(&rec));
    assert!(rec.stdout.len() > 1000, "the program produced its output");
}

/// pbzip2's writer polls for blocks that consumer threads finish
/// concurrently; on one core the log order alone does not decide which poll
/// succeeds, nor which consumer takes which block, so the replay needs
/// several preemptions found by exploration, some of them in pairs
/// (m = 2). Measured on one recording of 4 MB: valid after 70 replays
/// (14 s, attempts resuming from checkpoints). Some recordings are beyond
/// the search (see README's known limits): in one CI run, two of three in
/// a row; hence up to six recordings (a failed search takes about 70 s).
#[test]
fn pbzip2_two_threads() {
    let input = text_file("pbzip2-input.txt", 4);
    let prog = debian_program("pbzip2", "pbzip2");
    record_until_a_schedule_is_found("pbzip2", &[prog.to_str().unwrap(), "-p2", "-c", input.to_str().unwrap()], &[], 6);
}

/// On 6 MB, `xz -T2` makes one block (its default block size is 24 MB at
/// level 6), so one worker does the work.
#[test]
fn xz_two_threads() {
    let input = text_file("xz-input.txt", 6);
    check("xz", "xz", "xz-utils", &["-T2", "-c", input.to_str().unwrap()]);
}

/// With 1 MiB blocks the two workers compress side by side while the main
/// thread feeds them and writes what they finish, as xz does on large
/// inputs: the replay needs the workers to take turns (the default
/// schedule) and usually a few preemptions. Measured on 15 recordings of
/// 3-6 MB: 11 valid in log order or after at most 18 replays (2-16 s); in
/// the other 4 a worker finishes a block before the main thread looks, in
/// the replay but not in the recording, and 240 s of search found nothing
/// (200 replays of one took 161 s; the default budget of 1000 took over
/// 30 minutes in CI). So the search gets 100 replays here, and such a
/// recording is taken again. On 4 recordings of 4 MB, 2 were beyond the
/// search, with this build and the one before the debugger alike (the
/// same 2), and one CI run met 4 such recordings in a row: hence up to 8
/// recordings (a failed search of 100 replays takes about 40 s).
#[test]
fn xz_two_workers_many_blocks() {
    let input = text_file("xz-blocks-input.txt", 6);
    let prog = debian_program("xz", "xz-utils");
    let argv = [prog.to_str().unwrap(), "-T2", "--block-size=1MiB", "-c", input.to_str().unwrap()];
    record_until_a_schedule_is_found("xz-blocks", &argv, &["--max-attempts", "100"], 8);
}

/// Which sort thread takes the output lock first is decided by a race the
/// log does not capture: the replay in log order usually deadlocks, and
/// exploration finds the preemption (seed 000 §4.2). Some recordings
/// (measured: 2 of 8 recorded on a loaded machine, 1 of 16 on an idle one)
/// have a first failure that neither one preemption nor a pair gets past;
/// such a recording is taken again, up to 5 in all.
#[test]
fn sort_parallel() {
    let input = text_file("sort-input.txt", 4);
    let prog = debian_program("sort", "coreutils");
    record_until_a_schedule_is_found("sort", &[prog.to_str().unwrap(), "--parallel=2", "-S", "64M", input.to_str().unwrap()], &[], 5);
}
