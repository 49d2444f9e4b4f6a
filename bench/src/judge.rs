//! `reagent bench judge`: the RRM's OpenAI-compatible judge against a real server (for example
//! llama-cpp-python's, `scripts/llama_server.sh`), beside the reference judge, on the same
//! trajectories: how often an answer parses, what the retries and failures were, how the scores
//! spread over right and wrong episodes, and each judge's latency and throughput.
//!
//! ```text
//!  N math episodes (difficulty D): even seeds the reference solution (solved), odd seeds the
//!  same messages with the final answer made wrong (replayed, so the observations are real)
//!    for each prompt format (agent-rrm, trajectory):
//!      rrm_worker::judge::build([rrm] judge = "openai", the job keys a user would set)
//!      judge all N, C at a time ─► Judgement | JudgeError (the worker would record Verdict::Failed)
//!      reagent_rrm_judge_attempt_failures_total before/after ─► retried attempts by reason
//!    the reference judge on the same N
//!  report: judged / failed, attempt failures by reason, clipped scores, mean score of right and
//!  wrong episodes and how often a right one outscores a wrong one (AUC), latency median and
//!  p90, judgements/s
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use episode::{reference_episode, scripted_episode, EpisodeTask, RolloutConfig, SystemPrompt, TrajectoryMeta};
use policy::ByteTokenizer;
use protocol::config::ReagentConfig;
use protocol::wire::{ActorId, GroupId, PolicyVersion, Role, RunId, TaskFamily, TaskSpec, Trajectory};
use rrm_worker::judge::Judge;
use serde::Serialize;

/// Options of `reagent bench judge`.
#[derive(Debug, Clone, Args)]
pub struct JudgeBenchArgs {
    /// The server's OpenAI-compatible base URL(s), comma-separated (e.g. http://127.0.0.1:8011/v1).
    #[arg(long, value_delimiter = ',', required = true, value_name = "URL,…")]
    pub endpoints: Vec<String>,

    /// The model name the server expects in requests.
    #[arg(long)]
    pub model: String,

    /// Prompt formats to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "agent-rrm,trajectory")]
    pub prompts: Vec<PromptArg>,

    /// Episodes judged per format (half solved, half with a wrong final answer).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(2..=10_000))]
    pub episodes: u64,

    /// `math` difficulty of the episodes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=5))]
    pub difficulty: u32,

    /// Judgements in flight at once (`rrm.max_concurrency`).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub concurrency: u64,

    /// Deadline of one request, ms (`rrm.openai.timeout_ms`).
    #[arg(long, default_value_t = 120_000)]
    pub timeout_ms: u64,

    /// Retries after a failed attempt (`rrm.openai.retries`).
    #[arg(long, default_value_t = 2)]
    pub retries: u32,

    /// Tokens the judge may write (`rrm.openai.max_tokens`).
    #[arg(long, default_value_t = 384)]
    pub max_tokens: u32,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--prompts` values: `rrm.prompt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptArg {
    /// The released Agent-RRM's prompt.
    AgentRrm,
    /// The whole trajectory, turn by turn, with instructions.
    Trajectory,
}

impl PromptArg {
    fn key(self) -> &'static str {
        match self {
            Self::AgentRrm => "agent-rrm",
            Self::Trajectory => "trajectory",
        }
    }
}

/// One judge's figures over the episodes.
#[derive(Debug, Clone, Serialize)]
struct JudgeRow {
    judge: String,
    prompt: String,
    episodes: usize,
    judged: usize,
    failed: usize,
    /// Failed attempts (each retried while retries remained), by reason.
    attempt_failures: BTreeMap<String, u64>,
    clipped: u64,
    mean_score_solved: Option<f64>,
    mean_score_wrong: Option<f64>,
    score_min: Option<f64>,
    score_max: Option<f64>,
    /// P(a solved episode scores above a wrong one), ties half.
    auc: Option<f64>,
    latency_median_ms: f64,
    latency_p90_ms: f64,
    judgements_per_s: f64,
    /// The first failure's message, and a critique of a wrong episode, for the reader.
    first_error: Option<String>,
    example_critique: Option<String>,
}

