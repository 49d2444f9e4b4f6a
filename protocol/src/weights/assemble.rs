//! Reassembling a fetched version: every chunk is checked against its length and sha256 as it
//! arrives, then the whole blob against the manifest's sha256. Only a fully verified blob
//! becomes a [`WeightSet`].

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::layout::{chunk_count, chunk_range, sha256};
use crate::error::{ProtocolError, Result};
use crate::wire::{PolicyVersion, TensorSpec, WeightManifest};

/// One verified weight version: its manifest and its blob, with tensors by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightSet {
    manifest: WeightManifest,
    blob: Vec<u8>,
    by_name: HashMap<String, usize>,
}

impl WeightSet {
    /// The policy version.
    pub fn version(&self) -> PolicyVersion {
        self.manifest.version
    }

    /// The manifest it was checked against.
    pub fn manifest(&self) -> &WeightManifest {
        &self.manifest
    }

    /// All tensors' bytes, end to end.
    pub fn blob(&self) -> &[u8] {
        &self.blob
    }

    /// A tensor's spec and bytes, by its state-dict name.
    pub fn tensor(&self, name: &str) -> Option<(&TensorSpec, &[u8])> {
        self.by_name.get(name).map(|&i| self.entry(i))
    }

    /// Every tensor's spec and bytes, in blob order.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = (&TensorSpec, &[u8])> + '_ {
        (0..self.manifest.tensors.len()).map(|i| self.entry(i))
    }

    /// The manifest and the blob, for callers that take ownership of the bytes.
    pub fn into_parts(self) -> (WeightManifest, Vec<u8>) {
        (self.manifest, self.blob)
    }

    fn entry(&self, i: usize) -> (&TensorSpec, &[u8]) {
        let spec = &self.manifest.tensors[i];
        // A validated manifest's tensors lie within the blob, whose length was checked.
        (spec, &self.blob[spec.offset as usize..(spec.offset + spec.len) as usize])
    }
}

fn corrupt(version: PolicyVersion, detail: String) -> ProtocolError {
    ProtocolError::CorruptWeights { version, detail }
}

/// Collects a version's chunks in order, verifying each.
pub(crate) struct Assembler {
    manifest: WeightManifest,
    blob: Vec<u8>,
    hash: Sha256,
    next: usize,
}

impl Assembler {
    /// Starts on a decoded, validated manifest that should be of `version`; checks that its
    /// chunks cut the blob as `chunk_bytes` says.
    pub(crate) fn new(manifest: WeightManifest, version: PolicyVersion) -> Result<Self> {
        if manifest.version != version {
            return Err(corrupt(version, format!("the manifest is of {}", manifest.version)));
        }
        let total = manifest.total_len();
        let expected_chunks = chunk_count(total, manifest.chunk_bytes);
        if manifest.chunk_bytes == 0 || manifest.chunks.len() as u64 != expected_chunks {
            return Err(corrupt(
                version,
                format!(
                    "manifest lists {} chunks for {total} bytes in chunks of {} (expected {expected_chunks})",
                    manifest.chunks.len(),
                    manifest.chunk_bytes
                ),
            ));
        }
        for (i, c) in manifest.chunks.iter().enumerate() {
            let range = chunk_range(total, manifest.chunk_bytes, i as u64);
            if c.len != range.end - range.start {
                return Err(corrupt(
                    version,
                    format!("manifest gives chunk {i} {} bytes, not {}", c.len, range.end - range.start),
                ));
            }
        }
        let mut blob = Vec::new();
        let capacity =
            usize::try_from(total).map_err(|_| corrupt(version, format!("{total} bytes do not fit in memory")))?;
        blob.try_reserve_exact(capacity).map_err(|e| corrupt(version, format!("cannot hold {total} bytes: {e}")))?;
        Ok(Self { manifest, blob, hash: Sha256::new(), next: 0 })
    }

    /// The chunks still to be read, as indices.
    pub(crate) fn remaining(&self) -> std::ops::Range<usize> {
        self.next..self.manifest.chunks.len()
    }

    /// Adds the next chunk (`None`: its key was missing).
    pub(crate) fn push(&mut self, chunk: Option<Vec<u8>>) -> Result<()> {
        let (i, version) = (self.next, self.manifest.version);
        let spec = self.manifest.chunks.get(i).ok_or_else(|| corrupt(version, format!("unexpected chunk {i}")))?;
        let bytes = chunk.ok_or_else(|| corrupt(version, format!("chunk {i} is missing")))?;
        if bytes.len() as u64 != spec.len {
            return Err(corrupt(
                version,
                format!("chunk {i} has {} bytes, the manifest says {}", bytes.len(), spec.len),
            ));
        }
        let found = sha256(&bytes);
        if found != spec.sha256 {
            return Err(corrupt(
                version,
                format!(
                    "chunk {i} fails its sha256 (expected {}, found {})",
                    hex::encode(spec.sha256),
                    hex::encode(found)
                ),
            ));
        }
        self.hash.update(&bytes);
        self.blob.extend_from_slice(&bytes);
        self.next += 1;
        Ok(())
    }

