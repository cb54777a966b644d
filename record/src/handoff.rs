//! The hand-off from the recorder's thread to the trace writer's thread: a
//! queue that wakes the writer only when there is work worth a wake-up.
//!
//! An mpsc channel wakes a waiting receiver on every send. With one message
//! per event logged at a ptrace stop, the writer woke once per event: two
//! context switches and, with the recorder and the writer on different
//! CPUs, a cross-CPU wake-up, which cost more than the stop itself (a
//! program reading the TSC in a loop recorded at 85 µs per rdtsc, half of
//! it the writer's wake-ups). The writer now polls: it takes whatever has
//! accumulated at a fixed interval, and is woken at once only for a
//! batch's worth of entries, a record that needs a frame of its own, a
//! flush, or the end.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A queue of `T` between one sending thread and one receiving thread.
pub struct Handoff<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    /// Queued bytes that wake the receiver.
    wake_at: usize,
}

struct State<T> {
    items: VecDeque<T>,
    /// Bytes queued since the receiver last took the items.
    bytes: usize,
    /// The sender hung up: nothing more will come.
    closed: bool,
    /// The receiver stopped: nothing more will be taken.
    stopped: bool,
}

impl<T> Handoff<T> {
    /// An empty, open queue whose receiver is woken once `wake_at` bytes
    /// are queued.
    pub fn new(wake_at: usize) -> Self {
        let state = State { items: VecDeque::new(), bytes: 0, closed: false, stopped: false };
        Self { state: Mutex::new(state), ready: Condvar::new(), wake_at }
    }

    /// Queues `item`, of `bytes` bytes, and wakes the receiver when `urgent`
    /// or when enough bytes are queued. Returns false, and drops the item,
    /// once the receiver has stopped.
    pub fn push(&self, item: T, bytes: usize, urgent: bool) -> bool {
        let mut state = self.lock();
        if state.stopped {
            return false;
        }
        state.items.push_back(item);
        state.bytes += bytes;
        let wake = urgent || state.bytes >= self.wake_at;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        true
    }

    /// Hangs up the sender's side: the receiver takes what is left, then
    /// learns that the queue is closed.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
    }

    /// Moves every queued item to the end of `into`, waiting up to
    /// `timeout` for one when none is queued. Returns false when the
    /// sender has hung up and nothing was left to take.
    pub fn take(&self, into: &mut VecDeque<T>, timeout: Duration) -> bool {
        let mut state = self.lock();
        if state.items.is_empty() && !state.closed {
            state = self.ready.wait_timeout(state, timeout).map_or_else(|e| e.into_inner().0, |(s, _)| s);
        }
        state.bytes = 0;
        let taken = !state.items.is_empty();
        into.append(&mut state.items);
        taken || !state.closed
    }

    /// A guard that marks the receiver stopped when dropped: when it
    /// returns, on an error, or panics.
    pub fn receiving(&self) -> Receiving<'_, T> {
        Receiving(self)
    }

    /// Marks the receiver stopped: later pushes fail.
    pub fn stop(&self) {
        let mut state = self.lock();
        state.stopped = true;
        state.items.clear();
    }

    /// The state, even if a thread panicked while holding it: every update
    /// above leaves it consistent.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The receiver's side, from [`Handoff::receiving`]: stops the queue when
/// dropped.
pub struct Receiving<'a, T>(&'a Handoff<T>);

impl<T> Drop for Receiving<'_, T> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// Runs `receive` on a thread of its own with a handle on `q`.
    fn on_receiver<R: Send + 'static>(q: &Arc<Handoff<i32>>, receive: impl FnOnce(&Handoff<i32>) -> R + Send + 'static) -> std::thread::JoinHandle<R> {
        let q = Arc::clone(q);
        std::thread::spawn(move || receive(&q))
    }

    #[test]
    fn the_receiver_takes_everything_in_order_then_learns_the_end() {
        let q = Handoff::new(100);
        for i in 0..5 {
            assert!(q.push(i, 1, false));
        }
        q.close();
        let mut got = VecDeque::new();
        assert!(q.take(&mut got, Duration::from_secs(5)));
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(!q.take(&mut got, Duration::from_secs(5)));
    }

    #[test]
    fn a_quiet_push_waits_for_the_poll_and_an_urgent_one_wakes_the_receiver() {
        let q = Arc::new(Handoff::new(100));
        let receiver = on_receiver(&q, |q| {
            let mut got = VecDeque::new();
            let start = Instant::now();
            // A spurious wake-up may return the first item alone.
            while got.len() < 2 && q.take(&mut got, Duration::from_secs(30)) {}
            (got, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(q.push(1, 10, false));
        assert!(q.push(2, 10, true));
        let (got, waited) = receiver.join().unwrap();
        assert_eq!(got, [1, 2]);
        assert!(waited < Duration::from_secs(30), "the urgent push did not wake the receiver");
    }

    #[test]
    fn pushes_fail_once_the_receiver_stopped() {
        let q = Handoff::new(100);
        assert!(q.push(1, 1, false));
        q.stop();
        assert!(!q.push(2, 1, false));
    }

    #[test]
    fn a_receiver_that_panics_stops_the_queue() {
        let q = Arc::new(Handoff::new(100));
        let receiver = on_receiver(&q, |q| {
            let _receiving = q.receiving();
            panic!("the receiver failed");
        });
        assert!(receiver.join().is_err());
        assert!(!q.push(1, 1, false));
    }
}
