//! The results of `reagent bench trl`: per batch size, each side's end-to-end completion
//! tokens/s and tokens/s inside generation (medians over the repeats), the ratio ours/TRL and
//! the goal (≥ 3×), and the kernel floor beside them: the step's products and attention
//! alone, the share of it each side reaches, and the highest ratio any implementation over those
//! kernels could reach (floor tokens/s over TRL's), as a Markdown table or JSON.

use std::fmt::Write;

use serde::Serialize;

use super::floor::Floor;
use crate::report::median;

/// Goal: our end-to-end completion tokens/s over TRL's, at every batch size.
pub const GOAL_RATIO: f64 = 3.0;

/// The measured steps of one run of one side (the warm-up left out).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RunFigures {
    /// Completion tokens sampled.
    pub completion_tokens: u64,
    /// Wall time of the steps (generation, reward, update and the trainer's own work).
    pub seconds: f64,
    /// Of which inside generation.
    pub generate_seconds: f64,
    /// Of which in the update: ours its forward, backward and optimizer step; TRL's the loss's
    /// forward and backward (its optimizer step counts as other time).
    pub update_seconds: f64,
    /// Steps counted.
    pub steps: u64,
    /// Mean reward of the completions (ours only; TRL's is not read back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_reward: Option<f64>,
}

impl RunFigures {
    /// Adds one step.
    pub fn add(&mut self, tokens: u64, seconds: f64, generate_seconds: f64, update_seconds: f64) {
        self.steps += 1;
        self.update_seconds += update_seconds;
        self.completion_tokens += tokens;
        self.seconds += seconds;
        self.generate_seconds += generate_seconds;
    }

    /// End-to-end completion tokens per second.
    pub fn tokens_per_sec(&self) -> f64 {
        self.completion_tokens as f64 / self.seconds.max(1e-9)
    }

    /// Mean seconds per step in (generation, update, everything else).
    pub fn split(&self) -> [f64; 3] {
        let n = self.steps.max(1) as f64;
        let other = (self.seconds - self.generate_seconds - self.update_seconds).max(0.0);
        [self.generate_seconds / n, self.update_seconds / n, other / n]
    }

    /// Completion tokens per second inside generation.
    pub fn generate_tokens_per_sec(&self) -> f64 {
        self.completion_tokens as f64 / self.generate_seconds.max(1e-9)
    }
}

/// One batch size: every repeat of both sides and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Completions per step (prompts × 8).
    pub completions_per_step: usize,
    /// Our runs.
    pub ours: Vec<RunFigures>,
    /// TRL's runs.
    pub trl: Vec<RunFigures>,
    /// Median end-to-end tokens/s, ours.
    pub ours_tokens_per_sec: f64,
    /// Median end-to-end tokens/s, TRL.
    pub trl_tokens_per_sec: f64,
    /// Median tokens/s inside generation, ours.
    pub ours_generate_tokens_per_sec: f64,
    /// Median tokens/s inside generation, TRL.
    pub trl_generate_tokens_per_sec: f64,
    /// `ours_tokens_per_sec / trl_tokens_per_sec`.
    pub ratio: f64,
    /// Median seconds per step in generation, update and the rest ([`RunFigures::split`]), ours.
    pub ours_split: [f64; 3],
    /// The same, TRL.
    pub trl_split: [f64; 3],
    /// The kernel floor of a step at this size.
    pub floor: Floor,
    /// `floor.tokens_per_sec() / trl_tokens_per_sec`: the highest ratio reachable over these
    /// kernels at this size.
    pub reachable_ratio: f64,
    /// `floor.peak_tokens_per_sec() / trl_tokens_per_sec`: the highest ratio reachable by any
    /// code on these cores (the products alone at the peak rate).
    pub peak_ratio: f64,
}

