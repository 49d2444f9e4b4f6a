//! How tensors become one blob and the blob becomes chunks: offsets, chunk ranges, and each
//! chunk handed out straight from the borrowed tensors and hashed in the same pass (the whole
//! model is never copied, and no byte is read twice).
//!
//! ```text
//!  tensors  [ a ........ ][ b .... ][][ c ............. ]      (end to end, no padding)
//!  chunks   [ 0      ][ 1      ][ 2      ][ 3      ][4 ]      (chunk_bytes each, last shorter)
//! ```

use std::collections::HashSet;
use std::ops::Range;

use super::NamedTensor;
use crate::error::InvalidValue;
use crate::wire::{ChunkSpec, PolicyVersion, TensorSpec, WeightManifest};

/// How many chunks a blob of `total` bytes is split into (0 for an empty blob).
pub fn chunk_count(total: u64, chunk_bytes: u64) -> u64 {
    total.div_ceil(chunk_bytes.max(1))
}

/// The byte range of chunk `index` in a blob of `total` bytes (empty past the end).
pub fn chunk_range(total: u64, chunk_bytes: u64, index: u64) -> Range<u64> {
    let chunk_bytes = chunk_bytes.max(1);
    let start = index.saturating_mul(chunk_bytes).min(total);
    start..start.saturating_add(chunk_bytes).min(total)
}

/// Bytes hashed and then handed out at a time, so a piece is still in cache when it is copied.
const HASH_BLOCK: usize = 64 << 10;

/// A chunk's hash: BLAKE3 of `bytes` as a plain array. BLAKE3 rather than sha256 because every
/// follower hashes every byte of every version: here it runs at ≈ 10 GB/s on one core (its SIMD
/// kernels) against sha256's ≈ 2.1 GB/s with the SHA extensions, and it is as collision
/// resistant for this purpose.
pub(crate) fn chunk_hash(bytes: &[u8]) -> [u8; 32] {
    blake3::hash(bytes).into()
}

/// Tensors laid end to end, ready to be cut into chunks.
pub(crate) struct Layout<'a> {
    tensors: &'a [NamedTensor<'a>],
    specs: Vec<TensorSpec>,
    total: u64,
    chunk_bytes: u64,
}

