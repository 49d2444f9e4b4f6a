//! `reagent bench generate --model DIR`: new tokens per second of sampling with the KV cache
//! (`policy::Sampler`) beside transformers' `generate` on the same model directory, prompt,
//! batch sizes and thread count, one side after the other in the same run, and how close batch
//! 1 comes to the memory-bandwidth bound.
//!
//! ```text
//!  prompt: --prompt rendered by the model's chat template with its generation prompt
//!  for batch in --batches (1, 8, 32):
//!     ours:          warm-up, then --repeats × Sampler::generate(batch × prompt, --new-tokens)
//!     transformers:  scripts/hf_generate.py in target/hf-venv, the same (warm-up, repeats)
//!  both sample at temperature 1 over the whole vocabulary and make exactly --new-tokens per row
//!  bound at batch 1: copy bandwidth (read + write bytes of a 1 GiB copy, fastest of 5)
//!                    ÷ the bytes of weights every token reads (every parameter once)
//!  report: median tokens/s of each side and their ratio (goal ≥ 3× at every batch size)
//!  a multi-turn episode: one `math` difficulty-2 task played to 6 turns at temperature 1 with
//!  the prefix caches (each turn prefills what is new), the same turns generated each from its
//!  whole transcript (as before the caches), and one prefill of the final transcript
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::{Args, ValueEnum};
use policy::tokenizer::ChatMessage;
use policy::{LoadedModel, Sampler, SamplingParams, Tokenizer};
use protocol::wire::Role;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::report::{load_average, median};
use super::venv::{run_script, Venv};

/// The baseline's script, kept in scripts/ so that it can be read and run by hand.
const SCRIPT: &str = include_str!("../../scripts/hf_generate.py");
/// The goal: ours over transformers' tokens/s at every batch size.
const GOAL_RATIO: f64 = 3.0;
/// The transformers venv (scripts/hf_venv.sh).
const VENV: Venv = Venv {
    env_var: "REAGENT_HF_VENV",
    default_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../target/hf-venv"),
    made_by: "scripts/hf_venv.sh (transformers 5.23.0 from PyPI, torch from .libtorch)",
    probe: "import torch, transformers; torch.zeros(1).sum(); print(transformers.__version__)",
};

/// The weights' kind on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Dtype {
    /// float32, as the model directory stores it.
    F32,
    /// bfloat16 (weights and activations).
    Bf16,
}

impl Dtype {
    fn kind(self) -> Kind {
        match self {
            Dtype::F32 => Kind::Float,
            Dtype::Bf16 => Kind::BFloat16,
        }
    }

    fn torch_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::Bf16 => "bfloat16",
        }
    }
}

/// Options of `reagent bench generate`.
#[derive(Debug, Clone, Args)]
pub struct GenerateBenchArgs {
    /// The model directory (config.json, model.safetensors, tokenizer files), e.g. target/smollm2.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,

    /// Completions generated together, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32", value_name = "N,…")]
    pub batches: Vec<usize>,

    /// New tokens per completion (no stop token ends a row early, on either side).
    #[arg(long, default_value_t = 64, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub new_tokens: u64,

    /// Timed runs of each side per batch size, after one warm-up; the report takes medians.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Torch intra-op threads, on both sides.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,

    /// The weights' kind, on both sides.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    pub dtype: Dtype,

    /// The user message of the prompt.
    #[arg(long, default_value = "Write a short story about a robot who learns to paint.")]
    pub prompt: String,

    /// The Python of the transformers venv (default target/hf-venv/bin/python, or
    /// $REAGENT_HF_VENV/bin/python; scripts/hf_venv.sh makes it).
    #[arg(long, value_name = "PATH")]
    pub hf_python: Option<PathBuf>,

    /// Skip transformers (ours and the bound only).
    #[arg(long)]
    pub no_baseline: bool,
    /// Leave out the multi-turn episode's measure (minutes on two cores): for a quick look, or
    /// the test suite's smoke run.
    #[arg(long)]
    pub no_episode: bool,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One batch size's figures.
#[derive(Debug, Clone, Serialize)]
pub struct GenerateRow {
    /// Completions generated together.
    pub batch: usize,
    /// Our seconds per run.
    pub ours_seconds: Vec<f64>,
    /// transformers' seconds per run (empty with --no-baseline).
    pub hf_seconds: Vec<f64>,
    /// New tokens per run.
    pub tokens: usize,
}

impl GenerateRow {
    /// Our median tokens/s.
    pub fn ours(&self) -> f64 {
        self.tokens as f64 / median(&self.ours_seconds)
    }

