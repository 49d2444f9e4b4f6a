//! `reagent bench pipeline`'s account of where a group's time goes in the distributed run:
//! the actors' phase times (their role reports in `logs/actor-*.log`, summed over the run), the
//! trajectories' own timing and the RRM's judging latency (the scored stream in the window), and
//! the learner's view of how old trajectories are when it trains them (`metrics.jsonl`).
//!
//! ```text
//!  actor report:  initial_us publish_us critique_wait_us refined_us groups ─► mean ms per group
//!  scored stream: timing.generation_ms, timing.env_ms, judgement.latency_ms,
//!                 entry time − timing.finished_at_ms                       ─► per trajectory
//!  metrics.jsonl: initial_age_ms_median, refined_age_ms_median             ─► median of updates
//!                update_seconds, padded_tokens, trained_tokens by batch kind ─► per kind
//! ```
//!
//! The kinds show how the learner's time splits in a mode that refines: its updates alternate
//! between batches of initial and of refined groups, and a refined batch's long prompts cost it
//! several positions computed per token trained.

use std::path::Path;

use protocol::wire::{Attempt, ScoredTrajectory, Verdict};

use super::report::median;

/// Means over the scored trajectories of one attempt kind in a window.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AttemptTimes {
    /// How many there were.
    pub trajectories: usize,
    /// Mean generation time (`timing.generation_ms`: waiting for and running the policy).
    pub generation_ms_mean: f64,
    /// Mean environment time (`timing.env_ms`).
    pub env_ms_mean: f64,
    /// Mean trained (agent) tokens.
    pub agent_tokens_mean: f64,
}

impl AttemptTimes {
    fn of(items: &[&ScoredTrajectory]) -> Self {
        let n = items.len().max(1) as f64;
        let mean = |f: &dyn Fn(&ScoredTrajectory) -> f64| items.iter().map(|s| f(s)).sum::<f64>() / n;
        Self {
            trajectories: items.len(),
            generation_ms_mean: mean(&|s| s.trajectory.timing.generation_ms as f64),
            env_ms_mean: mean(&|s| s.trajectory.timing.env_ms as f64),
            agent_tokens_mean: mean(&|s| s.trajectory.trained_tokens() as f64),
        }
    }
}

/// What the scored trajectories of a window say of their own time.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StreamTimes {
    /// The initial attempts.
    pub initial: AttemptTimes,
    /// The refined attempts.
    pub refined: AttemptTimes,
    /// Mean judge latency of the judged ones (`judgement.latency_ms`); `None`: none judged.
    pub judge_ms_mean: Option<f64>,
    /// Median from an episode's end to its entry on the scored stream (actor publish, rollouts
    /// queue, RRM batch and judge).
    pub to_scored_ms_median: f64,
}

/// The times of `scored` entries: (entry ms, stream id, trajectory).
pub fn stream_times(scored: &[(u64, String, ScoredTrajectory)]) -> StreamTimes {
    let (initial, refined): (Vec<&ScoredTrajectory>, Vec<&ScoredTrajectory>) =
        scored.iter().map(|(_, _, s)| s).partition(|s| s.trajectory.attempt == Attempt::Initial);
    let judged: Vec<f64> = scored
        .iter()
        .filter_map(|(_, _, s)| match &s.verdict {
            Verdict::Judged(j) => Some(f64::from(j.latency_ms)),
            _ => None,
        })
        .collect();
    let to_scored: Vec<f64> =
        scored.iter().map(|(ms, _, s)| ms.saturating_sub(s.trajectory.timing.finished_at_ms) as f64).collect();
    StreamTimes {
        initial: AttemptTimes::of(&initial),
        refined: AttemptTimes::of(&refined),
        judge_ms_mean: (!judged.is_empty()).then(|| judged.iter().sum::<f64>() / judged.len() as f64),
        to_scored_ms_median: if to_scored.is_empty() { 0.0 } else { median(&to_scored) },
    }
}

/// The actors' phase times over the run, summed over their processes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phases {
    /// Groups whose initial attempts were published.
    pub groups: u64,
    /// Microseconds per phase: initial, publish, critique wait, refined.
    pub us: [u64; 4],
}

/// The phases' names, in [`Phases::us`] order, as the actor's report names them.
const PHASES: [&str; 4] = ["initial_us", "publish_us", "critique_wait_us", "refined_us"];

impl Phases {
    /// Mean milliseconds per group of each phase (0 without groups).
    pub fn mean_ms(&self) -> [f64; 4] {
        self.us.map(|us| if self.groups == 0 { 0.0 } else { us as f64 / 1000.0 / self.groups as f64 })
    }

    /// Adds an actor's report line (`actor shut down: groups 3, initial 24, …`); `false` when the
    /// line is not one.
    fn add_report(&mut self, line: &str) -> bool {
        let Some((head, counters)) = line.split_once(": ") else { return false };
        if !head.starts_with("actor shut down") {
            return false;
        }
        for pair in counters.split(", ") {
            let Some((name, value)) = pair.split_once(' ') else { continue };
            let Ok(value) = value.parse::<u64>() else { continue };
            if name == "groups" {
                self.groups += value;
            } else if let Some(i) = PHASES.iter().position(|p| *p == name) {
                self.us[i] += value;
            }
        }
        true
    }

