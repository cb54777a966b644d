//! Futex words that moved: the replay's address of a futex word the log
//! names at another address.
//!
//! A heap block's address depends on which thread freed the blocks before
//! it (glibc gives a freed block to the freeing thread's cache), and which
//! thread drops the last reference to a shared object is an atomic
//! decrement no log holds. So a replay can allocate a future's shared
//! state (libstdc++'s `std::async`, a thread pool's `packaged_task`) at
//! another address than the recording did, and its futex calls name a
//! word the log never saw. The runtime's markers are matched by operation
//! and value, not address; a wait's start on an unknown word that matches
//! its thread's next event binds the two addresses, and the later calls
//! on either side go by the binding.

use std::collections::HashMap;

/// The bindings of one replay, per process (index in the tree).
#[derive(Debug, Clone, Default)]
pub(crate) struct WordAliases {
    /// (process, replay address) → log address.
    to_log: HashMap<(usize, u64), u64>,
    /// (process, log address) → replay address.
    to_replay: HashMap<(usize, u64), u64>,
}

impl WordAliases {
    /// The log's address of process `proc`'s futex word at `word`.
    pub(crate) fn log_word(&self, proc: usize, word: u64) -> u64 {
        self.to_log.get(&(proc, word)).copied().unwrap_or(word)
    }

    /// The replay's address of the word the log names `word` in `proc`.
    pub(crate) fn replay_word(&self, proc: usize, word: u64) -> u64 {
        self.to_replay.get(&(proc, word)).copied().unwrap_or(word)
    }

    /// Whether either address already has a binding in `proc`.
    pub(crate) fn bound(&self, proc: usize, replay: u64, log: u64) -> bool {
        self.to_log.contains_key(&(proc, replay)) || self.to_replay.contains_key(&(proc, log))
    }

    /// Binds replay address `replay` to log address `log` in `proc`.
    pub(crate) fn bind(&mut self, proc: usize, replay: u64, log: u64) {
        self.to_log.insert((proc, replay), log);
        self.to_replay.insert((proc, log), replay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_maps_both_ways_in_its_process_only() {
        let mut a = WordAliases::default();
        assert_eq!(a.log_word(0, 0x10), 0x10);
        a.bind(0, 0x10, 0x20);
        assert_eq!((a.log_word(0, 0x10), a.replay_word(0, 0x20)), (0x20, 0x10));
        assert!(a.bound(0, 0x10, 0x99) && a.bound(0, 0x98, 0x20) && !a.bound(1, 0x10, 0x20));
        assert_eq!(a.log_word(1, 0x10), 0x10);
    }
}
