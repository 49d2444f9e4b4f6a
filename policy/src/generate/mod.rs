//! Batched generation with a KV cache: prompts of different lengths share one batch (left
//! padded; positions count real tokens only), and each row stops on its own at the EOS id, a
//! stop sequence or the token budget. Every sampled token comes with its log-prob under the
//! distribution it was drawn from: `logits / temperature`, truncated to the top-p nucleus and
//! renormalised when top_p < 1 (the learner recomputes the full distribution with
//! [`CausalLm::token_logprobs`], and its importance weight corrects the difference). At
//! temperature 0 (greedy) the log-probs are those of the untempered logits (temperature 1).
//!
//! ```text
//!  prefill:  [pad pad p p p]  ─ step ─► logits ─ choose ─► token₁ ─ step ─► … ─ tokenₙ
//!            [p   p   p p p]     KV cache: P + max_new_tokens slots, written in place
//! ```
//!
//! Runs on the calling thread and blocks: call it from a dedicated thread or
//! `spawn_blocking`, never on the async runtime.

mod sample;

use tch::Tensor;

use self::sample::choose;
use crate::error::{PolicyError, Result};
use crate::model::{positions_from_mask, CausalLm, KvCache};
use protocol::rng::SplitMix64;

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax).
    pub temperature: f64,
    /// Nucleus mass in (0, 1]; 1 samples from the whole distribution.
    pub top_p: f64,
    /// The most tokens to generate per row.
    pub max_new_tokens: usize,
    /// Token-id sequences that end a row when its generated tokens end with one (matched
    /// within the generated tokens only, never across the prompt).
    pub stop_sequences: Vec<Vec<u32>>,
    /// A token that ends a row.
    pub eos_id: Option<u32>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_p: 1.0, max_new_tokens: 256, stop_sequences: Vec::new(), eos_id: None }
    }
}

/// Why a row stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// It produced the EOS id.
    Eos,
    /// Its tokens ended with `stop_sequences[index]`.
    StopSequence {
        /// Which stop sequence.
        index: usize,
    },
    /// It reached `max_new_tokens`.
    MaxTokens,
}

/// One row's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The new tokens, including the EOS id or stop sequence that ended the row.
    pub tokens: Vec<u32>,
    /// Each token's log-prob under `logits / temperature` (f32).
    pub logprobs: Vec<f32>,
    /// Why the row stopped.
    pub stop_reason: StopReason,
}

/// A seeded sampler; successive calls continue its random stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: SplitMix64::new(seed) }
    }

    /// The RNG state, to checkpoint; [`Sampler::from_state`] continues from it.
    pub fn state(&self) -> u64 {
        self.rng.state()
    }

    /// A sampler continuing from a saved [`Sampler::state`].
    pub fn from_state(state: u64) -> Self {
        Self { rng: SplitMix64::new(state) }
    }

    /// Generates a continuation of every prompt (non-empty id lists) with `model`.
    pub fn generate(
        &mut self,
        model: &CausalLm,
        prompts: &[Vec<u32>],
        params: &SamplingParams,
    ) -> Result<Vec<Generation>> {
        let longest = check(model, prompts, params)?;
        tch::no_grad(|| self.run(model, prompts, params, longest))
    }

    fn run(
        &mut self,
        model: &CausalLm,
        prompts: &[Vec<u32>],
        params: &SamplingParams,
        p: usize,
    ) -> Result<Vec<Generation>> {
        let device = model.device();
        let (b, p, n) = (prompts.len() as i64, p as i64, params.max_new_tokens as i64);
        let (ids, real) = left_pad(prompts, p, n);
        let ids = Tensor::from_slice(&ids).view([b, p]).to_device(device);
        let real = Tensor::from_slice(&real).view([b, p + n]).to_device(device);
        let mut next_pos: Vec<i64> = prompts.iter().map(|q| q.len() as i64).collect();
        let mut cache = KvCache::new(model.config(), b, p + n, device, model.kind());
        let fused = model.fused_weights();
        let prompt_real = real.narrow(1, 0, p);
        let mut logits = model.step(&ids, &positions_from_mask(&prompt_real), &prompt_real, &mut cache, &fused);
        let mut out: Vec<Generation> = prompts
            .iter()
            .map(|_| Generation { tokens: Vec::new(), logprobs: Vec::new(), stop_reason: StopReason::MaxTokens })
            .collect();
        let mut done = vec![false; prompts.len()];
        for step in 0..n {
            let uniforms: Vec<f32> = (0..b).map(|_| self.rng.unit_f32()).collect();
            let uniforms = Tensor::from_slice(&uniforms).to_device(device);
            let (tokens, lps) = choose(&logits, params.temperature, params.top_p, &uniforms);
            let tokens = Vec::<i64>::try_from(&tokens.to_device(tch::Device::Cpu))?;
            let lps = Vec::<f32>::try_from(&lps.to_device(tch::Device::Cpu))?;
            record(&mut out, &mut done, &tokens, &lps, params);
            if step + 1 == n || done.iter().all(|&d| d) {
                break;
            }
            let input = Tensor::from_slice(&tokens).view([b, 1]).to_device(device);
            let pos = Tensor::from_slice(&next_pos).view([b, 1]).to_device(device);
            next_pos.iter_mut().for_each(|q| *q += 1);
            logits = model.step(&input, &pos, &real.narrow(1, 0, p + step + 1), &mut cache, &fused);
        }
        Ok(out)
    }
}

