//! OTLP/HTTP on the wire (https://opentelemetry.io/docs/specs/otlp/#otlphttp): which
//! encoding a request uses, its body read under the cap and un-gzipped, the
//! `ExportTraceServiceRequest` walked into a [`Batch`] ([`super::wire`], [`super::json`]),
//! and the answers the exporters expect.
//!
//! - 200 with an `ExportTraceServiceResponse` in the request's encoding; `partial_success`
//!   says how many spans were rejected and why;
//! - 400 for a body that does not decode, 408 for one that stalled or trickled, 413 over
//!   `otlp.body_limit` (before or after gzip), 415 for another content type or content
//!   coding, 429 with `Retry-After` when too many exports wait to be decoded; the body of
//!   each is a `google.rpc.Status` in the request's encoding, plain text when that is
//!   unknown.
//!
//! 400, 408, 413 and 415 are not retryable for the SDK exporters, which is right: the same
//! body would fail again. 429 is, after `Retry-After`.

use std::io::Read;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use prost::Message;

use super::batch::Batch;
use super::metrics::Export;
use crate::listen::paced::BodyError;

/// What a 429 asks the exporter to wait before it retries.
pub const RETRY_AFTER_S: u64 = 1;

/// The two encodings OTLP/HTTP defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// A request answered with an error status.
#[derive(Debug)]
pub struct Reject {
    pub status: StatusCode,
    pub result: Export,
    pub message: String,
    /// The encoding of the error body; plain text when the request's is unknown.
    pub encoding: Option<Encoding>,
}

impl Reject {
    pub fn new(result: Export, encoding: Option<Encoding>, message: String) -> Reject {
        let status = match result {
            Export::Ok => StatusCode::OK,
            Export::Undecodable => StatusCode::BAD_REQUEST,
            Export::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Export::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Export::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Export::Throttled => StatusCode::TOO_MANY_REQUESTS,
        };
        Reject { status, result, message, encoding }
    }

    /// 429: the decoders are busy; the exporter retries after [`RETRY_AFTER_S`].
    pub fn throttled(encoding: Encoding, waiting: std::time::Duration) -> Reject {
        Reject::new(
            Export::Throttled,
            Some(encoding),
            format!(
                "too many exports are waiting to be decoded (none started within {waiting:?}); retry after {RETRY_AFTER_S} s"
            ),
        )
    }
}

/// `google.rpc.Status`, the body of OTLP/HTTP error responses. Written here rather than
/// pulled in: it is two fields, and no crate of ours carries the googleapis types.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC status codes, as google.rpc.Status carries them.
const INVALID_ARGUMENT: i32 = 3;
const DEADLINE_EXCEEDED: i32 = 4;
const RESOURCE_EXHAUSTED: i32 = 8;

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let code = match self.result {
            Export::TooLarge | Export::Throttled => RESOURCE_EXHAUSTED,
            Export::BodyTimeout => DEADLINE_EXCEEDED,
            _ => INVALID_ARGUMENT,
        };
        let status = RpcStatus { code, message: self.message };
        let (content_type, body) = match self.encoding {
            Some(Encoding::Protobuf) => (Encoding::Protobuf.content_type(), status.encode_to_vec()),
            Some(Encoding::Json) => (
                Encoding::Json.content_type(),
                serde_json::json!({"code": status.code, "message": status.message}).to_string().into_bytes(),
            ),
            None => ("text/plain; charset=utf-8", format!("{}\n", status.message).into_bytes()),
        };
        let mut r = (self.status, [(header::CONTENT_TYPE, content_type)], body).into_response();
        match self.result {
            Export::Throttled => {
                r.headers_mut().insert(header::RETRY_AFTER, RETRY_AFTER_S.into());
            }
            // The rest of a body that was cut cannot be told from a next request.
            Export::BodyTimeout => {
                r.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            }
            _ => {}
        }
        r
    }
}

