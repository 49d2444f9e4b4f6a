//! Publishing a version: register it, write its chunks, then its manifest, then move `latest`
//! forward (never back) and announce it; finally let versions below the newest
//! `keep_versions` expire after the grace period.
//!
//! One pass over the bytes: each chunk is copied once, from the tensors straight into its SET
//! command, and hashed there by the task that sends it, on another core while the next unit is
//! copied; the manifest (the chunks' hashes and their root) is written after the last chunk.
//! Up to [`WRITES_IN_FLIGHT`] units are hashed or sent at once.
//!
//! Publishing the same content under the same version again rewrites nothing and is harmless.
//! Different content under a version already stored replaces it; readers caught in between see
//! a checksum error, never wrong weights. The learner never does that: a resumed learner numbers
//! on after the highest version published (`LearnerService::start`), because actors that hold a
//! version never refetch it.

use std::io::Write;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::{RedisWrite, Script};
use tokio::task::JoinSet;

use super::layout::{chunk_hash, Layout};
use super::store::{joined, transfer_allowance, units};
use super::{NamedTensor, WeightStore};
use crate::error::{CodecError, ProtocolError, Result};
use crate::link::RedisLink;
use crate::metrics::{WEIGHTS_PUBLISHED, WEIGHTS_PUBLISH_REFUSED, WEIGHTS_VERSION};
use crate::wire::{ChunkSpec, PolicyVersion, WeightManifest};

/// `latest := max(latest, v)` in one step, comparing decimal strings exactly (no floats);
/// returns `latest` after the call. A value that is not a number is replaced.
static ADVANCE_LATEST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local cur = redis.call('GET', KEYS[1])
local new = ARGV[1]
local newer = true
if cur and string.match(cur, '^%d+$') then
  cur = string.gsub(cur, '^0+(%d)', '%1')
  if #cur ~= #new then newer = #new > #cur else newer = new > cur end
end
if newer then
  redis.call('SET', KEYS[1], new)
  return new
end
return cur
"#,
    )
});

/// Expiry commands sent per round trip.
const EXPIRE_BATCH: usize = 1024;

/// Units of chunk writes sent and not yet acknowledged, at most.
const WRITES_IN_FLIGHT: usize = 4;

/// Hashes the values of unit `u`'s SET commands, then sends them in one pipeline; returns the
/// unit's chunk specs.
async fn send_unit(link: RedisLink, u: usize, cmds: Vec<redis::Cmd>) -> Result<(usize, Vec<ChunkSpec>)> {
    let mut pipe = redis::pipe();
    let mut specs = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        let Some(redis::Arg::Simple(value)) = cmd.args_iter().last() else {
            return Err(ProtocolError::InvalidArgument(format!("the SET of weights unit {u} lost a value")));
        };
        specs.push(ChunkSpec { len: value.len() as u64, hash: chunk_hash(value) });
        pipe.add_command(cmd).ignore();
    }
    let bytes = specs.iter().map(|s| s.len).sum();
    link.call("set weights chunks", transfer_allowance(bytes), |mut c| {
        let pipe = &pipe;
        async move { pipe.query_async::<()>(&mut c).await }
    })
    .await?;
    Ok((u, specs))
}

/// Same scheme, tensors, chunks and bytes (the publication time aside).
fn same_content(a: &WeightManifest, b: &WeightManifest) -> bool {
    a.scheme == b.scheme
        && a.version == b.version
        && a.root == b.root
        && a.chunk_bytes == b.chunk_bytes
        && a.chunks == b.chunks
        && a.tensors == b.tensors
}

