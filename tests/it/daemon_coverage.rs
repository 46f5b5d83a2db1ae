//! A fresh daemon shows no burn-rate alert until its windows are covered, and says so
//! (docs/alerts.md#after-a-restart). The real daemon scrapes a vLLM-like engine that burns its error
//! budget from the first scrape, under a clock that runs 600× faster than the wall (one
//! virtual minute per 100 ms scrape), so that the 6h window fills in about half a minute;
//! and `goodput replay` over a recording of the same engine holds the same alerts.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::{Fixture, get, metrics_samples, vllm_body};
use goodput::daemon::{self, clock::Clock};
use goodput::report::Report;

const FAST: &str = "LLMErrorBudgetBurnFast";
const SLOW: &str = "LLMErrorBudgetBurnSlow";
const SPEED: f64 = 600.0;

/// Half of the requests have TTFT above 100 ms: burn rate 50 from the first scrape on.
fn yaml(target: &str, extra: &str) -> String {
    format!(
        "listen: 127.0.0.1:0
evaluation_interval: 100ms
scrape: {{interval: 100ms, timeout: 100ms}}
windows: [5m]
slos: [{{name: chat, ttft: 100ms, objective: 0.99}}]
targets: [{{name: llama, url: '{target}', engine: vllm}}]
{extra}"
    )
}

fn coverage(r: &Report, window: &str) -> f64 {
    r.targets[0].models[0].windows.iter().find(|w| w.window.label() == window).map_or(0.0, |w| w.coverage)
}

