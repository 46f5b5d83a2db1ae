//! The OTLP receiver against hostile exporters, through the real `goodput run` binary
//! (docs/limits.md, docs/request-path.md#on-the-wire): connections trickling their bodies
//! cannot lock real exporters out; an export of millions of empty spans costs neither
//! memory nor /metrics' latency; a span from the future is rejected in `partial_success`.

use crate::proc_common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proc_common::{Daemon, client, free_port};
use serde_json::{Value, json};

async fn start(otlp: u16, extra: &str) -> Daemon {
    let down = free_port().await;
    let yaml = format!(
        "otlp: {{listen: '127.0.0.1:{otlp}'{extra}}}\ntargets: [{{name: a, url: 'http://127.0.0.1:{down}/metrics'}}]\n"
    );
    Daemon::start(&yaml, None).await
}

/// POSTs `body` to /v1/traces on a fresh connection: status, Retry-After and body.
async fn export(otlp: u16, content_type: &str, body: Vec<u8>) -> Result<(u16, Option<String>, Vec<u8>), String> {
    let r = client(Duration::from_secs(10))
        .post(format!("http://127.0.0.1:{otlp}/v1/traces"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    Ok((r.status().as_u16(), retry, r.bytes().await.map_err(|e| e.to_string())?.to_vec()))
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// One vLLM-shaped request span ending at `end_ns`, as OTLP/JSON.
fn llm_span_json(end_ns: u128) -> Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "llm_request",
            "startTimeUnixNano": (end_ns - 1_500_000_000).to_string(), "endTimeUnixNano": end_ns.to_string(),
            "attributes": [
                {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.2}},
                {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5}},
                {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "10"}}
            ]
        }]}]
    }]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_bodies_leave_real_exports_answered() {
    let otlp = free_port().await;
    let d = start(otlp, "").await;
    // 64 connections (the receiver's cap) each send a head, then a byte every 4 s.
    let stop = Arc::new(AtomicBool::new(false));
    let mut slow = Vec::new();
    for _ in 0..64 {
        let stop = stop.clone();
        slow.push(std::thread::spawn(move || {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", otlp)) else { return };
            let head = "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n";
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let began = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if began.elapsed().as_millis() % 4000 < 50 && s.write_all(b"\n").is_err() {
                    return;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for i in 0..5 {
        let span = llm_span_json(now_ns()).to_string().into_bytes();
        let asked = Instant::now();
        let (status, _, body) =
            export(otlp, "application/json", span).await.unwrap_or_else(|e| panic!("export {i}: {e}"));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert!(asked.elapsed() < Duration::from_secs(3), "export {i} took {:?}", asked.elapsed());
    }
    let m = d.metrics(Duration::from_secs(5)).await.expect("/metrics");
    // Each real export closed a trickling connection (whose client then gave up) or took
    // the slot one left.
    assert!(m["llm_slo_otlp_connections_closed_total{evicted}"] >= 1.0, "{m:?}");
    assert!(m["llm_slo_otlp_connections"] <= m["llm_slo_otlp_connections_limit"], "{m:?}");
    stop.store(true, Ordering::Relaxed);
    for t in slow {
        t.join().unwrap();
    }
}

/// `ExportTraceServiceRequest` with one resource and scope holding `n` empty spans:
/// 2 bytes of protobuf each.
fn empty_spans(n: usize) -> Vec<u8> {
    fn varint(mut v: usize, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut scope = Vec::with_capacity(2 * n + 8);
    scope.push(0x12); // ResourceSpans.scope_spans
    varint(2 * n, &mut scope);
    for _ in 0..n {
        scope.extend_from_slice(&[0x12, 0x00]); // ScopeSpans.spans, empty
    }
    let mut out = vec![0x0a]; // ExportTraceServiceRequest.resource_spans
    varint(scope.len(), &mut out);
    out.extend_from_slice(&scope);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn millions_of_empty_spans_cost_neither_memory_nor_metrics_latency() {
    let otlp = free_port().await;
    let d = start(otlp, "").await;
    let body = empty_spans(2_097_000);
    assert!(body.len() <= 4 << 20, "{}", body.len());
    let before = d.memory_kib("VmRSS");

    let exports: Vec<_> = (0..8).map(|_| tokio::spawn(export(otlp, "application/x-protobuf", body.clone()))).collect();
    // /metrics stays quick while the exports are decoded.
    let mut slowest = Duration::ZERO;
    while !exports.iter().all(|e| e.is_finished()) {
        let asked = Instant::now();
        d.metrics(Duration::from_secs(10)).await.expect("/metrics");
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut ok = 0;
    for e in exports {
        let (status, retry, body) = e.await.unwrap().expect("every export is answered");
        match status {
            200 => ok += 1,
            429 => assert!(retry.is_some(), "a 429 says when to retry"),
            s => panic!("{s}: {}", String::from_utf8_lossy(&body)),
        }
    }
    assert!(ok >= 1, "no export was decoded");
    let peak = d.memory_kib("VmHWM");
    assert!(peak < before + 96 * 1024, "RSS rose from {before} KiB to a peak of {peak} KiB");
    assert!(slowest < Duration::from_millis(500), "/metrics took up to {slowest:?} while exports were decoded");
    let m = d.metrics(Duration::from_secs(5)).await.expect("/metrics");
    assert_eq!(m["llm_slo_otlp_spans_dropped_total{not_llm_request}"], 2_097_000.0 * ok as f64, "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_from_the_future_is_rejected_in_partial_success() {
    let otlp = free_port().await;
    let d = start(otlp, "").await;
    let hour = 3_600_000_000_000u128;
    let (status, _, body) = export(otlp, "application/json", llm_span_json(now_ns() + hour).to_string().into_bytes())
        .await
        .expect("the receiver answers");
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let rejected = &answer["partialSuccess"]["rejectedSpans"];
    assert!(rejected == &json!(1) || rejected == &json!("1"), "{answer}");
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("future") && message.contains("clock"), "{message}");
    let m = d.metrics(Duration::from_secs(5)).await.expect("/metrics");
    assert_eq!(m["llm_slo_otlp_spans_dropped_total{future}"], 1.0, "{m:?}");
    assert_eq!(m["llm_slo_otlp_spans_received_total{a}"], 0.0, "{m:?}");
}
