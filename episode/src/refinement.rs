//! Critique-guided refinement in lockstep (Reagent-C and -U without Redis): each first attempt
//! is judged by the environments' reference judge, and a refined attempt is played from the
//! start the rollout actors build ([`refined_start`] in the layout `config.refine_from` names,
//! half the context for a `start` transcript), for the first attempts `config.refine` selects.
//! Used by the in-process trainer and by the held-out check of the critique channel ([`evaluate_refinement`]: the paper's Reagent-C
//! figure, refined success against initial success on the same tasks).
//!
//! ```text
//!  initial attempts ─ judge_messages ─► critiques ─ refined_start ─► run_episodes_from ─► refined attempts
//! ```

use env_workers::judge::judge_messages;
use env_workers::{registry, Environment};
use policy::Sampler;
use protocol::wire::{ActorId, Attempt, GroupId, PolicyVersion, RunId, TaskSpec};
use serde::Serialize;

use crate::error::{EpisodeError, Result};
use crate::{
    refined_start, run_episodes, run_episodes_from, EpisodeResult, EpisodeTask, PolicyRef, RefineWhich, RolloutConfig,
    TrajectoryMeta,
};

/// The reference judge's critique of a played attempt (`reveal_outcome`: whether it may say if
/// the task was solved).
pub fn critique_of(result: &EpisodeResult, reveal_outcome: bool) -> Result<String> {
    Ok(judge_messages(result.trajectory.task, &result.agent_messages, reveal_outcome)?.critique)
}

/// Plays a refined attempt of each `firsts[i]` (with critique `critiques[i]`) that
/// `config.refine` selects ([`RefineWhich::refines`]: every one, or the failed ones), in lockstep
/// batches and in order; each keeps its first attempt's group and names it as its parent.
pub fn play_refinements(
    policy: PolicyRef<'_>,
    firsts: &[&EpisodeResult],
    critiques: &[String],
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
    sampler: &mut Sampler,
) -> Result<Vec<EpisodeResult>> {
    let budget = config.context_limit(policy.model) / 2;
    let mut tasks = Vec::with_capacity(firsts.len());
    let mut prompts = Vec::with_capacity(firsts.len());
    for (first, critique) in firsts.iter().zip(critiques).filter(|(f, _)| config.refine.refines(&f.trajectory)) {
        let t = &first.trajectory;
        let env = registry::make(t.task, config.limits).map_err(EpisodeError::from)?;
        prompts.push(Some(refined_start(env.prompt(), t, critique, config.refine_from, policy.tokenizer, budget)?));
        tasks.push(EpisodeTask { spec: t.task, group_id: t.group_id, attempt: Attempt::Refined { of: t.id } });
    }
    run_episodes_from(policy, &tasks, &prompts, config, meta, sampler)
}

/// The critique channel measured on held-out tasks: success of the first attempt, and of the
/// refined attempt after the reference judge's critique, on the same tasks and draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RefinementReport {
    /// Attempts of each kind.
    pub episodes: usize,
    /// Success rate of the first attempts.
    pub initial_success: f64,
    /// Success rate of the refined attempts.
    pub refined_success: f64,
    /// Of the first attempts that failed, the share whose refined attempt succeeded.
    pub fixed_share: f64,
    /// Of the first attempts that succeeded, the share whose refined attempt failed.
    pub broken_share: f64,
}

/// Plays each task `samples` times at `config`'s temperature (sampler seeded with `seed`), then
/// a refined attempt of every one of them (whatever `config.refine` says), and compares the two (see [`RefinementReport`]).
pub fn evaluate_refinement(
    policy: PolicyRef<'_>,
    specs: &[TaskSpec],
    samples: usize,
    config: &RolloutConfig,
    seed: u64,
    reveal_outcome: bool,
) -> Result<RefinementReport> {
    let tasks: Vec<EpisodeTask> = specs
        .iter()
        .enumerate()
        .flat_map(|(i, s)| std::iter::repeat_n(EpisodeTask::initial(*s, GroupId(i as u128)), samples))
        .collect();
    let meta = TrajectoryMeta {
        run_id: RunId::new("eval").expect("a valid run id"),
        actor_id: ActorId("eval".into()),
        policy_version: PolicyVersion(0),
    };
    let mut sampler = Sampler::new(seed);
    let firsts = tch::no_grad(|| run_episodes(policy, &tasks, config, &meta, &mut sampler))?;
    let critiques = firsts.iter().map(|r| critique_of(r, reveal_outcome)).collect::<Result<Vec<_>>>()?;
    let refs: Vec<&EpisodeResult> = firsts.iter().collect();
    let every = RolloutConfig { refine: RefineWhich::All, ..config.clone() };
    let refined = tch::no_grad(|| play_refinements(policy, &refs, &critiques, &every, &meta, &mut sampler))?;
    let n = firsts.len();
    let rate = |k: usize, of: usize| if of == 0 { 0.0 } else { k as f64 / of as f64 };
    let solved = |r: &EpisodeResult| r.outcome.success;
    let failed_first = firsts.iter().filter(|r| !solved(r)).count();
    let fixed = firsts.iter().zip(&refined).filter(|(a, b)| !solved(a) && solved(b)).count();
    let broken = firsts.iter().zip(&refined).filter(|(a, b)| solved(a) && !solved(b)).count();
    Ok(RefinementReport {
        episodes: n,
        initial_success: rate(firsts.iter().filter(|r| solved(r)).count(), n),
        refined_success: rate(refined.iter().filter(|r| solved(r)).count(), n),
        fixed_share: rate(fixed, failed_first),
        broken_share: rate(broken, n - failed_first),
    })
}
