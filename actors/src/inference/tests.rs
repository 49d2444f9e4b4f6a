//! The policy actor with the tiny model on the CPU: concurrent requests share one batch, a lone
//! request waits for `max_wait`, and prompts that cannot fit are refused one by one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use policy::{ByteTokenizer, ModelConfig, SamplingParams};
use protocol::wire::PolicyVersion;
use ractor::Actor;

use super::*;
use crate::config::DeviceChoice;

const CALL: Duration = Duration::from_secs(60);

fn args(max_batch: usize, max_wait: Duration) -> PolicyArgs {
    PolicyArgs {
        model: ModelSpec { config: ModelConfig::tiny(), dir: None, device: DeviceChoice::Cpu },
        tokenizer: Arc::new(ByteTokenizer),
        sampling: SamplingParams { temperature: 0.7, max_new_tokens: 4, ..SamplingParams::default() },
        max_batch,
        max_wait,
        store: None,
        load_timeout: CALL,
        seed: 3,
        prefix_cache_bytes: 64 << 20,
    }
}

async fn generate(actor: &ActorRef<PolicyMsg>, prompt: Vec<u32>) -> Result<Generated, InferenceError> {
    match actor.call(|r| PolicyMsg::Generate(prompt, r), Some(CALL)).await {
        Ok(ractor::rpc::CallResult::Success(g)) => g,
        Ok(_) => panic!("the generate call timed out or lost its reply"),
        Err(e) => panic!("the generate call failed: {e}"),
    }
}

#[tokio::test]
async fn concurrent_requests_share_a_batch_without_waiting_out_max_wait() {
    let (actor, join) = Actor::spawn(None, PolicyActor, args(4, Duration::from_secs(600))).await.unwrap();
    let prompts: Vec<Vec<u32>> = (0..4u32).map(|i| vec![ByteTokenizer::BOS, 100 + i, 101, 102]).collect();
    let out = join_all(prompts.into_iter().map(|p| generate(&actor, p))).await;
    for g in out {
        let g = g.unwrap();
        assert_eq!(g.batch_size, 4, "the four requests made one full batch");
        assert_eq!(g.policy_version, PolicyVersion(0), "the configured model before any weights");
        assert!(!g.tokens.is_empty() && g.tokens.len() <= 4 && g.tokens.len() == g.logprobs.len());
        assert!(g.logprobs.iter().all(|lp| lp.is_finite() && *lp <= 0.0));
    }
    actor.stop(None);
    join.await.unwrap();
}

#[tokio::test]
async fn a_lone_request_goes_once_max_wait_is_over_and_bad_prompts_are_refused_alone() {
    let wait = Duration::from_millis(150);
    let (actor, join) = Actor::spawn(None, PolicyActor, args(8, wait)).await.unwrap();
    let started = Instant::now();
    let g = generate(&actor, vec![ByteTokenizer::BOS, 65]).await.unwrap();
    assert!(started.elapsed() >= wait, "sent before its wait was over: {:?}", started.elapsed());
    assert_eq!(g.batch_size, 1);
    let too_long = vec![65; ModelConfig::tiny().max_position_embeddings as usize];
    let max = ModelConfig::tiny().max_position_embeddings as usize - 4;
    let err = generate(&actor, too_long.clone()).await.unwrap_err();
    assert!(
        matches!(err, InferenceError::PromptDoesNotFit { len, max: m } if len == too_long.len() && m == max),
        "{err:?}"
    );
    assert!(err.to_string().contains("does not fit"), "{err}");
    let empty = generate(&actor, Vec::new()).await.unwrap_err();
    assert!(matches!(empty, InferenceError::PromptDoesNotFit { len: 0, .. }), "{empty:?}");
    let version = actor.call(PolicyMsg::Version, Some(CALL)).await.unwrap().unwrap();
    assert_eq!(version, PolicyVersion(0));
    actor.stop(None);
    join.await.unwrap();
}

async fn generate_with(actor: &ActorRef<PolicyMsg>, prompt: Vec<u32>) -> Generated {
    let custom = Box::new(Custom {
        params: SamplingParams { temperature: 0.0, max_new_tokens: 4, ..SamplingParams::default() },
        seed: None,
        top_logprobs: 0,
        stop_texts: Vec::new(),
        stream: None,
    });
    match actor.call(|r| PolicyMsg::GenerateWith(prompt, custom, r), Some(CALL)).await {
        Ok(ractor::rpc::CallResult::Success(g)) => g.unwrap(),
        _ => panic!("the generate call failed"),
    }
}

/// An episode's next turn reuses the keys and values of its previous one: only the reply's last
/// token and the new observation are run (the prefill counter says so), and the reply is the one
/// a full prefill of the same prompt gives (asked again: the cache held then covers more than the
/// prompt, so nothing is reused).
#[tokio::test]
async fn a_next_turn_prefills_only_what_is_new_and_answers_as_a_full_prefill() {
    let prefilled = || protocol::metrics::ACTOR_PREFILL_TOKENS.get();
    let (actor, join) = Actor::spawn(None, PolicyActor, args(1, Duration::ZERO)).await.unwrap();
    let first = vec![ByteTokenizer::BOS, 100, 101, 102, 103, 104];
    let a = generate_with(&actor, first.clone()).await;
    let mut next = first.clone();
    next.extend(&a.tokens);
    next.extend([105, 106, 107]);
    let before = prefilled();
    let b = generate_with(&actor, next.clone()).await;
    assert_eq!(prefilled() - before, 1 + 3, "the reply's last token and the observation");
    let before = prefilled();
    let c = generate_with(&actor, next.clone()).await;
    assert_eq!(prefilled() - before, next.len() as u64, "nothing held begins the prompt: all of it");
    assert_eq!(b.tokens, c.tokens, "the same greedy reply");
    actor.stop(None);
    join.await.unwrap();
}
