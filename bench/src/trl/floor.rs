//! The kernel floor of one GRPO step: the time of the step's matrix products and attention
//! kernels alone, at the run's shapes, on this machine's libtorch — what any implementation
//! built on those kernels pays at the least (norms, rotations, sampling, copies, the optimizer
//! and the framework's own work all come on top). Dividing the floor's tokens/s by TRL's gives
//! the highest ratio that such an implementation could reach at that batch size.
//!
//! ```text
//!  generation (no gradient), rows R, prompt P, n new tokens:
//!     prefill: every layer's products at R·P rows, causal attention over P; the head at R rows
//!     n − 1 decode steps: every layer's products at R rows, attention of 1 query over the cache;
//!                         the head at R rows
//!  update, T = P + n positions:
//!     every product forward (x·Wᵀ) and backward (g·W, gᵀ·x) at R·T rows, the head's too;
//!     causal attention forward and backward
//! ```
//!
//! Beside it, the core's peak: the rate of one large square product (1024³, fastest of the
//! passes), the most any code reaches on these cores. The step's products at that rate bound
//! every implementation, whatever its kernels.
//!
//! Decoding uses the fused projections (q‖k‖v, gate‖up) as our cached decoding does; training
//! the separate ones. Weights are drawn per layer so that no layer finds another's in cache.
//! The floor is the fastest of `repeats` passes: load only adds time.

use serde::Serialize;
use tch::{Device, Kind, Tensor};

use policy::ModelConfig;

/// The shapes of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepShape {
    /// Completions per step (rows of the batch).
    pub rows: i64,
    /// The longest prompt, in tokens (prompts are padded to it).
    pub prompt: i64,
    /// New tokens per completion (every row runs to the budget).
    pub new_tokens: i64,
}

/// The measured floor of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Floor {
    /// Seconds of generation's products and attention.
    pub generate_seconds: f64,
    /// Seconds of the update's products and attention, forward and backward.
    pub update_seconds: f64,
    /// Completion tokens of the step (rows × new tokens).
    pub tokens: i64,
    /// Floating-point operations of the products (attention left out), generation and update.
    pub product_flops: [f64; 2],
    /// FLOP/s of one 1024×1024 by 1024×1024 product: the core's peak as libtorch reaches it.
    pub peak_flops_per_sec: f64,
}

impl Floor {
    /// Completion tokens per second at the floor.
    pub fn tokens_per_sec(&self) -> f64 {
        self.tokens as f64 / (self.generate_seconds + self.update_seconds).max(1e-12)
    }

    /// Completion tokens per second if the step did nothing but its products, at the peak rate.
    pub fn peak_tokens_per_sec(&self) -> f64 {
        let seconds = self.product_flops.iter().sum::<f64>() / self.peak_flops_per_sec.max(1.0);
        self.tokens as f64 / seconds.max(1e-12)
    }
}

/// One linear map: input width, output width, whether it has a bias.
type Product = (i64, i64, bool);

/// One layer's products in training (Hugging Face's separate projections).
fn training_products(cfg: &ModelConfig) -> Vec<Product> {
    let (h, q, kv, i) = dims(cfg);
    let b = cfg.qkv_bias();
    vec![(h, q, b), (h, kv, b), (h, kv, b), (q, h, cfg.o_bias()), (h, i, false), (h, i, false), (i, h, false)]
}

/// One layer's products in cached decoding (q‖k‖v and gate‖up fused, as `policy` decodes).
fn decoding_products(cfg: &ModelConfig) -> Vec<Product> {
    let (h, q, kv, i) = dims(cfg);
    vec![(h, q + 2 * kv, cfg.qkv_bias()), (q, h, cfg.o_bias()), (h, 2 * i, false), (i, h, false)]
}

/// Hidden width, query width, key/value width, MLP width.
fn dims(cfg: &ModelConfig) -> (i64, i64, i64, i64) {
    let d = cfg.head_dim;
    (cfg.hidden_size, cfg.num_attention_heads * d, cfg.num_key_value_heads * d, cfg.intermediate_size)
}

/// The products' floating-point operations: (generation, update).
pub fn product_flops(cfg: &ModelConfig, s: StepShape) -> [f64; 2] {
    let per_row = |products: &[Product]| products.iter().map(|&(i, o, _)| 2.0 * (i * o) as f64).sum::<f64>();
    let layers = cfg.num_hidden_layers as f64;
    let head = 2.0 * (cfg.vocab_size * cfg.hidden_size) as f64;
    let (r, p, n) = (s.rows as f64, s.prompt as f64, s.new_tokens as f64);
    // Layers: the prompt once, then one row per decode step; the head once per new token.
    let generate = r * (p + n - 1.0) * layers * per_row(&decoding_products(cfg)) + r * n * head;
    // Forward and two backward products of the same size each.
    let update = 3.0 * r * (p + n) * (layers * per_row(&training_products(cfg)) + head);
    [generate, update]
}

