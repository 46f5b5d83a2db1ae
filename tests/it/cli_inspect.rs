//! `goodput inspect` end to end: the JSON contract, files and URLs, and parse errors.

use crate::tools;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

fn goodput(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_goodput")).args(args).output().unwrap()
}

fn fixture() -> std::path::PathBuf {
    tools::real_fixture("vllm-v1-0.13ish-dynamo-worker-full.prom")
}

fn check_contract(v: &serde_json::Value) {
    assert_eq!(v["engine"], "vllm");
    assert_eq!(v["families"], 119);
    assert_eq!(v["samples"], 474);
    let m = &v["models"]["Qwen/Qwen3-0.6B"];
    assert_eq!(m["ttft"]["count"], 2.0);
    let buckets = m["ttft"]["buckets"].as_array().unwrap();
    assert_eq!(buckets.last().unwrap()[0], "+Inf");
    assert_eq!(buckets[0][0], 0.001);
    assert_eq!(m["generation_tokens"], 600.0);
    assert_eq!(m["requests_finished{reason=\"length\"}"], 2.0);
    let absent: Vec<&str> = v["absent"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert!(absent.contains(&"spec_drafts"));
    assert!(!absent.contains(&"tpot"));
    assert!(v["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn json_contract_from_a_file() {
    let out = goodput(&["inspect", fixture().to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_contract(&serde_json::from_slice(&out.stdout).unwrap());
}

#[test]
fn json_contract_from_a_url() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let body = std::fs::read(fixture()).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut req = [0u8; 4096];
        let _ = conn.read(&mut req).unwrap();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).unwrap();
        conn.write_all(&body).unwrap();
    });
    let url = format!("http://{addr}/metrics");
    let out = goodput(&["inspect", &url, "--format", "json"]);
    server.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_contract(&serde_json::from_slice(&out.stdout).unwrap());
}

#[test]
fn text_summary_names_the_engine_and_what_is_absent() {
    let out = goodput(&["inspect", fixture().to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("engine: vllm\n"), "{text}");
    assert!(text.contains("model \"Qwen/Qwen3-0.6B\""));
    assert!(text.contains("absent (the engine does not expose these): spec_drafts"));
}

#[test]
fn a_malformed_file_exits_1_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.prom");
    std::fs::write(&path, "vllm:ok 1\nvllm:bad{model_name=\"x\" 1\n").unwrap();
    let out = goodput(&["inspect", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("{}:2: ", path.display())), "{err}");
}

#[test]
fn an_unknown_engine_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.prom");
    std::fs::write(&path, "node_load1 0.5\n").unwrap();
    let out = goodput(&["inspect", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("set `engine:`"));
}

/// Answers one request on 127.0.0.1 with `content_type` and `body`; returns the address.
fn serve_once(content_type: &'static str, body: &'static str) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut req = [0u8; 4096];
        let _ = conn.read(&mut req).unwrap();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).unwrap();
        conn.write_all(body.as_bytes()).unwrap();
    });
    (addr, server)
}

#[test]
fn an_unreachable_url_says_why() {
    // A port free now, with nothing listening on it: the connection is refused.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = goodput(&["inspect", &format!("http://127.0.0.1:{port}/metrics")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.to_lowercase().contains("connection refused"), "the cause, not only the client's message: {err}");
}

#[test]
fn a_json_answer_is_named_as_such_with_the_metrics_path() {
    // An engine's API answer (Content-Type application/json), at a path other than /metrics.
    let (addr, server) = serve_once("application/json", r#"{"object": "list", "data": []}"#);
    let out = goodput(&["inspect", &format!("http://{addr}/v1/models")]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("is JSON (Content-Type application/json), not a Prometheus exposition"), "{err}");
    assert!(err.contains(&format!("try http://{addr}/metrics")), "{err}");
    assert!(!err.contains(":1:"), "not a parse error at line 1: {err}");

    // JSON labelled as text still starts with `[`.
    let (addr, server) = serve_once("text/plain", "[1, 2]\n");
    let out = goodput(&["inspect", &format!("http://{addr}/metrics")]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("is JSON, not a Prometheus exposition"), "{err}");
}

#[test]
fn an_engine_without_histograms_is_read_and_the_request_path_named() {
    let path = tools::real_fixture("llamacpp-server-0c1e570.prom");
    let out = goodput(&["inspect", path.to_str().unwrap(), "--format", "json", "--model", "tiny"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["engine"], "llamacpp");
    assert_eq!(v["models"]["tiny"]["prompt_tokens"], 1536.0 + 57.0);
    assert_eq!(v["models"]["tiny"]["decode_calls"], 368.0);
    let notes = v["notes"].as_array().unwrap();
    assert!(notes.len() == 1 && notes[0].as_str().unwrap().contains("need the request path"), "{notes:?}");
    let out = goodput(&["inspect", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.starts_with("engine: llamacpp\n"), "{text}");
    assert!(text.contains("\nnote: llamacpp exposes no latency histograms"), "{text}");
    // Engines with histograms have no note.
    let out = goodput(&["inspect", fixture().to_str().unwrap(), "--format", "json"]);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["notes"], serde_json::json!([]));
}
