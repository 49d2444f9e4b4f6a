//! Our own AdamW, so that its moments can be checkpointed and restored exactly (tch's
//! `nn::Optimizer` keeps them inside libtorch, out of reach).
//!
//! One update, in the order `torch.optim.AdamW` (single-tensor path) applies it:
//!
//! ```text
//!  g ← g · min(1, max_norm / (‖g‖₂,global + 1e-6))      clip_grad_norm_, over all parameters
//!  p ← p · (1 − lr·wd)                                   decoupled weight decay (if the param decays)
//!  m ← lerp(m, g, 1 − β₁);  v ← β₂·v + (1 − β₂)·g²
//!  p ← p − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)
//! ```
//!
//! Parameters without a gradient are skipped (no decay, no moment update), as in PyTorch. The
//! step counter `t` is shared by all parameters.
//!
//! ## Mixed precision: fp32 masters
//!
//! The moments are fp32 whatever the parameters' kind. A parameter held in a lower precision
//! (bf16 on CUDA, where forward and backward run in bf16) gets an fp32 **master** copy: the
//! update is computed from the gradient cast to fp32 and applied to the master, and the model's
//! working copy is refreshed from it (`p.copy_(master)`, one rounding per step). Updating a bf16
//! weight in place would round every step below half a bf16 ulp (about 1.2e-4 near 0.02) to
//! nothing: at the learning rates LLM RL uses (1e-6 to 5e-6) no weight would ever move.
//!
//! ```text
//!  bf16 working copy ── forward/backward in bf16 ──► bf16 grad ── to fp32 ──► clip ─┐
//!        ▲                                                                          ▼
//!        └──────────── copy_ (round to bf16) ◄──── fp32 master ◄── AdamW (fp32 m, v)
//! ```
//!
//! Gradients accumulate in fp32 too. A step's gradient is the sum of several backward passes
//! (micro-batches); [`AdamW::accumulate`], called after each, adds the bf16 `.grad` of every
//! parameter that has a master into an fp32 accumulator and zeroes it, so each micro-batch's
//! gradient is rounded to bf16 once and the sum is fp32 (summing in `.grad` would round every
//! partial sum). [`AdamW::step`] accumulates what is left and steps on the accumulators.
//!
//! A working copy refreshed after each step, rather than autocast over fp32 weights: the
//! weights the actors serve are the working copy's kind already, each forward reads half the
//! bytes, and tch has no autocast for every op the models use. Checkpoints take the masters
//! ([`AdamW::master_weights`]), so resume is exact.

pub mod schedule;

use tch::{Kind, Tensor};

use crate::error::{LearnerError, Result};
pub use schedule::{LrDecay, LrSchedule};

/// AdamW's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    /// The learning-rate schedule.
    pub schedule: LrSchedule,
    /// β₁, the first moment's decay.
    pub beta1: f64,
    /// β₂, the second moment's decay.
    pub beta2: f64,
    /// ε, added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay (for parameters that decay).
    pub weight_decay: f64,
    /// Global gradient-norm clip; `None` leaves gradients alone.
    pub max_grad_norm: Option<f64>,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            schedule: LrSchedule::constant(1e-3),
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            max_grad_norm: Some(1.0),
        }
    }
}

/// A trained parameter: its name (for checkpoints), the tensor (a leaf with gradient), and
/// whether weight decay applies.
#[derive(Debug)]
pub struct Param {
    /// The name, e.g. `actor.0.weight`.
    pub name: String,
    /// The tensor.
    pub tensor: Tensor,
    /// Whether decoupled weight decay applies.
    pub decay: bool,
}

/// The optimizer's state as named tensors (`m.<param>`, `v.<param>`) and the step count.
#[derive(Debug)]
pub struct OptimizerState {
    /// Updates applied.
    pub step: u64,
    /// The moments, named `m.<param>` and `v.<param>`.
    pub tensors: Vec<(String, Tensor)>,
}

/// What one update did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// The learning rate used.
    pub lr: f64,
    /// The global gradient norm before clipping.
    pub grad_norm: f64,
    /// Whether clipping scaled the gradients down.
    pub clipped: bool,
}

