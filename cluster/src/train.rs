//! `reagent train cartpole`: PPO on CartPole from the command line, the yardstick for PPO
//! correctness (`learner::cartpole`). Every hyper-parameter is a flag, layered over a preset
//! and an optional TOML file of `CartpoleConfig` keys; shows a progress bar and writes the
//! resolved configuration, the learning curve and the evaluations into the output directory.
//!
//! ```text
//!  preset (--preset zoo)  →  --params FILE (TOML)  →  flags (--lr 3e-4 …)  →  validate()
//!  reagent train cartpole --seed 0   →  runs/cartpole-zoo-0/{config.toml, curve.jsonl, evaluations.jsonl}
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::progress::Progress;
use anyhow::{Context, Result};
use clap::Subcommand;
use clap::{ArgAction, Args, ValueEnum};
use learner::cartpole::{self, CartpoleConfig, CartpolePreset, TrainReport, UpdateStats};

use crate::sft::GrpoArgs;

/// `reagent train …`
#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// PPO on CartPole-v1 (CleanRL's and Stable-Baselines3's algorithm on Reagent's learner
    /// pieces), every hyper-parameter a flag over a preset (default: RL-Zoo's tuned `zoo`).
    /// Succeeds when a greedy evaluation (20 episodes every 5,000 steps, on environments of its
    /// own) averages 475, as RL-Zoo judges CartPole-v1 solved.
    Cartpole(Box<CartpoleArgs>),

    /// GRPO with outcome reward in one process (generation and learning, no Redis), from a
    /// model directory such as `reagent sft`'s; writes rl_curve.jsonl, rl_report.json and the
    /// trained model. Greedy held-out success is measured before and after.
    Grpo(GrpoArgs),
}

/// Options of `reagent train cartpole`.
#[derive(Debug, Clone, Args)]
pub struct CartpoleArgs {
    /// Seed of weights, resets, actions, minibatch order and evaluation episodes.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Where to write config.toml, curve.jsonl and evaluations.jsonl (default
    /// runs/cartpole-<preset>-<seed>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// The hyper-parameters (last, so that their heading holds only them).
    #[command(flatten)]
    pub knobs: CartpoleKnobs,
}

/// CartPole hyper-parameter presets (`learner::cartpole::presets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    /// RL-Zoo's tuned CartPole-v1 PPO: 8 envs × 32 steps, one minibatch of 256, 20 epochs,
    /// γ 0.98, λ 0.8, no entropy bonus, lr 1e-3 and ε 0.2 annealed, 100k steps.
    Zoo,
    /// CleanRL's hyper-parameters with lr 1e-3, 200k steps.
    Yardstick,
    /// CleanRL's hyper-parameters (lr 2.5e-4), 200k steps.
    Default,
    /// CleanRL `ppo.py`'s own run: 500k steps.
    Cleanrl,
}

impl From<PresetArg> for CartpolePreset {
    fn from(p: PresetArg) -> Self {
        match p {
            PresetArg::Zoo => Self::Zoo,
            PresetArg::Yardstick => Self::Yardstick,
            PresetArg::Default => Self::Default,
            PresetArg::Cleanrl => Self::Cleanrl,
        }
    }
}

/// Every PPO knob of a CartPole run; each flag overrides the `CartpoleConfig` key it names.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Hyper-parameters (each overrides the preset and --params)")]
pub struct CartpoleKnobs {
    /// The starting point.
    #[arg(long, value_enum, default_value_t = PresetArg::Zoo)]
    pub preset: PresetArg,
    /// A TOML file of `CartpoleConfig` keys (e.g. `lr = 3e-4`), flat or under `[cartpole]`,
    /// layered over the preset; an unknown key is an error.
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// total_steps: the environment-step budget.
    #[arg(long, value_name = "N")]
    pub total_steps: Option<u64>,
    /// num_envs: CartPoles stepped together.
    #[arg(long, value_name = "N")]
    pub envs: Option<usize>,
    /// num_steps: steps per environment per iteration (batch = envs × steps-per-env).
    #[arg(long, value_name = "N")]
    pub steps_per_env: Option<usize>,
    /// num_minibatches: minibatches per epoch (minibatch = batch / minibatches).
    #[arg(long, value_name = "N")]
    pub minibatches: Option<usize>,
    /// update_epochs: passes over each batch.
    #[arg(long, value_name = "N")]
    pub epochs: Option<usize>,
    /// gamma: the discount.
    #[arg(long, value_name = "G")]
    pub gamma: Option<f64>,
    /// gae_lambda: GAE's λ.
    #[arg(long, value_name = "L")]
    pub gae_lambda: Option<f64>,
    /// lr: Adam's learning rate at the start.
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,
    /// anneal_lr: decay the rate linearly to 0 over the budget.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub anneal_lr: Option<bool>,
    /// clip_coef: the PPO ratio clip ε at the start.
    #[arg(long, value_name = "EPS")]
    pub clip_coef: Option<f64>,
    /// anneal_clip: decay ε linearly to 0 over the budget.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub anneal_clip: Option<bool>,
    /// clip_vloss: clip the value loss around the old values by ε (CleanRL's).
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub clip_vloss: Option<bool>,
    /// ent_coef: the entropy bonus.
    #[arg(long, value_name = "C")]
    pub ent_coef: Option<f64>,
    /// vf_coef: the weight of the value loss ½(V − R)² (Stable-Baselines3's vf_coef × 2).
    #[arg(long, value_name = "C")]
    pub vf_coef: Option<f64>,
    /// norm_adv: whiten advantages per minibatch.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub norm_adv: Option<bool>,
    /// max_grad_norm: the global gradient-norm clip (0: none).
    #[arg(long, value_name = "N")]
    pub max_grad_norm: Option<f64>,
    /// eval_every: greedy evaluation every N environment steps (0: none).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<u64>,
    /// eval_episodes: episodes per evaluation.
    #[arg(long, value_name = "N")]
    pub eval_episodes: Option<usize>,
    /// stop_when_solved: end the run at the first evaluation with mean ≥ 475.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub stop_when_solved: Option<bool>,
}