/// The request's encoding, from its Content-Type (parameters such as `charset` ignored).
pub fn encoding(headers: &HeaderMap) -> Result<Encoding, Reject> {
    let raw = headers.get(header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let media = raw.as_deref().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match media.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        _ => Err(Reject::new(
            Export::UnsupportedMediaType,
            None,
            format!(
                "unsupported Content-Type {}; OTLP/HTTP sends application/x-protobuf or application/json to /v1/traces (an exporter speaking gRPC needs OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)",
                raw.map_or_else(|| "(none)".to_string(), |r| format!("{r:?}"))
            ),
        )),
    }
}

/// The body, read up to `limit` bytes and un-gzipped up to `limit` bytes.
pub async fn body(body: Body, headers: &HeaderMap, limit: usize, enc: Encoding) -> Result<Bytes, Reject> {
    let too_large = |what: &str| {
        Reject::new(
            Export::TooLarge,
            Some(enc),
            format!(
                "the {what} is larger than otlp.body_limit ({limit} bytes); export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) or raise the limit"
            ),
        )
    };
    let coding = headers
        .get(header::CONTENT_ENCODING)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_ascii_lowercase());
    let gzip = match coding.as_deref() {
        None | Some("" | "identity") => false,
        Some("gzip" | "x-gzip") => true,
        Some(other) => {
            return Err(Reject::new(
                Export::UnsupportedMediaType,
                Some(enc),
                format!("unsupported Content-Encoding {other:?}; send the body plain or gzip-compressed"),
            ));
        }
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large("request body"));
    }
    // Read frame by frame into one buffer, so that a body is held once, never above the cap.
    let mut body = body;
    let mut wire = BytesMut::with_capacity(declared.map_or(0, |n| n as usize).min(64 << 10));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match BodyError::find(&e) {
            Some(BodyError::TimedOut(_)) => {
                Reject::new(Export::BodyTimeout, Some(enc), format!("cannot read the request body: {e}"))
            }
            _ => Reject::new(Export::Undecodable, Some(enc), format!("cannot read the request body: {e}")),
        })?;
        if let Ok(data) = frame.into_data() {
            if wire.len() + data.len() > limit {
                return Err(too_large("request body"));
            }
            wire.extend_from_slice(&data);
        }
    }
    let wire = wire.freeze();
    if !gzip {
        return Ok(wire);
    }
    let mut plain = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(&wire[..]).take(limit as u64 + 1).read_to_end(&mut plain);
    match read {
        Err(e) => Err(Reject::new(Export::Undecodable, Some(enc), format!("the body is not valid gzip: {e}"))),
        Ok(n) if n > limit => Err(too_large("gzip-decoded body")),
        Ok(_) => Ok(plain.into()),
    }
}

/// The LLM request spans of the export in `bytes`, at most `budget` bytes of them once
/// decoded (the rest counted in [`Batch::over_budget`]).
pub fn decode(enc: Encoding, bytes: &[u8], budget: usize) -> Result<Batch, Reject> {
    let undecodable = |e: &dyn std::fmt::Display| {
        Reject::new(
            Export::Undecodable,
            Some(enc),
            format!("cannot decode the body as an OTLP ExportTraceServiceRequest: {e}"),
        )
    };
    let mut batch = Batch::new(budget);
    match enc {
        Encoding::Protobuf => super::wire::walk(bytes, &mut batch).map_err(|e| undecodable(&e))?,
        Encoding::Json => {
            let seen = super::json::walk(bytes, &mut batch).map_err(|e| undecodable(&e))?;
            // Unknown JSON fields are ignored, so protobuf's original snake_case names would
            // decode to an empty export and lose every span without a word.
            if seen.snake && !seen.camel {
                return Err(undecodable(
                    &"the JSON uses the field name resource_spans; OTLP/JSON writes lowerCamelCase (resourceSpans, scopeSpans, startTimeUnixNano)",
                ));
            }
        }
    }
    Ok(batch)
}

