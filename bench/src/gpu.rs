//! `reagent bench gpu`: the device check of the GPU path, one command that runs on a GPU machine
//! in a few minutes (`scripts/gpu_check.sh` carries the binary there and runs it). Each part
//! prints one `PASS`, `FAIL` or `SKIP` line; the figures follow as a table and go to a JSON
//! report. `--device cpu --quick` runs every part that does not need CUDA on the CPU with small
//! sizes: the test suite runs it so that the check itself is known to work before a GPU is at
//! hand.
//!
//! ```text
//!  linking     libtorch_cuda loaded at run time, a kernel on cuda:0 (policy::probe)
//!  precision   bf16 SFT steps with fp32 masters (learner::precision::masters_check)
//!              eight micro-batches summed in fp32 vs bf16 (learner::precision::accumulation_check)
//!  log-probs   token log-probs of the model in bf16 on the device vs the same weights in f32 on the CPU
//!  head        the chunked LM head's log-probs, entropies and gradients in bf16 on the device
//!              (on CUDA: half-precision matmuls with fp32 results, the gradient written out)
//!              vs f64 on the CPU from the same bf16 values
//!  peak        the device's measured matmul rate in the compute kind (the MFU denominator)
//!  learner     one GRPO update (learner::update::grpo_update) of a Qwen2-0.5B-shaped model
//!              at 64 × 1024 tokens, and of --model; tokens/s and MFU
//!  generation  KV-cache sampling at batch 1, 32 and 128: new tokens/s
//!  weights     publish (export as bf16) → import into a CPU model and a device model, bit for
//!              bit, timed; safetensors save → load on the device, bit for bit
//!  attention   forward + backward of the 0.5B model at T = 1024 and 4096 (one row): time
//! ```
//!
//! Which attention kernel torch picks for the call the model makes, and the memory at
//! T = 1024 and 4096, are measured by `scripts/gpu_check.sh` with the device's PyTorch (libtorch
//! exposes neither the choice nor the caching allocator's statistics through tch).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use learner::optim::AdamW;
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Sampler, SamplingParams};
use serde::Serialize;
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

/// Options of `reagent bench gpu`.
#[derive(Debug, Clone, Args)]
pub struct GpuBenchArgs {
    /// Where the check runs: `cuda` on a GPU machine (the default; an error where libtorch sees
    /// no CUDA device), `cpu` to try the check itself on any machine (the CUDA-only parts skip).
    #[arg(long, value_enum, default_value = "cuda")]
    pub device: cluster::cli::DeviceArg,

    /// A real model directory measured beside the 0.5 B-shaped one (log-probs, learner,
    /// generation), e.g. target/smollm2.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,

    /// Small sizes everywhere (the `micro` model, short sequences): seconds on a CPU. For
    /// trying the check, not for its figures.
    #[arg(long)]
    pub quick: bool,

    /// Write the JSON report here as well.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// A part's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
enum Verdict {
    Pass,
    Fail,
    Skip,
}

/// One part's line and figures.
#[derive(Debug, Clone, Serialize)]
struct Part {
    name: &'static str,
    verdict: Verdict,
    detail: String,
    figures: Value,
}

impl Part {
    fn new(name: &'static str, pass: bool, detail: String, figures: Value) -> Self {
        Self { name, verdict: if pass { Verdict::Pass } else { Verdict::Fail }, detail, figures }
    }
}

/// The sizes the check uses.
struct Sizes {
    /// The learner's batch: rows × tokens.
    rows: usize,
    tokens: usize,
    /// Rows per micro-batch of the learner's update.
    micro_batch: usize,
    /// Generation: batch sizes, prompt and new tokens.
    batches: Vec<usize>,
    prompt: usize,
    new_tokens: usize,
    /// The peak's square matmul side.
    matmul: i64,
    /// Sequence lengths of the attention part.
    seqs: Vec<i64>,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                rows: 8,
                tokens: 64,
                micro_batch: 4,
                batches: vec![1, 4],
                prompt: 16,
                new_tokens: 8,
                matmul: 1024,
                seqs: vec![64, 128],
            }
        } else {
            Self {
                rows: 64,
                tokens: 1024,
                micro_batch: 16,
                batches: vec![1, 32, 128],
                prompt: 64,
                new_tokens: 128,
                matmul: 8192,
                seqs: vec![1024, 4096],
            }
        }
    }
}

