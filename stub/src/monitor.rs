//! weft's `monitor` commands (gdb's `monitor CMD` sends `qRcmd`, GDB
//! RSP, "General Query Packets"; the reply text reaches gdb's console as
//! `O` packets). They name what gdb has no words for: log events, epochs,
//! checkpoints. A command that moves the session cannot tell gdb so (the
//! protocol has no unsolicited stop in all-stop mode), so its output says
//! which gdb commands drop gdb's stale register and memory caches.

use crate::stop::describe;
use weft_record::event::dump_line;
use weft_replay::{ReplaySession, Stop};

/// Events `monitor events` shows on each side of the current one, by
/// default and at most.
const EVENTS_AROUND: usize = 5;
const EVENTS_AROUND_MAX: usize = 200;

/// Epochs `monitor epochs` shows on each side of the current one.
const EPOCHS_AROUND: usize = 20;

/// How often a long move prints where it is (well within gdb's default
/// `remotetimeout` of 2 s).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(700);

/// The commands, with a line of help each (`monitor help` prints them).
const HELP: &[(&str, &str)] = &[
    ("help", "this list"),
    ("when", "the current log event, thread, epoch, and why the replay cannot go further, if it cannot"),
    ("goto EVENT", "go (forwards or backwards) to just before log event EVENT"),
    ("events [N]", "the N logged events on each side of the current one (default 5), as `weft dump` prints them"),
    ("epochs", "the recorded epochs (cut after irrevocable syscalls, forks, execs): events, the event that closed each, threads"),
    ("epoch back", "back to the start of this epoch (of the previous one when already there)"),
    ("epoch N", "go to the start of epoch N"),
    ("checkpoint", "make a checkpoint here and print its number"),
    ("checkpoints", "list the checkpoints made, and the memory the timeline's own hold"),
    ("restart N", "go to checkpoint N"),
];

/// A parsed `monitor` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `help`.
    Help,
    /// `when`.
    When,
    /// `goto EVENT`: the log event index.
    Goto(u64),
    /// `events [N]`: events on each side of the current one.
    Events(usize),
    /// `epochs`.
    Epochs,
    /// `epoch back`.
    EpochBack,
    /// `epoch N`.
    Epoch(usize),
    /// `checkpoint`.
    Checkpoint,
    /// `checkpoints`.
    Checkpoints,
    /// `restart N`: the checkpoint's number.
    Restart(usize),
}

impl Command {
    /// Parses one command line (words separated by blanks). Errors: a
    /// message for the user naming the unknown command or bad argument.
    pub fn parse(line: &str) -> Result<Command, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        Ok(match words.as_slice() {
            ["help"] | [] => Command::Help,
            ["when"] => Command::When,
            ["goto", event] => Command::Goto(number("EVENT", event)?),
            ["events"] => Command::Events(EVENTS_AROUND),
            ["events", n] => Command::Events(number("N", n)?),
            ["epochs"] => Command::Epochs,
            ["epoch", "back"] => Command::EpochBack,
            ["epoch", n] => Command::Epoch(number("N", n)?),
            ["checkpoint"] => Command::Checkpoint,
            ["checkpoints"] => Command::Checkpoints,
            ["restart", n] => Command::Restart(number("N", n)?),
            [cmd, ..] if HELP.iter().any(|(usage, _)| usage.split(' ').next() == Some(*cmd)) => {
                return Err(format!("usage: {}", usages(cmd)));
            }
            _ => return Err(format!("unknown command {line:?}; `monitor help` lists them")),
        })
    }
}

/// Word `w`, the argument `what`, as a number.
fn number<N: std::str::FromStr>(what: &str, w: &str) -> Result<N, String> {
    w.parse().map_err(|_| format!("{what} must be a number, not {w:?}"))
}

/// The usage lines of command `cmd`.
fn usages(cmd: &str) -> String {
    let lines: Vec<String> =
        HELP.iter().filter(|(u, _)| u.split(' ').next() == Some(cmd)).map(|(u, _)| format!("monitor {u}")).collect();
    lines.join(" | ")
}

