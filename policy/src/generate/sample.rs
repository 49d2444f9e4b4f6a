//! Choosing the next token from logits: greedy at temperature 0, otherwise nucleus (top-p)
//! sampling at a temperature, driven by uniforms from a seeded SplitMix64 so that a run is
//! reproducible and its RNG state is one `u64` to checkpoint.
//!
//! ```text
//!  logp = log_softmax(logits / T)                       (T = 1 when greedy)
//!  sort p descending; keep the smallest prefix whose mass reaches top_p (at least one token)
//!  token = first kept index whose cumulative kept mass exceeds u · kept mass,  u ~ U[0, 1)
//!  logprob = logp[token]                                (no top-p renormalisation)
//! ```

use tch::{Kind, Tensor};

/// Picks one token per row of `logits` (`[B, V]`) and returns `(tokens [B] i64, logprobs
/// [B] f32)`; `uniforms` (`[B]` f32 on the logits' device) drive the sampling.
pub(crate) fn choose(logits: &Tensor, temperature: f64, top_p: f64, uniforms: &Tensor) -> (Tensor, Tensor) {
    let z = logits.to_kind(Kind::Float);
    let greedy = temperature == 0.0;
    let logp = if greedy { z.log_softmax(-1, Kind::Float) } else { (&z / temperature).log_softmax(-1, Kind::Float) };
    let tokens = if greedy { z.argmax(-1, false) } else { nucleus(&logp, top_p, uniforms) };
    let lp = logp.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1);
    (tokens, lp)
}

/// Inverse-CDF sampling within the top-p nucleus. A stable descending sort puts the lowest
/// index first among equal probabilities, as `argmax` does, so a vanishing `top_p` picks the
/// argmax.
fn nucleus(logp: &Tensor, top_p: f64, uniforms: &Tensor) -> Tensor {
    let (sorted, order) = logp.exp().sort_stable(true, -1, true);
    let cum = sorted.cumsum(-1, Kind::Float);
    let keep = (&cum - &sorted).lt(top_p);
    let kept = &sorted * keep.to_kind(Kind::Float);
    let kept_cum = kept.cumsum(-1, Kind::Float);
    let v = kept_cum.size()[1];
    let target = uniforms.unsqueeze(-1) * kept_cum.narrow(-1, v - 1, 1);
    let n_kept = keep.sum_dim_intlist(-1, true, Kind::Int64);
    let pos = kept_cum.le_tensor(&target).sum_dim_intlist(-1, true, Kind::Int64).minimum(&(n_kept - 1));
    order.gather(-1, &pos, false).squeeze_dim(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nucleus_sampling_follows_the_uniform() {
        // p = [0.1, 0.6, 0.3]; top_p = 1: sorted [0.6 (1), 0.3 (2), 0.1 (0)], cum [.6, .9, 1].
        let logits = Tensor::from_slice(&[0.1f32, 0.6, 0.3]).log().view([1, 3]);
        let pick = |u: f32, top_p: f64| {
            let (t, _) = choose(&logits, 1.0, top_p, &Tensor::from_slice(&[u]));
            t.int64_value(&[0])
        };
        assert_eq!((pick(0.0, 1.0), pick(0.59, 1.0), pick(0.61, 1.0), pick(0.95, 1.0)), (1, 1, 2, 0));
        // top_p = 0.7 keeps tokens 1 and 2 (mass 0.9): u = 0.95 → 0.855 of 0.9 → token 2.
        assert_eq!((pick(0.5, 0.7), pick(0.95, 0.7)), (1, 2));
        assert_eq!(pick(0.99, 1e-9), 1);
        let (_, lp) = choose(&logits, 1.0, 0.7, &Tensor::from_slice(&[0.95f32]));
        assert!((lp.double_value(&[0]) - 0.3f64.ln()).abs() < 1e-6, "no renormalisation");
    }
}