/// AdamW over a fixed list of parameters.
#[derive(Debug)]
pub struct AdamW {
    params: Vec<Param>,
    /// The fp32 master of each parameter not held in fp32 (`None`: the parameter is its own).
    masters: Vec<Option<Tensor>>,
    /// The fp32 gradient sum of each parameter with a master, once it has had a gradient.
    accumulated: Vec<Option<Tensor>>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    step: u64,
    /// Where the next update sits in the trainer's plan (the schedule's decay reads it); equal
    /// to `step` unless the trainer moves it ahead ([`AdamW::advance_schedule_to`]).
    position: u64,
    config: AdamWConfig,
}

impl AdamW {
    /// An optimizer over `params` with zeroed fp32 moments, and an fp32 master copy of every
    /// parameter held in another kind.
    pub fn new(params: Vec<Param>, config: AdamWConfig) -> Self {
        let masters: Vec<Option<Tensor>> = params
            .iter()
            .map(|p| (p.tensor.kind() != Kind::Float).then(|| p.tensor.detach().to_kind(Kind::Float)))
            .collect();
        let zeros = |p: &Param| p.tensor.zeros_like().to_kind(Kind::Float).detach();
        let m = params.iter().map(zeros).collect();
        let v = params.iter().map(zeros).collect();
        let accumulated = params.iter().map(|_| None).collect();
        Self { params, masters, accumulated, m, v, step: 0, position: 0, config }
    }

    /// An optimizer over named tensors, in name order, with weight decay on matrices only
    /// (tensors of two or more dimensions; biases and norm gains do not decay).
    pub fn from_named(named: impl IntoIterator<Item = (String, Tensor)>, config: AdamWConfig) -> Self {
        let mut params: Vec<Param> =
            named.into_iter().map(|(name, tensor)| Param { decay: tensor.dim() >= 2, name, tensor }).collect();
        params.sort_by(|a, b| a.name.cmp(&b.name));
        Self::new(params, config)
    }

    /// Updates applied so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Moves the schedule's position ahead to `position` (never back): the next update decays
    /// as the plan's update `position` would, its warm-up still counted in updates taken. A
    /// trainer calls it at each iteration's start with the updates its budget planned before
    /// it, so skipped updates do not hold the decay back.
    pub fn advance_schedule_to(&mut self, position: u64) {
        self.position = self.position.max(position);
    }

    /// Where the next update sits in the plan (see [`AdamW::advance_schedule_to`]).
    pub fn schedule_position(&self) -> u64 {
        self.position
    }

