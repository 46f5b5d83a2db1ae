//! The OTLP receiver over plain HTTP: an OTLP/JSON export (hex ids, int64 as strings)
//! becomes records; malformed, oversized, gzip-bombed and wrongly typed bodies are answered
//! 400/413/415 as the OTLP/HTTP spec says, and the daemon keeps serving; a taken
//! `otlp.listen` fails the start with an error that names it. /metrics, with the receiver's
//! counters, passes `promtool check metrics`.

use crate::common;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use common::{get, metrics_samples};
use goodput::config;
use goodput::daemon::{self, Daemon, clock::SystemClock};
use goodput::request::{Status, TokenCount};
use serde_json::{Value, json};

const BODY_LIMIT: usize = 64 * 1024;

async fn start(extra: &str) -> Daemon {
    goodput::scrape::install_crypto_provider();
    let down = common::Fixture::refused_addr().await;
    let yaml = format!(
        "listen: 127.0.0.1:0\notlp: {{listen: 127.0.0.1:0, body_limit: 64KiB}}\n{extra}targets:\n  \
         - {{name: a, url: 'http://{down}/metrics', traces: {{service_name: sglang-a}}}}\n  \
         - {{name: b, url: 'http://{down}/metrics'}}\n"
    );
    let cfg = config::from_str(&yaml, "otlp.yaml").expect("valid config").config;
    goodput::seen::keep_records();
    daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().unwrap()
}

/// POSTs `body` to /v1/traces; (status, content type, body).
async fn post(d: &Daemon, headers: &[(&str, &str)], body: Vec<u8>) -> (u16, String, Vec<u8>) {
    let url = format!("http://{}/v1/traces", d.otlp_addr().unwrap());
    let mut req = client().post(url).body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.expect("the receiver answers");
    let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (r.status().as_u16(), ct, r.bytes().await.unwrap().to_vec())
}

/// An SGLang-style root span in OTLP/JSON: latencies as doubles, tokens as int64 strings.
fn json_export(service: &str, ttft: f64) -> Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "sglang"}, "spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
            "name": "Req 1",
            "kind": 2,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001500000000",
            "attributes": [
                {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": ttft}},
                {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5}},
                {"key": "gen_ai.latency.time_in_model_decode", "value": {"doubleValue": 1.2}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "25"}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": 900}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "deepseek-v3"}},
                {"key": "gen_ai.response.finish_reasons", "value": {"arrayValue": {"values": [{"stringValue": "error"}]}}}
            ],
            "status": {}
        }]}]
    }]})
}

