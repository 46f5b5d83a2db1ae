//! One target with many models must not freeze the others. The attack, reproduced: a real daemon with a healthy vLLM-like target and a
//! hostile one on 127.0.0.1 that serves one gauge for 20,000 and then 200,000 distinct
//! `model_name` values. Before the fix the first froze every target's report for tens of
//! seconds and the second kept /readyz at 503. Now the healthy target's results are
//! evaluated every tick throughout, /readyz turns ready, 20,000 models (allowed for this
//! target by its own `max_models`) are evaluated, 200,000 are refused as
//! `too_many_models`, and /metrics and memory stay bounded.
//!
//! The daemon is the real binary in a process of its own: the resident memory it reports
//! and the parse permits its targets share (one per core, process-wide) are its own, not
//! those of the other tests in this binary.

use crate::common;
use crate::proc_common::Daemon;
use crate::support::PATIENCE;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::get as route_get;
use common::{Fixture, get, metrics_samples, vllm_body};
use serde_json::Value;

/// Serves `vllm:num_requests_running` for `models` distinct `model_name` values; the count
/// can be changed while it runs. Bodies are built once per count.
async fn hostile(models: Arc<AtomicUsize>) -> std::net::SocketAddr {
    let cache: Arc<Mutex<HashMap<usize, Bytes>>> = Arc::default();
    let router = Router::new().route(
        "/metrics",
        route_get(move || {
            let n = models.load(Ordering::Relaxed);
            let body = cache
                .lock()
                .unwrap()
                .entry(n)
                .or_insert_with(|| {
                    let mut b = String::from("# TYPE vllm:num_requests_running gauge\n");
                    for i in 0..n {
                        b.push_str(&format!("vllm:num_requests_running{{model_name=\"model-{i:06}\"}} 1\n"));
                    }
                    Bytes::from(b)
                })
                .clone();
            async move { body }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

async fn report(base: &str) -> Value {
    let (status, body) = get(&format!("{base}/api/v1/report")).await;
    assert_eq!(status, 200);
    serde_json::from_str(&body).expect("report is JSON")
}

fn target<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["targets"].as_array().unwrap().iter().find(|t| t["target"] == name).expect("target in report")
}

/// Polls the report until `done` holds, for at most `limit`.
async fn wait_for(base: &str, limit: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let r = report(base).await;
        if done(&r) {
            return r;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}; last report targets: {}", r["targets"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Over `samples` reads one second apart (two evaluation intervals), the healthy target's
/// evaluation instant moves forward every time and is never more than a second behind the
/// report's.
async fn healthy_keeps_updating(base: &str, samples: usize) {
    let mut last = 0;
    for _ in 0..samples {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let r = report(base).await;
        let h = &target(&r, "healthy")["health"];
        assert_eq!(h["up"], true, "{h}");
        let evaluated = h["last_evaluation_ms"].as_i64().expect("healthy target evaluated");
        assert!(evaluated > last, "healthy evaluation stalled at {evaluated} (before: {last})");
        let behind = r["t_ms"].as_i64().unwrap() - evaluated;
        assert!(behind <= 1_000, "healthy results {behind} ms behind the report");
        assert!(h["last_successful_scrape_ms"].as_i64().is_some(), "{h}");
        last = evaluated;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_with_many_models_delays_no_other_target() {
    goodput::scrape::install_crypto_provider();
    let healthy = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let models = Arc::new(AtomicUsize::new(20_000));
    let bomb = hostile(models.clone()).await;
    // The hostile target may bring 50,000 models (the default is 1,000): the 20,000 are
    // evaluated, which is what used to freeze every report; 200,000 are over the limit.
    // The rules that read windows of their own are off, so 5s is the only window and the
    // 20,000 models' report and /metrics stay a few MB that a debug build serves quickly.
    let off = ["GoodputDivergence", "TTFTAboveSLO", "TPOTAboveSLO", "ErrorBudgetBurnFast", "ErrorBudgetBurnSlow"]
        .iter()
        .chain(&["PreemptionsSustained", "QueueGrowing"])
        .map(|r| format!("LLM{r}: {{enabled: false}}"))
        .collect::<Vec<_>>()
        .join(", ");
    let yaml = format!(
        "evaluation_interval: 500ms
scrape: {{interval: 500ms, timeout: 400ms}}
windows: [5s]
alerting: {{rules: {{{off}}}}}
targets:
  - {{name: healthy, url: 'http://{}/metrics', engine: vllm}}
  - {{name: hostile, url: 'http://{bomb}/metrics', engine: vllm, interval: 1s, timeout: 1s, max_models: 50000}}
",
        healthy.addr
    );
    let start = Instant::now();
    let mut d = Daemon::start(&yaml, None).await;
    assert!(start.elapsed() < Duration::from_secs(10), "/readyz not ready 10 s after start:\n{}", d.log());
    let base = format!("http://127.0.0.1:{}", d.port);

    // 20,000 models: evaluated (linear work), while the healthy target moves on each tick.
    wait_for(&base, PATIENCE, "hostile target's 20,000 models evaluated", |r| {
        target(r, "hostile")["models"].as_array().is_some_and(|m| m.len() == 20_000)
    })
    .await;
    healthy_keeps_updating(&base, 4).await;
    let (status, body) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    // Three statistics of one gauge in one window per model: a few MB.
    assert!(body.len() < 16 << 20, "/metrics is {} bytes with 20,000 models", body.len());

    // 200,000 models: over the limit, the hostile target is down with the reason.
    models.store(200_000, Ordering::Relaxed);
    let r = wait_for(&base, PATIENCE, "hostile target down with too_many_models", |r| {
        let h = &target(r, "hostile")["health"];
        h["up"] == false && h["errors_total"]["too_many_models"].as_u64().is_some_and(|n| n >= 1)
    })
    .await;
    let h = &target(&r, "hostile")["health"];
    assert!(h["last_error"].as_str().unwrap().contains("200000 models, more than max_models (50000)"), "{h}");
    assert!(h["last_successful_scrape_ms"].as_i64().is_some(), "the 20,000-model scrapes succeeded: {h}");
    healthy_keeps_updating(&base, 3).await;

    // Nothing of the refused scrapes is kept: once the 5 s window has passed over the last
    // accepted one, the hostile target exports no model and /metrics is small again.
    wait_for(&base, PATIENCE, "hostile target's old models aged out", |r| {
        target(r, "hostile")["models"].as_array().is_some_and(|m| m.is_empty())
    })
    .await;
    let (status, body) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    assert!(body.len() < 256 << 10, "/metrics is {} bytes after the refused scrapes", body.len());
    let samples = metrics_samples(&body);
    let value = |name: &str, target: &str| {
        samples.iter().find(|(n, l, _)| n == name && l.get("target").map(String::as_str) == Some(target)).map(|s| s.2)
    };
    assert_eq!(value("llm_slo_target_up", "hostile"), Some(0.0));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    for t in ["healthy", "hostile"] {
        let scraped = value("llm_slo_target_last_scrape_success_timestamp_seconds", t).expect("last scrape");
        let evaluated = value("llm_slo_target_last_evaluation_timestamp_seconds", t).expect("last evaluation");
        assert!(scraped <= now && evaluated <= now, "{t}: {scraped} {evaluated} after {now}");
        assert!(now - evaluated < 5.0, "{t}: evaluated {:.1} s ago", now - evaluated);
    }
    // The healthy target was scraped a moment ago; the hostile one not since its refusals.
    assert!(now - value("llm_slo_target_last_scrape_success_timestamp_seconds", "healthy").unwrap() < 5.0);
    assert!(now - value("llm_slo_target_last_scrape_success_timestamp_seconds", "hostile").unwrap() >= 5.0);
    let rss = samples.iter().find(|s| s.0 == "process_resident_memory_bytes").expect("RSS").2;
    assert!(rss < 1024.0 * 1024.0 * 1024.0, "resident memory {rss} bytes");
    common::promtool_check_metrics(&body);

    // SAFETY: kill(2) on the PID of a child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) }, 0);
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = d.child.try_wait().expect("wait") {
            break status;
        }
        assert!(stopping.elapsed() < Duration::from_secs(10), "no shutdown 10 s after SIGTERM:\n{}", d.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}:\n{}", d.log());
}
