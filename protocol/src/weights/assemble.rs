//! Reassembling a fetched version: the manifest's chunk list is checked against its root, every
//! chunk against its length and hash as it arrives (in any order), and only a blob whose every
//! chunk was verified becomes a [`WeightSet`].

use std::collections::{BTreeMap, HashMap};

use super::layout::{chunk_count, chunk_hash, chunk_range};
use super::manifest::chunk_root;
use crate::error::{ProtocolError, Result};
use crate::wire::{ChunkSpec, PolicyVersion, TensorSpec, WeightManifest};

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

/// Checks chunk `index` of `version` as it arrives (`None`: its key was missing) against its
/// spec: length, then hash. Runs wherever the chunk arrived, so chunks are checked in parallel.
pub(crate) fn verify(
    version: PolicyVersion,
    index: usize,
    spec: &ChunkSpec,
    chunk: Option<Vec<u8>>,
) -> Result<Vec<u8>> {
    let bytes = chunk.ok_or_else(|| corrupt(version, format!("chunk {index} is missing")))?;
    if bytes.len() as u64 != spec.len {
        return Err(corrupt(
            version,
            format!("chunk {index} has {} bytes, the manifest says {}", bytes.len(), spec.len),
        ));
    }
    same_hash(version, || format!("chunk {index} fails its hash"), spec.hash, chunk_hash(&bytes))?;
    Ok(bytes)
}

/// `Ok` if `found` is `expected`; otherwise the error `what()` says, with both hashes.
fn same_hash(version: PolicyVersion, what: impl FnOnce() -> String, expected: [u8; 32], found: [u8; 32]) -> Result<()> {
    if found == expected {
        return Ok(());
    }
    let detail = format!("{} (expected {}, found {})", what(), hex::encode(expected), hex::encode(found));
    Err(corrupt(version, detail))
}

/// Collects a version's verified chunks, in any order, into the blob.
pub(crate) struct Assembler {
    manifest: WeightManifest,
    blob: Vec<u8>,
    /// Chunks that came before the ones in front of them, by index.
    early: BTreeMap<usize, Vec<u8>>,
    next: usize,
}

