//! SFT's objective: the mean negative log-likelihood of the agent's tokens, every trained
//! token weighted alike, computed from the chunked LM head ([`policy::head`]) as the RL loss
//! is, so that no `[B, T, vocab]` logits tensor (nor autograd's copy of every chunk of it) is
//! held during the update.
//!
//! ```text
//!  TokenBatch ─ CausalLm::token_scores ─ logp [B, T−1] (leaf) ─ −Σ mask·logp / Σ mask ─ loss
//!  backward:  loss.backward()  (∂loss/∂logp on the leaf)
//!             scores.backward() (each head chunk recomputed with gradient, then the transformer)
//! ```

use policy::{CausalLm, TokenScores};
use tch::{Kind, Tensor};

use crate::error::Result;
use crate::tensors::TokenBatch;

/// One batch's SFT loss and what its two-phase backward needs.
#[derive(Debug)]
pub struct SftLoss {
    /// The mean NLL over trained tokens (nats per token), a scalar with gradient.
    pub loss: Tensor,
    scores: TokenScores,
}

impl SftLoss {
    /// The loss of `batch` under `model`, with the head in its default chunks.
    pub fn new(model: &CausalLm, batch: &TokenBatch) -> Result<Self> {
        let scores = model.token_scores(&batch.input_ids, Some(&batch.attention_mask), 1.0, false)?;
        Ok(Self::from_scores(scores, batch))
    }

    /// [`SftLoss::new`] with `chunk` positions per head chunk (tests force small ones).
    pub fn in_chunks(model: &CausalLm, batch: &TokenBatch, chunk: i64) -> Result<Self> {
        let scores = model.token_scores_in_chunks(&batch.input_ids, Some(&batch.attention_mask), 1.0, false, chunk)?;
        Ok(Self::from_scores(scores, batch))
    }

    fn from_scores(scores: TokenScores, batch: &TokenBatch) -> Self {
        let mask = &batch.target_mask;
        let loss = -(&scores.logp * mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0);
        Self { loss, scores }
    }

    /// Accumulates the loss's gradient into the model's parameters (both phases).
    pub fn backward(&self) -> Result<()> {
        self.loss.f_backward()?;
        Ok(self.scores.backward()?)
    }

    /// The loss as a number.
    pub fn value(&self) -> f64 {
        self.loss.double_value(&[])
    }
}

#[cfg(test)]
mod tests {
    //! The chunked loss against the previous path ([`TokenBatch::nll`]: the head with gradient,
    //! autograd keeping every chunk's logits): same loss, same gradients.

    use episode::{reference_episode, RolloutConfig, TrajectoryMeta};
    use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
    use protocol::wire::{ActorId, PolicyVersion, RunId, TaskFamily, TaskSpec};
    use tch::Device;

    use super::*;
    use crate::tensors::{flatten, Sequence};

    fn sequences() -> Vec<Sequence> {
        let meta = TrajectoryMeta {
            run_id: RunId::new("t").unwrap(),
            actor_id: ActorId("a".into()),
            policy_version: PolicyVersion(0),
        };
        let cfg = RolloutConfig::default();
        (0..3)
            .map(|seed| {
                let spec = TaskSpec { family: TaskFamily::Math, seed, difficulty: 1 + seed as u32 };
                flatten(&reference_episode(spec, &ByteTokenizer, &cfg, &meta).unwrap().trajectory).unwrap()
            })
            .collect()
    }

    /// Every parameter's gradient, by name, after `backward`; then zeroed.
    fn take_grads(m: &LoadedModel) -> Vec<(String, Tensor)> {
        let mut out: Vec<(String, Tensor)> =
            m.vs.variables()
                .into_iter()
                .map(|(name, mut t)| {
                    let g = t.grad();
                    let copy = if g.defined() { g.copy() } else { t.zeros_like() };
                    t.zero_grad();
                    (name, copy)
                })
                .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn the_chunked_loss_matches_the_unchunked_one_in_value_and_gradient() {
        let m = policy::seed::seeded(3, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
        let seqs = sequences();
        let refs: Vec<&Sequence> = seqs.iter().collect();
        let batch = TokenBatch::new(&refs, ByteTokenizer.special_ids().pad, Device::Cpu).unwrap();
        assert!(batch.trained_tokens > 10 && batch.trained_tokens < batch.tokens, "some tokens are not trained");

        let before = batch.nll(&m.model).unwrap();
        before.backward();
        let want = take_grads(&m);
        // 7 positions per chunk: the recomputing backward runs over many chunks, the last
        // one short. The default chunk holds this whole batch: the head runs once.
        let positions = batch.input_ids.size()[0] * (batch.input_ids.size()[1] - 1);
        for (chunk, recomputed) in [(7, true), (i64::MAX, false)] {
            assert_eq!(recomputed, positions > chunk);
            let loss = if chunk == i64::MAX {
                SftLoss::new(&m.model, &batch).unwrap()
            } else {
                SftLoss::in_chunks(&m.model, &batch, chunk).unwrap()
            };
            assert!((loss.value() - before.double_value(&[])).abs() < 1e-5, "chunk {chunk}");
            loss.backward().unwrap();
            let got = take_grads(&m);
            assert_eq!(got.len(), want.len());
            let mut nonzero = 0;
            for ((name, g), (_, w)) in got.iter().zip(&want) {
                let diff = (g - w).abs().max().double_value(&[]);
                assert!(diff < 1e-5, "chunk {chunk}: {name} differs by {diff}");
                nonzero += usize::from(w.abs().sum(Kind::Float).double_value(&[]) > 0.0);
            }
            assert!(nonzero > got.len() / 2, "the gradients reach most parameters ({nonzero} of {})", got.len());
        }
    }

    #[test]
    fn a_batch_without_trained_tokens_has_zero_loss_and_no_gradient() {
        let m = policy::seed::seeded(4, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
        let seq = Sequence { ids: vec![5, 6, 7, 8], loss_mask: vec![false; 4], logprobs: vec![0.0; 4] };
        let batch = TokenBatch::new(&[&seq], ByteTokenizer.special_ids().pad, Device::Cpu).unwrap();
        let loss = SftLoss::in_chunks(&m.model, &batch, 2).unwrap();
        assert_eq!(loss.value(), 0.0);
        loss.backward().unwrap();
        for (name, g) in take_grads(&m) {
            assert_eq!(g.abs().sum(Kind::Float).double_value(&[]), 0.0, "{name}");
        }
    }
}
