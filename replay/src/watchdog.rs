//! The livelock watchdog. On one core, a thread that spins waiting for
//! another thread never lets it run: with no syscall in its loop it never
//! reaches a scheduling point, and without performance counters weft cannot
//! preempt it at a deterministic instruction; with sched_yield in its loop
//! the scheduler may switch at each call, but the thread it waits for may
//! still be unable to run (it waits for its turn in the log).
//!
//! So the watchdog measures progress, not syscalls: the replay time since
//! the last logged event was matched. Past the limit it stops the thread
//! that runs (SIGSTOP), or tells the scheduler at its next yield point
//! ([`Watchdog::spun`]), and the replay reports a livelock. Time the replay
//! spends paused (a debugger holding it at a breakpoint) does not count.

use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};
use weft_record::Tid;

/// Watches the replay's progress and the thread the replayer waits for.
pub struct Watchdog {
    clock: Arc<Mutex<Clock>>,
    /// The wall-time slice under way, which the watchdog thread ends
    /// without the clock's lock.
    wall: Arc<WallSlice>,
    /// The watchdog thread: unparked when a wall-time slice starts, so
    /// that its end does not wait for the nap under way.
    thread: std::thread::Thread,
    fired: Arc<AtomicBool>,
    limit: Duration,
}

/// What the watchdog knows of the replay.
#[derive(Debug, Default)]
struct Clock {
    /// The thread the replayer waits for while it runs.
    armed: Option<Pid>,
    /// How long it may run before it is stopped to be parked (`None`: as
    /// long as it likes).
    slice: Option<Slice>,
    /// The thread the watchdog stopped for its slice, until the replayer
    /// sees the stop.
    sliced: Option<Pid>,
    /// The log position (next event to match) at the last progress.
    pos: usize,
    /// Replay time since the last progress, not counting the current run.
    spent: Duration,
    /// When the current run of the replay loop began (`None`: paused).
    since: Option<Instant>,
    /// Yield points since the last progress, per recorded thread: the pc
    /// of the latest and how many.
    spins: BTreeMap<Tid, (u64, u64)>,
    /// Times the limit started again since the last progress, for a
    /// thread that computes ([`Watchdog::computing`]).
    extended: u32,
}

/// A wall-time slice ([`Slice::wall`]), kept in atomics: the watchdog
/// thread ends it without taking the clock's lock, which the replayer may
/// hold when the scheduler takes its CPU (a busy machine: the replayer
/// shares its core with the replayed thread), and a slice's end would
/// wait for the replayer's next turn, some milliseconds.
#[derive(Debug)]
struct WallSlice {
    /// The watchdog's start: `deadline` counts from it.
    epoch: Instant,
    /// When the slice ends, in nanoseconds from `epoch` (0: none).
    deadline: AtomicU64,
    /// The thread it runs.
    tid: AtomicI32,
    /// When the latest slice was armed, in nanoseconds from `epoch`.
    armed_at: AtomicU64,
    /// The thread the watchdog stopped at a slice's end, until the
    /// replayer sees the stop (0: none).
    stopped: AtomicI32,
}

impl WallSlice {
    fn new() -> Self {
        WallSlice { epoch: Instant::now(), deadline: AtomicU64::new(0), tid: AtomicI32::new(0), armed_at: AtomicU64::new(0), stopped: AtomicI32::new(0) }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
    }

