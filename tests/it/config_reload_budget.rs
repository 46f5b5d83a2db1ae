//! The error budget of an SLO changed by a reload follows one rule (docs/config.md#reload):
//! a new objective alone keeps every count and reads them against the new objective; a new
//! threshold restarts the period, empty. The real daemon, under a clock 600× faster than
//! the wall (one virtual minute per 100 ms scrape), so that a 1h period counts in seconds.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::support::PATIENCE;
use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::daemon;

fn config(url: &str, ttft: &str, objective: &str) -> goodput::config::Config {
    let yaml = format!(
        "listen: 127.0.0.1:0\nevaluation_interval: 100ms\nscrape: {{interval: 100ms, timeout: 100ms}}\nwindows: [5m]\n\
         slos: [{{name: chat, ttft: {ttft}, objective: {objective}, period: 1h}}]\n\
         targets: [{{name: llama, url: '{url}', engine: vllm}}]\n"
    );
    goodput::config::from_str(&yaml, "budget.yaml").expect("valid config").config
}

/// (requests counted, consumed estimate, coverage) of `chat`'s budget from histograms.
async fn budget(d: &daemon::Daemon) -> Option<(f64, f64, f64)> {
    let body = get(&format!("http://{}/metrics", d.local_addr())).await.1;
    let s = metrics_samples(&body);
    let at = |family: &str, bound: Option<&str>| {
        s.iter().find_map(|(name, l, v)| {
            let ok = name == family
                && l.get("source").map(String::as_str) == Some("metrics")
                && l.get("slo").map(String::as_str) == Some("chat")
                && l.get("bound").map(String::as_str) == bound;
            ok.then_some(*v)
        })
    };
    Some((
        at("llm_slo_error_budget_period_requests", None)?,
        at("llm_slo_error_budget_consumed_ratio", Some("estimate"))?,
        at("llm_slo_error_budget_period_coverage_ratio", None)?,
    ))
}

/// Polls the budget until `ok` holds, for up to [`PATIENCE`].
async fn until(d: &daemon::Daemon, what: &str, ok: impl Fn((f64, f64, f64)) -> bool) -> (f64, f64, f64) {
    let mut last = None;
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        last = budget(d).await;
        if let Some(b) = last
            && ok(b)
        {
            return b;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {PATIENCE:?} (last (requests, consumed, coverage): {last:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_objective_keeps_the_budget_counts_and_a_new_threshold_restarts_the_period() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let url = format!("http://{}/metrics", engine.addr);
    let clock = Arc::new(common::FastClock::start(1_700_000_100_000, 600.0));
    let d = daemon::start(config(&url, "100ms", "0.99"), clock).await.expect("daemon starts");

    // Half of vllm_body's TTFTs are at or under 100ms: against 0.99, 50 budgets spent.
    let (counted, consumed, _) = until(&d, "a budget counted", |(n, _, _)| n >= 100.0).await;
    assert!((consumed - 50.0).abs() < 1e-6, "consumed {consumed}");

    // The objective alone: every count kept, read against 0.9 (5 budgets).
    let r = d.reload(config(&url, "100ms", "0.9")).await.expect("a reload applies");
    assert!(r.notes.iter().all(|n| !n.contains("error budgets")), "{:?}", r.notes);
    let (kept, _, _) = until(&d, "consumed against 0.9", |(_, c, _)| (c - 5.0).abs() < 1e-6).await;
    assert!(kept >= counted, "the counts went from {counted} to {kept}");

    // A new threshold: the period restarts, empty; every TTFT is within 250ms.
    let r = d.reload(config(&url, "250ms", "0.9")).await.expect("a reload applies");
    assert!(r.notes.iter().any(|n| n.contains("error budgets: chat restarted")), "{:?}", r.notes);
    let (restarted, consumed, coverage) = until(&d, "a restarted period", |(n, _, _)| n > 0.0 && n < kept).await;
    assert!(consumed.abs() < 1e-9, "a restarted period holds the old misses: consumed {consumed}");
    assert!(coverage < 0.5, "coverage {coverage} after the restart, {restarted} requests");
    d.shutdown().await;
}