/// `episodes` math episodes: even seeds solved, odd seeds with a wrong final answer.
fn episodes(n: usize, difficulty: u32) -> Result<Vec<Trajectory>> {
    let meta = TrajectoryMeta {
        run_id: RunId::new("bench-judge").expect("a valid run id"),
        actor_id: ActorId("bench".into()),
        policy_version: PolicyVersion(0),
    };
    let cfg = RolloutConfig { system_prompt: SystemPrompt::Omit, ..RolloutConfig::default() };
    let mut out = Vec::with_capacity(n);
    let mut seed = 0u64;
    while out.len() < n {
        let spec = TaskSpec { family: TaskFamily::Math, seed: 9_000 + seed, difficulty };
        seed += 1;
        let solved = reference_episode(spec, &ByteTokenizer, &cfg, &meta)?.trajectory;
        if out.len() % 2 == 0 {
            out.push(solved);
            continue;
        }
        let mut messages: Vec<String> = match &solved.episode {
            protocol::wire::Episode::Text(turns) => {
                turns.iter().filter(|t| t.role == Role::Agent).map(|t| t.text.clone()).collect()
            }
            protocol::wire::Episode::Control(_) => bail!("math episodes are text"),
        };
        let Some(last) = messages.last_mut() else { continue };
        let (Some(open), Some(close)) = (last.find("<answer>"), last.find("</answer>")) else { continue };
        let truth = last[open + "<answer>".len()..close].trim().to_string();
        *last = format!("{}<answer>{truth}1</answer>{}", &last[..open], &last[close + "</answer>".len()..]);
        let wrong = scripted_episode(
            EpisodeTask::initial(spec, GroupId(0)),
            None,
            Some(&messages),
            &ByteTokenizer,
            &cfg,
            &meta,
        )?
        .trajectory;
        if wrong.outcome_reward == 0.0 {
            out.push(wrong);
        }
    }
    Ok(out)
}

/// The attempt-failure counter's values by reason, summed over endpoints.
fn attempt_failures() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for family in protocol::metrics::REGISTRY.gather() {
        if family.name() != "reagent_rrm_judge_attempt_failures_total" {
            continue;
        }
        for m in family.get_metric() {
            let reason = m.get_label().iter().find(|l| l.name() == "reason").map_or("?", |l| l.value());
            *out.entry(reason.to_string()).or_insert(0) += m.get_counter().get_value() as u64;
        }
    }
    out
}

fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN)
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Judges every episode, `concurrency` at a time.
async fn measure(
    judge: Arc<dyn Judge>,
    prompt: &str,
    episodes: &Arc<Vec<Trajectory>>,
    concurrency: usize,
) -> Result<JudgeRow> {
    let before = attempt_failures();
    let clipped_before = protocol::metrics::RRM_SCORES_CLIPPED.get();
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..episodes.len() {
        let (judge, episodes, gate) = (judge.clone(), episodes.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let t = Instant::now();
            let result = judge.judge(&episodes[i]).await;
            (i, result, t.elapsed().as_secs_f64() * 1e3)
        });
    }
    let mut results = Vec::with_capacity(episodes.len());
    while let Some(done) = tasks.join_next().await {
        results.push(done.context("a judging task panicked")?);
    }
    let wall = start.elapsed().as_secs_f64();
    results.sort_by_key(|r| r.0);
    let after = attempt_failures();
    let attempt_failures = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    let (mut solved, mut wrong, mut latencies) = (Vec::new(), Vec::new(), Vec::new());
    let (mut failed, mut first_error, mut example_critique) = (0, None, None);
    for (i, result, ms) in &results {
        latencies.push(*ms);
        match result {
            Ok(j) => {
                let s = f64::from(j.score);
                if episodes[*i].outcome_reward > 0.0 {
                    solved.push(s);
                } else {
                    wrong.push(s);
                    example_critique.get_or_insert_with(|| j.critique.chars().take(300).collect());
                }
            }
            Err(e) => {
                failed += 1;
                first_error.get_or_insert_with(|| e.to_string().chars().take(300).collect());
            }
        }
    }
    let auc = (!solved.is_empty() && !wrong.is_empty()).then(|| {
        let pairs = solved.iter().flat_map(|a| wrong.iter().map(move |b| (a, b)));
        let wins: f64 = pairs
            .map(|(a, b)| {
                if a > b {
                    1.0
                } else if a == b {
                    0.5
                } else {
                    0.0
                }
            })
            .sum();
        wins / (solved.len() * wrong.len()) as f64
    });
    let all: Vec<f64> = solved.iter().chain(&wrong).copied().collect();
    Ok(JudgeRow {
        judge: judge.id().to_string(),
        prompt: prompt.to_string(),
        episodes: episodes.len(),
        judged: episodes.len() - failed,
        failed,
        attempt_failures,
        clipped: protocol::metrics::RRM_SCORES_CLIPPED.get() - clipped_before,
        mean_score_solved: mean(&solved),
        mean_score_wrong: mean(&wrong),
        score_min: all.iter().copied().reduce(f64::min),
        score_max: all.iter().copied().reduce(f64::max),
        auc,
        latency_median_ms: quantile(&latencies, 0.5),
        latency_p90_ms: quantile(&latencies, 0.9),
        judgements_per_s: episodes.len() as f64 / wall,
        first_error,
        example_critique,
    })
}

