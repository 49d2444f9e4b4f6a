//! The policy actor: every rollout slot of the process sends it generation requests, it batches
//! them ([`batcher`]: up to `max_batch`, or `max_wait`, whichever first) and hands each batch to
//! the policy thread ([`worker`]), where the model runs — tch work never runs on the async
//! runtime. Weight swaps go to the same thread and fall between batches.
//!
//! ```text
//!  rollout slots ──Generate(prompt)──► PolicyActor ──Job::Generate(≤ max_batch)──► policy thread
//!  weight sync  ──Swap(weights)──────►     │        ──Job::Swap──────────────────►   (tch)
//!                                          ◄── BatchDone ───────────────────────────┘
//!  each request's reply: sampled ids, text, log-probs, the policy version that produced them,
//!  or an InferenceError (the prompt does not fit, the batch failed, the weights do not fit)
//!  GenerateWith(prompt, Custom): the same with the request's own temperature, top-p, budget,
//!  seed, stop texts and top log-probs (reagent serve), its text streamed as it is made
//! ```
//!
//! ```text
//! ```

pub mod batcher;
#[cfg(test)]
mod tests;
pub mod worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use policy::{SamplingParams, Tokenizer};
use protocol::weights::{WeightSet, WeightStore};
use protocol::wire::PolicyVersion;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::error::InferenceError;
use batcher::Batcher;
use worker::{Job, ModelSpec, Request, Worker};

/// A request's own sampling, as `reagent serve` takes it from each request; rollouts use the
/// actor's configured sampling instead.
#[derive(Debug, Clone)]
pub struct Custom {
    /// Temperature, top-p, token budget, stop ids and EOS of this request.
    pub params: SamplingParams,
    /// A seed of its own (its tokens then depend on nothing else in the batch).
    pub seed: Option<u64>,
    /// How many of the most likely tokens to report per token.
    pub top_logprobs: usize,
    /// Text that ends the completion when it appears in it; the text is cut before it.
    pub stop_texts: Vec<String>,
    /// Where each new piece of text goes as it is generated (streaming).
    pub stream: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

/// One generated agent message.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The sampled ids (the end-of-turn marker included when sampling stopped on it).
    pub tokens: Vec<u32>,
    /// Their text (special tokens left out).
    pub text: String,
    /// Each id's behaviour log-prob.
    pub logprobs: Vec<f32>,
    /// The weights that produced them.
    pub policy_version: PolicyVersion,
    /// How many requests shared the batch.
    pub batch_size: usize,
    /// Why generation stopped.
    pub stop_reason: policy::StopReason,
    /// Per token, the most likely tokens and their log-probs (when the request asked).
    pub top_logprobs: Vec<Vec<(u32, f32)>>,
}

/// The policy actor's messages.
pub enum PolicyMsg {
    /// Generate an agent message after these prompt ids.
    Generate(Vec<u32>, RpcReplyPort<Result<Generated, InferenceError>>),
    /// Generate after these prompt ids with the request's own sampling.
    GenerateWith(Vec<u32>, Box<Custom>, RpcReplyPort<Result<Generated, InferenceError>>),
    /// Swap in these verified weights between batches; answers with the version now served.
    Swap(Box<WeightSet>, RpcReplyPort<Result<PolicyVersion, InferenceError>>),
    /// The version being served.
    Version(RpcReplyPort<PolicyVersion>),
    /// The oldest pending request's wait is over (sent to itself).
    Flush,
    /// The policy thread finished a batch.
    BatchDone,
}

/// The policy actor (field-less; its state is [`PolicyState`]).
pub struct PolicyActor;

/// What the policy actor is started with; cloned afresh for every (re)start.
#[derive(Clone)]
pub struct PolicyArgs {
    /// The model to load.
    pub model: ModelSpec,
    /// Its tokenizer.
    pub tokenizer: Arc<dyn Tokenizer>,
    /// How to sample.
    pub sampling: SamplingParams,
    /// Most requests per batch.
    pub max_batch: usize,
    /// Longest a request waits for its batch to fill.
    pub max_wait: Duration,
    /// Where the newest published weights are fetched from at start (`None`: never).
    pub store: Option<WeightStore>,
    /// How long loading the model may take.
    pub load_timeout: Duration,
    /// The sampler's seed.
    pub seed: u64,
    /// Most bytes of keys and values the policy thread keeps between generations, so that an
    /// episode's next turn prefills only its new tokens (0: none).
    pub prefix_cache_bytes: usize,
}

