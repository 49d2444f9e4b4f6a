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
//! chunk's weight gradient in fp32 and hands the model's weight one total, rounded once to its
//! kind, instead of one bf16 addition per chunk.
//!
//! ## On a GPU: half-precision matmuls with fp32 results
//!
//! The product of two bf16 (or fp16) numbers is exact in fp32, so a matmul of 16-bit operands
//! that sums in fp32 and returns fp32 gives the same logits as the fp32 matmul of their casts.
//! On CUDA the head runs that way (`mm.dtype`, [`mm_f32`]): tensor-core speed instead of fp32
//! rates, which on an H200 held the learner's update at 0.28× transformers'. Autograd has no
//! derivative for `mm.dtype`, so the recomputing backward writes the head's gradient out by
//! hand (below) instead of differentiating the chunk, and on CUDA every training batch takes
//! the two-phase path; the chunks there are larger ([`chunk_positions`]). The gradient of the
//! logits is rounded to the model's kind before its two matmuls (as any bf16 backward does);
//! the weight's gradient is still summed over the chunks in fp32.
//!
//! ## The head's gradient, written out
//!
//! With `z = h Wᵀ / τ`, `logp = log_softmax(z)`, `p = exp(logp)` and `H = −Σ p·logp`, a loss
//! that weighs `logp[target]` by `a` and `H` by `b` has
//! `∂L/∂z = a·(onehot(target) − p) − b·p·(logp + H)`, and with `G = ∂L/∂z / τ`:
//! `∂L/∂h = G W` and `∂L/∂W = Gᵀ h`.

use tch::{Device, Kind, Tensor};

use crate::error::{PolicyError, Result};

/// The most f32 logits one chunk holds: 64 MiB, 110 positions of a 151,936-token vocabulary
/// (the whole batch for the byte-level models). Above glibc's largest dynamic mmap threshold
/// (32 MiB) on purpose: a chunk's buffers are then always mapped and unmapped, so they leave
/// the resident set when freed. With 32 MiB chunks they came from the heap, and fragmentation
/// kept about one full logits tensor resident by the end of an update (measured with
/// `reagent bench learner-memory`).
pub const CHUNK_BYTES: i64 = 64 << 20;

/// The most f32 logits one chunk holds on a CUDA device: 512 MiB, 883 positions of a
/// 151,936-token vocabulary. The host's allocator is not involved there, and a matmul of 110
/// rows leaves most of a GPU idle; a chunk's transient tensors (logits, probabilities, their
/// gradient) stay within a few GiB.
pub const CUDA_CHUNK_BYTES: i64 = 512 << 20;

/// Positions per chunk for a vocabulary of `vocab` tokens on `device`, under [`CHUNK_BYTES`]
/// (or [`CUDA_CHUNK_BYTES`] on a CUDA device).
pub fn chunk_positions(vocab: i64, device: Device) -> i64 {
    let bytes = if device.is_cuda() { CUDA_CHUNK_BYTES } else { CHUNK_BYTES };
    (bytes / (4 * vocab.max(1))).max(1)
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
    // Untracked half-precision products where nothing needs their gradient; else fp32 casts
    // (once per call, not per chunk) that autograd follows.
    let untracked = untracked_half(hidden, weight);
    let (hidden, weight) =
        if untracked { (hidden.shallow_clone(), weight.shallow_clone()) } else { (to_f32(hidden), to_f32(weight)) };
    let weight_t = weight.tr();
    for (start, len) in spans(hidden.size()[0], chunk) {
        let z = mm_f32(&hidden.narrow(0, start, len), &weight_t);
        let (lp, h) = chunk_scores(z, &targets.narrow(0, start, len), temperature, with_entropy);
        logp.push(lp);
        entropy.extend(h);
    }
    (Tensor::cat(&logp, 0), with_entropy.then(|| Tensor::cat(&entropy, 0)))
}

/// Whether `a · b` may run as a CUDA half-precision matmul with an fp32 result: both of the
/// same 16-bit kind on a CUDA device.
fn half_on_cuda(a: &Tensor, b: &Tensor) -> bool {
    a.device().is_cuda() && a.kind() == b.kind() && matches!(a.kind(), Kind::BFloat16 | Kind::Half)
}

/// `a` `[n, k]` · `b` `[k, m]` in fp32 (see the module header): one half-precision matmul with
/// an fp32 result when [`half_on_cuda`] (which autograd does not follow), else the fp32
/// matmul of fp32 casts (which it does).
fn mm_f32(a: &Tensor, b: &Tensor) -> Tensor {
    if half_on_cuda(a, b) {
        a.mm_dtype(b, Kind::Float)
    } else {
        to_f32(a).mm(&to_f32(b))
    }
}

