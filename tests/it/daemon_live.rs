//! The daemon against real HTTP servers on 127.0.0.1: two healthy vLLM-like engines (one
//! of which restarts, so its counters drop), and targets that hang past the timeout,
//! refuse connections, answer 503, return garbage, or stream a 100 MB body. The bad ones
//! must be down with the right reason while the healthy ones stay up and keep updating.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{PATIENCE, until_async};
use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};

const BUCKET_LIMIT: u64 = 100 * 1000 * 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_targets_go_down_with_reasons_and_healthy_ones_keep_updating() {
    goodput::scrape::install_crypto_provider();
    let healthy = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    // Restarts every 4 scrapes: counters fall back to a small value, start time changes.
    let restarting = Fixture::counting(|n| vllm_body(n % 4 + 1, 1_700_000_000.0 + (n / 4) as f64 * 100.0)).await;
    let hanging = Fixture::hanging(Duration::from_secs(60)).await;
    let garbage = Fixture::fixed(200, "this is {not an exposition\n").await;
    let unavailable = Fixture::fixed(503, "overloaded\n").await;
    let streamed = Arc::new(AtomicU64::new(0));
    let huge = Fixture::huge(BUCKET_LIMIT, streamed.clone()).await;
    let refused = Fixture::refused_addr().await;

    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 300ms
scrape: {{interval: 500ms, timeout: 400ms, body_limit: 1MiB}}
windows: [30s]
slos:
  - {{name: fast, ttft: 100ms, objective: 0.9}}
  - {{name: elsewhere, ttft: 100ms, objective: 0.9, targets: [garbage]}}
targets:
  - {{name: healthy, url: 'http://{}/metrics', engine: vllm}}
  - {{name: restarting, url: 'http://{}/metrics', engine: vllm}}
  - {{name: hanging, url: 'http://{}/metrics'}}
  - {{name: garbage, url: 'http://{}/metrics'}}
  - {{name: unavailable, url: 'http://{}/metrics'}}
  - {{name: huge, url: 'http://{}/metrics'}}
  - {{name: refused, url: 'http://{}/metrics'}}
",
        healthy.addr, restarting.addr, hanging.addr, garbage.addr, unavailable.addr, huge.addr, refused
    );
    let cfg = config::from_str(&yaml, "live.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());

    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    // Ready only after the first evaluation (one evaluation interval after start).
    until_async(PATIENCE, "/readyz turning 200", async || {
        (get(&format!("{base}/readyz")).await.0 == 200).then_some(())
    })
    .await;

    // Let every target be scraped several times (restarting one restarts at least once), and
    // every bad one fail at least twice.
    let bad = [
        ("hanging", "timeout"),
        ("garbage", "parse_error"),
        ("unavailable", "http_status"),
        ("huge", "body_too_large"),
        ("refused", "connect"),
    ];
    let first = until_async(PATIENCE, "several scrapes of every target", async || {
        let r = report(&base).await;
        let failed_twice =
            bad.iter().all(|(name, reason)| target(&r, name)["health"]["errors_total"][reason].as_u64() >= Some(2));
        (failed_twice && healthy.served() >= 5 && restarting.served() >= 5).then_some(r)
    })
    .await;
    let served_then = healthy.served();
    let second = until_async(PATIENCE, "two more scrapes of the healthy target and a newer report", async || {
        let r = report(&base).await;
        (healthy.served() >= served_then + 2 && r["t_ms"].as_i64() > first["t_ms"].as_i64()).then_some(r)
    })
    .await;

    // The healthy engines were scraped repeatedly and are still being scraped.
    assert!(served_then >= 5, "healthy target scraped only {served_then} times");
    assert!(healthy.served() >= served_then + 2, "scraping of the healthy target stalled");
    assert!(restarting.served() >= 5, "restarting target scraped only {} times", restarting.served());
    assert!(second["t_ms"].as_i64() > first["t_ms"].as_i64(), "report not refreshed");

    for (name, reason) in bad {
        let h = &target(&second, name)["health"];
        assert_eq!(h["up"], false, "{name}: {h}");
        let errors = h["errors_total"].as_object().expect("errors_total map");
        assert_eq!(errors.keys().collect::<Vec<_>>(), vec![reason], "{name}: {h}");
        assert!(errors[reason].as_u64().unwrap() >= 2, "{name}: {h}");
        assert!(h["last_error"].as_str().unwrap().contains(reason), "{name}: {h}");
    }
    // The hanging scrape was cut at the 400 ms timeout, not waited out.
    let hang_took = target(&second, "hanging")["health"]["last_scrape_duration_seconds"].as_f64().unwrap();
    assert!((0.35..2.0).contains(&hang_took), "hanging scrape took {hang_took}s");
    // The 100 MB body was dropped soon after the 1 MiB limit, not read to the end: at most
    // the limit plus what socket buffers hold, per scrape.
    let scrapes = target(&second, "huge")["health"]["errors_total"]["body_too_large"].as_u64().unwrap();
    let sent = streamed.load(Ordering::Relaxed);
    assert!(sent < (scrapes + 1) * 24 * 1024 * 1024, "server streamed {sent} bytes for {scrapes} scrapes");

    for name in ["healthy", "restarting"] {
        let t = target(&second, name);
        assert_eq!(t["health"]["up"], true, "{name}: {t}");
        assert!(t["health"]["errors_total"].as_object().unwrap().is_empty(), "{name}: {t}");
        assert_eq!(t["engine"], "vllm", "{name}: {t}");
    }

    check_metrics(&base).await;

    // One target's view: the same shape, only its entries; an unknown name is a 404.
    let (status, body) = get(&format!("{base}/api/v1/report?target=garbage")).await;
    assert_eq!(status, 200);
    let one: serde_json::Value = serde_json::from_str(&body).expect("report is JSON");
    let names: Vec<_> = one["targets"].as_array().unwrap().iter().map(|t| t["target"].clone()).collect();
    assert_eq!(names, vec!["garbage"], "{one}");
    assert_eq!(target(&one, "garbage")["health"]["up"], false, "{one}");
    assert!(one["t_ms"].as_i64().is_some_and(|t| t > 0) && one["alert_readiness"].is_array(), "{one}");
    let (status, body) = get(&format!("{base}/api/v1/report?target=nosuch")).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("nosuch"), "{body}");

    // Shutdown completes promptly even with a scrape hanging in flight.
    tokio::time::timeout(Duration::from_secs(5), d.shutdown()).await.expect("graceful shutdown within 5 s");
    assert!(tokio::net::TcpStream::connect(&base[7..]).await.is_err(), "server still accepting after shutdown");
}

