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

use anyhow::{bail, Result};
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

/// Greedy decoding by full recomputation: each row's new tokens, and at each step the
/// recomputed logits' top-1 value and its lead over the runner-up.
struct Recomputed {
    tokens: Vec<Vec<u32>>,
    /// Per row and step, (top-1 logit, top-1 − top-2).
    margins: Vec<Vec<(f32, f32)>>,
}

fn recompute(model: &LoadedModel, prompts: &[Vec<u32>], new_tokens: usize) -> Result<Recomputed> {
    let rows: Vec<i64> = prompts.iter().flatten().map(|&t| i64::from(t)).collect();
    let mut ids = Tensor::from_slice(&rows).view([prompts.len() as i64, -1]).to_device(model.model.device());
    let mut out = Recomputed {
        tokens: vec![Vec::with_capacity(new_tokens); prompts.len()],
        margins: vec![Vec::with_capacity(new_tokens); prompts.len()],
    };
    for _ in 0..new_tokens {
        let logits = tch::no_grad(|| model.model.forward(&ids, None))?.logits.select(1, -1);
        let (top, index) = logits.topk(2, -1, true, true);
        let next = index.select(1, 0);
        let top = Vec::<f32>::try_from(top.to_kind(tch::Kind::Float).to_device(Device::Cpu).view([-1]))?;
        for (row, v) in Vec::<i64>::try_from(&next.to_device(Device::Cpu))?.into_iter().enumerate() {
            out.tokens[row].push(v as u32);
            out.margins[row].push((top[2 * row], top[2 * row] - top[2 * row + 1]));
        }
        ids = Tensor::cat(&[ids, next.unsqueeze(1)], 1);
    }
    Ok(out)
}

/// Whether the KV cache's greedy tokens agree with recomputation's: identical, or identical up
/// to a step where recomputation's top two logits were within `tolerance` of each other
/// (relative to the top one's size, at least 1), after which the rows follow different prefixes
/// and are not compared. In f32 the tolerance is 0: only an exact tie may flip. In bf16 (8
/// significant bits, 0.4 % spacing) the cached and the recomputed hidden states of a position
/// differ by a few units of that spacing, so a step whose two best logits are within 5 % may
/// flip; a broken cache (a wrong position, a stale key) flips steps with clear leads, and fails.
fn agree(cached: &[u32], full: &[u32], margins: &[(f32, f32)], tolerance: f32) -> Result<(), String> {
    let Some(step) = cached.iter().zip(full).position(|(a, b)| a != b) else {
        return if cached.len() == full.len() {
            Ok(())
        } else {
            Err(format!("{} cached tokens against {} recomputed", cached.len(), full.len()))
        };
    };
    let (top, lead) = margins[step];
    if lead <= tolerance * top.abs().max(1.0) {
        Ok(())
    } else {
        Err(format!(
            "step {step}: cached token {} against recomputed {}, whose logit {top:.3} led the next by {lead:.3} (tolerance {tolerance})",
            cached[step], full[step]
        ))
    }
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
        let tolerance = if model.vs.kind() == tch::Kind::Float { 0.0 } else { 0.05 };
        for (row, g) in gens.iter().enumerate() {
            if let Err(why) = agree(&g.tokens, &full.tokens[row], &full.margins[row], tolerance) {
                bail!("the KV-cache tokens differ from full recomputation ({size}, row {row}): {why}");
            }
        }
    }
    Ok(GenerationRow {
        size: size.into(),
        cached: super::env::median(cached),
        recomputed: super::env::median(recomputed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Identical rows agree; a flip is allowed only where the two best logits were within the
    /// tolerance, and never in f32 unless they tied.
    #[test]
    fn tokens_may_part_only_at_a_near_tie() {
        let margins = [(10.0, 4.0), (12.0, 0.3), (9.0, 2.0)];
        assert!(agree(&[1, 2, 3], &[1, 2, 3], &margins, 0.0).is_ok());
        // Step 1 led by 0.3 on a logit of 12: within 5 % (0.6), not within 0.
        assert!(agree(&[1, 7, 8], &[1, 2, 3], &margins, 0.05).is_ok());
        let exact = agree(&[1, 7, 8], &[1, 2, 3], &margins, 0.0).unwrap_err();
        assert!(exact.contains("step 1") && exact.contains("recomputed 2"), "{exact}");
        // Step 0 led by 4 on 10: a clear lead, a broken cache.
        let clear = agree(&[5, 2, 3], &[1, 2, 3], &margins, 0.05).unwrap_err();
        assert!(clear.contains("step 0"), "{clear}");
        assert!(agree(&[1, 2], &[1, 2, 3], &margins, 0.05).is_err());
    }
}
