//! The one codec of the wire: serde + bincode 1.3.3 behind a format-version byte.
//!
//! ```text
//!  ┌─────────┬──────────────────────────────────────────┐
//!  │ version │ bincode (varint ints, little endian)     │
//!  │ 1 byte  │ at most `max_bytes - 1` bytes             │
//!  └─────────┴──────────────────────────────────────────┘
//! ```
//!
//! bincode 1.x is unmaintained (RUSTSEC-2025-0141; its maintainers call 1.3.3 complete), so it
//! stays behind this module: nothing else in the workspace names it, and a later format can be
//! introduced under a new version byte while old payloads remain readable. Decoding is bounded
//! by the size limit, so a hostile length prefix cannot make it allocate unboundedly, and by a
//! memory budget ([`budget`]): the decoded value may occupy at most `max_expansion` times its
//! payload plus [`MIN_BUDGET_BYTES`], so a large payload of empty strings or empty turns cannot
//! expand tenfold in memory, while a small honest reply of many small results still decodes.
//!
//! Versions: 1 encoded a turn's token ids, log-probs and loss mask (and a control step's
//! observation) entry by entry; 2 (this build) encodes each as one little-endian byte string
//! (`wire/packed.rs`), which the codec copies instead of visiting: four bytes per id (varints
//! took one to five), four per log-prob and one per mask entry as before, at a fraction of the
//! CPU. A version-1 payload is refused as [`CodecError::UnknownVersion`].

mod budget;

use bincode::Options;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Serialize;

use budget::{Budget, Budgeted};

use crate::error::CodecError;
use crate::wire::Validate;

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 2;

/// The default maximum payload size (64 MiB), used when config does not say otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// The default bound on decoded memory per payload byte. Legitimate values stay far below it
/// (text, floats and packed token ids about 1×); empty strings and empty turns (about 20×)
/// are refused.
pub const DEFAULT_MAX_EXPANSION: u64 = 8;

/// Decoded memory every payload may use whatever its size. A reply of many small results (a
/// `step_batch` of 256 cartpole sessions: about 8 bytes each on the wire, a hundred in memory)
/// honestly expands well past [`DEFAULT_MAX_EXPANSION`]; what bounds an attacker is the
/// absolute amount, and 256 KiB per payload is small beside the frame and connection limits
/// that already bound how many payloads are in flight. (4 KiB refused that honest reply.)
pub const MIN_BUDGET_BYTES: u64 = 256 << 10;

/// Encoder/decoder with a size limit and a decoded-memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    max_bytes: u64,
    max_expansion: u64,
}

impl Default for Codec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES)
    }
}

impl Codec {
    /// A codec refusing payloads over `max_bytes` (the version byte included).
    pub fn new(max_bytes: u64) -> Self {
        Self { max_bytes: max_bytes.max(2), max_expansion: DEFAULT_MAX_EXPANSION }
    }

    /// The same codec with decoded values bounded to `factor` bytes of memory per payload byte
    /// (at least 1).
    pub fn with_max_expansion(self, factor: u64) -> Self {
        Self { max_expansion: factor.max(1), ..self }
    }

    /// The decoded-memory bound per payload byte.
    pub fn max_expansion(&self) -> u64 {
        self.max_expansion
    }

