//! parkflag.rs: a flag passed through an atomic and thread::park, as
//! channels and once-cells pass theirs. The worker sets the flag to 42 and
//! unparks the main thread at once, then computes for a while; the main
//! thread computes for a shorter while, then parks until the flag is set.
//! In the recording the flag is set long before the main thread looks, so
//! it does not park and the worker's unpark wakes nobody: no futex call
//! is logged there. Then the worker sets 43 after its computation, which
//! the main thread, done sooner, really waits for: the main thread's
//! parker word is one the log orders. Prints the flag twice and whether
//! both sums are in range.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

/// `rounds` rounds of arithmetic (about a nanosecond each) and no
/// syscall, so that nothing is logged while it runs.
fn compute(rounds: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..rounds {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x % 1_000
}

fn main() {
    let flag = Arc::new(AtomicU64::new(0));
    let main_thread = thread::current();
    let worker = {
        let flag = Arc::clone(&flag);
        thread::spawn(move || {
            flag.store(42, Ordering::Release);
            main_thread.unpark();
            let sum = compute(60_000_000);
            flag.store(43, Ordering::Release);
            main_thread.unpark();
            sum
        })
    };
    let mine = compute(20_000_000);
    while flag.load(Ordering::Acquire) == 0 {
        thread::park();
    }
    println!("flag {}", flag.load(Ordering::Acquire));
    while flag.load(Ordering::Acquire) == 42 {
        thread::park();
    }
    println!("flag {}", flag.load(Ordering::Acquire));
    let theirs = worker.join().unwrap();
    println!("sums {} {}", mine < 1_000, theirs < 1_000);
}