    fn arm(&self, tid: Pid, length: Duration) {
        self.tid.store(tid.as_raw(), Ordering::SeqCst);
        let length = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
        let now = self.now();
        self.armed_at.store(now, Ordering::SeqCst);
        self.deadline.store(now.saturating_add(length), Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.deadline.store(0, Ordering::SeqCst);
    }

    /// What is left of the slice under way (`None`: none); one that is
    /// over is ended here: its thread is stopped.
    fn look(&self) -> Option<Duration> {
        let deadline = self.deadline.load(Ordering::SeqCst);
        let now = self.now();
        if deadline == 0 || deadline > now {
            return (deadline != 0).then(|| Duration::from_nanos(deadline - now));
        }
        if self.deadline.compare_exchange(deadline, 0, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            let tid = self.tid.load(Ordering::SeqCst);
            self.stopped.store(tid, Ordering::SeqCst);
            stop(Pid::from_raw(tid));
        }
        None
    }

    /// Stays awake while short slices come one after the other (a signal
    /// search's probes, some hundreds of microseconds apart): ends the one
    /// under way on time, and waits [`WALL_LINGER`] for the next before
    /// the watchdog naps. A nap of the watchdog's CPU, idle, took some
    /// hundreds of microseconds to end on this VM, and a slice of 100 us
    /// ran 550 us.
    fn spin(&self) {
        let linger = u64::try_from(WALL_LINGER.as_nanos()).unwrap_or(u64::MAX);
        while self.now().saturating_sub(self.armed_at.load(Ordering::SeqCst)) < linger {
            if self.look().is_some_and(|left| left > WALL_LINGER) {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether the watchdog stopped `tid` at a slice's end; taken if so.
    fn stopped(&self, tid: Pid) -> bool {
        self.stopped.compare_exchange(tid.as_raw(), 0, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }
}

impl Clock {
    /// Replay time since the last progress.
    fn idle(&self) -> Duration {
        self.spent + self.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Restarts the idle time if the replay matched events since.
    fn progress(&mut self, pos: usize) {
        if pos != self.pos {
            self.pos = pos;
            self.spent = Duration::ZERO;
            self.since = self.since.map(|_| Instant::now());
            self.spins.clear();
            self.extended = 0;
        }
    }
}

/// How many times the limit starts again, at one log position, for the
/// log's next thread that computes: a computation that long is still no
/// livelock, and a loop whose registers change (a spin that counts) still
/// ends as one, after this many limits more.
const EXTENSIONS: u32 = 3;

/// How long the replayer lets a thread run before the watchdog stops it
/// (SIGSTOP), to set it aside or to look at it.
///
/// Counted in the thread's own CPU time ([`Slice::cpu`]): a thread that
/// waits for the CPU on a busy machine has not run, and a slice in wall
/// time would set it aside at another point of its code than on an idle
/// one, and the replay's choices would hang on the load. The watchdog
/// thread reads the CPU time when it first looks at the slice, off the
/// replay's path (a read of /proc per resume cost a replay of 825,000
/// events 9%); the wall time before that look counts as run. Wall time
/// when the kernel does not say (no /proc/TID/schedstat). That CPU time
/// advances a scheduler tick at a time (4 ms here): a slice that must end
/// on time to a finer grain is counted in wall time ([`Slice::wall`]),
/// which never ends it later than the CPU time would.
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    since: Instant,
    length: Duration,
    /// Counted in wall time ([`WallSlice`]).
    wall: bool,
    /// The thread's CPU time at the watchdog's first look (`None`:
    /// unreadable), and the wall time from the slice's start to that look.
    base: Option<(Option<Duration>, Duration)>,
}

impl Slice {
    /// A slice of `length` of the thread's CPU time.
    pub fn cpu(length: Duration) -> Self {
        Slice { since: Instant::now(), length, wall: false, base: None }
    }

    /// A slice of `length` of wall time from when the replayer arms it,
    /// ended to some tens of microseconds ([`WallSlice`]).
    pub fn wall(length: Duration) -> Self {
        Slice { wall: true, ..Slice::cpu(length) }
    }

    /// What is left of a CPU-time slice for thread `tid` (zero once it is
    /// over).
    fn left(&mut self, tid: Pid) -> Duration {
        let now = cpu_time(tid);
        let since = self.since;
        let (cpu, before) = *self.base.get_or_insert_with(|| (now, since.elapsed()));
        let ran = match (cpu, now) {
            (Some(cpu), Some(now)) => before + now.saturating_sub(cpu),
            _ => since.elapsed(),
        };
        self.length.saturating_sub(ran)
    }
}

/// How long the watchdog stays awake for the next short wall-time slice
/// ([`WallSlice::spin`]); a slice longer than this is napped through.
const WALL_LINGER: Duration = Duration::from_millis(2);
/// The shortest nap of the watchdog while a wall-time slice lasts.
const WALL_RESOLUTION: Duration = Duration::from_micros(20);
/// The shortest nap of the watchdog while CPU-time slices last.
const CPU_RESOLUTION: Duration = Duration::from_millis(1);

/// How long thread `tid` has run on a CPU: the first field of
/// /proc/TID/schedstat (nanoseconds; the kernel's docs,
/// scheduler/sched-stats). `None` when unreadable.
pub(crate) fn cpu_time(tid: Pid) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
    stat.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// How often the watchdog looks at the replay, when no slice ends sooner.
const TICK: Duration = Duration::from_millis(50);

impl Watchdog {
    /// Starts the watchdog thread with a limit of `limit` without progress.
    pub fn start(limit: Duration) -> Self {
        let clock: Arc<Mutex<Clock>> = Arc::default();
        let wall = Arc::new(WallSlice::new());
        let fired = Arc::new(AtomicBool::new(false));
        let (c, w, f) = (Arc::downgrade(&clock), Arc::downgrade(&wall), fired.clone());
        let (mut nap, mut short) = (TICK.min(limit), 0u32);
        let watchdog = std::thread::spawn(move || {
            // Naps end within a microsecond of their time, not the
            // default 50 (prctl(2), PR_SET_TIMERSLACK): a wall-time slice's
            // overrun is the replayed thread's.
            // SAFETY: prctl with integer arguments, on this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000, 0, 0, 0) };
            // Spinning on the replay's own CPU would keep the replayed
            // thread from running.
            let may_spin = off_the_replay_cpu();
            before_other_programs();
            loop {
                std::thread::park_timeout(nap);
                let (Some(clock), Some(wall)) = (c.upgrade(), w.upgrade()) else { return };
                if may_spin {
                    wall.spin();
                }
                let wall_left = wall.look().map(|left| left.max(WALL_RESOLUTION));
                let mut guard = match clock.try_lock() {
                    Ok(guard) => guard,
                    Err(TryLockError::Poisoned(e)) => e.into_inner(),
                    // The replayer holds it: look again soon.
                    Err(TryLockError::WouldBlock) => {
                        nap = wall_left.unwrap_or(CPU_RESOLUTION).min(CPU_RESOLUTION);
                        continue;
                    }
                };
                // Short slices (a signal search skipping hits, one after
                // the other) end on time: the watchdog looks every
                // millisecond while they last, and for 100 looks after the
                // latest.
                short = match (guard.slice, wall_left) {
                    (Some(s), _) if s.length < TICK => 100,
                    (None, Some(_)) => 100,
                    (Some(_), _) => 0,
                    (None, None) => short.saturating_sub(1),
                };
                let armed = guard.armed;
                let left = guard.slice.as_mut().zip(armed).map(|(s, tid)| s.left(tid));
                nap = if short > 0 { left.unwrap_or(Duration::ZERO).clamp(CPU_RESOLUTION, TICK) } else { TICK }.min(limit);
                nap = wall_left.map_or(nap, |w| w.min(nap));
                if let Some(tid) = guard.armed {
                    if guard.idle() >= limit && !f.swap(true, Ordering::SeqCst) {
                        stop(tid);
                    } else if left == Some(Duration::ZERO) && guard.sliced.is_none() {
                        guard.sliced = Some(tid);
                        stop(tid);
                    }
                }
            }
        });
        Self { clock, wall, thread: watchdog.thread().clone(), fired, limit }
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replay loop runs (again): its time counts from now.
    pub fn resume(&self) {
        self.clock().since.get_or_insert_with(Instant::now);
    }

    /// The replay loop stops (for a debugger): its time stops counting.
    pub fn pause(&self) {
        let mut c = self.clock();
        if let Some(s) = c.since.take() {
            c.spent += s.elapsed();
        }
    }

    /// The replay is at log position `pos` (the index of the next event
    /// to match): a new position is progress.
    pub fn progress(&self, pos: usize) {
        self.clock().progress(pos);
    }

    /// The thread the watchdog stopped at the limit computes: it is the
    /// log's next, and its registers change around its loop (spin.rs), so
    /// it reaches its event by itself. The limit starts again, unless it
    /// has [`EXTENSIONS`] times at this log position; true when it did.
    pub fn computing(&self) -> bool {
        let mut c = self.clock();
        if c.extended >= EXTENSIONS {
            return false;
        }
        c.extended += 1;
        c.spent = Duration::ZERO;
        c.since = c.since.map(|_| Instant::now());
        self.fired.store(false, Ordering::SeqCst);
        true
    }

    /// The replayer is about to wait for `tid`, which the watchdog stops
    /// at the end of `slice` if it runs that long without stopping.
    pub fn arm(&self, tid: Pid, slice: Option<Slice>) {
        let mut c = self.clock();
        c.armed = Some(tid);
        c.slice = slice.filter(|s| !s.wall);
        drop(c);
        if let Some(s) = slice.filter(|s| s.wall) {
            self.wall.arm(tid, s.length);
            // Its end is not to wait for the nap under way.
            self.thread.unpark();
        }
    }

    /// Whether the SIGSTOP thread `tid` stopped for was the watchdog's, at
    /// the end of its slice ([`Watchdog::arm`]); the stop is then taken.
    pub fn sliced(&self, tid: Pid) -> bool {
        let mut c = self.clock();
        let mine = c.sliced == Some(tid);
        if mine {
            c.sliced = None;
        }
        mine || self.wall.stopped(tid)
    }

    /// The wait is over. True if the watchdog stopped the thread.
    pub fn disarm(&self) -> bool {
        self.wall.disarm();
        let mut c = self.clock();
        c.armed = None;
        c.slice = None;
        drop(c);
        self.fired.load(Ordering::SeqCst)
    }

    /// Thread `rec` yielded at `pc` (sched_yield, a futex wait that
    /// returned at once) with the replay at log position `pos`. True when
    /// the replay has gone the limit without progress: it livelocks.
    pub fn spun(&self, rec: Tid, pc: u64, pos: usize) -> bool {
        let mut c = self.clock();
        c.progress(pos);
        let spin = c.spins.entry(rec).or_default();
        *spin = (pc, spin.1 + 1);
        c.idle() >= self.limit && !self.fired.swap(true, Ordering::SeqCst)
    }

    /// The threads that yielded since the last progress: recorded tid, pc
    /// of the latest yield, and how many times.
    pub fn spinners(&self) -> Vec<(Tid, u64, u64)> {
        self.clock().spins.iter().map(|(&t, &(pc, n))| (t, pc, n)).collect()
    }

    /// Replay time since the last progress (paused time not counted).
    pub fn idle(&self) -> Duration {
        self.clock().idle()
    }

    /// The limit, in whole seconds.
    pub fn limit_secs(&self) -> u64 {
        self.limit.as_secs()
    }
}

/// Moves the calling thread off the one CPU it is pinned to (the
/// replay's, which it inherited), when another is online: woken on the
/// CPU where the replayed thread computes, the watchdog would wait for
/// the scheduler to preempt it, up to a few milliseconds, and a short
/// slice would end that much late. True when it moved.
fn off_the_replay_cpu() -> bool {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: cpu_set_t is a plain bit set; the calls read and write the
    // sets given, of their size, for the calling thread only.
    unsafe {
        let mut pinned: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut pinned) != 0 || libc::CPU_COUNT(&pinned) != 1 {
            return false;
        }
        let mut others: libc::cpu_set_t = std::mem::zeroed();
        let online = usize::try_from(libc::sysconf(libc::_SC_NPROCESSORS_ONLN)).unwrap_or(0);
        for cpu in (0..online.min(libc::CPU_SETSIZE as usize)).filter(|&c| !libc::CPU_ISSET(c, &pinned)) {
            libc::CPU_SET(cpu, &mut others);
        }
        libc::CPU_COUNT(&others) > 0 && libc::sched_setaffinity(0, size, &others) == 0
    }
}

/// Puts the calling thread in the real-time class (sched(7), SCHED_FIFO at
/// the lowest priority) when the user may (root, or an RLIMIT_RTPRIO):
/// on a machine busy with other programs a woken watchdog otherwise waits
/// for a CPU, some milliseconds, while the replayed thread runs on past
/// its slice (a signal search's slice, measured 10 to 20 ms late with two
/// busy loops beside the replay). The thread sleeps but for a few
/// microseconds at each look.
fn before_other_programs() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sets the calling thread's policy from a valid parameter;
    // refused (EPERM) without the privilege, which changes nothing.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
}

/// Sends SIGSTOP to the one thread `tid` (tkill(2) targets a thread; the
/// tracer sees a signal-delivery-stop).
fn stop(tid: Pid) {
    // SAFETY: a plain syscall with integer arguments.
    unsafe {
        libc::syscall(libc::SYS_tkill, tid.as_raw(), libc::SIGSTOP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_time_without_progress_and_while_running_counts() {
        let w = Watchdog::start(Duration::from_millis(60));
        w.resume();
        std::thread::sleep(Duration::from_millis(40));
        w.progress(1);
        std::thread::sleep(Duration::from_millis(40));
        assert!(!w.spun(7, 0x10, 1), "progress restarted the clock");
        w.pause();
        std::thread::sleep(Duration::from_millis(80));
        w.resume();
        assert!(!w.spun(7, 0x10, 1), "paused time does not count");
        std::thread::sleep(Duration::from_millis(40));
        assert!(w.spun(7, 0x20, 1));
        assert_eq!(w.spinners(), vec![(7, 0x20, 3)]);
    }
}
