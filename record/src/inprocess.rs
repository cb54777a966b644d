//! The recorder's side of in-process recording (seed 003): the shared
//! buffers the runtime ([`crate::runtime`]) logs into, the runtime's
//! requests (hello, a slot for a thread, a full slot), and the merge of
//! buffered records with the events logged at ptrace stops into one global
//! order.
//!
//! Every event, buffered or not, takes a number from one counter in the
//! shared header. Buffered records reach the recorder later than their
//! number (when it drains the slots), so [`Order`] holds events until every
//! smaller number is in, and writes them in that order.
//!
//! A drain copies a slot's records out at once, into one [`Chunk`] the
//! records then point into ([`Pending::Record`]) until they are written;
//! its buffer is then reused ([`InProcess::recycle`]). A copy per record,
//! allocated on the recorder's thread and freed on the trace writer's,
//! cost the recorder a third of its time on the syscall-heavy benchmark
//! (the allocator's fresh pages, zeroed by the kernel).

use crate::buffered;
use crate::event::{self, Event};
use crate::trace::{BufferedRef, LoggedRef};
use crate::tracee::{self, Memory, Regs};
use crate::runtime::{self, HEADER_SIZE, RECORD_HEADER, SHARED_SIZE, SLOTS, SLOT_DATA, SLOT_SIZE};
use crate::syscalls;
use crate::Tid;
use anyhow::{bail, Context, Result};
use nix::unistd::Pid;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a missing sequence number may hold back the events after it
/// before it is given up (its thread was killed between taking the number
/// and writing its record).
const GAP_PATIENCE: Duration = Duration::from_secs(2);

/// How far ahead of the next number to write an event's number can be:
/// every number in between is a record still in some thread's buffer
/// (twice the most the slots can hold, records being 88 bytes or more) or
/// an event at a stop. A number beyond is a malformed record (the program
/// wrote over its buffer), dropped with an error rather than given room.
const MAX_AHEAD: u64 = (2 * SLOTS * (SLOT_SIZE - SLOT_DATA) / RECORD_HEADER) as u64;

/// The recorder's in-process state: the shared buffers, the global order,
/// and each process's runtime control block.
pub struct InProcess {
    buffers: Buffers,
    order: Order,
    /// The address of `struct weft_control` in each process (by its pid)
    /// whose runtime said hello.
    controls: HashMap<Pid, u64>,
    /// How many runtimes said hello.
    hellos: u64,
    /// The address ranges of the runtime library's code, by process.
    code: HashMap<Pid, Vec<std::ops::Range<u64>>>,
    /// The records of the last flushed slot until they are parsed
    /// ([`InProcess::flushed`]).
    flush_copy: Vec<u8>,
}

impl InProcess {
    /// Sets up the shared buffers. Errors: [`Buffers::create`].
    pub fn new() -> Result<Self> {
        Ok(InProcess { buffers: Buffers::create()?, order: Order::default(), controls: HashMap::new(), hellos: 0, code: HashMap::new(), flush_copy: Vec::new() })
    }

    /// Installs the runtime library under weft's data directory and
    /// returns its path. Errors: [`runtime::install`].
    pub fn library(&self) -> Result<PathBuf> {
        runtime::install(&crate::dirs::trace_root()?.join("runtime"))
    }

    /// Places signal `event`, delivered to its thread right after a
    /// buffered syscall returned and before the runtime took the call's
    /// place in the order ([`InProcess::returned_unplaced`]): the call
    /// takes its place now, and the signal the next one. The runtime
    /// writes the record at that place once the handler has run
    /// ([`runtime::SLOT_RESERVED`]), so what the handler logs comes after
    /// both, in the order it happened with the other threads' events.
    /// (A place taken after the handler put its writes after those that
    /// other threads made later: killself.c's lines came out in another
    /// order in the replay than in the recording, 3 recordings of 30.)
    /// The order waits for that record as for any missing number, up to
    /// [`GAP_PATIENCE`]: a handler that runs longer (timer signals that
    /// come faster than their handler ends, each at the same call) has the
    /// record placed where it comes, not memory grow without bound.
    /// Without a slot, or when the call has its place
    /// already (a second signal there), the signal takes the next place.
    pub fn place_after_call(&mut self, event: Event) {
        // A second signal as the first one's handler returned, before the
        // record: the call has its place already.
        if self.order.reserved.contains_key(&event.tid) {
            return self.log(event);
        }
        match self.buffers.reserve_record(event.tid) {
            Some(record) => {
                self.order.reserved.insert(event.tid, record);
                self.log_at(record + 1, event);
            }
            None => self.log(event),
        }
    }

