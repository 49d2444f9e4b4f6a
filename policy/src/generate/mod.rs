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

/// One row of a batch whose rows sample each in their own way ([`Sampler::generate_rows`]).
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// The prompt ids (non-empty).
    pub prompt: &'a [u32],
    /// How this row samples.
    pub params: &'a SamplingParams,
    /// A seed of this row's own: its tokens then depend on nothing else in the batch. `None`:
    /// it draws from the sampler's stream.
    pub seed: Option<u64>,
    /// How many of the most likely tokens to report at each step, with their log-probs.
    pub top_logprobs: usize,
    /// Keys and values of a beginning of the prompt, from an earlier generation: that part is
    /// not run again (ignored unless its ids begin the prompt).
    pub reuse: Option<&'a PrefixCache>,
}

/// The keys and values of a sequence a generation has seen, kept so that a continuation of it
/// (the next turn of a multi-turn episode: the same ids, the reply, the next observation)
/// prefills only its new tokens ([`Sampler::generate_continuing`]).
#[derive(Debug)]
pub struct PrefixCache {
    /// The ids whose keys and values are held.
    ids: Vec<u32>,
    /// Per layer, keys and values `[kv_heads, ids.len(), head_dim]`.
    layers: Vec<(Tensor, Tensor)>,
}

impl PrefixCache {
    /// How many ids it holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The bytes its tensors take.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|(k, v)| k.numel() * k.kind().elt_size_in_bytes() + v.numel() * v.kind().elt_size_in_bytes())
            .sum()
    }

    /// How much of `prompt` it covers: its length when its ids begin `prompt` and leave at
    /// least one token to run, else 0.
    pub fn covers(&self, prompt: &[u32]) -> usize {
        if self.ids.len() < prompt.len() && prompt.starts_with(&self.ids) {
            self.ids.len()
        } else {
            0
        }
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
    /// The caller's `on_token` stopped it (a stop string in its text, a client gone).
    Caller,
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
    /// Per token, the `top_logprobs` most likely tokens and their log-probs under
    /// `logits / temperature` (temperature 1 when greedy), most likely first; empty unless asked.
    pub top_logprobs: Vec<Vec<(u32, f32)>>,
}

/// A seeded sampler; successive calls continue its random stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    rng: SplitMix64,
    /// Prompt tokens run through the model so far (reused ones not counted).
    prefilled: u64,
}

