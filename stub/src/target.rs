//! The gdbstub target: one [`ReplaySession`] seen as a multi-threaded
//! process (GDB RSP, "Packets" and "General Query Packets"). gdb's thread
//! ids are the recorded tids. Resume packets only record what gdb asked
//! for ([`Action`]); the server runs it with [`ReplayTarget::run`], which
//! polls the connection for gdb's interrupt.

use crate::arch::{LinuxRegs, LinuxX86_64};
use crate::hostio::HostFiles;
use crate::{monitor, regs, stop, svr4, tls, watch};
use anyhow::Result;
use gdbstub::common::{Pid, Signal, Tid as GdbTid};
use gdbstub::stub::MultiThreadStopReason;
use gdbstub::common::Endianness;
use gdbstub::target::ext::auxv::{Auxv, AuxvOps};
use gdbstub::target::ext::host_info::{HostInfo, HostInfoOps, HostInfoResponse};
use gdbstub::target::ext::process_info::{ProcessInfo, ProcessInfoOps, ProcessInfoResponse};
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadRangeStepping, MultiThreadRangeSteppingOps, MultiThreadSchedulerLockingOps, MultiThreadSingleStep,
    MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::{ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps};
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwBreakpoint, HwBreakpointOps, HwWatchpoint, HwWatchpointOps, SwBreakpoint, SwBreakpointOps, WatchKind as GdbWatchKind,
};
use gdbstub::target::ext::exec_file::{ExecFile, ExecFileOps};
use gdbstub::target::ext::host_io::HostIoOps;
use gdbstub::target::ext::libraries::{LibrariesSvr4, LibrariesSvr4Ops};
use gdbstub::target::ext::monitor_cmd::{ConsoleOutput, MonitorCmd, MonitorCmdOps};
use gdbstub::target::{Target, TargetError, TargetResult};
use std::os::unix::ffi::OsStrExt;
use weft_record::Tid;
use weft_replay::{ReplaySession, Resume, Stop, WatchKind};

/// errno values the protocol's `Exx` replies carry (gdb shows them only
/// as "failed"; GDB RSP, "Standard Replies").
const EFAULT: u8 = 14;
const EINVAL: u8 = 22;
const ESRCH: u8 = 3;

/// What gdb asked the last resume packet for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `vCont;c` / `c`.
    Continue,
    /// `vCont;s:TID` / `s` (other threads continue as the recorded
    /// schedule runs them).
    Step(Tid),
    /// `vCont;r START,END:TID`: step while the pc stays in the range.
    RangeStep(Tid, u64, u64),
    /// `bc`.
    ReverseContinue,
    /// `bs` in the thread `Hc` selected.
    ReverseStep(Tid),
}

impl Action {
    /// The session's resume for this action.
    fn resume(self) -> Resume {
        match self {
            Action::Continue => Resume::Continue,
            Action::Step(t) => Resume::Step(t),
            Action::RangeStep(tid, start, end) => Resume::RangeStep { tid, start, end },
            Action::ReverseContinue => Resume::ReverseContinue,
            Action::ReverseStep(t) => Resume::ReverseStep(t),
        }
    }

    /// Whether a resume that stopped at `stop` is of no interest to gdb
    /// and goes on: a thread's start or end (gdb learns of threads from
    /// `qfThreadInfo` at its next stop), unless it is the end of the very
    /// thread being stepped.
    fn goes_on_after(self, stop: &Stop) -> bool {
        match (self, stop) {
            (Action::Step(t) | Action::RangeStep(t, ..) | Action::ReverseStep(t), Stop::ThreadExited { tid }) => *tid != t,
            (_, Stop::ThreadCreated { .. } | Stop::ThreadExited { .. }) => true,
            _ => false,
        }
    }
}

/// The session as gdbstub's target, shared by the clients that connect
/// one after the other.
pub struct ReplayTarget<'s, 'a> {
    session: &'s mut ReplaySession<'a>,
    action: Action,
    /// The last stop reported was the recording's end: the fatal signal
    /// ([`Stop::Killed`]) or the exit ([`Stop::Exited`]), which a resume
    /// forwards from there then ends ([`stop::reason`]).
    end_reported: bool,
    /// The thread a `bs` after `Hc0` steps
    /// ([`crate::intercept::Intercept::step_thread`], which the server
    /// keeps here).
    pub(crate) any_step_thread: Option<Tid>,
    /// The files the client opened through host I/O ([`crate::hostio`]).
    pub(crate) files: HostFiles,
}

