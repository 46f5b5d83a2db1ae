//! Scoped SLOs in the live daemon: three vLLM-like engines on 127.0.0.1 serve the very same
//! traffic (`common::vllm_body`), so all of them violate every SLO below equally, and only
//! scope decides which alerts exist. `only-a` is scoped to target `pod-a`, `only-m2` to
//! model `m2` (served by `pod-c`); `pod-b` serves `m` and is in no scope. The latency,
//! burn-rate and divergence alerts must fire for (pod-a, only-a) and (pod-c, only-m2) and
//! for nothing else.
//!
//! The config lists `quantiles: [0.5, 0.9]`, and the TTFT threshold (230 ms) lies between
//! the p90 (220 ms) and the p99 (247 ms): `LLMTTFTAboveSLO` fires only because the daemon
//! evaluates the p99 its rule needs.

use crate::common;
use crate::support::PATIENCE;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Fixture, get, vllm_body};
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};

/// `vllm_body` q=0.99: 0.1 + 0.15·(9.9 − 5)/5; q=0.9 gives 0.22.
const TTFT_P99: f64 = 0.1 + 0.15 * 0.98;

type Alert = (String, String, String, String);

/// (alertname, target, model, slo) of every SLO alert on /api/v1/alerts.
async fn slo_alerts(base: &str) -> BTreeSet<Alert> {
    let (status, body) = get(&format!("{base}/api/v1/alerts")).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("alerts JSON");
    v["data"]["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["labels"]["slo"].is_string())
        .map(|a| {
            let l = |k: &str| a["labels"][k].as_str().unwrap_or_default().to_string();
            (l("alertname"), l("target"), l("model"), l("slo"))
        })
        .collect()
}

fn expected() -> BTreeSet<Alert> {
    let mut out = BTreeSet::new();
    for name in ["LLMTTFTAboveSLO", "LLMErrorBudgetBurnFast", "LLMGoodputDivergence"] {
        for (target, model, slo) in [("pod-a", "m", "only-a"), ("pod-c", "m2", "only-m2")] {
            out.insert((name.to_string(), target.to_string(), model.to_string(), slo.to_string()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_slos_fire_only_on_their_targets_and_models() {
    goodput::scrape::install_crypto_provider();
    let a = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let b = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let c = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0).replace("model_name=\"m\"", "model_name=\"m2\"")).await;
    // Attainment of TTFT ≤ 230 ms is about 0.93 on every engine: a burn of about 0.67
    // against objective 0.9, above the factor 0.5, and below the divergence threshold 0.99.
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 300ms
scrape: {{interval: 500ms, timeout: 400ms}}
windows: [4s]
quantiles: [0.5, 0.9]
slos:
  - {{name: only-a, ttft: 230ms, objective: 0.9, targets: [pod-a]}}
  - {{name: only-m2, ttft: 230ms, objective: 0.9, models: [m2]}}
targets:
  - {{name: pod-a, url: 'http://{}/metrics', engine: vllm}}
  - {{name: pod-b, url: 'http://{}/metrics', engine: vllm}}
  - {{name: pod-c, url: 'http://{}/metrics', engine: vllm}}
alerting:
  rules:
    LLMTTFTAboveSLO: {{for: 0s, window: 4s}}
    LLMTPOTAboveSLO: {{enabled: false}}
    LLMGoodputDivergence: {{for: 0s, window: 4s, threshold: 0.99, throughput_floor: 0}}
    LLMErrorBudgetBurnFast: {{for: 0s, factor: 0.5, long_window: 4s, short_window: 2s, min_requests: 1}}
    LLMErrorBudgetBurnSlow: {{enabled: false}}
",
        a.addr, b.addr, c.addr
    );
    let cfg = config::from_str(&yaml, "scope.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());

    // Wait until every expected alert is there (windows fill in a few seconds).
    let want = expected();
    let deadline = Instant::now() + PATIENCE;
    let mut got = slo_alerts(&base).await;
    while !want.is_subset(&got) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        got = slo_alerts(&base).await;
    }
    assert_eq!(got, want, "the first full set of SLO alerts");
    // A few more evaluations, with the windows full: still nothing out of scope.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(slo_alerts(&base).await, want);
    }

    // The p99 behind LLMTTFTAboveSLO is the evaluated one, although not configured.
    let (_, body) = get(&format!("{base}/api/v1/alerts")).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    for a in v["data"]["alerts"].as_array().unwrap().iter().filter(|a| a["labels"]["alertname"] == "LLMTTFTAboveSLO") {
        let value: f64 = a["value"].as_str().unwrap().parse().unwrap();
        assert!((value - TTFT_P99).abs() < 1e-9, "p99 {value}, want {TTFT_P99}: {a}");
        let summary = a["annotations"]["summary"].as_str().unwrap();
        assert!(summary.contains("p99 TTFT") && summary.contains(": 230ms)"), "{summary}");
    }
    // It is exported like the configured quantiles, on every target, in the configured
    // window (the 2s window only the burn rule reads carries no quantile).
    let (_, report) = get(&format!("{base}/api/v1/report")).await;
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    for t in report["targets"].as_array().unwrap() {
        let windows = t["models"][0]["windows"].as_array().unwrap();
        let window = |w: &str| windows.iter().find(|x| x["window"] == w).unwrap_or_else(|| panic!("{w}: {t}"));
        assert_eq!(window("2s")["latency"].as_array().map(Vec::len), Some(0), "{}", t["target"]);
        let latency = window("4s")["latency"].as_array().unwrap();
        let quantiles: Vec<f64> =
            latency.iter().filter(|q| q["metric"] == "ttft").map(|q| q["quantile"].as_f64().unwrap()).collect();
        assert_eq!(quantiles, [0.5, 0.9, 0.99], "{}", t["target"]);
    }

    tokio::time::timeout(Duration::from_secs(5), d.shutdown()).await.expect("shutdown");
}
