//! Manifests of the current scheme: the root over the chunks' hashes, and decoding a stored
//! manifest, refusing the older schemes by name.
//!
//! ```text
//!  chunk 0 ── BLAKE3 ─┐
//!  chunk 1 ── BLAKE3 ─┼─► root = BLAKE3( len₀ ‖ h₀ ‖ len₁ ‖ h₁ ‖ … )    (one-level Merkle tree)
//!  chunk n ── BLAKE3 ─┘
//! ```
//!
//! A fetch checks the root against the chunk list once (≈ 40 bytes a chunk), then each chunk
//! against its own hash as it arrives; no pass over the whole blob is needed on either side.
//!
//! Old manifests are refused with an error that says which scheme they are rather than read:
//! scheme 1 (a second sha256 over the whole blob) and scheme 2 (this layout with sha256 where
//! BLAKE3 is now). Weights live in Redis for minutes (superseded versions expire), a learner and
//! its actors run the same build, and reading them would keep the slower hash this scheme
//! removes. A mixed deployment is a mistake to surface, not to serve.

use serde::Deserialize;

use crate::codec::Codec;
use crate::error::{ProtocolError, Result};
use crate::wire::{ChunkSpec, PolicyVersion, TensorSpec, WeightManifest, MANIFEST_SCHEME};

/// The root over `chunks`: BLAKE3 of every chunk's length (u64, little-endian) and hash.
pub(crate) fn chunk_root(chunks: &[ChunkSpec]) -> [u8; 32] {
    let mut root = blake3::Hasher::new();
    for c in chunks {
        root.update(&c.len.to_le_bytes());
        root.update(&c.hash);
    }
    root.finalize().into()
}

/// A manifest of the current scheme over `chunks`, its root computed.
pub(crate) fn build(
    version: PolicyVersion,
    tensors: Vec<TensorSpec>,
    chunk_bytes: u64,
    chunks: Vec<ChunkSpec>,
    published_at_ms: u64,
) -> WeightManifest {
    let root = chunk_root(&chunks);
    WeightManifest { version, tensors, chunk_bytes, chunks, root, published_at_ms, scheme: MANIFEST_SCHEME }
}

/// The manifest layout before the root (scheme 1), only to recognise it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[allow(dead_code, reason = "decoded only to tell the old scheme from garbage")]
struct SchemeOne {
    version: PolicyVersion,
    tensors: Vec<TensorSpec>,
    chunk_bytes: u64,
    chunks: Vec<ChunkSpec>,
    sha256: [u8; 32],
    published_at_ms: u64,
}

/// Decodes and validates a stored manifest of `version`. Errors are
/// [`ProtocolError::CorruptWeights`]; one of an older scheme says which.
pub(crate) fn decode(codec: &Codec, version: PolicyVersion, bytes: &[u8]) -> Result<WeightManifest> {
    let corrupt = |detail: String| ProtocolError::CorruptWeights { version, detail };
    let older = |scheme: &str, e: &dyn std::fmt::Display| {
        corrupt(format!(
            "manifest is of the old scheme {scheme}, written by an older learner; this build reads scheme \
             {MANIFEST_SCHEME} only (per-chunk BLAKE3 and a root): run the learner and the actors from the \
             same build ({e})"
        ))
    };
    match codec.decode_valid::<WeightManifest>(bytes) {
        Ok(m) => Ok(m),
        // Scheme 2 has this layout (sha256 in the hash fields): it decodes, and fails validation.
        Err(e) if codec.decode::<WeightManifest>(bytes).is_ok_and(|m| m.scheme == 2) => {
            Err(older("2 (per-chunk sha256)", &e))
        }
        Err(e) if codec.decode::<SchemeOne>(bytes).is_ok() => Err(older("1 (a sha256 of the whole blob)", &e)),
        Err(e) => Err(corrupt(format!("manifest: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DType;

    fn chunks() -> Vec<ChunkSpec> {
        vec![ChunkSpec { len: 4, hash: [1; 32] }, ChunkSpec { len: 2, hash: [2; 32] }]
    }

    fn tensors() -> Vec<TensorSpec> {
        vec![TensorSpec { name: "w".into(), shape: vec![3], dtype: DType::F16, offset: 0, len: 6 }]
    }

    #[test]
    fn the_root_binds_every_length_and_hash_in_order() {
        let root = chunk_root(&chunks());
        // BLAKE3(04 00.. ‖ 01×32 ‖ 02 00.. ‖ 02×32), written out.
        let mut input = Vec::new();
        input.extend_from_slice(&4u64.to_le_bytes());
        input.extend_from_slice(&[1; 32]);
        input.extend_from_slice(&2u64.to_le_bytes());
        input.extend_from_slice(&[2; 32]);
        assert_eq!(root, <[u8; 32]>::from(blake3::hash(&input)));
        let mut swapped = chunks();
        swapped.swap(0, 1);
        assert_ne!(chunk_root(&swapped), root, "order matters");
        let mut longer = chunks();
        longer[1].len = 3;
        assert_ne!(chunk_root(&longer), root, "lengths matter");
        // BLAKE3("") from the BLAKE3 reference test vectors: the root of no chunks.
        assert_eq!(hex::encode(chunk_root(&[])), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
    }

    #[test]
    fn a_built_manifest_decodes_and_an_old_one_is_refused_by_name() {
        let codec = Codec::default();
        let m = build(PolicyVersion(3), tensors(), 4, chunks(), 9);
        assert_eq!(decode(&codec, PolicyVersion(3), &codec.encode(&m).unwrap()).unwrap(), m);
        let old = SchemeOne {
            version: PolicyVersion(3),
            tensors: tensors(),
            chunk_bytes: 4,
            chunks: chunks(),
            sha256: [7; 32],
            published_at_ms: 9,
        };
        let err = decode(&codec, PolicyVersion(3), &codec.encode(&old).unwrap()).unwrap_err().to_string();
        assert!(err.contains("v3") && err.contains("old scheme 1"), "{err}");
        let err = decode(&codec, PolicyVersion(3), b"\x01garbage").unwrap_err().to_string();
        assert!(err.contains("manifest:") && !err.contains("old scheme"), "{err}");
        let mut sha = m.clone();
        sha.scheme = 2;
        let err = decode(&codec, PolicyVersion(3), &codec.encode(&sha).unwrap()).unwrap_err().to_string();
        assert!(err.contains("v3") && err.contains("old scheme 2 (per-chunk sha256)"), "{err}");
        let mut newer = m;
        newer.scheme = 9;
        let err = decode(&codec, PolicyVersion(3), &codec.encode(&newer).unwrap()).unwrap_err().to_string();
        assert!(err.contains("scheme") && !err.contains("old scheme 2"), "{err}");
    }
}
