//! `reagent dlq` as an operator runs it against a real redis-server: list, show, replay one
//! and all, purge (refused without --yes), and its help text.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use protocol::keys::{Keys, LEARNER_GROUP, RRM_GROUP};
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::{read_dead_letters, Consumer, Producer, QueueSettings};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, Role, RunId, TaskFamily, TaskSpec, Timing, Trajectory,
    TrajectoryId, Turn,
};

const RUN: &str = "dlq";

/// `reagent args…` against `url`'s run `dlq`, with a deadline (the binary's Redis calls have
/// their own; this one catches a hang).
fn reagent(url: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
        cmd.env_remove(k);
    }
    cmd.env("REAGENT__REDIS__URL", url).env("REAGENT__RUN__ID", RUN).env("REAGENT__REDIS__RETRY_FOR_MS", "2000");
    let child = cmd.spawn().expect("reagent starts");
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out: Output = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(out) => out.expect("output readable"),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            panic!("reagent {args:?} hung");
        }
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn trajectory(seed: u64) -> Trajectory {
    let answer =
        Turn { role: Role::Agent, text: "4".into(), token_ids: vec![52], logprobs: vec![-0.5], loss_mask: vec![true] };
    Trajectory {
        run_id: RunId::new(RUN).unwrap(),
        id: TrajectoryId(1000 + u128::from(seed)),
        actor_id: ActorId("actor-0".into()),
        task: TaskSpec { family: TaskFamily::Math, seed, difficulty: 1 },
        group_id: GroupId(1),
        attempt: Attempt::Initial,
        policy_version: PolicyVersion(0),
        episode: Episode::Text(vec![answer]),
        outcome_reward: 1.0,
        timing: Timing::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_replay_and_purge_dead_letters() {
    let srv = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let url = srv.url();
    let link = RedisLink::connect(&url, LinkSettings::default()).unwrap();
    let keys = Keys::new(&RunId::new(RUN).unwrap());
    let settings = QueueSettings { block: Duration::from_millis(50), ..QueueSettings::default() };
    let producer = Producer::<Trajectory>::new(link.clone(), keys.rollouts(), RRM_GROUP, settings).await.unwrap();
    let sent: Vec<Trajectory> = (0..3).map(trajectory).collect();
    producer.send_batch(&sent).await.unwrap();
    let mut rrm = Consumer::<Trajectory>::new(&link, keys.rollouts(), RRM_GROUP, "rrm-0", settings).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(rrm.next_batch().await.unwrap());
    }
    for d in &got {
        assert!(rrm.dead_letter(&d.entry_id, d.deliveries, "judge endpoint refused the request").await.unwrap());
    }
    let dead = Keys::dead_letter(&keys.rollouts());
    let letters = read_dead_letters(&link, &dead, 10).await.unwrap();

    let (ok, out) = reagent(&url, &["dlq", "list"]);
    assert!(ok, "{out}");
    assert!(out.contains("3 dead letters of rollouts") && out.contains("0 dead letters of scored"), "{out}");
    assert!(out.contains(&sent[1].id.to_string()) && out.contains("judge endpoint refused"), "{out}");

    let (ok, out) = reagent(&url, &["dlq", "show", &letters[0].dead_id]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("trajectory {}", sent[0].id)) && out.contains("rrm-0"), "{out}");
    let (ok, out) = reagent(&url, &["dlq", "show", "1-1"]);
    assert!(!ok && out.contains("no dead letter 1-1"), "{out}");
    let (ok, out) = reagent(&url, &["dlq", "show", "banana"]);
    assert!(!ok && out.contains("`banana` is not a stream entry id"), "{out}");

    let (ok, out) = reagent(&url, &["dlq", "replay", &letters[0].dead_id, "--stream", "rollouts"]);
    assert!(ok && out.contains("replayed 1 dead letters onto rollouts"), "{out}");
    let (ok, out) = reagent(&url, &["dlq", "replay", &letters[0].dead_id]);
    assert!(!ok && out.contains("not replayed (no such letter, or no payload)"), "a letter replays once: {out}");
    let (ok, out) = reagent(&url, &["dlq", "purge"]);
    assert!(!ok && out.contains("refusing to delete 2 dead letters without --yes"), "{out}");
    let (ok, out) = reagent(&url, &["dlq", "replay", "--all"]);
    assert!(ok && out.contains("replayed 2 dead letters onto rollouts"), "{out}");

    // Every trajectory is back on the stream, once, as the RRM workers will read it.
    let mut back = Vec::new();
    while back.len() < 3 {
        back.extend(rrm.next_batch().await.unwrap().into_iter().map(|d| d.item.id));
    }
    back.sort();
    let mut want: Vec<_> = sent.iter().map(|t| t.id).collect();
    want.sort();
    assert_eq!(back, want);

    // A poison entry on the scored stream, then purged.
    let scored = Producer::<Trajectory>::new(link.clone(), keys.scored(), LEARNER_GROUP, settings).await.unwrap();
    scored.send(&sent[0]).await.unwrap();
    let mut learner =
        Consumer::<Trajectory>::new(&link, keys.scored(), LEARNER_GROUP, "learner-0", settings).await.unwrap();
    let d = loop {
        if let Some(d) = learner.next_batch().await.unwrap().pop() {
            break d;
        }
    };
    learner.dead_letter(&d.entry_id, 1, "untrainable").await.unwrap();
    let (ok, out) = reagent(&url, &["dlq", "purge", "--yes", "--stream", "scored"]);
    assert!(ok && out.contains("purged 1 dead letters of scored") && !out.contains("rollouts"), "{out}");
    assert!(read_dead_letters(&link, &Keys::dead_letter(&keys.scored()), 10).await.unwrap().is_empty());

    let (ok, out) = reagent(&url, &["dlq", "--help"]);
    assert!(ok && ["list", "show", "replay", "purge"].iter().all(|c| out.contains(c)), "{out}");
    let (ok, out) = reagent(&url, &["dlq", "replay", "--help"]);
    assert!(ok && out.contains("--all") && out.contains("once the cause"), "{out}");
}
