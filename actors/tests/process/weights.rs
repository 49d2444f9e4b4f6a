//! A weight version that fails its checksum: the actor keeps serving the version it has,
//! counts the failure (`reagent_weights_corrupt_total`), and swaps in the next good version.

use protocol::codec::Codec;
use protocol::keys::Keys;
use protocol::metrics::WEIGHTS_CORRUPT;
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::{PolicyVersion, RunId, WeightManifest};

use crate::common::*;

impl Harness {
    async fn get(&self, key: String) -> Vec<u8> {
        self.link
            .call("get", std::time::Duration::ZERO, |mut c| {
                let key = key.clone();
                async move { redis::cmd("GET").arg(&key).query_async(&mut c).await }
            })
            .await
            .unwrap()
    }

    async fn set(&self, key: String, value: Vec<u8>) {
        self.link
            .call("set", std::time::Duration::ZERO, |mut c| {
                let (key, value) = (key.clone(), value.clone());
                async move { redis::cmd("SET").arg(&key).arg(value).query_async::<()>(&mut c).await }
            })
            .await
            .unwrap();
    }

    /// Stores `version` of this run with its last chunk's last byte flipped, then makes it the
    /// latest and announces it, as the learner would. The version is written whole before
    /// `latest` names it (copied from a scratch run), so no reader can see it intact first.
    async fn publish_corrupt(&self, version: PolicyVersion) {
        let scratch = RunId::new("scratch").unwrap();
        publish_weights(&WeightStore::new(&self.link, &scratch, WeightSettings::default()), version).await;
        let from = Keys::new(&scratch);
        let manifest_bytes = self.get(from.weights_manifest(version)).await;
        let manifest: WeightManifest = Codec::default().decode_valid(&manifest_bytes).unwrap();
        let last = manifest.chunks.len() - 1;
        for i in 0..=last {
            let mut chunk = self.get(from.weights_chunk(version, i)).await;
            if i == last {
                *chunk.last_mut().expect("a non-empty chunk") ^= 0x01;
            }
            self.set(self.keys.weights_chunk(version, i), chunk).await;
        }
        self.set(self.keys.weights_manifest(version), manifest_bytes).await;
        self.set(self.keys.weights_latest(), version.0.to_string().into_bytes()).await;
        let channel = self.keys.weights_notify();
        self.link
            .call("publish", std::time::Duration::ZERO, |mut c| {
                let channel = channel.clone();
                async move { redis::cmd("PUBLISH").arg(&channel).arg(version.0).query_async::<i64>(&mut c).await }
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_version_is_counted_and_skipped_and_the_next_good_one_is_served() {
    let h = Harness::new();
    let process = Process::start(h.config("outcome", ""));
    wait_until("a first group at v0", || async { !h.rollouts().await.is_empty() }).await;

    let corrupt_before = WEIGHTS_CORRUPT.get();
    h.publish_corrupt(PolicyVersion(1)).await;
    wait_until("the corrupt version to be fetched and counted", || async { WEIGHTS_CORRUPT.get() > corrupt_before })
        .await;
    // The actor goes on generating with the version it has: two more whole groups, all v0.
    let seen = h.rollouts().await.len();
    wait_until("two more groups after the failed fetch", || async { h.rollouts().await.len() >= seen + 6 }).await;
    let meanwhile = h.rollouts().await;
    assert!(meanwhile.iter().all(|t| t.policy_version == PolicyVersion(0)), "only v0 served while v1 is corrupt");

    publish_weights(&h.store(), PolicyVersion(2)).await;
    wait_until("a trajectory generated with v2", || async {
        h.rollouts().await.iter().any(|t| t.policy_version == PolicyVersion(2))
    })
    .await;
    let (report, _) = process.leave().await;

    let all = h.rollouts().await;
    assert!(all.iter().all(|t| t.policy_version != PolicyVersion(1)), "nothing was generated with corrupt weights");
    assert_eq!(
        (count(&report, "weight_swaps"), count(&report, "newest_version")),
        (1, 2),
        "only v2 was swapped in: {report:?}"
    );
}
