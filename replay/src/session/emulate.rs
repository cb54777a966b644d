//! Syscall emulation and event matching: seed 000's *pevnt* test and its
//! checks (chkEvt, chkWrt), then carrying out a matched event by its class
//! (inputs from the log, outputs checked and echoed, file mmaps filled from
//! the trace's copies, clone, exit, kill, emulated futexes).

use super::{At, Delivery, Entry, Halt, Observed, ProcessEnd, Session, Step, Thread};
use crate::failure::Failure;
use crate::futex;
use anyhow::{bail, Context, Result};
use nix::sys::ptrace;
use nix::sys::signal::Signal as NixSignal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use weft_record::event::{End, Event, EventKind, MemWrite, Syscall};
use weft_record::syscalls::{self, Class};
use weft_record::tracee::{self, clone_flags, Memory};
use weft_record::Tid;

impl Session<'_> {
    /// A *pevnt* test then a check (seed 000 Fig. 8): run the event if it
    /// is the log's next and belongs to this thread, else switch to the
    /// thread the log names.
    pub(super) fn event_point(&mut self, i: usize, observed: Observed) -> Result<Step> {
        let Some(expected) = self.trace.events.get(self.state.pos) else {
            return Ok(Step::Fail(self.incomplete()));
        };
        if let Some(rec) = self.killed_at_end() {
            return Ok(Step::End(self.kill_as_recorded(rec)?));
        }
        let me = self.state.threads[i].rec;
        if expected.tid != me && !matches!(expected.kind, EventKind::End(_)) {
            return Ok(Step::Switch(None));
        }
        if let Some(why) = self.mismatch(i, &observed, expected) {
            let label = self.label_of(&observed);
            let observed = format!("tid {me} @{label:#x}  {why}");
            return Ok(Step::Fail(Failure::Unmatched { at: self.position(i), label, expected: expected.to_string(), observed }));
        }
        self.state.threads[i].last_event = Some(self.state.pos);
        self.state.pos += 1;
        self.state.threads[i].steps = 0;
        self.apply(i, observed, expected)
    }

    pub(super) fn label_of(&self, observed: &Observed) -> u64 {
        match observed {
            Observed::Syscall(e) => e.label,
            Observed::Signal(_, pc) | Observed::Rdtsc { pc, .. } => *pc,
        }
    }

    /// Seed 000's checks (chkEvt, chkWrt): `None` when `observed` matches
    /// the event, else a description of what the replay did.
    pub(super) fn mismatch(&self, i: usize, observed: &Observed, expected: &Event) -> Option<String> {
        let label = self.label_of(observed);
        let describe = || match observed {
            Observed::Syscall(e) => {
                let args: Vec<String> = e.args.iter().map(|a| format!("{a:#x}")).collect();
                format!("{}({})", syscalls::name(e.nr), args.join(", "))
            }
            Observed::Signal(sig, _) => format!("signal {}", sig.as_str()),
            Observed::Rdtsc { .. } => "rdtsc".to_string(),
        };
        if expected.label != label {
            return Some(describe());
        }
        match (observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { flags, .. }) => {
                let same = syscalls::class(e.nr) == Class::Clone
                    && clone_flags(&self.mem, &self.state.threads[i].regs) == *flags;
                (!same).then(describe)
            }
            (Observed::Syscall(e), EventKind::Syscall(s)) => {
                if e.nr != s.nr || syscalls::key_args(e.nr).iter().any(|&k| e.args[k] != s.args[k]) {
                    return Some(describe());
                }
                if let Some(k) = syscalls::path_arg(e.nr) {
                    let path = self.mem.read_cstr(e.args[k]).unwrap_or_default();
                    if Some(&path) != s.path.as_ref() {
                        return Some(format!("{} with path {:?}", describe(), String::from_utf8_lossy(&path)));
                    }
                }
                if let Some(want) = s.output_hash {
                    let mut rd = |a: u64| self.mem.read_u64(a).ok();
                    let ranges = syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd);
                    if self.mem.hash_ranges(&ranges) != want {
                        return Some(format!("{} writing different bytes", describe()));
                    }
                }
                None
            }
            (Observed::Signal(sig, _), EventKind::Signal(s)) => (*sig as i32 != s.signo).then(describe),
            (Observed::Rdtsc { rdtscp, .. }, EventKind::Rdtsc { aux, .. }) => {
                (*rdtscp != aux.is_some()).then(describe)
            }
            _ => Some(describe()),
        }
    }

    /// Whether signal `signo`, matched for thread `i`, is the one that
    /// ended the recording: the end is this signal in this thread, and the
    /// thread has no event before it.
    pub(super) fn fatal(&self, i: usize, signo: i32) -> bool {
        let rec = self.state.threads[i].rec;
        let ends = matches!(self.trace.events.last().map(|e| &e.kind), Some(EventKind::End(End::Killed { signo: s, tid, .. })) if *s == signo && *tid == rec);
        ends && self.next_event_of(rec) == usize::MAX
    }

    /// Whether thread `i` holds back the fatal signal it is about to
    /// receive: other threads' events come before the end in the log (on
    /// other cores they ran while the kernel killed the process), and the
    /// next one's thread can run.
    pub(super) fn holds_fatal_signal(&self, i: usize) -> bool {
        let At::Deliver(sig) = self.state.threads[i].at else { return false };
        let before_end = !matches!(self.trace.events.get(self.state.pos).map(|e| &e.kind), Some(EventKind::End(_)) | None);
        before_end && self.fatal(i, sig as i32) && self.next_owner().is_some_and(|j| j != i && self.runnable(j))
    }

    /// The thread a recording ended by SIGKILL names, when that end is the
    /// log's next event. SIGKILL has no delivery stop, so no signal event
    /// precedes it: sent from outside (`kill -9`, often to a program that
    /// hung), it ends the replay once every logged event is met, at the
    /// first scheduling point after the last one, or where the replay finds
    /// every thread blocked or one spinning, as the recorded run was.
    pub(super) fn killed_at_end(&self) -> Option<Tid> {
        match self.trace.events.get(self.state.pos)?.kind {
            EventKind::End(End::Killed { signo: libc::SIGKILL, tid, .. }) => Some(tid),
            _ => None,
        }
    }

    /// Kills the replayed process as the recording ended (SIGKILL in
    /// thread `rec`) and returns how it ended.
    pub(super) fn kill_as_recorded(&mut self, rec: Tid) -> Result<ProcessEnd> {
        self.note_stuck();
        nix::sys::signal::kill(self.pid, NixSignal::SIGKILL)?;
        self.state.last_delivery = Some(Delivery { rec, pc: 0, exact: false });
        self.drain()
    }

    /// Carries out a matched event.
    pub(super) fn apply(&mut self, i: usize, observed: Observed, expected: &Event) -> Result<Step> {
        match (&observed, &expected.kind) {
            (Observed::Syscall(e), EventKind::Spawn { child, .. }) => {
                self.spawn(i, e, *child)?;
                Ok(Step::Stay)
            }
            (Observed::Syscall(e), EventKind::Syscall(s)) => self.syscall(i, e, s),
            (Observed::Signal(sig, pc), EventKind::Signal(s)) => {
                let t = &mut self.state.threads[i];
                if !s.synchronous {
                    tracee::set_siginfo_bytes(t.tid, &s.siginfo)?;
                }
                t.at = At::Deliver(*sig);
                self.state.last_delivery = Some(Delivery { rec: t.rec, pc: *pc, exact: true });
                if self.interactive {
                    let fatal = self.fatal(i, s.signo);
                    self.halt = Some(Halt::Signal { signo: s.signo, siginfo: s.siginfo.clone(), fatal });
                }
                Ok(Step::Stay)
            }
            (Observed::Rdtsc { len, .. }, EventKind::Rdtsc { tsc, aux, .. }) => {
                let t = &mut self.state.threads[i];
                t.regs.rax = tsc & 0xffff_ffff;
                t.regs.rdx = tsc >> 32;
                if let Some(a) = aux {
                    t.regs.rcx = *a as u64;
                }
                t.regs.rip += *len as u64;
                ptrace::setregs(t.tid, t.regs)?;
                t.at = At::Ready;
                Ok(Step::Stay)
            }
            _ => bail!("internal error: applying an unmatched event"),
        }
    }

    /// Carries out a matched logged syscall, by class.
    pub(super) fn syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        match syscalls::class(e.nr) {
            Class::Input | Class::Unsupported => {
                if s.unsupported && self.state.warned.insert(e.nr) {
                    eprintln!(
                        "weft: warning: event {}: {} is unsupported; replaying its result only",
                        self.state.pos - 1,
                        syscalls::name(e.nr)
                    );
                }
                self.finish_syscall(i, s.result)?;
                if let Some(failure) = self.write_out_buffers(i, e, s.result, &s.writes)? {
                    return Ok(Step::Fail(failure));
                }
            }
            Class::Output => {
                self.finish_syscall(i, s.result)?;
                self.echo_output(e, s)?;
            }
            Class::MmapFile => return self.mmap_file(i, e, s),
            Class::ExecuteLogged => {
                self.state.threads[i].clear_child_tid = e.args[0];
                self.execute(i)?;
                self.set_result(i, s.result)?;
            }
            Class::Kill => self.kill_syscall(i, e, s)?,
            Class::ThreadExit => return self.thread_exit(i),
            Class::ExitGroup if self.interactive => {
                // The recorded end: the process stays, at its exit_group.
                self.halt = Some(Halt::Exiting(e.args[0] as i32));
            }
            Class::ExitGroup => {
                let tid = self.state.threads[i].tid;
                ptrace::syscall(tid, None)?;
                return Ok(Step::End(self.drain()?));
            }
            Class::Futex => {
                self.state.threads[i].woken = false;
                self.finish_syscall(i, s.result)?;
                return self.sync_point(i, None);
            }
            Class::Execute | Class::Clone | Class::Refused => bail!("internal error: {} is not a logged syscall", syscalls::name(e.nr)),
        }
        Ok(Step::Stay)
    }

    /// Writes the logged out-buffers where the replayed call points: the
    /// replay's pointers may differ from the recording's (heap arenas of
    /// threads are placed in creation order), so ranges are recomputed from
    /// the replay's arguments and paired with the logged bytes by index.
    pub(super) fn write_out_buffers(&mut self, i: usize, e: &Entry, result: i64, writes: &[MemWrite]) -> Result<Option<Failure>> {
        let mut rd = |a: u64| self.mem.read_u64(a).ok();
        let ranges = syscalls::out_buffers(e.nr, &e.args, result, &mut rd);
        if ranges.len() != writes.len() {
            return Ok(Some(Failure::Unmatched {
                at: self.position(i),
                label: e.label,
                expected: format!("{} with {} out-buffers", syscalls::name(e.nr), writes.len()),
                observed: format!("{} out-buffers in the replayed call", ranges.len()),
            }));
        }
        for ((addr, _), w) in ranges.iter().zip(writes) {
            self.mem.write(*addr, &self.trace.contents(&w.data)?)?;
        }
        Ok(None)
    }

    /// The program's writes to stdout and stderr appear on ours.
    pub(super) fn echo_output(&self, e: &Entry, s: &Syscall) -> Result<()> {
        if self.state.pos <= self.opts.echo_from || !matches!(e.nr, libc::SYS_write | libc::SYS_writev) || !(1..=2).contains(&s.args[0]) {
            return Ok(());
        }
        let mut rd = |a: u64| self.mem.read_u64(a).ok();
        let bytes = self.mem.read_ranges(&syscalls::output_ranges(e.nr, &e.args, s.result, &mut rd))?;
        // A closed stdout (EPIPE) must not end the replay.
        let _ = if s.args[0] == 1 {
            std::io::stdout().lock().write_all(&bytes).and_then(|_| std::io::stdout().flush())
        } else {
            std::io::stderr().lock().write_all(&bytes)
        };
        Ok(())
    }

    /// A file-backed mmap: anonymous memory at the recorded address, filled
    /// from the trace's copy of the file.
    pub(super) fn mmap_file(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<Step> {
        let Some(file) = s.file.as_ref().filter(|_| s.result >= 0) else {
            self.finish_syscall(i, s.result)?;
            return Ok(Step::Stay);
        };
        let addr = s.result as u64;
        let fixed = if e.args[3] & libc::MAP_FIXED as u64 != 0 { libc::MAP_FIXED } else { libc::MAP_FIXED_NOREPLACE };
        let t = &mut self.state.threads[i];
        t.regs.rdi = addr;
        t.regs.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed) as u64;
        t.regs.r8 = u64::MAX;
        t.regs.r9 = 0;
        ptrace::setregs(t.tid, t.regs)?;
        let got = self.execute(i)?.rax as i64;
        if got != s.result {
            let at = self.position(i);
            return Ok(Step::Fail(Failure::Unmatched {
                at,
                label: e.label,
                expected: format!("mmap of {} at {addr:#x}", String::from_utf8_lossy(&file.path)),
                observed: format!("the address range is not free in the replay (mmap returned {got})"),
            }));
        }
        let path = self.trace.file_path(&file.copy);
        let data = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        let start = (e.args[5] as usize).min(data.len());
        let end = (start + e.args[1] as usize).min(data.len());
        self.mem.write(addr, &data[start..end])?;
        self.state.sync.remapped(&self.mem, addr, addr + e.args[1]);
        let is_libc = Path::new(OsStr::from_bytes(&file.path))
            .file_name()
            .is_some_and(|n| n.as_bytes().starts_with(b"libc.so"));
        if is_libc && e.args[2] & libc::PROT_EXEC as u64 != 0 && !self.state.sync.installed() {
            self.state.sync.install_libc(&self.mem, &path, addr, e.args[5])?;
        }
        self.insert_pending_breakpoints();
        Ok(Step::Stay)
    }

    /// kill/tkill/tgkill: executed, with recorded ids translated, when the
    /// program signals itself; emulated otherwise.
    pub(super) fn kill_syscall(&mut self, i: usize, e: &Entry, s: &Syscall) -> Result<()> {
        let own = |id: u64| id as i32 == self.trace.meta.pid || self.state.by_rec.contains_key(&(id as i32));
        let target = match e.nr {
            libc::SYS_tgkill if own(e.args[0]) => self.state.by_rec.get(&(e.args[1] as i32)).copied(),
            libc::SYS_tkill => self.state.by_rec.get(&(e.args[0] as i32)).copied(),
            libc::SYS_kill if e.args[0] as i32 == self.trace.meta.pid => Some(0),
            _ => None,
        };
        let Some(target) = target else {
            return self.finish_syscall(i, s.result);
        };
        let replay_tid = self.state.threads[target].tid.as_raw() as u64;
        let t = &mut self.state.threads[i];
        match e.nr {
            libc::SYS_tgkill => {
                t.regs.rdi = self.pid.as_raw() as u64;
                t.regs.rsi = replay_tid;
            }
            libc::SYS_tkill => t.regs.rdi = replay_tid,
            _ => t.regs.rdi = self.pid.as_raw() as u64,
        }
        ptrace::setregs(t.tid, t.regs)?;
        self.execute(i)?;
        // The kernel preserves argument registers: give back the recorded
        // ids, so that no replay tid stays in the program's registers.
        let t = &mut self.state.threads[i];
        [t.regs.rdi, t.regs.rsi] = [e.args[0], e.args[1]];
        self.set_result(i, s.result)
    }

    /// A thread's `exit`: clear its CLONE_CHILD_CLEARTID word and wake its
    /// joiners (the kernel's futex wake reaches no emulated waiter), then
    /// let it go.
    pub(super) fn thread_exit(&mut self, i: usize) -> Result<Step> {
        let ctid = self.state.threads[i].clear_child_tid;
        if ctid != 0 {
            self.mem.write(ctid, &0u32.to_le_bytes())?;
            for w in self.state.futexes.wake(ctid, u32::MAX, u32::MAX) {
                self.release(w);
            }
        }
        let tid = self.state.threads[i].tid;
        if self.thread_halts {
            self.halt = Some(Halt::ThreadExited(self.state.threads[i].rec));
        }
        ptrace::syscall(tid, None)?;
        match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXIT) => {
                let _ = ptrace::cont(tid, None);
            }
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {}
            other => bail!("thread {tid} did not exit: {other:?}"),
        }
        self.state.threads[i].at = At::Exited;
        if self.state.threads.iter().all(|t| t.at == At::Exited) {
            return Ok(Step::End(self.drain()?));
        }
        Ok(Step::Switch(None))
    }

    /// Executes a clone the log says spawned `rec_child`, and gives the
    /// program the recorded tid everywhere the kernel put the new one.
    pub(super) fn spawn(&mut self, i: usize, e: &Entry, rec_child: Tid) -> Result<()> {
        let flags = clone_flags(&self.mem, &self.state.threads[i].regs) as i32;
        let (ptid, ctid) = if e.nr == libc::SYS_clone3 {
            (self.mem.read_u64(e.args[0] + 24)?, self.mem.read_u64(e.args[0] + 16)?)
        } else {
            (e.args[2], e.args[3])
        };
        let tid = self.state.threads[i].tid;
        ptrace::syscall(tid, None)?;
        let child = match waitpid(tid, Some(WaitPidFlag::__WALL))? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_CLONE) => Pid::from_raw(ptrace::getevent(tid)? as i32),
            other => bail!("clone did not create a thread: {other:?}"),
        };
        self.execute(i)?;
        self.set_result(i, rec_child as i64)?;
        let rec = (rec_child as u32).to_le_bytes();
        if flags & libc::CLONE_PARENT_SETTID != 0 {
            self.mem.write(ptid, &rec)?;
        }
        if flags & libc::CLONE_CHILD_SETTID != 0 {
            self.mem.write(ctid, &rec)?;
        }
        match waitpid(child, Some(WaitPidFlag::__WALL))? {
            WaitStatus::Stopped(_, NixSignal::SIGSTOP) => {}
            other => bail!("new thread {child} did not stop: {other:?}"),
        }
        self.state.by_rec.insert(rec_child, self.state.threads.len());
        let clear_child_tid = if flags & libc::CLONE_CHILD_CLEARTID != 0 { ctid } else { 0 };
        self.state.threads.push(Thread::new(rec_child, child, ptrace::getregs(child)?, clear_child_tid));
        if self.watchpoints.iter().next().is_some() {
            self.watchpoints.apply(child)?;
        }
        if self.thread_halts {
            self.halt = Some(Halt::ThreadCreated { tid: rec_child, parent: self.state.threads[i].rec });
        }
        Ok(())
    }

    /// An emulated futex call; wakes and completed waits are *psync*
    /// points (seed 000 Fig. 8, P-SYNC-PRMPT / P-SYNC-NOPRMPT).
    pub(super) fn futex(&mut self, i: usize, e: Entry) -> Result<Step> {
        if syscalls::is_logged_futex(&e.args) {
            return self.logged_futex_wait(i, e);
        }
        let mut words = MemWords(&self.mem);
        match self.state.futexes.call(i, self.state.threads[i].rec as u32, &e.args, &mut words) {
            futex::Action::Block(wait) => {
                self.state.threads[i].at = At::Blocked(wait);
                Ok(Step::Switch(None))
            }
            futex::Action::Return(result, woken) => {
                for w in woken {
                    self.release(w);
                }
                self.finish_syscall(i, result)?;
                self.sync_point(i, None)
            }
            futex::Action::Unsupported(op) => {
                bail!("futex operation {op} (a priority-inheritance futex) is not supported by the replayer")
            }
        }
    }

    /// A timed futex wait, whose outcome the log holds. If the recorded
    /// wait was woken, or found the word changed (EAGAIN), the thread
    /// blocks in the emulated queue while the word still holds the value it
    /// expects, until a wake releases it: in the recording another thread
    /// changed the word (a condvar signal, say) before this call returned,
    /// and the replay must let that happen too, or the caller would find
    /// nothing changed and wait again. Either way the call completes as an
    /// event, in log order, with the recorded result (a wait that finds the
    /// word already changed returns as if woken: a spurious wakeup, which
    /// callers allow).
    pub(super) fn logged_futex_wait(&mut self, i: usize, e: Entry) -> Result<Step> {
        let me = self.state.threads[i].rec;
        let recorded = self.trace.events.get(self.next_event_of(me)).and_then(|ev| match &ev.kind {
            EventKind::Syscall(s) if s.nr == libc::SYS_futex => Some(s.result),
            _ => None,
        });
        let must_change = recorded == Some(0) || recorded == Some(-libc::EAGAIN as i64);
        if must_change && !self.state.threads[i].woken {
            let mut words = MemWords(&self.mem);
            if let futex::Action::Block(wait) = self.state.futexes.call(i, self.state.threads[i].rec as u32, &e.args, &mut words) {
                self.state.threads[i].at = At::Blocked(wait);
                return Ok(Step::Switch(None));
            }
        }
        self.event_point(i, Observed::Syscall(e))
    }

    /// A wake released thread `w` from its futex wait.
    pub(super) fn release(&mut self, w: usize) {
        let t = &mut self.state.threads[w];
        t.at = match t.at {
            At::Blocked(wait) if wait.timed => {
                t.woken = true;
                At::Entry(Entry { nr: libc::SYS_futex, args: tracee::syscall_args(&t.regs), label: t.regs.rip })
            }
            _ => At::Woken(0),
        };
    }
}

/// Futex words in tracee memory.
struct MemWords<'a>(&'a Memory);

impl futex::Words for MemWords<'_> {
    fn read_u32(&mut self, addr: u64) -> Option<u32> {
        let b = self.0.read(addr, 4).ok()?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }
    fn write_u32(&mut self, addr: u64, value: u32) -> Option<()> {
        self.0.write(addr, &value.to_le_bytes()).ok()
    }
}
