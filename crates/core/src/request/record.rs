//! One measured request, whichever source measured it.
//!
//! Times are seconds. `finished_unix` is wall-clock Unix time (it places the record in a
//! window); every duration was measured on the producer's monotonic clock, so a wall-clock
//! step cannot make a latency negative.

use serde::Serialize;

pub use crate::report::request::Source;

/// How a request ended. Anything but [`Status::Ok`] counts as not good in every SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A complete response: HTTP 2xx and, on streams, the end marker (or EOF where the route
    /// sends none) with no in-band error.
    Ok,
    /// The upstream answered with a non-2xx status.
    HttpError(u16),
    /// HTTP 200, but the stream carried an error event (`data: {"error": …}`).
    StreamError,
    /// The client went away before the response ended.
    ClientAbort,
    /// The upstream connection failed or reset before or during the response.
    UpstreamReset,
    /// The stream ended (EOF) without the end marker its route always sends.
    Truncated,
}

impl Status {
    /// One of each variant (the HTTP error a 503), for tests that cover them all.
    #[cfg(test)]
    pub(crate) const EACH: [Status; 6] = [
        Status::Ok,
        Status::HttpError(503),
        Status::StreamError,
        Status::ClientAbort,
        Status::UpstreamReset,
        Status::Truncated,
    ];

    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }

    /// The `status` label value: `ok`, `http_<code>`, `stream_error`, `client_abort`,
    /// `upstream_reset`, `truncated`.
    pub fn label(self) -> std::borrow::Cow<'static, str> {
        match self {
            Status::Ok => "ok".into(),
            Status::HttpError(code) => format!("http_{code}").into(),
            Status::StreamError => "stream_error".into(),
            Status::ClientAbort => "client_abort".into(),
            Status::UpstreamReset => "upstream_reset".into(),
            Status::Truncated => "truncated".into(),
        }
    }
}

/// A token count, and whether it is exact. A count made by counting token-bearing events
/// (no `usage`, no per-event token ids) is a lower bound: one event can carry many tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenCount {
    pub value: u32,
    pub exact: bool,
}

/// The gap before one token-bearing event and how many tokens that event carried.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ItlGap {
    pub seconds: f64,
    pub tokens: u32,
}

/// One request, as measured.
///
/// A latency is `None` when the source cannot observe it: a non-streaming response has no
/// TTFT or TPOT, a request that failed before its first token has no TTFT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    pub source: Source,
    /// The configured target's name.
    pub target: String,
    /// The model as the request or response named it; empty when neither did.
    pub model: String,
    pub status: Status,
    /// Wall-clock Unix seconds when the request ended (the window it belongs to).
    pub finished_unix: f64,
    /// Request received → response ended.
    pub e2e_s: f64,
    /// Request received → first token-bearing event.
    pub ttft_s: Option<f64>,
    /// `(t_last − t_first) / (N − 1)`. Computed from a lower-bound N it is an upper bound;
    /// see `output_tokens.exact`.
    pub tpot_s: Option<f64>,
    pub prompt_tokens: Option<u32>,
    pub output_tokens: Option<TokenCount>,
    /// One entry per token-bearing event after the first (tap only; spans have none).
    pub itl: Vec<ItlGap>,
    /// The engine's own split of the request's time, where its span or (tap) its response
    /// carried one: llama.cpp's `timings`, vLLM's per-request `metrics`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineTimes>,
    /// The engine's id for the request: the response's `id` (`chatcmpl-…`) as the tap read
    /// it from the first event or body that had one, or a span's `gen_ai.request.id`. It
    /// pairs a record with the engine's own view of the request (its span, its log, a
    /// simulator's ground truth); the store does not keep it. At most [`MAX_REQUEST_ID`]
    /// bytes; a longer or non-string id is left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Longest request id a record carries (vLLM's ids are under 80 bytes).
pub const MAX_REQUEST_ID: usize = 256;

/// `id` as a record's request id: trimmed, non-empty and at most [`MAX_REQUEST_ID`] bytes.
pub fn request_id(id: &str) -> Option<String> {
    let id = id.trim();
    (!id.is_empty() && id.len() <= MAX_REQUEST_ID).then(|| id.to_string())
}

/// Where the engine says a request's time went: waiting to be scheduled, prefill, decode.
/// Seconds; `None` where the engine did not say.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct EngineTimes {
    /// Queued → first scheduled: a span's `gen_ai.latency.time_in_queue`, vLLM's
    /// `queue_time_ms`; llama.cpp reports none.
    pub queue_s: Option<f64>,
    /// First scheduled → first token: a span's `gen_ai.latency.time_in_model_prefill`,
    /// vLLM's `time_to_first_token_ms`, llama.cpp's `timings.prompt_ms`.
    pub prefill_s: Option<f64>,
    /// First token → last token: a span's `gen_ai.latency.time_in_model_decode`, vLLM's
    /// `generation_time_ms`, llama.cpp's `timings.predicted_ms`.
    pub decode_s: Option<f64>,
}

impl RequestRecord {
    /// Whether the TPOT value is exact (N known exactly, or no TPOT at all).
    pub fn tpot_exact(&self) -> bool {
        self.tpot_s.is_none() || self.output_tokens.is_some_and(|n| n.exact)
    }
}