/// Whether `hidden · weightᵀ` may take [`mm_f32`]'s half-precision matmul here: both qualify
/// ([`half_on_cuda`]) and autograd records nothing now — gradient mode is off, or neither
/// requires gradient. (tch does not expose the gradient mode; an operation on a leaf that
/// requires gradient tells it.)
fn untracked_half(hidden: &Tensor, weight: &Tensor) -> bool {
    half_on_cuda(hidden, weight)
        && !((hidden.requires_grad() || weight.requires_grad())
            && Tensor::zeros([1], (Kind::Float, Device::Cpu)).set_requires_grad(true).g_mul_scalar(2.0).requires_grad())
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
    if untracked_half(hidden, weight) {
        let mut shape = hidden.size();
        let z = mm_f32(&hidden.reshape([-1, *shape.last().unwrap_or(&1)]), &weight.tr());
        if let Some(last) = shape.last_mut() {
            *last = weight.size()[0];
        }
        z.view(shape.as_slice())
    } else {
        to_f32(hidden).linear(&to_f32(weight), None::<&Tensor>)
    }
}

/// `(start, len)` of each chunk of `chunk` rows out of `n`.
fn spans(n: i64, chunk: i64) -> impl Iterator<Item = (i64, i64)> {
    (0..n).step_by(chunk.max(1) as usize).map(move |start| (start, chunk.min(n - start)))
}

/// One chunk's log-probs of `targets` (and entropies) from its fp32 logits `z` `[c, V]`.
fn chunk_scores(z: Tensor, targets: &Tensor, temperature: f64, with_entropy: bool) -> (Tensor, Option<Tensor>) {
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
    /// `hidden` `[B, T−1, H]` (with gradient), the head's `weight`, `targets` `[B, T−1]`, and
    /// `chunk` positions per chunk ([`chunk_positions`]). [`crate::CausalLm::token_scores`]
    /// calls it with the model's final hidden states.
    pub fn new(
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
        // On CUDA the head's fast matmul has no autograd: the two phases even for one chunk.
        if n <= chunk && !half_on_cuda(hidden, weight) {
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
        // A loss of the entropies alone: the log-probs' gradient is zero.
        let g_logp = g_logp.unwrap_or_else(|| r.targets.zeros_like().to_kind(Kind::Float));
        // fp32 (or, on CUDA, the weight's own 16-bit kind: see the module header).
        let fast = half_on_cuda(&r.hidden, &r.weight);
        let weight = if fast { r.weight.detach() } else { to_f32(&r.weight.detach()) };
        let weight_t = weight.tr();
        // Σ over the chunks of Gᵀ h, in fp32, when the weight trains.
        let mut weight_grad =
            r.weight.requires_grad().then(|| Tensor::zeros(weight.size(), (Kind::Float, weight.device())));
        let mut hidden_grads = Vec::new();
        for (start, len) in spans(r.targets.size()[0], r.chunk) {
            let h = r.hidden.narrow(0, start, len).detach();
            let h = if fast { h } else { to_f32(&h) };
            let z = mm_f32(&h, &weight_t);
            let z = if r.temperature == 1.0 { z } else { z / r.temperature };
            let logp = z.log_softmax(-1, Kind::Float);
            drop(z);
            let p = logp.exp();
            let a = g_logp.narrow(0, start, len).unsqueeze(-1);
            // ∂L/∂z = −p·(a + b·(logp + H)), + a at the target.
            let coef = match &g_entropy {
                Some(b) => {
                    let entropy = -(&p * &logp).sum_dim_intlist(-1, true, Kind::Float);
                    (logp + entropy) * b.narrow(0, start, len).unsqueeze(-1) + &a
                }
                None => a.shallow_clone(),
            };
            let mut g = -(p * coef);
            let _ = g.scatter_add_(-1, &r.targets.narrow(0, start, len).unsqueeze(-1), &a);
            if r.temperature != 1.0 {
                g /= r.temperature;
            }
            let g = if fast { g.to_kind(weight.kind()) } else { g };
            hidden_grads.push(mm_f32(&g, &weight));
            if let Some(acc) = &mut weight_grad {
                *acc += mm_f32(&g.tr(), &h);
            }
        }
        let g_hidden = Tensor::cat(&hidden_grads, 0);
        let mut total = (&r.hidden * g_hidden.to_kind(r.hidden.kind())).sum(Kind::Float);
        if let Some(g_weight) = weight_grad {
            // Σ W ⊙ ∂L/∂W has gradient ∂L/∂W: one accumulation into the weight's `.grad`.
            total += (&r.weight * g_weight.to_kind(r.weight.kind())).sum(Kind::Float);
        }
        total.f_backward()?;
        Ok(())
    }
}