/// Left-pads the prompts to `p` tokens (pad id 0, never attended to): the `[B, p]` ids and
/// the `[B, p + n]` mask of real slots (every generated slot is real).
fn left_pad(prompts: &[Vec<u32>], p: i64, n: i64) -> (Vec<i64>, Vec<bool>) {
    let (p, width) = (p as usize, (p + n) as usize);
    let mut ids = vec![0i64; prompts.len() * p];
    let mut real = vec![true; prompts.len() * width];
    for (r, prompt) in prompts.iter().enumerate() {
        let pad = p - prompt.len();
        ids[r * p + pad..(r + 1) * p].iter_mut().zip(prompt).for_each(|(d, &s)| *d = i64::from(s));
        real[r * width..r * width + pad].fill(false);
    }
    (ids, real)
}

/// Appends each unfinished row's new token and log-prob, and marks rows that stop.
fn record(out: &mut [Generation], done: &mut [bool], tokens: &[i64], lps: &[f32], params: &SamplingParams) {
    for (r, (g, done)) in out.iter_mut().zip(done).enumerate().filter(|(_, (_, d))| !**d) {
        g.tokens.push(tokens[r] as u32);
        g.logprobs.push(lps[r]);
        if let Some(reason) = stop_reason(&g.tokens, params) {
            g.stop_reason = reason;
            *done = true;
        }
    }
}

/// Why `tokens` should stop here, if they should.
fn stop_reason(tokens: &[u32], params: &SamplingParams) -> Option<StopReason> {
    if params.eos_id.is_some() && tokens.last().copied() == params.eos_id {
        return Some(StopReason::Eos);
    }
    if let Some(index) = params.stop_sequences.iter().position(|s| !s.is_empty() && tokens.ends_with(s)) {
        return Some(StopReason::StopSequence { index });
    }
    (tokens.len() >= params.max_new_tokens).then_some(StopReason::MaxTokens)
}

/// Checks the request; returns the longest prompt's length.
fn check(model: &CausalLm, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<usize> {
    let bad = |m: String| Err(PolicyError::Input(m));
    if !(params.temperature.is_finite() && params.temperature >= 0.0) {
        return bad(format!("temperature must be finite and ≥ 0, got {}", params.temperature));
    }
    if !(params.top_p > 0.0 && params.top_p <= 1.0) {
        return bad(format!("top_p must be in (0, 1], got {}", params.top_p));
    }
    if prompts.is_empty() || params.max_new_tokens == 0 {
        return bad("generation needs at least one prompt and max_new_tokens ≥ 1".into());
    }
    let cfg = model.config();
    let mut longest = 0;
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return bad(format!("prompt {i} is empty"));
        }
        if let Some(&id) = p.iter().find(|&&id| i64::from(id) >= cfg.vocab_size) {
            return bad(format!("prompt {i} holds id {id}, outside the vocabulary of {}", cfg.vocab_size));
        }
        longest = longest.max(p.len());
    }
    if longest.saturating_add(params.max_new_tokens) as i64 > cfg.max_position_embeddings {
        return bad(format!(
            "{longest} prompt tokens + {} new exceed max_position_embeddings {}",
            params.max_new_tokens, cfg.max_position_embeddings
        ));
    }
    Ok(longest)
}