impl CartpoleKnobs {
    /// The configuration: the preset, then the --params file, then the flags; validated.
    pub fn resolve(&self, seed: u64) -> Result<CartpoleConfig> {
        let mut c = CartpolePreset::from(self.preset).config();
        if let Some(path) = &self.params {
            c = layered(&c, path)?;
        }
        c.seed = seed;
        fn set<T: Clone>(slot: &mut T, flag: &Option<T>) {
            if let Some(v) = flag {
                *slot = v.clone();
            }
        }
        set(&mut c.total_steps, &self.total_steps);
        set(&mut c.num_envs, &self.envs);
        set(&mut c.num_steps, &self.steps_per_env);
        set(&mut c.num_minibatches, &self.minibatches);
        set(&mut c.update_epochs, &self.epochs);
        set(&mut c.gamma, &self.gamma);
        set(&mut c.gae_lambda, &self.gae_lambda);
        set(&mut c.lr, &self.lr);
        set(&mut c.anneal_lr, &self.anneal_lr);
        set(&mut c.clip_coef, &self.clip_coef);
        set(&mut c.anneal_clip, &self.anneal_clip);
        set(&mut c.clip_vloss, &self.clip_vloss);
        set(&mut c.ent_coef, &self.ent_coef);
        set(&mut c.vf_coef, &self.vf_coef);
        set(&mut c.norm_adv, &self.norm_adv);
        set(&mut c.max_grad_norm, &self.max_grad_norm);
        set(&mut c.eval_every, &self.eval_every);
        set(&mut c.eval_episodes, &self.eval_episodes);
        set(&mut c.stop_when_solved, &self.stop_when_solved);
        c.validate()?;
        Ok(c)
    }
}

/// `base` with the keys of the TOML file at `path` (flat, or under `[cartpole]`) replaced.
fn layered(base: &CartpoleConfig, path: &Path) -> Result<CartpoleConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut overlay: toml::Table = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    if let (1, Some(toml::Value::Table(inner))) = (overlay.len(), overlay.get("cartpole")) {
        overlay = inner.clone();
    }
    let mut table = toml::Table::try_from(base).context("the preset as TOML")?;
    table.extend(overlay);
    table.try_into().with_context(|| format!("{}: not a CartPole configuration", path.display()))
}

/// A progress bar over a run's iterations, with the latest evaluation and training mean.
pub fn progress_bar(cfg: &CartpoleConfig) -> Result<Progress> {
    Progress::new(cfg.iterations(), "training", "iterations", "{bar:30} {pos}/{len} iterations {msg} [{elapsed}]")
}

/// The bar's message after an iteration.
pub fn progress_message(u: &UpdateStats) -> String {
    let eval = u.last_eval.as_ref().map_or("-".into(), |e| format!("{:.1}", e.mean()));
    let train = u.avg_return_100.map_or("-".into(), |a| format!("{a:.1}"));
    format!("step {} greedy eval {eval} training mean {train}", u.global_step)
}

