//! futex(2), emulated. The replayer owns the wait queues, so which thread
//! blocks and which one a wake releases are decisions of the deterministic
//! scheduler, never of the kernel's timing (DESIGN.md, replaying). Waiters
//! are woken in FIFO order, as the kernel documents for non-PI futexes.
//!
//! Priority-inheritance futexes (futex(2) "Priority-inheritance futexes",
//! kernel Documentation/locking/pi-futex.rst) keep the owner's tid in the
//! word: FUTEX_LOCK_PI takes a free word or sets FUTEX_WAITERS and
//! blocks; FUTEX_UNLOCK_PI hands the word to the first waiter. One core
//! has no priorities to inherit, so the hand-off is FIFO too. Tids are the
//! recorded ones: the replay gives the program its recorded tids, and the
//! program writes them into the word itself on its fast paths.

/// futex(2) operations (linux/futex.h).
const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_UNLOCK_PI: u64 = 7;
const FUTEX_TRYLOCK_PI: u64 = 8;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_LOCK_PI2: u64 = 13;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const BITSET_MATCH_ANY: u32 = u32::MAX;
/// In a PI futex word: the owner's tid, and the bit that says others wait.
pub const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
const FUTEX_WAITERS: u32 = 0x8000_0000;

/// Whether futex operation `op` (the second argument) is a wait that
/// blocks while the word holds an expected value (FUTEX_WAIT,
/// FUTEX_WAIT_BITSET): one that returns EAGAIN at once found it changed.
pub fn is_wait(op: u64) -> bool {
    matches!(op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME), FUTEX_WAIT | FUTEX_WAIT_BITSET)
}

/// A thread blocked in an emulated FUTEX_WAIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// The futex word's address.
    pub uaddr: u64,
    /// The wait's bitset (FUTEX_WAIT_BITSET), all ones otherwise.
    pub bitset: u32,
    /// Whether the wait has a timeout: its outcome is then in the log.
    pub timed: bool,
    /// A FUTEX_LOCK_PI wait: the waiter's tid, which the word holds once
    /// the lock is handed to it.
    pub pi: Option<u32>,
}

/// What a futex call does in the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Return this value (a count or a negative errno) at once; the listed
    /// waiters (thread keys) are released with result 0.
    Return(i64, Vec<usize>),
    /// Block the calling thread.
    Block(Wait),
    /// An operation weft does not emulate (the requeue-PI pair).
    Unsupported(u64),
}

/// The wait queues: every blocked thread, in the order it blocked.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    waiters: Vec<(usize, Wait)>,
}

/// Access to the futex words: reads and writes of u32 tracee memory.
pub trait Words {
    /// Reads the u32 at `addr`; `None` when unmapped.
    fn read_u32(&mut self, addr: u64) -> Option<u32>;
    /// Writes the u32 at `addr`.
    fn write_u32(&mut self, addr: u64, value: u32) -> Option<()>;
}

