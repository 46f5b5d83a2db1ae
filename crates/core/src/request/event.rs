//! The fields of a stream event (or a non-streaming response body) that the meter reads,
//! across the engines' formats (docs/request-path.md, "Wire formats"):
//!
//! - OpenAI chat and completions chunks (vLLM, SGLang, TGI, TRT-LLM): `choices[].delta`
//!   or `choices[].text`, `choices[].token_ids`, `finish_reason`, `usage`, `model`;
//! - TGI `/generate_stream`: `token`, and on the last event `generated_text` and `details`;
//! - SGLang `/generate`: `text`, `output_ids` and `meta_info`;
//! - llama.cpp's native `/completion`: `content`, `tokens`, the cumulative
//!   `tokens_predicted`, `tokens_evaluated`, and `"stop": true` on the last event;
//! - the engine's own per-request times: llama.cpp's `timings` (every route, on the last
//!   event or the body) and vLLM's `metrics` (`--enable-per-request-metrics`, on the usage
//!   event or the body);
//! - in-band errors: a top-level `error`, or vLLM's older `"object": "error"`.
//!
//! Every other field is skipped without being built; text is only measured, never copied.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// How much a JSON value holds: a string's or array's length, 1 for a non-empty object
/// or any scalar, 0 for `null`, `""`, `[]` and `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Len(pub usize);

impl Len {
    pub fn any(self) -> bool {
        self.0 > 0
    }
}

