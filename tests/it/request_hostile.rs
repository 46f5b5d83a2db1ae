//! The request path against hostile clients, through the real `goodput run` binary with a
//! tap and the OTLP receiver in front of the simulated vLLM (which answers a model it does
//! not serve with 404, as vLLM does): model names of megabytes leave /metrics and the
//! daemon's memory small, and clients naming bogus models cannot take the series the real
//! model is measured in (docs/limits.md#request-store, docs/request-path.md#which-series-a-record-joins).

use crate::common;
use crate::support::PATIENCE;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goodput_sim::config::{Profile, SimConfig};
use goodput_sim::live::{self, LiveHandle};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

struct Daemon {
    child: Child,
    port: u16,
    tap: u16,
    otlp: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// A line of /proc/PID/status in KiB (`VmHWM`, `VmRSS`).
    fn memory_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in {status}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let client = client(Duration::from_secs(30));
        let r = client.get(format!("http://127.0.0.1:{}{path}", self.port)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

async fn free_port() -> u16 {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port()
}

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(timeout).build().unwrap()
}

/// The simulated vLLM, posting a span per finished request to `otlp`.
async fn simulator(otlp: u16) -> (LiveHandle, String) {
    let cfg = SimConfig::profile(Profile::None);
    let model = cfg.model.clone();
    let opts = live::Options {
        otlp_traces_endpoint: Some(format!("http://127.0.0.1:{otlp}/v1/traces")),
        ..live::Options::speed(1.0)
    };
    (live::serve_with(cfg, "127.0.0.1:0".parse().unwrap(), opts).await.unwrap(), model)
}

/// `goodput run` with one target (the simulator), its tap and the OTLP receiver; returns
/// once the target has been scraped and evaluated, so the daemon knows the model it serves.
async fn start(sim: &LiveHandle, otlp: u16, model: &str) -> Daemon {
    let (port, tap) = (free_port().await, free_port().await);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}
evaluation_interval: 300ms
scrape: {{interval: 300ms, timeout: 250ms}}
windows: [1m, 5m]
otlp: {{listen: '127.0.0.1:{otlp}'}}
targets:
  - name: llama
    url: http://{sim}/metrics
    tap: {{listen: '127.0.0.1:{tap}', upstream: 'http://{sim}'}}
slos: [{{name: fast, ttft: 2s, objective: 0.9}}]
",
            sim = sim.addr
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let d = Daemon { child, port, tap, otlp, _dir: dir };
    let began = Instant::now();
    loop {
        let ready = client(Duration::from_secs(2))
            .get(format!("http://127.0.0.1:{port}/api/v1/report"))
            .send()
            .await
            .ok()
            .filter(|r| r.status() == 200);
        if let Some(r) = ready {
            let report: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap_or_default();
            let models = report["targets"][0]["models"].as_array().cloned().unwrap_or_default();
            if models.iter().any(|m| m["model"] == model) {
                return d;
            }
        }
        assert!(began.elapsed() < PATIENCE, "the daemon never evaluated the simulator's model");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn chat(model: &str) -> String {
    json!({"model": model, "messages": [{"role": "user", "content": "hello"}], "stream": true, "max_tokens": 4})
        .to_string()
}

/// POSTs a chat completion through the tap; the HTTP status.
async fn through_tap(d: &Daemon, body: String) -> u16 {
    let r = client(Duration::from_secs(30))
        .post(format!("http://127.0.0.1:{}/v1/chat/completions", d.tap))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the tap answers");
    let status = r.status().as_u16();
    let _ = r.bytes().await;
    status
}

/// One vLLM-shaped LLM request span naming `model`, as OTLP/JSON.
fn span_export(model: &str) -> String {
    let end = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
            "name": "llm_request",
            "kind": 2,
            "startTimeUnixNano": (end - 1_000_000_000).to_string(),
            "endTimeUnixNano": end.to_string(),
            "attributes": [
                {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.1}},
                {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.0}},
                {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "4"}},
                {"key": "gen_ai.response.model", "value": {"stringValue": model}}
            ]
        }]}]
    }]})
    .to_string()
}

