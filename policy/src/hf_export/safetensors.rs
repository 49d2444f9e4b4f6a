//! A writer of the safetensors format (Hugging Face's), from our owned tensors, with the
//! `{"format": "pt"}` metadata transformers asks for. Written here rather than through tch so
//! that the header is exactly what the format specifies and checked by our own reader in tests.
//!
//! ```text
//!  u64 LE  n                       length of the header
//!  n bytes JSON header             {"__metadata__": {"format": "pt"},
//!                                   "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [a, b]}, ...}
//!                                  padded with spaces to a multiple of 8
//!  data                            each tensor's little-endian bytes, in header order, back to back
//! ```

use std::io::Write;
use std::path::Path;

use protocol::wire::DType;
use serde_json::{json, Map, Value};

use crate::error::{PolicyError, Result};
use crate::weights::OwnedTensor;

/// The format's name of an element type.
pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "F32",
        DType::BF16 => "BF16",
        DType::F16 => "F16",
        DType::I64 => "I64",
    }
}

/// The header's JSON bytes, padded to a multiple of 8, for `tensors` in the given order.
fn header(tensors: &[&OwnedTensor]) -> Vec<u8> {
    let mut map = Map::new();
    map.insert("__metadata__".into(), json!({ "format": "pt" }));
    let mut offset = 0usize;
    for t in tensors {
        let end = offset + t.data.len();
        map.insert(
            t.name.clone(),
            json!({ "dtype": dtype_name(t.dtype), "shape": t.shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let mut bytes = serde_json::to_vec(&Value::Object(map)).unwrap_or_default();
    bytes.resize(bytes.len().div_ceil(8) * 8, b' ');
    bytes
}

/// Writes `tensors` (names unique) to a `.safetensors` file at `path`.
pub fn write(path: &Path, tensors: &[&OwnedTensor]) -> Result<()> {
    let io = |e| PolicyError::io(path, e);
    let head = header(tensors);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    out.write_all(&(head.len() as u64).to_le_bytes()).map_err(io)?;
    out.write_all(&head).map_err(io)?;
    for t in tensors {
        out.write_all(&t.data).map_err(io)?;
    }
    out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)
}
