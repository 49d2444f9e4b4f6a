//! Golden numerics: advantages, the PPO loss terms and AdamW against values computed
//! independently with PyTorch 2.11 (the snippets are kept in comments beside each test; run
//! them with the torch of `.libtorch`), or by hand where the arithmetic is short.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod advantage;
mod loss;
mod optim;

use tch::{Device, Kind, Tensor};

/// A float tensor from rows.
pub fn t2(rows: &[&[f32]]) -> Tensor {
    let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Tensor::from_slice(&flat).reshape([rows.len() as i64, rows[0].len() as i64])
}

/// The values of a tensor, flattened.
pub fn values(t: &Tensor) -> Vec<f32> {
    Vec::try_from(t.to_kind(Kind::Float).to_device(Device::Cpu).flatten(0, -1)).unwrap()
}

/// Asserts element-wise closeness with an absolute-plus-relative tolerance.
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}");
    }
}

/// Asserts a scalar tensor's value.
#[track_caller]
pub fn assert_scalar(t: &Tensor, want: f32, tol: f32) {
    assert_close(&values(t), &[want], tol);
}
