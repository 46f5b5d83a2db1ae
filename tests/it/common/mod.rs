//! Shared helpers for the daemon tests: real HTTP fixture servers on 127.0.0.1, a vLLM-like
//! exposition whose values are known by construction, and a /metrics reader.
//!
//! It reaches `crate::tools` (tests/it/tools), a module of every binary that includes it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::routing::get as route_get;

/// A fixture server; `served` counts the requests it answered.
pub struct Fixture {
    pub addr: SocketAddr,
    served: Arc<AtomicU64>,
}

impl Fixture {
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    async fn start(router: Router, served: Arc<AtomicU64>) -> Fixture {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Fixture { addr, served }
    }

    /// Serves `body(n)` for the n-th request (n = 1, 2, …).
    pub async fn counting(body: impl Fn(u64) -> String + Send + Sync + 'static) -> Fixture {
        let served = Arc::new(AtomicU64::new(0));
        let (s, body) = (served.clone(), Arc::new(body));
        let router = Router::new().route(
            "/metrics",
            route_get(move || {
                let n = s.fetch_add(1, Ordering::Relaxed) + 1;
                let text = body(n);
                async move { text }
            }),
        );
        Fixture::start(router, served).await
    }

    /// Answers after `delay` (longer than any scrape timeout in the tests).
    pub async fn hanging(delay: Duration) -> Fixture {
        let served = Arc::new(AtomicU64::new(0));
        let s = served.clone();
        let router = Router::new().route(
            "/metrics",
            route_get(move || {
                s.fetch_add(1, Ordering::Relaxed);
                async move {
                    tokio::time::sleep(delay).await;
                    "late 1\n"
                }
            }),
        );
        Fixture::start(router, served).await
    }

    /// Always the same status and body.
    pub async fn fixed(status: u16, body: &'static str) -> Fixture {
        let served = Arc::new(AtomicU64::new(0));
        let s = served.clone();
        let status = StatusCode::from_u16(status).unwrap();
        let router = Router::new().route(
            "/metrics",
            route_get(move || {
                s.fetch_add(1, Ordering::Relaxed);
                async move { (status, body) }
            }),
        );
        Fixture::start(router, served).await
    }

    /// Streams `total` bytes of valid-looking exposition in 64 KiB chunks, without a
    /// Content-Length, counting into `streamed` every byte it hands to the socket.
    pub async fn huge(total: u64, streamed: Arc<AtomicU64>) -> Fixture {
        let served = Arc::new(AtomicU64::new(0));
        let s = served.clone();
        let router = Router::new().route(
            "/metrics",
            route_get(move || {
                s.fetch_add(1, Ordering::Relaxed);
                let streamed = streamed.clone();
                let line = "padding_metric{i=\"0123456789\"} 1\n";
                let chunk: Bytes = line.repeat(65536 / line.len()).into();
                let stream = futures_util::stream::unfold(0u64, move |sent| {
                    let chunk = chunk.clone();
                    let streamed = streamed.clone();
                    async move {
                        if sent >= total {
                            return None;
                        }
                        streamed.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        Some((Ok::<_, std::io::Error>(chunk.clone()), sent + chunk.len() as u64))
                    }
                });
                async move { Body::from_stream(stream) }
            }),
        );
        Fixture::start(router, served).await
    }

    /// An address on which nothing listens (bound, then released).
    pub async fn refused_addr() -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    }
}

/// The TTFT bucket bounds of [`vllm_body`].
pub const TTFT_LE: [&str; 5] = ["0.05", "0.1", "0.25", "0.5", "+Inf"];

