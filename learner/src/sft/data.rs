//! The SFT data stream: reference episodes of fresh training tasks (seeds below the held-out
//! range, difficulties drawn uniformly), flattened, and grouped into batches of similar length
//! so that little of each padded batch is padding.
//!
//! ```text
//!  draw batch_size × BUCKET_BATCHES tasks ─ reference_episode ─ flatten ─ sort by length
//!     │   (a refine_share of them: refine::refinement_example with a random flaw)
//!     ─ cut into BUCKET_BATCHES batches ─ shuffled order ─► one batch per update
//! ```

use policy::Tokenizer;
use protocol::wire::{ActorId, PolicyVersion, RunId, TaskFamily, TaskSpec};

use super::refine::{refinement_example, Flaw};
use crate::error::Result;
use crate::rng::SampleRng;
use crate::tensors::{flatten, Sequence};
use episode::{reference_episode, RolloutConfig, TrajectoryMeta, HELD_OUT_SEED_BASE};

/// Batches drawn and length-sorted together.
pub const BUCKET_BATCHES: usize = 8;

/// An endless, seeded stream of length-bucketed batches of reference sequences.
pub struct ReferenceBatches<'a> {
    refine_share: f64,
    tokenizer: &'a dyn Tokenizer,
    rollout: &'a RolloutConfig,
    family: TaskFamily,
    difficulties: &'a [u32],
    batch_size: usize,
    rng: SampleRng,
    ready: Vec<Vec<Sequence>>,
    meta: TrajectoryMeta,
}

impl<'a> ReferenceBatches<'a> {
    /// A stream of batches of `batch_size` episodes of `family` at `difficulties`, seeded.
    pub fn new(
        tokenizer: &'a dyn Tokenizer,
        rollout: &'a RolloutConfig,
        family: TaskFamily,
        difficulties: &'a [u32],
        batch_size: usize,
        seed: u64,
    ) -> Self {
        let meta = TrajectoryMeta {
            run_id: RunId::new("sft").expect("a valid run id"),
            actor_id: ActorId("sft".into()),
            policy_version: PolicyVersion(0),
        };
        let rng = SampleRng::new(seed ^ 0x5F7_0DA7A);
        Self { refine_share: 0.0, tokenizer, rollout, family, difficulties, batch_size, rng, ready: Vec::new(), meta }
    }

    /// The same stream with a `share` of refinement examples in it.
    pub fn with_refine_share(mut self, share: f64) -> Self {
        self.refine_share = share;
        self
    }

    /// The next batch.
    pub fn next_batch(&mut self) -> Result<Vec<Sequence>> {
        if self.ready.is_empty() {
            self.refill()?;
        }
        Ok(self.ready.pop().unwrap_or_default())
    }

    fn refill(&mut self) -> Result<()> {
        let n = self.batch_size.max(1) * BUCKET_BATCHES;
        let mut seqs = Vec::with_capacity(n);
        for _ in 0..n {
            let difficulty = self.difficulties[self.rng.below(self.difficulties.len())];
            let spec = TaskSpec { family: self.family, seed: self.rng.next_u64() % HELD_OUT_SEED_BASE, difficulty };
            // A uniform draw in [0, 1) against the share: 2⁻⁵³ resolution is plenty.
            if (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= self.refine_share && self.refine_share > 0.0
            {
                let flaw = Flaw::ALL[self.rng.below(Flaw::ALL.len())];
                let budget = self.rollout.max_context_tokens / 2;
                let example =
                    refinement_example(spec, flaw, &mut self.rng, self.tokenizer, self.rollout, &self.meta, budget)?;
                if let Some(seq) = example {
                    seqs.push(seq);
                    continue;
                }
            }
            seqs.push(flatten(&reference_episode(spec, self.tokenizer, self.rollout, &self.meta)?.trajectory)?);
        }
        seqs.sort_by_key(|s| s.ids.len());
        let mut batches: Vec<Vec<Sequence>> = Vec::with_capacity(BUCKET_BATCHES);
        while !seqs.is_empty() {
            let rest = seqs.split_off(self.batch_size.min(seqs.len()));
            batches.push(std::mem::replace(&mut seqs, rest));
        }
        // Fisher–Yates, so that long and short batches alternate at random.
        for i in (1..batches.len()).rev() {
            batches.swap(i, self.rng.below(i + 1));
        }
        self.ready = batches;
        Ok(())
    }
}