/// Qwen2.5-0.5B's shape (its config.json's numbers), with fresh weights: the issue's yardstick.
fn qwen2_half_b() -> Result<ModelConfig> {
    let json = json!({
        "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": true, "hidden_act": "silu"
    });
    Ok(ModelConfig::from_json_str(&json.to_string())?)
}

/// Runs the check; `Ok(false)` when a part failed.
pub async fn bench(args: GpuBenchArgs) -> Result<bool> {
    let device = args.device.resolve()?;
    let a = args.clone();
    let parts = tokio::task::spawn_blocking(move || run_parts(&a, device)).await??;
    let command = crate::command_line();
    let report = json!({
        "command": command,
        "device": format!("{device:?}"),
        "gpu": gpu_name(),
        "cpu": crate::cpu_model(),
        "parts": parts,
    });
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    println!("command: {command}");
    println!("device: {device:?} ({})", gpu_name().unwrap_or_else(|| "no GPU".into()));
    for p in &parts {
        let v = match p.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        };
        println!("{v} {:<11} {}", p.name, p.detail);
    }
    println!();
    println!("| part | figure | value |");
    println!("|---|---|---:|");
    for p in &parts {
        if let Value::Object(map) = &p.figures {
            for (k, v) in map {
                let v = match v.as_f64() {
                    Some(x) if v.is_f64() => format!("{x:.4e}"),
                    _ => v.to_string(),
                };
                println!("| {} | {k} | {v} |", p.name);
            }
        }
    }
    let failed = parts.iter().filter(|p| p.verdict == Verdict::Fail).count();
    println!();
    println!("{} parts: {failed} failed", parts.len());
    Ok(failed == 0)
}

/// The GPU's name from `nvidia-smi`, when there is one.
fn gpu_name() -> Option<String> {
    let out =
        std::process::Command::new("nvidia-smi").args(["--query-gpu=name", "--format=csv,noheader"]).output().ok()?;
    let name = String::from_utf8_lossy(&out.stdout).lines().next()?.trim().to_string();
    (out.status.success() && !name.is_empty()).then_some(name)
}

fn run_parts(args: &GpuBenchArgs, device: Device) -> Result<Vec<Part>> {
    let sizes = Sizes::new(args.quick);
    let kind = policy::device::kind_for(device);
    let mut parts = vec![linking(device)];
    eprintln!("bench gpu: precision …");
    parts.push(precision(device)?);
    // The models measured: the 0.5 B shape (micro when quick), and --model.
    let mut models: Vec<(String, ModelConfig, Option<PathBuf>)> = Vec::new();
    if args.quick {
        models.push(("micro".into(), ModelConfig::micro(), None));
    } else {
        models.push(("qwen2-0.5b-shape".into(), qwen2_half_b()?, None));
    }
    if let Some(dir) = &args.model {
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        models.push((dir.display().to_string(), config, Some(dir.clone())));
    }
    eprintln!("bench gpu: log-probs …");
    for (name, config, dir) in &models {
        parts.push(logprobs(name, config, dir.as_ref(), device, &sizes)?);
    }
    eprintln!("bench gpu: head …");
    parts.push(head(device, &models[0].1, args.quick)?);
    eprintln!("bench gpu: matmul peak …");
    let (peak_part, peak) = matmul_peak(device, kind, sizes.matmul);
    parts.push(peak_part);
    for (name, config, dir) in &models {
        eprintln!("bench gpu: learner update, {name} …");
        let model = load(config, dir.as_ref(), device, kind)?;
        parts.push(learner_update(name, &model, device, &sizes, peak)?);
        eprintln!("bench gpu: generation, {name} …");
        parts.push(generation(name, &model, device, &sizes)?);
        if dir.is_none() {
            eprintln!("bench gpu: weights, {name} …");
            parts.push(weights(name, &model, config, device)?);
            eprintln!("bench gpu: attention, {name} …");
            parts.push(attention(name, &model, device, &sizes)?);
        }
    }
    Ok(parts)
}

