//! Shared helpers of the rrm-worker tests: real trajectories played through the environments
//! (reference solutions, or corrupted ones), a real redis-server and stream readers (waits with
//! deadlines and fast queue settings are `testkit`'s).

#![allow(dead_code, reason = "each test crate uses a different part of the shared helpers")]

use std::collections::HashMap;
use std::time::Duration;

use env_workers::{registry, Environment, Limits};
use protocol::codec::Codec;
use protocol::keys::{Keys, RRM_GROUP};
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::Producer;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, Role, RunId, ScoredTrajectory, Source, TaskFamily, TaskSpec,
    Timing, Trajectory, TrajectoryId, Turn, Validate,
};
use testkit::{fast_queue, wait_until};

/// The text families, in a fixed order.
pub const TEXT_FAMILIES: [TaskFamily; 4] =
    [TaskFamily::Math, TaskFamily::Retail, TaskFamily::Webnav, TaskFamily::Searchqa];

/// How an episode departs from the reference solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// The reference, untouched.
    None,
    /// The last message dropped (no answer).
    Truncated,
    /// The final answer replaced by a wrong one.
    WrongAnswer,
    /// The first message replaced by a malformed action.
    Garbled,
    /// The first message sent twice.
    Repeated,
}

/// The agent messages of `spec`'s reference solution, with `flaw`.
pub fn messages(spec: TaskSpec, flaw: Flaw) -> Vec<String> {
    let mut m = registry::make(spec, Limits::default()).unwrap().reference();
    match flaw {
        Flaw::None => {}
        Flaw::Truncated => {
            m.pop();
        }
        Flaw::WrongAnswer => {
            m.pop();
            m.push("<answer>certainly not this</answer>".into());
        }
        Flaw::Garbled => m[0] = "<tool>broken(".into(),
        Flaw::Repeated => m.insert(0, m[0].clone()),
    }
    m
}

/// A turn with a few byte tokens; agent turns are trained on, with log-probs.
pub fn turn(role: Role, text: &str) -> Turn {
    let token_ids: Vec<u32> = text.bytes().take(16).map(u32::from).collect();
    let agent = role == Role::Agent;
    let n = token_ids.len();
    Turn {
        role,
        text: text.to_string(),
        logprobs: if agent { vec![-0.5; n] } else { Vec::new() },
        loss_mask: vec![agent; n],
        token_ids,
    }
}

/// Plays `messages` through a fresh environment of `spec`: the turns and the outcome reward.
pub fn play(spec: TaskSpec, messages: &[String]) -> (Vec<Turn>, f32) {
    let mut env = registry::make(spec, Limits::default()).unwrap();
    let prompt = env.prompt().clone();
    let mut turns = vec![turn(Role::System, &prompt.system), turn(Role::User, &prompt.user)];
    for m in messages {
        turns.push(turn(Role::Agent, m));
        let obs = env.step(m);
        if let Some(end) = obs.end {
            return (turns, end.reward);
        }
        let role = if obs.from == Source::Tool { Role::Tool } else { Role::User };
        turns.push(turn(role, &obs.text));
    }
    (turns, 0.0)
}

/// A valid trajectory of `spec` played with `flaw`.
pub fn trajectory(run: &str, spec: TaskSpec, flaw: Flaw, attempt: Attempt) -> Trajectory {
    let (turns, reward) = play(spec, &messages(spec, flaw));
    let t = Trajectory {
        run_id: RunId::new(run).unwrap(),
        id: TrajectoryId::random(),
        actor_id: ActorId("actor-test".into()),
        task: spec,
        group_id: GroupId(u128::from(spec.seed)),
        attempt,
        policy_version: PolicyVersion(1),
        episode: Episode::Text(turns),
        outcome_reward: reward,
        timing: Timing::default(),
    };
    t.validate().expect("test trajectories are valid");
    t
}