    /// Adds event `event`, logged at a ptrace stop, to the global order,
    /// and drains the buffered records that may precede it.
    pub fn log(&mut self, event: Event) {
        let seq = self.buffers.next_seq();
        self.log_at(seq, event);
    }

    /// Adds `event`, the exit_group of a process whose other threads are
    /// `fellows`, to the global order. What those threads log after it
    /// (buffered records, calls caught at stops) is dropped: they ran on
    /// only until the exit_group took effect, which a replay, ending the
    /// process at the exit_group, does not reproduce (xz -T2's workers
    /// took mutexes after its main thread's exit_group, and the replay
    /// "ended differently").
    pub fn log_process_end(&mut self, event: Event, fellows: &[Tid]) {
        let seq = self.buffers.next_seq();
        self.order.cutoffs.extend(fellows.iter().map(|&t| (t, seq)));
        self.log_at(seq, event);
    }

    /// Takes a place in the global order for an event logged later
    /// ([`InProcess::log_at`]).
    pub fn reserve(&self) -> u64 {
        self.buffers.next_seq()
    }

    /// Adds event `event` at place `seq` ([`InProcess::reserve`]), and
    /// drains the buffered records that may precede it.
    pub fn log_at(&mut self, seq: u64, event: Event) {
        self.order.push(seq, Pending::Event(Box::new(event)));
        self.buffers.drain(&mut self.order);
    }

    /// The events whose turn has come ([`Order::ready`]); with `all`, the
    /// buffers are drained first and every event comes out. Once written,
    /// they go back through [`InProcess::recycle`].
    pub fn ready(&mut self, all: bool) -> Vec<Pending> {
        if all {
            self.buffers.drain(&mut self.order);
        }
        self.order.ready(all)
    }

    /// Takes back entries [`InProcess::ready`] gave out, once written: the
    /// buffers of the chunks they were the last records of are kept for
    /// later copies (a fresh buffer per copy cost page faults).
    pub fn recycle(&mut self, entries: Vec<Pending>) {
        for entry in entries {
            if let Pending::Record { chunk, .. } = entry {
                if let Ok(chunk) = Rc::try_unwrap(chunk) {
                    self.buffers.give_back(chunk.bytes);
                }
            }
        }
    }

    /// Thread `tid` is gone: its records are drained, its slot freed.
    pub fn thread_gone(&mut self, tid: crate::Tid) {
        self.buffers.release(tid, &mut self.order);
        // A later thread may get its tid.
        self.order.cutoffs.remove(&tid);
    }

    /// A thread of process `parent` spawned `child` with clone `flags`
    /// (stopped before the child runs). A forked child's runtime gets a
    /// new generation, so each of its threads asks for a slot of its own
    /// rather than write into its parent's. A clone sharing the memory
    /// without a TLS of its own ([`runtime::spawn_turns_off`]) would share
    /// its creator's slot: the process's runtime is turned off, and its
    /// calls take the ptrace path.
    /// Errors: writing the process's memory.
    pub fn spawned(&mut self, parent: Pid, child: Pid, flags: u64, mem: &Memory) -> Result<()> {
        let Some(&control) = self.controls.get(&parent) else { return Ok(()) };
        let vm = flags & libc::CLONE_VM as u64 != 0;
        if event::is_new_process(flags) && !vm {
            self.controls.insert(child, control);
            let child_mem = Memory::open(child)?;
            let at = control + runtime::CONTROL_GENERATION;
            let generation = u32::from_le_bytes(child_mem.read(at, 4)?.try_into().unwrap_or_default());
            child_mem.write(at, &generation.wrapping_add(1).to_le_bytes())?;
        } else if runtime::spawn_turns_off(flags) {
            self.turn_off(parent, mem, "shares its memory with a clone that has no TLS of its own")?;
        }
        Ok(())
    }

    /// Whether thread `tid` is inside the real wait of a synchronization
    /// call (the runtime's `quiet` flag), whose futex waits and TSC reads
    /// are not logged: a replay grants the call its recorded outcome
    /// without waiting.
    pub fn quiet(&self, tid: crate::Tid) -> bool {
        self.buffers.flag(tid, runtime::SLOT_QUIET)
    }

