//! [`ReplaySession`]: the interactive replay session (see `debug.rs` for
//! its vocabulary). One replayed process at a time; checkpoints in the
//! [`Timeline`](crate::timeline::Timeline) make going backwards cheap.

use crate::debug::{Registers, Resume, SessionOptions, Stop, UserCheckpoint, Watchpoint, When};
use crate::epoch::Epoch;
use crate::failure::Failure;
use anyhow::Result;
use std::path::PathBuf;
use weft_record::{Tid, Trace};

/// An interactive replay of one trace. Created at the start of the
/// recording (the first thread stopped at the program's first
/// instruction, the dynamic loader's entry).
pub struct ReplaySession<'a> {
    trace: &'a Trace,
}

impl<'a> ReplaySession<'a> {
    /// Starts the recorded program under `opts`, stopped at its first
    /// instruction. Errors: the program cannot be started (missing
    /// executable copy, ptrace refused).
    pub fn start(trace: &'a Trace, opts: SessionOptions) -> Result<Self> {
        let _ = opts;
        unimplemented!("{}", trace.events.len())
    }

    /// The trace being replayed.
    pub fn trace(&self) -> &'a Trace {
        self.trace
    }

    /// The executable the replay runs (the recorded path, or the trace's
    /// copy when the file changed since): what gdb loads symbols from.
    pub fn exe_path(&self) -> PathBuf {
        unimplemented!()
    }

    /// The recorded tids of the threads alive now, in creation order.
    pub fn threads(&self) -> Vec<Tid> {
        unimplemented!()
    }

    /// The thread of the last stop (the first thread at the start).
    pub fn current_tid(&self) -> Tid {
        unimplemented!()
    }

    /// Thread `tid`'s registers. Errors: no such live thread.
    pub fn registers(&self, tid: Tid) -> Result<Registers> {
        let _ = tid;
        unimplemented!()
    }

    /// Sets thread `tid`'s registers. The replay after it is marked
    /// diverged until the user goes back to before the change. Errors: no
    /// such live thread.
    pub fn set_registers(&mut self, tid: Tid, regs: &Registers) -> Result<()> {
        let _ = (tid, regs);
        unimplemented!()
    }

    /// Reads up to `buf.len()` bytes of the process's memory at `addr`
    /// into `buf`, as the program sees it (weft's own breakpoint bytes are
    /// hidden). Returns how many bytes could be read (fewer at an unmapped
    /// page; 0 when `addr` is unmapped).
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> usize {
        let _ = (addr, buf);
        unimplemented!()
    }

    /// Writes `data` at `addr`; the replay after it is marked diverged
    /// until the user goes back to before the change. Errors: unmapped.
    pub fn write_memory(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let _ = (addr, data);
        unimplemented!()
    }

    /// The process's auxiliary vector (`/proc/PID/auxv` bytes).
    pub fn auxv(&self) -> Result<Vec<u8>> {
        unimplemented!()
    }

    /// Sets a software breakpoint at `addr`. Errors: unmapped address.
    pub fn add_breakpoint(&mut self, addr: u64) -> Result<()> {
        let _ = addr;
        unimplemented!()
    }

    /// Removes the breakpoint at `addr` (no error if there is none).
    pub fn remove_breakpoint(&mut self, addr: u64) -> Result<()> {
        let _ = addr;
        unimplemented!()
    }

    /// Sets a hardware watchpoint in every replayed thread. Errors: all 4
    /// debug registers in use, a length other than 1, 2, 4, 8, or an
    /// address not aligned to its length.
    pub fn add_watchpoint(&mut self, watch: Watchpoint) -> Result<()> {
        let _ = watch;
        unimplemented!()
    }

    /// Removes a watchpoint (no error if it is not set).
    pub fn remove_watchpoint(&mut self, watch: Watchpoint) -> Result<()> {
        let _ = watch;
        unimplemented!()
    }

    /// Resumes as `how` says until a stop. `interrupt` is polled now and
    /// then (at most every few milliseconds of replay); when it returns
    /// true the session stops with [`Stop::Interrupted`]. Errors: weft's
    /// own failures (ptrace); a replay that diverges is a [`Stop::Diverged`].
    pub fn resume(&mut self, how: Resume, interrupt: &mut dyn FnMut() -> bool) -> Result<Stop> {
        let _ = (how, interrupt);
        unimplemented!()
    }

    /// Where the session is.
    pub fn when(&self) -> When {
        unimplemented!()
    }

    /// Goes (forwards or backwards) to the moment just before log event
    /// `event` happens. Errors: `event` past the end of the trace.
    pub fn goto_event(&mut self, event: u64) -> Result<Stop> {
        let _ = event;
        unimplemented!()
    }

    /// The epochs known so far (the recording is cut into them as the
    /// replay moves forwards), in order.
    pub fn epochs(&self) -> Vec<Epoch> {
        unimplemented!()
    }

    /// Goes to the start of epoch `n`. Errors: no such epoch.
    pub fn goto_epoch(&mut self, n: usize) -> Result<Stop> {
        let _ = n;
        unimplemented!()
    }

    /// Goes back to the start of the current epoch, or to the start of the
    /// previous one when already there.
    pub fn epoch_back(&mut self) -> Result<Stop> {
        unimplemented!()
    }

    /// Makes a checkpoint here (rr's `checkpoint`). Errors: the process
    /// cannot be checkpointed at this stop (a thread at a signal delivery).
    pub fn checkpoint(&mut self) -> Result<UserCheckpoint> {
        unimplemented!()
    }

    /// The user's checkpoints.
    pub fn checkpoints(&self) -> Vec<UserCheckpoint> {
        unimplemented!()
    }

    /// Goes to checkpoint `id` (rr's `restart N`). Errors: no such id.
    pub fn restart(&mut self, id: usize) -> Result<Stop> {
        let _ = id;
        unimplemented!()
    }

    /// Why the replay cannot go past some point, if it cannot: the
    /// schedule does not make it valid (the first unmatched event), or the
    /// user changed registers or memory (then a `String` says what).
    pub fn divergence(&self) -> Option<String> {
        unimplemented!()
    }

    /// The failure a replay of this trace under its schedule meets, when
    /// known (set by the caller that searched; shown at connect).
    pub fn known_failure(&self) -> Option<&Failure> {
        unimplemented!()
    }

    /// Memory held by the timeline's checkpoints, in bytes (pages the
    /// checkpoint processes own privately, from /proc/PID/smaps_rollup).
    pub fn checkpoint_memory(&self) -> u64 {
        unimplemented!()
    }
}
