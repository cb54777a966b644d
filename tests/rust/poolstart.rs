//! poolstart.rs: main queues four tasks behind a `std::sync::Mutex` (whose
//! uncontended lock the log does not see), then starts four identical
//! threads that each take the first task left. Task 0 computes for a
//! while before its read; the others read at once, so the log holds the
//! younger threads' reads before the first thread's, though the first
//! thread took its task first. Each task reads a different number of
//! bytes from /dev/zero, which tells in the log which thread took which.
//! Prints the sum of what the tasks computed.
use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex};

fn main() {
    let queue: Arc<Mutex<VecDeque<u64>>> = Arc::new(Mutex::new((0..4).collect()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let task = queue.lock().unwrap().pop_front().expect("a task for each thread");
                let mut sum = 0u64;
                if task == 0 {
                    for i in 0..20_000_000u64 {
                        sum = sum.wrapping_add(i ^ (sum >> 3));
                    }
                }
                let mut buf = vec![0u8; 100 + task as usize];
                std::fs::File::open("/dev/zero").unwrap().read_exact(&mut buf).unwrap();
                (sum & 1) + task + buf.len() as u64
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    println!("total {total}");
}
