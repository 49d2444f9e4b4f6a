//! A Qwen2/Qwen3/Llama-family causal language model in tch, with Hugging Face's parameter names so
//! that a `model.safetensors` from transformers loads directly, and an optional value head.
//!
//! ```text
//!  ids ─ model.embed_tokens ─┬─ layers.{i}: x += self_attn(input_layernorm(x))
//!                            │             x += mlp(post_attention_layernorm(x))   × num_hidden_layers
//!                            └─ model.norm ─┬─ lm_head (or embed_tokensᵀ when tied) ─ logits [B,T,V]
//!                                           └─ value_head (optional)               ─ values [B,T]
//! ```

mod attention;
mod cache;
mod fused;
mod layers;
mod rope;

pub(crate) use self::attention::positions_from_mask;
pub(crate) use self::cache::KvCache;
pub(crate) use self::fused::FusedWeights;

use tch::nn::{Init, Path};
use tch::{Device, Kind, Tensor};

use self::attention::{causal_mask, Attention};
use self::fused::FusedLayer;
use self::layers::{Linear, Mlp, RmsNorm};
use self::rope::Rope;
use crate::config::ModelConfig;
use crate::error::{PolicyError, Result};
use crate::head::{self, TokenScores};
use crate::logprob;

/// What a forward pass gives.
#[derive(Debug)]
pub struct ModelOutput {
    /// Next-token logits, `[B, T, vocab_size]`, in f32 whatever the weights' kind (the head's
    /// matmul runs in f32: [`head::head_f32`]).
    pub logits: Tensor,
    /// The value head's estimates, `[B, T]` in f32, when the model has one.
    pub values: Option<Tensor>,
}

/// One decoder layer (`model.layers.{i}`).
#[derive(Debug)]
struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

/// The causal LM. Its weights live in the [`tch::nn::VarStore`] it was built on.
#[derive(Debug)]
pub struct CausalLm {
    cfg: ModelConfig,
    embed_tokens: Tensor,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Option<Tensor>,
    value_head: Option<Linear>,
    rope: Rope,
    device: Device,
}