/// The policy actor's state: the thread's job queue and the pending requests.
pub struct PolicyState {
    jobs: Sender<Job>,
    thread: Option<std::thread::JoinHandle<()>>,
    batcher: Batcher<Request>,
    version: Arc<AtomicU64>,
    max_prompt: usize,
    max_positions: usize,
}

impl Actor for PolicyActor {
    type Msg = PolicyMsg;
    type State = PolicyState;
    type Arguments = PolicyArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PolicyMsg>,
        args: PolicyArgs,
    ) -> Result<PolicyState, ActorProcessingErr> {
        let initial = match &args.store {
            Some(store) => store.fetch_newer_than(None).await?,
            None => None,
        };
        let version = Arc::new(AtomicU64::new(0));
        let max_positions = args.model.config.max_position_embeddings as usize;
        let max_prompt = max_positions.saturating_sub(args.sampling.max_new_tokens);
        let worker = Worker {
            spec: args.model,
            initial,
            tokenizer: args.tokenizer,
            sampling: args.sampling,
            seed: args.seed,
            prefix_cache_bytes: args.prefix_cache_bytes,
            version: version.clone(),
            actor: myself,
        };
        let (jobs, queue) = std::sync::mpsc::channel();
        let (loaded_tx, loaded) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("policy".into())
            .spawn(move || worker.run(queue, loaded_tx))
            .map_err(|e| format!("could not start the policy thread: {e}"))?;
        let served = match tokio::time::timeout(args.load_timeout, loaded).await {
            Ok(Ok(Ok(v))) => v,
            Ok(Ok(Err(e))) => return Err(format!("loading the policy failed: {e}").into()),
            Ok(Err(_)) => return Err("the policy thread ended while loading".into()),
            Err(_) => return Err(format!("loading the policy took longer than {:?}", args.load_timeout).into()),
        };
        tracing::info!(version = %served, "policy loaded");
        Ok(PolicyState {
            jobs,
            thread: Some(thread),
            batcher: Batcher::new(args.max_batch, args.max_wait),
            version,
            max_prompt,
            max_positions,
        })
    }

    async fn post_stop(&self, _: ActorRef<PolicyMsg>, state: &mut PolicyState) -> Result<(), ActorProcessingErr> {
        // Dropping the queue's sender ends the thread after its current job; join it off the
        // runtime so a long batch does not block it.
        let (dummy, _) = std::sync::mpsc::channel();
        drop(std::mem::replace(&mut state.jobs, dummy));
        if let Some(thread) = state.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<PolicyMsg>,
        msg: PolicyMsg,
        state: &mut PolicyState,
    ) -> Result<(), ActorProcessingErr> {
        let now = Instant::now();
        match msg {
            PolicyMsg::Generate(prompt, reply) => {
                if prompt.is_empty() || prompt.len() > state.max_prompt {
                    let _ =
                        reply.send(Err(InferenceError::PromptDoesNotFit { len: prompt.len(), max: state.max_prompt }));
                } else {
                    state.batcher.push(Request { prompt, custom: None, reply }, now);
                }
            }
            PolicyMsg::GenerateWith(prompt, custom, reply) => {
                let max = state.max_positions.saturating_sub(custom.params.max_new_tokens);
                if prompt.is_empty() || prompt.len() > max {
                    let _ = reply.send(Err(InferenceError::PromptDoesNotFit { len: prompt.len(), max }));
                } else {
                    state.batcher.push(Request { prompt, custom: Some(custom), reply }, now);
                }
            }
            PolicyMsg::Swap(set, reply) => {
                state.jobs.send(Job::Swap(set, reply)).map_err(|_| "the policy thread has stopped")?
            }
            PolicyMsg::Version(reply) => {
                let _ = reply.send(PolicyVersion(state.version.load(Ordering::SeqCst)));
            }
            PolicyMsg::Flush => state.batcher.timer_fired(),
            PolicyMsg::BatchDone => state.batcher.done(),
        }
        if let Some(batch) = state.batcher.take_ready(now) {
            state.jobs.send(Job::Generate(batch)).map_err(|_| "the policy thread has stopped")?;
        }
        if let Some(delay) = state.batcher.arm(now) {
            myself.send_after(delay, || PolicyMsg::Flush);
        }
        Ok(())
    }
}
