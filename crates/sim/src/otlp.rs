//! vLLM-shaped request spans, sent as OTLP/HTTP JSON (docs/simulator.md#otlp-spans).
//!
//! vLLM emits one `llm_request` span per finished request (kind SERVER, from arrival to
//! finish) with the latency and usage attributes of its `SpanAttributes`; the simulator
//! sends the same span with the very values its ground truth holds. Spans are batched
//! (every second, or 64 at a time) and posted by one task; a full queue drops spans and a
//! failed post loses its batch. Both are counted and logged, never fatal: tracing must not
//! slow the engine down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::error::RunError;

/// One attribute value, as OTLP JSON spells it (`intValue` is a string: int64).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Value {
    #[serde(rename = "doubleValue")]
    Double(f64),
    #[serde(rename = "intValue")]
    Int(String),
    #[serde(rename = "stringValue")]
    Str(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyValue {
    pub key: &'static str,
    pub value: Value,
}

/// One finished request's span.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// The caller's span from a `traceparent` header, as vLLM links it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent_span_id: String,
    pub name: &'static str,
    /// SPAN_KIND_SERVER.
    pub kind: u8,
    /// Decimal strings (fixed64 in OTLP JSON).
    pub start_time_unix_nano: String,
    pub end_time_unix_nano: String,
    pub attributes: Vec<KeyValue>,
}

/// What a span says about one request; seconds are model seconds, as in the truth.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTimes {
    pub request_id: String,
    pub model: String,
    pub arrival_unix: f64,
    pub finish_unix: f64,
    pub ttft: Option<f64>,
    pub e2e: f64,
    pub queue: f64,
    pub prefill: f64,
    pub decode: f64,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub max_tokens: u32,
}

/// Whole seconds and the fraction apart: multiplying the sum by 1e9 would lose the
/// last digits to f64 rounding.
fn nanos(unix_s: f64) -> String {
    let s = unix_s.max(0.0);
    let whole = s.trunc() as u64;
    let frac = ((s - s.trunc()) * 1e9).round() as u64;
    format!("{}", whole * 1_000_000_000 + frac)
}

/// `traceparent: 00-<32 hex trace>-<16 hex span>-<flags>` → (trace id, parent span id).
pub fn parse_traceparent(v: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts.as_slice() {
        [version, trace, span, flags]
            if hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2) && *version != "ff" =>
        {
            let (trace, span) = (trace.to_ascii_lowercase(), span.to_ascii_lowercase());
            let zero = |s: &str| s.bytes().all(|b| b == b'0');
            (!zero(&trace) && !zero(&span)).then_some((trace, span))
        }
        _ => None,
    }
}

/// A well-mixed 64-bit value (splitmix64), for ids that must not repeat.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The span vLLM would emit for `t`. `key` makes the ids (the simulator's seed and the
/// request's id); `parent` is a caller's trace context.
pub fn span(t: &RequestTimes, key: (u64, u64), parent: Option<&(String, String)>) -> Span {
    let (seed, id) = key;
    let (trace_id, parent_span_id) = match parent {
        Some((trace, span)) => (trace.clone(), span.clone()),
        None => (format!("{:016x}{:016x}", mix(seed ^ 0x7ace), mix(id ^ mix(seed))), String::new()),
    };
    let d = |key, v: f64| KeyValue { key, value: Value::Double(v) };
    let i = |key, v: u32| KeyValue { key, value: Value::Int(v.to_string()) };
    let s = |key, v: &str| KeyValue { key, value: Value::Str(v.to_string()) };
    let mut attributes = vec![s("gen_ai.response.model", &t.model), s("gen_ai.request.id", &t.request_id)];
    // vLLM sets request parameters only when truthy.
    attributes.push(i("gen_ai.request.max_tokens", t.max_tokens));
    attributes.push(i("gen_ai.request.n", 1));
    attributes.push(i("gen_ai.usage.prompt_tokens", t.prompt_tokens));
    attributes.push(i("gen_ai.usage.completion_tokens", t.completion_tokens));
    attributes.push(d("gen_ai.latency.time_in_queue", t.queue));
    if let Some(ttft) = t.ttft {
        attributes.push(d("gen_ai.latency.time_to_first_token", ttft));
    }
    attributes.push(d("gen_ai.latency.e2e", t.e2e));
    attributes.push(d("gen_ai.latency.time_in_model_prefill", t.prefill));
    attributes.push(d("gen_ai.latency.time_in_model_decode", t.decode));
    attributes.push(d("gen_ai.latency.time_in_model_inference", t.prefill + t.decode));
    Span {
        trace_id,
        span_id: format!("{:016x}", mix(id ^ mix(seed ^ 0x5ba7))),
        parent_span_id,
        name: "llm_request",
        kind: 2,
        start_time_unix_nano: nanos(t.arrival_unix),
        end_time_unix_nano: nanos(t.finish_unix),
        attributes,
    }
}

