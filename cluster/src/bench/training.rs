//! Training half of `reagent bench learner`: tokens per second of one learner update
//! (`learner::update::grpo_update`: trajectories → GRPO advantages → token batch → forward →
//! PPO loss → backward → our AdamW with gradient clipping) beside a bare tch training loop over
//! the same model and batch (forward → log-probs → policy-gradient loss → backward → tch's
//! AdamW), in the same process. The ratio is the learner's overhead.

use std::time::Instant;

use anyhow::Result;
use learner::optim::AdamW;
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::{ByteTokenizer, LoadedModel, ModelConfig};
use protocol::rng::SplitMix64;
use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, Role, RunId, ScoredTrajectory, TaskFamily, TaskSpec, Timing,
    Trajectory, TrajectoryId, Turn, Verdict,
};
use tch::nn::OptimizerConfig;
use tch::{Kind, Tensor};

/// One size's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainingRow {
    /// The built-in size.
    pub size: String,
    /// Median tokens/s of the learner's update.
    pub learner: f64,
    /// Median tokens/s of the bare tch loop.
    pub bare: f64,
}

const GROUP: usize = 8;

/// `batch` trajectories of one prompt turn and one agent turn, `tokens` ids in all, in groups of
/// 8 with rewards 0/1 so that advantages are not all zero.
pub(super) fn batch(batch: usize, tokens: usize, vocab: usize) -> Vec<ScoredTrajectory> {
    let mut rng = SplitMix64::new(1);
    let prompt_len = tokens / 4;
    (0..batch)
        .map(|i| {
            let mut ids = |n: usize| (0..n).map(|_| rng.below(vocab.min(256)) as u32).collect::<Vec<u32>>();
            let (prompt, answer) = (ids(prompt_len), ids(tokens - prompt_len));
            let n = answer.len();
            let turns = vec![
                Turn {
                    role: Role::User,
                    text: String::new(),
                    loss_mask: vec![false; prompt.len()],
                    token_ids: prompt,
                    logprobs: vec![],
                },
                Turn {
                    role: Role::Agent,
                    text: String::new(),
                    loss_mask: vec![true; n],
                    token_ids: answer,
                    logprobs: vec![-2.0; n],
                },
            ];
            ScoredTrajectory {
                trajectory: Trajectory {
                    run_id: RunId::new("bench").expect("a valid run id"),
                    id: TrajectoryId(i as u128 + 1),
                    actor_id: ActorId("bench".into()),
                    task: TaskSpec { family: TaskFamily::Math, seed: i as u64, difficulty: 1 },
                    group_id: GroupId((i / GROUP) as u128),
                    attempt: Attempt::Initial,
                    policy_version: PolicyVersion(0),
                    episode: Episode::Text(turns),
                    outcome_reward: (i % 2) as f32,
                    timing: Timing::default(),
                },
                verdict: Verdict::NotRequested,
            }
        })
        .collect()
}

fn fresh(config: &ModelConfig) -> Result<LoadedModel> {
    Ok(policy::seed::seeded(0, || LoadedModel::fresh(config, policy::device::pick(), false))?)
}

/// Measures one size: `repeats` timed updates of each kind after one warm-up each.
pub fn measure(size: &str, rows: usize, tokens: usize, repeats: usize) -> Result<TrainingRow> {
    let config = ModelConfig::builtin(size)?;
    let data = batch(rows, tokens, config.vocab_size as usize);
    let total_tokens = (rows * tokens) as f64;

    // One optimizer step over the whole batch, as the bare loop takes: the figure is the
    // learner's machinery against plain tch, not the extra proximal forward pass of a
    // multi-minibatch update (learner.minibatches > 1 adds one no-gradient forward per batch).
    let learner_cfg = LearnerConfig { lr: 1e-4, minibatches: 1, ..LearnerConfig::default() };
    let update_cfg = UpdateConfig::new(&learner_cfg, 1.0, ByteTokenizer::PAD, 0)?;
    let ours = fresh(&config)?;
    let mut opt = AdamW::from_named(ours.vs.variables(), learner_cfg.adamw_config());
    let mut learner_rates = Vec::new();
    for i in 0..=repeats {
        let start = Instant::now();
        grpo_update(Models { policy: &ours.model, reference: None }, &mut opt, &data, &update_cfg)?;
        if i > 0 {
            learner_rates.push(total_tokens / start.elapsed().as_secs_f64());
        }
    }

    let bare = fresh(&config)?;
    let mut tch_opt = tch::nn::AdamW::default().build(&bare.vs, 1e-4)?;
    let flat: Vec<i64> = data
        .iter()
        .flat_map(|s| match &s.trajectory.episode {
            Episode::Text(turns) => turns.iter().flat_map(|t| t.token_ids.iter().map(|&x| i64::from(x))).collect(),
            Episode::Control(_) => Vec::new(),
        })
        .collect();
    let ids = Tensor::from_slice(&flat).view([rows as i64, tokens as i64]).to_device(bare.model.device());
    let adv = Tensor::from_slice(&(0..rows).map(|i| if i % 2 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())
        .to_device(bare.model.device())
        .unsqueeze(1);
    // The same padding mask the learner's batch carries (all real tokens here).
    let mask = ids.ones_like();
    let mut bare_rates = Vec::new();
    for i in 0..=repeats {
        let start = Instant::now();
        let logp = bare.model.token_logprobs(&ids, Some(&mask), 1.0)?;
        let loss = -(logp * &adv).mean(Kind::Float);
        tch_opt.zero_grad();
        loss.backward();
        tch_opt.step();
        if i > 0 {
            bare_rates.push(total_tokens / start.elapsed().as_secs_f64());
        }
    }
    Ok(TrainingRow {
        size: size.into(),
        learner: super::env::median(learner_rates),
        bare: super::env::median(bare_rates),
    })
}
