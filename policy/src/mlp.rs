//! A small MLP actor-critic for `cartpole`: the classic PPO yardstick (docs/architecture.md section 4).
//!
//! Shaped as in CleanRL's `ppo.py` (the reference that reaches a return of 500 on
//! CartPole-v1): separate actor and critic trunks of two tanh layers of 64 units, orthogonal
//! weights with gain √2, zero biases, and output layers with gain 0.01 (actor) and 1 (critic).
//!
//! ```text
//!  obs [B, 4] ─┬─ actor:  linear 4→64, tanh, linear 64→64, tanh, linear 64→2 ─► logits [B, 2]
//!              └─ critic: linear 4→64, tanh, linear 64→64, tanh, linear 64→1 ─► value  [B]
//! ```
//!
//! Initialisation draws from libtorch's global generator (create it inside
//! [`crate::seed::seeded`]). Sampling never does: it draws from a [`SampleRng`] the caller owns, whose state is a
//! few bytes a checkpoint can hold, so that a resumed run samples exactly what an uninterrupted
//! one would.

use tch::nn::{self, Init, LinearConfig, Module};
use tch::{Kind, Tensor};

/// The MLP's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpConfig {
    /// Observation size (4 for CartPole).
    pub obs_dim: i64,
    /// Number of discrete actions (2 for CartPole).
    pub actions: i64,
    /// Units in each of the two hidden layers.
    pub hidden: i64,
}

impl MlpConfig {
    /// CartPole-v1: 4 observations, 2 actions, hidden layers of 64.
    pub const CARTPOLE: MlpConfig = MlpConfig { obs_dim: 4, actions: 2, hidden: 64 };
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self::CARTPOLE
    }
}

/// The actor-critic network; its variables live in the `nn::Path` it was built under.
#[derive(Debug)]
pub struct MlpPolicy {
    actor: nn::Sequential,
    critic: nn::Sequential,
    config: MlpConfig,
}

/// What [`MlpPolicy::sample`] drew: one action per observation with its log-prob and value.
#[derive(Debug)]
pub struct MlpSample {
    /// The actions, `[B]` int64.
    pub actions: Tensor,
    /// Their log-probs under the policy, `[B]` float (the behaviour log-probs).
    pub logprobs: Tensor,
    /// The critic's values, `[B]` float.
    pub values: Tensor,
}

fn layer(path: nn::Path, input: i64, output: i64, gain: f64) -> nn::Linear {
    let config = LinearConfig { ws_init: Init::Orthogonal { gain }, bs_init: Some(Init::Const(0.0)), bias: true };
    nn::linear(path, input, output, config)
}

fn trunk(path: &nn::Path, c: &MlpConfig, out: i64, out_gain: f64) -> nn::Sequential {
    let gain = 2f64.sqrt();
    nn::seq()
        .add(layer(path / "0", c.obs_dim, c.hidden, gain))
        .add_fn(|x| x.tanh())
        .add(layer(path / "2", c.hidden, c.hidden, gain))
        .add_fn(|x| x.tanh())
        .add(layer(path / "4", c.hidden, out, out_gain))
}

impl MlpPolicy {
    /// Builds the network under `path` (variables `actor.{0,2,4}.{weight,bias}` and
    /// `critic.{0,2,4}.{weight,bias}`), initialised from libtorch's global generator.
    pub fn new(path: &nn::Path, config: MlpConfig) -> Self {
        let actor = trunk(&(path / "actor"), &config, config.actions, 0.01);
        let critic = trunk(&(path / "critic"), &config, 1, 1.0);
        Self { actor, critic, config }
    }

    /// The sizes it was built with.
    pub fn config(&self) -> MlpConfig {
        self.config
    }

    /// Action logits `[B, actions]` and values `[B]` for observations `[B, obs_dim]`.
    pub fn forward(&self, obs: &Tensor) -> (Tensor, Tensor) {
        (self.actor.forward(obs), self.critic.forward(obs).squeeze_dim(-1))
    }

    /// Log-probs of `actions` `[B]`, the policy's entropy and the values, all `[B]`, with
    /// gradients: what the PPO update needs.
    pub fn evaluate(&self, obs: &Tensor, actions: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (logits, values) = self.forward(obs);
        let logp_all = logits.log_softmax(-1, Kind::Float);
        let logp = logp_all.gather(-1, &actions.unsqueeze(-1), false).squeeze_dim(-1);
        let entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(-1, false, Kind::Float);
        (logp, entropy, values)
    }

