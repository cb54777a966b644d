//! A vfork child's writes reach its parent. In the recording the child
//! ran in its parent's memory until it exec'd or exited (vfork(2)); the
//! replay makes the vfork a fork (emulate.rs, `quiet_spawn`), so what the
//! child wrote would stay in the child's copy. dash runs each command's
//! child on the parent's stack, whose slots the parent's later frames do
//! not all initialize: a signal found again by its registers and stack
//! (exact_signal.rs) then misses its recorded state.
//!
//! So the parent is held at the call's return, as vfork held it in the
//! kernel, until its next event is the log's next (the kernel lets it go
//! when the child's execve releases the memory, which may be before the
//! exec event is logged); and when it goes on, or the child execs or
//! exits, whichever comes first, each page of the child's private
//! writable memory that differs from its parent's is copied into the
//! parent. Only for a parent with one thread: the parent then did nothing
//! in between, so a difference is the child's write; with other threads
//! running meanwhile, it could be theirs. (The kernel's
//! soft-dirty bits would spare the comparison, but Debian's kernels may
//! lack CONFIG_MEM_SOFT_DIRTY, as this project's VM does.)

use super::{At, Session};
use anyhow::Result;

/// The bytes compared at a time, a multiple of the page size.
const PIECE: u64 = 1 << 16;
const PAGE: usize = 4096;

impl Session<'_> {
    /// Process `child` was just made by a vfork of process `parent`: when
    /// that one has a single live thread, the child's writes go to the
    /// parent at [`Session::vfork_done`].
    pub(super) fn vfork_started(&mut self, child: usize, parent: usize) {
        let threads = self.state.threads.iter().filter(|t| t.proc == parent && t.at != At::Exited).count();
        if threads == 1 {
            self.state.procs[child].vfork_parent = Some(parent);
        }
    }

    /// Whether thread `i` made a vfork whose child, thread `j`, writes to
    /// its memory: then it is held ([`At::Parked`]) until its own event
    /// is the log's next, which the kernel made wait for the child's exec
    /// or exit; running on now, it would write its stack before the child.
    pub(super) fn vfork_holds(&mut self, i: usize, j: usize) -> bool {
        let followed = self.state.procs[self.state.threads[j].proc].vfork_parent.is_some();
        if followed {
            self.state.threads[i].at = At::Parked;
        }
        followed
    }

    /// A thread of process `proc` goes on after being held: the vfork
    /// children it waits for give their writes now (a failure to read
    /// them is logged: the replay goes on, and the state comparison of a
    /// later signal says what differs).
    pub(super) fn vfork_release(&mut self, proc: usize) {
        let children: Vec<usize> = (0..self.state.procs.len()).filter(|&c| self.state.procs[c].vfork_parent == Some(proc)).collect();
        for child in children {
            if let Err(e) = self.vfork_done(child) {
                tracing::warn!(%e, "a vfork child's writes did not reach its parent");
            }
        }
    }

    /// Process `p` is about to exec or exit: if it is a vfork child whose
    /// parent waits, the pages it changed are copied into that parent.
    /// Errors: its maps are unreadable.
    pub(super) fn vfork_done(&mut self, p: usize) -> Result<()> {
        let Some(parent) = self.state.procs[p].vfork_parent.take() else { return Ok(()) };
        let pid = self.state.procs[p].pid;
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
        let (ours, theirs) = (&self.state.procs[p].mem, &self.state.procs[parent].mem);
        let mut copied = 0;
        for (start, end) in maps.lines().filter_map(private_writable) {
            for at in (start..end).step_by(PIECE as usize) {
                let len = (end - at).min(PIECE) as usize;
                let (Ok(child), Ok(before)) = (ours.read(at, len), theirs.read(at, len)) else { continue };
                for (k, (new, old)) in child.chunks(PAGE).zip(before.chunks(PAGE)).enumerate() {
                    if new != old && theirs.write(at + (k * PAGE) as u64, new).is_ok() {
                        copied += 1;
                    }
                }
            }
        }
        tracing::debug!(child = self.state.procs[p].rec, pages = copied, "a vfork child's writes reach its parent");
        Ok(())
    }
}

/// The range of a `/proc/PID/maps` line for a private writable mapping.
fn private_writable(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    if !perms.starts_with("rw") || !perms.ends_with('p') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some((u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?))
}