    /// Whether an asynchronous signal delivered to thread `tid` at `pc`
    /// (`rax` holding what the last syscall returned) hit it at the exit of
    /// a buffered syscall that completed, before the runtime took the
    /// call's place in the order ([`InProcess::place_after_call`]). Not a
    /// call the kernel will restart, or one that failed with EINTR: its
    /// signal comes before it, and the runtime logs no record of it.
    /// (Elsewhere in the runtime, the call's place is taken already, or
    /// the call is still to come.)
    pub fn returned_unplaced(&self, tid: crate::Tid, pc: u64, rax: i64) -> bool {
        pc == runtime::BUFFERED_LABEL
            && !syscalls::RESTART_CODES.contains(&rax)
            && rax != -(libc::EINTR as i64)
            && !self.buffers.flag(tid, runtime::SLOT_LOGGING)
    }

    /// Whether thread `tid` (stopped at `pc`, memory `mem`) is in a
    /// runtime function before its first call: a signal that hit it there
    /// came before that call. False when its phase cannot be read.
    pub fn before_call(&self, tid: crate::Tid, pc: u64, mem: &Memory) -> bool {
        let Some(at) = self.buffers.phase_at(tid) else { return false };
        let phase = mem.read(at, 4).is_ok_and(|b| b[..] == runtime::PHASE_BEFORE.to_le_bytes());
        phase || mem.read(pc, 16).is_ok_and(|code| runtime::at_stub_entry(&code))
    }

    /// The address of thread `tid`'s runtime `depth` (an i32 in its TLS,
    /// above 0 inside a runtime function), once its runtime told where
    /// its phase is ([`runtime::DEPTH_BEFORE_PHASE`]).
    pub fn depth_at(&self, tid: crate::Tid) -> Option<u64> {
        self.buffers.phase_at(tid).map(|at| at - runtime::DEPTH_BEFORE_PHASE)
    }

    /// Whether `pc`, in process `tgid`, is in the runtime's code (its page
    /// or its library): a replay runs other code there (its markers), so a
    /// signal that hit there is delivered at the thread's next stop, with
    /// no state to match.
    pub fn in_runtime(&self, tgid: Pid, pc: u64) -> bool {
        (runtime::PAGE..runtime::PAGE + runtime::PAGE_SIZE).contains(&pc)
            || self.code.get(&tgid).is_some_and(|ranges| ranges.iter().any(|r| r.contains(&pc)))
    }

    /// Parses the records of the slot thread `tid` flushed
    /// ([`InProcess::request`]), if it did, and drains the other slots: a
    /// thread that makes no call through ptrace (one blocked in a futex
    /// wait from before another's flushes, holding a record or two in its
    /// slot) would otherwise hold back every later record, in memory,
    /// until its next stop (the syscall-heavy benchmark's order held up
    /// to 365,000 of its 825,000 events at once).
    pub fn flushed(&mut self, tid: crate::Tid) {
        if !self.flush_copy.is_empty() {
            parse_records(std::mem::take(&mut self.flush_copy), tid, &mut self.order);
            self.buffers.drain(&mut self.order);
        }
    }

    /// Process `tgid` exec'd: its new image has a runtime of its own,
    /// which says hello again.
    pub fn exec(&mut self, tgid: Pid) {
        self.controls.remove(&tgid);
    }

    /// Whether process `tgid`'s runtime said hello and is not off.
    pub fn is_on(&self, tgid: Pid) -> bool {
        self.controls.contains_key(&tgid)
    }

    /// Process `tgid` is about to make a call that turns its runtime off
    /// ([`runtime::turns_off`], for reason `why`): every call takes the
    /// ptrace path from here on, with one warning. Before its hello, the
    /// runtime is setting up its memory itself. Errors: writing its memory.
    pub fn turn_off(&mut self, tgid: Pid, mem: &Memory, why: &str) -> Result<()> {
        let Some(control) = self.controls.remove(&tgid) else { return Ok(()) };
        mem.write(control, &1u32.to_le_bytes())?;
        eprintln!("weft: warning: process {tgid} {why}; it is recorded through ptrace only from here on");
        Ok(())
    }

