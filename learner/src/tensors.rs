//! Trajectories as training tensors: each text trajectory flattened into one sequence, and
//! sequences right-padded into a batch whose targets are shifted by one, the layout of
//! [`policy::CausalLm::token_logprobs`].
//!
//! ```text
//!  input_ids       [B, T]     x₀ x₁ … x_{n−1} pad …
//!  attention_mask  [B, T]     1  1  …  1      0   …
//!  target_mask     [B, T−1]   m₁ m₂ …  m_{n−1} 0  …   (is x_{t+1} trained on?)
//!  behaviour_logp  [B, T−1]   l₁ l₂ …  l_{n−1} 0  …   (its behaviour log-prob)
//! ```

use protocol::wire::{Episode, Trajectory};
use tch::{Device, Kind, Tensor};

use crate::error::{LearnerError, Result};

/// One trajectory's tokens, end to end.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sequence {
    /// Every turn's ids in order.
    pub ids: Vec<u32>,
    /// `true` on trained (agent) tokens.
    pub loss_mask: Vec<bool>,
    /// The behaviour log-prob of each token (0 outside agent turns).
    pub logprobs: Vec<f32>,
}

/// The concatenation of a text trajectory's turns; a control trajectory is an error.
pub fn flatten(trajectory: &Trajectory) -> Result<Sequence> {
    let Episode::Text(turns) = &trajectory.episode else {
        return Err(LearnerError::Shape(format!("trajectory {} is not a text episode", trajectory.id)));
    };
    let mut seq = Sequence::default();
    for turn in turns {
        seq.ids.extend_from_slice(&turn.token_ids);
        seq.loss_mask.extend_from_slice(&turn.loss_mask);
        if turn.logprobs.len() == turn.token_ids.len() {
            seq.logprobs.extend_from_slice(&turn.logprobs);
        } else {
            seq.logprobs.resize(seq.ids.len(), 0.0);
        }
        if seq.loss_mask.len() != seq.ids.len() {
            return Err(LearnerError::Shape(format!(
                "trajectory {}: a {:?} turn has {} ids but {} mask entries",
                trajectory.id,
                turn.role,
                turn.token_ids.len(),
                turn.loss_mask.len()
            )));
        }
    }
    Ok(seq)
}

/// A right-padded batch of sequences (see the module header).
#[derive(Debug)]
pub struct TokenBatch {
    /// `[B, T]` int64.
    pub input_ids: Tensor,
    /// `[B, T]` bool, true on real tokens.
    pub attention_mask: Tensor,
    /// `[B, T−1]` f32, 1 where the next token is trained on.
    pub target_mask: Tensor,
    /// `[B, T−1]` f32, the next token's behaviour log-prob.
    pub behaviour_logp: Tensor,
    /// Real tokens in the batch (Σ sequence lengths).
    pub tokens: usize,
    /// Trained tokens in the batch.
    pub trained_tokens: usize,
}

impl TokenBatch {
    /// Pads `sequences` on the right with `pad` to the longest one (at least 2 tokens).
    pub fn new(sequences: &[&Sequence], pad: u32, device: Device) -> Result<Self> {
        let b = sequences.len();
        let t = sequences.iter().map(|s| s.ids.len()).max().unwrap_or(0).max(2);
        if b == 0 {
            return Err(LearnerError::Shape("a token batch needs at least one sequence".into()));
        }
        let mut ids = vec![i64::from(pad); b * t];
        let mut real = vec![false; b * t];
        let mut mask = vec![0.0f32; b * (t - 1)];
        let mut logp = vec![0.0f32; b * (t - 1)];
        let (mut tokens, mut trained) = (0, 0);
        for (r, s) in sequences.iter().enumerate() {
            let n = s.ids.len();
            if s.loss_mask.len() != n || s.logprobs.len() != n {
                return Err(LearnerError::Shape(format!(
                    "sequence {r}: {n} ids, {} mask entries, {} log-probs",
                    s.loss_mask.len(),
                    s.logprobs.len()
                )));
            }
            for (k, &id) in s.ids.iter().enumerate() {
                ids[r * t + k] = i64::from(id);
                real[r * t + k] = true;
            }
            for k in 1..n {
                if s.loss_mask[k] {
                    mask[r * (t - 1) + k - 1] = 1.0;
                    logp[r * (t - 1) + k - 1] = s.logprobs[k];
                    trained += 1;
                }
            }
            tokens += n;
        }
        let (b, t) = (b as i64, t as i64);
        Ok(Self {
            input_ids: Tensor::from_slice(&ids).view([b, t]).to_device(device),
            attention_mask: Tensor::from_slice(&real).view([b, t]).to_device(device),
            target_mask: Tensor::from_slice(&mask).view([b, t - 1]).to_device(device),
            behaviour_logp: Tensor::from_slice(&logp).view([b, t - 1]).to_device(device),
            tokens,
            trained_tokens: trained,
        })
    }

    /// Positions the batch holds, padding included (rows × longest row).
    pub fn padded_positions(&self) -> usize {
        let size = self.input_ids.size();
        (size[0] * size[1]) as usize
    }

    /// Sequences in the batch.
    pub fn rows(&self) -> i64 {
        self.input_ids.size()[0]
    }