impl Row {
    /// The row of `completions_per_step` from both sides' runs.
    pub fn new(completions_per_step: usize, ours: Vec<RunFigures>, trl: Vec<RunFigures>, floor: Floor) -> Self {
        let med = |runs: &[RunFigures], f: fn(&RunFigures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let split = |runs: &[RunFigures]| {
            let parts: Vec<[f64; 3]> = runs.iter().map(RunFigures::split).collect();
            [0, 1, 2].map(|i| median(&parts.iter().map(|p| p[i]).collect::<Vec<_>>()))
        };
        let ours_tps = med(&ours, RunFigures::tokens_per_sec);
        let trl_tps = med(&trl, RunFigures::tokens_per_sec);
        Self {
            completions_per_step,
            ours_generate_tokens_per_sec: med(&ours, RunFigures::generate_tokens_per_sec),
            trl_generate_tokens_per_sec: med(&trl, RunFigures::generate_tokens_per_sec),
            ours_tokens_per_sec: ours_tps,
            trl_tokens_per_sec: trl_tps,
            ratio: ours_tps / trl_tps.max(1e-9),
            ours_split: split(&ours),
            trl_split: split(&trl),
            reachable_ratio: floor.tokens_per_sec() / trl_tps.max(1e-9),
            peak_ratio: floor.peak_tokens_per_sec() / trl_tps.max(1e-9),
            floor,
            ours,
            trl,
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The command line.
    pub command: String,
    /// Measured steps per run (after the warm-up).
    pub steps: u64,
    /// Warm-up steps per run.
    pub warmup_steps: u64,
    /// Repeats per batch size.
    pub repeats: u16,
    /// Torch threads per side.
    pub threads: usize,
    /// TRL's versions as imported.
    pub versions: serde_json::Value,
    /// The 1-minute load average before and after.
    pub load_average: [Option<f64>; 2],
    /// One row per batch size.
    pub rows: Vec<Row>,
}

impl Summary {
    /// Whether every row reaches [`GOAL_RATIO`].
    pub fn goal_met(&self) -> bool {
        self.rows.iter().all(|r| r.ratio >= GOAL_RATIO)
    }

    /// The Markdown table and the lines around it.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.2}"));
        let _ = writeln!(s, "command: {}", self.command);
        let _ = writeln!(
            s,
            "{} measured steps after {} warm-up, {} repeats, {} torch thread(s) per side, sides run one after the \
             other; TRL side: {}; load average {} → {}\n",
            self.steps,
            self.warmup_steps,
            self.repeats,
            self.threads,
            self.versions,
            load(self.load_average[0]),
            load(self.load_average[1])
        );
        let _ = writeln!(
            s,
            "| completions/step | ours tok/s | TRL tok/s | ratio | ours in generate tok/s | TRL in generate tok/s |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.0} | **{:.2}** | {:.0} | {:.0} |",
                r.completions_per_step,
                r.ours_tokens_per_sec,
                r.trl_tokens_per_sec,
                r.ratio,
                r.ours_generate_tokens_per_sec,
                r.trl_generate_tokens_per_sec
            );
        }
        let _ = writeln!(
            s,
            "\nwhere a step's time goes (ms, medians; update: ours forward, backward and AdamW step, TRL the loss's \
             forward and backward, its optimizer step in other)\n"
        );
        let _ = writeln!(s, "| completions/step | side | generate | update | other | step |");
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|");
        for r in &self.rows {
            for (side, p) in [("ours", r.ours_split), ("TRL", r.trl_split)] {
                let ms = p.map(|x| x * 1e3);
                let _ = writeln!(
                    s,
                    "| {} | {side} | {:.0} | {:.0} | {:.0} | {:.0} |",
                    r.completions_per_step,
                    ms[0],
                    ms[1],
                    ms[2],
                    ms.iter().sum::<f64>()
                );
            }
        }
        let _ = writeln!(
            s,
            "\nkernel floor: the step's matrix products and attention alone (forward and backward in the update), \
             at its shapes (the longest prompt, every completion to the token budget), fastest of 5 passes; \
             nothing built on these kernels goes faster. At peak: the products alone at the rate of one \
             1024×1024 product ({:.1} GFLOP/s); no code on these cores goes faster\n",
            self.rows.first().map_or(0.0, |r| r.floor.peak_flops_per_sec / 1e9)
        );
        let _ = writeln!(
            s,
            "| completions/step | floor generate ms | floor update ms | floor tok/s | products GFLOP/s | ours / floor | \
             TRL / floor | highest ratio over these kernels | at peak tok/s | highest ratio at peak |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &self.rows {
            let f = &r.floor;
            let floor_tps = f.tokens_per_sec();
            let flops = f.product_flops.iter().sum::<f64>() / (f.generate_seconds + f.update_seconds).max(1e-12);
            let _ = writeln!(
                s,
                "| {} | {:.1} | {:.1} | {:.0} | {:.1} | {:.2} | {:.2} | **{:.2}** | {:.0} | **{:.2}** |",
                r.completions_per_step,
                f.generate_seconds * 1e3,
                f.update_seconds * 1e3,
                floor_tps,
                flops / 1e9,
                r.ours_tokens_per_sec / floor_tps.max(1e-9),
                r.trl_tokens_per_sec / floor_tps.max(1e-9),
                r.reachable_ratio,
                f.peak_tokens_per_sec(),
                r.peak_ratio
            );
        }
        let verdict = if self.goal_met() { "met" } else { "not met" };
        let _ = writeln!(s, "\ngoal (ours ≥ {GOAL_RATIO}× TRL's end-to-end tokens/s at every size): {verdict}");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tokens: u64, seconds: f64, generate: f64) -> RunFigures {
        let mut r = RunFigures::default();
        r.add(tokens, seconds, generate, seconds / 4.0);
        r
    }

    /// A floor of 0.2 s generating and 0.3 s updating for 1,000 tokens: 2,000 tokens/s, its
    /// products 1.5 GFLOP in all (3 GFLOP/s); at a peak of 5 GFLOP/s they take 0.3 s: 3,333
    /// tokens/s.
    fn floor() -> Floor {
        Floor {
            generate_seconds: 0.2,
            update_seconds: 0.3,
            tokens: 1000,
            product_flops: [0.5e9, 1e9],
            peak_flops_per_sec: 5e9,
        }
    }

    #[test]
    fn rows_take_medians_and_the_goal_needs_every_size() {
        let row = Row::new(
            8,
            vec![run(900, 1.0, 0.5), run(800, 1.0, 0.4), run(1000, 1.0, 0.5)],
            vec![run(300, 1.0, 0.5), run(250, 1.0, 0.5), run(350, 1.0, 0.5)],
            floor(),
        );
        assert_eq!((row.ours_tokens_per_sec, row.trl_tokens_per_sec), (900.0, 300.0));
        assert!((row.ratio - 3.0).abs() < 1e-12);
        assert_eq!(row.ours_generate_tokens_per_sec, 2000.0);
        // Generation 0.5 s (median of 0.5, 0.4, 0.5), update 0.25 s, the rest 0.25 s.
        assert_eq!(row.ours_split, [0.5, 0.25, 0.25]);
        let mut summary = Summary {
            command: "reagent bench trl".into(),
            steps: 1,
            warmup_steps: 1,
            repeats: 3,
            threads: 1,
            versions: serde_json::json!({}),
            load_average: [None, None],
            rows: vec![row.clone()],
        };
        assert!(summary.goal_met());
        let table = summary.table();
        assert!(table.contains("| 8 | 900 | 300 | **3.00** | 2000 | 600 |"), "{table}");
        assert!(table.contains("| 8 | ours | 500 | 250 | 250 | 1000 |"), "{table}");
        // Floor 2,000 tokens/s: ours at 900 is 0.45 of it, TRL at 300 is 0.15, and nothing over
        // these kernels beats TRL by more than 2,000 / 300.
        assert!((row.reachable_ratio - 2000.0 / 300.0).abs() < 1e-9, "{}", row.reachable_ratio);
        assert!((row.peak_ratio - (1000.0 / 0.3) / 300.0).abs() < 1e-9, "{}", row.peak_ratio);
        assert!(
            table.contains("| 8 | 200.0 | 300.0 | 2000 | 3.0 | 0.45 | 0.15 | **6.67** | 3333 | **11.11** |"),
            "{table}"
        );
        assert!(table.contains("(5.0 GFLOP/s)"), "{table}");
        summary.rows.push(Row::new(64, vec![run(100, 1.0, 0.5)], vec![run(50, 1.0, 0.5)], floor()));
        assert!(!summary.goal_met() && summary.table().contains("not met"));
    }
}
