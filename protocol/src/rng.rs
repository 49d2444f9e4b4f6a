//! The one small seeded generator of the workspace: SplitMix64 (Steele, Lea & Flood 2014).
//! Its whole state is one `u64`, so checkpoints hold it in 8 bytes and a resumed run draws the
//! same numbers as an uninterrupted one; and it is ours, so tasks, sampling and minibatch
//! orders never change because a dependency's generator did. Environments, the sampler and the
//! learners all draw from it.

/// SplitMix64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The whole state (what `new` takes back to resume the stream).
    pub fn state(&self) -> u64 {
        self.0
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in [0, 1) with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform f32 in [0, 1) with 24 random bits (exactly representable).
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in `0..n` (`n` of 0 is taken as 1).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// The state as 8 little-endian bytes, for checkpoints.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    /// A generator restored from [`SplitMix64::to_bytes`]; `None` unless given exactly 8 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(Self(u64::from_le_bytes(bytes.try_into().ok()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_implementation() {
        // Vigna's splitmix64.c: seeded with 0, and with 1234567.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn state_round_trips_and_ranges_hold() {
        let mut a = SplitMix64::new(9);
        a.next_u64();
        let mut b = SplitMix64::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(SplitMix64::new(a.state()), a);
        assert!(SplitMix64::from_bytes(&[1, 2]).is_none());
        for _ in 0..1000 {
            assert!((0.0..1.0).contains(&a.unit()));
            assert!((0.0..1.0).contains(&a.unit_f32()));
            assert!(a.below(7) < 7);
        }
    }
}