    /// `[B, T−1]` log-probs of the next tokens under `model` at `temperature`, with gradient.
    pub fn logprobs(&self, model: &policy::CausalLm, temperature: f64) -> Result<Tensor> {
        Ok(model.token_logprobs(&self.input_ids, Some(&self.attention_mask), temperature)?)
    }

    /// The mean negative log-likelihood over trained tokens (the agent's tokens only, every one
    /// weighted alike), with gradient, through the full log-softmax: the reference that SFT's
    /// chunked loss (`sft::loss::SftLoss`) is tested and benchmarked against.
    pub fn nll(&self, model: &policy::CausalLm) -> Result<Tensor> {
        let logp = self.logprobs(model, 1.0)?;
        Ok(-(logp * &self.target_mask).sum(Kind::Float) / self.target_mask.sum(Kind::Float).clamp_min(1.0))
    }
}

#[cfg(test)]
mod tests {
    //! The training layout, and its agreement with the behaviour log-probs that generation
    //! records in episodes (the episode crate plays them; the learner recomputes them).

    use env_workers::Limits;
    use episode::{run_episodes, EpisodeTask, PolicyRef, RolloutConfig, SystemPrompt, TrajectoryMeta};
    use policy::{ByteTokenizer, LoadedModel, ModelConfig, Sampler, Tokenizer};
    use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, TaskFamily, TaskSpec, Validate};
    use tch::{Device, Kind};

    use super::*;

    fn meta() -> TrajectoryMeta {
        TrajectoryMeta {
            run_id: RunId::new("t").unwrap(),
            actor_id: ActorId("a".into()),
            policy_version: PolicyVersion(3),
        }
    }

    fn math(seed: u64, difficulty: u32) -> TaskSpec {
        TaskSpec { family: TaskFamily::Math, seed, difficulty }
    }

    fn compact() -> RolloutConfig {
        RolloutConfig {
            system_prompt: SystemPrompt::Omit,
            max_new_tokens: 12,
            limits: Limits { max_turns: 3, max_message_chars: 4096 },
            ..RolloutConfig::default()
        }
    }

    #[test]
    fn a_token_batch_shifts_targets_by_one_and_pads_on_the_right() {
        let a = Sequence {
            ids: vec![1, 2, 3, 4],
            loss_mask: vec![false, false, true, true],
            logprobs: vec![0.0, 0.0, -0.5, -0.25],
        };
        let b = Sequence { ids: vec![5, 6], loss_mask: vec![false, true], logprobs: vec![0.0, -1.0] };
        let batch = TokenBatch::new(&[&a, &b], 9, Device::Cpu).unwrap();
        assert_eq!(batch.input_ids.size(), [2, 4]);
        assert_eq!(Vec::<i64>::try_from(batch.input_ids.view([-1])).unwrap(), [1, 2, 3, 4, 5, 6, 9, 9]);
        assert_eq!(Vec::<f32>::try_from(batch.target_mask.view([-1])).unwrap(), [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(Vec::<f32>::try_from(batch.behaviour_logp.view([-1])).unwrap(), [0.0, -0.5, -0.25, -1.0, 0.0, 0.0]);
        assert_eq!((batch.tokens, batch.trained_tokens), (6, 3));
        let bad = Sequence { ids: vec![1, 2], loss_mask: vec![true], logprobs: vec![0.0, 0.0] };
        assert!(TokenBatch::new(&[&bad], 0, Device::Cpu).is_err());
    }

    #[test]
    fn batched_episodes_are_valid_trajectories_whose_logprobs_the_learner_recomputes() {
        let m = policy::seed::seeded(11, || LoadedModel::fresh(&ModelConfig::tiny(), Device::Cpu, false)).unwrap();
        let tok = ByteTokenizer;
        let policy = PolicyRef { model: &m.model, tokenizer: &tok };
        let tasks: Vec<EpisodeTask> =
            (0..5).map(|s| EpisodeTask::initial(math(s, 1 + s as u32 % 2), GroupId(u128::from(s / 2)))).collect();
        let cfg = RolloutConfig { max_batch: 3, ..compact() };
        let results = tch::no_grad(|| run_episodes(policy, &tasks, &cfg, &meta(), &mut Sampler::new(4))).unwrap();
        assert_eq!(results.len(), tasks.len());
        for (r, t) in results.iter().zip(&tasks) {
            assert_eq!((r.trajectory.task, r.trajectory.group_id), (t.spec, t.group_id), "results keep the task order");
            assert_eq!(r.trajectory.policy_version, PolicyVersion(3));
            r.trajectory.validate().unwrap();
            assert!(r.agent_messages.len() <= 3 && !r.outcome.success, "an untrained model ends at the turn limit");
        }
        // The behaviour log-probs generation recorded are what the learner recomputes at the
        // sampling temperature from the flattened, padded batch.
        let seqs: Vec<Sequence> = results.iter().map(|r| flatten(&r.trajectory).unwrap()).collect();
        let batch = TokenBatch::new(&seqs.iter().collect::<Vec<_>>(), tok.special_ids().pad, Device::Cpu).unwrap();
        let logp = tch::no_grad(|| batch.logprobs(&m.model, cfg.temperature)).unwrap();
        let diff = ((logp - &batch.behaviour_logp) * &batch.target_mask).abs().max().double_value(&[]);
        assert!(diff < 1e-3, "largest log-prob difference {diff}");
        assert!(batch.trained_tokens > 0 && batch.target_mask.sum(Kind::Float).double_value(&[]) > 0.0);
    }
}