    /// Answers a runtime request from thread `pid` of process `tgid`
    /// stopped at its WEFT_NR_CTL syscall (`regs`): the value it returns.
    /// A flush copies the slot's records, to be parsed by
    /// [`InProcess::flushed`] once the thread runs again (it need not wait
    /// while they are). Errors: the reply could not be written to the
    /// program's memory; a flush of a slot not the thread's.
    pub fn request(&mut self, pid: Pid, tgid: Pid, regs: &Regs, mem: &Memory) -> Result<i64> {
        let args = tracee::syscall_args(regs);
        Ok(match args[0] {
            runtime::CTL_HELLO if args[1] == runtime::VERSION => {
                let mut reply = self.buffers.path().as_bytes().to_vec();
                reply.push(0);
                mem.write(args[2], &reply)?;
                self.controls.insert(tgid, args[3]);
                self.code.insert(tgid, runtime_code(pid));
                self.hellos += 1;
                runtime::MODE_RECORD
            }
            runtime::CTL_REGISTER => self.buffers.register(pid.as_raw(), args[1], &mut self.order).map_or(-1, |k| k as i64),
            runtime::CTL_FLUSH => {
                self.flush_copy = self.buffers.flush(args[1] as usize, pid.as_raw())?;
                0
            }
            _ => -libc::EINVAL as i64,
        })
    }

    /// Says so when no process of the recording loaded the runtime (a
    /// static executable, a program that drops LD_PRELOAD from its
    /// environment): it was recorded through ptrace alone.
    pub fn warn_if_unused(&self) {
        if self.hellos == 0 {
            eprintln!("weft: warning: the in-process runtime was not loaded (a statically linked program, or LD_PRELOAD removed); recorded through ptrace only");
        }
    }
}

/// The executable mappings of the runtime library in process `pid`
/// (/proc/PID/maps, proc(5)).
fn runtime_code(pid: Pid) -> Vec<std::ops::Range<u64>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter(|l| l.contains("/libweft_runtime-") && l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
        .filter_map(|l| {
            let (lo, hi) = l.split_whitespace().next()?.split_once('-')?;
            Some(u64::from_str_radix(lo, 16).ok()?..u64::from_str_radix(hi, 16).ok()?)
        })
        .collect()
}

/// The shared buffers, mapped in the recorder: a memfd the program's
/// runtime opens through `/proc/<recorder>/fd/<n>`, so nothing is left
/// behind when the recorder dies.
pub struct Buffers {
    _fd: OwnedFd,
    path: String,
    base: *mut u8,
    /// The recorded tid owning each slot.
    owners: Vec<Option<Tid>>,
    /// Emptied buffers of written chunks, for the next copies.
    spare: Vec<Vec<u8>>,
}

