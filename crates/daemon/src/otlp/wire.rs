//! An `ExportTraceServiceRequest` in protobuf, walked in place: each span is read straight
//! from the body into the core's [`SpanInput`] and handed to the [`Batch`], and nothing of
//! OTLP's own types is built. Only what the mapping reads is decoded (the resource's
//! `service.name`; a span's name, times, status and `gen_ai.*` attributes); every other
//! field is skipped, checked only for its framing (prost's wire primitives read the keys
//! and varints). A body that is not well-formed protobuf
//! is refused whole: the caller records the batch only once the walk has succeeded.

use prost::encoding::{WireType, decode_key, decode_varint};

use crate::request::{AttrValue, SpanInput};

use super::batch::{Attributes, Batch, MAX_ARRAY_ELEMENTS};

/// Why a body is not a well-formed `ExportTraceServiceRequest`; the text goes back to the
/// exporter in the 400's status message.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("a varint: {0}")]
    Varint(prost::DecodeError),
    #[error("a field key: {0}")]
    Key(prost::DecodeError),
    #[error("a field of {want} bytes is cut short at {have}")]
    CutShort { want: usize, have: usize },
    #[error("a length is out of range")]
    LengthOutOfRange,
    #[error("wire type {wire:?} of field {field} is not supported")]
    UnsupportedWireType { wire: WireType, field: u32 },
    #[error("{0} is not a length-delimited field")]
    NotLengthDelimited(&'static str),
    #[error("{0} is not valid UTF-8")]
    NotUtf8(&'static str),
    #[error("a span time is not a fixed64")]
    SpanTimeNotFixed64,
    #[error("attribute value field {0} has the wrong wire type")]
    WrongValueType(u32),
}

/// One field of a message.
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// The fields of one message, in order.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn of(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf }
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        decode_varint(&mut self.buf).map_err(WireError::Varint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::CutShort { want: n, have: self.buf.len() });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let (field, wire) = decode_key(&mut self.buf).map_err(WireError::Key)?;
        let value = match wire {
            WireType::Varint => Value::Varint(self.varint()?),
            WireType::SixtyFourBit => Value::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default())),
            WireType::LengthDelimited => {
                let n = usize::try_from(self.varint()?).map_err(|_| WireError::LengthOutOfRange)?;
                Value::Bytes(self.take(n)?)
            }
            WireType::ThirtyTwoBit => {
                self.take(4)?;
                Value::Fixed32
            }
            wire => return Err(WireError::UnsupportedWireType { wire, field }),
        };
        Ok(Some((field, value)))
    }
}

fn message<'a>(v: Value<'a>, what: &'static str) -> Result<&'a [u8], WireError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(WireError::NotLengthDelimited(what)),
    }
}

fn text<'a>(v: Value<'a>, what: &'static str) -> Result<&'a str, WireError> {
    std::str::from_utf8(message(v, what)?).map_err(|_| WireError::NotUtf8(what))
}

/// Walks every span of the export in `body` into `batch`.
pub fn walk(body: &[u8], batch: &mut Batch) -> Result<(), WireError> {
    let mut request = Fields::of(body);
    while let Some((field, v)) = request.next()? {
        if field == 1 {
            resource_spans(message(v, "resource_spans")?, batch)?;
        }
    }
    Ok(())
}

/// One `ResourceSpans`: its scopes' spans and its resource's service name, which names
/// them wherever it comes in the message.
fn resource_spans(buf: &[u8], batch: &mut Batch) -> Result<(), WireError> {
    batch.resource();
    let mut f = Fields::of(buf);
    while let Some((field, v)) = f.next()? {
        if field == 1 {
            if let Some(name) = service_name(message(v, "resource")?)? {
                batch.service(name);
            }
        } else if field == 2 {
            let mut scope = Fields::of(message(v, "scope_spans")?);
            while let Some((field, v)) = scope.next()? {
                if field == 2 {
                    batch.span(span(message(v, "span")?)?);
                }
            }
        }
    }
    Ok(())
}

/// The resource's non-empty string `service.name`, the first one it has.
fn service_name(buf: &[u8]) -> Result<Option<&str>, WireError> {
    let mut f = Fields::of(buf);
    while let Some((field, v)) = f.next()? {
        if field != 1 {
            continue;
        }
        let (key, value) = key_value(message(v, "attribute")?)?;
        if key == "service.name" {
            let Some(value) = value else { return Ok(None) };
            let mut any = Fields::of(value);
            let mut s = None;
            while let Some((field, v)) = any.next()? {
                s = (field == 1).then(|| text(v, "service.name")).transpose()?;
            }
            return Ok(s.filter(|s| !s.is_empty()));
        }
    }
    Ok(None)
}

/// A `KeyValue`: its key and its value's bytes.
fn key_value(buf: &[u8]) -> Result<(&str, Option<&[u8]>), WireError> {
    let (mut key, mut value) = ("", None);
    let mut f = Fields::of(buf);
    while let Some((field, v)) = f.next()? {
        match field {
            1 => key = text(v, "an attribute key")?,
            2 => value = Some(message(v, "an attribute value")?),
            _ => {}
        }
    }
    Ok((key, value))
}