/// 200, with `partial_success` when spans were rejected.
pub fn success(enc: Encoding, rejected: u64, message: String) -> Response {
    let response = ExportTraceServiceResponse {
        partial_success: (rejected > 0 || !message.is_empty()).then(|| ExportTracePartialSuccess {
            rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
            error_message: message,
        }),
    };
    let body = match enc {
        Encoding::Protobuf => response.encode_to_vec(),
        // serde writes an absent message as `null`; protobuf JSON leaves it out.
        Encoding::Json if response.partial_success.is_none() => b"{}".to_vec(),
        // The response is plain data; encoding it cannot fail.
        Encoding::Json => serde_json::to_vec(&response).unwrap_or_default(),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, enc.content_type())], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn content_types_pick_the_encoding() {
        let enc = |ct: &str| encoding(&headers(&[(header::CONTENT_TYPE, ct)])).map_err(|r| r.status);
        assert_eq!(enc("application/x-protobuf"), Ok(Encoding::Protobuf));
        assert_eq!(enc("Application/JSON; charset=utf-8"), Ok(Encoding::Json));
        assert_eq!(enc("application/grpc"), Err(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        let none = encoding(&HeaderMap::new()).unwrap_err();
        assert!(none.message.contains("(none)") && none.message.contains("http/protobuf"), "{}", none.message);
    }

    #[tokio::test]
    async fn bodies_are_capped_before_and_after_gzip() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[b'x'; 5000]).unwrap();
        let packed = gz.finish().unwrap();
        assert!(packed.len() < 1000);
        let h = headers(&[(header::CONTENT_ENCODING, "gzip")]);
        let got = body(Body::from(packed.clone()), &h, 6000, Encoding::Json).await.unwrap();
        assert_eq!(got.len(), 5000);
        let bomb = body(Body::from(packed), &h, 4000, Encoding::Json).await.unwrap_err();
        assert_eq!((bomb.status, bomb.result), (StatusCode::PAYLOAD_TOO_LARGE, Export::TooLarge));
        let big = body(Body::from(vec![0u8; 4001]), &HeaderMap::new(), 4000, Encoding::Protobuf).await.unwrap_err();
        assert_eq!(big.status, StatusCode::PAYLOAD_TOO_LARGE);
        let bad = body(Body::from(&b"not gzip"[..]), &h, 4000, Encoding::Protobuf).await.unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        let br = headers(&[(header::CONTENT_ENCODING, "br")]);
        let br = body(Body::from(&b"x"[..]), &br, 4000, Encoding::Protobuf).await.unwrap_err();
        assert_eq!(br.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn undecodable_bodies_are_rejected_in_their_encoding() {
        let r = decode(Encoding::Protobuf, &[0xff, 0xff, 0xff], 1 << 20).unwrap_err();
        assert_eq!((r.status, r.encoding), (StatusCode::BAD_REQUEST, Some(Encoding::Protobuf)));
        let r = decode(Encoding::Json, b"{\"resourceSpans\": 7}", 1 << 20).unwrap_err();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(decode(Encoding::Protobuf, b"", 1 << 20).unwrap().is_empty(), "an empty export is valid");
        assert!(decode(Encoding::Json, b"{}", 1 << 20).unwrap().is_empty());
        let r = decode(Encoding::Json, br#"{"resource_spans": [{"scope_spans": []}]}"#, 1 << 20).unwrap_err();
        assert!(r.message.contains("lowerCamelCase"), "{}", r.message);
    }

    #[test]
    fn a_429_says_when_to_retry_and_a_408_closes_the_connection() {
        let r = Reject::throttled(Encoding::Json, std::time::Duration::from_secs(5)).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = Reject::new(Export::BodyTimeout, None, "slow".into()).into_response();
        assert_eq!(
            (r.status(), r.headers()[header::CONNECTION].to_str().unwrap()),
            (StatusCode::REQUEST_TIMEOUT, "close")
        );
    }
}
