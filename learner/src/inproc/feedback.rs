//! The feedback modes in the in-process trainer, exactly as the distributed roles run them but
//! synchronous: the environments' reference judge stands in for the RRM worker, and refined
//! attempts are played in lockstep after the initial ones (what the actors do through the
//! critique-reply channel). Rewards and grouping then go through the one update path
//! ([`crate::update::grpo_update`]: `reward::rewards` by mode, `advantage::group_key`).
//!
//! ```text
//!  initial attempts ─┬─ outcome:  Verdict::NotRequested
//!                    └─ critique, score, unified: reference judge ─► Verdict::Judged
//!  critique, unified: refined attempt of every initial one ─► judged too (its score counts in unified)
//! ```

use env_workers::judge::judge_messages;
use episode::{play_refinements, EpisodeResult, PolicyRef, RolloutConfig, TrajectoryMeta};
use policy::Sampler;
use protocol::wire::{FeedbackMode, ScoredTrajectory, Verdict};

use crate::error::Result;

/// The reference judge's verdict on `e` in `mode` (`NotRequested` in `outcome`), the critique
/// not revealing the outcome unless `reveal_outcome`.
pub fn verdict(e: &EpisodeResult, mode: FeedbackMode, reveal_outcome: bool) -> Result<Verdict> {
    if mode == FeedbackMode::Outcome {
        return Ok(Verdict::NotRequested);
    }
    let j =
        judge_messages(e.trajectory.task, &e.agent_messages, reveal_outcome).map_err(episode::EpisodeError::from)?;
    Ok(Verdict::Judged(j))
}

/// The initial attempts judged, and in refining modes their refined attempts played (from
/// each critique) and judged: every trajectory of the iteration as the learner takes it, initial
/// ones first; the refined episodes are returned too.
pub fn score_iteration(
    policy: PolicyRef<'_>,
    initial: Vec<EpisodeResult>,
    mode: FeedbackMode,
    reveal_outcome: bool,
    rollout: &RolloutConfig,
    meta: &TrajectoryMeta,
    sampler: &mut Sampler,
) -> Result<(Vec<ScoredTrajectory>, Vec<EpisodeResult>)> {
    let verdicts = initial.iter().map(|e| verdict(e, mode, reveal_outcome)).collect::<Result<Vec<_>>>()?;
    let refined = if mode.refines() {
        let critiques: Vec<String> = verdicts
            .iter()
            .map(|v| match v {
                Verdict::Judged(j) => j.critique.clone(),
                _ => String::new(),
            })
            .collect();
        let firsts: Vec<&EpisodeResult> = initial.iter().collect();
        tch::no_grad(|| play_refinements(policy, &firsts, &critiques, rollout, meta, sampler))?
    } else {
        Vec::new()
    };
    let mut scored: Vec<ScoredTrajectory> = initial
        .into_iter()
        .zip(verdicts)
        .map(|(e, verdict)| ScoredTrajectory { trajectory: e.trajectory, verdict })
        .collect();
    for e in &refined {
        scored.push(ScoredTrajectory { trajectory: e.trajectory.clone(), verdict: verdict(e, mode, reveal_outcome)? });
    }
    Ok((scored, refined))
}