/// A model of `config` on `device` in `kind`: its directory's weights, or fresh ones drawn from
/// seed 0.
fn load(config: &ModelConfig, dir: Option<&PathBuf>, device: Device, kind: Kind) -> Result<LoadedModel> {
    Ok(match dir {
        Some(dir) => LoadedModel::from_dir_as(dir, device, kind, false)?,
        None => policy::seed::seeded(0, || LoadedModel::fresh_as(config, device, kind, false))?,
    })
}

fn linking(device: Device) -> Part {
    let report = policy::probe::probe();
    let library = match &report.cuda_library {
        Ok(path) => format!("libtorch_cuda loaded from {}", path.display()),
        Err(e) => format!("libtorch_cuda not loaded: {e}"),
    };
    let figures = json!({ "cuda_devices": report.cuda_devices, "cuda_available": report.cuda_available });
    if device == Device::Cpu {
        return Part { name: "linking", verdict: Verdict::Skip, detail: format!("--device cpu; {library}"), figures };
    }
    match report.cuda_check {
        Some(Ok(262_144.0)) => Part::new(
            "linking",
            true,
            format!("{library}; {} device(s); a 64×64 matmul on cuda:0 came back right", report.cuda_devices),
            figures,
        ),
        Some(Ok(sum)) => {
            Part::new("linking", false, format!("{library}; a matmul on cuda:0 gave {sum}, not 262144"), figures)
        }
        Some(Err(e)) => Part::new("linking", false, format!("{library}; a kernel on cuda:0 failed: {e}"), figures),
        None => Part::new("linking", false, format!("{library}; no CUDA device"), figures),
    }
}

fn precision(device: Device) -> Result<Part> {
    let masters = learner::precision::masters_check(device)?;
    let accumulation = learner::precision::accumulation_check(device)?;
    let pass = masters.passed() && accumulation.passed();
    let detail = format!(
        "bf16 steps moved the fp32 masters by {:.2e}, {} working copies not their master rounded; \
         gradient error vs fp32 after 8 micro-batches: {:.2e} summed in fp32, {:.2e} in bf16 (one bf16 pass {:.2e})",
        masters.moved,
        masters.not_rounded.len(),
        accumulation.bf16_eight_fp32_sum,
        accumulation.bf16_eight_bf16_sum,
        accumulation.bf16_one,
    );
    let figures = json!({
        "masters_moved": masters.moved,
        "masters_not_rounded": masters.not_rounded.len(),
        "grad_error_f32_eight_vs_one": accumulation.f32_eight,
        "grad_error_bf16_one_pass": accumulation.bf16_one,
        "grad_error_bf16_eight_fp32_sum": accumulation.bf16_eight_fp32_sum,
        "grad_error_bf16_eight_bf16_sum": accumulation.bf16_eight_bf16_sum,
    });
    Ok(Part::new("precision", pass, detail, figures))
}

/// Token ids `[rows, tokens]` drawn from seed 7 below `vocab`.
fn random_ids(rows: usize, tokens: usize, vocab: i64) -> Tensor {
    policy::seed::seeded(7, || Tensor::randint(vocab, [rows as i64, tokens as i64], (Kind::Int64, Device::Cpu)))
}

