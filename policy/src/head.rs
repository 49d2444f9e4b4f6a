//! Log-probs (and entropies) of the sampled tokens straight from the final hidden states,
//! without a `[B, T, vocab]` logits or log-softmax tensor: the LM head runs over chunks of
//! positions, and each chunk keeps only `z[target] − logsumexp(z)` (and `lse − Σ softmax(z)·z`).
//!
//! ```text
//!  hidden [N, H] ─ chunk of c rows ─ z = hᵢ Wᵀ / temperature  [c, V] f32 ─┬─ z[target] − lse(z) ─ logp [c]
//!                                                                         └─ lse(z) − Σ p·z      ─ entropy [c]
//! ```
//!
//! With a real vocabulary (Qwen's 151,936) a full logits tensor dominates a training step's
//! memory: 0.6 GB of f32 per 1,024 positions, and autograd keeps it (and its gradient) alive.
//! [`TokenScores`] avoids that when the batch does not fit one chunk, with a two-phase
//! backward (the recomputation of Liger's and Cut Cross-Entropy's fused heads):
//!
//! 1. forward: the transformer with gradient up to the hidden states; the chunked head without
//!    gradient; `logp` and `entropy` handed out as leaves that require gradient;
//! 2. the caller backpropagates its loss, which leaves `∂L/∂logp` (and `∂L/∂entropy`) on them;
//! 3. [`TokenScores::backward`] recomputes each chunk's logits with gradient, backpropagates
//!    `Σ ∂L/∂logp · logp` through the head (accumulating into the head's weight), and finally
//!    `Σ ∂L/∂h · h` through the transformer.
//!
//! Peak memory is then one chunk's logits and their gradient (a few times [`CHUNK_BYTES`])
//! instead of several full `[N, V]` f32 tensors; the price is one more head matmul. When
//! everything fits one chunk the head runs once, with gradient, and `backward` does nothing.
//!
//! ## fp32 logits from a bf16 model
//!
//! The head's matmul runs in fp32 whatever the model's kind ([`head_f32`]): a bf16 logit near
//! 20 is only precise to 0.125, so log-probs from bf16 logits (and the PPO ratios and KLs made
//! from them) would carry noise of several hundredths on every token. The hidden states and
//! the weight are cast once per call (not per chunk); the recomputing backward sums every
//! chunk's weight gradient in an fp32 leaf and hands the model's weight one total, rounded once
//! to its kind, instead of one bf16 addition per chunk.

use tch::{Kind, Tensor};

use crate::error::{PolicyError, Result};

/// The most f32 logits one chunk holds: 64 MiB, 110 positions of a 151,936-token vocabulary
/// (the whole batch for the byte-level models). Above glibc's largest dynamic mmap threshold
/// (32 MiB) on purpose: a chunk's buffers are then always mapped and unmapped, so they leave
/// the resident set when freed. With 32 MiB chunks they came from the heap, and fragmentation
/// kept about one full logits tensor resident by the end of an update (measured with
/// `reagent bench learner-memory`).
pub const CHUNK_BYTES: i64 = 64 << 20;

/// Positions per chunk for a vocabulary of `vocab` tokens under [`CHUNK_BYTES`].
pub fn chunk_positions(vocab: i64) -> i64 {
    (CHUNK_BYTES / (4 * vocab.max(1))).max(1)
}

pub(crate) fn check_temperature(temperature: f64) -> Result<()> {
    if temperature.is_finite() && temperature > 0.0 {
        Ok(())
    } else {
        Err(PolicyError::Input(format!("temperature must be finite and > 0, got {temperature}")))
    }
}

