//! One export's spans through routing, mapping and the inbox, without a socket.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

use super::*;
use crate::config;
use crate::request::{Source, Status};

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}

fn llm_span(ttft: f64, tokens: i64) -> Span {
    Span {
        name: "llm_request".into(),
        start_time_unix_nano: 1_000_000_000_000_000_000,
        end_time_unix_nano: 1_000_000_002_000_000_000,
        attributes: vec![
            kv("gen_ai.latency.time_to_first_token", Value::DoubleValue(ttft)),
            kv("gen_ai.latency.e2e", Value::DoubleValue(2.0)),
            kv("gen_ai.latency.time_in_model_decode", Value::DoubleValue(1.0)),
            kv("gen_ai.usage.completion_tokens", Value::IntValue(tokens)),
        ],
        ..Default::default()
    }
}

fn from(service: &str, spans: Vec<Span>) -> ResourceSpans {
    ResourceSpans {
        resource: Some(Resource {
            attributes: vec![kv("service.name", Value::StringValue(service.into()))],
            ..Default::default()
        }),
        scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
        ..Default::default()
    }
}

fn ingest(yaml: &str, capacity: usize) -> (Ingest, Inbox) {
    let c = config::from_str(yaml, "t.yaml").unwrap().config;
    let inbox = Inbox::new(capacity);
    let names = c.targets.iter().map(|t| t.name.clone()).collect();
    let state = Ingest {
        routes: Routes::new(&c.targets),
        inbox: inbox.clone(),
        stats: Arc::new(OtlpStats::new(names)),
        body_limit: 1 << 20,
        decoding: Arc::new(Semaphore::new(1)),
        logged: Mutex::default(),
        #[cfg(feature = "test-hooks")]
        seen: crate::seen::Seen::default(),
    };
    (state, inbox)
}

/// The export as the receiver decodes it from protobuf.
fn batch(req: &ExportTraceServiceRequest) -> Batch {
    use prost::Message;
    decode::decode(decode::Encoding::Protobuf, &req.encode_to_vec(), 1 << 20).unwrap()
}

const TWO: &str = "targets:\n  - {name: a, url: 'http://127.0.0.1:1/metrics', model: llama}\n  - {name: b, url: 'http://127.0.0.1:2/metrics', traces: {service_name: vllm-b}}\n";

#[test]
fn spans_become_records_of_their_target_and_the_rest_is_counted_by_reason() {
    let (s, inbox) = ingest(TWO, 100);
    let mut other = llm_span(0.1, 3);
    other.attributes.retain(|kv| !kv.key.starts_with("gen_ai.latency"));
    let mut invalid = llm_span(-1.0, 3);
    invalid.name = "bad".into();
    let req = ExportTraceServiceRequest {
        resource_spans: vec![
            from("a", vec![llm_span(0.1, 11), other]),
            from("vllm-b", vec![llm_span(0.2, 1), invalid]),
            from("stranger", vec![llm_span(0.3, 5)]),
        ],
    };
    let out = s.ingest(&batch(&req));
    assert_eq!(out, Outcome { unknown_service: 1, invalid: 1, ..Outcome::default() });
    assert_eq!(out.rejected(), 2);
    assert!(out.message().contains("1 from a service.name no target takes"), "{}", out.message());

    let got = inbox.drain();
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].target.as_str(), got[0].model.as_str()), ("a", "llama"), "the target's model fills in");
    assert_eq!((got[0].ttft_s, got[0].tpot_s, got[0].e2e_s), (Some(0.1), Some(0.1), 2.0));
    assert_eq!((got[0].source, got[0].status), (Source::Otlp, Status::Ok));
    assert_eq!((got[1].target.as_str(), got[1].model.as_str()), ("b", "b"));
    assert_eq!(got[1].tpot_s, None, "one token: no TPOT");

    assert_eq!((s.stats.received_total(0), s.stats.received_total(1)), (1, 1));
    assert_eq!(s.stats.dropped_total(Dropped::NotLlmRequest), 1);
    assert_eq!(s.stats.dropped_total(Dropped::UnknownService), 1);
    assert_eq!(s.stats.dropped_total(Dropped::Invalid), 1);
    assert_eq!(s.stats.dropped_total(Dropped::InboxFull), 0);
}

#[test]
fn a_full_inbox_rejects_and_counts() {
    let (s, inbox) = ingest(TWO, 1);
    let out =
        s.ingest(&batch(&ExportTraceServiceRequest { resource_spans: vec![from("a", vec![llm_span(0.1, 2); 3])] }));
    assert_eq!(out, Outcome { inbox_full: 2, ..Outcome::default() });
    assert!(out.message().contains("2 dropped because the request inbox was full"));
    assert_eq!(inbox.drain().len(), 1);
    assert_eq!(s.stats.dropped_total(Dropped::InboxFull), 2);
}

#[test]
fn an_export_without_llm_spans_is_accepted_without_a_message() {
    let (s, _) = ingest(TWO, 10);
    let plain = Span { name: "GET /health".into(), ..Default::default() };
    let out = s.ingest(&batch(&ExportTraceServiceRequest { resource_spans: vec![from("stranger", vec![plain])] }));
    assert_eq!((out.rejected(), out.message()), (0, String::new()));
    assert_eq!(s.stats.dropped_total(Dropped::NotLlmRequest), 1);
    assert_eq!(s.stats.dropped_total(Dropped::UnknownService), 0, "a span that is no LLM request is not unmapped");
}

#[test]
fn spans_from_the_future_and_past_the_budget_are_rejected_and_said_so() {
    let (s, inbox) = ingest(TWO, 100);
    let mut ahead = llm_span(0.1, 2);
    let soon = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    ahead.end_time_unix_nano = soon + 60_000_000_000;
    let req = ExportTraceServiceRequest { resource_spans: vec![from("a", vec![ahead, llm_span(0.1, 2)])] };
    let out = s.ingest(&batch(&req));
    assert_eq!(out, Outcome { future: 1, ..Outcome::default() });
    assert!(out.message().contains("1 ending more than 10 s in the future"), "{}", out.message());
    assert_eq!(inbox.drain().len(), 1);
    assert_eq!(s.stats.dropped_total(Dropped::Future), 1);

    use prost::Message;
    let many = ExportTraceServiceRequest { resource_spans: vec![from("a", vec![llm_span(0.1, 2); 100])] };
    let small = decode::decode(decode::Encoding::Protobuf, &many.encode_to_vec(), 4096).unwrap();
    assert!(small.len() < 100 && small.len() + small.over_budget as usize == 100, "{}", small.len());
    let out = s.ingest(&small);
    assert_eq!(out.over_budget, 100 - small.len() as u64);
    assert!(out.message().contains("otlp.body_limit"), "{}", out.message());
    assert_eq!(s.stats.dropped_total(Dropped::OverBudget), out.over_budget);
}
