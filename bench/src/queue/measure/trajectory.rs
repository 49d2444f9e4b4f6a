//! What the queue bench sends: a fixed-size byte string, or a text trajectory of realistic
//! shape (issue 14 §5) — the `protocol::wire::Trajectory` actors send, with token ids,
//! behaviour log-probs and a loss mask per token, and the turns' text — encoded by the
//! protocol's codec as on a job's rollouts stream.
//!
//! ```text
//!  trajectory of N tokens:  system N/8 │ user N/8 │ agent 3N/8 │ tool N/8 │ agent (the rest)
//!                           ids u32 + mask per token; log-probs f32 per agent token; text
//!                           ≈ 4.5 bytes per token (what a BPE tokenizer averages on English)
//! ```

use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, QueueItem, Role, RunId, TaskFamily, TaskSpec, Timing,
    Trajectory, TrajectoryId, Turn,
};

use super::BenchItem;

/// What each message of a measurement carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// An opaque byte string of this many bytes.
    Bytes(usize),
    /// A text trajectory of this many tokens in all.
    Trajectory {
        /// Tokens over all turns.
        tokens: usize,
    },
}

/// An item the bench can send: one made for a payload, then numbered per message.
pub trait Sample: QueueItem + Clone {
    /// One item carrying `payload`.
    fn sample(payload: Payload) -> Self;
    /// Gives the item the unique number `seq` (its id in the stream).
    fn number(&mut self, seq: u64);
}

impl Sample for BenchItem {
    fn sample(payload: Payload) -> Self {
        let size = match payload {
            Payload::Bytes(n) => n,
            Payload::Trajectory { tokens } => tokens,
        };
        BenchItem { seq: 0, payload: (0..size).map(|i| (i % 251) as u8).collect() }
    }

    fn number(&mut self, seq: u64) {
        self.seq = seq;
    }
}

/// Qwen2's vocabulary size: token ids are drawn below it.
const VOCAB: u64 = 151_936;

fn turn(role: Role, first: usize, n: usize) -> Turn {
    let token_ids: Vec<u32> = (first..first + n).map(|i| ((i as u64 * 2_654_435_761) % VOCAB) as u32).collect();
    let agent = role == Role::Agent;
    let logprobs =
        if agent { (first..first + n).map(|i| -(((i * 7_919) % 1_000) as f32) / 250.0).collect() } else { Vec::new() };
    let words = ["the ", "order ", "tool ", "result ", "answer ", "is ", "42 ", "because "];
    let mut text = String::with_capacity(n * 5);
    for i in first..first + n {
        text.push_str(words[i % words.len()]);
    }
    Turn { role, text, token_ids, logprobs, loss_mask: vec![agent; n] }
}

impl Sample for Trajectory {
    fn sample(payload: Payload) -> Self {
        let tokens = match payload {
            Payload::Trajectory { tokens } => tokens,
            Payload::Bytes(n) => n / 8,
        };
        let eighth = tokens / 8;
        let shape = [
            (Role::System, eighth),
            (Role::User, eighth),
            (Role::Agent, 3 * eighth),
            (Role::Tool, eighth),
            (Role::Agent, tokens - 6 * eighth),
        ];
        let mut first = 0;
        let turns = shape
            .into_iter()
            .map(|(role, n)| {
                first += n;
                turn(role, first - n, n)
            })
            .collect();
        Trajectory {
            run_id: RunId::new("bench").unwrap_or_else(|_| unreachable!("`bench` is a valid run id")),
            id: TrajectoryId(0),
            actor_id: ActorId("bench-actor-0".into()),
            task: TaskSpec { family: TaskFamily::Math, seed: 7, difficulty: 2 },
            group_id: GroupId(0),
            attempt: Attempt::Initial,
            policy_version: PolicyVersion(3),
            episode: Episode::Text(turns),
            outcome_reward: 1.0,
            timing: Timing { started_at_ms: 1, finished_at_ms: 900, generation_ms: 700, env_ms: 150 },
        }
    }

    fn number(&mut self, seq: u64) {
        self.id = TrajectoryId(u128::from(seq));
        self.group_id = GroupId(u128::from(seq / 8));
    }
}

#[cfg(test)]
mod tests {
    use protocol::codec::Codec;
    use protocol::wire::Validate;

    use super::*;

    #[test]
    fn a_bench_trajectory_is_valid_and_of_the_asked_length() {
        let t = Trajectory::sample(Payload::Trajectory { tokens: 500 });
        t.validate().unwrap();
        let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
        assert_eq!(turns.iter().map(|t| t.token_ids.len()).sum::<usize>(), 500);
        assert_eq!(t.trained_tokens(), 500 - 3 * 62);
        let codec = Codec::default();
        let bytes = codec.encode(&t).unwrap();
        assert_eq!(codec.decode_valid::<Trajectory>(&bytes).unwrap(), t);
    }
}