    /// The parameters, in order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The settings.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// Zeroes every parameter's gradient (and the fp32 sums of [`AdamW::accumulate`]).
    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.tensor.zero_grad();
        }
        for acc in self.accumulated.iter_mut().flatten() {
            let _ = acc.zero_();
        }
    }

    /// Adds the gradient of every parameter held in a kind other than fp32 into its fp32 sum
    /// and zeroes that `.grad`: call it after each micro-batch's backward, so that a step over
    /// many micro-batches sums them in fp32 (see the module header). fp32 parameters keep
    /// accumulating in their own `.grad`, which is fp32 already.
    pub fn accumulate(&mut self) {
        tch::no_grad(|| {
            for (i, p) in self.params.iter().enumerate() {
                if self.masters[i].is_none() {
                    continue;
                }
                let mut g = p.tensor.grad();
                if !g.defined() {
                    continue;
                }
                match &mut self.accumulated[i] {
                    Some(acc) => {
                        let _ = acc.g_add_(&g.to_kind(Kind::Float));
                    }
                    None => self.accumulated[i] = Some(g.to_kind(Kind::Float).copy()),
                }
                let _ = g.zero_();
            }
        });
    }

    /// The fp32 gradient of every parameter as the next [`AdamW::step`] would take it (after
    /// accumulating what `.grad` holds), `None` for one that has had none. Shares storage with
    /// the optimizer: copy before the step.
    pub fn gradients(&mut self) -> Vec<Option<Tensor>> {
        self.accumulate();
        self.params
            .iter()
            .zip(&self.accumulated)
            .map(|(p, acc)| match acc {
                Some(acc) => Some(acc.shallow_clone()),
                None => Some(p.tensor.grad()).filter(Tensor::defined).filter(|g| g.kind() == Kind::Float),
            })
            .collect()
    }

    /// Whether some parameter is held in a kind other than fp32 and so has an fp32 master.
    pub fn has_masters(&self) -> bool {
        self.masters.iter().any(Option::is_some)
    }

    /// The fp32 weights the optimizer updates, by parameter name: each parameter's master, or
    /// the parameter itself when it is fp32 (sharing storage; copy before the next step). What a
    /// checkpoint keeps.
    pub fn master_weights(&self) -> Vec<(String, Tensor)> {
        self.params
            .iter()
            .zip(&self.masters)
            .map(|(p, m)| (p.name.clone(), m.as_ref().unwrap_or(&p.tensor).shallow_clone()))
            .collect()
    }

    /// Sets the weights from fp32 values by name (a checkpoint's [`AdamW::master_weights`]):
    /// the masters exactly, the working copies rounded from them. Every parameter must be
    /// present with its shape.
    pub fn load_master_weights(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        if named.len() != self.params.len() {
            return Err(LearnerError::Shape(format!(
                "{} weights given, the optimizer has {} parameters",
                named.len(),
                self.params.len()
            )));
        }
        for (p, master) in self.params.iter().zip(&self.masters) {
            let src = named
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, t)| t)
                .ok_or_else(|| LearnerError::Shape(format!("the weights lack {}", p.name)))?;
            if src.size() != p.tensor.size() {
                return Err(LearnerError::Shape(format!(
                    "{}: given {:?}, the parameter {:?}",
                    p.name,
                    src.size(),
                    p.tensor.size()
                )));
            }
            tch::no_grad(|| -> Result<()> {
                if let Some(m) = master {
                    m.shallow_clone().f_copy_(src)?;
                }
                p.tensor.shallow_clone().f_copy_(master.as_ref().unwrap_or(src))?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Clips the gradients to the global norm and applies one update at the schedule's rate,
    /// in fp32 (to the masters, then refreshing the working copies; see the module header).
    /// A NaN or infinite gradient norm leaves parameters, moments and step untouched and
    /// returns [`LearnerError::NonFiniteGradient`].
    pub fn step(&mut self) -> Result<StepStats> {
        // fp32 gradients: the parameter's own for fp32 parameters (clipping scales it in place,
        // as torch does), the fp32 sum for the others.
        let grads = self.gradients();
        let (grad_norm, clipped) = tch::no_grad(|| clip_grad_norm(&grads, self.config.max_grad_norm))?;
        let lr = self.config.schedule.lr_at_position(self.step, self.position);
        self.position = self.position.max(self.step) + 1;
        self.step += 1;
        let c = self.config;
        let t = self.step as f64;
        let step_size = lr / (1.0 - c.beta1.powf(t));
        let bias2_sqrt = (1.0 - c.beta2.powf(t)).sqrt();
        tch::no_grad(|| {
            for (i, grad) in grads.iter().enumerate() {
                let Some(g) = grad else { continue };
                let mut p = self.masters[i].as_ref().unwrap_or(&self.params[i].tensor).shallow_clone();
                if self.params[i].decay && c.weight_decay != 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - lr * c.weight_decay);
                }
                let _ = self.m[i].lerp_(g, 1.0 - c.beta1);
                let _ = self.v[i].g_mul_scalar_(c.beta2);
                // addcmul_(g, g, value = 1 − β₂) computes v + (value·g)·g.
                let _ = self.v[i].g_add_(&((g * (1.0 - c.beta2)) * g));
                let denom = self.v[i].sqrt() / bias2_sqrt + c.eps;
                // addcdiv_(m, denom, value = −step_size) computes p + (value·m) / denom.
                let _ = p.g_add_(&((&self.m[i] * -step_size) / denom));
                if self.masters[i].is_some() {
                    self.params[i].tensor.shallow_clone().copy_(&p);
                }
            }
        });
        Ok(StepStats { lr, grad_norm, clipped })
    }

    /// The moments (fp32) and step, for a checkpoint (the tensors share storage with the optimizer;
    /// write them out before the next update).
    pub fn state(&self) -> OptimizerState {
        let mut tensors = Vec::with_capacity(2 * self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            tensors.push((format!("m.{}", p.name), self.m[i].shallow_clone()));
            tensors.push((format!("v.{}", p.name), self.v[i].shallow_clone()));
        }
        OptimizerState { step: self.step, tensors }
    }

    /// Restores moments and step saved by [`AdamW::state`]; every parameter's two moments must
    /// be present with its shape.
    pub fn load_state(&mut self, state: &OptimizerState) -> Result<()> {
        let find = |name: &str| state.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t);
        for (i, p) in self.params.iter().enumerate() {
            for (prefix, dst) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
                let name = format!("{prefix}.{}", p.name);
                let src = find(&name).ok_or_else(|| LearnerError::Shape(format!("optimizer state lacks {name}")))?;
                if src.size() != dst.size() {
                    return Err(LearnerError::Shape(format!(
                        "optimizer state {name} has shape {:?}, the parameter {:?}",
                        src.size(),
                        dst.size()
                    )));
                }
                tch::no_grad(|| dst.f_copy_(src))?;
            }
        }
        self.step = state.step;
        self.position = self.position.max(state.step);
        Ok(())
    }
}

