//! Fetching a version: its manifest, then its chunks in batches (MGET), each verified as it
//! arrives. The newest version is fetched directly, skipping any in between; if it expires
//! under the reader (a newer one superseded it), the reader moves on to the newer one once.

use std::time::{Duration, Instant};

use super::assemble::{Assembler, WeightSet};
use super::store::{transfer_allowance, BATCH_BYTES};
use super::WeightStore;
use crate::error::{ProtocolError, Result};
use crate::metrics::{WEIGHTS_CORRUPT, WEIGHTS_FETCHED, WEIGHTS_VERSION};
use crate::wire::{PolicyVersion, WeightManifest};

impl WeightStore {
    /// Fetches and verifies `version`. Errors: [`ProtocolError::WeightsGone`] if it is not
    /// stored (never published, or expired), [`ProtocolError::CorruptWeights`] naming the chunk
    /// if a chunk is missing or fails its checksum.
    pub async fn fetch(&self, version: PolicyVersion) -> Result<WeightSet> {
        let result = self.fetch_once(version).await;
        meter(result)
    }

    /// Fetches and verifies the newest version; [`ProtocolError::NoWeights`] before the first
    /// publish.
    pub async fn fetch_latest(&self) -> Result<WeightSet> {
        let latest = self.latest_version().await?.ok_or_else(|| ProtocolError::NoWeights(self.run.to_string()))?;
        let result = self.fetch_from(latest).await;
        meter(result)
    }

    /// Fetches the newest version if it is newer than `current` (any version is newer than
    /// `None`), skipping the versions in between; `None` when there is nothing newer.
    pub async fn fetch_newer_than(&self, current: Option<PolicyVersion>) -> Result<Option<WeightSet>> {
        match self.latest_version().await? {
            Some(latest) if Some(latest) > current => {
                let result = self.fetch_from(latest).await;
                meter(result).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Fetches `latest`; if it vanished or broke while a newer version superseded it, fetches
    /// that one instead (once).
    async fn fetch_from(&self, latest: PolicyVersion) -> Result<WeightSet> {
        let error = match self.fetch_once(latest).await {
            Ok(set) => return Ok(set),
            Err(e @ (ProtocolError::WeightsGone { .. } | ProtocolError::CorruptWeights { .. })) => e,
            Err(e) => return Err(e),
        };
        match self.latest_version().await? {
            Some(newer) if newer > latest => {
                tracing::info!(version = %latest, %newer, error = %error, "weights superseded while fetching; fetching the newer version");
                self.fetch_once(newer).await
            }
            _ => Err(error),
        }
    }

    async fn fetch_once(&self, version: PolicyVersion) -> Result<WeightSet> {
        let started = Instant::now();
        let bytes = self.read_manifest(version).await?.ok_or(ProtocolError::WeightsGone { version })?;
        let manifest: WeightManifest = self
            .codec
            .decode_valid(&bytes)
            .map_err(|e| ProtocolError::CorruptWeights { version, detail: format!("manifest: {e}") })?;
        let batch = (BATCH_BYTES / manifest.chunk_bytes.max(1)).max(1) as usize;
        let lens: Vec<u64> = manifest.chunks.iter().map(|c| c.len).collect();
        let mut assembler = Assembler::new(manifest, version)?;
        loop {
            let pending = assembler.remaining();
            if pending.is_empty() {
                break;
            }
            let range = pending.start..pending.end.min(pending.start + batch);
            let bytes: u64 = lens[range.clone()].iter().sum();
            let keys: Vec<String> = range.clone().map(|i| self.keys.weights_chunk(version, i)).collect();
            let chunks: Vec<Option<Vec<u8>>> = self
                .link
                .call("mget weights chunks", transfer_allowance(bytes), |mut c| {
                    let keys = &keys;
                    async move { redis::cmd("MGET").arg(keys).query_async(&mut c).await }
                })
                .await?;
            if chunks.len() != keys.len() {
                return Err(ProtocolError::UnexpectedReply {
                    op: "mget weights chunks",
                    detail: format!("{} values for {} keys", chunks.len(), keys.len()),
                });
            }
            for chunk in chunks {
                assembler.push(chunk)?;
            }
        }
        let set = assembler.finish()?;
        tracing::debug!(
            version = %set.version(),
            bytes = set.blob().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "fetched weights"
        );
        Ok(set)
    }

    /// The encoded manifest of `version`, if stored.
    pub(super) async fn read_manifest(&self, version: PolicyVersion) -> Result<Option<Vec<u8>>> {
        let key = self.keys.weights_manifest(version);
        self.link
            .call("get weights manifest", Duration::ZERO, |mut c| {
                let key = &key;
                async move { redis::cmd("GET").arg(key).query_async(&mut c).await }
            })
            .await
    }
}

/// Counts a finished fetch: verified, or corrupt.
fn meter(result: Result<WeightSet>) -> Result<WeightSet> {
    match &result {
        Ok(set) => {
            WEIGHTS_FETCHED.inc();
            WEIGHTS_VERSION.set(set.version().0 as i64);
        }
        Err(ProtocolError::CorruptWeights { version, detail }) => {
            WEIGHTS_CORRUPT.inc();
            tracing::warn!(%version, %detail, "fetched weights failed verification");
        }
        Err(_) => {}
    }
    result
}
