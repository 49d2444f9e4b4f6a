//! A serde deserializer adapter that charges what a decoded value will occupy in memory
//! against a budget, so a small payload cannot expand into a large value.
//!
//! ```text
//!  bytes ──► bincode::Deserializer ──► Budgeted ──► T::deserialize
//!                                        │ every sequence element / map entry: size_of::<Elem>()
//!                                        │ every string or byte buffer: its length
//!                                        └ over the budget: a decode error (flag set on Budget)
//! ```
//!
//! A size limit alone bounds the bytes, not the value: an empty string is one byte on the wire
//! and 24 in memory, an empty turn five and about a hundred. Charging each element its in-memory
//! size bounds the expansion whatever the type.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// The memory left to a decode, and whether it ran out.
pub(crate) struct Budget {
    left: Cell<u64>,
    exceeded: Cell<bool>,
}

impl Budget {
    /// A budget of `bytes`.
    pub(crate) fn new(bytes: u64) -> Self {
        Self { left: Cell::new(bytes), exceeded: Cell::new(false) }
    }

    /// Whether a charge was refused.
    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let bytes = (bytes as u64).max(1);
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("decoded value over its memory budget"))
            }
        }
    }
}

/// A deserializer whose every value is charged to `budget`.
pub(crate) struct Budgeted<'b, D> {
    pub(crate) inner: D,
    pub(crate) budget: &'b Budget,
}

struct Wrap<'b, X> {
    inner: X,
    budget: &'b Budget,
}

impl<'b, X> Wrap<'b, X> {
    fn new(inner: X, budget: &'b Budget) -> Self {
        Self { inner, budget }
    }
}

macro_rules! forward_deserialize {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(Wrap::new(visitor, self.budget))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Budgeted<'_, D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, Wrap::new(visitor, self.budget))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, Wrap::new(visitor, self.budget))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, Wrap::new(visitor, self.budget))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, Wrap::new(visitor, self.budget))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, Wrap::new(visitor, self.budget))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(name, variants, Wrap::new(visitor, self.budget))
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit!(
        visit_bool: bool, visit_i8: i8, visit_i16: i16, visit_i32: i32, visit_i64: i64, visit_i128: i128,
        visit_u8: u8, visit_u16: u16, visit_u32: u32, visit_u64: u64, visit_u128: u128,
        visit_f32: f32, visit_f64: f64, visit_char: char,
    );

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_string(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_bytes(v)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_borrowed_bytes(v)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.budget.charge(v.len())?;
        self.inner.visit_byte_buf(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Budgeted { inner: d, budget: self.budget })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Budgeted { inner: d, budget: self.budget })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(Wrap::new(seq, self.budget))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Wrap::new(map, self.budget))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Wrap::new(data, self.budget))
    }
}

/// A seed whose deserializer stays budgeted.
impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Budgeted { inner: d, budget: self.budget })
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Wrap<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.budget.charge(std::mem::size_of::<T::Value>())?;
        self.inner.next_element_seed(Wrap::new(seed, self.budget))
    }

    fn size_hint(&self) -> Option<usize> {
        // Never let a claimed length preallocate past what is left.
        let left = usize::try_from(self.budget.left.get()).unwrap_or(usize::MAX);
        self.inner.size_hint().map(|n| n.min(left))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Wrap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.budget.charge(std::mem::size_of::<K::Value>())?;
        self.inner.next_key_seed(Wrap::new(seed, self.budget))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.budget.charge(std::mem::size_of::<S::Value>())?;
        self.inner.next_value_seed(Wrap::new(seed, self.budget))
    }

    fn size_hint(&self) -> Option<usize> {
        let left = usize::try_from(self.budget.left.get()).unwrap_or(usize::MAX);
        self.inner.size_hint().map(|n| n.min(left))
    }
}

impl<'de, 'b, A: EnumAccess<'de>> EnumAccess<'de> for Wrap<'b, A> {
    type Error = A::Error;
    type Variant = Wrap<'b, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), A::Error> {
        let budget = self.budget;
        let (value, variant) = self.inner.variant_seed(Wrap::new(seed, budget))?;
        Ok((value, Wrap::new(variant, budget)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Wrap<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.inner.newtype_variant_seed(Wrap::new(seed, self.budget))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.inner.tuple_variant(len, Wrap::new(visitor, self.budget))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.inner.struct_variant(fields, Wrap::new(visitor, self.budget))
    }
}
