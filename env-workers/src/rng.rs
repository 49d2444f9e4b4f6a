//! The environments' generator: the workspace's SplitMix64 (`protocol::rng`), salted per
//! family, with the draws task generation needs. A task depends only on its seed and this code.

use protocol::rng::SplitMix64;

/// A salted SplitMix64 with range, pick and shuffle helpers.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator for `seed`, decorrelated per family by `salt`.
    pub fn new(seed: u64, salt: u64) -> Self {
        Self(SplitMix64::new(seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        debug_assert!(lo <= hi);
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A uniform float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0.unit()
    }

    /// Shuffles in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_stay_in_bounds_and_seeds_differ() {
        let mut r = Rng::new(7, 1);
        for _ in 0..1000 {
            let v = r.range(-3, 3);
            assert!((-3..=3).contains(&v));
        }
        assert_ne!(Rng::new(1, 1).next_u64(), Rng::new(2, 1).next_u64());
        // Salt 0 is the plain generator.
        assert_eq!(Rng::new(0, 0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
