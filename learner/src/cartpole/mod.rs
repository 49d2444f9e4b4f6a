//! PPO on CartPole-v1, in process: the yardstick for the correctness of our PPO pieces
//! ([`gae`], [`crate::loss::ppo_loss`], [`crate::optim::AdamW`], the [`MlpPolicy`]) against
//! the learning curves well-known implementations publish (docs/architecture.md section 4), measured the
//! way the tuned reference (RL-Zoo on Stable-Baselines3) measures.
//!
//! ## The algorithm (CleanRL's `ppo.py`, Stable-Baselines3's PPO)
//!
//! ```text
//!  for iteration i in 0..total_steps / (num_envs · num_steps):
//!     lr ← lr₀ · (1 − i/n), ε ← ε₀ · (1 − i/n)                 linear schedules (each optional)
//!     evaluate greedily at every multiple of eval_every this iteration's steps pass
//!     collect num_steps × num_envs steps, one batched forward per step, auto-reset
//!     A, R ← GAE(γ, λ)   (truncation at 500: reward += γ·V(final obs), done)
//!     update_epochs × num_minibatches shuffled minibatches:
//!        loss = clipped surrogate (ε, advantages whitened per minibatch)
//!             − ent_coef · entropy + vf_coef · ½(V − R)² (clipped around the old V, or not)
//!        Adam (β 0.9/0.999, ε 1e-5), global grad-norm clip 0.5
//! ```
//!
//! The network (two tanh layers of 64, separate actor and critic, orthogonal init) is the one
//! CleanRL and Stable-Baselines3 use. [`presets`] names the runs: `zoo` (RL-Zoo's tuned
//! hyper-parameters), `yardstick`, `default` and `cleanrl` (CleanRL's). Known differences
//! from CleanRL, none of which changes the algorithm: CleanRL treats a time-limit truncation as
//! a termination, we bootstrap it as Stable-Baselines3 does; episode start states come from our
//! environment's own seeded generator; actions are sampled by inverse CDF from a
//! [`SampleRng`]; annealing swaps in a rebuilt optimizer carrying the same moments
//! ([`update::with_lr`]).
//!
//! ## "Solved"
//!
//! As RL-Zoo measures it: every [`CartpoleConfig::eval_every`] environment steps (5,000), the
//! policy plays [`CartpoleConfig::eval_episodes`] (20) episodes with greedy actions on
//! environments of their own ([`eval`]); the run is solved at the first evaluation whose mean
//! return reaches [`SOLVED_RETURN`] = 475 ([`TrainReport::solved_at`]). The second figure is
//! Gym's older criterion on the training episodes themselves (stochastic actions): the mean of
//! the last [`SOLVED_WINDOW`] = 100 completed ([`TrainReport::train_mean_475_at`],
//! [`TrainReport::final_avg_return_100`]). Training wall time excludes the evaluations.
//!
//! Determinism: given the seed the run is bitwise reproducible on CPU with one libtorch thread.
//! libtorch's global generator is used only for the initial weights, seeded under
//! [`policy::seed`]'s process-wide lock (runs on several threads do not disturb each other);
//! everything later draws from [`SampleRng`]s derived from the seed.

pub mod config;
pub mod eval;
pub mod presets;
pub mod rollout;
pub mod update;

use std::time::{Duration, Instant};

use policy::mlp::{MlpConfig, MlpPolicy, SampleRng};
use tch::{nn, Device};

use crate::advantage::{gae, GaeInputs};
use crate::error::Result;
use crate::loss::LossStats;
use crate::optim::AdamW;
use crate::rng::torch_seed_for;
pub use config::CartpoleConfig;
pub use eval::Evaluation;
use eval::{EvalSchedule, Evaluator};
pub use presets::CartpolePreset;
pub use rollout::Episode;
use rollout::VecEnv;

/// Training episodes averaged for the second figure ("average return").
pub const SOLVED_WINDOW: usize = 100;
/// The mean return (of a greedy evaluation; of the last 100 training episodes for the second
/// figure) at which CartPole-v1 counts as solved.
pub const SOLVED_RETURN: f64 = 475.0;

