//! Reassembling a fetched version: the manifest's chunk list is checked against its root, every
//! chunk against its length and hash as it arrives (in any order), and only a set whose every
//! chunk was verified becomes a [`WeightSet`].
//!
//! The chunks are kept as they arrived, one buffer each, not copied into one blob: a tensor
//! that lies across a chunk boundary is handed out in pieces ([`WeightSet::pieces`]), which the
//! policy's import copies into their places in the variable. Copying 100 MB into a fresh blob
//! cost a follower ≈ 35 ms here, most of it faulting the new pages in.
//!
//! ```text
//!  chunks   [ 0      ][ 1      ][ 2      ][ 3  ]
//!  tensors  [ a ........ ][ b .... ][ c ....... ]
//!  pieces   a: 0[..], 1[..k]   b: 1[k..m]   c: 1[m..], 2[..], 3[..]
//! ```

use std::borrow::Cow;
use std::collections::HashMap;

use super::layout::{chunk_count, chunk_hash, chunk_range, Layout};
use super::manifest::chunk_root;
use super::NamedTensor;
use crate::error::{ProtocolError, Result};
use crate::wire::{ChunkSpec, PolicyVersion, TensorSpec, WeightManifest};

/// One verified weight version: its manifest and its chunks, with tensors by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightSet {
    manifest: WeightManifest,
    /// Every chunk, in order, each of the length its spec gives.
    chunks: Vec<Vec<u8>>,
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

    /// Total bytes of all tensors.
    pub fn len(&self) -> u64 {
        self.manifest.total_len()
    }

    /// Whether it holds no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A tensor's spec, by its state-dict name.
    pub fn spec(&self, name: &str) -> Option<&TensorSpec> {
        self.by_name.get(name).map(|&i| &self.manifest.tensors[i])
    }

    /// A tensor's spec and bytes, by its state-dict name: borrowed when it lies in one chunk,
    /// copied together when it lies across chunks (use [`WeightSet::pieces`] to avoid that).
    pub fn tensor(&self, name: &str) -> Option<(&TensorSpec, Cow<'_, [u8]>)> {
        self.by_name.get(name).map(|&i| self.entry(i))
    }

    /// Every tensor's spec and bytes, in blob order (see [`WeightSet::tensor`]).
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = (&TensorSpec, Cow<'_, [u8]>)> + '_ {
        (0..self.manifest.tensors.len()).map(|i| self.entry(i))
    }

    /// Every tensor's spec, in blob order.
    pub fn specs(&self) -> &[TensorSpec] {
        &self.manifest.tensors
    }

    /// The bytes of `spec` (one of [`WeightSet::specs`]) as the chunks hold them: consecutive
    /// pieces, one per chunk it touches, that end to end are its bytes. None are copied.
    pub fn pieces<'a>(&'a self, spec: &TensorSpec) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (start, end) = (spec.offset, spec.offset + spec.len);
        let step = self.manifest.chunk_bytes.max(1);
        let first = (start / step) as usize;
        self.chunks[first.min(self.chunks.len())..]
            .iter()
            .enumerate()
            .map(move |(k, chunk)| ((first + k) as u64 * step, chunk))
            .take_while(move |(at, _)| *at < end)
            .map(move |(at, chunk)| {
                let from = start.saturating_sub(at) as usize;
                let to = (end - at).min(chunk.len() as u64) as usize;
                &chunk[from..to]
            })
    }

    /// The set a fetch of `tensors` published as `version` in chunks of `chunk_bytes` gives,
    /// built in memory without a store (for tests and tools); errors as
    /// [`WeightStore::publish`](super::WeightStore::publish) refuses bad tensors.
    pub fn build(version: PolicyVersion, tensors: &[NamedTensor<'_>], chunk_bytes: u64) -> Result<Self> {
        let layout = Layout::new(tensors, chunk_bytes).map_err(crate::error::CodecError::from)?;
        let mut chunks = Vec::with_capacity(layout.chunk_count());
        let mut specs = Vec::with_capacity(layout.chunk_count());
        for i in 0..layout.chunk_count() {
            let mut chunk = Vec::with_capacity(layout.chunk_len(i));
            specs.push(layout.write_chunk(i, |piece| chunk.extend_from_slice(piece)));
            chunks.push(chunk);
        }
        let mut assembler = Assembler::new(layout.manifest(version, specs, 0), version)?;
        for (i, chunk) in chunks.into_iter().enumerate() {
            assembler.place(i, chunk)?;
        }
        assembler.finish()
    }

    /// All tensors' bytes end to end, copied into one buffer (for tools and tests; the import
    /// reads [`WeightSet::pieces`]).
    pub fn to_blob(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    fn entry(&self, i: usize) -> (&TensorSpec, Cow<'_, [u8]>) {
        let spec = &self.manifest.tensors[i];
        let mut pieces = self.pieces(spec);
        let bytes = match (pieces.next(), pieces.next()) {
            (None, _) => Cow::Borrowed(&[][..]),
            (Some(one), None) => Cow::Borrowed(one),
            (Some(a), Some(b)) => {
                let mut all = Vec::with_capacity(spec.len as usize);
                all.extend_from_slice(a);
                all.extend_from_slice(b);
                pieces.for_each(|p| all.extend_from_slice(p));
                Cow::Owned(all)
            }
        };
        (spec, bytes)
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

/// Collects a version's verified chunks, in any order.
pub(crate) struct Assembler {
    manifest: WeightManifest,
    /// Each chunk's buffer once it came.
    slots: Vec<Option<Vec<u8>>>,
    /// How many chunks from the first have come, with no gap.
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
        usize::try_from(total).map_err(|_| corrupt(version, format!("{total} bytes do not fit in memory")))?;
        let slots = vec![None; manifest.chunks.len()];
        Ok(Self { manifest, slots, next: 0 })
    }

    /// The manifest's chunk specs.
    pub(crate) fn chunks(&self) -> &[ChunkSpec] {
        &self.manifest.chunks
    }

    /// How many chunks from the first have come, with no gap.
    pub(crate) fn placed(&self) -> usize {
        self.next
    }

    /// Adds chunk `index`, already [`verify`]-ed.
    pub(crate) fn place(&mut self, index: usize, bytes: Vec<u8>) -> Result<()> {
        let version = self.manifest.version;
        match self.slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(bytes),
            _ => return Err(corrupt(version, format!("chunk {index} came twice or was not asked for"))),
        }
        while self.slots.get(self.next).is_some_and(Option::is_some) {
            self.next += 1;
        }
        Ok(())
    }

    /// Checks that every chunk came, and hands out the set.
    pub(crate) fn finish(self) -> Result<WeightSet> {
        let version = self.manifest.version;
        let total = self.slots.len();
        let chunks: Option<Vec<Vec<u8>>> = self.slots.into_iter().collect();
        let Some(chunks) = chunks else {
            return Err(corrupt(version, format!("only {} of {total} chunks were read", self.next)));
        };
        let by_name = self.manifest.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Ok(WeightSet { manifest: self.manifest, chunks, by_name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(set.to_blob(), data);
        let (spec, bytes) = set.tensor("a").unwrap();
        assert_eq!((spec.shape.as_slice(), &bytes[..]), (&[50i64][..], &data[..]));
        assert!(set.tensor("nope").is_none());
        assert_eq!(set.tensors().len(), 1);
        let shuffled: Vec<usize> = (0..n).rev().collect();
        let set = assemble(&m, chunks.into_iter().map(Some).collect(), &shuffled).unwrap();
        assert_eq!(set.to_blob(), data, "chunks placed last to first");
    }

    #[test]
    fn tensors_across_chunk_boundaries_come_in_pieces_that_join_to_their_bytes() {
        // F16 tensors a: 0..8, b: 8..12, empty: 12..12, c: 12..24, in chunks of 8, so c lies
        // across chunks 1 and 2 and b and c share chunk 1.
        let blob: Vec<u8> = (0..24).collect();
        let cuts = [("a", 0..8), ("b", 8..12), ("empty", 12..12), ("c", 12..24)];
        let shapes: Vec<[i64; 1]> = cuts.iter().map(|(_, r)| [r.len() as i64 / 2]).collect();
        let tensors: Vec<NamedTensor<'_>> = cuts
            .iter()
            .zip(&shapes)
            .map(|((name, r), shape)| NamedTensor { name, shape, dtype: DType::F16, data: &blob[r.clone()] })
            .collect();
        let layout = Layout::new(&tensors, 8).unwrap();
        let chunks: Vec<Option<Vec<u8>>> = (0..layout.chunk_count())
            .map(|i| {
                let mut b = Vec::new();
                layout.chunk(i, &mut b);
                Some(b)
            })
            .collect();
        let m = layout.manifest(PolicyVersion(4), layout.chunk_specs(), 0);
        let set = assemble(&m, chunks, &[2, 0, 1]).unwrap();
        let pieces = |name: &str| -> Vec<Vec<u8>> { set.pieces(set.spec(name).unwrap()).map(<[u8]>::to_vec).collect() };
        assert_eq!(pieces("a"), [(0..8).collect::<Vec<u8>>()]);
        assert_eq!(pieces("b"), [(8..12).collect::<Vec<u8>>()]);
        assert_eq!(pieces("c"), [(12..16).collect::<Vec<u8>>(), (16..24).collect()], "one piece per chunk");
        assert!(pieces("empty").concat().is_empty());
        for (name, r) in &cuts {
            let (spec, bytes) = set.tensor(name).unwrap();
            assert_eq!((spec.offset, &bytes[..]), (r.start as u64, &blob[r.clone()]), "{name}");
            assert_eq!(matches!(bytes, Cow::Borrowed(_)), *name != "c", "{name}: borrowed unless it spans chunks");
        }
        assert_eq!((set.len(), set.to_blob()), (24, blob.clone()));
        assert_eq!(set.tensors().map(|(s, _)| s.name.as_str()).collect::<Vec<_>>(), ["a", "b", "empty", "c"]);
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