/// /metrics once `until` holds of its samples (or after [`PATIENCE`], to fail on what it
/// shows).
async fn metrics_when(d: &Daemon, mut until: impl FnMut(&str) -> bool) -> String {
    let began = Instant::now();
    loop {
        let (status, body) = d.get("/metrics").await;
        assert_eq!(status, 200);
        if until(&body) || began.elapsed() > PATIENCE {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn value(body: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    common::sample_value(&common::metrics_samples(body), name, labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn megabyte_model_names_leave_metrics_and_memory_small() {
    goodput::scrape::install_crypto_provider();
    let otlp = free_port().await;
    let (sim, model) = simulator(otlp).await;
    let d = start(&sim, otlp, &model).await;

    // One span naming a 3 MB model, two tap requests naming a 900 KB one (the engine: 404).
    let huge = "m".repeat(3 << 20);
    let r = client(Duration::from_secs(30))
        .post(format!("http://127.0.0.1:{}/v1/traces", d.otlp))
        .header("content-type", "application/json")
        .body(span_export(&huge))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let big = "b".repeat(900 << 10);
    for _ in 0..2 {
        assert_eq!(through_tap(&d, chat(&big)).await, 404, "the engine does not serve it");
    }

    // Once the three records are counted, under the daemon's own words for them.
    let mut largest = 0;
    let body = metrics_when(&d, |b| {
        largest = largest.max(b.len());
        b.len() < 2 << 20 && b.contains("reason=\"model_too_long\"} 3")
    })
    .await;
    for path in ["/metrics", "/api/v1/report", "/"] {
        let (status, b) = d.get(path).await;
        assert_eq!(status, 200, "{path}");
        largest = largest.max(b.len());
        assert!(b.len() < 2 << 20, "{path} is {} bytes", b.len());
    }
    assert!(largest < 2 << 20, "/metrics reached {largest} bytes");
    let hwm = d.memory_kib("VmHWM:");
    assert!(hwm < 300 << 10, "the daemon's peak RSS is {} MiB", hwm >> 10);

    // No model series of its own: both requests are counted under model="".
    let rejected = value(&body, "llm_slo_request_store_rejected_total", &[("reason", "model_too_long")]);
    assert_eq!(rejected, Some(3.0));
    let unattributed = |source, status| {
        value(&body, "llm_slo_requests_total", &[("model", ""), ("source", source), ("status", status)])
    };
    assert_eq!((unattributed("tap", "http_404"), unattributed("otlp", "ok")), (Some(2.0), Some(1.0)));
    common::promtool_check_metrics(&body);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bogus_models_cannot_take_the_real_models_series() {
    goodput::scrape::install_crypto_provider();
    let otlp = free_port().await;
    let (sim, model) = simulator(otlp).await;
    let d = start(&sim, otlp, &model).await;

    // 70 requests naming a model the engine does not serve, more than a target's series.
    for i in 0..70 {
        assert_eq!(through_tap(&d, chat(&format!("bogus-{i}"))).await, 404);
    }
    let total = |body: &str, model: &str, source: &str, status: &str| {
        value(body, "llm_slo_requests_total", &[("model", model), ("source", source), ("status", status)])
    };
    let body = metrics_when(&d, |b| total(b, "", "tap", "http_404") == Some(70.0)).await;
    assert_eq!(total(&body, "", "tap", "http_404"), Some(70.0), "every refusal is still counted");

    // Then the real model: measured exactly, by the tap and by the engine's spans.
    for _ in 0..5 {
        assert_eq!(through_tap(&d, chat(&model)).await, 200);
    }
    let body =
        metrics_when(&d, |b| total(b, &model, "tap", "ok") == Some(5.0) && total(b, &model, "otlp", "ok") == Some(5.0))
            .await;
    assert_eq!(total(&body, &model, "tap", "ok"), Some(5.0), "the tap's series of the real model");
    assert_eq!(total(&body, &model, "otlp", "ok"), Some(5.0), "the spans' series of the real model");
    let samples = common::metrics_samples(&body);
    let bogus = samples.iter().filter(|(_, l, _)| l.get("model").is_some_and(|m| m.starts_with("bogus-"))).count();
    assert_eq!(bogus, 0, "no series names a bogus model");
    let rejected = |reason| value(&body, "llm_slo_request_store_rejected_total", &[("reason", reason)]);
    assert_eq!(rejected("unknown_model"), Some(70.0));
    for source in ["tap", "otlp"] {
        let finished = [("model", model.as_str()), ("source", source), ("window", "1m"), ("outcome", "finished")];
        assert_eq!(value(&body, "llm_slo_window_requests", &finished), Some(5.0), "its exact {source} window");
    }
    sim.shutdown().await;
}