impl Buffers {
    /// Creates and maps the shared buffers. Errors: memfd_create, ftruncate
    /// or mmap failed.
    pub fn create() -> Result<Self> {
        // Close-on-exec: the program would inherit it as its descriptor 3
        // (its first open returned 4, and `prlimit --nofile=4` left no
        // room for its libraries); its runtime opens the buffers through
        // /proc instead.
        // SAFETY: the name is a NUL-terminated literal.
        let fd = unsafe { libc::memfd_create(c"weft-buffers".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("memfd_create for the in-process buffers");
        }
        // SAFETY: fd was just created and is owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), SHARED_SIZE as i64) } != 0 {
            return Err(std::io::Error::last_os_error()).context("size the in-process buffers");
        }
        // SAFETY: a fresh shared mapping of our own memfd; unmapped in Drop.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), SHARED_SIZE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("map the in-process buffers");
        }
        let path = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
        Ok(Buffers { _fd: fd, path, base: base.cast(), owners: vec![None; SLOTS], spare: Vec::new() })
    }

    /// The path the runtime opens (NUL-terminated in the hello reply).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The global sequence counter, shared with every runtime.
    fn counter(&self) -> &AtomicU64 {
        // SAFETY: the header's first 8 bytes are the counter, 8-aligned in
        // a mapping that lives as long as self; only atomics touch it.
        unsafe { &*(self.base as *const AtomicU64) }
    }

    /// Takes the next number of the global order.
    pub fn next_seq(&self) -> u64 {
        self.counter().fetch_add(1, Ordering::SeqCst)
    }

    /// Takes two numbers of the global order, for the record of the
    /// buffered call thread `tid` (stopped) just returned from, and the
    /// one after it, and leaves the first in the thread's slot
    /// ([`runtime::SLOT_RESERVED`]) for its runtime to use. `None` when
    /// the thread has no slot.
    fn reserve_record(&self, tid: Tid) -> Option<u64> {
        let k = self.owners.iter().position(|o| *o == Some(tid))?;
        let seq = self.counter().fetch_add(2, Ordering::SeqCst);
        self.word(k, runtime::SLOT_RESERVED).store(seq + 1, Ordering::Release);
        Some(seq)
    }

    fn slot(&self, k: usize) -> *mut u8 {
        // SAFETY: k < SLOTS, so the slot lies inside the mapping.
        unsafe { self.base.add(HEADER_SIZE + k * SLOT_SIZE) }
    }

    fn word(&self, k: usize, offset: usize) -> &AtomicU64 {
        // SAFETY: head (8), tail (16), phase_at (32) and reserved (40) are
        // 8-aligned words of slot k.
        unsafe { &*(self.slot(k).add(offset) as *const AtomicU64) }
    }

    /// Gives thread `tid` a slot (its old one, emptied, if it had one: an
    /// exec gives the thread a new runtime), with `phase_at`, the address
    /// of its phase ([`runtime::SLOT_PHASE_AT`]). `None` when all are taken.
    pub fn register(&mut self, tid: Tid, phase_at: u64, order: &mut Order) -> Option<usize> {
        let k = self.owners.iter().position(|o| *o == Some(tid)).or_else(|| self.owners.iter().position(Option::is_none))?;
        self.drain_slot(k, order);
        self.owners[k] = Some(tid);
        // SAFETY: the slot's first 4 bytes are its tid.
        unsafe { (self.slot(k) as *mut i32).write_volatile(tid) };
        self.word(k, 8).store(0, Ordering::Release);
        self.word(k, 16).store(0, Ordering::Release);
        self.word(k, runtime::SLOT_PHASE_AT).store(phase_at, Ordering::Release);
        self.word(k, runtime::SLOT_RESERVED).store(0, Ordering::Release);
        order.unreserve(tid);
        Some(k)
    }

    /// Thread `tid` is gone: its records are drained and its slot freed.
    pub fn release(&mut self, tid: Tid, order: &mut Order) {
        if let Some(k) = self.owners.iter().position(|o| *o == Some(tid)) {
            self.drain_slot(k, order);
            self.owners[k] = None;
        }
        order.unreserve(tid);
    }

    /// Drains every slot's committed records into `order`.
    pub fn drain(&mut self, order: &mut Order) {
        for k in 0..SLOTS {
            if self.owners[k].is_some() {
                self.drain_slot(k, order);
            }
        }
    }

    /// Empties slot `k` of its thread, which is stopped at a FLUSH request,
    /// so that it writes from the start again; returns a copy of the
    /// records it held, to be parsed ([`parse_records`]) once the thread
    /// runs again.
    pub fn flush(&mut self, k: usize, tid: Tid) -> Result<Vec<u8>> {
        if k >= SLOTS || self.owners[k] != Some(tid) {
            bail!("thread {tid} flushed slot {k}, which is not its own");
        }
        let copy = self.copy_out(k).0;
        self.word(k, 8).store(0, Ordering::Release);
        self.word(k, 16).store(0, Ordering::Release);
        Ok(copy)
    }

    /// Slot `k`'s records not yet drained, copied into a spare buffer, and
    /// where they end.
    fn copy_out(&mut self, k: usize) -> (Vec<u8>, usize) {
        let mut copy = self.spare.pop().unwrap_or_default();
        let (records, head) = self.committed(k);
        copy.extend_from_slice(records);
        (copy, head)
    }

    /// Keeps `buffer`, emptied, for a later copy: as many as the slots a
    /// drain may copy at once would need is plenty.
    fn give_back(&mut self, mut buffer: Vec<u8>) {
        const SPARE_MAX: usize = 16;
        if self.spare.len() < SPARE_MAX {
            buffer.clear();
            self.spare.push(buffer);
        }
    }

    /// The address of thread `tid`'s phase ([`runtime::SLOT_PHASE_AT`]),
    /// once its runtime wrote it.
    fn phase_at(&self, tid: Tid) -> Option<u64> {
        let k = self.owners.iter().position(|o| *o == Some(tid))?;
        Some(self.word(k, runtime::SLOT_PHASE_AT).load(Ordering::Relaxed)).filter(|&a| a != 0)
    }

    /// Flag `offset` ([`runtime::SLOT_QUIET`], [`runtime::SLOT_LOGGING`])
    /// of thread `tid`'s slot.
    fn flag(&self, tid: Tid, offset: usize) -> bool {
        let Some(k) = self.owners.iter().position(|o| *o == Some(tid)) else { return false };
        // SAFETY: the flags are u32 words of slot k's header, written by
        // the thread, which is stopped.
        unsafe { (self.slot(k).add(offset) as *const u32).read_volatile() != 0 }
    }

    /// Slot `k`'s records not yet drained, and where they end.
    fn committed(&self, k: usize) -> (&[u8], usize) {
        let head = (self.word(k, 8).load(Ordering::Acquire) as usize).min(SLOT_SIZE - SLOT_DATA);
        let tail = (self.word(k, 16).load(Ordering::Relaxed) as usize).min(head);
        // SAFETY: [SLOT_DATA, SLOT_SIZE) of slot k is inside the mapping;
        // bytes below `head` were published with a release store.
        let data = unsafe { std::slice::from_raw_parts(self.slot(k).add(SLOT_DATA), head) };
        (&data[tail..], head)
    }

    fn drain_slot(&mut self, k: usize, order: &mut Order) {
        let Some(tid) = self.owners[k] else { return };
        if self.committed(k).0.is_empty() {
            return;
        }
        let (copy, head) = self.copy_out(k);
        parse_records(copy, tid, order);
        self.word(k, 16).store(head as u64, Ordering::Release);
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: base and SHARED_SIZE are the mapping made in create().
        unsafe { libc::munmap(self.base.cast(), SHARED_SIZE) };
    }
}

