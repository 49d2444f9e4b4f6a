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

use policy::{Generation, LoadedModel, ModelConfig, PrefixCache, Row, Sampler, SamplingParams, Tokenizer};
use protocol::metrics::{
    ACTOR_BATCH_SECONDS, ACTOR_BATCH_SIZE, ACTOR_GENERATED_TOKENS, ACTOR_POLICY_VERSION, ACTOR_PREFILL_TOKENS,
};
use protocol::weights::WeightSet;
use protocol::wire::PolicyVersion;
use ractor::{ActorRef, RpcReplyPort};
use tch::Device;

use super::{Custom, Generated, PolicyMsg};
use crate::config::DeviceChoice;
use crate::error::InferenceError;

/// One generation request as the thread takes it.
pub struct Request {
    /// The prompt ids.
    pub prompt: Vec<u32>,
    /// The request's own sampling, if it has one.
    pub custom: Option<Box<Custom>>,
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
    /// Most bytes of keys and values kept between generations ([`PrefixStore`]); 0 keeps none.
    pub prefix_cache_bytes: usize,
    /// Told when each batch is done.
    pub actor: ActorRef<PolicyMsg>,
}

fn device(choice: DeviceChoice) -> Result<Device, InferenceError> {
    Ok(policy::device::resolve(choice, "actor.device")?)
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
        let mut prefixes = PrefixStore::new(self.prefix_cache_bytes);
        while let Ok(job) = jobs.recv() {
            match job {
                Job::Generate(batch) => {
                    self.generate(&model, &mut sampler, &mut prefixes, batch);
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
                    // Keys and values of the old weights must not continue the new ones.
                    prefixes.clear();
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

    fn generate(&self, model: &LoadedModel, sampler: &mut Sampler, prefixes: &mut PrefixStore, batch: Vec<Request>) {
        let version = PolicyVersion(self.version.load(Ordering::SeqCst));
        let size = batch.len();
        let mut texts: Vec<TextState> = batch.iter().map(|r| TextState::new(r.custom.as_deref())).collect();
        let held: Vec<Option<PrefixCache>> = batch.iter().map(|r| prefixes.take(&r.prompt)).collect();
        let rows: Vec<Row<'_>> = batch
            .iter()
            .zip(&held)
            .map(|(r, reuse)| {
                let reuse = reuse.as_ref();
                match &r.custom {
                    Some(c) => {
                        Row { prompt: &r.prompt, params: &c.params, seed: c.seed, top_logprobs: c.top_logprobs, reuse }
                    }
                    None => Row { prompt: &r.prompt, params: &self.sampling, seed: None, top_logprobs: 0, reuse },
                }
            })
            .collect();
        let started = Instant::now();
        let prefilled = sampler.prefilled_tokens();
        let tok = self.tokenizer.as_ref();
        let keep = prefixes.budget > 0;
        let out = std::panic::catch_unwind(AssertUnwindSafe(|| {
            sampler.generate_rows(&model.model, &rows, keep, &mut |r, g| texts[r].on_token(tok, g))
        }));
        ACTOR_PREFILL_TOKENS.inc_by(sampler.prefilled_tokens() - prefilled);
        ACTOR_BATCH_SIZE.observe(size as f64);
        ACTOR_BATCH_SECONDS.observe(started.elapsed().as_secs_f64());
        let replies = batch.into_iter().map(|r| r.reply);
        let generations = match out {
            Ok(Ok((g, kept))) => {
                kept.into_iter().for_each(|c| prefixes.put(c));
                g
            }
            Ok(Err(e)) => {
                let e = Arc::new(e);
                return replies.for_each(|r| drop(r.send(Err(InferenceError::Generation(e.clone())))));
            }
            Err(_) => return replies.for_each(|r| drop(r.send(Err(InferenceError::Panicked)))),
        };
        for ((g, reply), text) in generations.into_iter().zip(replies).zip(texts) {
            ACTOR_GENERATED_TOKENS.inc_by(g.tokens.len() as u64);
            let text = text.finish(tok, &g);
            let _ = reply.send(Ok(Generated {
                tokens: g.tokens,
                text,
                logprobs: g.logprobs,
                policy_version: version,
                batch_size: size,
                stop_reason: g.stop_reason,
                top_logprobs: g.top_logprobs,
            }));
        }
    }
}

/// A request's text as it is generated: checked for its stop texts and streamed, piece by
/// piece, where the request asks for either.
struct TextState {
    stop_texts: Vec<String>,
    stream: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Bytes of text already streamed.
    sent: usize,
    /// Where a stop text was found: the text ends there.
    cut: Option<usize>,
}

impl TextState {
    fn new(custom: Option<&Custom>) -> Self {
        let (stop_texts, stream) = custom.map_or((Vec::new(), None), |c| (c.stop_texts.clone(), c.stream.clone()));
        Self { stop_texts, stream, sent: 0, cut: None }
    }

    /// After each token: `false` once a stop text appears. Streams what is certain: the text
    /// up to a partly decoded character, and short of any stop text's possible beginning.
    fn on_token(&mut self, tok: &dyn Tokenizer, g: &Generation) -> bool {
        if self.stop_texts.is_empty() && self.stream.is_none() {
            return true;
        }
        let text = tok.decode(&g.tokens, true);
        if let Some(cut) = self.stop_texts.iter().filter_map(|s| text.find(s.as_str())).min() {
            self.cut = Some(cut);
            self.send(&text[..cut], true);
            return false;
        }
        self.send(&text, false);
        true
    }

    /// Streams the part of `text` not yet sent; unless `all`, holds back a trailing partial
    /// character and the longest tail that could begin a stop text.
    fn send(&mut self, text: &str, all: bool) {
        let Some(stream) = &self.stream else { return };
        let mut end = text.len();
        if !all {
            end = text.trim_end_matches(char::REPLACEMENT_CHARACTER).len();
            let held = self
                .stop_texts
                .iter()
                .flat_map(|s| (1..s.len()).filter(|&k| s.is_char_boundary(k)).map(move |k| &s[..k]))
                .filter(|prefix| text[..end].ends_with(prefix))
                .map(str::len)
                .max()
                .unwrap_or(0);
            end -= held;
        }
        if end > self.sent && text.is_char_boundary(end) && text.is_char_boundary(self.sent) {
            let _ = stream.send(text[self.sent..end].to_string());
            self.sent = end;
        }
    }

    /// The final text (cut before a stop text), with what remains streamed.
    fn finish(mut self, tok: &dyn Tokenizer, g: &Generation) -> String {
        let mut text = tok.decode(&g.tokens, true);
        if let Some(cut) = self.cut {
            text.truncate(cut);
        }
        self.send(&text, true);
        text
    }
}

/// Keys and values of recent sequences, so that the next turn of an episode (or of a chat)
/// prefills only its new tokens: a sequence's cache is taken by the first prompt it begins (the
/// longest such), and the generation puts back one covering that prompt and its reply. Bounded
/// by bytes, the least recently stored dropped first; emptied when the weights change.
struct PrefixStore {
    budget: usize,
    held: std::collections::VecDeque<PrefixCache>,
    bytes: usize,
}

impl PrefixStore {
    fn new(budget: usize) -> Self {
        Self { budget, held: std::collections::VecDeque::new(), bytes: 0 }
    }

    /// The longest held cache that begins `prompt` (and leaves it a token to run), taken out.
    fn take(&mut self, prompt: &[u32]) -> Option<PrefixCache> {
        let best = self
            .held
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.covers(prompt)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
            .map(|(i, _)| i)?;
        let cache = self.held.remove(best)?;
        self.bytes -= cache.bytes();
        Some(cache)
    }

    /// Keeps `cache`, dropping the oldest while over budget (a cache larger than the budget is
    /// not kept).
    fn put(&mut self, cache: PrefixCache) {
        let bytes = cache.bytes();
        if bytes > self.budget {
            return;
        }
        self.bytes += bytes;
        self.held.push_back(cache);
        while self.bytes > self.budget {
            let Some(old) = self.held.pop_front() else { break };
            self.bytes -= old.bytes();
        }
    }

    fn clear(&mut self) {
        self.held.clear();
        self.bytes = 0;
    }
}
