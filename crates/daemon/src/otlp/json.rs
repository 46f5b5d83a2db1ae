//! An `ExportTraceServiceRequest` in OTLP/JSON, walked as it is parsed: each span is read
//! into the core's [`SpanInput`] and handed to the [`Batch`] before the next is parsed, so
//! neither the whole export nor any of OTLP's own types is built. As for protobuf
//! ([`super::wire`]), only what the mapping reads is kept; everything else is parsed and
//! skipped without being stored. OTLP/JSON's conventions are followed: lowerCamelCase
//! names, 64-bit integers as strings or numbers, doubles as numbers or `"NaN"`/`"Infinity"`,
//! unknown fields ignored.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::request::{AttrValue, SpanInput};

use super::batch::{Attributes, Batch};

/// What the walk saw of the top level.
#[derive(Debug, Default)]
pub struct Seen {
    /// `resourceSpans` was there.
    pub camel: bool,
    /// `resource_spans` (protobuf's own name, which OTLP/JSON does not use) was there.
    pub snake: bool,
}

/// Walks every span of the export in `body` into `batch`.
pub fn walk(body: &[u8], batch: &mut Batch) -> Result<Seen, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let seen = Top(batch).deserialize(&mut de)?;
    de.end()?;
    Ok(seen)
}

/// A map key, borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Declares a seed whose visitor reads a map (`MapAccess`, `deserialize_map`, `visit_map`)
/// or a sequence, with the type's own `visit`.
macro_rules! seed {
    ($name:ident $(<$l:lifetime>)?, $out:ty, $expect:literal, $access:ident, $kind:ident, $method:ident) => {
        impl<'de $(, $l)?> DeserializeSeed<'de> for $name$(<$l>)? {
            type Value = $out;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$out, D::Error> {
                d.$kind(self)
            }
        }
        impl<'de $(, $l)?> Visitor<'de> for $name$(<$l>)? {
            type Value = $out;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str($expect)
            }
            fn $method<A: $access<'de>>(self, a: A) -> Result<$out, A::Error> {
                self.visit(a)
            }
        }
    };
}

#[path = "json_values.rs"]
mod values;
use values::{Int, KeyValue, Nullable, StatusSeed};

struct Top<'b>(&'b mut Batch);
seed!(Top<'b>, Seen, "an ExportTraceServiceRequest object", MapAccess, deserialize_map, visit_map);

impl Top<'_> {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<Seen, A::Error> {
        let mut seen = Seen::default();
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "resourceSpans" => {
                    seen.camel = true;
                    a.next_value_seed(Each(&mut *self.0, Item::Resource))?;
                }
                "resource_spans" => {
                    seen.snake = true;
                    a.next_value::<IgnoredAny>()?;
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(seen)
    }
}

/// What the elements of an array are.
#[derive(Clone, Copy)]
enum Item {
    Resource,
    Scope,
    Span,
    ServiceAttribute,
}

/// An array of `Item`s, each handed to the batch as it is parsed; `null` is an empty one.
struct Each<'b>(&'b mut Batch, Item);

impl<'de> DeserializeSeed<'de> for Each<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Each<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let batch = self.0;
        match self.1 {
            Item::Resource => while a.next_element_seed(ResourceSpans(&mut *batch))?.is_some() {},
            Item::Scope => while a.next_element_seed(ScopeSpans(&mut *batch))?.is_some() {},
            Item::Span => {
                while let Some(span) = a.next_element_seed(SpanSeed)? {
                    batch.span(span);
                }
            }
            Item::ServiceAttribute => {
                while let Some((key, value)) = a.next_element_seed(KeyValue { wanted: is_service_name })? {
                    if let (true, Some(AttrValue::Str(s))) = (key == "service.name", value) {
                        batch.service(&s);
                    }
                }
            }
        }
        Ok(())
    }
}

fn is_service_name(key: &str) -> bool {
    key == "service.name"
}

struct ResourceSpans<'b>(&'b mut Batch);
seed!(ResourceSpans<'b>, (), "a ResourceSpans object", MapAccess, deserialize_map, visit_map);

impl ResourceSpans<'_> {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        self.0.resource();
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "resource" => a.next_value_seed(Resource(&mut *self.0))?,
                "scopeSpans" => a.next_value_seed(Each(&mut *self.0, Item::Scope))?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

struct Resource<'b>(&'b mut Batch);
seed!(Resource<'b>, (), "a Resource object", MapAccess, deserialize_map, visit_map);

impl Resource<'_> {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "attributes" => a.next_value_seed(Each(&mut *self.0, Item::ServiceAttribute))?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

struct ScopeSpans<'b>(&'b mut Batch);
seed!(ScopeSpans<'b>, (), "a ScopeSpans object", MapAccess, deserialize_map, visit_map);

impl ScopeSpans<'_> {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "spans" => a.next_value_seed(Each(&mut *self.0, Item::Span))?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(())
    }
}

struct SpanSeed;
seed!(SpanSeed, SpanInput, "a Span object", MapAccess, deserialize_map, visit_map);

impl SpanSeed {
    fn visit<'de, A: MapAccess<'de>>(self, mut a: A) -> Result<SpanInput, A::Error> {
        let mut out = SpanInput::default();
        let mut attributes = Attributes::default();
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "name" => out.name = a.next_value::<Option<String>>()?.unwrap_or_default(),
                "startTimeUnixNano" => out.start_unix_nano = a.next_value_seed(Nullable(Int))?.unwrap_or(0) as u64,
                "endTimeUnixNano" => out.end_unix_nano = a.next_value_seed(Nullable(Int))?.unwrap_or(0) as u64,
                "attributes" => a.next_value_seed(SpanAttributes(&mut attributes))?,
                "status" => out.error = a.next_value_seed(StatusSeed)?,
                _ => a.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        out.attributes = attributes.into_map();
        Ok(out)
    }
}

struct SpanAttributes<'b>(&'b mut Attributes);
seed!(SpanAttributes<'b>, (), "an array of KeyValue", SeqAccess, deserialize_seq, visit_seq);

impl SpanAttributes<'_> {
    fn visit<'de, A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let attrs = self.0;
        loop {
            let wanted = |k: &str| attrs.wants(k);
            let Some((key, value)) = a.next_element_seed(KeyValue { wanted })? else { return Ok(()) };
            if let Some(v) = value {
                attrs.insert(&key, v);
            }
        }
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
