//! Helpers for the simulator's OpenAI API tests: start a live simulator with a ground-truth
//! file, talk raw HTTP/1.1 to it, run the `openai` SDK driver (tests/py/sim_api.py), and
//! read the truth back.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::PATIENCE;

use goodput_sim::SimConfig;
use goodput_sim::config::Profile;
use goodput_sim::live::{self, LiveHandle, Options};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A config with no load of its own.
pub fn quiet() -> SimConfig {
    SimConfig::profile(Profile::None)
}

/// Starts a live simulator at 1× speed writing its truth into `dir`.
pub async fn start(cfg: SimConfig, dir: &Path, otlp: Option<String>) -> (LiveHandle, PathBuf) {
    let truth = dir.join("requests.jsonl");
    let opts = Options { truth: Some(truth.clone()), otlp_traces_endpoint: otlp, ..Options::speed(1.0) };
    let h = live::serve_with(cfg, "127.0.0.1:0".parse().expect("addr"), opts).await.expect("serve");
    (h, truth)
}

/// One HTTP/1.1 exchange on a fresh connection: status, lower-cased head, de-chunked body.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    // A dropped connection (an injected server abort) ends the read early; keep what came.
    let _ = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf)).await.expect("response within 30 s");
    let text = String::from_utf8(buf).expect("utf8");
    let (head, raw) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let head = head.to_ascii_lowercase();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = if head.contains("transfer-encoding: chunked") { dechunk(raw) } else { raw.to_string() };
    (status, head, body)
}

/// The payload of a chunked body, as far as it got.
pub fn dechunk(mut raw: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = raw.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..rest.len().min(n)]);
            break;
        }
        out.push_str(&rest[..n]);
        raw = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Whether the chunked body ended with its terminating zero-size chunk.
pub fn chunked_complete(head_and_body: &str) -> bool {
    head_and_body.ends_with("0\r\n\r\n")
}

/// The `data:` payloads of an SSE body, in order.
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).map(str::to_string).collect()
}

pub fn read_truth(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a whole JSON line")).collect()
}

/// Waits (up to [`PATIENCE`]) until the truth has a line with this `request_id`.
pub async fn truth_for(path: &Path, request_id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = read_truth(path).into_iter().find(|v| v["request_id"] == request_id) {
            return v;
        }
        assert!(Instant::now() < deadline, "no truth line for {request_id}: {:?}", read_truth(path));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs tests/py/sim_api.py SCENARIO with `py` (from `tools::python_clients`) against the
/// simulator and returns what it printed.
pub async fn python(py: &Path, h: &LiveHandle, scenario: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/sim_api.py");
    let (py, base, scenario) = (py.to_path_buf(), h.api_base(), scenario.to_string());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(py).arg(script).arg(base).arg(scenario).output().expect("run python")
    })
    .await
    .expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the openai SDK driver failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {stderr}"))
}

pub fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

pub fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} is not a count in {v}"))
}
