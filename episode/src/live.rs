//! An [`Episode`] with its environment in this process ([`registry::make`]): what the lockstep
//! batches of [`super::run_episodes`] and the reference replay step synchronously.

use std::time::Instant;

use env_workers::{registry, Environment, Guarded};
use policy::Tokenizer;

use super::{Episode, EpisodeResult, EpisodeTask, RefinedStart, RolloutConfig, TrajectoryMeta};
use crate::error::Result;

/// An episode in progress and its in-process environment.
pub(super) struct Live<'t> {
    env: Guarded,
    episode: Episode<'t>,
}

impl<'t> Live<'t> {
    /// Makes the environment and opens the conversation with the environment's own prompt, or
    /// a refined attempt's start (its prompt, then its kept messages replayed).
    pub(super) fn start_with(
        task: EpisodeTask,
        start: Option<&RefinedStart>,
        tok: &'t dyn Tokenizer,
        config: &RolloutConfig,
    ) -> Result<Self> {
        let env = registry::make(task.spec, config.limits)?;
        let episode = Episode::start(task, start.map_or(env.prompt(), |s| &s.prompt), tok, config)?;
        let mut live = Self { env, episode };
        for message in start.map_or(&[][..], |s| &s.kept[..]) {
            if live.episode.is_over() {
                break;
            }
            let message = live.episode.push_kept(message)?;
            live.step(&message)?;
        }
        Ok(live)
    }

    /// The episode, to generate for.
    pub(super) fn episode(&mut self) -> &mut Episode<'t> {
        &mut self.episode
    }

    /// The environment's reference agent messages.
    pub(super) fn reference(&self) -> Vec<String> {
        self.env.reference()
    }

    /// Appends the generated agent turn, sends its text to the environment and takes the
    /// observation (or the outcome).
    pub(super) fn act(&mut self, generated: &[u32], logprobs: &[f32]) -> Result<()> {
        let message = self.episode.push_agent(generated, logprobs);
        self.step(&message)
    }

    /// Sends an agent message to the environment and takes the observation (or the outcome).
    fn step(&mut self, message: &str) -> Result<()> {
        let started = Instant::now();
        let obs = self.env.step(message);
        self.episode.add_env_ms(started.elapsed().as_millis() as u64);
        self.episode.apply_observation(obs)
    }

    /// The finished episode as a trajectory.
    pub(super) fn finish(self, meta: &TrajectoryMeta) -> EpisodeResult {
        self.episode.finish(meta)
    }
}
