//! Moving a model's weights in and out of a [`VarStore`]: safetensors files (Hugging Face's
//! format, so transformers checkpoints load and ours load in transformers) and the weight
//! store's [`NamedTensor`]s (little-endian bytes), so the learner can publish a version and
//! actors can load it.
//!
//! Loading is strict: every variable must be supplied with its exact shape (values are cast
//! to the variable's kind and device), and a supplied tensor the model has no variable for is
//! an error — except the value head, which may be missing (a language-model checkpoint has
//! none; it keeps its fresh initialisation), rotary `inv_freq` buffers that old checkpoints
//! carry, and `lm_head.weight` when the embeddings are tied.

use std::collections::HashMap;
use std::path::Path;

use protocol::weights::{NamedTensor, WeightSet};
use protocol::wire::{DType, TensorSpec};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::error::{PolicyError, Result};

#[cfg(target_endian = "big")]
compile_error!("weights are exchanged as little-endian bytes; big-endian hosts are not supported");

/// A tensor's bytes, owned: what [`export`] gives and [`OwnedTensor::as_named`] lends to the
/// weight store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedTensor {
    /// The state-dict name.
    pub name: String,
    /// The shape.
    pub shape: Vec<i64>,
    /// The element type.
    pub dtype: DType,
    /// Little-endian, row-major bytes.
    pub data: Vec<u8>,
}

impl OwnedTensor {
    /// A borrowed view for [`protocol::weights`].
    pub fn as_named(&self) -> NamedTensor<'_> {
        NamedTensor { name: &self.name, shape: &self.shape, dtype: self.dtype, data: &self.data }
    }
}

/// The weight-store element type of a tch kind.
pub fn dtype_of(kind: Kind) -> Result<DType> {
    match kind {
        Kind::Float => Ok(DType::F32),
        Kind::BFloat16 => Ok(DType::BF16),
        Kind::Half => Ok(DType::F16),
        Kind::Int64 => Ok(DType::I64),
        other => Err(PolicyError::Weights(format!("no weight-store dtype for {other:?}"))),
    }
}

/// The tch kind of a weight-store element type.
pub fn kind_of(dtype: DType) -> Kind {
    match dtype {
        DType::F32 => Kind::Float,
        DType::BF16 => Kind::BFloat16,
        DType::F16 => Kind::Half,
        DType::I64 => Kind::Int64,
    }
}

/// Every variable's bytes, sorted by name, copied to the host.
pub fn export(vs: &VarStore) -> Result<Vec<OwnedTensor>> {
    export_as(vs, None)
}

/// [`export`], with floating-point variables cast to `kind` when given (the actors' serving
/// kind: bf16 halves the bytes of every published version). Integer variables stay as they are.
pub fn export_as(vs: &VarStore, kind: Option<Kind>) -> Result<Vec<OwnedTensor>> {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars.into_iter()
        .map(|(name, t)| {
            let t = match kind {
                Some(k) if t.is_floating_point() && t.kind() != k => t.detach().to_kind(k),
                _ => t.detach(),
            };
            let t = t.to_device(Device::Cpu).contiguous();
            let dtype = dtype_of(t.kind())?;
            let mut data = vec![0u8; t.numel() * dtype.size()];
            t.f_copy_data_u8(&mut data, t.numel())?;
            Ok(OwnedTensor { name, shape: t.size(), dtype, data })
        })
        .collect()
}

/// A host tensor from a named tensor's bytes (a copy of them), after checking that they fit
/// its shape.
pub fn tensor_of(t: &NamedTensor<'_>) -> Result<Tensor> {
    checked_len(t)?;
    Ok(Tensor::f_from_data_size(t.data, t.shape, kind_of(t.dtype))?)
}

/// Loads named tensors (e.g. a fetched version's) into `vs`, strictly (see the module docs).
/// Each tensor's bytes are copied once, straight into its variable (converted to the
/// variable's kind and device on the way): no host tensor of their own is made first.
pub fn import<'a>(vs: &mut VarStore, tensors: impl IntoIterator<Item = NamedTensor<'a>>) -> Result<()> {
    let borrowed =
        tensors.into_iter().map(|t| Ok((t.name.to_string(), Source::Whole(view_of(&t)?)))).collect::<Result<_>>()?;
    // The views borrow the tensors' bytes, which outlive this call; `assign` only reads them
    // (copy_ into the variables) and drops them before returning.
    assign(vs, borrowed, "the named tensors")
}

/// A tensor over `t`'s bytes without copying them, after checking that they fit its shape;
/// a copy when the bytes are not aligned for the element type. Only ever read (the source of
/// a copy_), and dropped before `t.data`'s borrow ends: see [`import`].
fn view_of(t: &NamedTensor<'_>) -> Result<Tensor> {
    checked_len(t)?;
    if t.data.as_ptr().align_offset(t.dtype.size()) != 0 || t.data.is_empty() {
        return tensor_of(t);
    }
    // SAFETY: `t.data` holds exactly numel × element-size initialised bytes (checked above),
    // aligned for the element type (checked above), and stays borrowed for as long as the
    // tensor lives: `import` drops every view before it returns, and nothing writes to it.
    let view = unsafe { Tensor::f_from_blob(t.data.as_ptr(), t.shape, &[], kind_of(t.dtype), Device::Cpu) }?;
    Ok(view)
}

/// The byte length `t`'s shape and dtype call for, which must be its data's.
fn checked_len(t: &NamedTensor<'_>) -> Result<usize> {
    let numel = t.shape.iter().try_fold(1usize, |acc, &d| usize::try_from(d).ok().and_then(|d| acc.checked_mul(d)));
    match numel.and_then(|n| n.checked_mul(t.dtype.size())) {
        Some(len) if len == t.data.len() => Ok(len),
        _ => Err(PolicyError::Weights(format!(
            "tensor {} has {} bytes, which does not fit shape {:?} of {:?}",
            t.name,
            t.data.len(),
            t.shape,
            t.dtype
        ))),
    }
}

