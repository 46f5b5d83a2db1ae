//! The simulator's API on the wire: the exact event sequence of a stream, what an injected
//! fault does to the bytes, the OTLP/JSON spans a receiver gets (with the truth's values),
//! and `goodput simulate --listen … --profile none --truth …` as a user starts it.

use crate::sim_api_common;
use crate::sim_common;
use crate::support::PATIENCE;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use serde_json::Value;
use sim_api_common::{f, http, quiet, read_truth, sse_data, start, truth_for, u};

const CHAT: &str = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_role_tokens_finish_usage_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, truth) = start(quiet(), dir.path(), None).await;
    let (status, head, body) = http(h.addr, "POST", "/v1/chat/completions", CHAT, &[("X-Request-Id", "w1")]).await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/event-stream; charset=utf-8"), "{head}");
    let data = sse_data(&body);
    let json: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).expect("json")).collect();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(json[0]["choices"][0]["delta"], serde_json::json!({"role": "assistant", "content": ""}));
    let usage = &json[json.len() - 1];
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 8);
    let tokens = &json[1..json.len() - 1];
    assert_eq!(tokens.len(), 8, "one chunk per decode step, one token each: {body}");
    assert!(tokens[..7].iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert_eq!(tokens[7]["choices"][0]["finish_reason"], "length", "the last token carries the finish");
    assert!(json.iter().all(|c| c["id"] == "chatcmpl-w1"));
    let t = truth_for(&truth, "chatcmpl-w1").await;
    assert_eq!((u(&t, "output_tokens"), u(&t, "prompt_tokens")), (8, u(&usage["usage"], "prompt_tokens")));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_decode_step_is_one_chunk_with_several_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = quiet();
    (cfg.engine.spec_tokens, cfg.engine.spec_acceptance) = (3, 1.0);
    let (h, _) = start(cfg, dir.path(), None).await;
    let body = CHAT.replace(r#""max_tokens":8"#, r#""max_tokens":17"#);
    let (_, _, body) = http(h.addr, "POST", "/v1/chat/completions", &body, &[]).await;
    let words: Vec<usize> = sse_data(&body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(|t| t.split_whitespace().count()))
        .filter(|n| *n > 0)
        .collect();
    // Prefill gives 1 token, then each step 1 + 3 accepted drafts: 1, 4, 4, 4, 4.
    assert_eq!(words, [1, 4, 4, 4, 4], "{body}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_the_wire_are_vllms() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rate, kind) in [(0, "stream_error"), (1, "server_abort"), (2, "http_500")] {
        let mut cfg = quiet();
        let f = &mut cfg.faults;
        *[&mut f.stream_error_rate, &mut f.server_abort_rate, &mut f.http_error_rate][rate] = 1.0;
        let sub = dir.path().join(kind);
        std::fs::create_dir_all(&sub).expect("dir");
        let (h, truth) = start(cfg, &sub, None).await;
        let (status, _, body) = http(h.addr, "POST", "/v1/chat/completions", CHAT, &[("X-Request-Id", kind)]).await;
        let data = sse_data(&body);
        match kind {
            "stream_error" => {
                assert_eq!(status, 200, "the error comes in-band, under HTTP 200");
                let n = data.len();
                assert_eq!(data[n - 1], "[DONE]");
                assert_eq!(
                    data[n - 2],
                    r#"{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}"#
                );
            }
            "server_abort" => {
                assert_eq!(status, 200);
                assert!(!data.iter().any(|d| d == "[DONE]"), "the connection drops before [DONE]: {body}");
            }
            _ => {
                assert_eq!(status, 500);
                let v: Value = serde_json::from_str(&body).expect("json error body");
                assert_eq!(
                    (v["error"]["type"].as_str(), v["error"]["code"].as_u64()),
                    (Some("InternalServerError"), Some(500))
                );
            }
        }
        let t = truth_for(&truth, &format!("chatcmpl-{kind}")).await;
        assert_eq!(t["fault"], kind);
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_streams() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, _) = start(quiet(), dir.path(), None).await;
    let body = CHAT.replace(r#""max_tokens":8"#, r#""max_tokens":5000"#);
    let mut s = tokio::net::TcpStream::connect(h.addr).await.expect("connect");
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).await.expect("the stream started");
    assert!(n > 0);
    tokio::time::timeout(Duration::from_secs(5), h.shutdown()).await.expect("a 50 s stream does not hold up shutdown");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    assert!(!String::from_utf8_lossy(&rest).contains("[DONE]"), "the cut stream does not claim to be complete");
}

/// A stand-in OTLP/HTTP receiver: every body posted to /v1/traces.
async fn receiver() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let sink = got.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let sink = sink.clone();
            async move {
                let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                sink.lock().expect("lock").push((ct, body));
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), got)
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    let a = span["attributes"].as_array().expect("attributes").iter().find(|a| a["key"] == key);
    &a.unwrap_or_else(|| panic!("no {key} in {span}"))["value"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_spans_carry_the_truths_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, got) = receiver().await;
    let (h, truth) = start(quiet(), dir.path(), Some(endpoint)).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (i, body) in [CHAT, r#"{"prompt":"once upon a time","max_tokens":30}"#].iter().enumerate() {
        let path = if i == 0 { "/v1/chat/completions" } else { "/v1/completions" };
        let (status, _, _) =
            http(h.addr, "POST", path, body, &[("X-Request-Id", &format!("o{i}")), ("traceparent", tp)]).await;
        assert_eq!(status, 200);
    }
    let lines = read_truth(&truth);
    h.shutdown().await; // flushes the last batch
    let got = got.lock().expect("lock").clone();
    assert!(!got.is_empty(), "the receiver got spans");
    let mut spans = Vec::new();
    for (ct, body) in &got {
        assert_eq!(ct, "application/json");
        let v: Value = serde_json::from_str(body).expect("OTLP JSON");
        let rs = &v["resourceSpans"][0];
        assert_eq!(rs["resource"]["attributes"][0]["value"]["stringValue"], "vllm");
        spans.extend(rs["scopeSpans"][0]["spans"].as_array().expect("spans").iter().cloned());
    }
    assert_eq!(spans.len(), 2, "one span per finished request");
    for s in &spans {
        let rid = attr(s, "gen_ai.request.id")["stringValue"].as_str().expect("id");
        let t = lines.iter().find(|l| l["request_id"] == rid).expect("a truth line per span");
        assert_eq!(s["name"], "llm_request");
        assert_eq!(
            (s["traceId"].as_str(), s["parentSpanId"].as_str()),
            (Some("4bf92f3577b34da6a3ce929d0e0e4736"), Some("00f067aa0ba902b7"))
        );
        for (key, field) in [
            ("gen_ai.latency.time_to_first_token", "ttft_s"),
            ("gen_ai.latency.e2e", "e2e_s"),
            ("gen_ai.latency.time_in_queue", "queue_s"),
            ("gen_ai.latency.time_in_model_prefill", "prefill_s"),
            ("gen_ai.latency.time_in_model_decode", "decode_s"),
        ] {
            assert_eq!(attr(s, key)["doubleValue"].as_f64(), Some(f(t, field)), "{key}");
        }
        let inference = attr(s, "gen_ai.latency.time_in_model_inference")["doubleValue"].as_f64().expect("f64");
        assert!((inference - f(t, "prefill_s") - f(t, "decode_s")).abs() < 1e-12);
        assert_eq!(attr(s, "gen_ai.usage.completion_tokens")["intValue"], u(t, "output_tokens").to_string());
        assert_eq!(attr(s, "gen_ai.usage.prompt_tokens")["intValue"], u(t, "prompt_tokens").to_string());
        let ns = |k: &str| s[k].as_str().and_then(|v| v.parse::<u64>().ok()).expect("nanos as a string");
        assert!((ns("startTimeUnixNano") as f64 / 1e9 - f(t, "arrival_s")).abs() < 1e-5);
        assert!((ns("endTimeUnixNano") as f64 / 1e9 - f(t, "finish_s")).abs() < 1e-5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_otlp_endpoint_costs_spans_not_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nobody listens on: bind, note it, close.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let (h, truth) = start(quiet(), dir.path(), Some(format!("http://{dead}"))).await;
    let (status, _, body) = http(h.addr, "POST", "/v1/chat/completions", CHAT, &[]).await;
    assert_eq!(status, 200);
    assert!(body.ends_with("data: [DONE]\n\n"), "served in full: {body}");
    assert_eq!(read_truth(&truth).len(), 1);
    let counts = {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let c = h.otlp_counts().expect("exporting");
            if c.1 > 0 || std::time::Instant::now() > deadline {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert_eq!(counts, (0, 1, 0), "(sent, failed, dropped): the failed post is counted");
    h.shutdown().await;
}

#[test]
fn the_cli_serves_the_api_with_no_load_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let truth = dir.path().join("t.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["simulate", "--listen", "127.0.0.1:0", "--profile", "none", "--fault-stream-error", "1"])
        .arg("--truth")
        .arg(&truth)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start goodput simulate");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("banner");
    let base = line.split_whitespace().find(|w| w.ends_with("/v1")).map(str::to_string);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let result = rt.block_on(async {
        let addr = base.as_deref()?.trim_start_matches("http://").trim_end_matches("/v1").parse().ok()?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, _, before) = http(addr, "GET", "/metrics", "", &[]).await;
        let (status, _, body) = http(addr, "POST", "/v1/chat/completions", CHAT, &[("X-Request-Id", "cli")]).await;
        Some((before, status, body))
    });
    let _ = child.kill();
    let _ = child.wait();
    let (before, status, body) = result.unwrap_or_else(|| panic!("no API address in the banner: {line}"));
    assert_eq!(sim_common::sum(&before, "vllm:request_success_total", &[]), 0.0, "--profile none: no load");
    assert_eq!(status, 200);
    assert!(body.contains(r#""type": "InternalServerError""#), "--fault-stream-error 1 faults every request: {body}");
    let lines = read_truth(&truth);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (lines[0]["request_id"].as_str(), lines[0]["fault"].as_str()),
        (Some("chatcmpl-cli"), Some("stream_error"))
    );
}