impl CausalLm {
    /// Creates the model's variables under `vs` (use the var store's root, so names are
    /// `model.…`, `lm_head.weight`, `value_head.…`), freshly initialised as transformers does
    /// (N(0, initializer_range²), norms 1, biases 0); call it inside
    /// [`crate::seed::seeded`] for a reproducible initialisation. Load weights into the var store afterwards.
    pub fn new(vs: &Path, cfg: &ModelConfig, with_value_head: bool) -> Result<Self> {
        cfg.validate()?;
        let (h, std) = (cfg.hidden_size, cfg.initializer_range);
        let m = vs / "model";
        let embed_tokens =
            (&m / "embed_tokens").var("weight", &[cfg.vocab_size, h], Init::Randn { mean: 0.0, stdev: std });
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| {
                let l = &m / "layers" / i;
                DecoderLayer {
                    input_layernorm: RmsNorm::new(&l / "input_layernorm", h, cfg.rms_norm_eps),
                    self_attn: Attention::new(&l / "self_attn", cfg),
                    post_attention_layernorm: RmsNorm::new(&l / "post_attention_layernorm", h, cfg.rms_norm_eps),
                    mlp: Mlp::new(&l / "mlp", h, cfg.intermediate_size, cfg.mlp_bias, std),
                }
            })
            .collect();
        let norm = RmsNorm::new(&m / "norm", h, cfg.rms_norm_eps);
        let lm_head = (!cfg.tie_word_embeddings)
            .then(|| (vs / "lm_head").var("weight", &[cfg.vocab_size, h], Init::Randn { mean: 0.0, stdev: std }));
        let value_head = with_value_head.then(|| Linear::new(vs / "value_head", h, 1, true, std));
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling.as_ref(), vs.device());
        Ok(Self { cfg: cfg.clone(), embed_tokens, layers, norm, lm_head, value_head, rope, device: vs.device() })
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The device the weights are on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The weights' kind (f32 on CPU, bf16 on CUDA by default).
    pub fn kind(&self) -> Kind {
        self.embed_tokens.kind()
    }

    /// Whether the model has a value head.
    pub fn has_value_head(&self) -> bool {
        self.value_head.is_some()
    }

    /// Logits (and values) for every position. `input_ids`: `[B, T]` i64; `attention_mask`:
    /// `[B, T]`, nonzero on real tokens (left or right padding both work: positions count
    /// real tokens only). Outputs at padding positions are finite but meaningless.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<ModelOutput> {
        let hidden = self.hidden_states(input_ids, attention_mask)?;
        let values = self.value_head.as_ref().map(|v| v.forward(&hidden).squeeze_dim(-1).to_kind(Kind::Float));
        Ok(ModelOutput { logits: self.lm_head(&hidden), values })
    }

    /// `[B, T-1]`: log p(x_{t+1} | x_{≤t}) under `logits / temperature`, in f32 — what the
    /// learner compares with the behaviour log-probs that generation returned. The LM head runs
    /// in chunks ([`head`]): no `[B, T, V]` tensor is made, though with gradient autograd keeps
    /// every chunk's logits (use [`CausalLm::token_scores`] to avoid that too).
    pub fn token_logprobs(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        temperature: f64,
    ) -> Result<Tensor> {
        head::check_temperature(temperature)?;
        let (hidden, targets) = self.shifted_hidden(input_ids, attention_mask)?;
        let flat = hidden.reshape([-1, self.cfg.hidden_size]);
        let chunk = head::chunk_positions(self.cfg.vocab_size, self.device);
        let (logp, _) = head::scores(&flat, self.head_weight(), &targets.reshape([-1]), temperature, false, chunk);
        Ok(logp.view(targets.size().as_slice()))
    }

    /// [`CausalLm::token_logprobs`] (and, with `with_entropy`, each next-token distribution's
    /// entropy) for training on a real vocabulary: the head's logits are never all in memory,
    /// with or without gradient. After the loss's `backward()`, call
    /// [`TokenScores::backward`] to carry the gradient into the model (see [`head`]).
    pub fn token_scores(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        temperature: f64,
        with_entropy: bool,
    ) -> Result<TokenScores> {
        let chunk = head::chunk_positions(self.cfg.vocab_size, self.device);
        self.token_scores_in_chunks(input_ids, attention_mask, temperature, with_entropy, chunk)
    }

    /// [`CausalLm::token_scores`] with `chunk` positions per head chunk (tests force small ones).
    pub fn token_scores_in_chunks(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        temperature: f64,
        with_entropy: bool,
        chunk: i64,
    ) -> Result<TokenScores> {
        head::check_temperature(temperature)?;
        let (hidden, targets) = self.shifted_hidden(input_ids, attention_mask)?;
        TokenScores::new(&hidden, self.head_weight(), &targets, temperature, with_entropy, chunk)
    }

    /// The hidden states `[B, T-1, H]` that predict tokens `1..T`, and those tokens `[B, T-1]`.
    fn shifted_hidden(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let hidden = self.hidden_states(input_ids, attention_mask)?;
        let t = hidden.size()[1];
        if t < 2 {
            return Err(PolicyError::Input(format!("log-probs of next tokens need T ≥ 2, got {t}")));
        }
        let ids = input_ids.to_device(self.device);
        Ok((hidden.narrow(1, 0, t - 1), ids.narrow(1, 1, t - 1)))
    }

    /// The final norm's output `[B, T, hidden]`: what the LM head (and the value head) read.
    ///
    /// A batch whose rows are unpadded or right-padded (the learner's) runs attention as
    /// `is_causal` with no mask, which lets torch take its fused kernels (flash attention
    /// refuses any explicit mask); its real positions see exactly the keys the mask would give
    /// them, and padding positions, whose outputs nobody reads, see the padding before them.
    /// Left-padded rows (generation's prompts) take the explicit mask.
    pub fn hidden_states(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let ids = input_ids.to_device(self.device);
        let (real, right_padded) = self.check_inputs(&ids, attention_mask)?;
        let positions = positions_from_mask(&real);
        let t = ids.size()[1];
        let mask = (!right_padded).then(|| causal_mask(&real, 0, t));
        Ok(self.hidden(&ids, &positions, mask.as_ref(), None, None))
    }

    /// `[B, T]`: the entropy of each position's next-token distribution under
    /// `logits / temperature`, in f32.
    pub fn token_entropy(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        temperature: f64,
    ) -> Result<Tensor> {
        let out = self.forward(input_ids, attention_mask)?;
        logprob::entropy(&out.logits, temperature)
    }

    /// One step of cached decoding: runs `ids` (`[B, t]`, at `positions`) after what `cache`
    /// holds, appends their keys and values, and returns the last position's logits
    /// `[B, vocab]`. `key_real` (`[B, cache.len() + t]`) marks real tokens among all slots;
    /// `fused` is [`CausalLm::fused_weights`] taken since the weights last changed.
    pub(crate) fn step(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        key_real: &Tensor,
        cache: &mut KvCache,
        fused: &FusedWeights,
    ) -> Tensor {
        let t = ids.size()[1];
        let mask = causal_mask(key_real, cache.len(), t);
        let hidden = self.hidden(ids, positions, Some(&mask), Some(&mut *cache), Some(fused));
        cache.advance(t);
        let last = hidden.narrow(1, t - 1, 1);
        let logits = match &fused.head_f32 {
            Some(weight) => head::head_f32(&last, weight),
            None => self.lm_head(&last),
        };
        logits.squeeze_dim(1)
    }

    /// The fused projections of cached decoding ([`fused`]), copied from the current weights.
    pub(crate) fn fused_weights(&self) -> FusedWeights {
        let layers = self
            .layers
            .iter()
            .map(|l| FusedLayer { qkv: l.self_attn.fused_qkv(), gate_up: l.mlp.fused_gate_up() })
            .collect();
        let weight = self.head_weight();
        // An fp32 copy of a 16-bit head for the CPU; on CUDA the head multiplies the 16-bit
        // weight with an fp32 result (head::head_f32).
        let head_f32 = (weight.kind() != Kind::Float && !weight.device().is_cuda())
            .then(|| tch::no_grad(|| weight.to_kind(Kind::Float)));
        FusedWeights { layers, head_f32 }
    }

    fn hidden(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        mask: Option<&Tensor>,
        mut cache: Option<&mut KvCache>,
        fused: Option<&FusedWeights>,
    ) -> Tensor {
        let mut x = Tensor::embedding(&self.embed_tokens, ids, -1, false, false);
        let cos_sin = self.rope.cos_sin(positions, x.kind());
        for (i, layer) in self.layers.iter().enumerate() {
            let c = cache.as_deref_mut().map(|c| (c, i));
            let f = fused.and_then(|f| f.layers.get(i));
            let qkv = f.and_then(|f| f.qkv.as_ref());
            x = &x + layer.self_attn.forward(&layer.input_layernorm.forward(&x), &cos_sin, mask, c, qkv);
            let gate_up = f.map(|f| &f.gate_up);
            x = &x + layer.mlp.forward(&layer.post_attention_layernorm.forward(&x), gate_up);
        }
        self.norm.forward(&x)
    }

    /// The LM head, with f32 logits whatever the weights' kind (see [`head`]).
    fn lm_head(&self, hidden: &Tensor) -> Tensor {
        head::head_f32(hidden, self.head_weight())
    }

    /// The LM head's weight `[V, hidden]`: `lm_head.weight`, or the embedding when tied.
    fn head_weight(&self) -> &Tensor {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Checks shapes, kinds and id range; returns the `[B, T]` bool mask of real tokens and
    /// whether every row's real tokens come first (no padding, or right padding only), read
    /// from the device together with the id range (one synchronisation).
    fn check_inputs(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<(Tensor, bool)> {
        let size = input_ids.size();
        if size.len() != 2 || size[1] == 0 || input_ids.kind() != Kind::Int64 {
            return Err(PolicyError::Input(format!(
                "input_ids must be a non-empty [B, T] int64 tensor, got {:?} {size:?}",
                input_ids.kind()
            )));
        }
        if size[1] > self.cfg.max_position_embeddings {
            return Err(PolicyError::Input(format!(
                "{} tokens exceed max_position_embeddings {}",
                size[1], self.cfg.max_position_embeddings
            )));
        }
        let real = match attention_mask {
            None => Tensor::ones(size.as_slice(), (Kind::Bool, input_ids.device())),
            Some(m) if m.size() == size => m.ne(0).to_device(input_ids.device()),
            Some(m) => return Err(PolicyError::Input(format!("attention_mask is {:?}, input_ids {size:?}", m.size()))),
        };
        // A real token after a padding one anywhere: the batch is not right-padded.
        let t = size[1];
        let gaps = if t < 2 {
            Tensor::zeros([1], (Kind::Int64, input_ids.device()))
        } else {
            real.narrow(1, 1, t - 1)
                .logical_and(&real.narrow(1, 0, t - 1).logical_not())
                .any()
                .to_kind(Kind::Int64)
                .reshape([1])
        };
        let read = Tensor::cat(&[input_ids.min().reshape([1]), input_ids.max().reshape([1]), gaps], 0);
        let read = Vec::<i64>::try_from(read.to_device(Device::Cpu))?;
        let (lo, hi, gaps) = (read[0], read[1], read[2]);
        if lo < 0 || hi >= self.cfg.vocab_size {
            return Err(PolicyError::Input(format!("token ids span {lo}..={hi}, outside 0..{}", self.cfg.vocab_size)));
        }
        Ok((real, gaps == 0))
    }
}
