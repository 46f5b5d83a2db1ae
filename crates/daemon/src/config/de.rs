//! A serde `Deserializer` over the positioned [`tree`](super::tree), so that the config's
//! own types (`RawConfig`, `AlertingConfig`, `GpuConfig`, …) say which keys exist: the
//! known keys of each section are the `fields` serde derives from the struct, with no second
//! list to keep in step.
//!
//! It differs from a plain YAML deserializer in three ways: an unknown key is noted and
//! skipped instead of ending the run; every error names the node it happened at; and nodes
//! listed in `skip` are invisible, which is how [`super::yaml`] steps past an error and
//! carries on to find the next one.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::value::U32Deserializer;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, VariantAccess, Visitor};

use super::error::Pos;
use super::tree::{Entry, Kind, Node, NodeId};

/// A value with the position it was written at.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: Pos,
}

/// The newtype name by which [`Spanned`] asks this deserializer for a position.
const SPANNED: &str = "goodput::config::Spanned";

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: de::Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Spanned<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Spanned<T>, A::Error> {
                let missing = || de::Error::custom("internal: incomplete position");
                let line: u32 = seq.next_element()?.ok_or_else(missing)?;
                let column: u32 = seq.next_element()?.ok_or_else(missing)?;
                let value: T = seq.next_element()?.ok_or_else(missing)?;
                Ok(Spanned { value, pos: Pos::new(line, column) })
            }
            // Any other deserializer: the value, at an unknown position.
            fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Spanned<T>, D::Error> {
                T::deserialize(d).map(|value| Spanned { value, pos: Pos::FILE })
            }
        }
        d.deserialize_newtype_struct(SPANNED, V(std::marker::PhantomData))
    }
}

/// What went wrong, and at which node (filled in on the way out by the nearest node).
#[derive(Debug)]
pub(crate) struct Error {
    pub problem: Problem,
    pub node: Option<NodeId>,
}

#[derive(Debug)]
pub(crate) enum Problem {
    /// A key the struct requires is absent from the mapping.
    Missing(&'static str),
    Message(String),
}

impl Error {
    fn at(mut self, node: NodeId) -> Error {
        self.node.get_or_insert(node);
        self
    }
    fn wrong_type(node: &Node, expected: &str) -> Error {
        Error {
            problem: Problem::Message(format!("wrong type: expected {expected}, found {}", node.describe())),
            node: Some(node.id),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            Problem::Missing(k) => write!(f, "missing required key {k:?}"),
            Problem::Message(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error { problem: Problem::Message(msg.to_string()), node: None }
    }
    fn missing_field(field: &'static str) -> Self {
        Error { problem: Problem::Missing(field), node: None }
    }
}

/// An unknown key, kept for the report; the run goes on without it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct UnknownKey {
    pub key_pos: Pos,
    pub key: String,
    /// The mapping it is in.
    pub map: NodeId,
    pub expected: &'static [&'static str],
}

/// State shared by one run over the tree.
pub(crate) struct Run<'t> {
    pub skip: &'t HashSet<NodeId>,
    pub unknown: RefCell<Vec<UnknownKey>>,
}

#[derive(Clone, Copy)]
pub(crate) struct NodeDe<'a> {
    pub node: &'a Node,
    pub run: &'a Run<'a>,
}

impl<'a> NodeDe<'a> {
    fn child(&self, node: &'a Node) -> NodeDe<'a> {
        NodeDe { node, run: self.run }
    }
    fn items(&self) -> impl Iterator<Item = &'a Node> + 'a {
        let skip = self.run.skip;
        let items: &'a [Node] = match &self.node.kind {
            Kind::Seq(items) => items,
            _ => &[],
        };
        items.iter().filter(move |n| !skip.contains(&n.id))
    }
    fn entries(&self) -> impl Iterator<Item = &'a Entry> + 'a {
        let skip = self.run.skip;
        let entries: &'a [Entry] = match &self.node.kind {
            Kind::Map(entries) => entries,
            _ => &[],
        };
        entries.iter().filter(move |e| !skip.contains(&e.value.id))
    }
    /// The text of a scalar as written, for keys that want text.
    fn text(&self) -> Option<&'a str> {
        match &self.node.kind {
            Kind::Str(s) | Kind::Bool(_, s) | Kind::Int(_, s) | Kind::Float(_, s) => Some(s),
            _ => None,
        }
    }
    fn int<T: TryFrom<i128>>(&self, what: &str) -> Result<T, Error> {
        match &self.node.kind {
            Kind::Int(v, _) => T::try_from(*v).map_err(|_| Error::wrong_type(self.node, what)),
            _ => Err(Error::wrong_type(self.node, what)),
        }
    }
}

/// Integer requests, each range-checked here so the message can say the range.
macro_rules! ints {
    ($($method:ident $ty:ty, $visit:ident $as:ty, $what:expr;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            let v: $ty = self.int($what)?;
            visitor.$visit(v as $as)
        }
    )*};
}

