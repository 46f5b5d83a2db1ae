//! /metrics passes the ecosystem's own linter: `promtool check metrics` exits 0 with no
//! finding, on `goodput demo` as a user starts it and on a daemon whose /metrics also
//! carries GPU families (a fake NVML), alerts (pending and firing) and alert delivery.
//! A `quantile` label on a gauge or an `le` outside a histogram, a counter without
//! `_total` or a missing HELP would each fail it.

use crate::common;
use crate::fake_nvml;
use crate::net;
use crate::support::PATIENCE;
use crate::tools;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goodput::config;
use goodput::daemon::{self, clock::SystemClock};

const H100: &str = "GPU-11111111-2222-3333-4444-555555555555";

fn has(body: &str, prefix: &str) -> bool {
    body.lines().any(|l| l.starts_with(prefix))
}

#[test]
fn demo_metrics_pass_promtool_check_metrics() {
    if tools::require("promtool").is_none() {
        return;
    }
    let port = net::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["demo", "--listen", &format!("127.0.0.1:{port}"), "--summary-every", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The families that once failed the lint: latency quantiles, their brackets, the
    // prompt-length mix; the last-scrape series without a window; and those with a label of
    // their own (the generation-length mix, finish reasons, the config's limits).
    let wanted = [
        "llm_slo_ttft_seconds{",
        "llm_slo_quantile_bracket_seconds{",
        "llm_slo_prompt_length_cumulative_ratio{",
        "llm_slo_generation_length_cumulative_ratio{",
        "llm_slo_latency_mean_seconds{",
        "llm_slo_finished_requests_per_second{",
        "llm_slo_threshold_seconds{",
        "llm_slo_kv_cache_band_limit_ratio{",
        "llm_slo_kv_cache_band{",
        "llm_slo_scrape_errors_total{",
        "llm_slo_saturated{",
    ];
    let deadline = Instant::now() + PATIENCE;
    let mut body = String::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(b) = net::get_body(port, "/metrics") {
            body = b;
            if wanted.iter().all(|w| has(&body, w)) {
                break;
            }
        }
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = (0..150).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        child.try_wait().unwrap().is_some()
    });
    if !stopped {
        let _ = child.kill();
        let _ = child.wait();
    }
    for w in wanted {
        assert!(has(&body, w), "the demo's /metrics has no {w} after 60 s:\n{body}");
    }
    assert!(body.contains("q=\"0.99\"") && body.contains("prompt_tokens_le=\""), "{body}");
    assert!(common::promtool_check_metrics(&body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_metrics_with_gpu_alerts_and_delivery_pass_promtool_check_metrics() {
    if tools::require("promtool").is_none() {
        return;
    }
    // GPU families need the fake NVML (a C compiler and nvml.h); without it the rest of
    // /metrics is still checked.
    let fake = fake_nvml::build(&[]);
    let engine = common::Fixture::counting(|n| common::vllm_body(n, 1.7e9)).await;
    let am = common::Fixture::refused_addr().await;
    let gpu = match &fake {
        Some(f) => format!(
            "gpu:\n  nvml: {{library: '{}', devices: ['{H100}'], interval: 1s}}\n  \
             models: [{{match: m, active_params: 8.0e9}}]\n\
             cost: {{gpu_hour_dollars: 3.6}}\n",
            f.library.display()
        ),
        None => String::new(),
    };
    // One target, so the GPUs are its own and MFU and cost are derived. KV usage is a
    // constant 0.8: above a 0.5 threshold the saturation alert fires at once; p99 TTFT
    // (0.247 s) over the SLO's 100 ms makes the TTFT alert pending for an hour. The
    // Alertmanager refuses connections, so delivery has something to count. State snapshots
    // every second bring their families.
    let state = tempfile::tempdir().unwrap();
    let yaml = format!(
        "listen: 127.0.0.1:0\nscrape: {{interval: 1s, timeout: 900ms}}\nwindows: [30s, 1m]\n\
         targets:\n  - {{name: llama, url: 'http://{}/metrics', engine: vllm}}\n\
         slos: [{{name: fast, ttft: 100ms, objective: 0.9}}]\n\
         alerting:\n  alertmanager: {{url: 'http://{am}'}}\n  timeout: 200ms\n  min_window_coverage: 0\n  rules:\n    \
         LLMKVCacheSaturated: {{threshold: 0.5, for: 0s}}\n    \
         LLMTTFTAboveSLO: {{for: 1h}}\n{gpu}\
         state_dir: '{}'\nstate_snapshot_interval: 1s\n",
        engine.addr,
        state.path().display()
    );
    let cfg = config::from_str(&yaml, "lint.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let url = format!("http://{}/metrics", d.local_addr());
    let mut wanted = vec![
        "llm_slo_ttft_seconds{",
        "llm_slo_quantile_bracket_seconds{",
        "llm_slo_attainment_ratio{",
        "llm_slo_kv_cache_band{",
        "llm_slo_alert{alertname=\"LLMKVCacheSaturated\"",
        "llm_slo_alert{alertname=\"LLMTTFTAboveSLO\"",
        "llm_slo_scrape_errors_total{",
        "llm_slo_state_restore_total{",
        "llm_slo_state_snapshot_bytes ",
    ];
    if fake.is_some() {
        wanted.extend(["llm_slo_gpu_utilization_ratio{", "llm_slo_gpu_throttle_reasons{", "llm_slo_mfu_ratio{"]);
    }
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, body) = common::get(&url).await;
        if wanted.iter().all(|w| has(&body, w)) || Instant::now() > deadline {
            break body;
        }
    };
    d.shutdown().await;
    for w in &wanted {
        assert!(has(&body, w), "/metrics has no {w} after 30 s:\n{body}");
    }
    assert!(body.contains("state=\"pending\"") && body.contains("state=\"firing\""), "{body}");
    assert!(common::promtool_check_metrics(&body));
}