impl Queues {
    /// Carries out `futex(args...)` called by thread `me`, whose tid (as
    /// the program knows it) is `tid`.
    pub fn call(&mut self, me: usize, tid: u32, args: &[u64; 6], words: &mut dyn Words) -> Action {
        let [uaddr, op, val, timeout, uaddr2, val3] = *args;
        let val = val as u32;
        match op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) {
            cmd @ (FUTEX_WAIT | FUTEX_WAIT_BITSET) => {
                let bitset = if cmd == FUTEX_WAIT { BITSET_MATCH_ANY } else { val3 as u32 };
                match words.read_u32(uaddr) {
                    None => Action::Return(-libc::EFAULT as i64, vec![]),
                    Some(v) if v != val => Action::Return(-libc::EAGAIN as i64, vec![]),
                    Some(_) if bitset == 0 => Action::Return(-libc::EINVAL as i64, vec![]),
                    Some(_) => {
                        let wait = Wait { uaddr, bitset, timed: timeout != 0, pi: None };
                        self.waiters.push((me, wait));
                        Action::Block(wait)
                    }
                }
            }
            FUTEX_WAKE => self.wake_result(uaddr, val, BITSET_MATCH_ANY),
            FUTEX_WAKE_BITSET => self.wake_result(uaddr, val, val3 as u32),
            cmd @ (FUTEX_REQUEUE | FUTEX_CMP_REQUEUE) => {
                if cmd == FUTEX_CMP_REQUEUE && words.read_u32(uaddr) != Some(val3 as u32) {
                    return Action::Return(-libc::EAGAIN as i64, vec![]);
                }
                let woken = self.wake(uaddr, val, BITSET_MATCH_ANY);
                // The requeue limit travels in the timeout argument.
                let moved = self.requeue(uaddr, uaddr2, timeout as u32);
                Action::Return((woken.len() + moved) as i64, woken)
            }
            FUTEX_WAKE_OP => self.wake_op(uaddr, val, timeout as u32, uaddr2, val3 as u32, words),
            cmd @ (FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | FUTEX_TRYLOCK_PI) => {
                self.lock_pi(me, tid, uaddr, cmd == FUTEX_TRYLOCK_PI, words)
            }
            FUTEX_UNLOCK_PI => self.unlock_pi(tid, uaddr, words),
            other => Action::Unsupported(other),
        }
    }

    /// Removes and returns up to `n` waiters on `uaddr` whose bitset meets
    /// `bitset`, oldest first (PI lock waiters wait for FUTEX_UNLOCK_PI).
    pub fn wake(&mut self, uaddr: u64, n: u32, bitset: u32) -> Vec<usize> {
        let mut woken = Vec::new();
        self.waiters.retain(|(t, w)| {
            let hit = woken.len() < n as usize && w.uaddr == uaddr && w.pi.is_none() && w.bitset & bitset != 0;
            if hit {
                woken.push(*t);
            }
            !hit
        });
        woken
    }

    /// Takes thread `me` out of the queue it waits in, as a signal
    /// interrupting its wait does (futex(2), EINTR).
    pub fn cancel(&mut self, me: usize) {
        self.waiters.retain(|(t, _)| *t != me);
    }

    /// FUTEX_LOCK_PI (FUTEX_TRYLOCK_PI when `try_only`): take the word if
    /// no one owns it, else mark it contended and block (EAGAIN for a
    /// trylock). EDEADLK when the caller owns it already. A timeout is
    /// not logged for these calls: the wait lasts until the hand-off.
    fn lock_pi(&mut self, me: usize, tid: u32, uaddr: u64, try_only: bool, words: &mut dyn Words) -> Action {
        let errno = |e: i32| Action::Return(-e as i64, vec![]);
        let Some(word) = words.read_u32(uaddr) else { return errno(libc::EFAULT) };
        match word & FUTEX_TID_MASK {
            0 => match words.write_u32(uaddr, tid | word & FUTEX_WAITERS) {
                Some(()) => Action::Return(0, vec![]),
                None => errno(libc::EFAULT),
            },
            owner if owner == tid => errno(libc::EDEADLK),
            _ if try_only => errno(libc::EAGAIN),
            _ => {
                if words.write_u32(uaddr, word | FUTEX_WAITERS).is_none() {
                    return errno(libc::EFAULT);
                }
                let wait = Wait { uaddr, bitset: BITSET_MATCH_ANY, timed: false, pi: Some(tid) };
                self.waiters.push((me, wait));
                Action::Block(wait)
            }
        }
    }

    /// FUTEX_UNLOCK_PI: the owner gives the word to the oldest waiter
    /// (FUTEX_WAITERS stays set if others still wait), or frees it. EPERM
    /// when the caller does not own it.
    fn unlock_pi(&mut self, tid: u32, uaddr: u64, words: &mut dyn Words) -> Action {
        let errno = |e: i32| Action::Return(-e as i64, vec![]);
        let Some(word) = words.read_u32(uaddr) else { return errno(libc::EFAULT) };
        if word & FUTEX_TID_MASK != tid {
            return errno(libc::EPERM);
        }
        let next = self.waiters.iter().position(|(_, w)| w.uaddr == uaddr && w.pi.is_some());
        let (new, woken) = match next.map(|k| self.waiters.remove(k)) {
            Some((t, w)) => {
                let more = self.waiters.iter().any(|(_, o)| o.uaddr == uaddr && o.pi.is_some());
                (w.pi.unwrap_or(0) | if more { FUTEX_WAITERS } else { 0 }, vec![t])
            }
            None => (0, vec![]),
        };
        match words.write_u32(uaddr, new) {
            Some(()) => Action::Return(0, woken),
            None => errno(libc::EFAULT),
        }
    }

    fn wake_result(&mut self, uaddr: u64, n: u32, bitset: u32) -> Action {
        if bitset == 0 {
            return Action::Return(-libc::EINVAL as i64, vec![]);
        }
        let woken = self.wake(uaddr, n, bitset);
        Action::Return(woken.len() as i64, woken)
    }

    fn requeue(&mut self, from: u64, to: u64, n: u32) -> usize {
        let mut moved = 0;
        for (_, w) in self.waiters.iter_mut() {
            if moved < n as usize && w.uaddr == from && w.pi.is_none() {
                w.uaddr = to;
                moved += 1;
            }
        }
        moved
    }

    /// FUTEX_WAKE_OP: atomically apply an operation to `*uaddr2`, wake `n`
    /// on `uaddr`, and `n2` on `uaddr2` if the old value passes a test.
    fn wake_op(&mut self, uaddr: u64, n: u32, n2: u32, uaddr2: u64, code: u32, words: &mut dyn Words) -> Action {
        let Some(old) = words.read_u32(uaddr2) else {
            return Action::Return(-libc::EFAULT as i64, vec![]);
        };
        let shift = code & (8 << 28) != 0;
        let mut oparg = (code >> 12) & 0xfff;
        if shift {
            oparg = 1u32.checked_shl(oparg).unwrap_or(0);
        }
        let new = match (code >> 28) & 7 {
            0 => oparg,
            1 => old.wrapping_add(oparg),
            2 => old | oparg,
            3 => old & !oparg,
            4 => old ^ oparg,
            _ => return Action::Return(-libc::ENOSYS as i64, vec![]),
        };
        words.write_u32(uaddr2, new);
        let cmparg = code & 0xfff;
        let pass = match (code >> 24) & 15 {
            0 => old == cmparg,
            1 => old != cmparg,
            2 => (old as i32) < cmparg as i32,
            3 => (old as i32) <= cmparg as i32,
            4 => (old as i32) > cmparg as i32,
            5 => (old as i32) >= cmparg as i32,
            _ => false,
        };
        let mut woken = self.wake(uaddr, n, BITSET_MATCH_ANY);
        if pass {
            woken.extend(self.wake(uaddr2, n2, BITSET_MATCH_ANY));
        }
        Action::Return(woken.len() as i64, woken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Mem(HashMap<u64, u32>);
    impl Words for Mem {
        fn read_u32(&mut self, a: u64) -> Option<u32> {
            self.0.get(&a).copied()
        }
        fn write_u32(&mut self, a: u64, v: u32) -> Option<()> {
            self.0.insert(a, v);
            Some(())
        }
    }

    #[test]
    fn wait_blocks_only_on_expected_value_and_wake_is_fifo() {
        let mut q = Queues::default();
        let mut m = Mem(HashMap::from([(0x10, 1)]));
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_WAIT, 2, 0, 0, 0], &mut m), Action::Return(-libc::EAGAIN as i64, vec![]));
        assert!(matches!(q.call(1, 100, &[0x10, FUTEX_WAIT, 1, 0, 0, 0], &mut m), Action::Block(_)));
        assert!(matches!(q.call(2, 100, &[0x10, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 1, 0x999, 0, 0], &mut m), Action::Block(Wait { timed: true, .. })));
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_WAKE, 1, 0, 0, 0], &mut m), Action::Return(1, vec![1]));
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_WAKE, 9, 0, 0, 0], &mut m), Action::Return(1, vec![2]));
    }

    #[test]
    fn requeue_moves_waiters() {
        let mut q = Queues::default();
        let mut m = Mem(HashMap::from([(0x10, 0), (0x20, 0)]));
        for t in 0..3 {
            q.call(t, 100, &[0x10, FUTEX_WAIT, 0, 0, 0, 0], &mut m);
        }
        assert_eq!(q.call(9, 100, &[0x10, FUTEX_CMP_REQUEUE, 1, 5, 0x20, 0], &mut m), Action::Return(3, vec![0]));
        assert_eq!(q.wake(0x20, 5, BITSET_MATCH_ANY), vec![1, 2]);
    }

    #[test]
    fn pi_lock_blocks_on_an_owned_word_and_unlock_hands_it_over_in_order() {
        let mut q = Queues::default();
        let mut m = Mem(HashMap::from([(0x10, 0)]));
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_LOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(0, vec![]));
        assert_eq!(m.0[&0x10], 100);
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_LOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(-libc::EDEADLK as i64, vec![]));
        assert_eq!(q.call(1, 101, &[0x10, FUTEX_TRYLOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(-libc::EAGAIN as i64, vec![]));
        assert!(matches!(q.call(1, 101, &[0x10, FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG, 0, 0, 0, 0], &mut m), Action::Block(Wait { pi: Some(101), .. })));
        assert!(matches!(q.call(2, 102, &[0x10, FUTEX_LOCK_PI2, 0, 0, 0, 0], &mut m), Action::Block(_)));
        assert_eq!(m.0[&0x10], 100 | FUTEX_WAITERS);
        assert_eq!(q.call(1, 101, &[0x10, FUTEX_UNLOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(-libc::EPERM as i64, vec![]));
        assert_eq!(q.call(0, 100, &[0x10, FUTEX_UNLOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(0, vec![1]));
        assert_eq!(m.0[&0x10], 101 | FUTEX_WAITERS);
        assert_eq!(q.call(1, 101, &[0x10, FUTEX_UNLOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(0, vec![2]));
        assert_eq!(m.0[&0x10], 102);
        assert_eq!(q.call(2, 102, &[0x10, FUTEX_UNLOCK_PI, 0, 0, 0, 0], &mut m), Action::Return(0, vec![]));
        assert_eq!(m.0[&0x10], 0);
    }

    #[test]
    fn requeue_pi_is_refused() {
        let mut q = Queues::default();
        let mut m = Mem(HashMap::new());
        assert_eq!(q.call(0, 100, &[0x10, 11, 0, 0, 0, 0], &mut m), Action::Unsupported(11));
    }
}
