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

/// Re-seeds libtorch's global generator for update `step`, under [`policy::seed`]'s lock (it
/// waits for a seeded initialisation on another thread to finish).
pub fn reseed_torch(seed: u64, step: u64) {
    policy::seed::reseed(torch_seed_for(seed, step));
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
    }

    /// The seed of a step is part of what a checkpoint restores: a build that changed the mix
    /// would resume old runs with other draws. Pinned against SplitMix64's reference output
    /// (seeded with 0, its first value is 0xE220A8397B1DCDAF; the seed keeps its top 63 bits).
    #[test]
    fn step_seeds_are_pinned_and_differ_by_run_and_step() {
        assert_eq!(torch_seed_for(0, 0), 0x7110_541C_BD8E_E6D7);
        assert_eq!(torch_seed_for(0, 0), (SampleRng::new(0).next_u64() >> 1) as i64);
        let seeds: std::collections::HashSet<i64> =
            (0..4).flat_map(|run| (0..256).map(move |step| torch_seed_for(run, step))).collect();
        assert_eq!(seeds.len(), 4 * 256, "every (run, step) gets a seed of its own");
        // All 63 bits are used: about half the seeds have their top bit (62) set.
        let high = seeds.iter().filter(|&&s| s >> 62 == 1).count();
        assert!((384..=640).contains(&high), "{high} of 1024 seeds have bit 62 set");
    }
}
