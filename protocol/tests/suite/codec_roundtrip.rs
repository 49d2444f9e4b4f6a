//! Property tests of the codec: every wire type round-trips bit for bit, and any truncation or
//! corruption of the version byte is refused rather than misread.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use proptest::collection::vec;
use proptest::prelude::*;
use protocol::codec::{Codec, FORMAT_VERSION};
use protocol::wire::*;

fn turn() -> impl Strategy<Value = Turn> {
    (prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Agent), Just(Role::Tool)], ".{0,40}", 0usize..24)
        .prop_flat_map(|(role, text, n)| {
            let agent = role == Role::Agent;
            (vec(any::<u32>(), n), vec(-30.0f32..=0.0, if agent { n } else { 0 }), vec(any::<bool>(), n)).prop_map(
                move |(token_ids, logprobs, mask)| Turn {
                    role,
                    text: text.clone(),
                    token_ids,
                    logprobs,
                    loss_mask: mask.into_iter().map(|m| m && agent).collect(),
                },
            )
        })
}

fn episode() -> impl Strategy<Value = Episode> {
    prop_oneof![
        vec(turn(), 0..6).prop_map(Episode::Text),
        vec(
            (vec(-5.0f32..5.0, 4), 0u32..2, -3.0f32..=0.0, -1.0f32..1.0).prop_map(
                |(observation, action, logprob, reward)| ControlStep { observation, action, logprob, reward }
            ),
            0..20
        )
        .prop_map(Episode::Control),
    ]
}

fn trajectory() -> impl Strategy<Value = Trajectory> {
    (
        "[a-z0-9_-]{1,20}",
        any::<u128>(),
        "[a-z0-9-]{1,12}",
        (0usize..5, any::<u64>(), 1u32..10),
        any::<u128>(),
        prop_oneof![Just(None), any::<u128>().prop_map(Some)],
        any::<u64>(),
        episode(),
        -10.0f32..10.0,
        any::<[u64; 4]>(),
    )
        .prop_map(|(run, id, actor, (fam, seed, difficulty), group, refined, version, episode, reward, t)| {
            Trajectory {
                run_id: RunId::new(run).unwrap(),
                id: TrajectoryId(id),
                actor_id: ActorId(actor),
                task: TaskSpec { family: TaskFamily::ALL[fam], seed, difficulty },
                group_id: GroupId(group),
                attempt: refined.map_or(Attempt::Initial, |of| Attempt::Refined { of: TrajectoryId(of) }),
                policy_version: PolicyVersion(version),
                episode,
                outcome_reward: reward,
                timing: Timing { started_at_ms: t[0], finished_at_ms: t[1], generation_ms: t[2], env_ms: t[3] },
            }
        })
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        (".{0,80}", ".{0,80}", 0.0f32..=1.0, "[a-z:/.-]{1,20}", any::<u32>()).prop_map(
            |(trace, critique, score, judge_id, latency_ms)| Verdict::Judged(Judgement {
                trace,
                critique,
                score,
                judge_id,
                latency_ms
            })
        ),
        ("[a-z]{1,10}", ".{0,40}", any::<u32>()).prop_map(|(judge_id, reason, attempts)| Verdict::Failed {
            judge_id,
            reason,
            attempts
        }),
        Just(Verdict::NotRequested),
    ]
}

fn manifest() -> impl Strategy<Value = WeightManifest> {
    (
        any::<u64>(),
        vec(("[a-z.]{1,16}", vec(0i64..6, 0..4)), 0..5),
        1u64..1 << 20,
        vec((1u64..1 << 22, any::<[u8; 32]>()), 0..5),
        any::<[u8; 32]>(),
        any::<u64>(),
    )
        .prop_map(|(v, tensors, chunk_bytes, chunks, root, at)| WeightManifest {
            version: PolicyVersion(v),
            tensors: tensors
                .into_iter()
                .map(|(name, shape)| TensorSpec { len: 0, offset: 0, dtype: DType::F32, name, shape })
                .collect(),
            chunk_bytes,
            chunks: chunks.into_iter().map(|(len, hash)| ChunkSpec { len, hash }).collect(),
            root,
            published_at_ms: at,
            scheme: MANIFEST_SCHEME,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn trajectories_round_trip(t in trajectory()) {
        let codec = Codec::default();
        let bytes = codec.encode(&t).unwrap();
        prop_assert_eq!(codec.decode_valid::<Trajectory>(&bytes).unwrap(), t);
    }

    #[test]
    fn scored_trajectories_round_trip(trajectory in trajectory(), verdict in verdict()) {
        let s = ScoredTrajectory { trajectory, verdict };
        let codec = Codec::default();
        let bytes = codec.encode(&s).unwrap();
        prop_assert_eq!(codec.decode_valid::<ScoredTrajectory>(&bytes).unwrap(), s);
    }

    #[test]
    fn manifests_round_trip(m in manifest()) {
        let codec = Codec::default();
        prop_assert_eq!(codec.decode::<WeightManifest>(&codec.encode(&m).unwrap()).unwrap(), m);
    }

    #[test]
    fn truncated_or_reversioned_payloads_are_refused(t in trajectory(), cut in any::<prop::sample::Index>(), version in 0u8..=254) {
        let codec = Codec::default();
        let bytes = codec.encode(&t).unwrap();
        let cut = cut.index(bytes.len());
        prop_assert!(codec.decode::<Trajectory>(&bytes[..cut]).is_err(), "a prefix of {} of {} bytes decoded", cut, bytes.len());
        let mut other = bytes.clone();
        // Every byte but this build's version.
        other[0] = if version >= FORMAT_VERSION { version + 1 } else { version };
        prop_assert!(codec.decode::<Trajectory>(&other).is_err());
    }
}

#[test]
fn validation_names_the_bad_field() {
    let bad = Trajectory {
        run_id: RunId::new("r").unwrap(),
        id: TrajectoryId(1),
        actor_id: ActorId("a".into()),
        task: TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 },
        group_id: GroupId(1),
        attempt: Attempt::Initial,
        policy_version: PolicyVersion(0),
        episode: Episode::Text(vec![Turn {
            role: Role::Agent,
            text: "x".into(),
            token_ids: vec![1, 2],
            logprobs: vec![-0.1],
            loss_mask: vec![true, true],
        }]),
        outcome_reward: 1.0,
        timing: Timing::default(),
    };
    let bytes = Codec::default().encode(&bad).unwrap();
    let err = Codec::default().decode_valid::<Trajectory>(&bytes).unwrap_err().to_string();
    assert!(err.contains("turns[0].logprobs") && err.contains("2 entries"), "{err}");
    let judged =
        Judgement { trace: String::new(), critique: String::new(), score: 1.5, judge_id: "j".into(), latency_ms: 0 };
    assert!(judged.validate().unwrap_err().to_string().contains("judgement.score"));
}