    /// Checks that every chunk came and the blob's sha256, and hands out the set.
    pub(crate) fn finish(self) -> Result<WeightSet> {
        let version = self.manifest.version;
        if self.next != self.manifest.chunks.len() {
            return Err(corrupt(
                version,
                format!("only {} of {} chunks were read", self.next, self.manifest.chunks.len()),
            ));
        }
        let found: [u8; 32] = self.hash.finalize().into();
        if found != self.manifest.sha256 {
            return Err(corrupt(
                version,
                format!(
                    "blob fails its sha256 (expected {}, found {})",
                    hex::encode(self.manifest.sha256),
                    hex::encode(found)
                ),
            ));
        }
        let by_name = self.manifest.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Ok(WeightSet { manifest: self.manifest, blob: self.blob, by_name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::layout::Layout;
    use crate::weights::NamedTensor;
    use crate::wire::DType;

    /// One F16 tensor `a` holding `data` (even length), cut into chunks.
    fn manifest_and_chunks(data: &[u8], chunk_bytes: u64) -> (WeightManifest, Vec<Vec<u8>>) {
        let shape = [data.len() as i64 / 2];
        let tensors = [NamedTensor { name: "a", shape: &shape, dtype: DType::F16, data }];
        let layout = Layout::new(&tensors, chunk_bytes).unwrap();
        let chunks = (0..layout.chunk_count())
            .map(|i| {
                let mut b = Vec::new();
                layout.chunk(i, &mut b);
                b
            })
            .collect();
        (layout.manifest(PolicyVersion(4), 0), chunks)
    }

    fn assemble(m: &WeightManifest, chunks: Vec<Option<Vec<u8>>>) -> Result<WeightSet> {
        let mut a = Assembler::new(m.clone(), m.version)?;
        for c in chunks {
            a.push(c)?;
        }
        a.finish()
    }

    #[test]
    fn intact_chunks_give_the_tensors_back() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 7);
        let set = assemble(&m, chunks.into_iter().map(Some).collect()).unwrap();
        assert_eq!(set.blob(), &data[..]);
        let (spec, bytes) = set.tensor("a").unwrap();
        assert_eq!((spec.shape.as_slice(), bytes), (&[50i64][..], &data[..]));
        assert!(set.tensor("nope").is_none());
        assert_eq!(set.tensors().len(), 1);
    }

    #[test]
    fn a_flipped_byte_or_a_missing_chunk_names_the_chunk() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 10);
        let mut bad: Vec<Option<Vec<u8>>> = chunks.iter().cloned().map(Some).collect();
        bad[3].as_mut().unwrap()[0] ^= 1;
        let err = assemble(&m, bad).unwrap_err().to_string();
        assert!(err.contains("v4") && err.contains("chunk 3 fails its sha256"), "{err}");
        let mut gone: Vec<Option<Vec<u8>>> = chunks.iter().cloned().map(Some).collect();
        gone[9] = None;
        let err = assemble(&m, gone).unwrap_err().to_string();
        assert!(err.contains("chunk 9 is missing"), "{err}");
        let short: Vec<Option<Vec<u8>>> = chunks.iter().take(9).cloned().map(Some).collect();
        assert!(assemble(&m, short).unwrap_err().to_string().contains("only 9 of 10"));
    }

    #[test]
    fn a_manifest_of_another_version_or_with_bad_chunk_cuts_is_refused() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, _) = manifest_and_chunks(&data, 10);
        assert!(Assembler::new(m.clone(), PolicyVersion(5)).is_err());
        let mut cut = m.clone();
        cut.chunks[0].len = 9;
        cut.chunks[1].len = 11;
        assert!(Assembler::new(cut, m.version).err().unwrap().to_string().contains("chunk 0"));
        let mut zero = m;
        zero.chunk_bytes = 0;
        assert!(Assembler::new(zero.clone(), zero.version).is_err());
    }

    #[test]
    fn a_blob_hash_mismatch_is_caught_even_when_chunks_agree() {
        let data: Vec<u8> = (0..100u8).collect();
        let (mut m, chunks) = manifest_and_chunks(&data, 10);
        m.sha256[0] ^= 1;
        let err = assemble(&m, chunks.into_iter().map(Some).collect()).unwrap_err().to_string();
        assert!(err.contains("blob fails its sha256"), "{err}");
    }
}