async fn report(base: &str) -> serde_json::Value {
    let (status, body) = get(&format!("{base}/api/v1/report")).await;
    assert_eq!(status, 200);
    serde_json::from_str(&body).expect("report is JSON")
}

fn target<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == name)
        .unwrap_or_else(|| panic!("no target {name} in {report}"))
}

/// /metrics carries the same health, plus the process metrics.
async fn check_metrics(base: &str) {
    let (status, body) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    let samples = metrics_samples(&body);
    let value = |name: &str, labels: &[(&str, &str)]| common::sample_value(&samples, name, labels);
    assert!(value("process_resident_memory_bytes", &[]).unwrap() > 1e6);
    assert!(value("process_start_time_seconds", &[]).unwrap() > 1.6e9);
    assert!(value("process_cpu_seconds_total", &[]).is_some());
    for name in ["healthy", "restarting"] {
        assert_eq!(value("llm_slo_target_up", &[("target", name)]), Some(1.0), "{name}\n{body}");
        assert!(value("llm_slo_scrape_duration_seconds", &[("target", name)]).is_some(), "{name}");
        // The error counter is there at 0 before any error, for every reason.
        for reason in goodput::report::SCRAPE_ERROR_REASONS {
            let n = value("llm_slo_scrape_errors_total", &[("target", name), ("reason", reason)]);
            assert_eq!(n, Some(0.0), "{name}/{reason}");
        }
    }
    for (name, reason) in [
        ("hanging", "timeout"),
        ("garbage", "parse_error"),
        ("unavailable", "http_status"),
        ("huge", "body_too_large"),
        ("refused", "connect"),
    ] {
        assert_eq!(value("llm_slo_target_up", &[("target", name)]), Some(0.0), "{name}\n{body}");
        let n = value("llm_slo_scrape_errors_total", &[("target", name), ("reason", reason)]);
        assert!(n.is_some_and(|n| n >= 2.0), "{name}/{reason}: {n:?}\n{body}");
    }
    for name in ["healthy", "restarting"] {
        check_engine_values(name, &value);
    }
    common::promtool_check_metrics(&body);
}