/// Records of one thread copied out of its slot, which the entries of
/// [`Order`] point into.
pub struct Chunk {
    /// The recorded tid of the thread.
    tid: Tid,
    bytes: Vec<u8>,
}

/// One entry of the global order: an event logged at a ptrace stop, or a
/// buffered record.
pub enum Pending {
    /// An event logged at a ptrace stop, boxed: most entries are records,
    /// and the order's ring moves every entry at the size of the largest
    /// (copying them was 4% of the recorder's time with two busy threads).
    Event(Box<Event>),
    /// The record at `range` (bytes) of `chunk`.
    Record { chunk: Rc<Chunk>, range: std::ops::Range<usize> },
}

impl Pending {
    /// The recorded tid of the thread it belongs to.
    pub fn tid(&self) -> Tid {
        match self {
            Pending::Event(e) => e.tid,
            Pending::Record { chunk, .. } => chunk.tid,
        }
    }

    /// The entry as the trace writes it.
    pub fn logged(&self) -> LoggedRef<'_> {
        match self {
            Pending::Event(e) => LoggedRef::Event(e),
            Pending::Record { chunk, range } => LoggedRef::Buffered(BufferedRef { tid: chunk.tid, bytes: &chunk.bytes[range.clone()] }),
        }
    }
}

/// Puts thread `tid`'s records `bytes` into `order`, each once it checks
/// out ([`buffered::take_place`]). A malformed record drops the rest, with
/// an error message: the replay diverges there.
pub fn parse_records(mut bytes: Vec<u8>, tid: Tid, order: &mut Order) {
    let mut places = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some((seq, size)) = buffered::take_place(&mut bytes[at..]) else {
            eprintln!("weft: error: thread {tid}: malformed in-process record; the rest of its buffer is dropped (the replay will diverge there)");
            break;
        };
        places.push((seq, at..at + size));
        at += size;
    }
    let chunk = Rc::new(Chunk { tid, bytes });
    for (seq, range) in places {
        order.push(seq, Pending::Record { chunk: Rc::clone(&chunk), range });
    }
}

/// Events waiting for their turn in the global order.
#[derive(Default)]
pub struct Order {
    /// The next number to write.
    next: u64,
    /// The places of the numbers from `next` on (index k: number next + k).
    /// Numbers are dense, so a ring costs less than a map per event.
    pending: VecDeque<Place>,
    /// Places in `pending` that are filled.
    filled: usize,
    /// Since when `next` has been missing while later events wait.
    gap_since: Option<Instant>,
    /// The places taken for the records of threads that a signal stopped
    /// right after a buffered call ([`InProcess::place_after_call`]),
    /// until the records come in (a place is taken once per call).
    reserved: HashMap<Tid, u64>,
    /// Threads whose process's exit_group took this place: what they log
    /// after it is dropped ([`InProcess::log_process_end`]).
    cutoffs: HashMap<Tid, u64>,
}

/// What took one number of the global order.
#[derive(Default)]
enum Place {
    /// The number has not come in yet.
    #[default]
    Missing,
    /// One event or record, the common case (no allocation beyond the
    /// ring's).
    One(Pending),
    /// None, for a number whose entry is dropped; or more than one, when
    /// a malformed record took another's number.
    Many(Vec<Pending>),
}

