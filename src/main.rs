//! The `weft` command line: `record`, `replay` (gdb, `-s` server,
//! `-a` autopilot), `dump`, `ls`, following rr's conventions. stdout belongs to the program being recorded or replayed;
//! weft's own messages go to stderr.

mod dump;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use weft_record::{dirs, End};

#[derive(Parser)]
#[command(name = "weft", version, about = "Record multithreaded programs on all cores; replay them deterministically on one core")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROG and record it into a trace.
    Record {
        /// Trace directory to create (default: $XDG_DATA_HOME/weft/<prog>-<n>).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Record until every process of the tree has exited, not only the
        /// first one (whose end otherwise ends the recording and kills the
        /// processes left, a daemon's say, as `rr record` does without -w).
        #[arg(short = 'w', long = "wait")]
        wait: bool,
        /// Record through ptrace alone: no in-process runtime (LD_PRELOAD)
        /// buffering syscalls and logging the synchronization order.
        #[arg(long = "no-inprocess")]
        no_inprocess: bool,
        /// The program to record.
        program: OsString,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Replay a trace on one core under gdb (TRACE defaults to the latest).
    /// Without -a or -s, starts gdb connected to the replay; arguments
    /// after `--` go to gdb.
    Replay {
        /// Autopilot: replay to the end without a debugger and validate.
        #[arg(short = 'a', long)]
        autopilot: bool,
        /// Serve gdb on 127.0.0.1:PORT instead of starting it; clients
        /// connect one at a time, until weft is killed.
        #[arg(short = 's', long = "server", value_name = "PORT", conflicts_with = "autopilot")]
        server: Option<u16>,
        /// With -s: listen on ADDR instead of 127.0.0.1. Whoever reaches it
        /// can read the program's recorded inputs.
        #[arg(long, value_name = "ADDR", requires = "server", conflicts_with = "autopilot")]
        bind: Option<IpAddr>,
        /// Print a digest of every scheduling decision and the registers of
        /// every thread at every scheduling point (with -a).
        #[arg(long, requires = "autopilot")]
        digest: bool,
        /// Add a preemption to the schedule: at the Nth synchronization
        /// point (counted from 1), switch to recorded thread TID. Repeatable.
        /// Without it, the schedule saved in TRACE/schedule by an earlier
        /// exploration is used.
        #[arg(long, value_name = "N:TID")]
        preempt: Vec<String>,
        /// Do not search for a schedule when the replay fails; report the
        /// failure.
        #[arg(long)]
        no_explore: bool,
        /// Replays the schedule search may run in all.
        #[arg(long, default_value_t = 1000, value_name = "N")]
        max_attempts: usize,
        /// Seconds the replay may go without matching a logged event
        /// before it is stopped as a livelock (the log's next thread, if
        /// it computes, goes on for up to 3 times more); a thread
        /// searching for the instruction an asynchronous signal hit takes
        /// the signal where its search stands after nine tenths of it.
        #[arg(long, default_value_t = 120)]
        livelock_timeout: u64,
        /// The trace directory.
        trace: Option<PathBuf>,
        /// Arguments for gdb, after `--` (e.g. `-batch -x script.gdb`).
        #[arg(last = true, value_name = "GDB_ARGS", conflicts_with_all = ["autopilot", "server"])]
        gdb_args: Vec<OsString>,
    },
    /// Print a trace's events.
    Dump {
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        /// The trace directory (default: the latest).
        trace: Option<PathBuf>,
    },
    /// List recorded traces.
    Ls,
    /// List the processes of a trace: pid, parent, exit status, command
    /// (as `rr ps`).
    Ps {
        /// The trace directory (default: the latest).
        trace: Option<PathBuf>,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let code = match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            // Not eprintln!, which panics when stderr is a closed pipe.
            let _ = writeln!(std::io::stderr(), "weft: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Record { output, wait, no_inprocess, program, args } => record(output, wait, !no_inprocess, program, args),
        Command::Replay {
            autopilot,
            server,
            bind,
            digest,
            preempt,
            no_explore,
            max_attempts,
            livelock_timeout,
            trace,
            gdb_args,
        } => {
            let dir = dirs::resolve_trace(trace.as_deref())?;
            let saved = dir.join(SCHEDULE_FILE);
            let livelock_timeout = std::time::Duration::from_secs(livelock_timeout);
            let max_attempts = if no_explore { 1 } else { max_attempts.max(1) };
            let lessons = load_lessons(&dir);
            if !autopilot {
                let given = (!preempt.is_empty()).then(|| weft_replay::Schedule::parse(&preempt)).transpose()?;
                let explore = weft_explore::ExploreOptions {
                    replay: weft_replay::ReplayOptions { livelock_timeout, lessons, ..Default::default() },
                    max_attempts,
                    ..Default::default()
                };
                let how = match server {
                    Some(port) => Debugger::Server(SocketAddr::new(bind.unwrap_or(Ipv4Addr::LOCALHOST.into()), port)),
                    None => Debugger::Gdb(gdb_args),
                };
                return debug(&dir, given, explore, how);
            }
            let schedule = if preempt.is_empty() {
                weft_replay::Schedule::load(&saved)?
            } else {
                weft_replay::Schedule::parse(&preempt)?
            };
            let replay_opts =
                weft_replay::ReplayOptions { schedule, digest, livelock_timeout, lessons, ..Default::default() };
            let known = !preempt.is_empty() || saved.exists();
            replay(&dir, weft_explore::ExploreOptions { replay: replay_opts, max_attempts, ..Default::default() }, known)
        }
        Command::Dump { json, trace } => {
            dump::dump(&dirs::resolve_trace(trace.as_deref())?, json)?;
            Ok(0)
        }
        Command::Ls => {
            dump::ls()?;
            Ok(0)
        }
        Command::Ps { trace } => {
            dump::ps(&dirs::resolve_trace(trace.as_deref())?)?;
            Ok(0)
        }
    }
}

/// Finds `program` as a shell would: a path if it has a slash, else in PATH.
fn resolve_program(program: &OsString) -> Result<PathBuf> {
    let is_exec = |p: &Path| {
        p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
    };
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        if !p.exists() {
            bail!("{}: no such file", p.display());
        }
        if !is_exec(&p) {
            bail!("{}: not an executable file", p.display());
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_exec(p))
        .with_context(|| format!("{}: command not found", program.to_string_lossy()))
}

fn record(output: Option<PathBuf>, wait: bool, inprocess: bool, program: OsString, args: Vec<OsString>) -> Result<i32> {
    let path = resolve_program(&program)?;
    let trace_dir = match output {
        Some(o) => o,
        None => dirs::new_trace_dir(&path)?,
    };
    let mut argv = vec![program];
    argv.extend(args);
    let opts = weft_record::RecordOptions { program: path, argv, trace_dir: trace_dir.clone(), wait_all: wait, inprocess };
    let recording = weft_record::record(&opts)?;
    eprintln!(
        "weft: recorded {} events to {} ({})",
        recording.events,
        trace_dir.display(),
        recording.end
    );
    // The program's exit status is the result, whatever became of the link.
    if let Err(e) = dirs::set_latest(&trace_dir) {
        eprintln!("weft: error: latest-trace not updated: {e:#}");
    }
    Ok(exit_code(&recording.end))
}

/// The exit status a shell would report for a program that ended so.
fn exit_code(end: &End) -> i32 {
    match end {
        End::Exited(code) => *code,
        End::Killed { signo, .. } => 128 + signo,
    }
}

/// Where in a trace directory `weft replay` keeps the schedule an
/// exploration found, so the next replay needs no search.
const SCHEDULE_FILE: &str = "schedule";

/// Where in a trace directory `weft replay` keeps, when a search (of `-a`
/// or before a debugging session) found no valid schedule, the schedule
/// that got furthest (`schedule`), the lessons its replay acted on
/// (`lessons`), how it failed ([`FURTHEST_FAILURE`]) and where
/// ([`FURTHEST_REACHED`]): a debugging
/// session then starts under it at once, instead of running the same
/// search again. A valid schedule found later by `-a` removes it.
const FURTHEST_DIR: &str = "furthest";

/// The file of [`FURTHEST_DIR`] that says how its replay failed (text).
const FURTHEST_FAILURE: &str = "failure";

/// The file of [`FURTHEST_DIR`] that holds the log index its replay
/// failed at (decimal): a search replaces the furthest only when it got as
/// far.
const FURTHEST_REACHED: &str = "reached";

/// Where in a trace directory `weft replay` keeps what its replays learned
/// ([`weft_replay::Lessons`]), so the next replay and debugging session
/// start with it.
const LESSONS_FILE: &str = "lessons";

/// The lessons kept in trace directory `dir`; none, with a warning, when
/// the file is damaged (they are only a head start).
fn load_lessons(dir: &Path) -> weft_replay::Lessons {
    weft_replay::Lessons::load(&dir.join(LESSONS_FILE)).unwrap_or_else(|e| {
        eprintln!("weft: warning: {e:#}; replaying without what earlier replays learned");
        Default::default()
    })
}

/// Keeps `lessons` in trace directory `dir` when they say more than
/// `known`, those the replay started with. A trace directory weft may not
/// write to keeps none, with a warning.
fn save_lessons(dir: &Path, lessons: &weft_replay::Lessons, known: &weft_replay::Lessons) {
    if lessons != known {
        if let Err(e) = lessons.save(&dir.join(LESSONS_FILE)) {
            eprintln!("weft: warning: {e:#}; later replays will learn it again");
        }
    }
}

/// Replays (searching for a schedule if the log order fails), reports the
/// outcome on stderr, and saves a schedule that was found.
fn replay(dir: &Path, mut opts: weft_explore::ExploreOptions, known: bool) -> Result<i32> {
    let trace = open_trace(dir)?;
    if (known || opts.max_attempts == 1) && !opts.replay.digest {
        let (outcome, lessons) = autopilot(&trace, &opts.replay)?;
        match outcome {
            Ok((end, stuck)) => {
                report_valid(&end, trace.events.len() as u64, &stuck);
                save_lessons(dir, &lessons, &opts.replay.lessons);
                return Ok(0);
            }
            Err(failure) if opts.max_attempts == 1 => {
                eprintln!("weft: replay failed: {failure}");
                return Ok(2);
            }
            Err(failure) => {
                eprintln!("weft: the schedule does not make the replay valid ({failure}); searching again");
                opts.replay.echo_from = opts.replay.echo_from.max(failure.echoed_before());
            }
        }
    }
    let found = weft_explore::search(&trace, &opts)?;
    for line in &found.report.digest {
        eprintln!("{line}");
    }
    let explored = found.schedule != opts.replay.schedule;
    match &found.report.outcome {
        weft_replay::Outcome::Valid { end, events } => {
            report_valid(end, *events, &found.report.stuck);
            // The log order saved too: later replays and the debugger
            // then need no search.
            if explored || !dir.join(SCHEDULE_FILE).exists() {
                save_schedule(dir, &found)?;
            }
            save_lessons(dir, &found.report.lessons, &opts.replay.lessons);
            // Best effort: a stale one is never read while `schedule` exists.
            let _ = std::fs::remove_dir_all(dir.join(FURTHEST_DIR));
            Ok(0)
        }
        weft_replay::Outcome::Invalid(failure) => {
            eprintln!("weft: replay failed: {failure}");
            if found.attempts > 1 {
                let kept = match save_furthest(dir, &found, failure) {
                    Ok((path, true)) => format!("; kept in {} for `weft replay` to debug under", path.display()),
                    Ok((path, false)) => format!("; an earlier search got further, and its schedule stays in {}", path.display()),
                    Err(e) => format!(" (not kept: {e:#})"),
                };
                eprintln!(
                    "weft: no schedule found in {} replays, {} resumed from checkpoints (the furthest: {}){kept}",
                    found.attempts, found.resumed, found.schedule
                );
            }
            Ok(2)
        }
    }
}

/// Saves the schedule that got furthest in a search that found no valid
/// one, with its lessons and `failure`, to `dir/furthest/`
/// ([`FURTHEST_DIR`]), private to the user as the trace is (0700), unless
/// an earlier search's kept there got further; returns that directory and
/// whether this one was saved. Errors: it cannot be written.
fn save_furthest(dir: &Path, found: &weft_explore::Exploration, failure: &weft_replay::Failure) -> Result<(PathBuf, bool)> {
    use weft_record::store::{make_private_dir, write_private_file};
    let path = dir.join(FURTHEST_DIR);
    let reached = failure.event().unwrap_or(usize::MAX);
    let before = std::fs::read_to_string(path.join(FURTHEST_REACHED)).ok().and_then(|t| t.trim().parse::<usize>().ok());
    if before.is_some_and(|b| b > reached) {
        return Ok((path, false));
    }
    make_private_dir(&path).with_context(|| format!("cannot create {}", path.display()))?;
    found.schedule.save(&path.join(SCHEDULE_FILE))?;
    found.report.lessons.save(&path.join(LESSONS_FILE))?;
    for (name, text) in [(FURTHEST_FAILURE, failure.to_string()), (FURTHEST_REACHED, reached.to_string())] {
        let file = path.join(name);
        write_private_file(&file, format!("{text}\n").as_bytes()).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok((path, true))
}

/// The schedule an earlier search kept in `dir` as the one that got
/// furthest ([`FURTHEST_DIR`]), with its lessons, and how it failed;
/// `None` when there is none. Errors: a file of it is damaged.
fn load_furthest(dir: &Path) -> Result<Option<(weft_replay::Schedule, weft_replay::Lessons, String)>> {
    let path = dir.join(FURTHEST_DIR);
    if !path.join(SCHEDULE_FILE).exists() {
        return Ok(None);
    }
    let schedule = weft_replay::Schedule::load(&path.join(SCHEDULE_FILE))?;
    let lessons = weft_replay::Lessons::load(&path.join(LESSONS_FILE))?;
    let failure = std::fs::read_to_string(path.join(FURTHEST_FAILURE)).unwrap_or_default();
    Ok(Some((schedule, lessons, failure.trim_end().to_string())))
}

/// Says on stderr that the replay was valid and how the program ended,
/// and, for a program killed from outside, where each thread was stuck.
fn report_valid(end: &End, events: u64, stuck: &[String]) {
    let was = if matches!(end, End::Killed { .. }) { "was " } else { "" };
    eprintln!("weft: replay valid: {events} events matched; the program {was}{end}");
    if !stuck.is_empty() {
        eprintln!("weft: where the replay ended it:");
        for line in stuck {
            eprintln!("  {line}");
        }
    }
}

/// Autopilot as a client of the interactive session: replays to the
/// recorded end with no debugger attached, echoing the program's output,
/// and checks how it ended against the log. Returns the recorded end, or
/// the failure; with the end, where each thread was stuck if the recording
/// was killed from outside; and what the replay knows at its end
/// ([`weft_replay::Lessons`]). Errors: weft's own (ptrace).
fn autopilot(trace: &weft_record::Trace, opts: &weft_replay::ReplayOptions) -> Result<(Result<(End, Vec<String>), weft_replay::Failure>, weft_replay::Lessons)> {
    use weft_replay::Stop;
    let sopts = weft_replay::SessionOptions {
        schedule: opts.schedule.clone(),
        livelock_timeout: opts.livelock_timeout,
        max_checkpoints: 0,
        echo: true,
        lessons: opts.lessons.clone(),
        ..Default::default()
    };
    let mut session = weft_replay::ReplaySession::start(trace, sopts)?;
    let recorded = trace.events.last().and_then(|e| match &e.kind {
        weft_record::EventKind::End(end) => Some(end.clone()),
        _ => None,
    });
    loop {
        let stop = session.resume(weft_replay::Resume::Continue, &mut || false)?;
        let (same, observed) = match (&stop, &recorded) {
            (Stop::Diverged { failure, .. }, _) => return Ok((Err(failure.clone()), session.lessons().clone())),
            (Stop::Exited { code }, _) => (matches!(recorded, Some(End::Exited(a)) if a == *code), format!("exited with status {code}")),
            (Stop::Killed { tid, signo }, _) => (
                matches!(&recorded, Some(End::Killed { signo: s, tid: t, .. }) if s == signo && t == tid),
                format!("was killed by {} in thread {tid}", weft_record::event::signal_name(*signo)),
            ),
            _ => continue,
        };
        let outcome = match recorded {
            Some(end) if same => Ok((end, session.stuck().to_vec())),
            _ => Err(weft_replay::Failure::WrongEnd {
                event: session.when().mark.event,
                expected: recorded.map_or_else(|| "an end event".to_string(), |e| e.to_string()),
                observed: format!("the program {observed}"),
            }),
        };
        return Ok((outcome, session.lessons().clone()));
    }
}

/// Opens the trace at `dir`, warning when it was recorded on another CPU.
fn open_trace(dir: &Path) -> Result<weft_record::Trace> {
    let trace = weft_record::Trace::open(dir)?;
    let here = weft_record::cpu::Cpu::current();
    if trace.meta.cpu != here {
        eprintln!(
            "weft: warning: recorded on another CPU ({}); this one is {}. cpuid is not trapped, so code chosen by cpuid may differ and the replay diverge",
            trace.meta.cpu, here
        );
    }
    Ok(trace)
}

/// Saves the schedule a search found for a valid replay to
/// `dir/schedule` (the empty one too, so that no later replay searches
/// again), and says so.
fn save_schedule(dir: &Path, found: &weft_explore::Exploration) -> Result<()> {
    let path = dir.join(SCHEDULE_FILE);
    found.schedule.save(&path)?;
    eprintln!(
        "weft: schedule {} found in {} replays ({} resumed from checkpoints; {} failures passed from the failure cache); saved to {}",
        found.schedule,
        found.attempts,
        found.resumed,
        found.cache_hits,
        path.display()
    );
    Ok(())
}

/// Who debugs the replay.
enum Debugger {
    /// gdb, started by weft and connected to it, with these arguments
    /// after weft's own.
    Gdb(Vec<OsString>),
    /// Whoever connects to this address, for as long as weft runs.
    Server(SocketAddr),
}

/// The schedule a debugging session replays under, the lessons it acts on
/// and the failure it is known to meet: `given` (`--preempt`), else the
/// saved one, with the kept lessons; else the one that got furthest in an
/// earlier search that found none ([`FURTHEST_DIR`]), with its lessons;
/// else the result of the search autopilot runs, with the lessons its
/// replays learned (saved as the schedule and lessons when they make the
/// replay valid, else as the furthest).
fn debug_schedule(
    dir: &Path,
    trace: &weft_record::Trace,
    given: Option<weft_replay::Schedule>,
    explore: &weft_explore::ExploreOptions,
) -> Result<(weft_replay::Schedule, weft_replay::Lessons, Option<weft_replay::Failure>)> {
    let known = explore.replay.lessons.clone();
    if let Some(s) = given {
        return Ok((s, known, None));
    }
    let saved = dir.join(SCHEDULE_FILE);
    if saved.exists() {
        return Ok((weft_replay::Schedule::load(&saved)?, known, None));
    }
    match load_furthest(dir) {
        Ok(Some((schedule, lessons, failure))) => {
            eprintln!(
                "weft: an earlier search found no valid schedule; debugging under the one that got furthest ({schedule}, kept in {}), which failed: {failure}",
                dir.join(FURTHEST_DIR).display()
            );
            return Ok((schedule, lessons, None));
        }
        Ok(None) => {}
        Err(e) => eprintln!("weft: warning: {e:#}; ignoring the schedule kept as the furthest"),
    }
    eprintln!("weft: no saved schedule; searching for one first, as `weft replay -a` does");
    // Silently: the program's output appears as the debugger's session
    // passes it, not before the debugger connects.
    let mut quiet = explore.clone();
    quiet.replay.echo_from = usize::MAX;
    let found = weft_explore::search(trace, &quiet)?;
    let lessons = found.report.lessons.clone();
    match &found.report.outcome {
        weft_replay::Outcome::Valid { .. } => {
            save_schedule(dir, &found)?;
            save_lessons(dir, &lessons, &known);
            Ok((found.schedule, lessons, None))
        }
        weft_replay::Outcome::Invalid(failure) => {
            eprintln!(
                "weft: no valid schedule found in {} replays; debugging under the one that got furthest ({}), which fails: {failure}",
                found.attempts, found.schedule
            );
            // The next session starts under it without this search (not
            // under the log order alone, when no search was allowed).
            if found.attempts > 1 {
                if let Err(e) = save_furthest(dir, &found, failure) {
                    eprintln!("weft: warning: {e:#}; the next session will search again");
                }
            }
            Ok((found.schedule, lessons, Some(failure.clone())))
        }
    }
}

/// `weft replay` without -a: an interactive session served to gdb.
/// Returns gdb's exit status (0 with -s, which serves until killed).
fn debug(
    dir: &Path,
    given: Option<weft_replay::Schedule>,
    explore: weft_explore::ExploreOptions,
    how: Debugger,
) -> Result<i32> {
    let trace = open_trace(dir)?;
    let (schedule, lessons, known_failure) = debug_schedule(dir, &trace, given, &explore)?;
    // The program's output appears on ours as the replay first passes
    // it, as rr's replay prints it.
    let opts = weft_replay::SessionOptions {
        schedule,
        livelock_timeout: explore.replay.livelock_timeout,
        echo: true,
        lessons: lessons.clone(),
        ..Default::default()
    };
    let mut session = weft_replay::ReplaySession::start(&trace, opts)?;
    if let Some(failure) = known_failure {
        session.set_known_failure(failure);
    }
    let exe = session.exe_path().to_path_buf();
    let serve_opts = weft_stub::ServeOptions::default();
    let code = match how {
        Debugger::Server(addr) => {
            if !addr.ip().is_loopback() {
                eprintln!(
                    "weft: warning: listening on {addr}: whoever can connect can read the trace's contents, the program's recorded inputs included"
                );
            }
            let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
            let mut shown = listener.local_addr()?;
            if shown.ip().is_unspecified() {
                shown.set_ip(Ipv4Addr::LOCALHOST.into());
            }
            eprintln!(
                "weft: serving {} on {}; connect with:\n  gdb -ex 'target remote {shown}' {}",
                dir.display(),
                listener.local_addr()?,
                exe.display()
            );
            weft_stub::serve(&mut session, listener, &serve_opts).map(|()| 0)
        }
        Debugger::Gdb(gdb_args) => {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot listen on 127.0.0.1")?;
            let addr = listener.local_addr()?;
            // ^C belongs to gdb, which interrupts the replay with it; weft
            // only survives it (a handler, unlike SIG_IGN, is not inherited
            // across exec by gdb or by a tracee started later).
            extern "C" fn ignore(_: libc::c_int) {}
            let action = nix::sys::signal::SigAction::new(
                nix::sys::signal::SigHandler::Handler(ignore),
                nix::sys::signal::SaFlags::SA_RESTART,
                nix::sys::signal::SigSet::empty(),
            );
            // SAFETY: the handler does nothing.
            unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGINT, &action) }?;
            // gdb reads the libraries from the target (its default
            // sysroot): the trace's copies, as the recording ran them.
            let mut gdb = std::process::Command::new("gdb")
                .arg("-q")
                .arg(&exe)
                .args(["-ex", &format!("target remote {addr}")])
                .args(&gdb_args)
                .spawn()
                .context("cannot start gdb (is it installed?)")?;
            let pid = gdb.id();
            let stop = serve_opts.stop.clone();
            let waiter = std::thread::spawn(move || {
                let status = gdb.wait();
                stop.store(true, Ordering::SeqCst);
                status
            });
            let served = weft_stub::serve(&mut session, listener, &serve_opts);
            if served.is_err() {
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            }
            let status = waiter.join().map_err(|_| anyhow::anyhow!("waiting for gdb failed"))?.context("waiting for gdb")?;
            served.map(|()| status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
        }
    };
    save_lessons(dir, session.lessons(), &lessons);
    code
}