    /// The phases of every `actor-*.log` in `logs` (their last report line each).
    pub fn of_logs(logs: &Path) -> Self {
        let mut out = Self::default();
        let Ok(dir) = std::fs::read_dir(logs) else { return out };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("actor-") && name.ends_with(".log")) {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if let Some(line) = text.lines().rev().find(|l| l.starts_with("actor shut down:")) {
                out.add_report(line);
            }
        }
        out
    }
}

/// What the learner's update records (`metrics.jsonl`) say about its side of the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LearnerSide {
    /// Median over the updates of each update's median age (ms) of trained initial attempts.
    pub initial_age_ms: Option<f64>,
    /// The same for refined attempts.
    pub refined_age_ms: Option<f64>,
    /// Updates by what their batch held: initial attempts only, refined only, both.
    pub kinds: [UpdateKind; 3],
}

/// Updates of one batch kind: how many, how long, and what they computed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdateKind {
    /// Each update's seconds.
    pub seconds: Vec<f64>,
    /// Positions computed (`padded_tokens`: prompts and padding included), summed.
    pub positions: f64,
    /// Tokens trained on, summed.
    pub trained: f64,
}

/// The batch kinds of [`LearnerSide::kinds`], in order.
const KINDS: [&str; 3] = ["initial only", "refined only", "initial and refined"];

/// Reads `metrics`: the median ages, and the updates by batch kind (an update's kind from which
/// of `initial_success_rate` and `refined_success_rate` it reports).
pub fn learner_side(metrics: &Path) -> LearnerSide {
    let text = std::fs::read_to_string(metrics).unwrap_or_default();
    let records: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let of = |field: &str| {
        let v: Vec<f64> = records.iter().filter_map(|r| r[field].as_f64()).collect();
        (!v.is_empty()).then(|| median(&v))
    };
    let mut kinds: [UpdateKind; 3] = Default::default();
    for r in &records {
        let kind = match (r["initial_success_rate"].is_number(), r["refined_success_rate"].is_number()) {
            (true, false) => 0,
            (false, true) => 1,
            (true, true) => 2,
            (false, false) => continue,
        };
        let k = &mut kinds[kind];
        k.seconds.push(r["update_seconds"].as_f64().unwrap_or(0.0));
        k.positions += r["padded_tokens"].as_f64().unwrap_or(0.0);
        k.trained += r["trained_tokens"].as_f64().unwrap_or(0.0);
    }
    LearnerSide { initial_age_ms: of("initial_age_ms_median"), refined_age_ms: of("refined_age_ms_median"), kinds }
}