impl Sampler {
    /// A sampler whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: SplitMix64::new(seed), prefilled: 0 }
    }

    /// The RNG state, to checkpoint; [`Sampler::from_state`] continues from it.
    pub fn state(&self) -> u64 {
        self.rng.state()
    }

    /// A sampler continuing from a saved [`Sampler::state`].
    pub fn from_state(state: u64) -> Self {
        Self { rng: SplitMix64::new(state), prefilled: 0 }
    }

    /// Prompt tokens this sampler has run through the model (prefilled), those reused from a
    /// [`PrefixCache`] not counted.
    pub fn prefilled_tokens(&self) -> u64 {
        self.prefilled
    }

    /// Generates a continuation of every prompt (non-empty id lists) with `model`.
    pub fn generate(
        &mut self,
        model: &CausalLm,
        prompts: &[Vec<u32>],
        params: &SamplingParams,
    ) -> Result<Vec<Generation>> {
        let rows: Vec<Row<'_>> =
            prompts.iter().map(|p| Row { prompt: p, params, seed: None, top_logprobs: 0, reuse: None }).collect();
        self.generate_rows(model, &rows, false, &mut |_, _| true).map(|(g, _)| g)
    }

    /// Generates a continuation of every row, each with its own sampling parameters, seed, top
    /// log-probs and reused keys and values; `on_token(row, generation so far)` is called after
    /// each of a row's tokens, and returning `false` ends that row ([`StopReason::Caller`]). Rows
    /// without a seed draw from this sampler's stream, one uniform per row per step, in row
    /// order. With `keep`, each row's keys and values of its prompt and new tokens come back too,
    /// for its next turn.
    pub fn generate_rows(
        &mut self,
        model: &CausalLm,
        rows: &[Row<'_>],
        keep: bool,
        on_token: &mut dyn FnMut(usize, &Generation) -> bool,
    ) -> Result<(Vec<Generation>, Vec<PrefixCache>)> {
        check(model, rows)?;
        tch::no_grad(|| self.run(model, rows, keep, on_token))
    }

    /// [`Sampler::generate`] for sequences that continue earlier ones: `caches[i]` (from the
    /// previous call for the same sequence, or `None`) holds keys and values of a beginning of
    /// `prompts[i]`, which is then not run again; on return it holds those of the prompt and
    /// the new tokens, for the next call. A cache that does not begin the prompt is ignored.
    /// The tokens are those a full prefill would sample, up to floating-point rounding.
    pub fn generate_continuing(
        &mut self,
        model: &CausalLm,
        prompts: &[Vec<u32>],
        params: &SamplingParams,
        caches: &mut [Option<PrefixCache>],
    ) -> Result<Vec<Generation>> {
        if caches.len() != prompts.len() {
            return Err(PolicyError::Input(format!("{} caches for {} prompts", caches.len(), prompts.len())));
        }
        let rows: Vec<Row<'_>> = prompts
            .iter()
            .zip(caches.iter())
            .map(|(p, c)| Row { prompt: p, params, seed: None, top_logprobs: 0, reuse: c.as_ref() })
            .collect();
        let (out, kept) = self.generate_rows(model, &rows, true, &mut |_, _| true)?;
        for (slot, cache) in caches.iter_mut().zip(kept) {
            *slot = Some(cache);
        }
        Ok(out)
    }

    /// Generates for `rows`, each reusing its `reuse` where it begins the row's prompt; with
    /// `keep`, also returns each row's keys and values of its prompt and new tokens.
    ///
    /// ```text
    ///  slots:  [pad | reused c_r] [pad | suffix s_r] [generated …]
    ///          ◄──── C = max c ────►◄── S = max s ──►   prefill runs only the S suffix slots
    /// ```
    fn run(
        &mut self,
        model: &CausalLm,
        rows: &[Row<'_>],
        keep: bool,
        on_token: &mut dyn FnMut(usize, &Generation) -> bool,
    ) -> Result<(Vec<Generation>, Vec<PrefixCache>)> {
        let device = model.device();
        let reuse: Vec<Option<&PrefixCache>> = rows.iter().map(|r| r.reuse).collect();
        let most = rows.iter().map(|r| r.params.max_new_tokens).max().unwrap_or(1);
        let reused: Vec<usize> = rows.iter().zip(&reuse).map(|(r, c)| c.map_or(0, |c| c.covers(r.prompt))).collect();
        let c = reused.iter().copied().max().unwrap_or(0) as i64;
        let s = rows.iter().zip(&reused).map(|(r, &u)| r.prompt.len() - u).max().unwrap_or(1) as i64;
        let (b, p, n) = (rows.len() as i64, c + s, most as i64);
        let suffixes: Vec<&[u32]> = rows.iter().zip(&reused).map(|(r, &u)| &r.prompt[u..]).collect();
        self.prefilled += suffixes.iter().map(|x| x.len() as u64).sum::<u64>();
        let (ids, suffix_real) = left_pad(&suffixes, s, n);
        let ids = Tensor::from_slice(&ids).view([b, s]).to_device(device);
        let mut real = vec![false; (b * (p + n)) as usize];
        for (r, (&u, row)) in reused.iter().zip(&suffix_real.chunks((s + n) as usize).collect::<Vec<_>>()).enumerate() {
            let at = r * (p + n) as usize;
            real[at + c as usize - u..at + c as usize].fill(true);
            real[at + c as usize..at + (p + n) as usize].copy_from_slice(row);
        }
        let real = Tensor::from_slice(&real).view([b, p + n]).to_device(device);
        let mut next_pos: Vec<i64> = rows.iter().map(|r| r.prompt.len() as i64).collect();
        let mut cache = KvCache::new(model.config(), b, p + n, device, model.kind());
        for (r, (&u, held)) in reused.iter().zip(&reuse).enumerate() {
            if let (true, Some(held)) = (u > 0, held) {
                cache.put(r as i64, c - u as i64, &held.layers);
            }
        }
        cache.set_len(c);
        let fused = model.fused_weights();
        let prompt_real = real.narrow(1, 0, p);
        let positions = positions_from_mask(&prompt_real).narrow(1, c, s);
        let mut logits = model.step(&ids, &positions, &prompt_real, &mut cache, &fused);
        let mut out: Vec<Generation> = rows
            .iter()
            .map(|_| Generation {
                tokens: Vec::new(),
                logprobs: Vec::new(),
                stop_reason: StopReason::MaxTokens,
                top_logprobs: Vec::new(),
            })
            .collect();
        let mut done = vec![false; rows.len()];
        let mut own: Vec<Option<SplitMix64>> = rows.iter().map(|r| r.seed.map(SplitMix64::new)).collect();
        let settings: Vec<(f64, f64)> = rows.iter().map(|r| (r.params.temperature, r.params.top_p)).collect();
        let top_k = rows.iter().map(|r| r.top_logprobs).max().unwrap_or(0);
        for step in 0..n {
            let uniforms: Vec<f32> = own.iter_mut().map(|r| r.as_mut().unwrap_or(&mut self.rng).unit_f32()).collect();
            let uniforms = Tensor::from_slice(&uniforms).to_device(device);
            let (tokens, lps) = choose_rows(&logits, &settings, &uniforms);
            let tokens = Vec::<i64>::try_from(&tokens.to_device(tch::Device::Cpu))?;
            let lps = Vec::<f32>::try_from(&lps.to_device(tch::Device::Cpu))?;
            let top = if top_k > 0 { top_logprobs(&logits, &settings, top_k)? } else { Vec::new() };
            for (r, row) in rows.iter().enumerate() {
                if done[r] {
                    continue;
                }
                let g = &mut out[r];
                g.tokens.push(tokens[r] as u32);
                g.logprobs.push(lps[r]);
                if row.top_logprobs > 0 {
                    g.top_logprobs.push(top[r][..row.top_logprobs].to_vec());
                }
                if let Some(reason) = stop_reason(&g.tokens, row.params) {
                    g.stop_reason = reason;
                    done[r] = true;
                }
                if !on_token(r, g) && !done[r] {
                    g.stop_reason = StopReason::Caller;
                    done[r] = true;
                }
            }
            if step + 1 == n || done.iter().all(|&d| d) {
                break;
            }
            let input = Tensor::from_slice(&tokens).view([b, 1]).to_device(device);
            let pos = Tensor::from_slice(&next_pos).view([b, 1]).to_device(device);
            next_pos.iter_mut().for_each(|q| *q += 1);
            logits = model.step(&input, &pos, &real.narrow(1, 0, p + step + 1), &mut cache, &fused);
        }
        let kept = if keep { keep_caches(&cache, rows, &reused, &out, (c, p), device) } else { Vec::new() };
        Ok((out, kept))
    }
}

/// Each row's keys and values of its prompt and the generated tokens that were run (all but
/// the last), in the slot layout of [`Sampler::run`].
fn keep_caches(
    cache: &KvCache,
    rows: &[Row<'_>],
    reused: &[usize],
    out: &[Generation],
    (c, p): (i64, i64),
    device: tch::Device,
) -> Vec<PrefixCache> {
    rows.iter()
        .zip(reused)
        .zip(out)
        .enumerate()
        .map(|(r, ((row, &u), g))| {
            let fed = g.tokens.len().saturating_sub(1) as i64;
            let suffix = (row.prompt.len() - u) as i64;
            let slots: Vec<i64> = (c - u as i64..c).chain(p - suffix..p).chain(p..p + fed).collect();
            let slots = Tensor::from_slice(&slots).to_device(device);
            let mut ids = row.prompt.to_vec();
            ids.extend_from_slice(&g.tokens[..fed as usize]);
            PrefixCache { ids, layers: cache.take(r as i64, &slots) }
        })
        .collect()
}

/// [`choose`] for rows that may sample differently: one call per distinct (temperature, top_p),
/// on its rows only.
fn choose_rows(logits: &Tensor, settings: &[(f64, f64)], uniforms: &Tensor) -> (Tensor, Tensor) {
    let (t0, p0) = settings[0];
    if settings.iter().all(|&s| s == (t0, p0)) {
        return choose(logits, t0, p0, uniforms);
    }
    let b = settings.len() as i64;
    let device = logits.device();
    let mut tokens = Tensor::zeros([b], (tch::Kind::Int64, device));
    let mut lps = Tensor::zeros([b], (tch::Kind::Float, device));
    let mut seen: Vec<(f64, f64)> = Vec::new();
    for &(t, p) in settings {
        if seen.contains(&(t, p)) {
            continue;
        }
        seen.push((t, p));
        let idx: Vec<i64> = (0..b).filter(|&r| settings[r as usize] == (t, p)).collect();
        let idx = Tensor::from_slice(&idx).to_device(device);
        let (tk, lp) = choose(&logits.index_select(0, &idx), t, p, &uniforms.index_select(0, &idx));
        tokens = tokens.index_copy(0, &idx, &tk);
        lps = lps.index_copy(0, &idx, &lp);
    }
    (tokens, lps)
}

/// Per row, the `k` most likely tokens under its `logits / temperature` (1 when greedy) and
/// their log-probs, most likely first.
fn top_logprobs(logits: &Tensor, settings: &[(f64, f64)], k: usize) -> Result<Vec<Vec<(u32, f32)>>> {
    let temps: Vec<f32> = settings.iter().map(|&(t, _)| if t == 0.0 { 1.0 } else { t as f32 }).collect();
    let temps = Tensor::from_slice(&temps).to_device(logits.device()).unsqueeze(1);
    let logp = (logits.to_kind(tch::Kind::Float) / temps).log_softmax(-1, tch::Kind::Float);
    let (values, indices) = logp.topk(k as i64, -1, true, true);
    let values = Vec::<f32>::try_from(&values.to_device(tch::Device::Cpu).view([-1]))?;
    let indices = Vec::<i64>::try_from(&indices.to_device(tch::Device::Cpu).view([-1]))?;
    Ok(values
        .chunks(k)
        .zip(indices.chunks(k))
        .map(|(v, i)| i.iter().map(|&i| i as u32).zip(v.iter().copied()).collect())
        .collect())
}

/// Left-pads the prompts to `p` tokens (pad id 0, never attended to): the `[B, p]` ids and
/// the `[B, p + n]` mask of real slots (every generated slot is real).
fn left_pad(prompts: &[&[u32]], p: i64, n: i64) -> (Vec<i64>, Vec<bool>) {
    let (p, width) = (p as usize, (p + n) as usize);
    let mut ids = vec![0i64; prompts.len() * p];
    let mut real = vec![true; prompts.len() * width];
    for (r, prompt) in prompts.iter().enumerate() {
        let pad = p - prompt.len();
        ids[r * p + pad..(r + 1) * p].iter_mut().zip(prompt.iter()).for_each(|(d, &s)| *d = i64::from(s));
        real[r * width..r * width + pad].fill(false);
    }
    (ids, real)
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
fn check(model: &CausalLm, rows: &[Row<'_>]) -> Result<usize> {
    let bad = |m: String| Err(PolicyError::Input(m));
    if rows.is_empty() {
        return bad("generation needs at least one prompt".into());
    }
    let cfg = model.config();
    let mut longest = 0;
    let mut most = 0;
    for (i, row) in rows.iter().enumerate() {
        let (params, p) = (row.params, row.prompt);
        if !(params.temperature.is_finite() && params.temperature >= 0.0) {
            return bad(format!("temperature must be finite and ≥ 0, got {}", params.temperature));
        }
        if !(params.top_p > 0.0 && params.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", params.top_p));
        }
        if params.max_new_tokens == 0 {
            return bad(format!("row {i}: max_new_tokens must be ≥ 1"));
        }
        if row.top_logprobs as i64 > cfg.vocab_size {
            return bad(format!(
                "row {i}: top_logprobs {} exceeds the vocabulary of {}",
                row.top_logprobs, cfg.vocab_size
            ));
        }
        if p.is_empty() {
            return bad(format!("prompt {i} is empty"));
        }
        if let Some(&id) = p.iter().find(|&&id| i64::from(id) >= cfg.vocab_size) {
            return bad(format!("prompt {i} holds id {id}, outside the vocabulary of {}", cfg.vocab_size));
        }
        longest = longest.max(p.len());
        most = most.max(params.max_new_tokens);
    }
    if longest.saturating_add(most) as i64 > cfg.max_position_embeddings {
        return bad(format!(
            "{longest} prompt tokens + {most} new exceed max_position_embeddings {}",
            cfg.max_position_embeddings
        ));
    }
    Ok(longest)
}
