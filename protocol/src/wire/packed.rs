//! Per-token vectors (`Vec<u32>`, `Vec<f32>`, `Vec<bool>`) as one little-endian byte string
//! each in binary formats, so the codec copies them instead of visiting every entry.
//!
//! ```text
//!  binary (bincode):    token_ids  ─► len(4N) │ id0 id1 … (u32 LE)
//!                       logprobs   ─► len(4N) │ lp0 lp1 … (f32 LE bits)
//!                       loss_mask  ─► len(N)  │ 0|1 0|1 … (one byte per entry)
//!  human-readable (JSON): unchanged — an array of numbers / booleans
//! ```
//!
//! The mask takes one byte per entry rather than a bit each: the byte string is then exactly
//! as long as the decoded `Vec<bool>` (the codec's memory budget charges it 1×, where bits
//! would decode to 8× the payload, the budget's default bound), its length alone gives the
//! entry count, and each byte has one valid value per entry (0 or 1), so every accepted
//! payload re-encodes to the same bytes. A byte string whose length is not a whole number of
//! entries, or a mask byte other than 0 or 1, is a decode error naming the field.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// A fixed-width entry with a little-endian byte form.
pub(crate) trait Entry: Sized + Copy + Serialize + for<'de> Deserialize<'de> {
    /// Bytes per entry.
    const WIDTH: usize;
    /// Writes the entry's bytes to `out` (exactly [`Entry::WIDTH`] long).
    fn put(self, out: &mut [u8]);
    /// The entry in `bytes` (exactly [`Entry::WIDTH`] long), or what is wrong with it.
    fn get(bytes: &[u8]) -> Result<Self, &'static str>;
}

/// `Entry` for a number with `to_le_bytes`/`from_le_bytes`.
macro_rules! le_entry {
    ($($ty:ty),*) => {$(
        impl Entry for $ty {
            const WIDTH: usize = std::mem::size_of::<$ty>();
            #[inline]
            fn put(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(bytes: &[u8]) -> Result<Self, &'static str> {
                bytes.try_into().map(<$ty>::from_le_bytes).map_err(|_| "whole entries")
            }
        }
    )*};
}

le_entry!(u32, f32);

impl Entry for bool {
    const WIDTH: usize = 1;
    #[inline]
    fn put(self, out: &mut [u8]) {
        out.fill(u8::from(self));
    }
    #[inline]
    fn get(bytes: &[u8]) -> Result<Self, &'static str> {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err("mask bytes of 0 or 1"),
        }
    }
}

/// Serializes `values` as one byte string (binary formats) or a sequence (human-readable).
pub(crate) fn serialize<T: Entry, S: Serializer>(values: &[T], s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        return values.serialize(s);
    }
    // Filled in place (no per-entry capacity check), which the compiler turns into a copy.
    let mut bytes = vec![0u8; values.len() * T::WIDTH];
    for (out, v) in bytes.chunks_exact_mut(T::WIDTH).zip(values) {
        v.put(out);
    }
    s.serialize_bytes(&bytes)
}

/// Deserializes what [`serialize`] wrote; errors name `field`.
pub(crate) fn deserialize<'de, T: Entry, D: Deserializer<'de>>(d: D, field: &'static str) -> Result<Vec<T>, D::Error> {
    if d.is_human_readable() {
        return Vec::<T>::deserialize(d);
    }
    d.deserialize_bytes(Packed { field, entry: PhantomData })
}

/// Turns a byte string into entries.
struct Packed<T> {
    field: &'static str,
    entry: PhantomData<T>,
}

impl<T: Entry> Visitor<'_> for Packed<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: a byte string of {}-byte entries", self.field, T::WIDTH)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<T>, E> {
        if !v.len().is_multiple_of(T::WIDTH) {
            return Err(E::custom(format_args!(
                "{}: a byte string of {} bytes is not a whole number of {}-byte entries",
                self.field,
                v.len(),
                T::WIDTH
            )));
        }
        v.chunks_exact(T::WIDTH)
            .map(T::get)
            .collect::<Result<Vec<T>, _>>()
            .map_err(|want| E::custom(format_args!("{}: expected {want}", self.field)))
    }
}

/// A `#[serde(with = …)]` module packing one field, so decode errors name it.
macro_rules! field {
    ($module:ident, $entry:ty, $name:literal) => {
        #[doc = concat!("`", $name, "` as one byte string (see the module header).")]
        pub(crate) mod $module {
            use serde::{Deserializer, Serializer};

            pub(crate) fn serialize<S: Serializer>(values: &[$entry], s: S) -> Result<S::Ok, S::Error> {
                super::serialize(values, s)
            }

            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<$entry>, D::Error> {
                super::deserialize(d, $name)
            }
        }
    };
}

field!(token_ids, u32, "token_ids");
field!(logprobs, f32, "logprobs");
field!(loss_mask, bool, "loss_mask");
field!(observation, f32, "observation");