    /// transformers' median tokens/s (NaN without a baseline).
    pub fn hf(&self) -> f64 {
        self.tokens as f64 / median(&self.hf_seconds)
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct GenerateReport {
    /// The model directory.
    pub model: String,
    /// Parameters of the model.
    pub parameters: i64,
    /// Bytes of weights a decoding step reads (every parameter once).
    pub weight_bytes: i64,
    /// Copy bandwidth in bytes/s (read + write), fastest of 5.
    pub copy_bandwidth: f64,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// The options.
    pub threads: u16,
    /// Kind of the weights.
    pub dtype: Dtype,
    /// Package versions of the baseline.
    pub baseline: serde_json::Value,
    /// One row per batch size.
    pub rows: Vec<GenerateRow>,
    /// The 1-minute load average at the start and the end.
    pub load: [Option<f64>; 2],
    /// The multi-turn episode's costs (`None` with `--no-episode`).
    pub episode: Option<EpisodeCost>,
}

/// What a multi-turn episode costs.
#[derive(Debug, Clone, Serialize)]
pub struct EpisodeCost {
    /// Agent turns played.
    pub turns: usize,
    /// Tokens of the final transcript.
    pub transcript_tokens: usize,
    /// Tokens the agent generated.
    pub new_tokens: usize,
    /// Seconds to play it, each turn prefilling only what is new.
    pub cached_s: f64,
    /// Seconds to generate the same turns, each from its whole transcript.
    pub recomputed_s: f64,
    /// Seconds of one prefill of the final transcript.
    pub prefill_s: f64,
}

impl GenerateReport {
    /// Tokens/s that batch 1 cannot exceed: every token reads every weight once.
    pub fn bound(&self) -> f64 {
        self.copy_bandwidth / self.weight_bytes as f64
    }

    /// Whether ours is ≥ 3× transformers at every batch size.
    pub fn goal_met(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.ours() / r.hf() >= GOAL_RATIO)
    }

    /// The Markdown table and the verdict.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "model {} ({:.1} M parameters, {} weights, {:.0} MB), {} prompt tokens, {} threads, load {:?} → {:?}\n",
            self.model,
            self.parameters as f64 / 1e6,
            self.dtype.torch_name(),
            self.weight_bytes as f64 / 1e6,
            self.prompt_tokens,
            self.threads,
            self.load[0],
            self.load[1]
        );
        let _ = writeln!(s, "| batch | ours tokens/s | transformers tokens/s | ratio |");
        let _ = writeln!(s, "|---:|---:|---:|---:|");
        for r in &self.rows {
            let _ = writeln!(s, "| {} | {:.1} | {:.1} | **{:.2}** |", r.batch, r.ours(), r.hf(), r.ours() / r.hf());
        }
        let bound = self.bound();
        let _ = writeln!(
            s,
            "\nmemory-bandwidth bound at batch 1: {:.1} GB/s copy ÷ {:.0} MB of weights per token = {bound:.1} tokens/s",
            self.copy_bandwidth / 1e9,
            self.weight_bytes as f64 / 1e6,
        );
        if let Some(one) = self.rows.iter().find(|r| r.batch == 1) {
            let _ = writeln!(
                s,
                "ours at batch 1: {:.1} tokens/s, {:.0} % of the bound",
                one.ours(),
                100.0 * one.ours() / bound
            );
        }
        if let Some(e) = &self.episode {
            let _ = writeln!(
                s,
                "a {}-turn math episode ({} new tokens, final transcript {} tokens): {:.1} s with the prefix caches, \
                 {:.1} s prefilling each turn's whole transcript, one prefill of the final transcript {:.2} s",
                e.turns, e.new_tokens, e.transcript_tokens, e.cached_s, e.recomputed_s, e.prefill_s
            );
        }
        let verdict = match (self.baseline.is_null(), self.goal_met()) {
            (true, _) => "not measured (--no-baseline)",
            (false, true) => "met",
            (false, false) => "not met",
        };
        let _ = writeln!(s, "goal (ours ≥ {GOAL_RATIO}× transformers' tokens/s at every batch size): {verdict}");
        s
    }
}