/// The model's token log-probs in bf16 on `device` (the GPU's compute kind; on the CPU the same
/// kind, for trying the check) against the same weights in f32 on the CPU: PPO ratios, clip
/// fractions and KLs are computed from these.
fn logprobs(name: &str, config: &ModelConfig, dir: Option<&PathBuf>, device: Device, sizes: &Sizes) -> Result<Part> {
    let kind = Kind::BFloat16;
    let cpu = load(config, dir, Device::Cpu, Kind::Float)?;
    let dev = LoadedModel::fresh_as(config, device, kind, false)?;
    let weights = cpu.vs.variables();
    tch::no_grad(|| {
        for (n, mut t) in dev.vs.variables() {
            t.copy_(&weights[&n]);
        }
    });
    let (rows, tokens) = (4.min(sizes.rows), 256.min(sizes.tokens * 4));
    let ids = random_ids(rows, tokens, config.vocab_size);
    let want = tch::no_grad(|| cpu.model.token_logprobs(&ids, None, 1.0))?;
    let got = tch::no_grad(|| dev.model.token_logprobs(&ids.to_device(device), None, 1.0))?.to_device(Device::Cpu);
    let diff = (got.to_kind(Kind::Double) - want.to_kind(Kind::Double)).abs();
    let (mean, max) = (diff.mean(Kind::Double).double_value(&[]), diff.max().double_value(&[]));
    // bf16 carries 8 significant bits: each layer's output is off by ~0.4 % relative, so a
    // log-prob of a few nats moves by some hundredths on average (the head's product and the
    // log-softmax are fp32). A mean of 0.1 nats would put PPO ratios 10 % off before any update.
    let limit = 0.1;
    let detail = format!(
        "{name}: {rows} × {tokens} random tokens, {kind:?} on {device:?} vs f32 on the CPU: mean |Δ| {mean:.2e}, max {max:.2e} nats (mean allowed {limit:.0e})"
    );
    Ok(Part::new(
        "log-probs",
        mean.is_finite() && mean <= limit,
        detail,
        json!({ "model": name, "mean_abs": mean, "max_abs": max }),
    ))
}

/// The chunked LM head ([`policy::head::TokenScores`]) in bf16 on `device` against f64 on the
/// CPU from the same bf16 hidden states and weight (so only the head's arithmetic differs): a
/// loss `Σ a·logp + Σ b·entropy` over `n` positions in chunks of `chunk`, its log-probs,
/// entropies and the gradients of the hidden states and the weight. The weight is scaled so
/// that the logits reach about ±20, as a trained model's do. On CUDA this is the path whose
/// matmuls are half-precision with fp32 results and whose gradient is written out by hand.
fn head(device: Device, config: &ModelConfig, quick: bool) -> Result<Part> {
    let (n, chunk) = if quick { (96, 40) } else { (1024, 384) };
    let (h, v) = (config.hidden_size, config.vocab_size);
    let cpu = (Kind::Float, Device::Cpu);
    let (hidden, weight, targets, a, b) = policy::seed::seeded(11, || {
        let hidden = Tensor::randn([1, n, h], cpu).to_kind(Kind::BFloat16);
        let weight = (Tensor::randn([v, h], cpu) * (5.0 / (h as f64).sqrt())).to_kind(Kind::BFloat16);
        let targets = Tensor::randint(v, [1, n], (Kind::Int64, Device::Cpu));
        (hidden, weight, targets, Tensor::randn([1, n], cpu), Tensor::randn([1, n], cpu))
    });
    // The reference: f64, full log-softmax, autograd.
    let (hr, wr) =
        (hidden.to_kind(Kind::Double).set_requires_grad(true), weight.to_kind(Kind::Double).set_requires_grad(true));
    let z = hr.matmul(&wr.tr());
    let peak = z.abs().max().double_value(&[]);
    let logp_all = z.log_softmax(-1, Kind::Double);
    let want_logp = logp_all.gather(-1, &targets.unsqueeze(-1), false).squeeze_dim(-1);
    let want_entropy = -(logp_all.exp() * &logp_all).sum_dim_intlist(-1, false, Kind::Double);
    ((&want_logp * a.to_kind(Kind::Double)).sum(Kind::Double)
        + (&want_entropy * b.to_kind(Kind::Double)).sum(Kind::Double))
    .backward();
    drop((z, logp_all));
    // The device: bf16 leaves, the head in chunks, the two-phase backward.
    let start = Instant::now();
    let hd = hidden.to_device(device).set_requires_grad(true);
    let wd = weight.to_device(device).set_requires_grad(true);
    let s = policy::head::TokenScores::new(&hd, &wd, &targets.to_device(device), 1.0, true, chunk)?;
    let entropy = s.entropy.as_ref().context("the head returned no entropies")?;
    ((&s.logp * a.to_device(device)).sum(Kind::Float) + (entropy * b.to_device(device)).sum(Kind::Float)).backward();
    s.backward()?;
    let secs = crate::elapsed_on(device, start).as_secs_f64();
    let max_err = |got: &Tensor, want: &Tensor| {
        (got.to_device(Device::Cpu).to_kind(Kind::Double) - want.detach()).abs().max().double_value(&[])
    };
    let relative = |got: &Tensor, want: &Tensor| {
        let want = want.detach();
        (got.to_device(Device::Cpu).to_kind(Kind::Double) - &want).norm().double_value(&[])
            / want.norm().double_value(&[])
    };
    let logp_err = max_err(&s.logp.detach(), &want_logp);
    let entropy_err = max_err(&entropy.detach(), &want_entropy);
    let hidden_err = relative(&hd.grad(), &hr.grad());
    let weight_err = relative(&wd.grad(), &wr.grad());
    // fp32 products of bf16 values are exact: log-probs and entropies err by rounding in the
    // fp32 sums (~1e-5 at logits of 20). The gradients go through the logits' gradient
    // rounded to bf16 (8 bits: ~0.3 % relative), then fp32 sums; a wrong term or scale is off
    // by tens of percent.
    let pass = logp_err <= 1e-3 && entropy_err <= 1e-3 && hidden_err <= 2e-2 && weight_err <= 2e-2;
    let detail = format!(
        "{n} positions × {v} tokens in chunks of {chunk}, bf16 on {device:?} vs f64 on the CPU (logits up to {peak:.1}): \
         logp max |Δ| {logp_err:.1e}, entropy {entropy_err:.1e}; gradient relative error: hidden {hidden_err:.1e}, \
         weight {weight_err:.1e} (allowed 1e-3, 1e-3, 2e-2, 2e-2); {:.0} ms",
        1e3 * secs
    );
    Ok(Part::new(
        "head",
        pass,
        detail,
        json!({ "positions": n, "vocab": v, "chunk": chunk, "logp_max_abs": logp_err, "entropy_max_abs": entropy_err,
                "grad_hidden_rel": hidden_err, "grad_weight_rel": weight_err, "seconds": secs }),
    ))
}