/// What one iteration did, for progress bars and learning curves.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateStats {
    /// The iteration just finished, from 1.
    pub iteration: u64,
    /// Iterations in the run.
    pub iterations: u64,
    /// Environment steps so far.
    pub global_step: u64,
    /// The learning rate of this iteration.
    pub lr: f64,
    /// Episodes completed so far.
    pub episodes: usize,
    /// Mean return of the last 100 completed episodes (`None` before the first).
    pub avg_return_100: Option<f64>,
    /// The latest greedy evaluation (`None` before the first).
    pub last_eval: Option<Evaluation>,
    /// The clip range ε of this iteration.
    pub clip: f64,
    /// The last minibatch's loss parts (as CleanRL logs them).
    pub loss: LossStats,
    /// The last minibatch's gradient norm before clipping.
    pub grad_norm: f64,
    /// `1 − Var(R − V) / Var(R)` over the batch.
    pub explained_variance: f64,
    /// Time since the run started.
    pub elapsed: Duration,
    /// Of that, time spent in evaluations.
    pub eval_elapsed: Duration,
}

/// The outcome of [`train`].
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    /// Every completed training episode: (global step at its end, undiscounted return).
    pub episode_returns: Vec<Episode>,
    /// Every greedy evaluation, in step order.
    pub evaluations: Vec<Evaluation>,
    /// The step of the first evaluation whose mean reached 475: when the run counts as solved.
    pub solved_at: Option<u64>,
    /// Mean return of the last 100 completed training episodes (of all, if fewer; 0 if none).
    pub final_avg_return_100: f64,
    /// The first global step at which the mean of the last 100 training episodes reached 475.
    pub train_mean_475_at: Option<u64>,
    /// Environment steps taken.
    pub steps: u64,
    /// Wall-clock time of the run, evaluations excluded.
    pub train_wall: Duration,
    /// Wall-clock time of the evaluations.
    pub eval_wall: Duration,
}

impl TrainReport {
    /// Whether the run reached the bar: a greedy evaluation averaged 475.
    pub fn solved(&self) -> bool {
        self.solved_at.is_some()
    }
}

/// The mean return of the last `window` episodes (of all, if fewer); `None` if there are none.
pub fn average_return(episodes: &[Episode], window: usize) -> Option<f64> {
    let tail = &episodes[episodes.len().saturating_sub(window)..];
    (!tail.is_empty()).then(|| tail.iter().map(|e| e.1).sum::<f64>() / tail.len() as f64)
}

/// The first global step at which the mean of the last `window` episodes (a full window)
/// reached `threshold`.
pub fn first_solved(episodes: &[Episode], window: usize, threshold: f64) -> Option<u64> {
    let mut sum = 0.0;
    for (i, &(step, ret)) in episodes.iter().enumerate() {
        sum += ret;
        if i >= window {
            sum -= episodes[i - window].1;
        }
        if i + 1 >= window && sum / window as f64 >= threshold {
            return Some(step);
        }
    }
    None
}

