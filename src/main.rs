//! The `weft` command line: `record`, `replay`, `dump`, `ls`, following rr's
//! conventions. stdout belongs to the program being recorded or replayed;
//! weft's own messages go to stderr.

mod dump;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
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
        /// The program to record.
        program: OsString,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Replay a trace on one core (TRACE defaults to the latest).
    Replay {
        /// Autopilot: replay to the end without a debugger and validate.
        #[arg(short = 'a', long)]
        autopilot: bool,
        /// Print a digest of every scheduling decision and the registers of
        /// every thread at every scheduling point.
        #[arg(long)]
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
        /// Seconds a thread may run without reaching a scheduling point
        /// before the replay is stopped as a livelock.
        #[arg(long, default_value_t = 120)]
        livelock_timeout: u64,
        /// The trace directory.
        trace: Option<PathBuf>,
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
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let code = match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("weft: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Record { output, program, args } => record(output, program, args),
        Command::Replay { autopilot, digest, preempt, no_explore, max_attempts, livelock_timeout, trace } => {
            if !autopilot {
                bail!("only autopilot replay (`weft replay -a`) is available in this version");
            }
            let dir = dirs::resolve_trace(trace.as_deref())?;
            let saved = dir.join(SCHEDULE_FILE);
            let schedule = if preempt.is_empty() {
                weft_replay::Schedule::load(&saved)?
            } else {
                weft_replay::Schedule::parse(&preempt)?
            };
            let replay_opts = weft_replay::ReplayOptions {
                schedule,
                digest,
                livelock_timeout: std::time::Duration::from_secs(livelock_timeout),
                ..Default::default()
            };
            let max_attempts = if no_explore { 1 } else { max_attempts.max(1) };
            replay(&dir, weft_explore::ExploreOptions { replay: replay_opts, max_attempts, ..Default::default() })
        }
        Command::Dump { json, trace } => {
            dump::dump(&dirs::resolve_trace(trace.as_deref())?, json)?;
            Ok(0)
        }
        Command::Ls => {
            dump::ls()?;
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

fn record(output: Option<PathBuf>, program: OsString, args: Vec<OsString>) -> Result<i32> {
    let path = resolve_program(&program)?;
    let trace_dir = match output {
        Some(o) => o,
        None => dirs::new_trace_dir(&path)?,
    };
    let mut argv = vec![program];
    argv.extend(args);
    let opts = weft_record::RecordOptions { program: path, argv, trace_dir: trace_dir.clone() };
    let recording = weft_record::record(&opts)?;
    dirs::set_latest(&trace_dir)?;
    eprintln!(
        "weft: recorded {} events to {} ({})",
        recording.events,
        trace_dir.display(),
        recording.end
    );
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

/// Replays (searching for a schedule if the log order fails), reports the
/// outcome on stderr, and saves a schedule that was found.
fn replay(dir: &Path, opts: weft_explore::ExploreOptions) -> Result<i32> {
    let trace = weft_record::Trace::open(dir)?;
    let here = weft_record::cpu::Cpu::current();
    if trace.meta.cpu != here {
        eprintln!(
            "weft: warning: recorded on another CPU ({}); this one is {}. cpuid is not trapped, so code chosen by cpuid may differ and the replay diverge",
            trace.meta.cpu, here
        );
    }
    let found = weft_explore::search(&trace, &opts)?;
    for line in &found.report.digest {
        eprintln!("{line}");
    }
    let explored = found.schedule != opts.replay.schedule;
    match &found.report.outcome {
        weft_replay::Outcome::Valid { end, events } => {
            let was = if matches!(end, weft_record::End::Killed { .. }) { "was " } else { "" };
            eprintln!("weft: replay valid: {events} events matched; the program {was}{end}");
            if explored {
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
            }
            Ok(0)
        }
        weft_replay::Outcome::Invalid(failure) => {
            eprintln!("weft: replay failed: {failure}");
            if found.attempts > 1 {
                eprintln!(
                    "weft: no schedule found in {} replays, {} resumed from checkpoints (the furthest: {})",
                    found.attempts, found.resumed, found.schedule
                );
            }
            Ok(2)
        }
    }
}