/// Runs `cmd` on `session` and returns the text for gdb's console.
/// Errors are part of the text: a failing command must not end the gdb
/// session. A long move (`goto`) prints progress lines through `print`
/// about once a second: gdb waits for a `qRcmd` reply only `remotetimeout`
/// seconds (2 by default), but each `O` output packet restarts its wait
/// (GDB Remote Serial Protocol, "qRcmd").
pub fn run(cmd: &Command, session: &mut ReplaySession<'_>, print: &mut dyn FnMut(&str)) -> String {
    let moved = |stop: anyhow::Result<Stop>, session: &ReplaySession<'_>| match stop {
        Ok(stop) => format!(
            "{}; now at {}.\ngdb still shows the registers and memory of before: run `maint flush register-cache` and `maint flush dcache` (or step or continue) to see them.\nThe threads here: {} (a thread gdb shows that is not one of them cannot step; `thread N` selects another).\n",
            describe(&stop),
            session.when().mark,
            session.threads().iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
        ),
        Err(e) => format!("error: {e:#}\n"),
    };
    match cmd {
        Command::Help => HELP.iter().map(|(u, h)| format!("monitor {u:<12} {h}\n")).collect(),
        Command::When => when(session),
        Command::Goto(event) => {
            let total = session.trace().events.len() as u64;
            if *event >= total {
                return format!("error: event {event} is past the end: the trace has events 0 to {}\n", total.saturating_sub(1));
            }
            let mut last = std::time::Instant::now();
            let stop = session.goto_event(*event, &mut |mark| {
                if last.elapsed() >= PROGRESS_EVERY {
                    last = std::time::Instant::now();
                    print(&format!("replaying: {mark}\n"));
                }
            });
            moved(stop, session)
        }
        Command::Events(n) => events(session, (*n).min(EVENTS_AROUND_MAX)),
        Command::Epochs => epochs(session),
        Command::EpochBack => {
            let stop = session.epoch_back();
            moved(stop, session)
        }
        Command::Epoch(n) => {
            let stop = session.goto_epoch(*n);
            moved(stop, session)
        }
        Command::Checkpoint => match session.checkpoint() {
            Ok(c) => format!("checkpoint {} at {}\n", c.id, c.mark),
            Err(e) => format!("error: {e:#}\n"),
        },
        Command::Checkpoints => {
            let timeline = format!(
                "the timeline holds {} checkpoints ({} KiB of their own memory)\n",
                session.checkpoint_count(),
                session.checkpoint_memory() >> 10
            );
            let list = session.checkpoints();
            if list.is_empty() {
                return timeline + "no checkpoints of yours; `monitor checkpoint` makes one\n";
            }
            timeline + &list.iter().map(|c| format!("checkpoint {} at {}\n", c.id, c.mark)).collect::<String>()
        }
        Command::Restart(id) => {
            let stop = session.restart(*id);
            moved(stop, session)
        }
    }
}

/// `monitor when`.
fn when(session: &ReplaySession<'_>) -> String {
    let w = session.when();
    let mut text = format!("{} of {} events; epoch {}\n", w.mark, w.events, w.epoch);
    if let Some(d) = session.divergence() {
        text += &format!("{d}\n");
    }
    text
}

/// `monitor events N`: the current event is marked `=>`.
fn events(session: &ReplaySession<'_>, n: usize) -> String {
    let all = &session.trace().events;
    let current = session.when().mark.event as usize;
    around(current, n, all.len())
        .map(|i| format!("{} {}\n", if i == current { "=>" } else { "  " }, dump_line(i, &all[i])))
        .collect()
}

/// `monitor epochs`: the recorded epochs, as `weft dump` heads them, with
/// their threads; the current epoch is marked `=>`. A trace cut into many
/// (a program that seeks a lot) shows the [`EPOCHS_AROUND`] on each side
/// of the current one, and how many it leaves out.
fn epochs(session: &ReplaySession<'_>) -> String {
    let current = session.when().epoch;
    let events = &session.trace().events;
    let all = session.epochs();
    let shown = around(current, EPOCHS_AROUND, all.len());
    let mut text = String::new();
    if shown.start > 0 {
        text += &format!("   ({} epochs before)\n", shown.start);
    }
    for e in &all[shown.clone()] {
        let threads: Vec<String> = e.threads.iter().map(|t| t.to_string()).collect();
        let marker = if e.recorded.index == current { "=>" } else { "  " };
        text += &format!("{marker} {}; threads {}\n", e.recorded.summary(events), threads.join(" "));
    }
    if shown.end < all.len() {
        text += &format!("   ({} epochs after)\n", all.len() - shown.end);
    }
    text
}

/// The indices from `n` before `current` to `n` after it, within `0..len`.
fn around(current: usize, n: usize, len: usize) -> std::ops::Range<usize> {
    current.saturating_sub(n)..current.saturating_add(n + 1).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_around_the_current_one() {
        assert_eq!(around(0, 20, 3), 0..3);
        assert_eq!(around(50, 20, 100), 30..71);
        assert_eq!(around(95, 20, 100), 75..100);
    }

    #[test]
    fn parses_every_command() {
        let cases = [
            ("help", Command::Help),
            ("", Command::Help),
            ("when", Command::When),
            ("goto 42", Command::Goto(42)),
            ("  goto   7 ", Command::Goto(7)),
            ("events", Command::Events(5)),
            ("events 20", Command::Events(20)),
            ("epochs", Command::Epochs),
            ("epoch back", Command::EpochBack),
            ("epoch 3", Command::Epoch(3)),
            ("checkpoint", Command::Checkpoint),
            ("checkpoints", Command::Checkpoints),
            ("restart 1", Command::Restart(1)),
        ];
        for (line, cmd) in cases {
            assert_eq!(Command::parse(line), Ok(cmd), "{line:?}");
        }
    }

    #[test]
    fn rejects_with_a_useful_message() {
        assert_eq!(Command::parse("goto"), Err("usage: monitor goto EVENT".into()));
        assert_eq!(Command::parse("epoch"), Err("usage: monitor epoch back | monitor epoch N".into()));
        assert!(Command::parse("goto -1").unwrap_err().contains("EVENT must be a number"));
        assert!(Command::parse("restart x").unwrap_err().contains("N must be a number"));
        assert!(Command::parse("frobnicate").unwrap_err().contains("monitor help"));
    }

    #[test]
    fn help_names_every_command() {
        for (usage, _) in HELP {
            let word = usage.split(' ').next().unwrap();
            assert!(Command::parse(word).is_ok() || Command::parse(word).unwrap_err().starts_with("usage:"), "{word}");
        }
    }
}
