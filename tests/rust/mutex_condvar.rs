//! mutex_condvar.rs: std::sync::Mutex + Condvar bounded queue (8 slots)
//! between 4 threads, 2 producers and 2 consumers, 20,000 items in all.
//! Rust's std locks with futex(2) directly, without libc's pthread calls.
//! Prints the sum of the items (always 200010000) and how many each
//! consumer took (which differs from run to run: a replay must reproduce
//! the recorded split).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

const ITEMS: u64 = 20_000;
const PRODUCERS: u64 = 2;
const SLOTS: usize = 8;

/// The queue's state: items waiting, and whether the producers are done.
#[derive(Default)]
struct State {
    items: VecDeque<u64>,
    closed: bool,
}

/// A bounded queue: one mutex, a condvar for each direction.
#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    not_full: Condvar,
    not_empty: Condvar,
}

impl Queue {
    fn push(&self, item: u64) {
        let mut s = self.not_full.wait_while(self.state.lock().unwrap(), |s| s.items.len() >= SLOTS).unwrap();
        s.items.push_back(item);
        self.not_empty.notify_one();
    }

    /// An item, or None once the producers are done and the queue is empty.
    fn pop(&self) -> Option<u64> {
        let mut s = self.not_empty.wait_while(self.state.lock().unwrap(), |s| s.items.is_empty() && !s.closed).unwrap();
        let item = s.items.pop_front();
        self.not_full.notify_one();
        item
    }

    fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.not_empty.notify_all();
    }
}

fn main() {
    let queue = Arc::new(Queue::default());
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let q = Arc::clone(&queue);
            thread::spawn(move || {
                let (mut sum, mut taken) = (0u64, 0u64);
                while let Some(item) = q.pop() {
                    sum += item;
                    taken += 1;
                }
                (sum, taken)
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = Arc::clone(&queue);
            thread::spawn(move || (1..=ITEMS / PRODUCERS).for_each(|i| q.push(p * (ITEMS / PRODUCERS) + i)))
        })
        .collect();
    producers.into_iter().for_each(|t| t.join().unwrap());
    queue.close();
    let results: Vec<(u64, u64)> = consumers.into_iter().map(|t| t.join().unwrap()).collect();
    let sum: u64 = results.iter().map(|r| r.0).sum();
    println!("sum {sum} taken {} {}", results[0].1, results[1].1);
}