/// Prints the breakdown below the efficiency figures.
pub fn print(phases: &Phases, stream: &StreamTimes, learner: &LearnerSide) {
    let [initial, publish, wait, refined] = phases.mean_ms();
    let total = initial + publish + wait + refined;
    let share = |x: f64| if total > 0.0 { 100.0 * x / total } else { 0.0 };
    println!(
        "group wall time (mean ms per group over {} groups, the whole run): initial {initial:.0} ({:.0}%), publish \
         {publish:.1} ({:.0}%), critique wait {wait:.0} ({:.0}%), refined {refined:.0} ({:.0}%); total {total:.0}",
        phases.groups,
        share(initial),
        share(publish),
        share(wait),
        share(refined)
    );
    let judge = stream.judge_ms_mean.map_or_else(|| "none judged".to_string(), |j| format!("{j:.1} ms"));
    for (name, a) in [("initial", &stream.initial), ("refined", &stream.refined)] {
        if a.trajectories > 0 {
            println!(
                "{name} attempts scored in the window: {}, per trajectory generation {:.0} ms, environment {:.0} ms, \
                 {:.0} agent tokens (means)",
                a.trajectories, a.generation_ms_mean, a.env_ms_mean, a.agent_tokens_mean
            );
        }
    }
    println!(
        "RRM judge {judge} per trajectory (mean); episode end → scored stream {:.0} ms (median)",
        stream.to_scored_ms_median
    );
    let ms = |a: Option<f64>| a.map_or_else(|| "-".to_string(), |v| format!("{v:.0} ms"));
    println!(
        "age when trained (median of the updates' medians; one host's clock): initial {}, refined {}",
        ms(learner.initial_age_ms),
        ms(learner.refined_age_ms)
    );
    let total: f64 = learner.kinds.iter().flat_map(|k| &k.seconds).sum();
    for (name, k) in KINDS.iter().zip(&learner.kinds).filter(|(_, k)| !k.seconds.is_empty()) {
        let spent: f64 = k.seconds.iter().sum();
        println!(
            "learner updates of {name}: {} (median {:.1} s, {:.0}% of update time), {:.0} positions computed per \
             trained token",
            k.seconds.len(),
            median(&k.seconds),
            if total > 0.0 { 100.0 * spent / total } else { 0.0 },
            if k.trained > 0.0 { k.positions / k.trained } else { 0.0 },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_reports_are_summed_over_actor_logs_only() {
        let dir = tempfile::tempdir().unwrap();
        let report = "actor shut down: groups 2, initial 16, restarts 0, initial_us 4000, publish_us 200, \
                      critique_wait_us 1000, refined_us 3000";
        std::fs::write(dir.path().join("actor-1.log"), format!("INFO starting\n{report}\n")).unwrap();
        std::fs::write(dir.path().join("actor-2.log"), format!("{report}\n")).unwrap();
        std::fs::write(dir.path().join("rrm.log"), "actor shut down: groups 99\n").unwrap();
        std::fs::write(dir.path().join("actor-3.log"), "actor shut down before starting\n").unwrap();
        let p = Phases::of_logs(dir.path());
        assert_eq!(p, Phases { groups: 4, us: [8000, 400, 2000, 6000] });
        assert_eq!(p.mean_ms(), [2.0, 0.1, 0.5, 1.5]);
        assert_eq!(Phases::default().mean_ms(), [0.0; 4], "no groups: no division by zero");
        assert!(!Phases::default().add_report("learner shut down: steps 3"));
    }

    fn scored(entry_ms: u64, finished: u64, generation: u64, verdict: Verdict) -> (u64, String, ScoredTrajectory) {
        let attempt =
            if generation > 70 { Attempt::Refined { of: protocol::wire::TrajectoryId(0) } } else { Attempt::Initial };
        use protocol::wire::*;
        let trajectory = Trajectory {
            run_id: RunId::new("t").unwrap(),
            id: TrajectoryId(u128::from(entry_ms)),
            actor_id: ActorId("actor-1".into()),
            task: TaskSpec { family: TaskFamily::Math, seed: 0, difficulty: 1 },
            group_id: GroupId(0),
            attempt,
            policy_version: PolicyVersion(0),
            episode: Episode::Text(Vec::new()),
            outcome_reward: 0.0,
            timing: Timing { started_at_ms: 0, finished_at_ms: finished, generation_ms: generation, env_ms: 2 },
        };
        (entry_ms, format!("{entry_ms}-0"), ScoredTrajectory { trajectory, verdict })
    }

    #[test]
    fn stream_times_average_the_trajectories_and_judge_only_the_judged() {
        let judged = |latency_ms| {
            Verdict::Judged(protocol::wire::Judgement {
                trace: String::new(),
                critique: String::new(),
                score: 0.5,
                judge_id: "reference".into(),
                latency_ms,
            })
        };
        let window = [
            scored(1_000, 900, 40, judged(3)),
            scored(2_000, 1_700, 60, judged(5)),
            scored(3_000, 2_000, 80, Verdict::NotRequested),
        ];
        let t = stream_times(&window);
        assert_eq!((t.initial.trajectories, t.initial.generation_ms_mean, t.initial.env_ms_mean), (2, 50.0, 2.0));
        assert_eq!((t.refined.trajectories, t.refined.generation_ms_mean), (1, 80.0), "split by attempt");
        assert_eq!(t.judge_ms_mean, Some(4.0), "the mean of the judged ones");
        assert_eq!(t.to_scored_ms_median, 300.0, "ends 100, 300 and 1000 ms before their entries");
        let none = stream_times(&window[2..]);
        assert_eq!((none.judge_ms_mean, none.to_scored_ms_median), (None, 1_000.0));
        assert_eq!(stream_times(&[]).to_scored_ms_median, 0.0);
    }

    #[test]
    fn ages_are_the_median_of_the_updates_that_have_them_and_updates_split_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let lines = [
            r#"{"step":1,"initial_age_ms_median":100.0,"initial_success_rate":0.5,"refined_success_rate":null,"update_seconds":1.0,"padded_tokens":300,"trained_tokens":100}"#,
            r#"{"step":2,"refined_age_ms_median":50.0,"initial_success_rate":null,"refined_success_rate":0.0,"update_seconds":9.0,"padded_tokens":6000,"trained_tokens":1000}"#,
            r#"{"step":3,"initial_age_ms_median":300.0,"refined_age_ms_median":70.0,"initial_success_rate":0.0,"refined_success_rate":0.5,"update_seconds":4.0,"padded_tokens":10,"trained_tokens":5}"#,
            r#"{"step":4,"initial_age_ms_median":200.0,"initial_success_rate":1.0,"update_seconds":3.0,"padded_tokens":100,"trained_tokens":100}"#,
            r#"{"step":5}"#,
            "not json",
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let side = learner_side(&path);
        assert_eq!((side.initial_age_ms, side.refined_age_ms), (Some(200.0), Some(60.0)));
        let [initial, refined, both] = &side.kinds;
        assert_eq!((initial.seconds.as_slice(), initial.positions, initial.trained), (&[1.0, 3.0][..], 400.0, 200.0));
        assert_eq!((refined.seconds.as_slice(), refined.positions / refined.trained), (&[9.0][..], 6.0));
        assert_eq!(both.seconds, [4.0], "a record with neither rate is no update of a known kind");
        assert_eq!(learner_side(&dir.path().join("missing")), LearnerSide::default());
    }
}