/// The device's matmul rate in `kind`: the median of 10 square products of side `n`, FLOP/s.
fn matmul_peak(device: Device, kind: Kind, n: i64) -> (Part, f64) {
    let a = Tensor::randn([n, n], (kind, device));
    let b = Tensor::randn([n, n], (kind, device));
    let _ = a.matmul(&b);
    let mut rates = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        let _c = a.matmul(&b);
        let secs = crate::elapsed_on(device, start).as_secs_f64();
        rates.push(2.0 * (n as f64).powi(3) / secs);
    }
    let peak = crate::env::median(rates);
    let detail = format!("{kind:?} {n}×{n} matmul on {device:?}: {:.3} TFLOP/s (median of 10)", peak / 1e12);
    (
        Part::new(
            "peak",
            peak.is_finite() && peak > 0.0,
            detail,
            json!({ "kind": format!("{kind:?}"), "side": n, "flops": peak }),
        ),
        peak,
    )
}

/// The FLOPs of training on `tokens` tokens in rows of `seq`: 6 per parameter per token (forward
/// and backward of every matmul, the tied head counted once as the matmul it is) plus causal
/// attention's scores and mixing, 6·layers·seq·(heads·head_dim) per token.
fn training_flops(config: &ModelConfig, parameters: i64, tokens: f64, seq: f64) -> f64 {
    let attention = 6.0 * config.num_hidden_layers as f64 * seq * (config.num_attention_heads * config.head_dim) as f64;
    tokens * (6.0 * parameters as f64 + attention)
}

