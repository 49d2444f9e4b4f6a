//! A small, fully deterministic trainer for the resume tests: the CartPole MLP trained with the
//! crate's PPO loss and AdamW on synthetic batches drawn from RNGs the checkpoint holds.

use std::collections::BTreeMap;
use std::sync::Mutex;

use learner::checkpoint::{copy_named_into, CheckpointData, ConsumptionState};
use learner::loss::{ppo_loss, LossConfig, LossInputs, ValueInputs};
use learner::optim::{AdamW, AdamWConfig, LrSchedule};
use learner::rng::{reseed_torch, SampleRng};
use policy::mlp::{MlpConfig, MlpPolicy};
use protocol::wire::{PolicyVersion, TrajectoryId};
use tch::{nn, Device, Kind, Tensor};

/// libtorch's global generator is process-wide: tests that use it take turns.
pub static TORCH_RNG: Mutex<()> = Mutex::new(());

const SEED: u64 = 17;
const BATCH: i64 = 16;

/// The trainer's whole state.
pub struct Trainer {
    vs: nn::VarStore,
    policy: MlpPolicy,
    opt: AdamW,
    data_rng: SampleRng,
    sample_rng: SampleRng,
    /// Updates applied.
    pub step: u64,
    applied: Vec<TrajectoryId>,
}

impl Trainer {
    /// A fresh trainer (initial weights from the seeded libtorch generator).
    pub fn new() -> Self {
        tch::set_num_threads(1);
        let (vs, policy) = policy::seed::seeded(SEED as i64, || {
            let vs = nn::VarStore::new(Device::Cpu);
            let policy = MlpPolicy::new(&vs.root(), MlpConfig::CARTPOLE);
            (vs, policy)
        });
        let config = AdamWConfig {
            schedule: LrSchedule { warmup_steps: 3, ..LrSchedule::constant(3e-3) },
            max_grad_norm: Some(0.5),
            ..AdamWConfig::default()
        };
        let opt = AdamW::from_named(vs.variables(), config);
        Self {
            vs,
            policy,
            opt,
            data_rng: SampleRng::new(1),
            sample_rng: SampleRng::new(2),
            step: 0,
            applied: Vec::new(),
        }
    }

    /// One PPO update on a synthetic batch.
    pub fn update(&mut self) {
        reseed_torch(SEED, self.step);
        let draw = |rng: &mut SampleRng, n: i64| -> Tensor {
            let v: Vec<f32> = (0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
            Tensor::from_slice(&v)
        };
        // Observations mix our RNG with libtorch's (re-seeded per step), exercising both.
        let obs = draw(&mut self.data_rng, BATCH * 4).reshape([BATCH, 4])
            + Tensor::randn([BATCH, 4], (Kind::Float, Device::Cpu)) * 0.1;
        let sample = self.policy.sample(&obs, &mut self.sample_rng);
        let behaviour = (&sample.logprobs + draw(&mut self.data_rng, BATCH) * 0.3).clamp_max(0.0).unsqueeze(1);
        let advantages = draw(&mut self.data_rng, BATCH).unsqueeze(1);
        let returns = draw(&mut self.data_rng, BATCH).unsqueeze(1);
        let mask = Tensor::from_slice(&(0..BATCH).map(|i| (i % 5 != 0) as i64 as f32).collect::<Vec<_>>()).unsqueeze(1);
        let prox = tch::no_grad(|| self.policy.evaluate(&obs, &sample.actions).0).unsqueeze(1);

        let (logp, entropy, values) = self.policy.evaluate(&obs, &sample.actions);
        let (logp, entropy, values) = (logp.unsqueeze(1), entropy.unsqueeze(1), values.unsqueeze(1));
        let old_values = sample.values.unsqueeze(1);
        let inputs = LossInputs {
            logp: &logp,
            behaviour_logp: &behaviour,
            prox_logp: Some(&prox),
            advantages: &advantages,
            mask: &mask,
            ref_logp: Some(&behaviour),
            entropy: Some(&entropy),
            value: Some(ValueInputs { values: &values, old_values: &old_values, returns: &returns }),
        };
        let config = LossConfig { entropy_coef: 0.01, kl_coef: 0.05, ..LossConfig::default() };
        let parts = ppo_loss(&inputs, &config).unwrap();
        self.opt.zero_grad();
        parts.total.backward();
        self.opt.step().unwrap();
        self.step += 1;
        self.applied.push(TrajectoryId(self.step as u128));
    }

    /// Everything a checkpoint of this trainer holds.
    pub fn checkpoint(&self) -> CheckpointData {
        let mut rng = BTreeMap::new();
        rng.insert("data".to_string(), self.data_rng.to_bytes());
        rng.insert("sample".to_string(), self.sample_rng.to_bytes());
        CheckpointData {
            step: self.step,
            policy_version: PolicyVersion(self.step),
            weights: self.weights(),
            optimizer: self.opt.state(),
            rng,
            config_hash: learner::config::config_hash("trainer"),
            consumption: ConsumptionState {
                applied_since_ack: self.applied.clone(),
                queue_entry_ids: self.applied.iter().map(|id| format!("{}-0", id.0)).collect(),
                ..ConsumptionState::default()
            },
        }
    }

    /// A trainer restored from a checkpoint.
    pub fn restore(data: &CheckpointData) -> Self {
        let mut t = Self::new();
        copy_named_into(&t.vs.variables(), &data.weights).unwrap();
        t.opt.load_state(&data.optimizer).unwrap();
        t.data_rng = SampleRng::from_bytes(&data.rng["data"]).unwrap();
        t.sample_rng = SampleRng::from_bytes(&data.rng["sample"]).unwrap();
        t.step = data.step;
        t.applied = data.consumption.applied_since_ack.clone();
        t
    }

    /// The named weights, sorted by name.
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        let mut w: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        w.sort_by(|a, b| a.0.cmp(&b.0));
        w
    }

    /// The raw bytes of every weight and optimizer moment, in name order.
    pub fn state_bytes(&self) -> Vec<(String, Vec<u8>)> {
        let moments = self.opt.state().tensors;
        self.weights().into_iter().chain(moments).map(|(n, t)| (n, raw_bytes(&t))).collect()
    }
}

/// A tensor's bytes as stored.
pub fn raw_bytes(t: &Tensor) -> Vec<u8> {
    let t = t.contiguous();
    let n = t.numel();
    let mut out = vec![0u8; n * t.kind().elt_size_in_bytes()];
    t.copy_data_u8(&mut out, n);
    out
}
