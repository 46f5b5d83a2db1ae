//! Engine request spans → [`RequestRecord`]s (docs/request-path.md, "Engine traces (OTLP)").
//!
//! vLLM (`--otlp-traces-endpoint`) emits one `llm_request` span per finished request; TRT-LLM
//! copies its attributes and SGLang's root request span carries the same latency names. The
//! span holds TTFT, E2E, queue, prefill and decode time and the token counts, so the joint
//! TTFT∧TPOT∧E2E verdict for that request is exact, which histograms can only bracket.
//!
//! The input is neutral (attribute name → value, times in Unix nanoseconds): the daemon
//! decodes OTLP and fills a [`SpanInput`], so the core carries no protobuf.
//!
//! Choices, each documented in docs/request-path.md:
//! - a span is an LLM request span when it has at least one `gen_ai.latency.*` attribute;
//!   others are [`NotRecorded::NotLlmRequest`];
//! - token counts: the current semantic-convention names (`gen_ai.usage.input_tokens`,
//!   `output_tokens`) win over the old ones (`prompt_tokens`, `completion_tokens`);
//! - TPOT = decode time / (output tokens − 1), `None` with fewer than two tokens: such a
//!   request has no gap between tokens to time (vLLM's own histogram records 0 for it);
//! - a latency attribute that is present but not a finite, non-negative number makes the
//!   whole span [`NotRecorded::Invalid`]: a record judged on a guessed value would be worse
//!   than a counted gap.

use std::collections::BTreeMap;

use super::attribute::model_at_entry;
use super::record::{EngineTimes, RequestRecord, Source, Status, TokenCount};

/// An OTLP attribute value, reduced to what the mapping reads.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Array(Vec<AttrValue>),
    /// Bytes, key-value lists and empty values: carried so that a wrong type is reported
    /// as wrong rather than as absent.
    Other,
}

/// One span as the mapping sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanInput {
    pub name: String,
    /// Unix nanoseconds; 0 when the span did not say.
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    /// The span's status is ERROR.
    pub error: bool,
    pub attributes: BTreeMap<String, AttrValue>,
}

/// Why a span gave no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRecorded {
    /// No `gen_ai.latency.*` attribute: some other span (HTTP handler, scheduler slice, an
    /// application's own span) sent to the same endpoint.
    NotLlmRequest,
    /// An LLM request span whose values cannot be used; the text names the attribute.
    Invalid(&'static str),
}

pub const TTFT: &str = "gen_ai.latency.time_to_first_token";
pub const E2E: &str = "gen_ai.latency.e2e";
pub const QUEUE: &str = "gen_ai.latency.time_in_queue";
pub const PREFILL: &str = "gen_ai.latency.time_in_model_prefill";
pub const DECODE: &str = "gen_ai.latency.time_in_model_decode";
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const PROMPT_TOKENS: &str = "gen_ai.usage.prompt_tokens";
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const COMPLETION_TOKENS: &str = "gen_ai.usage.completion_tokens";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const REQUEST_ID: &str = "gen_ai.request.id";
const LATENCY_PREFIX: &str = "gen_ai.latency.";

impl SpanInput {
    /// Whether this is an engine's per-request span.
    pub fn is_llm_request(&self) -> bool {
        self.attributes.range(LATENCY_PREFIX.to_string()..).next().is_some_and(|(k, _)| k.starts_with(LATENCY_PREFIX))
    }

    /// A latency in seconds: `Ok(None)` when absent, an error naming it when it is not a
    /// finite non-negative number.
    fn seconds(&self, key: &'static str) -> Result<Option<f64>, NotRecorded> {
        let v = match self.attributes.get(key) {
            None => return Ok(None),
            Some(AttrValue::Double(v)) => *v,
            Some(AttrValue::Int(v)) => *v as f64,
            Some(_) => return Err(NotRecorded::Invalid(key)),
        };
        if v.is_finite() && v >= 0.0 { Ok(Some(v)) } else { Err(NotRecorded::Invalid(key)) }
    }

