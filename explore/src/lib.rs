//! weft's schedule search: when a single-core replay fails, find the
//! preemptions that make it reproduce every logged event (seed 000 §4).
//!
//! Data flow: [`search`] runs a replay (`weft-replay`); on a failure it
//! takes the inconsistent event α_x and the replay's synchronization trace,
//! computes the exploration window (`window.rs`, §4.1), lists the
//! coarse-grained preemptions Algorithm 1 tries (`coarse.rs`, §4.2), and
//! replays with each until one gets past α_x; that preemption is admitted
//! to the schedule and the search goes on from the next failure, taking
//! admitted preemptions back when a later failure cannot be passed. A
//! failure that looks like one passed before first tries the preemption
//! that passed it (`cache.rs`, §5). Start with `search.rs`.
//!
//! When nothing coarse gets past a failure, fine-grained exploration
//! (`fine.rs`, §4.3) traces the window's memory accesses by page
//! protection and reverses its races.
//!
//! Attempts resume from the replayer's checkpoints (`weft_replay::Replayer`)
//! instead of starting the program again.

mod cache;
mod coarse;
mod fine;
mod search;
mod window;

pub use search::{search, ExploreOptions, Exploration};
pub use window::{ThreadEvents, Window};