    /// Samples one action per observation from `rng` (inverse CDF over the softmax), without
    /// gradients.
    pub fn sample(&self, obs: &Tensor, rng: &mut SampleRng) -> MlpSample {
        tch::no_grad(|| {
            let (logits, values) = self.forward(obs);
            let logp_all = logits.log_softmax(-1, Kind::Float).to_kind(Kind::Double).to_device(tch::Device::Cpu);
            let rows = logp_all.size()[0];
            let flat: Vec<f64> = Vec::try_from(logp_all.flatten(0, -1)).expect("a float tensor converts to f64");
            let width = self.config.actions as usize;
            let mut actions = Vec::with_capacity(rows as usize);
            let mut logprobs = Vec::with_capacity(rows as usize);
            for row in flat.chunks(width) {
                let a = categorical(row, rng.unit());
                actions.push(a as i64);
                logprobs.push(row[a] as f32);
            }
            let device = obs.device();
            MlpSample {
                actions: Tensor::from_slice(&actions).to_device(device),
                logprobs: Tensor::from_slice(&logprobs).to_device(device),
                values,
            }
        })
    }
}

/// The index whose cumulative probability first exceeds `u` ∈ [0, 1); the last index when
/// rounding leaves the total just below `u`.
fn categorical(logprobs: &[f64], u: f64) -> usize {
    let mut cumulative = 0.0;
    for (i, lp) in logprobs.iter().enumerate() {
        cumulative += lp.exp();
        if u < cumulative {
            return i;
        }
    }
    logprobs.len() - 1
}

/// The seeded generator sampling draws from: the workspace's SplitMix64, whose whole state is
/// 8 bytes, so checkpoints can hold it and a resumed run draws the same numbers.
pub use protocol::rng::SplitMix64 as SampleRng;

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(seed: i64) -> (nn::VarStore, MlpPolicy) {
        crate::seed::seeded(seed, || {
            let vs = nn::VarStore::new(tch::Device::Cpu);
            let p = MlpPolicy::new(&vs.root(), MlpConfig::CARTPOLE);
            (vs, p)
        })
    }

    #[test]
    fn shapes_names_and_orthogonal_init() {
        let (vs, p) = policy(0);
        let obs = Tensor::ones([5, 4], (Kind::Float, tch::Device::Cpu));
        let (logits, values) = p.forward(&obs);
        assert_eq!((logits.size(), values.size()), (vec![5, 2], vec![5]));
        let vars = vs.variables();
        assert_eq!(vars.len(), 12);
        // W Wᵀ = gain² I for an orthogonal [64, 4] layer read column-wise: Wᵀ W = 2 I.
        let w = &vars["actor.0.weight"];
        let wtw = w.tr().matmul(w);
        let eye = Tensor::eye(4, (Kind::Float, tch::Device::Cpu)) * 2.0;
        assert!(wtw.allclose(&eye, 1e-5, 1e-5, false));
        assert_eq!(vars["critic.4.bias"].double_value(&[0]), 0.0);
        // The actor's output gain is 0.01, so the initial policy is nearly uniform.
        let probs = logits.softmax(-1, Kind::Float);
        assert!((probs.double_value(&[0, 0]) - 0.5).abs() < 0.05);
    }

    #[test]
    fn sampling_is_reproducible_and_logprobs_match_evaluate() {
        let (_vs, p) = policy(1);
        let obs = Tensor::randn([64, 4], (Kind::Float, tch::Device::Cpu));
        let mut a = SampleRng::new(7);
        let s1 = p.sample(&obs, &mut a);
        let restored = SampleRng::from_bytes(&a.to_bytes()).unwrap();
        let s2 = p.sample(&obs, &mut SampleRng::new(7));
        assert!(s1.actions.equal(&s2.actions));
        assert_eq!(restored, clone_after(SampleRng::new(7), 64));
        let (logp, entropy, values) = p.evaluate(&obs, &s1.actions);
        assert!(logp.allclose(&s1.logprobs, 1e-6, 1e-6, false));
        assert!(values.allclose(&s1.values, 1e-6, 1e-6, false));
        let max_entropy = 2f64.ln();
        assert!(entropy.max().double_value(&[]) <= max_entropy + 1e-6);
    }

    #[test]
    fn categorical_inverts_the_cdf() {
        let lp = [0.25f64.ln(), 0.75f64.ln()];
        assert_eq!(categorical(&lp, 0.0), 0);
        assert_eq!(categorical(&lp, 0.2499), 0);
        assert_eq!(categorical(&lp, 0.25), 1);
        assert_eq!(categorical(&lp, 0.999_999_999), 1);
    }

    fn clone_after(mut rng: SampleRng, draws: usize) -> SampleRng {
        for _ in 0..draws {
            rng.next_u64();
        }
        rng
    }
}
