//! Experience collection: `num_envs` CartPoles stepped together, one batched forward pass per
//! vector step, auto-reset when an episode ends, into a time-major buffer of plain vectors
//! (entry `t * num_envs + n` is step `t` of environment `n`, the layout [`crate::advantage::gae`]
//! reads).
//!
//! A time-limit truncation is not a failure: its reward gets `γ·V(final observation)` added and
//! the step is marked done (Stable-Baselines3's treatment), so GAE bootstraps from the state the
//! clock cut off rather than from the next episode's first state.

use env_workers::control::{CartPole, ControlEnvironment};
use policy::mlp::{MlpPolicy, SampleRng};
use tch::Tensor;

use crate::error::{LearnerError, Result};

/// CartPole's observation size.
pub const OBS_DIM: usize = 4;

/// One iteration's experience, time-major.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollout {
    /// Observations acted from, `[steps · num_envs · 4]`.
    pub obs: Vec<f32>,
    /// The sampled actions.
    pub actions: Vec<i64>,
    /// Their behaviour log-probs.
    pub logprobs: Vec<f32>,
    /// The critic's values of the observations.
    pub values: Vec<f32>,
    /// Rewards, with `γ·V(final observation)` added on truncated steps.
    pub rewards: Vec<f32>,
    /// Whether the episode ended (terminated or truncated) with this step.
    pub dones: Vec<bool>,
    /// The critic's value of each environment's observation after the last step.
    pub last_values: Vec<f32>,
}

impl Rollout {
    /// Steps held (all environments together).
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether no step is held.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// A completed episode: the global step at which it ended and its undiscounted return.
pub type Episode = (u64, f64);

/// Several CartPoles with auto-reset, and the running return of each one's episode.
#[derive(Debug)]
pub struct VecEnv {
    envs: Vec<CartPole>,
    obs: Vec<f32>,
    running: Vec<f64>,
    reset_seeds: SampleRng,
}

fn tensor(obs: &[f32]) -> Tensor {
    Tensor::from_slice(obs).view([(obs.len() / OBS_DIM) as i64, OBS_DIM as i64])
}

fn values_of(policy: &MlpPolicy, obs: &[f32]) -> Result<Vec<f32>> {
    let values = tch::no_grad(|| policy.forward(&tensor(obs)).1);
    Ok(Vec::<f32>::try_from(&values)?)
}

impl VecEnv {
    /// `num_envs` environments, each reset from a seed drawn from `reset_seeds` (as is every
    /// later reset, so the whole run follows from the generator's seed).
    pub fn new(num_envs: usize, mut reset_seeds: SampleRng) -> Self {
        let mut envs = vec![CartPole::default(); num_envs];
        let obs = envs.iter_mut().flat_map(|e| e.reset(reset_seeds.next_u64())).collect();
        Self { envs, obs, running: vec![0.0; num_envs], reset_seeds }
    }

    /// How many environments are stepped together.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// Steps every environment `steps` times with actions sampled from `policy` (drawing from
    /// `rng`). `global_step` counts environment steps; every finished episode is appended to
    /// `episodes` with the global step after the vector step that ended it (as CleanRL logs).
    pub fn collect(
        &mut self,
        policy: &MlpPolicy,
        steps: usize,
        gamma: f64,
        rng: &mut SampleRng,
        global_step: &mut u64,
        episodes: &mut Vec<Episode>,
    ) -> Result<Rollout> {
        let n = self.num_envs();
        let mut r = Rollout::default();
        r.obs.reserve(steps * n * OBS_DIM);
        let mut truncated: Vec<(usize, Vec<f32>)> = Vec::new();
        for _ in 0..steps {
            let sample = policy.sample(&tensor(&self.obs), rng);
            let actions = Vec::<i64>::try_from(&sample.actions)?;
            r.obs.extend_from_slice(&self.obs);
            r.logprobs.extend(Vec::<f32>::try_from(&sample.logprobs)?);
            r.values.extend(Vec::<f32>::try_from(&sample.values)?);
            *global_step += n as u64;
            for (i, env) in self.envs.iter_mut().enumerate() {
                let step = env.step(actions[i] as u32).map_err(LearnerError::Environment)?;
                self.running[i] += step.reward as f64;
                let done = step.terminated || step.truncated;
                let mut next = step.observation;
                if done {
                    episodes.push((*global_step, self.running[i]));
                    self.running[i] = 0.0;
                    let first = env.reset(self.reset_seeds.next_u64());
                    let last = std::mem::replace(&mut next, first);
                    if step.truncated && !step.terminated {
                        truncated.push((r.rewards.len(), last));
                    }
                }
                self.obs[i * OBS_DIM..(i + 1) * OBS_DIM].copy_from_slice(&next);
                r.rewards.push(step.reward);
                r.dones.push(done);
            }
            r.actions.extend(actions);
        }
        if !truncated.is_empty() {
            let finals: Vec<f32> = truncated.iter().flat_map(|(_, o)| o.iter().copied()).collect();
            for ((index, _), v) in truncated.iter().zip(values_of(policy, &finals)?) {
                r.rewards[*index] += (gamma * v as f64) as f32;
            }
        }
        r.last_values = values_of(policy, &self.obs)?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn;

    /// A near-deterministic balancing controller (push towards where the pole is falling:
    /// right when θ + 0.5·θ̇ > 0) whose critic says 7 everywhere.
    fn balancer() -> (nn::VarStore, MlpPolicy) {
        let (vs, policy) = crate::cartpole::init_policy(0);
        let vars = vs.variables();
        tch::no_grad(|| {
            for t in vars.values() {
                let _ = t.shallow_clone().zero_();
            }
            let set = |name: &str, index: &[i64], v: f64| {
                let _ = vars[name].get(index[0]).get(index[1]).fill_(v);
            };
            set("actor.0.weight", &[0, 2], 100.0);
            set("actor.0.weight", &[0, 3], 50.0);
            set("actor.2.weight", &[0, 0], 3.0);
            set("actor.4.weight", &[0, 0], -50.0);
            set("actor.4.weight", &[1, 0], 50.0);
            let _ = vars["critic.4.bias"].shallow_clone().fill_(7.0);
        });
        (vs, policy)
    }

    #[test]
    fn truncation_bootstraps_from_the_final_observation_and_resets() {
        let (_vs, policy) = balancer();
        let mut envs = VecEnv::new(1, SampleRng::new(3));
        let (mut step, mut episodes) = (0, Vec::new());
        let r = envs.collect(&policy, 510, 0.99, &mut SampleRng::new(4), &mut step, &mut episodes).unwrap();
        assert_eq!(episodes.first(), Some(&(500, 500.0)), "the controller balances until the time limit");
        let done: Vec<usize> = r.dones.iter().enumerate().filter(|(_, d)| **d).map(|(i, _)| i).collect();
        assert_eq!(done, [499]);
        assert!((r.rewards[499] - (1.0 + 0.99 * 7.0)).abs() < 1e-5, "{}", r.rewards[499]);
        assert!(r.rewards.iter().enumerate().all(|(i, &x)| i == 499 || x == 1.0));
        assert!(r.obs[500 * OBS_DIM..501 * OBS_DIM].iter().all(|v| v.abs() <= 0.05), "step 500 acts from a reset");
        assert_eq!((r.last_values.as_slice(), step), (&[7.0f32][..], 510));
    }
}