/// The `[rrm]` a user would write for this server and prompt format.
fn job(args: &JudgeBenchArgs, prompt: PromptArg) -> Result<ReagentConfig> {
    let endpoints: Vec<String> = args.endpoints.iter().map(|e| format!("{e:?}")).collect();
    let toml = format!(
        "[rrm]\njudge = \"openai\"\nprompt = \"{}\"\nmax_concurrency = {}\n\n[rrm.openai]\nendpoints = [{}]\nmodel = {:?}\n\
         timeout_ms = {}\nretries = {}\nmax_tokens = {}\n",
        prompt.key(),
        args.concurrency,
        endpoints.join(", "),
        args.model,
        args.timeout_ms,
        args.retries,
        args.max_tokens,
    );
    ReagentConfig::from_toml_str(&toml).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs the bench and prints a table or JSON.
pub async fn bench(args: JudgeBenchArgs) -> Result<()> {
    let (n, difficulty) = (args.episodes as usize, args.difficulty);
    let episodes = Arc::new(tokio::task::spawn_blocking(move || episodes(n, difficulty)).await??);
    let mut rows = Vec::new();
    for &prompt in &args.prompts {
        let rrm = rrm_worker::config::RrmConfig::from_config(&job(&args, prompt)?)?;
        let judge = rrm_worker::judge::build(&rrm)?;
        eprintln!("bench judge: {} episodes through {} with the {} prompt …", episodes.len(), judge.id(), prompt.key());
        rows.push(measure(judge, prompt.key(), &episodes, args.concurrency as usize).await?);
    }
    let reference: Arc<dyn Judge> = Arc::new(rrm_worker::reference::ReferenceJudge::new());
    rows.push(measure(reference, "-", &episodes, args.concurrency as usize).await?);
    if args.json {
        println!("{}", serde_json::json!({ "command": crate::command_line(), "rows": rows }));
        return Ok(());
    }
    println!("command: {}", crate::command_line());
    println!(
        "{} math episodes at difficulty {difficulty} (half solved, half with a wrong final answer), {} in flight",
        episodes.len(),
        args.concurrency
    );
    println!();
    println!("| judge | prompt | judged | failed | retried attempts | clipped | mean score, solved | mean score, wrong | AUC | latency median / p90 (ms) | judgements/s |");
    println!("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    let f = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.2}"));
    for r in &rows {
        let retried = if r.attempt_failures.is_empty() {
            "none".to_string()
        } else {
            r.attempt_failures.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
        };
        println!(
            "| {} | {} | {} / {} | {} | {retried} | {} | {} | {} | {} | {:.0} / {:.0} | {:.2} |",
            r.judge,
            r.prompt,
            r.judged,
            r.episodes,
            r.failed,
            r.clipped,
            f(r.mean_score_solved),
            f(r.mean_score_wrong),
            f(r.auc),
            r.latency_median_ms,
            r.latency_p90_ms,
            r.judgements_per_s
        );
    }
    for r in &rows {
        if let Some(e) = &r.first_error {
            println!("\n{} ({}): first failure: {e}", r.judge, r.prompt);
        }
        if let Some(c) = &r.example_critique {
            println!("\n{} ({}): a critique of a wrong episode: {c:?}", r.judge, r.prompt);
        }
    }
    Ok(())
}
