//! The results of `reagent bench cartpole`: a row per seed, medians, the wall-time ratio and
//! the two goals of issue 11, rendered as a Markdown table (for BENCHMARKS.md) or as JSON.

use std::fmt::Write;

use learner::cartpole::{CartpoleConfig, TrainReport};
use serde::Serialize;

use super::sb3::Sb3Run;

/// Goal: the median step of the first greedy evaluation ≥ 475 (SB3's, measured in issue 11).
const GOAL_STEPS: u64 = 15_000;
/// Goal: our training wall time over SB3's, in the same run.
const GOAL_WALL_RATIO: f64 = 0.5;
/// SB3's steps to evaluation ≥ 475 on seeds 0, 1, 2 as issue 11 quotes them (not measured here).
const QUOTED_SB3_STEPS: [u64; 3] = [10_000, 15_000, 15_000];

/// Where the SB3 figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reference {
    /// Run in this bench, seed by seed beside ours.
    Measured,
    /// Issue 11's figures, quoted: not measured by this run.
    Quoted,
}

/// One seed, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct SeedRow {
    /// The seed.
    pub seed: u64,
    /// Our first greedy evaluation with mean ≥ 475 (None: not within the budget).
    pub solved_at: Option<u64>,
    /// The step at which our last-100 training-episode mean first reached 475.
    pub train_mean_475_at: Option<u64>,
    /// Our mean of the last 100 training episodes at the end.
    pub final_avg_return_100: f64,
    /// Our training wall time, evaluations excluded (s).
    pub train_wall_s: f64,
    /// Our evaluations' wall time (s).
    pub eval_wall_s: f64,
    /// SB3's run of the same seed, when measured.
    pub sb3: Option<Sb3Run>,
}

impl SeedRow {
    /// The row of `seed` from our report and SB3's run.
    pub fn new(seed: u64, ours: &TrainReport, sb3: Option<Sb3Run>) -> Self {
        Self {
            seed,
            solved_at: ours.solved_at,
            train_mean_475_at: ours.train_mean_475_at,
            final_avg_return_100: ours.final_avg_return_100,
            train_wall_s: ours.train_wall.as_secs_f64(),
            eval_wall_s: ours.eval_wall.as_secs_f64(),
            sb3,
        }
    }

    fn sb3_solved_at(&self, reference: Reference) -> Option<u64> {
        match (&self.sb3, reference) {
            (Some(run), _) => run.first_solved_step,
            (None, Reference::Quoted) => QUOTED_SB3_STEPS.get(self.seed as usize).copied(),
            (None, Reference::Measured) => None,
        }
    }
}

/// Everything the bench prints.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The exact command line.
    pub command: String,
    /// The hyper-parameters (of the first seed; the others differ only in the seed).
    pub config: CartpoleConfig,
    /// Per seed.
    pub rows: Vec<SeedRow>,
    /// Where the SB3 figures come from.
    pub reference: Reference,
    /// The 1-minute load average before and after (other work on the machine slows both sides).
    pub load_average: [Option<f64>; 2],
    /// Median of our steps to evaluation ≥ 475 (None: more than half never reached it).
    pub median_solved_at: Option<u64>,
    /// The same for SB3 (measured or quoted).
    pub sb3_median_solved_at: Option<u64>,
    /// Mean of our steps to evaluation ≥ 475 (None: some seed never reached it).
    pub mean_solved_at: Option<f64>,
    /// The same for SB3.
    pub sb3_mean_solved_at: Option<f64>,
    /// Our training wall time over SB3's, summed over the seeds (measured only).
    pub wall_ratio: Option<f64>,
}

/// The median of steps where `None` (never) counts as larger than any step.
fn median(mut xs: Vec<Option<u64>>) -> Option<u64> {
    xs.sort_by_key(|x| x.unwrap_or(u64::MAX));
    let mid = xs.len().checked_sub(1)? / 2;
    xs[mid]
}

/// The mean of steps; `None` when some run never got there (or there are none).
fn mean(xs: &[Option<u64>]) -> Option<f64> {
    let all: Option<Vec<u64>> = xs.iter().copied().collect();
    all.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<u64>() as f64 / v.len() as f64)
}

fn steps(s: Option<u64>) -> String {
    s.map_or("never".into(), |s| s.to_string())
}

impl Summary {
    /// Collects the rows and works out medians and ratios.
    pub fn new(
        command: String,
        config: CartpoleConfig,
        rows: Vec<SeedRow>,
        reference: Reference,
        load_average: [Option<f64>; 2],
    ) -> Self {
        let ours: Vec<Option<u64>> = rows.iter().map(|r| r.solved_at).collect();
        let theirs: Vec<Option<u64>> = rows.iter().map(|r| r.sb3_solved_at(reference)).collect();
        let (median_solved_at, mean_solved_at) = (median(ours.clone()), mean(&ours));
        let (sb3_median_solved_at, sb3_mean_solved_at) = (median(theirs.clone()), mean(&theirs));
        let sb3_wall: Option<f64> = rows.iter().map(|r| r.sb3.as_ref().map(|s| s.train_wall_s)).sum();
        let ours_wall: f64 = rows.iter().map(|r| r.train_wall_s).sum();
        let wall_ratio = sb3_wall.filter(|w| *w > 0.0).map(|w| ours_wall / w);
        Self {
            command,
            config,
            rows,
            reference,
            load_average,
            median_solved_at,
            sb3_median_solved_at,
            mean_solved_at,
            sb3_mean_solved_at,
            wall_ratio,
        }
    }

