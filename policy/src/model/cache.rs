//! The key/value cache of batched generation: per layer, keys and values for every slot of
//! the batch's sequences, preallocated to the longest length so that a step writes in place
//! instead of concatenating.
//!
//! ```text
//!  slot:   0 … P-1 (left-padded prompts) | P … P+N-1 (generated, one per step)
//!  k[l]:   [B, kv_heads, P+N, head_dim]   filled up to `len`; generation sizes it so it never overflows
//! ```

use tch::{Device, Kind, Tensor};

use crate::config::ModelConfig;

/// Keys and values of every layer for a batch, filled up to [`KvCache::len`].
#[derive(Debug)]
pub(crate) struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: i64,
}

impl KvCache {
    /// An empty cache for `batch` sequences of at most `capacity` slots.
    pub(crate) fn new(cfg: &ModelConfig, batch: i64, capacity: i64, device: Device, kind: Kind) -> Self {
        let shape = [batch, cfg.num_key_value_heads, capacity, cfg.head_dim];
        let layers = (0..cfg.num_hidden_layers)
            .map(|_| (Tensor::zeros(shape, (kind, device)), Tensor::zeros(shape, (kind, device))))
            .collect();
        Self { layers, len: 0 }
    }

    /// Slots filled so far.
    pub(crate) fn len(&self) -> i64 {
        self.len
    }

    /// Writes layer `layer`'s new keys and values (`[B, kv_heads, t, d]`) after the filled
    /// slots and returns all keys and values so far. Generation sized the cache for every step.
    pub(crate) fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
        let t = k.size()[2];
        let (ck, cv) = &mut self.layers[layer];
        ck.narrow(2, self.len, t).copy_(k);
        cv.narrow(2, self.len, t).copy_(v);
        (ck.narrow(2, 0, self.len + t), cv.narrow(2, 0, self.len + t))
    }

    /// Copies one row's earlier keys and values (per layer `[kv_heads, t, d]`) into its slots
    /// `at..at + t`; the slots count as filled once [`KvCache::set_len`] says so.
    pub(crate) fn put(&mut self, row: i64, at: i64, layers: &[(Tensor, Tensor)]) {
        for ((ck, cv), (k, v)) in self.layers.iter_mut().zip(layers) {
            let t = k.size()[1];
            ck.get(row).narrow(1, at, t).copy_(k);
            cv.get(row).narrow(1, at, t).copy_(v);
        }
    }

    /// Sets the filled length (after [`KvCache::put`]).
    pub(crate) fn set_len(&mut self, len: i64) {
        self.len = len;
    }

    /// One row's keys and values at `slots` (an int64 index tensor), per layer
    /// `[kv_heads, slots, d]`, copied out of the batch.
    pub(crate) fn take(&self, row: i64, slots: &Tensor) -> Vec<(Tensor, Tensor)> {
        self.layers
            .iter()
            .map(|(ck, cv)| (ck.get(row).index_select(1, slots), cv.get(row).index_select(1, slots)))
            .collect()
    }

    /// Marks `t` more slots as filled, once every layer has appended them.
    pub(crate) fn advance(&mut self, t: i64) {
        self.len += t;
    }
}