#[derive(Serialize)]
struct Scope {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScopeSpans<'a> {
    scope: Scope,
    spans: &'a [Span],
}

#[derive(Serialize)]
struct Resource {
    attributes: Vec<KeyValue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    resource: Resource,
    scope_spans: [ScopeSpans<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Export<'a> {
    resource_spans: [ResourceSpans<'a>; 1],
}

/// An `ExportTraceServiceRequest` in OTLP JSON.
pub fn encode(service: &str, spans: &[Span]) -> String {
    let req = Export {
        resource_spans: [ResourceSpans {
            resource: Resource {
                attributes: vec![KeyValue { key: "service.name", value: Value::Str(service.to_string()) }],
            },
            scope_spans: [ScopeSpans { scope: Scope { name: "vllm.llm_engine" }, spans }],
        }],
    };
    serde_json::to_string(&req).unwrap_or_default()
}

/// `URL` as given, or with `/v1/traces` added when it has no path (as the OTel SDKs do
/// with a base endpoint).
pub fn traces_url(endpoint: &str) -> Result<String, RunError> {
    let rest = endpoint.strip_prefix("http://").ok_or_else(|| RunError::OtlpEndpoint(endpoint.to_string()))?;
    Ok(match rest.find('/') {
        Some(i) if rest[i..].len() > 1 => endpoint.to_string(),
        _ => format!("http://{}/v1/traces", rest.trim_end_matches('/')),
    })
}

/// Counts of spans: posted and accepted, lost in failed posts, dropped on a full queue.
#[derive(Debug, Default)]
pub struct Stats {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
}

const BATCH: usize = 64;
const QUEUE: usize = 4096;

/// The sending side; cheap to call from under the simulator's lock.
pub struct Exporter {
    tx: mpsc::Sender<Span>,
    pub stats: Arc<Stats>,
}

impl Exporter {
    /// Starts the batching task on the current runtime; it flushes and ends when `stop` is set.
    pub fn start(
        endpoint: &str,
        service: &str,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(Exporter, JoinHandle<()>), RunError> {
        let url = traces_url(endpoint)?;
        // reqwest's TLS backend needs a process-wide crypto provider even for plain http.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client =
            reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(RunError::OtlpClient)?;
        let (tx, mut rx) = mpsc::channel::<Span>(QUEUE);
        let stats = Arc::new(Stats::default());
        let task_stats = stats.clone();
        let service = service.to_string();
        let task = tokio::spawn(async move {
            let mut batch: Vec<Span> = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let (more, stopping) = tokio::select! {
                    s = rx.recv() => match s {
                        Some(s) => { batch.push(s); (batch.len() < BATCH, false) }
                        None => (false, true),
                    },
                    _ = tick.tick() => (false, false),
                    _ = stop.wait_for(|s| *s) => (false, true),
                };
                if stopping {
                    while let Ok(s) = rx.try_recv() {
                        batch.push(s);
                    }
                }
                if !more && !batch.is_empty() {
                    post(&client, &url, &service, &mut batch, &task_stats).await;
                }
                if stopping {
                    break;
                }
            }
        });
        Ok((Exporter { tx, stats }, task))
    }

    /// Queues a span; drops it (counted) when the queue is full.
    pub fn send(&self, span: Span) {
        if self.tx.try_send(span).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn post(client: &reqwest::Client, url: &str, service: &str, batch: &mut Vec<Span>, stats: &Stats) {
    for chunk in batch.chunks(BATCH) {
        let body = encode(service, chunk);
        let n = chunk.len() as u64;
        let res = client.post(url).header("content-type", "application/json").body(body).send().await;
        match res {
            Ok(r) if r.status().is_success() => {
                stats.sent.fetch_add(n, Ordering::Relaxed);
            }
            Ok(r) => {
                stats.failed.fetch_add(n, Ordering::Relaxed);
                tracing::warn!(status = %r.status(), url, spans = n, "the OTLP receiver refused a batch of spans");
            }
            Err(e) => {
                stats.failed.fetch_add(n, Ordering::Relaxed);
                tracing::warn!(error = %e, url, spans = n, "cannot post spans to the OTLP receiver");
            }
        }
    }
    batch.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times() -> RequestTimes {
        RequestTimes {
            request_id: "chatcmpl-1".into(),
            model: "m".into(),
            arrival_unix: 1_767_225_600.25,
            finish_unix: 1_767_225_601.5,
            ttft: Some(0.125),
            e2e: 1.25,
            queue: 0.01,
            prefill: 0.1,
            decode: 1.0,
            prompt_tokens: 20,
            completion_tokens: 11,
            max_tokens: 64,
        }
    }

    #[test]
    fn spans_are_otlp_json_with_vllms_attributes() {
        let body = encode("vllm", &[span(&times(), (1, 7), None)]);
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        let rs = &v["resourceSpans"][0];
        assert_eq!(rs["resource"]["attributes"][0]["key"], "service.name");
        assert_eq!(rs["resource"]["attributes"][0]["value"]["stringValue"], "vllm");
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["name"], "llm_request");
        assert_eq!(s["kind"], 2);
        assert_eq!(s["traceId"].as_str().map(str::len), Some(32));
        assert_eq!(s["spanId"].as_str().map(str::len), Some(16));
        assert!(s.get("parentSpanId").is_none());
        assert_eq!(s["startTimeUnixNano"], "1767225600250000000");
        assert_eq!(s["endTimeUnixNano"], "1767225601500000000");
        let attr = |k: &str| {
            s["attributes"].as_array().and_then(|a| a.iter().find(|x| x["key"] == k)).map(|x| x["value"].clone())
        };
        assert_eq!(attr("gen_ai.latency.time_to_first_token").expect("ttft")["doubleValue"], 0.125);
        let inference = attr("gen_ai.latency.time_in_model_inference").expect("inference")["doubleValue"].as_f64();
        assert!((inference.expect("a number") - 1.1).abs() < 1e-12, "prefill + decode");
        assert_eq!(attr("gen_ai.usage.completion_tokens").expect("tokens")["intValue"], "11");
        assert_eq!(attr("gen_ai.request.id").expect("id")["stringValue"], "chatcmpl-1");
    }

    #[test]
    fn a_traceparent_links_the_span_and_bad_ones_are_ignored() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parent = parse_traceparent(tp).expect("valid");
        let s = span(&times(), (1, 7), Some(&parent));
        assert_eq!(
            (s.trace_id.as_str(), s.parent_span_id.as_str()),
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
        );
        for bad in ["", "00-xyz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        assert_ne!(span(&times(), (1, 7), None).span_id, span(&times(), (1, 8), None).span_id);
    }

    #[test]
    fn endpoint_gets_the_traces_path_only_when_it_has_none() {
        assert_eq!(traces_url("http://127.0.0.1:4318").unwrap(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/").unwrap(), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:1/custom").unwrap(), "http://h:1/custom");
        let err = traces_url("https://h").unwrap_err().to_string();
        assert_eq!(err, r#"--otlp-traces-endpoint must be an http:// URL, got "https://h""#);
    }
}