/// Loads a verified weight-store version into `vs`, strictly. The set keeps its chunks as they
/// were fetched; a tensor that lies across chunks is copied piece by piece into its place in
/// the variable, so its bytes are never joined first (unless a chunk boundary splits one of its
/// elements, when that tensor alone is joined).
pub fn import_weight_set(vs: &mut VarStore, set: &WeightSet) -> Result<()> {
    let mut source = HashMap::with_capacity(set.specs().len());
    for spec in set.specs() {
        let named = |data| piece_of(spec, &spec.shape, data);
        let pieces: Vec<&[u8]> = set.pieces(spec).filter(|p| !p.is_empty()).collect();
        let size = spec.dtype.size();
        let src = match pieces.as_slice() {
            [] => Source::Whole(view_of(&named(&[]))?),
            [one] => Source::Whole(view_of(&named(one))?),
            many if many.iter().all(|p| p.len() % size == 0) => {
                let parts = many
                    .iter()
                    .map(|p| view_of(&piece_of(spec, &[(p.len() / size) as i64], p)))
                    .collect::<Result<Vec<_>>>()?;
                let numel: i64 = parts.iter().map(|t| t.numel() as i64).sum();
                if spec.shape.iter().product::<i64>() != numel {
                    return Err(PolicyError::Weights(format!(
                        "tensor {} has {numel} elements in its pieces, which does not fit shape {:?}",
                        spec.name, spec.shape
                    )));
                }
                Source::Pieces { shape: spec.shape.clone(), parts }
            }
            many => Source::Whole(tensor_of(&named(&many.concat()))?),
        };
        source.insert(spec.name.clone(), src);
    }
    // As in `import`: the views borrow `set`'s chunks, and `assign` drops them before returning.
    assign(vs, source, &format!("weights {}", set.version()))
}

/// `spec`'s name and dtype over `data` of `shape`.
fn piece_of<'a>(spec: &'a TensorSpec, shape: &'a [i64], data: &'a [u8]) -> NamedTensor<'a> {
    NamedTensor { name: &spec.name, shape, dtype: spec.dtype, data }
}

/// Where a variable's new values come from: one tensor of its shape, or consecutive pieces of
/// its elements (flat, in order) that lie in different buffers.
enum Source {
    Whole(Tensor),
    Pieces { shape: Vec<i64>, parts: Vec<Tensor> },
}

impl Source {
    fn size(&self) -> Vec<i64> {
        match self {
            Self::Whole(t) => t.size(),
            Self::Pieces { shape, .. } => shape.clone(),
        }
    }

    /// Copies the values into `dst` (converting kind and device in the same pass).
    fn copy_into(&self, dst: &mut Tensor) -> Result<()> {
        tch::no_grad(|| match self {
            Self::Whole(src) => dst.f_copy_(src),
            Self::Pieces { parts, .. } => {
                let flat = dst.f_view([-1])?;
                let mut at = 0;
                for part in parts {
                    let n = part.numel() as i64;
                    flat.f_narrow(0, at, n)?.f_copy_(part)?;
                    at += n;
                }
                Ok(())
            }
        })?;
        Ok(())
    }
}

/// Writes every variable to a `.safetensors` file.
pub fn save_safetensors(vs: &VarStore, path: &Path) -> Result<()> {
    let vars = vs.variables();
    let mut named: Vec<(&String, &Tensor)> = vars.iter().collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    Tensor::write_safetensors(&named, path)?;
    Ok(())
}

/// Loads one or more `.safetensors` files (a sharded checkpoint's shards) into `vs`,
/// strictly.
pub fn load_safetensors(vs: &mut VarStore, files: &[impl AsRef<Path>]) -> Result<()> {
    let mut map = HashMap::new();
    for f in files {
        let f = f.as_ref();
        if !f.exists() {
            return Err(PolicyError::io(f, std::io::ErrorKind::NotFound.into()));
        }
        map.extend(Tensor::read_safetensors(f)?);
    }
    let names: Vec<String> = files.iter().map(|f| f.as_ref().display().to_string()).collect();
    assign(vs, map.into_iter().map(|(name, t)| (name, Source::Whole(t))).collect(), &names.join(", "))
}

/// Copies `source` tensors into `vs`'s variables by name, checking the sets and shapes.
fn assign(vs: &mut VarStore, mut source: HashMap<String, Source>, from: &str) -> Result<()> {
    let vars = vs.variables();
    if vars.contains_key("model.embed_tokens.weight") && !vars.contains_key("lm_head.weight") {
        source.remove("lm_head.weight");
    }
    source.retain(|name, _| !name.ends_with("rotary_emb.inv_freq"));
    if let Some(extra) = source.keys().filter(|n| !vars.contains_key(*n)).min() {
        return Err(PolicyError::Weights(format!("{from} hold {extra}, which the model does not have")));
    }
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let Some(src) = source.get(name) else {
            if name.starts_with("value_head.") {
                continue;
            }
            return Err(PolicyError::Weights(format!("{from} lack {name}")));
        };
        let mut dst = vars[name].shallow_clone();
        if src.size() != dst.size() {
            return Err(PolicyError::Weights(format!(
                "{name} is {:?} in {from} but {:?} in the model",
                src.size(),
                dst.size()
            )));
        }
        // copy_ converts kind and device itself, in the same pass as the copy.
        src.copy_into(&mut dst)?;
    }
    Ok(())
}
