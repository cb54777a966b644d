//! A schedule: the preemptions that harness a replay beyond following the
//! log (seed 000 §3.2, Fig. 7: `S ::= sync<n, t>*`), and the race
//! reversals of fine-grained exploration (§4.3, the *memory schedule*).
//! The empty schedule is seed 000's initial replay attempt; exploration
//! adds preemptions and reversals.

use anyhow::{anyhow, Context, Result};
use std::path::Path;
use weft_record::Tid;

/// Switch to recorded thread `to` upon the `sync`-th synchronization
/// operation (counted from 1 over the whole replay): seed 000's `sync<n,t>`.
/// Operations are pthread acquire entries, release returns and futex
/// calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Preemption {
    /// The synchronization count n at which to preempt.
    pub sync: u64,
    /// The recorded tid to switch to.
    pub to: Tid,
}

/// A race reversal (seed 000 §4.3): "disabling the thread right before
/// the first access, and then enabling it right after the second access".
/// From synchronization count `from` on, the page at `page` is protected
/// and each thread's accesses to it are counted (page-protection tracing,
/// §6); thread `held` is disabled right before its `held_nth` access, the
/// replay switches to thread `runner`, and `held` is enabled again right
/// after `runner`'s `runner_nth` access. Counts start at 1; tids are
/// recorded ones. A reversal whose runner makes that access before
/// `held` reaches its own, or that would leave no thread to run, is
/// dropped in that replay (the held thread runs on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reversal {
    /// The synchronization count from which the page is protected.
    pub from: u64,
    /// The page's address (a multiple of 4096 bytes).
    pub page: u64,
    /// The thread disabled before its access.
    pub held: Tid,
    /// Which of `held`'s accesses to the page (from 1, since `from`).
    pub held_nth: u64,
    /// The thread that makes its access first.
    pub runner: Tid,
    /// Which of `runner`'s accesses to the page (from 1, since `from`).
    pub runner_nth: u64,
}

impl std::fmt::Display for Reversal {
    /// `race<from,page,held#n,runner#m>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "race<{},{:#x},{}#{},{}#{}>", self.from, self.page, self.held, self.held_nth, self.runner, self.runner_nth)
    }
}

impl Reversal {
    /// Parses the words after `race` in a schedule file: `FROM PAGE
    /// HELD:N RUNNER:M` (PAGE in hex with 0x, or decimal).
    fn parse(words: &str) -> Result<Self> {
        let bad = || anyhow!("bad race reversal {words:?}: expected FROM PAGE HELD:N RUNNER:M");
        let w: Vec<&str> = words.split_whitespace().collect();
        let [from, page, held, runner] = w[..] else { return Err(bad()) };
        let num = |s: &str| -> Result<u64> {
            match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad()),
                None => s.parse().map_err(|_| bad()),
            }
        };
        let pair = |s: &str| -> Result<(Tid, u64)> {
            let (t, n) = s.split_once(':').ok_or_else(bad)?;
            Ok((t.parse().map_err(|_| bad())?, num(n)?))
        };
        let ((held, held_nth), (runner, runner_nth)) = (pair(held)?, pair(runner)?);
        let page = num(page)?;
        if page % 4096 != 0 || held_nth == 0 || runner_nth == 0 || held == runner {
            return Err(bad());
        }
        Ok(Self { from: num(from)?, page, held, held_nth, runner, runner_nth })
    }
}

/// A sequence of preemptions, ordered by their synchronization count, and
/// the race reversals, ordered by where their protection starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    preemptions: Vec<Preemption>,
    reversals: Vec<Reversal>,
}

impl Schedule {
    /// A schedule with these preemptions (sorted by count).
    pub fn new(mut preemptions: Vec<Preemption>) -> Self {
        preemptions.sort_by_key(|p| p.sync);
        Self { preemptions, reversals: Vec::new() }
    }

    /// This schedule with race reversals `reversals` as well.
    pub fn with_reversals(mut self, mut reversals: Vec<Reversal>) -> Self {
        reversals.sort_by_key(|r| r.from);
        self.reversals = reversals;
        self
    }

    /// The race reversals, by the synchronization count they start at.
    pub fn reversals(&self) -> &[Reversal] {
        &self.reversals
    }

    /// Whether the schedule departs from the log order at
    /// synchronization count `sync`: a preemption there, or a reversal's
    /// protection starting there.
    pub fn decides_at(&self, sync: u64) -> bool {
        self.preemption_at(sync).is_some() || self.reversals.iter().any(|r| r.from == sync)
    }

    /// The synchronization count of its last departure from the log
    /// order (`None`: it has none).
    pub fn last_decision(&self) -> Option<u64> {
        self.preemptions.iter().map(|p| p.sync).chain(self.reversals.iter().map(|r| r.from)).max()
    }