impl Assembler {
    /// Starts on a decoded, validated manifest that should be of `version`; checks that its
    /// chunks cut the blob as `chunk_bytes` says and that they match the root.
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
        let root = chunk_root(&manifest.chunks);
        same_hash(version, || "manifest's chunk list fails its root".into(), manifest.root, root)?;
        let mut blob = Vec::new();
        let capacity =
            usize::try_from(total).map_err(|_| corrupt(version, format!("{total} bytes do not fit in memory")))?;
        blob.try_reserve_exact(capacity).map_err(|e| corrupt(version, format!("cannot hold {total} bytes: {e}")))?;
        Ok(Self { manifest, blob, early: BTreeMap::new(), next: 0 })
    }

    /// The manifest's chunk specs.
    pub(crate) fn chunks(&self) -> &[ChunkSpec] {
        &self.manifest.chunks
    }

    /// How many chunks lie in the blob, in order (those held early not counted).
    pub(crate) fn placed(&self) -> usize {
        self.next
    }

    /// Adds chunk `index`, already [`verify`]-ed: appended if it is the next one (with any early
    /// ones that follow it), held until then otherwise.
    pub(crate) fn place(&mut self, index: usize, bytes: Vec<u8>) -> Result<()> {
        let version = self.manifest.version;
        if index < self.next || index >= self.manifest.chunks.len() || self.early.contains_key(&index) {
            return Err(corrupt(version, format!("chunk {index} came twice or was not asked for")));
        }
        if index != self.next {
            self.early.insert(index, bytes);
            return Ok(());
        }
        self.blob.extend_from_slice(&bytes);
        self.next += 1;
        while let Some(bytes) = self.early.remove(&self.next) {
            self.blob.extend_from_slice(&bytes);
            self.next += 1;
        }
        Ok(())
    }

    /// Checks that every chunk came, and hands out the set.
    pub(crate) fn finish(self) -> Result<WeightSet> {
        let version = self.manifest.version;
        if self.next != self.manifest.chunks.len() {
            return Err(corrupt(
                version,
                format!("only {} of {} chunks were read", self.next, self.manifest.chunks.len()),
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
        (layout.manifest(PolicyVersion(4), layout.chunk_specs(), 0), chunks)
    }

    /// Verifies and places `chunks` in the order `order` gives.
    fn assemble(m: &WeightManifest, chunks: Vec<Option<Vec<u8>>>, order: &[usize]) -> Result<WeightSet> {
        let mut a = Assembler::new(m.clone(), m.version)?;
        let mut chunks: Vec<Option<Option<Vec<u8>>>> = chunks.into_iter().map(Some).collect();
        for &i in order {
            let bytes = verify(m.version, i, &m.chunks[i], chunks[i].take().unwrap())?;
            a.place(i, bytes)?;
        }
        a.finish()
    }

    fn in_order(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn intact_chunks_in_any_order_give_the_tensors_back() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 7);
        let n = chunks.len();
        let set = assemble(&m, chunks.iter().cloned().map(Some).collect(), &in_order(n)).unwrap();
        assert_eq!(set.blob(), &data[..]);
        let (spec, bytes) = set.tensor("a").unwrap();
        assert_eq!((spec.shape.as_slice(), bytes), (&[50i64][..], &data[..]));
        assert!(set.tensor("nope").is_none());
        assert_eq!(set.tensors().len(), 1);
        let shuffled: Vec<usize> = (0..n).rev().collect();
        let set = assemble(&m, chunks.into_iter().map(Some).collect(), &shuffled).unwrap();
        assert_eq!(set.blob(), &data[..], "chunks placed last to first");
    }

    #[test]
    fn a_flipped_byte_or_a_missing_chunk_names_the_chunk() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 10);
        let mut bad: Vec<Option<Vec<u8>>> = chunks.iter().cloned().map(Some).collect();
        bad[3].as_mut().unwrap()[0] ^= 1;
        let err = assemble(&m, bad, &in_order(10)).unwrap_err().to_string();
        assert!(err.contains("v4") && err.contains("chunk 3 fails its hash"), "{err}");
        let mut gone: Vec<Option<Vec<u8>>> = chunks.iter().cloned().map(Some).collect();
        gone[9] = None;
        let err = assemble(&m, gone, &in_order(10)).unwrap_err().to_string();
        assert!(err.contains("chunk 9 is missing"), "{err}");
        let all: Vec<Option<Vec<u8>>> = chunks.iter().cloned().map(Some).collect();
        let err = assemble(&m, all.clone(), &in_order(9)).unwrap_err().to_string();
        assert!(err.contains("only 9 of 10"), "{err}");
        let err = assemble(&m, all, &[1, 0, 2, 3, 4, 5, 6, 7, 9]).unwrap_err().to_string();
        assert!(err.contains("only 8 of 10"), "a gap stops the count: {err}");
    }

    #[test]
    fn a_chunk_placed_twice_is_refused() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 10);
        let mut a = Assembler::new(m.clone(), m.version).unwrap();
        a.place(2, chunks[2].clone()).unwrap();
        assert!(a.place(2, chunks[2].clone()).is_err(), "an early chunk twice");
        a.place(0, chunks[0].clone()).unwrap();
        assert!(a.place(0, chunks[0].clone()).unwrap_err().to_string().contains("chunk 0 came twice"));
        assert!(a.place(10, Vec::new()).is_err(), "past the end");
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
    fn a_chunk_list_that_fails_its_root_is_refused_before_any_chunk_is_read() {
        let data: Vec<u8> = (0..100u8).collect();
        let (m, chunks) = manifest_and_chunks(&data, 10);
        let mut root = m.clone();
        root.root[0] ^= 1;
        let err = Assembler::new(root, m.version).err().unwrap().to_string();
        assert!(err.contains("fails its root"), "{err}");
        // A chunk list rewritten to match altered bytes fails the root the publisher computed.
        let mut forged = m.clone();
        let mut altered = chunks[5].clone();
        altered[0] ^= 1;
        forged.chunks[5].hash = chunk_hash(&altered);
        assert!(Assembler::new(forged, m.version).err().unwrap().to_string().contains("fails its root"));
    }
}