/// An independent generator for stream `tag` of a run seeded with `seed`.
fn stream(seed: u64, tag: u64) -> SampleRng {
    SampleRng::new(SampleRng::new(seed ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64())
}

/// A freshly initialised CartPole MLP: libtorch's generator seeded from `seed` and the weights
/// drawn under [`policy::seed`]'s lock, so runs on other threads cannot split the two.
pub fn init_policy(seed: u64) -> (nn::VarStore, MlpPolicy) {
    policy::seed::seeded(torch_seed_for(seed, 0), || {
        let vs = nn::VarStore::new(Device::Cpu);
        let policy = MlpPolicy::new(&vs.root(), MlpConfig::CARTPOLE);
        (vs, policy)
    })
}

/// Trains the CartPole MLP with PPO for `cfg.total_steps` environment steps (or until solved,
/// with `stop_when_solved`; see the module header), calling `on_update` after every iteration.
pub fn train(cfg: &CartpoleConfig, mut on_update: impl FnMut(&UpdateStats)) -> Result<TrainReport> {
    cfg.validate()?;
    let start = Instant::now();
    let (vs, policy) = init_policy(cfg.seed);
    let mut opt = AdamW::from_named(vs.variables(), cfg.adam_config());
    let mut envs = VecEnv::new(cfg.num_envs, stream(cfg.seed, 1));
    let (mut act_rng, mut shuffle_rng) = (stream(cfg.seed, 2), stream(cfg.seed, 3));
    let mut evals = EvalSchedule::new(cfg.eval_every, Evaluator::new(cfg.eval_episodes, stream(cfg.seed, 4)));
    let iterations = cfg.iterations();
    let (mut global_step, mut episodes) = (0u64, Vec::new());
    for i in 0..iterations {
        evals.run_until(global_step + cfg.batch_size() as u64, &policy)?;
        if cfg.stop_when_solved && evals.solved_at().is_some() {
            break;
        }
        let lr = cfg.lr_at(i);
        if i > 0 && cfg.anneal_lr {
            opt = update::with_lr(&opt, lr)?;
        }
        let r = envs.collect(&policy, cfg.num_steps, cfg.gamma, &mut act_rng, &mut global_step, &mut episodes)?;
        let inputs = GaeInputs {
            rewards: &r.rewards,
            values: &r.values,
            dones: &r.dones,
            last_values: &r.last_values,
            num_envs: cfg.num_envs,
        };
        let adv = gae(&inputs, cfg.gamma, cfg.gae_lambda)?;
        let update_cfg = cfg.update_config(i);
        let out = update::ppo_update(&policy, &mut opt, &r, &adv, &update_cfg, &mut shuffle_rng)?;
        let Some(out) = out else { continue };
        on_update(&UpdateStats {
            iteration: i + 1,
            iterations,
            global_step,
            lr,
            episodes: episodes.len(),
            avg_return_100: average_return(&episodes, SOLVED_WINDOW),
            last_eval: evals.done.last().cloned(),
            clip: update_cfg.loss.clip_high,
            loss: out.loss,
            grad_norm: out.step.grad_norm,
            explained_variance: update::explained_variance(&r.values, &adv.returns),
            elapsed: start.elapsed(),
            eval_elapsed: evals.time,
        });
    }
    let (wall, eval_wall_so_far) = (start.elapsed(), evals.time);
    Ok(TrainReport {
        final_avg_return_100: average_return(&episodes, SOLVED_WINDOW).unwrap_or(0.0),
        train_mean_475_at: first_solved(&episodes, SOLVED_WINDOW, SOLVED_RETURN),
        solved_at: evals.solved_at(),
        eval_wall: evals.time,
        evaluations: evals.done,
        episode_returns: episodes,
        steps: global_step,
        train_wall: wall.saturating_sub(eval_wall_so_far),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_return_uses_the_last_window_and_solved_needs_a_full_one() {
        let episodes: Vec<Episode> = (1..=150).map(|i| (i * 10, if i > 40 { 500.0 } else { 10.0 })).collect();
        assert_eq!(average_return(&episodes, 100), Some(500.0));
        assert_eq!(average_return(&episodes[..2], 100), Some(10.0));
        assert_eq!(average_return(&[], 100), None);
        // 100 episodes ending at episode k hold (k − 40) of 500 once k > 40: the mean reaches
        // 475 when 500·(k − 40) + 10·(140 − k) ≥ 47,500, i.e. k ≥ 135.
        assert_eq!(first_solved(&episodes, 100, 475.0), Some(1350));
        assert_eq!(first_solved(&episodes[..99], 1, 500.0), Some(410));
        assert_eq!(first_solved(&episodes[..99], 100, 0.0), None);
    }

    #[test]
    fn helpers_shuffle_anneal_and_explain_variance() {
        let mut order: Vec<usize> = (0..50).collect();
        update::shuffle(&mut order, &mut SampleRng::new(1));
        assert_ne!(order, (0..50).collect::<Vec<_>>());
        order.sort_unstable();
        assert_eq!(order, (0..50).collect::<Vec<_>>());

        let cfg = CartpoleConfig::default();
        assert_eq!((cfg.batch_size(), cfg.iterations()), (512, 390));
        assert_eq!(cfg.lr_at(0), 2.5e-4);
        assert!((cfg.lr_at(195) - 1.25e-4).abs() < 1e-12);
        assert_eq!(CartpoleConfig { anneal_lr: false, ..cfg.clone() }.lr_at(389), 2.5e-4);
        assert_eq!((cfg.clip_at(0), cfg.clip_at(389)), (0.2, 0.2), "CleanRL keeps ε");
        assert_eq!((CartpoleConfig::yardstick().lr, CartpoleConfig::cleanrl().total_steps), (1e-3, 500_000));
        let zoo = CartpoleConfig::zoo();
        assert_eq!((zoo.batch_size(), zoo.minibatch_size(), zoo.iterations()), (256, 256, 390));
        assert!((zoo.clip_at(195) - 0.1).abs() < 1e-12 && (zoo.lr_at(195) - 5e-4).abs() < 1e-12);
        assert_eq!(zoo.update_config(0).loss.value_clip, None);
        assert_eq!(CartpolePreset::Zoo.config(), zoo);

        assert_eq!(update::explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 1.0);
        assert_eq!(update::explained_variance(&[0.0; 3], &[1.0, 2.0, 3.0]), 0.0);
        assert!(update::explained_variance(&[0.0; 3], &[2.0; 3]).is_nan());
        assert_ne!(stream(1, 1).next_u64(), stream(1, 2).next_u64());
    }
}