/// The values `vllm_body` implies, computed by hand (see its doc): every counter grows in
/// fixed proportion, also across the restarts, so each share holds exactly.
fn check_engine_values(name: &str, value: &impl Fn(&str, &[(&str, &str)]) -> Option<f64>) {
    let base = [("target", name), ("model", "m"), ("window", "30s")];
    let at = |extra: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    let close = |got: Option<f64>, want: f64, what: &str| {
        let got = got.unwrap_or_else(|| panic!("{name}: {what} missing"));
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1e-12), "{name}: {what} = {got}, want {want}");
    };
    // TTFT: half the requests in (0.05, 0.1], half in (0.1, 0.25].
    // q=0.5 → rank 5 of 10 ends bucket (0.05, 0.1]: 0.1. q=0.9 → 0.1 + 0.15·(9−5)/5.
    close(value("llm_slo_ttft_seconds", &at(&[("q", "0.5")])), 0.1, "ttft p50");
    close(value("llm_slo_ttft_seconds", &at(&[("q", "0.9")])), 0.1 + 0.15 * 0.8, "ttft p90");
    close(value("llm_slo_ttft_seconds", &at(&[("q", "0.99")])), 0.1 + 0.15 * 0.98, "ttft p99");
    let bracket =
        |side| value("llm_slo_quantile_bracket_seconds", &at(&[("metric", "ttft"), ("q", "0.9"), ("side", side)]));
    close(bracket("lower"), 0.1, "ttft p90 lower bracket");
    close(bracket("upper"), 0.25, "ttft p90 upper bracket");
    // E2E: every request in (1, 2.5]; q=0.5 → 1 + 1.5·0.5.
    close(value("llm_slo_e2e_seconds", &at(&[("q", "0.5")])), 1.75, "e2e p50");
    // Throughput ratios: 1000 prompt and 500 generated tokens per 10 requests. A restart
    // never makes a rate negative.
    let input = value("llm_slo_tokens_per_second", &at(&[("direction", "input")])).expect("input tokens/s");
    let output = value("llm_slo_tokens_per_second", &at(&[("direction", "output")])).expect("output tokens/s");
    let requests = value("llm_slo_requests_per_second", &at(&[])).expect("requests/s");
    assert!(output > 0.0 && requests > 0.0, "{name}: output {output}, requests {requests}");
    close(Some(input / output), 2.0, "input/output token ratio");
    close(Some(output / requests), 50.0, "output tokens per request");
    // KV usage is a constant 0.8: inside the default target band (0.75–0.85) all the time.
    for stat in ["mean", "max"] {
        close(value("llm_slo_kv_cache_utilization_ratio", &at(&[("stat", stat)])), 0.8, stat);
    }
    // The last scrape's usage and band are exported once, without a window.
    let once = [("target", name), ("model", "m"), ("stat", "last")];
    close(value("llm_slo_kv_cache_utilization_ratio", &once), 0.8, "last");
    assert_eq!(value("llm_slo_kv_cache_utilization_ratio", &at(&[("stat", "last")])), None, "{name}: last per window");
    assert_eq!(value("llm_slo_kv_cache_band", &[("target", name), ("band", "target")]), Some(1.0), "{name}");
    assert_eq!(value("llm_slo_kv_cache_band", &at(&[("band", "target")])), None, "{name}: band per window");
    close(value("llm_slo_kv_cache_band_time_ratio", &at(&[("band", "target")])), 1.0, "target band share");
    assert_eq!(value("llm_slo_kv_cache_band_time_ratio", &at(&[("band", "high")])), Some(0.0), "{name}");
    // SLO `fast` (TTFT ≤ 100 ms, a bucket boundary, so exact): half the requests meet it.
    // Burn rate (1 − 0.5) / (1 − 0.9).
    for bound in ["lower", "estimate", "upper"] {
        let got = value("llm_slo_attainment_ratio", &at(&[("slo", "fast"), ("clause", "ttft"), ("bound", bound)]));
        close(got, 0.5, &format!("attainment ttft {bound}"));
    }
    // Joint counts the N requests finished in the window; TTFT counted those whose first
    // token came in it. Up to the 3 requests running at the window's first scrape may be
    // in one population and not the other, so the joint bracket is 0.5 ± 3/N around the
    // unchanged estimate (no request failed).
    let n =
        value("llm_slo_window_requests", &at(&[("slo", "fast"), ("outcome", "finished")])).expect("window requests");
    let joint =
        |bound| value("llm_slo_attainment_ratio", &at(&[("slo", "fast"), ("clause", "joint"), ("bound", bound)]));
    close(joint("estimate"), 0.5, "attainment joint estimate");
    close(joint("lower"), 0.5 - 3.0 / n, "attainment joint lower");
    close(joint("upper"), 0.5 + 3.0 / n, "attainment joint upper");
    close(value("llm_slo_error_budget_burn_rate", &at(&[("slo", "fast"), ("bound", "estimate")])), 5.0, "burn rate");
    // An SLO scoped to another target is not evaluated here.
    assert_eq!(value("llm_slo_attainment_ratio", &at(&[("slo", "elsewhere")])), None, "{name}");
}
