//! Writing our owned tensors as Hugging Face's safetensors format, through the `safetensors`
//! crate (the version tch already links), with the `{"format": "pt"}` metadata transformers asks
//! for, and the file synced to disk before it counts as written.
//!
//! ```text
//!  OwnedTensor (name, shape, dtype, little-endian bytes) ─► View ─► safetensors::serialize_to_file ─► fsync
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use protocol::wire::DType;
use safetensors::tensor::{serialize_to_file, View};
use safetensors::Dtype;

use crate::error::{PolicyError, Result};
use crate::weights::OwnedTensor;

/// One tensor as the crate sees it.
struct Entry<'a> {
    tensor: &'a OwnedTensor,
    shape: Vec<usize>,
}

impl View for Entry<'_> {
    fn dtype(&self) -> Dtype {
        match self.tensor.dtype {
            DType::F32 => Dtype::F32,
            DType::BF16 => Dtype::BF16,
            DType::F16 => Dtype::F16,
            DType::I64 => Dtype::I64,
        }
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.tensor.data)
    }
    fn data_len(&self) -> usize {
        self.tensor.data.len()
    }
}

/// Writes `tensors` (names unique) to a `.safetensors` file at `path`; an error names the file
/// and, for a tensor whose bytes do not match its shape, the tensor.
pub fn write(path: &Path, tensors: &[&OwnedTensor]) -> Result<()> {
    let mut entries = Vec::with_capacity(tensors.len());
    for &t in tensors {
        let shape: Vec<usize> = t.shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if elements.and_then(|n| n.checked_mul(t.dtype.size())) != Some(t.data.len()) {
            return Err(PolicyError::Weights(format!(
                "{}: tensor {} has {} bytes, not what shape {:?} of {:?} holds",
                path.display(),
                t.name,
                t.data.len(),
                t.shape,
                t.dtype
            )));
        }
        entries.push((t.name.clone(), Entry { tensor: t, shape }));
    }
    let metadata = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    serialize_to_file(entries, &metadata, path)
        .map_err(|e| PolicyError::Weights(format!("writing {}: {e}", path.display())))?;
    std::fs::File::open(path).and_then(|f| f.sync_all()).map_err(|e| PolicyError::io(path, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]
    use super::*;

    fn tensor(name: &str, shape: Vec<i64>, dtype: DType, data: Vec<u8>) -> OwnedTensor {
        OwnedTensor { name: name.into(), shape, dtype, data }
    }

    /// What is written reads back bit for bit through libtorch's own safetensors reader, with the
    /// metadata transformers asks for; bytes that do not fit the shape are refused by name.
    #[test]
    fn tensors_round_trip_through_libtorch_and_a_misshapen_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let w = tensor("w", vec![2, 3], DType::F32, (0..24).collect());
        let b = tensor("b", vec![4], DType::BF16, (100..108).collect());
        write(&path, &[&w, &b]).unwrap();
        let read = tch::Tensor::read_safetensors(&path).unwrap();
        assert_eq!(read.len(), 2);
        for t in [&w, &b] {
            let (_, got) = read.iter().find(|(n, _)| n == &t.name).unwrap();
            assert_eq!(got.size(), t.shape, "{}", t.name);
            let mut bytes = vec![0u8; t.data.len()];
            got.contiguous().view_dtype(tch::Kind::Uint8).reshape([-1]).copy_data_u8(&mut bytes, t.data.len());
            assert_eq!(bytes, t.data, "{}", t.name);
        }
        let file = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&file[8..8 + n]).unwrap();
        assert_eq!(header["__metadata__"]["format"], "pt");
        let bad = tensor("bad", vec![2, 2], DType::F32, vec![0; 12]);
        let err = write(&dir.path().join("bad.safetensors"), &[&bad]).unwrap_err().to_string();
        assert!(err.contains("tensor bad has 12 bytes"), "{err}");
    }
}