    /// Parses `N:TID` strings (from `--preempt`). Errors name the bad one.
    pub fn parse(specs: &[String]) -> Result<Self> {
        let parse_one = |s: &String| -> Result<Preemption> {
            let (n, t) = s.split_once(':').ok_or_else(|| anyhow!("bad preemption {s:?}: expected N:TID"))?;
            Ok(Preemption {
                sync: n.trim().parse().map_err(|_| anyhow!("bad preemption {s:?}: N is not a number"))?,
                to: t.trim().parse().map_err(|_| anyhow!("bad preemption {s:?}: TID is not a number"))?,
            })
        };
        Ok(Self::new(specs.iter().map(parse_one).collect::<Result<_>>()?))
    }

    /// The thread to preempt to at synchronization count `sync`, if any.
    pub fn preemption_at(&self, sync: u64) -> Option<Tid> {
        self.preemptions.iter().find(|p| p.sync == sync).map(|p| p.to)
    }

    /// The preemptions, in order.
    pub fn preemptions(&self) -> &[Preemption] {
        &self.preemptions
    }

    /// Reads a schedule file: one `N:TID` per line, or `race FROM PAGE
    /// HELD:N RUNNER:M` for a [`Reversal`]; blank lines and lines
    /// starting with `#` are ignored. A missing file is the empty
    /// schedule. Errors: unreadable file, or a malformed line (named).
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let lines = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
        let (races, lines): (Vec<&str>, Vec<&str>) = lines.partition(|l| l.starts_with("race "));
        let lines: Vec<String> = lines.into_iter().map(String::from).collect();
        let parse = || -> Result<Self> {
            let reversals = races.iter().map(|l| Reversal::parse(&l["race ".len()..])).collect::<Result<_>>()?;
            Ok(Self::parse(&lines)?.with_reversals(reversals))
        };
        parse().with_context(|| format!("in {}", path.display()))
    }

    /// Writes the schedule in the format [`Schedule::load`] reads, mode
    /// 0600 whatever the umask, as every file of a trace.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut text = String::from("# weft schedule: preemptions N:TID (seed 000 sync<n,t>), one per line\n");
        for p in &self.preemptions {
            text += &format!("{}:{}\n", p.sync, p.to);
        }
        if !self.reversals.is_empty() {
            text += "# race reversals (seed 000 §4.3): race FROM PAGE HELD:N RUNNER:M\n";
        }
        for r in &self.reversals {
            text += &format!("race {} {:#x} {}:{} {}:{}\n", r.from, r.page, r.held, r.held_nth, r.runner, r.runner_nth);
        }
        weft_record::store::write_private_file(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
    }
}

impl std::fmt::Display for Schedule {
    /// `sync<n,t> ... race<...> ...`, or `the log order` for the empty
    /// schedule.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.preemptions.is_empty() && self.reversals.is_empty() {
            return write!(f, "the log order");
        }
        let syncs = self.preemptions.iter().map(|p| format!("sync<{},{}>", p.sync, p.to));
        let parts: Vec<String> = syncs.chain(self.reversals.iter().map(Reversal::to_string)).collect();
        write!(f, "{}", parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        let s = Schedule::parse(&["7:101".into(), "2:100".into()]).unwrap();
        assert_eq!(s.preemptions()[0], Preemption { sync: 2, to: 100 });
        assert_eq!(s.preemption_at(7), Some(101));
        assert_eq!(s.preemption_at(3), None);
        assert!(Schedule::parse(&["x".into()]).is_err());
    }

    #[test]
    fn saves_and_loads() {
        let dir = std::env::temp_dir().join(format!("weft-schedule-{}", std::process::id()));
        let s = Schedule::new(vec![Preemption { sync: 9, to: 3 }, Preemption { sync: 4, to: 2 }]);
        s.save(&dir).unwrap();
        assert_eq!(Schedule::load(&dir).unwrap(), s);
        assert_eq!(s.to_string(), "sync<4,2> sync<9,3>");
        let raced = s.clone().with_reversals(vec![Reversal { from: 3, page: 0x4000, held: 2, held_nth: 5, runner: 3, runner_nth: 1 }]);
        raced.save(&dir).unwrap();
        assert_eq!(Schedule::load(&dir).unwrap(), raced);
        assert_eq!(raced.to_string(), "sync<4,2> sync<9,3> race<3,0x4000,2#5,3#1>");
        std::fs::write(&dir, "race 3 0x4001 2:5 3:1\n").unwrap();
        assert!(Schedule::load(&dir).is_err(), "a page address is page-aligned");
        std::fs::write(&dir, "# c\n\n5:x\n").unwrap();
        assert!(Schedule::load(&dir).unwrap_err().to_string().contains("in "));
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(Schedule::load(&dir).unwrap(), Schedule::default());
    }
}
