//! The config's limits reach /metrics unchanged: each SLO's objective and clause
//! thresholds, and the KV-cache band limits, as the gauges dashboards draw their SLO and
//! band lines from (docs/metrics.md#slo-and-kv-band-limits). The expected values are read
//! back from the parsed config, so a limit that is dropped, renamed or rescaled on the way
//! fails here; the scope of an SLO shows as the targets carrying its `llm_slo_evaluable`.

use crate::common;
use crate::support::PATIENCE;
use crate::tools;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};

type Sample = (String, HashMap<String, String>, f64);

fn values<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slo_thresholds_objectives_and_kv_band_limits_equal_the_config() {
    let engine = Fixture::counting(|n| vllm_body(n, 1.7e9)).await;
    let down = Fixture::refused_addr().await;
    // Values away from every default, and two SLOs with different scopes.
    let yaml = format!(
        "listen: 127.0.0.1:0\nscrape: {{interval: 1s, timeout: 900ms}}\nwindows: [30s]\n\
         targets:\n  - {{name: llama, url: 'http://{}/metrics', engine: vllm}}\n  \
         - {{name: other, url: 'http://{down}/metrics', engine: vllm}}\n\
         slos:\n  - {{name: chat, ttft: 250ms, tpot: 40ms, objective: 0.995, targets: [llama]}}\n  \
         - {{name: batch, e2e: 45s, objective: 0.9, targets: [other]}}\n\
         kv_cache: {{underloaded: 0.55, target_low: 0.65, target_high: 0.8, critical: 0.93}}\n",
        engine.addr
    );
    let cfg = config::from_str(&yaml, "limits.yaml").expect("valid config").config;
    let (slos, kv) = (cfg.slos.clone(), cfg.kv_cache);
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let url = format!("http://{}/metrics", d.local_addr());
    let deadline = Instant::now() + PATIENCE;
    let (mut body, mut samples) = (String::new(), Vec::new());
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        body = get(&url).await.1;
        samples = metrics_samples(&body);
        if !values(&samples, "llm_slo_objective_ratio", &[]).is_empty()
            && !values(&samples, "llm_slo_evaluable", &[("target", "llama")]).is_empty()
        {
            break;
        }
    }

    let mut clauses = 0;
    for slo in &slos {
        let objective = values(&samples, "llm_slo_objective_ratio", &[("slo", &slo.name)]);
        assert_eq!(objective.len(), 1, "{}: one objective, not one per target:\n{body}", slo.name);
        assert_eq!(objective[0].2, slo.objective.get(), "{}", slo.name);
        assert_eq!(objective[0].1.len(), 1, "only the slo label: {:?}", objective[0].1);
        for (clause, limit) in slo.clauses() {
            let got = values(&samples, "llm_slo_threshold_seconds", &[("slo", &slo.name), ("clause", clause.as_str())]);
            assert_eq!(got.len(), 1, "{} {clause:?}:\n{body}", slo.name);
            assert_eq!(got[0].2, limit.as_secs_f64(), "{} {clause:?}", slo.name);
            clauses += 1;
        }
    }
    assert_eq!(clauses, 3);
    assert_eq!(values(&samples, "llm_slo_threshold_seconds", &[]).len(), clauses, "no clause the config lacks");
    for (limit, want) in [
        ("underloaded", kv.underloaded),
        ("target_low", kv.target_low),
        ("target_high", kv.target_high),
        ("critical", kv.critical),
    ] {
        let got = values(&samples, "llm_slo_kv_cache_band_limit_ratio", &[("limit", limit)]);
        assert_eq!(got.len(), 1, "{limit}:\n{body}");
        assert_eq!(got[0].2, want, "{limit}");
    }
    // Scope: `chat` judges llama, `batch` only the other target (down, so it has nothing).
    assert!(!values(&samples, "llm_slo_evaluable", &[("target", "llama"), ("slo", "chat")]).is_empty(), "{body}");
    assert!(values(&samples, "llm_slo_evaluable", &[("slo", "batch")]).is_empty(), "{body}");
    for family in ["llm_slo_objective_ratio", "llm_slo_threshold_seconds", "llm_slo_kv_cache_band_limit_ratio"] {
        assert!(body.contains(&format!("# TYPE {family} gauge")), "{family}");
    }
    if tools::require("promtool").is_some() {
        assert!(common::promtool_check_metrics(&body), "promtool check metrics rejects /metrics");
    }
    d.shutdown().await;
}
