//! Generation half of `reagent bench learner`: new tokens per second of batched sampling with the KV cache
//! (`policy::Sampler`) beside full recomputation (a forward pass over the whole sequence for
//! every new token), greedy, on the same model, prompts and device in the same run.
//!
//! ```text
//!  for each size (tiny, small) and repeat:
//!     KV cache:        Sampler::generate(prompts, max_new_tokens = N, temperature 0)
//!     recomputation:   N × forward(all tokens so far) → argmax of the last position
//!  report: median tokens/s of each, and the speed-up; both must produce the same tokens
//! ```

use std::time::Instant;

use anyhow::{ensure, Result};
use policy::{LoadedModel, Sampler, SamplingParams};
use tch::{Device, Tensor};

/// One size's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GenerationRow {
    /// The built-in size.
    pub size: String,
    /// Median new tokens/s with the KV cache.
    pub cached: f64,
    /// Median new tokens/s recomputing the whole sequence per token.
    pub recomputed: f64,
}

fn prompts(batch: usize, len: usize, vocab: i64) -> Vec<Vec<u32>> {
    (0..batch).map(|b| (0..len).map(|i| ((b * 31 + i * 7) as i64 % (vocab - 1) + 1) as u32).collect()).collect()
}

/// Greedy decoding by full recomputation; returns the new tokens of each row.
fn recompute(model: &LoadedModel, prompts: &[Vec<u32>], new_tokens: usize) -> Result<Vec<Vec<u32>>> {
    let rows: Vec<i64> = prompts.iter().flatten().map(|&t| i64::from(t)).collect();
    let mut ids = Tensor::from_slice(&rows).view([prompts.len() as i64, -1]).to_device(model.model.device());
    let mut out = vec![Vec::with_capacity(new_tokens); prompts.len()];
    for _ in 0..new_tokens {
        let logits = tch::no_grad(|| model.model.forward(&ids, None))?.logits;
        let next = logits.select(1, -1).argmax(-1, false);
        for (row, v) in Vec::<i64>::try_from(&next.to_device(Device::Cpu))?.into_iter().enumerate() {
            out[row].push(v as u32);
        }
        ids = Tensor::cat(&[ids, next.unsqueeze(1)], 1);
    }
    Ok(out)
}

/// Measures one size: `repeats` runs of each method; checks they agree token for token.
pub fn measure(
    size: &str,
    batch: usize,
    prompt_len: usize,
    new_tokens: usize,
    repeats: usize,
) -> Result<GenerationRow> {
    let model = learner::role::load_model(size, 0)?;
    let config = model.model.config().clone();
    let prompts = prompts(batch, prompt_len, config.vocab_size);
    let params = SamplingParams {
        temperature: 0.0,
        top_p: 1.0,
        max_new_tokens: new_tokens,
        stop_sequences: vec![],
        eos_id: None,
    };
    let (mut cached, mut recomputed) = (Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let gens = Sampler::new(0).generate(&model.model, &prompts, &params)?;
        let device = model.model.device();
        cached.push((batch * new_tokens) as f64 / crate::elapsed_on(device, start).as_secs_f64());
        let start = Instant::now();
        let full = recompute(&model, &prompts, new_tokens)?;
        recomputed.push((batch * new_tokens) as f64 / crate::elapsed_on(device, start).as_secs_f64());
        for (g, f) in gens.iter().zip(&full) {
            ensure!(g.tokens == *f, "the KV-cache tokens differ from full recomputation ({size})");
        }
    }
    Ok(GenerationRow {
        size: size.into(),
        cached: super::env::median(cached),
        recomputed: super::env::median(recomputed),
    })
}