fn learner_update(name: &str, model: &LoadedModel, device: Device, sizes: &Sizes, peak: f64) -> Result<Part> {
    let config = model.model.config().clone();
    let parameters: i64 = model.vs.variables().values().map(|t| t.numel() as i64).sum();
    let data = crate::training::batch(sizes.rows, sizes.tokens, config.vocab_size as usize);
    let learner_cfg = LearnerConfig { lr: 1e-6, minibatches: 1, ..LearnerConfig::default() };
    let update_cfg = UpdateConfig::new(&learner_cfg, 1.0, ByteTokenizer::PAD, sizes.micro_batch)?;
    let mut opt = AdamW::from_named(model.vs.variables(), learner_cfg.adamw_config());
    // One weight's fp32 master (the weight itself in f32), by name: a step of lr 1e-6 moves a
    // master but may round to nothing in a bf16 working copy.
    let master = |opt: &AdamW| opt.master_weights().into_iter().min_by(|a, b| a.0.cmp(&b.0));
    let (watched, before) = master(&opt).map(|(name, t)| (name, t.copy())).context("a model without weights")?;
    let total = (sizes.rows * sizes.tokens) as f64;
    let mut rates = Vec::new();
    for i in 0..3 {
        let start = Instant::now();
        grpo_update(Models { policy: &model.model, reference: None }, &mut opt, &data, &update_cfg)?;
        let secs = crate::elapsed_on(device, start).as_secs_f64();
        if i > 0 {
            rates.push(total / secs);
        }
    }
    let changed = master(&opt).is_some_and(|(name, t)| name == watched && !t.equal(&before));
    let rate = crate::env::median(rates);
    let flops = training_flops(&config, parameters, rate, sizes.tokens as f64);
    let mfu = flops / peak;
    let detail = format!(
        "{name} ({:.2} M parameters), {} × {} tokens, micro-batches of {} rows: {rate:.0} tokens/s, {:.3} TFLOP/s, MFU {:.1} % of the measured peak{}{}",
        parameters as f64 / 1e6,
        sizes.rows,
        sizes.tokens,
        sizes.micro_batch,
        flops / 1e12,
        100.0 * mfu,
        if mfu > 1.0 { " (above 100 %: the peak was under-measured, a busy machine?)" } else { "" },
        if changed { "" } else { "; THE WEIGHTS DID NOT CHANGE" }
    );
    Ok(Part::new(
        "learner",
        changed && rate.is_finite(),
        detail,
        json!({ "model": name, "parameters": parameters, "tokens_per_s": rate, "flops": flops, "mfu": mfu }),
    ))
}

fn generation(name: &str, model: &LoadedModel, device: Device, sizes: &Sizes) -> Result<Part> {
    let vocab = model.model.config().vocab_size;
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 1.0,
        max_new_tokens: sizes.new_tokens,
        stop_sequences: vec![],
        eos_id: None,
    };
    let mut figures = serde_json::Map::new();
    let mut line = Vec::new();
    for &batch in &sizes.batches {
        let prompts: Vec<Vec<u32>> = Vec::<i64>::try_from(random_ids(batch, sizes.prompt, vocab).view([-1]))?
            .chunks(sizes.prompt)
            .map(|row| row.iter().map(|&t| t as u32).collect())
            .collect();
        let mut rates = Vec::new();
        for i in 0..3 {
            let start = Instant::now();
            let out = Sampler::new(i).generate(&model.model, &prompts, &params)?;
            let secs = crate::elapsed_on(device, start).as_secs_f64();
            let new: usize = out.iter().map(|g| g.tokens.len()).sum();
            if new != batch * sizes.new_tokens {
                bail!("generation at batch {batch} made {new} tokens, not {}", batch * sizes.new_tokens);
            }
            if i > 0 {
                rates.push(new as f64 / secs);
            }
        }
        let rate = crate::env::median(rates);
        figures.insert(format!("tokens_per_s_batch_{batch}"), json!(rate));
        line.push(format!("{rate:.0} at batch {batch}"));
    }
    let detail = format!(
        "{name}: new tokens/s with the KV cache ({} prompt + {} new tokens, temperature 1): {}",
        sizes.prompt,
        sizes.new_tokens,
        line.join(", ")
    );
    figures.insert("model".into(), json!(name));
    Ok(Part::new("generation", true, detail, Value::Object(figures)))
}

/// Every variable's bytes, by name.
fn bytes_of(vs: &tch::nn::VarStore, kind: Kind) -> Result<Vec<(String, Vec<u8>)>> {
    Ok(policy::weights::export_as(vs, Some(kind))?.into_iter().map(|t| (t.name, t.data)).collect())
}