impl<'s, 'a> ReplayTarget<'s, 'a> {
    /// A target over `session`.
    pub fn new(session: &'s mut ReplaySession<'a>) -> Self {
        Self { session, action: Action::Continue, end_reported: false, any_step_thread: None, files: HostFiles::default() }
    }

    /// The session, for the host I/O answers ([`crate::hostio`]).
    pub(crate) fn session(&self) -> &ReplaySession<'a> {
        self.session
    }

    /// The failure the replay is known to meet (no valid schedule was
    /// found), which weft tells a client that connects, on stderr (the
    /// protocol has no greeting).
    pub fn known_failure(&self) -> Option<&weft_replay::Failure> {
        self.session.known_failure()
    }

    /// Runs gdb's last resume request until a stop gdb must see, polling
    /// `interrupt` (true: gdb sent ^C or went away). Errors: weft's own
    /// (ptrace); a divergence is a stop, also told on stderr.
    pub fn run(&mut self, interrupt: &mut dyn FnMut() -> bool) -> Result<MultiThreadStopReason<u64>> {
        let stop = loop {
            let stop = self.session.resume(self.action.resume(), interrupt)?;
            if !self.action.goes_on_after(&stop) {
                break stop;
            }
        };
        if let Stop::Diverged { .. } = stop {
            eprintln!("weft: {}; `monitor when` says where; going back works", stop::describe(&stop));
        }
        let forward = matches!(self.action, Action::Continue | Action::Step(_));
        let end = matches!(stop, Stop::Killed { .. } | Stop::Exited { .. });
        let reason = stop::reason(&stop, self.reported_tid(&stop), end && forward && self.end_reported);
        self.end_reported = end;
        Ok(reason)
    }

    /// The stop reply for gdb's ^C while the session is stopped anyway.
    pub fn interrupted(&self) -> MultiThreadStopReason<u64> {
        MultiThreadStopReason::SignalWithThread { tid: stop::gdb_tid(self.session.current_tid()), signal: Signal::SIGINT }
    }

    /// The address of a thread-local variable, for gdb's
    /// `qGetTLSAddr:thread-id,offset,lm` (GDB RSP, "General Query
    /// Packets"; `args` is what follows the colon), which the server
    /// answers itself. `None` (gdb gets `E01`): malformed arguments
    /// ([`tls::Request::parse`]), a thread that is not live, or an address
    /// the session cannot resolve ([`ReplaySession::tls_address`]).
    pub fn tls_address(&self, args: &[u8]) -> Option<u64> {
        let request = tls::Request::parse(args)?;
        self.session.tls_address(request.tid, request.lm, request.offset).ok().flatten()
    }

    /// lldb's `qShlibInfoAddr`: where the executable's `DT_DEBUG` value
    /// is ([`ReplaySession::debug_slot`]); `None` (lldb gets `E01`) for an
    /// executable without one.
    pub fn debug_slot(&self) -> Option<u64> {
        self.session.debug_slot().ok().flatten()
    }

    /// The recorded thread a register access in gdb's thread `tid` is
    /// for. Until gdb selects a thread (`Hg`) or a stop reply names one,
    /// gdbstub passes its single-thread placeholder, thread 1, while its
    /// `?` reply named the session's current thread (the first
    /// [`MultiThreadBase::list_active_threads`] lists): so a thread 1
    /// that is no live thread is the current one.
    fn register_thread(&self, tid: GdbTid) -> Tid {
        let tid = recorded(tid);
        if tid == 1 && !self.session.threads().contains(&tid) {
            self.session.current_tid()
        } else {
            tid
        }
    }

    /// The thread to report `stop` in: its own if alive, else the
    /// session's current one; but the end of a thread gdb was stepping
    /// is reported in that thread (gdb asserts that a step-over it started
    /// ends in its thread).
    fn reported_tid(&self, stop: &Stop) -> Tid {
        let tid = stop.tid();
        let stepped = matches!((self.action, stop), (Action::Step(t), Stop::ThreadExited { tid }) if t == *tid);
        if stepped || self.session.threads().contains(&tid) {
            tid
        } else {
            self.session.current_tid()
        }
    }
}

/// gdb's thread id as a recorded tid.
fn recorded(tid: GdbTid) -> Tid {
    tid.get() as Tid
}

