//! producers.rs: three producer threads each send 2,000 numbers down one
//! std::sync::mpsc channel as fast as they can; the main thread receives
//! them all. The channel is lock-free: the receiver parks on its own futex
//! word when the channel is empty, and a send that finds it parked wakes
//! it. Which sends found it parked is decided by atomics no log holds; the
//! log holds only the futex calls that resulted (who woke the receiver,
//! when it parked again). Prints how many numbers came from each producer
//! and their sum, which are the same on every run.

use std::sync::mpsc;
use std::thread;

const PRODUCERS: u64 = 3;
const ITEMS: u64 = 2_000;

fn main() {
    let (tx, rx) = mpsc::channel();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|k| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..ITEMS {
                    tx.send((k, i * i % 977)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut counts = [0u64; PRODUCERS as usize];
    let mut sum = 0;
    for (k, v) in rx {
        counts[k as usize] += 1;
        sum += v;
    }
    producers.into_iter().for_each(|t| t.join().unwrap());
    println!("counts {counts:?} sum {sum}");
}