    /// A token count under its current name or, failing that, its old one.
    fn tokens(&self, current: &'static str, old: &'static str) -> Result<Option<u32>, NotRecorded> {
        let (key, v) = match (self.attributes.get(current), self.attributes.get(old)) {
            (Some(v), _) => (current, v),
            (None, Some(v)) => (old, v),
            (None, None) => return Ok(None),
        };
        let n = match v {
            AttrValue::Int(n) => u32::try_from(*n).ok(),
            // JSON exporters may write a whole number as a double.
            AttrValue::Double(d) if d.fract() == 0.0 && *d >= 0.0 && *d <= f64::from(u32::MAX) => Some(*d as u32),
            _ => None,
        };
        n.map(Some).ok_or(NotRecorded::Invalid(key))
    }

    fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(AttrValue::Str(s)) if !s.trim().is_empty() => Some(s.trim()),
            _ => None,
        }
    }

    /// How the request ended: an `abort` finish reason is the client's (vLLM aborts a
    /// request whose client went away), an `error` one or an ERROR span status is the
    /// engine's, anything else (`stop`, `length`, `tool_calls`, …) completed.
    fn status(&self) -> Status {
        let mut reasons = Vec::new();
        match self.attributes.get(FINISH_REASONS) {
            Some(AttrValue::Str(s)) => reasons.push(s.as_str()),
            Some(AttrValue::Array(items)) => reasons.extend(items.iter().filter_map(|v| match v {
                AttrValue::Str(s) => Some(s.as_str()),
                _ => None,
            })),
            _ => {}
        }
        let has = |r: &str| reasons.iter().any(|x| x.trim().eq_ignore_ascii_case(r));
        if has("abort") {
            Status::ClientAbort
        } else if has("error") || self.error {
            Status::StreamError
        } else {
            Status::Ok
        }
    }
}

/// The record an LLM request span describes. `target` is left empty for the caller (who
/// knows which target the span's service is), and `model` is empty when the span names
/// none (vLLM's does not: the caller fills in the target's model).
pub fn record_from_span(span: &SpanInput) -> Result<RequestRecord, NotRecorded> {
    if !span.is_llm_request() {
        return Err(NotRecorded::NotLlmRequest);
    }
    let ttft_s = span.seconds(TTFT)?;
    let queue_s = span.seconds(QUEUE)?;
    let prefill_s = span.seconds(PREFILL)?;
    let decode_s = span.seconds(DECODE)?;
    let prompt_tokens = span.tokens(INPUT_TOKENS, PROMPT_TOKENS)?;
    let output = span.tokens(OUTPUT_TOKENS, COMPLETION_TOKENS)?;

    let (start, end) = (span.start_unix_nano, span.end_unix_nano);
    let ns = |t: u64| t as f64 / 1e9;
    // The span's own duration stands in for E2E only where the engine did not say; vLLM's
    // span starts at arrival and ends when it is emitted, at the request's end.
    let e2e_s = match span.seconds(E2E)? {
        Some(v) => v,
        None if start > 0 && end >= start => ns(end - start),
        None => return Err(NotRecorded::Invalid(E2E)),
    };
    let finished_unix = match (start, end) {
        (_, end) if end > 0 && end >= start => ns(end),
        (start, _) if start > 0 => ns(start) + e2e_s,
        _ => return Err(NotRecorded::Invalid("end_time_unix_nano")),
    };
    let tpot_s = match (decode_s, output) {
        (Some(d), Some(n)) if n >= 2 => Some(d / f64::from(n - 1)),
        _ => None,
    };
    let engine = (queue_s.is_some() || prefill_s.is_some() || decode_s.is_some()).then_some(EngineTimes {
        queue_s,
        prefill_s,
        decode_s,
    });
    let model = model_at_entry(span.text(RESPONSE_MODEL).or_else(|| span.text(REQUEST_MODEL)).unwrap_or_default());
    Ok(RequestRecord {
        source: Source::Otlp,
        target: String::new(),
        model,
        status: span.status(),
        finished_unix,
        e2e_s,
        ttft_s,
        tpot_s,
        prompt_tokens,
        // The engine counts the tokens it generated: exact.
        output_tokens: output.map(|value| TokenCount { value, exact: true }),
        itl: Vec::new(),
        engine,
        request_id: span.text(REQUEST_ID).and_then(super::record::request_id),
    })
}

#[cfg(test)]
mod tests;