    /// The limit.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn options(&self) -> impl Options {
        bincode::DefaultOptions::new()
            .with_limit(self.max_bytes - 1)
            .with_little_endian()
            .with_varint_encoding()
            .reject_trailing_bytes()
    }

    /// Encodes `value` with the version byte in front.
    pub fn encode<T: Serialize>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(self.encoded_len(value)? as usize);
        self.encode_into(value, &mut out)?;
        Ok(out)
    }

    /// The size of `value`'s payload, the version byte included; refuses a value over the limit.
    pub fn encoded_len<T: Serialize>(&self, value: &T) -> Result<u64, CodecError> {
        let size = self.options().serialized_size(value).map_err(|e| self.classify(&e, None))? + 1;
        if size > self.max_bytes {
            return Err(CodecError::TooLarge { size, max: self.max_bytes });
        }
        Ok(size)
    }

    /// Writes `value`'s payload (the version byte, then the body) to `out` — a command's
    /// argument, say, so the payload is not first built in a buffer of its own. A value over
    /// the limit fails part-way, with what was written left in `out`.
    pub fn encode_into<T: Serialize, W: std::io::Write>(&self, value: &T, mut out: W) -> Result<(), CodecError> {
        out.write_all(&[FORMAT_VERSION]).map_err(|e| CodecError::Malformed(e.to_string()))?;
        self.options().serialize_into(&mut out, value).map_err(|e| self.classify(&e, None))
    }

    /// Decodes a payload written by [`Codec::encode`], checking version and size.
    pub fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
        if version != FORMAT_VERSION {
            return Err(CodecError::UnknownVersion { found: version, expected: FORMAT_VERSION });
        }
        if bytes.len() as u64 > self.max_bytes {
            return Err(CodecError::TooLarge { size: bytes.len() as u64, max: self.max_bytes });
        }
        let limit = (bytes.len() as u64).saturating_mul(self.max_expansion).saturating_add(MIN_BUDGET_BYTES);
        let budget = Budget::new(limit);
        let seed = BudgetSeed::<T> { budget: &budget, value: std::marker::PhantomData };
        self.options().deserialize_seed(seed, body).map_err(|e| {
            if budget.exceeded() {
                CodecError::Expands { size: bytes.len() as u64, limit }
            } else {
                self.classify(&e, Some(bytes.len()))
            }
        })
    }

    /// Decodes and then checks the value's invariants.
    pub fn decode_valid<T: DeserializeOwned + Validate>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let value: T = self.decode(bytes)?;
        value.validate()?;
        Ok(value)
    }

    fn classify(&self, err: &bincode::ErrorKind, len: Option<usize>) -> CodecError {
        match err {
            bincode::ErrorKind::SizeLimit => {
                CodecError::TooLarge { size: len.map_or(self.max_bytes + 1, |l| l as u64), max: self.max_bytes }
            }
            other => CodecError::Malformed(other.to_string()),
        }
    }
}

/// Deserializes a `T` through [`Budgeted`].
struct BudgetSeed<'b, T> {
    budget: &'b Budget,
    value: std::marker::PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for BudgetSeed<'_, T> {
    type Value = T;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(Budgeted { inner: d, budget: self.budget })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_byte_leads() {
        let bytes = Codec::default().encode(&42u32).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(Codec::default().decode::<u32>(&bytes).unwrap(), 42);
    }

    #[test]
    fn rejects_empty_wrong_version_trailing_and_oversize() {
        let c = Codec::new(16);
        assert_eq!(c.decode::<u32>(&[]), Err(CodecError::Empty));
        assert_eq!(c.decode::<u32>(&[9, 1]), Err(CodecError::UnknownVersion { found: 9, expected: FORMAT_VERSION }));
        assert!(matches!(c.decode::<u8>(&[FORMAT_VERSION, 5, 6]), Err(CodecError::Malformed(_))));
        assert!(matches!(c.encode(&vec![0u8; 64]), Err(CodecError::TooLarge { max: 16, .. })));
        let mut big = vec![FORMAT_VERSION];
        big.extend(std::iter::repeat_n(0u8, 40));
        assert!(matches!(c.decode::<Vec<u8>>(&big), Err(CodecError::TooLarge { .. })));
    }

    #[test]
    fn hostile_length_prefix_is_refused_without_allocating() {
        // A Vec<u8> claiming u64::MAX elements: varint 0xFF marker + 8 bytes.
        let mut bytes = vec![FORMAT_VERSION, 0xFF];
        bytes.extend(u64::MAX.to_le_bytes());
        assert!(Codec::new(1 << 20).decode::<Vec<u8>>(&bytes).is_err());
    }
}