/// `logp` `[N]` and, when asked, `entropy` `[N]` (both f32) of `targets` `[N]` from `hidden`
/// `[N, H]` and the head's `weight` `[V, H]`, `chunk` rows at a time. Runs with gradient if
/// the caller does (then autograd keeps every chunk's logits: use [`TokenScores`] instead).
pub(crate) fn scores(
    hidden: &Tensor,
    weight: &Tensor,
    targets: &Tensor,
    temperature: f64,
    with_entropy: bool,
    chunk: i64,
) -> (Tensor, Option<Tensor>) {
    let (mut logp, mut entropy) = (Vec::new(), Vec::new());
    let (hidden, weight) = (to_f32(hidden), to_f32(weight));
    for (start, len) in spans(hidden.size()[0], chunk) {
        let (lp, h) = chunk_scores(
            &hidden.narrow(0, start, len),
            &weight,
            &targets.narrow(0, start, len),
            temperature,
            with_entropy,
        );
        logp.push(lp);
        entropy.extend(h);
    }
    (Tensor::cat(&logp, 0), with_entropy.then(|| Tensor::cat(&entropy, 0)))
}

/// `t` in fp32: itself when it is fp32 already, else a cast that autograd follows.
fn to_f32(t: &Tensor) -> Tensor {
    if t.kind() == Kind::Float {
        t.shallow_clone()
    } else {
        t.to_kind(Kind::Float)
    }
}

/// The LM head `hidden · weightᵀ` with fp32 output whatever the kinds of `hidden` `[…, H]` and
/// `weight` `[V, H]` (see the module header): the logits generation samples from and the
/// log-probs it reports.
pub fn head_f32(hidden: &Tensor, weight: &Tensor) -> Tensor {
    to_f32(hidden).linear(&to_f32(weight), None::<&Tensor>)
}

/// `(start, len)` of each chunk of `chunk` rows out of `n`.
fn spans(n: i64, chunk: i64) -> impl Iterator<Item = (i64, i64)> {
    (0..n).step_by(chunk.max(1) as usize).map(move |start| (start, chunk.min(n - start)))
}

fn chunk_scores(
    hidden: &Tensor,
    weight: &Tensor,
    targets: &Tensor,
    temperature: f64,
    with_entropy: bool,
) -> (Tensor, Option<Tensor>) {
    // Both fp32 here (the callers cast once): the logits are fp32 products, not rounded bf16.
    let z = hidden.linear(weight, None::<&Tensor>);
    let z = if temperature == 1.0 { z } else { z / temperature };
    let lse = z.logsumexp([-1], false);
    let logp = z.gather(-1, &targets.unsqueeze(-1), false).squeeze_dim(-1) - &lse;
    let entropy =
        with_entropy.then(|| &lse - (z.softmax(-1, Kind::Float) * &z).sum_dim_intlist(-1, false, Kind::Float));
    (logp, entropy)
}

/// What the recomputing backward needs: the hidden states with their graph, the head's
/// weight, the targets and the scores' shape.
#[derive(Debug)]
struct Recompute {
    hidden: Tensor,
    weight: Tensor,
    targets: Tensor,
    temperature: f64,
    chunk: i64,
}

/// Log-probs of the sampled tokens (and entropies) whose gradient reaches the model through
/// [`TokenScores::backward`] (see the module header). Call the loss's `backward()` first,
/// then this one's.
#[derive(Debug)]
pub struct TokenScores {
    /// `[B, T−1]` f32: log p(x_{t+1} | x_{≤t}) at the temperature.
    pub logp: Tensor,
    /// `[B, T−1]` f32: the entropy of each next-token distribution, when asked for.
    pub entropy: Option<Tensor>,
    recompute: Option<Recompute>,
}