/// Trains, prints a summary, and writes the files; `Ok(false)` when no evaluation reached 475.
pub async fn cartpole(args: CartpoleArgs) -> Result<bool> {
    let cfg = args.knobs.resolve(args.seed)?;
    let preset = CartpolePreset::from(args.knobs.preset).name();
    let out = args.out.unwrap_or_else(|| PathBuf::from(format!("runs/cartpole-{preset}-{}", args.seed)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let create = |name: &str| {
        let path = out.join(name);
        std::fs::File::create(&path)
            .map(std::io::BufWriter::new)
            .with_context(|| format!("creating {}", path.display()))
    };
    create("config.toml")?.write_all(toml::to_string(&cfg)?.as_bytes())?;
    let (mut curve, mut evals) = (create("curve.jsonl")?, create("evaluations.jsonl")?);
    let progress = progress_bar(&cfg)?;
    let report = tokio::task::spawn_blocking(move || -> Result<TrainReport> {
        let report = cartpole::train(&cfg, |u| {
            progress.set_position(u.iteration);
            progress.set_message(progress_message(u));
            let line = serde_json::json!({
                "iteration": u.iteration, "global_step": u.global_step, "lr": u.lr, "clip": u.clip,
                "eval_mean": u.last_eval.as_ref().map(|e| e.mean()), "avg_return_100": u.avg_return_100,
                "episodes": u.episodes, "explained_variance": u.explained_variance, "grad_norm": u.grad_norm,
                "elapsed_s": u.elapsed.as_secs_f64(), "eval_elapsed_s": u.eval_elapsed.as_secs_f64(),
            });
            let _ = writeln!(curve, "{line}");
        });
        progress.finish_and_clear();
        let report = report?;
        for e in &report.evaluations {
            writeln!(evals, "{}", serde_json::json!({"step": e.step, "mean": e.mean(), "returns": e.returns}))?;
        }
        curve.flush()?;
        evals.flush()?;
        Ok(report)
    })
    .await??;
    println!(
        "cartpole ({preset}, seed {}): {} steps, training {:.1} s (+{:.1} s evaluating)",
        args.seed,
        report.steps,
        report.train_wall.as_secs_f64(),
        report.eval_wall.as_secs_f64()
    );
    let at = |s: Option<u64>| s.map_or("never".into(), |s| format!("at step {s}"));
    println!("  greedy evaluation mean ≥ 475 (the criterion): {}", at(report.solved_at));
    println!(
        "  training episodes: mean of the last 100 = {:.1}; reached 475 {}",
        report.final_avg_return_100,
        at(report.train_mean_475_at)
    );
    println!("  files: {}", out.display());
    Ok(report.solved())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train_args(args: &[&str]) -> CartpoleArgs {
        crate::cli::parse(args).expect("parses")
    }

    #[test]
    fn flags_override_the_preset_and_name_their_key_when_bad() {
        let a = train_args(&["--seed", "2", "--lr", "3e-4", "--anneal-clip", "false", "--minibatches", "4"]);
        let c = a.knobs.resolve(a.seed).unwrap();
        let want =
            CartpoleConfig { seed: 2, lr: 3e-4, anneal_clip: false, num_minibatches: 4, ..CartpoleConfig::zoo() };
        assert_eq!(c, want);
        let d = train_args(&["--preset", "yardstick"]);
        assert_eq!(d.knobs.resolve(0).unwrap(), CartpoleConfig { seed: 0, ..CartpoleConfig::yardstick() });
        let bad = train_args(&["--minibatches", "3"]).knobs.resolve(0).unwrap_err();
        assert!(format!("{bad:#}").contains("cartpole.num_minibatches"), "{bad:#}");
        assert!(crate::cli::parse::<CartpoleArgs>(&["--clip-vloss", "maybe"]).is_err());
    }

    #[test]
    fn a_params_file_layers_between_preset_and_flags() {
        let dir = std::env::temp_dir().join(format!("reagent-cartpole-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (flat, nested, unknown) = (dir.join("flat.toml"), dir.join("nested.toml"), dir.join("unknown.toml"));
        std::fs::write(&flat, "gamma = 0.99\nupdate_epochs = 10\n").unwrap();
        std::fs::write(&nested, "[cartpole]\ngamma = 0.99\n").unwrap();
        std::fs::write(&unknown, "gama = 0.99\n").unwrap();
        let with = |path: &Path, extra: &[&str]| {
            let p = path.to_str().unwrap();
            train_args(&[&["--params", p], extra].concat()).knobs.resolve(0)
        };
        let c = with(&flat, &["--epochs", "5"]).unwrap();
        assert_eq!((c.gamma, c.update_epochs, c.num_envs), (0.99, 5, 8), "file over preset, flag over file");
        assert_eq!(with(&nested, &[]).unwrap().gamma, 0.99);
        let err = with(&unknown, &[]).unwrap_err();
        assert!(format!("{err:#}").contains("gama"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
