//! What the tap reads from a request body, and the one edit it may make to it.
//!
//! Only a few top-level fields matter (`model`, `stream`, `stream_options`), and only bodies
//! up to [`MAX_REQUEST_BODY`] are read: a multimodal request can be tens of megabytes, and
//! the tap must not hold it. With `inject_usage` on, a streaming OpenAI request that did
//! not ask for usage gets `stream_options.include_usage` added by a textual edit that
//! leaves every other byte as the client sent it (docs/request-path.md, "inject_usage").

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// Largest request body the tap reads (and, with `inject_usage`, holds before sending it
/// on). Larger requests pass through, measured without what their body would have said.
pub const MAX_REQUEST_BODY: usize = 1 << 20;

/// What the measurement needs from a request body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub model: Option<String>,
    pub stream: bool,
}

#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    /// `Some` whenever the key is present, `null` included: the raw text and its place.
    #[serde(borrow, default, deserialize_with = "present")]
    stream_options: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The fields of a JSON object; `None` for anything else (serde would read an array's
/// elements as the fields in order).
fn fields(body: &[u8]) -> Option<Fields<'_>> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// Reads a request body; `None` when it is not a JSON object the tap understands.
pub fn parse(body: &[u8]) -> Option<RequestInfo> {
    let f = fields(body)?;
    Some(RequestInfo { model: f.model.map(Cow::into_owned), stream: f.stream.unwrap_or(false) })
}

/// The body with `"stream_options":{"include_usage":true}` added, when the request streams
/// and its `stream_options` is absent, `null` or `{}`; `None` otherwise (not streaming, not
/// JSON, or the client chose its own stream options, which the tap leaves alone).
pub fn inject_include_usage(body: &[u8]) -> Option<Vec<u8>> {
    const OPTIONS: &[u8] = br#"{"include_usage":true}"#;
    let f = fields(body)?;
    if f.stream != Some(true) {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() + 48);
    match f.stream_options {
        None => {
            // The object's `{` is the first non-blank byte (`fields` checked).
            let open = body.iter().position(|b| *b == b'{')?;
            out.extend_from_slice(&body[..=open]);
            out.extend_from_slice(br#""stream_options":"#);
            out.extend_from_slice(OPTIONS);
            out.push(b',');
            out.extend_from_slice(&body[open + 1..]);
        }
        Some(raw) => {
            let text = raw.get().trim();
            let value = text.as_bytes();
            if !(text == "null" || is_empty_object(value)) {
                return None;
            }
            // The raw value borrows from `body`, so its address gives its place there.
            let start = (value.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
            let end = start + value.len();
            if body.get(start..end) != Some(value) {
                return None;
            }
            out.extend_from_slice(&body[..start]);
            out.extend_from_slice(OPTIONS);
            out.extend_from_slice(&body[end..]);
        }
    }
    Some(out)
}

fn is_empty_object(v: &[u8]) -> bool {
    v.first() == Some(&b'{') && v.last() == Some(&b'}') && v[1..v.len() - 1].iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inject(s: &str) -> Option<String> {
        inject_include_usage(s.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn reads_model_and_stream() {
        assert_eq!(
            parse(br#"{"model":"m\u0031","stream":true,"messages":[]}"#),
            Some(RequestInfo { model: Some("m1".into()), stream: true })
        );
        assert_eq!(parse(br#"{"prompt":"x"}"#), Some(RequestInfo::default()));
        assert_eq!(parse(b"not json"), None);
        assert_eq!(parse(br#"["array"]"#), None);
    }

    #[test]
    fn adds_include_usage_where_the_client_set_no_stream_options() {
        assert_eq!(
            inject(r#" {"model":"m","stream":true}"#).as_deref(),
            Some(r#" {"stream_options":{"include_usage":true},"model":"m","stream":true}"#)
        );
        assert_eq!(
            inject(r#"{"stream":true, "stream_options": null ,"n":1}"#).as_deref(),
            Some(r#"{"stream":true, "stream_options": {"include_usage":true} ,"n":1}"#)
        );
        assert_eq!(
            inject(r#"{"stream_options":{ },"stream":true}"#).as_deref(),
            Some(r#"{"stream_options":{"include_usage":true},"stream":true}"#)
        );
        let added = inject(r#"{"model":"m","stream":true}"#).unwrap();
        let v: serde_json::Value = serde_json::from_str(&added).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
    }

    #[test]
    fn leaves_alone_what_it_must_not_change() {
        assert_eq!(inject(r#"{"model":"m"}"#), None, "not streaming");
        assert_eq!(inject(r#"{"stream":false}"#), None);
        assert_eq!(inject(r#"{"stream":true,"stream_options":{"include_usage":false}}"#), None, "the client said no");
        assert_eq!(inject(r#"{"stream":true,"stream_options":{"continuous_usage_stats":true}}"#), None);
        assert_eq!(inject(r#"{"stream":true,"stream_options":{"include_usage":true}}"#), None, "already there");
        assert_eq!(inject(r#"{"stream":true"#), None, "not JSON");
    }
}
