//! Format 2's packed per-token vectors: long turns round-trip bit for bit at about nine bytes a
//! token, a byte string of the wrong length or a bad mask byte is refused naming the field, a
//! version-1 payload is refused by its version, and JSON keeps its arrays.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use protocol::codec::{Codec, FORMAT_VERSION};
use protocol::error::CodecError;
use protocol::wire::*;
use serde::{Serialize, Serializer};

fn trajectory(episode: Episode) -> Trajectory {
    Trajectory {
        run_id: RunId::new("packed").unwrap(),
        id: TrajectoryId(11),
        actor_id: ActorId("actor-0".into()),
        task: TaskSpec { family: TaskFamily::Math, seed: 5, difficulty: 2 },
        group_id: GroupId(4),
        attempt: Attempt::Initial,
        policy_version: PolicyVersion(3),
        episode,
        outcome_reward: 0.5,
        timing: Timing::default(),
    }
}

fn agent_turn(n: usize) -> Turn {
    Turn {
        role: Role::Agent,
        text: String::new(),
        // Ids across the u32 range and log-probs with full mantissas: nothing a varint or a
        // rounding could hide.
        token_ids: (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect(),
        logprobs: (0..n).map(|i| -((i as f32 + 0.1) * std::f32::consts::PI).sin().abs()).collect(),
        loss_mask: (0..n).map(|i| i % 3 != 0).collect(),
    }
}

#[test]
fn a_long_turn_round_trips_bit_for_bit_in_about_nine_bytes_a_token() {
    let codec = Codec::default();
    let n = 50_000;
    let t = trajectory(Episode::Text(vec![agent_turn(n)]));
    let bytes = codec.encode(&t).unwrap();
    let back: Trajectory = codec.decode_valid(&bytes).unwrap();
    assert_eq!(back, t);
    let (Episode::Text(a), Episode::Text(b)) = (&back.episode, &t.episode) else { panic!("not text") };
    let bits = |t: &Turn| t.logprobs.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a[0]), bits(&b[0]));
    // 4 (id) + 4 (log-prob) + 1 (mask) per token, plus three length prefixes and the header.
    let bound = 9 * n + 128;
    assert!(bytes.len() >= 9 * n && bytes.len() <= bound, "{} bytes for {n} tokens, bound {bound}", bytes.len());
    assert_eq!(codec.encoded_len(&t).unwrap(), bytes.len() as u64);
}

#[test]
fn control_steps_round_trip() {
    let codec = Codec::default();
    let steps = (0..300)
        .map(|i| ControlStep {
            observation: vec![i as f32, -0.25, 1e-7, 3.5],
            action: i % 2,
            logprob: -0.69,
            reward: 1.0,
        })
        .collect();
    let t = trajectory(Episode::Control(steps));
    assert_eq!(codec.decode_valid::<Trajectory>(&codec.encode(&t).unwrap()).unwrap(), t);
}

/// Bytes written as one serde byte string, to forge a turn's packed fields.
struct Raw(Vec<u8>);

impl Serialize for Raw {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

/// A [`Turn`]'s encoding with arbitrary bytes in its packed fields.
#[derive(Serialize)]
struct ForgedTurn {
    role: Role,
    text: String,
    token_ids: Raw,
    logprobs: Raw,
    loss_mask: Raw,
}

fn forged(token_ids: usize, logprobs: usize, loss_mask: Vec<u8>) -> Vec<u8> {
    let t = ForgedTurn {
        role: Role::Agent,
        text: "x".into(),
        token_ids: Raw(vec![7; token_ids]),
        logprobs: Raw(vec![0; logprobs]),
        loss_mask: Raw(loss_mask),
    };
    Codec::default().encode(&t).unwrap()
}

fn refusal(bytes: &[u8]) -> String {
    match Codec::default().decode::<Turn>(bytes) {
        Err(CodecError::Malformed(m)) => m,
        other => panic!("expected a malformed payload, got {other:?}"),
    }
}

#[test]
fn a_forged_turn_of_whole_entries_decodes() {
    let turn = Codec::default().decode::<Turn>(&forged(8, 8, vec![1, 0])).unwrap();
    assert_eq!(turn.token_ids, vec![0x0707_0707; 2]);
    assert_eq!(turn.logprobs, vec![0.0; 2]);
    assert_eq!(turn.loss_mask, vec![true, false]);
}

#[test]
fn a_byte_string_of_the_wrong_length_or_a_bad_mask_byte_names_the_field() {
    let m = refusal(&forged(7, 8, vec![1, 1]));
    assert!(m.contains("token_ids") && m.contains("7 bytes") && m.contains("4-byte"), "{m}");
    let m = refusal(&forged(8, 6, vec![1, 1]));
    assert!(m.contains("logprobs") && m.contains("6 bytes"), "{m}");
    let m = refusal(&forged(8, 8, vec![1, 2]));
    assert!(m.contains("loss_mask") && m.contains("0 or 1"), "{m}");
}

#[test]
fn a_version_1_payload_is_refused_by_its_version() {
    assert_eq!(FORMAT_VERSION, 2);
    let mut bytes = Codec::default().encode(&trajectory(Episode::Text(vec![agent_turn(4)]))).unwrap();
    bytes[0] = 1;
    assert_eq!(
        Codec::default().decode::<Trajectory>(&bytes),
        Err(CodecError::UnknownVersion { found: 1, expected: 2 })
    );
}

#[test]
fn json_keeps_arrays_of_numbers_and_booleans() {
    let turn = Turn {
        role: Role::Agent,
        text: "hi".into(),
        token_ids: vec![1, 70_000],
        logprobs: vec![-0.5, -2.0],
        loss_mask: vec![true, false],
    };
    let json = serde_json::to_string(&turn).unwrap();
    assert_eq!(
        json,
        r#"{"role":"Agent","text":"hi","token_ids":[1,70000],"logprobs":[-0.5,-2.0],"loss_mask":[true,false]}"#
    );
    assert_eq!(serde_json::from_str::<Turn>(&json).unwrap(), turn);
    let t = trajectory(Episode::Text(vec![agent_turn(64), turn]));
    let value = serde_json::to_value(&t).unwrap();
    let ids = &value["episode"]["Text"][0]["token_ids"];
    assert!(ids.as_array().is_some_and(|a| a.len() == 64 && a.iter().all(|x| x.is_u64())), "{ids}");
    assert_eq!(serde_json::from_value::<Trajectory>(value).unwrap(), t);
    let step = ControlStep { observation: vec![0.5, -1.0], action: 1, logprob: -0.25, reward: 1.0 };
    let json = serde_json::to_string(&step).unwrap();
    assert_eq!(json, r#"{"observation":[0.5,-1.0],"action":1,"logprob":-0.25,"reward":1.0}"#);
    assert_eq!(serde_json::from_str::<ControlStep>(&json).unwrap(), step);
}