    /// The Markdown report.
    pub fn table(&self) -> String {
        let c = &self.config;
        let on = |b: bool| if b { "annealed" } else { "constant" };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "CartPole-v1 PPO: {} envs × {} steps, {} minibatch(es) of {}, {} epochs, γ {}, λ {}, lr {} ({}), ε {} ({}), \
             value clip {}, ent {}, vf {} on ½(V−R)², {} steps; greedy evaluation: {} episodes every {} steps",
            c.num_envs,
            c.num_steps,
            c.num_minibatches,
            c.minibatch_size(),
            c.update_epochs,
            c.gamma,
            c.gae_lambda,
            c.lr,
            on(c.anneal_lr),
            c.clip_coef,
            on(c.anneal_clip),
            if c.clip_vloss { "on" } else { "off" },
            c.ent_coef,
            c.vf_coef,
            c.total_steps,
            c.eval_episodes,
            c.eval_every
        );
        let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.1}"));
        let _ = writeln!(s, "command: `{}`", self.command);
        let _ =
            writeln!(s, "load average: {} before, {} after\n", load(self.load_average[0]), load(self.load_average[1]));
        let sb3 = match self.reference {
            Reference::Measured => "SB3",
            Reference::Quoted => "SB3 (quoted from issue 11, not measured)",
        };
        let _ = writeln!(
            s,
            "| seed | ours: eval ≥ 475 at | ours: training mean ≥ 475 at | ours: training wall | {sb3}: eval ≥ 475 at | \
             SB3: training wall | wall ours/SB3 |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for r in &self.rows {
            let (sb3_wall, ratio) = match &r.sb3 {
                Some(run) => {
                    (format!("{:.1} s", run.train_wall_s), format!("{:.2}", r.train_wall_s / run.train_wall_s))
                }
                None => ("—".into(), "—".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} s | {} | {sb3_wall} | {ratio} |",
                r.seed,
                steps(r.solved_at),
                steps(r.train_mean_475_at),
                r.train_wall_s,
                steps(r.sb3_solved_at(self.reference)),
            );
        }
        let ours_wall: f64 = self.rows.iter().map(|r| r.train_wall_s).sum();
        let sb3_wall: Option<f64> = self.rows.iter().map(|r| r.sb3.as_ref().map(|x| x.train_wall_s)).sum();
        let _ = writeln!(
            s,
            "| median / total | {} | — | {ours_wall:.1} s | {} | {} | {} |",
            steps(self.median_solved_at),
            steps(self.sb3_median_solved_at),
            sb3_wall.map_or("—".into(), |w| format!("{w:.1} s")),
            self.wall_ratio.map_or("—".into(), |r| format!("{r:.2}")),
        );
        let avg = |m: Option<f64>| m.map_or("—".into(), |m| format!("{m:.0}"));
        let _ =
            writeln!(s, "| mean | {} | — | — | {} | — | — |\n", avg(self.mean_solved_at), avg(self.sb3_mean_solved_at));
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        let steps_ok = self.median_solved_at.is_some_and(|m| m <= GOAL_STEPS);
        let _ = writeln!(
            s,
            "goal: median steps to eval ≥ 475 ≤ {GOAL_STEPS}: {} ({})",
            met(steps_ok),
            steps(self.median_solved_at)
        );
        match self.wall_ratio {
            Some(r) => {
                let _ = writeln!(
                    s,
                    "goal: training wall ≤ {GOAL_WALL_RATIO}× SB3's: {} ({r:.2}×)",
                    met(r <= GOAL_WALL_RATIO)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "goal: training wall ≤ {GOAL_WALL_RATIO}× SB3's: not measured (run with --against-sb3; issue 11 quotes \
                     SB3 at 4.3 s one day and 7.8–12.5 s another, so wall times compare only within one run)"
                );
            }
        }
        s
    }
}

/// The 1-minute load average from /proc/loadavg (Linux).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_counts_never_as_largest() {
        assert_eq!(median(vec![Some(15_000), None, Some(10_000)]), Some(15_000));
        assert_eq!(median(vec![None, None, Some(10_000)]), None);
        assert_eq!(median(vec![Some(5_000), Some(20_000)]), Some(5_000));
        assert_eq!(median(vec![]), None);
        assert_eq!(mean(&[Some(10_000), Some(20_000)]), Some(15_000.0));
        assert_eq!(mean(&[Some(10_000), None]), None);
    }
}