impl<'a> Layout<'a> {
    /// Lays out `tensors`; each one's bytes must match its shape and dtype, and names must be
    /// unique.
    pub(crate) fn new(tensors: &'a [NamedTensor<'a>], chunk_bytes: u64) -> Result<Self, InvalidValue> {
        let mut specs = Vec::with_capacity(tensors.len());
        let mut names = HashSet::with_capacity(tensors.len());
        let mut offset = 0u64;
        for t in tensors {
            if !names.insert(t.name) {
                return Err(InvalidValue::new("tensors", "unique names", format!("{:?} twice", t.name)));
            }
            let len = t.data.len() as u64;
            let spec = TensorSpec { name: t.name.to_string(), shape: t.shape.to_vec(), dtype: t.dtype, offset, len };
            if spec.expected_len() != Some(len) {
                return Err(InvalidValue::new(
                    format!("tensors[{}].data", t.name),
                    format!("{:?} bytes for shape {:?} of {:?}", spec.expected_len(), t.shape, t.dtype),
                    format!("{len} bytes"),
                ));
            }
            offset += len;
            specs.push(spec);
        }
        Ok(Self { tensors, specs, total: offset, chunk_bytes: chunk_bytes.max(1) })
    }

    /// Blob length.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Number of chunks.
    pub(crate) fn chunk_count(&self) -> usize {
        chunk_count(self.total, self.chunk_bytes) as usize
    }

    /// Bytes in chunk `index`.
    pub(crate) fn chunk_len(&self, index: usize) -> usize {
        let range = chunk_range(self.total, self.chunk_bytes, index as u64);
        (range.end - range.start) as usize
    }

    /// Copies chunk `index` into `out` (replacing its contents) and returns its spec.
    #[cfg(test)]
    pub(crate) fn chunk(&self, index: usize, out: &mut Vec<u8>) -> ChunkSpec {
        out.clear();
        self.write_chunk(index, |piece| out.extend_from_slice(piece))
    }

    /// Hands chunk `index` to `write` piece by piece, straight from the tensors (the one copy is
    /// `write`'s).
    pub(crate) fn pieces(&self, index: usize, mut write: impl FnMut(&[u8])) {
        let range = chunk_range(self.total, self.chunk_bytes, index as u64);
        // The first tensor that ends after the chunk starts.
        let first = self.specs.partition_point(|s| s.offset + s.len <= range.start);
        for (spec, tensor) in self.specs[first..].iter().zip(&self.tensors[first..]) {
            if spec.offset >= range.end {
                break;
            }
            let from = range.start.max(spec.offset) - spec.offset;
            let to = range.end.min(spec.offset + spec.len) - spec.offset;
            for piece in tensor.data[from as usize..to as usize].chunks(HASH_BLOCK) {
                write(piece);
            }
        }
    }

    /// [`Layout::pieces`], hashing each piece as it goes while it is in cache; returns the
    /// chunk's spec.
    pub(crate) fn write_chunk(&self, index: usize, mut write: impl FnMut(&[u8])) -> ChunkSpec {
        let mut hash = blake3::Hasher::new();
        self.pieces(index, |piece| {
            hash.update(piece);
            write(piece);
        });
        ChunkSpec { len: self.chunk_len(index) as u64, hash: hash.finalize().into() }
    }

    /// Every chunk's spec, hashing without copying (to compare with a stored version).
    pub(crate) fn chunk_specs(&self) -> Vec<ChunkSpec> {
        (0..self.chunk_count()).map(|i| self.write_chunk(i, |_| {})).collect()
    }

    /// The manifest of this layout as `version` over its chunks' specs.
    pub(crate) fn manifest(
        &self,
        version: PolicyVersion,
        chunks: Vec<ChunkSpec>,
        published_at_ms: u64,
    ) -> WeightManifest {
        super::manifest::build(version, self.specs.clone(), self.chunk_bytes, chunks, published_at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{DType, Validate};

    fn t<'a>(name: &'a str, shape: &'a [i64], data: &'a [u8]) -> NamedTensor<'a> {
        NamedTensor { name, shape, dtype: DType::F32, data }
    }

    fn hex(bytes: [u8; 32]) -> String {
        hex::encode(bytes)
    }

    #[test]
    fn chunk_math_on_exact_multiples_remainders_and_empty_blobs() {
        assert_eq!(chunk_count(0, 8), 0);
        assert_eq!(chunk_count(24, 8), 3);
        assert_eq!(chunk_count(25, 8), 4);
        assert_eq!(chunk_count(1, 8), 1);
        assert_eq!(chunk_count(5, 1), 5);
        assert_eq!(chunk_count(5, 0), 5, "a zero chunk size is treated as 1");
        assert_eq!(chunk_range(24, 8, 2), 16..24);
        assert_eq!(chunk_range(25, 8, 3), 24..25);
        assert_eq!(chunk_range(25, 8, 4), 25..25);
        assert_eq!(chunk_range(u64::MAX, 8, u64::MAX), u64::MAX..u64::MAX, "no overflow");
    }

    #[test]
    fn an_exact_multiple_gives_full_chunks_that_cut_across_tensors() {
        // 3 tensors of 8, 4, 12 bytes = 24 bytes = 3 chunks of 8; chunk 1 holds b and half of c.
        let (a, b, c): (Vec<u8>, Vec<u8>, Vec<u8>) = ((0..8).collect(), (8..12).collect(), (12..24).collect());
        let tensors = [t("a", &[2], &a), t("b", &[1], &b), t("c", &[3], &c)];
        let layout = Layout::new(&tensors, 8).unwrap();
        let m = layout.manifest(PolicyVersion(7), layout.chunk_specs(), 1);
        m.validate().unwrap();
        assert_eq!(m.chunks.len(), 3);
        let blob: Vec<u8> = (0..24).collect();
        for (i, spec) in m.chunks.iter().enumerate() {
            let expected = &blob[i * 8..i * 8 + 8];
            assert_eq!(spec.len, 8);
            assert_eq!(spec.hash, chunk_hash(expected), "chunk {i}");
        }
        let mut buf = Vec::new();
        assert_eq!(layout.chunk(1, &mut buf), m.chunks[1], "copying gives the hash-only pass's spec");
        assert_eq!(buf, (8..16).collect::<Vec<u8>>());
        assert_eq!(m.root, super::super::manifest::chunk_root(&m.chunks));
        let offsets: Vec<u64> = m.tensors.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, [0, 8, 12]);
    }

    #[test]
    fn an_empty_tensor_list_has_no_chunks_and_the_empty_hash() {
        let layout = Layout::new(&[], 1024).unwrap();
        let m = layout.manifest(PolicyVersion(1), layout.chunk_specs(), 0);
        m.validate().unwrap();
        assert!(m.chunks.is_empty() && m.tensors.is_empty());
        // BLAKE3("") from the BLAKE3 reference test vectors.
        assert_eq!(hex(m.root), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
    }

    #[test]
    fn one_byte_chunks_hash_one_byte_each() {
        let data = b"abc\x00";
        let tensors = [t("x", &[1], data)];
        let layout = Layout::new(&tensors, 1).unwrap();
        let m = layout.manifest(PolicyVersion(1), layout.chunk_specs(), 0);
        assert_eq!(m.chunks.len(), 4);
        // BLAKE3("a"), computed with the Python `blake3` package (the reference Rust
        // implementation's bindings, a separate build from this one's).
        assert_eq!(hex(m.chunks[0].hash), "17762fddd969a453925d65717ac3eea21320b66b54342fde15128d6caf21215f");
        for (spec, byte) in m.chunks.iter().zip(data) {
            assert_eq!(spec.hash, <[u8; 32]>::from(blake3::hash(&[*byte])));
        }
        assert!(m.chunks.iter().all(|c| c.len == 1));
    }

    #[test]
    fn zero_sized_tensors_take_no_bytes_and_a_short_last_chunk_is_kept() {
        let a = [1u8; 4];
        let c = [2u8; 8];
        let tensors = [t("a", &[1], &a), t("empty", &[0, 5], &[]), t("c", &[2], &c)];
        let layout = Layout::new(&tensors, 5).unwrap();
        let m = layout.manifest(PolicyVersion(2), layout.chunk_specs(), 0);
        m.validate().unwrap();
        assert_eq!(m.chunks.iter().map(|c| c.len).collect::<Vec<_>>(), [5, 5, 2]);
        let mut buf = Vec::new();
        layout.chunk(0, &mut buf);
        assert_eq!(buf, [1, 1, 1, 1, 2]);
    }

    #[test]
    fn chunks_longer_than_a_hash_block_hash_as_one() {
        let (a, b): (Vec<u8>, Vec<u8>) = ((0..200_000u32).map(|i| i as u8).collect(), vec![9; 100_000]);
        let tensors = [t("a", &[50_000], &a), t("b", &[25_000], &b)];
        let layout = Layout::new(&tensors, 150_000).unwrap();
        let blob: Vec<u8> = a.iter().chain(&b).copied().collect();
        let mut buf = Vec::new();
        for (i, expected) in blob.chunks(150_000).enumerate() {
            let spec = layout.chunk(i, &mut buf);
            assert_eq!(buf, expected, "chunk {i}");
            assert_eq!(spec, ChunkSpec { len: expected.len() as u64, hash: chunk_hash(expected) }, "chunk {i}");
        }
    }

    #[test]
    fn bad_lengths_and_duplicate_names_are_refused_by_name() {
        let err = Layout::new(&[t("w", &[3], &[0u8; 8])], 4).err().unwrap().to_string();
        assert!(err.contains("tensors[w].data") && err.contains("12"), "{err}");
        let err = Layout::new(&[t("w", &[1], &[0u8; 4]), t("w", &[1], &[0u8; 4])], 4).err().unwrap().to_string();
        assert!(err.contains("unique names"), "{err}");
        assert!(Layout::new(&[t("neg", &[-1], &[])], 4).is_err(), "negative dims are refused");
    }
}
