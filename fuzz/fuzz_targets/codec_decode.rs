//! The queue codec's decode on arbitrary bytes (every payload type a queue or weight key
//! carries), and encode/decode round trips of turns the fuzzer builds.
//!
//! Properties: decode never panics; a payload that decodes re-encodes to bytes that decode to
//! the same value (compared by their encoding, so NaN log-probs compare equal); a value the
//! codec encodes and then accepts decodes to exactly what was encoded.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use protocol::codec::Codec;
use protocol::wire::{Judgement, Role, ScoredTrajectory, Trajectory, Turn, WeightManifest};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A turn as the fuzzer builds it.
#[derive(Debug, Arbitrary)]
struct ArbTurn {
    role: u8,
    text: String,
    token_ids: Vec<u32>,
    logprobs: Vec<f32>,
    loss_mask: Vec<bool>,
}

impl From<ArbTurn> for Turn {
    fn from(t: ArbTurn) -> Self {
        let role = [Role::System, Role::User, Role::Agent, Role::Tool][usize::from(t.role % 4)];
        Turn { role, text: t.text, token_ids: t.token_ids, logprobs: t.logprobs, loss_mask: t.loss_mask }
    }
}

/// What one run does.
#[derive(Debug, Arbitrary)]
enum Input {
    /// Raw payload bytes, decoded as every type the wire carries.
    Decode { max_bytes: u16, bytes: Vec<u8> },
    /// Turns and a judgement, encoded then decoded.
    RoundTrip { turns: Vec<ArbTurn>, trace: String, critique: String, score: f32, judge_id: String, latency_ms: u32 },
}

/// Decodes `bytes` as `T`; when that succeeds, its re-encoding must decode again and encode
/// identically.
fn stable<T: Serialize + DeserializeOwned>(codec: &Codec, bytes: &[u8]) {
    let Ok(value) = codec.decode::<T>(bytes) else { return };
    let once = codec.encode(&value).expect("a decoded value encodes");
    let again: T = codec.decode(&once).expect("a re-encoded value decodes");
    assert_eq!(codec.encode(&again).expect("encodes"), once, "decode/encode is not stable");
}

fn round_trip<T: Serialize + DeserializeOwned>(codec: &Codec, value: &T) {
    let bytes = codec.encode(value).expect("an in-memory value encodes");
    // The decoded-memory budget may refuse (many empty strings); what it accepts is exact.
    if let Ok(back) = codec.decode::<T>(&bytes) {
        assert_eq!(codec.encode(&back).expect("encodes"), bytes, "decode(encode(x)) != x");
    }
}

fuzz_target!(|input: Input| {
    match input {
        Input::Decode { max_bytes, bytes } => {
            let codec = Codec::new(u64::from(max_bytes) + 2);
            stable::<Trajectory>(&codec, &bytes);
            stable::<ScoredTrajectory>(&codec, &bytes);
            stable::<Judgement>(&codec, &bytes);
            stable::<WeightManifest>(&codec, &bytes);
            let _ = codec.decode_valid::<Trajectory>(&bytes);
            let _ = codec.decode_valid::<ScoredTrajectory>(&bytes);
        }
        Input::RoundTrip { turns, trace, critique, score, judge_id, latency_ms } => {
            let codec = Codec::default();
            let turns: Vec<Turn> = turns.into_iter().map(Turn::from).collect();
            round_trip(&codec, &turns);
            round_trip(&codec, &Judgement { trace, critique, score, judge_id, latency_ms });
        }
    }
});
