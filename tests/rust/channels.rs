//! channels.rs: three sender threads and the main thread as receiver on a
//! std::sync::mpsc channel, with an RwLock-guarded total beside it.
//! std's channel is lock-free (atomics) and parks the receiver with
//! futex(2); a sender's last act is to drop its end, and the last one to
//! do so wakes the receiver. Each sender sends a message every 50 of its
//! 2,000 rounds and reads the time in every round. Prints how many
//! messages arrived from each sender and the total.

use std::sync::{mpsc, Arc, RwLock};
use std::thread;

const SENDERS: usize = 3;
const ROUNDS: u64 = 2_000;

fn main() {
    let (tx, rx) = mpsc::channel();
    let total = Arc::new(RwLock::new(0u64));
    let senders: Vec<_> = (0..SENDERS)
        .map(|k| {
            let (tx, total) = (tx.clone(), Arc::clone(&total));
            thread::spawn(move || {
                for i in 0..ROUNDS {
                    if i % 3 == 0 {
                        *total.write().unwrap() += i;
                    } else {
                        let _ = *total.read().unwrap();
                    }
                    if i % 50 == 0 {
                        tx.send(k).unwrap();
                    }
                    let _ = std::time::SystemTime::now();
                }
            })
        })
        .collect();
    drop(tx);
    let mut messages = [0; SENDERS];
    for k in rx {
        messages[k] += 1;
    }
    senders.into_iter().for_each(|t| t.join().unwrap());
    println!("messages {messages:?} total {}", *total.read().unwrap());
}