impl Place {
    fn push(&mut self, event: Pending) {
        *self = match std::mem::take(self) {
            Place::Missing => Place::One(event),
            Place::One(first) => Place::Many(vec![first, event]),
            Place::Many(mut v) => {
                v.push(event);
                Place::Many(v)
            }
        };
    }

    fn fill(&mut self) {
        if matches!(self, Place::Missing) {
            *self = Place::Many(Vec::new());
        }
    }
}

impl Order {
    /// Adds event or record number `seq`.
    pub fn push(&mut self, seq: u64, entry: Pending) {
        if seq.saturating_sub(self.next) > MAX_AHEAD {
            eprintln!("weft: error: thread {}: in-process record {seq} is too far ahead of the order ({}); dropped (the program wrote over its buffer?)", entry.tid(), self.next);
            return;
        }
        if self.cutoffs.get(&entry.tid()).is_some_and(|&cut| seq > cut) {
            // Its place is left empty (unless given up already).
            if seq >= self.next {
                self.place(seq).fill();
            }
            return;
        }
        if !self.reserved.is_empty() && self.reserved.get(&entry.tid()) == Some(&seq) {
            self.reserved.remove(&entry.tid());
        }
        self.place(seq).push(entry);
    }

    /// Thread `tid` will not write the record its place was taken for
    /// (it is gone, or has a new runtime): the place is left empty.
    fn unreserve(&mut self, tid: Tid) {
        if let Some(seq) = self.reserved.remove(&tid) {
            if seq >= self.next {
                self.place(seq).fill();
            }
        }
    }

    /// The place of number `seq`, counted as filled from now on. A number
    /// already given up ([`GAP_PATIENCE`]) comes out next.
    fn place(&mut self, seq: u64) -> &mut Place {
        let k = seq.saturating_sub(self.next) as usize;
        if k >= self.pending.len() {
            self.pending.resize_with(k + 1, Place::default);
        }
        if matches!(self.pending[k], Place::Missing) {
            self.filled += 1;
        }
        &mut self.pending[k]
    }

