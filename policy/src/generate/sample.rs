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

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, well-mixed generator whose whole state is
/// one `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform in [0, 1), exactly representable in f32.
    pub(crate) fn next_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }
}

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
    fn splitmix_matches_its_reference_values() {
        // Reference: the C implementation by Vigna, seeded with 1234567.
        let mut r = SplitMix64(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        let u = SplitMix64(7).next_unit();
        assert!((0.0..1.0).contains(&u));
    }

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