impl WeightStore {
    /// Publishes `tensors` as `version` and returns its manifest (the stored one, unchanged, if
    /// the same content was published under this version before). `latest` moves only forward:
    /// publishing an older version stores it (and lets it expire) without announcing it.
    /// Tensors whose bytes do not match their shape, or repeated names, are refused before
    /// anything is written.
    pub async fn publish(&self, version: PolicyVersion, tensors: &[NamedTensor<'_>]) -> Result<WeightManifest> {
        let started = Instant::now();
        let layout = Layout::new(tensors, self.settings.chunk_bytes).map_err(CodecError::from)?;
        let stored = self.stored_manifest(version).await?;
        // Only a version stored before is hashed apart from writing it (a resumed learner's
        // republish): the common first publish reads every byte once.
        let manifest = match stored {
            Some(old) if same_content(&old, &layout.manifest(version, layout.chunk_specs(), 0)) => {
                tracing::debug!(%version, "weights already stored with the same content; not rewriting them");
                old
            }
            stored => {
                if stored.is_some() {
                    tracing::warn!(%version, "weights of this version are stored with other content; replacing them");
                }
                let chunks = layout.chunk_count();
                self.register(version, chunks).await?;
                let specs = self.write_chunks(version, &layout).await?;
                let manifest = layout.manifest(version, specs, crate::clock::unix_ms());
                self.write_manifest(version, &self.codec.encode(&manifest)?).await?;
                if let Some(old) = stored.filter(|old| old.chunks.len() != chunks) {
                    self.drop_chunks_beyond(version, chunks, old.chunks.len()).await?;
                }
                manifest
            }
        };
        let latest = self.advance_latest(version).await?;
        if latest == version {
            self.announce(version).await?;
            WEIGHTS_VERSION.set(version.0 as i64);
        }
        self.expire_superseded().await?;
        WEIGHTS_PUBLISHED.inc();
        tracing::info!(
            %version,
            %latest,
            bytes = layout.total(),
            chunks = manifest.chunks.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "published weights"
        );
        Ok(manifest)
    }

    /// [`WeightStore::publish`], waiting while Redis refuses the bytes for want of memory
    /// (`maxmemory` with `noeviction`): superseded versions give their room back as they expire,
    /// `expire_grace` after the version that superseded them. Retries with a backoff of 0.25 s
    /// doubling to 5 s, each refusal logged and counted (`reagent_weights_publish_refused_total`);
    /// once `patience` has passed since the first try, the refusal is returned. Any other error
    /// is returned at once.
    pub async fn publish_when_room(
        &self,
        version: PolicyVersion,
        tensors: &[NamedTensor<'_>],
        patience: Duration,
    ) -> Result<WeightManifest> {
        let started = Instant::now();
        let mut wait = Duration::from_millis(250);
        loop {
            match self.publish(version, tensors).await {
                Err(e) if e.is_out_of_memory() && started.elapsed() + wait <= patience => {
                    WEIGHTS_PUBLISH_REFUSED.inc();
                    tracing::warn!(
                        %version,
                        error = %e,
                        retry_in_ms = wait.as_millis() as u64,
                        waited_ms = started.elapsed().as_millis() as u64,
                        patience_s = patience.as_secs(),
                        "Redis has no room for these weights; superseded versions free theirs as they expire \
                         (weights.expire_grace_s after the next version); retrying (raise the server's maxmemory \
                         or lower weights.keep_versions if this repeats)"
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// The manifest stored for `version`, if any and readable (an unreadable one is replaced).
    async fn stored_manifest(&self, version: PolicyVersion) -> Result<Option<WeightManifest>> {
        let Some(bytes) = self.read_manifest(&self.link, version).await? else { return Ok(None) };
        match self.codec.decode::<WeightManifest>(&bytes) {
            Ok(old) => Ok(Some(old)),
            Err(error) => {
                tracing::warn!(%version, %error, "stored manifest of this version is unreadable; replacing it");
                Ok(None)
            }
        }
    }

    /// Records the version in the index first, so even a half-written version is expired later.
    async fn register(&self, version: PolicyVersion, chunks: usize) -> Result<()> {
        let (key, member) = (self.versions_key(), format!("{}:{chunks}", version.0));
        self.link
            .call("zadd weights versions", Duration::ZERO, |mut c| {
                let (key, member) = (&key, &member);
                async move { redis::cmd("ZADD").arg(key).arg(version.0).arg(member).query_async::<()>(&mut c).await }
            })
            .await
    }

    /// Writes every chunk: each is copied once, from the tensors into its SET command, and
    /// hashed from there by the task that sends it (so hashing one unit overlaps copying the
    /// next and sending the last, on another core); returns the chunks' specs in order.
    async fn write_chunks(&self, version: PolicyVersion, layout: &Layout<'_>) -> Result<Vec<ChunkSpec>> {
        let mut specs: Vec<(usize, Vec<ChunkSpec>)> = Vec::new();
        let mut in_flight = JoinSet::new();
        for (u, unit) in units(layout.chunk_count(), self.settings.chunk_bytes).enumerate() {
            let mut cmds = Vec::with_capacity(unit.len());
            for i in unit {
                let key = self.keys.weights_chunk(version, i);
                let mut cmd = redis::cmd("SET");
                cmd.arg(&key);
                cmd.reserve_space_for_args([layout.chunk_len(i)]);
                let mut failed = None;
                {
                    let mut value = cmd.writer_for_next_arg();
                    layout.pieces(i, |piece| {
                        if let Err(e) = value.write_all(piece) {
                            failed.get_or_insert(e);
                        }
                    });
                }
                if let Some(source) = failed {
                    return Err(ProtocolError::Io { what: format!("building the SET of weights chunk {i}"), source });
                }
                cmds.push(cmd);
            }
            if in_flight.len() >= WRITES_IN_FLIGHT {
                if let Some(done) = in_flight.join_next().await {
                    specs.push(joined(done)?);
                }
            }
            in_flight.spawn(send_unit(self.link.clone(), u, cmds));
        }
        while let Some(done) = in_flight.join_next().await {
            specs.push(joined(done)?);
        }
        specs.sort_unstable_by_key(|(u, _)| *u);
        Ok(specs.into_iter().flat_map(|(_, s)| s).collect())
    }

    async fn write_manifest(&self, version: PolicyVersion, encoded: &[u8]) -> Result<()> {
        let key = self.keys.weights_manifest(version);
        self.link
            .call("set weights manifest", transfer_allowance(encoded.len() as u64), |mut c| {
                let key = &key;
                async move { redis::cmd("SET").arg(key).arg(encoded).query_async::<()>(&mut c).await }
            })
            .await
    }

    /// Deletes chunk keys `from..to` left by an earlier, longer publication of the version.
    async fn drop_chunks_beyond(&self, version: PolicyVersion, from: usize, to: usize) -> Result<()> {
        let keys: Vec<String> = (from..to).map(|i| self.keys.weights_chunk(version, i)).collect();
        let (index, old_member) = (self.versions_key(), format!("{}:{to}", version.0));
        for batch in keys.chunks(EXPIRE_BATCH) {
            self.link
                .call("del stale weights chunks", Duration::ZERO, |mut c| async move {
                    redis::cmd("DEL").arg(batch).query_async::<()>(&mut c).await
                })
                .await?;
        }
        self.link
            .call("zrem weights versions", Duration::ZERO, |mut c| {
                let (index, old_member) = (&index, &old_member);
                async move { redis::cmd("ZREM").arg(index).arg(old_member).query_async::<()>(&mut c).await }
            })
            .await
    }

    /// `latest := max(latest, version)`; returns the latest afterwards.
    async fn advance_latest(&self, version: PolicyVersion) -> Result<PolicyVersion> {
        let key = self.keys.weights_latest();
        let latest: String = self
            .link
            .call("advance weights latest", Duration::ZERO, |mut c| {
                let key = &key;
                async move {
                    let mut invocation = ADVANCE_LATEST.prepare_invoke();
                    invocation.key(key).arg(version.0);
                    invocation.invoke_async(&mut c).await
                }
            })
            .await?;
        latest.parse().map(PolicyVersion).map_err(|_| ProtocolError::UnexpectedReply {
            op: "advance weights latest",
            detail: format!("{latest:?} is not a version number"),
        })
    }

    async fn announce(&self, version: PolicyVersion) -> Result<()> {
        let channel = self.keys.weights_notify();
        let listeners: i64 = self
            .link
            .call("publish weights notify", Duration::ZERO, |mut c| {
                let channel = &channel;
                async move { redis::cmd("PUBLISH").arg(channel).arg(version.0).query_async(&mut c).await }
            })
            .await?;
        tracing::debug!(%version, listeners, "announced weights");
        Ok(())
    }

    /// Gives every version below the newest `keep_versions` an expiry (its chunks a little
    /// later than its manifest, so whoever read the manifest in time can read the chunks) and
    /// drops it from the index.
    async fn expire_superseded(&self) -> Result<()> {
        let index = self.versions_key();
        let members: Vec<String> = self
            .link
            .call("zrange weights versions", Duration::ZERO, |mut c| {
                let index = &index;
                async move { redis::cmd("ZRANGE").arg(index).arg(0).arg(-1).query_async(&mut c).await }
            })
            .await?;
        let parsed: Vec<(String, Option<(u64, usize)>)> = members
            .into_iter()
            .map(|m| {
                let p = m.split_once(':').and_then(|(v, n)| Some((v.parse().ok()?, n.parse().ok()?)));
                (m, p)
            })
            .collect();
        let mut versions: Vec<u64> = parsed.iter().filter_map(|(_, p)| p.map(|(v, _)| v)).collect();
        versions.sort_unstable_by(|a, b| b.cmp(a));
        versions.dedup();
        let keep = self.settings.keep_versions as usize;
        let Some(&oldest_kept) = versions.get(keep.saturating_sub(1)).or(versions.last()) else { return Ok(()) };
        let manifest_ttl = self.settings.expire_grace;
        let chunk_ttl = manifest_ttl + self.link.settings().op_timeout;
        for (member, parsed) in parsed {
            match parsed {
                Some((v, _)) if v >= oldest_kept => continue,
                Some((v, chunks)) => {
                    let v = PolicyVersion(v);
                    let mut keys = vec![(self.keys.weights_manifest(v), manifest_ttl)];
                    keys.extend((0..chunks).map(|i| (self.keys.weights_chunk(v, i), chunk_ttl)));
                    self.expire_keys(&keys).await?;
                    tracing::debug!(version = %v, chunks, grace_s = manifest_ttl.as_secs(), "superseded weights will expire");
                }
                None => tracing::warn!(%member, index = %index, "malformed entry in the weights index; dropping it"),
            }
            self.link
                .call("zrem weights versions", Duration::ZERO, |mut c| {
                    let (index, member) = (&index, &member);
                    async move { redis::cmd("ZREM").arg(index).arg(member).query_async::<()>(&mut c).await }
                })
                .await?;
        }
        Ok(())
    }

    async fn expire_keys(&self, keys: &[(String, Duration)]) -> Result<()> {
        for batch in keys.chunks(EXPIRE_BATCH) {
            let mut pipe = redis::pipe();
            for (key, ttl) in batch {
                pipe.cmd("PEXPIRE").arg(key).arg(ttl.as_millis() as u64).ignore();
            }
            self.link
                .call("expire superseded weights", Duration::ZERO, |mut c| {
                    let pipe = &pipe;
                    async move { pipe.query_async::<()>(&mut c).await }
                })
                .await?;
        }
        Ok(())
    }
}