const LIST: &str = "a list (e.g. [a, b], or one `- item` per line)";

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            Kind::Null => visitor.visit_unit(),
            Kind::Bool(b, _) => visitor.visit_bool(*b),
            Kind::Int(v, _) => match (u64::try_from(*v), i64::try_from(*v)) {
                (Ok(u), _) => visitor.visit_u64(u),
                (_, Ok(i)) => visitor.visit_i64(i),
                _ => visitor.visit_i128(*v),
            },
            Kind::Float(v, _) => visitor.visit_f64(*v),
            Kind::Str(s) => visitor.visit_str(s),
            Kind::Seq(_) => self.deserialize_seq(visitor),
            Kind::Map(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            Kind::Bool(b, _) => visitor.visit_bool(*b),
            _ => Err(Error::wrong_type(self.node, "true or false")),
        }
    }

    ints! {
        deserialize_u8 u8, visit_u64 u64, "a whole number from 0 to 255";
        deserialize_u16 u16, visit_u64 u64, "a whole number from 0 to 65535";
        deserialize_u32 u32, visit_u64 u64, "a whole number from 0 to 4294967295";
        deserialize_u64 u64, visit_u64 u64, "a whole number ≥ 0";
        deserialize_i8 i8, visit_i64 i64, "a whole number from -128 to 127";
        deserialize_i16 i16, visit_i64 i64, "a whole number from -32768 to 32767";
        deserialize_i32 i32, visit_i64 i64, "a whole number from -2147483648 to 2147483647";
        deserialize_i64 i64, visit_i64 i64, "a whole number";
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            Kind::Float(v, _) => visitor.visit_f64(*v),
            Kind::Int(v, _) => visitor.visit_f64(*v as f64),
            _ => Err(Error::wrong_type(self.node, "a plain number like 0.99")),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match (self.text(), &self.node.kind) {
            (Some(s), _) => visitor.visit_str(s),
            (None, Kind::Null) => Err(Error::wrong_type(self.node, "a value")),
            (None, _) => Err(Error::wrong_type(self.node, "a single value, not a list or mapping")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.kind {
            Kind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.kind {
            Kind::Null => visitor.visit_unit(),
            _ => Err(Error::wrong_type(self.node, "an empty value")),
        }
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        if name == SPANNED {
            visitor.visit_seq(SpannedSeq { de: self, step: 0 })
        } else {
            visitor.visit_newtype_struct(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.kind {
            // `key:` with nothing after it is an empty list.
            Kind::Seq(_) | Kind::Null => visitor.visit_seq(Items { de: self, items: Box::new(self.items()) }),
            _ => Err(Error::wrong_type(self.node, LIST)),
        }
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.kind {
            Kind::Map(_) | Kind::Null => {
                visitor.visit_map(Entries { de: self, entries: Box::new(self.entries()), value: None })
            }
            _ => Err(Error::wrong_type(self.node, "a mapping of keys to values")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if !matches!(self.node.kind, Kind::Map(_) | Kind::Null) {
            return Err(Error::wrong_type(self.node, &format!("a mapping with the keys {}", fields.join(", "))));
        }
        let (known, unknown): (Vec<&Entry>, Vec<&Entry>) =
            self.entries().partition(|e| fields.contains(&e.key.as_str()));
        self.run.unknown.borrow_mut().extend(unknown.into_iter().map(|e| UnknownKey {
            key_pos: e.key_pos,
            key: e.key.clone(),
            map: self.node.id,
            expected: fields,
        }));
        visitor.visit_map(Entries { de: self, entries: Box::new(known.into_iter()), value: None })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let expected = variants.join(", ");
        match self.text() {
            Some(s) if variants.contains(&s) => visitor.visit_enum(UnitVariant(s)),
            Some(s) => Err(Error {
                problem: Problem::Message(format!("unknown value {s:?}; expected one of {expected}")),
                node: Some(self.node.id),
            }),
            None => Err(Error::wrong_type(self.node, &format!("one of {expected}"))),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// Line, column, then the value: what [`Spanned`] reads.
struct SpannedSeq<'a> {
    de: NodeDe<'a>,
    step: u8,
}

impl<'de> de::SeqAccess<'de> for SpannedSeq<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        self.step += 1;
        let pos = self.de.node.pos;
        match self.step {
            1 => seed.deserialize(U32Deserializer::new(pos.line)).map(Some),
            2 => seed.deserialize(U32Deserializer::new(pos.column)).map(Some),
            3 => seed.deserialize(self.de).map(Some),
            _ => Ok(None),
        }
    }
}

struct Items<'a> {
    de: NodeDe<'a>,
    items: Box<dyn Iterator<Item = &'a Node> + 'a>,
}

impl<'de> de::SeqAccess<'de> for Items<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        let Some(node) = self.items.next() else { return Ok(None) };
        seed.deserialize(self.de.child(node)).map(Some).map_err(|e| e.at(node.id))
    }
}

struct Entries<'a> {
    de: NodeDe<'a>,
    entries: Box<dyn Iterator<Item = &'a Entry> + 'a>,
    value: Option<&'a Node>,
}

impl<'de> de::MapAccess<'de> for Entries<'_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(entry) = self.entries.next() else { return Ok(None) };
        self.value = Some(&entry.value);
        let key: de::value::StrDeserializer<Error> = entry.key.as_str().into_deserializer();
        seed.deserialize(key).map(Some).map_err(|e| e.at(entry.value.id))
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        let node = self.value.take().ok_or_else(|| de::Error::custom("internal: value before key"))?;
        seed.deserialize(self.de.child(node)).map_err(|e| e.at(node.id))
    }
}

struct UnitVariant<'a>(&'a str);

impl<'de> EnumAccess<'de> for UnitVariant<'_> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self), Error> {
        let name: de::value::StrDeserializer<Error> = self.0.into_deserializer();
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> VariantAccess<'de> for UnitVariant<'_> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _: T) -> Result<T::Value, Error> {
        Err(de::Error::custom(format!("{:?} needs a value; write it as a mapping", self.0)))
    }
    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("{:?} needs values; write it as a mapping", self.0)))
    }
    fn struct_variant<V: Visitor<'de>>(self, _: &'static [&'static str], _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom(format!("{:?} needs keys; write it as a mapping", self.0)))
    }
}
