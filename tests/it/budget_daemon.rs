//! The real daemon keeps an SLO's error budget over its period from an engine's histograms
//! (docs/metrics.md#error-budget-over-a-period): under a clock 600× faster than the wall
//! (one virtual minute per 100 ms scrape), a 1h period fills in six seconds and then
//! slides, the engine restarts halfway without disturbing the count, and /metrics carries
//! the budget families, clean under `promtool check metrics`.

use crate::common;
use crate::support::PATIENCE;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::daemon;

const SPEED: f64 = 600.0;

/// Half of [`vllm_body`]'s requests have TTFT at or under 100 ms (a bucket bound): joint
/// attainment exactly 0.5, so a 99% objective has spent 50 budgets.
const CONFIG: &str = "listen: 127.0.0.1:0
evaluation_interval: 100ms
scrape: {interval: 100ms, timeout: 100ms}
windows: [5m]
slos: [{name: chat, ttft: 100ms, objective: 0.99, period: 1h}]
targets: [{name: llama, url: 'URL', engine: vllm}]
";

fn budget(body: &str, family: &str, bound: Option<&str>) -> Option<f64> {
    metrics_samples(body).into_iter().find_map(|(name, l, v)| {
        let ok = name == family
            && l.get("source").map(String::as_str) == Some("metrics")
            && l.get("slo").map(String::as_str) == Some("chat")
            && l.get("period").map(String::as_str) == Some("1h")
            && l.get("bound").map(String::as_str) == bound;
        ok.then_some(v)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_fills_its_period_then_slides_across_an_engine_restart() {
    goodput::scrape::install_crypto_provider();
    let clock = Arc::new(common::FastClock::start(1_700_000_100_000, SPEED));
    // The engine restarts after 50 scrapes: its counters start again from zero.
    let engine =
        Fixture::counting(|n| if n <= 50 { vllm_body(n, 1_699_999_000.0) } else { vllm_body(n - 50, 1_700_000_000.0) })
            .await;
    let yaml = CONFIG.replace("URL", &format!("http://{}/metrics", engine.addr));
    let cfg = goodput::config::from_str(&yaml, "budget.yaml").expect("valid config").config;
    let d = daemon::start(cfg, clock.clone()).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());

    let mut filling = Vec::new();
    let mut full = Vec::new();
    let mut body = String::new();
    let deadline = Instant::now() + PATIENCE;
    // Two and a half virtual hours: the period fills, then slides for more than its length.
    // Counted in scrapes, not loop turns: a loaded machine scrapes late, not less.
    while Instant::now() < deadline && (full.len() < 40 || engine.served() <= 150) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        body = get(&format!("{base}/metrics")).await.1;
        let (Some(coverage), Some(requests)) = (
            budget(&body, "llm_slo_error_budget_period_coverage_ratio", None),
            budget(&body, "llm_slo_error_budget_period_requests", None),
        ) else {
            continue;
        };
        for bound in ["lower", "estimate", "upper"] {
            let consumed = budget(&body, "llm_slo_error_budget_consumed_ratio", Some(bound)).expect("consumed");
            let remaining = budget(&body, "llm_slo_error_budget_remaining_ratio", Some(bound)).expect("remaining");
            assert!(
                (consumed - 50.0).abs() < 1e-9 && (remaining + 49.0).abs() < 1e-9,
                "{bound}: {consumed} {remaining}"
            );
        }
        if coverage < 1.0 { filling.push(requests) } else { full.push(requests) }
    }
    d.shutdown().await;
    assert!(filling.len() >= 5 && full.len() >= 40, "filling {filling:?}, full {full:?} (a loaded machine?)");
    // While the period fills, the count grows by ten requests a virtual minute.
    assert!(filling.windows(2).all(|w| w[0] <= w[1]) && filling.last() > filling.first(), "{filling:?}");
    // Once full, it holds the last hour (11 to 12 five-minute buckets of 10 requests a
    // minute), not everything since the start, which is more than twice that by the end.
    for r in &full {
        assert!((540.0..=610.0).contains(r), "requests in a full 1h period: {r} ({full:?})");
    }
    assert!(engine.served() > 150, "the engine was scraped {} times", engine.served());
    assert!(body.contains("# TYPE llm_slo_error_budget_remaining_ratio gauge"), "{body}");
    common::promtool_check_metrics(&body);
}
