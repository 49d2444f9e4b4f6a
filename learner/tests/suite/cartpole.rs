//! PPO on CartPole-v1 (issues 4 and 11): RL-Zoo's tuned run solved the way RL-Zoo judges it,
//! reproducibility, evaluation that leaves training alone, and what a single update does to a
//! fixed batch.
//!
//! "Solved" is [`TrainReport::solved_at`]: every 5,000 environment steps the policy plays 20
//! episodes with greedy actions on environments of its own, and the run counts as solved at the
//! first evaluation whose mean return reaches 475 (RL-Zoo's `EvalCallback`). The run is
//! [`CartpoleConfig::zoo`] (RL-Zoo's tuned hyper-parameters), stopped at that evaluation.
//!
//! The statistical assertion (`zoo_is_solved_within_50k_steps_on_two_of_three_seeds`): at least
//! two of seeds 0, 1, 2 solved within 50,000 steps. Each run is bitwise reproducible, so the
//! chances below are over the random streams a change to the code would redraw:
//! - a working implementation fails it with chance ≤ 0.3 %: 100 of 100 seeds (0–99, `reagent
//!   bench cartpole --seeds 0,…,99 --stop-when-solved true`) were solved within 40,000 steps
//!   (median 20,000, the same distribution as Stable-Baselines3's), so a seed misses 50,000 with
//!   chance ≤ 3 % (95 % bound), and two of three miss with chance ≤ 3 · 0.03² ≈ 0.3 %;
//! - an implementation that does not improve the policy passes it with chance ≤ 0.4 %: it passes
//!   a seed only if the untrained greedy controller happens to balance, which 2 of 200
//!   initialisations did in some of 20 evaluations (≤ 3.6 % at 95 %; the test gives 10), and two
//!   of three with chance ≤ 3 · 0.036² ≈ 0.4 %.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use learner::advantage::{gae, GaeInputs};
use learner::cartpole::eval::Evaluator;
use learner::cartpole::rollout::VecEnv;
use learner::cartpole::update::{batch_loss, ppo_update, with_lr};
use learner::cartpole::{init_policy, train, CartpoleConfig, TrainReport, SOLVED_RETURN};
use learner::optim::AdamW;
use learner::rng::SampleRng;
use learner::LearnerError;

fn run(cfg: CartpoleConfig) -> TrainReport {
    tch::set_num_threads(1);
    train(&cfg, |_| {}).expect("training runs")
}

#[test]
fn zoo_is_solved_within_50k_steps_on_two_of_three_seeds() {
    let cfg = CartpoleConfig { total_steps: 50_000, stop_when_solved: true, ..CartpoleConfig::zoo() };
    let reports: Vec<(u64, TrainReport)> = std::thread::scope(|s| {
        let handles: Vec<_> = [0u64, 1, 2]
            .map(|seed| {
                let cfg = CartpoleConfig { seed, ..cfg.clone() };
                s.spawn(move || (seed, run(cfg)))
            })
            .into();
        handles.into_iter().map(|h| h.join().expect("a training thread panicked")).collect()
    });
    let mut solved = 0;
    for (seed, r) in &reports {
        let means: Vec<f64> = r.evaluations.iter().map(|e| e.mean()).collect();
        println!(
            "seed {seed}: solved at {:?} after {} steps; evaluation means {means:.1?}; training mean {:.1}; \
             training {:.1?} + evaluating {:.1?}",
            r.solved_at, r.steps, r.final_avg_return_100, r.train_wall, r.eval_wall
        );
        assert!(r.steps <= cfg.total_steps);
        assert!(r.evaluations.iter().all(|e| e.step % 5_000 == 0 && e.step <= r.steps + 256 && e.returns.len() == 20));
        assert!(r.evaluations.iter().flat_map(|e| &e.returns).all(|ret| (1.0..=500.0).contains(ret)));
        if let Some(at) = r.solved_at {
            assert_eq!(r.evaluations.last().map(|e| (e.step, e.mean() >= SOLVED_RETURN)), Some((at, true)));
            solved += 1;
        }
    }
    assert!(
        solved >= 2,
        "only {solved} of 3 seeds had a greedy evaluation averaging ≥ {SOLVED_RETURN} within 50k steps"
    );
}

#[test]
fn the_same_seed_gives_identical_runs_and_evaluating_changes_nothing() {
    let short = |seed, eval_every| CartpoleConfig { seed, total_steps: 4096, eval_every, ..CartpoleConfig::zoo() };
    let (a, b, c) = (run(short(7, 1024)), run(short(7, 1024)), run(short(8, 1024)));
    assert_eq!(a.steps, 4096);
    assert!(a.episode_returns.len() > 50, "a random policy ends episodes every ~20 steps");
    assert_eq!((&a.episode_returns, &a.evaluations), (&b.episode_returns, &b.evaluations));
    assert_ne!(a.episode_returns, c.episode_returns);
    assert_eq!(a.evaluations.iter().map(|e| e.step).collect::<Vec<_>>(), [1024, 2048, 3072, 4096]);
    // The evaluation plays on environments of its own: without it, training is the same.
    let quiet = run(short(7, 0));
    assert!(quiet.evaluations.is_empty() && quiet.solved_at.is_none());
    assert_eq!(quiet.episode_returns, a.episode_returns);
}

