//! The values of OTLP/JSON the span walk reads ([`super`]): attributes and their
//! `AnyValue`s, 64-bit integers written as strings, doubles written as `"NaN"` or
//! `"Infinity"`, and a span's status.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Key;
use crate::otlp::batch::MAX_ARRAY_ELEMENTS;
use crate::request::AttrValue;

/// A `KeyValue`: its key, and its value when `wanted` takes the key (a value written
/// before its key is read in case it is wanted).
pub(super) struct KeyValue<F> {
    pub wanted: F,
}

impl<'de, F: Fn(&str) -> bool> DeserializeSeed<'de> for KeyValue<F> {
    type Value = (String, Option<AttrValue>);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: Fn(&str) -> bool> Visitor<'de> for KeyValue<F> {
    type Value = (String, Option<AttrValue>);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a KeyValue object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let (mut key, mut value): (Option<String>, Option<AttrValue>) = (None, None);
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "key" => key = Some(a.next_value::<Option<String>>()?.unwrap_or_default()),
                "value" if key.as_deref().is_none_or(|k| (self.wanted)(k)) => {
                    value = a.next_value_seed(Any(0))?;
                }
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        let key = key.unwrap_or_default();
        let value = value.filter(|_| (self.wanted)(&key)).or_else(|| (self.wanted)(&key).then_some(AttrValue::Other));
        Ok((key, value))
    }
}

/// An `AnyValue` (`null` is an empty one); arrays nest at most a few levels and keep
/// their first [`MAX_ARRAY_ELEMENTS`] elements.
pub(super) struct Any(usize);

impl<'de> DeserializeSeed<'de> for Any {
    type Value = Option<AttrValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Any {
    type Value = Option<AttrValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AnyValue object")
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        // The last field given wins; a `null` one leaves the value as it was.
        let mut out = AttrValue::Other;
        while let Some(Key(k)) = a.next_key()? {
            let v = match &*k {
                "stringValue" => a.next_value::<Option<String>>()?.map(AttrValue::Str),
                "boolValue" => a.next_value::<Option<bool>>()?.map(AttrValue::Bool),
                "intValue" => a.next_value_seed(Nullable(Int))?.map(AttrValue::Int),
                "doubleValue" => a.next_value_seed(Nullable(Double))?.map(AttrValue::Double),
                "arrayValue" if self.0 < 4 => a.next_value_seed(Nullable(Array(self.0 + 1)))?.map(AttrValue::Array),
                "kvlistValue" | "bytesValue" | "arrayValue" => {
                    a.next_value::<Option<IgnoredAny>>()?.map(|_| AttrValue::Other)
                }
                _ => a.next_value::<IgnoredAny>().map(|_| None)?,
            };
            if let Some(v) = v {
                out = v;
            }
        }
        Ok(Some(out))
    }
}

/// An `ArrayValue`: `{"values": [AnyValue, …]}`.
pub(super) struct Array(usize);
seed!(Array, Vec<AttrValue>, "an ArrayValue object", MapAccess, deserialize_map, visit_map);

impl Array {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<Vec<AttrValue>, A::Error> {
        let mut out = Vec::new();
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "values" => out = a.next_value_seed(Values(self.0))?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(out)
    }
}

pub(super) struct Values(usize);
seed!(Values, Vec<AttrValue>, "an array of AnyValue", SeqAccess, deserialize_seq, visit_seq);

impl Values {
    fn visit<'de, A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<AttrValue>, A::Error> {
        let mut out = Vec::new();
        while out.len() < MAX_ARRAY_ELEMENTS {
            match a.next_element_seed(Any(self.0))? {
                Some(v) => out.push(v.unwrap_or(AttrValue::Other)),
                None => return Ok(out),
            }
        }
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(out)
    }
}

/// `null`, or what the seed reads.
pub(super) struct Nullable<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or null")
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// A 64-bit integer, as a string or a number (OTLP/JSON writes strings).
pub(super) struct Int;

impl<'de> DeserializeSeed<'de> for Int {
    type Value = i64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<i64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Int {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer, or a string holding one")
    }
    fn visit_i64<E>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<i64, E> {
        // Unsigned fields (times) keep their bits.
        Ok(v as i64)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<i64, E> {
        s.parse::<i64>()
            .or_else(|_| s.parse::<u64>().map(|v| v as i64))
            .map_err(|_| E::custom(format!("{s:?} is not an integer")))
    }
}

/// A double, as a number or one of the strings protobuf's JSON uses for the others.
pub(super) struct Double;

impl<'de> DeserializeSeed<'de> for Double {
    type Value = f64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Double {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }
    fn visit_f64<E>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_i64<E>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_u64<E>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<f64, E> {
        match s {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => s.parse().map_err(|_| E::custom(format!("{s:?} is not a number"))),
        }
    }
}

/// A span's `Status`: whether its code is ERROR (2, or its enum name).
pub(super) struct StatusSeed;

impl<'de> DeserializeSeed<'de> for StatusSeed {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for StatusSeed {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Status object")
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<bool, A::Error> {
        let mut error = false;
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "code" => error = a.next_value_seed(Code)?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(error)
    }
}

pub(super) struct Code;

impl<'de> DeserializeSeed<'de> for Code {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Code {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a status code")
    }
    fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
        Ok(v == 2)
    }
    fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
        Ok(v == 2)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<bool, E> {
        match s {
            "STATUS_CODE_ERROR" => Ok(true),
            "STATUS_CODE_OK" | "STATUS_CODE_UNSET" => Ok(false),
            _ => Err(E::custom(format!("unknown status code {s:?}"))),
        }
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}