impl<'de> Deserialize<'de> for Len {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Len, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Len;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Len, E> {
                Ok(Len(v.len()))
            }
            fn visit_unit<E>(self) -> Result<Len, E> {
                Ok(Len(0))
            }
            fn visit_none<E>(self) -> Result<Len, E> {
                Ok(Len(0))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Len, E> {
                Ok(Len(1))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Len, E> {
                Ok(Len(1))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Len, E> {
                Ok(Len(1))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Len, E> {
                Ok(Len(1))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Len, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Len(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Len, A::Error> {
                let mut n = 0;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n = 1;
                }
                Ok(Len(n))
            }
        }
        d.deserialize_any(V)
    }
}

/// A string value borrowed where it can be; any other JSON value reads as absent, so an
/// engine's odd `id` (a number, an object) cannot make its whole event unreadable.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_unit<E>(self) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_none<E>(self) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A number; any other JSON value reads as absent, so that an engine's odd value cannot
/// make its whole event unreadable.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Num(pub Option<f64>);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
                Ok(Num(Some(v as f64)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
                Ok(Num(Some(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
                Ok(Num(Some(v)))
            }
            fn visit_str<E>(self, _: &str) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_unit<E>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_none<E>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Num, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Num, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Num(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl Num {
    /// The value in milliseconds as seconds, when it is a finite, non-negative number.
    pub fn ms_as_seconds(self) -> Option<f64> {
        self.0.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v / 1000.0)
    }
}

/// A boolean; any other JSON value reads as absent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub Option<bool>);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
        // Read as a number's or an object's leniency would: only `true`/`false` count.
        let v = serde_json::Value::deserialize(d)?;
        Ok(Flag(v.as_bool()))
    }
}

/// An object of `T`'s fields; any other JSON value reads as absent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Obj<T>(pub Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Obj<T> {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Obj<T>, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|t| Obj(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Obj<T>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Obj(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_unit<E>(self) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_none<E>(self) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Text<'_> {
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// One event's data, or a whole non-streaming body.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event<'a> {
    /// The response id (`chatcmpl-…`, `cmpl-…`): OpenAI chunks and bodies repeat it on every
    /// event. Read as text only when it is a string.
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub object: Option<Cow<'a, str>>,
    pub choices: Option<Vec<Choice>>,
    pub usage: Option<Usage>,
    pub error: Option<IgnoredAny>,
    /// TGI `/generate_stream`: the token this event carries.
    pub token: Option<IgnoredAny>,
    /// TGI: set (not null) on the last event only.
    pub generated_text: Option<IgnoredAny>,
    pub details: Option<Details>,
    /// SGLang `/generate`: the text so far.
    pub text: Len,
    pub output_ids: Len,
    pub meta_info: Option<MetaInfo>,
    /// llama.cpp's native route: this event's text and token ids, the tokens generated so
    /// far and the prompt's, and `true` on the last event.
    pub content: Len,
    pub tokens: Len,
    pub tokens_predicted: Num,
    pub tokens_evaluated: Num,
    pub stop: Flag,
    /// llama.cpp's own times for the request (milliseconds).
    pub timings: Obj<Timings>,
    /// vLLM's own times for the request with `--enable-per-request-metrics` (milliseconds).
    pub metrics: Obj<ServedMetrics>,
}

impl Event<'_> {
    /// An in-band error: a top-level `error`, or `"object": "error"`.
    pub fn is_error(&self) -> bool {
        self.error.is_some() || self.object.as_deref() == Some("error")
    }

    /// The usage event `include_usage` adds: no choices, and a usage.
    pub fn is_usage_only(&self) -> bool {
        self.usage.is_some() && self.choices.as_ref().is_some_and(Vec::is_empty)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Choice {
    pub index: u32,
    pub delta: Option<Delta>,
    /// Completions: the text of this chunk.
    pub text: Len,
    /// vLLM `return_token_ids`, TRT-LLM `detokenize: false`.
    pub token_ids: Len,
    pub finish_reason: Option<IgnoredAny>,
}

impl Choice {
    /// Whether this choice carries output: text, reasoning, tool calls or token ids. The
    /// role-only or empty first chunk carries none.
    pub fn bears_tokens(&self) -> bool {
        let delta = self.delta.as_ref().is_some_and(|d| {
            d.content.any() || d.reasoning.any() || d.reasoning_content.any() || d.tool_calls.any() || d.token_ids.any()
        });
        delta || self.text.any() || self.token_ids.any()
    }

    pub fn token_ids(&self) -> usize {
        self.token_ids.0 + self.delta.as_ref().map_or(0, |d| d.token_ids.0)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Delta {
    pub content: Len,
    pub reasoning: Len,
    pub reasoning_content: Len,
    pub tool_calls: Len,
    pub token_ids: Len,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
}

/// llama.cpp's `timings`: prompt processing (from the slot's start to the first token) and
/// generation (first token to last).
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
#[serde(default)]
pub struct Timings {
    pub prompt_ms: Num,
    pub predicted_ms: Num,
}

/// vLLM's per-request `metrics`: `queue_time_ms` (queued → scheduled),
/// `time_to_first_token_ms` (scheduled → first token, not from arrival) and
/// `generation_time_ms` (first token → last).
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServedMetrics {
    pub queue_time_ms: Num,
    pub time_to_first_token_ms: Num,
    pub generation_time_ms: Num,
}

/// TGI's `details` on the last event (with `"details": true`) or a non-streaming body.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Details {
    pub generated_tokens: Option<u64>,
    pub input_length: Option<u64>,
    pub finish_reason: Option<IgnoredAny>,
}

/// SGLang's per-event counters, cumulative over the request.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MetaInfo {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<IgnoredAny>,
}

/// Parses an event's data; `None` when it is not a JSON object.
pub fn parse(data: &[u8]) -> Option<Event<'_>> {
    // serde would read an array's elements as the fields in order.
    if data.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_every_kind_of_value() {
        let l = |s: &str| serde_json::from_str::<Len>(s).unwrap().0;
        assert_eq!([l("null"), l(r#""""#), l("[]"), l("{}")], [0, 0, 0, 0]);
        assert_eq!([l(r#""h\u00e9""#), l("[1,[2],{}]"), l(r#"{"a":1}"#), l("0"), l("false")], [3, 3, 1, 1, 1]);
    }

    #[test]
    fn role_only_chunk_bears_nothing_and_tokens_do() {
        let role =
            parse(br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#)
                .unwrap();
        let c = &role.choices.as_ref().unwrap()[0];
        assert!(!c.bears_tokens() && c.finish_reason.is_none());
        for data in [
            r#"{"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"x"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"text":"x"}]}"#,
            r#"{"choices":[{"text":"","token_ids":[5]}]}"#,
        ] {
            assert!(parse(data.as_bytes()).unwrap().choices.unwrap()[0].bears_tokens(), "{data}");
        }
    }

    #[test]
    fn errors_and_the_usage_only_event() {
        assert!(parse(br#"{"error":{"message":"boom","code":500}}"#).unwrap().is_error());
        assert!(parse(br#"{"error":"x","error_type":"generation"}"#).unwrap().is_error());
        assert!(parse(br#"{"object":"error","message":"x"}"#).unwrap().is_error());
        assert!(!parse(br#"{"error":null,"choices":[]}"#).unwrap().is_error());
        assert!(parse(br#"{"choices":[],"usage":{"completion_tokens":3}}"#).unwrap().is_usage_only());
        assert!(!parse(br#"{"choices":[{"text":"a"}],"usage":{"completion_tokens":3}}"#).unwrap().is_usage_only());
        assert!(!parse(br#"{"choices":[],"usage":null}"#).unwrap().is_usage_only());
        assert!(parse(b"[DONE]").is_none());
    }

    #[test]
    fn the_id_is_read_when_it_is_a_string_and_never_spoils_the_event() {
        assert_eq!(parse(br#"{"id":"chatcmpl-1","choices":[]}"#).unwrap().id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(parse(br#"{"id":"a\"b","choices":[]}"#).unwrap().id.as_deref(), Some("a\"b"), "escaped: owned");
        for odd in [r#"7"#, r#"null"#, r#"{"x":[1]}"#, r#"[1,"a"]"#, r#"true"#, r#"1.5"#] {
            let data = format!(r#"{{"id":{odd},"choices":[{{"text":"x"}}]}}"#);
            let ev = parse(data.as_bytes()).unwrap_or_else(|| panic!("{data} must parse"));
            assert_eq!(ev.id.as_deref(), None, "{data}");
            assert!(ev.choices.unwrap()[0].bears_tokens(), "{data}");
        }
    }
}