/// `torch.nn.utils.clip_grad_norm_`: the 2-norm of all gradients together; when `max_norm` is
/// set, every gradient is multiplied by `min(1, max_norm / (norm + 1e-6))`. Returns the norm
/// before clipping and whether it scaled anything down; a non-finite norm is an error and
/// leaves the gradients as they were.
pub fn clip_grad_norm(grads: &[Option<Tensor>], max_norm: Option<f64>) -> Result<(f64, bool)> {
    let norms: Vec<Tensor> = grads.iter().flatten().map(|g| g.to_kind(Kind::Float).norm()).collect();
    if norms.is_empty() {
        return Ok((0.0, false));
    }
    let total = Tensor::stack(&norms, 0).norm();
    let norm = total.double_value(&[]);
    if !norm.is_finite() {
        return Err(LearnerError::NonFiniteGradient(norm));
    }
    let Some(max_norm) = max_norm else { return Ok((norm, false)) };
    // As torch evaluates `max_norm / (total + 1e-6)`: a reciprocal, then a product.
    let coef = ((total + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
    for g in grads.iter().flatten() {
        let _ = g.shallow_clone().g_mul_(&coef.to_kind(g.kind()));
    }
    Ok((norm, max_norm / (norm + 1e-6) < 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One fp32 parameter with a unit gradient, under a cosine schedule over 10 planned updates
    /// (warm-up 2, floor 0.1 of 1.0).
    fn cosine_optimizer() -> (Tensor, AdamW) {
        let p = Tensor::zeros([3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let schedule =
            LrSchedule { peak: 1.0, warmup_steps: 2, decay: LrDecay::Cosine, total_steps: 10, min_lr_ratio: 0.1 };
        let config = AdamWConfig { schedule, weight_decay: 0.0, ..AdamWConfig::default() };
        let opt = AdamW::new(vec![Param { name: "w".into(), tensor: p.shallow_clone(), decay: false }], config);
        (p, opt)
    }

    fn update(p: &Tensor, opt: &mut AdamW) -> f64 {
        opt.zero_grad();
        p.sum(Kind::Float).backward();
        opt.step().expect("a finite gradient").lr
    }

    #[test]
    fn skipped_planned_updates_move_the_decay_and_not_the_warm_up() {
        let (p, mut opt) = cosine_optimizer();
        let schedule = opt.config().schedule;
        // Two updates planned per iteration; the first iteration takes both.
        assert_eq!((update(&p, &mut opt), update(&p, &mut opt)), (0.5, 1.0), "warm-up in updates taken");
        // The second iteration takes none; the third starts at planned update 6 and takes one.
        opt.advance_schedule_to(4);
        opt.advance_schedule_to(6);
        let third = update(&p, &mut opt);
        assert_eq!(third, schedule.lr_at(6), "the decay at the plan's place, not at update 2");
        assert!(third < schedule.lr_at(2) - 0.3, "{third}");
        assert_eq!((opt.steps(), opt.schedule_position()), (3, 7));
        // Moving back does nothing; past the plan the floor holds.
        opt.advance_schedule_to(1);
        assert_eq!(opt.schedule_position(), 7);
        opt.advance_schedule_to(20);
        assert!((update(&p, &mut opt) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn without_a_move_the_position_is_the_update() {
        let (p, mut opt) = cosine_optimizer();
        let schedule = opt.config().schedule;
        let lrs: Vec<f64> = (0..12).map(|_| update(&p, &mut opt)).collect();
        let want: Vec<f64> = (0..12).map(|i| schedule.lr_at(i)).collect();
        assert_eq!(lrs, want);
        assert_eq!(opt.schedule_position(), opt.steps());
    }
}
