//! A schedule: the preemptions that harness a replay beyond following the
//! log (seed 000 §3.2, Fig. 7: `S ::= sync<n, t>*`). The empty schedule is
//! seed 000's initial replay attempt; exploration adds preemptions.

use anyhow::{anyhow, Result};
use weft_record::Tid;

/// Switch to recorded thread `to` upon the `sync`-th synchronization
/// operation (counted from 1 over the whole replay): seed 000's `sync<n,t>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}
