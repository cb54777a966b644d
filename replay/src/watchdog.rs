//! The livelock watchdog. On one core, a thread that spins waiting for
//! another thread (with no syscall in its loop) never reaches a scheduling
//! point, and without performance counters weft cannot preempt it at a
//! deterministic instruction. Rather than hang, the watchdog stops a thread
//! that has run longer than the limit (SIGSTOP) and the replay reports a
//! livelock.

use nix::unistd::Pid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Watches the thread the replayer is waiting for.
pub struct Watchdog {
    armed: Arc<Mutex<Option<(Pid, Instant)>>>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    /// Starts the watchdog thread with a limit of `limit`.
    pub fn start(limit: Duration) -> Self {
        let armed: Arc<Mutex<Option<(Pid, Instant)>>> = Arc::default();
        let fired = Arc::new(AtomicBool::new(false));
        let (a, f) = (Arc::downgrade(&armed), fired.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(250).min(limit));
            let Some(armed) = a.upgrade() else { return };
            let guard = armed.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((tid, since)) = *guard {
                if since.elapsed() >= limit && !f.swap(true, Ordering::SeqCst) {
                    stop(tid);
                }
            }
        });
        Self { armed, fired }
    }

    /// The replayer is about to wait for `tid`.
    pub fn arm(&self, tid: Pid) {
        *self.armed.lock().unwrap_or_else(|e| e.into_inner()) = Some((tid, Instant::now()));
    }

    /// The wait is over. True if the watchdog stopped the thread.
    pub fn disarm(&self) -> bool {
        *self.armed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.fired.load(Ordering::SeqCst)
    }
}

/// Sends SIGSTOP to the one thread `tid` (tkill(2) targets a thread; the
/// tracer sees a signal-delivery-stop).
fn stop(tid: Pid) {
    // SAFETY: a plain syscall with integer arguments.
    unsafe {
        libc::syscall(libc::SYS_tkill, tid.as_raw(), libc::SIGSTOP);
    }
}
