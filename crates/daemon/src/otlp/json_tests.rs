//! The JSON walk against the opentelemetry-proto types' own OTLP/JSON decoding.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde_json::json;

use super::*;
use crate::otlp::route::{service_name, span_input};

fn export(service: &str, spans: serde_json::Value) -> serde_json::Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "host.name", "value": {"arrayValue": {"values": [{"stringValue": "h"}]}}},
            {"key": "service.name", "value": {"stringValue": service}}
        ]},
        "scopeSpans": [{"scope": {"name": "vllm"}, "spans": spans}]
    }]})
}

fn llm_span() -> serde_json::Value {
    json!({
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "llm_request",
        "kind": 2, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000001500000000u64,
        "attributes": [
            {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.25}},
            {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5, "stringValue": null}},
            {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "25"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": -900}},
            {"value": {"stringValue": "llama"}, "key": "gen_ai.request.model"},
            {"key": "gen_ai.response.finish_reasons", "value": {"arrayValue": {"values": [{"stringValue": "stop"}, {"boolValue": true}]}}},
            {"key": "gen_ai.empty"},
            {"key": "http.route", "value": {"stringValue": "/v1/chat/completions"}}
        ],
        "events": [{"name": "x", "attributes": []}],
        "status": {"code": 2, "message": "boom"}
    })
}

#[test]
fn spans_walked_match_what_the_mapping_reads_from_the_proto_types() {
    let body = export("vllm", json!([llm_span(), {"name": "GET /health"}])).to_string();
    let mut batch = Batch::new(1 << 20);
    let seen = walk(body.as_bytes(), &mut batch).unwrap();
    assert!(seen.camel && !seen.snake);
    let theirs: ExportTraceServiceRequest = serde_json::from_str(&body).unwrap();
    let rs = &theirs.resource_spans[0];
    let want = span_input(&rs.scope_spans[0].spans[0]);
    let got: Vec<(Option<&str>, &SpanInput)> = batch.spans().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, service_name(rs.resource.as_ref()));
    assert_eq!(got[0].1.attributes.len(), want.attributes.len());
    for (k, v) in &want.attributes {
        match (v, &got[0].1.attributes[k]) {
            (AttrValue::Double(a), AttrValue::Double(b)) => assert!(a == b || (a.is_nan() && b.is_nan()), "{k}"),
            (a, b) => assert_eq!(a, b, "{k}"),
        }
    }
    assert_eq!((got[0].1.name.as_str(), got[0].1.error), (want.name.as_str(), want.error));
    assert_eq!((got[0].1.start_unix_nano, got[0].1.end_unix_nano), (want.start_unix_nano, want.end_unix_nano));
    assert_eq!(batch.not_llm, 1);
}

#[test]
fn special_doubles_are_read_as_protobuf_json_writes_them() {
    let body = export(
        "v",
        json!([{"attributes": [
            {"key": "gen_ai.latency.e2e", "value": {"doubleValue": "Infinity"}},
            {"key": "gen_ai.latency.x", "value": {"doubleValue": "NaN"}}
        ]}]),
    )
    .to_string();
    let mut batch = Batch::new(1 << 20);
    walk(body.as_bytes(), &mut batch).unwrap();
    let span = batch.spans().next().unwrap().1;
    assert_eq!(span.attributes["gen_ai.latency.e2e"], AttrValue::Double(f64::INFINITY));
    assert!(matches!(span.attributes["gen_ai.latency.x"], AttrValue::Double(d) if d.is_nan()));
}

#[test]
fn a_resource_after_its_spans_names_them() {
    let body = json!({"resourceSpans": [{
        "scopeSpans": [{"spans": [llm_span()]}],
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "late"}}]}
    }]})
    .to_string();
    let mut batch = Batch::new(1 << 20);
    walk(body.as_bytes(), &mut batch).unwrap();
    assert_eq!(batch.spans().next().unwrap().0, Some("late"));
}

#[test]
fn malformed_exports_are_errors_and_snake_case_is_noticed() {
    for bad in [
        r#"{"resourceSpans": 7}"#,
        r#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}"#,
        r#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}"#,
        r#"[]"#,
        r#"{"resourceSpans": []} x"#,
        "not json",
    ] {
        assert!(walk(bad.as_bytes(), &mut Batch::new(1 << 20)).is_err(), "{bad}");
    }
    let seen = walk(br#"{"resource_spans": [{"scope_spans": []}]}"#, &mut Batch::new(1 << 20)).unwrap();
    assert!(seen.snake && !seen.camel);
    let seen = walk(br#"{"resourceSpans": null}"#, &mut Batch::new(1 << 20)).unwrap();
    assert!(seen.camel);
}
