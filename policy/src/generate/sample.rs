//! Choosing the next token from logits: greedy at temperature 0, otherwise nucleus (top-p)
//! sampling at a temperature, driven by uniforms from a seeded SplitMix64 so that a run is
//! reproducible and its RNG state is one `u64` to checkpoint.
//!
//! ```text
//!  logp = log_softmax(logits / T)                       (T = 1 when greedy)
//!  top_p = 1: token = first index whose cumulative p (in vocabulary order) exceeds u,  u ~ U[0, 1)
//!  top_p < 1: sort p descending; keep the smallest prefix whose mass reaches top_p (at least one
//!             token); token = first kept index whose cumulative kept mass exceeds u · kept mass
//!  logprob = logp[token] − log(kept mass)               (top_p < 1: the truncated, renormalised
//!                                                        distribution the token was drawn from)
//! ```
//!
//! The behaviour log-prob is that of the distribution the token was really drawn from, so the
//! learner's importance weight π_learner / π_behaviour corrects for the nucleus truncation (for a
//! kept token it is the kept mass, ≤ 1). With top_p = 1 nothing is cut and the log-prob is the
//! full distribution's, exactly what the learner recomputes; nothing is sorted either, so a step
//! costs a softmax and a cumulative sum over the vocabulary.

use tch::{Kind, Tensor};

/// Picks one token per row of `logits` (`[B, V]`) and returns `(tokens [B] i64, logprobs
/// [B] f32)`; `uniforms` (`[B]` f32 on the logits' device) drive the sampling.
pub(crate) fn choose(logits: &Tensor, temperature: f64, top_p: f64, uniforms: &Tensor) -> (Tensor, Tensor) {
    let z = logits.to_kind(Kind::Float);
    let greedy = temperature == 0.0;
    let logp = if greedy { z.log_softmax(-1, Kind::Float) } else { (&z / temperature).log_softmax(-1, Kind::Float) };
    if greedy {
        let tokens = z.argmax(-1, false);
        let lp = logp.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1);
        return (tokens, lp);
    }
    if top_p >= 1.0 {
        let tokens = inverse_cdf(&logp, uniforms);
        return (tokens.shallow_clone(), logp.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1));
    }
    let (tokens, kept_mass) = nucleus(&logp, top_p, uniforms);
    let lp = logp.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1) - kept_mass.log();
    (tokens, lp)
}

/// Inverse-CDF sampling over the whole distribution in vocabulary order: the first index whose
/// cumulative probability exceeds `u` times the total (the total absorbs rounding, so the last
/// index is reachable and never overrun).
fn inverse_cdf(logp: &Tensor, uniforms: &Tensor) -> Tensor {
    let cum = logp.exp().cumsum(-1, Kind::Float);
    let v = cum.size()[1];
    let target = uniforms.unsqueeze(-1) * cum.narrow(-1, v - 1, 1);
    cum.le_tensor(&target).sum_dim_intlist(-1, false, Kind::Int64).clamp_max(v - 1)
}

/// Inverse-CDF sampling within the top-p nucleus; returns the tokens and each row's kept mass.
/// A stable descending sort puts the lowest index first among equal probabilities, as `argmax`
/// does, so a vanishing `top_p` picks the argmax.
fn nucleus(logp: &Tensor, top_p: f64, uniforms: &Tensor) -> (Tensor, Tensor) {
    let (sorted, order) = logp.exp().sort_stable(true, -1, true);
    let cum = sorted.cumsum(-1, Kind::Float);
    let keep = (&cum - &sorted).lt(top_p);
    let kept = &sorted * keep.to_kind(Kind::Float);
    let kept_cum = kept.cumsum(-1, Kind::Float);
    let v = kept_cum.size()[1];
    let mass = kept_cum.narrow(-1, v - 1, 1);
    let target = uniforms.unsqueeze(-1) * &mass;
    let n_kept = keep.sum_dim_intlist(-1, true, Kind::Int64);
    let pos = kept_cum.le_tensor(&target).sum_dim_intlist(-1, true, Kind::Int64).minimum(&(n_kept - 1));
    (order.gather(-1, &pos, false).squeeze_dim(-1), mass.squeeze_dim(-1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nucleus_sampling_follows_the_uniform() {
        // p = [0.1, 0.6, 0.3]; top_p = 1: vocabulary order, cum [.1, .7, 1].
        let logits = Tensor::from_slice(&[0.1f32, 0.6, 0.3]).log().view([1, 3]);
        let pick = |u: f32, top_p: f64| {
            let (t, _) = choose(&logits, 1.0, top_p, &Tensor::from_slice(&[u]));
            t.int64_value(&[0])
        };
        assert_eq!((pick(0.0, 1.0), pick(0.09, 1.0), pick(0.11, 1.0), pick(0.69, 1.0)), (0, 0, 1, 1));
        assert_eq!((pick(0.71, 1.0), pick(0.999_999, 1.0)), (2, 2));
        // top_p < 1 sorts: p sorted [0.6 (1), 0.3 (2), 0.1 (0)], cum [.6, .9, 1]; top_p = 0.7
        // keeps tokens 1 and 2 (mass 0.9): u = 0.95 → 0.855 of 0.9 → token 2.
        assert_eq!((pick(0.5, 0.7), pick(0.95, 0.7)), (1, 2));
        assert_eq!(pick(0.99, 1e-9), 1);
        // Behaviour log-probs of the distribution the token came from, by hand: with top_p = 0.7
        // the nucleus {1, 2} has mass 0.9, so token 2 was drawn with 0.3 / 0.9 and token 1 with
        // 0.6 / 0.9; with top_p = 1, p itself.
        let lp = |u: f32, top_p: f64| choose(&logits, 1.0, top_p, &Tensor::from_slice(&[u])).1.double_value(&[0]);
        assert!((lp(0.95, 0.7) - (0.3f64 / 0.9).ln()).abs() < 1e-6, "{}", lp(0.95, 0.7));
        assert!((lp(0.5, 0.7) - (0.6f64 / 0.9).ln()).abs() < 1e-6, "{}", lp(0.5, 0.7));
        assert!((lp(0.05, 1.0) - 0.1f64.ln()).abs() < 1e-6, "{}", lp(0.05, 1.0));
        assert!((lp(0.95, 1.0) - 0.3f64.ln()).abs() < 1e-6, "{}", lp(0.95, 1.0));
        assert!(lp(0.99, 1e-9).abs() < 1e-6, "a nucleus of one token has probability 1");
        // Two rows at a temperature: each renormalised by its own nucleus.
        let rows = Tensor::from_slice(&[0.1f32, 0.6, 0.3, 0.5, 0.25, 0.25]).log().view([2, 3]);
        let (t, l) = choose(&rows, 0.5, 0.8, &Tensor::from_slice(&[0.99f32, 0.99]));
        // T = 0.5 squares and renormalises: row 0 → [1, 36, 9]/46, nucleus {1} (36/46 = 0.78 < 0.8
        // keeps the next too: {1, 2}, mass 45/46); row 1 → [4, 1, 1]/6, nucleus {0, 1} (mass 5/6).
        assert_eq!(Vec::<i64>::try_from(&t).unwrap(), [2, 1]);
        let l = Vec::<f32>::try_from(&l).unwrap();
        assert!((f64::from(l[0]) - (9.0f64 / 45.0).ln()).abs() < 1e-5, "{l:?}");
        assert!((f64::from(l[1]) - (1.0f64 / 5.0).ln()).abs() < 1e-5, "{l:?}");
    }
}
