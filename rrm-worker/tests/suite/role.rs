//! The role entry point as `reagent rrm` calls it: from a loaded configuration to scored
//! trajectories, a critique reply per initial attempt, and a clean return on cancel; `actor.refine`
//! read from the job (critique + failed: solved initial attempts unjudged); and the
//! configuration errors it reports before touching Redis.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::{batch, id_counts, link, list_and_ttl, read_scored, server};
use protocol::config::ReagentConfig;
use protocol::keys::{Keys, RRM_GROUP};
use protocol::queue::{Producer, QueueSettings};
use protocol::redis_server::RedisServer;
use protocol::role::{Ended, RoleReport};
use protocol::wire::{Attempt, RunId, ScoredTrajectory, Trajectory, Verdict};
use rrm_worker::run_role;
use testkit::wait_until;
use tokio_util::sync::CancellationToken;

/// Runs the role on a critique job `run` (with `extra` TOML appended) until the batch of 10
/// trajectories it is given is scored, then cancels it: the report, the batch, the scored stream.
async fn score_job(srv: &RedisServer, run: &str, extra: &str) -> (RoleReport, Vec<Trajectory>, Vec<ScoredTrajectory>) {
    let link = link(srv);
    let text = format!(
        "[run]\nid = \"{run}\"\nfeedback = \"critique\"\n[redis]\nurl = \"{}\"\n[queue]\nblock_ms = 50\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n[rrm]\nbatch_size = 4\nconsumer = \"rrm-role-test\"\n{extra}",
        srv.url()
    );
    let cfg = ReagentConfig::from_toml_str(&text).unwrap();
    let items = batch(run, 10);
    let keys = Keys::new(&RunId::new(run).unwrap());
    let producer =
        Producer::<Trajectory>::new(link.clone(), keys.rollouts(), RRM_GROUP, QueueSettings::default()).await.unwrap();
    producer.send_batch(&items).await.unwrap();

    let cancel = CancellationToken::new();
    let role = tokio::spawn({
        let cancel = cancel.clone();
        async move { run_role(&cfg, cancel).await }
    });
    wait_until("the job scored", Duration::from_secs(30), || async {
        read_scored(&link, &keys.scored()).await.len() >= items.len()
    })
    .await;
    cancel.cancel();
    let report = role.await.unwrap().unwrap();
    let scored = read_scored(&link, &keys.scored()).await;
    (report, items, scored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_role_scores_a_job_and_stops_on_cancel() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let srv = server();
        let link = link(&srv);
        let (report, items, scored) = score_job(&srv, "role", "").await;
        assert_eq!((report.role, report.ended), ("rrm", Ended::Shutdown), "{report}");
        assert_eq!(report.counter("judged"), Some(items.len() as u64 / 2), "initial attempts are judged: {report}");
        assert_eq!(report.counter("replies"), report.counter("judged"), "one critique reply per judged attempt");
        assert_eq!(report.counter("unrefined_skipped"), Some(0), "actor.refine = all: none skipped");

        let keys = Keys::new(&RunId::new("role").unwrap());
        assert_eq!(id_counts(&scored).len(), items.len());
        for s in &scored {
            let (reply, _) = list_and_ttl(&link, &keys.critique_reply(s.trajectory.id)).await;
            let initial = s.trajectory.attempt == Attempt::Initial;
            assert_eq!(reply.len(), usize::from(initial));
            assert_eq!(matches!(s.verdict, Verdict::Judged(_)), initial);
        }
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_reads_actor_refine_from_the_jobs_configuration() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let srv = server();
        let (report, items, scored) = score_job(&srv, "only-failed", "[actor]\nrefine = \"failed\"\n").await;
        let initial = |t: &Trajectory| t.attempt == Attempt::Initial;
        let solved = items.iter().filter(|t| initial(t) && episode::solved(t)).count() as u64;
        let failed = items.iter().filter(|t| initial(t) && !episode::solved(t)).count() as u64;
        assert!(solved > 0 && failed > 0, "the batch has both");
        assert_eq!(report.counter("judged"), Some(failed), "only failed initial attempts are judged: {report}");
        assert_eq!(report.counter("unrefined_skipped"), Some(solved), "{report}");
        assert_eq!(report.counter("replies"), Some(failed), "{report}");
        assert_eq!(id_counts(&scored).len(), items.len(), "every trajectory is forwarded");
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test]
async fn configuration_errors_name_the_key() {
    let cfg = ReagentConfig::from_toml_str("").unwrap();
    let err = run_role(&cfg, CancellationToken::new()).await.unwrap_err().to_string();
    let one_message = protocol::role::redis_url(&cfg.redis).unwrap_err().to_string();
    assert_eq!(err, one_message, "the one message for an empty redis.url");

    let cfg = ReagentConfig::from_toml_str("[redis]\nurl = \"redis://127.0.0.1:1\"\n[rrm]\nbatch_size = 0\n").unwrap();
    let err = run_role(&cfg, CancellationToken::new()).await.unwrap_err().to_string();
    assert!(err.contains("rrm.batch_size"), "{err}");

    let cfg =
        ReagentConfig::from_toml_str("[redis]\nurl = \"redis://127.0.0.1:1\"\n[actor]\nrefine = \"solved\"\n").unwrap();
    let err = run_role(&cfg, CancellationToken::new()).await.unwrap_err().to_string();
    assert!(err.contains("actor.refine") && err.contains("solved"), "{err}");

    let text =
        "[redis]\nurl = \"redis://127.0.0.1:1\"\n[rrm]\njudge = \"openai\"\n[rrm.openai]\nendpoints = [\"http://127.0.0.1:1\"]\n\
                api_key_env = \"REAGENT_TEST_SURELY_UNSET_KEY\"\n";
    let err = run_role(&ReagentConfig::from_toml_str(text).unwrap(), CancellationToken::new()).await.unwrap_err();
    assert!(
        err.to_string().contains("rrm.openai.api_key_env") && err.to_string().contains("REAGENT_TEST_SURELY_UNSET_KEY"),
        "{err}"
    );
}