/// Measures the floor of `shape` for `cfg` on the CPU, on the calling thread (which should run
/// with the bench's torch thread count): the fastest of `repeats` passes of each half.
pub fn measure(cfg: &ModelConfig, shape: StepShape, repeats: usize) -> Floor {
    let kernels = Kernels::new(cfg, shape);
    let fastest = |f: &dyn Fn()| {
        f(); // warm-up: allocator and kernel selection
        (0..repeats.max(1))
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let square = Tensor::randn([PEAK_SIDE, PEAK_SIDE], (Kind::Float, Device::Cpu));
    let peak_seconds = fastest(&|| {
        let _ = square.mm(&square);
    });
    Floor {
        generate_seconds: fastest(&|| tch::no_grad(|| kernels.generation())),
        update_seconds: fastest(&|| kernels.update()),
        tokens: shape.rows * shape.new_tokens,
        product_flops: product_flops(cfg, shape),
        peak_flops_per_sec: 2.0 * (PEAK_SIDE as f64).powi(3) / peak_seconds.max(1e-12),
    }
}

/// The side of the square product that measures the peak.
const PEAK_SIDE: i64 = 1024;

/// Random operands of every kernel the step runs.
struct Kernels {
    cfg: ModelConfig,
    shape: StepShape,
    /// Per layer, the decoding and the training weights (`[out, in]`, bias).
    decode_weights: Vec<Vec<(Tensor, Option<Tensor>)>>,
    train_weights: Vec<Vec<(Tensor, Option<Tensor>)>>,
    head: Tensor,
    /// Activations `[R·T, width]` by width, sliced to the rows a product needs.
    inputs: Vec<(i64, Tensor)>,
    /// Queries, keys and values: the prefill's, a decode step's (keys: the whole cache), and
    /// training's (leaves with gradient).
    prefill: (Tensor, Tensor, Tensor),
    decode: (Tensor, Tensor, Tensor),
    train: (Tensor, Tensor, Tensor),
}

impl Kernels {
    fn new(cfg: &ModelConfig, shape: StepShape) -> Self {
        let f32 = (Kind::Float, Device::Cpu);
        let weights = |products: Vec<Product>| -> Vec<Vec<(Tensor, Option<Tensor>)>> {
            (0..cfg.num_hidden_layers)
                .map(|_| {
                    products
                        .iter()
                        .map(|&(i, o, b)| (Tensor::randn([o, i], f32) * 0.02, b.then(|| Tensor::zeros([o], f32))))
                        .collect()
                })
                .collect()
        };
        let rows = shape.rows * (shape.prompt + shape.new_tokens);
        let (h, q, kv, i) = dims(cfg);
        let mut widths = vec![h, q, kv, i, 2 * i, q + 2 * kv, cfg.vocab_size];
        widths.sort_unstable();
        widths.dedup();
        let (p, t) = (shape.prompt, shape.prompt + shape.new_tokens);
        let (q, k, v) = attention_operands(cfg, shape.rows, t, t);
        Self {
            prefill: attention_operands(cfg, shape.rows, p, p),
            decode: attention_operands(cfg, shape.rows, 1, t),
            train: (q.set_requires_grad(true), k.set_requires_grad(true), v.set_requires_grad(true)),
            cfg: cfg.clone(),
            shape,
            decode_weights: weights(decoding_products(cfg)),
            train_weights: weights(training_products(cfg)),
            head: Tensor::randn([cfg.vocab_size, h], f32) * 0.02,
            inputs: widths.into_iter().map(|w| (w, Tensor::randn([rows, w], f32))).collect(),
        }
    }

    /// `rows` rows of an activation of `width` columns.
    fn input(&self, width: i64, rows: i64) -> Tensor {
        let t = &self.inputs.iter().find(|(w, _)| *w == width).expect("every width is allocated").1;
        t.narrow(0, 0, rows)
    }

    fn gqa(&self) -> bool {
        self.cfg.num_attention_heads != self.cfg.num_key_value_heads
    }

    /// Prefill, then `new_tokens − 1` decode steps over a growing cache.
    fn generation(&self) {
        let StepShape { rows, prompt, new_tokens } = self.shape;
        let ((q, k, v), (q1, kc, vc)) = (&self.prefill, &self.decode);
        for step in 0..new_tokens {
            let (m, keys) = if step == 0 { (rows * prompt, prompt) } else { (rows, prompt + step) };
            for layer in &self.decode_weights {
                for (w, b) in layer {
                    let _ = self.input(w.size()[1], m).linear(w, b.as_ref());
                }
                let _ = if step == 0 {
                    Tensor::scaled_dot_product_attention(q, k, v, None::<&Tensor>, 0.0, true, None, self.gqa())
                } else {
                    // Decode step `step` reads the prompt and the `step` tokens written so far.
                    let (k, v) = (kc.narrow(2, 0, keys), vc.narrow(2, 0, keys));
                    Tensor::scaled_dot_product_attention(q1, &k, &v, None::<&Tensor>, 0.0, false, None, self.gqa())
                };
            }
            let _ = self.input(self.cfg.hidden_size, rows).linear(&self.head, None::<&Tensor>);
        }
    }

    /// Every product forward and backward at `R·T` rows, and causal attention both ways.
    fn update(&self) {
        let StepShape { rows, prompt, new_tokens } = self.shape;
        let n = rows * (prompt + new_tokens);
        let product = |w: &Tensor, b: Option<&Tensor>| {
            let (out, inp) = (w.size()[0], w.size()[1]);
            let x = self.input(inp, n);
            let _ = x.linear(w, b);
            let g = self.input(out, n);
            let _ = g.mm(w);
            let _ = g.tr().mm(&x);
        };
        for layer in &self.train_weights {
            for (w, b) in layer {
                product(w, b.as_ref());
            }
            let (q, k, v) = &self.train;
            let out = Tensor::scaled_dot_product_attention(q, k, v, None::<&Tensor>, 0.0, true, None, self.gqa());
            // The gradients are returned, not accumulated: every pass does the same work.
            let _ = Tensor::run_backward(&[out.sum(Kind::Float)], &[q, k, v], false, false);
        }
        product(&self.head, None);
    }
}

/// Random queries `[R, heads, queries, d]`, keys and values `[R, kv_heads, keys, d]`.
fn attention_operands(cfg: &ModelConfig, rows: i64, queries: i64, keys: i64) -> (Tensor, Tensor, Tensor) {
    let f32 = (Kind::Float, Device::Cpu);
    let d = cfg.head_dim;
    let q = Tensor::randn([rows, cfg.num_attention_heads, queries, d], f32);
    let k = Tensor::randn([rows, cfg.num_key_value_heads, keys, d], f32);
    let v = Tensor::randn([rows, cfg.num_key_value_heads, keys, d], f32);
    (q, k, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use learner::inproc::single_turn::{shared_model_config, SHARED_MODEL_PARAMETERS};

    #[test]
    fn the_products_are_the_model_s_matrices() {
        // Independently of the product lists: the shared model's matrix parameters are all its
        // parameters less the q/k/v biases and the norms (two per layer and the final one); the
        // head is the tied embedding. A forward pass costs 2 FLOPs per matrix parameter per
        // token, a backward pass twice that.
        let cfg = shared_model_config();
        let (h, layers) = (cfg.hidden_size, cfg.num_hidden_layers);
        let biases = cfg.num_attention_heads * cfg.head_dim + 2 * cfg.num_key_value_heads * cfg.head_dim;
        let head = cfg.vocab_size * h;
        let layer_matrices = ((SHARED_MODEL_PARAMETERS - h - head) / layers - biases - 2 * h) as f64;
        let s = StepShape { rows: 8, prompt: 15, new_tokens: 64 };
        let [generate, update] = product_flops(&cfg, s);
        let expected_generate = 2.0 * 8.0 * (15.0 + 63.0) * 4.0 * layer_matrices + 2.0 * 8.0 * 64.0 * head as f64;
        let expected_update = 6.0 * 8.0 * 79.0 * (4.0 * layer_matrices + head as f64);
        assert_eq!(generate, expected_generate);
        assert_eq!(update, expected_update);
    }

    #[test]
    fn the_floor_runs_every_kernel_and_reports_the_step_s_tokens() {
        let mut cfg = shared_model_config();
        cfg.num_hidden_layers = 1;
        let s = StepShape { rows: 2, prompt: 3, new_tokens: 4 };
        let floor = measure(&cfg, s, 2);
        assert_eq!(floor.tokens, 8);
        assert!(floor.generate_seconds > 0.0 && floor.generate_seconds.is_finite(), "{floor:?}");
        assert!(floor.update_seconds > 0.0 && floor.update_seconds.is_finite(), "{floor:?}");
        assert_eq!(floor.product_flops, product_flops(&cfg, s));
        let expected = 8.0 / (floor.generate_seconds + floor.update_seconds);
        assert!((floor.tokens_per_sec() - expected).abs() < 1e-9 * expected);
        // Any CPU this runs on multiplies faster than 0.1 GFLOP/s and slower than 100 TFLOP/s.
        assert!(floor.peak_flops_per_sec > 1e8 && floor.peak_flops_per_sec < 1e14, "{floor:?}");
        let at_peak = 8.0 / (floor.product_flops.iter().sum::<f64>() / floor.peak_flops_per_sec);
        assert!((floor.peak_tokens_per_sec() - at_peak).abs() < 1e-9 * at_peak);
    }
}
