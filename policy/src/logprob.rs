//! Log-probabilities and entropies from logits, in f32, at a sampling temperature: the
//! quantities PPO/GRPO compare between the behaviour policy (generation) and the policy
//! being trained.

use tch::{Kind, Tensor};

use crate::error::{PolicyError, Result};
use crate::head::check_temperature;

fn scaled(logits: &Tensor, temperature: f64) -> Tensor {
    let z = logits.to_kind(Kind::Float);
    if temperature == 1.0 {
        z
    } else {
        z / temperature
    }
}

/// log p(`targets`) under `softmax(logits / temperature)`: `logits` `[…, V]`, `targets` `[…]`
/// int64 → `[…]` f32. Computed as `z[target] − logsumexp(z)`, without materialising the full
/// log-softmax.
pub fn logprobs_of(logits: &Tensor, targets: &Tensor, temperature: f64) -> Result<Tensor> {
    check_temperature(temperature)?;
    let z = scaled(logits, temperature);
    let lse = z.logsumexp([-1], false);
    Ok(z.gather(-1, &targets.unsqueeze(-1), false).squeeze_dim(-1) - lse)
}

/// `[B, T-1]`: log p(x_{t+1} | x_{≤t}) from a forward pass's logits `[B, T, V]` over
/// `input_ids` `[B, T]`.
pub fn shifted_logprobs(logits: &Tensor, input_ids: &Tensor, temperature: f64) -> Result<Tensor> {
    let t = input_ids.size().get(1).copied().unwrap_or(0);
    if t < 2 {
        return Err(PolicyError::Input(format!("log-probs of next tokens need T ≥ 2, got {t}")));
    }
    logprobs_of(&logits.narrow(1, 0, t - 1), &input_ids.narrow(1, 1, t - 1), temperature)
}

/// The entropy of `softmax(logits / temperature)` over the last axis: `[…, V]` → `[…]` f32.
pub fn entropy(logits: &Tensor, temperature: f64) -> Result<Tensor> {
    check_temperature(temperature)?;
    let logp = scaled(logits, temperature).log_softmax(-1, Kind::Float);
    Ok(-(logp.exp() * &logp).sum_dim_intlist(-1, false, Kind::Float))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_and_entropy_match_hand_computation() {
        // logits [0, ln 3] at T = 1 → p = [1/4, 3/4].
        let logits = Tensor::from_slice(&[0.0f32, 3f32.ln()]).view([1, 2]);
        let lp = logprobs_of(&logits, &Tensor::from_slice(&[1i64]), 1.0).unwrap();
        assert!((lp.double_value(&[0]) - 0.75f64.ln()).abs() < 1e-6);
        let h = entropy(&logits, 1.0).unwrap().double_value(&[0]);
        let expected = -(0.25f64 * 0.25f64.ln() + 0.75 * 0.75f64.ln());
        assert!((h - expected).abs() < 1e-6);
        // T = 2 halves the logits: p ∝ [1, √3].
        let lp2 = logprobs_of(&logits, &Tensor::from_slice(&[1i64]), 2.0).unwrap().double_value(&[0]);
        let s3 = 3f64.sqrt();
        assert!((lp2 - (s3 / (1.0 + s3)).ln()).abs() < 1e-6);
        assert!(entropy(&logits, 0.0).is_err());
    }
}