/// `n` trajectories over every text family and difficulty, flawed in turns; even ones are
/// initial attempts, odd ones refine the one before.
pub fn batch(run: &str, n: usize) -> Vec<Trajectory> {
    let flaws = [Flaw::None, Flaw::Truncated, Flaw::WrongAnswer, Flaw::Garbled, Flaw::Repeated];
    let mut out: Vec<Trajectory> = Vec::with_capacity(n);
    for i in 0..n {
        let spec = TaskSpec { family: TEXT_FAMILIES[i % 4], seed: 1_000 + i as u64, difficulty: 1 + (i % 3) as u32 };
        let attempt = match out.last() {
            Some(prev) if i % 2 == 1 => Attempt::Refined { of: prev.id },
            _ => Attempt::Initial,
        };
        out.push(trajectory(run, spec, flaws[i % flaws.len()], attempt));
    }
    out
}

pub fn server() -> RedisServer {
    RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)")
}

pub fn link(server: &RedisServer) -> RedisLink {
    let settings = LinkSettings { retry_for: Duration::from_secs(10), ..LinkSettings::default() };
    RedisLink::connect(&server.url(), settings).unwrap()
}

/// Every entry of a stream, decoded.
pub async fn read_scored(link: &RedisLink, stream: &str) -> Vec<ScoredTrajectory> {
    let entries = protocol::queue::read_all(link, stream).await.unwrap();
    let codec = Codec::default();
    entries.iter().filter_map(|e| e.payload.as_deref()).map(|p| codec.decode_valid(p).unwrap()).collect()
}

/// Deadline of a worker test's waits.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Publishes `items` on the rollouts stream of `run`, as actors do.
pub async fn produce(link: &RedisLink, run: &str, items: &[Trajectory]) {
    let keys = Keys::new(&RunId::new(run).unwrap());
    let producer = Producer::<Trajectory>::new(link.clone(), keys.rollouts(), RRM_GROUP, fast_queue()).await.unwrap();
    producer.send_batch(items).await.unwrap();
}

/// Waits until the scored stream of `run` holds `n` entries; returns them.
pub async fn scored(link: &RedisLink, run: &str, n: usize) -> Vec<ScoredTrajectory> {
    let stream = Keys::new(&RunId::new(run).unwrap()).scored();
    wait_until("every trajectory scored", LIMIT, || async { read_scored(link, &stream).await.len() >= n }).await;
    read_scored(link, &stream).await
}

/// How often each trajectory id appears.
pub fn id_counts(scored: &[ScoredTrajectory]) -> HashMap<TrajectoryId, usize> {
    let mut counts = HashMap::new();
    for s in scored {
        *counts.entry(s.trajectory.id).or_insert(0) += 1;
    }
    counts
}

/// The list at `key` (raw items) and its TTL in seconds.
pub async fn list_and_ttl(link: &RedisLink, key: &str) -> (Vec<Vec<u8>>, i64) {
    let key = key.to_string();
    link.call("lrange", Duration::ZERO, |mut c| {
        let key = key.clone();
        async move {
            let items: Vec<Vec<u8>> = redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query_async(&mut c).await?;
            let ttl: i64 = redis::cmd("TTL").arg(&key).query_async(&mut c).await?;
            Ok((items, ttl))
        }
    })
    .await
    .unwrap()
}

/// Entries pending (delivered, unacknowledged) in `group` of `stream`.
pub async fn pending(link: &RedisLink, stream: &str, group: &str) -> u64 {
    let (stream, group) = (stream.to_string(), group.to_string());
    link.call("xpending", Duration::ZERO, |mut c| {
        let (stream, group) = (stream.clone(), group.clone());
        async move {
            let v: redis::Value = redis::cmd("XPENDING").arg(&stream).arg(&group).query_async(&mut c).await?;
            Ok(match v {
                redis::Value::Array(items) => match items.first() {
                    Some(redis::Value::Int(n)) => *n as u64,
                    _ => 0,
                },
                _ => 0,
            })
        }
    })
    .await
    .unwrap()
}