/// The named families are on /metrics, and the whole body passes `promtool check metrics`.
fn lint_clean(body: &str, families: &[&str]) {
    for f in families {
        assert!(body.contains(&format!("# TYPE {f} ")), "no {f} on /metrics:\n{body}");
    }
    common::promtool_check_metrics(body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_daemon_waits_for_coverage_and_says_so() {
    goodput::scrape::install_crypto_provider();
    let clock = Arc::new(common::FastClock::start(1_700_000_000_000, SPEED));
    // The virtual instant of the engine's first scrape: coverage counts from there.
    let first_seen = Arc::new(AtomicI64::new(0));
    let (c, f) = (clock.clone(), first_seen.clone());
    let engine = Fixture::counting(move |n| {
        if n == 1 {
            f.store(c.now_ms(), Ordering::SeqCst);
        }
        vllm_body(n, 1_699_999_000.0)
    })
    .await;
    let cfg = goodput::config::from_str(&yaml(&format!("http://{}/metrics", engine.addr), ""), "quick.yaml")
        .expect("valid config")
        .config;
    let d = daemon::start(cfg, clock.clone()).await.expect("daemon starts");
    let base = format!("http://{}", d.local_addr());

    let deadline = Instant::now() + Duration::from_secs(120);
    let mut said_so = false;
    let mut checked = 0;
    let (mut fast_at, mut slow_at) = (None, None);
    while Instant::now() < deadline && slow_at.is_none() {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let r = d.report();
        // A scrape that timed out on a busy machine marks the target down for a tick: only
        // LLMTargetDown judges it then.
        if r.targets.first().is_none_or(|t| t.models.is_empty() || !t.health.up) {
            continue;
        }
        let first = first_seen.load(Ordering::SeqCst);
        // Coverage ramps with the time since the first scrape (± a scrape's spacing and
        // scheduling slack; a scrape is a virtual minute).
        for (w, secs) in [("1h", 3600.0), ("6h", 21600.0)] {
            let want = ((r.t_ms - first) as f64 / 1000.0 / secs).min(1.0);
            assert!((coverage(&r, w) - want).abs() <= 150.0 / secs, "{w}: {} vs {want}", coverage(&r, w));
        }
        // No burn alert, not even pending, on a window covered below 90%.
        for (name, long) in [(FAST, "1h"), (SLOW, "6h")] {
            let active = r.alerts.iter().any(|a| a.labels["alertname"] == name);
            let ready: Vec<bool> = r.alert_readiness.iter().filter(|x| x.alertname == name).map(|x| x.ready).collect();
            assert_eq!(ready.len(), 2, "{name}: both windows are listed");
            if active {
                assert!(
                    coverage(&r, long) >= 0.9 && ready.iter().all(|x| *x),
                    "{name} active at {long} coverage {}",
                    coverage(&r, long)
                );
            }
        }
        checked += 1;
        if fast_at.is_none() && r.alerts.iter().any(|a| a.labels["alertname"] == FAST && a.state == "firing") {
            fast_at = Some(coverage(&r, "1h"));
        }
        if r.alerts.iter().any(|a| a.labels["alertname"] == SLOW) {
            slow_at = Some(coverage(&r, "6h"));
        }
        if !said_so && coverage(&r, "6h") < 0.5 {
            // It says so: /api/v1/alerts lists what waits, /metrics has the gauges.
            let (status, body) = get(&format!("{base}/api/v1/alerts")).await;
            assert_eq!(status, 200);
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let alerts = v["data"]["alerts"].as_array().unwrap();
            assert!(alerts.iter().all(|a| a["labels"]["alertname"] != SLOW), "{body}");
            let waiting = v["data"]["waiting_for_coverage"].as_array().unwrap();
            let slow = waiting.iter().find(|w| w["alertname"] == SLOW && w["window"] == "6h").expect(&body);
            assert!(slow["coverage"].as_f64().unwrap() < 0.9 && slow["ready_in_seconds"].as_f64().unwrap() > 0.0);
            assert_eq!((slow["min_coverage"].as_f64(), slow["target"].as_str()), (Some(0.9), Some("llama")));
            let (_, metrics) = get(&format!("{base}/metrics")).await;
            let by_name: HashMap<(String, String, String), f64> = metrics_samples(&metrics)
                .into_iter()
                .filter(|s| s.0 == "llm_slo_window_coverage_ratio" || s.0 == "llm_slo_alert_rule_ready")
                .map(|(n, l, v)| ((n, l.get("alertname").cloned().unwrap_or_default(), l["window"].clone()), v))
                .collect();
            let cov6h = by_name[&("llm_slo_window_coverage_ratio".into(), String::new(), "6h".into())];
            assert!(cov6h > 0.0 && cov6h < 0.5, "{cov6h}");
            assert_eq!(by_name[&("llm_slo_alert_rule_ready".into(), SLOW.into(), "6h".into())], 0.0);
            lint_clean(&metrics, &["llm_slo_window_coverage_ratio", "llm_slo_alert_rule_ready"]);
            said_so = true;
        }
    }
    assert!(said_so, "never saw the 6h window under half covered");
    // Reached the guard, then fired: the fast rule pages once its hour is 90% covered (and
    // `for` has passed); the slow one is at least pending once 6h are.
    let (fast, slow) = (
        fast_at.expect("LLMErrorBudgetBurnFast never fired"),
        slow_at.expect("LLMErrorBudgetBurnSlow never became active"),
    );
    assert!(fast >= 0.9 && slow >= 0.9, "{fast} {slow}");
    assert!(checked > 50, "only {checked} reports checked");
    let (_, body) = get(&format!("{base}/api/v1/alerts")).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["data"]["waiting_for_coverage"].as_array().unwrap().is_empty(), "nothing waits any more: {body}");
    tokio::time::timeout(Duration::from_secs(10), d.shutdown()).await.expect("daemon stops");
}

#[test]
fn goodput_replay_holds_the_same_alerts() {
    // 70 minutes of scrapes every 15 s, from a whole minute.
    const T0: i64 = 1_700_000_040_000;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec").join("llama");
    std::fs::create_dir_all(&rec).unwrap();
    for k in 0..=70 * 4 {
        std::fs::write(rec.join(format!("{}.prom", T0 + k * 15_000)), vllm_body(k as u64 + 1, 1_699_999_000.0))
            .unwrap();
    }
    let config = dir.path().join("goodput.yml");
    std::fs::write(&config, yaml("http://127.0.0.1:8000/metrics", "")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["replay", "--step", "60s", "--config"])
        .arg(&config)
        .arg("--recording")
        .arg(dir.path().join("rec"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = 0;
    for (j, line) in String::from_utf8(out.stdout).unwrap().lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["t"].as_i64(), Some(T0 / 1000 + 60 * j as i64));
        let samples = v["samples"].as_array().unwrap();
        let find = |name: &str, labels: &[(&str, &str)]| {
            samples.iter().find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        };
        let cov = find("llm_slo_window_coverage_ratio", &[("window", "1h")]).unwrap()["value"].as_f64().unwrap();
        let want = if j == 0 { 0.0 } else { ((60 * j + 15) as f64 / 3600.0).min(1.0) };
        assert!((cov - want).abs() < 1e-12, "minute {j}: {cov} vs {want}");
        let fast = find("llm_slo_alert", &[("alertname", FAST)]).map(|s| s["labels"]["state"].as_str().unwrap());
        // Same instants as the daemon's engine in tests/it/alert_coverage.rs: pending at 54m,
        // firing from 56m; never before.
        let expected = match j {
            0..54 => None,
            54 | 55 => Some("pending"),
            _ => Some("firing"),
        };
        assert_eq!(fast, expected, "minute {j}");
        assert!(find("llm_slo_alert", &[("alertname", SLOW)]).is_none(), "minute {j}");
        let ready = find("llm_slo_alert_rule_ready", &[("alertname", SLOW), ("window", "6h")]).unwrap();
        assert_eq!(ready["value"], 0.0);
        lines += 1;
    }
    assert_eq!(lines, 71);
}
