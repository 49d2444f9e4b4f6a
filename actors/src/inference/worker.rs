//! The policy thread: the one OS thread of an actor process that touches tch. It loads the
//! model, then takes jobs in order — a generation batch, or a weight swap — so a swap always
//! falls between batches. The async runtime never waits on it: replies go through the
//! requests' reply ports, and "batch done" back to the policy actor as a message.
//!
//! ```text
//!  policy actor ──Job::Generate(batch)──► thread: Sampler::generate ─► reply per request
//!               ──Job::Swap(weights)────►        import (checked first) ─► version := v
//!       ◄──────────── PolicyMsg::BatchDone ─────┘
//! ```

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use policy::{LoadedModel, ModelConfig, Sampler, SamplingParams, Tokenizer};
use protocol::metrics::{ACTOR_BATCH_SECONDS, ACTOR_BATCH_SIZE, ACTOR_GENERATED_TOKENS, ACTOR_POLICY_VERSION};
use protocol::weights::WeightSet;
use protocol::wire::PolicyVersion;
use ractor::{ActorRef, RpcReplyPort};
use tch::Device;

use super::{Generated, PolicyMsg};
use crate::config::DeviceChoice;
use crate::error::InferenceError;

/// One generation request as the thread takes it.
pub struct Request {
    /// The prompt ids.
    pub prompt: Vec<u32>,
    /// Where the answer goes.
    pub reply: RpcReplyPort<Result<Generated, InferenceError>>,
}

/// Work for the thread, done in order.
pub enum Job {
    /// Generate a continuation of every request's prompt, in one batch.
    Generate(Vec<Request>),
    /// Load these (verified) weights; answer with the new version.
    Swap(Box<WeightSet>, RpcReplyPort<Result<PolicyVersion, InferenceError>>),
}

/// The model the thread loads at start.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    /// The architecture.
    pub config: ModelConfig,
    /// A model directory to load weights from; `None`: fresh (seeded) initialisation.
    pub dir: Option<PathBuf>,
    /// Where to run it.
    pub device: DeviceChoice,
}

/// Everything the thread owns.
pub struct Worker {
    /// What to load.
    pub spec: ModelSpec,
    /// Verified weights to load over it before serving (the newest published version).
    pub initial: Option<WeightSet>,
    /// Decodes generated ids to text.
    pub tokenizer: Arc<dyn Tokenizer>,
    /// How to sample.
    pub sampling: SamplingParams,
    /// The sampler's seed.
    pub seed: u64,
    /// The version being served, shared with the actor.
    pub version: Arc<AtomicU64>,
    /// Told when each batch is done.
    pub actor: ActorRef<PolicyMsg>,
}

fn device(choice: DeviceChoice) -> Result<Device, InferenceError> {
    match choice {
        DeviceChoice::Auto => Ok(policy::device::pick()),
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
        DeviceChoice::Cuda => Err(InferenceError::NoCuda),
    }
}

/// Whether `set` holds every variable of `model` with its shape, so that importing it cannot
/// stop half-way (names the first mismatch).
fn check_fits(model: &LoadedModel, set: &WeightSet) -> Result<(), InferenceError> {
    for (name, var) in model.vs.variables() {
        if name.starts_with("value_head.") {
            continue;
        }
        match set.spec(&name) {
            None => return Err(InferenceError::MissingWeight { version: set.version(), name }),
            Some(spec) if spec.shape != var.size() => {
                return Err(InferenceError::WeightShape {
                    in_weights: spec.shape.clone(),
                    version: set.version(),
                    in_model: var.size(),
                    name,
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}

impl Worker {
    fn load(&self) -> Result<(LoadedModel, PolicyVersion), InferenceError> {
        let device = device(self.spec.device)?;
        let mut model = match &self.spec.dir {
            Some(dir) => LoadedModel::from_dir(dir, device, false),
            None => LoadedModel::fresh(&self.spec.config, device, false),
        }
        .map_err(InferenceError::Load)?;
        let version = match &self.initial {
            Some(set) => {
                check_fits(&model, set)?;
                policy::weights::import_weight_set(&mut model.vs, set).map_err(InferenceError::Load)?;
                set.version()
            }
            None => PolicyVersion(0),
        };
        Ok((model, version))
    }

    /// Loads the model, reports the outcome through `loaded`, then serves jobs until the
    /// sender is dropped (the actor stopped) or a swap fails half-way.
    pub fn run(
        mut self,
        jobs: Receiver<Job>,
        loaded: tokio::sync::oneshot::Sender<Result<PolicyVersion, InferenceError>>,
    ) {
        let (mut model, version) = match self.load() {
            Ok(m) => m,
            Err(e) => {
                let _ = loaded.send(Err(e));
                return;
            }
        };
        self.initial = None;
        self.set_version(version);
        if loaded.send(Ok(version)).is_err() {
            return;
        }
        let mut sampler = Sampler::new(self.seed);
        while let Ok(job) = jobs.recv() {
            match job {
                Job::Generate(batch) => {
                    self.generate(&model, &mut sampler, batch);
                    let _ = self.actor.cast(PolicyMsg::BatchDone);
                }
                Job::Swap(set, reply) => {
                    if let Err(e) = check_fits(&model, &set) {
                        let _ = reply.send(Err(e));
                        continue;
                    }
                    if let Err(source) = policy::weights::import_weight_set(&mut model.vs, &set) {
                        tracing::error!(version = %set.version(), error = %source, "weight swap failed half-way; the policy thread stops");
                        let _ = reply.send(Err(InferenceError::SwapFailed { version: set.version(), source }));
                        return;
                    }
                    self.set_version(set.version());
                    let _ = reply.send(Ok(set.version()));
                }
            }
        }
    }

    fn set_version(&self, v: PolicyVersion) {
        self.version.store(v.0, Ordering::SeqCst);
        ACTOR_POLICY_VERSION.set(v.0 as i64);
    }

    fn generate(&self, model: &LoadedModel, sampler: &mut Sampler, batch: Vec<Request>) {
        let version = PolicyVersion(self.version.load(Ordering::SeqCst));
        let (prompts, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|r| (r.prompt, r.reply)).unzip();
        let size = prompts.len();
        let started = Instant::now();
        let out =
            std::panic::catch_unwind(AssertUnwindSafe(|| sampler.generate(&model.model, &prompts, &self.sampling)));
        ACTOR_BATCH_SIZE.observe(size as f64);
        ACTOR_BATCH_SECONDS.observe(started.elapsed().as_secs_f64());
        let generations = match out {
            Ok(Ok(g)) => g,
            Ok(Err(e)) => {
                let e = Arc::new(e);
                return replies.into_iter().for_each(|r| drop(r.send(Err(InferenceError::Generation(e.clone())))));
            }
            Err(_) => return replies.into_iter().for_each(|r| drop(r.send(Err(InferenceError::Panicked)))),
        };
        for (g, reply) in generations.into_iter().zip(replies) {
            ACTOR_GENERATED_TOKENS.inc_by(g.tokens.len() as u64);
            let text = self.tokenizer.decode(&g.tokens, true);
            let _ = reply.send(Ok(Generated {
                tokens: g.tokens,
                text,
                logprobs: g.logprobs,
                policy_version: version,
                batch_size: size,
            }));
        }
    }
}