    /// The events that can be written now, in order: the run of numbers
    /// from the next one, after giving up a number missing for longer than
    /// [`GAP_PATIENCE`] (or every missing number, when `all`).
    pub fn ready(&mut self, all: bool) -> Vec<Pending> {
        let mut out = Vec::new();
        loop {
            while self.pending.front().is_some_and(|p| !matches!(p, Place::Missing)) {
                match self.pending.pop_front() {
                    Some(Place::One(e)) => out.push(e),
                    Some(Place::Many(v)) => out.extend(v),
                    _ => {}
                }
                self.filled -= 1;
                self.next += 1;
                self.gap_since = None;
            }
            if self.filled == 0 {
                break;
            }
            let since = *self.gap_since.get_or_insert_with(Instant::now);
            if !all && since.elapsed() < GAP_PATIENCE {
                break;
            }
            eprintln!("weft: warning: in-process record {} was never written (its thread was killed?); skipped", self.next);
            while self.pending.front().is_some_and(|p| matches!(p, Place::Missing)) {
                self.pending.pop_front();
                self.next += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffered::tests::header_bytes;
    use crate::event::{EventKind, Sync, SyncOp};
    use crate::trace::Logged;

    fn ev(tid: Tid) -> Pending {
        Pending::Event(Box::new(Event { tid, label: 0, kind: EventKind::Sync(Sync { op: SyncOp::MutexLock, var: 1, result: 0 }) }))
    }

    /// The events `entries` decode into, through their encoding.
    fn decoded(entries: Vec<Pending>) -> Vec<Event> {
        let decode = |e: &Pending| bincode::deserialize::<Logged>(&bincode::serialize(&e.logged()).unwrap()).unwrap().into_event().unwrap();
        entries.iter().map(decode).collect()
    }

    #[test]
    fn order_holds_events_until_the_gap_fills() {
        let mut o = Order::default();
        o.push(1, ev(2));
        assert!(o.ready(false).is_empty());
        o.push(0, ev(1));
        let tids: Vec<Tid> = o.ready(false).iter().map(Pending::tid).collect();
        assert_eq!(tids, vec![1, 2]);
        o.push(3, ev(4));
        assert_eq!(o.ready(true).len(), 1, "the end gives missing numbers up");
    }

    #[test]
    fn what_a_process_logs_after_its_exit_group_is_dropped() {
        let mut o = Order::default();
        o.cutoffs.insert(2, 1);
        o.push(0, ev(2));
        o.push(1, ev(1));
        o.push(2, ev(2));
        o.push(3, ev(3));
        let tids: Vec<Tid> = o.ready(false).iter().map(Pending::tid).collect();
        assert_eq!(tids, vec![2, 1, 3], "thread 2's event after place 1 is dropped, and its place does not hold the rest back");
    }

    #[test]
    fn a_number_far_ahead_is_dropped_not_given_room() {
        let mut o = Order::default();
        o.push(u64::MAX / 2, ev(9));
        assert!(o.pending.is_empty());
        o.push(0, ev(1));
        assert_eq!(o.ready(true).len(), 1);
    }

    /// A place taken for a record whose thread is gone is left empty at
    /// once: what follows does not wait for it.
    #[test]
    fn a_reserved_place_is_left_empty_once_its_thread_is_gone() {
        let mut o = Order::default();
        o.reserved.insert(7, 0);
        o.push(1, ev(8));
        assert!(o.ready(false).is_empty());
        o.unreserve(7);
        let tids: Vec<Tid> = o.ready(false).iter().map(Pending::tid).collect();
        assert_eq!(tids, vec![8]);
    }

    /// A signal delivered as a buffered call returns goes right after that
    /// call's record, which the runtime writes after the handler ran, at
    /// the place the recorder took; what the handler and then another
    /// thread log goes after both.
    #[test]
    fn a_signal_after_a_call_goes_between_it_and_what_came_later() {
        let mut ip = InProcess::new().unwrap();
        let k = ip.buffers.register(7, 0, &mut ip.order).unwrap();
        // Thread 7 commits a record (op `op`, number `seq`) at the end of its slot.
        let commit = |ip: &mut InProcess, op: SyncOp, seq: u64| {
            let rec = header_bytes(RECORD_HEADER, runtime::REC_SYNC, 0, seq, op as u64);
            let head = ip.buffers.word(k, 8).load(Ordering::Acquire) as usize;
            // SAFETY: the record fits in slot k's data after `head`.
            unsafe { std::ptr::copy_nonoverlapping(rec.as_ptr(), ip.buffers.slot(k).add(SLOT_DATA + head), RECORD_HEADER) };
            ip.buffers.word(k, 8).store((head + RECORD_HEADER) as u64, Ordering::Release);
        };
        let seq = ip.buffers.next_seq();
        commit(&mut ip, SyncOp::MutexUnlock, seq);
        let signal = Event { tid: 7, label: 0, kind: EventKind::End(crate::event::End::Exited(0)) };
        ip.place_after_call(signal);
        // The handler's own call, through ptrace, then another thread's.
        ip.log(Event { tid: 7, label: 1, kind: EventKind::End(crate::event::End::Exited(1)) });
        ip.log(Event { tid: 8, label: 0, kind: EventKind::End(crate::event::End::Exited(2)) });
        assert_eq!(ip.ready(false).len(), 1, "all but the earlier record wait for the call's");
        // The handler returned: the runtime writes the call's record at the
        // reserved place.
        let reserved = ip.buffers.word(k, runtime::SLOT_RESERVED).swap(0, Ordering::AcqRel);
        commit(&mut ip, SyncOp::MutexLock, reserved - 1);
        let kinds: Vec<&str> = decoded(ip.ready(true))
            .iter()
            .map(|e| match &e.kind {
                _ if e.tid == 8 => "other thread",
                EventKind::Sync(_) => "the call",
                _ if e.label == 1 => "handler's call",
                _ => "signal",
            })
            .collect();
        assert_eq!(kinds, ["the call", "signal", "handler's call", "other thread"]);
        assert!(ip.order.reserved.is_empty());
    }

    #[test]
    fn a_malformed_record_drops_the_rest_of_its_buffer() {
        let mut o = Order::default();
        let mut bytes = header_bytes(RECORD_HEADER, runtime::REC_SYNC, 0, 0, SyncOp::MutexLock as u64).to_vec();
        bytes.extend(header_bytes(RECORD_HEADER, runtime::REC_SYNC, 0, 1, 999));
        bytes.extend(header_bytes(RECORD_HEADER, runtime::REC_SYNC, 0, 2, SyncOp::MutexUnlock as u64));
        parse_records(bytes, 3, &mut o);
        assert_eq!(decoded(o.ready(true)).len(), 1);
    }
}
