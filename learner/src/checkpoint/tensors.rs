//! Copying loaded tensors back into a model's live variables (a `VarStore`'s, say).

use std::collections::HashMap;

use tch::Tensor;

use crate::error::{LearnerError, Result};

/// Copies every tensor of `src` into the variable of the same name in `dst`, in place and
/// without gradient. The two must hold exactly the same names and shapes; the copy converts
/// dtype and device to the destination's.
pub fn copy_named_into(dst: &HashMap<String, Tensor>, src: &[(String, Tensor)]) -> Result<()> {
    if dst.len() != src.len() {
        let mut missing: Vec<&String> = dst.keys().filter(|k| !src.iter().any(|(n, _)| n == *k)).collect();
        missing.sort();
        return Err(LearnerError::Shape(format!(
            "the checkpoint has {} tensors, the model {}; missing from the checkpoint: {missing:?}",
            src.len(),
            dst.len()
        )));
    }
    for (name, t) in src {
        let d = dst.get(name).ok_or_else(|| LearnerError::Shape(format!("the model has no tensor {name}")))?;
        if d.size() != t.size() {
            return Err(LearnerError::Shape(format!("{name}: checkpoint {:?}, model {:?}", t.size(), d.size())));
        }
        tch::no_grad(|| d.shallow_clone().f_copy_(t))?;
    }
    Ok(())
}