/// Copies `length` bytes of `data` from `offset` into `buf` (a `qXfer`
/// read window; GDB RSP, "General Query Packets", `qXfer:object:read`).
/// Returns the bytes copied, 0 past the end.
fn copy_window(data: &[u8], offset: u64, length: usize, buf: &mut [u8]) -> usize {
    let start = (offset as usize).min(data.len());
    let n = length.min(buf.len()).min(data.len() - start);
    buf[..n].copy_from_slice(&data[start..start + n]);
    n
}

impl Target for ReplayTarget<'_, '_> {
    type Arch = LinuxX86_64;
    type Error = anyhow::Error;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_monitor_cmd(&mut self) -> Option<MonitorCmdOps<'_, Self>> {
        Some(self)
    }

    fn support_host_io(&mut self) -> Option<HostIoOps<'_, Self>> {
        Some(self)
    }

    fn support_exec_file(&mut self) -> Option<ExecFileOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<AuxvOps<'_, Self>> {
        Some(self)
    }

    fn support_libraries_svr4(&mut self) -> Option<LibrariesSvr4Ops<'_, Self>> {
        Some(self)
    }

    fn support_host_info(&mut self) -> Option<HostInfoOps<'_, Self>> {
        Some(self)
    }

    fn support_process_info(&mut self) -> Option<ProcessInfoOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadBase for ReplayTarget<'_, '_> {
    /// `g`: the registers of the thread gdb selected (gdbstub's
    /// placeholder before that: the current one, `register_thread`).
    fn read_registers(&mut self, out: &mut LinuxRegs, tid: GdbTid) -> TargetResult<(), Self> {
        let r = self.session.registers(self.register_thread(tid)).map_err(|_| TargetError::Errno(ESRCH))?;
        *out = regs::to_gdb(&r);
        Ok(())
    }

    /// gdb's `G`, to the thread `g` reads: the session marks the replay
    /// after it as diverged.
    fn write_registers(&mut self, from: &LinuxRegs, tid: GdbTid) -> TargetResult<(), Self> {
        let tid = self.register_thread(tid);
        let mut r = self.session.registers(tid).map_err(|_| TargetError::Errno(ESRCH))?;
        regs::apply_gdb(from, &mut r);
        self.session.set_registers(tid, &r).map_err(|_| TargetError::Errno(ESRCH))
    }

    /// `m`: the bytes readable from `addr` on; none is `E0e` (gdb's
    /// "Cannot access memory"), since an empty reply would mean
    /// "unsupported".
    fn read_addrs(&mut self, addr: u64, data: &mut [u8], _tid: GdbTid) -> TargetResult<usize, Self> {
        match self.session.read_memory(addr, data) {
            0 if !data.is_empty() => Err(TargetError::Errno(EFAULT)),
            n => Ok(n),
        }
    }

    fn write_addrs(&mut self, addr: u64, data: &[u8], _tid: GdbTid) -> TargetResult<(), Self> {
        self.session.write_memory(addr, data).map_err(|_| TargetError::Errno(EFAULT))
    }

    /// `qfThreadInfo`: the live threads, the session's current one first,
    /// because gdbstub answers `?` (the stop a newly connected gdb shows)
    /// with the first thread listed.
    fn list_active_threads(&mut self, thread_is_active: &mut dyn FnMut(GdbTid)) -> Result<(), Self::Error> {
        let threads = self.session.threads();
        let current = self.session.current_tid();
        let first = threads.iter().filter(|t| **t == current);
        first.chain(threads.iter().filter(|t| **t != current)).for_each(|t| thread_is_active(stop::gdb_tid(*t)));
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for ReplayTarget<'_, '_> {
    /// Nothing runs here: gdbstub then waits for a stop, which the server
    /// produces with [`ReplayTarget::run`].
    fn resume(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.action = Action::Continue;
        Ok(())
    }

    /// A signal gdb passes is dropped: the replay delivers the recorded
    /// signals only.
    fn set_resume_action_continue(&mut self, _tid: GdbTid, _signal: Option<Signal>) -> Result<(), Self::Error> {
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_range_step(&mut self) -> Option<MultiThreadRangeSteppingOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, GdbTid, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, GdbTid, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadSingleStep for ReplayTarget<'_, '_> {
    fn set_resume_action_step(&mut self, tid: GdbTid, _signal: Option<Signal>) -> Result<(), Self::Error> {
        self.action = Action::Step(recorded(tid));
        Ok(())
    }
}

/// Range stepping (gdb's `vCont;r`): the session steps the thread while
/// its pc stays in the range, with no packet per instruction.
impl MultiThreadRangeStepping for ReplayTarget<'_, '_> {
    fn set_resume_action_range_step(&mut self, tid: GdbTid, start: u64, end: u64) -> Result<(), Self::Error> {
        self.action = Action::RangeStep(recorded(tid), start, end);
        Ok(())
    }
}

impl MultiThreadSchedulerLocking for ReplayTarget<'_, '_> {
    /// A resume packet that names threads but has no default action
    /// (gdb's `set scheduler-locking on`) is accepted, and the recorded
    /// schedule runs every thread all the same: a replay cannot hold
    /// threads back.
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ReverseCont<GdbTid> for ReplayTarget<'_, '_> {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        self.action = Action::ReverseContinue;
        Ok(())
    }
}

impl ReverseStep<GdbTid> for ReplayTarget<'_, '_> {
    /// gdbstub resolves `Hc0` to the first thread listed, the one that
    /// last stopped; gdb means its selected thread, when it is live.
    fn reverse_step(&mut self, tid: GdbTid) -> Result<(), Self::Error> {
        let selected = self.any_step_thread.filter(|t| self.session.threads().contains(t));
        self.action = Action::ReverseStep(selected.unwrap_or(recorded(tid)));
        Ok(())
    }
}

impl Breakpoints for ReplayTarget<'_, '_> {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_breakpoint(&mut self) -> Option<HwBreakpointOps<'_, Self>> {
        Some(self)
    }
}

/// `Z1` (gdb's `hbreak`, and what it uses where it cannot write code): a
/// software breakpoint all the same. The replay hides its int3 from
/// memory reads, stops before it executes and replays the same path
/// either way, so nothing tells the two apart but the debug registers,
/// which are the watchpoints'.
impl HwBreakpoint for ReplayTarget<'_, '_> {
    fn add_hw_breakpoint(&mut self, addr: u64, kind: usize) -> TargetResult<bool, Self> {
        self.add_sw_breakpoint(addr, kind)
    }

    fn remove_hw_breakpoint(&mut self, addr: u64, kind: usize) -> TargetResult<bool, Self> {
        self.remove_sw_breakpoint(addr, kind)
    }
}

impl SwBreakpoint for ReplayTarget<'_, '_> {
    /// `Z0`: an unmapped address is `E0e` (gdb: "Cannot insert
    /// breakpoint N. Cannot access memory at address ...").
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        self.session.add_breakpoint(addr).map(|_| true).map_err(|_| TargetError::Errno(EFAULT))
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        self.session.remove_breakpoint(addr).map(|_| true).map_err(|_| TargetError::Errno(EFAULT))
    }
}

impl HwWatchpoint for ReplayTarget<'_, '_> {
    /// `Z2`/`Z3`/`Z4`: the range in aligned pieces ([`watch::pieces`]),
    /// all or none. Too long a range, or a fifth debug register, is `E16`
    /// (gdb: "Could not insert hardware watchpoint N").
    fn add_hw_watchpoint(&mut self, addr: u64, len: u64, kind: GdbWatchKind) -> TargetResult<bool, Self> {
        let pieces = watch::pieces(addr, len, watch_kind(kind)).ok_or(TargetError::Errno(EINVAL))?;
        for (i, w) in pieces.iter().enumerate() {
            if let Err(e) = self.session.add_watchpoint(*w) {
                tracing::debug!("watchpoint {w:?}: {e:#}");
                for added in &pieces[..i] {
                    self.session.remove_watchpoint(*added).map_err(TargetError::Fatal)?;
                }
                return Err(TargetError::Errno(EINVAL));
            }
        }
        Ok(true)
    }

    fn remove_hw_watchpoint(&mut self, addr: u64, len: u64, kind: GdbWatchKind) -> TargetResult<bool, Self> {
        for w in watch::pieces(addr, len, watch_kind(kind)).ok_or(TargetError::Errno(EINVAL))? {
            self.session.remove_watchpoint(w).map_err(|_| TargetError::Errno(EINVAL))?;
        }
        Ok(true)
    }
}

/// gdb's watchpoint kind as the session's.
fn watch_kind(kind: GdbWatchKind) -> WatchKind {
    match kind {
        GdbWatchKind::Write => WatchKind::Write,
        GdbWatchKind::Read => WatchKind::Read,
        GdbWatchKind::ReadWrite => WatchKind::Access,
    }
}

impl ExecFile for ReplayTarget<'_, '_> {
    /// `qXfer:exec-file:read`: the executable gdb loads symbols from.
    fn get_exec_file(&self, _pid: Option<Pid>, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        Ok(copy_window(self.session.exe_path().as_os_str().as_bytes(), offset, length, buf))
    }
}

impl Auxv for ReplayTarget<'_, '_> {
    /// `qXfer:auxv:read`: gdb finds the entry point and the loader here.
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let auxv = self.session.auxv().map_err(TargetError::Fatal)?;
        Ok(copy_window(&auxv, offset, length, buf))
    }
}

impl LibrariesSvr4 for ReplayTarget<'_, '_> {
    /// `qXfer:libraries-svr4:read`: the loader's list, rebuilt for every
    /// window gdb reads (the session does not move in between).
    fn get_libraries_svr4(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let xml = svr4::library_list(&self.session.libraries().map_err(TargetError::Fatal)?);
        Ok(copy_window(xml.as_bytes(), offset, length, buf))
    }
}

/// The target triple lldb's `qHostInfo` and `qProcessInfo` ask for
/// (LLDB's gdb-remote extensions): from it lldb picks its Linux platform
/// and the POSIX dynamic loader, which reads the loader's library list
/// (without it, lldb sees the executable alone, and no backtrace goes
/// through libc).
const TRIPLE: &str = "x86_64-pc-linux-gnu";

impl HostInfo for ReplayTarget<'_, '_> {
    fn host_info(&self, write_item: &mut dyn FnMut(&HostInfoResponse<'_>)) -> Result<(), Self::Error> {
        write_item(&HostInfoResponse::Triple(TRIPLE));
        write_item(&HostInfoResponse::Endianness(Endianness::Little));
        write_item(&HostInfoResponse::PointerSize(8));
        Ok(())
    }
}

impl ProcessInfo for ReplayTarget<'_, '_> {
    /// No pid: gdbstub's thread ids carry its own (1), which lldb
    /// compares with this one.
    fn process_info(&self, write_item: &mut dyn FnMut(&ProcessInfoResponse<'_>)) -> Result<(), Self::Error> {
        write_item(&ProcessInfoResponse::Triple(TRIPLE));
        write_item(&ProcessInfoResponse::Endianness(Endianness::Little));
        write_item(&ProcessInfoResponse::PointerSize(8));
        Ok(())
    }
}

impl MonitorCmd for ReplayTarget<'_, '_> {
    /// `qRcmd`: a [`monitor::Command`]; parse errors are printed, never
    /// returned (an error here would end the connection).
    fn handle_monitor_cmd(&mut self, cmd: &[u8], mut out: ConsoleOutput<'_>) -> Result<(), Self::Error> {
        let line = String::from_utf8_lossy(cmd);
        let text = match monitor::Command::parse(&line) {
            Ok(cmd) => {
                let text = monitor::run(&cmd, self.session, &mut |line| {
                    out.write_raw(line.as_bytes());
                    out.flush();
                });
                if !matches!(cmd, monitor::Command::When | monitor::Command::Help | monitor::Command::Events(_)) {
                    self.end_reported = false;
                }
                text
            }
            Err(e) => format!("{e}\n"),
        };
        out.write_raw(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_qxfer_windows() {
        let mut buf = [0u8; 4];
        assert_eq!(copy_window(b"/bin/true", 0, 4, &mut buf), 4);
        assert_eq!(&buf, b"/bin");
        assert_eq!(copy_window(b"/bin/true", 8, 4, &mut buf), 1);
        assert_eq!(buf[0], b'e');
        assert_eq!(copy_window(b"/bin/true", 9, 4, &mut buf), 0);
        assert_eq!(copy_window(b"/bin/true", 100, 4, &mut buf), 0);
    }

    #[test]
    fn thread_events_do_not_stop_a_continue() {
        assert!(Action::Continue.goes_on_after(&Stop::ThreadCreated { tid: 2, parent: 1 }));
        assert!(Action::ReverseContinue.goes_on_after(&Stop::ThreadExited { tid: 2 }));
        assert!(Action::Step(1).goes_on_after(&Stop::ThreadExited { tid: 2 }));
        assert!(!Action::Step(2).goes_on_after(&Stop::ThreadExited { tid: 2 }));
        assert!(!Action::Continue.goes_on_after(&Stop::Breakpoint { tid: 1, pc: 0 }));
    }
}