/// A vLLM v1 exposition after `n` equal steps of traffic. Each step finishes 10 requests:
/// 5 with TTFT in (0.05, 0.1] and 5 in (0.1, 0.25]; 1000 prompt and 500 generated tokens.
/// Every counter is proportional to `n`, so any window's histogram_quantile depends only
/// on those shares: q=0.9 → 0.1 + 0.15·(0.9·10 − 5)/5 = 0.22.
pub fn vllm_body(n: u64, process_start: f64) -> String {
    let m = r#"engine="0",model_name="m""#;
    let n = n as f64;
    let mut s = String::new();
    s.push_str("# HELP vllm:num_requests_running Number of requests in model execution batches.\n");
    s.push_str("# TYPE vllm:num_requests_running gauge\n");
    s.push_str(&format!("vllm:num_requests_running{{{m}}} 3.0\n"));
    s.push_str("# TYPE vllm:num_requests_waiting gauge\n");
    s.push_str(&format!("vllm:num_requests_waiting{{{m}}} 0.0\n"));
    s.push_str("# TYPE vllm:kv_cache_usage_perc gauge\n");
    s.push_str(&format!("vllm:kv_cache_usage_perc{{{m}}} 0.8\n"));
    s.push_str("# TYPE vllm:prompt_tokens_total counter\n");
    s.push_str(&format!("vllm:prompt_tokens_total{{{m}}} {:?}\n", 1000.0 * n));
    s.push_str("# TYPE vllm:generation_tokens_total counter\n");
    s.push_str(&format!("vllm:generation_tokens_total{{{m}}} {:?}\n", 500.0 * n));
    s.push_str("# TYPE vllm:request_success_total counter\n");
    for (reason, share) in [("stop", 10.0), ("length", 0.0), ("abort", 0.0), ("error", 0.0)] {
        s.push_str(&format!(
            "vllm:request_success_total{{engine=\"0\",finished_reason=\"{reason}\",model_name=\"m\"}} {:?}\n",
            share * n
        ));
    }
    s.push_str("# TYPE vllm:time_to_first_token_seconds histogram\n");
    for (le, c) in TTFT_LE.iter().zip([0.0, 5.0, 10.0, 10.0, 10.0]) {
        s.push_str(&format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"{le}\"}} {:?}\n", c * n));
    }
    s.push_str(&format!("vllm:time_to_first_token_seconds_sum{{{m}}} {:?}\n", 1.2 * n));
    s.push_str(&format!("vllm:time_to_first_token_seconds_count{{{m}}} {:?}\n", 10.0 * n));
    s.push_str("# TYPE vllm:e2e_request_latency_seconds histogram\n");
    for (le, c) in [("1.0", 0.0), ("2.5", 10.0), ("+Inf", 10.0)] {
        s.push_str(&format!("vllm:e2e_request_latency_seconds_bucket{{{m},le=\"{le}\"}} {:?}\n", c * n));
    }
    s.push_str(&format!("vllm:e2e_request_latency_seconds_sum{{{m}}} {:?}\n", 20.0 * n));
    s.push_str(&format!("vllm:e2e_request_latency_seconds_count{{{m}}} {:?}\n", 10.0 * n));
    s.push_str("# TYPE process_start_time_seconds gauge\n");
    s.push_str(&format!("process_start_time_seconds {process_start:?}\n"));
    s
}

/// A daemon clock running `speed` times faster than the wall clock from a Unix instant, so a
/// test covers hours of windows in seconds.
pub struct FastClock {
    real0: std::time::Instant,
    virt0_ms: i64,
    speed: f64,
}

impl FastClock {
    /// Starts now, at `virt0_ms` (Unix ms).
    pub fn start(virt0_ms: i64, speed: f64) -> FastClock {
        FastClock { real0: std::time::Instant::now(), virt0_ms, speed }
    }
}

impl goodput::daemon::clock::Clock for FastClock {
    fn now_ms(&self) -> i64 {
        self.virt0_ms + (self.real0.elapsed().as_secs_f64() * self.speed * 1000.0) as i64
    }
}

/// GET with a short timeout; (status, body).
pub async fn get(url: &str) -> (u16, String) {
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().unwrap();
    let r = client.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

/// Every sample of a /metrics body, parsed with the project's own parser.
pub fn metrics_samples(body: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    let e = goodput::parse::parse(body.as_bytes(), &goodput::parse::Limits::default())
        .unwrap_or_else(|err| panic!("/metrics does not parse: {err}\n{body}"));
    e.samples
        .iter()
        .map(|s| {
            let labels = e.labels_of(s).iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            (s.name.to_string(), labels, s.value)
        })
        .collect()
}

/// The value of the first of `samples` named `name` whose labels include every one of
/// `labels`.
pub fn sample_value(
    samples: &[(String, HashMap<String, String>, f64)],
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|s| s.2)
}

/// `promtool check metrics` on a /metrics body: it must exit 0 and print nothing, i.e. the
/// body parses and the linter has no finding (docs/metrics.md). Returns false (after a
/// note) when promtool is missing and not required (crate::tools).
pub fn promtool_check_metrics(body: &str) -> bool {
    let Some(promtool) = crate::tools::require("promtool") else { return false };
    use std::io::Write;
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool");
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let code = out.status.code();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let findings: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        code == Some(0) && findings.is_empty(),
        "promtool check metrics exited {code:?} with {} lines:\n{}\n--- body ---\n{body}",
        findings.len(),
        findings.iter().take(40).copied().collect::<Vec<_>>().join("\n")
    );
    true
}