fn weights(name: &str, model: &LoadedModel, config: &ModelConfig, device: Device) -> Result<Part> {
    let start = Instant::now();
    let published = policy::weights::export_as(&model.vs, Some(Kind::BFloat16))?;
    let export_s = start.elapsed().as_secs_f64();
    let bytes: usize = published.iter().map(|t| t.data.len()).sum();
    let want: Vec<(String, Vec<u8>)> = published.iter().map(|t| (t.name.clone(), t.data.clone())).collect();
    let mut cpu = LoadedModel::fresh_as(config, Device::Cpu, Kind::Float, false)?;
    let start = Instant::now();
    policy::weights::import(&mut cpu.vs, published.iter().map(|t| t.as_named()))?;
    let cpu_import_s = start.elapsed().as_secs_f64();
    let mut dev = LoadedModel::fresh_as(config, device, policy::device::kind_for(device), false)?;
    let start = Instant::now();
    policy::weights::import(&mut dev.vs, published.iter().map(|t| t.as_named()))?;
    let dev_import_s = crate::elapsed_on(device, start).as_secs_f64();
    let cpu_same = bytes_of(&cpu.vs, Kind::BFloat16)? == want;
    let dev_same = bytes_of(&dev.vs, Kind::BFloat16)? == want;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.safetensors");
    let start = Instant::now();
    policy::weights::save_safetensors(&model.vs, &path)?;
    let save_s = start.elapsed().as_secs_f64();
    let mut back = LoadedModel::fresh_as(config, device, model.vs.kind(), false)?;
    let start = Instant::now();
    policy::weights::load_safetensors(&mut back.vs, &[&path])?;
    let load_s = crate::elapsed_on(device, start).as_secs_f64();
    let kind = model.vs.kind();
    let checkpoint_same = bytes_of(&back.vs, kind)? == bytes_of(&model.vs, kind)?;
    let round_trip = export_s + cpu_import_s.max(dev_import_s);
    let detail = format!(
        "{name}: {:.0} MB published as bf16 in {export_s:.2} s; imported into a CPU f32 model in {cpu_import_s:.2} s ({}), \
         into a {device:?} model in {dev_import_s:.2} s ({}); safetensors save {save_s:.2} s, load {load_s:.2} s ({})",
        bytes as f64 / 1e6,
        if cpu_same { "bit for bit" } else { "DIFFERENT" },
        if dev_same { "bit for bit" } else { "DIFFERENT" },
        if checkpoint_same { "bit for bit" } else { "DIFFERENT" },
    );
    Ok(Part::new(
        "weights",
        cpu_same && dev_same && checkpoint_same,
        detail,
        json!({
            "model": name, "bytes": bytes, "export_s": export_s, "cpu_import_s": cpu_import_s,
            "device_import_s": dev_import_s, "round_trip_s": round_trip, "save_s": save_s, "load_s": load_s,
        }),
    ))
}

fn attention(name: &str, model: &LoadedModel, device: Device, sizes: &Sizes) -> Result<Part> {
    let vocab = model.model.config().vocab_size;
    let mut figures = serde_json::Map::new();
    let mut line = Vec::new();
    for &t in &sizes.seqs {
        let ids = random_ids(1, t as usize, vocab).to_device(device);
        let mut times = Vec::new();
        for i in 0..3 {
            let start = Instant::now();
            let logp = model.model.token_logprobs(&ids, None, 1.0)?;
            logp.mean(Kind::Float).backward();
            let secs = crate::elapsed_on(device, start).as_secs_f64();
            if i > 0 {
                times.push(secs);
            }
        }
        model.vs.variables().values().for_each(|v| {
            let mut g = v.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        });
        let secs = crate::env::median(times);
        figures.insert(format!("forward_backward_s_t{t}"), json!(secs));
        line.push(format!("{:.0} ms at T = {t}", secs * 1e3));
    }
    figures.insert("model".into(), json!(name));
    let detail = format!("{name}: one row's forward + backward (is_causal, no mask): {}", line.join(", "));
    Ok(Part::new("attention", true, detail, Value::Object(figures)))
}
