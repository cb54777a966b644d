//! A schedule: the preemptions that harness a replay beyond following the
//! log (seed 000 §3.2, Fig. 7: `S ::= sync<n, t>*`). The empty schedule is
//! seed 000's initial replay attempt; exploration adds preemptions.

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

/// A sequence of preemptions, ordered by their synchronization count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    preemptions: Vec<Preemption>,
}

impl Schedule {
    /// A schedule with these preemptions (sorted by count).
    pub fn new(mut preemptions: Vec<Preemption>) -> Self {
        preemptions.sort_by_key(|p| p.sync);
        Self { preemptions }
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

    /// Reads a schedule file: one `N:TID` per line; blank lines and lines
    /// starting with `#` are ignored. A missing file is the empty
    /// schedule. Errors: unreadable file, or a malformed line (named).
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let lines: Vec<String> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
        Self::parse(&lines).with_context(|| format!("in {}", path.display()))
    }

    /// Writes the schedule in the format [`Schedule::load`] reads, mode
    /// 0600 whatever the umask, as every file of a trace.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut text = String::from("# weft schedule: preemptions N:TID (seed 000 sync<n,t>), one per line\n");
        for p in &self.preemptions {
            text += &format!("{}:{}\n", p.sync, p.to);
        }
        let write = || {
            let mut file = std::fs::File::options().write(true).create(true).truncate(true).mode(0o600).open(path)?;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            file.write_all(text.as_bytes())
        };
        write().with_context(|| format!("cannot write {}", path.display()))
    }
}

impl std::fmt::Display for Schedule {
    /// `sync<n,t> ...`, or `the log order` for the empty schedule.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.preemptions.is_empty() {
            return write!(f, "the log order");
        }
        let parts: Vec<String> = self.preemptions.iter().map(|p| format!("sync<{},{}>", p.sync, p.to)).collect();
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
        std::fs::write(&dir, "# c\n\n5:x\n").unwrap();
        assert!(Schedule::load(&dir).unwrap_err().to_string().contains("in "));
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(Schedule::load(&dir).unwrap(), Schedule::default());
    }
}
