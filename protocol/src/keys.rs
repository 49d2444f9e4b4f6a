//! Redis key names, all namespaced by run id.
//!
//! Every key of a run carries the run id in a hash tag (`reagent:{run}:…`), so on a Redis Cluster
//! all of a run's keys share a slot and the atomic multi-key operations (forward, dead-letter)
//! stay legal.
//!
//! ```text
//!  reagent:{run}:rollouts          stream   actors → rrm workers      (group "rrm")
//!  reagent:{run}:scored            stream   rrm workers → learner     (group "learner")
//!  reagent:{run}:<stream>:dead     stream   dead letters of <stream>
//!  reagent:{run}:<stream>:held:<group>      hash  entries held, not in progress (queue::progress)
//!  reagent:{run}:<stream>:failures:<group>  hash  failed deliveries per entry
//!  reagent:{run}:weights:latest    string   newest published version
//!  reagent:{run}:weights:versions  zset     published versions ("<v>:<chunks>"), for expiry
//!  reagent:{run}:weights:v<N>:manifest / :chunk:<i>   one version's manifest and chunks
//!  reagent:{run}:weights:notify    channel  "a new version is out"
//! ```

use crate::wire::{PolicyVersion, RunId};

/// The consumer group of RRM workers on the rollouts stream.
pub const RRM_GROUP: &str = "rrm";
/// The consumer group of the learner on the scored stream.
pub const LEARNER_GROUP: &str = "learner";

/// Key names of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys for `run`.
    pub fn new(run: &RunId) -> Self {
        Self { prefix: format!("reagent:{{{run}}}") }
    }

    /// A stream of this run by its short name (`rollouts`, `scored`, …).
    pub fn stream(&self, name: &str) -> String {
        format!("{}:{name}", self.prefix)
    }

    /// Trajectories from actors to RRM workers.
    pub fn rollouts(&self) -> String {
        self.stream("rollouts")
    }

    /// Scored trajectories from RRM workers to the learner.
    pub fn scored(&self) -> String {
        self.stream("scored")
    }

    /// The dead-letter stream of a stream key.
    pub fn dead_letter(stream_key: &str) -> String {
        format!("{stream_key}:dead")
    }

    /// The newest published weight version.
    pub fn weights_latest(&self) -> String {
        format!("{}:weights:latest", self.prefix)
    }

    /// The index of published versions (sorted set, member `"<version>:<chunks>"`, score the
    /// version): tells the publisher which old versions, and how many chunk keys, to expire.
    pub fn weights_versions(&self) -> String {
        format!("{}:weights:versions", self.prefix)
    }

    /// The manifest of one version.
    pub fn weights_manifest(&self, v: PolicyVersion) -> String {
        format!("{}:weights:v{}:manifest", self.prefix, v.0)
    }

    /// One chunk of one version.
    pub fn weights_chunk(&self, v: PolicyVersion, index: usize) -> String {
        format!("{}:weights:v{}:chunk:{index}", self.prefix, v.0)
    }

    /// The reply list of one initial attempt's judgement, in `critique` and `unified` modes:
    /// the RRM worker pushes the [`crate::codec::Codec`]-encoded [`crate::wire::Verdict`]
    /// (`Judged`, or `Failed` so the actor need not wait out its deadline), the actor waiting to
    /// refine pops it with a deadline (BLPOP). The worker sets an expiry on the key.
    pub fn critique_reply(&self, id: crate::wire::TrajectoryId) -> String {
        format!("{}:critique:{id}", self.prefix)
    }

    /// The pub/sub channel announcing new versions.
    pub fn weights_notify(&self) -> String {
        format!("{}:weights:notify", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_run_hash_tag() {
        let k = Keys::new(&RunId::new("r1").unwrap());
        let v = PolicyVersion(3);
        for key in [
            k.rollouts(),
            k.scored(),
            Keys::dead_letter(&k.scored()),
            k.weights_latest(),
            k.weights_manifest(v),
            k.weights_chunk(v, 2),
            k.weights_notify(),
        ] {
            assert!(key.starts_with("reagent:{r1}:"), "{key}");
        }
        assert_eq!(k.weights_chunk(v, 2), "reagent:{r1}:weights:v3:chunk:2");
    }
}