fn value(body: &str, name: &str, label: (&str, &str)) -> f64 {
    metrics_samples(body)
        .iter()
        .find(|(n, l, _)| n == name && l.get(label.0).map(String::as_str) == Some(label.1))
        .map(|s| s.2)
        .unwrap_or_else(|| panic!("{name}{{{}={:?}}} missing", label.0, label.1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_exports_become_records_and_unknown_services_are_partially_rejected() {
    let d = start("").await;
    let (status, ct, body) =
        post(&d, &[("content-type", "application/json")], json_export("sglang-a", 0.3).to_string().into_bytes()).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer, json!({}), "a full success has no partialSuccess");

    let records = d.otlp_records();
    assert_eq!(records.len(), 1, "{records:#?}");
    let r = &records[0];
    assert_eq!((r.target.as_str(), r.model.as_str(), r.status), ("a", "deepseek-v3", Status::StreamError));
    assert_eq!((r.ttft_s, r.e2e_s, r.finished_unix), (Some(0.3), 1.5, 1_700_000_001.5));
    assert_eq!(r.tpot_s, Some(1.2 / 24.0));
    assert_eq!((r.prompt_tokens, r.output_tokens), (Some(900), Some(TokenCount { value: 25, exact: true })));

    // Two targets: a service no target names is rejected, and the exporter is told why.
    let (status, _, body) =
        post(&d, &[("content-type", "application/json")], json_export("vllm", 0.4).to_string().into_bytes()).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let rejected = &answer["partialSuccess"]["rejectedSpans"];
    assert!(rejected == &json!(1) || rejected == &json!("1"), "{answer}");
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(message.contains("traces.service_name"), "{message}");
    assert_eq!(d.otlp_records().len(), 1);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_the_spec_status_and_the_receiver_keeps_serving() {
    let d = start("").await;
    let proto = [("content-type", "application/x-protobuf")];
    let json_ct = [("content-type", "application/json")];

    // Not protobuf: 400 with a protobuf google.rpc.Status (field 1 = code 3).
    let (status, ct, body) = post(&d, &proto, vec![0xff, 0xff, 0xff, 0xff]).await;
    assert_eq!((status, ct.as_str()), (400, "application/x-protobuf"));
    assert_eq!(&body[..2], &[0x08, 0x03], "google.rpc.Status{{code: INVALID_ARGUMENT}}: {body:?}");
    // Not JSON: 400 with a JSON Status.
    let (status, _, body) = post(&d, &json_ct, b"{\"resourceSpans\": [".to_vec()).await;
    assert_eq!(status, 400);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["code"], json!(3), "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("ExportTraceServiceRequest"), "{answer}");
    // Another content type, or none: 415, saying what to send.
    let (status, _, body) = post(&d, &[("content-type", "text/plain")], b"hello".to_vec()).await;
    assert_eq!(status, 415);
    assert!(String::from_utf8_lossy(&body).contains("application/x-protobuf"));
    let (status, _, _) = post(&d, &[], b"hello".to_vec()).await;
    assert_eq!(status, 415);
    let (status, _, _) =
        post(&d, &[("content-type", "application/json"), ("content-encoding", "br")], b"{}".to_vec()).await;
    assert_eq!(status, 415);
    // Over otlp.body_limit on the wire, and a small gzip body that inflates past it.
    let (status, _, _) = post(&d, &proto, vec![0u8; BODY_LIMIT + 1]).await;
    assert_eq!(status, 413);
    let mut gz = flate2_encoder();
    gz.write_all(&vec![b' '; BODY_LIMIT * 4]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 4096, "the bomb is small on the wire: {}", bomb.len());
    let (status, _, _) = post(&d, &[("content-type", "application/json"), ("content-encoding", "gzip")], bomb).await;
    assert_eq!(status, 413);
    // Wrong method, wrong path.
    let otlp = d.otlp_addr().unwrap();
    assert_eq!(get(&format!("http://{otlp}/v1/traces")).await.0, 405);
    assert_eq!(get(&format!("http://{otlp}/v1/metrics")).await.0, 404);

    // Still serving: a good gzip JSON export is recorded, and /metrics counts every answer.
    let mut gz = flate2_encoder();
    gz.write_all(json_export("sglang-a", 0.25).to_string().as_bytes()).unwrap();
    let (status, _, _) =
        post(&d, &[("content-type", "application/json"), ("content-encoding", "gzip")], gz.finish().unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(d.otlp_records().iter().map(|r| r.ttft_s).collect::<Vec<_>>(), vec![Some(0.25)]);
    let (status, body) = get(&format!("http://{}/metrics", d.local_addr())).await;
    assert_eq!(status, 200);
    let exports = |result| value(&body, "llm_slo_otlp_export_requests_total", ("result", result));
    assert_eq!(
        (exports("ok"), exports("undecodable"), exports("unsupported_media_type"), exports("too_large")),
        (1.0, 2.0, 3.0, 2.0)
    );
    assert_eq!(value(&body, "llm_slo_otlp_spans_received_total", ("target", "a")), 1.0);
    assert_eq!(value(&body, "llm_slo_otlp_spans_received_total", ("target", "b")), 0.0);
    // The receiver's families pass the ecosystem's linter with the rest of /metrics.
    common::promtool_check_metrics(&body);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_otlp_address_fails_the_start_and_names_the_key() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let yaml = format!(
        "listen: 127.0.0.1:0\notlp: {{listen: '{addr}'}}\ntargets: [{{name: a, url: 'http://127.0.0.1:1/metrics'}}]\n"
    );
    let cfg = config::from_str(&yaml, "otlp.yaml").unwrap().config;
    let err = daemon::start(cfg, Arc::new(SystemClock)).await.err().expect("the start fails");
    let text = err.to_string();
    assert!(text.contains("otlp.listen") && text.contains(&addr.to_string()), "{text}");
}

fn flate2_encoder() -> flate2::write::GzEncoder<Vec<u8>> {
    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default())
}
