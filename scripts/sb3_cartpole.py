#!/usr/bin/env python3
"""Stable-Baselines3's PPO on CartPole-v1, measured the way `reagent bench cartpole` measures ours.

Run by `reagent bench cartpole --against-sb3` with the venv that scripts/sb3_venv.sh makes (not
by hand, though it can be: `target/sb3-venv/bin/python scripts/sb3_cartpole.py --seed 0
--params '{...}'`). The hyper-parameters arrive as one JSON object in Reagent's terms (the keys
of `learner::cartpole::CartpoleConfig`) and are translated here:

  num_envs, num_steps          -> n_envs, n_steps (DummyVecEnv, as RL-Zoo uses)
  num_minibatches              -> batch_size = num_envs * num_steps / num_minibatches
  update_epochs                -> n_epochs
  lr, anneal_lr                -> learning_rate: lr * progress_remaining (RL-Zoo's `lin_`)
  clip_coef, anneal_clip       -> clip_range, likewise linear when annealed
  clip_vloss                   -> clip_range_vf = clip_range (SB3 then uses the clipped value
                                  alone, CleanRL and Reagent the larger of the two losses)
  vf_coef                      -> vf_coef / 2: Reagent's value loss is 0.5*MSE, SB3's plain MSE
  ent_coef, gamma, gae_lambda, max_grad_norm, norm_adv, adam_eps: the same meaning

Evaluation: SB3's EvalCallback on a separate single CartPole-v1, every `eval_every` environment
steps (eval_freq = eval_every / n_envs callback calls), `eval_episodes` deterministic episodes;
with `stop_when_solved`, StopTrainingOnRewardThreshold(475) ends the run at the first mean ≥ 475.
Training wall time is learn()'s wall time less the time spent in evaluations.

Prints one JSON object on stdout:
  {"seed", "steps", "evaluations": [[step, mean], ...], "first_solved_step",
   "train_wall_s", "eval_wall_s", "versions": {...}}
"""

import argparse
import json
import sys
import time

SOLVED_RETURN = 475.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, required=True, help="seed of the training and evaluation environments and of torch")
    p.add_argument("--params", required=True, help="the CartpoleConfig as a JSON object")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1, as the Rust side uses)")
    return p.parse_args()


def main():
    args = parse_args()
    cfg = json.loads(args.params)

    import gymnasium
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(args.threads)

    def schedule(value, anneal):
        return (lambda progress_remaining: progress_remaining * value) if anneal else value

    n_envs, n_steps = cfg["num_envs"], cfg["num_steps"]
    batch = n_envs * n_steps
    if batch % cfg["num_minibatches"]:
        sys.exit(f"sb3_cartpole: num_minibatches {cfg['num_minibatches']} does not divide {batch}")
    clip = schedule(cfg["clip_coef"], cfg["anneal_clip"])
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=args.seed)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=args.seed + 10_000)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=batch // cfg["num_minibatches"],
        n_epochs=cfg["update_epochs"],
        gamma=cfg["gamma"],
        gae_lambda=cfg["gae_lambda"],
        ent_coef=cfg["ent_coef"],
        vf_coef=cfg["vf_coef"] / 2.0,
        max_grad_norm=cfg["max_grad_norm"],
        learning_rate=schedule(cfg["lr"], cfg["anneal_lr"]),
        clip_range=clip,
        clip_range_vf=clip if cfg["clip_vloss"] else None,
        normalize_advantage=cfg["norm_adv"],
        policy_kwargs={"optimizer_kwargs": {"eps": cfg["adam_eps"]}},
        seed=args.seed,
        device="cpu",
        verbose=0,
    )

    class TimedEval(EvalCallback):
        """EvalCallback that records (step, mean return) and the time its evaluations take."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.curve, self.seconds = [], 0.0

        def _on_step(self):
            if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                start = time.perf_counter()
                result = super()._on_step()
                self.seconds += time.perf_counter() - start
                self.curve.append([self.num_timesteps, float(self.last_mean_reward)])
                return result
            return super()._on_step()

    callback = TimedEval(
        eval_env,
        n_eval_episodes=cfg["eval_episodes"],
        eval_freq=max(cfg["eval_every"] // n_envs, 1),
        deterministic=True,
        verbose=0,
        callback_on_new_best=(
            StopTrainingOnRewardThreshold(reward_threshold=SOLVED_RETURN, verbose=0) if cfg["stop_when_solved"] else None
        ),
    )
    start = time.perf_counter()
    model.learn(total_timesteps=cfg["total_steps"], callback=callback)
    wall = time.perf_counter() - start
    solved = next((step for step, mean in callback.curve if mean >= SOLVED_RETURN), None)
    print(json.dumps({
        "seed": args.seed,
        "steps": int(model.num_timesteps),
        "evaluations": callback.curve,
        "first_solved_step": solved,
        "train_wall_s": wall - callback.seconds,
        "eval_wall_s": callback.seconds,
        "versions": {
            "stable_baselines3": stable_baselines3.__version__,
            "gymnasium": gymnasium.__version__,
            "torch": torch.__version__,
        },
    }))


if __name__ == "__main__":
    main()
