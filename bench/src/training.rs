//! Training half of `reagent bench learner`: tokens per second of one learner update
//! (`learner::update::grpo_update`: trajectories → GRPO advantages → token batch → forward →
//! PPO loss → backward → our AdamW with gradient clipping) beside a bare tch training loop over
//! the same model and batch (forward → log-probs → policy-gradient loss → backward → tch's
//! AdamW), in the same process. The ratio is the learner's overhead.

use std::time::Instant;

use anyhow::{Context, Result};
use learner::optim::AdamW;
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::ByteTokenizer;
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
    /// The built-in size, or the model directory.
    pub size: String,
    /// Parameters of the model.
    pub parameters: i64,
    /// Median tokens/s of the learner's update.
    pub learner: f64,
    /// Median tokens/s of the bare tch loop.
    pub bare: f64,
    /// Peak resident memory of the process during the learner's updates (model, fp32 masters
    /// and AdamW moments, activations), in MiB.
    pub learner_peak_mib: f64,
    /// The same during the bare loop's updates (the learner's model and optimizer dropped
    /// before), in MiB.
    pub bare_peak_mib: f64,
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

/// The peak resident memory since the last reset, in MiB, then resets it (Linux's VmHWM).
fn peak_mib_and_reset() -> Result<f64> {
    let peak = super::learner_memory::status_bytes("VmHWM")? as f64 / (1 << 20) as f64;
    std::fs::write("/proc/self/clear_refs", "5").context("cannot reset VmHWM via /proc/self/clear_refs")?;
    Ok(peak)
}

/// Measures one size (or model directory): `repeats` timed updates of each kind after one
/// warm-up each.
pub fn measure(size: &str, rows: usize, tokens: usize, repeats: usize) -> Result<TrainingRow> {
    let ours = learner::role::load_model(size, 0)?;
    let config = ours.model.config().clone();
    let parameters = ours.vs.variables().values().map(|t| t.numel() as i64).sum();
    let data = batch(rows, tokens, config.vocab_size as usize);
    let total_tokens = (rows * tokens) as f64;

    // One optimizer step over the whole batch, as the bare loop takes: the figure is the
    // learner's machinery against plain tch, not the extra proximal forward pass of a
    // multi-minibatch update (learner.minibatches > 1 adds one no-gradient forward per batch).
    let learner_cfg = LearnerConfig { lr: 1e-4, minibatches: 1, ..LearnerConfig::default() };
    let update_cfg = UpdateConfig::new(&learner_cfg, 1.0, ByteTokenizer::PAD, 0)?;
    let mut opt = AdamW::from_named(ours.vs.variables(), learner_cfg.adamw_config());
    peak_mib_and_reset()?;
    let mut learner_rates = Vec::new();
    for i in 0..=repeats {
        let start = Instant::now();
        grpo_update(Models { policy: &ours.model, reference: None }, &mut opt, &data, &update_cfg)?;
        if i > 0 {
            learner_rates.push(total_tokens / crate::elapsed_on(ours.model.device(), start).as_secs_f64());
        }
    }

    let learner_peak_mib = peak_mib_and_reset()?;
    drop((opt, ours));
    peak_mib_and_reset()?;
    let bare = learner::role::load_model(size, 0)?;
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
            bare_rates.push(total_tokens / crate::elapsed_on(bare.model.device(), start).as_secs_f64());
        }
    }
    let bare_peak_mib = peak_mib_and_reset()?;
    Ok(TrainingRow {
        size: size.into(),
        parameters,
        learner: super::env::median(learner_rates),
        bare: super::env::median(bare_rates),
        learner_peak_mib,
        bare_peak_mib,
    })
}
