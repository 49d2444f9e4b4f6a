//! Random number generators a resumed run can restore exactly.
//!
//! Our own generators ([`SampleRng`]) are a few bytes of state that checkpoints hold. libtorch's
//! global generator cannot be read or restored through tch, so a trainer that needs it (dropout,
//! `randn`) re-seeds it at every update from the run seed and the update index: its state is
//! then a function of the step a checkpoint records, and kill-and-resume draws the same numbers.

pub use policy::mlp::SampleRng;

/// The libtorch seed for update `step` of a run seeded with `seed` (a SplitMix64 mix of both,
/// so neighbouring steps get unrelated streams).
pub fn torch_seed_for(seed: u64, step: u64) -> i64 {
    let mut r = SampleRng::new(seed ^ step.wrapping_mul(0xD1B5_4A32_D192_ED03));
    (r.next_u64() >> 1) as i64
}

/// Re-seeds libtorch's global generator for update `step`.
pub fn reseed_torch(seed: u64, step: u64) {
    tch::manual_seed(torch_seed_for(seed, step));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reseeding_reproduces_torch_draws() {
        reseed_torch(3, 10);
        let a = tch::Tensor::randn([4], (tch::Kind::Float, tch::Device::Cpu));
        reseed_torch(3, 11);
        let b = tch::Tensor::randn([4], (tch::Kind::Float, tch::Device::Cpu));
        reseed_torch(3, 10);
        let c = tch::Tensor::randn([4], (tch::Kind::Float, tch::Device::Cpu));
        assert!(a.equal(&c) && !a.equal(&b));
        assert!(torch_seed_for(0, 0) >= 0);
    }
}
