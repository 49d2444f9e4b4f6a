//! The manifest of one published version of the policy weights.
//!
//! ```text
//!  tensors (name, shape, dtype) laid end to end ──► one byte blob ──► chunks of chunk_bytes
//!  manifest = version + tensor specs (offset, length) + chunk specs (length, BLAKE3)
//!             + root = BLAKE3 over the chunk specs (a one-level Merkle tree) + scheme 3
//! ```
//!
//! The root stands for the whole blob: a chunk whose bytes match its hash, in a manifest whose
//! chunk list matches the root, is the chunk the publisher hashed, so no second pass over the
//! blob is needed. Manifests of older schemes (1: a sha256 of the whole blob, no `scheme` field;
//! 2: the same root with sha256 in place of BLAKE3) are refused by name (`protocol::weights`).

use serde::{Deserialize, Serialize};

use super::{PolicyVersion, Validate};
use crate::error::InvalidValue;

/// Element type of a tensor, as stored in the blob (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 16-bit bfloat.
    BF16,
    /// 16-bit IEEE float.
    F16,
    /// 64-bit signed integer.
    I64,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::BF16 | Self::F16 => 2,
            Self::I64 => 8,
        }
    }
}

/// Where one tensor lies in the blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// Its name (the safetensors / state-dict name).
    pub name: String,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its element type.
    pub dtype: DType,
    /// Byte offset in the blob.
    pub offset: u64,
    /// Byte length in the blob.
    pub len: u64,
}

impl TensorSpec {
    /// Bytes implied by the shape and dtype.
    pub fn expected_len(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(self.dtype.size() as u64, |acc, d| u64::try_from(*d).ok().and_then(|d| acc.checked_mul(d)))
    }
}

/// One chunk of the blob and its checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSpec {
    /// Its length in bytes.
    pub len: u64,
    /// BLAKE3 of its bytes.
    pub hash: [u8; 32],
}

/// The manifest layout this build writes and reads: per-chunk BLAKE3 plus a root over them.
pub const MANIFEST_SCHEME: u8 = 3;

/// A published weight version: what to fetch and how to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightManifest {
    /// The policy version.
    pub version: PolicyVersion,
    /// The tensors, in blob order.
    pub tensors: Vec<TensorSpec>,
    /// The chunk size used to split the blob (the last chunk may be shorter).
    pub chunk_bytes: u64,
    /// The chunks, in order.
    pub chunks: Vec<ChunkSpec>,
    /// The root over the chunks: BLAKE3 of every chunk's length (u64, little-endian) and
    /// hash, in order (`protocol::weights` computes and checks it). It names the content: two
    /// manifests with the same root list the same chunks.
    pub root: [u8; 32],
    /// When it was published, milliseconds since the Unix epoch.
    pub published_at_ms: u64,
    /// The layout, [`MANIFEST_SCHEME`]; last, so that a manifest of the old layout (which ends
    /// before it) does not decode as this one.
    pub scheme: u8,
}

impl WeightManifest {
    /// Total blob length.
    pub fn total_len(&self) -> u64 {
        self.chunks.iter().map(|c| c.len).sum()
    }
}

impl Validate for WeightManifest {
    fn validate(&self) -> Result<(), InvalidValue> {
        if self.scheme != MANIFEST_SCHEME {
            return Err(InvalidValue::new("scheme", MANIFEST_SCHEME.to_string(), self.scheme.to_string()));
        }
        let total = self.total_len();
        let mut end = 0u64;
        for t in &self.tensors {
            if t.offset != end {
                return Err(InvalidValue::new(
                    format!("tensors[{}].offset", t.name),
                    format!("{end} (tensors lie end to end)"),
                    t.offset.to_string(),
                ));
            }
            if t.expected_len() != Some(t.len) {
                return Err(InvalidValue::new(
                    format!("tensors[{}].len", t.name),
                    format!("{:?} bytes for shape {:?}", t.expected_len(), t.shape),
                    t.len.to_string(),
                ));
            }
            end += t.len;
        }
        if end != total {
            return Err(InvalidValue::new("chunks", format!("{end} bytes in all"), total.to_string()));
        }
        Ok(())
    }
}