#[test]
fn evaluation_is_greedy_and_seeded() {
    tch::set_num_threads(1);
    let (_vs, policy) = init_policy(3);
    let play = |seed| Evaluator::new(20, SampleRng::new(seed)).play(&policy).unwrap();
    let (first, again, other) = (play(1), play(1), play(2));
    assert_eq!(first.len(), 20);
    assert_eq!(first, again, "greedy actions from the same start states give the same episodes");
    assert_ne!(first, other);
    assert!(first.iter().all(|r| (1.0..=500.0).contains(r) && r.fract() == 0.0));
}

#[test]
fn one_update_on_a_fixed_batch_lowers_its_loss() {
    tch::set_num_threads(1);
    let cfg = CartpoleConfig { update_epochs: 1, num_minibatches: 1, ..CartpoleConfig::default() };
    let (vs, policy) = init_policy(5);
    let mut envs = VecEnv::new(cfg.num_envs, SampleRng::new(5));
    let (mut step, mut episodes) = (0, Vec::new());
    let r = envs.collect(&policy, cfg.num_steps, cfg.gamma, &mut SampleRng::new(6), &mut step, &mut episodes).unwrap();
    assert_eq!((r.len(), step as usize, r.last_values.len()), (cfg.batch_size(), cfg.batch_size(), cfg.num_envs));
    let inputs =
        GaeInputs { rewards: &r.rewards, values: &r.values, dones: &r.dones, last_values: &r.last_values, num_envs: 4 };
    let adv = gae(&inputs, cfg.gamma, cfg.gae_lambda).unwrap();
    let update_cfg = cfg.update_config(0);
    let before = batch_loss(&policy, &r, &adv, &update_cfg).unwrap();
    // The data was collected by this very policy: ratio 1, nothing clipped, no divergence.
    assert!(before.approx_kl.abs() < 1e-6 && before.clip_fraction == 0.0, "{before:?}");
    let weights = |vs: &tch::nn::VarStore| {
        let sorted: std::collections::BTreeMap<_, _> = vs.variables().into_iter().collect();
        sorted.into_values().map(|t| t.copy()).collect::<Vec<_>>()
    };
    let old = weights(&vs);

    // A large step so that one update moves the loss visibly.
    let mut opt = with_lr(&AdamW::from_named(vs.variables(), cfg.adam_config()), 1e-2).unwrap();
    let out = ppo_update(&policy, &mut opt, &r, &adv, &update_cfg, &mut SampleRng::new(0)).unwrap().unwrap();
    assert_eq!(opt.steps(), 1);
    assert!((out.loss.total - before.total).abs() < 1e-5, "the one minibatch is the batch: {out:?} vs {before:?}");
    let after = batch_loss(&policy, &r, &adv, &update_cfg).unwrap();
    assert!(after.total < before.total, "loss {} → {}", before.total, after.total);
    assert!(after.value < before.value, "value loss {} → {}", before.value, after.value);
    assert!(after.policy < before.policy, "policy loss {} → {}", before.policy, after.policy);
    assert!(after.approx_kl > 0.0);
    assert!(weights(&vs).iter().zip(&old).all(|(new, old)| !new.equal(old)), "every parameter moved");
}

#[test]
fn bad_configs_name_the_key() {
    let bad = CartpoleConfig { num_minibatches: 5, ..CartpoleConfig::default() };
    match train(&bad, |_| {}) {
        Err(e @ LearnerError::Config(_)) => assert_eq!(e.config_key(), Some("cartpole.num_minibatches")),
        other => panic!("expected a config error, got {other:?}"),
    }
    let key_of = |c: CartpoleConfig| match c.validate() {
        Err(e @ LearnerError::Config(_)) => e.config_key().map(str::to_string).unwrap_or_default(),
        other => panic!("expected a config error, got {other:?}"),
    };
    assert_eq!(key_of(CartpoleConfig { total_steps: 100, ..CartpoleConfig::default() }), "cartpole.total_steps");
    assert_eq!(key_of(CartpoleConfig { eval_episodes: 0, ..CartpoleConfig::zoo() }), "cartpole.eval_episodes");
    let blind = CartpoleConfig { eval_every: 0, stop_when_solved: true, ..CartpoleConfig::zoo() };
    assert_eq!(key_of(blind), "cartpole.stop_when_solved");
    let unknown = toml::from_str::<CartpoleConfig>("lr = 1e-3\nlearning_rate = 1e-3");
    assert!(unknown.unwrap_err().to_string().contains("learning_rate"), "an unknown key is named");
}