/// What scripts/hf_generate.py prints.
#[derive(Debug, Deserialize)]
struct HfResult {
    runs: Vec<HfRun>,
    #[serde(flatten)]
    versions: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct HfRun {
    batch: usize,
    seconds: Vec<f64>,
}

/// The prompt ids: `text` as the one user message, rendered by the model's chat template
/// with its generation prompt.
pub fn prompt_ids(tok: &dyn Tokenizer, text: &str) -> Result<Vec<u32>> {
    Ok(match tok.jinja() {
        Some(jinja) => tok.encode(&jinja.render(&[ChatMessage::new("user", text)], true)?)?,
        None => tok.chat_template().generation_prompt(tok, &[(Role::User, text)])?,
    })
}

/// Copy bandwidth in bytes/s (read + write) of a 1 GiB f32 copy, fastest of 5.
pub fn copy_bandwidth() -> f64 {
    let n = 1i64 << 28;
    let src = Tensor::ones([n], (Kind::Float, Device::Cpu));
    let mut dst = Tensor::zeros([n], (Kind::Float, Device::Cpu));
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        dst.copy_(&src);
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * (n * 4) as f64 / best
}

/// Runs the bench and prints its report on stdout; `Ok(false)` when the goal is not met.
pub async fn bench(args: GenerateBenchArgs) -> Result<bool> {
    ensure!(!args.batches.is_empty() && args.batches.iter().all(|&b| b > 0), "--batches: give positive sizes");
    let load_start = load_average();
    tch::set_num_threads(i32::from(args.threads));
    let dir = args.model.clone();
    let tok =
        policy::pretrained::tokenizer_for_dir(&dir).with_context(|| format!("the tokenizer of {}", dir.display()))?;
    let prompt = prompt_ids(tok.as_ref(), &args.prompt)?;
    let kind = args.dtype.kind();
    let model = LoadedModel::from_dir_as(&dir, Device::Cpu, kind, false)
        .with_context(|| format!("loading {}", dir.display()))?;
    let (parameters, weight_bytes) = weights(&model);
    eprintln!(
        "bench generate: {} loaded ({:.1} M parameters), prompt {} tokens",
        dir.display(),
        parameters as f64 / 1e6,
        prompt.len()
    );
    let mut rows = Vec::new();
    for &batch in &args.batches {
        let seconds = ours(&model, &prompt, batch, &args)?;
        let r = GenerateRow {
            batch,
            ours_seconds: seconds,
            hf_seconds: Vec::new(),
            tokens: batch * args.new_tokens as usize,
        };
        eprintln!("bench generate: ours, batch {batch}: {:.1} tokens/s (median of {})", r.ours(), args.repeats);
        rows.push(r);
    }
    let episode = if args.no_episode {
        None
    } else {
        let e = episode_cost(&model, tok.as_ref())?;
        eprintln!(
            "bench generate: a {}-turn episode: {:.1} s cached, {:.1} s recomputed, prefill {:.2} s",
            e.turns, e.cached_s, e.recomputed_s, e.prefill_s
        );
        Some(e)
    };
    let baseline = if args.no_baseline { serde_json::Value::Null } else { hf(&args, &dir, &prompt, &mut rows).await? };
    let copy = copy_bandwidth();
    let report = GenerateReport {
        model: dir.display().to_string(),
        parameters,
        weight_bytes,
        copy_bandwidth: copy,
        prompt_tokens: prompt.len(),
        threads: args.threads,
        dtype: args.dtype,
        baseline,
        rows,
        load: [load_start, load_average()],
        episode,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(report.goal_met())
}

/// Parameters, and the bytes a decoding step reads (every variable once: a tied embedding is
/// the head too).
fn weights(model: &LoadedModel) -> (i64, i64) {
    model.vs.variables().values().fold((0, 0), |(n, b), v| {
        let numel = v.numel() as i64;
        (n + numel, b + numel * v.kind().elt_size_in_bytes() as i64)
    })
}

/// Our side at one batch size: a warm-up, then the timed runs' seconds.
fn ours(model: &LoadedModel, prompt: &[u32], batch: usize, args: &GenerateBenchArgs) -> Result<Vec<f64>> {
    let prompts = vec![prompt.to_vec(); batch];
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 1.0,
        max_new_tokens: args.new_tokens as usize,
        stop_sequences: Vec::new(),
        eos_id: None,
    };
    let mut seconds = Vec::new();
    for run in 0..=args.repeats {
        let started = Instant::now();
        let out = Sampler::new(u64::from(run)).generate(&model.model, &prompts, &params)?;
        let took = started.elapsed().as_secs_f64();
        ensure!(out.iter().all(|g| g.tokens.len() == params.max_new_tokens), "a row stopped early");
        if run > 0 {
            seconds.push(took);
        }
    }
    Ok(seconds)
}

/// One `math` difficulty-2 task played to 6 agent turns at temperature 1 (with the prefix
/// caches), the same turns generated each from its whole transcript, and one prefill of the
/// final transcript.
fn episode_cost(model: &LoadedModel, tok: &dyn Tokenizer) -> Result<EpisodeCost> {
    use episode::{run_episodes, EpisodeTask, PolicyRef, RolloutConfig, TrajectoryMeta};
    use protocol::wire::{ActorId, Episode as Body, GroupId, PolicyVersion, RunId, TaskFamily, TaskSpec};
    let config = RolloutConfig {
        temperature: 1.0,
        limits: env_workers::Limits { max_turns: 6, ..RolloutConfig::default().limits },
        ..RolloutConfig::default()
    };
    let meta = TrajectoryMeta {
        run_id: RunId::new("bench").map_err(|e| anyhow::anyhow!("{e:?}"))?,
        actor_id: ActorId("bench".into()),
        policy_version: PolicyVersion(0),
    };
    let task = EpisodeTask::initial(TaskSpec { family: TaskFamily::Math, seed: 7, difficulty: 2 }, GroupId(0));
    let policy = PolicyRef { model: &model.model, tokenizer: tok };
    let started = Instant::now();
    let played = tch::no_grad(|| run_episodes(policy, &[task], &config, &meta, &mut Sampler::new(1)))?;
    let cached_s = started.elapsed().as_secs_f64();
    let Body::Text(turns) = &played[0].trajectory.episode else { anyhow::bail!("a math episode is text") };
    let header = tok.chat_template().header(Role::Agent).to_vec();
    let (mut transcript, mut recomputed_s, mut agent_turns, mut new_tokens) = (Vec::new(), 0.0, 0, 0);
    for turn in turns {
        if turn.role == Role::Agent {
            let generated = turn.loss_mask.iter().filter(|&&m| m).count().max(1);
            let mut prompt = transcript.clone();
            prompt.extend_from_slice(&header);
            let params = SamplingParams {
                temperature: 1.0,
                top_p: 1.0,
                max_new_tokens: generated,
                stop_sequences: Vec::new(),
                eos_id: None,
            };
            let started = Instant::now();
            Sampler::new(1).generate(&model.model, &[prompt], &params)?;
            recomputed_s += started.elapsed().as_secs_f64();
            agent_turns += 1;
            new_tokens += generated;
        }
        transcript.extend_from_slice(&turn.token_ids);
    }
    let ids: Vec<i64> = transcript.iter().map(|&t| i64::from(t)).collect();
    let started = Instant::now();
    tch::no_grad(|| model.model.forward(&Tensor::from_slice(&ids).unsqueeze(0), None))?;
    let prefill_s = crate::elapsed_on(model.model.device(), started).as_secs_f64();
    Ok(EpisodeCost { turns: agent_turns, transcript_tokens: ids.len(), new_tokens, cached_s, recomputed_s, prefill_s })
}

/// transformers' side, every batch size in one child process; fills `rows`' hf_seconds.
async fn hf(
    args: &GenerateBenchArgs,
    dir: &Path,
    prompt: &[u32],
    rows: &mut [GenerateRow],
) -> Result<serde_json::Value> {
    let python = VENV.python(args.hf_python.as_deref()).await.context("bench generate")?;
    let params = serde_json::json!({
        "model_dir": dir, "prompt_ids": prompt, "batches": args.batches, "new_tokens": args.new_tokens,
        "repeats": args.repeats, "threads": args.threads, "dtype": args.dtype.torch_name(), "seed": 0,
    })
    .to_string();
    eprintln!("bench generate: transformers ({}) …", python.display());
    let threads = usize::from(args.threads);
    let deadline = Duration::from_secs(3600);
    let line =
        run_script(&python, SCRIPT, &["--params", &params], threads, deadline, "{").await.context("transformers")?;
    let result: HfResult =
        serde_json::from_str(&line).with_context(|| format!("reading transformers' result: {line}"))?;
    for run in result.runs {
        if let Some(row) = rows.iter_mut().find(|r| r.batch == run.batch) {
            row.hf_seconds = run.seconds;
        }
    }
    Ok(result.versions)
}
