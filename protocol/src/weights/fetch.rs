//! Fetching a version: its manifest (its chunk list checked against the root), then its chunks
//! over `fetch_connections` connections at once, each unit's chunks verified by the reader that
//! got them. The newest version is fetched directly, skipping any in between; if it expires
//! under the reader (a newer one superseded it), the reader moves on to the newer one once.
//!
//! ```text
//!  reader k (one per fetch link, own connection)         the fetching task
//!    loop: a permit of the window (2 units a reader)        place each verified chunk in its slot;
//!          unit u = next.fetch_add(1)                 ──►   (the set keeps them as they came);
//!          MGET its chunk keys (deadline: op + size)        a unit wholly in the blob returns its
//!          hash each chunk against the manifest             permit; first error: stop, readers
//!                                                           aborted
//! ```
//!
//! The window bounds how far readers run ahead of the first chunk not yet in: units are taken
//! in order, so the unit that is waited for is always being read, and at most the window's
//! units are read past it.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::assemble::{verify, Assembler, WeightSet};
use super::route::ReadLinks;
use super::store::{joined, transfer_allowance, units};
use super::WeightStore;
use crate::error::{ProtocolError, Result};
use crate::keys::Keys;
use crate::link::RedisLink;
use crate::metrics::{WEIGHTS_CORRUPT, WEIGHTS_FETCHED, WEIGHTS_VERSION};
use crate::wire::{ChunkSpec, PolicyVersion};

/// Units a reader may have read before the chunks in front of them came.
const WINDOW_PER_READER: usize = 2;

/// Verified chunks of one unit, with their indices, and the unit's room in the window.
struct Verified {
    chunks: Vec<(usize, Vec<u8>)>,
    /// One past the unit's last chunk.
    end: usize,
    permit: OwnedSemaphorePermit,
}

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

    /// Fetches `version` from the read route (the replica, falling back to the primary).
    async fn fetch_once(&self, version: PolicyVersion) -> Result<WeightSet> {
        self.read(|links| self.fetch_via(version, links)).await
    }

    async fn fetch_via(&self, version: PolicyVersion, links: Arc<ReadLinks>) -> Result<WeightSet> {
        let started = Instant::now();
        let bytes = self.read_manifest(&links.link, version).await?.ok_or(ProtocolError::WeightsGone { version })?;
        let manifest = super::manifest::decode(&self.codec, version, &bytes)?;
        let unit_list: Arc<[Range<usize>]> = units(manifest.chunks.len(), manifest.chunk_bytes).collect();
        let mut assembler = Assembler::new(manifest, version)?;
        let job = Arc::new(Job {
            version,
            keys: self.keys.clone(),
            specs: assembler.chunks().into(),
            units: unit_list.clone(),
            next: AtomicUsize::new(0),
            window: Arc::new(Semaphore::new(links.fetch_links.len() * WINDOW_PER_READER)),
        });
        let readers = links.fetch_links.len().min(unit_list.len());
        let (tx, mut rx) = mpsc::channel::<Result<Verified>>(readers.max(1));
        let mut tasks = JoinSet::new();
        for link in links.fetch_links.iter().take(readers) {
            let (job, link, tx) = (job.clone(), link.clone(), tx.clone());
            tasks.spawn(async move {
                read_units(job, link, tx).await;
                Ok(())
            });
        }
        drop(tx);
        // Returning early drops `tasks`, which aborts the readers still running.
        let mut held: Vec<(usize, OwnedSemaphorePermit)> = Vec::new();
        while let Some(unit) = rx.recv().await {
            let unit = unit?;
            for (i, chunk) in unit.chunks {
                assembler.place(i, chunk)?;
            }
            held.push((unit.end, unit.permit));
            // Units with every chunk before them in give their room back (dropping their permits).
            let placed = assembler.placed();
            held.retain(|(end, _)| *end > placed);
        }
        while let Some(done) = tasks.join_next().await {
            joined(done)?;
        }
        let set = assembler.finish()?;
        tracing::debug!(
            version = %set.version(),
            bytes = set.len(),
            readers,
            from = %links.link.endpoint(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "fetched weights"
        );
        Ok(set)
    }

    /// The encoded manifest of `version` on `link`'s server, if stored.
    pub(super) async fn read_manifest(&self, link: &RedisLink, version: PolicyVersion) -> Result<Option<Vec<u8>>> {
        let key = self.keys.weights_manifest(version);
        link.call("get weights manifest", Duration::ZERO, |mut c| {
            let key = &key;
            async move { redis::cmd("GET").arg(key).query_async(&mut c).await }
        })
        .await
    }
}

/// What the readers of one fetch share: which chunks, and which unit is next.
struct Job {
    version: PolicyVersion,
    keys: Keys,
    specs: Arc<[ChunkSpec]>,
    units: Arc<[Range<usize>]>,
    next: AtomicUsize,
    window: Arc<Semaphore>,
}

/// One reader: takes the next unit until none is left, reads it with MGET over its own link and
/// sends its verified chunks on; the first error is sent on and ends it.
async fn read_units(job: Arc<Job>, link: RedisLink, tx: mpsc::Sender<Result<Verified>>) {
    loop {
        // The permit first: units are then taken in order by readers that hold one.
        let Ok(permit) = job.window.clone().acquire_owned().await else { return };
        let Some(range) = job.units.get(job.next.fetch_add(1, Ordering::Relaxed)).cloned() else { return };
        let end = range.end;
        let result = read_unit(&job, &link, range).await.map(|chunks| Verified { chunks, end, permit });
        let failed = result.is_err();
        if tx.send(result).await.is_err() || failed {
            return;
        }
    }
}

async fn read_unit(job: &Job, link: &RedisLink, range: Range<usize>) -> Result<Vec<(usize, Vec<u8>)>> {
    let bytes: u64 = job.specs[range.clone()].iter().map(|c| c.len).sum();
    let keys: Vec<String> = range.clone().map(|i| job.keys.weights_chunk(job.version, i)).collect();
    let chunks: Vec<Option<Vec<u8>>> = link
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
    range.zip(chunks).map(|(i, chunk)| Ok((i, verify(job.version, i, &job.specs[i], chunk)?))).collect()
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
