//! Exact SLO numbers from request records, end to end through a running daemon: records
//! pushed into its inbox (as the tap and the OTLP receiver do) show up on /metrics and
//! /api/v1/report with exactly the attainment, goodput and counters they imply, beside the
//! histogram-derived values, and the alerts judge by them: the engine's histograms say every
//! request met the SLO, the tap says half did, and the burn-rate and TTFT alerts fire.

use crate::common;
use crate::support::PATIENCE;
use crate::tools;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};
use goodput::request::{RequestRecord, Source, Status, TokenCount};

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn record(source: Source, finished: f64, e2e: f64, ttft: Option<f64>, status: Status) -> RequestRecord {
    RequestRecord {
        source,
        target: "llama".into(),
        model: "m".into(),
        status,
        finished_unix: finished,
        e2e_s: e2e,
        ttft_s: ttft,
        tpot_s: ttft.map(|_| 0.02),
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 30, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tap_records_give_exact_values_and_drive_the_alerts() {
    goodput::scrape::install_crypto_provider();
    // Every TTFT the engine's histogram holds is ≤ 250 ms: by /metrics the SLO is met.
    let engine = Fixture::counting(|n| vllm_body(n, 1.7e9)).await;
    // The windows need half their length covered; the tap's first request began 45 s ago,
    // which covers both, while the scrapes have covered a few seconds.
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 300ms
scrape: {{interval: 500ms, timeout: 400ms}}
windows: [30s, 1m]
targets: [{{name: llama, url: 'http://{}/metrics', engine: vllm}}]
slos: [{{name: fast, ttft: 250ms, objective: 0.9}}]
alerting:
  min_window_coverage: 0.5
  rules:
    LLMErrorBudgetBurnFast: {{factor: 2, long_window: 1m, short_window: 30s, min_requests: 5, for: 0s}}
    LLMTTFTAboveSLO: {{window: 30s, for: 1h}}
",
        engine.addr
    );
    let cfg = config::from_str(&yaml, "exact.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());
    let inbox = d.request_inbox();

    // 20 requests through the tap over the last 10 s: 10 fast, 6 slow (TTFT 0.5 s), 4
    // failed with HTTP 500 before their first token. Joint attainment 10/20 = 0.5, burn
    // (1 − 0.5) / 0.1 = 5. Spans saw the 16 that reached the engine, all fast.
    let t = now();
    for i in 0..20 {
        let finished = t - 0.5 * f64::from(i);
        let e2e = if i == 19 { 45.0 } else { 2.0 };
        let (ttft, status) = match i {
            0..10 => (Some(0.1), Status::Ok),
            10..16 => (Some(0.5), Status::Ok),
            _ => (None, Status::HttpError(500)),
        };
        // The tap's record and the span of one request share the response's id.
        let id = Some(format!("cmpl-{i}"));
        assert!(
            inbox.push(RequestRecord { request_id: id.clone(), ..record(Source::Tap, finished, e2e, ttft, status) })
        );
        if status.is_ok() {
            let span = record(Source::Otlp, finished, 1.9, Some(0.08), Status::Ok);
            assert!(inbox.push(RequestRecord { request_id: id, ..span }));
        }
    }

    // Until a tick has taken the records in and two scrapes give the histograms a window.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let report = loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, body) = get(&format!("{base}/api/v1/report")).await;
        assert_eq!(status, 200);
        let r: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let windows = &r["targets"][0]["models"][0]["windows"];
        let has_both = windows.as_array().is_some_and(|ws| {
            ws.iter().any(|w| {
                w["window"] == "1m"
                    && !w["requests"].as_array().unwrap().is_empty()
                    && w["slos"][0]["status"]["status"] == "evaluated"
            })
        });
        if has_both || tokio::time::Instant::now() > deadline {
            break r;
        }
    };
    let window = |label: &str| {
        report["targets"][0]["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == "m")
            .and_then(|m| m["windows"].as_array().unwrap().iter().find(|w| w["window"] == label))
            .unwrap_or_else(|| panic!("no window {label} in {report}"))
            .clone()
    };
    let w = window("1m");
    let tap = &w["requests"][0];
    assert_eq!(tap["source"], "tap", "{w}");
    assert_eq!(w["requests"][1]["source"], "otlp", "{w}");
    assert_eq!((tap["requests"].as_u64(), tap["failed"].as_u64()), (Some(20), Some(4)), "{tap}");
    assert_eq!(tap["basis"], "records");
    let values = &tap["slos"][0]["status"];
    assert_eq!(values["status"], "evaluated", "{tap}");
    for bound in ["lower", "estimate", "upper"] {
        assert_eq!(values["attainment"]["joint"][bound].as_f64(), Some(0.5), "{values}");
        assert_eq!(values["attainment"]["ttft"][bound].as_f64(), Some(10.0 / 16.0), "{values}");
        assert_eq!(values["goodput_requests_per_second"][bound].as_f64(), Some(10.0 / 60.0), "{values}");
    }
    assert!((values["burn_rate"]["estimate"].as_f64().unwrap() - 5.0).abs() < 1e-9, "{values}");
    // The histograms' own value is still there, and says the opposite.
    let hist = &w["slos"][0]["status"]["attainment"]["joint"]["estimate"];
    assert_eq!(hist.as_f64(), Some(1.0), "{w}");
    // The tap against the spans, request by request: 10 gaps of 0.02 and 6 of 0.42, mean
    // 0.17.
    let gap = &tap["ttft_gap"];
    assert_eq!((gap["reference"].as_str(), gap["paired"].as_u64()), (Some("otlp"), Some(16)), "{tap}");
    assert!((gap["mean"].as_f64().unwrap() - 0.17).abs() < 1e-9, "{gap}");
    let path = &report["request_path"];
    assert_eq!(path["inbox"]["accepted"].as_u64(), Some(36), "{path}");

    // /metrics: both sources side by side, the counters, and promtool's approval.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let body = loop {
        let (_, body) = get(&format!("{base}/metrics")).await;
        if body.contains("alertname=\"LLMErrorBudgetBurnFast\"") || tokio::time::Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let samples = metrics_samples(&body);
    let value = |name: &str, labels: &[(&str, &str)]| common::sample_value(&samples, name, labels);
    let joint = |source| {
        value(
            "llm_slo_attainment_ratio",
            &[("window", "1m"), ("source", source), ("clause", "joint"), ("bound", "estimate")],
        )
    };
    assert_eq!((joint("tap"), joint("otlp"), joint("metrics")), (Some(0.5), Some(1.0), Some(1.0)));
    let total = |source, status| value("llm_slo_requests_total", &[("source", source), ("status", status)]);
    assert_eq!(
        (total("tap", "ok"), total("tap", "http_500"), total("otlp", "ok")),
        (Some(16.0), Some(4.0), Some(16.0))
    );
    assert_eq!(total("tap", "client_abort"), Some(0.0), "known statuses start at 0");
    assert_eq!(value("llm_slo_good_requests_total", &[("source", "tap"), ("slo", "fast")]), Some(10.0));
    assert_eq!(
        value("llm_slo_ttft_seconds", &[("window", "1m"), ("source", "tap"), ("q", "0.99")]),
        Some(0.5),
        "nearest-rank p99 of 16 TTFTs"
    );
    assert_eq!(value("llm_slo_request_inbox_records_total", &[("outcome", "accepted")]), Some(36.0));
    assert_eq!(value("llm_slo_request_inbox_records_total", &[("outcome", "dropped")]), Some(0.0));
    let gap = value("llm_slo_ttft_gap_seconds", &[("window", "1m"), ("reference", "otlp"), ("stat", "mean")]);
    assert!(gap.is_some_and(|g| (g - 0.17).abs() < 1e-9), "{gap:?}");

    // The alerts judged by the tap: the budget burns at 5× > 2× in both windows, and p99
    // TTFT is 0.5 s over the 250 ms limit (pending for an hour). The histograms alone
    // would have fired neither.
    let alert = |name: &str| {
        samples.iter().find(|(n, l, _)| n == "llm_slo_alert" && l.get("alertname").map(String::as_str) == Some(name))
    };
    let burn = alert("LLMErrorBudgetBurnFast").unwrap_or_else(|| panic!("burn alert not firing:\n{body}"));
    assert_eq!(burn.1["state"], "firing");
    assert_eq!(alert("LLMTTFTAboveSLO").map(|a| a.1["state"].clone()), Some("pending".to_string()));
    let (_, alerts) = get(&format!("{base}/api/v1/alerts")).await;
    let alerts: serde_json::Value = serde_json::from_str(&alerts).unwrap();
    let burn = alerts["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["labels"]["alertname"] == "LLMErrorBudgetBurnFast")
        .expect("burn alert in the API")
        .clone();
    let description = burn["annotations"]["description"].as_str().unwrap();
    assert!(description.contains("from tap requests"), "{description}");
    let v: f64 = burn["value"].as_str().unwrap().parse().unwrap();
    assert!((v - 5.0).abs() < 1e-9, "{burn}");
    assert!(common::promtool_check_metrics(&body) || tools::require("promtool").is_none());

    d.shutdown().await;
}