impl TokenScores {
    /// `hidden` `[B, T−1, H]` (with gradient), the head's `weight`, `targets` `[B, T−1]`.
    pub(crate) fn new(
        hidden: &Tensor,
        weight: &Tensor,
        targets: &Tensor,
        temperature: f64,
        with_entropy: bool,
        chunk: i64,
    ) -> Result<Self> {
        check_temperature(temperature)?;
        if chunk < 1 {
            return Err(PolicyError::Input(format!("a head chunk holds at least one position, got {chunk}")));
        }
        let shape = targets.size();
        let h = hidden.size()[2];
        let flat_hidden = hidden.reshape([-1, h]);
        let flat_targets = targets.reshape([-1]);
        let n = flat_targets.size()[0];
        let unflatten = |t: Tensor| t.view(shape.as_slice());
        if n <= chunk {
            let (logp, entropy) = scores(&flat_hidden, weight, &flat_targets, temperature, with_entropy, chunk);
            return Ok(Self { logp: unflatten(logp), entropy: entropy.map(unflatten), recompute: None });
        }
        let (logp, entropy) =
            tch::no_grad(|| scores(&flat_hidden.detach(), weight, &flat_targets, temperature, with_entropy, chunk));
        // Under `no_grad` the hidden states carry no graph (the weight still says it requires
        // gradient, so it cannot tell).
        let grad = hidden.requires_grad();
        Ok(Self {
            logp: unflatten(logp).set_requires_grad(grad),
            entropy: entropy.map(|e| unflatten(e).set_requires_grad(grad)),
            recompute: grad.then(|| Recompute {
                hidden: flat_hidden,
                weight: weight.shallow_clone(),
                targets: flat_targets,
                temperature,
                chunk,
            }),
        })
    }

    /// Carries the gradients that the loss's backward pass left on [`TokenScores::logp`] and
    /// [`TokenScores::entropy`] into the model's parameters (accumulating, like `backward`).
    /// Does nothing when the head already ran with gradient (one chunk) or without any.
    pub fn backward(&self) -> Result<()> {
        let Some(r) = &self.recompute else { return Ok(()) };
        let grad_of = |t: &Tensor| {
            let g = t.grad();
            if g.defined() {
                Some(g.reshape([-1]))
            } else {
                None
            }
        };
        let g_logp = grad_of(&self.logp);
        let g_entropy = self.entropy.as_ref().and_then(grad_of);
        if g_logp.is_none() && g_entropy.is_none() {
            return Ok(());
        }
        let mut hidden_grads = Vec::new();
        // A bf16 head's weight as an fp32 leaf: every chunk's gradient sums into its `.grad` in
        // fp32, and the model's weight receives the total once, below. An fp32 weight takes
        // each chunk's gradient itself (its `.grad` is fp32 already).
        let leaf = r.weight.kind() != Kind::Float && r.weight.requires_grad();
        let weight = if leaf {
            r.weight.detach().to_kind(Kind::Float).set_requires_grad(true)
        } else {
            // fp32 as it is; a frozen bf16 weight is cast (the chunks' hidden states are fp32).
            to_f32(&r.weight)
        };
        for (start, len) in spans(r.targets.size()[0], r.chunk) {
            let h = r.hidden.narrow(0, start, len).detach().to_kind(Kind::Float).set_requires_grad(true);
            let (lp, ent) =
                chunk_scores(&h, &weight, &r.targets.narrow(0, start, len), r.temperature, g_entropy.is_some());
            let mut terms = Vec::with_capacity(2);
            if let Some(g) = &g_logp {
                terms.push((lp * g.narrow(0, start, len)).sum(Kind::Float));
            }
            if let (Some(e), Some(g)) = (ent, &g_entropy) {
                terms.push((e * g.narrow(0, start, len)).sum(Kind::Float));
            }
            Tensor::stack(&terms, 0).sum(Kind::Float).f_backward()?;
            hidden_grads.push(h.grad());
        }
        let g_hidden = Tensor::cat(&hidden_grads, 0);
        let mut total = (&r.hidden * g_hidden.to_kind(r.hidden.kind())).sum(Kind::Float);
        if leaf {
            let g_weight = weight.grad();
            if g_weight.defined() {
                // Σ W ⊙ ∂L/∂W has gradient ∂L/∂W: one accumulation into the weight's `.grad`.
                total += (&r.weight * g_weight.to_kind(r.weight.kind())).sum(Kind::Float);
            }
        }
        total.f_backward()?;
        Ok(())
    }
}
