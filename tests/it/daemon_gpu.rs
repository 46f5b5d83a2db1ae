//! The daemon with GPU telemetry from a fake `libnvidia-ml.so.1` (compiled from C by the
//! test, loaded through nvml-wrapper's real loading path): /metrics carries the fake's GPU
//! readings for the configured device only, and MFU and cost follow from the exported
//! token rates by the formulas of docs/gpu.md.

use crate::common;
use crate::fake_nvml;
use crate::support::PATIENCE;

use std::sync::Arc;
use std::time::{Duration, Instant};

use goodput::config;
use goodput::daemon::{self, clock::SystemClock};

const H100: &str = "GPU-11111111-2222-3333-4444-555555555555";

fn one(
    samples: &[(String, std::collections::HashMap<String, String>, f64)],
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let hits: Vec<f64> = samples
        .iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)))
        .map(|s| s.2)
        .collect();
    assert!(hits.len() <= 1, "{name} {labels:?}: {hits:?}");
    hits.first().copied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gpu_families_mfu_and_cost_on_metrics() {
    let Some(fake) = fake_nvml::build(&[]) else { return };
    let engine = common::Fixture::counting(|n| common::vllm_body(n, 1.7e9)).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nscrape: {{interval: 1s, timeout: 900ms}}\nwindows: [1m]\n\
         targets: [{{name: llama, url: 'http://{}/metrics', engine: vllm}}]\n\
         gpu:\n  nvml: {{library: '{}', devices: ['{H100}'], interval: 1s}}\n  \
         models: [{{match: m, active_params: 8.0e9}}]\n\
         cost: {{gpu_hour_dollars: 3.6}}\n",
        engine.addr,
        fake.library.display()
    );
    let cfg = config::from_str(&yaml, "gpu.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let url = format!("http://{}/metrics", d.local_addr());
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let deadline = Instant::now() + PATIENCE;
    let samples = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let body = client.get(&url).send().await.unwrap().text().await.unwrap();
        let s = common::metrics_samples(&body);
        let ready = one(&s, "llm_slo_mfu_ratio", &[("window", "1m")]).is_some()
            && one(&s, "llm_slo_gpu_utilization_ratio", &[("uuid", H100)]).is_some();
        if ready || Instant::now() > deadline {
            break s;
        }
    };
    d.shutdown().await;

    // The fake's H100 readings; the A10G is not in `devices`, so it is not exported.
    assert_eq!(one(&samples, "llm_slo_gpu_utilization_ratio", &[("uuid", H100)]), Some(0.87));
    assert_eq!(one(&samples, "llm_slo_gpu_temperature_celsius", &[("uuid", H100)]), Some(63.0));
    assert!(!samples.iter().any(|(n, l, _)| n.starts_with("llm_slo_gpu_") && l.get("uuid").is_some_and(|u| u != H100)));

    // MFU = 2 × active params × (input + output tokens/s) / (H100 SXM dense BF16 peak × 1 GPU).
    let w = [("target", "llama"), ("model", "m"), ("window", "1m")];
    let tokens = |dir| one(&samples, "llm_slo_tokens_per_second", &[w[0], w[1], w[2], ("direction", dir)]).unwrap();
    let (input, output) = (tokens("input"), tokens("output"));
    let mfu = one(&samples, "llm_slo_mfu_ratio", &[w[0], w[1], w[2], ("source", "params")]).expect("MFU");
    let want = 2.0 * 8.0e9 * (input + output) / 989e12;
    assert!((mfu - want).abs() <= 1e-9 * want, "MFU {mfu} != {want}");
    // $/M output tokens = $3.6/h × 1 GPU / 3600 s / output tokens/s × 1e6.
    let cost =
        one(&samples, "llm_slo_cost_dollars_per_million_tokens", &[w[0], w[1], w[2], ("kind", "output")]).unwrap();
    let want = 3.6 / 3600.0 / output * 1e6;
    assert!((cost - want).abs() <= 1e-9 * want, "cost {cost} != {want}");
}