/// One span, as the mapping reads it.
fn span(buf: &[u8]) -> Result<SpanInput, WireError> {
    let mut out = SpanInput::default();
    let mut attributes = Attributes::default();
    let mut f = Fields::of(buf);
    while let Some((field, v)) = f.next()? {
        match (field, v) {
            (5, v) => out.name = text(v, "the span name")?.to_string(),
            (7, Value::Fixed64(t)) => out.start_unix_nano = t,
            (8, Value::Fixed64(t)) => out.end_unix_nano = t,
            (7 | 8, _) => return Err(WireError::SpanTimeNotFixed64),
            (9, v) => {
                let (key, value) = key_value(message(v, "a span attribute")?)?;
                if attributes.wants(key) {
                    let value = value.map_or(Ok(AttrValue::Other), |b| any_value(b, 0))?;
                    attributes.insert(key, value);
                }
            }
            (15, v) => {
                let mut status = Fields::of(message(v, "the span status")?);
                while let Some((field, v)) = status.next()? {
                    if let (3, Value::Varint(code)) = (field, v) {
                        out.error = code == 2; // STATUS_CODE_ERROR
                    }
                }
            }
            _ => {}
        }
    }
    out.attributes = attributes.into_map();
    Ok(out)
}

/// An `AnyValue`, the last of its oneof fields winning as protobuf has it; arrays nest at
/// most a few levels and keep their first [`MAX_ARRAY_ELEMENTS`] elements.
fn any_value(buf: &[u8], depth: usize) -> Result<AttrValue, WireError> {
    let mut out = AttrValue::Other;
    let mut f = Fields::of(buf);
    while let Some((field, v)) = f.next()? {
        out = match (field, v) {
            (1, v) => AttrValue::Str(text(v, "a string value")?.to_string()),
            (2, Value::Varint(b)) => AttrValue::Bool(b != 0),
            (3, Value::Varint(n)) => AttrValue::Int(n as i64),
            (4, Value::Fixed64(bits)) => AttrValue::Double(f64::from_bits(bits)),
            (5, v) if depth < 4 => {
                let mut values = Vec::new();
                let mut array = Fields::of(message(v, "an array value")?);
                while let Some((field, v)) = array.next()? {
                    if field == 1 && values.len() < MAX_ARRAY_ELEMENTS {
                        values.push(any_value(message(v, "an array element")?, depth + 1)?);
                    }
                }
                AttrValue::Array(values)
            }
            (2..=4, _) => return Err(WireError::WrongValueType(field)),
            _ => AttrValue::Other,
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
    use prost::Message;

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
    }

    #[test]
    fn spans_read_in_place_match_what_the_mapping_reads_from_prost() {
        use any_value::Value as V;
        let span = Span {
            name: "llm_request".into(),
            start_time_unix_nano: 5,
            end_time_unix_nano: 9,
            attributes: vec![
                kv("gen_ai.latency.e2e", V::DoubleValue(1.5)),
                kv("gen_ai.usage.completion_tokens", V::IntValue(-3)),
                kv("gen_ai.request.model", V::StringValue("llama".into())),
                kv("gen_ai.ok", V::BoolValue(true)),
                kv(
                    "gen_ai.response.finish_reasons",
                    V::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(V::StringValue("stop".into())) }] }),
                ),
                kv("http.route", V::StringValue("/v1".into())),
            ],
            status: Some(Status { code: 2, message: "bad".into() }),
            ..Default::default()
        };
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", V::StringValue("vllm".into()))],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans { spans: vec![span.clone(), Span::default()], ..Default::default() }],
                ..Default::default()
            }],
        };
        let mut batch = Batch::new(1 << 20);
        walk(&req.encode_to_vec(), &mut batch).unwrap();
        let got: Vec<(Option<&str>, &SpanInput)> = batch.spans().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Some("vllm"));
        assert_eq!(got[0].1, &super::super::route::span_input(&span));
        assert_eq!(batch.not_llm, 1);
    }

    #[test]
    fn a_resource_after_its_spans_still_names_them_and_bad_framing_is_refused() {
        // scope_spans (field 2) before resource (field 1) in one ResourceSpans.
        let span = Span {
            attributes: vec![kv("gen_ai.latency.e2e", any_value::Value::DoubleValue(1.0))],
            ..Default::default()
        };
        let scope = ScopeSpans { spans: vec![span], ..Default::default() }.encode_to_vec();
        let resource = Resource {
            attributes: vec![kv("service.name", any_value::Value::StringValue("late".into()))],
            ..Default::default()
        }
        .encode_to_vec();
        let mut rs = vec![0x12, scope.len() as u8];
        rs.extend(&scope);
        rs.extend([0x0a, resource.len() as u8]);
        rs.extend(&resource);
        let mut body = vec![0x0a, rs.len() as u8];
        body.extend(&rs);
        let mut batch = Batch::new(1 << 20);
        walk(&body, &mut batch).unwrap();
        assert_eq!(batch.spans().next().unwrap().0, Some("late"));

        for bad in [&[0xffu8, 0xff, 0xff][..], &[0x0a, 0x05, 0x12], &[0x0b], &body[..body.len() - 1]] {
            let mut batch = Batch::new(1 << 20);
            assert!(walk(bad, &mut batch).is_err(), "{bad:?}");
            assert!(batch.is_empty());
        }
    }
}
