//! libtorch's random generator is one per process: whoever seeds it changes what every thread
//! draws next. This module holds the one lock every seeding goes through, so that a seed and
//! the draws that must follow it (a model's initial weights) are not split by another thread's
//! seed.
//!
//! ```text
//!  thread A: ── lock ── manual_seed(a) ── init weights (draws) ── unlock ──
//!  thread B:                 waits ─────────────────────────────────────── lock ── manual_seed(b) ── …
//! ```
//!
//! Draws made outside [`seeded`] (dropout during an update after [`reseed`]) are not guarded:
//! two trainers in one process that both draw from the generator interleave their draws.

use std::sync::{Mutex, PoisonError};

/// Guards libtorch's process-wide generator; taken only through [`seeded`] and [`reseed`].
static TORCH_INIT: Mutex<()> = Mutex::new(());

/// Seeds libtorch's generator with `seed` and runs `draw` under the lock, so what `draw` draws
/// is a function of `seed` however many threads seed at the same time. `draw` must not seed
/// again (the lock is not re-entrant).
pub fn seeded<T>(seed: i64, draw: impl FnOnce() -> T) -> T {
    // A panic in another thread's `draw` leaves nothing to repair: the next seeding resets the
    // generator anyway.
    let _turn = TORCH_INIT.lock().unwrap_or_else(PoisonError::into_inner);
    tch::manual_seed(seed);
    draw()
}

/// Re-seeds libtorch's generator with `seed`, waiting for any seeded initialisation in progress
/// on another thread to finish first.
pub fn reseed(seed: i64) {
    seeded(seed, || ());
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    fn draw() -> Tensor {
        Tensor::randn([8], (Kind::Float, Device::Cpu))
    }

    #[test]
    fn a_seed_fixes_the_draws_under_it_across_threads() {
        let reference = seeded(7, draw);
        let threads: Vec<_> =
            (0..4).map(|i| std::thread::spawn(move || seeded(if i % 2 == 0 { 7 } else { 8 }, draw))).collect();
        let draws: Vec<Tensor> = threads.into_iter().map(|t| t.join().expect("thread")).collect();
        for (i, d) in draws.iter().enumerate() {
            assert_eq!(d.equal(&reference), i % 2 == 0, "thread {i}");
        }
        reseed(7);
        assert!(draw().equal(&reference));
    }
}
