//! mremap(2) in a replay: executed, at the recorded address, then the
//! part by which a file mapping grew is filled from the log. The replay's
//! file mappings are anonymous memory ([`Session::mmap_file`]), which grows
//! by zeros where the recording's grew by more of the file
//! (weft_record::mapping::grown).

use super::{Session, Step};
use crate::failure::Failure;
use anyhow::Result;
use weft_record::event::Syscall;

impl Session<'_> {
    /// Executes the mremap thread `i` is entering (`e`), matched with the
    /// logged `s`; a different result fails the replay.
    pub(super) fn remap(&mut self, i: usize, e: &super::Entry, s: &Syscall) -> Result<Step> {
        let got = self.execute(i)?.rax as i64;
        if got != s.result {
            return Ok(Step::Fail(Failure::Unmatched {
                at: self.position(i),
                label: e.label,
                expected: format!("mremap of {:#x} returning {:#x}", e.args[0], s.result),
                observed: format!("mremap returned {got:#x} in the replay"),
            }));
        }
        for w in &s.writes {
            self.mem(i).write(w.addr, &self.trace.contents(&w.data)?)?;
        }
        Ok(Step::Stay)
    }
}
