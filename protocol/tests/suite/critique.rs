//! The critique-reply channel end to end on a real redis-server: what the RRM worker sends is
//! what the actor receives, keyed by trajectory id; a resend replaces rather than doubles; a
//! reply that does not decode is named, not dropped; an id with no reply times out at the
//! deadline; and every reply key expires.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::{link, server};
use protocol::critique::{receive, send, Reply};
use protocol::keys::Keys;
use protocol::wire::{Judgement, RunId, TrajectoryId, Verdict};

fn judged(critique: &str, score: f32) -> Verdict {
    Verdict::Judged(Judgement {
        trace: "t".into(),
        critique: critique.into(),
        score,
        judge_id: "reference".into(),
        latency_ms: 3,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_round_trip_replace_on_resend_and_expire() {
    let srv = server();
    let link = link(&srv);
    let keys = Keys::new(&RunId::new("crit").unwrap());
    let (a, b, c, silent) = (TrajectoryId(1), TrajectoryId(2), TrajectoryId(3), TrajectoryId(4));
    let failed = Verdict::Failed { judge_id: "openai".into(), reason: "no score block".into(), attempts: 3 };

    // A first verdict for `a`, then a resend (a redelivered trajectory): the second replaces it.
    assert_eq!(send(&link, &keys, &[(a, &judged("stale", 0.1))], Duration::from_secs(60)).await.unwrap(), 1);
    let fresh = judged("Message 2 guessed a value instead of computing it.", 0.4);
    let sent = send(&link, &keys, &[(a, &fresh), (b, &failed)], Duration::from_secs(60)).await.unwrap();
    assert_eq!(sent, 2);
    // A reply that is not a Codec-encoded verdict.
    let garbage_key = keys.critique_reply(c);
    link.call("rpush", Duration::ZERO, |mut conn| {
        let key = garbage_key.clone();
        async move { redis::cmd("RPUSH").arg(&key).arg(&b"not a verdict"[..]).query_async::<()>(&mut conn).await }
    })
    .await
    .unwrap();

    for (id, secs) in [(a, 60), (b, 60)] {
        let key = keys.critique_reply(id);
        let ttl: i64 = link
            .call("ttl", Duration::ZERO, |mut conn| {
                let key = key.clone();
                async move { redis::cmd("TTL").arg(&key).query_async(&mut conn).await }
            })
            .await
            .unwrap();
        assert!(ttl > 0 && ttl <= secs, "reply key of {id} expires ({ttl} s left)");
        let len: i64 = link
            .call("llen", Duration::ZERO, |mut conn| {
                let key = key.clone();
                async move { redis::cmd("LLEN").arg(&key).query_async(&mut conn).await }
            })
            .await
            .unwrap();
        assert_eq!(len, 1, "one reply per id, however often it was sent");
    }

    let wait = Duration::from_millis(400);
    let started = std::time::Instant::now();
    let got = receive(&link.fresh(), &keys, &[a, b, c, silent], wait).await.unwrap();
    assert!(started.elapsed() >= wait, "the silent id is waited for up to the deadline");
    assert!(started.elapsed() < wait * 10, "and not much longer ({:?})", started.elapsed());
    assert_eq!(got.len(), 4, "every id gets an answer");
    assert_eq!(got[&a], Reply::Came(fresh));
    assert_eq!(got[&b], Reply::Came(failed));
    assert!(matches!(&got[&c], Reply::Unreadable(why) if !why.is_empty()), "{:?}", got[&c]);
    assert_eq!(got[&silent], Reply::TimedOut);

    // Popped replies are gone: a second wait finds nothing.
    let again = receive(&link.fresh(), &keys, &[a], Duration::from_millis(50)).await.unwrap();
    assert_eq!(again[&a], Reply::TimedOut);
    assert_eq!(send(&link, &keys, &[], Duration::from_secs(1)).await.unwrap(), 0, "nothing to send is no call");
}
